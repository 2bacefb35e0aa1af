//! Soft flesh on skinned characters: put [`SoftSkin`] on an entity with Bevy's
//! [`SkinnedMesh`](bevy::mesh::skinning::SkinnedMesh) (a glTF character's mesh primitive, or one
//! built in code) and its regions (a belly, cheeks, a tail) become soft bodies that follow the
//! animation, lag, jiggle and squash on contact, while the rest of the mesh stays skinned by the
//! engine.
//!
//! ```
//! use bevy::prelude::*;
//! use bevy::mesh::skinning::SkinnedMesh;
//! use bevy_deformable::prelude::*;
//!
//! /// Once a character's scene has spawned: its belly and tail become soft.
//! fn soften(mut commands: Commands, skinned: Query<Entity, Added<SkinnedMesh>>) {
//!     for entity in &skinned {
//!         commands.entity(entity).insert(SoftSkin::new(vec![
//!             SkinRegion::new("belly", ["belly"]),
//!             SkinRegion::new("tail", ["tail_1"]).with_bone_frequency(4.0),
//!         ]));
//!     }
//! }
//! ```
//!
//! # How
//! The algorithm is in [`crate::sim::skin`]; this module is the glue:
//!
//! 1. **Build** (the plugin's Sync set, once the mesh, its inverse bind poses and the joints'
//!    names are there): per region, the vertices whose skin weight on the region's joints (a
//!    named joint and every joint below it) is at least [`SkinRegion::min_weight`], a cage around
//!    them ([`crate::sim::skin::region_cage`]), and a flesh entity carrying a
//!    [`DeformableBody`](crate::components::DeformableBody) of that cage, the region's
//!    [`SoftMaterial`] and a [`SkinFlesh`]. The skinned entity gets its own copy of the mesh
//!    (other instances of the asset stay as they are) and a [`SoftSkinStatus`].
//! 2. **Drive** (Sync, after the bodies exist): every cage vertex's skinning target for the
//!    joints' current `GlobalTransform`s; on the first step (and after a `ResetScene`) the cage
//!    is placed on its targets, the region's vertices become its collision proxies and the bone
//!    springs are attached; then only the targets move.
//! 3. **Record** (Writeback): the cage's displacement from its targets at each region vertex.
//! 4. **Draw** (`PostUpdate`, after transform propagation): the region's vertices written in
//!    bind space so the GPU's skinning draws them displaced (blended between the last two fixed
//!    steps like the bodies), normals turned with the surface.
//!
//! The flesh entity is an ordinary body: the inspector lists it (its material and
//! [`SkinFlesh`]'s spring frequencies are live), its
//! [`DeformableState`](crate::components::DeformableState) reports it, and it
//! collides with obstacles by the region's own mesh vertices (and the cage vertices inside the
//! mesh), and with other bodies by its drawn skin: the region's vertices and triangles
//! ([`crate::sim::SoftWorld::set_drawn_mesh_with_colliders`]), not the cage's surface, which
//! lies up to a cell outside the mesh. The regions of one skin share a collision group: they
//! overlap where they meet and never push each other. A cloth meets the flesh's cage (a drawn
//! patch is open, and the cloth's obstacles are closed surfaces).

mod build;
mod draw;
mod drive;

pub(crate) use build::build_soft_skins;
pub(crate) use draw::draw_soft_skins;
pub(crate) use drive::{drive_soft_skins, record_skin_displacements};

use bevy::asset::Handle;
use bevy::ecs::entity::Entity;
use bevy::math::Mat4;
use bevy::mesh::Mesh;
use bevy::prelude::{Component, Reflect, ReflectComponent, ReflectDefault};
use thiserror::Error;

use crate::components::SoftMaterial;
use crate::sim;
use crate::sim::skin::{SkinDrive, SkinError, SkinnedWriteback};

/// Soft regions of a skinned mesh. Put it on the entity that has the
/// [`SkinnedMesh`](bevy::mesh::skinning::SkinnedMesh) and `Mesh3d`; the plugin builds the regions
/// once the mesh has loaded and reports in [`SoftSkinStatus`]. The regions are read once: to
/// change them, remove the component and insert a new one (the flesh entities are despawned and
/// rebuilt); a skin that failed is tried again when the component is edited.
#[derive(Component, Reflect, Debug, Clone, Default)]
#[reflect(Component, Default, Clone)]
#[require(SoftSkinStatus)]
pub struct SoftSkin {
    /// The regions to simulate.
    pub regions: Vec<SkinRegion>,
}

impl SoftSkin {
    /// Soft regions.
    pub fn new(regions: Vec<SkinRegion>) -> Self {
        Self { regions }
    }

    /// The whole mesh as one soft region named `name` (for any character: nothing to know about
    /// its skeleton).
    pub fn whole(name: &str) -> Self {
        Self::new(vec![SkinRegion::new(name, Vec::<String>::new())])
    }
}

/// One soft region of a skinned mesh and its settings.
#[derive(Reflect, Debug, Clone, PartialEq)]
#[reflect(Default, Clone)]
pub struct SkinRegion {
    /// A name for the flesh entity (`"<name> flesh"`) and for messages.
    pub name: String,
    /// Joints (by their `Name`) whose skinned vertices are the region: each named joint and
    /// every joint below it. Empty: the whole mesh.
    pub joints: Vec<String>,
    /// A vertex is in the region when its skin weight on those joints is at least this, in
    /// (0, 1]. Default: 0.5.
    pub min_weight: f32,
    /// Over this much weight above `min_weight` a vertex blends from skinned (at `min_weight`)
    /// to fully simulated, so the region's edge has no seam; >= 0 (0: a hard edge). Default: 0.3.
    pub blend_width: f32,
    /// Lattice cells along the longest side of the region's bounds, >= 2. Default: 6.
    pub cells_across: u32,
    /// How deep the flesh reaches under the region's surface, in cells, >= 1 (infinite: the
    /// whole solid of a closed mesh). Default: 2.
    pub depth_cells: f32,
    /// The flesh's material. Default: [`SoftMaterial::FLESH`].
    pub material: SoftMaterial,
    /// Spring frequency (Hz, >= 0) of cage vertices near a bone: how hard the skeleton holds the
    /// flesh. Default: 10.
    pub bone_frequency: f32,
    /// Spring frequency (Hz, >= 0) of cage vertices far from the bones (0: held only by the
    /// flesh). Default: 2.
    pub surface_frequency: f32,
    /// Cage vertices within this many cells of a bone get the bone frequency (beyond twice it,
    /// the surface frequency), > 0. Default: 1.5.
    pub bone_radius_cells: f32,
}

impl Default for SkinRegion {
    fn default() -> Self {
        Self {
            name: "flesh".into(),
            joints: Vec::new(),
            min_weight: 0.5,
            blend_width: 0.3,
            cells_across: 6,
            depth_cells: 2.0,
            material: SoftMaterial::FLESH,
            bone_frequency: 10.0,
            surface_frequency: 2.0,
            bone_radius_cells: 1.5,
        }
    }
}

impl SkinRegion {
    /// A region named `name` of the vertices skinned to `joints` (and the joints below them),
    /// with default settings.
    pub fn new<S: Into<String>>(name: &str, joints: impl IntoIterator<Item = S>) -> Self {
        Self {
            name: name.into(),
            joints: joints.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Builder: the flesh's material.
    pub fn with_material(mut self, material: SoftMaterial) -> Self {
        self.material = material;
        self
    }

    /// Builder: the bone springs' frequency (Hz).
    pub fn with_bone_frequency(mut self, hz: f32) -> Self {
        self.bone_frequency = hz;
        self
    }

    /// Builder: the surface springs' frequency (Hz).
    pub fn with_surface_frequency(mut self, hz: f32) -> Self {
        self.surface_frequency = hz;
        self
    }

    /// Builder: cells across the region and the flesh depth in cells.
    pub fn with_cells(mut self, cells_across: u32, depth_cells: f32) -> Self {
        self.cells_across = cells_across;
        self.depth_cells = depth_cells;
        self
    }

    /// Builder: the weight threshold and blend width.
    pub fn with_weights(mut self, min_weight: f32, blend_width: f32) -> Self {
        self.min_weight = min_weight;
        self.blend_width = blend_width;
        self
    }
}

/// On a flesh entity (spawned by the plugin for a [`SkinRegion`]): which skin it belongs to and
/// its spring frequencies, editable live (the springs are re-attached when they change).
#[derive(Component, Reflect, Debug, Clone, PartialEq)]
#[reflect(Component, Clone)]
pub struct SkinFlesh {
    /// The skinned entity.
    pub skin: Entity,
    /// The region's index in its [`SoftSkin::regions`].
    pub region: usize,
    /// Spring frequency (Hz) near the bones.
    pub bone_frequency: f32,
    /// Spring frequency (Hz) away from the bones.
    pub surface_frequency: f32,
}

/// Where a [`SoftSkin`] stands.
#[derive(Component, Debug, Clone, Default, PartialEq)]
pub enum SoftSkinStatus {
    /// Waiting for the mesh, its inverse bind poses or the joints.
    #[default]
    Waiting,
    /// Built: one flesh entity per region, in order.
    Ready(Vec<Entity>),
    /// Could not be built (nothing of it is simulated).
    Failed(SoftSkinError),
}

/// Why a [`SoftSkin`] could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SoftSkinError {
    /// The entity has no `Mesh3d` or `SkinnedMesh`.
    #[error("the entity has no {0}")]
    MissingComponent(&'static str),
    /// The mesh lacks a vertex attribute the skin needs, or has it in another format.
    #[error("the mesh has no {0} attribute in the expected format")]
    MissingAttribute(&'static str),
    /// The mesh is not an indexed or plain triangle list.
    #[error("the mesh is not a triangle list")]
    NotTriangleList,
    /// The mesh's data lives only in the render world (`RenderAssetUsages::RENDER_WORLD`).
    #[error("the mesh's data is not in the main world (RenderAssetUsages without MAIN_WORLD)")]
    MeshNotInMainWorld,
    /// The skin has fewer inverse bind poses than joints.
    #[error("the skin has {joints} joints but {bindposes} inverse bind poses")]
    Bindposes {
        /// Joints in the skin.
        joints: usize,
        /// Inverse bind poses in its asset.
        bindposes: usize,
    },
    /// A region names a joint the skin does not have.
    #[error("region {region:?} names joint {joint:?}, which the skin does not have")]
    UnknownJoint {
        /// The region.
        region: String,
        /// The joint name.
        joint: String,
    },
    /// A region has a setting out of range or its cage, drive or write-back failed.
    #[error("region {region:?}: {error}")]
    Region {
        /// The region.
        region: String,
        /// What went wrong.
        error: SkinError,
    },
}

/// What the plugin keeps of a built skin (on the skinned entity).
#[derive(Component)]
pub(crate) struct SkinRuntime {
    /// The skin's joints, in skin order.
    joints: Vec<Entity>,
    /// Their inverse bind poses.
    inverse_bindposes: Vec<Mat4>,
    /// The joints' skinning matrices (scratch, per use).
    joint_matrices: Vec<sim::skin::Affine>,
    /// The skinned entity's own copy of its mesh, written each frame.
    mesh: Handle<Mesh>,
    /// The mesh it had before (restored when the [`SoftSkin`] is removed).
    original: Handle<Mesh>,
    regions: Vec<RegionRuntime>,
}

impl SkinRuntime {
    /// Updates the joints' skinning matrices from their world transforms (`global` of a joint
    /// entity); false, leaving them as they were, while any joint has none.
    fn pose_joints(
        &mut self,
        global: impl Fn(Entity) -> Option<bevy::prelude::GlobalTransform>,
    ) -> bool {
        let mut posed = true;
        for (j, (&joint, inverse)) in self.joints.iter().zip(&self.inverse_bindposes).enumerate() {
            match global(joint) {
                Some(g) => self.joint_matrices[j] = joint_matrix(&g, inverse),
                None => posed = false,
            }
        }
        posed
    }
}

/// What the plugin keeps of one built region.
struct RegionRuntime {
    flesh: Entity,
    drive: SkinDrive,
    writeback: SkinnedWriteback,
    /// Each cage vertex's distance to the nearest bone (bind space, m) and the bone radius.
    bone_distance: Vec<f64>,
    bone_radius: f64,
    /// Cage vertices inside the mesh: they collide with obstacles besides the region's
    /// vertices (the others lie outside the drawn surface).
    inner_vertices: Vec<u32>,
    /// The mesh's triangles with every corner written (indices into the written vertices),
    /// degenerate ones left out: the drawn skin other bodies meet.
    drawn_triangles: Vec<[u32; 3]>,
    /// The cage's skinning targets of the last step (m), and of the step before when
    /// `previous_valid` (a cage placed again after a reset starts with their velocity).
    targets: Vec<sim::Vec3>,
    targets_previous: Vec<sim::Vec3>,
    previous_valid: bool,
    stiffness: Vec<f64>,
    /// The frequencies and density the springs were attached with.
    springs: Option<[f32; 3]>,
    placed: bool,
    /// Displacements at the region's vertices after the last two steps (m).
    displacement_previous: Vec<sim::Vec3>,
    displacement_current: Vec<sim::Vec3>,
    /// Scratch: the blend of the two drawn this frame.
    displacement_drawn: Vec<sim::Vec3>,
}

/// The skinning matrix of each joint: its world transform times its inverse bind pose.
fn joint_matrix(
    global: &bevy::prelude::GlobalTransform,
    inverse_bindpose: &Mat4,
) -> sim::skin::Affine {
    let m = global.to_matrix() * *inverse_bindpose;
    let c = m.to_cols_array();
    sim::skin::Affine {
        linear: sim::Mat3::new(
            c[0] as f64,
            c[4] as f64,
            c[8] as f64,
            c[1] as f64,
            c[5] as f64,
            c[9] as f64,
            c[2] as f64,
            c[6] as f64,
            c[10] as f64,
        ),
        translation: sim::Vec3::new(c[12] as f64, c[13] as f64, c[14] as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::math::{Quat, Vec3};
    use bevy::prelude::{GlobalTransform, Transform};

    #[test]
    fn joint_matrices_match_glam() {
        let global = GlobalTransform::from(
            Transform::from_xyz(1.0, 2.0, 3.0)
                .with_rotation(Quat::from_rotation_y(0.7))
                .with_scale(Vec3::new(1.0, 2.0, 0.5)),
        );
        let ibp = Mat4::from_translation(Vec3::new(0.1, -0.2, 0.3));
        let m = joint_matrix(&global, &ibp);
        let p = Vec3::new(0.4, -0.5, 0.6);
        let want = (global.to_matrix() * ibp).transform_point3(p);
        let got = m.transform_point(&sim::Vec3::new(0.4, -0.5, 0.6));
        assert!((got - sim::Vec3::new(want.x as f64, want.y as f64, want.z as f64)).norm() < 1e-5);
    }
}
