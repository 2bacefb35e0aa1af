//! Building a [`SoftSkin`]'s regions once its mesh, inverse bind poses and joints are there, and
//! tearing them down when the component goes.

use std::sync::Arc;

use bevy::asset::{Assets, RenderAssetUsages};
use bevy::ecs::change_detection::DetectChanges;
use bevy::ecs::entity::Entity;
use bevy::ecs::hierarchy::ChildOf;
use bevy::ecs::lifecycle::RemovedComponents;
use bevy::log::warn;
use bevy::mesh::skinning::{SkinnedMesh, SkinnedMeshInverseBindposes};
use bevy::mesh::{Indices, Mesh, Mesh3d, PrimitiveTopology, VertexAttributeValues};
use bevy::prelude::{Commands, Name, Query, Ref, Res, ResMut, Transform, Without};
use bevy::transform::helper::TransformHelper;

use super::{
    RegionRuntime, SkinFlesh, SkinRegion, SkinRuntime, SoftSkin, SoftSkinError, SoftSkinStatus,
    joint_matrix,
};
use crate::components::DeformableBody;
use crate::sim::skin::{
    SkinDrive, SkinError, SkinWeights, SkinnedWriteback, inside_mesh, region_cage, region_cell,
};
use crate::sim::{self, TetMesh};

/// The parts of a skinned mesh the regions are built from (bind space).
struct SkinnedGeometry {
    positions: Vec<sim::Vec3>,
    normals: Option<Vec<sim::Vec3>>,
    triangles: Vec<[u32; 3]>,
    skin: Vec<SkinWeights>,
}

fn geometry(mesh: &Mesh) -> Result<SkinnedGeometry, SoftSkinError> {
    if mesh.primitive_topology() != PrimitiveTopology::TriangleList {
        return Err(SoftSkinError::NotTriangleList);
    }
    let attribute = |id, name| match mesh.try_attribute_option(id) {
        Ok(Some(values)) => Ok(values),
        Ok(None) => Err(SoftSkinError::MissingAttribute(name)),
        Err(_) => Err(SoftSkinError::MeshNotInMainWorld),
    };
    let vec3s = |values: &[[f32; 3]]| -> Vec<sim::Vec3> {
        values
            .iter()
            .map(|p| sim::Vec3::new(p[0] as f64, p[1] as f64, p[2] as f64))
            .collect()
    };
    let VertexAttributeValues::Float32x3(p) = attribute(Mesh::ATTRIBUTE_POSITION, "POSITION")?
    else {
        return Err(SoftSkinError::MissingAttribute("POSITION"));
    };
    let normals = match mesh.try_attribute_option(Mesh::ATTRIBUTE_NORMAL) {
        Ok(Some(VertexAttributeValues::Float32x3(n))) => Some(vec3s(n)),
        _ => None,
    };
    let VertexAttributeValues::Uint16x4(joints) =
        attribute(Mesh::ATTRIBUTE_JOINT_INDEX, "JOINT_INDEX")?
    else {
        return Err(SoftSkinError::MissingAttribute("JOINT_INDEX"));
    };
    let VertexAttributeValues::Float32x4(weights) =
        attribute(Mesh::ATTRIBUTE_JOINT_WEIGHT, "JOINT_WEIGHT")?
    else {
        return Err(SoftSkinError::MissingAttribute("JOINT_WEIGHT"));
    };
    let flat: Vec<u32> = match mesh.try_indices_option() {
        Ok(Some(Indices::U16(i))) => i.iter().map(|&v| v as u32).collect(),
        Ok(Some(Indices::U32(i))) => i.clone(),
        Ok(None) => (0..p.len() as u32).collect(),
        Err(_) => return Err(SoftSkinError::MeshNotInMainWorld),
    };
    Ok(SkinnedGeometry {
        positions: vec3s(p),
        normals,
        triangles: flat.chunks_exact(3).map(|t| [t[0], t[1], t[2]]).collect(),
        skin: joints
            .iter()
            .zip(weights)
            .map(|(&joints, &weights)| SkinWeights { joints, weights })
            .collect(),
    })
}

/// A region's blend weight for a vertex with weight `w` on the region's joints: 0 below
/// `min_weight`, a smoothstep up to 1 over `blend_width` above it.
fn blend_weight(w: f32, min_weight: f32, blend_width: f32) -> f64 {
    if w < min_weight {
        0.0
    } else if blend_width <= 0.0 {
        1.0
    } else {
        let t = ((w - min_weight) / blend_width).clamp(0.0, 1.0) as f64;
        t * t * (3.0 - 2.0 * t)
    }
}

fn check_settings(region: &SkinRegion) -> Result<(), SkinError> {
    let setting = |what, range, value: f32| SkinError::Setting {
        what,
        range,
        value: value as f64,
    };
    if !(region.min_weight > 0.0 && region.min_weight <= 1.0) {
        return Err(setting("min weight", "in (0, 1]", region.min_weight));
    }
    if !(region.blend_width >= 0.0 && region.blend_width.is_finite()) {
        return Err(setting(
            "blend width",
            ">= 0 and finite",
            region.blend_width,
        ));
    }
    if !(region.bone_radius_cells > 0.0 && region.bone_radius_cells.is_finite()) {
        return Err(setting(
            "bone radius (cells)",
            "> 0 and finite",
            region.bone_radius_cells,
        ));
    }
    for (what, f) in [
        ("bone frequency (Hz)", region.bone_frequency),
        ("surface frequency (Hz)", region.surface_frequency),
    ] {
        if !(f >= 0.0 && f.is_finite()) {
            return Err(setting(what, ">= 0 and finite", f));
        }
    }
    Ok(())
}

/// Everything about the skeleton a region needs.
struct Skeleton<'a> {
    names: Vec<Option<&'a str>>,
    /// Each joint's parent among the joints.
    parents: Vec<Option<usize>>,
    /// Bone segments in bind space.
    bones: Vec<[sim::Vec3; 2]>,
    matrices: Vec<sim::skin::Affine>,
}

fn build_region(
    region: &SkinRegion,
    geometry: &SkinnedGeometry,
    skeleton: &Skeleton,
) -> Result<(Arc<TetMesh>, RegionRuntime), SoftSkinError> {
    let fail = |error: SkinError| SoftSkinError::Region {
        region: region.name.clone(),
        error,
    };
    check_settings(region).map_err(fail)?;
    let joints = skeleton.names.len();
    // The named joints and every joint below them.
    let mut chosen = vec![false; joints];
    for name in &region.joints {
        let Some(j) = skeleton
            .names
            .iter()
            .position(|n| *n == Some(name.as_str()))
        else {
            return Err(SoftSkinError::UnknownJoint {
                region: region.name.clone(),
                joint: name.clone(),
            });
        };
        chosen[j] = true;
    }
    let below_chosen: Vec<bool> = (0..joints)
        .map(|mut j| {
            for _ in 0..=joints {
                if chosen[j] {
                    return true;
                }
                match skeleton.parents[j] {
                    Some(p) => j = p,
                    None => return false,
                }
            }
            false
        })
        .collect();
    let weight = |s: &SkinWeights| {
        if region.joints.is_empty() {
            1.0
        } else {
            s.weight_of(&below_chosen)
        }
    };
    let in_region: Vec<bool> = geometry
        .skin
        .iter()
        .map(|s| {
            let w = weight(s);
            w > 0.0 && w >= region.min_weight
        })
        .collect();
    let blend: Vec<f64> = geometry
        .skin
        .iter()
        .map(|s| blend_weight(weight(s), region.min_weight, region.blend_width))
        .collect();
    let cage = region_cage(
        &geometry.positions,
        &geometry.triangles,
        &in_region,
        region.cells_across as usize,
        region.depth_cells as f64,
    )
    .map_err(fail)?;
    let drive = SkinDrive::new(
        cage.rest_positions(),
        &geometry.positions,
        &geometry.skin,
        joints,
    )
    .map_err(fail)?;
    let writeback = SkinnedWriteback::new(
        &geometry.positions,
        geometry.normals.as_deref(),
        &geometry.triangles,
        &geometry.skin,
        joints,
        &blend,
        &cage,
    )
    .map_err(fail)?;
    // The cell the cage was built with, for the bone radius (the region is not empty: the
    // cage was built).
    let cell = region_cell(
        &geometry.positions,
        &in_region,
        region.cells_across as usize,
    )
    .unwrap_or(0.0);
    // The simulated cage has the world's scale: bind space times the skin's scale now.
    let scale = drive.scale(&skeleton.matrices);
    let scaled = cage
        .scaled(sim::Vec3::repeat(scale))
        .map_err(|e| fail(SkinError::Cage(e)))?;
    let vertices = cage.vertex_count();
    let written = writeback.len();
    let inner_vertices = inside_mesh(
        &geometry.positions,
        &geometry.triangles,
        cage.rest_positions(),
    )
    .map(|inside| {
        (0..vertices as u32)
            .filter(|&v| inside[v as usize])
            .collect()
    })
    .unwrap_or_default();
    let drawn_triangles = written_triangles(&geometry.positions, &geometry.triangles, &writeback);
    Ok((
        Arc::new(scaled),
        RegionRuntime {
            flesh: Entity::PLACEHOLDER,
            bone_distance: drive.bone_distances(&skeleton.bones),
            bone_radius: region.bone_radius_cells as f64 * cell,
            inner_vertices,
            drawn_triangles,
            drive,
            writeback,
            targets: vec![sim::Vec3::zeros(); vertices],
            targets_previous: vec![sim::Vec3::zeros(); vertices],
            previous_valid: false,
            stiffness: Vec::new(),
            springs: None,
            placed: false,
            displacement_previous: vec![sim::Vec3::zeros(); written],
            displacement_current: vec![sim::Vec3::zeros(); written],
            displacement_drawn: vec![sim::Vec3::zeros(); written],
        },
    ))
}

/// The triangles of `triangles` whose corners are all written by `writeback`, as indices into
/// its written vertices, without those of no area at the bind `positions` (a cone's tip, or a
/// seam's welded copies: they would meet nothing).
fn written_triangles(
    positions: &[sim::Vec3],
    triangles: &[[u32; 3]],
    writeback: &SkinnedWriteback,
) -> Vec<[u32; 3]> {
    let mut written = vec![u32::MAX; positions.len()];
    for (i, &v) in writeback.vertices().iter().enumerate() {
        written[v as usize] = i as u32;
    }
    triangles
        .iter()
        .filter_map(|t| {
            let w = t.map(|v| written[v as usize]);
            if w.contains(&u32::MAX) {
                return None;
            }
            let [a, b, c] = t.map(|v| positions[v as usize]);
            let longest = [b - a, c - b, a - c]
                .iter()
                .map(|e| e.norm_squared())
                .fold(0.0, f64::max);
            ((b - a).cross(&(c - a)).norm() > 1e-8 * longest).then_some(w)
        })
        .collect()
}

/// Sync: builds every waiting [`SoftSkin`] whose mesh and skin are ready; spawns the flesh
/// entities; tears down the flesh of removed ones.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub(crate) fn build_soft_skins(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    bindposes: Res<Assets<SkinnedMeshInverseBindposes>>,
    mut skins: Query<
        (
            Entity,
            Ref<SoftSkin>,
            &mut SoftSkinStatus,
            Option<&Mesh3d>,
            Option<&SkinnedMesh>,
        ),
        Without<SkinRuntime>,
    >,
    built: Query<&SkinRuntime>,
    orphans: Query<(Entity, &SkinFlesh)>,
    mut removed: RemovedComponents<SoftSkin>,
    names: Query<&Name>,
    parents: Query<&ChildOf>,
    transforms: TransformHelper,
) {
    for entity in removed.read() {
        if let Ok(runtime) = built.get(entity) {
            for region in &runtime.regions {
                commands.entity(region.flesh).despawn();
            }
            if let Ok(mut e) = commands.get_entity(entity) {
                e.remove::<SkinRuntime>()
                    .insert((Mesh3d(runtime.original.clone()), SoftSkinStatus::Waiting));
            }
        }
    }
    // Flesh whose skinned entity was despawned goes with it.
    for (flesh, of) in &orphans {
        if built.get(of.skin).is_err() && skins.get(of.skin).is_err() {
            commands.entity(flesh).despawn();
        }
    }
    for (entity, soft_skin, mut status, mesh3d, skinned) in &mut skins {
        // An edited skin that had failed gets another try.
        if soft_skin.is_changed() && matches!(*status, SoftSkinStatus::Failed(_)) {
            *status = SoftSkinStatus::Waiting;
        }
        if *status != SoftSkinStatus::Waiting {
            continue;
        }
        let (Some(mesh3d), Some(skinned)) = (mesh3d, skinned) else {
            let missing = if mesh3d.is_none() {
                "Mesh3d"
            } else {
                "SkinnedMesh"
            };
            *status = SoftSkinStatus::Failed(SoftSkinError::MissingComponent(missing));
            continue;
        };
        let (Some(mesh), Some(inverse)) = (
            meshes.get(&mesh3d.0),
            bindposes.get(&skinned.inverse_bindposes),
        ) else {
            continue;
        };
        let joints = skinned.joints.len();
        if inverse.len() < joints {
            *status = SoftSkinStatus::Failed(SoftSkinError::Bindposes {
                joints,
                bindposes: inverse.len(),
            });
            continue;
        }
        // The joints' poses now, from the hierarchy (a scene spawned this frame has no
        // propagated transforms yet); wait while any joint is missing.
        let Ok(globals) = skinned
            .joints
            .iter()
            .map(|&j| transforms.compute_global_transform(j))
            .collect::<Result<Vec<_>, _>>()
        else {
            continue;
        };
        let geometry = match geometry(mesh) {
            Ok(g) => g,
            Err(e) => {
                warn!("soft skin {entity}: {e}");
                *status = SoftSkinStatus::Failed(e);
                continue;
            }
        };
        let bind_origin = |j: usize| -> sim::Vec3 {
            let p = inverse[j]
                .inverse()
                .transform_point3(bevy::math::Vec3::ZERO);
            sim::Vec3::new(p.x as f64, p.y as f64, p.z as f64)
        };
        let parent_of: Vec<Option<usize>> = skinned
            .joints
            .iter()
            .map(|&j| {
                let parent = parents.get(j).ok()?.parent();
                skinned.joints.iter().position(|&k| k == parent)
            })
            .collect();
        let skeleton = Skeleton {
            names: skinned
                .joints
                .iter()
                .map(|&j| names.get(j).ok().map(Name::as_str))
                .collect(),
            bones: (0..joints)
                .map(|j| [bind_origin(parent_of[j].unwrap_or(j)), bind_origin(j)])
                .collect(),
            parents: parent_of,
            matrices: globals
                .iter()
                .zip(inverse.iter())
                .map(|(g, ibp)| joint_matrix(g, ibp))
                .collect(),
        };
        let mut regions = Vec::with_capacity(soft_skin.regions.len());
        let mut failure = None;
        for region in &soft_skin.regions {
            match build_region(region, &geometry, &skeleton) {
                Ok(built) => regions.push((region, built)),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failure {
            warn!("soft skin {entity}: {e}");
            *status = SoftSkinStatus::Failed(e);
            continue;
        }
        // The skinned entity draws its own copy of the mesh; others sharing the asset do not
        // move.
        let mut copy = mesh.clone();
        copy.asset_usage = RenderAssetUsages::default();
        let own = meshes.add(copy);
        let mut flesh = Vec::with_capacity(regions.len());
        let mut runtimes = Vec::with_capacity(regions.len());
        for (index, (region, (cage, mut runtime))) in regions.into_iter().enumerate() {
            let id = commands
                .spawn((
                    Name::new(format!("{} flesh", region.name)),
                    DeformableBody::from(cage),
                    region.material,
                    Transform::IDENTITY,
                    SkinFlesh {
                        skin: entity,
                        region: index,
                        bone_frequency: region.bone_frequency,
                        surface_frequency: region.surface_frequency,
                    },
                ))
                .id();
            runtime.flesh = id;
            flesh.push(id);
            runtimes.push(runtime);
        }
        commands.entity(entity).insert((
            Mesh3d(own.clone()),
            SkinRuntime {
                joints: skinned.joints.clone(),
                inverse_bindposes: inverse.to_vec(),
                joint_matrices: skeleton.matrices,
                mesh: own,
                original: mesh3d.0.clone(),
                regions: runtimes,
            },
        ));
        *status = SoftSkinStatus::Ready(flesh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blend_rises_smoothly_from_the_region_edge() {
        assert_eq!(blend_weight(0.4, 0.5, 0.3), 0.0);
        assert_eq!(blend_weight(0.5, 0.5, 0.3), 0.0);
        assert_eq!(blend_weight(0.8, 0.5, 0.3), 1.0);
        assert!((blend_weight(0.65, 0.5, 0.3) - 0.5).abs() < 1e-6);
        assert_eq!(blend_weight(0.5, 0.5, 0.0), 1.0);
    }
}
