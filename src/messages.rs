//! Messages the plugin writes.

use bevy::ecs::entity::Entity;
use bevy::prelude::Message;

use crate::sim::FreezeReason;

/// A body was stopped after a numerical failure (restored to its last good state, frozen).
///
/// # Scheduling
/// Written in [`crate::DeformableSystems::Step`] (`FixedUpdate`), the step the failure happened.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct BodyFrozen {
    /// The body's entity.
    pub entity: Entity,
    /// What went wrong.
    pub reason: FreezeReason,
}

/// A body fell asleep: at rest (with the bodies it touches) for
/// [`crate::plugin::RestSettings::sleep_delay`], it is skipped by the step until something
/// wakes it.
///
/// # Scheduling
/// Written in [`crate::DeformableSystems::Step`] (`FixedUpdate`), the step it fell asleep in.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodySlept {
    /// The body's entity.
    pub entity: Entity,
}

/// A sleeping body woke: something reached it (an awake body, a moving obstacle) or the game
/// edited it or the settings.
///
/// # Scheduling
/// Written in [`crate::DeformableSystems::Step`] (`FixedUpdate`), the first step after it woke.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyWoke {
    /// The body's entity.
    pub entity: Entity,
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
