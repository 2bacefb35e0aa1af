//! Narrowphase between soft bodies: surface points of one body against surface triangles of
//! another, or of the same body (self-collision). A body's surface is its tet mesh's boundary
//! or the triangle mesh it is drawn with ([`super::surface_shape`]); "vertex" below is a
//! surface point of either.
//!
//! Each candidate pair of the broadphase ([`super::candidate_pairs`]) becomes the point-triangle
//! contact of eq. (8) of Li et al. 2015 ([`super::point_triangle_contact`]): closest
//! point weights and a normal, both frozen at detection. The normal is the separation direction
//! (closest point to vertex) for a vertex in front of the triangle — which is the face normal
//! over the face's interior, and the right normal over a shared edge or corner, where the face
//! normal of whichever neighbour happened to be picked could be a side face's — and the face
//! normal for a vertex behind it. Detection is *speculative*, like
//! the obstacle contacts: the pair is examined where it starts the step, with the margin widened
//! by how far the vertex and the triangle move, and kept when the vertex's predicted position
//! comes within the margin of the frozen plane. A vertex keeps only its closest triangle per
//! other body, so one vertex gives one constraint per body it touches.
//!
//! Which side of the other body a vertex is on is decided by its closest triangles of all the
//! candidates, touched or not: outside, only a triangle it is in front of can be its contact;
//! inside, its closest touched triangle is. Without that rule, a vertex in front of its closest
//! triangle but beyond the margin took the next triangle whose plane it was behind: a box's
//! bottom vertex 3 cm above the box below it, near its edge, got the side face with a sideways
//! normal (in a stack of five falling cubes, instrumented: sideways row forces up to a third of
//! the vertical ones in the same iteration), and a ball's vertex resting on a 2 cm slab got the
//! slab's bottom face, which pushed it through the slab (up to 38 of the ball's vertices inside
//! it, 8.7 mm deep; none with the rule, `tests/sim_contacts.rs`).
//!
//! On a closed drawn surface the side is the sign of the vertex's offset from the closest
//! point along the closest triangles' *angle-weighted pseudo-normal* (Baerentzen and Aanaes,
//! "Signed distance computation using the angle weighted pseudonormal", 2005): the face normal
//! inside a face, the sum of both faces' normals on an edge, the faces' normals weighted by
//! their angles at a corner. On a closed surface that sign is exact wherever the closest point
//! lies; the side of one of several equally close triangles is not. Beside a ridge sharper
//! than a right angle a vertex outside is behind one of the ridge's faces: taking that as
//! inside, a vertex of one caged bunny 40 mm outside another, beside a ridge of its drawn
//! mesh, took that face's contact and was pushed into the body, and the upper of two bunnies
//! dropped onto each other sank through the lower one (`cargo bench --bench drawn`: 26,770
//! crossing triangle pairs and 2.4 s per step with 5-cell cages; none, 24 ms, with the
//! pseudo-normal).
//!
//! A tet mesh's surface keeps the older rule: a vertex is inside where it is behind any of its
//! closest triangles (ties go behind). A lattice's creases are right angles, beside which a vertex
//! outside is in front of both faces, so the rules differ only at creases a deformation
//! sharpened, and there the pseudo-normal measured worse: two rubber cubes spawned half into
//! each other (`tests/sim_rest.rs`) ended with 3-5 vertices inside the other in 8 of 8 spawns
//! moved by multiples of 1.37 um, against 0-2 with ties behind. Ties in front instead blew up
//! the `pile` bench (a body at 127 m/s): at a crease of a deformed surface an equally close
//! triangle can have an inside vertex in front of it.
//!
//! The pseudo-normal needs every closest triangle. The candidates hold every triangle within
//! the margin of the vertex's start (its swept box grown by the margin meets their boxes), so a
//! vertex of a drawn surface's that is not outside by candidates farther than that is checked
//! against every triangle of the other body that close ([`BodyBvh::triangles_near`]): a nearer
//! one, or another at the same corner, may lie outside its box. Without that check the two
//! 5-cell bunnies above sank through each other again. On a tet surface the candidates
//! decide alone: with the check, a ball thrown at 10 m/s onto a pinned 2 cm slab
//! (`tests/sim_contacts.rs`) ended with a vertex through it.
//!
//! Self-collision skips a vertex's own triangles and those of its one-ring
//! ([`SurfaceShape::is_near_triangle`]), and takes a pair only if the vertex is on the
//! outer side of the triangle where the step starts (`x_reference`): on a convex patch every
//! vertex lies slightly behind the planes of the triangles two rings away, which is no contact.

use super::broadphase::{BodyBvh, candidate_pairs};
use super::point_triangle::{PointTriangleContact, point_triangle_contact};
use super::surface_shape::SurfaceShape;
use crate::sim::math::Vec3;

/// A surface vertex of one body against a boundary triangle of another body, or of the same
/// body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftContact {
    /// Body of the vertex (an index chosen by the caller).
    pub vertex_body: u32,
    /// The vertex: a surface point of its body (a mesh vertex, or a drawn point where the body
    /// is drawn, [`SurfaceShape`]).
    pub vertex: u32,
    /// Body of the triangle.
    pub triangle_body: u32,
    /// The triangle, an index into that body's surface triangles.
    pub triangle: u32,
    /// The triangle's corners (surface points of its body, like [`SoftContact::vertex`]).
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

    /// The signed gap `n' (p - sum_k w_k x_k)` (m) at surface point positions of the two
    /// bodies.
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
    /// Its surface (points, triangles and one-rings).
    pub shape: SurfaceShape<'a>,
    /// Surface point positions where the motion starts (m; for a tet surface, the vertex
    /// positions).
    pub x_start: &'a [Vec3],
    /// Surface point positions where the motion ends (m): the prediction, or `x_start` again
    /// for a test at one configuration.
    pub x_end: &'a [Vec3],
    /// Surface point positions at the start of the time step (m), for the self-collision side
    /// test.
    pub x_reference: &'a [Vec3],
    /// Its BVHs, fitted to the motion from `x_start` to `x_end` (proxies: its surface points).
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
    let vertices = a.shape.vertices();
    let triangles = b.shape.triangles();
    // Pairs are sorted by proxy: per vertex, the closest triangle among those it touches, and
    // the closest among those it touches from the front.
    let mut found = Closest {
        rule: match b.shape {
            SurfaceShape::Drawn(_) if b.shape.is_closed() => SideRule::PseudoNormal,
            _ => SideRule::AnyBehind,
        },
        ..Closest::default()
    };
    let mut current = u32::MAX;
    for &(p, t) in pairs.iter() {
        if p != current {
            if current != u32::MAX {
                found.settle_side(a, b, vertices[current as usize], margin);
            }
            found.emit(out);
            current = p;
        }
        let vertex = vertices[p as usize];
        let tri = triangles[t as usize];
        if self_collision && a.shape.is_near_triangle(vertex, &tri) {
            continue;
        }
        let ps = a.x_start[vertex as usize];
        let pe = a.x_end[vertex as usize];
        let [ts, te] = [b.x_start, b.x_end].map(|x| tri.map(|v| x[v as usize]));
        let sweep = (pe - ps).norm() + (0..3).map(|k| (te[k] - ts[k]).norm()).fold(0.0, f64::max);
        let Some(c) =
            point_triangle_contact(&ps, &ts[0], &ts[1], &ts[2], f64::INFINITY, f64::INFINITY)
        else {
            continue;
        };
        let distance = (ps - c.closest).norm();
        // Which side of the closest triangles (of all, touched or not) the vertex is on says
        // whether it is outside the body.
        let signed = if c.gap > 0.0 { distance } else { c.gap };
        found.nearest(distance, ps - c.closest, pseudo_normal_share(&c, &ts));
        let touching = if c.gap >= 0.0 {
            distance < margin + sweep
        } else {
            distance <= depth_limit
        };
        if !touching {
            continue;
        }
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
        found.offer(
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
        );
    }
    if current != u32::MAX {
        found.settle_side(a, b, vertices[current as usize], margin);
    }
    found.emit(out);
}

/// The closest triangles of one vertex: their distance (m), the vertex's offset from the
/// closest point (m), and the sum of the triangles' angle-weighted normals there (the
/// pseudo-normal of Baerentzen and Aanaes 2005: a face's own normal inside it, the sum of the two
/// faces' normals on an edge, the faces' normals weighted by their angles at a corner).
#[derive(Debug, Clone, Copy)]
struct Nearest {
    distance: f64,
    offset: Vec3,
    pseudo_normal: Vec3,
    /// Whether the vertex is behind (or on) the plane of any of them.
    tied_behind: bool,
}

/// How a vertex's side of the other body is told from its closest triangles (see the module
/// docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum SideRule {
    /// By their pseudo-normal: exact on a closed surface (a drawn mesh).
    PseudoNormal,
    /// Inside where the vertex is behind any of them (a tet mesh's surface).
    #[default]
    AnyBehind,
}

/// Triangle `t`'s share of the pseudo-normal at contact `c`'s closest point: its outward normal
/// times its angle there (its whole turn, 2 pi, inside the face; pi on an edge; its corner's
/// angle at a corner).
fn pseudo_normal_share(c: &PointTriangleContact, t: &[Vec3; 3]) -> Vec3 {
    let zeros = c.weights.iter().filter(|&&w| w == 0.0).count();
    let angle = match zeros {
        2 => {
            let k = c.weights.iter().position(|&w| w != 0.0).unwrap_or(0);
            let (e1, e2) = (t[(k + 1) % 3] - t[k], t[(k + 2) % 3] - t[k]);
            e1.cross(&e2).norm().atan2(e1.dot(&e2))
        }
        1 => std::f64::consts::PI,
        _ => std::f64::consts::TAU,
    };
    angle * c.normal
}

/// One vertex's candidates in [`detect_soft_contacts`].
#[derive(Default)]
struct Closest {
    /// How its side is told.
    rule: SideRule,
    /// The closest triangles of all.
    nearest: Option<Nearest>,
    /// The closest contact (distance, signed gap, contact).
    any: Option<(f64, f64, SoftContact)>,
    /// The closest contact whose vertex is in front of its triangle.
    front: Option<(f64, f64, SoftContact)>,
}

/// Whether distance `a` (m) is the same as `b` to round-off (a shared edge or corner).
fn same_distance(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * (1.0 + b)
}

impl Closest {
    /// Whether `(distance, signed)` beats `than`: closer, or as close (to round-off: a shared
    /// edge or corner) and more in front.
    fn beats(distance: f64, signed: f64, than: Option<(f64, f64)>) -> bool {
        than.is_none_or(|(d, g)| {
            distance < d - 1e-12 * (1.0 + d) || (distance <= d + 1e-12 * (1.0 + d) && signed > g)
        })
    }

    /// A triangle at `distance` (m), the vertex at `offset` from its closest point, with its
    /// share of the pseudo-normal there ([`pseudo_normal_share`]).
    fn nearest(&mut self, distance: f64, offset: Vec3, share: Vec3) {
        match &mut self.nearest {
            Some(n) if same_distance(distance, n.distance) => {
                n.pseudo_normal += share;
                n.tied_behind |= offset.dot(&share) <= 0.0;
            }
            Some(n) if distance > n.distance => {}
            _ => {
                self.nearest = Some(Nearest {
                    distance,
                    offset,
                    pseudo_normal: share,
                    tied_behind: offset.dot(&share) <= 0.0,
                })
            }
        }
    }

    /// Whether the vertex is outside the other body by its closest triangles and the rule
    /// (see the module docs). On the surface (no offset) it is inside.
    fn outside(&self) -> bool {
        self.nearest.is_some_and(|n| match self.rule {
            SideRule::PseudoNormal => n.offset.dot(&n.pseudo_normal) > 0.0,
            SideRule::AnyBehind => !n.tied_behind,
        })
    }

    /// Where the side is told by the pseudo-normal, the vertex is not outside by its closest
    /// candidate triangles and those are farther than `complete` (m), decides its side from
    /// every triangle of `b` that close where the motion starts (a tet surface's side is left
    /// to the candidates: see the module docs). The candidates are the triangles whose boxes
    /// meet the vertex's swept box grown by the margin, so they hold every triangle within the
    /// margin of its start; beyond it a nearer triangle may be missing, and with it the side.
    fn settle_side(
        &mut self,
        a: &SoftSurface<'_>,
        b: &SoftSurface<'_>,
        vertex: u32,
        complete: f64,
    ) {
        let Some(nearest) = self.nearest else {
            return;
        };
        if self.rule != SideRule::PseudoNormal || self.outside() || nearest.distance <= complete {
            return;
        }
        let self_collision = a.body == b.body;
        let ps = a.x_start[vertex as usize];
        let triangles = b.shape.triangles();
        self.nearest = None;
        let radius = nearest.distance * (1.0 + 1e-9) + 1e-12;
        for t in b.bvh.triangles_near(ps, radius) {
            let tri = triangles[t as usize];
            if self_collision && a.shape.is_near_triangle(vertex, &tri) {
                continue;
            }
            let ts = tri.map(|v| b.x_start[v as usize]);
            let Some(c) =
                point_triangle_contact(&ps, &ts[0], &ts[1], &ts[2], f64::INFINITY, f64::INFINITY)
            else {
                continue;
            };
            self.nearest(
                (ps - c.closest).norm(),
                ps - c.closest,
                pseudo_normal_share(&c, &ts),
            );
        }
    }

    fn offer(&mut self, distance: f64, signed: f64, contact: SoftContact) {
        if Self::beats(distance, signed, self.any.map(|(d, g, _)| (d, g))) {
            self.any = Some((distance, signed, contact));
        }
        if signed > 0.0 && Self::beats(distance, signed, self.front.map(|(d, g, _)| (d, g))) {
            self.front = Some((distance, signed, contact));
        }
    }

    /// The vertex's contact into `out`, and a fresh start for the next vertex. A vertex in
    /// front of its closest triangle is outside the body: being behind a farther triangle's
    /// plane (a vertex above a box's top face, near its edge, is behind the side face's plane)
    /// is no contact, so only a contact from the front counts.
    fn emit(&mut self, out: &mut Vec<SoftContact>) {
        let outside = self.outside();
        let chosen = if outside { self.front } else { self.any };
        if let Some((_, _, c)) = chosen {
            out.push(c);
        }
        *self = Closest {
            rule: self.rule,
            ..Closest::default()
        };
    }
}

/// Fits `bvh` to a body's motion from surface point positions `x_start` to `x_end` (m):
/// proxies are its surface points. `scratch` is reused.
pub fn fit_surface_bvh(
    bvh: &mut BodyBvh,
    shape: SurfaceShape<'_>,
    x_start: &[Vec3],
    x_end: &[Vec3],
    margin: f64,
    scratch: &mut Vec<Vec3>,
) {
    let vertices = shape.vertices();
    scratch.clear();
    scratch.extend(vertices.iter().map(|&v| x_start[v as usize]));
    if std::ptr::eq(x_start, x_end) {
        // At rest over the "motion" (between PD iterations): half the points per box.
        bvh.update(scratch, x_start, shape.triangles(), margin);
        return;
    }
    scratch.extend(vertices.iter().map(|&v| x_end[v as usize]));
    let (start, end) = scratch.split_at(vertices.len());
    bvh.update_swept(start, end, x_start, x_end, shape.triangles(), margin);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::mesh::TetMesh;
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

    /// A box falling with the box below it, 3 cm above it and overlapping it by 7 mm along x:
    /// its bottom vertices over the lower box are 3 cm above it, in front of its top face
    /// (which stays 3 cm away, beyond the margin) and behind the plane of its side face, 7 mm
    /// in from it. They are outside the lower box and get no contact (a contact with the side
    /// face, its normal sideways and 7 mm deep, pushed falling boxes in a stack sideways and a
    /// ball on a thin slab down through it, behind the slab's bottom face). Truly 7 mm inside
    /// the lower box, next to its side face, the same vertices get that face.
    #[test]
    fn a_vertex_above_a_face_is_outside_though_behind_a_side_faces_plane() {
        let fall = Vec3::new(0.0, -0.025, 0.0);
        let lower = Body::new(TetMesh::cuboid(Vec3::repeat(0.1), 2), Vec3::zeros(), fall);
        // The upper box's -x side is at x = 0.093, 7 mm inside the lower box's +x side; it is
        // narrower along z, so that no face of one lies in a face plane of the other.
        let upper = || TetMesh::cuboid(Vec3::new(0.1, 0.1, 0.08), 2);
        let above = Body::new(upper(), Vec3::new(0.193, 0.23, 0.0), fall);
        let (mut pairs, mut out) = (Vec::new(), Vec::new());
        // At the step's detection (the margin, over the motion) and at a re-detection after an
        // iteration (no margin, at one configuration).
        let at_start =
            |b: &Body| Body::from_positions(b.mesh.clone(), b.start.clone(), b.start.clone());
        let (above_still, lower_still) = (at_start(&above), at_start(&lower));
        for (margin, a, b) in [(0.01, &above, &lower), (0.0, &above_still, &lower_still)] {
            out.clear();
            detect_soft_contacts(
                &a.surface(1),
                &b.surface(0),
                margin,
                0.05,
                &mut pairs,
                &mut out,
            );
            assert!(out.is_empty(), "margin {margin}: {out:?}");
        }
        // 3 cm lower: the upper box's lowest vertices are inside the lower box, 2 cm below its
        // top and 7 mm from its side.
        let inside = Body::new(upper(), Vec3::new(0.193, 0.18, 0.0), Vec3::zeros());
        let resting = Body::new(
            TetMesh::cuboid(Vec3::repeat(0.1), 2),
            Vec3::zeros(),
            Vec3::zeros(),
        );
        out.clear();
        detect_soft_contacts(
            &inside.surface(1),
            &resting.surface(0),
            0.01,
            0.05,
            &mut pairs,
            &mut out,
        );
        let deep: Vec<&SoftContact> = out
            .iter()
            .filter(|c| inside.start[c.vertex as usize].y < 0.1 - 1e-9)
            .collect();
        assert!(!deep.is_empty());
        for c in deep {
            assert!((c.normal - Vec3::x()).norm() < 1e-12, "{c:?}");
            assert!((c.depth - 0.007).abs() < 1e-9, "{c:?}");
        }
    }

    #[test]
    fn the_pseudo_normal_tells_inside_from_outside_beside_sharp_edges_and_corners() {
        // Thin tets (sharp ridges and corners) and points around them: the side by the closest
        // triangles' pseudo-normal against the tet's own inside test (barycentric weights).
        let mut rng = Rng(0x51DE_0FED_6E5D);
        let mut beside_ridge = 0;
        for _ in 0..200 {
            let corner = |rng: &mut Rng, s: f64| {
                Vec3::new(s * rng.signed(), s * rng.signed(), s * rng.signed())
            };
            let mut v = [0; 4].map(|_| corner(&mut rng, 0.3));
            // Squash the tet along a random direction: dihedral angles far below 90 degrees.
            let squash = corner(&mut rng, 1.0).normalize();
            for p in &mut v {
                *p -= 0.9 * squash.dot(p) * squash;
            }
            let volume = crate::sim::mesh::signed_volume(&v[0], &v[1], &v[2], &v[3]);
            if volume.abs() < 1e-5 {
                continue;
            }
            if volume < 0.0 {
                v.swap(2, 3);
            }
            let mesh = TetMesh::new(v.to_vec(), vec![[0, 1, 2, 3]]).unwrap();
            let x = mesh.rest_positions();
            for _ in 0..50 {
                let p = corner(&mut rng, 0.4);
                let mut closest = Closest {
                    rule: SideRule::PseudoNormal,
                    ..Closest::default()
                };
                let mut any_behind = None;
                for t in mesh.surface_triangles() {
                    let ts = t.map(|k| x[k as usize]);
                    let c = point_triangle_contact(
                        &p,
                        &ts[0],
                        &ts[1],
                        &ts[2],
                        f64::INFINITY,
                        f64::INFINITY,
                    )
                    .unwrap();
                    let d = (p - c.closest).norm();
                    closest.nearest(d, p - c.closest, pseudo_normal_share(&c, &ts));
                    if c.gap < 0.0 {
                        any_behind = Some(any_behind.map_or(d, |b: f64| b.min(d)));
                    }
                }
                let w = crate::sim::embed::barycentric(&p, &x[0], &x[1], &x[2], &x[3]).unwrap();
                let inside = w.iter().all(|&w| w > 0.0);
                let on_surface = w.iter().any(|&w| w.abs() < 1e-9);
                if on_surface {
                    continue;
                }
                assert_eq!(closest.outside(), !inside, "{p:?} in {v:?}");
                // Count the points outside, behind a face as close as the closest one: the
                // cases a side taken from one of several equally close faces gets wrong.
                let nearest = closest.nearest.unwrap().distance;
                if !inside && any_behind.is_some_and(|b| same_distance(b, nearest)) {
                    beside_ridge += 1;
                }
            }
        }
        assert!(beside_ridge > 100, "{beside_ridge}");
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
                // Every other scene falls fast: long swept boxes, whose closest candidates
                // may be farther than the margin.
                Vec3::new(0.02 * rng.signed(), -0.05, 0.02 * rng.signed())
                    * if scene % 2 == 1 { 8.0 } else { 1.0 },
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
            // Brute force over every vertex and triangle: the closest triangles of all the
            // broadphase's candidates say whether the vertex is outside (of a tet surface: in
            // front of all of them), and then only a contact from the front counts.
            let mut expected = Vec::new();
            let tol = 1e-12;
            let beats = |d: f64, g: f64, than: Option<(f64, f64)>| {
                than.is_none_or(|(bd, bs)| {
                    d < bd - tol * (1.0 + bd) || (d <= bd + tol * (1.0 + bd) && g > bs)
                })
            };
            // The side by the closest of `triangles`: (distance, whether the vertex is in
            // front of all of them, to round-off).
            let side = |ps: Vec3, triangles: &mut dyn Iterator<Item = [Vec3; 3]>| {
                let mut best: Option<(f64, bool)> = None;
                for t in triangles {
                    let c = point_triangle_contact(&ps, &t[0], &t[1], &t[2], 1e9, 1e9).unwrap();
                    let d = (ps - c.closest).norm();
                    let front = c.gap > 0.0;
                    best = match best {
                        Some((bd, f)) if (d - bd).abs() <= tol * (1.0 + bd) => {
                            Some((bd, f && front))
                        }
                        Some(b) if d > b.0 => Some(b),
                        _ => Some((d, front)),
                    };
                }
                best
            };
            for &v in a.mesh.surface_vertices() {
                let (ps, pe) = (a.start[v as usize], a.end[v as usize]);
                let mut candidates: Vec<[Vec3; 3]> = Vec::new();
                let mut any: Option<(f64, f64, u32)> = None;
                let mut front: Option<(f64, f64, u32)> = None;
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
                    let Some(c) =
                        point_triangle_contact(&ps, &t0, &t1, &t2, f64::INFINITY, f64::INFINITY)
                    else {
                        continue;
                    };
                    candidates.push([t0, t1, t2]);
                    let offset = ps - c.closest;
                    let d = offset.norm();
                    let signed = if c.gap > 0.0 { d } else { c.gap };
                    let sweep = (pe - ps).norm();
                    let touching = if c.gap >= 0.0 {
                        d < margin + sweep
                    } else {
                        d <= depth_limit
                    };
                    let normal = if c.gap > 0.0 && d > 1e-12 {
                        offset / d
                    } else {
                        c.normal
                    };
                    let q: Vec3 = (0..3).map(|k| c.weights[k] * b.end[tri[k] as usize]).sum();
                    if !touching || normal.dot(&(pe - q)) >= margin {
                        continue;
                    }
                    if beats(d, signed, any.map(|(bd, bs, _)| (bd, bs))) {
                        any = Some((d, signed, t as u32));
                    }
                    if signed > 0.0 && beats(d, signed, front.map(|(bd, bs, _)| (bd, bs))) {
                        front = Some((d, signed, t as u32));
                    }
                }
                let outside = side(ps, &mut candidates.iter().copied());
                let outside = outside.is_some_and(|(_, front)| front);
                if let Some((_, _, t)) = if outside { front } else { any } {
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
