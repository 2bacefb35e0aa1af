//! What an editor does with a running world: pick a body with a ray, hold it with a grab spring,
//! and read back what a debug view draws (pins, refactorization times).

use std::time::Duration;

use super::SoftWorld;
use super::body::Rebuild;
use super::error::{WorldError, check_finite};
use super::handles::BodyHandle;
use crate::sim::embed::EmbeddedPoint;
use crate::sim::math::Vec3;
use crate::sim::pd::PointSpring;
use crate::sim::pick::{SurfaceHit, ray_cast_surface};

impl SoftWorld {
    /// The nearest body surface hit by the ray `origin + t dir`, `0 <= t <= max_distance` (m),
    /// frozen bodies included.
    pub fn ray_cast(
        &self,
        origin: Vec3,
        dir: Vec3,
        max_distance: f64,
    ) -> Option<(BodyHandle, SurfaceHit)> {
        let mut best: Option<(BodyHandle, SurfaceHit)> = None;
        for (b, &id) in self.bodies.iter().zip(self.body_ids.ids()) {
            let limit = best.map_or(max_distance, |(_, h)| h.distance);
            if let Some(hit) = ray_cast_surface(&b.mesh, &b.x, origin, dir, limit)
                && best.is_none_or(|(_, h)| hit.distance < h.distance)
            {
                best = Some((BodyHandle(id), hit));
            }
        }
        best
    }

    /// Holds `point` of the body with a zero-rest-length spring of `stiffness` (N/m) pulling it to
    /// `target` (m): the mouse grab. The spring is implicit (part of the body's system matrix), so
    /// any stiffness is stable; grabbing or changing the point or stiffness refactors that body
    /// on its next step. A body holds at most one grab: this replaces the previous one.
    ///
    /// # Errors
    /// Unknown body; a vertex out of range; weights, stiffness or target not finite (stiffness
    /// must be > 0); [`WorldError::PointNotInOneTet`] when the point's vertices (those with a
    /// non-zero weight) are not all corners of one tet.
    pub fn grab(
        &mut self,
        h: BodyHandle,
        point: EmbeddedPoint,
        stiffness: f64,
        target: Vec3,
    ) -> Result<(), WorldError> {
        check_finite("grab target", &target)?;
        if !(stiffness.is_finite() && stiffness > 0.0) {
            return Err(WorldError::InvalidValue {
                what: "grab stiffness",
                positive: true,
            });
        }
        if !point.weights.iter().all(|w| w.is_finite()) {
            return Err(WorldError::InvalidValue {
                what: "grab point weights",
                positive: false,
            });
        }
        let b = self.body_mut(h)?;
        let count = b.x.len();
        if let Some(&vertex) = point.vertices.iter().find(|&&v| v as usize >= count) {
            return Err(WorldError::VertexOutOfRange {
                vertex: vertex as usize,
                count,
            });
        }
        let used = |k: usize| point.weights[k] != 0.0;
        let in_one_tet = b
            .mesh
            .tets()
            .iter()
            .any(|t| (0..4).all(|k| !used(k) || t.contains(&point.vertices[k])));
        if !in_one_tet {
            return Err(WorldError::PointNotInOneTet);
        }
        let spring = PointSpring {
            point,
            stiffness,
            target,
        };
        let same_matrix = b
            .grab
            .is_some_and(|g| g.point == point && g.stiffness == stiffness);
        b.grab = Some(spring);
        if same_matrix {
            if let Some(pd) = b.pd.as_mut() {
                pd.set_spring_target(target);
            }
        } else {
            b.rebuild = b.rebuild.max_with(Rebuild::Numeric);
        }
        Ok(())
    }

    /// Moves the grab spring's target (m); no refactorization. Does nothing if the body is not
    /// held.
    ///
    /// # Errors
    /// Unknown body, non-finite target.
    pub fn set_grab_target(&mut self, h: BodyHandle, target: Vec3) -> Result<(), WorldError> {
        check_finite("grab target", &target)?;
        let b = self.body_mut(h)?;
        if let Some(g) = &mut b.grab {
            g.target = target;
            if let Some(pd) = b.pd.as_mut() {
                pd.set_spring_target(target);
            }
        }
        Ok(())
    }

    /// Lets go of the body (refactors it on its next step); whether it was held.
    ///
    /// # Errors
    /// Unknown body.
    pub fn release(&mut self, h: BodyHandle) -> Result<bool, WorldError> {
        let b = self.body_mut(h)?;
        let held = b.grab.take().is_some();
        if held {
            b.rebuild = b.rebuild.max_with(Rebuild::Numeric);
        }
        Ok(held)
    }

    /// The body's grab spring, if it is held.
    ///
    /// # Errors
    /// Unknown body.
    pub fn grab_spring(&self, h: BodyHandle) -> Result<Option<&PointSpring>, WorldError> {
        Ok(self.body(h)?.grab.as_ref())
    }

    /// How long the body's last system build or refactorization took (after creation, a
    /// material edit, a pin, a grab), if it has had one.
    ///
    /// # Errors
    /// Unknown body.
    pub fn last_refactor(&self, h: BodyHandle) -> Result<Option<Duration>, WorldError> {
        Ok(self.body(h)?.last_refactor)
    }

    /// The inner boxes of the body's surface-triangle BVH (min, max corners, m), appended to
    /// `out` (fitted each step while soft contacts are on; empty before).
    ///
    /// # Errors
    /// Unknown body.
    pub fn bvh_boxes(&self, h: BodyHandle, out: &mut Vec<[Vec3; 2]>) -> Result<(), WorldError> {
        self.body(h)?.ws.bvh.triangle_node_boxes(out);
        Ok(())
    }

    /// Puts the body back where it was created, at rest: positions, zero velocities, pins at
    /// their targets, no grab, not frozen, warm starts cleared. Material, pins and attachments
    /// stay as they are.
    ///
    /// # Errors
    /// Unknown body.
    pub fn reset_body(&mut self, h: BodyHandle) -> Result<(), WorldError> {
        let b = self.body_mut(h)?;
        b.x.copy_from_slice(&b.initial);
        for (i, p) in b.x.iter_mut().enumerate() {
            if b.pinned[i] {
                *p = b.targets[i];
            }
        }
        b.v.iter_mut().for_each(|v| *v = Vec3::zeros());
        b.good_x.copy_from_slice(&b.x);
        b.good_v.copy_from_slice(&b.v);
        if b.grab.take().is_some() {
            b.rebuild = b.rebuild.max_with(Rebuild::Numeric);
        }
        b.frozen = None;
        b.slow_for = 0.0;
        b.ws.frames.reset();
        b.ws.friction.clear();
        Ok(())
    }

    /// Per vertex: whether it is pinned.
    ///
    /// # Errors
    /// Unknown body.
    pub fn pinned(&self, h: BodyHandle) -> Result<&[bool], WorldError> {
        Ok(&self.body(h)?.pinned)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::sim::{MaterialParams, TetMesh, WorldSettings};

    fn world_with_cube() -> (SoftWorld, BodyHandle) {
        let settings = WorldSettings {
            gravity: Vec3::zeros(),
            ..Default::default()
        };
        let mut world = SoftWorld::new(settings);
        let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 3));
        let h = world
            .add_body(mesh, MaterialParams::RUBBER, Vec3::zeros())
            .unwrap();
        (world, h)
    }

    /// Grabbing a surface point and pulling: the point moves toward the target, the body
    /// follows, and after release it is left alone (no spring force any more).
    #[test]
    fn grab_spring_pulls_the_point_toward_the_target() {
        let (mut world, h) = world_with_cube();
        let (hit_body, hit) = world
            .ray_cast(Vec3::new(0.05, 0.03, 2.0), -Vec3::z(), 10.0)
            .unwrap();
        assert_eq!(hit_body, h);
        let point = hit.embedded_point();
        let start = point.position(world.positions(h).unwrap());
        assert!((start.z - 0.2).abs() < 1e-12);
        let target = start + Vec3::new(0.0, 0.0, 0.5);
        world.grab(h, point, 5000.0, target).unwrap();
        let mut distance = (start - target).norm();
        for _ in 0..60 {
            world.step(1.0 / 60.0).unwrap();
            let p = point.position(world.positions(h).unwrap());
            let d = (p - target).norm();
            // A damped pull: the distance shrinks (allowing the overshoot of the spring's swing
            // to be no more than where it started).
            assert!(d < 0.5 + 1e-9, "point ran away: {d}");
            distance = distance.min(d);
        }
        assert!(
            distance < 0.1,
            "the point never came near the target: {distance}"
        );
        assert!(world.last_refactor(h).unwrap().is_some());
        assert!(world.grab_spring(h).unwrap().is_some());
        assert!(world.release(h).unwrap());
        assert!(world.grab_spring(h).unwrap().is_none());
        // Released in zero gravity: momentum is conserved (no spring pulling any more).
        let momentum = |w: &SoftWorld| -> Vec3 {
            let m = w.body(h).unwrap().masses();
            w.velocities(h)
                .unwrap()
                .iter()
                .zip(&m)
                .map(|(v, m)| *m * v)
                .sum()
        };
        world.step(1.0 / 60.0).unwrap();
        let before = momentum(&world);
        for _ in 0..10 {
            world.step(1.0 / 60.0).unwrap();
        }
        assert!((momentum(&world) - before).norm() < 1e-6 * (1.0 + before.norm()));
    }

    /// The moving target alone does not refactor; a new stiffness does.
    #[test]
    fn moving_the_target_does_not_refactor() {
        let (mut world, h) = world_with_cube();
        world.step(1.0 / 60.0).unwrap();
        let point = EmbeddedPoint::vertex(0);
        world.grab(h, point, 100.0, Vec3::zeros()).unwrap();
        world.step(1.0 / 60.0).unwrap();
        let first = world.last_refactor(h).unwrap();
        for k in 0..5 {
            world
                .set_grab_target(h, Vec3::new(0.1 * k as f64, 0.0, 0.0))
                .unwrap();
            world.step(1.0 / 60.0).unwrap();
            assert_eq!(world.body(h).unwrap().rebuild, Rebuild::None);
        }
        assert_eq!(world.last_refactor(h).unwrap(), first);
        world.grab(h, point, 300.0, Vec3::zeros()).unwrap();
        assert_eq!(world.body(h).unwrap().rebuild, Rebuild::Numeric);
    }

    /// Reset: back to the creation positions, at rest, unfrozen, not held.
    #[test]
    fn reset_puts_a_body_back_at_rest() {
        let mut world = SoftWorld::new(WorldSettings::default());
        let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 3));
        let h = world
            .add_body(mesh, MaterialParams::RUBBER, Vec3::new(0.0, 1.0, 0.0))
            .unwrap();
        let start = world.positions(h).unwrap().to_vec();
        world
            .grab(h, EmbeddedPoint::vertex(3), 50.0, Vec3::zeros())
            .unwrap();
        for _ in 0..10 {
            world.step(1.0 / 60.0).unwrap();
        }
        world.velocities_mut(h).unwrap()[0].x = f64::NAN;
        world.step(1.0 / 60.0).unwrap();
        assert!(world.frozen(h).unwrap().is_some());
        world.reset_body(h).unwrap();
        assert_eq!(world.positions(h).unwrap(), &start[..]);
        assert!(
            world
                .velocities(h)
                .unwrap()
                .iter()
                .all(|v| *v == Vec3::zeros())
        );
        assert!(world.frozen(h).unwrap().is_none());
        assert!(world.grab_spring(h).unwrap().is_none());
        world.step(1.0 / 60.0).unwrap();
        assert!(world.frozen(h).unwrap().is_none());
        assert!(world.positions(h).unwrap()[0].y < start[0].y);
    }

    #[test]
    fn bad_grabs_are_refused() {
        let (mut world, h) = world_with_cube();
        let p = EmbeddedPoint::vertex(0);
        assert!(world.grab(h, p, 0.0, Vec3::zeros()).is_err());
        assert!(world.grab(h, p, f64::NAN, Vec3::zeros()).is_err());
        let nan = Vec3::new(f64::NAN, 0.0, 0.0);
        assert!(world.grab(h, p, 10.0, nan).is_err());
        let far = EmbeddedPoint {
            vertices: [0, 1, 2, 100_000],
            weights: [0.25; 4],
        };
        assert!(matches!(
            world.grab(h, far, 10.0, Vec3::zeros()),
            Err(WorldError::VertexOutOfRange { .. })
        ));
        // Two opposite corners of the cube share no tet.
        let n = world.positions(h).unwrap().len() as u32;
        let spread = EmbeddedPoint {
            vertices: [0, n - 1, 0, 0],
            weights: [0.5, 0.5, 0.0, 0.0],
        };
        assert_eq!(
            world.grab(h, spread, 10.0, Vec3::zeros()),
            Err(WorldError::PointNotInOneTet)
        );
        assert!(world.grab_spring(h).unwrap().is_none());
    }
}
