//! Finite-element elasticity for the Newton solver (Li et al. 2015,
//! eq. 4-7: one Newton step of implicit Euler on a hyperelastic energy per time step).
//!
//! Where Projective Dynamics ([`crate::sim::pd`]) keeps a constant matrix and pays for it with
//! many cheap iterations, the Newton solver linearizes the true elastic forces: it needs the
//! energy, its gradient and its Hessian, made positive semi-definite per element so that the
//! Newton matrix `M/h^2 + K` is always positive definite.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`energy`] | isotropic energy densities in the signed singular values, and the derivatives of the analytic eigensystem |
//! | [`element`] | one tet: energy, gradient, stress-derivative eigensystem, projected Hessian |
//! | `assembly` (internal) | the Newton matrix's fixed pattern and the scatter of the element blocks |
//! | [`newton`] | Newton's method with a line search on one body's incremental potential, no contact |
//! | `scaled_blocks` (internal) | the Jacobi-scaled Newton matrix as 3x3 blocks, for MPRGP's products |
//! | [`constrained`] | Newton iterations whose steps are contact QPs (eq. 8), solved by MPRGP |
//! | [`stepping`] | the pieces of a Newton iteration for a caller that owns the loop (the world's step) |

pub(crate) mod assembly;
pub mod constrained;
pub mod element;
pub mod energy;
pub mod newton;
pub(crate) mod scaled_blocks;
pub mod stepping;

pub use energy::{FemModel, Lame};
pub use newton::{
    NewtonSettings, NewtonSetup, NewtonSetupError, NewtonStats, NewtonSystem, Potential,
};
