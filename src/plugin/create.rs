//! Creation of simulation bodies for new [`DeformableBody`] entities (asset-backed ones once
//! their mesh has loaded), with their pins, attachments, proxies and render points.

use std::sync::Arc;

use bevy::asset::{Assets, RenderAssetUsages};
use bevy::ecs::entity::Entity;
use bevy::log::warn;
use bevy::math::Vec3;
use bevy::mesh::{Mesh, Mesh3d};
use bevy::prelude::{Commands, GlobalTransform, Query, Res, ResMut, Transform, Without};
use bevy::transform::helper::TransformHelper;

use crate::assets::TetMeshAsset;
use crate::components::{
    Attachment, CollisionProxy, DeformableBody, DeformableHandle, DeformableState, InitialVelocity,
    Pin, SoftMaterial, TetMeshSource,
};
use crate::convert::{quat_to_sim, to_bevy, to_sim};
use crate::render;
use crate::sim::{self, BodyHandle};
use crate::status::BodyError;

use super::DeformableWorld;

/// Builds the body in the simulation; the typed reason when it cannot be created.
#[allow(clippy::too_many_arguments)]
fn create_body(
    world: &mut DeformableWorld,
    mesh: Arc<sim::TetMesh>,
    material: &SoftMaterial,
    proxy: &CollisionProxy,
    transform: &Transform,
    pin: Option<&Pin>,
    attachment: Option<(&Attachment, &GlobalTransform)>,
    state: &mut DeformableState,
) -> Result<(BodyHandle, Arc<sim::TetMesh>), BodyError> {
    let scale = transform.scale;
    let mesh = if scale == Vec3::ONE {
        mesh
    } else {
        let s = to_sim(scale);
        let scaled = sim::TetMesh::new(
            mesh.rest_positions()
                .iter()
                .map(|p| p.component_mul(&s))
                .collect(),
            mesh.tets().iter().map(|t| t.map(|v| v as usize)).collect(),
        )
        .map_err(BodyError::ScaledMesh)?;
        Arc::new(scaled)
    };
    let h = world.world.add_body_with_pose(
        mesh.clone(),
        material.to_sim(),
        to_sim(transform.translation),
        quat_to_sim(transform.rotation),
    )?;
    let result = (|| -> Result<(), BodyError> {
        let positions = world.world.positions(h)?.to_vec();
        let out_of_range = |role, vertex| BodyError::VertexOutOfRange {
            role,
            vertex,
            count: positions.len(),
        };
        if let Some(pin) = pin {
            for &v in &pin.vertices {
                let p = *positions
                    .get(v as usize)
                    .ok_or_else(|| out_of_range("pinned", v))?;
                world.world.pin(h, v as usize, p)?;
            }
        }
        if let Some((attachment, target)) = attachment {
            let inverse = target.affine().inverse();
            state.attachment_offsets.clear();
            for &v in &attachment.vertices {
                let p = *positions
                    .get(v as usize)
                    .ok_or_else(|| out_of_range("attached", v))?;
                state
                    .attachment_offsets
                    .push(inverse.transform_point3(to_bevy(&p)));
                world
                    .world
                    .attach(h, v as usize, attachment.stiffness as f64, p)?;
            }
        }
        if let CollisionProxy::SurfaceAndPoints(points) = proxy {
            let rest: Vec<sim::Vec3> = points.iter().map(|p| to_sim(*p * scale)).collect();
            let mut proxies = world.world.proxies(h)?.to_vec();
            proxies.extend(sim::embed::embed_points(&mesh, &rest));
            world.world.set_proxies(h, proxies)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok((h, mesh)),
        Err(e) => {
            world.world.remove_body(h);
            Err(e)
        }
    }
}

#[allow(clippy::type_complexity)]
pub(super) fn create_bodies(
    mut commands: Commands,
    mut world: ResMut<DeformableWorld>,
    tet_assets: Res<Assets<TetMeshAsset>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut bodies: Query<
        (
            Entity,
            &DeformableBody,
            &SoftMaterial,
            &CollisionProxy,
            &Transform,
            Option<&Pin>,
            Option<&Attachment>,
            Option<&Mesh3d>,
            Option<&InitialVelocity>,
            &mut DeformableState,
        ),
        Without<DeformableHandle>,
    >,
    transforms: TransformHelper,
) {
    for (
        entity,
        body,
        material,
        proxy,
        transform,
        pin,
        attachment,
        mesh3d,
        initial_velocity,
        mut state,
    ) in &mut bodies
    {
        if state.handle.is_some() || state.failed() {
            continue;
        }
        let mesh = match &body.mesh {
            TetMeshSource::Mesh(m) => m.clone(),
            TetMeshSource::Asset(handle) => match tet_assets.get(handle) {
                Some(asset) => asset.0.clone(),
                None => continue,
            },
        };
        // A game-provided render mesh is embedded in the tets; wait until it has loaded. The body
        // deforms its own copy, so bodies sharing a mesh handle (and the original) stay apart.
        let render_points = match mesh3d {
            Some(m) => match meshes.get(&m.0) {
                Some(render) => match render::mesh_positions(render) {
                    Some(p) => {
                        let mut copy = render.clone();
                        copy.asset_usage = RenderAssetUsages::default();
                        Some((p, copy))
                    }
                    None => {
                        warn!(
                            "deformable body {entity}: its Mesh3d has no Float32x3 positions; \
                             drawing the tet surface instead"
                        );
                        None
                    }
                },
                None => continue,
            },
            None => None,
        };
        // Transforms are computed from the hierarchy now: a target spawned this frame has no
        // propagated GlobalTransform yet.
        let target_transform = match attachment {
            Some(a) => match transforms.compute_global_transform(a.target) {
                Ok(t) => Some(t),
                Err(e) => {
                    warn!(
                        "deformable body {entity}: attachment target {}: {e}",
                        a.target
                    );
                    None
                }
            },
            None => None,
        };
        let attachment = attachment.zip(target_transform.as_ref());
        match create_body(
            &mut world, mesh, material, proxy, transform, pin, attachment, &mut state,
        ) {
            Ok((h, mesh)) => {
                if let (Some(v), Ok(velocities)) = (initial_velocity, world.world.velocities_mut(h))
                {
                    velocities.fill(to_sim(v.0));
                }
                let points = match render_points {
                    Some((p, copy)) => {
                        let s = to_sim(transform.scale);
                        let rest: Vec<sim::Vec3> = p.iter().map(|q| q.component_mul(&s)).collect();
                        commands.entity(entity).insert(Mesh3d(meshes.add(copy)));
                        sim::embed::embed_points(&mesh, &rest)
                    }
                    None => {
                        let (render_mesh, points) = render::surface_mesh(&mesh);
                        commands
                            .entity(entity)
                            .insert(Mesh3d(meshes.add(render_mesh)));
                        points
                    }
                };
                state.handle = Some(h);
                commands.entity(entity).insert(DeformableHandle(h));
                state.vertex_count = mesh.vertex_count();
                state.render_points = points;
                state.spawn_rotation = transform.rotation;
                world.body_of.insert(entity, h);
            }
            Err(e) => {
                warn!("deformable body {entity} not created: {e}");
                state.rejected = Some(e);
            }
        }
    }
}
