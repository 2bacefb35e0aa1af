//! What a body entity is in the simulation, typed: waiting for its mesh, simulated, asleep,
//! frozen after a numerical failure, or rejected at creation with the reason.

use thiserror::Error;

use crate::selection::VertexSelection;
use crate::sim::{FreezeReason, MeshError, WorldError};

/// Why the plugin could not create a body from its components.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BodyError {
    /// The mesh scaled by the spawn `Transform`'s scale is not a valid tet mesh (a scale that
    /// flattens or inverts its tets).
    #[error("the mesh scaled by the Transform is invalid: {0}")]
    ScaledMesh(MeshError),
    /// The simulation refused the body or one of its settings (material, pins, attachments,
    /// collision proxies).
    #[error(transparent)]
    World(#[from] WorldError),
    /// A `Pin` or `Attachment` names a vertex the mesh does not have.
    #[error("{role} vertex {vertex} is out of range (the mesh has {count} vertices)")]
    VertexOutOfRange {
        /// `"pinned"` or `"attached"`.
        role: &'static str,
        /// The vertex index given.
        vertex: u32,
        /// The mesh's vertex count.
        count: usize,
    },
    /// A `Pin` or `Attachment` selection matches no vertex of the mesh.
    #[error("the {role} selection {selection:?} matches no vertex")]
    EmptySelection {
        /// `"pinned"` or `"attached"`.
        role: &'static str,
        /// The selection.
        selection: VertexSelection,
    },
}

/// The state of a body entity in the simulation ([`crate::components::DeformableState::status`]).
#[derive(Debug, Clone, PartialEq)]
pub enum BodyStatus {
    /// Not created yet: its `TetMeshAsset` or render mesh is still loading.
    Waiting,
    /// Stepped by the simulation.
    Simulated,
    /// At rest with everything it touches, skipped by the step until something wakes it.
    Sleeping,
    /// Stopped after a numerical failure, restored to its last good state; `ResetScene`
    /// frees it.
    Frozen(FreezeReason),
    /// Never created: its components were invalid.
    Rejected(BodyError),
}
