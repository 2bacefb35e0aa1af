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
//! joint). Soft bodies near a cloth are among its obstacles one way (their surfaces as they
//! are after their step; a skinned soft region's surface is its cage, up to a cell proud of the
//! drawn skin). A cloth collides with itself where its component asks
//! (`DeformableCloth::self_collision`, off by default). Not yet: cloths touching each other,
//! and attachments to a soft body's vertices.

mod components;
mod systems;

pub use components::{ClothEdge, ClothPreset, ClothState, ClothWind, DeformableCloth};
pub(crate) use systems::{draw_cloths, step_cloths};
