//! The velocity-level contact problem of one region with Coulomb friction, solved by projected
//! Gauss-Seidel (`contact-regions-lcp-friction.txt`, sections 2 and 4).
//!
//! A region has `m` contacts, each with an impulse `lambda_i = (n, t1, t2)` in its contact frame.
//! With the Delassus matrix `W = J M^-1 J'` (`3m x 3m`, symmetric positive semi-definite) and the
//! free relative velocity `b`, the post-impulse relative velocity is `u = W lambda + b`, and every
//! contact must satisfy
//!
//! - Signorini: `0 <= lambda_n  _|_  u_n >= 0`;
//! - Coulomb, as a cone: `|lambda_t| <= mu lambda_n`, sticking (`u_t = 0`) inside the cone,
//!   sliding against the motion (`lambda_t = -mu lambda_n u_t / |u_t|`) on its boundary; or as
//!   the 4-sided pyramid: `|lambda_t1|, |lambda_t2| <= mu lambda_n` separately.
//!
//! Projected Gauss-Seidel sweeps the contacts in order: the normal impulse takes the exact
//! one-dimensional update clamped at zero, then the two friction components take a step along
//! their residual scaled by the inverse of the largest eigenvalue of their 2x2 block of `W`,
//! projected onto the disc (cone) or square (pyramid) of radius `mu lambda_n`. The scalar step
//! makes the fixed point satisfy the Coulomb law exactly (a block-inverse step followed by a
//! Euclidean projection does not, for an anisotropic block). The iteration stops when the largest change of an impulse in a sweep falls
//! below `tolerance` times the largest impulse, or after `max_sweeps`. Not yet here: the projected
//! conjugate gradient stage the paper runs before Gauss-Seidel, and keeping the best-residual
//! iterate.

use crate::sim::math::Vec3;

/// How friction is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FrictionModel {
    /// The isotropic Coulomb cone `|lambda_t| <= mu lambda_n`. Default.
    #[default]
    Cone,
    /// The 4-sided pyramid `|lambda_t1|, |lambda_t2| <= mu lambda_n`.
    Pyramid,
}

/// Settings of [`solve_region`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PgsSettings {
    /// Friction model. Default: cone.
    pub friction: FrictionModel,
    /// Relative change below which the sweeps stop. Default: 1e-8.
    pub tolerance: f64,
    /// Maximum number of sweeps. Default: 500.
    pub max_sweeps: usize,
}

impl Default for PgsSettings {
    fn default() -> Self {
        Self {
            friction: FrictionModel::Cone,
            tolerance: 1e-8,
            max_sweeps: 500,
        }
    }
}

/// Projects a friction impulse onto the cone's disc or the pyramid's square of radius `r`.
fn project_friction(t: [f64; 2], r: f64, model: FrictionModel) -> [f64; 2] {
    match model {
        FrictionModel::Cone => {
            let norm = (t[0] * t[0] + t[1] * t[1]).sqrt();
            if norm > r && norm > 0.0 {
                [t[0] * r / norm, t[1] * r / norm]
            } else {
                t
            }
        }
        FrictionModel::Pyramid => [t[0].clamp(-r, r), t[1].clamp(-r, r)],
    }
}

/// Solves one region in place: `w` is the dense `3m x 3m` Delassus matrix (row-major), `b` the
/// free relative velocities (`3m`, per contact `(n, t1, t2)`), `mu` the friction coefficients
/// (`m`), `lambda` the impulses (`3m`, used as the warm start). Returns the number of sweeps.
/// Contacts whose diagonal block is not positive get zero impulse (they cannot act).
pub fn solve_region(
    w: &[f64],
    b: &[f64],
    mu: &[f64],
    lambda: &mut [f64],
    settings: &PgsSettings,
) -> usize {
    let m = mu.len();
    let n = 3 * m;
    debug_assert!(w.len() == n * n && b.len() == n && lambda.len() == n);
    let at = |i: usize, j: usize| w[i * n + j];
    // u_i = (W lambda + b)_i.
    let velocity = |lambda: &[f64], i: usize| -> f64 {
        b[i] + (0..n).map(|j| at(i, j) * lambda[j]).sum::<f64>()
    };
    for v in lambda.iter_mut() {
        if !v.is_finite() {
            *v = 0.0;
        }
    }
    let mut sweeps = 0;
    while sweeps < settings.max_sweeps {
        sweeps += 1;
        let mut change = 0.0f64;
        let mut largest = 0.0f64;
        for (c, &friction) in mu.iter().enumerate() {
            let (i, j, k) = (3 * c, 3 * c + 1, 3 * c + 2);
            // Normal.
            let old = [lambda[i], lambda[j], lambda[k]];
            let d = at(i, i);
            lambda[i] = if d > 0.0 {
                (lambda[i] - velocity(lambda, i) / d).max(0.0)
            } else {
                0.0
            };
            // Friction: a gradient step scaled by the largest eigenvalue of the 2x2 block, then
            // the projection. A scalar step (rather than the block inverse) makes the fixed point
            // the Coulomb law: on the cone's rim the impulse is anti-parallel to the slip.
            let radius = friction.max(0.0) * lambda[i];
            let (a11, a12, a22) = (at(j, j), at(j, k), at(k, k));
            let half_gap = 0.5 * (a11 - a22);
            let largest_eigenvalue = 0.5 * (a11 + a22) + (half_gap * half_gap + a12 * a12).sqrt();
            let (uj, uk) = (velocity(lambda, j), velocity(lambda, k));
            let step = if largest_eigenvalue > 0.0 {
                [uj / largest_eigenvalue, uk / largest_eigenvalue]
            } else {
                [0.0, 0.0]
            };
            let t = project_friction(
                [lambda[j] - step[0], lambda[k] - step[1]],
                radius,
                settings.friction,
            );
            lambda[j] = t[0];
            lambda[k] = t[1];
            for (q, o) in [i, j, k].into_iter().zip(old) {
                change = change.max((lambda[q] - o).abs());
                largest = largest.max(lambda[q].abs());
            }
        }
        if change <= settings.tolerance * largest.max(f64::MIN_POSITIVE) {
            break;
        }
    }
    sweeps
}

/// The impulse of a region's contact `c` as a world vector, from its frame.
pub fn impulse_in_world(lambda: &[f64], c: usize, normal: &Vec3, t1: &Vec3, t2: &Vec3) -> Vec3 {
    lambda[3 * c] * normal + lambda[3 * c + 1] * t1 + lambda[3 * c + 2] * t2
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{DMatrix, DVector};

    use crate::sim::test_rng::Rng;

    /// A random well-posed region: `W = J M^-1 J'` with random contact Jacobians on a few
    /// particles, and free velocities mostly approaching.
    fn region(rng: &mut Rng, m: usize) -> (DMatrix<f64>, DVector<f64>, Vec<f64>) {
        let dofs = 3 * (m + 2);
        let j = DMatrix::from_fn(3 * m, dofs, |_, _| rng.signed());
        let inv_mass = DMatrix::from_fn(dofs, dofs, |r, c| {
            if r == c {
                0.5 + 0.5 * rng.signed().abs()
            } else {
                0.0
            }
        });
        let w = &j * inv_mass * j.transpose() + DMatrix::identity(3 * m, 3 * m) * 1e-3;
        let b = DVector::from_fn(3 * m, |r, _| {
            if r % 3 == 0 {
                rng.signed() - 0.5
            } else {
                rng.signed()
            }
        });
        let mu = (0..m).map(|_| 0.2 + 0.6 * rng.signed().abs()).collect();
        (w, b, mu)
    }

    /// The frictionless LCP `0 <= x _|_ A x + q >= 0` (A positive definite) by enumerating
    /// active sets: the unique solution.
    fn lcp_by_enumeration(a: &DMatrix<f64>, q: &DVector<f64>) -> DVector<f64> {
        let m = q.len();
        for mask in 0u32..(1 << m) {
            let active: Vec<usize> = (0..m).filter(|&i| mask & (1 << i) != 0).collect();
            let mut x = DVector::zeros(m);
            if !active.is_empty() {
                let aa =
                    DMatrix::from_fn(active.len(), active.len(), |r, c| a[(active[r], active[c])]);
                let qa = DVector::from_fn(active.len(), |r, _| -q[active[r]]);
                let sol = aa.lu().solve(&qa).expect("positive definite");
                for (r, &i) in active.iter().enumerate() {
                    x[i] = sol[r];
                }
            }
            let y = a * &x + q;
            if x.iter().all(|&v| v >= -1e-12) && y.iter().all(|&v| v >= -1e-10) {
                return x;
            }
        }
        panic!("no solution found");
    }

    #[test]
    fn frictionless_regions_match_the_dense_reference() {
        let mut rng = Rng(0xDEAD_BEEF_1234_5678);
        for m in 1..=6 {
            let (w, b, _) = region(&mut rng, m);
            // Only normals: zero friction, so the tangential impulses stay zero.
            let mut lambda = vec![0.0; 3 * m];
            let sweeps = solve_region(
                // W is symmetric: its column-major storage is its row-major layout.
                w.as_slice(),
                b.as_slice(),
                &vec![0.0; m],
                &mut lambda,
                &PgsSettings {
                    tolerance: 1e-13,
                    max_sweeps: 20_000,
                    ..Default::default()
                },
            );
            let idx: Vec<usize> = (0..m).map(|c| 3 * c).collect();
            let wn = DMatrix::from_fn(m, m, |r, c| w[(idx[r], idx[c])]);
            let bn = DVector::from_fn(m, |r, _| b[idx[r]]);
            let reference = lcp_by_enumeration(&wn, &bn);
            for c in 0..m {
                assert!(
                    (lambda[3 * c] - reference[c]).abs() < 1e-6 * (1.0 + reference.amax()),
                    "m {m} after {sweeps} sweeps: {} vs {}",
                    lambda[3 * c],
                    reference[c]
                );
                assert_eq!(lambda[3 * c + 1], 0.0);
            }
        }
    }

    #[test]
    fn friction_stays_in_the_cone_or_pyramid_and_the_coulomb_conditions_hold() {
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        let (mut sticking, mut sliding) = (0, 0);
        for model in [FrictionModel::Cone, FrictionModel::Pyramid] {
            for m in [1usize, 3, 8] {
                let (w, b, mu) = region(&mut rng, m);
                let mut lambda = vec![0.0; 3 * m];
                let settings = PgsSettings {
                    friction: model,
                    tolerance: 1e-14,
                    max_sweeps: 50_000,
                };
                solve_region(w.as_slice(), b.as_slice(), &mu, &mut lambda, &settings);
                let lam = DVector::from_column_slice(&lambda);
                let u = &w * &lam + &b;
                for c in 0..m {
                    let (ln, t) = (lambda[3 * c], [lambda[3 * c + 1], lambda[3 * c + 2]]);
                    assert!(lambda.iter().all(|v| v.is_finite()));
                    assert!(ln >= 0.0);
                    let scale = 1.0 + lam.amax();
                    // Signorini.
                    assert!(u[3 * c] >= -1e-6 * scale, "{model:?}: u_n {}", u[3 * c]);
                    assert!((ln * u[3 * c]).abs() < 1e-6 * scale * scale);
                    // Inside the friction set (within 1e-6).
                    let r = mu[c] * ln;
                    match model {
                        FrictionModel::Cone => {
                            assert!((t[0] * t[0] + t[1] * t[1]).sqrt() <= r + 1e-6)
                        }
                        FrictionModel::Pyramid => {
                            assert!(t[0].abs() <= r + 1e-6 && t[1].abs() <= r + 1e-6)
                        }
                    }
                    // Sticking inside the set; opposing the slip on its boundary.
                    let ut = [u[3 * c + 1], u[3 * c + 2]];
                    if model == FrictionModel::Cone {
                        let tn = (t[0] * t[0] + t[1] * t[1]).sqrt();
                        let un = (ut[0] * ut[0] + ut[1] * ut[1]).sqrt();
                        if tn < r - 1e-6 * scale {
                            assert!(un < 1e-5 * scale, "sticking contact slips: {un}");
                            sticking += usize::from(ln > 1e-9);
                        } else if un > 1e-5 * scale && r > 1e-9 * scale {
                            // (Without a normal impulse there is no friction to oppose anything.)
                            let cos = -(t[0] * ut[0] + t[1] * ut[1]) / (tn * un);
                            assert!(cos > 1.0 - 1e-4, "friction not opposing the slip: {cos}");
                            sliding += 1;
                        }
                    }
                }
            }
        }
        // The random regions exercise both branches of the Coulomb law.
        assert!(
            sticking > 0 && sliding > 0,
            "{sticking} sticking, {sliding} sliding"
        );
    }

    #[test]
    fn non_finite_warm_starts_and_empty_regions_are_safe() {
        let mut lambda = vec![f64::NAN, 1.0, f64::INFINITY];
        let w = [2.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        solve_region(
            &w,
            &[-1.0, 0.5, 0.0],
            &[0.5],
            &mut lambda,
            &PgsSettings::default(),
        );
        assert!(lambda.iter().all(|v| v.is_finite()));
        assert!((lambda[0] - 0.5).abs() < 1e-12);
        assert!((lambda[1] + 0.25).abs() < 1e-12, "{lambda:?}");
        let mut none: Vec<f64> = Vec::new();
        assert_eq!(
            solve_region(&[], &[], &[], &mut none, &PgsSettings::default()),
            1
        );
    }
}
