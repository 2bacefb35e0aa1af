//! The Sync set: settings, removals, resets, pins, materials, obstacles and attachment
//! targets pushed from the ECS into the simulation world.

use bevy::ecs::change_detection::DetectChanges;
use bevy::ecs::entity::Entity;
use bevy::ecs::lifecycle::RemovedComponents;
use bevy::log::warn;
use bevy::math::Affine3A;
use bevy::prelude::{MessageReader, Query, Ref, Res, ResMut, Time};
use bevy::transform::helper::TransformHelper;

use crate::components::{
    Attachment, DeformableBody, DeformableState, InitialVelocity, Obstacle, ObstacleStatus, Pin,
    SoftMaterial,
};
use crate::convert::{quat_to_sim, to_sim};
use crate::grab::GrabTool;
use crate::history::StepHistory;
use crate::messages::ResetScene;
use crate::rigid_coupling::RigidBodyCoupling;
use crate::selection::resolve_vertices;
use crate::sim;

use super::{DeformableConfig, DeformableWorld};

pub(super) fn apply_config(config: Res<DeformableConfig>, mut world: ResMut<DeformableWorld>) {
    if config.is_changed() {
        config.apply(world.world.settings_mut());
    }
}

pub(super) fn remove_bodies(
    mut removed: RemovedComponents<DeformableBody>,
    mut world: ResMut<DeformableWorld>,
) {
    for entity in removed.read() {
        if let Some(h) = world.body_of.remove(&entity) {
            world.entity_of_body.remove(&h);
            world.world.remove_body(h);
        }
        world.contacts.remove(&entity);
    }
}

/// Sync: on [`ResetScene`], every body back to its creation state, the grab released.
pub(super) fn reset_scene(
    mut resets: MessageReader<ResetScene>,
    mut world: ResMut<DeformableWorld>,
    mut grab: ResMut<GrabTool>,
    mut history: ResMut<StepHistory>,
    mut bodies: Query<(Entity, &mut DeformableState, Option<&InitialVelocity>)>,
) {
    if resets.read().count() == 0 {
        return;
    }
    grab.release();
    history.clear();
    for (entity, mut state, initial_velocity) in &mut bodies {
        let Some(h) = state.handle else { continue };
        if let Err(e) = world.world.reset_body(h) {
            warn!("deformable body {entity}: not reset: {e}");
            continue;
        }
        if let (Some(v), Ok(velocities)) = (initial_velocity, world.world.velocities_mut(h)) {
            velocities.fill(to_sim(v.0));
        }
        state.frozen = None;
        // Drawn afresh at the reset pose, not blended from where it was.
        state.steps_recorded = 0;
        state.holding = false;
        state.drawn = None;
    }
}

/// Sync: a `Pin` edited at run time pins the vertices it gained (where they are now) and frees
/// the ones it lost; a removed `Pin` frees them all.
pub(super) fn sync_pins(
    mut world: ResMut<DeformableWorld>,
    pins: Query<(Entity, Ref<Pin>, &DeformableState)>,
    mut removed: RemovedComponents<Pin>,
    states: Query<&DeformableState>,
) {
    let world = &mut *world;
    for entity in removed.read() {
        let Some(h) = states.get(entity).ok().and_then(|s| s.handle) else {
            continue;
        };
        let pinned: Vec<usize> = match world.world.pinned(h) {
            Ok(p) => (0..p.len()).filter(|&v| p[v]).collect(),
            Err(_) => continue,
        };
        for v in pinned {
            let _ = world.world.unpin(h, v);
        }
    }
    for (entity, pin, state) in &pins {
        let Some(h) = state.handle else { continue };
        if !pin.is_changed() {
            continue;
        }
        let Ok(pinned) = world.world.pinned(h) else {
            continue;
        };
        let vertices = match &state.rest_mesh {
            Some(mesh) => match resolve_vertices(&pin.vertices, &pin.select, mesh) {
                Ok(vertices) => vertices,
                Err(selection) => {
                    warn!(
                        "deformable body {entity}: pin selection {selection:?} matches no vertex"
                    );
                    continue;
                }
            },
            None => pin.vertices.clone(),
        };
        let mut wanted = vec![false; pinned.len()];
        for &v in &vertices {
            match wanted.get_mut(v as usize) {
                Some(w) => *w = true,
                None => warn!("deformable body {entity}: pinned vertex {v} out of range"),
            }
        }
        let changes: Vec<(usize, bool)> = pinned
            .iter()
            .zip(&wanted)
            .enumerate()
            .filter(|(_, (is, want))| is != want)
            .map(|(v, (_, &want))| (v, want))
            .collect();
        for (v, want) in changes {
            let result = if want {
                let p = world.world.positions(h).map(|x| x[v]);
                p.and_then(|p| world.world.pin(h, v, p))
            } else {
                world.world.unpin(h, v)
            };
            if let Err(e) = result {
                warn!("deformable body {entity}: pin edit refused: {e}");
            }
        }
    }
}

pub(super) fn sync_materials(
    mut world: ResMut<DeformableWorld>,
    bodies: Query<(Entity, &SoftMaterial, &DeformableState), bevy::prelude::Changed<SoftMaterial>>,
) {
    for (entity, material, state) in &bodies {
        if let Some(h) = state.handle
            && let Err(e) = world.world.set_material(h, material.to_sim())
        {
            warn!("deformable body {entity}: material rejected: {e}");
        }
    }
}

pub(super) fn sync_obstacles(
    mut world: ResMut<DeformableWorld>,
    time: Res<Time>,
    mut obstacles: Query<(
        Entity,
        Ref<Obstacle>,
        Option<&RigidBodyCoupling>,
        &mut ObstacleStatus,
    )>,
    transforms: TransformHelper,
    mut removed: RemovedComponents<Obstacle>,
) {
    let world = &mut *world;
    for entity in removed.read() {
        world.rejected_obstacles.remove(&entity);
        if let Some(h) = world.obstacle_of.remove(&entity) {
            world.world.remove_obstacle(h);
            world.entity_of_obstacle.remove(&h);
        }
    }
    let dt = time.delta_secs_f64();
    for (entity, obstacle, coupling, mut status) in &mut obstacles {
        // From the hierarchy now, not last frame's propagation: no lag and no jump from the
        // origin for an obstacle spawned this frame.
        let Ok(transform) = transforms.compute_global_transform(entity) else {
            continue;
        };
        let (_, rotation, translation) = transform.to_scale_rotation_translation();
        let position = to_sim(translation);
        let rotation = quat_to_sim(rotation);
        // An edited shape replaces the obstacle (a rejected one gets another chance).
        if obstacle.is_changed() && !obstacle.is_added() {
            world.rejected_obstacles.remove(&entity);
            if let Some(h) = world.obstacle_of.remove(&entity) {
                world.world.remove_obstacle(h);
                world.entity_of_obstacle.remove(&h);
            }
        }
        if world.rejected_obstacles.contains(&entity) {
            continue;
        }
        if let Some(&h) = world.obstacle_of.get(&entity) {
            if let Ok(o) = world.world.obstacle_mut(h) {
                match place_obstacle(o, position, rotation, coupling, dt) {
                    Ok(()) => {
                        if status.move_refused.is_some() {
                            status.move_refused = None;
                        }
                    }
                    Err(e) => {
                        // The obstacle stays where it was; the game hears of it once per frame.
                        warn!("obstacle {entity} not moved: {e}");
                        status.move_refused = Some(e);
                    }
                }
            }
            continue;
        }
        match obstacle
            .to_sim(position, rotation)
            .and_then(|mut o| place_obstacle(&mut o, position, rotation, coupling, 0.0).map(|_| o))
            .map_err(sim::WorldError::from)
            .and_then(|o| world.world.add_obstacle(o))
        {
            Ok(h) => {
                world.obstacle_of.insert(entity, h);
                world.entity_of_obstacle.insert(h, entity);
                *status = ObstacleStatus::default();
            }
            Err(e) => {
                warn!("obstacle {entity} rejected: {e}");
                world.rejected_obstacles.insert(entity);
                status.rejected = Some(e);
            }
        }
    }
}

pub(super) fn sync_attachments(
    mut world: ResMut<DeformableWorld>,
    bodies: Query<(&Attachment, &DeformableState)>,
    transforms: TransformHelper,
) {
    for (attachment, state) in &bodies {
        let (Some(h), Ok(target)) = (
            state.handle,
            transforms.compute_global_transform(attachment.target),
        ) else {
            continue;
        };
        let affine: Affine3A = target.affine();
        for (&v, offset) in state.attached.iter().zip(&state.attachment_offsets) {
            let p = to_sim(affine.transform_point3(*offset));
            let _ = world.world.set_attachment_target(h, v as usize, p);
        }
    }
}

/// Moves an obstacle to its entity's pose: a kinematic one by [`sim::ObstacleCollider::move_to`]
/// (velocities from the pose change over `dt`), a coupled one ([`RigidBodyCoupling`]) to its
/// body's state at the start of the step, with its mass properties.
fn place_obstacle(
    o: &mut sim::ObstacleCollider,
    position: sim::Vec3,
    rotation: nalgebra::UnitQuaternion<f64>,
    coupling: Option<&RigidBodyCoupling>,
    dt: f64,
) -> Result<(), sim::ObstacleError> {
    match coupling {
        None => {
            if o.coupling().is_some() {
                o.set_coupling(None)?;
            }
            o.move_to(position, rotation, dt)
        }
        Some(c) => {
            let core = c.to_sim();
            if o.coupling() != Some(&core) {
                o.set_coupling(Some(core))?;
            }
            o.set_center_state(
                position + rotation * core.local_center_of_mass,
                rotation,
                to_sim(c.linear_velocity),
                to_sim(c.angular_velocity),
            )
        }
    }
}
