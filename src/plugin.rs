//! [`DeformablePlugin`]: settings, the fixed-step pipeline and its system sets.
//!
//! The step runs in `FixedUpdate` as three chained sets ([`DeformableSystems`]):
//!
//! 1. **Sync** — create bodies for new [`DeformableBody`] entities (asset-backed ones once their
//!    mesh has loaded), remove despawned ones, push material edits (that body alone is
//!    refactored), obstacle poses and velocities, attachment targets and the settings into the
//!    simulation world.
//! 2. **Step** — advance the [`SoftWorld`] by the fixed time step; record diagnostics; write
//!    [`BodyFrozen`], [`BodySlept`], [`BodyWoke`], [`ContactStarted`] and [`ContactEnded`]
//!    messages.
//! 3. **Writeback** — evaluate each body's render points (its surface vertices, or the vertices
//!    of the game's own embedded mesh) and keep them beside the previous step's.
//!
//! Every frame, in `PostUpdate` before transform propagation, [`DeformableSystems::Render`]
//! blends the last two fixed steps by the fixed clock's overstep fraction (so motion is smooth
//! when the frame rate and the 64 Hz step disagree; [`DeformableConfig::interpolate`]), moves the
//! body's `Transform` to the points' mean, turned by the body's best-fit rotation since it was
//! created (shape matching, so children of the body turn with it), and writes the render mesh
//! in that frame.
//!
//! The simulation world is the one authoritative copy of the vertices; ECS data flows in during
//! Sync and out during Writeback, never both ways.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use bevy::app::{App, FixedUpdate, Plugin, PostUpdate};
use bevy::asset::{AssetApp, Assets, RenderAssetUsages};
use bevy::diagnostic::{Diagnostic, Diagnostics, RegisterDiagnostic};
use bevy::ecs::change_detection::{DetectChanges, DetectChangesMut};
use bevy::ecs::entity::Entity;
use bevy::ecs::lifecycle::RemovedComponents;
use bevy::ecs::schedule::{IntoScheduleConfigs, SystemSet};
use bevy::log::warn;
use bevy::math::{Affine3A, Quat, Vec3};
use bevy::mesh::{Mesh, Mesh3d};
use bevy::prelude::{
    Commands, GlobalTransform, MessageReader, MessageWriter, Query, Ref, Reflect, ReflectResource,
    Res, ResMut, Resource, Time, Transform,
};
use bevy::time::Fixed;
use bevy::transform::TransformSystems;
use bevy::transform::helper::TransformHelper;

use serde::{Deserialize, Serialize};

use crate::assets::{GmshLoader, TetGenLoader, TetMeshAsset};
use crate::components::{
    Attachment, CollisionProxy, DeformableBody, DeformableState, InitialVelocity, Obstacle, Pin,
    SoftMaterial, TetMeshSource,
};
use crate::convert::{quat_to_sim, to_bevy, to_sim};
use crate::diagnostics::{self, DeformableDiagnostics};
use crate::grab::{GrabTool, sync_grab};
use crate::history::{StepHistory, StepSample};
use crate::messages::{BodyFrozen, BodySlept, BodyWoke, ContactEnded, ContactStarted, ResetScene};
use crate::render;
use crate::sim::{self, BodyHandle, ObstacleHandle, SoftWorld, WorldSettings};
use crate::status::BodyError;

/// Run-time settings of the simulation; edits apply from the next fixed step. Serializable
/// (see [`crate::tuning::SceneTuning`]); the pause state is not saved.
#[derive(Resource, Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(Resource)]
#[serde(default)]
pub struct DeformableConfig {
    /// Gravity (m/s^2). Default: (0, -9.81, 0).
    #[serde(with = "crate::tuning::vec3_serde")]
    pub gravity: Vec3,
    /// Substeps per fixed step. Default: 1.
    pub substeps: u32,
    /// Which solver advances the bodies; see [`WorldSettings::solver`]. Default: Projective
    /// Dynamics.
    pub solver: SolverChoice,
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
    /// Solve contact QPs exactly in the contact subspace where the bodies' cached `A^-1`
    /// columns allow (see [`WorldSettings::contact_subspace`]), else by MPRGP. Default: true.
    pub contact_subspace: bool,
    /// Relative tolerance of the MPRGP contact solves (relative to the force that moves the
    /// bodies from their inertial prediction). Default: 1e-3.
    pub mprgp_tolerance: f32,
    /// Iteration cap of one MPRGP solve. Default: 500.
    pub mprgp_max_iterations: u32,
    /// Distance (m) within which a proxy near an obstacle already gets a contact row.
    /// Default: 0.01.
    pub contact_margin: f32,
    /// A vertex faster than this (m/s) freezes its body. Default: 100.
    pub max_speed: f32,
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
    /// Rigid speed (m/s) under which a body counts as slow for settling. Default: 0.03.
    pub settling_speed: f32,
    /// How long (s) a body must stay slow before settling damps its rigid motion.
    /// Default: 0.25.
    pub settling_delay: f32,
    /// Damping rate (1/s) of a settling body's rigid motion (0: off), so that stacks and piles
    /// come to rest; deformation is left to the material's damping. Default: 10.
    pub settling_damping: f32,
    /// Fastest vertex speed (m/s) at which a body counts as at rest for sleeping (0: no
    /// sleeping). Default: 0.03.
    pub sleep_speed: f32,
    /// How long (s) a body and everything it touches must stay at rest before they sleep
    /// (skipped by the step until something wakes them). Default: 0.5.
    pub sleep_delay: f32,
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

impl Default for DeformableConfig {
    fn default() -> Self {
        let w = WorldSettings::default();
        Self {
            gravity: to_bevy(&w.gravity),
            substeps: w.substeps as u32,
            solver: SolverChoice::ProjectiveDynamics,
            fem_model: ElasticModel::FixedCorotated,
            newton_iterations: w.newton_iterations as u32,
            pd_iterations: w.pd_iterations as u32,
            pd_tolerance: w.pd_tolerance as f32,
            chebyshev_rho: w.chebyshev_rho as f32,
            anderson_window: w.anderson_window as u32,
            contact_subspace: w.contact_subspace,
            mprgp_tolerance: w.mprgp.tolerance as f32,
            mprgp_max_iterations: w.mprgp.max_iterations as u32,
            contact_margin: w.contact_margin as f32,
            max_speed: w.max_speed as f32,
            max_depenetration_speed: w.max_depenetration_speed as f32,
            soft_contacts: w.soft_contacts,
            self_collision: w.self_collision,
            edge_contacts: w.edge_contacts,
            friction_model: FrictionModel::Cone,
            restitution_threshold: w.restitution_threshold as f32,
            lcp_max_sweeps: w.lcp.max_sweeps as u32,
            separate_regions: w.separate_regions,
            settling_speed: w.settling.speed as f32,
            settling_delay: w.settling.delay as f32,
            settling_damping: w.settling.damping as f32,
            sleep_speed: w.sleeping.speed as f32,
            sleep_delay: w.sleeping.delay as f32,
            paused: false,
            single_step: false,
            interpolate: true,
        }
    }
}

impl DeformableConfig {
    /// Writes the config into the world's settings, clamped into the ranges
    /// [`WorldSettings::validate`] accepts (a value out of range from a slider or a tuning
    /// file is clamped; a non-finite one keeps the default), so the world never refuses to
    /// step.
    fn apply(&self, settings: &mut WorldSettings) {
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
        settings.gravity = if self.gravity.is_finite() {
            to_sim(self.gravity)
        } else {
            d.gravity
        };
        settings.substeps = (self.substeps as usize).clamp(1, sim::MAX_SUBSTEPS);
        settings.solver = match self.solver {
            SolverChoice::ProjectiveDynamics => sim::Solver::ProjectiveDynamics,
            SolverChoice::NewtonMprgp => sim::Solver::NewtonMprgp,
        };
        settings.fem_model = match self.fem_model {
            ElasticModel::FixedCorotated => sim::FemModel::FixedCorotated,
            ElasticModel::StableNeoHookean => sim::FemModel::StableNeoHookean,
        };
        settings.newton_iterations =
            (self.newton_iterations as usize).clamp(1, sim::MAX_NEWTON_ITERATIONS);
        settings.pd_iterations = (self.pd_iterations as usize).clamp(1, sim::MAX_PD_ITERATIONS);
        settings.pd_tolerance = non_negative(self.pd_tolerance, d.pd_tolerance);
        settings.chebyshev_rho = if (0.0..1.0).contains(&self.chebyshev_rho) {
            f64::from(self.chebyshev_rho)
        } else {
            d.chebyshev_rho
        };
        settings.anderson_window = (self.anderson_window as usize).min(sim::MAX_ANDERSON_WINDOW);
        settings.contact_subspace = self.contact_subspace;
        settings.mprgp.tolerance = or_default(self.mprgp_tolerance, d.mprgp.tolerance);
        settings.mprgp.max_iterations = (self.mprgp_max_iterations as usize).max(1);
        settings.contact_margin = non_negative(self.contact_margin, d.contact_margin);
        settings.max_speed = or_default(self.max_speed, d.max_speed);
        settings.max_depenetration_speed =
            non_negative(self.max_depenetration_speed, d.max_depenetration_speed);
        settings.soft_contacts = self.soft_contacts;
        settings.self_collision = self.self_collision;
        settings.edge_contacts = self.edge_contacts;
        settings.lcp.friction = match self.friction_model {
            FrictionModel::Cone => sim::contact::FrictionModel::Cone,
            FrictionModel::Pyramid => sim::contact::FrictionModel::Pyramid,
        };
        settings.restitution_threshold =
            non_negative(self.restitution_threshold, d.restitution_threshold);
        settings.lcp.max_sweeps = self.lcp_max_sweeps as usize;
        settings.separate_regions = self.separate_regions;
        settings.settling = sim::Settling {
            speed: non_negative(self.settling_speed, d.settling.speed),
            delay: non_negative(self.settling_delay, d.settling.delay),
            damping: non_negative(self.settling_damping, d.settling.damping),
        };
        settings.sleeping = sim::Sleeping {
            speed: non_negative(self.sleep_speed, d.sleeping.speed),
            delay: non_negative(self.sleep_delay, d.sleeping.delay),
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

/// How Coulomb friction bounds the tangential impulse of a contact.
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FrictionModel {
    /// The isotropic cone `|f_t| <= mu f_n`. Default.
    #[default]
    Cone,
    /// The 4-sided pyramid `|f_t1|, |f_t2| <= mu f_n` (cheaper to solve, anisotropic).
    Pyramid,
}

/// The system sets of the fixed step, in order (see the module docs).
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeformableSystems {
    /// ECS -> simulation.
    Sync,
    /// The simulation step.
    Step,
    /// Simulation -> ECS: the render points of this step.
    Writeback,
    /// In `PostUpdate`: transforms and render meshes, interpolated between the last two steps.
    Render,
}

/// The simulation world and its mapping to entities.
#[derive(Resource, Default)]
pub struct DeformableWorld {
    world: SoftWorld,
    body_of: HashMap<Entity, BodyHandle>,
    obstacle_of: HashMap<Entity, ObstacleHandle>,
    entity_of_obstacle: HashMap<ObstacleHandle, Entity>,
    contacts: HashMap<Entity, Vec<Entity>>,
    /// Obstacles whose shape was rejected (reported once, retried when the component changes).
    rejected_obstacles: HashSet<Entity>,
    scratch: Vec<ObstacleHandle>,
    /// Obstacle entities a body touches this step (reused: no per-step allocation).
    touching: Vec<Entity>,
    /// Whether the last fixed step advanced the world (false while paused).
    stepped: bool,
    /// Time of the last render-point recording (ms).
    record_ms: f64,
}

impl DeformableWorld {
    /// The simulation world (read-only: the plugin owns it).
    pub fn world(&self) -> &SoftWorld {
        &self.world
    }

    /// The simulation handle of a body entity.
    pub fn body(&self, entity: Entity) -> Option<BodyHandle> {
        self.body_of.get(&entity).copied()
    }

    /// The entity of a simulation body.
    pub fn entity_of(&self, h: BodyHandle) -> Option<Entity> {
        self.body_of
            .iter()
            .find_map(|(&e, &b)| (b == h).then_some(e))
    }

    /// The simulation world, for the plugin's own edits (grab, reset, pins).
    pub(crate) fn world_mut(&mut self) -> &mut SoftWorld {
        &mut self.world
    }

    /// Current vertex positions (m, world) of a body entity.
    pub fn positions(&self, entity: Entity) -> Option<&[sim::Vec3]> {
        self.world.positions(self.body(entity)?).ok()
    }
}

/// Soft bodies for Bevy. Add it after `DefaultPlugins` (or, headless, after `MinimalPlugins`,
/// `AssetPlugin`, `MeshPlugin` and `TransformPlugin`).
///
/// # Example
/// ```
/// use bevy::prelude::*;
/// use bevy_deformable::prelude::*;
/// let mut app = App::new();
/// app.add_plugins((
///     MinimalPlugins,
///     bevy::asset::AssetPlugin::default(),
///     bevy::mesh::MeshPlugin,
///     bevy::transform::TransformPlugin,
///     DeformablePlugin::default().with_iterations(8).with_gravity(Vec3::new(0.0, -9.81, 0.0)),
/// ));
/// app.update();
/// ```
///
/// # Panics
/// When built without `AssetPlugin` and `MeshPlugin` (both in `DefaultPlugins`): it registers an
/// asset type and writes render meshes.
#[derive(Debug, Clone, Default)]
pub struct DeformablePlugin {
    /// The initial settings.
    pub config: DeformableConfig,
}

impl DeformablePlugin {
    /// Builder: gravity (m/s^2).
    pub fn with_gravity(mut self, gravity: Vec3) -> Self {
        self.config.gravity = gravity;
        self
    }

    /// Builder: PD iterations per substep.
    pub fn with_iterations(mut self, iterations: u32) -> Self {
        self.config.pd_iterations = iterations;
        self
    }

    /// Builder: substeps per fixed step.
    pub fn with_substeps(mut self, substeps: u32) -> Self {
        self.config.substeps = substeps;
        self
    }

    /// Builder: contact margin (m).
    pub fn with_contact_margin(mut self, margin: f32) -> Self {
        self.config.contact_margin = margin;
        self
    }
}

impl Plugin for DeformablePlugin {
    fn build(&self, app: &mut App) {
        assert!(
            app.is_plugin_added::<bevy::asset::AssetPlugin>()
                && app.is_plugin_added::<bevy::mesh::MeshPlugin>(),
            "DeformablePlugin needs AssetPlugin and MeshPlugin (both in DefaultPlugins): add them first"
        );
        app.init_asset::<TetMeshAsset>()
            .register_asset_loader(TetGenLoader)
            .register_asset_loader(GmshLoader)
            .insert_resource(self.config.clone())
            .init_resource::<DeformableWorld>()
            .init_resource::<DeformableDiagnostics>()
            .init_resource::<StepHistory>()
            .init_resource::<GrabTool>()
            .register_type::<DeformableConfig>()
            .register_type::<DeformableDiagnostics>()
            .register_type::<SoftMaterial>()
            .register_type::<InitialVelocity>()
            .register_type::<DeformableBody>()
            .register_type::<CollisionProxy>()
            .register_type::<Obstacle>()
            .register_type::<Pin>()
            .register_type::<Attachment>()
            .add_message::<BodyFrozen>()
            .add_message::<BodySlept>()
            .add_message::<BodyWoke>()
            .add_message::<ContactStarted>()
            .add_message::<ContactEnded>()
            .add_message::<ResetScene>()
            .register_diagnostic(Diagnostic::new(diagnostics::STEP_TIME).with_suffix("ms"))
            .register_diagnostic(Diagnostic::new(diagnostics::MPRGP_ITERATIONS))
            .register_diagnostic(Diagnostic::new(diagnostics::CONSTRAINTS))
            .register_diagnostic(Diagnostic::new(diagnostics::KKT_RESIDUAL))
            .register_diagnostic(Diagnostic::new(diagnostics::CONTACT_REGIONS))
            .register_diagnostic(Diagnostic::new(diagnostics::LCP_ITERATIONS))
            .register_diagnostic(Diagnostic::new(diagnostics::LCP_RESIDUAL).with_suffix("m/s"))
            .configure_sets(
                FixedUpdate,
                (
                    DeformableSystems::Sync,
                    DeformableSystems::Step,
                    DeformableSystems::Writeback,
                )
                    .chain(),
            )
            .add_systems(
                FixedUpdate,
                (
                    (
                        apply_config,
                        remove_bodies,
                        reset_scene,
                        create_bodies,
                        sync_materials,
                        sync_pins,
                        sync_obstacles,
                        sync_attachments,
                        sync_grab,
                    )
                        .chain()
                        .in_set(DeformableSystems::Sync),
                    step_world.in_set(DeformableSystems::Step),
                    record_render_points.in_set(DeformableSystems::Writeback),
                ),
            )
            .configure_sets(
                PostUpdate,
                DeformableSystems::Render.before(TransformSystems::Propagate),
            )
            .add_systems(
                PostUpdate,
                draw_interpolated.in_set(DeformableSystems::Render),
            );
    }
}

fn apply_config(config: Res<DeformableConfig>, mut world: ResMut<DeformableWorld>) {
    if config.is_changed() {
        config.apply(world.world.settings_mut());
    }
}

fn remove_bodies(
    mut removed: RemovedComponents<DeformableBody>,
    mut world: ResMut<DeformableWorld>,
) {
    for entity in removed.read() {
        if let Some(h) = world.body_of.remove(&entity) {
            world.world.remove_body(h);
        }
        world.contacts.remove(&entity);
    }
}

/// Sync: on [`ResetScene`], every body back to its creation state, the grab released.
fn reset_scene(
    mut resets: MessageReader<ResetScene>,
    mut world: ResMut<DeformableWorld>,
    mut grab: ResMut<GrabTool>,
    mut history: ResMut<StepHistory>,
    mut bodies: Query<(Entity, &mut DeformableState, Option<&InitialVelocity>)>,
) {
    if resets.read().count() == 0 {
        return;
    }
    grab.release();
    history.clear();
    for (entity, mut state, initial_velocity) in &mut bodies {
        let Some(h) = state.handle else { continue };
        if let Err(e) = world.world.reset_body(h) {
            warn!("deformable body {entity}: not reset: {e}");
            continue;
        }
        if let (Some(v), Ok(velocities)) = (initial_velocity, world.world.velocities_mut(h)) {
            velocities.fill(to_sim(v.0));
        }
        state.frozen = None;
        // Drawn afresh at the reset pose, not blended from where it was.
        state.steps_recorded = 0;
        state.holding = false;
        state.drawn = None;
    }
}

/// Sync: a `Pin` edited at run time pins the vertices it gained (where they are now) and frees
/// the ones it lost; a removed `Pin` frees them all.
fn sync_pins(
    mut world: ResMut<DeformableWorld>,
    pins: Query<(Entity, Ref<Pin>, &DeformableState)>,
    mut removed: RemovedComponents<Pin>,
    states: Query<&DeformableState>,
) {
    let world = &mut *world;
    for entity in removed.read() {
        let Some(h) = states.get(entity).ok().and_then(|s| s.handle) else {
            continue;
        };
        let pinned: Vec<usize> = match world.world.pinned(h) {
            Ok(p) => (0..p.len()).filter(|&v| p[v]).collect(),
            Err(_) => continue,
        };
        for v in pinned {
            let _ = world.world.unpin(h, v);
        }
    }
    for (entity, pin, state) in &pins {
        let Some(h) = state.handle else { continue };
        if !pin.is_changed() {
            continue;
        }
        let Ok(pinned) = world.world.pinned(h) else {
            continue;
        };
        let mut wanted = vec![false; pinned.len()];
        for &v in &pin.vertices {
            match wanted.get_mut(v as usize) {
                Some(w) => *w = true,
                None => warn!("deformable body {entity}: pinned vertex {v} out of range"),
            }
        }
        let changes: Vec<(usize, bool)> = pinned
            .iter()
            .zip(&wanted)
            .enumerate()
            .filter(|(_, (is, want))| is != want)
            .map(|(v, (_, &want))| (v, want))
            .collect();
        for (v, want) in changes {
            let result = if want {
                let p = world.world.positions(h).map(|x| x[v]);
                p.and_then(|p| world.world.pin(h, v, p))
            } else {
                world.world.unpin(h, v)
            };
            if let Err(e) = result {
                warn!("deformable body {entity}: pin edit refused: {e}");
            }
        }
    }
}

/// Builds the body in the simulation; `Err` with a message when it cannot be created.
#[allow(clippy::too_many_arguments)]
fn create_body(
    world: &mut DeformableWorld,
    mesh: Arc<sim::TetMesh>,
    material: &SoftMaterial,
    proxy: &CollisionProxy,
    transform: &Transform,
    pin: Option<&Pin>,
    attachment: Option<(&Attachment, &GlobalTransform)>,
    state: &mut DeformableState,
) -> Result<(BodyHandle, Arc<sim::TetMesh>), BodyError> {
    let scale = transform.scale;
    let mesh = if scale == Vec3::ONE {
        mesh
    } else {
        let s = to_sim(scale);
        let scaled = sim::TetMesh::new(
            mesh.rest_positions()
                .iter()
                .map(|p| p.component_mul(&s))
                .collect(),
            mesh.tets().iter().map(|t| t.map(|v| v as usize)).collect(),
        )
        .map_err(BodyError::ScaledMesh)?;
        Arc::new(scaled)
    };
    let h = world.world.add_body_with_pose(
        mesh.clone(),
        material.to_sim(),
        to_sim(transform.translation),
        quat_to_sim(transform.rotation),
    )?;
    let result = (|| -> Result<(), BodyError> {
        let positions = world.world.positions(h)?.to_vec();
        let out_of_range = |role, vertex| BodyError::VertexOutOfRange {
            role,
            vertex,
            count: positions.len(),
        };
        if let Some(pin) = pin {
            for &v in &pin.vertices {
                let p = *positions
                    .get(v as usize)
                    .ok_or_else(|| out_of_range("pinned", v))?;
                world.world.pin(h, v as usize, p)?;
            }
        }
        if let Some((attachment, target)) = attachment {
            let inverse = target.affine().inverse();
            state.attachment_offsets.clear();
            for &v in &attachment.vertices {
                let p = *positions
                    .get(v as usize)
                    .ok_or_else(|| out_of_range("attached", v))?;
                state
                    .attachment_offsets
                    .push(inverse.transform_point3(to_bevy(&p)));
                world
                    .world
                    .attach(h, v as usize, attachment.stiffness as f64, p)?;
            }
        }
        if let CollisionProxy::SurfaceAndPoints(points) = proxy {
            let rest: Vec<sim::Vec3> = points.iter().map(|p| to_sim(*p * scale)).collect();
            let mut proxies = world.world.proxies(h)?.to_vec();
            proxies.extend(sim::embed::embed_points(&mesh, &rest));
            world.world.set_proxies(h, proxies)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok((h, mesh)),
        Err(e) => {
            world.world.remove_body(h);
            Err(e)
        }
    }
}

#[allow(clippy::type_complexity)]
fn create_bodies(
    mut commands: Commands,
    mut world: ResMut<DeformableWorld>,
    tet_assets: Res<Assets<TetMeshAsset>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut bodies: Query<(
        Entity,
        &DeformableBody,
        &SoftMaterial,
        &CollisionProxy,
        &Transform,
        Option<&Pin>,
        Option<&Attachment>,
        Option<&Mesh3d>,
        Option<&InitialVelocity>,
        &mut DeformableState,
    )>,
    transforms: TransformHelper,
) {
    for (
        entity,
        body,
        material,
        proxy,
        transform,
        pin,
        attachment,
        mesh3d,
        initial_velocity,
        mut state,
    ) in &mut bodies
    {
        if state.handle.is_some() || state.failed() {
            continue;
        }
        let mesh = match &body.mesh {
            TetMeshSource::Mesh(m) => m.clone(),
            TetMeshSource::Asset(handle) => match tet_assets.get(handle) {
                Some(asset) => asset.0.clone(),
                None => continue,
            },
        };
        // A game-provided render mesh is embedded in the tets; wait until it has loaded. The body
        // deforms its own copy, so bodies sharing a mesh handle (and the original) stay apart.
        let render_points = match mesh3d {
            Some(m) => match meshes.get(&m.0) {
                Some(render) => match render::mesh_positions(render) {
                    Some(p) => {
                        let mut copy = render.clone();
                        copy.asset_usage = RenderAssetUsages::default();
                        Some((p, copy))
                    }
                    None => {
                        warn!(
                            "deformable body {entity}: its Mesh3d has no Float32x3 positions; \
                             drawing the tet surface instead"
                        );
                        None
                    }
                },
                None => continue,
            },
            None => None,
        };
        // Transforms are computed from the hierarchy now: a target spawned this frame has no
        // propagated GlobalTransform yet.
        let target_transform = match attachment {
            Some(a) => match transforms.compute_global_transform(a.target) {
                Ok(t) => Some(t),
                Err(e) => {
                    warn!(
                        "deformable body {entity}: attachment target {}: {e}",
                        a.target
                    );
                    None
                }
            },
            None => None,
        };
        let attachment = attachment.zip(target_transform.as_ref());
        match create_body(
            &mut world, mesh, material, proxy, transform, pin, attachment, &mut state,
        ) {
            Ok((h, mesh)) => {
                if let (Some(v), Ok(velocities)) = (initial_velocity, world.world.velocities_mut(h))
                {
                    velocities.fill(to_sim(v.0));
                }
                let points = match render_points {
                    Some((p, copy)) => {
                        let s = to_sim(transform.scale);
                        let rest: Vec<sim::Vec3> = p.iter().map(|q| q.component_mul(&s)).collect();
                        commands.entity(entity).insert(Mesh3d(meshes.add(copy)));
                        sim::embed::embed_points(&mesh, &rest)
                    }
                    None => {
                        let (render_mesh, points) = render::surface_mesh(&mesh);
                        commands
                            .entity(entity)
                            .insert(Mesh3d(meshes.add(render_mesh)));
                        points
                    }
                };
                state.handle = Some(h);
                state.vertex_count = mesh.vertex_count();
                state.render_points = points;
                state.spawn_rotation = transform.rotation;
                world.body_of.insert(entity, h);
            }
            Err(e) => {
                warn!("deformable body {entity} not created: {e}");
                state.rejected = Some(e);
            }
        }
    }
}

fn sync_materials(
    mut world: ResMut<DeformableWorld>,
    bodies: Query<(Entity, &SoftMaterial, &DeformableState), bevy::prelude::Changed<SoftMaterial>>,
) {
    for (entity, material, state) in &bodies {
        if let Some(h) = state.handle
            && let Err(e) = world.world.set_material(h, material.to_sim())
        {
            warn!("deformable body {entity}: material rejected: {e}");
        }
    }
}

fn sync_obstacles(
    mut world: ResMut<DeformableWorld>,
    time: Res<Time<Fixed>>,
    obstacles: Query<(Entity, Ref<Obstacle>)>,
    transforms: TransformHelper,
    mut removed: RemovedComponents<Obstacle>,
) {
    let world = &mut *world;
    for entity in removed.read() {
        world.rejected_obstacles.remove(&entity);
        if let Some(h) = world.obstacle_of.remove(&entity) {
            world.world.remove_obstacle(h);
            world.entity_of_obstacle.remove(&h);
        }
    }
    let dt = time.delta_secs_f64();
    for (entity, obstacle) in &obstacles {
        // From the hierarchy now, not last frame's propagation: no lag and no jump from the
        // origin for an obstacle spawned this frame.
        let Ok(transform) = transforms.compute_global_transform(entity) else {
            continue;
        };
        let (_, rotation, translation) = transform.to_scale_rotation_translation();
        let position = to_sim(translation);
        let rotation = quat_to_sim(rotation);
        // An edited shape replaces the obstacle (a rejected one gets another chance).
        if obstacle.is_changed() && !obstacle.is_added() {
            world.rejected_obstacles.remove(&entity);
            if let Some(h) = world.obstacle_of.remove(&entity) {
                world.world.remove_obstacle(h);
                world.entity_of_obstacle.remove(&h);
            }
        }
        if world.rejected_obstacles.contains(&entity) {
            continue;
        }
        if let Some(&h) = world.obstacle_of.get(&entity) {
            if let Ok(o) = world.world.obstacle_mut(h)
                && let Err(e) = o.move_to(position, rotation, dt)
            {
                // The obstacle stays where it was; the game hears of it once per frame.
                warn!("obstacle {entity} not moved: {e}");
            }
            continue;
        }
        match obstacle
            .to_sim(position, rotation)
            .map_err(|e| e.to_string())
            .and_then(|o| world.world.add_obstacle(o).map_err(|e| e.to_string()))
        {
            Ok(h) => {
                world.obstacle_of.insert(entity, h);
                world.entity_of_obstacle.insert(h, entity);
            }
            Err(e) => {
                warn!("obstacle {entity} rejected: {e}");
                world.rejected_obstacles.insert(entity);
            }
        }
    }
}

fn sync_attachments(
    mut world: ResMut<DeformableWorld>,
    bodies: Query<(&Attachment, &DeformableState)>,
    transforms: TransformHelper,
) {
    for (attachment, state) in &bodies {
        let (Some(h), Ok(target)) = (
            state.handle,
            transforms.compute_global_transform(attachment.target),
        ) else {
            continue;
        };
        let affine: Affine3A = target.affine();
        for (&v, offset) in attachment.vertices.iter().zip(&state.attachment_offsets) {
            let p = to_sim(affine.transform_point3(*offset));
            let _ = world.world.set_attachment_target(h, v as usize, p);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn step_world(
    mut config: ResMut<DeformableConfig>,
    time: Res<Time<Fixed>>,
    mut world: ResMut<DeformableWorld>,
    mut stats: ResMut<DeformableDiagnostics>,
    mut history: ResMut<StepHistory>,
    mut diagnostics: Diagnostics,
    mut bodies: Query<(Entity, &mut DeformableState)>,
    mut frozen_messages: MessageWriter<BodyFrozen>,
    (mut slept, mut woke): (MessageWriter<BodySlept>, MessageWriter<BodyWoke>),
    mut started: MessageWriter<ContactStarted>,
    mut ended: MessageWriter<ContactEnded>,
) {
    world.stepped = false;
    if config.paused {
        if !config.single_step {
            return;
        }
        // Not a settings edit: no need to push the settings again next step.
        config.bypass_change_detection().single_step = false;
    }
    let dt = time.delta_secs_f64();
    if !(dt > 0.0) {
        return;
    }
    let report = match world.world.step(dt) {
        Ok(r) => r,
        Err(e) => {
            warn!("deformable step skipped: {e}");
            return;
        }
    };
    world.stepped = true;
    stats.record(&report);
    stats.bodies = world.body_of.len();
    history.push(StepSample::from_diagnostics(&stats));
    diagnostics.add_measurement(&diagnostics::STEP_TIME, || report.wall.as_secs_f64() * 1e3);
    diagnostics.add_measurement(&diagnostics::MPRGP_ITERATIONS, || {
        report.mprgp_iterations as f64
    });
    diagnostics.add_measurement(&diagnostics::CONSTRAINTS, || report.constraints as f64);
    diagnostics.add_measurement(&diagnostics::KKT_RESIDUAL, || report.kkt_residual);
    diagnostics.add_measurement(&diagnostics::CONTACT_REGIONS, || report.lcp.regions as f64);
    diagnostics.add_measurement(&diagnostics::LCP_ITERATIONS, || {
        (report.lcp.cg_iterations + report.lcp.gs_sweeps) as f64
    });
    diagnostics.add_measurement(&diagnostics::LCP_RESIDUAL, || report.lcp.residual);
    let world = &mut *world;
    for (entity, mut state) in &mut bodies {
        let Some(h) = state.handle else { continue };
        if let Some((_, reason)) = report.frozen.iter().find(|(fh, _)| *fh == h) {
            state.frozen = Some(reason.clone());
            frozen_messages.write(BodyFrozen {
                entity,
                reason: reason.clone(),
            });
        }
        if report.woke.contains(&h) {
            woke.write(BodyWoke { entity });
        }
        if report.slept.contains(&h) {
            slept.write(BodySlept { entity });
        }
        state.asleep = world.world.is_asleep(h).unwrap_or(false);
        // Contact messages: compare this step's touching obstacles with the last step's.
        world.scratch.clear();
        let _ = world.world.touching_obstacles(h, &mut world.scratch);
        let now = &mut world.touching;
        now.clear();
        now.extend(
            world
                .scratch
                .iter()
                .filter_map(|o| world.entity_of_obstacle.get(o).copied()),
        );
        now.sort_unstable();
        let now = &world.touching;
        let before = world.contacts.entry(entity).or_default();
        for &o in now {
            if before.binary_search(&o).is_err() {
                started.write(ContactStarted {
                    body: entity,
                    obstacle: o,
                });
            }
        }
        for &o in before.iter() {
            if now.binary_search(&o).is_err() {
                ended.write(ContactEnded {
                    body: entity,
                    obstacle: o,
                });
            }
        }
        before.clear();
        before.extend_from_slice(now);
    }
    stats.frozen_bodies = bodies.iter().filter(|(_, s)| s.failed()).count();
}

/// After a step: the render points of every body, kept beside the previous step's.
fn record_render_points(
    mut world: ResMut<DeformableWorld>,
    mut bodies: Query<&mut DeformableState>,
) {
    let start = Instant::now();
    for mut state in &mut bodies {
        let state = &mut *state;
        let Some(h) = state.handle else { continue };
        // A body created this frame is recorded once even before its first step, so it is drawn
        // at its spawn pose rather than not at all. While the world does not step (paused), the
        // previous points become the current ones, so the blend shows the last step steadily.
        // A body that slept through the step did not move: held like a paused one (drawn
        // once, then left). The step it fell asleep in is still recorded.
        let slept_through = world
            .world
            .last_step_stats(h)
            .is_ok_and(|stats| stats.asleep);
        if (!world.stepped || slept_through) && state.steps_recorded > 0 {
            if !state.holding {
                state.holding = true;
                state.render_previous.clone_from(&state.render_current);
                state.centre_previous = state.centre_current;
                state.turn_previous = state.turn_current;
                state.drawn = None;
            }
            continue;
        }
        state.holding = false;
        let Ok(x) = world.world.positions(h) else {
            continue;
        };
        std::mem::swap(&mut state.render_previous, &mut state.render_current);
        state.centre_previous = state.centre_current;
        state.turn_previous = state.turn_current;
        state.centre_current =
            render::record_points(&state.render_points, x, &mut state.render_current);
        if state.steps_recorded == 0 {
            state.render_previous.clone_from(&state.render_current);
            state.centre_previous = state.centre_current;
            state.reference.clear();
            let centre = state.centre_current;
            state
                .reference
                .extend(state.render_current.iter().map(|p| *p - centre));
            state.turn_current = Quat::IDENTITY;
            state.turn_previous = Quat::IDENTITY;
        } else {
            state.turn_current = render::matched_turn(
                &state.reference,
                &state.render_current,
                state.centre_current,
                state.turn_current,
            );
        }
        state.steps_recorded += 1;
    }
    world.record_ms = start.elapsed().as_secs_f64() * 1e3;
}

/// Every frame: `Transform` and render mesh blended between the last two fixed steps.
fn draw_interpolated(
    config: Res<DeformableConfig>,
    time: Res<Time<Fixed>>,
    world: Res<DeformableWorld>,
    mut stats: ResMut<DeformableDiagnostics>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut bodies: Query<(&mut DeformableState, &mut Transform, Option<&Mesh3d>)>,
) {
    let start = Instant::now();
    let alpha = if config.interpolate {
        time.overstep_fraction().clamp(0.0, 1.0)
    } else {
        1.0
    };
    for (mut state, mut transform, mesh3d) in &mut bodies {
        // Held (paused or asleep), both point sets are equal: one draw serves every blend.
        let held = state.holding && state.drawn.is_some();
        if state.steps_recorded == 0 || held || state.drawn == Some((state.steps_recorded, alpha)) {
            continue;
        }
        let state = &mut *state;
        state.drawn = Some((state.steps_recorded, alpha));
        let origin = state.centre_previous.lerp(state.centre_current, alpha);
        let rotation = state.turn_previous.slerp(state.turn_current, alpha) * state.spawn_rotation;
        *transform = Transform::from_translation(origin).with_rotation(rotation);
        if let Some(mut mesh) = mesh3d.and_then(|m| meshes.get_mut(&m.0)) {
            render::write_interpolated(
                &mut mesh,
                &state.render_previous,
                &state.render_current,
                alpha,
                origin,
                rotation.inverse(),
            );
        }
    }
    stats.writeback_ms = world.record_ms + start.elapsed().as_secs_f64() * 1e3;
}
