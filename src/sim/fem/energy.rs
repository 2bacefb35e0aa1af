//! Isotropic hyperelastic energy densities as functions of the signed singular values `sigma`
//! of the deformation gradient, with the derivatives the element Hessian's analytic
//! eigensystem needs ([`super::element`]).
//!
//! For an isotropic density `Psi(F) = Psi(sigma)` (`F = U diag(sigma) V'`, the signed SVD of
//! [`crate::sim::polar::svd3`]), the stress is `P = U diag(dPsi/dsigma) V'` and the stress
//! derivative `dP/dF` has nine eigenpairs (Smith, de Goes and Kim 2019, "Analytic Eigensystems
//! for Isotropic Distortion Energies"):
//!
//! - three *scaling* modes `U diag(z) V'`, `z` an eigenvector of the 3x3 Hessian
//!   `d2Psi/dsigma2`, with its eigenvalue;
//! - per pair `(i, j)` of singular values, a *twist* `U (e_i e_j' - e_j e_i') V' / sqrt 2` (a
//!   rotation of the deformed element) with eigenvalue `(Psi_i + Psi_j) / (sigma_i + sigma_j)`,
//!   and a *flip* `U (e_i e_j' + e_j e_i') V' / sqrt 2` (a shear) with eigenvalue
//!   `(Psi_i - Psi_j) / (sigma_i - sigma_j)`, `Psi_i = dPsi/dsigma_i`.
//!
//! The twist and flip eigenvalues are written here in closed forms without the divisions
//! (derived by hand for each model, checked against the quotients in the tests), so that equal
//! singular values need no special case.
//!
//! Models (Lame parameters `mu`, `lambda` in Pa; `J = sigma_1 sigma_2 sigma_3`):
//! - [`FemModel::FixedCorotated`] (Stomakhin et al. 2012):
//!   `Psi = mu sum (sigma_i - 1)^2 + lambda/2 (J - 1)^2`;
//! - [`FemModel::StableNeoHookean`] (Smith, de Goes and Kim 2018, without the log term, as in
//!   Kim and Eberle's "Dynamic Deformables" course notes):
//!   `Psi = mu/2 (sum sigma_i^2 - 3) - mu (J - 1) + lambda'/2 (J - 1)^2` with
//!   `lambda' = lambda + mu`, which makes its small-strain limit linear elasticity with `mu` and
//!   `lambda` (tested).
//!
//! Both agree with linear elasticity for small strains, are rest-stable (`P(R) = 0` for a
//! rotation `R`) and stay finite for inverted elements (`J < 0`).

use crate::sim::material::MaterialParams;
use crate::sim::math::{Mat3, Vec3};

/// An isotropic hyperelastic material model of the Newton solver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FemModel {
    /// `mu sum (sigma_i - 1)^2 + lambda/2 (J - 1)^2` (Stomakhin et al. 2012): the corotated
    /// model with a volume term in `J`, the FEM counterpart of the PD material.
    #[default]
    FixedCorotated,
    /// Stable Neo-Hookean (Smith et al. 2018) without the log term: Neo-Hookean behaviour under
    /// large stretch, rest-stable and defined through inversion.
    StableNeoHookean,
}

/// Lame parameters (Pa).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lame {
    /// Shear modulus `mu` (Pa).
    pub mu: f64,
    /// First Lame parameter `lambda` (Pa).
    pub lambda: f64,
}

impl Lame {
    /// The Lame parameters of a material's Young's modulus and Poisson ratio
    /// ([`MaterialParams::lame_mu`], [`MaterialParams::lame_lambda`]).
    pub fn of(material: &MaterialParams) -> Self {
        Self {
            mu: material.lame_mu(),
            lambda: material.lame_lambda(),
        }
    }
}

/// An energy density and its derivatives in the signed singular values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SigmaDerivatives {
    /// `Psi` (J/m^3).
    pub psi: f64,
    /// `dPsi/dsigma_i` (Pa).
    pub gradient: Vec3,
    /// `d2Psi/(dsigma_i dsigma_j)` (Pa).
    pub hessian: Mat3,
    /// Twist eigenvalue of the pair that leaves out index `k`:
    /// `(Psi_i + Psi_j) / (sigma_i + sigma_j)` (Pa).
    pub twist: Vec3,
    /// Flip eigenvalue of the pair that leaves out index `k`:
    /// `(Psi_i - Psi_j) / (sigma_i - sigma_j)` (Pa).
    pub flip: Vec3,
}

/// Below this `sigma_i + sigma_j` (a pair collapsed to a line) the fixed-corotated twist
/// eigenvalue is evaluated at it: a large negative value, which the SPD projection clamps to 0.
const MIN_PAIR_SUM: f64 = 1e-12;

impl FemModel {
    /// The density and its derivatives at signed singular values `sigma`.
    pub fn derivatives(self, lame: Lame, sigma: Vec3) -> SigmaDerivatives {
        let [s0, s1, s2] = [sigma.x, sigma.y, sigma.z];
        let j = s0 * s1 * s2;
        // Products of the other two singular values: dJ/dsigma_i.
        let others = Vec3::new(s1 * s2, s0 * s2, s0 * s1);
        let (psi, gradient, hessian, twist, flip) = match self {
            FemModel::FixedCorotated => {
                let Lame { mu, lambda } = lame;
                let psi = mu * (sigma - Vec3::repeat(1.0)).norm_squared()
                    + 0.5 * lambda * (j - 1.0).powi(2);
                let gradient = 2.0 * mu * (sigma - Vec3::repeat(1.0)) + lambda * (j - 1.0) * others;
                // d2Psi/dsigma_i^2 = 2 mu + lambda (dJ/dsigma_i)^2;
                // d2Psi/dsigma_i dsigma_j = lambda sigma_k (2J - 1).
                let hessian = Mat3::from_fn(|a, b| {
                    if a == b {
                        2.0 * mu + lambda * others[a] * others[a]
                    } else {
                        lambda * sigma[3 - a - b] * (2.0 * j - 1.0)
                    }
                });
                let twist = Vec3::from_fn(|k, _| {
                    let (a, b) = pair(k);
                    let sum = (sigma[a] + sigma[b]).max(MIN_PAIR_SUM);
                    2.0 * mu * (1.0 - 2.0 / sum) + lambda * (j - 1.0) * sigma[k]
                });
                let flip = Vec3::from_fn(|k, _| 2.0 * mu - lambda * (j - 1.0) * sigma[k]);
                (psi, gradient, hessian, twist, flip)
            }
            FemModel::StableNeoHookean => {
                let mu = lame.mu;
                let lambda = lame.lambda + lame.mu;
                let psi = 0.5 * mu * (sigma.norm_squared() - 3.0) - mu * (j - 1.0)
                    + 0.5 * lambda * (j - 1.0).powi(2);
                // Psi_i = mu sigma_i + (lambda (J - 1) - mu) dJ/dsigma_i.
                let c = lambda * (j - 1.0) - mu;
                let gradient = mu * sigma + c * others;
                let hessian = Mat3::from_fn(|a, b| {
                    if a == b {
                        mu + lambda * others[a] * others[a]
                    } else {
                        sigma[3 - a - b] * (lambda * (2.0 * j - 1.0) - mu)
                    }
                });
                let twist = Vec3::from_fn(|k, _| mu + c * sigma[k]);
                let flip = Vec3::from_fn(|k, _| mu - c * sigma[k]);
                (psi, gradient, hessian, twist, flip)
            }
        };
        SigmaDerivatives {
            psi,
            gradient,
            hessian,
            twist,
            flip,
        }
    }
}

/// The pair of singular-value indices that leaves out `k`, in increasing order.
pub fn pair(k: usize) -> (usize, usize) {
    match k {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    const MODELS: [FemModel; 2] = [FemModel::FixedCorotated, FemModel::StableNeoHookean];
    const LAME: Lame = Lame {
        mu: 3.0e5,
        lambda: 7.0e5,
    };

    /// Singular values in the signed order, some inverted.
    fn random_sigma(rng: &mut Rng) -> Vec3 {
        let mut s = [0.5 + rng.unit(), 0.5 + rng.unit(), 0.3 + rng.unit()];
        s.sort_by(|a, b| b.total_cmp(a));
        if rng.unit() < 0.3 {
            s[2] = -s[2];
        }
        Vec3::new(s[0], s[1], s[2])
    }

    #[test]
    fn gradient_and_hessian_match_finite_differences() {
        let mut rng = Rng(0x5eed_f00d);
        let h = 1e-6;
        for model in MODELS {
            for _ in 0..50 {
                let sigma = random_sigma(&mut rng);
                let d = model.derivatives(LAME, sigma);
                for a in 0..3 {
                    let mut p = sigma;
                    let mut m = sigma;
                    p[a] += h;
                    m[a] -= h;
                    let (dp, dm) = (model.derivatives(LAME, p), model.derivatives(LAME, m));
                    let fd = (dp.psi - dm.psi) / (2.0 * h);
                    assert!(
                        (fd - d.gradient[a]).abs() <= 1e-6 * LAME.lambda,
                        "{model:?} {sigma:?} gradient {a}: {fd} vs {}",
                        d.gradient[a]
                    );
                    for b in 0..3 {
                        let fd = (dp.gradient[b] - dm.gradient[b]) / (2.0 * h);
                        assert!(
                            (fd - d.hessian[(a, b)]).abs() <= 1e-5 * LAME.lambda,
                            "{model:?} {sigma:?} hessian {a}{b}: {fd} vs {}",
                            d.hessian[(a, b)]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn twist_and_flip_match_the_quotients_of_the_gradient() {
        let mut rng = Rng(0xabcdef);
        for model in MODELS {
            for _ in 0..50 {
                let sigma = random_sigma(&mut rng);
                let d = model.derivatives(LAME, sigma);
                for k in 0..3 {
                    let (i, j) = pair(k);
                    let g = d.gradient;
                    let twist = (g[i] + g[j]) / (sigma[i] + sigma[j]);
                    let flip = (g[i] - g[j]) / (sigma[i] - sigma[j]);
                    let tol = 1e-8 * (LAME.lambda + twist.abs() + flip.abs());
                    assert!((twist - d.twist[k]).abs() <= tol, "{model:?} twist {k}");
                    assert!((flip - d.flip[k]).abs() <= tol, "{model:?} flip {k}");
                }
            }
        }
    }

    #[test]
    fn rest_is_stress_free_and_rigid_twists_cost_nothing() {
        for model in MODELS {
            let d = model.derivatives(LAME, Vec3::repeat(1.0));
            assert!(d.psi.abs() < 1e-9, "{model:?}");
            assert!(d.gradient.norm() < 1e-9, "{model:?}");
            assert!(
                d.twist.norm() < 1e-9,
                "{model:?}: a rotation costs no energy"
            );
            for k in 0..3 {
                assert!(
                    (d.flip[k] - 2.0 * LAME.mu).abs() < 1e-6,
                    "{model:?}: shear 2 mu"
                );
            }
        }
    }
}
