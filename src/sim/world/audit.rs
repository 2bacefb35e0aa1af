//! The energy audit of a step ([`super::WorldSettings::energy_audit`]): a body's total energy
//! at the start of the step and what each phase changed.
//!
//! Implicit Euler is dissipative: for the exact minimiser `x1` of the PD objective with forces
//! `F` (contacts, friction),
//!
//! ```text
//! KE(v1) + U(x1) + E(x1) = KE(v0) + U(x0) + E(x0) + (x1 - x0) . F
//!                          - 1/2 |v1 - v0|_M^2 - [E(x0) - E(x1) - grad E(x1) . (x0 - x1)]
//! ```
//!
//! (`U` gravitational, `E` elastic energy, `v1 = (x1 - x0) / h`): the last two terms are the
//! numerical dissipation (the bracket is non-negative where `E` is convex). So a step may gain
//! energy only through the work of its forces, from a non-convex elastic energy, or from an
//! inexact solve; the velocity phases after it (restitution, the contact LCP, damping,
//! settling, falling asleep) change the kinetic energy only, and only restitution may add any.
//! The audit measures each of these so that a gain can be traced to the phase that made it.

use crate::sim::math::Vec3;

/// Energies (J) of one body over one step: the total at the start and the change made by each
/// phase. Gravitational energy is measured from `y = 0` along the world's gravity.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EnergyAudit {
    /// Kinetic + gravitational + elastic energy at the start of the step (J).
    pub start: f64,
    /// Change through the PD iterations, contact and friction forces and the strain-rate
    /// damping included (J): the energy at `x1` with `v1 = (x1 - x0) / h`, minus
    /// [`Self::start`].
    pub solve: f64,
    /// Work of the QP's normal contact forces over the step's displacement (J): positive where
    /// a contact pushed the body out of a penetration it started in.
    pub contact_work: f64,
    /// Work of the friction forces of the implicit step over the displacement (J).
    pub friction_work: f64,
    /// Kinetic energy added by restitution (J).
    pub restitution: f64,
    /// Kinetic energy change by the velocity-level contact LCP (J).
    pub lcp: f64,
    /// Kinetic energy change by the material's deformation damping (J).
    pub damping: f64,
    /// Kinetic energy change by settling (J).
    pub settling: f64,
    /// Kinetic energy removed by falling asleep at the end of the step (J, `<= 0`: a body
    /// that falls asleep stops).
    pub sleep: f64,
}

impl EnergyAudit {
    /// The total energy at the end of the step (J).
    pub fn end(&self) -> f64 {
        self.start + self.change()
    }

    /// The change of the total energy over the step (J).
    pub fn change(&self) -> f64 {
        self.solve + self.restitution + self.lcp + self.damping + self.settling + self.sleep
    }

    /// What the PD iterations changed besides the work of the contact and friction forces (J):
    /// the integrator's dissipation (negative), or a gain from an inexact solve.
    pub fn integrator(&self) -> f64 {
        self.solve - self.contact_work - self.friction_work
    }

    /// Sums two audits (bodies of one world, or substeps: `start` is taken from `self`).
    pub(crate) fn accumulate(&mut self, o: &Self, same_step: bool) {
        if same_step {
            self.start += o.start;
        }
        self.solve += o.solve;
        self.contact_work += o.contact_work;
        self.friction_work += o.friction_work;
        self.restitution += o.restitution;
        self.lcp += o.lcp;
        self.damping += o.damping;
        self.settling += o.settling;
        self.sleep += o.sleep;
    }
}

/// Kinetic energy `1/2 sum m |v|^2` (J).
pub(crate) fn kinetic(masses: &[f64], v: &[Vec3]) -> f64 {
    0.5 * masses
        .iter()
        .zip(v)
        .map(|(m, v)| m * v.norm_squared())
        .sum::<f64>()
}

/// Gravitational energy `-sum m g . x` (J).
pub(crate) fn gravitational(masses: &[f64], x: &[Vec3], gravity: &Vec3) -> f64 {
    -masses
        .iter()
        .zip(x)
        .map(|(m, x)| m * gravity.dot(x))
        .sum::<f64>()
}
