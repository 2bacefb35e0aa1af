//! Debug drawing with gizmos: what the solver sees, at the last fixed step's positions, for
//! the soft bodies and the cloths (a cloth's triangle edges with the surfaces, its pinned
//! vertices with the pins, its contact planes' normals with the contacts).

use bevy::color::Color;
use bevy::ecs::query::With;
use bevy::gizmos::gizmos::Gizmos;
use bevy::math::Isometry3d;
use bevy::math::bounding::Aabb3d;
use bevy::prelude::{Entity, Local, Query, Res, Transform};

use super::{DebugDraw, InspectorState};
use crate::DeformableWorld;
use crate::cloth::ClothState;
use crate::components::DeformableBody;
use crate::convert::to_bevy;
use crate::grab::GrabTool;
use crate::sim;

const TET_EDGES: [(usize, usize); 6] = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)];

/// A distinct colour per LCP region (golden-angle hues).
fn region_color(region: u32) -> Color {
    Color::hsl((region as f32 * 137.508) % 360.0, 0.85, 0.55)
}

pub(super) fn draw_debug(
    state: Res<InspectorState>,
    world: Res<DeformableWorld>,
    grab: Res<GrabTool>,
    bodies: Query<Entity, With<DeformableBody>>,
    cloths: Query<&ClothState>,
    mut gizmos: Gizmos,
    mut boxes: Local<Vec<[sim::Vec3; 2]>>,
) {
    let d = state.draw;
    let sim_world = world.world();
    for entity in &bodies {
        let Some(h) = world.body(entity) else {
            continue;
        };
        let (Ok(x), Ok(mesh)) = (sim_world.positions(h), sim_world.mesh(h)) else {
            continue;
        };
        let p = |v: u32| to_bevy(&x[v as usize]);
        if d.tets {
            let color = Color::srgba(0.9, 0.9, 0.9, 0.35);
            for t in mesh.tets() {
                for (a, b) in TET_EDGES {
                    gizmos.line(p(t[a]), p(t[b]), color);
                }
            }
        }
        if d.surface {
            // Sleeping bodies in blue.
            let color = if sim_world.is_asleep(h).unwrap_or(false) {
                Color::srgb(0.2, 0.45, 1.0)
            } else {
                Color::srgb(0.1, 0.1, 0.1)
            };
            for tri in mesh.surface_triangles() {
                gizmos.line(p(tri[0]), p(tri[1]), color);
                gizmos.line(p(tri[1]), p(tri[2]), color);
                gizmos.line(p(tri[2]), p(tri[0]), color);
            }
        }
        if d.proxies
            && let Ok(proxies) = sim_world.proxies(h)
        {
            let color = Color::srgb(0.2, 0.9, 0.9);
            for proxy in proxies {
                let at = to_bevy(&proxy.position(x));
                gizmos.cross(Isometry3d::from_translation(at), 0.008, color);
            }
        }
        if d.pins
            && let Ok(pinned) = sim_world.pinned(h)
        {
            let color = Color::srgb(0.95, 0.15, 0.1);
            for (v, _) in pinned.iter().enumerate().filter(|(_, p)| **p) {
                gizmos.sphere(Isometry3d::from_translation(p(v as u32)), 0.015, color);
            }
        }
        if d.bvh {
            boxes.clear();
            if sim_world.bvh_boxes(h, &mut boxes).is_ok() {
                let color = Color::srgba(0.3, 0.9, 0.3, 0.5);
                for [lo, hi] in boxes.iter() {
                    let (lo, hi) = (to_bevy(lo), to_bevy(hi));
                    let aabb = Aabb3d::new((lo + hi) * 0.5, (hi - lo) * 0.5);
                    gizmos.aabb_3d(aabb, Transform::IDENTITY, color);
                }
            }
        }
        if state.selected == Some(entity) {
            let (lo, hi) = sim::mesh::bounds(x);
            let (lo, hi) = (to_bevy(&lo), to_bevy(&hi));
            if lo.is_finite() && hi.is_finite() {
                let aabb = Aabb3d::new((lo + hi) * 0.5, (hi - lo) * 0.5 + 0.01);
                gizmos.aabb_3d(aabb, Transform::IDENTITY, Color::srgb(1.0, 0.85, 0.2));
            }
        }
    }
    if d.contacts || d.active_constraints {
        for c in sim_world.contact_points() {
            let at = to_bevy(&c.position);
            let color = region_color(c.region);
            if d.contacts {
                let n = to_bevy(&c.normal);
                gizmos.line(at, at + d.normal_length * n, color);
            }
            if d.active_constraints && c.impulse.dot(&c.normal) > 0.0 {
                gizmos.sphere(Isometry3d::from_translation(at), 0.01, color);
            }
        }
    }
    for cloth in &cloths {
        draw_cloth(cloth, &d, &mut gizmos);
    }
    if let Some(held) = grab.held
        && let Some(point) = held.position(&world)
    {
        let color = Color::srgb(1.0, 0.9, 0.1);
        gizmos.line(point, held.target, color);
        gizmos.sphere(Isometry3d::from_translation(held.target), 0.02, color);
    }
}

/// One cloth's gizmos, at its last step's positions: its triangles' edges with
/// [`DebugDraw::surface`], its pinned vertices with [`DebugDraw::pins`] and its contact planes
/// (the obstacle's point and normal) with [`DebugDraw::contacts`].
fn draw_cloth(state: &ClothState, d: &DebugDraw, gizmos: &mut Gizmos) {
    let Some(system) = state.system.as_ref() else {
        return;
    };
    let x = system.positions();
    let p = |v: u32| to_bevy(&x[v as usize]);
    if d.surface {
        let color = Color::srgb(0.1, 0.1, 0.1);
        for tri in system.mesh().triangles() {
            gizmos.line(p(tri[0]), p(tri[1]), color);
            gizmos.line(p(tri[1]), p(tri[2]), color);
            gizmos.line(p(tri[2]), p(tri[0]), color);
        }
    }
    if d.pins {
        let color = Color::srgb(0.95, 0.15, 0.1);
        for (v, _) in system.pinned().iter().enumerate().filter(|(_, p)| **p) {
            gizmos.sphere(Isometry3d::from_translation(p(v as u32)), 0.005, color);
        }
    }
    if d.contacts {
        let color = Color::srgb(0.95, 0.6, 0.1);
        for (_, point, normal) in system.contact_planes() {
            let at = to_bevy(&point);
            gizmos.line(at, at + d.normal_length * to_bevy(&normal), color);
        }
    }
}
