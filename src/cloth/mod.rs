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
//! Not yet: contact with soft bodies or between cloths, self-collision, and attachments to
//! other entities than the cloth's own (pins follow the cloth entity's transform; parent the
//! entity to what it hangs from).

mod components;
mod systems;

pub use components::{ClothEdge, ClothPreset, ClothState, ClothWind, DeformableCloth};
pub(crate) use systems::{draw_cloths, step_cloths};
