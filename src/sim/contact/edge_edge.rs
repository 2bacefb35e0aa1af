//! Edge-edge contacts between boundary edges of two soft bodies, or of one body
//! (self-collision).
//!
//! Point-triangle contacts ([`super::soft`]) keep every surface *vertex* out of the other
//! surface, but two surfaces can still cross with no vertex inside the other: a cube's edge
//! pressed across the edge of another cube's face, or a face draped over a corner, where an
//! edge passes through a face between its vertices. `mprgp-collision-qp.txt` has only the
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
//! step starts has no side to keep and is left to the point-triangle contacts. Both edges must
//! be convex creases (a cube's edges, not the diagonals of its flat faces), and the normal must
//! lie in both edges' normal cones (the directions between each edge's two face normals): a
//! face resting on a face gets no edge rows competing with its vertex rows, and an edge already
//! inside the other body is not held there.
//!
//! The world uses these contacts only between two different bodies, and only when
//! `WorldSettings::edge_contacts` is on (the default).

use super::broadphase::{BodyBvh, candidate_edge_pairs};
use super::soft::SoftSurface;
use crate::sim::math::Vec3;
use crate::sim::mesh::TetMesh;

/// Largest `sin^2` of the angle between two edges treated as parallel (15 degrees). Nearly
/// parallel edges have closest points that jump along them with the slightest motion, and a
/// normal with a sideways lean that the vertices at their ends do not need.
const PARALLEL_SIN2: f64 = 0.067;

/// Closest points strictly inside an edge are at parameters in `(END, 1 - END)`.
const END: f64 = 1e-6;

/// How far (cosine of the angle, 5 degrees) a contact normal may lean off an edge's normal
/// cone ([`leaves_through_crease`]).
const CONE_SLACK_COS: f64 = 0.996;

/// An edge is a crease when its two faces' normals are more than 20 degrees apart (cosine).
const CREASE_COS: f64 = 0.94;

/// A boundary edge of one body against a boundary edge of another body, or of the same body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EdgeContact {
    /// Body of the first edge (an index chosen by the caller).
    pub body_a: u32,
    /// The first edge's vertices (indices into its body's mesh).
    pub edge_a: [u32; 2],
    /// Body of the second edge.
    pub body_b: u32,
    /// The second edge's vertices.
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

    /// The closest point on the first edge at vertex positions `x_a` of its body (m).
    pub fn point_a(&self, x_a: &[Vec3]) -> Vec3 {
        (1.0 - self.s) * x_a[self.edge_a[0] as usize] + self.s * x_a[self.edge_a[1] as usize]
    }

    /// The closest point on the second edge at vertex positions `x_b` of its body (m).
    pub fn point_b(&self, x_b: &[Vec3]) -> Vec3 {
        (1.0 - self.t) * x_b[self.edge_b[0] as usize] + self.t * x_b[self.edge_b[1] as usize]
    }

    /// The signed gap `n' (p - q)` (m) at vertex positions of the two bodies.
    pub fn gap(&self, x_a: &[Vec3], x_b: &[Vec3]) -> f64 {
        self.normal.dot(&(self.point_a(x_a) - self.point_b(x_b)))
    }

    /// `(body, vertex, weight)` of the four terms of `n' (sum weight x)`, first edge positive.
    pub fn terms(&self) -> [(u32, u32, f64); 4] {
        [
            (self.body_a, self.edge_a[0], 1.0 - self.s),
            (self.body_a, self.edge_a[1], self.s),
            (self.body_b, self.edge_b[0], self.t - 1.0),
            (self.body_b, self.edge_b[1], -self.t),
        ]
    }
}

/// Fits `bvh`'s edge tree to a body's motion from `x_start` to `x_end` (m): its boundary
/// edges, grown so that pairs within `margin` (m) are candidates.
pub fn fit_edge_bvh(
    bvh: &mut BodyBvh,
    mesh: &TetMesh,
    x_start: &[Vec3],
    x_end: &[Vec3],
    margin: f64,
) {
    bvh.update_edges(x_start, x_end, mesh.surface_edges(), margin);
}

/// Whether boundary edge `e` of `mesh` at positions `x` is a convex crease (its faces' normals
/// more than [`CREASE_COS`] apart) and unit direction `d` leaves the body through it: `d` lies
/// between the two face normals, or within [`CONE_SLACK_COS`] of one.
///
/// Only creases pair: where two faces meet (nearly) flat, the vertex-triangle contacts of the
/// faces around already keep the surfaces apart, and an edge-edge row there would compete with
/// them for the same vertices. Face-on-face contact then has no edge rows at all, and a row
/// whose normal lies outside a cone (an edge merely beside another, or already inside the
/// other body) is never made.
fn leaves_through_crease(mesh: &TetMesh, x: &[Vec3], e: usize, d: &Vec3) -> bool {
    let [t1, t2] = mesh.edge_triangles()[e].map(|t| mesh.surface_triangles()[t as usize]);
    let normal = |t: [u32; 3]| {
        let [p, q, r] = t.map(|v| x[v as usize]);
        (q - p).cross(&(r - p)).try_normalize(0.0)
    };
    let (Some(f1), Some(f2)) = (normal(t1), normal(t2)) else {
        return false;
    };
    // Convex: the second face's far corner is behind the first face's plane.
    let edge = mesh.surface_edges()[e];
    let Some(&far) = t2.iter().find(|v| !edge.contains(v)) else {
        return false;
    };
    let convex = f1.dot(&(x[far as usize] - x[edge[0] as usize])) < 0.0;
    if !convex || f1.dot(&f2) > CREASE_COS {
        return false;
    }
    d.dot(&f1) >= CONE_SLACK_COS
        || d.dot(&f2) >= CONE_SLACK_COS
        || (f1.cross(d).dot(&d.cross(&f2)) > 0.0 && d.dot(&(f1 + f2)) > 0.0)
}

/// Parameters `(s, t)` of the closest points of segments `a0 a1` and `b0 b1` when both lie
/// strictly inside their segments and the segments are not (nearly) parallel; `None` otherwise.
pub fn edge_closest_parameters(a0: &Vec3, a1: &Vec3, b0: &Vec3, b1: &Vec3) -> Option<(f64, f64)> {
    let (da, db, r) = (a1 - a0, b1 - b0, a0 - b0);
    let (aa, bb, ab) = (da.dot(&da), db.dot(&db), da.dot(&db));
    let denom = aa * bb - ab * ab;
    if !(denom > PARALLEL_SIN2 * aa * bb) {
        return None;
    }
    let (ar, br) = (da.dot(&r), db.dot(&r));
    // Stationary point of |a0 + s da - b0 - t db|^2: the lines' closest points.
    let s = (ab * br - bb * ar) / denom;
    let t = (aa * br - ab * ar) / denom;
    let inside = |u: f64| u > END && u < 1.0 - END;
    (inside(s) && inside(t)).then_some((s, t))
}

/// Appends to `out` the contacts between `a`'s and `b`'s boundary edges (`a` and `b` the same
/// body for self-collision, where neighbouring edges are skipped): pairs whose closest points
/// are interior to both edges, apart where the motion starts, and within `margin` (m) of each
/// other along their frozen normal at the end of the motion. Call once per unordered pair of
/// bodies. The BVHs' edge trees must be fitted ([`fit_edge_bvh`]). `pairs` is scratch.
pub fn detect_edge_contacts(
    a: &SoftSurface<'_>,
    b: &SoftSurface<'_>,
    margin: f64,
    pairs: &mut Vec<(u32, u32)>,
    out: &mut Vec<EdgeContact>,
) {
    let self_collision = a.body == b.body;
    candidate_edge_pairs(a.bvh, b.bvh, pairs);
    let (edges_a, edges_b) = (a.mesh.surface_edges(), b.mesh.surface_edges());
    for &(i, j) in pairs.iter() {
        let (ea, eb) = (edges_a[i as usize], edges_b[j as usize]);
        if self_collision && a.mesh.are_near_edges(&ea, &eb) {
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
        // Both edges are creases, and the normal leaves the second body through its edge and
        // enters the first through its edge.
        let n = offset / distance;
        let cone = |s: &SoftSurface<'_>, e: u32, d: &Vec3| {
            leaves_through_crease(s.mesh, s.x_start, e as usize, d)
        };
        if !(cone(b, j, &n) && cone(a, i, &-n)) {
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

    use crate::sim::contact::test_body::MovingBody;

    #[test]
    fn crossed_cube_edges_meet_at_one_point_with_the_separating_normal() {
        // A unit cube (one cell: its top edges are whole edges), and a second one standing on
        // an edge 4 mm above it, predicted to drop by 1 cm.
        let lower =
            MovingBody::placed(TetMesh::cuboid(Vec3::repeat(0.5), 1), |p| *p, Vec3::zeros());
        // Rotated 45 degrees about x, so that its lowest edge (a ridge) runs along x.
        let tilt = nalgebra::Rotation3::from_euler_angles(std::f64::consts::FRAC_PI_4, 0.0, 0.0);
        let upper = MovingBody::placed(
            TetMesh::cuboid(Vec3::repeat(0.5), 1),
            |p| tilt * p + Vec3::new(0.0, 0.5 + 0.004 + 0.5 * 2f64.sqrt(), 0.5),
            Vec3::new(0.0, -0.01, 0.0),
        );
        let (mut pairs, mut out) = (Vec::new(), Vec::new());
        detect_edge_contacts(
            &upper.surface(1),
            &lower.surface(0),
            0.01,
            &mut pairs,
            &mut out,
        );
        // The upper cube's lowest edge runs along x at y = 0.504, z = 0.5: parallel to the
        // lower top edge at z = 0.5 — no crossing there. Its bottom is a ridge along x, which
        // crosses the lower cube's top edges along z (at x = -0.5 and x = 0.5) at their ends
        // only, so no interior pair either: everything is left to the point-triangle contacts.
        assert!(out.is_empty(), "{out:?}");
        // Turn the upper cube 90 degrees about y: its ridge now runs along z (z in [0.3, 1.3],
        // clear of the lower top face's diagonal) and crosses the lower top edge along x (at
        // z = 0.5) in its interior.
        let turn = nalgebra::Rotation3::from_euler_angles(0.0, std::f64::consts::FRAC_PI_2, 0.0);
        let crossed = MovingBody::placed(
            TetMesh::cuboid(Vec3::repeat(0.5), 1),
            |p| turn * (tilt * p) + Vec3::new(0.1, 0.5 + 0.004 + 0.5 * 2f64.sqrt(), 0.8),
            Vec3::new(0.0, -0.01, 0.0),
        );
        out.clear();
        detect_edge_contacts(
            &crossed.surface(1),
            &lower.surface(0),
            0.01,
            &mut pairs,
            &mut out,
        );
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
        // Moving away (or staying far): nothing.
        let far = MovingBody::placed(
            TetMesh::cuboid(Vec3::repeat(0.5), 1),
            |p| turn * (tilt * p) + Vec3::new(0.1, 0.6 + 0.5 * 2f64.sqrt(), 0.8),
            Vec3::new(0.0, 0.01, 0.0),
        );
        out.clear();
        detect_edge_contacts(
            &far.surface(1),
            &lower.surface(0),
            0.01,
            &mut pairs,
            &mut out,
        );
        assert!(out.is_empty());
    }

    #[test]
    fn a_resting_cube_has_no_edge_self_contacts() {
        let cube = MovingBody::placed(TetMesh::cuboid(Vec3::repeat(0.5), 4), |p| *p, Vec3::zeros());
        let (mut pairs, mut out) = (Vec::new(), Vec::new());
        detect_edge_contacts(
            &cube.surface(0),
            &cube.surface(0),
            0.01,
            &mut pairs,
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        // Every self pair comes once.
        crate::sim::contact::candidate_edge_pairs(&cube.bvh, &cube.bvh, &mut pairs);
        assert!(pairs.iter().all(|&(i, j)| i < j));
    }
}
