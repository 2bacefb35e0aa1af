//! The tet cage around a region of a skinned mesh.

use super::SkinError;
use crate::sim::lattice::implicit_lattice;
use crate::sim::math::Vec3;
use crate::sim::mesh::{TetMesh, bounds, check_lattice};
use crate::sim::nearest::PointGrid;
use crate::sim::surface::{SignedDistance, TriangleSurface};

/// A lattice tet cage, in the mesh's own (bind) space, that strictly bounds the vertices marked
/// in `in_region`: `cells_across` cells along the longest side of their bounds, reaching
/// `depth_cells` cells from them into the flesh.
///
/// The cage is the lattice of [`TetMesh::try_enclosing`] (cells kept where `phi < 0` at their
/// centre, boundary vertices snapped to `phi = 0`) on
/// `phi(p) = max(dist(p, region vertices) - depth, s(p) dist(p, mesh) - pad)`: the mesh's solid
/// offset outwards by half a cell diagonal `pad` (only when the whole mesh is a closed surface;
/// an open mesh drops this term), intersected with the region's neighbourhood. Each region
/// vertex has `phi <= -pad` (it is on the surface and `depth > pad`), so it lies inside a kept
/// cell and inside the snapped cage, as the enclosing cage's argument goes. An infinite
/// `depth_cells` keeps the whole solid (the closed mesh's full cage, bounded around the
/// region's solid parts only by the mesh itself).
///
/// # Errors
/// [`SkinError`] for mismatched lengths, non-finite positions, triangles out of range, an empty
/// region, `cells_across < 2`, `depth_cells` below 1 or NaN, an infinite depth on an open mesh,
/// or a lattice past [`crate::sim::mesh::MAX_LATTICE_CELLS`].
pub fn region_cage(
    positions: &[Vec3],
    triangles: &[[u32; 3]],
    in_region: &[bool],
    cells_across: usize,
    depth_cells: f64,
) -> Result<TetMesh, SkinError> {
    let vertices = positions.len();
    if in_region.len() != vertices {
        return Err(SkinError::LengthMismatch {
            what: "the region mask",
            got: in_region.len(),
            vertices,
        });
    }
    if let Some(vertex) = positions
        .iter()
        .position(|p| !p.iter().all(|c| c.is_finite()))
    {
        return Err(SkinError::NonFiniteVertex { vertex });
    }
    for (triangle, t) in triangles.iter().enumerate() {
        if let Some(&index) = t.iter().find(|&&i| i as usize >= vertices) {
            return Err(SkinError::TriangleOutOfRange {
                triangle,
                index,
                vertices,
            });
        }
    }
    if cells_across < 2 {
        return Err(SkinError::Setting {
            what: "cells across",
            range: "at least 2",
            value: cells_across as f64,
        });
    }
    if !(depth_cells >= 1.0) {
        return Err(SkinError::Setting {
            what: "flesh depth (cells)",
            range: "at least 1 (or infinite)",
            value: depth_cells,
        });
    }
    let region: Vec<Vec3> = positions
        .iter()
        .zip(in_region)
        .filter(|(_, inside)| **inside)
        .map(|(p, _)| *p)
        .collect();
    if region.is_empty() {
        return Err(SkinError::EmptyRegion { vertices });
    }
    let solid = TriangleSurface::new(
        positions.to_vec(),
        triangles.iter().map(|t| t.map(|v| v as usize)).collect(),
    )
    .and_then(|surface| SignedDistance::new(&surface));
    let solid = match (solid, depth_cells.is_finite()) {
        (Ok(sdf), _) => Some(sdf),
        (Err(_), true) => None,
        (Err(e), false) => return Err(SkinError::OpenMesh(e.to_string())),
    };

    let (lo, hi) = bounds(&region);
    let cell = (hi - lo).max() / cells_across as f64;
    debug_assert_eq!(Some(cell), region_cell(positions, in_region, cells_across));
    let pad = cell * 3f64.sqrt() / 2.0;
    let depth = depth_cells * cell;
    // The lattice box: the region's neighbourhood, or the whole solid for an infinite depth.
    let (box_lo, box_hi) = if depth.is_finite() {
        (lo.add_scalar(-(depth + cell)), hi.add_scalar(depth + cell))
    } else {
        let (mlo, mhi) = bounds(positions);
        (mlo.add_scalar(-(pad + cell)), mhi.add_scalar(pad + cell))
    };
    let extent = (box_hi - box_lo) / cell;
    check_lattice([extent.x.ceil(), extent.y.ceil(), extent.z.ceil()])?;

    let grid = PointGrid::new(&region, depth.min((hi - lo).max()).max(cell));
    // Beyond this the neighbourhood term is only used for its sign.
    let cap = depth + 4.0 * cell;
    let phi = |p: [f64; 3]| -> f64 {
        let q = Vec3::from(p);
        let near = if depth.is_finite() {
            grid.distance(&q, cap) - depth
        } else {
            f64::NEG_INFINITY
        };
        let inside = solid.as_ref().map_or(f64::NEG_INFINITY, |s| s.at(p) - pad);
        near.max(inside)
    };
    let lattice = implicit_lattice(
        phi,
        [box_lo.x, box_lo.y, box_lo.z],
        [box_hi.x, box_hi.y, box_hi.z],
        cell,
    );
    let positions = lattice.positions.iter().map(|p| Vec3::from(*p)).collect();
    Ok(TetMesh::new(positions, lattice.tets)?)
}

/// The lattice cell (m) [`region_cage`] builds a region's cage with: the longest side of the
/// bounds of the vertices marked in `in_region`, over `cells_across`. `None` for an empty
/// region.
pub fn region_cell(positions: &[Vec3], in_region: &[bool], cells_across: usize) -> Option<f64> {
    let (mut lo, mut hi) = (Vec3::repeat(f64::INFINITY), Vec3::repeat(f64::NEG_INFINITY));
    for (p, _) in positions
        .iter()
        .zip(in_region)
        .filter(|(_, inside)| **inside)
    {
        lo = lo.inf(p);
        hi = hi.sup(p);
    }
    (lo.x <= hi.x).then(|| (hi - lo).max() / cells_across as f64)
}

/// Which of `points` lie inside the mesh's solid, or `None` when the mesh is not a closed
/// surface (see [`TriangleSurface::new`]). Positions and triangles as for [`region_cage`].
pub fn inside_mesh(
    positions: &[Vec3],
    triangles: &[[u32; 3]],
    points: &[Vec3],
) -> Option<Vec<bool>> {
    if triangles
        .iter()
        .any(|t| t.iter().any(|&v| v as usize >= positions.len()))
    {
        return None;
    }
    let surface = TriangleSurface::new(
        positions.to_vec(),
        triangles.iter().map(|t| t.map(|v| v as usize)).collect(),
    )
    .ok()?;
    let sdf = SignedDistance::new(&surface).ok()?;
    Some(
        points
            .iter()
            .map(|p| sdf.at([p.x, p.y, p.z]) < 0.0)
            .collect(),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sim::embed::embed_points;

    /// A closed UV sphere of radius 1 (rings x segments), and its triangles.
    pub(crate) fn uv_sphere(rings: usize, segments: usize) -> (Vec<Vec3>, Vec<[u32; 3]>) {
        let mut p = vec![Vec3::new(0.0, 1.0, 0.0)];
        for r in 1..rings {
            let theta = std::f64::consts::PI * r as f64 / rings as f64;
            for s in 0..segments {
                let phi = std::f64::consts::TAU * s as f64 / segments as f64;
                p.push(Vec3::new(
                    theta.sin() * phi.cos(),
                    theta.cos(),
                    theta.sin() * phi.sin(),
                ));
            }
        }
        p.push(Vec3::new(0.0, -1.0, 0.0));
        let ring = |r: usize, s: usize| (1 + (r - 1) * segments + s % segments) as u32;
        let mut t = Vec::new();
        for s in 0..segments {
            t.push([0, ring(1, s + 1), ring(1, s)]);
            let south = (p.len() - 1) as u32;
            t.push([south, ring(rings - 1, s), ring(rings - 1, s + 1)]);
        }
        for r in 1..rings - 1 {
            for s in 0..segments {
                t.push([ring(r, s), ring(r, s + 1), ring(r + 1, s + 1)]);
                t.push([ring(r, s), ring(r + 1, s + 1), ring(r + 1, s)]);
            }
        }
        (p, t)
    }

    fn worst_weight(cage: &TetMesh, points: &[Vec3]) -> f64 {
        embed_points(cage, points)
            .iter()
            .flat_map(|e| e.weights)
            .fold(f64::INFINITY, f64::min)
    }

    #[test]
    fn a_region_cage_bounds_its_vertices_and_stays_in_the_solid() {
        let (p, t) = uv_sphere(16, 24);
        // The lower cap: a belly.
        let region: Vec<bool> = p.iter().map(|q| q.y < -0.5).collect();
        let belly: Vec<Vec3> = p
            .iter()
            .zip(&region)
            .filter(|r| *r.1)
            .map(|r| *r.0)
            .collect();
        let cage = region_cage(&p, &t, &region, 6, 2.0).unwrap();
        assert!(worst_weight(&cage, &belly) >= -1e-9);
        // Some cage vertices are inside the ball, the rest around its surface.
        let inside = inside_mesh(&p, &t, cage.rest_positions()).unwrap();
        for (q, &i) in cage.rest_positions().iter().zip(&inside) {
            assert!(
                i == (q.norm() < 1.0) || (q.norm() - 1.0).abs() < 0.03,
                "{q:?}"
            );
        }
        assert!(inside.iter().any(|&i| i) && inside.iter().any(|&i| !i));
        let (lo, hi) = cage.rest_bounds();
        // Within the solid padded by half a cell diagonal and a cell of snapping (cell = 1.73 / 6
        // here), and not up to the sphere's top.
        let cell = 2.0 * (1.0f64 - 0.25).sqrt() / 6.0;
        let reach = 1.0 + cell * (1.0 + 3f64.sqrt() / 2.0);
        assert!(lo.min() > -reach && hi.x < reach, "{lo:?}");
        assert!(hi.y < 0.2, "{hi:?}");
        // The whole solid: an infinite depth; the belly's cage is a part of it.
        let all = vec![true; p.len()];
        let full = region_cage(&p, &t, &all, 6, f64::INFINITY).unwrap();
        assert!(worst_weight(&full, &p) >= -1e-9);
        assert!(full.total_volume() > 4.0);
        assert!(cage.total_volume() < 0.7 * full.total_volume());
    }

    #[test]
    fn an_open_patch_gets_a_shell_cage() {
        let (p, t) = uv_sphere(12, 16);
        // Drop the southern half's triangles: an open surface.
        let open: Vec<[u32; 3]> = t
            .iter()
            .copied()
            .filter(|tri| tri.iter().all(|&v| p[v as usize].y > -0.2))
            .collect();
        let region: Vec<bool> = p.iter().map(|q| q.y > 0.5).collect();
        let cap: Vec<Vec3> = p
            .iter()
            .zip(&region)
            .filter(|r| *r.1)
            .map(|r| *r.0)
            .collect();
        let cage = region_cage(&p, &open, &region, 5, 1.5).unwrap();
        assert!(worst_weight(&cage, &cap) >= -1e-9);
        assert!(matches!(
            region_cage(&p, &open, &region, 5, f64::INFINITY),
            Err(SkinError::OpenMesh(_))
        ));
        assert!(inside_mesh(&p, &open, &cap).is_none());
    }

    #[test]
    fn bad_regions_are_typed_errors() {
        let (p, t) = uv_sphere(8, 8);
        let all = vec![true; p.len()];
        let none = vec![false; p.len()];
        assert!(matches!(
            region_cage(&p, &t, &none, 4, 2.0),
            Err(SkinError::EmptyRegion { .. })
        ));
        assert!(matches!(
            region_cage(&p, &t, &all[1..], 4, 2.0),
            Err(SkinError::LengthMismatch { .. })
        ));
        assert!(matches!(
            region_cage(&p, &t, &all, 1, 2.0),
            Err(SkinError::Setting { .. })
        ));
        for depth in [0.5, f64::NAN] {
            assert!(matches!(
                region_cage(&p, &t, &all, 4, depth),
                Err(SkinError::Setting { .. })
            ));
        }
        assert!(matches!(
            region_cage(&p, &t, &all, 100_000, 2.0),
            Err(SkinError::Cage(_))
        ));
        let mut bad = p.clone();
        bad[3].x = f64::NAN;
        assert!(matches!(
            region_cage(&bad, &t, &all, 4, 2.0),
            Err(SkinError::NonFiniteVertex { vertex: 3 })
        ));
        let mut tris = t.clone();
        tris[0][1] = 999;
        assert!(matches!(
            region_cage(&p, &tris, &all, 4, 2.0),
            Err(SkinError::TriangleOutOfRange { index: 999, .. })
        ));
    }
}
