//! [`SurfaceError`], why a triangle surface was rejected. A leaf: the surface reader
//! ([`super::surface`]) returns it, and [`super::mesh::MeshError::Surface`] wraps it for
//! [`super::TetMesh::try_enclosing`].

use thiserror::Error;

use super::mesh_io::MeshIoError;

/// Why a triangle surface was rejected. Indices refer to the input as given.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SurfaceError {
    /// No vertices or no triangles.
    #[error("the surface is empty ({vertices} vertices, {triangles} triangles)")]
    Empty {
        /// Number of vertices given.
        vertices: usize,
        /// Number of triangles given.
        triangles: usize,
    },
    /// A vertex coordinate is NaN or infinite.
    #[error("surface vertex {vertex} has a non-finite coordinate {position:?}")]
    NonFiniteVertex {
        /// Index of the vertex.
        vertex: usize,
        /// Its coordinates.
        position: [f64; 3],
    },
    /// A triangle names a vertex that does not exist.
    #[error(
        "triangle {triangle} references vertex {index}, but the surface has {vertex_count} vertices"
    )]
    IndexOutOfRange {
        /// Index of the triangle.
        triangle: usize,
        /// The offending index.
        index: usize,
        /// Number of vertices.
        vertex_count: usize,
    },
    /// The surface is not closed: some edge does not have exactly two triangles (after welding
    /// vertices at equal positions), so inside and outside are undefined.
    #[error(
        "the surface is not closed: {edges} edges are open or shared by more than two triangles \
         (e.g. between vertices {example:?})"
    )]
    NotClosed {
        /// Number of edges without exactly two triangles.
        edges: usize,
        /// One such edge (input vertex indices).
        example: [usize; 2],
    },
    /// The surface encloses (almost) no volume.
    #[error("the surface encloses no volume ({volume:e} m^3)")]
    ZeroVolume {
        /// The enclosed volume (m^3).
        volume: f64,
    },
    /// parry3d rejected the triangles.
    #[error("the surface cannot be indexed for distance queries: {0}")]
    Index(String),
    /// A surface file could not be parsed.
    #[error("surface file: {0}")]
    Io(#[from] MeshIoError),
}
