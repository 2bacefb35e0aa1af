//! [`SoftWorld`]: soft bodies, obstacles, and the time step that advances them.
//!
//! Each body owns its Projective Dynamics system (one sparse Cholesky factor per body, built on
//! its first step and refactored only after an edit), with [`Solver::NewtonMprgp`] also its
//! finite-element Newton system (`solver`), and its scratch space. Bodies touch each
//! other through soft-soft contacts: bodies in contact form an *island* whose constrained global
//! steps are one QP (`island`); islands and bodies are advanced in parallel (rayon), in a fixed
//! order, with sequential arithmetic inside each body and island, so results are bit-identical
//! run to run and independent of the thread count. The phases of a step are listed in
//! `step`. A body that fails — non-finite state, a runaway speed or energy, a failed
//! factorization — is restored to its last good state, frozen and reported in
//! [`StepReport::frozen`]; the other bodies go on unaffected.

mod audit;
mod body;
mod coupling;
mod desc;
mod handles;
mod interact;
mod island;
mod report;
mod settling;
mod sleeping;
mod solver;
mod step;

use std::sync::Arc;
use std::time::Instant;

use nalgebra::UnitQuaternion;
use thiserror::Error;

pub use audit::EnergyAudit;
pub use body::SoftBody;
pub use desc::BodyDesc;
pub use report::{BodyStepStats, FreezeReason, PhaseTimings, StepReport};
pub use settling::Settling;
pub use sleeping::Sleeping;
pub use solver::{DEFAULT_NEWTON_ITERATIONS, Solver};
pub use step::ContactPoint;
pub use step::anderson::MAX_ANDERSON_WINDOW;

use super::contact::{ContactLcp, LcpSettings, Obstacle, ObstacleError};
use super::embed::EmbeddedPoint;
use super::fem::FemModel;
use super::material::{MaterialError, SoftMaterial};
use super::math::Vec3;
use super::mesh::{MeshError, TetMesh};
use super::qp::mprgp::MprgpSettings;
use body::Rebuild;

/// Global settings of a [`SoftWorld`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorldSettings {
    /// Gravity (m/s^2). Default: (0, -9.81, 0).
    pub gravity: Vec3,
    /// Substeps per [`SoftWorld::step`] call. Default: 1.
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
    /// iteration, see [`BodyStepStats::pd_residual`]), and at the latest after
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
    /// edges. Off, the broadphase costs about half (see the README's performance figures).
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
    /// Measure every body's energy at each phase of the step ([`EnergyAudit`], in
    /// [`StepReport::energy`] and [`SoftWorld::last_step_stats`]): a debugging aid that costs
    /// three elastic-energy evaluations per body per step. Default: false.
    pub energy_audit: bool,
    /// Measure how far each step's PD iterations are from the implicit step's solution: the
    /// relative residual of its optimality condition, contact and friction forces included (in
    /// [`BodyStepStats::residual`] and [`StepReport::residual`]; see the step module's
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

/// The most substeps per [`SoftWorld::step`] accepted by [`WorldSettings::validate`].
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

    /// Checks every value; [`SoftWorld::step`] refuses to run with settings that fail.
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

/// Identifies a body in a [`SoftWorld`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyHandle(u32);

/// Identifies an obstacle in a [`SoftWorld`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObstacleHandle(u32);

/// Why a world operation was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WorldError {
    /// The material is not physical.
    #[error("invalid material: {0}")]
    Material(#[from] MaterialError),
    /// A body's mesh is invalid after its description's scale.
    #[error("invalid mesh: {0}")]
    Mesh(#[from] MeshError),
    /// The obstacle's pose or velocity is invalid.
    #[error("invalid obstacle: {0}")]
    Obstacle(#[from] ObstacleError),
    /// No body has this handle (it was removed).
    #[error("no body {0:?}")]
    UnknownBody(BodyHandle),
    /// No obstacle has this handle.
    #[error("no obstacle {0:?}")]
    UnknownObstacle(ObstacleHandle),
    /// A vertex index is out of range.
    #[error("vertex {vertex} out of range: the body has {count} vertices")]
    VertexOutOfRange {
        /// The index given.
        vertex: usize,
        /// Vertices of the body.
        count: usize,
    },
    /// The vertices of an embedded point (those with a non-zero weight) are not corners of one
    /// tet.
    #[error("the point's vertices are not corners of one tet")]
    PointNotInOneTet,
    /// A [`WorldSettings`] field is out of its range (see [`WorldSettings::validate`]).
    #[error("invalid world setting {what}: {value}")]
    InvalidSetting {
        /// The field.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// A position, stiffness or time step is not finite (or not positive where required).
    #[error("{what} must be finite{positive}", positive = if *.positive { " and > 0" } else { "" })]
    InvalidValue {
        /// Which input.
        what: &'static str,
        /// Whether it had to be positive.
        positive: bool,
    },
}

/// A world of soft bodies and obstacles.
///
/// # Example
/// ```
/// use std::sync::Arc;
/// use bevy_deformable::sim::{Obstacle, SoftMaterial, SoftWorld, TetMesh, Vec3, WorldSettings};
/// let mut world = SoftWorld::new(WorldSettings::default());
/// let cube = Arc::new(TetMesh::cuboid(Vec3::repeat(0.25), 3));
/// let body = world.add_body(cube, SoftMaterial::RUBBER, Vec3::new(0.0, 1.0, 0.0)).unwrap();
/// world.add_obstacle(Obstacle::halfspace(Vec3::y()).unwrap()).unwrap();
/// for _ in 0..60 {
///     world.step(1.0 / 60.0).unwrap();
/// }
/// let lowest = world.positions(body).unwrap().iter().map(|p| p.y).fold(f64::MAX, f64::min);
/// assert!(lowest > -1e-3);
/// ```
#[derive(Debug, Default)]
pub struct SoftWorld {
    settings: WorldSettings,
    bodies: Vec<SoftBody>,
    body_ids: handles::HandleTable,
    obstacles: Vec<Obstacle>,
    obstacle_ids: handles::HandleTable,
    next_id: u32,
    state: step::StepState,
}

impl SoftWorld {
    /// An empty world.
    pub fn new(settings: WorldSettings) -> Self {
        Self {
            settings,
            ..Self::default()
        }
    }

    /// The settings.
    pub fn settings(&self) -> &WorldSettings {
        &self.settings
    }

    /// Mutable settings; changes apply from the next step. Wakes every body.
    pub fn settings_mut(&mut self) -> &mut WorldSettings {
        self.disturb_all();
        &mut self.settings
    }

    /// Every body awake and its settling clock back to zero, after an edit that may set resting
    /// bodies moving (gravity, a removed support): they start undamped. A moving obstacle needs
    /// none: the bodies it touches do not settle while it moves, and the step wakes those it
    /// reaches.
    fn disturb_all(&mut self) {
        self.bodies.iter_mut().for_each(|b| {
            b.slow_for = 0.0;
            b.wake();
        });
    }

    fn fresh_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    fn index(&self, h: BodyHandle) -> Result<usize, WorldError> {
        self.body_ids
            .position(h.0)
            .ok_or(WorldError::UnknownBody(h))
    }

    /// The body behind a handle, for an edit: woken if it sleeps.
    fn body_mut(&mut self, h: BodyHandle) -> Result<&mut SoftBody, WorldError> {
        let body = self.body_mut_asleep(h)?;
        body.wake();
        Ok(body)
    }

    /// The body behind a handle, left asleep (for edits that may change nothing).
    fn body_mut_asleep(&mut self, h: BodyHandle) -> Result<&mut SoftBody, WorldError> {
        let i = self.index(h)?;
        Ok(&mut self.bodies[i])
    }

    /// The body behind a handle.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn body(&self, h: BodyHandle) -> Result<&SoftBody, WorldError> {
        let i = self.index(h)?;
        Ok(&self.bodies[i])
    }

    /// Adds a body at rest, its rest shape translated by `position` (m).
    ///
    /// # Errors
    /// [`WorldError::Material`] for a non-physical material, [`WorldError::InvalidValue`] for a
    /// non-finite position.
    pub fn add_body(
        &mut self,
        mesh: Arc<TetMesh>,
        material: SoftMaterial,
        position: Vec3,
    ) -> Result<BodyHandle, WorldError> {
        self.add_body_with_pose(mesh, material, position, UnitQuaternion::identity())
    }

    /// Adds a body at rest, its rest shape rotated then translated.
    ///
    /// # Errors
    /// As [`SoftWorld::add_body`].
    pub fn add_body_with_pose(
        &mut self,
        mesh: Arc<TetMesh>,
        material: SoftMaterial,
        position: Vec3,
        rotation: UnitQuaternion<f64>,
    ) -> Result<BodyHandle, WorldError> {
        material.validate()?;
        check_finite("position", &position)?;
        let positions = mesh
            .rest_positions()
            .iter()
            .map(|p| rotation * p + position)
            .collect();
        let id = self.fresh_id();
        self.bodies.push(SoftBody::new(mesh, material, positions));
        self.body_ids.push(id);
        Ok(BodyHandle(id))
    }

    /// Removes a body; returns whether it existed.
    pub fn remove_body(&mut self, h: BodyHandle) -> bool {
        match self.body_ids.remove(h.0) {
            Some(i) => {
                self.bodies.remove(i);
                self.state.forget_contact_forces();
                self.disturb_all();
                true
            }
            None => false,
        }
    }

    /// Handles of all bodies, in stepping order.
    pub fn bodies(&self) -> impl Iterator<Item = BodyHandle> + '_ {
        self.body_ids.ids().iter().map(|&id| BodyHandle(id))
    }

    /// Adds an obstacle.
    ///
    /// # Errors
    /// [`WorldError::Obstacle`] for a pose or velocity that is not finite or out of range
    /// ([`Obstacle::validate`]).
    pub fn add_obstacle(&mut self, obstacle: Obstacle) -> Result<ObstacleHandle, WorldError> {
        obstacle.validate()?;
        let id = self.fresh_id();
        self.obstacles.push(obstacle);
        self.obstacle_ids.push(id);
        Ok(ObstacleHandle(id))
    }

    /// Removes an obstacle; returns whether it existed.
    pub fn remove_obstacle(&mut self, h: ObstacleHandle) -> bool {
        match self.obstacle_ids.remove(h.0) {
            Some(i) => {
                self.obstacles.remove(i);
                // The contact memory and the wake pass's record are keyed by obstacle index.
                self.state.forget_contact_forces();
                self.state.sleep.forget_obstacles();
                self.disturb_all();
                true
            }
            None => false,
        }
    }

    /// Mutable access to an obstacle (to move it: [`Obstacle::move_to`]).
    ///
    /// # Errors
    /// [`WorldError::UnknownObstacle`].
    pub fn obstacle_mut(&mut self, h: ObstacleHandle) -> Result<&mut Obstacle, WorldError> {
        let i = self
            .obstacle_ids
            .position(h.0)
            .ok_or(WorldError::UnknownObstacle(h))?;
        Ok(&mut self.obstacles[i])
    }

    /// The obstacle behind a handle.
    ///
    /// # Errors
    /// [`WorldError::UnknownObstacle`].
    pub fn obstacle(&self, h: ObstacleHandle) -> Result<&Obstacle, WorldError> {
        let i = self
            .obstacle_ids
            .position(h.0)
            .ok_or(WorldError::UnknownObstacle(h))?;
        Ok(&self.obstacles[i])
    }

    /// All obstacles, in order.
    pub fn obstacles(&self) -> &[Obstacle] {
        &self.obstacles
    }

    /// Handles of all obstacles, in the order of [`SoftWorld::obstacles`].
    pub fn obstacle_handles(&self) -> impl Iterator<Item = ObstacleHandle> + '_ {
        self.obstacle_ids.ids().iter().map(|&id| ObstacleHandle(id))
    }

    /// Current vertex positions (m).
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn positions(&self, h: BodyHandle) -> Result<&[Vec3], WorldError> {
        Ok(&self.body(h)?.x)
    }

    /// Mutable vertex positions (m): a teleport. Non-finite values freeze the body on its next
    /// step.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn positions_mut(&mut self, h: BodyHandle) -> Result<&mut [Vec3], WorldError> {
        Ok(&mut self.body_mut(h)?.x)
    }

    /// Current vertex velocities (m/s).
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn velocities(&self, h: BodyHandle) -> Result<&[Vec3], WorldError> {
        Ok(&self.body(h)?.v)
    }

    /// Mutable vertex velocities (m/s).
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn velocities_mut(&mut self, h: BodyHandle) -> Result<&mut [Vec3], WorldError> {
        Ok(&mut self.body_mut(h)?.v)
    }

    /// The body's mesh.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn mesh(&self, h: BodyHandle) -> Result<&Arc<TetMesh>, WorldError> {
        Ok(&self.body(h)?.mesh)
    }

    /// The body's material.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn material(&self, h: BodyHandle) -> Result<&SoftMaterial, WorldError> {
        Ok(&self.body(h)?.material)
    }

    /// Changes the material; that body alone is refactored on its next step.
    ///
    /// # Errors
    /// [`WorldError::Material`] or [`WorldError::UnknownBody`].
    pub fn set_material(
        &mut self,
        h: BodyHandle,
        material: SoftMaterial,
    ) -> Result<(), WorldError> {
        material.validate()?;
        let b = self.body_mut(h)?;
        if b.material != material {
            b.material = material;
            b.slow_for = 0.0;
            b.rebuild = b.rebuild.max_with(Rebuild::Numeric);
        }
        Ok(())
    }

    /// Pins `vertex` at `target` (m): it stays exactly there (moving the target moves it).
    ///
    /// # Errors
    /// Unknown body, vertex out of range, non-finite target.
    pub fn pin(&mut self, h: BodyHandle, vertex: usize, target: Vec3) -> Result<(), WorldError> {
        check_finite("pin target", &target)?;
        let b = self.body_mut(h)?;
        check_vertex(vertex, b.x.len())?;
        if !b.pinned[vertex] {
            b.pinned[vertex] = true;
            b.rebuild = Rebuild::Full;
        }
        b.targets[vertex] = target;
        b.x[vertex] = target;
        Ok(())
    }

    /// Moves the target of a pinned vertex (no refactorization).
    ///
    /// # Errors
    /// Unknown body, vertex out of range, non-finite target.
    pub fn set_pin_target(
        &mut self,
        h: BodyHandle,
        vertex: usize,
        target: Vec3,
    ) -> Result<(), WorldError> {
        check_finite("pin target", &target)?;
        let b = self.body_mut_asleep(h)?;
        check_vertex(vertex, b.x.len())?;
        if b.targets[vertex] != target {
            b.targets[vertex] = target;
            b.wake();
        }
        Ok(())
    }

    /// Frees a pinned vertex.
    ///
    /// # Errors
    /// Unknown body, vertex out of range.
    pub fn unpin(&mut self, h: BodyHandle, vertex: usize) -> Result<(), WorldError> {
        let b = self.body_mut(h)?;
        check_vertex(vertex, b.x.len())?;
        if b.pinned[vertex] {
            b.pinned[vertex] = false;
            b.rebuild = Rebuild::Full;
        }
        Ok(())
    }

    /// Ties `vertex` to `target` (m) with a zero-rest-length spring of `stiffness` (N/m); a
    /// stiffness of 0 removes the attachment.
    ///
    /// # Errors
    /// Unknown body, vertex out of range, negative or non-finite stiffness, non-finite target.
    pub fn attach(
        &mut self,
        h: BodyHandle,
        vertex: usize,
        stiffness: f64,
        target: Vec3,
    ) -> Result<(), WorldError> {
        check_finite("attachment target", &target)?;
        if !(stiffness.is_finite() && stiffness >= 0.0) {
            return Err(WorldError::InvalidValue {
                what: "attachment stiffness",
                positive: false,
            });
        }
        let b = self.body_mut(h)?;
        check_vertex(vertex, b.x.len())?;
        if b.attach_k[vertex] != stiffness {
            b.attach_k[vertex] = stiffness;
            b.rebuild = b.rebuild.max_with(Rebuild::Numeric);
        }
        b.targets[vertex] = target;
        Ok(())
    }

    /// Moves an attachment's target (no refactorization).
    ///
    /// # Errors
    /// Unknown body, vertex out of range, non-finite target.
    pub fn set_attachment_target(
        &mut self,
        h: BodyHandle,
        vertex: usize,
        target: Vec3,
    ) -> Result<(), WorldError> {
        self.set_pin_target(h, vertex, target)
    }

    /// Replaces the body's collision proxies (default: its surface vertices).
    ///
    /// # Errors
    /// Unknown body, or a proxy vertex out of range, or non-finite weights.
    pub fn set_proxies(
        &mut self,
        h: BodyHandle,
        proxies: Vec<EmbeddedPoint>,
    ) -> Result<(), WorldError> {
        let b = self.body_mut(h)?;
        for p in &proxies {
            for k in 0..4 {
                check_vertex(p.vertices[k] as usize, b.x.len())?;
                if !p.weights[k].is_finite() {
                    return Err(WorldError::InvalidValue {
                        what: "proxy weight",
                        positive: false,
                    });
                }
            }
        }
        b.colliders = body::collision_points(b.x.len(), &proxies);
        b.proxies = proxies;
        Ok(())
    }

    /// Replaces what of the body collides with obstacles: the `proxies` (which also take part
    /// in soft-soft contact) and exactly the listed `vertices`, instead of every vertex that is
    /// not a proxy. For a cage that reaches beyond the surface it carries (a skinned region's
    /// flesh), where the cage's outer vertices would hold the surface off an obstacle.
    ///
    /// # Errors
    /// Unknown body, or a proxy or vertex out of range, or non-finite weights.
    pub fn set_colliders(
        &mut self,
        h: BodyHandle,
        proxies: Vec<EmbeddedPoint>,
        vertices: &[u32],
    ) -> Result<(), WorldError> {
        let n = self.body(h)?.x.len();
        for &v in vertices {
            check_vertex(v as usize, n)?;
        }
        self.set_proxies(h, proxies)?;
        let b = self.body_mut(h)?;
        b.colliders = body::listed_collision_points(&b.proxies, vertices);
        Ok(())
    }

    /// Puts the body in a collision group: bodies of one group never collide with each other
    /// (the soft regions of one character, which overlap where they meet); `None` (the
    /// default) collides with every body. Obstacles are not affected.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn set_collision_group(
        &mut self,
        h: BodyHandle,
        group: Option<u64>,
    ) -> Result<(), WorldError> {
        self.body_mut(h)?.collision_group = group;
        Ok(())
    }

    /// The body's collision proxies.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn proxies(&self, h: BodyHandle) -> Result<&[EmbeddedPoint], WorldError> {
        Ok(&self.body(h)?.proxies)
    }

    /// Appends to `out` the obstacles the body touches after the last step (a contact within
    /// 1e-5 m of its plane or pushing), each once, sorted.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn touching_obstacles(
        &self,
        h: BodyHandle,
        out: &mut Vec<ObstacleHandle>,
    ) -> Result<(), WorldError> {
        let b = self.body(h)?;
        out.extend(
            b.ws.touching
                .iter()
                .filter_map(|&i| self.obstacle_ids.ids().get(i as usize))
                .map(|&id| ObstacleHandle(id)),
        );
        Ok(())
    }

    /// The contacts of the last step's velocity LCP (every contact touching at its end), with
    /// their regions and impulses: for debug drawing.
    pub fn contact_points(&self) -> &[ContactPoint] {
        &self.state.points
    }

    /// The last step's velocity-level contact problem (solved), for inspection and benchmarks.
    pub fn contact_lcp(&self) -> &ContactLcp {
        self.state.lcp()
    }

    /// Why the body is frozen, if it is.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn frozen(&self, h: BodyHandle) -> Result<Option<&FreezeReason>, WorldError> {
        Ok(self.body(h)?.frozen.as_ref())
    }

    /// Statistics of the body's last step (its last substep): iterations, contacts,
    /// penetration, settling and, when [`WorldSettings::energy_audit`] is on, its
    /// [`EnergyAudit`].
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn last_step_stats(&self, h: BodyHandle) -> Result<&BodyStepStats, WorldError> {
        Ok(&self.body(h)?.last_step.0)
    }

    /// Whether the body sleeps ([`Sleeping`]): the step skips it until something wakes it.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn is_asleep(&self, h: BodyHandle) -> Result<bool, WorldError> {
        Ok(self.body(h)?.asleep)
    }

    /// Wakes a sleeping body (its island wakes with it on the next step if they touch), and
    /// restarts its rest clock.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn wake(&mut self, h: BodyHandle) -> Result<(), WorldError> {
        self.body_mut(h)?;
        Ok(())
    }

    /// Lets a frozen body move again (from its restored last good state).
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn unfreeze(&mut self, h: BodyHandle) -> Result<(), WorldError> {
        self.body_mut(h)?.frozen = None;
        Ok(())
    }

    /// Kinetic energy (J).
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn kinetic_energy(&self, h: BodyHandle) -> Result<f64, WorldError> {
        let b = self.body(h)?;
        Ok(0.5
            * b.masses()
                .iter()
                .zip(&b.v)
                .map(|(m, v)| m * v.norm_squared())
                .sum::<f64>())
    }

    /// Gravitational potential energy (J) relative to the origin, for the world's gravity.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn potential_energy(&self, h: BodyHandle) -> Result<f64, WorldError> {
        let b = self.body(h)?;
        let g = self.settings.gravity;
        Ok(-b
            .masses()
            .iter()
            .zip(&b.x)
            .map(|(m, x)| m * g.dot(x))
            .sum::<f64>())
    }

    /// Elastic energy (J) of the PD model at the current positions (0 before the first step).
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn elastic_energy(&self, h: BodyHandle) -> Result<f64, WorldError> {
        let b = self.body(h)?;
        Ok(b.elastic_energy(&b.x))
    }

    /// Advances the world by `dt` seconds (in [`WorldSettings::substeps`] equal substeps).
    ///
    /// # Errors
    /// [`WorldError::InvalidValue`] for a non-finite or non-positive `dt`,
    /// [`WorldError::InvalidSetting`] for settings that fail [`WorldSettings::validate`]; the
    /// world is not advanced. A failing body is not an error: it is frozen and listed in
    /// [`StepReport::frozen`].
    pub fn step(&mut self, dt: f64) -> Result<StepReport, WorldError> {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(WorldError::InvalidValue {
                what: "time step",
                positive: true,
            });
        }
        self.settings.validate()?;
        let start = Instant::now();
        let substeps = self.settings.substeps.max(1);
        let h = dt / substeps as f64;
        let mut report = StepReport::default();
        for o in &mut self.obstacles {
            o.coupled.response = Default::default();
        }
        // Run inside the rayon pool: the calling thread then sleeps instead of competing with
        // spinning workers for the cores (measured 1.8x slower solves on 2 cores otherwise).
        rayon::scope(|_| {
            for substep in 0..substeps {
                let settings = self.settings;
                let summary = step::substep(
                    &mut self.bodies,
                    &mut self.obstacles,
                    &settings,
                    h,
                    &mut self.state,
                );
                let (mut inverted, mut settling) = (0, 0);
                for (b, &id) in self.bodies.iter_mut().zip(self.body_ids.ids()) {
                    report.add_body(&b.last_step.0, substep == 0);
                    inverted += b.last_step.0.inverted_tets;
                    settling += usize::from(b.last_step.0.settling);
                    if let Some(reason) = b.last_step.1.take() {
                        report.frozen.push((BodyHandle(id), reason));
                    }
                }
                report.inverted_tets = report.inverted_tets.max(inverted);
                report.settling_bodies = report.settling_bodies.max(settling);
                report.soft_contacts = report.soft_contacts.max(summary.soft_contacts);
                report.islands = report.islands.max(summary.islands);
                report.largest_island = report.largest_island.max(summary.largest_island);
                report.max_penetration = report.max_penetration.max(summary.soft_penetration);
                report.timings.lcp += summary.lcp_time;
                let l = summary.lcp;
                report.lcp.regions = report.lcp.regions.max(l.regions);
                report.lcp.largest_region = report.lcp.largest_region.max(l.largest_region);
                report.lcp.cg_iterations += l.cg_iterations;
                report.lcp.gs_sweeps += l.gs_sweeps;
                report.lcp.residual = report.lcp.residual.max(l.residual);
                report.lcp.unconverged_regions += l.unconverged_regions;
            }
        });
        for (b, &id) in self.bodies.iter_mut().zip(self.body_ids.ids()) {
            let (slept, woke) = std::mem::take(&mut b.sleep_events);
            if woke {
                report.woke.push(BodyHandle(id));
            }
            if slept {
                report.slept.push(BodyHandle(id));
            }
            report.sleeping_bodies += usize::from(b.asleep);
        }
        report.wall = start.elapsed();
        Ok(report)
    }
}

impl Rebuild {
    fn max_with(self, other: Self) -> Self {
        match (self, other) {
            (Rebuild::Full, _) | (_, Rebuild::Full) => Rebuild::Full,
            (Rebuild::Numeric, _) | (_, Rebuild::Numeric) => Rebuild::Numeric,
            _ => Rebuild::None,
        }
    }
}

fn check_finite(what: &'static str, v: &Vec3) -> Result<(), WorldError> {
    if v.iter().all(|c| c.is_finite()) {
        Ok(())
    } else {
        Err(WorldError::InvalidValue {
            what,
            positive: false,
        })
    }
}

fn check_vertex(vertex: usize, count: usize) -> Result<(), WorldError> {
    if vertex < count {
        Ok(())
    } else {
        Err(WorldError::VertexOutOfRange { vertex, count })
    }
}
