//! A cloth against itself: vertex-triangle and edge-edge pairs kept a thickness apart on their
//! side, projected after every global solve, with Coulomb friction.
//!
//! **Detection, after the first iteration.** The candidates come from the cloth's tree of
//! surface patches (`patches.rs`): every vertex-triangle and edge-edge pair sharing no vertex
//! whose boxes, spanning the elements at the step's start and at the first iterate and grown
//! by the thickness, overlap, except within a connected patch whose normals stay within 60
//! degrees of one direction over that motion (a height field: it cannot touch itself). They
//! are filtered in parallel, in a fixed order. A candidate is kept when its elements, at the
//! step's start, are within twice the thickness plus how far they move relative to each other
//! on the way (the distance between a point and a triangle, or two segments, changes by at
//! most the largest relative motion of their corners): the seed notes' proximity test. Pairs
//! that pass beside each other (the vertex outside the triangle, the closest points outside an
//! edge, by more than [`BESIDE`] at both ends of the motion) or stay on one side further than
//! twice the thickness at both ends are dropped; one that turns over in between is left to the
//! zones.
//! The first iterate, not the inertial prediction, is the motion: a flag at rest that the
//! wind and its own elasticity fling moves far more in a step than its velocity says.
//! Detection runs again from a later iterate that has moved a vertex more than the thickness
//! from the one the pairs were found for (the cloth's step allows three detections).
//!
//! **Which side.** A pair's side is the sign, at the step's start, of the vertex's distance to
//! the triangle's plane (of the edges' distance along their common normal `da x db`); pairs
//! starting in one plane (a flat sheet's neighbours, nearer than a nanometre) are decided the
//! first time one element is over the other. A pair found on the other side at an iterate is
//! checked by continuous collision detection along the straight paths from the step's start
//! ([`crate::sim::contact::ccd`]): if its vertex passed through the triangle (its edges
//! through each other) it is pushed back; if not, it went round the border and the pair takes
//! the side it is on. A pair within a nanometre of its plane is left as it is (two layers
//! lying flat on a floor at one height): pushing it too kept the strip's heap in
//! `tests/sim_cloth_self.rs` moving at 0.1 m/s.
//!
//! **Projection, after every global solve, after the obstacles'.** Each pair whose vertex is
//! over its triangle (whose closest points are inside both edges, the edges more than about
//! 13 degrees apart) and nearer than the thickness on its side, or past it by no more than
//! the detection's reach, is moved apart along the current normal to the thickness, its
//! corners moved in proportion to their inverse masses and barycentric weights (a
//! position-based projection of the linear constraint, Müller et al. 2007, "Position based
//! dynamics", with the normal held for the move). Pinned vertices do not move, nor does a
//! vertex resting on an obstacle towards that obstacle (the heap of cloth on a floor pushes
//! its upper layer up, not its lower one into the floor; where the vertices left free carry
//! under [`MIN_MOBILITY`] of the pair's weight it moves part of the way per sweep). Pairs are
//! projected in order, one Gauss-Seidel sweep per iteration and up to four after the last
//! and again after friction.
//!
//! **Friction, after the iterations**, as against obstacles (`contact.rs`): a pair pushed
//! apart by `d` in the last projection may slide against itself by no more than `mu d`.
//!
//! Deviation from the notes (which resolve proximity by repulsion impulses, then collisions by
//! iterated continuous detection): the pairs are projected inside the PD iterations like the
//! obstacle planes, and continuous detection only decides a pair's side. What slips through
//! (a pair missed by detection, a push left undone by conflicting pairs) is caught at the end
//! of the step by the impact zones (`impact_zones.rs`). A pair past its triangle by more than
//! the reach is left to them, since pushing it back across a fold that turned over in the
//! step was measured to throw the cloth apart. Cloth that starts a step crossed through
//! itself stays so (no untangling).

use crate::sim::contact::ccd::{edge_edge_impact, plane_barycentric, point_triangle_impact};
use crate::sim::contact::edge_edge::line_closest_parameters;
use rayon::prelude::*;

use super::patches::PatchTree;
use crate::sim::contact::closest_point_on_triangle;
use crate::sim::math::Vec3;

/// A signed distance (m) at or under this leaves a pair's side undecided.
const UNDECIDED: f64 = 1e-9;
/// Where the vertices free to move carry less than this share of a pair's weight (those on
/// an obstacle held), the pair is moved only part of the way in one sweep, so that a vertex
/// with a small barycentric weight is not thrown far to close the gap alone.
const MIN_MOBILITY: f64 = 0.25;
/// A pair whose vertex is outside its triangle by more than this (in barycentric weight; its
/// edges' closest points outside an edge by this, in edge parameter) where its motion starts
/// and where it ends is not watched: its elements pass beside each other. One that passes
/// over the other in between is the impact zones' work.
const BESIDE: f64 = 0.1;
/// Edges nearly parallel (the sine of their angle squared under this) have no common normal.
const PARALLEL_SIN2: f64 = 0.05;

/// A vertex kept on one side of a triangle.
#[derive(Debug, Clone, Copy)]
struct PointFace {
    vertex: u32,
    triangle: u32,
    /// +1 or -1 along the triangle's normal, 0 while undecided.
    side: f64,
    /// How far past the triangle the vertex may be and still be pushed back (m).
    reach: f32,
    /// How far the last projection pushed the pair apart (m).
    push: f64,
}

/// Two edges kept on one side of each other.
#[derive(Debug, Clone, Copy)]
struct EdgePair {
    edges: [u32; 2],
    /// +1 or -1 along `da x db`, 0 while undecided.
    side: f64,
    /// How far past each other the edges may be and still be pushed back (m).
    reach: f32,
    /// How far the last projection pushed the pair apart (m).
    push: f64,
}

/// Where `p` is over triangle `abc`: the barycentric weights of its projection onto the
/// triangle's plane, and its signed distance to the plane along the unit normal (m); `None`
/// for a triangle of no area.
fn over_triangle(p: &Vec3, a: &Vec3, b: &Vec3, c: &Vec3) -> Option<([f64; 3], f64, Vec3)> {
    let (w, normal) = plane_barycentric(p, a, b, c)?;
    let unit = normal.normalize();
    Some((w, unit.dot(&(p - a)), unit))
}

/// The lines through `a0 a1` and `b0 b1`: their closest points' parameters `(s, t)`, the unit
/// common normal `da x db` and the signed distance along it (m); `None` for (nearly) parallel
/// or degenerate edges.
fn between_lines(a0: &Vec3, a1: &Vec3, b0: &Vec3, b1: &Vec3) -> Option<((f64, f64), f64, Vec3)> {
    let (s, t) = line_closest_parameters((a0, a1), (b0, b1), PARALLEL_SIN2)?;
    let unit = (a1 - a0).cross(&(b1 - b0)).normalize();
    Some(((s, t), unit.dot(&(a0 - b0)), unit))
}

/// The distance between segments `a0 a1` and `b0 b1` (m).
fn segment_distance(a0: &Vec3, a1: &Vec3, b0: &Vec3, b1: &Vec3) -> f64 {
    let (da, db, r) = (a1 - a0, b1 - b0, a0 - b0);
    let (aa, bb, ab, ar, br) = (
        da.dot(&da),
        db.dot(&db),
        da.dot(&db),
        da.dot(&r),
        db.dot(&r),
    );
    let denom = aa * bb - ab * ab;
    // The closest points of the segments (Ericson, Real-Time Collision Detection, 5.1.9).
    let mut s = if denom > 0.0 {
        ((ab * br - bb * ar) / denom).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mut t = if bb > 0.0 { (ab * s + br) / bb } else { 0.0 };
    if t < 0.0 {
        t = 0.0;
        s = if aa > 0.0 {
            (-ar / aa).clamp(0.0, 1.0)
        } else {
            0.0
        };
    } else if t > 1.0 {
        t = 1.0;
        s = if aa > 0.0 {
            ((ab - ar) / aa).clamp(0.0, 1.0)
        } else {
            0.0
        };
    }
    (a0 + da * s - b0 - db * t).norm()
}

/// The side (+1 or -1) a pair starts on, from its signed distance where the motion starts
/// (`None` where its normal is undefined); 0 where that is within [`UNDECIDED`].
fn start_side(before: Option<f64>) -> f64 {
    match before {
        Some(d) if d.abs() > UNDECIDED => d.signum(),
        _ => 0.0,
    }
}

/// Whether a pair stays well apart on one side: its signed distances along its normal where
/// the motion starts and where it ends (`None` where the normal is undefined) have one sign
/// and are both beyond `band` (m). A pair that turns over between them may still meet; the
/// impact zones stand for it.
fn apart_throughout(before: Option<f64>, after: Option<f64>, band: f64) -> bool {
    match (before, after) {
        (Some(b), Some(a)) => b * a > 0.0 && b.abs() > band && a.abs() > band,
        _ => false,
    }
}

/// The largest motion (m) of `of` relative to `other`'s vertices between `start` and `end`.
fn relative_motion(of: usize, others: &[u32], start: &[Vec3], end: &[Vec3]) -> f64 {
    let d = end[of] - start[of];
    others
        .iter()
        .map(|&o| (d - (end[o as usize] - start[o as usize])).norm())
        .fold(0.0, f64::max)
}

/// Candidates per detection from which their filter runs in parallel (below, waking the
/// thread pool costs more than it saves).
const PARALLEL_FROM: usize = 2048;

/// `out` (cleared first) gets what `keep` makes of each of `items`, in their order.
fn filtered<T: Sync, U: Send>(
    items: &[T],
    out: &mut Vec<U>,
    keep: impl Fn(&T) -> Option<U> + Sync + Send,
) {
    out.clear();
    if items.len() < PARALLEL_FROM {
        out.extend(items.iter().filter_map(keep));
    } else {
        out.par_extend(items.par_iter().filter_map(keep));
    }
}

/// A cloth's contacts with itself in one step, and the buffers they reuse.
#[derive(Debug, Default)]
pub(super) struct ClothSelfContacts {
    patches: PatchTree,
    candidates: Vec<(u32, u32)>,
    edge_candidates: Vec<(u32, u32)>,
    points: Vec<PointFace>,
    crossings: Vec<EdgePair>,
    /// The positions the pairs were detected for (m).
    detected_for: Vec<Vec3>,
}

impl ClothSelfContacts {
    /// Contacts over the triangles and edges of `patches` (a cloth's own, or two cloths side
    /// by side: [`PatchTree::between_sides`]).
    pub fn on(patches: PatchTree) -> Self {
        Self {
            patches,
            ..Self::default()
        }
    }

    /// The step's pairs (see the module docs) of the cloth's `triangles` moving from `start`
    /// to `y` (an iterate), kept `thickness` (m) apart; `inverse_mass` is 0 for a pinned
    /// vertex (pairs of pinned vertices only are left out).
    pub fn detect(
        &mut self,
        start: &[Vec3],
        y: &[Vec3],
        triangles: &[[u32; 3]],
        inverse_mass: &[f64],
        thickness: f64,
    ) {
        self.points.clear();
        self.crossings.clear();
        self.detected_for.clear();
        self.detected_for.extend_from_slice(y);
        self.patches.refit(start, y, thickness);
        self.patches
            .candidates(&mut self.candidates, &mut self.edge_candidates);
        self.candidates.sort_unstable();
        self.edge_candidates.sort_unstable();
        let still = |vertices: &[u32]| vertices.iter().all(|&v| inverse_mass[v as usize] == 0.0);
        // The candidates filtered (in parallel when many), kept in their (sorted) order.
        let points = |&(v, t): &(u32, u32)| {
            let corners = triangles[t as usize];
            if still(&corners) && inverse_mass[v as usize] == 0.0 {
                return None;
            }
            let [a, b, c] = corners.map(|i| start[i as usize]);
            let p = start[v as usize];
            let reach = 2.0 * thickness + relative_motion(v as usize, &corners, start, y);
            if (p - closest_point_on_triangle(&p, &a, &b, &c).1).norm() > reach {
                return None;
            }
            let [a1, b1, c1] = corners.map(|i| y[i as usize]);
            let (start_over, end_over) = (
                over_triangle(&p, &a, &b, &c),
                over_triangle(&y[v as usize], &a1, &b1, &c1),
            );
            let beside = |over: &Option<([f64; 3], f64, Vec3)>| {
                over.is_none_or(|(w, _, _)| w.iter().any(|&w| w < -BESIDE))
            };
            let (before, after) = (start_over.map(|o| o.1), end_over.map(|o| o.1));
            if (beside(&start_over) && beside(&end_over))
                || apart_throughout(before, after, 2.0 * thickness)
            {
                return None;
            }
            Some(PointFace {
                vertex: v,
                triangle: t,
                side: start_side(before),
                reach: reach as f32,
                push: 0.0,
            })
        };
        filtered(&self.candidates, &mut self.points, points);
        let edges = self.patches.edges();
        let crossings = |&(i, j): &(u32, u32)| {
            let (e, f) = (edges[i as usize], edges[j as usize]);
            if still(&e) && still(&f) {
                return None;
            }
            let [a0, a1] = e.map(|v| start[v as usize]);
            let [b0, b1] = f.map(|v| start[v as usize]);
            let reach = 2.0 * thickness
                + relative_motion(e[0] as usize, &f, start, y).max(relative_motion(
                    e[1] as usize,
                    &f,
                    start,
                    y,
                ));
            if segment_distance(&a0, &a1, &b0, &b1) > reach {
                return None;
            }
            let [c0, c1] = e.map(|v| y[v as usize]);
            let [d0, d1] = f.map(|v| y[v as usize]);
            let (start_lines, end_lines) = (
                between_lines(&a0, &a1, &b0, &b1),
                between_lines(&c0, &c1, &d0, &d1),
            );
            let beside = |lines: &Option<((f64, f64), f64, Vec3)>| {
                lines.is_none_or(|((s, t), _, _)| {
                    [s, t].iter().any(|u| !(-BESIDE..=1.0 + BESIDE).contains(u))
                })
            };
            let (before, after) = (start_lines.map(|l| l.1), end_lines.map(|l| l.1));
            if (beside(&start_lines) && beside(&end_lines))
                || apart_throughout(before, after, 2.0 * thickness)
            {
                return None;
            }
            Some(EdgePair {
                edges: [i, j],
                side: start_side(before),
                reach: reach as f32,
                push: 0.0,
            })
        };
        filtered(&self.edge_candidates, &mut self.crossings, crossings);
    }

    /// Whether a vertex of `x` has moved more than `thickness` (m) from where the pairs were
    /// detected for: pairs may then be missing, and detection runs again.
    pub fn moved_beyond(&self, x: &[Vec3], thickness: f64) -> bool {
        let limit = thickness * thickness;
        x.iter()
            .zip(&self.detected_for)
            .any(|(p, q)| (p - q).norm_squared() > limit)
    }

    /// Forgets the pushes of the last projection (before the sweeps after a global solve).
    pub fn clear_pushes(&mut self) {
        self.points.iter_mut().for_each(|p| p.push = 0.0);
        self.crossings.iter_mut().for_each(|p| p.push = 0.0);
    }

    /// One Gauss-Seidel sweep over the step's pairs at positions `x` (see the module docs):
    /// each pair nearer than `thickness` (m) on its side, or on the other side, is moved
    /// apart to the thickness (each pair's push adds up over the sweeps). Returns the largest
    /// push of this sweep (m).
    pub fn project(
        &mut self,
        (start, x): (&[Vec3], &mut [Vec3]),
        triangles: &[[u32; 3]],
        (inverse_mass, supports): (&[f64], &[Vec3]),
        thickness: f64,
    ) -> f64 {
        // A vertex resting on an obstacle does not move into it: for a push along `push`
        // (a direction), its inverse mass is 0.
        let mobility = |v: usize, push: Vec3| {
            if supports[v].dot(&push) < 0.0 {
                0.0
            } else {
                inverse_mass[v]
            }
        };
        let mut largest = 0.0f64;
        for pair in &mut self.points {
            let v = pair.vertex as usize;
            let corners = triangles[pair.triangle as usize].map(|i| i as usize);
            let [a, b, c] = corners.map(|i| x[i]);
            let Some((w, d, normal)) = over_triangle(&x[v], &a, &b, &c) else {
                continue;
            };
            if w.iter().any(|&w| w < 0.0) {
                continue;
            }
            if pair.side * d <= 0.0 {
                if d.abs() <= UNDECIDED {
                    continue;
                }
                // Undecided, or on the other side: kept there unless it got there through
                // the triangle.
                let q = [v, corners[0], corners[1], corners[2]];
                if pair.side == 0.0
                    || point_triangle_impact(&q.map(|i| start[i]), &q.map(|i| x[i])).is_none()
                {
                    pair.side = d.signum();
                }
            }
            let gap = pair.side * d;
            if gap >= thickness || gap < -f64::from(pair.reach) {
                continue;
            }
            let out = normal * pair.side;
            let vertex_mobility = mobility(v, out);
            let corner_mobility = corners.map(|c| mobility(c, -out));
            let weight = vertex_mobility
                + (0..3)
                    .map(|k| w[k] * w[k] * corner_mobility[k])
                    .sum::<f64>();
            if weight <= 0.0 {
                continue;
            }
            let full = inverse_mass[v]
                + (0..3)
                    .map(|k| w[k] * w[k] * inverse_mass[corners[k]])
                    .sum::<f64>();
            let weight = weight.max(MIN_MOBILITY * full);
            let push = thickness - gap;
            let step = out * (push / weight);
            x[v] += step * vertex_mobility;
            for k in 0..3 {
                x[corners[k]] -= step * (w[k] * corner_mobility[k]);
            }
            pair.push += push;
            largest = largest.max(push);
        }
        for pair in &mut self.crossings {
            let ends = pair
                .edges
                .map(|e| self.patches.edges()[e as usize].map(|v| v as usize));
            let [[a0, a1], [b0, b1]] = ends.map(|e| e.map(|v| x[v]));
            let Some(((s, t), d, normal)) = between_lines(&a0, &a1, &b0, &b1) else {
                continue;
            };
            if !((0.0..=1.0).contains(&s) && (0.0..=1.0).contains(&t)) {
                continue;
            }
            if pair.side * d <= 0.0 {
                if d.abs() <= UNDECIDED {
                    continue;
                }
                let q = [ends[0][0], ends[0][1], ends[1][0], ends[1][1]];
                if pair.side == 0.0
                    || edge_edge_impact(&q.map(|i| start[i]), &q.map(|i| x[i])).is_none()
                {
                    pair.side = d.signum();
                }
            }
            let gap = pair.side * d;
            if gap >= thickness || gap < -f64::from(pair.reach) {
                continue;
            }
            // `p - q = sum c_k x_k` over the four ends.
            let coefficients = [1.0 - s, s, t - 1.0, -t];
            let vertices = [ends[0][0], ends[0][1], ends[1][0], ends[1][1]];
            let out = normal * pair.side;
            let moves = [0, 1, 2, 3].map(|k| mobility(vertices[k], out * coefficients[k]));
            let weight: f64 = (0..4)
                .map(|k| coefficients[k] * coefficients[k] * moves[k])
                .sum();
            if weight <= 0.0 {
                continue;
            }
            let full: f64 = (0..4)
                .map(|k| coefficients[k] * coefficients[k] * inverse_mass[vertices[k]])
                .sum();
            let weight = weight.max(MIN_MOBILITY * full);
            let push = thickness - gap;
            let step = out * (push / weight);
            for k in 0..4 {
                x[vertices[k]] += step * (coefficients[k] * moves[k]);
            }
            pair.push += push;
            largest = largest.max(push);
        }
        largest
    }

    /// Coulomb friction between the pairs the last projection pushed (module docs): the
    /// relative tangential motion from `start` to `x` of each is cut by `friction` times how
    /// far the sweeps since [`ClothSelfContacts::clear_pushes`] pushed it. `touching` is told
    /// each such pair: its four vertices, their coefficients `c_k` in the pair's distance
    /// `sum c_k x_k`, and the size of its push over its weight `sum c_k^2 / m_k` (kg m: the
    /// projection moved vertex `k` by `c_k` times it over `m_k`).
    pub fn apply_friction(
        &self,
        x: &mut [Vec3],
        start: &[Vec3],
        triangles: &[[u32; 3]],
        inverse_mass: &[f64],
        friction: f64,
        mut touching: impl FnMut([usize; 4], [f64; 4], f64),
    ) {
        let mut slide =
            |x: &mut [Vec3], vertices: [usize; 4], coefficients: [f64; 4], push: f64| {
                if push <= 0.0 {
                    return;
                }
                let terms = || vertices.iter().zip(coefficients.iter());
                let weight: f64 = terms().map(|(&v, c)| c * c * inverse_mass[v]).sum();
                if weight <= 0.0 {
                    return;
                }
                let mut moved = Vec3::zeros();
                let mut normal = Vec3::zeros();
                for (&v, &c) in terms() {
                    moved += (x[v] - start[v]) * c;
                    normal += x[v] * c;
                }
                let length = normal.norm();
                if !(length > 0.0) {
                    return;
                }
                let normal = normal / length;
                let tangential = moved - normal * normal.dot(&moved);
                let along = tangential.norm();
                let budget = friction * push;
                let cut = if along <= budget {
                    tangential
                } else {
                    tangential * (budget / along)
                };
                for (&v, &c) in terms() {
                    x[v] -= cut * (c * inverse_mass[v] / weight);
                }
                touching(vertices, coefficients, push / weight);
            };
        for pair in &self.points {
            let v = pair.vertex as usize;
            let [a, b, c] = triangles[pair.triangle as usize].map(|i| i as usize);
            let Some((w, _, _)) = over_triangle(&x[v], &x[a], &x[b], &x[c]) else {
                continue;
            };
            slide(x, [v, a, b, c], [1.0, -w[0], -w[1], -w[2]], pair.push);
        }
        for pair in &self.crossings {
            let [[a0, a1], [b0, b1]] = pair
                .edges
                .map(|e| self.patches.edges()[e as usize].map(|v| v as usize));
            let Some(((s, t), _, _)) = between_lines(&x[a0], &x[a1], &x[b0], &x[b1]) else {
                continue;
            };
            slide(x, [a0, a1, b0, b1], [1.0 - s, s, t - 1.0, -t], pair.push);
        }
    }

    /// The mesh's edges, each once, the smaller vertex first.
    pub fn edges(&self) -> &[[u32; 2]] {
        self.patches.edges()
    }

    /// Vertex-triangle and edge-edge pairs in this step.
    pub fn count(&self) -> (usize, usize) {
        (self.points.len(), self.crossings.len())
    }
}
