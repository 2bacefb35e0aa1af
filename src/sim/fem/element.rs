//! One linear tetrahedron of the Newton solver: its elastic energy, gradient and Hessian, the
//! Hessian projected to positive semi-definite by clamping the eigenvalues of the stress
//! derivative `dP/dF` (Teran et al. 2005; analytically, from the eigensystem of
//! [`super::energy`], after Smith, de Goes and Kim 2019).
//!
//! The deformation gradient of a tet is `F = sum_k x_k g_k'` over its four vertices, with the
//! gradient rows `g_k` of its rest shape (1/m; `g_0 = -(g_1 + g_2 + g_3)`, as in
//! [`crate::sim::pd`]). With rest volume `V` (m^3) the energy is `E = V Psi(F)` (J), its
//! gradient `dE/dx_k = V P g_k` (N), and its Hessian blocks
//! `d2E/(dx_k dx_l) = V sum_m lambda_m (Q_m g_k)(Q_m g_l)'` (N/m) over the nine eigenpairs
//! `(lambda_m, Q_m)` of `dP/dF`. With every `lambda_m` clamped at 0 the element Hessian is
//! positive semi-definite, so the Newton matrix `M/h^2 + K` stays positive definite however the
//! mesh is deformed or inverted (statically, `K` alone, where pins hold the rigid motions).

// Index loops read best for the fixed-size 3x3 and 4x4 kernels below.
#![allow(clippy::needless_range_loop)]

use super::energy::{FemModel, Lame, pair};
use crate::sim::math::{Mat3, Vec3};
use crate::sim::polar::{Svd3, svd3};

/// The nine eigenpairs of `dP/dF`: eigenvalues (Pa) and eigenmatrices (unit Frobenius norm,
/// mutually orthogonal).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StressModes {
    /// Eigenvalues (Pa), not clamped.
    pub values: [f64; 9],
    /// Eigenmatrices, in the order of [`StressModes::values`].
    pub matrices: [Mat3; 9],
}

/// The energy density `Psi(F)` (J/m^3) and first Piola-Kirchhoff stress `P = dPsi/dF` (Pa).
pub fn density_and_stress(model: FemModel, lame: Lame, f: &Mat3) -> (f64, Mat3) {
    let svd = svd3(f);
    let d = model.derivatives(lame, svd.sigma);
    (
        d.psi,
        svd.u * Mat3::from_diagonal(&d.gradient) * svd.v.transpose(),
    )
}

/// The eigensystem of `dP/dF` at `f`: three scaling modes, then the twist and the flip of each
/// pair of singular values (see [`super::energy`]).
pub fn stress_modes(model: FemModel, lame: Lame, f: &Mat3) -> StressModes {
    stress_modes_of(model, lame, &svd3(f))
}

/// [`stress_modes`] from the signed SVD of `F`.
pub fn stress_modes_of(model: FemModel, lame: Lame, svd: &Svd3) -> StressModes {
    let d = model.derivatives(lame, svd.sigma);
    let (u, vt) = (svd.u, svd.v.transpose());
    let mut values = [0.0; 9];
    let mut matrices = [Mat3::zeros(); 9];
    let (scaling_values, scaling_vectors) = symmetric_eigen3(&d.hessian);
    for m in 0..3 {
        values[m] = scaling_values[m];
        let z = scaling_vectors.column(m);
        matrices[m] = u * Mat3::from_diagonal(&Vec3::new(z[0], z[1], z[2])) * vt;
    }
    let half = std::f64::consts::FRAC_1_SQRT_2;
    for k in 0..3 {
        let (i, j) = pair(k);
        let mut twist = Mat3::zeros();
        twist[(i, j)] = half;
        twist[(j, i)] = -half;
        let mut flip = Mat3::zeros();
        flip[(i, j)] = half;
        flip[(j, i)] = half;
        values[3 + 2 * k] = d.twist[k];
        matrices[3 + 2 * k] = u * twist * vt;
        values[4 + 2 * k] = d.flip[k];
        matrices[4 + 2 * k] = u * flip * vt;
    }
    StressModes { values, matrices }
}

/// Cyclic Jacobi sweeps of a symmetric 3x3 matrix: stops once the off-diagonal part is at
/// round-off of the diagonal (quadratic convergence: three to five sweeps).
const EIGEN_SWEEPS: usize = 8;

/// Eigenvalues and orthonormal eigenvectors (columns) of a symmetric 3x3 matrix, by cyclic
/// Jacobi rotations (allocation-free; nalgebra's general routine cost a sixth of a Newton step
/// on the 1,000-vertex cube).
pub fn symmetric_eigen3(m: &Mat3) -> (Vec3, Mat3) {
    let mut a = *m;
    let mut v = Mat3::identity();
    for _ in 0..EIGEN_SWEEPS {
        let off = a[(0, 1)].powi(2) + a[(0, 2)].powi(2) + a[(1, 2)].powi(2);
        let diag = a[(0, 0)].powi(2) + a[(1, 1)].powi(2) + a[(2, 2)].powi(2);
        if off <= 1e-32 * diag || off == 0.0 {
            break;
        }
        for (p, q, r) in [(0, 1, 2), (0, 2, 1), (1, 2, 0)] {
            let apq = a[(p, q)];
            if apq == 0.0 {
                continue;
            }
            // The rotation that zeroes a_pq (Golub and Van Loan, algorithm 8.4.1), applied to
            // the entries it changes only.
            let theta = (a[(q, q)] - a[(p, p)]) / (2.0 * apq);
            let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
            let c = 1.0 / (t * t + 1.0).sqrt();
            let s = t * c;
            a[(p, p)] -= t * apq;
            a[(q, q)] += t * apq;
            a[(p, q)] = 0.0;
            a[(q, p)] = 0.0;
            let (arp, arq) = (a[(r, p)], a[(r, q)]);
            a[(r, p)] = c * arp - s * arq;
            a[(p, r)] = a[(r, p)];
            a[(r, q)] = s * arp + c * arq;
            a[(q, r)] = a[(r, q)];
            for row in 0..3 {
                let (vp, vq) = (v[(row, p)], v[(row, q)]);
                v[(row, p)] = c * vp - s * vq;
                v[(row, q)] = s * vp + c * vq;
            }
        }
    }
    (Vec3::new(a[(0, 0)], a[(1, 1)], a[(2, 2)]), v)
}

/// The deformation gradient `F = sum_k x_k g_k'` of a tet with vertex positions `x` (m) and
/// rest gradient rows `grads` (1/m).
pub fn deformation_gradient(x: &[Vec3; 4], grads: &[Vec3; 4]) -> Mat3 {
    let mut f = Mat3::zeros();
    for k in 0..4 {
        f += x[k] * grads[k].transpose();
    }
    f
}

/// A tet's elastic energy `V Psi(F)` (J) and its gradient `V P g_k` per vertex (N).
pub fn energy_and_gradient(
    model: FemModel,
    lame: Lame,
    volume: f64,
    grads: &[Vec3; 4],
    x: &[Vec3; 4],
) -> (f64, [Vec3; 4]) {
    let (energy, gradient, _) = evaluate(model, lame, volume, grads, x);
    (energy, gradient)
}

/// [`energy_and_gradient`] with the signed SVD of the tet's `F`, which
/// [`hessian_of`] takes at the same positions.
pub fn evaluate(
    model: FemModel,
    lame: Lame,
    volume: f64,
    grads: &[Vec3; 4],
    x: &[Vec3; 4],
) -> (f64, [Vec3; 4], Svd3) {
    let svd = svd3(&deformation_gradient(x, grads));
    let d = model.derivatives(lame, svd.sigma);
    let p = svd.u * Mat3::from_diagonal(&d.gradient) * svd.v.transpose();
    (volume * d.psi, grads.map(|g| volume * (p * g)), svd)
}

/// A tet's Hessian blocks `d2E/(dx_k dx_l)` (N/m) at positions `x`; with `project`, from the
/// eigenvalues of `dP/dF` clamped at 0 (positive semi-definite).
pub fn hessian(
    model: FemModel,
    lame: Lame,
    volume: f64,
    grads: &[Vec3; 4],
    x: &[Vec3; 4],
    project: bool,
) -> [[Mat3; 4]; 4] {
    let svd = svd3(&deformation_gradient(x, grads));
    hessian_of(model, lame, volume, grads, &svd, project)
}

/// [`hessian`] from the signed SVD of the tet's `F`.
pub fn hessian_of(
    model: FemModel,
    lame: Lame,
    volume: f64,
    grads: &[Vec3; 4],
    svd: &Svd3,
    project: bool,
) -> [[Mat3; 4]; 4] {
    let modes = stress_modes_of(model, lame, svd);
    let mut blocks = [[Mat3::zeros(); 4]; 4];
    for (value, q) in modes.values.iter().zip(&modes.matrices) {
        let value = if project { value.max(0.0) } else { *value };
        if value == 0.0 {
            continue;
        }
        let qg = grads.map(|g| q * g);
        for k in 0..4 {
            let scaled = (volume * value) * qg[k];
            // The upper blocks; the lower ones are their transposes.
            for l in k..4 {
                blocks[k][l] += scaled * qg[l].transpose();
            }
        }
    }
    for k in 1..4 {
        for l in 0..k {
            blocks[k][l] = blocks[l][k].transpose();
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    const MODELS: [FemModel; 2] = [FemModel::FixedCorotated, FemModel::StableNeoHookean];
    const LAME: Lame = Lame {
        mu: 2.0e5,
        lambda: 5.0e5,
    };

    fn random_matrix(rng: &mut Rng, scale: f64) -> Mat3 {
        Mat3::from_fn(|_, _| scale * rng.signed())
    }

    /// A deformation gradient near a random rotation, some inverted (reflected).
    fn random_deformation(rng: &mut Rng) -> Mat3 {
        let f = Mat3::identity() + random_matrix(rng, 0.4);
        if rng.unit() < 0.25 {
            f * Mat3::from_diagonal(&Vec3::new(1.0, 1.0, -0.6))
        } else {
            f
        }
    }

    /// A regular-ish tet's rest gradient rows and volume.
    fn rest_tet() -> ([Vec3; 4], f64) {
        let rest = [
            Vec3::zeros(),
            Vec3::new(0.1, 0.0, 0.0),
            Vec3::new(0.02, 0.09, 0.0),
            Vec3::new(0.03, 0.02, 0.11),
        ];
        let dm = Mat3::from_columns(&[rest[1] - rest[0], rest[2] - rest[0], rest[3] - rest[0]]);
        let inv = dm.try_inverse().unwrap();
        let g: [Vec3; 3] = std::array::from_fn(|r| inv.row(r).transpose());
        (
            [-(g[0] + g[1] + g[2]), g[0], g[1], g[2]],
            dm.determinant() / 6.0,
        )
    }

    #[test]
    fn jacobi_eigen_matches_nalgebra() {
        let mut rng = Rng(3);
        for _ in 0..200 {
            let a = random_matrix(&mut rng, 1e5);
            let m = a + a.transpose();
            let (values, vectors) = symmetric_eigen3(&m);
            assert!((vectors.transpose() * vectors - Mat3::identity()).norm() < 1e-12);
            let rebuilt = vectors * Mat3::from_diagonal(&values) * vectors.transpose();
            assert!((rebuilt - m).norm() < 1e-10 * m.norm());
            let mut ours = [values[0], values[1], values[2]];
            let mut theirs: Vec<f64> = m.symmetric_eigenvalues().iter().copied().collect();
            ours.sort_by(f64::total_cmp);
            theirs.sort_by(f64::total_cmp);
            for (o, t) in ours.iter().zip(&theirs) {
                assert!((o - t).abs() < 1e-10 * m.norm());
            }
        }
        // Already diagonal, and repeated eigenvalues.
        let (values, _) = symmetric_eigen3(&Mat3::from_diagonal(&Vec3::new(2.0, 2.0, -1.0)));
        assert_eq!(values, Vec3::new(2.0, 2.0, -1.0));
    }

    #[test]
    fn stress_is_the_gradient_of_the_density() {
        let mut rng = Rng(11);
        let h = 1e-6;
        for model in MODELS {
            for _ in 0..40 {
                let f = random_deformation(&mut rng);
                let (_, p) = density_and_stress(model, LAME, &f);
                for a in 0..3 {
                    for b in 0..3 {
                        let mut fp = f;
                        let mut fm = f;
                        fp[(a, b)] += h;
                        fm[(a, b)] -= h;
                        let fd = (density_and_stress(model, LAME, &fp).0
                            - density_and_stress(model, LAME, &fm).0)
                            / (2.0 * h);
                        assert!(
                            (fd - p[(a, b)]).abs() <= 1e-5 * LAME.lambda,
                            "{model:?} P[{a}{b}] {fd} vs {}",
                            p[(a, b)]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn modes_are_orthonormal_and_rebuild_the_stress_derivative() {
        let mut rng = Rng(23);
        let h = 1e-6;
        for model in MODELS {
            for _ in 0..30 {
                let f = random_deformation(&mut rng);
                let modes = stress_modes(model, LAME, &f);
                for m in 0..9 {
                    for n in 0..9 {
                        let inner = modes.matrices[m].dot(&modes.matrices[n]);
                        let expected = if m == n { 1.0 } else { 0.0 };
                        assert!((inner - expected).abs() < 1e-10, "{model:?} <Q{m}, Q{n}>");
                    }
                }
                // dP/dF applied to each unit direction E_bj, against central differences of P.
                for b in 0..3 {
                    for j in 0..3 {
                        let mut e = Mat3::zeros();
                        e[(b, j)] = 1.0;
                        let mut rebuilt = Mat3::zeros();
                        for (value, q) in modes.values.iter().zip(&modes.matrices) {
                            rebuilt += (value * q.dot(&e)) * q;
                        }
                        let fd = (density_and_stress(model, LAME, &(f + h * e)).1
                            - density_and_stress(model, LAME, &(f - h * e)).1)
                            / (2.0 * h);
                        assert!(
                            (fd - rebuilt).norm() <= 1e-4 * LAME.lambda,
                            "{model:?} dP/dF[.,{b}{j}]: {fd} vs {rebuilt}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn small_strains_follow_linear_elasticity() {
        let mut rng = Rng(31);
        for model in MODELS {
            for _ in 0..10 {
                let r = svd3(&random_deformation(&mut rng)).u;
                let a = random_matrix(&mut rng, 1e-5);
                let eps = 0.5 * (a + a.transpose());
                // A rotated small strain: P = R (2 mu eps + lambda tr(eps) I) to first order.
                let (_, p) = density_and_stress(model, LAME, &(r * (Mat3::identity() + eps)));
                let linear =
                    r * (2.0 * LAME.mu * eps + LAME.lambda * eps.trace() * Mat3::identity());
                assert!(
                    (p - linear).norm() <= 1e-3 * linear.norm(),
                    "{model:?}: {p} vs {linear}"
                );
            }
        }
    }

    #[test]
    fn element_gradient_and_hessian_match_finite_differences() {
        let (grads, volume) = rest_tet();
        let mut rng = Rng(47);
        let h = 1e-7;
        for model in MODELS {
            for _ in 0..20 {
                let f = random_deformation(&mut rng);
                let x: [Vec3; 4] = std::array::from_fn(|k| {
                    // Vertices whose deformation gradient is `f`, plus a translation.
                    let rest = [
                        Vec3::zeros(),
                        Vec3::new(0.1, 0.0, 0.0),
                        Vec3::new(0.02, 0.09, 0.0),
                        Vec3::new(0.03, 0.02, 0.11),
                    ][k];
                    f * rest + Vec3::new(0.3, -0.2, 0.1)
                });
                assert!((deformation_gradient(&x, &grads) - f).norm() < 1e-12);
                let (_, gradient) = energy_and_gradient(model, LAME, volume, &grads, &x);
                let blocks = hessian(model, LAME, volume, &grads, &x, false);
                let scale = LAME.lambda * volume;
                for k in 0..4 {
                    for a in 0..3 {
                        let (mut xp, mut xm) = (x, x);
                        xp[k][a] += h;
                        xm[k][a] -= h;
                        let (ep, gp) = energy_and_gradient(model, LAME, volume, &grads, &xp);
                        let (em, gm) = energy_and_gradient(model, LAME, volume, &grads, &xm);
                        let fd = (ep - em) / (2.0 * h);
                        assert!(
                            (fd - gradient[k][a]).abs() <= 1e-6 * scale / 0.1,
                            "{model:?} dE/dx[{k}][{a}]"
                        );
                        for l in 0..4 {
                            let fd = (gp[l] - gm[l]) / (2.0 * h);
                            let exact = blocks[l][k].column(a);
                            assert!(
                                (fd - exact).norm() <= 1e-5 * scale / 0.01,
                                "{model:?} H[{l}][{k}] column {a}: {fd} vs {exact}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The 12x12 matrix of the blocks.
    fn dense(blocks: &[[Mat3; 4]; 4]) -> nalgebra::DMatrix<f64> {
        nalgebra::DMatrix::from_fn(12, 12, |r, c| blocks[r / 3][c / 3][(r % 3, c % 3)])
    }

    #[test]
    fn projected_hessian_is_positive_semidefinite_and_exact_where_the_hessian_already_is() {
        let (grads, volume) = rest_tet();
        let rest = [
            Vec3::zeros(),
            Vec3::new(0.1, 0.0, 0.0),
            Vec3::new(0.02, 0.09, 0.0),
            Vec3::new(0.03, 0.02, 0.11),
        ];
        let mut rng = Rng(59);
        let scale = LAME.lambda * volume / 0.01;
        let mut indefinite = 0;
        for model in MODELS {
            for _ in 0..40 {
                let f = random_deformation(&mut rng);
                let x = rest.map(|p| f * p);
                let projected = dense(&hessian(model, LAME, volume, &grads, &x, true));
                let exact = dense(&hessian(model, LAME, volume, &grads, &x, false));
                assert!((projected.clone() - projected.transpose()).norm() < 1e-9 * scale);
                let lowest_projected = projected.symmetric_eigenvalues().min();
                assert!(
                    lowest_projected >= -1e-9 * scale,
                    "{model:?}: {lowest_projected}"
                );
                let modes = stress_modes(model, LAME, &f);
                if modes.values.iter().all(|&v| v >= 0.0) {
                    assert!((projected - exact).norm() <= 1e-12 * scale);
                } else {
                    indefinite += 1;
                    assert!(exact.symmetric_eigenvalues().min() < 0.0);
                }
            }
        }
        // The sample must exercise the clamp (inverted and strongly sheared tets).
        assert!(indefinite > 0);
    }
}
