//! Cloth: thin triangle-mesh bodies stepped by Projective Dynamics with a prefactored matrix,
//! the solids' method on a surface (Bouaziz et al. 2014; the seed notes on mass-spring, PBD and
//! PD cloth).
//!
//! | file | what |
//! | --- | --- |
//! | `mesh.rs` | [`ClothMesh`]: a checked triangle mesh at rest and its hinges; the rectangle builder |
//! | `membrane.rs` | in-plane elasticity: the triangles' 3 x 2 deformation gradients, their SVD, and the as-rigid-as-possible and strain-limit projections |
//! | `bending.rs` | the quadratic bending model (a constant matrix per hinge) |
//! | `system.rs` | [`ClothSystem`]: one cloth's implicit step: pins, gravity, wind and drag, damping |
//!
//! What it is not yet: part of a [`crate::sim::SoftWorld`] (a cloth is stepped on its own),
//! in contact with anything, or drawn by the Bevy layer; the dihedral-angle bending model for
//! pre-bent rest shapes is not in either. The local step runs triangle by triangle on one
//! thread: a 32 x 32 cloth (1,089 vertices, pinned along an edge, in wind) steps in 2.0 ms and
//! a 64 x 64 one in 9.1 ms at 1/60 s with ten iterations (one thread, this project's 2-core
//! machine).
//!
//! The strain limits' stiffness is part of the prefactored matrix, so a stiffer limit holds
//! the stretch closer but converges slower at a fixed iteration count: at 10 iterations a
//! 1 m sheet hung by two corners with a 1e5 N/m limit still crept down 0.1 m a second after
//! 10 s, where 1e3-1e4 N/m let it hang within 1-2 s ([`ClothMaterial::COTTON`] uses 2e3).

mod bending;
mod membrane;
mod mesh;
mod system;

pub use bending::{bending_energy, hinge_weights};
pub use membrane::{RestTriangle, compose, svd32};
pub use mesh::{ClothMesh, ClothMeshError, Hinge};
pub use system::{ClothError, ClothMaterial, ClothSystem};
