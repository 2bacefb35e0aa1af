//! Material parameters of a soft body and their conversion to the weights of Projective Dynamics.
//!
//! A [`MaterialParams`] is described the way an engineer or a designer thinks of it: Young's modulus
//! `E` (Pa), Poisson ratio `nu`, density `rho` (kg/m^3). The solver needs the Lame parameters
//! `mu = E / (2 (1 + nu))` and `lambda = E nu / ((1 + nu) (1 - 2 nu))` (Pa), which weight the
//! two Projective Dynamics constraints of every tetrahedron (see [`crate::sim::pd`]):
//! the corotated (as-rigid-as-possible) term with weight `2 mu V` and the volume term with weight
//! `lambda V`, `V` the rest volume (m^3).
//!
//! Optional strain limits give the *biphasic* material of the localized-collisions PD paper
//! (Wang et al. 2020, section on material models): soft while the principal
//! stretches stay inside `[min, max]`, stiff outside.

use thiserror::Error;

/// Principal-stretch limits of a biphasic material.
///
/// Inside `[min_stretch, max_stretch]` the extra constraint is satisfied exactly and adds no force;
/// outside it pulls the stretch back with `stiffness_scale` times the corotated weight `2 mu V`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StrainLimitParams {
    /// Smallest allowed principal stretch (dimensionless, `0 < min_stretch <= 1`). Default: 0.8.
    pub min_stretch: f64,
    /// Largest allowed principal stretch (dimensionless, `>= 1`). Default: 1.2.
    pub max_stretch: f64,
    /// Stiffness of the limit as a multiple of the corotated weight (dimensionless, `> 0`).
    /// Default: 10.
    pub stiffness_scale: f64,
}

impl Default for StrainLimitParams {
    fn default() -> Self {
        Self {
            min_stretch: 0.8,
            max_stretch: 1.2,
            stiffness_scale: 10.0,
        }
    }
}

/// The physical material of a soft body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaterialParams {
    /// Young's modulus `E` in pascals (Pa), `> 0`. Default: 2.0e5 (soft rubber).
    pub youngs_modulus: f64,
    /// Poisson ratio `nu`, dimensionless, in `(-1, 0.5)`; simulated as at most
    /// [`MAX_EFFECTIVE_POISSON_RATIO`] (0.49). Default: 0.4.
    pub poisson_ratio: f64,
    /// Mass density in kg/m^3, `> 0`. Default: 1000.
    pub density: f64,
    /// Damping rate of the deformation in 1/s, `>= 0`: the non-rigid part of the vertex velocities
    /// decays like `exp(-damping * t)`; rigid translation and rotation are never damped.
    /// Default: 1.0.
    pub damping: f64,
    /// Strain-rate (Kelvin-Voigt) damping time in seconds (s), `>= 0`: a tet whose shape changes
    /// at strain rate `de/dt` feels a viscous stress of `strain_damping` times the corotated
    /// elastic stress of the strain `de/dt` (Rayleigh stiffness damping of the corotated term,
    /// [`crate::sim::pd`]; the volume term is not damped). A mode of angular frequency `omega`
    /// (rad/s) whose stiffness is the corotated term's is damped with the ratio
    /// `strain_damping * omega / 2` (a free cube's axial mode: within 5-7 % of it, test
    /// `strain_damping_decays_a_free_oscillation_at_the_kelvin_voigt_rate`). Unlike
    /// [`MaterialParams::damping`] it also damps a body bouncing on its own elasticity (a cube's
    /// up-and-down on a floor, whose velocity is mostly rigid), and it does not depend on the
    /// time step. Rigid motion is never damped. Projective Dynamics only: the Newton-MPRGP
    /// solver ignores it. Default: [`STRAIN_DAMPING`].
    pub strain_damping: f64,
    /// Coulomb friction coefficient, dimensionless, `>= 0`; combined with the other side's by
    /// [`MaterialParams::friction_combine`]. Default: 0.8 (rubber).
    pub friction: f64,
    /// Coefficient of restitution, dimensionless, in `[0, 1]`: the share of the approach speed
    /// that a contact gives back as separation speed (Newton's rule, applied above
    /// the world's restitution threshold). Elastic rebound of the soft body comes on top of it.
    /// Default: 0.
    pub restitution: f64,
    /// How this friction is combined with the other side's. Default: [`CombineRule::Average`].
    pub friction_combine: CombineRule,
    /// How this restitution is combined with the other side's. Default:
    /// [`CombineRule::Average`].
    pub restitution_combine: CombineRule,
    /// Optional strain limits (biphasic material). Default: `None`.
    pub strain_limits: Option<StrainLimitParams>,
}

/// How the friction or restitution coefficients of two touching surfaces are combined into the
/// contact's, as in Rapier and PhysX: of the two sides' rules the one with the higher priority
/// (`Max` > `Multiply` > `Min` > `Average`) decides.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum CombineRule {
    /// `(a + b) / 2`. Default.
    #[default]
    Average,
    /// `min(a, b)`.
    Min,
    /// `a * b`.
    Multiply,
    /// `max(a, b)`.
    Max,
}

/// One side's surface coefficients: what a contact combines with the other side's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SurfaceCoefficients {
    /// Coulomb friction coefficient, `>= 0`.
    pub friction: f64,
    /// Restitution coefficient in `[0, 1]`.
    pub restitution: f64,
    /// Rule for friction.
    pub friction_combine: CombineRule,
    /// Rule for restitution.
    pub restitution_combine: CombineRule,
}

impl Default for SurfaceCoefficients {
    fn default() -> Self {
        Self {
            friction: 0.5,
            restitution: 0.0,
            friction_combine: CombineRule::Average,
            restitution_combine: CombineRule::Average,
        }
    }
}

impl SurfaceCoefficients {
    /// The contact's `(friction, restitution)` between this side and `other`.
    pub fn combine(&self, other: &Self) -> (f64, f64) {
        (
            self.friction_combine
                .combine(self.friction, other.friction_combine, other.friction),
            self.restitution_combine.combine(
                self.restitution,
                other.restitution_combine,
                other.restitution,
            ),
        )
    }
}

impl CombineRule {
    /// Combines `a` (with rule `self`) and `b` (with rule `other`).
    pub fn combine(self, a: f64, other: Self, b: f64) -> f64 {
        match self.max(other) {
            Self::Average => 0.5 * (a + b),
            Self::Min => a.min(b),
            Self::Multiply => a * b,
            Self::Max => a.max(b),
        }
    }
}

impl Default for MaterialParams {
    fn default() -> Self {
        Self::RUBBER
    }
}

/// Why a [`MaterialParams`] was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Error)]
pub enum MaterialError {
    /// Young's modulus must be a finite value above zero.
    #[error("Young's modulus must be finite and > 0 Pa, got {0}")]
    YoungsModulus(f64),
    /// The Poisson ratio must lie strictly between -1 and 0.5.
    #[error("Poisson ratio must be finite and in (-1, 0.5), got {0}")]
    PoissonRatio(f64),
    /// The density must be a finite value above zero.
    #[error("density must be finite and > 0 kg/m^3, got {0}")]
    Density(f64),
    /// The damping rate must be finite and non-negative.
    #[error("damping must be finite and >= 0 1/s, got {0}")]
    Damping(f64),
    /// The strain-rate damping time must be finite and non-negative.
    #[error("strain damping must be finite and >= 0 s, got {0}")]
    StrainDamping(f64),
    /// The friction coefficient must be finite and non-negative.
    #[error("friction coefficient must be finite and >= 0, got {0}")]
    Friction(f64),
    /// The restitution coefficient must lie in `[0, 1]`.
    #[error("restitution must be finite and in [0, 1], got {0}")]
    Restitution(f64),
    /// Strain limits need `0 < min <= 1 <= max` and a positive stiffness scale.
    #[error("strain limits need 0 < min <= 1 <= max and stiffness_scale > 0, got {0:?}")]
    StrainLimits(StrainLimitParams),
}

/// The largest Poisson ratio the volume term is built for: above it `lambda` is taken at 0.49
/// (`lambda = 49 mu`). Closer to 0.5 the volume weight grows without bound, the PD matrix loses
/// the precision of its factorization, and the step's error shows as energy: a cube at
/// `nu = 0.4999999` was thrown 13 m up. The stability grid (`docs/PERFORMANCE.md`) covers up
/// to 0.49.
pub const MAX_EFFECTIVE_POISSON_RATIO: f64 = 0.49;

/// The presets' strain-rate damping time (s). With 0.01 s two cells of the stability grid (0.5 m
/// cubes at E = 1e4 Pa, h = 1/240 s, `docs/PERFORMANCE.md`) still bounced at 0.08-0.1 m/s after
/// 5 s; with 0.02 s every cell rests.
pub const STRAIN_DAMPING: f64 = 0.02;

impl MaterialParams {
    /// Soft jelly: E = 2e4 Pa, nu = 0.45, 1000 kg/m^3.
    pub const JELLY: Self = Self {
        youngs_modulus: 2.0e4,
        poisson_ratio: 0.45,
        density: 1000.0,
        damping: 0.5,
        strain_damping: STRAIN_DAMPING,
        friction: 0.4,
        restitution: 0.0,
        friction_combine: CombineRule::Average,
        restitution_combine: CombineRule::Average,
        strain_limits: None,
    };
    /// Rubber-like: E = 2e5 Pa, nu = 0.4, 1100 kg/m^3.
    pub const RUBBER: Self = Self {
        youngs_modulus: 2.0e5,
        poisson_ratio: 0.4,
        density: 1100.0,
        damping: 1.0,
        strain_damping: STRAIN_DAMPING,
        friction: 0.8,
        restitution: 0.0,
        friction_combine: CombineRule::Average,
        restitution_combine: CombineRule::Average,
        strain_limits: None,
    };
    /// Flesh: soft but strain-limited (biphasic), E = 5e4 Pa, nu = 0.45, 1050 kg/m^3.
    pub const FLESH: Self = Self {
        youngs_modulus: 5.0e4,
        poisson_ratio: 0.45,
        density: 1050.0,
        damping: 2.0,
        strain_damping: STRAIN_DAMPING,
        friction: 0.6,
        restitution: 0.0,
        friction_combine: CombineRule::Average,
        restitution_combine: CombineRule::Average,
        strain_limits: Some(StrainLimitParams {
            min_stretch: 0.8,
            max_stretch: 1.2,
            stiffness_scale: 10.0,
        }),
    };
    /// Stiff foam: E = 1e6 Pa, nu = 0.2, 200 kg/m^3.
    pub const STIFF_FOAM: Self = Self {
        youngs_modulus: 1.0e6,
        poisson_ratio: 0.2,
        density: 200.0,
        damping: 1.0,
        strain_damping: STRAIN_DAMPING,
        friction: 0.7,
        restitution: 0.0,
        friction_combine: CombineRule::Average,
        restitution_combine: CombineRule::Average,
        strain_limits: None,
    };

    /// Checks that every value is physical.
    ///
    /// # Errors
    /// The first offending field as a [`MaterialError`].
    pub fn validate(&self) -> Result<(), MaterialError> {
        let e = self.youngs_modulus;
        if !(e.is_finite() && e > 0.0) {
            return Err(MaterialError::YoungsModulus(e));
        }
        let nu = self.poisson_ratio;
        if !(nu.is_finite() && nu > -1.0 && nu < 0.5) {
            return Err(MaterialError::PoissonRatio(nu));
        }
        if !(self.density.is_finite() && self.density > 0.0) {
            return Err(MaterialError::Density(self.density));
        }
        if !(self.damping.is_finite() && self.damping >= 0.0) {
            return Err(MaterialError::Damping(self.damping));
        }
        if !(self.strain_damping.is_finite() && self.strain_damping >= 0.0) {
            return Err(MaterialError::StrainDamping(self.strain_damping));
        }
        if !(self.friction.is_finite() && self.friction >= 0.0) {
            return Err(MaterialError::Friction(self.friction));
        }
        if !(self.restitution.is_finite() && (0.0..=1.0).contains(&self.restitution)) {
            return Err(MaterialError::Restitution(self.restitution));
        }
        if let Some(l) = self.strain_limits {
            let ok = l.min_stretch.is_finite()
                && l.max_stretch.is_finite()
                && l.stiffness_scale.is_finite()
                && l.min_stretch > 0.0
                && l.min_stretch <= 1.0
                && l.max_stretch >= 1.0
                && l.stiffness_scale > 0.0;
            if !ok {
                return Err(MaterialError::StrainLimits(l));
            }
        }
        Ok(())
    }

    /// The surface coefficients contacts combine.
    pub fn surface(&self) -> SurfaceCoefficients {
        SurfaceCoefficients {
            friction: self.friction,
            restitution: self.restitution,
            friction_combine: self.friction_combine,
            restitution_combine: self.restitution_combine,
        }
    }

    /// First Lame parameter `mu` (shear modulus), Pa.
    pub fn lame_mu(&self) -> f64 {
        self.youngs_modulus / (2.0 * (1.0 + self.poisson_ratio))
    }

    /// Second Lame parameter `lambda`, Pa.
    pub fn lame_lambda(&self) -> f64 {
        let nu = self.poisson_ratio;
        self.youngs_modulus * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    }

    /// Returns a copy with another Young's modulus (Pa).
    pub const fn with_youngs_modulus(mut self, pascals: f64) -> Self {
        self.youngs_modulus = pascals;
        self
    }

    /// Returns a copy with another Poisson ratio.
    pub const fn with_poisson_ratio(mut self, nu: f64) -> Self {
        self.poisson_ratio = nu;
        self
    }

    /// Returns a copy with another density (kg/m^3).
    pub const fn with_density(mut self, kg_per_m3: f64) -> Self {
        self.density = kg_per_m3;
        self
    }

    /// Returns a copy with another damping rate (1/s).
    pub const fn with_damping(mut self, per_second: f64) -> Self {
        self.damping = per_second;
        self
    }

    /// Returns a copy with another strain-rate damping time (s).
    pub const fn with_strain_damping(mut self, seconds: f64) -> Self {
        self.strain_damping = seconds;
        self
    }

    /// Returns a copy with another friction coefficient.
    pub const fn with_friction(mut self, mu: f64) -> Self {
        self.friction = mu;
        self
    }

    /// Returns a copy with another restitution coefficient.
    pub const fn with_restitution(mut self, restitution: f64) -> Self {
        self.restitution = restitution;
        self
    }

    /// Returns a copy with strain limits (biphasic material).
    pub const fn with_strain_limits(mut self, limits: StrainLimitParams) -> Self {
        self.strain_limits = Some(limits);
        self
    }

    /// Weights of the two always-present PD constraints for a tet of rest volume `volume` (m^3):
    /// `(2 mu V, lambda V)`, and the strain-limit weight (0 without limits). `lambda` is
    /// clamped to its value at [`MAX_EFFECTIVE_POISSON_RATIO`].
    pub(crate) fn pd_weights(&self, volume: f64) -> (f64, f64, f64) {
        let mu = self.lame_mu();
        let nu = MAX_EFFECTIVE_POISSON_RATIO;
        let lambda_cap = 2.0 * mu * nu / (1.0 - 2.0 * nu);
        let lambda = self.lame_lambda().clamp(0.0, lambda_cap);
        let w_corot = 2.0 * mu * volume;
        let w_vol = lambda * volume;
        let w_lim = self
            .strain_limits
            .map_or(0.0, |l| l.stiffness_scale * w_corot);
        (w_corot, w_vol, w_lim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        for m in [
            MaterialParams::JELLY,
            MaterialParams::RUBBER,
            MaterialParams::FLESH,
            MaterialParams::STIFF_FOAM,
        ] {
            assert_eq!(m.validate(), Ok(()));
        }
    }

    #[test]
    fn combine_rules_follow_their_priority() {
        use CombineRule::*;
        assert_eq!(Average.combine(0.2, Average, 0.6), 0.4);
        assert_eq!(Average.combine(0.2, Min, 0.6), 0.2);
        assert_eq!(Multiply.combine(0.5, Min, 0.6), 0.3);
        assert_eq!(Min.combine(0.5, Max, 0.6), 0.6);
        assert_eq!(Max.combine(0.5, Multiply, 0.6), 0.6);
    }

    #[test]
    fn lame_parameters_match_textbook_values() {
        let m = MaterialParams::RUBBER
            .with_youngs_modulus(1.0e6)
            .with_poisson_ratio(0.25);
        assert!((m.lame_mu() - 4.0e5).abs() < 1e-6);
        assert!((m.lame_lambda() - 4.0e5).abs() < 1e-6);
    }

    #[test]
    fn non_physical_values_are_rejected() {
        let m = MaterialParams::RUBBER;
        assert_eq!(
            m.with_youngs_modulus(0.0).validate(),
            Err(MaterialError::YoungsModulus(0.0))
        );
        assert!(matches!(
            m.with_youngs_modulus(f64::NAN).validate(),
            Err(MaterialError::YoungsModulus(_))
        ));
        assert_eq!(
            m.with_poisson_ratio(0.5).validate(),
            Err(MaterialError::PoissonRatio(0.5))
        );
        assert_eq!(
            m.with_poisson_ratio(-1.0).validate(),
            Err(MaterialError::PoissonRatio(-1.0))
        );
        assert_eq!(
            m.with_density(-3.0).validate(),
            Err(MaterialError::Density(-3.0))
        );
        assert_eq!(
            m.with_damping(-1.0).validate(),
            Err(MaterialError::Damping(-1.0))
        );
        assert_eq!(
            m.with_strain_damping(-0.01).validate(),
            Err(MaterialError::StrainDamping(-0.01))
        );
        assert!(matches!(
            m.with_strain_damping(f64::INFINITY).validate(),
            Err(MaterialError::StrainDamping(_))
        ));
        assert_eq!(
            m.with_friction(-0.1).validate(),
            Err(MaterialError::Friction(-0.1))
        );
        assert_eq!(
            m.with_restitution(1.5).validate(),
            Err(MaterialError::Restitution(1.5))
        );
        let bad = StrainLimitParams {
            min_stretch: 1.1,
            ..StrainLimitParams::default()
        };
        assert_eq!(
            m.with_strain_limits(bad).validate(),
            Err(MaterialError::StrainLimits(bad))
        );
    }
}
