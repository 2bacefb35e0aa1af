//! Fast, robust signed SVD and polar decomposition of 3x3 matrices.
//!
//! This is the kernel of the Projective Dynamics local step: for every
//! tetrahedron the deformation gradient `F` is projected onto the closest
//! rotation (or onto a constrained set of stretches), which requires an SVD of
//! a 3x3 matrix millions of times per second.
//!
//! # Why a *signed* SVD
//!
//! A plain SVD returns non-negative singular values and orthogonal `U`, `V`
//! that may be reflections. For an inverted tetrahedron (`det F < 0`) the
//! "closest orthogonal matrix" `U V^T` would then be a reflection, and
//! projecting onto it keeps the element inverted forever. Following Irving,
//! Teran and Fedkiw, *"Invertible finite elements for robust simulation of
//! large deformation"* (SCA 2004), we instead compute the *signed* (rotation
//! variant) SVD `F = U diag(sigma) V^T` in which `U` and `V` are both proper
//! rotations (`det = +1`) and the sign of `det F` is carried by the singular
//! value of smallest magnitude. `U V^T` is then always a proper rotation and
//! an inverted element is pushed back towards the nearest *rotation*, which
//! un-inverts it along its weakest direction.
//!
//! # Ordering convention
//!
//! `sigma[0] >= sigma[1] >= |sigma[2]|`, with `sigma[0], sigma[1] >= 0` and
//! `sign(sigma[2]) = sign(det F)` (for `det F == 0` the sign of `sigma[2]`
//! is arbitrary, its magnitude is ~0).
//!
//! # Algorithm
//!
//! Structure after McAdams, Selle, Tamstorf, Teran and Sifakis, *"Computing
//! the singular value decomposition of 3x3 matrices with minimal branching
//! and elementary floating point operations"* (UW-Madison TR1690, 2011), but
//! with exact Givens angles in `f64`:
//!
//! 1. `F` is scaled by its largest absolute entry (no overflow/underflow in
//!    `F^T F`, scale invariant thresholds).
//! 2. The symmetric matrix `A = F^T F` is diagonalised by cyclic Jacobi
//!    rotations (exact angles, bounded number of sweeps, early exit when the
//!    off-diagonal part is below round-off). The accumulated rotation is `V`.
//!    Small-angle rotations (the majority after the first sweep) use a short
//!    Taylor series instead of the `sqrt -> sqrt -> div` chain, since the
//!    kernel is latency bound.
//! 3. The eigenvalues are sorted in decreasing order by permuting the columns
//!    of `V` (one column is negated per swap so that `det V = +1`).
//! 4. `B = F V` has (nearly) orthogonal columns of decreasing norm. Two
//!    Givens rotations from the left zero out `B[1][0]` and `B[2][0]`
//!    (QR step); the accumulated rotation is `U` and `sigma[0] = |b_0| > 0`.
//! 5. The remaining 2x2 block is decomposed by an exact closed-form *signed*
//!    2x2 SVD (two rotations, `s1 >= |s2|`, `sign(s2) = sign(det)`), which
//!    also repairs the case where the two smaller singular values are below
//!    `sqrt(eps) * sigma[0]` (there `F^T F` cannot separate their singular
//!    vectors, but the 2x2 SVD acting on `F V` directly can). Rank deficient
//!    and zero matrices need no special treatment: every Givens rotation
//!    falls back to the identity when its input vanishes, so `U` and `V`
//!    always stay orthonormal rotations.
//!
//! All `U`, `V` are products of exact plane rotations, hence orthonormal with
//! `det = +1` to round-off. The reconstruction error is `O(eps * ||F||)`.
//! No branch can loop: the Jacobi stage runs at most [`MAX_SWEEPS`] sweeps,
//! so non-finite input terminates (with non-finite output) and never panics.

// Index loops read best for the fixed-size 3x3 kernels below.
#![allow(clippy::needless_range_loop)]

use nalgebra::{Matrix3, Vector3};

/// Signed SVD `F = U diag(sigma) V^T` with `U`, `V` proper rotations
/// (`det = +1`).
///
/// Ordering: `sigma[0] >= sigma[1] >= |sigma[2]|`, the first two are
/// non-negative and `sigma[2]` carries the sign of `det F` (negative for an
/// inverted element), as in the rotation-variant SVD of Irving et al. 2004.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Svd3 {
    /// Left rotation `U` (`U^T U = I`, `det U = +1`).
    pub u: Matrix3<f64>,
    /// Signed singular values, `sigma[0] >= sigma[1] >= |sigma[2]|`;
    /// `sign(sigma[2]) = sign(det F)`.
    pub sigma: Vector3<f64>,
    /// Right rotation `V` (`V^T V = I`, `det V = +1`).
    pub v: Matrix3<f64>,
}

/// Upper bound on the number of cyclic Jacobi sweeps (each sweep is three
/// rotations). Convergence is quadratic; 4-5 sweeps are typical.
pub const MAX_SWEEPS: usize = 8;

type M3 = [[f64; 3]; 3];

/// Jacobi rotation for a small angle: with `y = a_pq / (a_qq - a_pp)`,
/// `|y| < 0.01`, returns `(c, t)` where `t = 2y / (1 + sqrt(1 + 4y^2))`
/// (`= y - y^3 + 2y^5 - 5y^7 + 14y^9 - ...`, Catalan numbers) and
/// `c = 1 / sqrt(1 + t^2)`, both as truncated series in `u = y^2`
/// (relative truncation error below 1e-18).
#[inline(always)]
fn small_angle(y: f64) -> (f64, f64) {
    let u = y * y;
    let t = y * (1.0 + u * (-1.0 + u * (2.0 + u * (-5.0 + u * 14.0))));
    let c = 1.0 + u * (-0.5 + u * (1.375 + u * (-4.3125 + u * 14.398_437_5)));
    (c, t)
}

/// One Jacobi rotation in the `(p, q)` plane of the symmetric matrix `a`
/// (`r` is the third index), accumulated into the columns of `v`.
#[inline(always)]
fn jacobi(a: &mut M3, v: &mut M3, p: usize, q: usize, r: usize, tol: f64) -> bool {
    let apq = a[p][q];
    if apq.abs() <= tol {
        return false;
    }
    // Golub & Van Loan symmetric Schur: t = tan(theta) is the smaller root
    // of t^2 + 2 tau t - 1 = 0, tau = (a_qq - a_pp) / (2 a_pq).
    let d = a[q][q] - a[p][p];
    let (c, s, t) = if apq.abs() < 0.01 * d.abs() {
        // Small angle (most rotations after the first sweep): with
        // y = a_pq / d, u = y^2 <= 1e-4, the exact t and c = 1/sqrt(1+t^2)
        // are Taylor series in u (truncation error < 1e-18 relative); this
        // avoids the sqrt -> sqrt -> div latency chain.
        let (c, t) = small_angle(apq / d);
        (c, t * c, t)
    } else {
        let h = 2.0 * apq;
        let w = d.abs() + (d * d + h * h).sqrt(); // w > 0 since h != 0
        let hs = if d < 0.0 { -h } else { h };
        // t = hs / w, c = 1/sqrt(1+t^2), s = t c
        let inv = 1.0 / (w * w + h * h).sqrt();
        (w * inv, hs * inv, hs / w)
    };
    a[p][p] -= t * apq;
    a[q][q] += t * apq;
    a[p][q] = 0.0;
    a[q][p] = 0.0;
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

/// Swaps columns `i` and `j` of `m`, negating the new column `j` so that the
/// determinant is preserved.
#[inline(always)]
fn swap_cols(m: &mut M3, i: usize, j: usize) {
    for row in m.iter_mut() {
        let t = row[i];
        row[i] = row[j];
        row[j] = -t;
    }
}

/// Left Givens rotation on rows `p`, `q` of `b` zeroing `b[q][col]`; the
/// transpose is accumulated into columns `p`, `q` of `u` (`B = U B'`).
#[inline(always)]
fn givens_left(b: &mut M3, u: &mut M3, p: usize, q: usize, col: usize) {
    let x = b[p][col];
    let y = b[q][col];
    let r2 = x * x + y * y;
    // r2 == 0 (or denormal-tiny): identity, keeps U orthonormal.
    if r2 > 1e-300 {
        let inv = 1.0 / r2.sqrt();
        let c = x * inv;
        let s = y * inv;
        for j in 0..3 {
            let bp = b[p][j];
            let bq = b[q][j];
            b[p][j] = c * bp + s * bq;
            b[q][j] = c * bq - s * bp;
        }
        b[q][col] = 0.0;
        for row in u.iter_mut() {
            let up = row[p];
            let uq = row[q];
            row[p] = c * up + s * uq;
            row[q] = c * uq - s * up;
        }
    }
}

/// Unit vector `(x, y) / |(x, y)|`, or `(1, 0)` when it vanishes.
#[inline(always)]
fn unit(x: f64, y: f64, n: f64) -> (f64, f64) {
    if n > 1e-300 {
        let inv = 1.0 / n;
        (x * inv, y * inv)
    } else {
        (1.0, 0.0)
    }
}

/// Exact signed SVD of the 2x2 matrix `[[a, b], [c, d]] = R(beta) diag(s1,
/// s2) R(gamma)` with `R(t) = [[cos t, -sin t], [sin t, cos t]]`,
/// `s1 >= |s2|` and `sign(s2) = sign(ad - bc)`.
///
/// Returns `(s1, s2, (cos beta, sin beta), (cos gamma, sin gamma))`.
#[inline(always)]
fn svd2(a: f64, b: f64, c: f64, d: f64) -> (f64, f64, (f64, f64), (f64, f64)) {
    // M = Q R(a2) + R Refl(a1), Refl(t) = [[cos t, sin t], [sin t, -cos t]].
    let e = 0.5 * (a + d);
    let f = 0.5 * (a - d);
    let g = 0.5 * (c + b);
    let h = 0.5 * (c - b);
    let q = (e * e + h * h).sqrt();
    let r = (f * f + g * g).sqrt();
    let (c1, s1) = unit(f, g, r); // angle a1
    let (c2, s2) = unit(e, h, q); // angle a2
    // beta + gamma = a2, beta - gamma = a1.
    let cx = c1 * c2 - s1 * s2; // cos(a1 + a2)
    let sx = s1 * c2 + c1 * s2; // sin(a1 + a2)
    // Half angle (either of the two solutions works).
    let (hx, hy) = if cx >= 0.0 {
        (1.0 + cx, sx)
    } else {
        (sx, 1.0 - cx)
    };
    let inv = 1.0 / (hx * hx + hy * hy).sqrt(); // norm >= 1
    let cb = hx * inv;
    let sb = hy * inv;
    // gamma = beta - a1
    let cg = cb * c1 + sb * s1;
    let sg = sb * c1 - cb * s1;
    (q + r, q - r, (cb, sb), (cg, sg))
}

/// Signed SVD of a 3x3 matrix: `F = U diag(sigma) V^T`.
///
/// `U` and `V` are proper rotations (`det = +1`), `sigma[0] >= sigma[1] >=
/// |sigma[2]|` with `sigma[0], sigma[1] >= 0` and `sign(sigma[2]) = sign(det
/// F)` (negative for inverted elements). Never panics; finite input gives
/// finite output (for `F = 0`: `U = V = I`, `sigma = 0`). Reconstruction and
/// orthogonality errors are at round-off level relative to `||F||`.
pub fn svd3(f: &Matrix3<f64>) -> Svd3 {
    // 1. scale by the largest absolute entry.
    let mut m = 0.0f64;
    for x in f.iter() {
        m = m.max(x.abs());
    }
    let (scale, inv_scale) = if m > 0.0 && m.is_finite() {
        (m, 1.0 / m)
    } else {
        (1.0, 1.0)
    };
    let mut fs: M3 = [[0.0; 3]; 3];
    for (i, row) in fs.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            *x = f[(i, j)] * inv_scale;
        }
    }

    // 2. A = F^T F, cyclic Jacobi.
    let mut a: M3 = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in i..3 {
            let x = fs[0][i] * fs[0][j] + fs[1][i] * fs[1][j] + fs[2][i] * fs[2][j];
            a[i][j] = x;
            a[j][i] = x;
        }
    }
    let tol = 1e-18 * (a[0][0] + a[1][1] + a[2][2]);
    let mut v: M3 = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    for _ in 0..MAX_SWEEPS {
        let r01 = jacobi(&mut a, &mut v, 0, 1, 2, tol);
        let r02 = jacobi(&mut a, &mut v, 0, 2, 1, tol);
        let r12 = jacobi(&mut a, &mut v, 1, 2, 0, tol);
        if !(r01 || r02 || r12) {
            break;
        }
    }

    // 3. sort eigenvalues descending (keeping det V = +1).
    let mut d = [a[0][0], a[1][1], a[2][2]];
    if d[0] < d[1] {
        d.swap(0, 1);
        swap_cols(&mut v, 0, 1);
    }
    if d[0] < d[2] {
        d.swap(0, 2);
        swap_cols(&mut v, 0, 2);
    }
    if d[1] < d[2] {
        d.swap(1, 2);
        swap_cols(&mut v, 1, 2);
    }

    // 4. B = F V, then QR of the first column.
    let mut b: M3 = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            b[i][j] = fs[i][0] * v[0][j] + fs[i][1] * v[1][j] + fs[i][2] * v[2][j];
        }
    }
    let mut u: M3 = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    givens_left(&mut b, &mut u, 0, 1, 0);
    givens_left(&mut b, &mut u, 0, 2, 0);

    // 5. signed 2x2 SVD of the trailing block.
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
    let mut sigma = [b[0][0], s1, s2];
    // For (near-)equal singular values round-off can break the order by an
    // ulp; restore it exactly (swapping the same columns of U and V).
    if sigma[1] > sigma[0] {
        sigma.swap(0, 1);
        swap_cols(&mut u, 0, 1);
        swap_cols(&mut v, 0, 1);
    }
    if sigma[2].abs() > sigma[1] {
        sigma.swap(1, 2);
        swap_cols(&mut u, 1, 2);
        swap_cols(&mut v, 1, 2);
        if sigma[1] < 0.0 {
            // Move the sign back to the last value: negate u1 and u2.
            sigma[1] = -sigma[1];
            sigma[2] = -sigma[2];
            for row in u.iter_mut() {
                row[1] = -row[1];
                row[2] = -row[2];
            }
        }
    }

    Svd3 {
        u: Matrix3::from_fn(|i, j| u[i][j]),
        sigma: Vector3::new(sigma[0] * scale, sigma[1] * scale, sigma[2] * scale),
        v: Matrix3::from_fn(|i, j| v[i][j]),
    }
}

/// Rotation closest to `F` in the Frobenius norm among proper rotations:
/// `R = U V^T` of the signed SVD [`svd3`].
///
/// Always a proper rotation (`det R = +1`), also for inverted (`det F < 0`,
/// the reflection is removed along the weakest singular direction), singular
/// or zero `F` (the identity for `F = 0`). Never NaN for finite input.
pub fn polar_rotation(f: &Matrix3<f64>) -> Matrix3<f64> {
    let s = svd3(f);
    s.u * s.v.transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic xorshift64* generator.
    struct Rng(u64);

    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        /// Uniform in [0, 1).
        fn unit(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
        }
        fn range(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * self.unit()
        }
        fn matrix(&mut self, lo: f64, hi: f64) -> Matrix3<f64> {
            Matrix3::from_fn(|_, _| self.range(lo, hi))
        }
        /// Random proper rotation from a random unit quaternion.
        fn rotation(&mut self) -> Matrix3<f64> {
            loop {
                let q = nalgebra::Vector4::new(
                    self.range(-1.0, 1.0),
                    self.range(-1.0, 1.0),
                    self.range(-1.0, 1.0),
                    self.range(-1.0, 1.0),
                );
                let n = q.norm();
                if n > 0.1 && n <= 1.0 {
                    let q = nalgebra::UnitQuaternion::from_quaternion(nalgebra::Quaternion::new(
                        q[0], q[1], q[2], q[3],
                    ));
                    return *q.to_rotation_matrix().matrix();
                }
            }
        }
    }

    fn fro(m: &Matrix3<f64>) -> f64 {
        m.norm()
    }

    /// Reference singular values (descending, non-negative) from nalgebra.
    fn reference_sv(f: &Matrix3<f64>) -> [f64; 3] {
        let sv = f.svd(true, true).singular_values;
        let mut s = [sv[0], sv[1], sv[2]];
        s.sort_by(|a, b| b.total_cmp(a));
        s
    }

    /// Checks every documented property of `svd3(f)`.
    fn check(f: &Matrix3<f64>) {
        let s = svd3(f);
        let nf = fro(f);
        let scale = nf.max(1.0);
        let ctx = format!("F = {f:?}\nsvd = {s:?}");
        assert!(
            s.u.iter()
                .chain(s.v.iter())
                .chain(s.sigma.iter())
                .all(|x| x.is_finite()),
            "non-finite output\n{ctx}"
        );

        // Reconstruction.
        let rec = s.u * Matrix3::from_diagonal(&s.sigma) * s.v.transpose();
        let err = fro(&(rec - f));
        assert!(err <= 1e-10 * scale, "reconstruction error {err}\n{ctx}");

        // Orthonormality and proper rotations.
        let id = Matrix3::identity();
        let eu = fro(&(s.u.transpose() * s.u - id));
        let ev = fro(&(s.v.transpose() * s.v - id));
        assert!(
            eu <= 1e-10 && ev <= 1e-10,
            "not orthonormal {eu} {ev}\n{ctx}"
        );
        assert!((s.u.determinant() - 1.0).abs() <= 1e-10, "det U\n{ctx}");
        assert!((s.v.determinant() - 1.0).abs() <= 1e-10, "det V\n{ctx}");

        // Ordering: sigma0 >= sigma1 >= |sigma2|, first two non-negative.
        let sg = s.sigma;
        assert!(
            sg[0] >= 0.0 && sg[1] >= 0.0,
            "negative leading sigma\n{ctx}"
        );
        assert!(sg[0] >= sg[1] && sg[1] >= sg[2].abs(), "not sorted\n{ctx}");

        // Sign of the smallest singular value = sign(det F).
        let det = f.determinant();
        if det.abs() > 1e-8 * nf.powi(3).max(1e-300) {
            assert_eq!(sg[2] < 0.0, det < 0.0, "sign of sigma2 vs det {det}\n{ctx}");
        }

        // Singular values against nalgebra.
        let r = reference_sv(f);
        let sref = r[0].max(1e-300);
        for k in 0..3 {
            let e = (sg[k].abs() - r[k]).abs();
            assert!(
                e <= 1e-9 * sref.max(r[k]) || (nf == 0.0 && sg[k] == 0.0),
                "singular value {k}: {} vs {}\n{ctx}",
                sg[k],
                r[k]
            );
        }

        // Polar rotation is a proper rotation, equals U V^T.
        let p = polar_rotation(f);
        assert!(
            fro(&(p.transpose() * p - id)) <= 1e-10,
            "polar not orthonormal\n{ctx}"
        );
        assert!((p.determinant() - 1.0).abs() <= 1e-10, "det polar\n{ctx}");
    }

    /// Polar rotation vs nalgebra's `U V^T` (reflection-fixed), for
    /// well-conditioned `F`.
    fn check_polar_against_nalgebra(f: &Matrix3<f64>) {
        let svd = f.svd(true, true);
        let (Some(u), Some(vt)) = (svd.u, svd.v_t) else {
            panic!("nalgebra svd failed");
        };
        let mut u = u;
        let sv = svd.singular_values;
        let mut r = u * vt;
        if r.determinant() < 0.0 {
            // Flip the column belonging to the smallest singular value.
            let k = (0..3).min_by(|&a, &b| sv[a].total_cmp(&sv[b])).unwrap_or(2);
            let col = -u.column(k);
            u.set_column(k, &col);
            r = u * vt;
        }
        let p = polar_rotation(f);
        let e = fro(&(p - r));
        assert!(e <= 1e-9, "polar mismatch {e}\nF = {f:?}\n{p:?}\n{r:?}");
    }

    fn diag(a: f64, b: f64, c: f64) -> Matrix3<f64> {
        Matrix3::from_diagonal(&Vector3::new(a, b, c))
    }

    #[test]
    fn small_angle_series_matches_exact_rotation() {
        for i in 0..=2000 {
            let y = 0.01 * (i as f64 - 1000.0) / 1000.0;
            let (c, t) = small_angle(y);
            // Exact: t = 2y / (1 + sqrt(1 + 4y^2)), c = 1/sqrt(1+t^2).
            let te = 2.0 * y / (1.0 + (1.0 + 4.0 * y * y).sqrt());
            let ce = 1.0 / (1.0 + te * te).sqrt();
            assert!((t - te).abs() <= 1e-15 * te.abs(), "{y}: {t} vs {te}");
            assert!((c - ce).abs() <= 1e-15, "{y}: {c} vs {ce}");
        }
    }

    #[test]
    fn random_uniform_matrices() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..10_000 {
            let f = rng.matrix(-2.0, 2.0);
            check(&f);
            let sv = reference_sv(&f);
            if sv[2] > 1e-3 * sv[0] && f.determinant() > 0.0 {
                check_polar_against_nalgebra(&f);
            }
        }
    }

    #[test]
    fn rotation_times_diag_including_reflections() {
        let mut rng = Rng(12345);
        for i in 0..2_000 {
            let r1 = rng.rotation();
            let r2 = rng.rotation();
            let mut d = Vector3::new(
                rng.range(0.1, 3.0),
                rng.range(0.1, 3.0),
                rng.range(0.1, 3.0),
            );
            if i % 2 == 1 {
                let k = i % 3;
                d[k] = -d[k]; // reflected, det < 0
            }
            let f = r1 * Matrix3::from_diagonal(&d) * r2.transpose();
            check(&f);
            let s = svd3(&f);
            let mut expect = [d[0].abs(), d[1].abs(), d[2].abs()];
            expect.sort_by(|a, b| b.total_cmp(a));
            for k in 0..3 {
                assert!((s.sigma[k].abs() - expect[k]).abs() < 1e-10);
            }
            assert_eq!(s.sigma[2] < 0.0, i % 2 == 1);
            if i % 2 == 0 {
                check_polar_against_nalgebra(&f);
                // det > 0: polar rotation is exactly r1 r2^T.
                assert!(fro(&(polar_rotation(&f) - r1 * r2.transpose())) < 1e-10);
            }
        }
    }

    #[test]
    fn inverted_element_gives_rotation() {
        // Reflection through the xy-plane: closest rotation flips the
        // weakest axis; here diag(2, 1, -0.5) -> identity.
        let f = diag(2.0, 1.0, -0.5);
        let s = svd3(&f);
        assert!((s.sigma - Vector3::new(2.0, 1.0, -0.5)).norm() < 1e-14);
        assert!(fro(&(polar_rotation(&f) - Matrix3::identity())) < 1e-14);
        check(&f);
    }

    #[test]
    fn near_singular() {
        let mut rng = Rng(777);
        for &tiny in &[1e-9, 1e-14, 0.0] {
            for i in 0..500 {
                let r1 = rng.rotation();
                let r2 = rng.rotation();
                let a = rng.range(0.5, 2.0);
                let b = rng.range(0.5, 2.0);
                let c = if i % 2 == 0 { tiny } else { -tiny };
                let f = r1 * diag(a, b, c) * r2.transpose();
                check(&f);
                // Two tiny singular values as well.
                let f2 = r1 * diag(a, tiny, c) * r2.transpose();
                check(&f2);
            }
        }
    }

    #[test]
    fn rank_one_and_zero() {
        let mut rng = Rng(4242);
        for _ in 0..1_000 {
            let a = Vector3::new(
                rng.range(-2.0, 2.0),
                rng.range(-2.0, 2.0),
                rng.range(-2.0, 2.0),
            );
            let b = Vector3::new(
                rng.range(-2.0, 2.0),
                rng.range(-2.0, 2.0),
                rng.range(-2.0, 2.0),
            );
            check(&(a * b.transpose()));
        }
        // Axis-aligned rank-1 matrices (exact zeros everywhere).
        for i in 0..3 {
            for j in 0..3 {
                let mut f = Matrix3::zeros();
                f[(i, j)] = -3.0;
                check(&f);
            }
        }
        let z = Matrix3::zeros();
        check(&z);
        let s = svd3(&z);
        assert_eq!(s.sigma, Vector3::zeros());
        assert_eq!(polar_rotation(&z), Matrix3::identity());
    }

    #[test]
    fn identity_and_negative_identity() {
        let id = Matrix3::identity();
        check(&id);
        let s = svd3(&id);
        assert!((s.sigma - Vector3::new(1.0, 1.0, 1.0)).norm() < 1e-15);
        assert!(fro(&(polar_rotation(&id) - id)) < 1e-15);

        let nid = -id;
        check(&nid);
        let s = svd3(&nid);
        assert!((s.sigma - Vector3::new(1.0, 1.0, -1.0)).norm() < 1e-15);
        let p = polar_rotation(&nid);
        // -I = R diag(1,1,-1)... closest rotation is a rotation by pi.
        assert!((p.trace() + 1.0).abs() < 1e-12, "{p:?}");
    }

    #[test]
    fn repeated_singular_values() {
        let mut rng = Rng(99);
        for i in 0..1_000 {
            let r1 = rng.rotation();
            let r2 = rng.rotation();
            let d = match i % 5 {
                0 => diag(1.0, 1.0, 1.0),
                1 => diag(2.0, 2.0, 1.0),
                2 => diag(2.0, 1.0, 1.0),
                3 => diag(1.5, 1.5, -1.5),
                _ => diag(1.0, 1.0 + 1e-12, 1.0 - 1e-12),
            };
            let f = r1 * d * r2.transpose();
            check(&f);
            if d.determinant() > 0.0 {
                check_polar_against_nalgebra(&f);
            }
        }
        check(&diag(2.0, 2.0, 1.0));
        check(&diag(1.0, 2.0, 2.0));
        check(&diag(-2.0, 2.0, 2.0));
    }

    #[test]
    fn huge_and_tiny_scales() {
        let mut rng = Rng(31337);
        for &sc in &[1e8, 1e-8, 1e150, 1e-150] {
            for _ in 0..1_000 {
                let f = rng.matrix(-2.0, 2.0) * sc;
                check(&f);
                let p = polar_rotation(&f);
                let p1 = polar_rotation(&(f / sc));
                assert!(fro(&(p - p1)) < 1e-9 || reference_sv(&f)[2] < 1e-6 * sc);
            }
        }
    }

    #[test]
    fn non_finite_input_does_not_panic() {
        let mut f = Matrix3::identity();
        f[(1, 2)] = f64::NAN;
        let _ = svd3(&f);
        f[(1, 2)] = f64::INFINITY;
        let _ = svd3(&f);
        let _ = polar_rotation(&Matrix3::repeat(f64::NEG_INFINITY));
    }
}
