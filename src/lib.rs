//! # bevy_deformable
//!
//! Volumetric soft bodies for Bevy: tetrahedral meshes simulated with Projective Dynamics,
//! contact with obstacles and between bodies solved as quadratic programs by MPRGP, and
//! restitution and Coulomb friction from region-separated contact LCPs.
//!
//! - [`sim`]: the simulation core, plain Rust (no Bevy types), usable and tested on its own.
//! - [`DeformablePlugin`] and the [`components`]: the Bevy integration, a thin layer that copies
//!   ECS edits into the core once per fixed step and writes the results back.
//! - [`skin`]: soft flesh on skinned (glTF) characters, driven by their animation.
//! - `DeformableInspectorPlugin` (feature `inspector`, on by default): an egui panel to tune
//!   bodies and settings live, plots of the solver's statistics, debug drawing with gizmos, and
//!   a mouse grab tool. Its non-UI parts ([`grab`], [`history`], [`tuning`]) are always built,
//!   so a game can drive them from its own input, and tests drive them headless.
//!
//! See `README.md` for the algorithms and their trade-offs.

#![warn(missing_docs)]
// `!(x > 0.0)` is deliberate throughout: it is also true for NaN, which must be rejected too.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod assets;
#[cfg(feature = "avian")]
pub mod avian;
pub mod body_shapes;
pub mod components;
pub mod convert;
pub mod diagnostics;
pub mod embedding;
pub mod grab;
pub mod history;
#[cfg(feature = "inspector")]
pub mod inspector;
pub mod messages;
pub mod plugin;
mod render;
pub mod rigid_coupling;
pub mod sim;
pub mod skin;
pub mod status;
pub mod tuning;

pub use plugin::{DeformableConfig, DeformablePlugin, DeformableSystems, DeformableWorld};

/// The types a game needs.
pub mod prelude {
    pub use crate::assets::TetMeshAsset;
    #[cfg(feature = "avian")]
    pub use crate::avian::{DeformableAvianPlugin, DeformableAvianSystems};
    pub use crate::body_shapes::MeshBodyError;
    pub use crate::components::{
        Attachment, CollisionProxy, CombineRule, DeformableBody, DeformableHandle, DeformableState,
        InitialVelocity, Obstacle, Pin, SoftMaterial, StrainLimits,
    };
    pub use crate::diagnostics::DeformableDiagnostics;
    pub use crate::embedding::{enclosing_body, mesh_from_surface, surface_from_mesh};
    pub use crate::grab::{BodyHit, GrabTool, Held};
    pub use crate::history::{StepHistory, StepSample};
    #[cfg(feature = "inspector")]
    pub use crate::inspector::{DeformableInspectorPlugin, InspectorState};
    pub use crate::messages::{
        BodyFrozen, BodySlept, BodyWoke, ContactEnded, ContactStarted, ResetScene,
    };
    pub use crate::plugin::{
        DeformableConfig, DeformablePlugin, DeformableSystems, DeformableWorld, ElasticModel,
        FrictionModel, SolverChoice,
    };
    pub use crate::rigid_coupling::{RigidBodyCoupling, RigidBodyImpulse};
    pub use crate::sim::{FreezeReason, TetMesh, TriangleSurface};
    pub use crate::skin::{SkinFlesh, SkinRegion, SoftSkin, SoftSkinError, SoftSkinStatus};
    pub use crate::status::{BodyError, BodyStatus};
    pub use crate::tuning::{
        LoadTuning, MaterialPreset, SaveTuning, SceneTuning, TuningFile, TuningPlugin,
    };
}
