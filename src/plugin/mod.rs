//! [`DeformablePlugin`]: settings, the fixed-step pipeline and its system sets, one file per
//! part: `config` (settings), `world` (the simulation world resource), `sync` (ECS ->
//! simulation), `create` (new bodies), `step` (the step and its messages) and `writeback`
//! (render points, `Transform`s and render meshes).
//!
//! The step runs in the plugin's schedule (`FixedUpdate` unless [`DeformablePlugin::new`] names
//! another) as three chained sets ([`DeformableSystems`]):
//!
//! 1. **Sync** — build the regions of new [`SoftSkin`]s (their flesh entities), create bodies
//!    for new [`DeformableBody`] entities (asset-backed ones once their mesh has loaded; each
//!    from one [`BodyDesc`](crate::sim::BodyDesc), atomically), remove despawned ones, push
//!    material edits (that body alone is refactored), obstacle poses and velocities, attachment
//!    targets, the soft skins' skinning targets and the settings into the simulation world.
//! 2. **Step** — advance the [`SoftWorld`](crate::sim::SoftWorld) by the schedule's time step
//!    (`Time`: the fixed clock's in the fixed schedules);
//!    record diagnostics; write [`BodyFrozen`], [`BodySlept`], [`BodyWoke`],
//!    [`ContactStarted`] and [`ContactEnded`] messages.
//! 3. **Writeback** — evaluate each body's render points (its surface vertices, or the vertices
//!    of the game's own embedded mesh) and keep them beside the previous step's; then each soft
//!    skin's displacement from its skinned targets.
//!
//! Every frame, in `PostUpdate` before transform propagation, [`DeformableSystems::Render`]
//! blends the last two fixed steps by the fixed clock's overstep fraction (so motion is smooth
//! when the frame rate and the 64 Hz step disagree; [`DeformableConfig::interpolate`]; in a
//! schedule outside the fixed loop there is nothing to blend and the last step is drawn), moves the
//! body's `Transform` to the points' mean, turned by the body's best-fit rotation since it was
//! created (shape matching, so children of the body turn with it), and writes the render mesh
//! in that frame. After transform propagation (the joints' poses of this frame), the soft skins
//! write their regions into their skinned meshes. Both write before the frame's asset events,
//! so the renderer draws them this frame; every pair of the plugin's systems that touch the
//! same data is ordered (tested with Bevy's ambiguity detection).
//!
//! The simulation world is the one authoritative copy of the vertices; ECS data flows in during
//! Sync and out during Writeback, never both ways.

mod config;
mod create;
mod step;
mod sync;
mod world;
mod writeback;

pub(crate) use config::FLAT_FIELDS;
pub use config::{
    ContactSettings, DeformableConfig, ElasticModel, FrictionModel, RestSettings, SolverChoice,
    SolverSettings,
};
pub use world::{
    DeformableImpulseError, DeformableSnapshot, DeformableSnapshotError, DeformableWorld,
};

use bevy::app::{
    App, FixedFirst, FixedLast, FixedPostUpdate, FixedPreUpdate, FixedUpdate, Plugin, PostUpdate,
};
use bevy::asset::{AssetApp, AssetEventSystems};
use bevy::diagnostic::{Diagnostic, RegisterDiagnostic};
use bevy::ecs::resource::Resource;
use bevy::ecs::schedule::{InternedScheduleLabel, IntoScheduleConfigs, ScheduleLabel, SystemSet};
use bevy::math::Vec3;
use bevy::transform::TransformSystems;

use crate::assets::{GmshLoader, TetGenLoader, TetMeshAsset};
use crate::cloth::{ClothEdge, ClothPreset, ClothWind, DeformableCloth, draw_cloths, step_cloths};
use crate::components::{
    Attachment, CollisionProxy, DeformableBody, InitialVelocity, Obstacle, Pin, SoftMaterial,
};
use crate::diagnostics::{self, DeformableDiagnostics};
use crate::grab::{GrabTool, sync_grab};
use crate::history::StepHistory;
use crate::messages::{BodyFrozen, BodySlept, BodyWoke, ContactEnded, ContactStarted, ResetScene};
use crate::rigid_coupling::{RigidBodyCoupling, RigidBodyImpulse};
use crate::skin::{
    SkinFlesh, SkinRegion, SoftSkin, build_soft_skins, draw_soft_skins, drive_soft_skins,
    record_skin_displacements,
};
use create::create_bodies;
use step::step_world;
use sync::{
    apply_config, remove_bodies, reset_scene, sync_attachments, sync_materials, sync_obstacles,
    sync_pins,
};
use writeback::{draw_interpolated, record_render_points, record_rigid_impulses};

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
#[derive(Debug, Clone)]
pub struct DeformablePlugin {
    /// The initial settings.
    pub config: DeformableConfig,
    /// The schedule the step runs in ([`DeformablePlugin::new`]).
    schedule: InternedScheduleLabel,
}

impl Default for DeformablePlugin {
    /// The step in `FixedUpdate`, default settings.
    fn default() -> Self {
        Self::new(FixedUpdate)
    }
}

/// Whether the plugin's schedule is one of the fixed-step loop's (its steps are then blended
/// for drawing by the fixed clock's overstep).
#[derive(Resource, Debug, Clone, Copy)]
pub(crate) struct StepSchedule {
    pub fixed: bool,
    /// The schedule the step runs in.
    #[cfg_attr(not(feature = "avian"), allow(dead_code))]
    pub label: InternedScheduleLabel,
}

impl DeformablePlugin {
    /// The plugin with its step (the Sync, Step and Writeback sets of [`DeformableSystems`]) in
    /// `schedule`, default settings. The step advances by that schedule's `Time`: in the fixed
    /// loop's schedules (`FixedFirst` to `FixedLast`; `FixedUpdate` is the default) the fixed
    /// time step, elsewhere the frame's time. Prefer a fixed schedule: a body's system matrix
    /// depends on the time step, so a varying one refactors every body whenever it changes
    /// (about 6 ms per 1,000-vertex body), and there is then nothing to interpolate between for
    /// drawing. A game that steps its own physics in a schedule of its own (say, beside a
    /// rigid-body engine's) names it here and runs it with the time step it wants.
    pub fn new(schedule: impl ScheduleLabel) -> Self {
        Self {
            config: DeformableConfig::default(),
            schedule: schedule.intern(),
        }
    }

    /// The schedule the step runs in.
    pub fn schedule(&self) -> InternedScheduleLabel {
        self.schedule
    }

    /// Builder: gravity (m/s^2).
    pub fn with_gravity(mut self, gravity: Vec3) -> Self {
        self.config.gravity = gravity;
        self
    }

    /// Builder: PD iterations per substep.
    pub fn with_iterations(mut self, iterations: u32) -> Self {
        self.config.solver.pd_iterations = iterations;
        self
    }

    /// Builder: substeps per fixed step.
    pub fn with_substeps(mut self, substeps: u32) -> Self {
        self.config.solver.substeps = substeps;
        self
    }

    /// Builder: contact margin (m).
    pub fn with_contact_margin(mut self, margin: f32) -> Self {
        self.config.contact.margin = margin;
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
            .insert_resource(StepSchedule {
                fixed: [
                    FixedFirst.intern(),
                    FixedPreUpdate.intern(),
                    FixedUpdate.intern(),
                    FixedPostUpdate.intern(),
                    FixedLast.intern(),
                ]
                .contains(&self.schedule),
                label: self.schedule,
            })
            .init_resource::<DeformableWorld>()
            .init_resource::<DeformableDiagnostics>()
            .init_resource::<StepHistory>()
            .init_resource::<GrabTool>()
            .init_resource::<ClothWind>()
            .register_type::<DeformableCloth>()
            .register_type::<ClothPreset>()
            .register_type::<ClothEdge>()
            .register_type::<ClothWind>()
            .register_type::<DeformableConfig>()
            .register_type::<SolverSettings>()
            .register_type::<ContactSettings>()
            .register_type::<RestSettings>()
            .register_type::<DeformableDiagnostics>()
            .register_type::<SoftMaterial>()
            .register_type::<InitialVelocity>()
            .register_type::<DeformableBody>()
            .register_type::<CollisionProxy>()
            .register_type::<Obstacle>()
            .register_type::<RigidBodyCoupling>()
            .register_type::<RigidBodyImpulse>()
            .register_type::<Pin>()
            .register_type::<Attachment>()
            .register_type::<SoftSkin>()
            .register_type::<SkinRegion>()
            .register_type::<SkinFlesh>()
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
                self.schedule,
                (
                    DeformableSystems::Sync,
                    DeformableSystems::Step,
                    DeformableSystems::Writeback,
                )
                    .chain(),
            )
            .add_systems(
                self.schedule,
                (
                    (
                        apply_config,
                        remove_bodies,
                        reset_scene,
                        build_soft_skins,
                        create_bodies,
                        sync_materials,
                        sync_pins,
                        sync_obstacles,
                        sync_attachments,
                        drive_soft_skins,
                        sync_grab,
                    )
                        .chain()
                        .in_set(DeformableSystems::Sync),
                    (step_world, step_cloths)
                        .chain()
                        .in_set(DeformableSystems::Step),
                    (
                        record_render_points,
                        record_skin_displacements,
                        record_rigid_impulses,
                    )
                        .chain()
                        .in_set(DeformableSystems::Writeback),
                ),
            )
            // The meshes are written before the frame's asset events are sent, so the renderer
            // picks them up this frame.
            .configure_sets(
                PostUpdate,
                DeformableSystems::Render
                    .before(TransformSystems::Propagate)
                    .before(AssetEventSystems),
            )
            .add_systems(
                PostUpdate,
                (
                    // The cloths after the bodies' transforms (a cloth may hang from one).
                    (draw_interpolated, draw_cloths)
                        .chain()
                        .in_set(DeformableSystems::Render),
                    // The engine skins with the joints' propagated poses: write after them.
                    draw_soft_skins
                        .after(TransformSystems::Propagate)
                        .before(AssetEventSystems),
                ),
            );
    }
}
