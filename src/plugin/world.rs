//! [`DeformableWorld`]: the simulation world and its mapping to entities.

use std::collections::{HashMap, HashSet};

use bevy::ecs::entity::Entity;
use bevy::prelude::Resource;

use crate::sim::{self, BodyHandle, ObstacleHandle, SoftWorld};

/// The simulation world and its mapping to entities.
#[derive(Resource, Default)]
pub struct DeformableWorld {
    pub(super) world: SoftWorld,
    pub(super) body_of: HashMap<Entity, BodyHandle>,
    /// The inverse of `body_of`.
    pub(super) entity_of_body: HashMap<BodyHandle, Entity>,
    pub(super) obstacle_of: HashMap<Entity, ObstacleHandle>,
    pub(super) entity_of_obstacle: HashMap<ObstacleHandle, Entity>,
    pub(super) contacts: HashMap<Entity, Vec<Entity>>,
    /// Obstacles whose shape was rejected (reported once, retried when the component changes).
    pub(super) rejected_obstacles: HashSet<Entity>,
    pub(super) scratch: Vec<ObstacleHandle>,
    /// Obstacle entities a body touches this step (reused: no per-step allocation).
    pub(super) touching: Vec<Entity>,
    /// Whether the last fixed step advanced the world (false while paused).
    pub(super) stepped: bool,
    /// Time of the last render-point recording (ms).
    pub(super) record_ms: f64,
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
        self.entity_of_body.get(&h).copied()
    }

    /// The simulation world, for the plugin's own edits (grab, reset, pins).
    /// Whether the world stepped in this run of the schedule (not paused).
    pub(crate) fn stepped(&self) -> bool {
        self.stepped
    }

    pub(crate) fn world_mut(&mut self) -> &mut SoftWorld {
        &mut self.world
    }

    /// Current vertex positions (m, world) of a body entity.
    pub fn positions(&self, entity: Entity) -> Option<&[sim::Vec3]> {
        self.world.positions(self.body(entity)?).ok()
    }
}
