//! The fixed-step part of a soft skin: the cage's skinning targets and bone springs before the
//! step, its displacement from them after.

use bevy::log::warn;
use bevy::prelude::{MessageReader, Query, Res, ResMut, Time};
use bevy::transform::helper::TransformHelper;

use super::{RegionRuntime, SkinFlesh, SkinRuntime};
use crate::components::{DeformableState, SoftMaterial};
use crate::messages::ResetScene;
use crate::plugin::DeformableWorld;
use crate::sim::skin::spring_stiffness;
use crate::sim::{BodyHandle, SoftWorld, WorldError};

/// Sync (after the bodies exist and after a [`ResetScene`]): the skinning targets of every
/// cage vertex for the joints' poses now; a new cage (or one a reset put back where it was
/// created) is placed on them, gets the region's vertices as collision proxies and its
/// springs; changed spring frequencies or density re-attach the springs.
pub(crate) fn drive_soft_skins(
    mut world: ResMut<DeformableWorld>,
    mut resets: MessageReader<ResetScene>,
    time: Res<Time>,
    mut skins: Query<&mut SkinRuntime>,
    flesh: Query<(&DeformableState, &SkinFlesh, &SoftMaterial)>,
    transforms: TransformHelper,
) {
    let world = world.world_mut();
    let reset = resets.read().count() > 0;
    let dt = time.delta_secs_f64();
    for mut runtime in &mut skins {
        let runtime = &mut *runtime;
        if reset {
            for region in &mut runtime.regions {
                region.placed = false;
            }
        }
        if !runtime.pose_joints(|joint| transforms.compute_global_transform(joint).ok()) {
            continue;
        }
        for region in &mut runtime.regions {
            let Ok((state, springs, material)) = flesh.get(region.flesh) else {
                continue;
            };
            let Some(h) = state.handle else { continue };
            if state.failed() {
                continue;
            }
            std::mem::swap(&mut region.targets, &mut region.targets_previous);
            region
                .drive
                .targets(&runtime.joint_matrices, &mut region.targets);
            if let Err(e) = drive_region(world, h, region, springs, material, dt) {
                warn!("soft skin flesh {}: {e}", region.flesh);
            }
        }
    }
}

fn drive_region(
    world: &mut SoftWorld,
    h: BodyHandle,
    region: &mut RegionRuntime,
    springs: &SkinFlesh,
    material: &SoftMaterial,
    dt: f64,
) -> Result<(), WorldError> {
    let had_previous = std::mem::replace(&mut region.previous_valid, true);
    if !region.placed {
        world.positions_mut(h)?.copy_from_slice(&region.targets);
        // Moving with its targets where they moved last step (a reset of a walking
        // character), else at rest (a new cage).
        let velocities = world.velocities_mut(h)?;
        if had_previous && dt > 0.0 {
            for ((v, t), p) in velocities
                .iter_mut()
                .zip(&region.targets)
                .zip(&region.targets_previous)
            {
                *v = (t - p) / dt;
            }
        } else {
            velocities.fill(crate::sim::Vec3::zeros());
        }
        // The region's own vertices collide with obstacles, and the cage vertices inside the
        // mesh (the cage's outer vertices would hold the drawn surface up to a cell off an
        // obstacle); other bodies meet the drawn skin, its vertices and triangles.
        let embedded = region.writeback.embedded().to_vec();
        if let Err(e) = world.set_drawn_mesh_with_colliders(
            h,
            embedded.clone(),
            region.drawn_triangles.clone(),
            &region.inner_vertices,
        ) {
            warn!("soft skin flesh: {e}; other bodies meet its cage");
            world.set_colliders(h, embedded, &region.inner_vertices)?;
        }
        // The regions of one skin overlap where they meet: they do not collide.
        world.set_collision_group(h, Some(springs.skin.to_bits()))?;
        region.placed = true;
        region.springs = None;
    }
    let key = [
        springs.bone_frequency,
        springs.surface_frequency,
        material.density,
    ];
    if region.springs != Some(key) {
        let valid = key[..2].iter().all(|f| *f >= 0.0 && f.is_finite());
        if !valid {
            // Keep the springs as they were; the game hears of it once per change.
            region.springs = Some(key);
            warn!(
                "soft skin flesh: spring frequencies must be >= 0 and finite, got {} / {} Hz",
                key[0], key[1]
            );
            return Ok(());
        }
        let masses = world.mesh(h)?.lumped_masses(material.density as f64);
        spring_stiffness(
            &masses,
            &region.bone_distance,
            region.bone_radius,
            springs.bone_frequency as f64,
            springs.surface_frequency as f64,
            &mut region.stiffness,
        );
        for (v, (&k, t)) in region.stiffness.iter().zip(&region.targets).enumerate() {
            world.attach(h, v, k, *t)?;
        }
        region.springs = Some(key);
        return Ok(());
    }
    for (v, (&k, t)) in region.stiffness.iter().zip(&region.targets).enumerate() {
        if k > 0.0 {
            world.set_attachment_target(h, v, *t)?;
        }
    }
    Ok(())
}

/// Writeback (after the step): the cage's displacement from its targets at each region vertex,
/// kept beside the previous step's for the blend.
pub(crate) fn record_skin_displacements(
    world: Res<DeformableWorld>,
    mut skins: Query<&mut SkinRuntime>,
    flesh: Query<&DeformableState>,
) {
    for mut runtime in &mut skins {
        for region in &mut runtime.regions {
            if !region.placed {
                continue;
            }
            let Some(x) = flesh
                .get(region.flesh)
                .ok()
                .and_then(|s| s.handle)
                .and_then(|h| world.world().positions(h).ok())
            else {
                continue;
            };
            if world.stepped() {
                std::mem::swap(
                    &mut region.displacement_previous,
                    &mut region.displacement_current,
                );
                region.writeback.displacements(
                    x,
                    &region.targets,
                    &mut region.displacement_current,
                );
            } else {
                // Paused: hold the last displacement.
                region
                    .displacement_previous
                    .copy_from_slice(&region.displacement_current);
            }
        }
    }
}
