//! Detailed render meshes driven by coarse soft bodies.
//!
//! A game's detailed mesh (a character, a scanned prop) is wrapped in a coarse tet cage built by
//! [`TetMesh::try_enclosing`] (see [`crate::sim::surface`]); the plugin embeds every render vertex
//! barycentrically in the cage when the body is created and writes the deformed positions and
//! normals back each frame (the embedded-contact thesis, section 5.7).
//!
//! ```
//! use bevy::prelude::*;
//! use bevy_deformable::embedding::{enclosing_body, mesh_from_surface};
//! use bevy_deformable::prelude::*;
//! use bevy_deformable::sim::TriangleSurface;
//!
//! fn spawn_bunny(mut commands: Commands, mut meshes: ResMut<Assets<Mesh>>) {
//!     let text = include_str!("../assets/meshes/bunny_10k.obj");
//!     let surface = TriangleSurface::from_obj(text).expect("a closed surface");
//!     let body = enclosing_body(&surface, 8).expect("a valid cage");
//!     commands.spawn((
//!         body,
//!         Mesh3d(meshes.add(mesh_from_surface(&surface))),
//!         SoftMaterial::JELLY,
//!         Transform::from_xyz(0.0, 1.0, 0.0).with_scale(Vec3::splat(0.5)),
//!     ));
//! }
//! ```

use bevy::mesh::{Mesh, PrimitiveTopology, VertexAttributeValues};
use thiserror::Error;

use crate::components::DeformableBody;
use crate::convert::to_bevy;
use crate::render;
use crate::sim::{MeshError, SurfaceError, TetMesh, TriangleSurface, Vec3};

/// Why a Bevy [`Mesh`] cannot be turned into a [`TriangleSurface`].
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MeshSurfaceError {
    /// The mesh has no `Float32x3` positions.
    #[error("the mesh has no Float32x3 positions")]
    NoPositions,
    /// The mesh is not a triangle list.
    #[error("the mesh topology is {0:?}, not a triangle list")]
    NotTriangleList(PrimitiveTopology),
    /// The triangles do not form a valid closed surface.
    #[error(transparent)]
    Surface(#[from] SurfaceError),
}

/// A render mesh of a surface: positions, smooth normals and `u32` indices, kept in both worlds
/// so the plugin can rewrite its positions.
pub fn mesh_from_surface(surface: &TriangleSurface) -> Mesh {
    let positions: Vec<[f32; 3]> = surface
        .positions()
        .iter()
        .map(|p| to_bevy(p).to_array())
        .collect();
    let indices: Vec<u32> = surface.triangles().iter().flatten().copied().collect();
    render::triangle_mesh(positions, indices)
}

/// The closed surface of a triangle-list render mesh (vertices split along UV seams are welded
/// for the closedness check, see [`TriangleSurface::new`]).
///
/// # Errors
/// [`MeshSurfaceError`] for a mesh without positions, another topology, or an open surface.
pub fn surface_from_mesh(mesh: &Mesh) -> Result<TriangleSurface, MeshSurfaceError> {
    if mesh.primitive_topology() != PrimitiveTopology::TriangleList {
        return Err(MeshSurfaceError::NotTriangleList(mesh.primitive_topology()));
    }
    let Some(VertexAttributeValues::Float32x3(p)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION) else {
        return Err(MeshSurfaceError::NoPositions);
    };
    let positions: Vec<Vec3> = p
        .iter()
        .map(|a| Vec3::new(a[0] as f64, a[1] as f64, a[2] as f64))
        .collect();
    let flat: Vec<usize> = match mesh.indices() {
        Some(indices) => indices.iter().collect(),
        None => (0..positions.len()).collect(),
    };
    let triangles = flat.chunks_exact(3).map(|t| [t[0], t[1], t[2]]).collect();
    Ok(TriangleSurface::new(positions, triangles)?)
}

/// A soft body whose tets are a coarse lattice cage around `surface`, `cells_across` cells along
/// its longest side. Spawn it with the surface's render mesh as its `Mesh3d` to draw the
/// detailed mesh deformed by the cage.
///
/// # Errors
/// A [`MeshError`] if the cage cannot be built.
pub fn enclosing_body(
    surface: &TriangleSurface,
    cells_across: usize,
) -> Result<DeformableBody, MeshError> {
    Ok(DeformableBody::from(TetMesh::try_enclosing(
        surface,
        cells_across,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::asset::RenderAssetUsages;
    use bevy::math::primitives::{Cuboid, Sphere};
    use bevy::mesh::{MeshBuilder, Meshable};

    #[test]
    fn bevy_primitives_round_trip_through_surfaces() {
        // Bevy's cuboid splits every corner into three vertices (one per face normal).
        let cube = surface_from_mesh(&Cuboid::new(1.0, 2.0, 0.5).mesh().build()).unwrap();
        assert!((cube.volume() - 1.0).abs() < 1e-6, "{}", cube.volume());
        let sphere = surface_from_mesh(&Sphere::new(0.5).mesh().ico(3).unwrap()).unwrap();
        let exact = 4.0 / 3.0 * std::f64::consts::PI * 0.125;
        // An inscribed polyhedron: a little less than the ball.
        let v = sphere.volume();
        assert!(v < exact && v > 0.95 * exact, "{v} vs {exact}");
        let mesh = mesh_from_surface(&sphere);
        let again = surface_from_mesh(&mesh).unwrap();
        assert_eq!(again.positions(), sphere.positions());
        assert_eq!(again.triangles(), sphere.triangles());
    }

    #[test]
    fn unusable_meshes_are_typed_errors() {
        let lines = Mesh::new(PrimitiveTopology::LineList, RenderAssetUsages::default());
        assert!(matches!(
            surface_from_mesh(&lines),
            Err(MeshSurfaceError::NotTriangleList(_))
        ));
        let empty = Mesh::new(
            PrimitiveTopology::TriangleList,
            RenderAssetUsages::default(),
        );
        assert_eq!(
            surface_from_mesh(&empty),
            Err(MeshSurfaceError::NoPositions)
        );
    }
}
