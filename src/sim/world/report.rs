//! What a step did: per-phase timings, solver statistics, frozen bodies, and the contacts of
//! the last step ([`ContactPoint`], for debug drawing). A leaf.

use std::time::Duration;

use crate::sim::contact::LcpStats;
use crate::sim::math::Vec3;

/// Why a body was frozen.
#[derive(Debug, Clone, PartialEq)]
pub enum FreezeReason {
    /// Its positions or velocities were not finite at the start of the step (e.g. set by user
    /// code).
    NonFiniteInput,
    /// A non-finite value appeared during the step.
    NonFiniteState,
    /// A vertex moved faster than [`super::WorldSettings::max_speed`] (m/s).
    SpeedLimit {
        /// The speed reached (m/s).
        speed: f64,
    },
    /// The kinetic energy grew by more than [`super::WorldSettings::runaway_energy_factor`].
    EnergyRunaway {
        /// Kinetic energy before the step (J).
        before: f64,
        /// Kinetic energy after the step (J).
        after: f64,
    },
    /// The body's system matrix could not be factored.
    Factorization(String),
    /// The contact QP could not be solved.
    ContactSolve(String),
}

impl std::fmt::Display for FreezeReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NonFiniteInput => write!(f, "non-finite positions or velocities before the step"),
            Self::NonFiniteState => write!(f, "a non-finite value appeared during the step"),
            Self::SpeedLimit { speed } => write!(f, "a vertex reached {speed:.1} m/s"),
            Self::EnergyRunaway { before, after } => {
                write!(
                    f,
                    "kinetic energy ran away from {before:.3e} J to {after:.3e} J"
                )
            }
            Self::Factorization(e) => write!(f, "factorization failed: {e}"),
            Self::ContactSolve(e) => write!(f, "contact QP failed: {e}"),
        }
    }
}

/// Time spent in each phase, summed over bodies (bodies may run in parallel, so the sum can
/// exceed the wall time in [`StepReport::wall`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseTimings {
    /// Rebuilding or refactoring matrices after edits.
    pub refactor: Duration,
    /// Inertial prediction.
    pub predict: Duration,
    /// Contact detection and constraint rows (including re-detection during iterations).
    pub detect: Duration,
    /// PD local steps (polar decompositions).
    pub local: Duration,
    /// PD global steps: right-hand sides and prefactored solves.
    pub global: Duration,
    /// MPRGP solves of the constrained global steps (part of the global phase, not in `global`).
    pub mprgp: Duration,
    /// Of `mprgp`, the QP solver alone (MPRGP or the contact subspace), without the rows'
    /// assembly, the friction update and (Newton-MPRGP) the line search.
    pub qp_solve: Duration,
    /// Velocity update, damping and the guard.
    pub velocity: Duration,
    /// The velocity-level contact LCPs (restitution and friction), building included. A
    /// world-level phase: counted once, not per body.
    pub lcp: Duration,
}

impl PhaseTimings {
    pub(crate) fn add(&mut self, o: &Self) {
        self.refactor += o.refactor;
        self.predict += o.predict;
        self.detect += o.detect;
        self.local += o.local;
        self.global += o.global;
        self.mprgp += o.mprgp;
        self.qp_solve += o.qp_solve;
        self.velocity += o.velocity;
        self.lcp += o.lcp;
    }
}

/// Statistics of one body's step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BodyStepStats {
    /// Phase timings of this body.
    pub timings: PhaseTimings,
    /// PD local/global iterations run (Newton iterations with [`super::Solver::NewtonMprgp`]).
    pub pd_iterations: usize,
    /// The relative residual of the last iterate the iterations measured, of the body's island
    /// (see [`super::WorldSettings::pd_tolerance`]): the iterate they stopped at where they
    /// reached the tolerance ([`Self::pd_converged`]), else the one before the last (whose own
    /// residual only [`Self::residual`] measures).
    pub pd_residual: f64,
    /// Whether the iterations stopped on [`super::WorldSettings::pd_tolerance`] before
    /// [`super::WorldSettings::pd_iterations`].
    pub pd_converged: bool,
    /// MPRGP iterations over all constrained global steps.
    pub mprgp_iterations: usize,
    /// MPRGP CG steps among them.
    pub mprgp_cg_steps: usize,
    /// Constrained global steps solved exactly in the contact subspace instead of by MPRGP
    /// (see [`super::WorldSettings::contact_subspace`]).
    pub subspace_solves: usize,
    /// Times the body's collision-prone region was rebuilt (a refactorization each) because a
    /// contact touched a vertex outside it (see [`super::WorldSettings::localized_min_vertices`]).
    pub prone_rebuilds: usize,
    /// Constraint rows at the end of the step.
    pub constraints: usize,
    /// Rows active at the solution.
    pub active_constraints: usize,
    /// Relative KKT residual `||phi + beta|| / ||b - A y||` of the last constrained global step,
    /// solved about the inertial prediction `y` (Jacobi-scaled; 0 if unconstrained).
    pub kkt_residual: f64,
    /// Deepest penetration (m) of a proxy into an obstacle after the step.
    pub max_penetration: f64,
    /// Tets with non-positive volume after the step (the PD projections turn them back).
    pub inverted_tets: usize,
    /// Whether the body's rigid motion was damped by settling ([`super::Settling`]).
    pub settling: bool,
    /// Whether the body slept through the step ([`super::Sleeping`]): nothing of it ran.
    pub asleep: bool,
    /// The body's energy at each phase of the step, when
    /// [`super::WorldSettings::energy_audit`] is on (of the last substep).
    pub energy: Option<super::audit::EnergyAudit>,
    /// How far the last substep's PD iterations ended from the implicit step's solution, when
    /// [`super::WorldSettings::measure_residual`] is on: `||grad Phi(x) - J' lambda - f||` over
    /// `||grad Phi||` at the step's first iterate (dimensionless; 0 where that vanishes).
    pub residual: Option<f64>,
}

/// What [`super::SoftWorld::step`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReport {
    /// Wall time of the whole step.
    pub wall: Duration,
    /// Phase timings summed over bodies.
    pub timings: PhaseTimings,
    /// PD iterations (Newton iterations with [`super::Solver::NewtonMprgp`]), summed over bodies.
    pub pd_iterations: usize,
    /// The largest [`BodyStepStats::pd_residual`] over bodies and substeps.
    pub pd_residual: f64,
    /// MPRGP iterations, summed over bodies.
    pub mprgp_iterations: usize,
    /// MPRGP CG steps, summed over bodies.
    pub mprgp_cg_steps: usize,
    /// Constrained global steps solved in the contact subspace, summed over bodies.
    pub subspace_solves: usize,
    /// Collision-prone regions rebuilt, summed over bodies (see
    /// [`BodyStepStats::prone_rebuilds`]).
    pub prone_rebuilds: usize,
    /// Constraint rows, summed over bodies.
    pub constraints: usize,
    /// Active constraint rows at the solutions, summed over bodies.
    pub active_constraints: usize,
    /// Largest final relative KKT residual over bodies.
    pub kkt_residual: f64,
    /// Deepest penetration (m) after the step: a proxy into an obstacle, or a surface vertex behind
    /// the frozen plane of another body's triangle it touches.
    pub max_penetration: f64,
    /// Tets with non-positive volume after the step, summed over bodies (the largest count over
    /// substeps).
    pub inverted_tets: usize,
    /// Bodies whose rigid motion settling damped (the most over substeps).
    pub settling_bodies: usize,
    /// Soft-soft contacts (vertex against triangle) detected at the start of the step,
    /// self-collisions included.
    pub soft_contacts: usize,
    /// Groups of bodies solved as one QP because they touch each other (bodies alone count as
    /// islands of one).
    pub islands: usize,
    /// Bodies in the largest island.
    pub largest_island: usize,
    /// The velocity-level contact problem: regions, largest region, iterations, residual.
    pub lcp: LcpStats,
    /// Bodies frozen during this step, with the reason.
    pub frozen: Vec<(super::handles::BodyHandle, FreezeReason)>,
    /// Bodies asleep after the step ([`super::Sleeping`]).
    pub sleeping_bodies: usize,
    /// Bodies that fell asleep during this step.
    pub slept: Vec<super::handles::BodyHandle>,
    /// Bodies woken since the last step's report: by this step (something reached them) or by
    /// an edit before it.
    pub woke: Vec<super::handles::BodyHandle>,
    /// The energy audit summed over bodies (the start of the first substep, the changes of
    /// all), when [`super::WorldSettings::energy_audit`] is on and some body was stepped (not
    /// every one asleep or frozen).
    pub energy: Option<super::audit::EnergyAudit>,
    /// The largest relative residual of the PD iterations over bodies and substeps (see
    /// [`BodyStepStats::residual`]), when [`super::WorldSettings::measure_residual`] is on and
    /// some body was stepped.
    pub residual: Option<f64>,
}

impl StepReport {
    /// Share of MPRGP iterations that were CG steps (the paper's `cg/it`).
    pub fn cg_share(&self) -> f64 {
        if self.mprgp_iterations == 0 {
            1.0
        } else {
            self.mprgp_cg_steps as f64 / self.mprgp_iterations as f64
        }
    }

    pub(crate) fn add_body(&mut self, s: &BodyStepStats, first_substep: bool) {
        if let Some(e) = &s.energy {
            self.energy
                .get_or_insert_with(Default::default)
                .accumulate(e, first_substep);
        }
        self.timings.add(&s.timings);
        self.pd_iterations += s.pd_iterations;
        self.pd_residual = self.pd_residual.max(s.pd_residual);
        self.mprgp_iterations += s.mprgp_iterations;
        self.mprgp_cg_steps += s.mprgp_cg_steps;
        self.subspace_solves += s.subspace_solves;
        self.prone_rebuilds += s.prone_rebuilds;
        self.constraints += s.constraints;
        self.active_constraints += s.active_constraints;
        self.kkt_residual = self.kkt_residual.max(s.kkt_residual);
        if let Some(r) = s.residual {
            self.residual = Some(self.residual.map_or(r, |m| m.max(r)));
        }
        self.max_penetration = self.max_penetration.max(s.max_penetration);
    }
}

/// A contact of the last step, for debug drawing and inspection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactPoint {
    /// Where the contact acts (m): the proxy or surface vertex at the end of the step.
    pub position: Vec3,
    /// Unit contact normal (out of the obstacle or the touched triangle).
    pub normal: Vec3,
    /// Contact region of the velocity LCP (regions share no vertex).
    pub region: u32,
    /// Total impulse on the proxy side during the step (N s): the position-level normal and
    /// friction impulses plus the LCP's correction.
    pub impulse: Vec3,
    /// Whether the contact is between soft surfaces (otherwise against an obstacle).
    pub soft: bool,
}
