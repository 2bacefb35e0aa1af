//! Continuous collision detection for vertex-triangle and edge-edge pairs moving linearly over
//! a step (the seed notes' CCD; Provot 1997, Bridson et al. 2002, section 6.3).
//!
//! Four points moving linearly from `start` to `end` are coplanar at the times `tau` in
//! `[0, 1]` where the cubic `f(tau) = ((x1 - x0) x (x2 - x0)) . (x3 - x0)` vanishes. Its roots
//! are isolated between the critical points of `f` (the roots of its derivative, a
//! quadratic), so each monotone piece with a sign change holds exactly one, found by
//! bisection to the last bits of `tau`. At each root in increasing order the pair is tested
//! for contact: the vertex inside the triangle, or the two edges' closest points inside both,
//! with a relative slack [`SLACK`] so that a hit on a shared border is not lost to round-off.
//!
//! What it does not do: a pair that moves while staying coplanar (`f` identically zero up to
//! round-off) reports no impact; the proximity contacts and the other elements of the
//! surface stand for it. A root where the polynomial only touches zero without changing sign
//! (a grazing contact) is found when it is a critical point with `|f|` at round-off.

use crate::sim::math::Vec3;

/// How far outside a triangle or an edge (in barycentric or edge parameter) a coplanar
/// moment still counts as a hit.
pub const SLACK: f64 = 1e-6;

/// The coefficients `[c0, c1, c2, c3]` of `f(tau) = sum c_k tau^k`, the coplanarity of the
/// four points moving linearly from `start` to `end` (m^3).
pub fn coplanarity_cubic(start: &[Vec3; 4], end: &[Vec3; 4]) -> [f64; 4] {
    let rel = |q: &[Vec3; 4], k: usize| q[k] - q[0];
    let (e1, e2, r) = (rel(start, 1), rel(start, 2), rel(start, 3));
    let (de1, de2, dr) = (rel(end, 1) - e1, rel(end, 2) - e2, rel(end, 3) - r);
    let a = e1.cross(&e2);
    let b = e1.cross(&de2) + de1.cross(&e2);
    let c = de1.cross(&de2);
    [
        a.dot(&r),
        a.dot(&dr) + b.dot(&r),
        b.dot(&dr) + c.dot(&r),
        c.dot(&dr),
    ]
}

fn evaluate(c: &[f64; 4], t: f64) -> f64 {
    ((c[3] * t + c[2]) * t + c[1]) * t + c[0]
}

/// The roots of the cubic `c` in `[0, 1]`, increasing, into `out`; returns how many.
pub fn roots_in_unit_interval(c: &[f64; 4], out: &mut [f64; 3]) -> usize {
    // The critical points in (0, 1): roots of 3 c3 t^2 + 2 c2 t + c1.
    let mut bounds = [0.0; 4];
    let mut count = 1;
    let (qa, qb, qc) = (3.0 * c[3], 2.0 * c[2], c[1]);
    let mut critical = [f64::NAN; 2];
    if qa != 0.0 {
        let disc = qb * qb - 4.0 * qa * qc;
        if disc >= 0.0 {
            // The stable form of the two roots.
            let q = -0.5 * (qb + qb.signum() * disc.sqrt());
            if q != 0.0 {
                critical = [q / qa, qc / q];
            } else {
                critical = [0.0, 0.0];
            }
        }
    } else if qb != 0.0 {
        critical[0] = -qc / qb;
    }
    if critical[0] > critical[1] {
        critical.swap(0, 1);
    }
    for t in critical {
        if t > 0.0 && t < 1.0 {
            bounds[count] = t;
            count += 1;
        }
    }
    bounds[count] = 1.0;
    let mut found = 0;
    let scale = c.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if scale == 0.0 {
        return 0;
    }
    for k in 0..count {
        let (mut lo, mut hi) = (bounds[k], bounds[k + 1]);
        let (mut flo, fhi) = (evaluate(c, lo), evaluate(c, hi));
        let root = if flo == 0.0 {
            Some(lo)
        } else if flo * fhi < 0.0 {
            for _ in 0..60 {
                let mid = 0.5 * (lo + hi);
                if mid <= lo || mid >= hi {
                    break;
                }
                let fmid = evaluate(c, mid);
                if (fmid < 0.0) == (flo < 0.0) {
                    lo = mid;
                    flo = fmid;
                } else {
                    hi = mid;
                }
            }
            Some(0.5 * (lo + hi))
        } else if k + 1 == count && fhi == 0.0 {
            Some(hi)
        } else if k > 0 && flo.abs() <= 1e-12 * scale {
            // A double root at a critical point (the cubic touches zero).
            Some(lo)
        } else {
            None
        };
        if let Some(t) = root
            && (found == 0 || t > out[found - 1])
        {
            out[found] = t;
            found += 1;
        }
    }
    found
}

fn lerp(a: &Vec3, b: &Vec3, t: f64) -> Vec3 {
    a + (b - a) * t
}

/// The barycentric weights in triangle `abc` of `p`'s projection onto the triangle's plane,
/// and the triangle's normal `(b - a) x (c - a)`; `None` for a triangle of no area.
pub fn plane_barycentric(p: &Vec3, a: &Vec3, b: &Vec3, c: &Vec3) -> Option<([f64; 3], Vec3)> {
    let normal = (b - a).cross(&(c - a));
    let area2 = normal.norm_squared();
    if !(area2 > 0.0) {
        return None;
    }
    let ap = p - a;
    let wb = normal.dot(&ap.cross(&(c - a))) / area2;
    let wc = normal.dot(&(b - a).cross(&ap)) / area2;
    Some(([1.0 - wb - wc, wb, wc], normal))
}

/// Whether `p` lies in triangle `abc`, with [`SLACK`], where the four are coplanar.
fn inside_triangle(p: &Vec3, a: &Vec3, b: &Vec3, c: &Vec3) -> bool {
    plane_barycentric(p, a, b, c).is_some_and(|(w, _)| w.iter().all(|&w| w >= -SLACK))
}

/// Whether segments `a0 a1` and `b0 b1`, coplanar, meet (with [`SLACK`]): the parameters of
/// their lines' crossing inside both. Parallel segments do not meet here.
fn segments_meet(a0: &Vec3, a1: &Vec3, b0: &Vec3, b1: &Vec3) -> bool {
    let (da, db, r) = (a1 - a0, b1 - b0, b0 - a0);
    let normal = da.cross(&db);
    let n2 = normal.norm_squared();
    if !(n2 > 1e-12 * da.norm_squared() * db.norm_squared()) {
        return false;
    }
    // a0 + s da = b0 + t db within the plane.
    let s = r.cross(&db).dot(&normal) / n2;
    let t = r.cross(&da).dot(&normal) / n2;
    (-SLACK..=1.0 + SLACK).contains(&s) && (-SLACK..=1.0 + SLACK).contains(&t)
}

/// The first time `tau` in `[0, 1]` at which the vertex (`start[0]` to `end[0]`) passes
/// through the triangle (`start[1..]` to `end[1..]`), all moving linearly; `None` if it does
/// not.
pub fn point_triangle_impact(start: &[Vec3; 4], end: &[Vec3; 4]) -> Option<f64> {
    // The vertex last, so that the cubic is (b - a) x (c - a) . (p - a).
    let order = |q: &[Vec3; 4]| [q[1], q[2], q[3], q[0]];
    let (s, e) = (order(start), order(end));
    let mut roots = [0.0; 3];
    let found = roots_in_unit_interval(&coplanarity_cubic(&s, &e), &mut roots);
    roots[..found].iter().copied().find(|&t| {
        let [a, b, c, p] = [0, 1, 2, 3].map(|k| lerp(&s[k], &e[k], t));
        inside_triangle(&p, &a, &b, &c)
    })
}

/// The first time `tau` in `[0, 1]` at which edge `start[0..2]` passes through edge
/// `start[2..4]` (to `end`), all moving linearly; `None` if it does not.
pub fn edge_edge_impact(start: &[Vec3; 4], end: &[Vec3; 4]) -> Option<f64> {
    let mut roots = [0.0; 3];
    let found = roots_in_unit_interval(&coplanarity_cubic(start, end), &mut roots);
    roots[..found].iter().copied().find(|&t| {
        let [a0, a1, b0, b1] = [0, 1, 2, 3].map(|k| lerp(&start[k], &end[k], t));
        segments_meet(&a0, &a1, &b0, &b1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    fn random(rng: &mut Rng) -> Vec3 {
        Vec3::new(rng.unit(), rng.unit(), rng.unit())
    }

    /// Brute force: the coplanarity function sampled at `n` steps, each sign change refined
    /// by bisection, and the pair tested there; the first hit.
    fn brute(start: &[Vec3; 4], end: &[Vec3; 4], hit: impl Fn(&[Vec3; 4]) -> bool) -> Option<f64> {
        let at = |t: f64| [0, 1, 2, 3].map(|k| lerp(&start[k], &end[k], t));
        let f = |t: f64| {
            let q = at(t);
            (q[1] - q[0]).cross(&(q[2] - q[0])).dot(&(q[3] - q[0]))
        };
        let n = 20_000;
        for i in 0..n {
            let (mut lo, mut hi) = (i as f64 / n as f64, (i + 1) as f64 / n as f64);
            if f(lo) * f(hi) > 0.0 {
                continue;
            }
            for _ in 0..60 {
                let mid = 0.5 * (lo + hi);
                if (f(mid) < 0.0) == (f(lo) < 0.0) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let t = 0.5 * (lo + hi);
            if hit(&at(t)) {
                return Some(t);
            }
        }
        None
    }

    #[test]
    fn cubic_roots_match_a_sampled_search() {
        let mut rng = Rng(0xcc_d001);
        for _ in 0..2_000 {
            let c = [0, 1, 2, 3].map(|_| rng.unit());
            let mut roots = [0.0; 3];
            let found = roots_in_unit_interval(&c, &mut roots);
            for &t in &roots[..found] {
                assert!(evaluate(&c, t).abs() < 1e-12, "{c:?} at {t}");
            }
            // Every sign change of a fine sampling holds a root that was found.
            let n = 4_000;
            for i in 0..n {
                let (lo, hi) = (i as f64 / n as f64, (i + 1) as f64 / n as f64);
                if evaluate(&c, lo) * evaluate(&c, hi) < 0.0 {
                    assert!(
                        roots[..found]
                            .iter()
                            .any(|&t| t >= lo - 1e-12 && t <= hi + 1e-12),
                        "{c:?}: a root in [{lo}, {hi}] missed ({:?})",
                        &roots[..found]
                    );
                }
            }
        }
    }

    #[test]
    fn impacts_match_brute_force_on_random_motions() {
        let mut rng = Rng(0xcc_d002);
        let (mut hits, mut misses) = (0, 0);
        for _ in 0..1_500 {
            let start = [0, 1, 2, 3].map(|_| random(&mut rng));
            let end = start.map(|p| p + random(&mut rng) * 1.5);
            let vt = point_triangle_impact(&start, &end);
            let vt_brute = brute(
                &[start[1], start[2], start[3], start[0]],
                &[end[1], end[2], end[3], end[0]],
                |q| inside_triangle(&q[3], &q[0], &q[1], &q[2]),
            );
            match (vt, vt_brute) {
                (Some(a), Some(b)) => {
                    assert!((a - b).abs() < 1e-6, "vertex-triangle at {a}, brute {b}");
                    hits += 1;
                }
                (None, None) => misses += 1,
                other => panic!("vertex-triangle {other:?} for {start:?} -> {end:?}"),
            }
            let ee = edge_edge_impact(&start, &end);
            let ee_brute = brute(&start, &end, |q| segments_meet(&q[0], &q[1], &q[2], &q[3]));
            match (ee, ee_brute) {
                (Some(a), Some(b)) => assert!((a - b).abs() < 1e-6, "edge-edge {a}, brute {b}"),
                (None, None) => {}
                other => panic!("edge-edge {other:?} for {start:?} -> {end:?}"),
            }
        }
        assert!(hits > 50 && misses > 50, "{hits} hits, {misses} misses");
    }

    #[test]
    fn a_vertex_through_a_still_triangle_hits_it_when_it_crosses() {
        let tri = [
            Vec3::new(0.0, 0.0, 0.0),
            Vec3::new(1.0, 0.0, 0.0),
            Vec3::new(0.0, 0.0, 1.0),
        ];
        let start = [Vec3::new(0.25, 0.3, 0.25), tri[0], tri[1], tri[2]];
        let end = [Vec3::new(0.25, -0.1, 0.25), tri[0], tri[1], tri[2]];
        let t = point_triangle_impact(&start, &end).unwrap();
        assert!((t - 0.75).abs() < 1e-12, "{t}");
        // Beside the triangle: no hit; stopping short of it: no hit.
        let beside = [Vec3::new(0.8, 0.3, 0.8), tri[0], tri[1], tri[2]];
        let below = [Vec3::new(0.8, -0.1, 0.8), tri[0], tri[1], tri[2]];
        assert_eq!(point_triangle_impact(&beside, &below), None);
        let short = [Vec3::new(0.25, 0.1, 0.25), tri[0], tri[1], tri[2]];
        assert_eq!(point_triangle_impact(&start, &short), None);
        // Through the shared border of two triangles, and through a corner: a hit.
        let on_edge = [Vec3::new(0.5, 0.3, 0.5), tri[0], tri[1], tri[2]];
        let past_edge = [Vec3::new(0.5, -0.3, 0.5), tri[0], tri[1], tri[2]];
        assert!(point_triangle_impact(&on_edge, &past_edge).is_some());
        let at_corner = [Vec3::new(0.0, 0.3, 0.0), tri[0], tri[1], tri[2]];
        let past_corner = [Vec3::new(0.0, -0.3, 0.0), tri[0], tri[1], tri[2]];
        assert!(point_triangle_impact(&at_corner, &past_corner).is_some());
        // Moving within the triangle's plane: no impact reported.
        let flat = [Vec3::new(2.0, 0.0, 0.2), tri[0], tri[1], tri[2]];
        let flat_end = [Vec3::new(-1.0, 0.0, 0.2), tri[0], tri[1], tri[2]];
        assert_eq!(point_triangle_impact(&flat, &flat_end), None);
    }

    #[test]
    fn a_triangle_swept_over_a_still_vertex_hits_it() {
        // The vertex stands still; the triangle falls onto it and rotates as it goes.
        let p = Vec3::new(0.2, 0.0, 0.2);
        let start = [
            p,
            Vec3::new(0.0, 0.5, 0.0),
            Vec3::new(1.0, 0.6, 0.0),
            Vec3::new(0.0, 0.4, 1.0),
        ];
        let end = [
            p,
            Vec3::new(0.0, -0.5, 0.0),
            Vec3::new(1.0, -0.7, 0.0),
            Vec3::new(0.0, -0.3, 1.0),
        ];
        let t = point_triangle_impact(&start, &end).unwrap();
        let at = [1, 2, 3].map(|k| lerp(&start[k], &end[k], t));
        let normal = (at[1] - at[0]).cross(&(at[2] - at[0])).normalize();
        assert!(normal.dot(&(p - at[0])).abs() < 1e-12);
    }

    #[test]
    fn crossing_edges_hit_and_parallel_or_passing_edges_do_not() {
        let a = [Vec3::new(-1.0, 0.0, 0.0), Vec3::new(1.0, 0.0, 0.0)];
        let b0 = [Vec3::new(0.0, 1.0, -1.0), Vec3::new(0.0, 1.0, 1.0)];
        let b1 = [Vec3::new(0.0, -1.0, -1.0), Vec3::new(0.0, -1.0, 1.0)];
        let t = edge_edge_impact(&[a[0], a[1], b0[0], b0[1]], &[a[0], a[1], b1[0], b1[1]]);
        assert!((t.unwrap() - 0.5).abs() < 1e-12);
        // The same motion beside the first edge's end: no hit.
        let shift = Vec3::new(1.5, 0.0, 0.0);
        let t = edge_edge_impact(
            &[a[0], a[1], b0[0] + shift, b0[1] + shift],
            &[a[0], a[1], b1[0] + shift, b1[1] + shift],
        );
        assert_eq!(t, None);
        // Parallel edges passing through each other's line: reported by no edge-edge hit.
        let p0 = [Vec3::new(-1.0, 1.0, 0.0), Vec3::new(1.0, 1.0, 0.0)];
        let p1 = [Vec3::new(-1.0, -1.0, 0.0), Vec3::new(1.0, -1.0, 0.0)];
        let t = edge_edge_impact(&[a[0], a[1], p0[0], p0[1]], &[a[0], a[1], p1[0], p1[1]]);
        assert_eq!(t, None);
    }
}
