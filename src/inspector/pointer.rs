//! The mouse in the scene: click a body to select and hold it, drag to pull it, shift-click to
//! pin or unpin a vertex; `F1` shows or hides the panel.

use bevy::camera::Camera;
use bevy::ecs::query::With;
use bevy::input::ButtonInput;
use bevy::input::keyboard::KeyCode;
use bevy::input::mouse::MouseButton;
use bevy::math::{Ray3d, Vec3};
use bevy::prelude::{Commands, GlobalTransform, Query, Res, ResMut};
use bevy::window::{PrimaryWindow, Window};
use bevy_egui::input::EguiWantsInput;

use super::InspectorState;
use crate::DeformableWorld;
use crate::components::Pin;
use crate::grab::{GrabTool, drag_plane_target};

/// How far a pick ray reaches (m).
const PICK_DISTANCE: f32 = 1000.0;

#[allow(clippy::too_many_arguments)]
pub(super) fn pick_and_grab(
    mut state: ResMut<InspectorState>,
    mut grab: ResMut<GrabTool>,
    world: Res<DeformableWorld>,
    buttons: Res<ButtonInput<MouseButton>>,
    keys: Res<ButtonInput<KeyCode>>,
    egui_input: Option<Res<EguiWantsInput>>,
    windows: Query<&Window, With<PrimaryWindow>>,
    cameras: Query<(&Camera, &GlobalTransform)>,
    mut pins: Query<&mut Pin>,
    mut commands: Commands,
) {
    if keys.just_pressed(KeyCode::F1) {
        state.open = !state.open;
    }
    let over_panel = egui_input
        .as_ref()
        .is_some_and(|e| e.wants_pointer_input() || e.is_pointer_over_area());
    let ray = cursor_ray(&windows, &cameras);
    if buttons.just_released(MouseButton::Left) || !buttons.pressed(MouseButton::Left) {
        if grab.held.is_some() {
            grab.release();
        }
        state.drag_plane = None;
    }
    if buttons.just_pressed(MouseButton::Left)
        && !over_panel
        && let Some(ray) = ray
        && let Some(hit) = world.ray_cast(ray.origin, *ray.direction, PICK_DISTANCE)
    {
        state.selected = Some(hit.entity);
        let shift = keys.pressed(KeyCode::ShiftLeft) || keys.pressed(KeyCode::ShiftRight);
        if shift {
            // The triangle corner nearest the click.
            let w = hit.embedded.weights;
            let k = (0..3).max_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap_or(0);
            let vertex = hit.triangle[k];
            match pins.get_mut(hit.entity) {
                Ok(mut pin) => match pin.vertices.iter().position(|&v| v == vertex) {
                    Some(i) => {
                        pin.vertices.swap_remove(i);
                    }
                    None => pin.vertices.push(vertex),
                },
                Err(_) => {
                    commands
                        .entity(hit.entity)
                        .insert(Pin::indices(vec![vertex]));
                }
            }
        } else {
            grab.grab(&hit);
            // The plane through the held point facing the camera: the point follows the cursor.
            state.drag_plane = Some((hit.point, -*ray.direction));
        }
    }
    if buttons.pressed(MouseButton::Left)
        && let (Some((anchor, normal)), Some(ray)) = (state.drag_plane, ray)
        && let Some(target) = drag_plane_target(ray.origin, *ray.direction, anchor, normal)
    {
        grab.drag_to(target);
    }
    let busy = over_panel || grab.held.is_some();
    if state.pointer_busy != busy {
        state.pointer_busy = busy;
    }
}

/// The ray under the cursor from the active camera drawn last (highest order).
fn cursor_ray(
    windows: &Query<&Window, With<PrimaryWindow>>,
    cameras: &Query<(&Camera, &GlobalTransform)>,
) -> Option<Ray3d> {
    let cursor = windows.iter().next()?.cursor_position()?;
    let (camera, transform) = cameras
        .iter()
        .filter(|(c, _)| c.is_active)
        .max_by_key(|(c, _)| c.order)?;
    let ray = camera.viewport_to_world(transform, cursor).ok()?;
    (ray.origin.is_finite() && Vec3::from(ray.direction).is_finite()).then_some(ray)
}
