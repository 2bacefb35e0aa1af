//! [`WorldError`]: why a world operation was refused, and the input checks that return it
//! (`check_finite`, `check_vertex`), used by the facade's edits (`mod.rs`, `desc`, `interact`).
//! A leaf.

use thiserror::Error;

use super::handles::{BodyHandle, ObstacleHandle};
use crate::sim::contact::ObstacleError;
use crate::sim::material::MaterialError;
use crate::sim::math::Vec3;
use crate::sim::mesh::MeshError;

/// Why a world operation was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WorldError {
    /// The material is not physical.
    #[error("invalid material: {0}")]
    Material(#[from] MaterialError),
    /// A body's mesh is invalid after its description's scale.
    #[error("invalid mesh: {0}")]
    Mesh(#[from] MeshError),
    /// The obstacle's pose or velocity is invalid.
    #[error("invalid obstacle: {0}")]
    Obstacle(#[from] ObstacleError),
    /// An obstacle's pose or velocity became invalid after it was added (a non-finite value
    /// written through [`super::SoftWorld::obstacle_mut`]): the step refuses to run.
    #[error("obstacle {obstacle:?} is invalid: {error}")]
    InvalidObstacle {
        /// The obstacle.
        obstacle: ObstacleHandle,
        /// What is wrong with it.
        error: ObstacleError,
    },
    /// No body has this handle (it was removed).
    #[error("no body {0:?}")]
    UnknownBody(BodyHandle),
    /// No obstacle has this handle.
    #[error("no obstacle {0:?}")]
    UnknownObstacle(ObstacleHandle),
    /// A vertex index is out of range.
    #[error("vertex {vertex} out of range: the body has {count} vertices")]
    VertexOutOfRange {
        /// The index given.
        vertex: usize,
        /// Vertices of the body.
        count: usize,
    },
    /// The vertices of an embedded point (those with a non-zero weight) are not corners of one
    /// tet.
    #[error("the point's vertices are not corners of one tet")]
    PointNotInOneTet,
    /// A [`super::WorldSettings`] field is out of its range (see [`super::WorldSettings::validate`]).
    #[error("invalid world setting {what}: {value}")]
    InvalidSetting {
        /// The field.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// A point of a drawn surface lies further outside the body's mesh than
    /// [`super::MAX_DRAWN_EXTRAPOLATION`] ([`super::BodyDesc::drawn_surface`]).
    #[error("drawn surface point {index} lies outside the tet mesh")]
    DrawnPointOutside {
        /// The point's index.
        index: usize,
    },
    /// A drawn surface with no points, or a drawn mesh with no triangles
    /// ([`super::SoftWorld::set_drawn_surface`], [`super::SoftWorld::set_drawn_mesh`]).
    #[error("a drawn surface needs at least one point (and a drawn mesh one triangle)")]
    EmptyDrawnSurface,
    /// A drawn mesh's triangle names a point past the points given
    /// ([`super::SoftWorld::set_drawn_mesh`]).
    #[error("drawn triangle {index} has a corner out of range")]
    DrawnTriangleOutOfRange {
        /// The triangle's index.
        index: usize,
    },
    /// A drawn mesh's triangle repeats a point (after merging repeated points) or has no area
    /// ([`super::SoftWorld::set_drawn_mesh`]).
    #[error("drawn triangle {index} is degenerate")]
    DegenerateDrawnTriangle {
        /// The triangle's index.
        index: usize,
    },
    /// A position, stiffness or time step is not finite (or not positive where required).
    #[error("{what} must be finite{positive}", positive = if *.positive { " and > 0" } else { "" })]
    InvalidValue {
        /// Which input.
        what: &'static str,
        /// Whether it had to be positive.
        positive: bool,
    },
}

/// `Ok` where every coordinate of `v` is finite, else [`WorldError::InvalidValue`] for `what`.
pub(crate) fn check_finite(what: &'static str, v: &Vec3) -> Result<(), WorldError> {
    if v.iter().all(|c| c.is_finite()) {
        Ok(())
    } else {
        Err(WorldError::InvalidValue {
            what,
            positive: false,
        })
    }
}

/// `Ok` where every point's vertices are below `count` and its weights finite, else
/// [`WorldError::VertexOutOfRange`] or [`WorldError::InvalidValue`] for `what` (the weights).
pub(crate) fn check_embedded(
    what: &'static str,
    points: &[crate::sim::embed::EmbeddedPoint],
    count: usize,
) -> Result<(), WorldError> {
    for p in points {
        for k in 0..4 {
            check_vertex(p.vertices[k] as usize, count)?;
            if !p.weights[k].is_finite() {
                return Err(WorldError::InvalidValue {
                    what,
                    positive: false,
                });
            }
        }
    }
    Ok(())
}

/// `Ok` where `vertex` is below `count`, else [`WorldError::VertexOutOfRange`].
pub(crate) fn check_vertex(vertex: usize, count: usize) -> Result<(), WorldError> {
    if vertex < count {
        Ok(())
    } else {
        Err(WorldError::VertexOutOfRange { vertex, count })
    }
}
