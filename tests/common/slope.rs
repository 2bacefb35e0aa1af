//! The friction threshold's scene: a 0.2 m block on a plane tilted about z.

use std::sync::Arc;

use bevy_deformable::sim::{
    CombineRule, MaterialParams, ObstacleCollider, SoftWorld, TetMesh, Vec3, WorldSettings,
};
use nalgebra::UnitQuaternion;

/// Puts a 0.2 m block of `material` (its friction set to `mu`) on a plane tilted by `degrees`
/// about z with friction `mu` (combined by average), in a world with `settings`; returns how
/// far (m) its centroid moves along the slope from 0.5 s to 1.5 s at 60 Hz (the first half
/// second lets it settle: the block shears a little under its weight while its base holds).
/// Asserts that no step freezes it.
pub fn slide_distance(
    settings: WorldSettings,
    material: MaterialParams,
    mu: f64,
    degrees: f64,
) -> f64 {
    let mut world = SoftWorld::new(settings);
    let rotation = UnitQuaternion::from_axis_angle(&Vec3::z_axis(), degrees.to_radians());
    let normal = rotation * Vec3::y();
    let body = world
        .add_body_with_pose(
            Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 2)),
            material.with_friction(mu),
            normal * 0.1,
            rotation,
        )
        .unwrap();
    world
        .add_obstacle(
            ObstacleCollider::halfspace(normal)
                .unwrap()
                .with_friction(mu)
                .with_combine_rules(CombineRule::Average, CombineRule::Average),
        )
        .unwrap();
    let centroid = |world: &SoftWorld| {
        let x = world.positions(body).unwrap();
        x.iter().sum::<Vec3>() / x.len() as f64
    };
    let mut start = Vec3::zeros();
    for step in 0..90 {
        if step == 30 {
            start = centroid(&world);
        }
        let report = world.step(1.0 / 60.0).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
    }
    (centroid(&world) - start).dot(&(rotation * -Vec3::x()))
}
