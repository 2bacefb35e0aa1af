//! The scenes of the snapshot and save-file tests: rubber bodies dropped onto each other and a
//! floor, one pinned by a corner, one attached by a vertex, with a kinematic box to sweep into
//! them (the tests drive the box and the targets each step); and a rigid crate coupled two ways
//! over a rubber slab.

use std::sync::Arc;

use bevy_deformable::sim::{
    BodyHandle, MaterialParams, ObstacleCollider, ObstacleHandle, RigidCoupling, SoftWorld,
    TetMesh, Vec3, WorldSettings,
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

/// A rigid crate of 4 kg, 0.2 x 0.16 x 0.2 m, coupled two ways (the core's half of the avian
/// coupling), 0.3 m above a rubber slab (0.6 x 0.1 x 0.6 m) on a floor: the world, the slab
/// and the crate.
pub fn crate_over_slab() -> (SoftWorld, BodyHandle, ObstacleHandle) {
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let slab = world
        .add_body(
            Arc::new(TetMesh::try_cuboid(Vec3::new(0.3, 0.05, 0.3), 6).unwrap()),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 0.05, 0.0),
        )
        .unwrap();
    let half = Vec3::new(0.1, 0.08, 0.1);
    let gravity = world.settings().gravity;
    let crate_box = world
        .add_obstacle(
            ObstacleCollider::cuboid(half)
                .unwrap()
                .with_position(Vec3::new(0.02, 0.3, 0.0))
                .with_coupling(RigidCoupling::solid_cuboid(4.0, half, gravity))
                .unwrap(),
        )
        .unwrap();
    (world, slab, crate_box)
}
