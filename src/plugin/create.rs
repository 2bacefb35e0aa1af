//! Creation of simulation bodies for new [`DeformableBody`] entities (asset-backed ones once
//! their mesh has loaded), with their pins, attachments, proxies and render points.

use std::sync::Arc;

use bevy::asset::{Assets, RenderAssetUsages};
use bevy::ecs::entity::Entity;
use bevy::log::warn;
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
use crate::selection::resolve_vertices;
use crate::sim::{self, BodyHandle};
use crate::status::BodyError;

use super::DeformableWorld;

/// The simulation's description of a body entity (its components translated, nothing
/// checked here but the vertex ranges, which the game hears of with the component's role).
fn describe(
    mesh: Arc<sim::TetMesh>,
    material: &SoftMaterial,
    proxy: &CollisionProxy,
    transform: &Transform,
    pin: Option<&Pin>,
    attachment: Option<&Attachment>,
    initial_velocity: Option<&InitialVelocity>,
) -> Result<sim::BodyDesc, BodyError> {
    let count = mesh.vertex_count();
    let in_range = |role, vertices: &[u32]| match vertices.iter().find(|&&v| v as usize >= count) {
        Some(&vertex) => Err(BodyError::VertexOutOfRange {
            role,
            vertex,
            count,
        }),
        None => Ok(()),
    };
    let pins = match pin {
        Some(p) => {
            in_range("pinned", &p.vertices)?;
            resolve_vertices(&p.vertices, &p.select, &mesh).map_err(|selection| {
                BodyError::EmptySelection {
                    role: "pinned",
                    selection,
                }
            })?
        }
        None => Vec::new(),
    };
    let attachments = match attachment {
        Some(a) => {
            in_range("attached", &a.vertices)?;
            resolve_vertices(&a.vertices, &a.select, &mesh)
                .map_err(|selection| BodyError::EmptySelection {
                    role: "attached",
                    selection,
                })?
                .into_iter()
                .map(|v| (v, a.stiffness as f64))
                .collect()
        }
        None => Vec::new(),
    };
    let proxies = match proxy {
        CollisionProxy::Drawn | CollisionProxy::DrawnMesh | CollisionProxy::TetVertices => {
            Vec::new()
        }
        CollisionProxy::TetVerticesAndPoints(points) => points.iter().map(|p| to_sim(*p)).collect(),
    };
    Ok(sim::BodyDesc {
        mesh,
        material: material.to_sim(),
        position: to_sim(transform.translation),
        rotation: quat_to_sim(transform.rotation),
        scale: to_sim(transform.scale),
        pins,
        attachments,
        proxies,
        drawn_surface: Vec::new(),
        drawn_triangles: Vec::new(),
        velocity: initial_velocity.map_or_else(sim::Vec3::zeros, |v| to_sim(v.0)),
    })
}

/// Creates the body atomically; then the attachment offsets from the target's transform.
#[allow(clippy::too_many_arguments)]
fn create_body(
    world: &mut DeformableWorld,
    mesh: Arc<sim::TetMesh>,
    material: &SoftMaterial,
    proxy: &CollisionProxy,
    transform: &Transform,
    pin: Option<&Pin>,
    attachment: Option<(&Attachment, &GlobalTransform)>,
    initial_velocity: Option<&InitialVelocity>,
    state: &mut DeformableState,
) -> Result<(BodyHandle, Arc<sim::TetMesh>), BodyError> {
    state.rest_mesh = Some(mesh.clone());
    let desc = describe(
        mesh,
        material,
        proxy,
        transform,
        pin,
        attachment.map(|(a, _)| a),
        initial_velocity,
    )?;
    let h = world.world.add_body_from(&desc).map_err(|e| match e {
        sim::WorldError::Mesh(e) => BodyError::ScaledMesh(e),
        e => BodyError::World(e),
    })?;
    let positions = world.world.positions(h)?;
    if let Some((_, target)) = attachment {
        let inverse = target.affine().inverse();
        state.attached.clear();
        state
            .attached
            .extend(desc.attachments.iter().map(|&(v, _)| v));
        state.attachment_offsets.clear();
        state.attachment_offsets.extend(
            state
                .attached
                .iter()
                .map(|&v| inverse.transform_point3(to_bevy(&positions[v as usize]))),
        );
    }
    Ok((h, world.world.mesh(h)?.clone()))
}

/// Makes body `h` collide by its drawn mesh: its `points` (embedded in its tets) against
/// obstacles, and with its `triangles` (if given) against other bodies, if no point lies
/// further outside the tet mesh than [`sim::MAX_DRAWN_EXTRAPOLATION`]; otherwise warns and
/// leaves the tet mesh colliding. A mesh the world refuses as a drawn mesh (a degenerate
/// triangle, no triangles, not a triangle list) collides by its points with obstacles only,
/// with a warning.
fn collide_by_drawn_mesh(
    world: &mut DeformableWorld,
    h: BodyHandle,
    entity: Entity,
    points: &[sim::EmbeddedPoint],
    triangles: Option<Vec<[u32; 3]>>,
) {
    if let Some(index) = points
        .iter()
        .position(|p| p.outside_by() > sim::MAX_DRAWN_EXTRAPOLATION)
    {
        warn!(
            "deformable body {entity}: drawn mesh vertex {index} lies outside the tet mesh; \
             the tet vertices collide instead"
        );
        return;
    }
    if let Some(triangles) = triangles {
        match world.world.set_drawn_mesh(h, points.to_vec(), triangles) {
            Ok(()) => return,
            Err(e) => warn!(
                "deformable body {entity}: {e}; its drawn points collide with obstacles, its \
                 tet surface with other bodies"
            ),
        }
    }
    if let Err(e) = world.world.set_drawn_surface(h, points.to_vec()) {
        warn!("deformable body {entity}: {e}; the tet vertices collide instead");
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
            &mut world,
            mesh,
            material,
            proxy,
            transform,
            pin,
            attachment,
            initial_velocity,
            &mut state,
        ) {
            Ok((h, mesh)) => {
                let points = match render_points {
                    Some((p, copy)) => {
                        let s = to_sim(transform.scale);
                        let rest: Vec<sim::Vec3> = p.iter().map(|q| q.component_mul(&s)).collect();
                        // Only a body that collides by its drawn mesh needs the triangles; a
                        // mirroring scale turns them inside out.
                        let mirrored = s.x * s.y * s.z < 0.0;
                        let triangles = matches!(proxy, CollisionProxy::DrawnMesh)
                            .then(|| render::mesh_triangles(&copy, &rest))
                            .map(|t| {
                                t.map(|t| {
                                    t.into_iter()
                                        .map(
                                            |[a, b, c]| {
                                                if mirrored { [a, c, b] } else { [a, b, c] }
                                            },
                                        )
                                        .collect()
                                })
                            });
                        commands.entity(entity).insert(Mesh3d(meshes.add(copy)));
                        let points = sim::embed::embed_points(&mesh, &rest);
                        match triangles {
                            _ if !matches!(
                                proxy,
                                CollisionProxy::Drawn | CollisionProxy::DrawnMesh
                            ) => {}
                            None => collide_by_drawn_mesh(&mut world, h, entity, &points, None),
                            Some(None) => {
                                warn!(
                                    "deformable body {entity}: its Mesh3d is not a triangle list; \
                                     it meets other bodies by its tet surface"
                                );
                                collide_by_drawn_mesh(&mut world, h, entity, &points, None);
                            }
                            Some(Some(t)) => {
                                collide_by_drawn_mesh(&mut world, h, entity, &points, Some(t));
                            }
                        }
                        points
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
                world.entity_of_body.insert(h, entity);
            }
            Err(e) => {
                warn!("deformable body {entity} not created: {e}");
                state.rejected = Some(e);
            }
        }
    }
}
