//! [`ObstacleError`], why an obstacle could not be built, and the size range an obstacle
//! accepts. A leaf: the obstacle itself ([`super::obstacle`]) and the rigid body behind a coupled
//! obstacle ([`super::rigid`]) both validate against it.

use thiserror::Error;

/// Why an obstacle could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ObstacleError {
    /// A size, coordinate, pose or velocity is not finite, a size or coordinate is out of the
    /// range parry's `f32` geometry resolves ([`MIN_OBSTACLE_SIZE`] to
    /// [`MAX_OBSTACLE_EXTENT`]), or a rotation is not a unit quaternion.
    #[error("obstacle {what} must be finite{positive} and within 1e6 m, got {value}", positive = if *.positive { ", >= 1e-6" } else { "" })]
    InvalidValue {
        /// Which parameter.
        what: &'static str,
        /// The offending value.
        value: f64,
        /// Whether it had to be positive.
        positive: bool,
    },
    /// A convex hull needs at least four non-coplanar points.
    #[error("the convex hull of {0} points is degenerate")]
    DegenerateHull(usize),
    /// A half-space normal given to [`ObstacleCollider::new`](super::ObstacleCollider::new) is not of unit length
    /// ([`ObstacleCollider::halfspace`](super::ObstacleCollider::halfspace) normalises it).
    #[error("half-space normal must be a unit vector, got length {0}")]
    UnnormalizedNormal(f64),
    /// The triangle mesh is empty or has invalid indices.
    #[error("invalid triangle mesh: {0}")]
    InvalidTriMesh(String),
    /// The height field grid is smaller than 2x2 or the heights do not fill it.
    #[error(
        "height field needs rows, cols >= 2 and rows*cols heights; got {rows}x{cols} with {len}"
    )]
    InvalidHeightField {
        /// Rows given.
        rows: usize,
        /// Columns given.
        cols: usize,
        /// Heights given.
        len: usize,
    },
}

/// Largest obstacle size or coordinate (m) accepted: parry evaluates shapes in `f32`, which
/// at 1e6 m still resolves 6 cm; past it contacts lose their meaning, and past about 3e38 the
/// value overflows to infinity.
pub const MAX_OBSTACLE_EXTENT: f64 = 1e6;

/// Smallest obstacle size (m) accepted (a radius, a half extent, a height-field scale):
/// smaller ones underflow `f32`'s precision against the coordinates they sit at.
pub const MIN_OBSTACLE_SIZE: f64 = 1e-6;
