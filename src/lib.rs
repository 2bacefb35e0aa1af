//! # bevy_deformable
//!
//! Volumetric soft bodies for Bevy: tetrahedral meshes simulated with Projective Dynamics (or
//! Newton's method), contact with obstacles and between bodies solved as quadratic programs by
//! MPRGP in the position solve, Coulomb friction from velocity-level contact LCPs solved region
//! by region, and restitution applied after the position solve as a rebound force through each
//! body's prefactored matrix (so the rebound spreads through the body as the impact did).
//!
//! - [`sim`]: the simulation core, plain Rust (no Bevy types), usable and tested on its own.
//! - [`DeformablePlugin`] and the [`components`]: the Bevy integration, a thin layer that copies
//!   ECS edits into the core once per fixed step and writes the results back.
//! - [`skin`]: soft flesh on skinned (glTF) characters, driven by their animation.
//! - [`cloth`]: cloth rectangles (flags, curtains, tablecloths) stepped beside the soft bodies,
//!   draping over the obstacles.
//! - `DeformableInspectorPlugin` (feature `inspector`, on by default): an egui panel to tune
//!   bodies and settings live, plots of the solver's statistics, debug drawing with gizmos, and
//!   a mouse grab tool. Its non-UI parts ([`grab`], [`history`], [`tuning`]) are always built,
//!   so a game can drive them from its own input, and tests drive them headless.
//!
//! See `docs/ARCHITECTURE.md` for the algorithms, the order of a step and their trade-offs.

#![warn(missing_docs)]
// `!(x > 0.0)` is deliberate throughout: it is also true for NaN, which must be rejected too.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod assets;
#[cfg(feature = "avian")]
pub mod avian;
pub mod body_shapes;
pub mod cloth;
pub mod components;
pub(crate) mod convert;
pub mod diagnostics;
pub mod embedding;
pub mod grab;
pub mod history;
#[cfg(feature = "inspector")]
pub mod inspector;
pub mod messages;
pub mod plugin;
mod reflect_core;
mod render;
pub mod rigid_coupling;
pub mod selection;
pub mod sim;
pub mod skin;
pub mod state_file;
pub mod status;
pub mod tuning;

// The README's Rust snippets are compiled (and, where they do not open a window, run) as
// doctests, so the handbook cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use plugin::{
    DeformableConfig, DeformableImpulseError, DeformablePlugin, DeformableSnapshot,
    DeformableSnapshotError, DeformableSystems, DeformableWorld,
};

/// The types a game needs: the plugins, the components and their constructors' types (vertex
/// selections, material presets), the settings and their groups, the messages, the typed errors
/// and statuses, and the core's mesh types a body is built from. Everything else (the
/// inspector's grab and history internals, the core's solvers) is reached by its module path.
pub mod prelude {
    pub use crate::assets::TetMeshAsset;
    #[cfg(feature = "avian")]
    pub use crate::avian::{DeformableAvianPlugin, DeformableAvianSystems};
    pub use crate::body_shapes::MeshBodyError;
    pub use crate::cloth::{ClothEdge, ClothPreset, ClothState, ClothWind, DeformableCloth};
    pub use crate::components::{
        Attachment, CollisionProxy, CombineRule, DeformableBody, DeformableHandle, DeformableState,
        InitialVelocity, Obstacle, ObstacleStatus, Pin, SoftMaterial, StrainLimits,
    };
    pub use crate::diagnostics::DeformableDiagnostics;
    pub use crate::embedding::{enclosing_body, mesh_from_surface, surface_from_mesh};
    pub use crate::grab::GrabTool;
    #[cfg(feature = "inspector")]
    pub use crate::inspector::{DeformableInspectorPlugin, InspectorState};
    pub use crate::messages::{
        BodyFrozen, BodySlept, BodyWoke, ContactEnded, ContactStarted, ResetScene,
    };
    pub use crate::plugin::{
        ContactSettings, DeformableConfig, DeformableImpulseError, DeformablePlugin,
        DeformableSnapshot, DeformableSnapshotError, DeformableSystems, DeformableWorld,
        ElasticModel, FrictionModel, RestSettings, SolverChoice, SolverSettings,
    };
    pub use crate::rigid_coupling::{RigidBodyCoupling, RigidBodyImpulse};
    pub use crate::selection::VertexSelection;
    pub use crate::sim::{FreezeReason, MeshError, TetMesh, TriangleSurface};
    pub use crate::skin::{SkinFlesh, SkinRegion, SoftSkin, SoftSkinError, SoftSkinStatus};
    pub use crate::status::{BodyError, BodyStatus};
    pub use crate::tuning::{
        LoadTuning, MaterialPreset, SaveTuning, SceneTuning, TuningFile, TuningPlugin,
    };
}
