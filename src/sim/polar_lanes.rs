//! The signed SVD of [`crate::sim::polar::svd3`], [`LANES`] matrices at a time.
//!
//! Same algorithm, same operations in the same order, lane by lane: scale by the largest entry,
//! cyclic Jacobi on `F'F` (exact angles, the small-angle series, at most
//! [`crate::sim::polar::MAX_SWEEPS`] sweeps), sort with determinant-preserving column swaps, two
//! left Givens rotations (QR of the first column) and the closed-form signed 2x2 SVD of the
//! trailing block (McAdams et al. 2011, Irving et al. 2004; see [`crate::sim::polar`]). Every
//! branch of the scalar code becomes a masked select, so each lane's result is bit-identical to
//! `svd3` of that lane's matrix (tested), including inverted, singular and non-finite input. A
//! Jacobi rotation that no lane needs is skipped, and the large-angle formula (two square roots
//! and two divisions) is only evaluated when some lane needs it, which after a warm start is
//! rare: this is where the vectorised local step gains over the scalar one besides the width.

// Index loops read best for the fixed-size 3x3 kernels below.
#![allow(clippy::needless_range_loop)]

use super::lanes::{LANES, LaneMask, Lanes};
use super::polar::MAX_SWEEPS;

/// A 3x3 matrix per lane, row-major: `m[i][j]` is entry (i, j) of each lane's matrix.
pub type Mat3Lanes = [[Lanes; 3]; 3];

/// [`LANES`] signed SVDs `F = U diag(sigma) V'`, one per lane (see [`crate::sim::polar::Svd3`]).
#[derive(Debug, Clone, Copy)]
pub struct Svd3Lanes {
    /// Left rotations.
    pub u: Mat3Lanes,
    /// Signed singular values, `sigma[0] >= sigma[1] >= |sigma[2]|` per lane.
    pub sigma: [Lanes; 3],
    /// Right rotations.
    pub v: Mat3Lanes,
}

const ZERO: Lanes = Lanes([0.0; LANES]);
const ONE: Lanes = Lanes([1.0; LANES]);

/// The identity in every lane.
#[inline(always)]
pub fn identity_lanes() -> Mat3Lanes {
    [[ONE, ZERO, ZERO], [ZERO, ONE, ZERO], [ZERO, ZERO, ONE]]
}

/// `(c, t)` of the small-angle series of `crate::sim::polar` (same coefficients).
#[inline(always)]
fn small_angle(y: Lanes) -> (Lanes, Lanes) {
    let u = y * y;
    let t = y * (1.0 + u * (-1.0 + u * (2.0 + u * (-5.0 + u * 14.0))));
    let c = 1.0 + u * (-0.5 + u * (1.375 + u * (-4.3125 + u * 14.398_437_5)));
    (c, t)
}

/// One Jacobi rotation in the `(p, q)` plane in the lanes whose `|a_pq| > tol`; returns whether
/// any lane rotated.
#[inline(always)]
fn jacobi(a: &mut Mat3Lanes, v: &mut Mat3Lanes, p: usize, q: usize, r: usize, tol: Lanes) -> bool {
    let apq = a[p][q];
    let active = apq.abs().gt(tol);
    if !active.any() {
        return false;
    }
    let d = a[q][q] - a[p][p];
    let small = apq.abs().lt(0.01 * d.abs());
    let (mut c, mut s, mut t) = (ONE, ZERO, ZERO);
    if (small & active).any() {
        let (cs, ts) = small_angle(apq / d);
        c = small.select(cs, c);
        s = small.select(ts * cs, s);
        t = small.select(ts, t);
    }
    let large = !small & active;
    if large.any() {
        let h = 2.0 * apq;
        let w = d.abs() + (d * d + h * h).sqrt();
        let hs = d.lt(ZERO).select(-h, h);
        let inv = 1.0 / (w * w + h * h).sqrt();
        c = large.select(w * inv, c);
        s = large.select(hs * inv, s);
        t = large.select(hs / w, t);
    }
    // Inactive lanes: c = 1, s = t = 0 leave every entry bit-identical (x - 0 = x), except
    // a_pq, which the scalar code leaves alone there.
    c = active.select(c, ONE);
    s = active.select(s, ZERO);
    t = active.select(t, ZERO);
    a[p][p] = a[p][p] - t * apq;
    a[q][q] = a[q][q] + t * apq;
    let zeroed = active.select(ZERO, apq);
    a[p][q] = zeroed;
    a[q][p] = zeroed;
    let arp = a[r][p];
    let arq = a[r][q];
    let nrp = c * arp - s * arq;
    let nrq = s * arp + c * arq;
    a[r][p] = nrp;
    a[p][r] = nrp;
    a[r][q] = nrq;
    a[q][r] = nrq;
    for row in v.iter_mut() {
        let vp = row[p];
        let vq = row[q];
        row[p] = c * vp - s * vq;
        row[q] = s * vp + c * vq;
    }
    true
}

/// Swaps columns `i` and `j` of `m` in the masked lanes, negating the new column `j`.
#[inline(always)]
fn swap_cols(m: &mut Mat3Lanes, i: usize, j: usize, mask: LaneMask) {
    for row in m.iter_mut() {
        let ti = row[i];
        row[i] = mask.select(row[j], ti);
        row[j] = mask.select(-ti, row[j]);
    }
}

/// Swaps two values in the masked lanes.
#[inline(always)]
fn swap(a: &mut Lanes, b: &mut Lanes, mask: LaneMask) {
    let ta = *a;
    *a = mask.select(*b, ta);
    *b = mask.select(ta, *b);
}

/// Left Givens rotation on rows `p`, `q` of `b` zeroing `b[q][col]`, accumulated into `u`.
#[inline(always)]
fn givens_left(b: &mut Mat3Lanes, u: &mut Mat3Lanes, p: usize, q: usize, col: usize) {
    let x = b[p][col];
    let y = b[q][col];
    let r2 = x * x + y * y;
    let active = r2.gt(Lanes::splat(1e-300));
    if !active.any() {
        return;
    }
    let inv = 1.0 / r2.sqrt();
    let c = x * inv;
    let s = y * inv;
    for j in 0..3 {
        let bp = b[p][j];
        let bq = b[q][j];
        b[p][j] = active.select(c * bp + s * bq, bp);
        b[q][j] = active.select(c * bq - s * bp, bq);
    }
    b[q][col] = active.select(ZERO, b[q][col]);
    for row in u.iter_mut() {
        let up = row[p];
        let uq = row[q];
        row[p] = active.select(c * up + s * uq, up);
        row[q] = active.select(c * uq - s * up, uq);
    }
}

/// `(x, y) / n`, or `(1, 0)` where `n` vanishes.
#[inline(always)]
fn unit(x: Lanes, y: Lanes, n: Lanes) -> (Lanes, Lanes) {
    let ok = n.gt(Lanes::splat(1e-300));
    let inv = 1.0 / n;
    (ok.select(x * inv, ONE), ok.select(y * inv, ZERO))
}

/// The signed 2x2 SVD of `crate::sim::polar`, per lane.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn svd2(a: Lanes, b: Lanes, c: Lanes, d: Lanes) -> (Lanes, Lanes, (Lanes, Lanes), (Lanes, Lanes)) {
    let e = 0.5 * (a + d);
    let f = 0.5 * (a - d);
    let g = 0.5 * (c + b);
    let h = 0.5 * (c - b);
    let q = (e * e + h * h).sqrt();
    let r = (f * f + g * g).sqrt();
    let (c1, s1) = unit(f, g, r);
    let (c2, s2) = unit(e, h, q);
    let cx = c1 * c2 - s1 * s2;
    let sx = s1 * c2 + c1 * s2;
    let positive = cx.ge(ZERO);
    let hx = positive.select(1.0 + cx, sx);
    let hy = positive.select(sx, 1.0 - cx);
    let inv = 1.0 / (hx * hx + hy * hy).sqrt();
    let cb = hx * inv;
    let sb = hy * inv;
    let cg = cb * c1 + sb * s1;
    let sg = sb * c1 - cb * s1;
    (q + r, q - r, (cb, sb), (cg, sg))
}

/// Signed SVD of [`LANES`] 3x3 matrices; lane `l` equals `svd3` of lane `l`'s matrix.
#[inline(always)]
pub fn svd3_lanes(f: &Mat3Lanes) -> Svd3Lanes {
    // 1. Scale by the largest absolute entry.
    let mut m = ZERO;
    for row in f {
        for x in row {
            m = m.max(x.abs());
        }
    }
    let ok = m.gt(ZERO) & m.is_finite();
    let scale = ok.select(m, ONE);
    let inv_scale = ok.select(1.0 / m, ONE);
    let mut fs = [[ZERO; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            fs[i][j] = f[i][j] * inv_scale;
        }
    }

    // 2. A = F'F, cyclic Jacobi.
    let mut a = [[ZERO; 3]; 3];
    for i in 0..3 {
        for j in i..3 {
            let x = fs[0][i] * fs[0][j] + fs[1][i] * fs[1][j] + fs[2][i] * fs[2][j];
            a[i][j] = x;
            a[j][i] = x;
        }
    }
    let tol = 1e-18 * (a[0][0] + a[1][1] + a[2][2]);
    let mut v = identity_lanes();
    for _ in 0..MAX_SWEEPS {
        let r01 = jacobi(&mut a, &mut v, 0, 1, 2, tol);
        let r02 = jacobi(&mut a, &mut v, 0, 2, 1, tol);
        let r12 = jacobi(&mut a, &mut v, 1, 2, 0, tol);
        if !(r01 || r02 || r12) {
            break;
        }
    }

    // 3. Sort the eigenvalues descending (det V = +1 kept).
    let (mut d0, mut d1, mut d2) = (a[0][0], a[1][1], a[2][2]);
    let m01 = d0.lt(d1);
    swap(&mut d0, &mut d1, m01);
    swap_cols(&mut v, 0, 1, m01);
    let m02 = d0.lt(d2);
    swap(&mut d0, &mut d2, m02);
    swap_cols(&mut v, 0, 2, m02);
    let m12 = d1.lt(d2);
    swap(&mut d1, &mut d2, m12);
    swap_cols(&mut v, 1, 2, m12);

    // 4. B = F V, QR of the first column.
    let mut b = [[ZERO; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            b[i][j] = fs[i][0] * v[0][j] + fs[i][1] * v[1][j] + fs[i][2] * v[2][j];
        }
    }
    let mut u = identity_lanes();
    givens_left(&mut b, &mut u, 0, 1, 0);
    givens_left(&mut b, &mut u, 0, 2, 0);

    // 5. Signed 2x2 SVD of the trailing block.
    let (s1, s2, (cb, sb), (cg, sg)) = svd2(b[1][1], b[1][2], b[2][1], b[2][2]);
    for row in u.iter_mut() {
        let u1 = row[1];
        let u2 = row[2];
        row[1] = cb * u1 + sb * u2;
        row[2] = cb * u2 - sb * u1;
    }
    for row in v.iter_mut() {
        let v1 = row[1];
        let v2 = row[2];
        row[1] = cg * v1 - sg * v2;
        row[2] = sg * v1 + cg * v2;
    }
    let (mut sig0, mut sig1, mut sig2) = (b[0][0], s1, s2);
    // Restore the order where round-off broke it by an ulp.
    let m01 = sig1.gt(sig0);
    swap(&mut sig0, &mut sig1, m01);
    swap_cols(&mut u, 0, 1, m01);
    swap_cols(&mut v, 0, 1, m01);
    let m12 = sig2.abs().gt(sig1);
    swap(&mut sig1, &mut sig2, m12);
    swap_cols(&mut u, 1, 2, m12);
    swap_cols(&mut v, 1, 2, m12);
    let flip = m12 & sig1.lt(ZERO);
    sig1 = flip.select(-sig1, sig1);
    sig2 = flip.select(-sig2, sig2);
    for row in u.iter_mut() {
        row[1] = flip.select(-row[1], row[1]);
        row[2] = flip.select(-row[2], row[2]);
    }
    Svd3Lanes {
        u,
        sigma: [sig0 * scale, sig1 * scale, sig2 * scale],
        v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::math::{Mat3, Vec3};
    use crate::sim::polar::svd3;
    use crate::sim::test_rng::Rng;

    fn lanes_of(ms: &[Mat3; LANES]) -> Mat3Lanes {
        std::array::from_fn(|i| std::array::from_fn(|j| Lanes(ms.map(|m| m[(i, j)]))))
    }

    fn lane(m: &Mat3Lanes, l: usize) -> Mat3 {
        Mat3::from_fn(|i, j| m[i][j].0[l])
    }

    fn range(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * rng.unit()
    }

    fn rotation(rng: &mut Rng) -> Mat3 {
        let axis = Vec3::new(rng.signed(), rng.signed(), rng.signed() + 1e-3);
        *nalgebra::Rotation3::from_scaled_axis(axis * 3.0).matrix()
    }

    fn bits(m: &Mat3) -> Vec<u64> {
        m.iter().map(|x| x.to_bits()).collect()
    }

    /// Every lane of `svd3_lanes` is bit-identical to `svd3` of its matrix; `ms` fills the
    /// lanes in turn (repeated where it holds fewer than [`LANES`]).
    fn assert_matches_scalar(ms: &[Mat3]) {
        let ms: [Mat3; LANES] = std::array::from_fn(|l| ms[l % ms.len()]);
        let got = svd3_lanes(&lanes_of(&ms));
        for (l, m) in ms.iter().enumerate() {
            let want = svd3(m);
            let sigma = [got.sigma[0].0[l], got.sigma[1].0[l], got.sigma[2].0[l]];
            let same_sigma = sigma
                .iter()
                .zip(want.sigma.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
            assert!(same_sigma, "lane {l} of {m}: {sigma:?} vs {}", want.sigma);
            if want.sigma.iter().all(|s| s.is_finite()) {
                assert_eq!(bits(&lane(&got.u, l)), bits(&want.u), "U, lane {l} of {m}");
                assert_eq!(bits(&lane(&got.v, l)), bits(&want.v), "V, lane {l} of {m}");
            }
        }
    }

    #[test]
    fn every_lane_is_bit_identical_to_the_scalar_svd() {
        let mut rng = Rng(0x5eed_1a4e);
        let reflect = Mat3::from_diagonal(&Vec3::new(1.0, 1.0, -1.0));
        let mut lanes = Vec::new();
        for _ in 0..500 {
            let random = Mat3::from_fn(|_, _| 2.0 * rng.signed());
            let r = rotation(&mut rng);
            let near_rotation = r * Mat3::from_diagonal(&Vec3::new(
                range(&mut rng, 0.9, 1.1),
                range(&mut rng, 0.9, 1.1),
                range(&mut rng, 0.9, 1.1),
            ));
            let reflected = near_rotation * reflect;
            let near_singular = r * Mat3::from_diagonal(&Vec3::new(
                1.0,
                range(&mut rng, 0.5, 1.0),
                range(&mut rng, -1e-9, 1e-9),
            ));
            lanes.extend([random, near_rotation, reflected, near_singular]);
            if lanes.len() == LANES {
                assert_matches_scalar(&lanes);
                lanes.clear();
            }
        }
        // Degenerate and special lanes side by side with ordinary ones.
        let rank_one = Mat3::new(1.0, 2.0, 3.0, 2.0, 4.0, 6.0, -1.0, -2.0, -3.0);
        let inverted = Mat3::from_diagonal(&Vec3::new(-0.5, 1.0, 1.0));
        assert_matches_scalar(&[Mat3::zeros(), Mat3::identity(), rank_one, inverted]);
        assert_matches_scalar(&[
            Mat3::from_element(f64::NAN),
            Mat3::identity() * 1e-200,
            Mat3::identity() * 1e200,
            -Mat3::identity(),
        ]);
    }
}
