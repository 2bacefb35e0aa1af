//! Two-way coupling of an [`Obstacle`](crate::components::Obstacle) with a dynamic rigid body
//! that a physics engine (or the game) integrates: the soft bodies' contacts push it back.
//!
//! Put [`RigidBodyCoupling`] beside an `Obstacle` and refresh its velocities every fixed step
//! before [`DeformableSystems::Sync`](crate::DeformableSystems); after
//! [`DeformableSystems::Writeback`](crate::DeformableSystems) read [`RigidBodyImpulse`] and add
//! its velocity changes to the rigid body. The rigid body's contact with the soft bodies is
//! solved together with their implicit step (see `sim::world::coupling`): a light crate on a
//! stiff cushion rests instead of being launched, and momentum is conserved to the coupling's
//! tolerance. With the `avian` feature, `DeformableAvianPlugin` does all of this for avian's
//! colliders.

use bevy::ecs::component::Component;
use bevy::ecs::entity::Entity;
use bevy::math::{Mat3, Vec3};
use bevy::prelude::{ReflectComponent, ReflectDefault};
use bevy::reflect::Reflect;

use crate::convert::to_sim;
use crate::sim;

/// Makes the [`Obstacle`](crate::components::Obstacle) on this entity the collider of a
/// dynamic rigid body, coupled both ways with the soft bodies. Its velocities are the rigid
/// body's at the start of the next fixed step (refresh them every step); the entity's
/// `GlobalTransform` is its pose.
#[derive(Component, Reflect, Debug, Clone, Copy, PartialEq)]
#[reflect(Component, Clone)]
#[require(RigidBodyImpulse)]
pub struct RigidBodyCoupling {
    /// Mass (kg); positive.
    pub mass: f32,
    /// Centre of mass in the entity's frame (m).
    pub center_of_mass: Vec3,
    /// Inverse inertia tensor about the centre of mass in the entity's frame (1/(kg m^2));
    /// symmetric positive semi-definite (zero locks rotation).
    pub inverse_inertia: Mat3,
    /// Velocity of the centre of mass (m/s).
    pub linear_velocity: Vec3,
    /// Angular velocity (rad/s).
    pub angular_velocity: Vec3,
    /// Acceleration from everything but the soft bodies (m/s^2), usually gravity: the step
    /// predicts the body's free motion with it (the rigid-body engine applies it itself).
    pub acceleration: Vec3,
    /// The rigid body this obstacle is a collider of, where it has several (each collider
    /// entity then carries the body's mass properties, velocities and this entity); `None`:
    /// the obstacle is the body's only collider.
    pub body: Option<Entity>,
}

impl RigidBodyCoupling {
    /// A solid box of `mass` kg with `half_extents` m, at rest, under `acceleration` (m/s^2).
    pub fn solid_cuboid(mass: f32, half_extents: Vec3, acceleration: Vec3) -> Self {
        let sq = (2.0 * half_extents) * (2.0 * half_extents);
        let inertia = Vec3::new(sq.y + sq.z, sq.x + sq.z, sq.x + sq.y) * (mass / 12.0);
        Self {
            mass,
            center_of_mass: Vec3::ZERO,
            inverse_inertia: Mat3::from_diagonal(inertia.recip()),
            linear_velocity: Vec3::ZERO,
            angular_velocity: Vec3::ZERO,
            acceleration,
            body: None,
        }
    }

    /// The core's mass properties.
    pub(crate) fn to_sim(self) -> sim::RigidCoupling {
        let m = self.inverse_inertia;
        let cols = [m.x_axis, m.y_axis, m.z_axis].map(to_sim);
        sim::RigidCoupling {
            mass: self.mass as f64,
            local_center_of_mass: to_sim(self.center_of_mass),
            local_inverse_inertia: nalgebra::Matrix3::from_columns(&cols),
            acceleration: to_sim(self.acceleration),
            body: self.body.map(Entity::to_bits),
        }
    }
}

/// What the soft bodies did to a coupled rigid body ([`RigidBodyCoupling`]) in the last fixed
/// step, written after each step: add the velocity changes to the rigid body.
#[derive(Component, Reflect, Debug, Clone, Copy, PartialEq)]
#[reflect(Component, Default)]
pub struct RigidBodyImpulse {
    /// Change of the centre of mass's velocity beyond the free motion (m/s).
    pub linear_velocity_change: Vec3,
    /// Change of the angular velocity (rad/s).
    pub angular_velocity_change: Vec3,
    /// Impulse of the soft bodies on the body (N s).
    pub impulse: Vec3,
    /// Angular impulse about the centre of mass (N m s).
    pub angular_impulse: Vec3,
    /// Soft-body contacts with it in the last substep (points within the contact margin).
    pub contacts: u32,
    /// Whether the step solved the body together with the soft bodies (see
    /// [`crate::sim::CouplingResponse::exact`]); false where it was held at a pose that
    /// converges to the coupled solution over iterations and steps.
    pub exact: bool,
}

impl RigidBodyImpulse {
    pub(crate) fn from_sim(r: &sim::CouplingResponse) -> Self {
        let f = |v: &sim::Vec3| crate::convert::to_bevy(v);
        Self {
            linear_velocity_change: f(&r.linear_velocity_change),
            angular_velocity_change: f(&r.angular_velocity_change),
            impulse: f(&r.impulse),
            angular_impulse: f(&r.angular_impulse),
            contacts: r.contacts as u32,
            exact: r.exact,
        }
    }
}

impl Default for RigidBodyImpulse {
    fn default() -> Self {
        Self {
            linear_velocity_change: Vec3::ZERO,
            angular_velocity_change: Vec3::ZERO,
            impulse: Vec3::ZERO,
            angular_impulse: Vec3::ZERO,
            contacts: 0,
            exact: true,
        }
    }
}
