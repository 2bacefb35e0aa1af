//! Small linear-algebra aliases shared by the simulation core.
//!
//! The core works in `f64` with nalgebra's fixed-size types; positions are metres, velocities
//! metres per second. Conversion to Bevy's `glam` (f32) happens only in the ECS layer, and to
//! parry3d's `glam` (f32) only in [`crate::sim::contact::obstacle`].

/// A 3-vector of `f64` (a position in m, a velocity in m/s, a force in N, ...).
pub type Vec3 = nalgebra::Vector3<f64>;
/// A 3x3 matrix of `f64` (a deformation gradient, a rotation, ...).
pub type Mat3 = nalgebra::Matrix3<f64>;

/// Dot product of two equally long slices of 3-vectors, summed in index order (deterministic).
#[inline]
pub fn dot(a: &[Vec3], b: &[Vec3]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x.dot(y)).sum()
}

/// Squared Euclidean norm of a slice of 3-vectors.
#[inline]
pub fn norm_squared(a: &[Vec3]) -> f64 {
    a.iter().map(|x| x.norm_squared()).sum()
}

/// `y += alpha * x`, element-wise over slices of 3-vectors.
#[inline]
pub fn axpy(alpha: f64, x: &[Vec3], y: &mut [Vec3]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// True if every component of every vector is finite.
#[inline]
pub fn all_finite(a: &[Vec3]) -> bool {
    a.iter()
        .all(|v| v.x.is_finite() && v.y.is_finite() && v.z.is_finite())
}
