//! Edge-edge contacts between surface edges of two soft bodies, or of one body
//! (self-collision): a tet surface's boundary edges, or a drawn mesh's edges between its
//! embedded points ([`super::surface_shape`]).
//!
//! Point-triangle contacts ([`super::soft`]) keep every surface *vertex* out of the other
//! surface, but two surfaces can still cross with no vertex inside the other: a cube's edge
//! pressed across the edge of another cube's face, or a face draped over a corner, where an
//! edge passes through a face between its vertices. Li et al. 2015 has only the
//! point-triangle row (eq. (8)); the edge-edge row here is its analogue for two edges, built the
//! same way: with the closest points `p = (1 - s) a0 + s a1` and `q = (1 - t) b0 + t b1` of the
//! two edges and the unit direction `n` from `q` to `p`, all frozen at detection,
//!
//! `n' ((1 - s) a0 + s a1 - (1 - t) b0 - t b1) >= 0`,
//!
//! linear in the four vertices, so it is a row of the same QP.
//!
//! Only pairs whose closest points are interior to both edges are kept: where the closest point
//! is an end of an edge, that vertex's point-triangle contact already covers it. Nearly parallel
//! edges are skipped too (their closest points are ill defined, and the vertices at their ends
//! cover them). Detection is speculative like the other contacts: the pair is examined where the
//! step starts, with the margin widened by how far its vertices move, and kept when the frozen
//! gap at the predicted positions comes within the margin. A pair already crossing where the
//! step starts has no side to keep and is left to the point-triangle contacts.
//!
//! Which pairs get a row (`edges_pair`): two convex creases (a cube's edges, not the
//! diagonals of its flat faces) with the normal in both edges' normal cones (the directions
//! between each edge's two face normals); or, within one body, a crease pressed into an edge
//! that is no convex crease (flat, or concave where a surface is draped over the crease), with
//! the normal strictly inside the crease's cone and in front of the other edge's faces. A face
//! resting on a face gets no edge rows competing with its vertex rows, and an edge already
//! inside the other body is not held there.
//!
//! The world uses these contacts between two bodies and, with self-collision on, within one
//! body (a layer folded over onto the side edge of the layer below), when
//! `WorldSettings::edge_contacts` is on (the default). On a drawn surface an edge's ends are
//! drawn points, each carried by its tet's four vertices: the island expands them as it does a
//! drawn point of a vertex-triangle contact. Without them, two detailed bodies pressed together
//! crossed where their drawn creases met between the points (edges through faces), and the
//! crossing grew from there.

use super::broadphase::{BodyBvh, candidate_edge_pairs};
use super::soft::SoftSurface;
use super::surface_shape::SurfaceShape;
use crate::sim::math::Vec3;

/// Largest `sin^2` of the angle between two edges treated as parallel (15 degrees). Nearly
/// parallel edges have closest points that jump along them with the slightest motion, and a
/// normal with a sideways lean that the vertices at their ends do not need.
const PARALLEL_SIN2: f64 = 0.067;

/// Closest points strictly inside an edge are at parameters in `(END, 1 - END)`.
const END: f64 = 1e-6;

/// How far (cosine of the angle, 5 degrees) a contact normal may lean off an edge's normal
/// cone ([`exit_through_edge`]).
const CONE_SLACK_COS: f64 = 0.996;

/// An edge is a crease when its two faces' normals are more than 20 degrees apart (cosine).
const CREASE_COS: f64 = 0.94;

/// How far (sine of the angle, 5 degrees) a contact normal may lean behind the faces of a flat
/// or concave edge ([`Exit::Front`]).
const FRONT_SLACK: f64 = -0.087;

/// A surface edge of one body against a surface edge of another body, or of the same body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EdgeContact {
    /// Body of the first edge (an index chosen by the caller).
    pub body_a: u32,
    /// The first edge's ends: surface points (mesh vertices on a tet surface, drawn points on a
    /// drawn one, [`super::SurfaceShape`]).
    pub edge_a: [u32; 2],
    /// Body of the second edge.
    pub body_b: u32,
    /// The second edge's ends (surface points).
    pub edge_b: [u32; 2],
    /// Parameter of the closest point on the first edge, `(1 - s) a0 + s a1`, frozen at
    /// detection.
    pub s: f64,
    /// Parameter of the closest point on the second edge, `(1 - t) b0 + t b1`.
    pub t: f64,
    /// Unit normal from the second edge's closest point to the first's, frozen at detection.
    pub normal: Vec3,
    /// Predicted penetration (m) along the normal; negative when the edges stay apart, within
    /// the margin.
    pub depth: f64,
}

impl EdgeContact {
    /// Whether the contact is a self-collision.
    pub fn is_self(&self) -> bool {
        self.body_a == self.body_b
    }

    /// The closest point on the first edge at surface point positions `x_a` of its body (m).
    pub fn point_a(&self, x_a: &[Vec3]) -> Vec3 {
        (1.0 - self.s) * x_a[self.edge_a[0] as usize] + self.s * x_a[self.edge_a[1] as usize]
    }

    /// The closest point on the second edge at surface point positions `x_b` of its body (m).
    pub fn point_b(&self, x_b: &[Vec3]) -> Vec3 {
        (1.0 - self.t) * x_b[self.edge_b[0] as usize] + self.t * x_b[self.edge_b[1] as usize]
    }

    /// The signed gap `n' (p - q)` (m) at surface point positions of the two bodies.
    pub fn gap(&self, x_a: &[Vec3], x_b: &[Vec3]) -> f64 {
        self.normal.dot(&(self.point_a(x_a) - self.point_b(x_b)))
    }

    /// `(body, surface point, weight)` of the four terms of `n' (sum weight x)`, first edge
    /// positive.
    pub fn terms(&self) -> [(u32, u32, f64); 4] {
        [
            (self.body_a, self.edge_a[0], 1.0 - self.s),
            (self.body_a, self.edge_a[1], self.s),
            (self.body_b, self.edge_b[0], self.t - 1.0),
            (self.body_b, self.edge_b[1], -self.t),
        ]
    }
}

/// Fits `bvh`'s edge tree to a body's motion from `x_start` to `x_end` (m, per surface point):
/// its surface's edges, grown so that pairs within `margin` (m) are candidates.
pub fn fit_edge_bvh(
    bvh: &mut BodyBvh,
    shape: SurfaceShape<'_>,
    x_start: &[Vec3],
    x_end: &[Vec3],
    margin: f64,
) {
    bvh.update_edges(x_start, x_end, shape.edges(), margin);
}

/// How a unit direction `d` leaves a body at one of its surface edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    /// The edge is a convex crease (its faces' normals more than [`CREASE_COS`] apart) and `d`
    /// lies between the two face normals, or within [`CONE_SLACK_COS`] of one.
    Crease,
    /// As [`Exit::Crease`], and `d` lies strictly inside the crease's cone: more than
    /// [`CONE_SLACK_COS`] away from both face normals.
    InsideCrease,
    /// The edge is not a convex crease (flat, or concave where the surface wraps around
    /// something), and `d` is in front of both its faces, within [`FRONT_SLACK`].
    Front,
    /// None of these: `d` does not leave the body through the edge.
    No,
}

/// How unit direction `d` leaves the body through edge `e` of its surface `shape` at surface
/// point positions `x`.
fn exit_through_edge(shape: SurfaceShape<'_>, x: &[Vec3], e: usize, d: &Vec3) -> Exit {
    let triangles = shape.triangles();
    let [t1, t2] = shape.edge_triangles()[e].map(|t| triangles[t as usize]);
    let normal = |t: [u32; 3]| {
        let [p, q, r] = t.map(|v| x[v as usize]);
        (q - p).cross(&(r - p)).try_normalize(0.0)
    };
    let (Some(f1), Some(f2)) = (normal(t1), normal(t2)) else {
        return Exit::No;
    };
    // Convex: the second face's far corner is behind the first face's plane.
    let edge = shape.edges()[e];
    let Some(&far) = t2.iter().find(|v| !edge.contains(v)) else {
        return Exit::No;
    };
    let convex = f1.dot(&(x[far as usize] - x[edge[0] as usize])) < 0.0;
    if !convex || f1.dot(&f2) > CREASE_COS {
        let in_front = d.dot(&f1) > FRONT_SLACK && d.dot(&f2) > FRONT_SLACK;
        return if in_front { Exit::Front } else { Exit::No };
    }
    let near_face = d.dot(&f1) >= CONE_SLACK_COS || d.dot(&f2) >= CONE_SLACK_COS;
    let between = f1.cross(d).dot(&d.cross(&f2)) > 0.0 && d.dot(&(f1 + f2)) > 0.0;
    match (between, near_face) {
        (true, false) => Exit::InsideCrease,
        (_, true) => Exit::Crease,
        (false, false) => Exit::No,
    }
}

/// Whether the pair of edges, with `exit_b` how the normal leaves the second body and `exit_a`
/// how its opposite leaves the first, gets a row:
///
/// - **two creases** crossing (a cube's edge across the edge of the cube below), the normal in
///   both cones;
/// - **a crease pressed into a flat or concave edge**, the normal strictly inside the crease's
///   cone and in front of the other edge's faces: a surface draped over a ridge (a folded layer
///   bent over the side edge of the layer below), where the ridge crosses the draped faces
///   between their vertices and no vertex-triangle row sees it.
///
/// A crease whose normal is one of its face normals (a cube's bottom edge on a flat face) pairs
/// with no flat edge: face-on-face contact has no edge rows competing with its vertex rows.
///
/// The second kind only with `draped`, which the world sets within one body. Between two bodies
/// it made a pile of twenty jelly bodies restless (kinetic energy peaks of 6 J while settling,
/// against 2 J without), and two volumetric bodies rarely wrap around each other's edges.
fn edges_pair(exit_a: Exit, exit_b: Exit, draped: bool) -> bool {
    use Exit::{Crease, Front, InsideCrease};
    match (exit_a, exit_b) {
        (Crease | InsideCrease, Crease | InsideCrease) => true,
        (InsideCrease, Front) | (Front, InsideCrease) => draped,
        _ => false,
    }
}

/// Parameters `(s, t)` of the closest points of the lines through `a0 a1` and `b0 b1`, the
/// stationary point of `|a0 + s da - b0 - t db|^2`; `None` where the squared sine of their
/// angle is not above `parallel` (nearly parallel or degenerate edges).
pub fn line_closest_parameters(
    (a0, a1): (&Vec3, &Vec3),
    (b0, b1): (&Vec3, &Vec3),
    parallel: f64,
) -> Option<(f64, f64)> {
    let (da, db, r) = (a1 - a0, b1 - b0, a0 - b0);
    let (aa, bb, ab) = (da.dot(&da), db.dot(&db), da.dot(&db));
    let denom = aa * bb - ab * ab;
    if !(denom > parallel * aa * bb) {
        return None;
    }
    let (ar, br) = (da.dot(&r), db.dot(&r));
    Some(((ab * br - bb * ar) / denom, (aa * br - ab * ar) / denom))
}

/// Parameters `(s, t)` of the closest points of segments `a0 a1` and `b0 b1` when both lie
/// strictly inside their segments and the segments are not (nearly) parallel; `None` otherwise.
pub fn edge_closest_parameters(a0: &Vec3, a1: &Vec3, b0: &Vec3, b1: &Vec3) -> Option<(f64, f64)> {
    let (s, t) = line_closest_parameters((a0, a1), (b0, b1), PARALLEL_SIN2)?;
    let inside = |u: f64| u > END && u < 1.0 - END;
    (inside(s) && inside(t)).then_some((s, t))
}

/// Appends to `out` the contacts between `a`'s and `b`'s surface edges (`a` and `b` the same
/// body for self-collision, where neighbouring edges are skipped): pairs whose closest points
/// are interior to both edges, apart where the motion starts, and within `margin` (m) of each
/// other along their frozen normal at the end of the motion, and whose edges pair
/// (`edges_pair`: with `draped`, a crease pressed into a flat or concave edge too). Call once
/// per unordered pair of bodies. The BVHs' edge trees must be fitted ([`fit_edge_bvh`]).
/// `pairs` is scratch.
pub fn detect_edge_contacts(
    a: &SoftSurface<'_>,
    b: &SoftSurface<'_>,
    margin: f64,
    draped: bool,
    pairs: &mut Vec<(u32, u32)>,
    out: &mut Vec<EdgeContact>,
) {
    let self_collision = a.body == b.body;
    candidate_edge_pairs(a.bvh, b.bvh, pairs);
    let (edges_a, edges_b) = (a.shape.edges(), b.shape.edges());
    for &(i, j) in pairs.iter() {
        let (ea, eb) = (edges_a[i as usize], edges_b[j as usize]);
        if self_collision && a.shape.are_near_edges(&ea, &eb) {
            continue;
        }
        let [a0, a1] = ea.map(|v| a.x_start[v as usize]);
        let [b0, b1] = eb.map(|v| b.x_start[v as usize]);
        let Some((s, t)) = edge_closest_parameters(&a0, &a1, &b0, &b1) else {
            continue;
        };
        let offset = (1.0 - s) * a0 + s * a1 - (1.0 - t) * b0 - t * b1;
        let distance = offset.norm();
        if !(distance > 1e-12) {
            continue;
        }
        let moved = |x0: &[Vec3], x1: &[Vec3], e: [u32; 2]| {
            e.iter()
                .map(|&v| (x1[v as usize] - x0[v as usize]).norm())
                .fold(0.0, f64::max)
        };
        let sweep = moved(a.x_start, a.x_end, ea) + moved(b.x_start, b.x_end, eb);
        if distance >= margin + sweep {
            continue;
        }
        // The normal leaves the second body through its edge and enters the first through its
        // edge (`edges_pair`).
        let n = offset / distance;
        let exit = |s: &SoftSurface<'_>, e: u32, d: &Vec3| {
            exit_through_edge(s.shape, s.x_start, e as usize, d)
        };
        if !edges_pair(exit(a, i, &-n), exit(b, j, &n), draped) {
            continue;
        }
        let mut contact = EdgeContact {
            body_a: a.body,
            edge_a: ea,
            body_b: b.body,
            edge_b: eb,
            s,
            t,
            normal: n,
            depth: 0.0,
        };
        let predicted = contact.gap(a.x_end, b.x_end);
        if predicted >= margin {
            continue;
        }
        contact.depth = -predicted;
        out.push(contact);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::mesh::TetMesh;
    use crate::sim::test_rng::Rng;

    #[test]
    fn closest_parameters_match_a_dense_search() {
        let mut rng = Rng(0x0DDB_A11E_D6E5_1DE5);
        let mut point = || Vec3::new(rng.signed(), rng.signed(), rng.signed());
        let mut interior = 0;
        for _ in 0..300 {
            let (a0, a1, b0, b1) = (point(), point(), point(), point());
            let distance =
                |s: f64, t: f64| ((1.0 - s) * a0 + s * a1 - (1.0 - t) * b0 - t * b1).norm();
            // The segments' closest pair by a grid search refined around its best cell.
            let n = 200;
            let (mut best, mut arg) = (f64::INFINITY, (0.0, 0.0));
            for i in 0..=n {
                for j in 0..=n {
                    let (s, t) = (i as f64 / n as f64, j as f64 / n as f64);
                    if distance(s, t) < best {
                        best = distance(s, t);
                        arg = (s, t);
                    }
                }
            }
            match edge_closest_parameters(&a0, &a1, &b0, &b1) {
                Some((s, t)) => {
                    interior += 1;
                    assert!(distance(s, t) <= best + 1e-12);
                    assert!((s - arg.0).abs() < 0.02 && (t - arg.1).abs() < 0.02);
                    // The offset is perpendicular to both edges.
                    let offset = (1.0 - s) * a0 + s * a1 - (1.0 - t) * b0 - t * b1;
                    assert!(offset.dot(&(a1 - a0)).abs() < 1e-12);
                    assert!(offset.dot(&(b1 - b0)).abs() < 1e-12);
                }
                // Otherwise the edges are nearly parallel or the closest pair involves an end
                // (on the grid's border).
                None => {
                    let (da, db) = ((a1 - a0).normalize(), (b1 - b0).normalize());
                    let parallel = da.cross(&db).norm_squared() <= PARALLEL_SIN2 + 1e-12;
                    let border = |u: f64| !(0.02..=0.98).contains(&u);
                    assert!(parallel || border(arg.0) || border(arg.1), "{arg:?}");
                }
            }
        }
        assert!(interior > 30, "only {interior} interior pairs");
        // Parallel edges have no single closest pair.
        let (p, q) = (Vec3::zeros(), Vec3::x());
        let up = Vec3::new(0.5, 0.1, 0.0);
        assert_eq!(
            edge_closest_parameters(&p, &q, &up, &(up + Vec3::x())),
            None
        );
    }

    use crate::sim::contact::soft::fit_surface_bvh;
    use crate::sim::contact::surface_shape::DrawnMesh;
    use crate::sim::contact::test_body::MovingBody;
    use crate::sim::embed::EmbeddedPoint;
    use nalgebra::Rotation3;
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4};

    /// A cube of half size 0.5 m and one cell (its top face: two triangles split by a diagonal
    /// through the centre), at rest around the origin.
    fn unit_cube() -> MovingBody {
        MovingBody::placed(TetMesh::cuboid(Vec3::repeat(0.5), 1), |p| *p, Vec3::zeros())
    }

    /// A one-cell cube of half size `half` (m) standing on an edge (a ridge) 4 mm above the unit
    /// cube's top face, the ridge along x (or along z when `along_z`) at `(x, z)`, moving by
    /// `drop` (m) down.
    fn ridge(half: f64, along_z: bool, x: f64, z: f64, drop: f64) -> MovingBody {
        let tilt = Rotation3::from_euler_angles(FRAC_PI_4, 0.0, 0.0);
        let turn = Rotation3::from_euler_angles(0.0, if along_z { FRAC_PI_2 } else { 0.0 }, 0.0);
        let at = Vec3::new(x, 0.5 + 0.004 + half * 2f64.sqrt(), z);
        MovingBody::placed(
            TetMesh::cuboid(Vec3::repeat(half), 1),
            |p| turn * (tilt * p) + at,
            Vec3::new(0.0, -drop, 0.0),
        )
    }

    /// The edge contacts of `a` (body 1) against `b` (body 0) within 1 cm.
    fn edge_contacts(a: &MovingBody, b: &MovingBody, draped: bool) -> Vec<EdgeContact> {
        let (mut pairs, mut out) = (Vec::new(), Vec::new());
        detect_edge_contacts(
            &a.surface(1),
            &b.surface(0),
            0.01,
            draped,
            &mut pairs,
            &mut out,
        );
        out
    }

    #[test]
    fn crossed_cube_edges_meet_at_one_point_with_the_separating_normal() {
        // A unit cube, and a second one standing on an edge 4 mm above it (its ridge along x at
        // z = 0.5), predicted to drop by 1 cm. The ridge is parallel to the lower top edge at
        // z = 0.5 — no crossing there — and crosses the lower cube's top edges along z (at
        // x = -0.5 and x = 0.5) at their ends only, so no interior pair either: everything is
        // left to the point-triangle contacts.
        let lower = unit_cube();
        let out = edge_contacts(&ridge(0.5, false, 0.0, 0.5, 0.01), &lower, false);
        assert!(out.is_empty(), "{out:?}");
        // Turned 90 degrees about y, the ridge runs along z (z in [0.3, 1.3], clear of the
        // lower top face's diagonal) and crosses the lower top edge along x (at z = 0.5) in its
        // interior.
        let crossed = ridge(0.5, true, 0.1, 0.8, 0.01);
        let out = edge_contacts(&crossed, &lower, false);
        assert_eq!(out.len(), 1, "{out:?}");
        let c = out[0];
        assert!((c.normal - Vec3::y()).norm() < 1e-9, "{:?}", c.normal);
        assert!((c.gap(&crossed.start, &lower.start) - 0.004).abs() < 1e-9);
        assert!((c.depth - 0.006).abs() < 1e-9, "{}", c.depth);
        // The contact point is the crossing: x = 0.1 on the lower edge, z = 0.5 on the ridge.
        let q = c.point_b(&lower.start);
        assert!((q - Vec3::new(0.1, 0.5, 0.5)).norm() < 1e-9, "{q:?}");
        // The terms sum the gap: n' sum w x.
        let gap: f64 = c
            .terms()
            .iter()
            .map(|&(b, v, w)| {
                let x = if b == 1 { &crossed.start } else { &lower.start };
                w * c.normal.dot(&x[v as usize])
            })
            .sum();
        assert!((gap - 0.004).abs() < 1e-9);
        // Moving away: nothing.
        assert!(edge_contacts(&ridge(0.5, true, 0.1, 0.8, -0.01), &lower, false).is_empty());
    }

    #[test]
    fn a_draped_ridge_over_a_flat_face_pairs_with_its_diagonal_but_a_face_on_a_face_does_not() {
        // A half-size cube standing on an edge 4 mm above the unit cube's top face, its ridge
        // along z at x = 0.1 (z in [-0.25, 0.25]), predicted to drop by 1 cm. The ridge crosses
        // the face's diagonal above the face's interior, where no vertex of either body is: only
        // an edge row keeps it out. It pairs when `draped` (the world sets it within one body),
        // not otherwise.
        let lower = unit_cube();
        let over = ridge(0.25, true, 0.1, 0.0, 0.01);
        assert!(edge_contacts(&over, &lower, false).is_empty());
        let out = edge_contacts(&over, &lower, true);
        assert_eq!(out.len(), 1, "{out:?}");
        let c = out[0];
        assert!((c.normal - Vec3::y()).norm() < 1e-9, "{:?}", c.normal);
        assert!((c.gap(&over.start, &lower.start) - 0.004).abs() < 1e-9);
        let q = c.point_b(&lower.start);
        assert!(
            (q.x - 0.1).abs() < 1e-9 && (q.y - 0.5).abs() < 1e-9,
            "{q:?}"
        );
        assert!((q.z.abs() - 0.1).abs() < 1e-9, "{q:?}");
        // The same cube lying flat, 4 mm above the face: its bottom edges are creases whose
        // normal is a face normal, so they pair with no flat edge, and nothing else pairs.
        let flat = MovingBody::new(
            TetMesh::cuboid(Vec3::repeat(0.25), 1),
            Vec3::new(0.1, 0.5 + 0.004 + 0.25, 0.0),
            Vec3::new(0.0, -0.01, 0.0),
        );
        let out = edge_contacts(&flat, &lower, true);
        assert!(out.is_empty(), "{out:?}");
    }

    /// A body's boundary as a drawn mesh over its surface vertices, moving as the body does,
    /// with its trees fitted (1 cm margin); and each drawn point's mesh vertex.
    struct DrawnBody {
        mesh: DrawnMesh,
        start: Vec<Vec3>,
        end: Vec<Vec3>,
        bvh: BodyBvh,
        vertex: Vec<u32>,
    }

    impl DrawnBody {
        fn of(body: &MovingBody) -> Self {
            let vertex = body.mesh.surface_vertices().to_vec();
            let mut point = vec![u32::MAX; body.mesh.vertex_count()];
            for (i, &v) in vertex.iter().enumerate() {
                point[v as usize] = i as u32;
            }
            let triangles = body.mesh.surface_triangles().iter();
            let mesh = DrawnMesh::new(
                vertex.iter().map(|&v| EmbeddedPoint::vertex(v)).collect(),
                triangles.map(|t| t.map(|v| point[v as usize])).collect(),
            );
            let at = |x: &[Vec3]| vertex.iter().map(|&v| x[v as usize]).collect::<Vec<_>>();
            let (start, end) = (at(&body.start), at(&body.end));
            let mut bvh = BodyBvh::default();
            let shape = SurfaceShape::Drawn(&mesh);
            fit_surface_bvh(&mut bvh, shape, &start, &end, 0.01, &mut Vec::new());
            fit_edge_bvh(&mut bvh, shape, &start, &end, 0.01);
            Self {
                mesh,
                start,
                end,
                bvh,
                vertex,
            }
        }

        fn surface(&self, body: u32) -> SoftSurface<'_> {
            SoftSurface {
                body,
                shape: SurfaceShape::Drawn(&self.mesh),
                x_start: &self.start,
                x_end: &self.end,
                x_reference: &self.start,
                bvh: &self.bvh,
            }
        }
    }

    #[test]
    fn a_drawn_surface_finds_the_edge_contacts_of_the_same_triangles_on_a_tet_surface() {
        // The scenes of the two tests above, the cubes' boundaries given as drawn meshes over
        // their surface vertices: the same contacts, with drawn points for mesh vertices.
        let lower = unit_cube();
        let scenes = [
            (ridge(0.5, false, 0.0, 0.5, 0.01), false, 0),
            (ridge(0.5, true, 0.1, 0.8, 0.01), false, 1),
            (ridge(0.25, true, 0.1, 0.0, 0.01), false, 0),
            (ridge(0.25, true, 0.1, 0.0, 0.01), true, 1),
            (ridge(0.5, true, 0.1, 0.8, -0.01), false, 0),
        ];
        let drawn_lower = DrawnBody::of(&lower);
        for (upper, draped, count) in scenes {
            let on_tets = edge_contacts(&upper, &lower, draped);
            let drawn_upper = DrawnBody::of(&upper);
            let (mut pairs, mut on_drawn) = (Vec::new(), Vec::new());
            detect_edge_contacts(
                &drawn_upper.surface(1),
                &drawn_lower.surface(0),
                0.01,
                draped,
                &mut pairs,
                &mut on_drawn,
            );
            assert_eq!(on_tets.len(), count, "{on_tets:?}");
            assert_eq!(on_drawn.len(), count, "{on_drawn:?}");
            for (t, d) in on_tets.iter().zip(&on_drawn) {
                let mapped = EdgeContact {
                    edge_a: d.edge_a.map(|p| drawn_upper.vertex[p as usize]),
                    edge_b: d.edge_b.map(|p| drawn_lower.vertex[p as usize]),
                    ..*d
                };
                assert_eq!(&mapped, t);
            }
        }
    }

    #[test]
    fn a_resting_cube_has_no_edge_self_contacts() {
        let cube = MovingBody::placed(TetMesh::cuboid(Vec3::repeat(0.5), 4), |p| *p, Vec3::zeros());
        let (mut pairs, mut out) = (Vec::new(), Vec::new());
        detect_edge_contacts(
            &cube.surface(0),
            &cube.surface(0),
            0.01,
            true,
            &mut pairs,
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        // Every self pair comes once.
        crate::sim::contact::candidate_edge_pairs(&cube.bvh, &cube.bvh, &mut pairs);
        assert!(pairs.iter().all(|&(i, j)| i < j));
    }
}
