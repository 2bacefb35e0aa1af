//! The volume term's projection: the closest point `s` of the signed singular values `sigma` of a
//! tet's deformation gradient on `s1 s2 s3 = 1` (the volume constraint, Bouaziz et al. 2014
//! section 5). Used by the PD local step, eight tets at a time ([`volume_stretches_lanes`], in
//! [`crate::sim::local_step`]) with the general Newton ([`volume_stretches_newton`]) for the lanes
//! it does not settle, and one tet at a time ([`volume_preserving_stretches`], in
//! [`crate::sim::pd`]'s scalar local step).

use super::lanes::{LaneMask, Lanes};
use super::math::{Mat3, Vec3};

/// Smallest stretch the multiplier Newton takes on; below it (strongly compressed or inverted
/// tets) the general Newton does.
const MULTIPLIER_NEWTON_MIN_STRETCH: f64 = 0.25;

/// Iterations of the multiplier Newton before a lane is handed to the general one.
const MULTIPLIER_NEWTON_ITERATIONS: usize = 8;

/// The volume term's stretches for [`LANES`] singular-value triples: the closest point of `sigma`
/// on `s1 s2 s3 = 1`, on the branch `s_i = (sigma_i + sqrt(sigma_i^2 + 4 l)) / 2` of the
/// Lagrange conditions `s_i - sigma_i = l / s_i`, by Newton on the multiplier `l` alone (one
/// unknown, started from the linearisation `l = (1 - prod sigma) / (prod sigma sum sigma_i^-2)`).
/// Returns the stretches and the lanes that converged (`|prod s - 1| < 1e-14`); the others
/// (a stretch below `MULTIPLIER_NEWTON_MIN_STRETCH` (0.25), or no convergence) are left for the
/// general Newton. Under compression the branch holds the unique closest point; under
/// expansion it is the stationary point next to `sigma` (tested against the general Newton).
#[inline(always)]
pub fn volume_stretches_lanes(sigma: [Lanes; 3]) -> ([Lanes; 3], LaneMask) {
    let [a, b, c] = sigma;
    let product = a * b * c;
    let exact = (product - 1.0).abs().lt(Lanes::splat(1e-14));
    let smallest = a.min(b).min(c);
    let takes = smallest.gt(Lanes::splat(MULTIPLIER_NEWTON_MIN_STRETCH));
    let mut out = sigma;
    let mut done = exact | !takes;
    let mut converged = exact;
    if !(!done).any() {
        return (out, converged);
    }
    // `(1 - P) / (P sum sigma_i^-2)` with one division: `P^2 = a^2 b^2 c^2`.
    let (a2, b2, c2) = (a * a, b * b, c * c);
    let mut l = (1.0 - product) * product / (b2 * c2 + a2 * c2 + a2 * b2);
    for _ in 0..MULTIPLIER_NEWTON_ITERATIONS {
        let (ra, rb, rc) = (
            (a * a + 4.0 * l).sqrt(),
            (b * b + 4.0 * l).sqrt(),
            (c * c + 4.0 * l).sqrt(),
        );
        let (sa, sb, sc) = (0.5 * (a + ra), 0.5 * (b + rb), 0.5 * (c + rc));
        let residual = sa * sb * sc - 1.0;
        let settled = residual.abs().lt(Lanes::splat(1e-14)) & !done;
        out = [
            settled.select(sa, out[0]),
            settled.select(sb, out[1]),
            settled.select(sc, out[2]),
        ];
        converged = converged | settled;
        done = done | settled;
        if !(!done).any() {
            break;
        }
        // `residual / slope`, `slope = sb sc / ra + sa sc / rb + sa sb / rc`, with one division.
        let (rab, rac, rbc) = (ra * rb, ra * rc, rb * rc);
        let slope_times_r = sb * sc * rbc + sa * sc * rac + sa * sb * rab;
        l = l - residual * (rab * rc) / slope_times_r;
    }
    (out, converged)
}

/// Projection of the signed singular values `sigma` onto `s1 s2 s3 = 1` (the volume constraint,
/// Bouaziz et al. 2014 section 5): the multiplier Newton of
/// `volume_stretches_lanes` where it applies (every stretch above
/// 0.25), else `volume_stretches_newton`.
pub fn volume_preserving_stretches(sigma: Vec3) -> Vec3 {
    let lanes = [0, 1, 2].map(|c| Lanes::splat(sigma[c]));
    let (s, converged) = volume_stretches_lanes(lanes);
    if converged.get(0) {
        Vec3::new(s[0].0[0], s[1].0[0], s[2].0[0])
    } else {
        volume_stretches_newton(sigma)
    }
}

/// Projection of the signed singular values `sigma` onto `s1 s2 s3 = 1` (the volume constraint,
/// Bouaziz et al. 2014 section 5): Newton's method on the Lagrange conditions
/// `s_i - sigma_i = lambda prod_{j != i} s_j`, `prod s = 1`, started from the uniformly rescaled
/// stretches `|sigma| / cbrt(prod |sigma|)`; if Newton fails (degenerate input) that start is
/// used.
///
/// Under compression (`prod sigma < 1`) the set `{prod s >= 1}` is convex and this is its unique
/// closest point. Under expansion the closest point is not unique (for `sigma = (2, 2, 2)` the
/// nearest points of the surface are flattened shapes, not `(1, 1, 1)`): Newton then returns the
/// stationary point nearest the uniform rescale, which keeps the volume response isotropic. The
/// local/global alternation stays monotone in practice (tested) though not provably so there.
pub fn volume_stretches_newton(sigma: Vec3) -> Vec3 {
    let abs = sigma.map(|x| x.abs().max(1e-6));
    let det = abs.x * abs.y * abs.z;
    let start = abs / det.cbrt();
    if (sigma.x * sigma.y * sigma.z - 1.0).abs() < 1e-14 {
        return sigma;
    }
    let mut s = start;
    let mut lambda = 0.0;
    for _ in 0..12 {
        let p = Vec3::new(s.y * s.z, s.x * s.z, s.x * s.y);
        let c = s.x * s.y * s.z - 1.0;
        let r = s - sigma - lambda * p;
        if r.norm_squared() + c * c < 1e-22 {
            break;
        }
        // Newton on (r, c) = 0. The Jacobian is [[H, -p], [p', 0]] with H = I - lambda S,
        // S_ij = s_k for {i, j, k} = {0, 1, 2}: eliminate ds = H^-1 (r + p dl), p' ds = c.
        let h = Mat3::new(
            1.0,
            -lambda * s.z,
            -lambda * s.y,
            -lambda * s.z,
            1.0,
            -lambda * s.x,
            -lambda * s.y,
            -lambda * s.x,
            1.0,
        );
        let Some(h_inv) = h.try_inverse() else {
            return start;
        };
        let hr = h_inv * r;
        let hp = h_inv * p;
        let php = p.dot(&hp);
        if php.abs() < 1e-300 {
            return start;
        }
        let dl = (c - p.dot(&hr)) / php;
        let ds = hr + dl * hp;
        s -= ds;
        lambda -= dl;
        if !(s.x > 0.0 && s.y > 0.0 && s.z > 0.0) {
            return start;
        }
    }
    let ok = (s.x * s.y * s.z - 1.0).abs() < 1e-9;
    if ok && (s - sigma).norm_squared() <= (start - sigma).norm_squared() + 1e-12 {
        s
    } else {
        start
    }
}
