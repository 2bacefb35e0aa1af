//! Deep overlap between two soft bodies: contacts for the surface vertices of one body that are
//! inside the other further than any of its boundary triangles' margins, as after an overlapping
//! spawn or a teleport.
//!
//! The point-triangle contacts of [`super::soft`] push a vertex out through the triangle nearest
//! to it. That holds for a vertex just behind a face, but deep inside a body the nearest face may
//! be on the far side, and a vertex farther from every face than the contact margin has no
//! candidate triangle at all: two cubes spawned half into each other kept their overlap for
//! good. Following the contact determination for intersecting solids of
//! the embedded-contact thesis (chapter 5: flood the surface patch inside the
//! other body from the intersection; one normal for the region from its vector area, Appendix
//! A.3), here:
//!
//! 1. **Seeds**: the vertices of body `a` whose nearest-triangle contact with `b` starts the step
//!    on or behind the triangle.
//! 2. **Flood** over `a`'s surface edges from the seeds: a neighbour without a contact is inside
//!    `b` if a ray from it crosses `b`'s surface an odd number of times (the ray's direction is
//!    fixed and irrational to the lattice axes, so it does not run along faces or edges); such a
//!    vertex is *deep* and floods on.
//! 3. **Region normal**: where deep vertices exist, the vector area `N` of `a`'s boundary
//!    triangles whose three corners are inside `b` (at the step's start). The intersection volume
//!    is closed by that patch and `b`'s patch inside `a`, whose vector areas cancel, so `-N / |N|`
//!    is a direction that takes `a` out of `b` for the whole region — for a deep vertex and a
//!    shallow one alike, whichever face happens to be nearest. Beside it the outward normals of
//!    the faces the seeds are behind are tried, and the region takes the direction along which
//!    its inside vertices leave `b` with the shortest translation (the largest of their exit
//!    distances).
//! 4. **Contacts**: every inside vertex (seed or deep) is cast along the region normal to where
//!    it leaves `b` (the nearest crossing of `b`'s surface); that point's triangle and weights,
//!    with the region normal, make its contact, which replaces a seed's nearest-triangle one.
//!    The rows then push the vertex out at most at the world's depenetration speed
//!    (`WorldSettings::max_depenetration_speed`), as for any contact that starts inside.
//!
//! Deviation from the thesis: one region per ordered pair of bodies, not one per connected
//! intersection curve (a pair of bodies overlapping in two separate places gets one averaged
//! normal); the inside test is a ray's parity, not the flood's bounding intersection curve; and
//! the vector-area normal is one candidate among the seeds' face normals. Alone it leans toward
//! every face of the overlap by its area: for two 0.5 m cubes overlapping by half, shifted by
//! 1 cm and 3 mm off each other's planes, it was (-0.69, -0.43, -0.58), which needs 0.36 m of
//! translation to separate them against 0.25 m along x, the face normal now chosen.
//! A body entirely inside another (no seed, or a patch whose vector area vanishes) is left
//! alone.

use super::broadphase::BodyBvh;
use super::soft::{SoftContact, SoftSurface};
use crate::sim::math::Vec3;

/// Nothing known of the vertex yet.
const UNKNOWN: u8 = 0;
/// Outside the other body, or in front of its nearest triangle.
const OUTSIDE: u8 = 1;
/// On or behind its nearest triangle: inside, with a contact already.
const SHALLOW: u8 = 2;
/// Inside the other body, without a contact of its own.
const DEEP: u8 = 3;

/// The most directions tried for a region's way out.
const MAX_CANDIDATES: usize = 16;

/// Cosine above which two candidate directions count as the same (about 2.6 degrees).
const DISTINCT_NORMAL_COS: f64 = 0.999;

/// How far behind its origin (m) a ray still meets a face: a vertex on the face.
const ON_FACE: f64 = 1e-9;

/// The parity ray's direction: unit, and at irrational angles to the lattice axes.
fn parity_direction() -> Vec3 {
    Vec3::new(0.577_215_664_9, 0.841_470_984_8, 0.414_213_562_4).normalize()
}

/// Reused buffers of [`detect_deep_overlap`].
#[derive(Debug, Default, Clone)]
pub struct OverlapScratch {
    state: Vec<u8>,
    queue: Vec<u32>,
    hits: Vec<u32>,
}

/// Where the ray `origin + t dir` crosses triangle `(p0, p1, p2)`, for `t >= 0` (a vertex on a
/// face leaves through it): `t` and the barycentric weights of the crossing (Moller-Trumbore,
/// in `f64`).
fn ray_triangle(origin: &Vec3, dir: &Vec3, p: [Vec3; 3]) -> Option<(f64, [f64; 3])> {
    let e1 = p[1] - p[0];
    let e2 = p[2] - p[0];
    let h = dir.cross(&e2);
    let det = e1.dot(&h);
    if det.abs() < 1e-300 {
        return None;
    }
    let s = origin - p[0];
    let u = s.dot(&h) / det;
    if !(0.0..=1.0).contains(&u) {
        return None;
    }
    let q = s.cross(&e1);
    let v = dir.dot(&q) / det;
    if v < 0.0 || u + v > 1.0 {
        return None;
    }
    let t = e2.dot(&q) / det;
    // A vertex on the face itself computes `t` as a round-off either side of 0.
    (t >= -ON_FACE).then_some((t.max(0.0), [1.0 - u - v, u, v]))
}

/// The crossings of the ray from `origin` along `dir` with `b`'s boundary triangles at its
/// step-start positions: their number, and the nearest one as (triangle, t, weights).
fn cast(
    b: &SoftSurface<'_>,
    bvh: &BodyBvh,
    origin: &Vec3,
    dir: &Vec3,
    hits: &mut Vec<u32>,
) -> (usize, Option<(u32, f64, [f64; 3])>) {
    bvh.triangles_along_ray(origin, dir, hits);
    let triangles = b.shape.triangles();
    let mut count = 0;
    let mut nearest: Option<(u32, f64, [f64; 3])> = None;
    for &t in hits.iter() {
        let corners = triangles[t as usize].map(|v| b.x_start[v as usize]);
        if let Some((s, w)) = ray_triangle(origin, dir, corners) {
            count += 1;
            if nearest.is_none_or(|(_, best, _)| s < best) {
                nearest = Some((t, s, w));
            }
        }
    }
    (count, nearest)
}

/// The contact of vertex `vertex` of `a`, inside `b`, leaving `b` along `normal` (unit): the
/// nearest crossing of `b`'s surface, its depth predicted at the end of the motion as the
/// point-triangle contacts do. `None` if the ray meets no triangle.
fn region_contact(
    a: &SoftSurface<'_>,
    b: &SoftSurface<'_>,
    vertex: u32,
    normal: &Vec3,
    hits: &mut Vec<u32>,
) -> Option<SoftContact> {
    let (_, nearest) = cast(b, b.bvh, &a.x_start[vertex as usize], normal, hits);
    let (t, _, weights) = nearest?;
    let tri = b.shape.triangles()[t as usize];
    let q_end: Vec3 = (0..3).map(|k| weights[k] * b.x_end[tri[k] as usize]).sum();
    Some(SoftContact {
        vertex_body: a.body,
        vertex,
        triangle_body: b.body,
        triangle: t,
        triangle_vertices: tri,
        weights,
        normal: *normal,
        depth: -normal.dot(&(a.x_end[vertex as usize] - q_end)),
    })
}

/// Deep overlap of `a`'s surface with body `b` (two different bodies; see the module docs).
/// `out[first..]` holds the point-triangle contacts of `a`'s vertices with `b` that
/// [`super::detect_soft_contacts`] just found; where a deep region exists, those on or behind
/// their triangle are rewritten with the region normal and the deep vertices' contacts are
/// appended. Returns the number of deep vertices (0: nothing changed, as for a surface that
/// is not closed).
pub fn detect_deep_overlap(
    a: &SoftSurface<'_>,
    b: &SoftSurface<'_>,
    first: usize,
    scratch: &mut OverlapScratch,
    out: &mut Vec<SoftContact>,
) -> usize {
    // A ray's crossings tell the inside of a closed surface only (a drawn mesh may be open),
    // and the region normal needs `a`'s patch to close the overlap.
    if a.body == b.body || !a.shape.is_closed() || !b.shape.is_closed() {
        return 0;
    }
    let seeds = out[first..]
        .iter()
        .filter(|c| c.gap(a.x_start, b.x_start) <= 0.0)
        .count();
    if seeds == 0 {
        return 0;
    }
    let OverlapScratch { state, queue, hits } = scratch;
    state.clear();
    state.resize(a.x_start.len(), UNKNOWN);
    queue.clear();
    for c in &out[first..] {
        let inside = c.gap(a.x_start, b.x_start) <= 0.0;
        state[c.vertex as usize] = if inside { SHALLOW } else { OUTSIDE };
        if inside {
            queue.push(c.vertex);
        }
    }
    // 2. Flood from the seeds over the surface edges.
    let direction = parity_direction();
    let mut deep = 0;
    let mut next = 0;
    while next < queue.len() {
        let v = queue[next];
        next += 1;
        for &w in a.shape.ring(v) {
            if state[w as usize] != UNKNOWN {
                continue;
            }
            let (crossings, _) = cast(b, b.bvh, &a.x_start[w as usize], &direction, hits);
            if crossings % 2 == 1 {
                state[w as usize] = DEEP;
                deep += 1;
                queue.push(w);
            } else {
                state[w as usize] = OUTSIDE;
            }
        }
    }
    if deep == 0 {
        return 0;
    }
    // 3. The region normal: minus the vector area of the patch inside `b`.
    let inside = |v: u32| matches!(state[v as usize], SHALLOW | DEEP);
    let area: Vec3 = a
        .shape
        .triangles()
        .iter()
        .filter(|t| t.iter().all(|&v| inside(v)))
        .map(|t| {
            let [p0, p1, p2] = t.map(|v| a.x_start[v as usize]);
            0.5 * (p1 - p0).cross(&(p2 - p0))
        })
        .sum();
    // The candidates: the region's vector-area normal first, then the distinct normals of the
    // seeds' nearest faces (each a way out of `b` for part of the region).
    let mut candidates = [Vec3::zeros(); MAX_CANDIDATES];
    let mut count = 0;
    let norm = area.norm();
    if norm > 0.0 {
        candidates[0] = -area / norm;
        count = 1;
    }
    for c in &out[first..] {
        if count == MAX_CANDIDATES {
            break;
        }
        let distinct = candidates[..count]
            .iter()
            .all(|n| n.dot(&c.normal) < DISTINCT_NORMAL_COS);
        if state[c.vertex as usize] == SHALLOW && distinct {
            candidates[count] = c.normal;
            count += 1;
        }
    }
    // The one that takes every inside vertex out with the shortest translation.
    let mut best: Option<(f64, Vec3)> = None;
    for n in &candidates[..count] {
        let mut reach = 0.0f64;
        for &v in a.shape.vertices() {
            if !inside(v) {
                continue;
            }
            match cast(b, b.bvh, &a.x_start[v as usize], n, hits).1 {
                Some((_, t, _)) => reach = reach.max(t),
                // A seed on the rim of the overlap (on one of `b`'s face planes, but past the
                // face's edge) may have no way out along `n`: it keeps its own contact.
                None if state[v as usize] == SHALLOW => {}
                None => {
                    reach = f64::INFINITY;
                    break;
                }
            }
        }
        if reach.is_finite() && best.is_none_or(|(r, _)| reach < r) {
            best = Some((reach, *n));
        }
    }
    let Some((_, normal)) = best else {
        return 0;
    };
    // 4. Every inside vertex leaves `b` along the region normal.
    for c in &mut out[first..] {
        if state[c.vertex as usize] == SHALLOW
            && let Some(region) = region_contact(a, b, c.vertex, &normal, hits)
        {
            *c = region;
        }
    }
    for &v in a.shape.vertices() {
        if state[v as usize] == DEEP
            && let Some(contact) = region_contact(a, b, v, &normal, hits)
        {
            out.push(contact);
        }
    }
    deep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::contact::soft::detect_soft_contacts;
    use crate::sim::contact::test_body::MovingBody as Body;
    use crate::sim::mesh::TetMesh;

    #[test]
    fn a_ray_crosses_a_triangle_at_its_barycentric_point() {
        let p = [
            Vec3::new(0.0, 0.0, 1.0),
            Vec3::new(1.0, 0.0, 1.0),
            Vec3::new(0.0, 1.0, 1.0),
        ];
        let (t, w) = ray_triangle(&Vec3::new(0.25, 0.25, 0.0), &Vec3::z(), p).unwrap();
        assert!((t - 1.0).abs() < 1e-15);
        assert!((w[0] - 0.5).abs() < 1e-15 && (w[1] - 0.25).abs() < 1e-15);
        // Behind the origin, or beside the triangle: no crossing.
        assert!(ray_triangle(&Vec3::new(0.25, 0.25, 2.0), &Vec3::z(), p).is_none());
        assert!(ray_triangle(&Vec3::new(0.75, 0.75, 0.0), &Vec3::z(), p).is_none());
    }

    /// Two 0.5 m cubes, the right one moved left to overlap the left one by half, and by
    /// `shift` (m) along y and z.
    fn overlapping_cubes(shift: Vec3) -> (Body, Body) {
        let left = Body::new(
            TetMesh::cuboid(Vec3::repeat(0.25), 4),
            Vec3::new(-0.125, 0.0, 0.0),
            Vec3::zeros(),
        );
        let right = Body::new(
            TetMesh::cuboid(Vec3::repeat(0.25), 4),
            Vec3::new(0.125, 0.0, 0.0) + shift,
            Vec3::zeros(),
        );
        (left, right)
    }

    /// The centre of a body's start positions (m).
    fn centre(b: &Body) -> Vec3 {
        b.start.iter().sum::<Vec3>() / b.start.len() as f64
    }

    /// The contacts of `a`'s vertices with `b`, deep overlap included, and the deep count.
    fn contacts(a: &SoftSurface<'_>, b: &SoftSurface<'_>) -> (Vec<SoftContact>, usize) {
        let (mut pairs, mut out, mut scratch) = (Vec::new(), Vec::new(), OverlapScratch::default());
        detect_soft_contacts(a, b, 0.01, 0.05, &mut pairs, &mut out);
        let shallow = out.len();
        let deep = detect_deep_overlap(a, b, 0, &mut scratch, &mut out);
        assert_eq!(out.len(), shallow + deep);
        (out, deep)
    }

    /// Checks the contacts of two cubes overlapping by half, shifted by `shift` off each other's
    /// planes: every surface vertex strictly inside the other cube has one, leaving along x
    /// (away from the other cube) through a point on the other cube's surface ahead of it, at
    /// a depth of at most the overlap; with `flush`, through the face across the overlap.
    fn check_pushed_apart(shift: Vec3, flush: bool) {
        let (left, right) = overlapping_cubes(shift);
        for (a, b, ids, away) in [(&left, &right, (0, 1), -1.0), (&right, &left, (1, 0), 1.0)] {
            let (out, deep) = contacts(&a.surface(ids.0), &b.surface(ids.1));
            assert!(deep > 0, "no deep vertex found");
            let (lo, hi) = (
                centre(b) - Vec3::repeat(0.25),
                centre(b) + Vec3::repeat(0.25),
            );
            let strictly_inside =
                |p: &Vec3| (0..3).all(|k| p[k] > lo[k] + 1e-9 && p[k] < hi[k] - 1e-9);
            for &v in a.mesh.surface_vertices() {
                if strictly_inside(&a.start[v as usize]) {
                    assert!(
                        out.iter().any(|c| c.vertex == v),
                        "vertex {v} has no contact"
                    );
                }
            }
            // (Vertices outside `b` or on its surface keep their nearest-face contacts.)
            for c in out
                .iter()
                .filter(|c| strictly_inside(&a.start[c.vertex as usize]))
            {
                assert!(
                    (c.normal - away * Vec3::x()).norm() < 1e-9,
                    "normal {:?}",
                    c.normal
                );
                let q: Vec3 = (0..3)
                    .map(|k| c.weights[k] * b.start[c.triangle_vertices[k] as usize])
                    .sum();
                let on_face =
                    (0..3).any(|k| (q[k] - lo[k]).abs() < 1e-9 || (q[k] - hi[k]).abs() < 1e-9);
                assert!(on_face, "{q:?} is not on the surface");
                if flush {
                    let near_face = centre(b).x + away * 0.25;
                    assert!((q.x - near_face).abs() < 1e-9, "leaves at x = {}", q.x);
                }
                assert!(c.normal.dot(&(q - a.start[c.vertex as usize])) >= -1e-9);
                assert!(
                    c.depth >= 0.0 && c.depth <= 0.25 + 1e-9,
                    "depth {}",
                    c.depth
                );
            }
        }
    }

    #[test]
    fn cubes_overlapping_by_half_are_pushed_apart_along_the_overlap() {
        // Faces flush (the tops, bottoms, fronts and backs share planes): the patch of one cube
        // inside the other is its face across the overlap plus strips whose areas cancel, so
        // the region normal is exactly along x.
        check_pushed_apart(Vec3::zeros(), true);
        // Shifted off the planes, the vector area leans toward the overlap's other faces (by
        // their areas), but the shortest way out is still along x.
        check_pushed_apart(Vec3::new(0.0, 0.01, 0.003), false);
    }

    #[test]
    fn bodies_that_only_touch_keep_their_nearest_triangle_contacts() {
        // The upper cube 5 mm into the lower one: shallow, so nothing deep.
        let lower = Body::new(
            TetMesh::cuboid(Vec3::repeat(0.25), 4),
            Vec3::zeros(),
            Vec3::zeros(),
        );
        let upper = Body::new(
            TetMesh::cuboid(Vec3::repeat(0.25), 4),
            Vec3::new(0.1, 0.495, 0.05),
            Vec3::zeros(),
        );
        let (mut pairs, mut out, mut scratch) = (Vec::new(), Vec::new(), OverlapScratch::default());
        let (sa, sb) = (upper.surface(1), lower.surface(0));
        detect_soft_contacts(&sa, &sb, 0.01, 0.05, &mut pairs, &mut out);
        let before = out.clone();
        assert!(!before.is_empty());
        assert_eq!(detect_deep_overlap(&sa, &sb, 0, &mut scratch, &mut out), 0);
        assert_eq!(out, before);
    }
}
