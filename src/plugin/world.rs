//! [`DeformableWorld`]: the simulation world and its mapping to entities.

use std::collections::{HashMap, HashSet};

use bevy::ecs::entity::Entity;
use bevy::math::Vec3;
use bevy::prelude::Resource;
use thiserror::Error;

use crate::convert::to_sim;
use crate::sim::{self, BodyHandle, ObstacleHandle, SnapshotError, SoftWorld, WorldSnapshot};

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
    /// What the cloths' contacts put on coupled obstacles (rigid bodies) in the last step:
    /// `(obstacle, point, impulse)` (m, N s), added to their [`crate::RigidBodyImpulse`].
    pub(crate) cloth_on_rigid: Vec<(ObstacleHandle, sim::Vec3, sim::Vec3)>,
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

    /// Whether the world stepped in this run of the schedule (not paused).
    pub(crate) fn stepped(&self) -> bool {
        self.stepped
    }

    /// The simulation world, for the plugin's own edits (grab, reset, pins).
    pub(crate) fn world_mut(&mut self) -> &mut SoftWorld {
        &mut self.world
    }

    /// Current vertex positions (m, world) of a body entity.
    pub fn positions(&self, entity: Entity) -> Option<&[sim::Vec3]> {
        self.world.positions(self.body(entity)?).ok()
    }

    /// Kicks the body of `entity` with `impulse` (N s) at the point `at` (m, world; on its
    /// surface or inside it), taken by its next step: a hit, an explosion's push. The body's
    /// momentum changes by the impulse and its angular momentum as a rigid body's would; the
    /// body's elasticity spreads it ([`SoftWorld::apply_impulse`]). Returns whether the body
    /// changed: a frozen body takes nothing, and a sleeping one wakes only for an impulse
    /// that moves some vertex faster than the sleeping speed (wake it first with
    /// [`Self::wake`] to push it gently).
    ///
    /// # Errors
    /// [`DeformableImpulseError::NotABody`] for an entity without a simulated body (not yet
    /// added: bodies join the world in the next fixed step after they spawn), or a non-finite
    /// point or impulse.
    pub fn apply_impulse(
        &mut self,
        entity: Entity,
        at: Vec3,
        impulse: Vec3,
    ) -> Result<bool, DeformableImpulseError> {
        let h = self
            .body(entity)
            .ok_or(DeformableImpulseError::NotABody(entity))?;
        Ok(self
            .world
            .apply_impulses_at(h, &[(to_sim(at), to_sim(impulse))])?)
    }

    /// Wakes the sleeping body of `entity` (nothing for an awake one); `false` for an entity
    /// without a simulated body.
    pub fn wake(&mut self, entity: Entity) -> bool {
        self.body(entity)
            .is_some_and(|h| self.world.wake(h).is_ok())
    }
}

/// Why [`DeformableWorld::apply_impulse`] refused an impulse (nothing was applied).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DeformableImpulseError {
    /// The entity has no simulated body.
    #[error("entity {0} has no simulated soft body")]
    NotABody(Entity),
    /// The simulation refused it (a non-finite point or impulse).
    #[error(transparent)]
    World(#[from] sim::WorldError),
}

/// A [`DeformableWorld`]'s state at one moment, keyed by entity: the simulation's
/// [`WorldSnapshot`] (the steps after a restore repeat bit for bit) and which entity each body
/// and obstacle was, so that a restore after a spawn or a despawn says which.
///
/// For rollback netcode or replays: take one with [`DeformableWorld::snapshot`] (or
/// [`DeformableWorld::snapshot_into`], reusing one) in the schedule's `FixedPostUpdate` or
/// after [`crate::DeformableSystems::Step`], and put it back with [`DeformableWorld::restore`]
/// before the steps to re-simulate. The game's own components (the `Transform`s that drive
/// kinematic obstacles, pins' targets) are the game's to roll back with it, and so is the state
/// of rigid bodies coupled through avian (the snapshot holds the coupling's warm start, not
/// avian's bodies).
#[derive(Debug, Clone, Default)]
pub struct DeformableSnapshot {
    world: WorldSnapshot,
    /// The body entities and their handles, sorted by entity.
    bodies: Vec<(Entity, BodyHandle)>,
    /// The obstacle entities and their handles, sorted by entity.
    obstacles: Vec<(Entity, ObstacleHandle)>,
    /// `(body, obstacle)` for each obstacle each body touched (for the contact messages),
    /// sorted: a flat list, so that a snapshot taken into a kept one allocates nothing.
    contacts: Vec<(Entity, Entity)>,
}

/// Why [`DeformableWorld::restore`] refused a snapshot (the world is left as it was).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeformableSnapshotError {
    /// Bodies or obstacles were spawned or despawned since the snapshot.
    #[error("entities spawned since the snapshot: {spawned:?}; despawned: {despawned:?}")]
    Entities {
        /// Body and obstacle entities the world has and the snapshot has not.
        spawned: Vec<Entity>,
        /// Body and obstacle entities the snapshot has and the world has not.
        despawned: Vec<Entity>,
    },
    /// The simulation refused it (see [`SnapshotError`]).
    #[error(transparent)]
    World(#[from] SnapshotError),
}

/// `map`'s entries sorted by entity, into `out`.
fn sorted_entries<H: Copy>(map: &HashMap<Entity, H>, out: &mut Vec<(Entity, H)>) {
    out.clear();
    out.extend(map.iter().map(|(&e, &h)| (e, h)));
    out.sort_unstable_by_key(|&(e, _)| e);
}

impl DeformableWorld {
    /// The state now (see [`DeformableSnapshot`]).
    pub fn snapshot(&self) -> DeformableSnapshot {
        let mut snapshot = DeformableSnapshot::default();
        self.snapshot_into(&mut snapshot);
        snapshot
    }

    /// [`DeformableWorld::snapshot`] into `snapshot`, reusing its buffers (see
    /// [`SoftWorld::snapshot_into`]; the entity lists are flat, so once warm nothing allocates).
    pub fn snapshot_into(&self, snapshot: &mut DeformableSnapshot) {
        self.world.snapshot_into(&mut snapshot.world);
        sorted_entries(&self.body_of, &mut snapshot.bodies);
        sorted_entries(&self.obstacle_of, &mut snapshot.obstacles);
        snapshot.contacts.clear();
        for (&body, touched) in &self.contacts {
            snapshot
                .contacts
                .extend(touched.iter().map(|&obstacle| (body, obstacle)));
        }
        snapshot.contacts.sort_unstable();
    }

    /// What a saved game needs of the simulation now: its bodies in stepping order (see
    /// [`sim::SavedWorld`]; `to_bytes` gives its file form).
    pub fn save(&self) -> sim::SavedWorld {
        self.world.save()
    }

    /// Puts a saved simulation state back (see [`sim::SoftWorld::load`]). The bodies are
    /// matched in stepping order, which is the order the plugin made them in: a game that
    /// loads a save spawns the same bodies in the same order first (their entities may differ
    /// from the saving session's). Every body is unfrozen; the bodies' `DeformableState`
    /// components follow at the next step ([`crate::state_file`]'s `LoadState` also clears
    /// their freeze reasons at once).
    ///
    /// # Errors
    /// [`sim::SavedWorldError`] where the save is of other bodies or obstacles or holds
    /// invalid values; the simulation is then unchanged.
    pub fn load(&mut self, saved: &sim::SavedWorld) -> Result<(), sim::SavedWorldError> {
        self.world.load(saved)
    }

    /// Puts the simulation back in the state `snapshot` was taken in. The bodies'
    /// `DeformableState` components (freeze reason, sleep) follow at the next step.
    ///
    /// # Errors
    /// [`DeformableSnapshotError::Entities`] where a body or obstacle entity was spawned or
    /// despawned since (naming them), [`DeformableSnapshotError::World`] where the simulation
    /// refuses it; the world is then unchanged.
    pub fn restore(
        &mut self,
        snapshot: &DeformableSnapshot,
    ) -> Result<(), DeformableSnapshotError> {
        // The maps are keyed by entity: the same sizes and every snapshot entry present with
        // its handle means the same entities.
        let same = snapshot.bodies.len() == self.body_of.len()
            && snapshot.obstacles.len() == self.obstacle_of.len()
            && snapshot
                .bodies
                .iter()
                .all(|(e, h)| self.body_of.get(e) == Some(h))
            && snapshot
                .obstacles
                .iter()
                .all(|(e, h)| self.obstacle_of.get(e) == Some(h));
        if !same {
            return Err(self.entities_changed_since(snapshot));
        }
        self.world.restore(&snapshot.world)?;
        // Into the lists the bodies have (a body without one in the snapshot touched nothing).
        self.contacts.values_mut().for_each(Vec::clear);
        for &(body, obstacle) in &snapshot.contacts {
            self.contacts.entry(body).or_default().push(obstacle);
        }
        Ok(())
    }

    /// The body and obstacle entities spawned and despawned since `snapshot` (an entity whose
    /// body or obstacle was made again, with a new handle, counts as both).
    fn entities_changed_since(&self, snapshot: &DeformableSnapshot) -> DeformableSnapshotError {
        let now: HashMap<Entity, u32> = self
            .body_of
            .iter()
            .map(|(&e, h)| (e, h.0))
            .chain(self.obstacle_of.iter().map(|(&e, h)| (e, h.0)))
            .collect();
        let then: HashMap<Entity, u32> = snapshot
            .bodies
            .iter()
            .map(|&(e, h)| (e, h.0))
            .chain(snapshot.obstacles.iter().map(|&(e, h)| (e, h.0)))
            .collect();
        let changed = |from: &HashMap<Entity, u32>, to: &HashMap<Entity, u32>| {
            let mut out: Vec<Entity> = from
                .iter()
                .filter(|&(e, h)| to.get(e) != Some(h))
                .map(|(&e, _)| e)
                .collect();
            out.sort_unstable();
            out
        };
        DeformableSnapshotError::Entities {
            spawned: changed(&now, &then),
            despawned: changed(&then, &now),
        }
    }
}
