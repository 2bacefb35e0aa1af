//! The Writeback set (render points after each step) and the Render set (the `Transform` and
//! render mesh of every body, blended between the last two steps).

use std::time::Instant;

use bevy::asset::Assets;
use bevy::ecs::change_detection::DetectChangesMut;
use bevy::ecs::entity::Entity;
use bevy::math::Quat;
use bevy::mesh::{Mesh, Mesh3d};
use bevy::prelude::{Query, Res, ResMut, Time, Transform, With};
use bevy::time::Fixed;

use crate::components::DeformableState;
use crate::convert::to_bevy;
use crate::diagnostics::DeformableDiagnostics;
use crate::render;
use crate::rigid_coupling::{RigidBodyCoupling, RigidBodyImpulse};
use crate::sim;

use super::{DeformableConfig, DeformableWorld};

/// After a step: what the soft bodies did to each coupled rigid body (zero where the world
/// did not step).
pub(super) fn record_rigid_impulses(
    world: Res<DeformableWorld>,
    mut coupled: Query<(Entity, &mut RigidBodyImpulse), With<RigidBodyCoupling>>,
) {
    for (entity, mut impulse) in &mut coupled {
        let obstacle = world
            .obstacle_of
            .get(&entity)
            .filter(|_| world.stepped)
            .and_then(|&h| world.world.obstacle(h).ok());
        let mut response = obstacle
            .map(|o| RigidBodyImpulse::from_sim(o.coupling_response()))
            .unwrap_or_default();
        if let Some(o) = obstacle {
            add_cloth_impulses(&world, o, &mut response);
        }
        impulse.set_if_neq(response);
    }
}

/// Adds to `response` what the cloths' contacts put on the rigid body whose collider is `o`
/// in the last step (on any of its colliders: each carries the body's whole response), as
/// impulse and angular impulse about its centre of mass and the velocity changes they make.
fn add_cloth_impulses(
    world: &DeformableWorld,
    o: &sim::ObstacleCollider,
    response: &mut RigidBodyImpulse,
) {
    let Some(coupling) = o.coupling() else {
        return;
    };
    let same_body = |other: &sim::ObstacleCollider| match coupling.body {
        Some(body) => other.coupling().is_some_and(|c| c.body == Some(body)),
        None => std::ptr::eq(other, o),
    };
    let center = o.center_of_mass();
    let (mut linear, mut angular) = (sim::Vec3::zeros(), sim::Vec3::zeros());
    for (h, at, j) in &world.cloth_on_rigid {
        if world.world.obstacle(*h).is_ok_and(same_body) {
            linear += j;
            angular += (at - center).cross(j);
        }
    }
    if linear == sim::Vec3::zeros() && angular == sim::Vec3::zeros() {
        return;
    }
    let rotation = o.rotation().to_rotation_matrix();
    let inverse_inertia =
        rotation.matrix() * coupling.local_inverse_inertia * rotation.matrix().transpose();
    response.impulse += to_bevy(&linear);
    response.angular_impulse += to_bevy(&angular);
    response.linear_velocity_change += to_bevy(&(linear / coupling.mass));
    response.angular_velocity_change += to_bevy(&(inverse_inertia * angular));
}

/// After a step: the render points of every body, kept beside the previous step's.
pub(super) fn record_render_points(
    mut world: ResMut<DeformableWorld>,
    mut bodies: Query<&mut DeformableState>,
) {
    let start = Instant::now();
    for mut state in &mut bodies {
        let state = &mut *state;
        let Some(h) = state.handle else { continue };
        // A body created this frame is recorded once even before its first step, so it is drawn
        // at its spawn pose rather than not at all. While the world does not step (paused), the
        // previous points become the current ones, so the blend shows the last step steadily.
        // A body that slept through the step did not move: held like a paused one (drawn
        // once, then left). The step it fell asleep in is still recorded.
        let slept_through = world
            .world
            .last_step_stats(h)
            .is_ok_and(|stats| stats.asleep);
        if (!world.stepped || slept_through) && state.steps_recorded > 0 {
            if !state.holding {
                state.holding = true;
                state.render_previous.clone_from(&state.render_current);
                state.centre_previous = state.centre_current;
                state.turn_previous = state.turn_current;
                state.drawn = None;
            }
            continue;
        }
        state.holding = false;
        let Ok(x) = world.world.positions(h) else {
            continue;
        };
        std::mem::swap(&mut state.render_previous, &mut state.render_current);
        state.centre_previous = state.centre_current;
        state.turn_previous = state.turn_current;
        state.centre_current =
            render::record_points(&state.render_points, x, &mut state.render_current);
        if state.steps_recorded == 0 {
            state.render_previous.clone_from(&state.render_current);
            state.centre_previous = state.centre_current;
            state.reference.clear();
            let centre = state.centre_current;
            state
                .reference
                .extend(state.render_current.iter().map(|p| *p - centre));
            state.turn_current = Quat::IDENTITY;
            state.turn_previous = Quat::IDENTITY;
        } else {
            state.turn_current = render::matched_turn(
                &state.reference,
                &state.render_current,
                state.centre_current,
                state.turn_current,
            );
        }
        state.steps_recorded += 1;
    }
    world.record_ms = start.elapsed().as_secs_f64() * 1e3;
}

/// Every frame: `Transform` and render mesh blended between the last two fixed steps.
pub(super) fn draw_interpolated(
    config: Res<DeformableConfig>,
    schedule: Res<super::StepSchedule>,
    time: Res<Time<Fixed>>,
    world: Res<DeformableWorld>,
    mut stats: ResMut<DeformableDiagnostics>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut bodies: Query<(&mut DeformableState, &mut Transform, Option<&Mesh3d>)>,
) {
    let start = Instant::now();
    let alpha = if config.interpolate && schedule.fixed {
        time.overstep_fraction().clamp(0.0, 1.0)
    } else {
        1.0
    };
    for (mut state, mut transform, mesh3d) in &mut bodies {
        // Held (paused or asleep), both point sets are equal: one draw serves every blend.
        let held = state.holding && state.drawn.is_some();
        if state.steps_recorded == 0 || held || state.drawn == Some((state.steps_recorded, alpha)) {
            continue;
        }
        let state = &mut *state;
        state.drawn = Some((state.steps_recorded, alpha));
        let origin = state.centre_previous.lerp(state.centre_current, alpha);
        let rotation = state.turn_previous.slerp(state.turn_current, alpha) * state.spawn_rotation;
        *transform = Transform::from_translation(origin).with_rotation(rotation);
        if let Some(mut mesh) = mesh3d.and_then(|m| meshes.get_mut(&m.0)) {
            render::write_interpolated(
                &mut mesh,
                &state.render_previous,
                &state.render_current,
                alpha,
                origin,
                rotation.inverse(),
            );
        }
    }
    stats.writeback_ms = world.record_ms + start.elapsed().as_secs_f64() * 1e3;
}
