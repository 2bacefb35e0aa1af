//! The one place where Bevy's `f32` glam types meet the core's `f64` nalgebra types.

use bevy::math::{Quat, Vec3};
use nalgebra::{Quaternion, UnitQuaternion};

use crate::sim;

/// Bevy vector (m) to core vector.
#[inline]
pub(crate) fn to_sim(v: Vec3) -> sim::Vec3 {
    sim::Vec3::new(v.x as f64, v.y as f64, v.z as f64)
}

/// Core vector to Bevy vector (m).
#[inline]
pub(crate) fn to_bevy(v: &sim::Vec3) -> Vec3 {
    Vec3::new(v.x as f32, v.y as f32, v.z as f32)
}

/// Core rotation to Bevy rotation.
#[inline]
pub(crate) fn quat_to_bevy(q: &UnitQuaternion<f64>) -> Quat {
    Quat::from_xyzw(q.i as f32, q.j as f32, q.k as f32, q.w as f32).normalize()
}

/// Bevy rotation to core rotation.
#[inline]
pub(crate) fn quat_to_sim(q: Quat) -> UnitQuaternion<f64> {
    UnitQuaternion::from_quaternion(Quaternion::new(
        q.w as f64, q.x as f64, q.y as f64, q.z as f64,
    ))
}
