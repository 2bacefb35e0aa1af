//! The grab tool: hold any soft body by a surface point and drag it.
//!
//! A pick ([`DeformableWorld::ray_cast`]) finds the surface point under a ray and embeds it
//! barycentrically in its triangle (a face of one tet), so the point follows the body as it
//! deforms. While held, a zero-rest-length spring of [`GrabTool::stiffness`] pulls that point to
//! [`GrabTool`]'s target. The spring is part of the body's implicit system (see
//! [`crate::sim::pd::PointSpring`]): stable at any stiffness, one refactorization of that body
//! when it is grabbed and one when it is let go, and nothing but a right-hand side while the
//! target moves.
//!
//! The mouse side (in the inspector) drags the target on the *drag plane*: the plane through the
//! grabbed point facing the camera, so the point moves under the cursor
//! ([`drag_plane_target`]). Games can drive the same resource from their own input.

use bevy::ecs::entity::Entity;
use bevy::log::warn;
use bevy::math::Vec3;
use bevy::prelude::{ResMut, Resource};

use crate::DeformableWorld;
use crate::convert::{to_bevy, to_sim};
use crate::sim::EmbeddedPoint;

/// A body surface point found by a ray.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BodyHit {
    /// The body's entity.
    pub entity: Entity,
    /// Distance from the ray's origin (m).
    pub distance: f32,
    /// The point (m, world).
    pub point: Vec3,
    /// The point embedded in the body (it follows the deformation).
    pub embedded: EmbeddedPoint,
    /// The boundary triangle hit (vertex indices of the body's tet mesh).
    pub triangle: [u32; 3],
}

impl DeformableWorld {
    /// The nearest soft body surface hit by the ray from `origin` along `direction`, within
    /// `max_distance` (m).
    pub fn ray_cast(&self, origin: Vec3, direction: Vec3, max_distance: f32) -> Option<BodyHit> {
        let (h, hit) =
            self.world()
                .ray_cast(to_sim(origin), to_sim(direction), max_distance as f64)?;
        let entity = self.entity_of(h)?;
        let x = self.world().positions(h).ok()?;
        Some(BodyHit {
            entity,
            distance: hit.distance as f32,
            point: to_bevy(&hit.point(x)),
            embedded: hit.embedded_point(),
            triangle: hit.triangle,
        })
    }
}

/// The grab spring's settings and what it holds. Set [`GrabTool::held`] to grab (the plugin
/// pushes it into the simulation at the next fixed step), move [`Held::target`] to drag, set it
/// to `None` to let go.
#[derive(Resource, Debug, Clone, PartialEq)]
pub struct GrabTool {
    /// Spring stiffness (N/m). Default: 2000.
    pub stiffness: f32,
    /// The held point, if any.
    pub held: Option<Held>,
    /// What the simulation holds now (entity, point, stiffness), to tell edits apart.
    applied: Option<(Entity, EmbeddedPoint, f32)>,
}

impl Default for GrabTool {
    fn default() -> Self {
        Self {
            stiffness: 2000.0,
            held: None,
            applied: None,
        }
    }
}

/// A point of a body held by the grab spring.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Held {
    /// The body's entity.
    pub entity: Entity,
    /// The held point, embedded in the body.
    pub point: EmbeddedPoint,
    /// Where the spring pulls it (m, world).
    pub target: Vec3,
}

impl GrabTool {
    /// Holds the point a ray found, pulling it to where it is now.
    pub fn grab(&mut self, hit: &BodyHit) {
        self.held = Some(Held {
            entity: hit.entity,
            point: hit.embedded,
            target: hit.point,
        });
    }

    /// Moves the target (m, world) of the held point; nothing if nothing is held.
    pub fn drag_to(&mut self, target: Vec3) {
        if let Some(held) = &mut self.held {
            held.target = target;
        }
    }

    /// Lets go.
    pub fn release(&mut self) {
        self.held = None;
    }
}

/// Where a ray meets the drag plane through `anchor` with normal `normal` (facing the
/// camera); `None` when the ray is parallel to the plane or points away from it.
pub fn drag_plane_target(
    origin: Vec3,
    direction: Vec3,
    anchor: Vec3,
    normal: Vec3,
) -> Option<Vec3> {
    let denom = direction.dot(normal);
    if denom.abs() < 1e-6 * direction.length() * normal.length() {
        return None;
    }
    let t = (anchor - origin).dot(normal) / denom;
    (t >= 0.0 && t.is_finite()).then(|| origin + t * direction)
}

/// Sync: the grab tool's state into the simulation.
pub(crate) fn sync_grab(mut tool: ResMut<GrabTool>, mut world: ResMut<DeformableWorld>) {
    let wanted = tool
        .held
        .map(|h| (h.entity, h.point, tool.stiffness.max(f32::MIN_POSITIVE)));
    // Let go of a body that is no longer the one held.
    if let Some((entity, _, _)) = tool.applied
        && wanted.is_none_or(|w| w.0 != entity)
        && let Some(h) = world.body(entity)
    {
        let _ = world.world_mut().release(h);
    }
    let (Some(held), Some((_, point, stiffness))) = (tool.held, wanted) else {
        tool.applied = None;
        return;
    };
    let Some(h) = world.body(held.entity) else {
        // The body is gone (despawned) or not created yet.
        tool.held = None;
        tool.applied = None;
        return;
    };
    let target = to_sim(held.target);
    let result = if tool.applied == wanted {
        world.world_mut().set_grab_target(h, target)
    } else {
        world.world_mut().grab(h, point, stiffness as f64, target)
    };
    match result {
        Ok(()) => tool.applied = wanted,
        Err(e) => {
            warn!("grab of {} refused: {e}", held.entity);
            tool.held = None;
            tool.applied = None;
        }
    }
}

impl Held {
    /// Where the held point is now (m, world), if its body exists.
    pub fn position(&self, world: &DeformableWorld) -> Option<Vec3> {
        let x = world.positions(self.entity)?;
        Some(to_bevy(&self.point.position(x)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drag_plane_target_is_on_the_plane_and_the_ray() {
        let anchor = Vec3::new(0.0, 1.0, 0.0);
        let normal = Vec3::new(0.0, 0.0, 1.0);
        let origin = Vec3::new(0.3, 1.5, 5.0);
        let dir = Vec3::new(0.1, -0.2, -1.0);
        let p = drag_plane_target(origin, dir, anchor, normal).unwrap();
        assert!((p - anchor).dot(normal).abs() < 1e-5);
        assert!((p - origin).cross(dir).length() < 1e-5);
        // Parallel, or pointing away: none.
        assert!(drag_plane_target(origin, Vec3::X, anchor, normal).is_none());
        assert!(drag_plane_target(origin, -dir, anchor, normal).is_none());
    }
}
