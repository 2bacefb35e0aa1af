//! Messages the plugin writes.

use bevy::ecs::entity::Entity;
use bevy::prelude::Message;

/// A body was stopped after a numerical failure (restored to its last good state, frozen).
///
/// # Scheduling
/// Written in [`crate::DeformableSystems::Step`] (`FixedUpdate`), the step the failure happened.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct BodyFrozen {
    /// The body's entity.
    pub entity: Entity,
    /// What went wrong.
    pub reason: String,
}

/// A body started touching an obstacle.
///
/// # Scheduling
/// Written in [`crate::DeformableSystems::Step`] (`FixedUpdate`) after the step in which the
/// contact appeared; messages of one step are ordered by body, then obstacle entity.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContactStarted {
    /// The body's entity.
    pub body: Entity,
    /// The obstacle's entity.
    pub obstacle: Entity,
}

/// A body stopped touching an obstacle (or one of them was removed).
///
/// # Scheduling
/// As [`ContactStarted`].
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContactEnded {
    /// The body's entity.
    pub body: Entity,
    /// The obstacle's entity.
    pub obstacle: Entity,
}

/// Puts every body back where it was created, at rest (with its [`crate::components::InitialVelocity`]
/// again), unfreezes frozen bodies and lets go of the grab. Materials, pins and settings stay as
/// they are.
///
/// # Scheduling
/// Read in [`crate::DeformableSystems::Sync`] (`FixedUpdate`): the reset happens before the next
/// fixed step.
#[derive(Message, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResetScene;
