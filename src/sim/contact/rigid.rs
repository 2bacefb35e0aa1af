//! The rigid body behind a *coupled* obstacle: its mass properties, and what the soft bodies
//! did to it in the last step.
//!
//! A coupled obstacle is a dynamic rigid body integrated elsewhere (a rigid-body engine such as
//! avian, or a game's own code). Its pose and velocities are given at the *start* of the step;
//! the step moves it with its free motion (`v + h a`, [`RigidCoupling::acceleration`]) plus the
//! velocity change of the soft bodies' contact forces, solved as one implicit step with the soft
//! bodies (its pose is an unknown of their contact QP; `crate::sim::world::coupling`), and
//! reports that change as a [`CouplingResponse`] for the rigid-body engine to apply.

use nalgebra::{Matrix3, UnitQuaternion};

use super::obstacle_error::{MAX_OBSTACLE_EXTENT, ObstacleError};
use crate::sim::math::Vec3;

/// Mass properties of the rigid body behind a coupled obstacle, and the acceleration it has
/// from everything but the soft bodies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RigidCoupling {
    /// Mass (kg); positive.
    pub mass: f64,
    /// Centre of mass in the obstacle's local frame (m).
    pub local_center_of_mass: Vec3,
    /// Inverse of the inertia tensor about the centre of mass, in the obstacle's local frame
    /// (1/(kg m^2)); symmetric and positive semi-definite. A zero matrix locks rotation.
    pub local_inverse_inertia: Matrix3<f64>,
    /// Acceleration (m/s^2) the body has from everything but the soft bodies over a step,
    /// usually gravity. The step predicts its free motion with it; the rigid-body engine
    /// applies it itself, so the [`CouplingResponse`] does not contain it.
    pub acceleration: Vec3,
    /// Obstacles with the same id are the colliders of one rigid body (their mass properties
    /// and state must agree: the first one's, in the world's obstacle order, stand for the
    /// body); `None` makes the obstacle a body of its own.
    pub body: Option<u64>,
}

impl RigidCoupling {
    /// A uniform solid box of `mass` kg and `half_extents` m, centred on the obstacle's origin,
    /// under `acceleration` (m/s^2).
    pub fn solid_cuboid(mass: f64, half_extents: Vec3, acceleration: Vec3) -> Self {
        let (x, y, z) = (
            4.0 * half_extents.x.powi(2),
            4.0 * half_extents.y.powi(2),
            4.0 * half_extents.z.powi(2),
        );
        let inertia = Vec3::new(y + z, x + z, x + y) * (mass / 12.0);
        Self {
            mass,
            local_center_of_mass: Vec3::zeros(),
            local_inverse_inertia: Matrix3::from_diagonal(&inertia.map(inverse_or_zero)),
            acceleration,
            body: None,
        }
    }

    /// A uniform solid ball of `mass` kg and `radius` m, centred on the obstacle's origin,
    /// under `acceleration` (m/s^2).
    pub fn solid_ball(mass: f64, radius: f64, acceleration: Vec3) -> Self {
        let inertia = 0.4 * mass * radius * radius;
        Self {
            mass,
            local_center_of_mass: Vec3::zeros(),
            local_inverse_inertia: Matrix3::identity() * inverse_or_zero(inertia),
            acceleration,
            body: None,
        }
    }

    /// Checks the values: a finite positive mass, a finite centre of mass within
    /// [`MAX_OBSTACLE_EXTENT`], a finite symmetric positive semi-definite inverse inertia, a
    /// finite acceleration.
    ///
    /// # Errors
    /// [`ObstacleError::InvalidValue`] naming the offending value.
    pub fn validate(&self) -> Result<(), ObstacleError> {
        let bad = |what: &'static str, value: f64, positive: bool| {
            Err(ObstacleError::InvalidValue {
                what,
                value,
                positive,
            })
        };
        if !(self.mass.is_finite() && self.mass > 0.0) {
            return bad("coupled mass", self.mass, true);
        }
        let c = &self.local_center_of_mass;
        if !c
            .iter()
            .all(|v| v.is_finite() && v.abs() <= MAX_OBSTACLE_EXTENT)
        {
            return bad("centre of mass", c.norm(), false);
        }
        if !self.acceleration.iter().all(|v| v.is_finite()) {
            return bad("coupled acceleration", self.acceleration.norm(), false);
        }
        let m = &self.local_inverse_inertia;
        if !m.iter().all(|v| v.is_finite()) {
            return bad("inverse inertia", m.norm(), false);
        }
        let scale = m.norm().max(f64::MIN_POSITIVE);
        if (m - m.transpose()).norm() > 1e-9 * scale {
            return bad(
                "inverse inertia asymmetry",
                (m - m.transpose()).norm(),
                false,
            );
        }
        let lowest = m.symmetric_eigen().eigenvalues.min();
        if lowest < -1e-9 * scale {
            return bad("inverse inertia eigenvalue", lowest, true);
        }
        Ok(())
    }

    /// The inverse inertia in the world frame for a body turned by `rotation` (1/(kg m^2)).
    pub fn world_inverse_inertia(&self, rotation: &UnitQuaternion<f64>) -> Matrix3<f64> {
        let r = rotation.to_rotation_matrix();
        r.matrix() * self.local_inverse_inertia * r.matrix().transpose()
    }
}

fn inverse_or_zero(v: f64) -> f64 {
    if v > 0.0 { 1.0 / v } else { 0.0 }
}

/// What the soft bodies did to a coupled obstacle in the last [`crate::sim::SoftWorld::step`]:
/// the velocity changes beyond its free motion, for the rigid-body engine to add to its body
/// (the impulses are the same thing times the mass properties, for display and tests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CouplingResponse {
    /// Linear velocity change of the centre of mass (m/s).
    pub linear_velocity_change: Vec3,
    /// Angular velocity change (rad/s).
    pub angular_velocity_change: Vec3,
    /// Impulse of the soft bodies on the rigid body (N s): mass times the linear change.
    pub impulse: Vec3,
    /// Angular impulse of the soft bodies about the centre of mass (N m s).
    pub angular_impulse: Vec3,
    /// Soft-body contacts with it in the last substep (points within the contact margin).
    pub contacts: usize,
    /// Whether every substep of the last step solved the body with the soft bodies as one
    /// step (true where nothing touched it). False where an island touching it had to solve
    /// its last PD iteration of a substep by MPRGP (more rows than the contact subspace takes,
    /// columns that do not fit, the Newton solver), with the body held at a pose that moves
    /// towards the coupled solution from iteration to iteration: its velocity change is then
    /// that of the held pose (see `sim::world::coupling`).
    pub exact: bool,
}

impl Default for CouplingResponse {
    fn default() -> Self {
        Self {
            linear_velocity_change: Vec3::zeros(),
            angular_velocity_change: Vec3::zeros(),
            impulse: Vec3::zeros(),
            angular_impulse: Vec3::zeros(),
            contacts: 0,
            exact: true,
        }
    }
}
