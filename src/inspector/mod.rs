//! [`DeformableInspectorPlugin`]: tune soft bodies in the running game (feature `inspector`).
//!
//! - **Panel** (egui, right side, `F1` shows or hides it): the bodies (pick one in the list or
//!   by clicking it), the selected body's material with presets (Young's modulus on a log
//!   slider), its pins and the time its last refactorization took; the global settings (gravity,
//!   fixed step, substeps, friction model, iterations, tolerances); pause, single step, reset
//!   and time scale; saving and loading the scene's tuning (RON, see [`crate::tuning`]); the
//!   wind and each cloth's preset and iterations ([`crate::cloth`]).
//! - **Statistics**: per-phase step times over the last five seconds against the 1/60 s frame
//!   budget, solver iterations and residuals, contacts, regions, frozen bodies, inverted tets,
//!   deepest penetration, and the panel's own cost.
//! - **Debug drawing** with gizmos, each a toggle: tet wireframe, surface, collision proxies,
//!   contacts coloured by LCP region with their normals, active constraints (contacts that
//!   pushed), pinned vertices, BVH boxes.
//! - **Grab tool**: left-drag on a body holds the clicked surface point with a spring
//!   ([`crate::grab`]); shift-click pins or unpins the vertex nearest the click.
//!
//! Every edit goes through the ECS (`DeformableConfig`, `SoftMaterial`, `Pin`, `GrabTool`,
//! [`crate::messages::ResetScene`], [`crate::tuning::SaveTuning`]): the same paths a game or a
//! headless test uses, applied by [`crate::DeformablePlugin`] at the next fixed step.

mod cloth_panel;
mod gizmos;
mod panel;
mod plot;
mod pointer;

use std::path::PathBuf;

use bevy::app::{App, Plugin, PostUpdate, Update};
use bevy::ecs::entity::Entity;
use bevy::ecs::schedule::IntoScheduleConfigs;
use bevy::prelude::Resource;
use bevy::transform::TransformSystems;
use bevy_egui::{EguiPlugin, EguiPrimaryContextPass};

use crate::DeformableSystems;
use crate::state_file::{LoadState, SaveState, StateFilePlugin};
use crate::tuning::{LoadTuning, SaveTuning, TuningPlugin};

/// The inspector: panel, statistics, debug drawing and grab tool (see the module docs). Add it
/// after [`crate::DeformablePlugin`]; it adds `EguiPlugin` if the app has none.
#[derive(Debug, Clone)]
pub struct DeformableInspectorPlugin {
    /// Where the scene's tuning is saved; loaded on start if it exists. `None`: no saving.
    pub tuning_file: Option<PathBuf>,
    /// Where the simulation's state is saved and loaded by the panel's buttons. `None`: no
    /// buttons.
    pub state_file: Option<PathBuf>,
    /// Whether the panel starts open. Default: true.
    pub open: bool,
}

impl Default for DeformableInspectorPlugin {
    fn default() -> Self {
        Self {
            tuning_file: None,
            state_file: None,
            open: true,
        }
    }
}

impl DeformableInspectorPlugin {
    /// Builder: save and load the scene's tuning at `path` (e.g. `assets/tuning/scene.ron`).
    pub fn with_tuning_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tuning_file = Some(path.into());
        self
    }

    /// Builder: save and load the simulation's state at `path` from the panel (e.g.
    /// `saves/scene.bin`; see [`crate::state_file`]).
    pub fn with_state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.state_file = Some(path.into());
        self
    }
}

impl Plugin for DeformableInspectorPlugin {
    fn build(&self, app: &mut App) {
        if !app.is_plugin_added::<EguiPlugin>() {
            app.add_plugins(EguiPlugin::default());
        }
        if let Some(path) = &self.tuning_file
            && !app.is_plugin_added::<TuningPlugin>()
        {
            app.add_plugins(TuningPlugin { path: path.clone() });
        }
        if let Some(path) = &self.state_file
            && !app.is_plugin_added::<StateFilePlugin>()
        {
            app.add_plugins(StateFilePlugin { path: path.clone() });
        }
        app.add_message::<SaveTuning>()
            .add_message::<LoadTuning>()
            .add_message::<SaveState>()
            .add_message::<LoadState>()
            .insert_resource(InspectorState {
                open: self.open,
                ..Default::default()
            })
            .add_systems(EguiPrimaryContextPass, panel::draw_panel)
            .add_systems(Update, pointer::pick_and_grab)
            .add_systems(
                PostUpdate,
                gizmos::draw_debug
                    .after(DeformableSystems::Render)
                    .before(TransformSystems::Propagate),
            );
    }
}

/// What the inspector shows and where the pointer is busy.
#[derive(Resource, Debug, Clone, PartialEq)]
pub struct InspectorState {
    /// Whether the panel is shown (`F1` toggles).
    pub open: bool,
    /// The body the panel edits.
    pub selected: Option<Entity>,
    /// The debug drawing toggles.
    pub draw: DebugDraw,
    /// True while the mouse is over the panel or holds a body: camera controls should ignore
    /// it (the examples' orbit camera does).
    pub pointer_busy: bool,
    /// CPU time (ms) to build the panel, smoothed over frames.
    pub panel_ms: f32,
    /// The drag plane of the held point: (point on it, normal facing the camera).
    pub(crate) drag_plane: Option<(bevy::math::Vec3, bevy::math::Vec3)>,
}

impl Default for InspectorState {
    fn default() -> Self {
        Self {
            open: true,
            selected: None,
            draw: DebugDraw::default(),
            pointer_busy: false,
            panel_ms: 0.0,
            drag_plane: None,
        }
    }
}

/// Which debug overlays are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DebugDraw {
    /// Every tet's edges.
    pub tets: bool,
    /// The boundary triangles' edges.
    pub surface: bool,
    /// The collision proxies.
    pub proxies: bool,
    /// Contacts coloured by LCP region, with their normals.
    pub contacts: bool,
    /// Contacts that pushed this step (non-zero impulse), larger.
    pub active_constraints: bool,
    /// Pinned vertices.
    pub pins: bool,
    /// The inner boxes of each body's surface BVH.
    pub bvh: bool,
    /// Length of the drawn contact normals (m).
    pub normal_length: f32,
}

impl Default for DebugDraw {
    fn default() -> Self {
        Self {
            tets: false,
            surface: false,
            proxies: false,
            contacts: false,
            active_constraints: false,
            pins: true,
            bvh: false,
            normal_length: 0.08,
        }
    }
}
