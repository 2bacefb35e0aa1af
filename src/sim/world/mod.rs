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
//!
//! # Module map
//!
//! In reading order: the leaf types first (they import no stage), then the stages (each owns
//! its scratch), then the step that calls them in order, then this facade. Imports point
//! one way, down this table.
//!
//! | File | What it holds |
//! |------|---------------|
//! | `settings.rs` | [`WorldSettings`], its sub-settings [`Settling`] and [`Sleeping`], the defaults and limits, [`WorldSettings::validate`] |
//! | `error.rs` | [`WorldError`] and the input checks that return it |
//! | `handles.rs` | [`BodyHandle`], [`ObstacleHandle`] and the handle to index tables |
//! | `report.rs` | [`StepReport`], [`BodyStepStats`], [`PhaseTimings`], [`FreezeReason`], [`ContactPoint`] |
//! | `audit.rs` | [`EnergyAudit`] and the kinetic and gravitational energies it sums |
//! | `solver.rs` | [`Solver`] and the Newton solver's per-body state |
//! | `anderson.rs` | Anderson acceleration: the per-body history, the per-island combination |
//! | `workspace.rs` | a body's scratch space, reused every step by every stage |
//! | `body.rs` | [`SoftBody`]: state, pending rebuild, collision points, what stages ask of a body |
//! | `coupling.rs` | coupled rigid bodies in a substep: what an island needs of one, and their end poses |
//! | `island/` | an island: the contacts of bodies that touch and the one QP of their constrained global step (its own map in `island/mod.rs`) |
//! | `settling.rs` | the extra damping of slow, supported bodies' rigid motion |
//! | `sleeping.rs` | the wake pass before a substep and falling asleep after it |
//! | `step/` | one substep: its numbered phases in `step/mod.rs`, one file per phase |
//! | `mod.rs` | the [`SoftWorld`] facade: bodies, obstacles, edits, queries, [`SoftWorld::step`] |
//! | `desc.rs` | [`BodyDesc`] and [`SoftWorld::add_body_from`] |
//! | `drawn.rs` | [`SoftWorld::set_drawn_surface`]: a body that collides with obstacles by the surface it is drawn with |
//! | `interact.rs` | picking, grabbing and the debug views of a running world |
//! | `impulse.rs` | [`SoftWorld::apply_impulse`]: impulses on a body between steps (hits, a cloth's reaction) |
//! | `surface_obstacle.rs` | a body's surface now as a triangle-mesh obstacle, for cloth stepped after the world |
//! | `snapshot.rs` | [`WorldSnapshot`]: [`SoftWorld::snapshot`] and [`SoftWorld::restore`], for rollback and replays |

mod anderson;
mod audit;
mod body;
mod coupling;
mod desc;
mod drawn;
mod error;
mod handles;
mod impulse;
mod interact;
mod island;
mod report;
mod saved;
mod settings;
mod settling;
mod sleeping;
mod snapshot;
mod solver;
mod step;
mod surface_obstacle;
mod workspace;

use std::sync::Arc;
use std::time::Instant;

use nalgebra::UnitQuaternion;

pub use anderson::MAX_ANDERSON_WINDOW;
pub use audit::EnergyAudit;
pub use body::SoftBody;
pub use desc::BodyDesc;
pub use drawn::MAX_DRAWN_EXTRAPOLATION;
pub use error::WorldError;
pub use handles::{BodyHandle, ObstacleHandle};
pub use report::{BodyStepStats, ContactPoint, FreezeReason, PhaseTimings, StepReport};
pub use saved::{
    SAVED_WORLD_VERSION, SavedBody, SavedContacts, SavedObstacle, SavedWorld, SavedWorldError,
};
pub use settings::{
    DEFAULT_CHEBYSHEV_RHO, DEFAULT_LOCALIZED_MIN_VERTICES, DEFAULT_MPRGP_TOLERANCE,
    DEFAULT_PD_TOLERANCE, MAX_NEWTON_ITERATIONS, MAX_PD_ITERATIONS, MAX_SUBSTEPS,
    SUGGESTED_ANDERSON_WINDOW, Settling, Sleeping, WorldSettings,
};
pub use snapshot::{SnapshotError, WorldSnapshot};
pub use solver::{DEFAULT_NEWTON_ITERATIONS, Solver};

use super::contact::{ContactLcp, ObstacleCollider};
use super::embed::EmbeddedPoint;
use super::material::MaterialParams;
use super::math::Vec3;
use super::mesh::TetMesh;
use body::Rebuild;
use error::{check_embedded, check_finite, check_vertex};

/// A world of soft bodies and obstacles.
///
/// A clone is a world in the same state whose bodies build their PD systems (matrix and
/// factor) again before their first step, so its steps agree with the original's to the
/// solver's tolerance; for bit-identical replays and rollback use [`SoftWorld::snapshot`] and
/// [`SoftWorld::restore`], which keep the factors.
///
/// # Example
/// ```
/// use std::sync::Arc;
/// use bevy_deformable::sim::{ObstacleCollider, MaterialParams, SoftWorld, TetMesh, Vec3, WorldSettings};
/// let mut world = SoftWorld::new(WorldSettings::default());
/// let cube = Arc::new(TetMesh::cuboid(Vec3::repeat(0.25), 3));
/// let body = world.add_body(cube, MaterialParams::RUBBER, Vec3::new(0.0, 1.0, 0.0)).unwrap();
/// world.add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap()).unwrap();
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
    obstacles: Vec<ObstacleCollider>,
    obstacle_ids: handles::HandleTable,
    next_id: u32,
    state: step::StepState,
}

clone_by_field!(SoftWorld {
    settings,
    bodies,
    body_ids,
    obstacles,
    obstacle_ids,
    next_id,
    state
});

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
        material: MaterialParams,
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
        material: MaterialParams,
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
    /// ([`ObstacleCollider::validate`]).
    pub fn add_obstacle(
        &mut self,
        obstacle: ObstacleCollider,
    ) -> Result<ObstacleHandle, WorldError> {
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

    /// Mutable access to an obstacle (to move it: [`ObstacleCollider::move_to`], which refuses
    /// a non-finite pose). An obstacle replaced through it by one with a non-finite pose (built
    /// with [`ObstacleCollider::with_position`]`(NaN)`) makes the next [`SoftWorld::step`] fail
    /// with [`WorldError::InvalidObstacle`].
    ///
    /// # Errors
    /// [`WorldError::UnknownObstacle`].
    pub fn obstacle_mut(&mut self, h: ObstacleHandle) -> Result<&mut ObstacleCollider, WorldError> {
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
    pub fn obstacle(&self, h: ObstacleHandle) -> Result<&ObstacleCollider, WorldError> {
        let i = self
            .obstacle_ids
            .position(h.0)
            .ok_or(WorldError::UnknownObstacle(h))?;
        Ok(&self.obstacles[i])
    }

    /// All obstacles, in order.
    pub fn obstacles(&self) -> &[ObstacleCollider] {
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
    pub fn material(&self, h: BodyHandle) -> Result<&MaterialParams, WorldError> {
        Ok(&self.body(h)?.material)
    }

    /// Changes the material; that body alone is refactored on its next step.
    ///
    /// # Errors
    /// [`WorldError::Material`] or [`WorldError::UnknownBody`].
    pub fn set_material(
        &mut self,
        h: BodyHandle,
        material: MaterialParams,
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
        check_embedded("proxy weight", &proxies, b.x.len())?;
        b.colliders = body::collision_points(b.x.len(), &proxies);
        b.collider_slack.clear();
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
    /// [`WorldError::InvalidSetting`] for settings that fail [`WorldSettings::validate`],
    /// [`WorldError::InvalidObstacle`] for an obstacle with a non-finite pose or velocity; the
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
        // An obstacle replaced or edited through `obstacle_mut` is checked here: a non-finite
        // pose would let every body fall through it.
        for (o, &id) in self.obstacles.iter().zip(self.obstacle_ids.ids()) {
            o.validate().map_err(|error| WorldError::InvalidObstacle {
                obstacle: ObstacleHandle(id),
                error,
            })?;
        }
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
