//! # bevy_deformable
//!
//! Volumetric soft bodies for Bevy: tetrahedral meshes simulated with Projective Dynamics, contact
//! with obstacles solved as quadratic programs by MPRGP, and friction.
//!
//! The simulation core lives in [`sim`] and is plain Rust (no Bevy types): it can be used and
//! tested on its own. See `README.md` for the algorithms and their trade-offs.

#![warn(missing_docs)]
// `!(x > 0.0)` is deliberate throughout: it is also true for NaN, which must be rejected too.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod sim;
