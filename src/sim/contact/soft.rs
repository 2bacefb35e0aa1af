//! Narrowphase between soft bodies: surface vertices of one body against boundary triangles of
//! another, or of the same body (self-collision).
//!
//! Each candidate pair of the broadphase ([`super::candidate_pairs`]) becomes the point-triangle
//! contact of eq. (8) of `mprgp-collision-qp.txt` ([`super::point_triangle_contact`]): closest
//! point weights and a normal, both frozen at detection. The normal is the separation direction
//! (closest point to vertex) for a vertex in front of the triangle — which is the face normal
//! over the face's interior, and the right normal over a shared edge or corner, where the face
//! normal of whichever neighbour happened to be picked could be a side face's — and the face
//! normal for a vertex behind it. Detection is *speculative*, like
//! the obstacle contacts: the pair is examined where it starts the step, with the margin widened
//! by how far the vertex and the triangle move, and kept when the vertex's predicted position
//! comes within the margin of the frozen plane. A vertex keeps only its closest triangle per
//! other body (the lowest triangle index on ties), so one vertex gives one constraint per body it
//! touches.
//!
//! Self-collision skips a vertex's own triangles and those of its one-ring
//! ([`crate::sim::TetMesh::is_near_triangle`]), and takes a pair only if the vertex is on the
//! outer side of the triangle where the step starts (`x_reference`): on a convex patch every
//! vertex lies slightly behind the planes of the triangles two rings away, which is no contact.

use super::broadphase::{BodyBvh, candidate_pairs};
use super::point_triangle::point_triangle_contact;
use crate::sim::math::Vec3;
use crate::sim::mesh::TetMesh;

/// A surface vertex of one body against a boundary triangle of another body, or of the same
/// body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftContact {
    /// Body of the vertex (an index chosen by the caller).
    pub vertex_body: u32,
    /// The vertex, an index into its body's mesh.
    pub vertex: u32,
    /// Body of the triangle.
    pub triangle_body: u32,
    /// The triangle, an index into that body's boundary triangles.
    pub triangle: u32,
    /// The triangle's vertices (indices into its body's mesh).
    pub triangle_vertices: [u32; 3],
    /// Barycentric weights of the closest point, frozen at detection.
    pub weights: [f64; 3],
    /// The contact normal, frozen at detection: the direction from the triangle's closest point
    /// to the vertex when the vertex is in front of the triangle, the triangle's outward normal
    /// when it is behind.
    pub normal: Vec3,
    /// Predicted penetration (m) of the vertex behind the frozen plane; negative when it stays
    /// in front of it, within the margin.
    pub depth: f64,
}

impl SoftContact {
    /// Whether the contact is a self-collision.
    pub fn is_self(&self) -> bool {
        self.vertex_body == self.triangle_body
    }

    /// The signed gap `n' (p - sum_k w_k x_k)` (m) at vertex positions of the two bodies.
    pub fn gap(&self, vertex_x: &[Vec3], triangle_x: &[Vec3]) -> f64 {
        let q: Vec3 = (0..3)
            .map(|k| self.weights[k] * triangle_x[self.triangle_vertices[k] as usize])
            .sum();
        self.normal.dot(&(vertex_x[self.vertex as usize] - q))
    }
}

/// What the narrowphase reads of one body.
#[derive(Clone, Copy)]
pub struct SoftSurface<'a> {
    /// The body's index, stored in the contacts.
    pub body: u32,
    /// Its mesh (surface vertices, triangles and one-rings).
    pub mesh: &'a TetMesh,
    /// Vertex positions where the motion starts (m).
    pub x_start: &'a [Vec3],
    /// Vertex positions where the motion ends (m): the prediction, or `x_start` again for a
    /// test at one configuration.
    pub x_end: &'a [Vec3],
    /// Positions at the start of the time step (m), for the self-collision side test.
    pub x_reference: &'a [Vec3],
    /// Its BVHs, fitted to the motion from `x_start` to `x_end` (proxies: its surface vertices).
    pub bvh: &'a BodyBvh,
}

/// Appends to `out` the contacts of `a`'s surface vertices with `b`'s boundary triangles (`a`
/// and `b` the same body for self-collision): vertices within `margin` (m) of a triangle's outer
/// side at the end of the motion, or behind it by at most `depth_limit` (m) where it starts.
/// `pairs` is scratch.
pub fn detect_soft_contacts(
    a: &SoftSurface<'_>,
    b: &SoftSurface<'_>,
    margin: f64,
    depth_limit: f64,
    pairs: &mut Vec<(u32, u32)>,
    out: &mut Vec<SoftContact>,
) {
    let self_collision = a.body == b.body;
    if !a.bvh.may_touch(b.bvh) {
        return;
    }
    candidate_pairs(a.bvh, b.bvh, pairs);
    let vertices = a.mesh.surface_vertices();
    let triangles = b.mesh.surface_triangles();
    // Pairs are sorted by proxy: keep the closest triangle of each vertex.
    let mut best: Option<(f64, f64, SoftContact)> = None;
    let mut current = u32::MAX;
    for &(p, t) in pairs.iter() {
        if p != current {
            if let Some((_, _, c)) = best.take() {
                out.push(c);
            }
            current = p;
        }
        let vertex = vertices[p as usize];
        let tri = triangles[t as usize];
        if self_collision && a.mesh.is_near_triangle(vertex, &tri) {
            continue;
        }
        let ps = a.x_start[vertex as usize];
        let pe = a.x_end[vertex as usize];
        let [ts, te] = [b.x_start, b.x_end].map(|x| tri.map(|v| x[v as usize]));
        let sweep = (pe - ps).norm() + (0..3).map(|k| (te[k] - ts[k]).norm()).fold(0.0, f64::max);
        let Some(c) =
            point_triangle_contact(&ps, &ts[0], &ts[1], &ts[2], margin + sweep, depth_limit)
        else {
            continue;
        };
        if self_collision {
            let [r0, r1, r2] = tri.map(|v| b.x_reference[v as usize]);
            let reference = point_triangle_contact(
                &a.x_reference[vertex as usize],
                &r0,
                &r1,
                &r2,
                f64::INFINITY,
                0.0,
            );
            if !reference.is_some_and(|r| r.gap >= 0.0) {
                continue;
            }
        }
        // Outside the triangle the contact normal is the direction from the closest point to
        // the vertex (the distance's gradient): where the closest point is an edge or a corner
        // shared by several triangles, every one of them then gives the same, correct normal.
        // Behind the triangle (penetrating) it is the face normal.
        let offset = ps - c.closest;
        let distance = offset.norm();
        let normal = if c.gap > 0.0 && distance > 1e-12 {
            offset / distance
        } else {
            c.normal
        };
        let q: Vec3 = (0..3).map(|k| c.weights[k] * te[k]).sum();
        let predicted = normal.dot(&(pe - q));
        if predicted >= margin {
            continue;
        }
        // The closest triangle wins; among equally close ones (a shared edge or corner, to
        // round-off) the one the vertex is most in front of.
        let signed = normal.dot(&offset);
        let better = best.as_ref().is_none_or(|(d, g, _)| {
            distance < d - 1e-12 * (1.0 + d) || (distance <= d + 1e-12 * (1.0 + d) && signed > *g)
        });
        if better {
            best = Some((
                distance,
                signed,
                SoftContact {
                    vertex_body: a.body,
                    vertex,
                    triangle_body: b.body,
                    triangle: t,
                    triangle_vertices: tri,
                    weights: c.weights,
                    normal,
                    depth: -predicted,
                },
            ));
        }
    }
    if let Some((_, _, c)) = best {
        out.push(c);
    }
}

/// Fits `bvh` to a body's motion: proxies are its surface vertices. `scratch` is reused.
pub fn fit_surface_bvh(
    bvh: &mut BodyBvh,
    mesh: &TetMesh,
    x_start: &[Vec3],
    x_end: &[Vec3],
    margin: f64,
    scratch: &mut Vec<Vec3>,
) {
    let vertices = mesh.surface_vertices();
    scratch.clear();
    scratch.extend(vertices.iter().map(|&v| x_start[v as usize]));
    if std::ptr::eq(x_start, x_end) {
        // At rest over the "motion" (between PD iterations): half the points per box.
        bvh.update(scratch, x_start, mesh.surface_triangles(), margin);
        return;
    }
    scratch.extend(vertices.iter().map(|&v| x_end[v as usize]));
    let (start, end) = scratch.split_at(vertices.len());
    bvh.update_swept(start, end, x_start, x_end, mesh.surface_triangles(), margin);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    use crate::sim::contact::test_body::MovingBody as Body;

    #[test]
    fn a_falling_cube_gets_one_contact_per_bottom_vertex_with_the_plane_it_falls_onto() {
        let lower = Body::new(
            TetMesh::cuboid(Vec3::repeat(0.5), 2),
            Vec3::zeros(),
            Vec3::zeros(),
        );
        // The upper cube starts 5 mm above and is predicted 2 cm into the lower one.
        let upper = Body::new(
            TetMesh::cuboid(Vec3::new(0.3, 0.3, 0.3), 2),
            Vec3::new(0.05, 0.805, 0.02),
            Vec3::new(0.0, -0.025, 0.0),
        );
        let (mut pairs, mut out) = (Vec::new(), Vec::new());
        detect_soft_contacts(
            &upper.surface(1),
            &lower.surface(0),
            0.01,
            0.05,
            &mut pairs,
            &mut out,
        );
        let bottom: Vec<u32> = upper
            .mesh
            .surface_vertices()
            .iter()
            .copied()
            .filter(|&v| (upper.start[v as usize].y - 0.505).abs() < 1e-9)
            .collect();
        assert_eq!(out.len(), bottom.len(), "{out:?}");
        for c in &out {
            assert!(bottom.contains(&c.vertex));
            assert!((c.normal - Vec3::y()).norm() < 1e-12);
            assert!((c.depth - 0.02).abs() < 1e-12, "{}", c.depth);
            assert!((c.weights.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            // The frozen plane passes through the lower cube's top.
            assert!((c.gap(&upper.start, &lower.start) - 0.005).abs() < 1e-12);
        }
        // Far apart: nothing.
        let far = Body::new(
            TetMesh::cuboid(Vec3::repeat(0.3), 2),
            Vec3::new(0.0, 3.0, 0.0),
            Vec3::zeros(),
        );
        out.clear();
        detect_soft_contacts(
            &far.surface(1),
            &lower.surface(0),
            0.01,
            0.05,
            &mut pairs,
            &mut out,
        );
        assert!(out.is_empty());
    }

    #[test]
    fn contacts_match_brute_force_closest_triangles() {
        let mut rng = Rng(0x5EED_0F50_F7B0_D1E5);
        for scene in 0..6 {
            let a = Body::new(
                TetMesh::sphere(0.3, 4),
                Vec3::new(
                    0.1 * rng.signed(),
                    0.55 + 0.05 * rng.signed(),
                    0.1 * rng.signed(),
                ),
                Vec3::new(0.02 * rng.signed(), -0.05, 0.02 * rng.signed()),
            );
            let b = Body::new(
                TetMesh::cuboid(Vec3::repeat(0.3), 3),
                Vec3::zeros(),
                Vec3::zeros(),
            );
            let (margin, depth_limit) = (0.01, 0.05);
            let (mut pairs, mut out) = (Vec::new(), Vec::new());
            detect_soft_contacts(
                &a.surface(0),
                &b.surface(1),
                margin,
                depth_limit,
                &mut pairs,
                &mut out,
            );
            // Brute force over every vertex and triangle.
            let mut expected = Vec::new();
            for &v in a.mesh.surface_vertices() {
                let (ps, pe) = (a.start[v as usize], a.end[v as usize]);
                let mut best: Option<(f64, f64, u32)> = None;
                for (t, tri) in b.mesh.surface_triangles().iter().enumerate() {
                    let [t0, t1, t2] = tri.map(|k| b.start[k as usize]);
                    // The broadphase boxes: the vertex's motion grown by the margin against the
                    // triangle's (static) box.
                    let (lo, hi) = (
                        ps.inf(&pe).add_scalar(-margin),
                        ps.sup(&pe).add_scalar(margin),
                    );
                    let (tlo, thi) = (t0.inf(&t1).inf(&t2), t0.sup(&t1).sup(&t2));
                    if (0..3).any(|k| lo[k] > thi[k] + 1e-6 || hi[k] < tlo[k] - 1e-6) {
                        continue;
                    }
                    let sweep = (pe - ps).norm();
                    let Some(c) =
                        point_triangle_contact(&ps, &t0, &t1, &t2, margin + sweep, depth_limit)
                    else {
                        continue;
                    };
                    let offset = ps - c.closest;
                    let d = offset.norm();
                    let normal = if c.gap > 0.0 && d > 1e-12 {
                        offset / d
                    } else {
                        c.normal
                    };
                    let q: Vec3 = (0..3).map(|k| c.weights[k] * b.end[tri[k] as usize]).sum();
                    if normal.dot(&(pe - q)) >= margin {
                        continue;
                    }
                    let signed = normal.dot(&offset);
                    let tol = 1e-12;
                    if best.is_none_or(|(bd, bs, _)| {
                        d < bd - tol * (1.0 + bd) || (d <= bd + tol * (1.0 + bd) && signed > bs)
                    }) {
                        best = Some((d, signed, t as u32));
                    }
                }
                if let Some((_, _, t)) = best {
                    expected.push((v, t));
                }
            }
            let got: Vec<(u32, u32)> = out.iter().map(|c| (c.vertex, c.triangle)).collect();
            assert_eq!(got, expected, "scene {scene}");
            assert!(!got.is_empty(), "scene {scene} has no contact");
        }
    }

    #[test]
    fn self_collision_skips_neighbours_and_convex_patches_but_finds_a_fold() {
        // A resting cube has no self contacts at all.
        let cube = Body::new(
            TetMesh::cuboid(Vec3::repeat(0.5), 4),
            Vec3::zeros(),
            Vec3::zeros(),
        );
        let (mut pairs, mut out) = (Vec::new(), Vec::new());
        detect_soft_contacts(
            &cube.surface(0),
            &cube.surface(0),
            0.3,
            0.3,
            &mut pairs,
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        // A thin slab folded onto itself finds the fold's two faces.
        let mesh = TetMesh::cuboid(Vec3::new(1.0, 0.02, 0.2), 8);
        // Rotating the right half by 180 degrees about the z axis through (0, 0.022) puts its
        // former top face 4 mm above the left half's top face, facing down; the prediction
        // moves it 1 cm further down.
        let fold = |p: &Vec3, drop: f64| {
            if p.x <= 0.0 {
                *p
            } else {
                Vec3::new(-p.x, 0.044 - p.y - drop, p.z)
            }
        };
        let start: Vec<Vec3> = mesh.rest_positions().iter().map(|p| fold(p, 0.0)).collect();
        let end: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| fold(p, 0.01))
            .collect();
        let folded = Body::from_positions(mesh, start, end);
        out.clear();
        detect_soft_contacts(
            &folded.surface(0),
            &folded.surface(0),
            0.01,
            0.05,
            &mut pairs,
            &mut out,
        );
        assert!(!out.is_empty());
        for c in &out {
            assert!(c.is_self());
            assert!(!folded.mesh.is_near_triangle(c.vertex, &c.triangle_vertices));
        }
    }
}
