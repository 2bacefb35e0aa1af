//! Rubber bodies dropped onto each other and a floor, one pinned by a corner, one attached by
//! a vertex, with a kinematic box to sweep into them: the scene of the snapshot and save-file
//! tests, which drive the box (and the targets) each step.

use std::sync::Arc;

use bevy_deformable::sim::{
    BodyHandle, MaterialParams, ObstacleCollider, ObstacleHandle, SoftWorld, TetMesh, Vec3,
    WorldSettings,
};

/// `count` (at least 3) bodies, cubes and balls in turn, stacked loosely above a floor: body 0
/// pinned by vertex 0 at (-0.1, 0.02, -0.1), body 2 attached by vertex 5 to (0.1, 0.6, 0) at
/// 2,000 N/m; and the box (the returned obstacle), 0.1 x 0.2 x 0.6 m at (-0.6, 0.1, 0).
pub fn pushed_bodies(
    settings: WorldSettings,
    count: usize,
) -> (SoftWorld, Vec<BodyHandle>, ObstacleHandle) {
    let mut world = SoftWorld::new(settings);
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let pusher = world
        .add_obstacle(
            ObstacleCollider::cuboid(Vec3::new(0.05, 0.1, 0.3))
                .unwrap()
                .with_position(Vec3::new(-0.6, 0.1, 0.0)),
        )
        .unwrap();
    let cube = Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 3));
    let ball = Arc::new(TetMesh::sphere(0.1, 4));
    let bodies: Vec<BodyHandle> = (0..count)
        .map(|i| {
            let mesh = if i % 2 == 0 { &cube } else { &ball };
            let at = Vec3::new(0.03 * i as f64, 0.12 + 0.22 * i as f64, -0.02 * i as f64);
            world
                .add_body(mesh.clone(), MaterialParams::RUBBER, at)
                .unwrap()
        })
        .collect();
    world
        .pin(bodies[0], 0, Vec3::new(-0.1, 0.02, -0.1))
        .unwrap();
    world
        .attach(bodies[2], 5, 2_000.0, Vec3::new(0.1, 0.6, 0.0))
        .unwrap();
    (world, bodies, pusher)
}
