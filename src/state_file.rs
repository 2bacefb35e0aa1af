//! Saving the simulation's state to a file and loading it back at run time: [`SaveState`] and
//! [`LoadState`] messages (the inspector's buttons write them), handled by [`StateFilePlugin`]
//! with the file of its [`StateFile`] resource.
//!
//! The file is [`crate::sim::SavedWorld`]'s binary form (versioned, checksummed): the bodies'
//! positions, velocities, pins, attachments, sleeping state and local-step rotations, the
//! obstacles' poses and the contact forces, from which the simulation replays bit for bit (to
//! round-off where a rigid body is coupled two ways).
//! Loading it needs the same bodies, spawned in the same order, and the same number of
//! obstacles; a save of another scene, or a corrupt or truncated file, is refused
//! with the reason in [`StateFile::status`] and the log, the simulation unchanged.

use std::path::PathBuf;

use bevy::app::{App, Plugin, Update};
use bevy::ecs::message::{Message, MessageReader};
use bevy::log::{info, warn};
use bevy::prelude::{Query, ResMut, Resource};

use crate::DeformableWorld;
use crate::components::DeformableState;
use crate::sim::SavedWorld;

/// Where the simulation's state is saved, and what happened last.
#[derive(Resource, Debug, Clone, PartialEq)]
pub struct StateFile {
    /// The binary file.
    pub path: PathBuf,
    /// The outcome of the last save or load, for the panel.
    pub status: String,
}

/// Save the simulation's state to the [`StateFile`].
#[derive(Message, Debug, Clone, Copy, Default)]
pub struct SaveState;

/// Load the simulation's state from the [`StateFile`].
#[derive(Message, Debug, Clone, Copy, Default)]
pub struct LoadState;

/// Saves and loads the simulation's state at `path` on [`SaveState`] and [`LoadState`]. Needs
/// [`crate::DeformablePlugin`].
#[derive(Debug, Clone)]
pub struct StateFilePlugin {
    /// The file, e.g. `saves/my_scene.bin`.
    pub path: PathBuf,
}

impl Plugin for StateFilePlugin {
    fn build(&self, app: &mut App) {
        app.insert_resource(StateFile {
            path: self.path.clone(),
            status: String::new(),
        })
        .add_message::<SaveState>()
        .add_message::<LoadState>()
        .add_systems(Update, save_and_load);
    }
}

fn save_and_load(
    mut save: MessageReader<SaveState>,
    mut load: MessageReader<LoadState>,
    mut file: ResMut<StateFile>,
    mut world: ResMut<DeformableWorld>,
    mut bodies: Query<&mut DeformableState>,
) {
    let (save, load) = (save.read().count() > 0, load.read().count() > 0);
    let path = file.path.clone();
    if save {
        let saved = world.save();
        let bytes = saved.to_bytes();
        let written = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, &bytes));
        file.status = match written {
            Ok(()) => format!(
                "saved {} bodies ({} KB) to {}",
                saved.bodies.len(),
                bytes.len().div_ceil(1024),
                path.display()
            ),
            Err(e) => format!("save failed: {e}"),
        };
        info!("{}", file.status);
    } else if load {
        let loaded = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| SavedWorld::from_bytes(&bytes).map_err(|e| e.to_string()))
            .and_then(|saved| {
                world.load(&saved).map_err(|e| e.to_string())?;
                Ok(saved.bodies.len())
            });
        if loaded.is_ok() {
            // The load unfroze every body; each is drawn afresh at its loaded pose, not blended
            // from where it was.
            for mut state in &mut bodies {
                state.frozen = None;
                state.steps_recorded = 0;
                state.drawn = None;
            }
        }
        file.status = match loaded {
            Ok(bodies) => format!("loaded {bodies} bodies from {}", path.display()),
            Err(e) => {
                warn!("state not loaded from {}: {e}", path.display());
                format!("load failed: {e}")
            }
        };
        info!("{}", file.status);
    }
}
