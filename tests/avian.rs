//! Soft bodies beside avian (`--features avian`): avian's colliders become obstacles of the
//! same shape. Headless: `MinimalPlugins`, a manual fixed step (one per update), avian's
//! `PhysicsPlugins` in `FixedPostUpdate` after the soft step in `FixedUpdate`.
#![cfg(feature = "avian")]

use avian3d::prelude::*;
use bevy::asset::AssetPlugin;
use bevy::mesh::MeshPlugin;
use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy::transform::TransformPlugin;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;

fn app() -> App {
    let mut app = App::new();
    app.add_plugins((
        MinimalPlugins,
        AssetPlugin::default(),
        MeshPlugin,
        TransformPlugin,
        PhysicsPlugins::default(),
        DeformablePlugin::default(),
        DeformableAvianPlugin::default(),
    ));
    app.insert_resource(TimeUpdateStrategy::FixedTimesteps(1));
    // What `App::run` does before the first update: avian registers resources in `finish`.
    app.finish();
    app.cleanup();
    app.update();
    app
}

fn obstacle_count(app: &App) -> usize {
    app.world()
        .resource::<DeformableWorld>()
        .world()
        .obstacles()
        .len()
}

/// Whether world point `p` is inside any obstacle of the soft world.
fn inside_obstacles(app: &App, p: Vec3) -> bool {
    let q = sim::Vec3::new(p.x as f64, p.y as f64, p.z as f64);
    app.world()
        .resource::<DeformableWorld>()
        .world()
        .obstacles()
        .iter()
        .any(|o| o.query(q, 0.0).is_some_and(|c| c.depth > 0.0))
}

#[test]
fn collider_shapes_become_obstacles_of_the_same_shape() {
    let turn = Quat::from_rotation_z(0.4) * Quat::from_rotation_x(0.3);
    // (collider, agreement required): hulls of cylinders and cones and the grown inner box of
    // a rounded cuboid differ from the exact shapes near their rims and corners.
    let cases: Vec<(&str, Collider, f64)> = vec![
        ("sphere", Collider::sphere(0.3), 0.995),
        ("cuboid", Collider::cuboid(0.6, 0.3, 0.4), 0.995),
        (
            "capsule between two points",
            Collider::capsule_endpoints(0.15, Vec3::new(-0.2, -0.1, 0.0), Vec3::new(0.2, 0.2, 0.1)),
            0.995,
        ),
        (
            "rounded cuboid",
            Collider::round_cuboid(0.4, 0.3, 0.3, 0.05),
            0.97,
        ),
        ("cylinder", Collider::cylinder(0.25, 0.5), 0.98),
        ("cone", Collider::cone(0.25, 0.5), 0.98),
        (
            "convex hull",
            Collider::convex_hull(vec![
                Vec3::new(-0.3, 0.0, -0.2),
                Vec3::new(0.3, 0.0, -0.2),
                Vec3::new(0.0, 0.0, 0.3),
                Vec3::new(0.0, 0.4, 0.0),
            ])
            .unwrap(),
            0.995,
        ),
        (
            "compound of two boxes",
            Collider::compound(vec![
                (
                    Vec3::new(-0.2, 0.0, 0.0),
                    Quat::IDENTITY,
                    Collider::cuboid(0.3, 0.2, 0.2),
                ),
                (
                    Vec3::new(0.2, 0.1, 0.0),
                    Quat::from_rotation_y(0.5),
                    Collider::cuboid(0.2, 0.4, 0.2),
                ),
            ]),
            0.995,
        ),
    ];
    for (name, collider, required) in cases {
        let mut app = app();
        let at = Vec3::new(0.3, 1.0, -0.2);
        app.world_mut().spawn((
            RigidBody::Static,
            collider.clone(),
            Transform::from_translation(at).with_rotation(turn),
        ));
        app.update();
        assert!(obstacle_count(&app) >= 1, "{name}: no obstacle");
        let (mut agree, mut total, mut inside) = (0, 0, 0);
        let n = 14;
        for i in 0..n {
            for j in 0..n {
                for k in 0..n {
                    let u = Vec3::new(i as f32, j as f32, k as f32) / (n - 1) as f32;
                    let p = at + (u - Vec3::splat(0.5)) * 0.9;
                    let truth = collider.contains_point(at, turn, p);
                    inside += usize::from(truth);
                    agree += usize::from(truth == inside_obstacles(&app, p));
                    total += 1;
                }
            }
        }
        let share = agree as f64 / total as f64;
        assert!(inside > 20, "{name}: the grid barely meets the shape");
        assert!(share >= required, "{name}: {share:.4} of the points agree");
    }
}

#[test]
fn a_soft_cube_rests_on_an_avian_box() {
    let mut app = app();
    app.world_mut().spawn((
        RigidBody::Static,
        Collider::cuboid(1.0, 0.2, 1.0),
        Transform::from_xyz(0.0, 0.1, 0.0),
    ));
    let cube = app
        .world_mut()
        .spawn((
            DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.1), 3)),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 0.5, 0.0),
        ))
        .id();
    for _ in 0..128 {
        app.update();
    }
    let world = app.world().resource::<DeformableWorld>();
    let lowest = world
        .positions(cube)
        .unwrap()
        .iter()
        .map(|p| p.y)
        .fold(f64::INFINITY, f64::min);
    assert!(
        (0.199..0.21).contains(&lowest),
        "lowest vertex at {lowest} m"
    );
    let h = world.body(cube).unwrap();
    let fastest = world
        .world()
        .velocities(h)
        .unwrap()
        .iter()
        .map(|v| v.norm())
        .fold(0.0, f64::max);
    assert!(fastest < 0.05, "still moving at {fastest} m/s");
}

#[test]
fn a_kinematic_avian_body_pushes_a_soft_body() {
    let mut app = app();
    app.world_mut().spawn((
        RigidBody::Static,
        Collider::half_space(Vec3::Y),
        Transform::default(),
    ));
    let cube = app
        .world_mut()
        .spawn((
            DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.1), 3)),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 0.101, 0.0),
        ))
        .id();
    app.world_mut().spawn((
        RigidBody::Kinematic,
        Collider::cuboid(0.1, 0.3, 0.6),
        LinearVelocity(Vec3::new(0.5, 0.0, 0.0)),
        Transform::from_xyz(-0.4, 0.17, 0.0),
    ));
    let mean_x = |app: &App| {
        let p = app
            .world()
            .resource::<DeformableWorld>()
            .positions(cube)
            .unwrap();
        p.iter().map(|v| v.x).sum::<f64>() / p.len() as f64
    };
    app.update();
    let start = mean_x(&app);
    for _ in 0..128 {
        app.update();
    }
    // The paddle moves 1 m in 2 s; it meets the cube after about 0.2 m and pushes it ahead.
    let moved = mean_x(&app) - start;
    assert!(moved > 0.5, "the cube moved {moved} m");
}

#[test]
fn sensors_other_layers_and_a_games_own_obstacle_are_left_alone() {
    let mut app = app();
    app.world_mut()
        .spawn((Collider::sphere(0.2), Sensor, Transform::default()));
    app.world_mut().spawn((
        Collider::sphere(0.2),
        CollisionLayers::NONE,
        Transform::from_xyz(1.0, 0.0, 0.0),
    ));
    app.world_mut().spawn((
        Collider::sphere(0.2),
        Obstacle::ball(0.5),
        Transform::from_xyz(2.0, 0.0, 0.0),
    ));
    app.world_mut()
        .spawn((Collider::sphere(0.2), Transform::from_xyz(3.0, 0.0, 0.0)));
    app.update();
    app.update();
    assert_eq!(obstacle_count(&app), 2);
    // The game's own obstacle keeps its own size.
    assert!(inside_obstacles(&app, Vec3::new(2.4, 0.0, 0.0)));
    assert!(inside_obstacles(&app, Vec3::new(3.1, 0.0, 0.0)));
    assert!(!inside_obstacles(&app, Vec3::new(0.0, 0.0, 0.0)));
}

#[test]
fn removed_and_changed_colliders_update_their_obstacles() {
    let mut app = app();
    let plain = app
        .world_mut()
        .spawn((Collider::sphere(0.2), Transform::default()))
        .id();
    let compound = app
        .world_mut()
        .spawn((
            Collider::compound(vec![
                (
                    Vec3::new(-0.3, 0.0, 0.0),
                    Quat::IDENTITY,
                    Collider::sphere(0.1),
                ),
                (
                    Vec3::new(0.3, 0.0, 0.0),
                    Quat::IDENTITY,
                    Collider::sphere(0.1),
                ),
            ]),
            Transform::from_xyz(0.0, 2.0, 0.0),
        ))
        .id();
    app.update();
    app.update();
    assert_eq!(obstacle_count(&app), 3);
    assert!(inside_obstacles(&app, Vec3::new(0.3, 2.0, 0.0)));
    // Unchanged colliders keep their obstacles (not rebuilt every step).
    let handles = |app: &App| {
        let world = app.world().resource::<DeformableWorld>().world();
        world.obstacle_handles().collect::<Vec<_>>()
    };
    let before = handles(&app);
    app.update();
    app.update();
    assert_eq!(handles(&app), before);
    // A new shape replaces the old one.
    *app.world_mut().get_mut::<Collider>(plain).unwrap() = Collider::cuboid(1.0, 1.0, 1.0);
    app.update();
    app.update();
    assert!(inside_obstacles(&app, Vec3::new(0.45, 0.45, 0.0)));
    assert_eq!(obstacle_count(&app), 3);
    // Removing the collider (not the entity) and despawning the compound remove theirs.
    app.world_mut().entity_mut(plain).remove::<Collider>();
    app.world_mut().entity_mut(compound).despawn();
    app.update();
    app.update();
    assert_eq!(obstacle_count(&app), 0);
}
