//! The simulation core: plain Rust, `f64`, no Bevy.
//!
//! Everything here takes plain arrays (`&[Vec3]`, indices) and is unit-tested and benchmarked on
//! its own; the ECS layer converts at the boundary once per step (see `docs/ARCHITECTURE.md`).
//!
//! | module | what |
//! | --- | --- |
//! | [`mesh`] | [`TetMesh`]: rest geometry, validation, boundary surface, lattice builders |
//! | [`mesh_io`] | TetGen `.node`/`.ele`, Gmsh `.msh` and Wavefront `.obj` readers |
//! | [`surface`] | closed triangle surfaces and the tet cage that encloses them |
//! | [`cloth`] | triangle-mesh cloth stepped on its own by prefactored PD (not in the world yet) |
//! | [`embed`] | points carried by a tet mesh with barycentric weights (render meshes, the grab) |
//! | [`material`] | [`MaterialParams`] and its Lame parameters |
//! | [`math`] | the `f64` vector and matrix types |
//! | [`polar`] | signed SVD and polar decomposition of 3x3 matrices |
//! | [`pd`] | Projective Dynamics: local step, global matrix, prefactored solve, grab spring |
//! | [`pick`] | ray casts against deformed body surfaces (mouse picking) |
//! | [`sparse`] | symmetric sparse matrix and faer sparse Cholesky (its nested-dissection ordering and two-thread triangular solves inside) |
//! | [`fem`] | finite-element energies, gradients and SPD-projected Hessians (the Newton solver) |
//! | [`qp`] | MPRGP and dual PGS for contact-constrained QPs |
//! | [`skin`] | soft flesh on skinned meshes: region cages, skinning targets, skinned write-back |
//! | [`contact`] | obstacles (parry3d shapes), detection, decoupled constraint rows |
//! | [`world`] | [`SoftWorld`]: bodies, obstacles, the step and its report |
//! | [`kernels`] | inner kernels re-exported for the benches only (not a stable API) |
//!
//! Internal to the crate (not part of the API):
//!
//! | module | what |
//! | --- | --- |
//! | `lanes` | eight `f64` lanes and masks for the vectorised kernels |
//! | `nearest` | nearest points of a fixed point set through a uniform grid (skinning weights, drawn-surface slack) |
//! | `polar_lanes` | the signed SVD eight matrices at a time |
//! | `local_step` | the vectorised PD local step over tets in blocks of eight |
//! | `volume_stretches` | the volume term's projection onto `s1 s2 s3 = 1` (scalar and lanes) |
//! | `inverse_columns` | cached columns of a body's `A^-1` for contact-subspace QPs |
//! | `prone` | a large body's collision-prone region, ordered last in its factor, and `A^-1` over it (localized contact) |
//! | `lattice` | the lattice tet-mesh builder behind the cuboid, sphere, capsule and cage meshes |
//! | `clone_by_field` | `clone_by_field!`: `Clone` whose `clone_from` reuses every field's buffers |

#[macro_use]
mod clone_by_field;
pub mod cloth;
pub mod contact;
pub mod embed;
pub mod fem;
pub(crate) mod inverse_columns;
pub mod kernels;
pub(crate) mod lanes;
pub(crate) mod lattice;
pub(crate) mod local_step;
pub mod material;
pub mod math;
pub mod mesh;
pub mod mesh_io;
pub(crate) mod nearest;
/// The Wavefront `.obj` reader, at its old path; it lives in [`mesh_io`] with the other readers.
pub mod obj {
    pub use super::mesh_io::{RawSurface, read_obj};
}
pub mod pd;
pub mod pick;
pub mod polar;
pub(crate) mod polar_lanes;
pub(crate) mod prone;
pub mod qp;
pub mod skin;
pub mod sparse;
pub mod surface;
mod surface_error;
#[cfg(test)]
mod test_rng;
mod volume_stretches;
pub mod world;

pub use contact::obstacle::{ObstacleCollider, ObstacleError, ObstacleShape};
pub use contact::rigid::{CouplingResponse, RigidCoupling};
pub use embed::EmbeddedPoint;
pub use fem::FemModel;
pub use material::{
    CombineRule, MaterialError, MaterialParams, STRAIN_DAMPING, StrainLimitParams,
    SurfaceCoefficients,
};
pub use math::{Mat3, Vec3};
pub use mesh::{MeshError, TetMesh};
pub use pd::PointSpring;
pub use pick::SurfaceHit;
pub use surface::{SurfaceError, TriangleSurface};
pub use world::{
    BodyDesc, BodyHandle, BodyStepStats, ContactPoint, DEFAULT_CHEBYSHEV_RHO,
    DEFAULT_LOCALIZED_MIN_VERTICES, DEFAULT_MPRGP_TOLERANCE, DEFAULT_NEWTON_ITERATIONS,
    DEFAULT_PD_TOLERANCE, EnergyAudit, FreezeReason, MAX_ANDERSON_WINDOW, MAX_DRAWN_EXTRAPOLATION,
    MAX_NEWTON_ITERATIONS, MAX_PD_ITERATIONS, MAX_SUBSTEPS, ObstacleHandle, SAVED_WORLD_VERSION,
    SUGGESTED_ANDERSON_WINDOW, SavedBody, SavedContacts, SavedObstacle, SavedWorld,
    SavedWorldError, Settling, Sleeping, SnapshotError, SoftWorld, Solver, StepReport, WorldError,
    WorldSettings, WorldSnapshot,
};
