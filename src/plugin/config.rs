//! [`DeformableConfig`]: the run-time settings, grouped by concern ([`SolverSettings`],
//! [`ContactSettings`], [`RestSettings`]), their translation to the core's [`WorldSettings`],
//! and the solver and elastic-model choices (the friction model is the core's
//! [`FrictionModel`], re-exported).

use bevy::math::Vec3;
use bevy::prelude::{Reflect, ReflectDefault, ReflectResource, Resource};
use serde::{Deserialize, Serialize};

use crate::convert::{to_bevy, to_sim};
pub use crate::sim::contact::FrictionModel;
use crate::sim::{self, WorldSettings};

/// Run-time settings of the simulation; edits apply from the next fixed step. Serializable
/// (see [`crate::tuning::SceneTuning`]); the pause state is not saved.
///
/// The settings are grouped by concern: [`SolverSettings`] (how a body's step is solved),
/// [`ContactSettings`] (contacts, friction and restitution) and [`RestSettings`] (settling and
/// sleeping); gravity, the freeze guard and the pause and drawing switches stay here.
///
/// # Example
/// ```
/// use bevy_deformable::prelude::*;
/// let mut config = DeformableConfig::default();
/// config.solver.pd_iterations = 20;
/// config.contact.self_collision = true;
/// config.rest.sleep_speed = 0.0; // no sleeping
/// ```
#[derive(Resource, Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(Resource)]
#[serde(default, deny_unknown_fields)]
pub struct DeformableConfig {
    /// Gravity (m/s^2). Default: (0, -9.81, 0).
    #[serde(with = "crate::tuning::vec3_serde")]
    pub gravity: Vec3,
    /// How each body's step is solved.
    pub solver: SolverSettings,
    /// Contacts between bodies and with obstacles, friction and restitution.
    pub contact: ContactSettings,
    /// Settling and sleeping of bodies at rest.
    pub rest: RestSettings,
    /// A vertex faster than this (m/s) freezes its body. Default: 100.
    pub max_speed: f32,
    /// Stops stepping (bodies keep their state). Default: false.
    #[serde(skip)]
    pub paused: bool,
    /// While paused: run exactly one more fixed step, then clear this flag. Default: false.
    #[serde(skip)]
    pub single_step: bool,
    /// Draw bodies blended between the last two fixed steps (smooth, one step behind) instead
    /// of at the last step. Default: true.
    pub interpolate: bool,
}

/// How each body's step is solved: the solver, its elastic model, iterations and
/// accelerations ([`DeformableConfig::solver`]).
#[derive(Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(Default)]
#[serde(default, deny_unknown_fields)]
pub struct SolverSettings {
    /// Substeps per fixed step. Default: 1.
    pub substeps: u32,
    /// Which solver advances the bodies; see [`WorldSettings::solver`]. Default: Projective
    /// Dynamics.
    pub method: SolverChoice,
    /// The elastic model of the Newton solver; see [`WorldSettings::fem_model`]. Default: fixed
    /// corotated.
    pub fem_model: ElasticModel,
    /// The most Newton iterations per substep with the Newton solver (each one factorization
    /// and one contact QP); see [`WorldSettings::newton_iterations`]. Default: 2.
    pub newton_iterations: u32,
    /// The most Projective Dynamics local/global iterations per substep. Default: 10.
    pub pd_iterations: u32,
    /// The iterations stop once the relative residual of the implicit step's optimality
    /// condition is at most this (0: always run `pd_iterations`); see
    /// [`WorldSettings::pd_tolerance`]. Default: 1e-3.
    pub pd_tolerance: f32,
    /// Chebyshev acceleration of the PD iterations: the estimated spectral radius of the plain
    /// iteration, in `[0, 1)` (0: off); see [`WorldSettings::chebyshev_rho`]. Default: 0.7.
    pub chebyshev_rho: f32,
    /// Anderson acceleration of the PD iterations: how many past iterations the next one
    /// combines (0: off, then Chebyshev; at most [`sim::MAX_ANDERSON_WINDOW`]); see
    /// [`WorldSettings::anderson_window`]. Default: 0.
    pub anderson_window: u32,
}

/// Contacts between bodies and with obstacles: detection, the contact QPs, friction and
/// restitution ([`DeformableConfig::contact`]).
#[derive(Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(Default)]
#[serde(default, deny_unknown_fields)]
pub struct ContactSettings {
    /// Distance (m) within which a proxy near an obstacle already gets a contact row.
    /// Default: 0.01.
    pub margin: f32,
    /// Solve contact QPs exactly in the contact subspace where the bodies' cached `A^-1`
    /// columns allow (see [`WorldSettings::contact_subspace`]), else by MPRGP. Default: true.
    pub subspace: bool,
    /// Bodies with at least this many free vertices solve their contacts on their contact
    /// region alone (see [`WorldSettings::localized_min_vertices`]); `u32::MAX` never.
    /// Default: 16,384.
    pub localized_min_vertices: u32,
    /// Relative tolerance of the MPRGP contact solves (relative to the force that moves the
    /// bodies from their inertial prediction). Default: 1e-3.
    pub mprgp_tolerance: f32,
    /// Iteration cap of one MPRGP solve. Default: 500.
    pub mprgp_max_iterations: u32,
    /// The fastest (m/s) a contact pushes a body out of a penetration it started a step in
    /// (an overlapping spawn, a teleport); see [`WorldSettings::max_depenetration_speed`].
    /// Default: 1.
    pub max_depenetration_speed: f32,
    /// Whether soft bodies collide with each other. Default: true.
    pub soft_contacts: bool,
    /// Whether each body collides with itself (costs a self-test per iteration). Default: false.
    pub self_collision: bool,
    /// Whether contacts between soft surfaces include edge-edge pairs besides vertex-triangle
    /// ones (keeps crossing creases, like the edges of stacked cubes, from cutting through each
    /// other; with `self_collision`, also a body's folded layer draped over its own edge).
    /// Default: true.
    pub edge_contacts: bool,
    /// How Coulomb friction bounds the tangential impulse. Default: cone.
    pub friction_model: FrictionModel,
    /// Approach speed (m/s) above which restitution applies. Default: 0.5.
    pub restitution_threshold: f32,
    /// Projected Gauss-Seidel sweeps at most per contact region. Default: 200.
    pub lcp_max_sweeps: u32,
    /// Solve the contact LCP region by region (the default) or as one problem. Default: true.
    pub separate_regions: bool,
}

/// Settling and sleeping of bodies at rest ([`DeformableConfig::rest`]).
#[derive(Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(Default)]
#[serde(default, deny_unknown_fields)]
pub struct RestSettings {
    /// Rigid speed (m/s) under which a body counts as slow for settling. Default: 0.03.
    pub settling_speed: f32,
    /// How long (s) a body must stay slow before settling damps its rigid motion.
    /// Default: 0.25.
    pub settling_delay: f32,
    /// Damping rate (1/s) of a settling body's rigid motion (0: off), so that stacks and piles
    /// come to rest; deformation is left to the material's damping. Default: 10.
    pub settling_damping: f32,
    /// Speed (m/s) below which a body counts as at rest for sleeping: its vertices must stay
    /// within `sleep_speed * sleep_delay` (m) of where its rest began in root mean square,
    /// none more than twice that (0: no sleeping).
    /// Default: 0.03.
    pub sleep_speed: f32,
    /// How long (s) a body and everything it touches must stay at rest before they sleep
    /// (skipped by the step until something wakes them). Default: 0.5.
    pub sleep_delay: f32,
}

/// Where each setting of the flat `DeformableConfig` of earlier versions now is (old name, new
/// path): a tuning file in the old shape is refused with this hint
/// ([`crate::tuning::TuningError::FlatConfig`]).
pub(crate) const FLAT_FIELDS: [(&str, &str); 26] = [
    ("substeps", "solver.substeps"),
    ("solver", "solver.method"),
    ("fem_model", "solver.fem_model"),
    ("newton_iterations", "solver.newton_iterations"),
    ("pd_iterations", "solver.pd_iterations"),
    ("pd_tolerance", "solver.pd_tolerance"),
    ("chebyshev_rho", "solver.chebyshev_rho"),
    ("anderson_window", "solver.anderson_window"),
    ("contact_subspace", "contact.subspace"),
    ("mprgp_tolerance", "contact.mprgp_tolerance"),
    ("mprgp_max_iterations", "contact.mprgp_max_iterations"),
    ("contact_margin", "contact.margin"),
    ("max_depenetration_speed", "contact.max_depenetration_speed"),
    ("soft_contacts", "contact.soft_contacts"),
    ("self_collision", "contact.self_collision"),
    ("edge_contacts", "contact.edge_contacts"),
    ("friction_model", "contact.friction_model"),
    ("restitution_threshold", "contact.restitution_threshold"),
    ("lcp_max_sweeps", "contact.lcp_max_sweeps"),
    ("separate_regions", "contact.separate_regions"),
    ("settling_speed", "rest.settling_speed"),
    ("settling_delay", "rest.settling_delay"),
    ("settling_damping", "rest.settling_damping"),
    ("sleep_speed", "rest.sleep_speed"),
    ("sleep_delay", "rest.sleep_delay"),
    ("max_speed", "max_speed"),
];

impl Default for DeformableConfig {
    fn default() -> Self {
        let w = WorldSettings::default();
        Self {
            gravity: to_bevy(&w.gravity),
            solver: SolverSettings::default(),
            contact: ContactSettings::default(),
            rest: RestSettings::default(),
            max_speed: w.max_speed as f32,
            paused: false,
            single_step: false,
            interpolate: true,
        }
    }
}

impl Default for SolverSettings {
    fn default() -> Self {
        let w = WorldSettings::default();
        Self {
            substeps: w.substeps as u32,
            method: SolverChoice::ProjectiveDynamics,
            fem_model: ElasticModel::FixedCorotated,
            newton_iterations: w.newton_iterations as u32,
            pd_iterations: w.pd_iterations as u32,
            pd_tolerance: w.pd_tolerance as f32,
            chebyshev_rho: w.chebyshev_rho as f32,
            anderson_window: w.anderson_window as u32,
        }
    }
}

impl Default for ContactSettings {
    fn default() -> Self {
        let w = WorldSettings::default();
        Self {
            margin: w.contact_margin as f32,
            subspace: w.contact_subspace,
            localized_min_vertices: u32::try_from(w.localized_min_vertices).unwrap_or(u32::MAX),
            mprgp_tolerance: w.mprgp.tolerance as f32,
            mprgp_max_iterations: w.mprgp.max_iterations as u32,
            max_depenetration_speed: w.max_depenetration_speed as f32,
            soft_contacts: w.soft_contacts,
            self_collision: w.self_collision,
            edge_contacts: w.edge_contacts,
            friction_model: FrictionModel::Cone,
            restitution_threshold: w.restitution_threshold as f32,
            lcp_max_sweeps: w.lcp.max_sweeps as u32,
            separate_regions: w.separate_regions,
        }
    }
}

impl Default for RestSettings {
    fn default() -> Self {
        let w = WorldSettings::default();
        Self {
            settling_speed: w.settling.speed as f32,
            settling_delay: w.settling.delay as f32,
            settling_damping: w.settling.damping as f32,
            sleep_speed: w.sleeping.speed as f32,
            sleep_delay: w.sleeping.delay as f32,
        }
    }
}

impl DeformableConfig {
    /// Writes the config into the world's settings, clamped into the ranges
    /// [`WorldSettings::validate`] accepts (a value out of range from a slider or a tuning
    /// file is clamped; a non-finite one keeps the default), so the world never refuses to
    /// step.
    pub(super) fn apply(&self, settings: &mut WorldSettings) {
        let d = WorldSettings::default();
        let or_default = |v: f32, default: f64| {
            if v.is_finite() && v > 0.0 {
                v as f64
            } else {
                default
            }
        };
        let non_negative = |v: f32, default: f64| {
            if v.is_finite() {
                v.max(0.0) as f64
            } else {
                default
            }
        };
        let (solver, contact, rest) = (&self.solver, &self.contact, &self.rest);
        settings.gravity = if self.gravity.is_finite() {
            to_sim(self.gravity)
        } else {
            d.gravity
        };
        settings.substeps = (solver.substeps as usize).clamp(1, sim::MAX_SUBSTEPS);
        settings.solver = match solver.method {
            SolverChoice::ProjectiveDynamics => sim::Solver::ProjectiveDynamics,
            SolverChoice::NewtonMprgp => sim::Solver::NewtonMprgp,
        };
        settings.fem_model = match solver.fem_model {
            ElasticModel::FixedCorotated => sim::FemModel::FixedCorotated,
            ElasticModel::StableNeoHookean => sim::FemModel::StableNeoHookean,
        };
        settings.newton_iterations =
            (solver.newton_iterations as usize).clamp(1, sim::MAX_NEWTON_ITERATIONS);
        settings.pd_iterations = (solver.pd_iterations as usize).clamp(1, sim::MAX_PD_ITERATIONS);
        settings.pd_tolerance = non_negative(solver.pd_tolerance, d.pd_tolerance);
        settings.chebyshev_rho = if (0.0..1.0).contains(&solver.chebyshev_rho) {
            f64::from(solver.chebyshev_rho)
        } else {
            d.chebyshev_rho
        };
        settings.anderson_window = (solver.anderson_window as usize).min(sim::MAX_ANDERSON_WINDOW);
        settings.contact_subspace = contact.subspace;
        settings.localized_min_vertices = match contact.localized_min_vertices {
            u32::MAX => usize::MAX,
            n => n as usize,
        };
        settings.mprgp.tolerance = or_default(contact.mprgp_tolerance, d.mprgp.tolerance);
        settings.mprgp.max_iterations = (contact.mprgp_max_iterations as usize).max(1);
        settings.contact_margin = non_negative(contact.margin, d.contact_margin);
        settings.max_speed = or_default(self.max_speed, d.max_speed);
        settings.max_depenetration_speed =
            non_negative(contact.max_depenetration_speed, d.max_depenetration_speed);
        settings.soft_contacts = contact.soft_contacts;
        settings.self_collision = contact.self_collision;
        settings.edge_contacts = contact.edge_contacts;
        settings.lcp.friction = contact.friction_model;
        settings.restitution_threshold =
            non_negative(contact.restitution_threshold, d.restitution_threshold);
        settings.lcp.max_sweeps = contact.lcp_max_sweeps as usize;
        settings.separate_regions = contact.separate_regions;
        settings.settling = sim::Settling {
            speed: non_negative(rest.settling_speed, d.settling.speed),
            delay: non_negative(rest.settling_delay, d.settling.delay),
            damping: non_negative(rest.settling_damping, d.settling.damping),
        };
        settings.sleeping = sim::Sleeping {
            speed: non_negative(rest.sleep_speed, d.sleeping.speed),
            delay: non_negative(rest.sleep_delay, d.sleeping.delay),
        };
    }
}

/// The solver of the simulation (see [`sim::Solver`] for the trade-offs).
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SolverChoice {
    /// Projective Dynamics: a constant prefactored matrix per body and cheap iterations; soft
    /// materials, large deformation, many bodies. Default.
    #[default]
    ProjectiveDynamics,
    /// Newton's method on the finite-element energy with MPRGP contact QPs (the MPRGP paper's
    /// solver): one factorization per iteration; stiff materials (E >= 1e6 Pa) at their true
    /// stiffness.
    NewtonMprgp,
}

/// The elastic model of the Newton solver (see [`sim::FemModel`]).
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ElasticModel {
    /// Fixed corotated (Stomakhin et al. 2012), the counterpart of the PD material. Default.
    #[default]
    FixedCorotated,
    /// Stable Neo-Hookean (Smith et al. 2018).
    StableNeoHookean,
}
