//! Bevy-typed constructors of [`DeformableBody`]: lattice boxes, balls and capsules sized in
//! Bevy's `f32` units, and cages around a Bevy [`Mesh`], so that game code never builds the
//! core's `f64` (nalgebra) vectors itself.
//!
//! Each constructor validates its sizes before anything is allocated and returns the core's
//! typed error: a size that is not finite and positive, or a lattice past
//! [`crate::sim::mesh::MAX_LATTICE_CELLS`].
//!
//! ```
//! use bevy::prelude::*;
//! use bevy_deformable::prelude::*;
//!
//! fn spawn(mut commands: Commands) {
//!     // A jelly cube of 0.5 m, 6 lattice cells along each side.
//!     commands.spawn((
//!         DeformableBody::cuboid(Vec3::splat(0.25), 6).expect("valid size"),
//!         SoftMaterial::JELLY,
//!         Transform::from_xyz(0.0, 2.0, 0.0),
//!     ));
//! }
//! ```

use bevy::math::Vec3;
use bevy::mesh::Mesh;
use thiserror::Error;

use crate::components::DeformableBody;
use crate::convert::to_sim;
use crate::embedding::{MeshSurfaceError, surface_from_mesh};
use crate::sim::{MeshError, TetMesh};

/// Why [`DeformableBody::from_mesh`] could not build a cage around a mesh.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MeshBodyError {
    /// The mesh is not a closed triangle surface.
    #[error(transparent)]
    Surface(#[from] MeshSurfaceError),
    /// The cage could not be built.
    #[error(transparent)]
    Cage(#[from] MeshError),
}

impl DeformableBody {
    /// A box centred on the entity's `Transform` with `half_extents` (m), `cells` lattice cells
    /// along its longest side (at least 1).
    ///
    /// # Errors
    /// [`MeshError::InvalidSize`] for a half extent that is not finite and positive,
    /// [`MeshError::TooManyCells`] for too fine a lattice.
    pub fn cuboid(half_extents: Vec3, cells: usize) -> Result<Self, MeshError> {
        Ok(Self::from(TetMesh::try_cuboid(
            to_sim(half_extents),
            cells,
        )?))
    }

    /// A ball of `radius` (m), `cells` lattice cells across its diameter (at least 2); its
    /// boundary vertices lie on the sphere.
    ///
    /// # Errors
    /// As [`DeformableBody::cuboid`].
    pub fn sphere(radius: f32, cells: usize) -> Result<Self, MeshError> {
        Ok(Self::from(TetMesh::try_sphere(radius as f64, cells)?))
    }

    /// A capsule along the entity's local +Y: a cylinder of `radius` (m) from `-half_height` to
    /// `half_height` (m) with hemispherical caps, `cells` lattice cells across its diameter.
    ///
    /// # Errors
    /// As [`DeformableBody::cuboid`].
    pub fn capsule(radius: f32, half_height: f32, cells: usize) -> Result<Self, MeshError> {
        Ok(Self::from(TetMesh::try_capsule(
            radius as f64,
            half_height as f64,
            cells,
        )?))
    }

    /// A coarse lattice cage that strictly bounds a closed triangle-list `mesh`, `cells_across`
    /// cells along the longest side of its bounding box (see [`TetMesh::try_enclosing`]).
    /// Spawn it with the same mesh as its `Mesh3d`: the plugin embeds the mesh's vertices in
    /// the cage and draws the mesh deformed by it.
    ///
    /// # Errors
    /// [`MeshBodyError::Surface`] for a mesh without positions, of another topology or not
    /// closed; [`MeshBodyError::Cage`] if the cage cannot be built.
    pub fn from_mesh(mesh: &Mesh, cells_across: usize) -> Result<Self, MeshBodyError> {
        let surface = surface_from_mesh(mesh)?;
        Ok(Self::from(TetMesh::try_enclosing(&surface, cells_across)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::TetMeshSource;
    use bevy::math::primitives::Sphere;
    use bevy::mesh::{Meshable, PrimitiveTopology};

    fn mesh_of(body: &DeformableBody) -> &TetMesh {
        match &body.mesh {
            TetMeshSource::Mesh(mesh) => mesh,
            TetMeshSource::Asset(_) => panic!("a built mesh"),
        }
    }

    #[test]
    fn shapes_match_the_core_builders() {
        let half = Vec3::new(0.3, 0.2, 0.1);
        let cuboid = DeformableBody::cuboid(half, 5).unwrap();
        // The same sizes, rounded to f32 as the game's are.
        let core = TetMesh::cuboid(to_sim(half), 5);
        assert_eq!(mesh_of(&cuboid).rest_positions(), core.rest_positions());
        assert_eq!(mesh_of(&cuboid).tets(), core.tets());
        let sphere = DeformableBody::sphere(0.25, 6).unwrap();
        assert_eq!(
            mesh_of(&sphere).rest_positions(),
            TetMesh::sphere(0.25, 6).rest_positions()
        );
        let capsule = DeformableBody::capsule(0.1, 0.2, 4).unwrap();
        assert_eq!(
            mesh_of(&capsule).tets(),
            TetMesh::capsule(0.1, 0.2, 4).tets()
        );
    }

    #[test]
    fn invalid_sizes_are_typed_errors() {
        assert!(matches!(
            DeformableBody::cuboid(Vec3::new(0.3, f32::NAN, 0.1), 5),
            Err(MeshError::InvalidSize { .. })
        ));
        assert!(matches!(
            DeformableBody::sphere(-1.0, 5),
            Err(MeshError::InvalidSize { .. })
        ));
        assert!(matches!(
            DeformableBody::capsule(0.1, f32::INFINITY, 5),
            Err(MeshError::InvalidSize { .. })
        ));
        assert!(matches!(
            DeformableBody::cuboid(Vec3::splat(0.5), 100_000),
            Err(MeshError::TooManyCells { .. })
        ));
    }

    #[test]
    fn a_cage_bounds_the_mesh_it_is_built_around() {
        let mesh = Sphere::new(0.5).mesh().ico(3).unwrap();
        let body = DeformableBody::from_mesh(&mesh, 6).unwrap();
        let (lo, hi) = mesh_of(&body).rest_bounds();
        assert!(lo.iter().all(|&c| c < -0.5) && hi.iter().all(|&c| c > 0.5));
        let lines = Mesh::new(PrimitiveTopology::LineList, Default::default());
        assert!(matches!(
            DeformableBody::from_mesh(&lines, 6),
            Err(MeshBodyError::Surface(MeshSurfaceError::NotTriangleList(_)))
        ));
    }
}
