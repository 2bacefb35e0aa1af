//! Closed triangle surfaces and the coarse tet cage built around them.
//!
//! A detailed render mesh (a scanned bunny, a character from a glTF scene) is far too fine to
//! simulate. Following the embedded-contact thesis (section 5.7 and the
//! conclusions), we simulate a coarse lattice of tets that *strictly bounds* the surface and
//! carry the detailed vertices along with barycentric weights ([`crate::sim::embed`]).
//!
//! # The cage
//! [`TetMesh::try_enclosing`] runs the lattice builder of `sim::lattice` on the signed
//! distance of the surface offset outwards by `pad = cell * sqrt(3) / 2`, half a cell diagonal:
//!
//! `phi(p) = s(p) * dist(p, surface) - pad`, `s = -1` inside, `+1` outside.
//!
//! A cell is kept when `phi` at its centre is negative. Any surface point lies in some cell whose
//! centre is at most `pad` away, so every cell the surface passes through is kept, and so is
//! every cell whose centre is inside; the kept cells cover the solid. Boundary vertices are then
//! snapped onto `phi = 0`, the offset surface, which lies outside the original by `pad`: the
//! cage stays around the detailed surface (checked by a test on the bunny: every surface vertex
//! has barycentric weights >= -1e-9 in its tet). Distances and the inside test come from parry3d
//! (a BVH over the triangles, `ORIENTED` pseudo-normals).
//!
//! The inside test needs a closed, consistently wound surface: [`TriangleSurface::new`] welds
//! vertices that share a position (UV seams split them in game meshes), rejects surfaces with
//! boundary or non-manifold edges, and flips the winding when the enclosed volume is negative.

use super::lattice::implicit_lattice;
use super::math::Vec3;
use super::mesh::{MeshError, TetMesh};
use super::mesh_io::read_obj;
pub use super::surface_error::SurfaceError;
use parry3d::math::Vector;
use parry3d::query::PointQuery;
use parry3d::shape::{TriMesh, TriMeshFlags};

/// A closed, outward-wound triangle surface (m), ready to be enclosed by a tet cage.
#[derive(Debug, Clone, PartialEq)]
pub struct TriangleSurface {
    positions: Vec<Vec3>,
    triangles: Vec<[u32; 3]>,
    volume: f64,
}

impl TriangleSurface {
    /// Validates a surface; flips every triangle if the winding is inward.
    ///
    /// # Errors
    /// A [`SurfaceError`] naming the offending vertex, triangle or edge.
    pub fn new(positions: Vec<Vec3>, triangles: Vec<[usize; 3]>) -> Result<Self, SurfaceError> {
        if positions.is_empty() || triangles.is_empty() {
            return Err(SurfaceError::Empty {
                vertices: positions.len(),
                triangles: triangles.len(),
            });
        }
        if let Some((vertex, p)) = positions
            .iter()
            .enumerate()
            .find(|(_, p)| !p.iter().all(|c| c.is_finite()))
        {
            return Err(SurfaceError::NonFiniteVertex {
                vertex,
                position: [p.x, p.y, p.z],
            });
        }
        let n = positions.len();
        for (triangle, t) in triangles.iter().enumerate() {
            if let Some(&index) = t.iter().find(|&&i| i >= n || i > u32::MAX as usize) {
                return Err(SurfaceError::IndexOutOfRange {
                    triangle,
                    index,
                    vertex_count: n,
                });
            }
        }
        let welded = weld(&positions);
        check_closed(&triangles, &welded)?;
        let volume: f64 = triangles
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|i| positions[i]);
                a.dot(&b.cross(&c)) / 6.0
            })
            .sum();
        let (lo, hi) = super::mesh::bounds(&positions);
        let box_volume = (hi - lo).iter().product::<f64>();
        if !(volume.abs() > 1e-9 * box_volume.max(f64::MIN_POSITIVE)) {
            return Err(SurfaceError::ZeroVolume { volume });
        }
        let flip = volume < 0.0;
        let triangles = triangles
            .iter()
            .map(|t| {
                let t = t.map(|i| i as u32);
                if flip { [t[0], t[2], t[1]] } else { t }
            })
            .collect();
        Ok(Self {
            positions,
            triangles,
            volume: volume.abs(),
        })
    }

    /// Reads a Wavefront `.obj` file's text (see [`crate::sim::mesh_io`]) and validates the surface.
    ///
    /// # Errors
    /// [`SurfaceError::Io`] with the line of a malformed file, or a validation error.
    pub fn from_obj(text: &str) -> Result<Self, SurfaceError> {
        let raw = read_obj(text)?;
        Self::new(
            raw.positions.iter().map(|p| Vec3::from(*p)).collect(),
            raw.triangles,
        )
    }

    /// Vertex positions (m).
    pub fn positions(&self) -> &[Vec3] {
        &self.positions
    }

    /// Outward-wound triangles.
    pub fn triangles(&self) -> &[[u32; 3]] {
        &self.triangles
    }

    /// Enclosed volume (m^3).
    pub fn volume(&self) -> f64 {
        self.volume
    }

    /// A copy scaled by `factor` about the origin, then moved by `offset` (m).
    pub fn transformed(&self, factor: f64, offset: Vec3) -> Self {
        Self {
            positions: self.positions.iter().map(|p| p * factor + offset).collect(),
            triangles: self.triangles.clone(),
            volume: self.volume * factor.abs().powi(3),
        }
    }
}

/// For each vertex, the smallest index of a vertex at exactly the same position.
fn weld(positions: &[Vec3]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..positions.len()).collect();
    let key = |i: usize| positions[i].map(f64::to_bits);
    order.sort_by_key(|&i| (key(i).x, key(i).y, key(i).z, i));
    let mut canonical: Vec<usize> = (0..positions.len()).collect();
    for w in 1..order.len() {
        if key(order[w]) == key(order[w - 1]) {
            canonical[order[w]] = canonical[order[w - 1]];
        }
    }
    canonical
}

/// Every (welded) edge must belong to exactly two triangles.
fn check_closed(triangles: &[[usize; 3]], welded: &[usize]) -> Result<(), SurfaceError> {
    let mut edges: Vec<(usize, usize, [usize; 2])> = Vec::with_capacity(3 * triangles.len());
    for t in triangles {
        for k in 0..3 {
            let (a, b) = (t[k], t[(k + 1) % 3]);
            let (wa, wb) = (welded[a], welded[b]);
            edges.push((wa.min(wb), wa.max(wb), [a, b]));
        }
    }
    edges.sort_unstable();
    let mut bad = 0;
    let mut example = None;
    let mut i = 0;
    while i < edges.len() {
        let mut j = i + 1;
        while j < edges.len() && edges[j].0 == edges[i].0 && edges[j].1 == edges[i].1 {
            j += 1;
        }
        if j - i != 2 {
            bad += 1;
            example.get_or_insert(edges[i].2);
        }
        i = j;
    }
    match example {
        Some(example) => Err(SurfaceError::NotClosed {
            edges: bad,
            example,
        }),
        None => Ok(()),
    }
}

/// Signed distance to a closed surface (negative inside), through a parry3d BVH.
pub(crate) struct SignedDistance {
    mesh: TriMesh,
}

impl SignedDistance {
    pub(crate) fn new(surface: &TriangleSurface) -> Result<Self, SurfaceError> {
        let vertices: Vec<Vector> = surface
            .positions
            .iter()
            .map(|p| Vector::new(p.x as f32, p.y as f32, p.z as f32))
            .collect();
        let mesh = TriMesh::with_flags(vertices, surface.triangles.clone(), TriMeshFlags::ORIENTED)
            .map_err(|e| SurfaceError::Index(format!("{e:?}")))?;
        Ok(Self { mesh })
    }

    pub(crate) fn at(&self, p: [f64; 3]) -> f64 {
        let q = Vector::new(p[0] as f32, p[1] as f32, p[2] as f32);
        let proj = self.mesh.project_local_point(q, false);
        let d = (proj.point - q).length() as f64;
        if proj.is_inside { -d } else { d }
    }
}

impl TetMesh {
    /// A coarse lattice tet mesh that strictly bounds a closed surface, `cells_across` cells
    /// along the longest side of its bounding box (at least 2). Embed the surface's vertices
    /// with [`crate::sim::embed::embed_points`] to drive a detailed render mesh (see the module
    /// docs for how the cage is built and why it bounds the surface).
    ///
    /// # Errors
    /// [`MeshError::Surface`] if the surface cannot be indexed, [`MeshError::TooManyCells`]
    /// past [`super::mesh::MAX_LATTICE_CELLS`], or a validation error of the generated mesh.
    pub fn try_enclosing(
        surface: &TriangleSurface,
        cells_across: usize,
    ) -> Result<Self, MeshError> {
        let (lo, hi) = super::mesh::bounds(&surface.positions);
        let cell = (hi - lo).max() / cells_across.max(2) as f64;
        let pad = cell * 3f64.sqrt() / 2.0;
        let margin = pad + cell;
        let sdf = SignedDistance::new(surface)?;
        let extent = (hi - lo).add_scalar(2.0 * margin) / cell;
        super::mesh::check_lattice([extent.x.ceil(), extent.y.ceil(), extent.z.ceil()])?;
        let min = [lo.x - margin, lo.y - margin, lo.z - margin];
        let max = [hi.x + margin, hi.y + margin, hi.z + margin];
        let lattice = implicit_lattice(|p| sdf.at(p) - pad, min, max, cell);
        let positions = lattice.positions.iter().map(|p| Vec3::from(*p)).collect();
        TetMesh::new(positions, lattice.tets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::embed::embed_points;

    fn bunny() -> TriangleSurface {
        TriangleSurface::from_obj(include_str!("../../assets/meshes/bunny_10k.obj")).unwrap()
    }

    /// A unit cube as 12 triangles; `inward` reverses the winding.
    fn cube(inward: bool) -> (Vec<Vec3>, Vec<[usize; 3]>) {
        let p: Vec<Vec3> = (0..8)
            .map(|i| Vec3::new((i & 1) as f64, ((i >> 1) & 1) as f64, ((i >> 2) & 1) as f64))
            .collect();
        let quads = [
            [0, 2, 3, 1],
            [4, 5, 7, 6],
            [0, 1, 5, 4],
            [2, 6, 7, 3],
            [0, 4, 6, 2],
            [1, 3, 7, 5],
        ];
        let mut t = Vec::new();
        for q in quads {
            t.push([q[0], q[1], q[2]]);
            t.push([q[0], q[2], q[3]]);
        }
        if inward {
            for tri in &mut t {
                tri.swap(1, 2);
            }
        }
        (p, t)
    }

    #[test]
    fn the_cage_strictly_bounds_the_bunny() {
        let surface = bunny();
        assert!((surface.volume() - 0.2228).abs() < 1e-3);
        let cage = TetMesh::try_enclosing(&surface, 10).unwrap();
        assert!(
            cage.tet_count() > 500 && cage.vertex_count() < 3000,
            "{}",
            cage.tet_count()
        );
        for (e, p) in embed_points(&cage, surface.positions())
            .iter()
            .zip(surface.positions())
        {
            let worst = e.weights.iter().copied().fold(f64::INFINITY, f64::min);
            assert!(
                worst >= -1e-9,
                "surface vertex {p:?} outside the cage ({worst})"
            );
            assert!((e.position(cage.rest_positions()) - p).norm() < 1e-9);
        }
        // Coarse but not bloated: at most a few times the bunny's own volume.
        assert!(cage.total_volume() > surface.volume());
        assert!(
            cage.total_volume() < 3.0 * surface.volume(),
            "{}",
            cage.total_volume()
        );
    }

    #[test]
    fn inward_winding_is_flipped_and_the_cube_is_enclosed() {
        let (p, t) = cube(true);
        let surface = TriangleSurface::new(p, t).unwrap();
        assert!((surface.volume() - 1.0).abs() < 1e-12);
        let cage = TetMesh::try_enclosing(&surface, 4).unwrap();
        let (lo, hi) = cage.rest_bounds();
        assert!(lo.max() < 0.0 && hi.min() > 1.0);
    }

    #[test]
    fn bad_surfaces_are_typed_errors() {
        let (p, mut t) = cube(false);
        assert!(matches!(
            TriangleSurface::new(vec![], vec![]),
            Err(SurfaceError::Empty { .. })
        ));
        let mut nan = p.clone();
        nan[3].y = f64::NAN;
        assert!(matches!(
            TriangleSurface::new(nan, t.clone()),
            Err(SurfaceError::NonFiniteVertex { vertex: 3, .. })
        ));
        let mut out = t.clone();
        out[5][1] = 8;
        assert!(matches!(
            TriangleSurface::new(p.clone(), out),
            Err(SurfaceError::IndexOutOfRange {
                triangle: 5,
                index: 8,
                ..
            })
        ));
        t.pop();
        assert!(matches!(
            TriangleSurface::new(p.clone(), t),
            Err(SurfaceError::NotClosed { edges: 3, .. })
        ));
        // A flat, closed "surface": two copies of one triangle, opposite windings.
        let flat = vec![Vec3::zeros(), Vec3::x(), Vec3::y()];
        assert!(matches!(
            TriangleSurface::new(flat, vec![[0, 1, 2], [0, 2, 1]]),
            Err(SurfaceError::ZeroVolume { .. })
        ));
    }

    #[test]
    fn seams_are_welded_before_the_closedness_check() {
        // Split vertex 0 into a copy (as a UV seam would) used by half its triangles.
        let (mut p, mut t) = cube(false);
        p.push(p[0]);
        for tri in t.iter_mut().step_by(2) {
            for v in tri.iter_mut() {
                if *v == 0 {
                    *v = 8;
                }
            }
        }
        let surface = TriangleSurface::new(p, t).unwrap();
        assert!((surface.volume() - 1.0).abs() < 1e-12);
    }
}
