//! The per-frame part of a soft skin: the region's vertices written into the skinned entity's
//! mesh, in bind space, for the joints' poses of this frame.

use std::time::Instant;

use bevy::asset::Assets;
use bevy::mesh::{Mesh, VertexAttributeValues};
use bevy::prelude::{GlobalTransform, Query, Res, ResMut, Time};
use bevy::time::Fixed;

use super::SkinRuntime;
use crate::diagnostics::DeformableDiagnostics;
use crate::plugin::{DeformableConfig, StepSchedule};

/// `PostUpdate`, after transform propagation: every soft skin's region vertices for this frame's
/// joint poses and the displacement blended between the last two fixed steps.
pub(crate) fn draw_soft_skins(
    config: Res<DeformableConfig>,
    schedule: Res<StepSchedule>,
    time: Res<Time<Fixed>>,
    mut stats: ResMut<DeformableDiagnostics>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut skins: Query<&mut SkinRuntime>,
    globals: Query<&GlobalTransform>,
) {
    let start = Instant::now();
    let alpha = if config.interpolate && schedule.fixed {
        time.overstep_fraction().clamp(0.0, 1.0) as f64
    } else {
        1.0
    };
    for mut runtime in &mut skins {
        let runtime = &mut *runtime;
        if !runtime.regions.iter().any(|r| r.placed) {
            continue;
        }
        if !runtime.pose_joints(|joint| globals.get(joint).ok().copied()) {
            continue;
        }
        let Some(mut mesh) = meshes.get_mut(&runtime.mesh) else {
            continue;
        };
        // Positions and normals are two attributes of one mesh: take the normals out while
        // the positions are written, and put them back.
        let mut normals = match mesh.try_attribute_mut_option(Mesh::ATTRIBUTE_NORMAL) {
            Ok(Some(VertexAttributeValues::Float32x3(n))) => Some(std::mem::take(n)),
            _ => None,
        };
        if let Ok(Some(VertexAttributeValues::Float32x3(positions))) =
            mesh.try_attribute_mut_option(Mesh::ATTRIBUTE_POSITION)
        {
            for region in &mut runtime.regions {
                if !region.placed {
                    continue;
                }
                for ((d, p), c) in region
                    .displacement_drawn
                    .iter_mut()
                    .zip(&region.displacement_previous)
                    .zip(&region.displacement_current)
                {
                    *d = p.lerp(c, alpha);
                }
                region.writeback.write(
                    &runtime.joint_matrices,
                    &region.displacement_drawn,
                    positions,
                    normals.as_deref_mut(),
                );
            }
        }
        if let (Some(n), Ok(Some(VertexAttributeValues::Float32x3(slot)))) = (
            normals,
            mesh.try_attribute_mut_option(Mesh::ATTRIBUTE_NORMAL),
        ) {
            *slot = n;
        }
    }
    stats.skin_ms = start.elapsed().as_secs_f64() * 1e3;
}
