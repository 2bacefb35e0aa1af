//! [`WorldSettings`]: the world's run-time settings, their sub-settings ([`Settling`],
//! [`Sleeping`]), their defaults and [`WorldSettings::validate`], which [`super::SoftWorld::step`]
//! runs before every step. A leaf: every stage reads these, none is imported here.

use super::anderson::MAX_ANDERSON_WINDOW;
use super::error::WorldError;
use super::solver::{DEFAULT_NEWTON_ITERATIONS, Solver};
use crate::sim::contact::LcpSettings;
use crate::sim::fem::FemModel;
use crate::sim::math::Vec3;
use crate::sim::qp::mprgp::MprgpSettings;

/// Global settings of a [`super::SoftWorld`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorldSettings {
    /// Gravity (m/s^2). Default: (0, -9.81, 0).
    pub gravity: Vec3,
    /// Substeps per [`super::SoftWorld::step`] call. Default: 1.
    pub substeps: usize,
    /// Which solver advances the bodies (see [`Solver`]). Default: Projective Dynamics.
    pub solver: Solver,
    /// The elastic model of [`Solver::NewtonMprgp`] (Projective Dynamics has its own, the
    /// corotated constraints of [`crate::sim::pd`]). Default: fixed corotated.
    pub fem_model: FemModel,
    /// The most Newton iterations per substep with [`Solver::NewtonMprgp`], each a
    /// factorization of the Newton matrix and a contact QP; the iterations stop earlier on
    /// [`Self::pd_tolerance`]. The MPRGP paper takes one. Default:
    /// [`DEFAULT_NEWTON_ITERATIONS`] (2).
    pub newton_iterations: usize,
    /// The most PD local/global iterations per substep. Default: 10.
    pub pd_iterations: usize,
    /// The PD iterations of an island stop once the relative residual of the implicit step's
    /// optimality condition at the iterate is at most this (dimensionless, against the step's
    /// `max(||grad Phi(x_0)||, ||M g||)` at the first iterate `x_0 = x + h v`; measured at the
    /// cost of a pass over the vertices per
    /// iteration, see [`super::BodyStepStats::pd_residual`]), and at the latest after
    /// [`Self::pd_iterations`]. Contact QPs left to MPRGP are then solved to a quarter of the
    /// residual still left (at most [`Self::mprgp`]'s tolerance). 0 runs every iteration with
    /// those QPs at [`Self::mprgp`]'s tolerance alone. Default: [`DEFAULT_PD_TOLERANCE`].
    pub pd_tolerance: f64,
    /// Chebyshev semi-iterative acceleration of the PD iterations (Wang 2015): the estimated
    /// spectral radius `rho` of the plain iteration, in `[0, 1)`; 0 (or any value outside,
    /// NaN included) turns it off. The
    /// sequence restarts wherever the residual grows or the contacts change. Default:
    /// [`DEFAULT_CHEBYSHEV_RHO`].
    pub chebyshev_rho: f64,
    /// Anderson acceleration of the PD iterations (Peng et al. 2018): how many past iterations
    /// the next one combines, `0..=`[`MAX_ANDERSON_WINDOW`]; 0 turns it off. Where on, it
    /// replaces the Chebyshev weights ([`Self::chebyshev_rho`] is then unused). The history
    /// restarts wherever the residual grows or the contacts change. It pays where the motion
    /// is mostly elastic (measured: a squashed cube falling freely); in contact-rich scenes it
    /// is about even with Chebyshev (see [`SUGGESTED_ANDERSON_WINDOW`]). Default: 0 (off).
    pub anderson_window: usize,
    /// MPRGP settings of the constrained global steps, which are solved about the bodies'
    /// inertial prediction (`Mprgp::solve_about`): the tolerance is relative to the force that
    /// moves them from there, the same wherever they are in the world. Default: tolerance
    /// [`DEFAULT_MPRGP_TOLERANCE`], 500 iterations.
    pub mprgp: MprgpSettings,
    /// Solve each contact QP in the contact subspace, exactly, where the bodies' `A^-1`
    /// columns at its vertices are cached (computed a few per iteration while the factor
    /// stands, at most 16 MiB per body; see `sim::inverse_columns`), and by MPRGP otherwise.
    /// Default: true.
    pub contact_subspace: bool,
    /// Bodies with at least this many free vertices solve their contacts *localized* in the
    /// contact subspace: the vertices contacts touch (with four rings of surface neighbours, at
    /// most 2,048) are ordered last in the body's factor, whose trailing block gives `A^-1` over
    /// them, instead of caching whole columns (see `sim::prone`); a contact outside that region
    /// rebuilds it, one refactorization. Needs [`WorldSettings::contact_subspace`].
    /// `usize::MAX` turns it off. Default: [`DEFAULT_LOCALIZED_MIN_VERTICES`].
    pub localized_min_vertices: usize,
    /// Distance (m) below which a proxy near an obstacle already gets a (possibly inactive)
    /// constraint. Default: 0.01.
    pub contact_margin: f64,
    /// A vertex faster than this (m/s) freezes its body. Default: 100.
    pub max_speed: f64,
    /// Kinetic energy growing past this factor times `max(previous, 1/2 M (1 m/s)^2)` in one step
    /// freezes the body. Default: 1000.
    pub runaway_energy_factor: f64,
    /// Whether soft bodies collide with each other. Default: true.
    pub soft_contacts: bool,
    /// Whether a body collides with itself (a bar bent onto itself, a folded sheet); costs a
    /// self-test of every body's surface each iteration. Default: false.
    pub self_collision: bool,
    /// Whether contacts between soft surfaces include edge-edge pairs besides the
    /// vertex-triangle ones: convex creases crossing between their vertices, as where a cube's
    /// overhanging edge rests across the edge of the cube below
    /// ([`crate::sim::contact::edge_edge`]). With [`Self::self_collision`] also within one body,
    /// and there also a crease pressed into a face draped over it (a folded layer over the side
    /// edge of the layer below). Default: true: without them a stack of cubes crosses at its
    /// edges. Off, the broadphase costs about half (`docs/PERFORMANCE.md`, the contacts bench).
    pub edge_contacts: bool,
    /// Separation (m) kept between touching soft surfaces, so that they never share a plane.
    /// Default: 5e-4.
    pub soft_contact_skin: f64,
    /// Deepest a surface vertex may already be inside another body (m) and still be pushed out
    /// through the nearest triangle, which deeper inside may be on the wrong side. Deeper ones
    /// are found by flooding from the overlap's rim and pushed out along the overlap's shortest
    /// way out ([`crate::sim::contact::overlap`]). Default: 0.05.
    pub soft_depth_limit: f64,
    /// The fastest a contact pushes a body out of a penetration it started the step in (m/s):
    /// an overlapping spawn, a teleport, or a body pressed in by a fast obstacle separates at
    /// this speed over several steps rather than being launched in one (as PhysX's and Jolt's
    /// max depenetration velocity). Applies to obstacle and soft-soft contacts; a moving
    /// obstacle's own approach comes on top. Default: 1.
    pub max_depenetration_speed: f64,
    /// Normal approach speed (m/s) above which restitution applies; slower contacts are
    /// inelastic, so resting bodies do not jitter. Default: 0.5.
    pub restitution_threshold: f64,
    /// The velocity-level contact LCP: friction model (cone or pyramid), tolerances, iteration
    /// caps. Default: [`LcpSettings::default`].
    pub lcp: LcpSettings,
    /// Solve the contact LCP region by region (true) or as one monolithic problem (false, the
    /// baseline of Lazarevych et al.). Default: true.
    pub separate_regions: bool,
    /// Extra damping of the rigid motion of bodies that have moved slowly for a while, so that
    /// stacks and piles come to rest (see [`Settling`]). Default: [`Settling::default`].
    pub settling: Settling,
    /// Bodies and islands at rest are skipped by the step until something wakes them (see
    /// [`Sleeping`]). Default: [`Sleeping::default`].
    pub sleeping: Sleeping,
    /// Measure every body's energy at each phase of the step ([`super::EnergyAudit`], in
    /// [`super::StepReport::energy`] and [`super::SoftWorld::last_step_stats`]): a debugging aid that costs
    /// three elastic-energy evaluations per body per step. Default: false.
    pub energy_audit: bool,
    /// Measure how far each step's PD iterations are from the implicit step's solution: the
    /// relative residual of its optimality condition, contact and friction forces included (in
    /// [`super::BodyStepStats::residual`] and [`super::StepReport::residual`]; see the step module's
    /// `residual`). Costs two extra local steps per body per step. Default: false.
    pub measure_residual: bool,
}

impl Default for WorldSettings {
    fn default() -> Self {
        Self {
            gravity: Vec3::new(0.0, -9.81, 0.0),
            substeps: 1,
            solver: Solver::ProjectiveDynamics,
            fem_model: FemModel::FixedCorotated,
            newton_iterations: DEFAULT_NEWTON_ITERATIONS,
            pd_iterations: 10,
            pd_tolerance: DEFAULT_PD_TOLERANCE,
            chebyshev_rho: DEFAULT_CHEBYSHEV_RHO,
            anderson_window: 0,
            mprgp: MprgpSettings {
                tolerance: DEFAULT_MPRGP_TOLERANCE,
                ..MprgpSettings::default()
            },
            contact_subspace: true,
            localized_min_vertices: DEFAULT_LOCALIZED_MIN_VERTICES,
            contact_margin: 0.01,
            max_speed: 100.0,
            runaway_energy_factor: 1000.0,
            soft_contacts: true,
            self_collision: false,
            edge_contacts: true,
            soft_contact_skin: 5e-4,
            soft_depth_limit: 0.05,
            max_depenetration_speed: 1.0,
            restitution_threshold: 0.5,
            lcp: LcpSettings::default(),
            separate_regions: true,
            settling: Settling::default(),
            sleeping: Sleeping::default(),
            energy_audit: false,
            measure_residual: false,
        }
    }
}

/// The default of [`WorldSettings::localized_min_vertices`]. Measured with `cargo bench
/// --bench localized` (one run, each scene stepped both ways one after the other; the table
/// in docs/PERFORMANCE.md): a 39,304-vertex cube pinned at its base with a ball pressed into
/// its top steps 1.5x faster localized (203 against 305 ms per step), and its iterations reach
/// the 1e-3 tolerance (residual 8.5e-4 in 4 iterations) where MPRGP over the whole body stops
/// at 2.7e-2 after 10; a 10,648-vertex cube is as fast either way pressed (its few contact
/// vertices' columns fit the cache) and 0.78x landing on its 484-vertex face (a fifth more
/// fill in the reordered factor, and a second solve's backward half per iteration, against
/// MPRGP's few iterations).
pub const DEFAULT_LOCALIZED_MIN_VERTICES: usize = 16_384;

/// The default relative tolerance of the contact QPs ([`WorldSettings::mprgp`]), a cap: with
/// [`WorldSettings::pd_tolerance`] set, each QP is solved to a quarter of the PD iterations'
/// current relative residual where that is tighter (an inexact step whose error never sets the
/// floor of the residual the iterations stop on), so the cap only binds while the iterations
/// are far from the step's solution. `cargo bench --bench solver` (two runs each, alternated,
/// one session): at a cap of 1e-2 against 1e-3, the 10K cube 126 MPRGP iterations per step
/// against 250 and 91-93 ms per step against 124-129 at the same final residual (1.7e-3), the
/// 40K cube 139 against 368 iterations and 425-488 ms against 597-616 (residual 7.8e-3 against
/// 7.1e-3; 20-35 ms of that difference is the split solve of
/// [`crate::sim::sparse::SparseCholesky::solve_correction_in_place`], measured in the same
/// session), the 1K scenes unchanged (their QPs are solved in the contact subspace); the `pile`
/// bench 7.9-8.3 against 8.5-8.6 ms of contact QP per step at a worst-island residual of 0.25
/// against 0.23, crossings unchanged (21.0 mm). Earlier, before the quarter-of-the-residual
/// rule, 1e-3 was chosen over 1e-4 and 1e-5 (cube_1k 30 MPRGP iterations per step and a final
/// residual of 7.2e-4 at 1e-3; 95 and 7.3e-5 at 1e-4; 175 and 8.2e-6 at 1e-5).
pub const DEFAULT_MPRGP_TOLERANCE: f64 = 1e-2;

/// The default [`WorldSettings::pd_tolerance`]: a cube at rest takes one iteration. Measured with
/// `cargo bench --bench solver` (its residual column against ten plain iterations, no
/// acceleration and no tolerance, each in a run of its own, medians over the same 20 steps): the
/// 10K and 40K cubes end landing steps closer to the implicit step (1.7e-3 against 2.6e-3,
/// 7.1e-3 against 1.7e-2); the armadillo, mid-topple at the full ten iterations either way, at
/// 3.3e-2 against 3.1e-2 (its own trajectory each; 3.8e-2 before the dense LCP's refinement
/// rule of e3be4a3 moved it); a 1,000-vertex cube at rest stops after one
/// iteration at 1.4e-4, where ten plain iterations reach 2.3e-7.
pub const DEFAULT_PD_TOLERANCE: f64 = 1e-3;

/// Default [`WorldSettings::chebyshev_rho`]: 0.7. Measured on a rubber cube stretched by
/// 20 %, after 8 iterations: relative residual 1.25e-2 plain, 6.0e-3 at 0.7, 5.6e-3 at 0.8,
/// and worse than plain at 0.9 (2.3e-2), where the extrapolation overshoots; a stiffer
/// material converges more slowly (a larger true `rho`), which 0.7 only under-accelerates.
pub const DEFAULT_CHEBYSHEV_RHO: f64 = 0.7;

/// The [`WorldSettings::anderson_window`] to turn Anderson acceleration on with: 5. Measured
/// against Chebyshev at 0.7 at equal iterations (10 per step, relative residuals over 120
/// steps): a 1,000-vertex rubber cube stretched 30 % along x and squeezed 10 % along z,
/// falling freely, 5.0e-7 against 1.4e-5 (geometric mean), and landing on a floor 2.4e-4
/// against 3.1e-4 (median); the armadillo toppling over 3.0e-2 against 3.0e-2 (window 3 about
/// the same on both); a sim-only replica of the `pile` example's twenty bodies, its worst
/// body, 0.48 against 0.47. A 64-vertex cube stretched by 20 % ends its first step 0.06 mm
/// from the implicit step's solution after 10 iterations, against 0.43 mm (Chebyshev). A bar
/// folded onto itself with self-collision (`tests/sim_contacts.rs`) crossed itself at no
/// triangle pair with it, against 4 with Chebyshev.
/// Off by default: with contacts it gains little, and near rest its combinations lower the
/// residual faster than the distance from the solution, so a tolerance ends the iterations
/// further away (a landed cube stopped at 1e-4 is 0.40 um from the solution, at 1e-3 0.60 um;
/// with Chebyshev 0.28 and 0.60 um).
pub const SUGGESTED_ANDERSON_WINDOW: usize = 5;

/// The most substeps per [`super::SoftWorld::step`] accepted by [`WorldSettings::validate`].
pub const MAX_SUBSTEPS: usize = 64;

/// The most PD iterations per substep accepted by [`WorldSettings::validate`].
pub const MAX_PD_ITERATIONS: usize = 1000;

/// The most Newton iterations per substep accepted by [`WorldSettings::validate`].
pub const MAX_NEWTON_ITERATIONS: usize = 100;

impl WorldSettings {
    /// The most iterations per substep of the chosen solver: [`Self::pd_iterations`] or
    /// [`Self::newton_iterations`] (at least 1).
    pub fn iterations(&self) -> usize {
        match self.solver {
            Solver::ProjectiveDynamics => self.pd_iterations,
            Solver::NewtonMprgp => self.newton_iterations,
        }
        .max(1)
    }

    /// Checks every value; [`super::SoftWorld::step`] refuses to run with settings that fail.
    ///
    /// # Errors
    /// [`WorldError::InvalidSetting`] naming the first offending field: a non-finite gravity,
    /// `substeps` outside `1..=`[`MAX_SUBSTEPS`], `pd_iterations` outside
    /// `1..=`[`MAX_PD_ITERATIONS`], `newton_iterations` outside `1..=`[`MAX_NEWTON_ITERATIONS`], an `anderson_window` over [`MAX_ANDERSON_WINDOW`], an MPRGP tolerance, gamma or iteration cap that is not
    /// positive, a negative or non-finite PD tolerance, margin, skin, depth limit, restitution threshold or
    /// depenetration speed, a `max_speed` or `runaway_energy_factor` that is not positive, LCP
    /// tolerances that are negative or not finite, or settling or sleeping values that are
    /// negative or not finite.
    pub fn validate(&self) -> Result<(), WorldError> {
        let bad = |what: &'static str, value: f64| Err(WorldError::InvalidSetting { what, value });
        if !self.gravity.iter().all(|g| g.is_finite()) {
            return bad("gravity", self.gravity.norm());
        }
        if !(1..=MAX_SUBSTEPS).contains(&self.substeps) {
            return bad("substeps", self.substeps as f64);
        }
        if !(1..=MAX_PD_ITERATIONS).contains(&self.pd_iterations) {
            return bad("pd_iterations", self.pd_iterations as f64);
        }
        if !(1..=MAX_NEWTON_ITERATIONS).contains(&self.newton_iterations) {
            return bad("newton_iterations", self.newton_iterations as f64);
        }
        if self.anderson_window > MAX_ANDERSON_WINDOW {
            return bad("anderson_window", self.anderson_window as f64);
        }
        let m = &self.mprgp;
        if m.max_iterations == 0 {
            return bad("mprgp.max_iterations", 0.0);
        }
        let positive = [
            ("mprgp.tolerance", m.tolerance),
            ("mprgp.gamma", m.gamma),
            ("max_speed", self.max_speed),
            ("runaway_energy_factor", self.runaway_energy_factor),
        ];
        for (what, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return bad(what, value);
            }
        }
        let non_negative = [
            ("pd_tolerance", self.pd_tolerance),
            ("contact_margin", self.contact_margin),
            ("soft_contact_skin", self.soft_contact_skin),
            ("soft_depth_limit", self.soft_depth_limit),
            ("max_depenetration_speed", self.max_depenetration_speed),
            ("restitution_threshold", self.restitution_threshold),
            ("lcp.impulse_tolerance", self.lcp.impulse_tolerance),
            ("lcp.velocity_tolerance", self.lcp.velocity_tolerance),
            ("settling.speed", self.settling.speed),
            ("settling.delay", self.settling.delay),
            ("settling.damping", self.settling.damping),
            ("sleeping.speed", self.sleeping.speed),
            ("sleeping.delay", self.sleeping.delay),
        ];
        for (what, value) in non_negative {
            if !(value.is_finite() && value >= 0.0) {
                return bad(what, value);
            }
        }
        Ok(())
    }
}

/// Settings of the settling damping: extra damping of the rigid motion of slow, supported
/// bodies (the rules are in the `settling` module's docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settling {
    /// Rigid speed (m/s) under which a body counts as slow. Default: 0.03.
    pub speed: f64,
    /// How long (s) a body must stay slow before its rigid motion is damped. Default: 0.25.
    pub delay: f64,
    /// Damping rate (1/s) of a settling body's rigid motion; 0 turns settling off.
    /// Default: 10 (PhysX's default settling damping).
    pub damping: f64,
}

impl Default for Settling {
    fn default() -> Self {
        Self {
            speed: 0.03,
            delay: 0.25,
            damping: 10.0,
        }
    }
}

impl Settling {
    /// No settling: rigid motion is never damped.
    pub const OFF: Self = Self {
        speed: 0.0,
        delay: 0.0,
        damping: 0.0,
    };

    /// Whether settling damps anything at all.
    pub fn enabled(&self) -> bool {
        self.damping > 0.0 && self.speed > 0.0
    }
}

/// Settings of sleeping: bodies and islands at rest are skipped by the step (the rules are in
/// the `sleeping` module's docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sleeping {
    /// Speed (m/s) that sets how far a body's vertices may move and still count as at rest:
    /// their root mean square distance from where they were when the rest began within
    /// `speed * delay` (m), none of them more than twice that (a body
    /// moving steadily rests below `speed`, one accelerating from rest below
    /// `2 * speed / delay`); 0 turns sleeping off. Default: 0.03 (Jolt's default).
    pub speed: f64,
    /// How long (s) a body (and every body of its island) must stay at rest before it sleeps.
    /// Default: 0.5 (Jolt's default).
    pub delay: f64,
}

impl Default for Sleeping {
    fn default() -> Self {
        Self {
            speed: 0.03,
            delay: 0.5,
        }
    }
}

impl Sleeping {
    /// No sleeping: every body is stepped.
    pub const OFF: Self = Self {
        speed: 0.0,
        delay: 0.0,
    };

    /// Whether bodies may fall asleep at all.
    pub fn enabled(&self) -> bool {
        self.speed > 0.0
    }
}
