//! Settling: extra damping of a body's rigid motion once it has moved slowly for a while.
//!
//! A stack of soft cubes has a swaying mode in which each cube rocks almost rigidly on the one
//! below; the cubes barely deform in it, so [`crate::sim::MaterialParams::damping`] (which damps
//! deformation only) hardly touches it, and with the step's friction lagging by one PD iteration
//! it can keep going for tens of seconds (the README's caveats). Game engines meet the same problem
//! with a settling phase before sleep: PhysX's deformable bodies damp the motion of a body that
//! moves slower than a settling threshold (its defaults: 0.1 m/s, 10 1/s), Jolt puts bodies to
//! sleep whose points stay under 0.03 m/s for 0.5 s.
//!
//! Here a body whose rigid speed — `|v_cm| + |omega| r_max`, the fastest a point of the body
//! moves by the best-fit rigid motion, with `r_max` the distance of its farthest vertex from the
//! centre of mass — has stayed under [`Settling::speed`] for [`Settling::delay`] has the rigid part
//! of its velocity scaled by `exp(-damping h)` after every step. Deformation (jiggle) is left to
//! the material's damping. A body starting to slide from rest passes the speed threshold within
//! `speed / a` seconds (0.03 m/s at 0.17 m/s^2, a block 1 degree past its friction angle: 0.18 s)
//! and so is never damped if that is shorter than the delay; a body already settling and then
//! pushed just past its friction threshold crawls at `a / damping` until that exceeds the speed
//! threshold. Only a supported body settles — one touching an obstacle or another body: a body
//! drifting slowly through the air (or in zero gravity) keeps its motion. Bodies with pinned
//! vertices, attachments or a grab spring, and bodies touching a moving obstacle, never settle,
//! nor does anything in their island (a body resting on a slowly lifted one): they are held or
//! carried, and their slow motion is theirs.

use super::settings::Settling;
use crate::sim::math::{Mat3, Vec3};

/// The best-fit rigid motion of a set of moving points: centre of mass `c` (m), its velocity
/// `v_cm` (m/s) and the angular velocity `omega` (rad/s) that carries the momentum about `c`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RigidMotion {
    pub c: Vec3,
    pub v_cm: Vec3,
    pub omega: Vec3,
}

impl RigidMotion {
    /// The rigid motion of points `x` (m) moving at `v` (m/s) with masses `m` (kg); `None` for
    /// a zero total mass.
    pub fn of(x: &[Vec3], v: &[Vec3], m: &[f64]) -> Option<Self> {
        let total: f64 = m.iter().sum();
        if !(total > 0.0) {
            return None;
        }
        let c = x.iter().zip(m).map(|(p, &mi)| mi * p).sum::<Vec3>() / total;
        let v_cm = v.iter().zip(m).map(|(u, &mi)| mi * u).sum::<Vec3>() / total;
        let mut l = Vec3::zeros();
        let mut inertia = Mat3::zeros();
        for ((p, u), &mi) in x.iter().zip(v).zip(m) {
            let r = p - c;
            l += mi * r.cross(&(u - v_cm));
            inertia += mi * (Mat3::identity() * r.norm_squared() - r * r.transpose());
        }
        let omega = inertia.try_inverse().map_or(Vec3::zeros(), |inv| inv * l);
        Some(Self { c, v_cm, omega })
    }

    /// The rigid velocity (m/s) at `p` (m).
    pub fn velocity_at(&self, p: &Vec3) -> Vec3 {
        self.v_cm + self.omega.cross(&(p - self.c))
    }

    /// An upper bound (m/s) on the speed of any of the points `x` under this motion:
    /// `|v_cm| + |omega| max |x - c|`.
    pub fn speed_bound(&self, x: &[Vec3]) -> f64 {
        let reach = x.iter().map(|p| (p - self.c).norm()).fold(0.0, f64::max);
        self.v_cm.norm() + self.omega.norm() * reach
    }
}

/// One step of settling for a body whose rigid motion is `rigid`: updates how long it has been
/// slow (`slow_for`, s) and, once that reaches the delay, damps the rigid part of the
/// velocities `v`. Returns whether it damped. The caller leaves held bodies out.
pub(crate) fn settle(
    settling: &Settling,
    rigid: &RigidMotion,
    x: &[Vec3],
    v: &mut [Vec3],
    slow_for: &mut f64,
    h: f64,
) -> bool {
    if !settling.enabled() {
        *slow_for = 0.0;
        return false;
    }
    // A non-finite state counts as fast (the guard that follows freezes the body).
    let speed = rigid.speed_bound(x);
    if speed.is_nan() || speed >= settling.speed {
        *slow_for = 0.0;
        return false;
    }
    *slow_for += h;
    if *slow_for < settling.delay {
        return false;
    }
    let keep = (-settling.damping * h).exp();
    for (vi, p) in v.iter_mut().zip(x) {
        *vi -= (1.0 - keep) * rigid.velocity_at(p);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::math::Vec3;

    /// [`settle`] with the rigid motion of `x`, `v`, `m`.
    fn settle_body(
        settling: &Settling,
        x: &[Vec3],
        v: &mut [Vec3],
        m: &[f64],
        slow_for: &mut f64,
        h: f64,
    ) -> bool {
        let rigid = RigidMotion::of(x, v, m).unwrap();
        settle(settling, &rigid, x, v, slow_for, h)
    }

    fn square() -> (Vec<Vec3>, Vec<f64>) {
        let x = vec![
            Vec3::new(1.0, 0.0, 0.0),
            Vec3::new(-1.0, 0.0, 0.0),
            Vec3::new(0.0, 1.0, 0.0),
            Vec3::new(0.0, -1.0, 0.0),
            Vec3::new(0.0, 0.0, 1.0),
            Vec3::new(0.0, 0.0, -1.0),
        ];
        (x, vec![2.0; 6])
    }

    #[test]
    fn rigid_motion_recovers_a_translation_plus_rotation() {
        let (x, m) = square();
        let (v_cm, omega) = (Vec3::new(0.1, -0.2, 0.3), Vec3::new(0.5, 0.0, -1.0));
        let v: Vec<Vec3> = x.iter().map(|p| v_cm + omega.cross(p)).collect();
        let r = RigidMotion::of(&x, &v, &m).unwrap();
        assert!((r.v_cm - v_cm).norm() < 1e-12);
        assert!((r.omega - omega).norm() < 1e-12);
        assert!(RigidMotion::of(&x, &v, &[0.0; 6]).is_none());
    }

    #[test]
    fn a_slow_body_is_damped_only_after_the_delay_and_only_rigidly() {
        let (x, m) = square();
        let settling = Settling {
            speed: 0.05,
            delay: 0.1,
            damping: 10.0,
        };
        // A slow drift plus a breathing motion (pure deformation: no momentum, no spin).
        let breathe = 0.2;
        let drift = Vec3::new(0.01, 0.0, 0.0);
        let mut v: Vec<Vec3> = x.iter().map(|p| drift + breathe * p).collect();
        let mut slow_for = 0.0;
        let h = 0.02;
        let mut damped_steps = 0;
        for _ in 0..10 {
            if settle_body(&settling, &x, &mut v, &m, &mut slow_for, h) {
                damped_steps += 1;
            }
        }
        // Slow from the first step on: damped from the fifth (0.1 s) on, six steps in all.
        assert_eq!(damped_steps, 6);
        let expected = drift * (-10.0 * h * 6.0f64).exp();
        for (p, u) in x.iter().zip(&v) {
            assert!((u - (expected + breathe * p)).norm() < 1e-12, "{u}");
        }
    }

    #[test]
    fn a_fast_or_held_body_is_never_damped() {
        let (x, m) = square();
        let settling = Settling::default();
        let mut slow_for = 1.0;
        let spin = Vec3::new(0.0, 0.05, 0.0);
        let mut v: Vec<Vec3> = x.iter().map(|p| spin.cross(p)).collect();
        // |omega| r_max = 0.05 m/s > 0.03: fast, and the clock restarts.
        assert!(!settle_body(&settling, &x, &mut v, &m, &mut slow_for, 0.01));
        assert_eq!(slow_for, 0.0);
        let mut still = vec![Vec3::zeros(); 6];
        let mut slow_for = 1.0;
        assert!(!settle_body(
            &Settling::OFF,
            &x,
            &mut still,
            &m,
            &mut slow_for,
            0.01
        ));
        assert_eq!(slow_for, 0.0);
    }
}
