//! Cloth in Bevy: a [`DeformableCloth`] rectangle on an entity is simulated by
//! [`crate::sim::cloth::ClothSystem`] (Projective Dynamics on a triangle mesh, with contact
//! planes against obstacles) and drawn into the entity's mesh. [`crate::DeformablePlugin`] adds
//! it: the cloths step after the soft bodies in the same schedule (paused and single-stepped
//! with them), in the [`ClothWind`], among the world's [`crate::components::Obstacle`]s.
//!
//! | file | what |
//! | --- | --- |
//! | `components.rs` | [`DeformableCloth`] and its builders, [`ClothPreset`], [`ClothEdge`], [`ClothWind`], [`ClothState`] |
//! | `systems.rs` | building and stepping the cloths, writing their meshes |
//!
//! The mesh is drawn blended between the last two steps, as the bodies are
//! (`DeformableConfig::interpolate`).
//!
//! Pins follow the cloth entity's transform: parent the entity to what it hangs from (a pole, a
//! hand, a skeleton joint: the `character` example's cape hangs from its creature's chest
//! joint), or pin it to a soft body's tets (`DeformableCloth::pin_to_body`). Soft bodies near a
//! cloth are among its obstacles (their surfaces as they are after their step; a skinned soft
//! region's surface is its cage, up to a cell proud of the drawn skin), and feel it one step
//! late: what its contacts put on their surfaces, and the pull of its pins riding on them (the
//! cloth's weight, drag and inertia, shared among the pins), are impulses their next step
//! takes (except skinned flesh, driven to its bones: a cape's few grams on it were measured
//! at 1e-5 to 5e-4 N s a step, and passing them on set off the `skin` test's latent wedge of a
//! cape vertex between the flesh and the shoulders' collider, 13-15 mm deep in two of five
//! runs with the impulses scaled by 1e-3 to 2). A cloth collides with itself where its
//! component asks (`DeformableCloth::self_collision`, off by default). Cloths keep apart: each
//! steps among the others near it, those that stepped before it along their paths over their
//! step and the rest where they stand (`sim::cloth::ClothSystem::step_among_cloths`), so that
//! neither passes through the other; neither feels the other's weight. A coupled rigid body
//! (`RigidBodyCoupling`, avian's dynamic bodies) under a cloth takes its contacts' impulses
//! in its `RigidBodyImpulse`, added after the soft bodies' own (`plugin/writeback.rs`).

mod components;
mod systems;

pub use components::{ClothEdge, ClothPreset, ClothState, ClothWind, DeformableCloth};
pub(crate) use systems::{draw_cloths, step_cloths};
