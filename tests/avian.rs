//! Soft bodies beside avian (`--features avian`): avian's colliders become obstacles of the
//! same shape. Headless: `MinimalPlugins`, a manual fixed step (one per update), avian's
//! `PhysicsPlugins` in `FixedPostUpdate` after the soft step in `FixedUpdate`.
#![cfg(feature = "avian")]

mod common;

use avian3d::prelude::*;
use bevy::prelude::*;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;

fn app() -> App {
    headless_app(|_| {})
}

/// A headless app with both engines' plugins, `configure` run on it before the first update.
fn headless_app(configure: impl FnOnce(&mut App)) -> App {
    let mut app = common::app::headless_app(
        None,
        (
            PhysicsPlugins::default(),
            DeformablePlugin::default(),
            DeformableAvianPlugin::default(),
        ),
    );
    configure(&mut app);
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
    spawn_floor(&mut app);
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

/// A static avian half-space floor at y = 0.
fn spawn_floor(app: &mut App) {
    app.world_mut().spawn((
        RigidBody::Static,
        Collider::half_space(Vec3::Y),
        Transform::default(),
    ));
}

/// The coupled scenes' app: gravity for both engines.
fn coupled_app(gravity: Vec3) -> App {
    headless_app(|app| {
        app.insert_resource(Gravity(gravity));
        app.insert_resource(DeformableConfig {
            gravity,
            ..default()
        });
    })
}

fn soft_momentum(app: &App, body: Entity) -> Vec3 {
    let world = app.world().resource::<DeformableWorld>();
    let h = app.world().get::<DeformableHandle>(body).unwrap().handle();
    let core = world.world();
    let density = core.material(h).unwrap().density;
    let masses = core.mesh(h).unwrap().lumped_masses(density);
    let v = core.velocities(h).unwrap();
    let p: sim::Vec3 = masses.iter().zip(v).map(|(&m, v)| m * v).sum();
    Vec3::new(p.x as f32, p.y as f32, p.z as f32)
}

fn soft_mass(app: &App, body: Entity) -> f32 {
    let world = app.world().resource::<DeformableWorld>();
    let h = app.world().get::<DeformableHandle>(body).unwrap().handle();
    let density = world.world().material(h).unwrap().density;
    world
        .world()
        .mesh(h)
        .unwrap()
        .lumped_masses(density)
        .iter()
        .sum::<f64>() as f32
}

/// A 10 cm rubber slab on an avian floor, and a dynamic avian box of `mass` kg above it.
fn box_on_slab(app: &mut App, mass: f32) -> (Entity, Entity) {
    spawn_floor(app);
    let slab = app
        .world_mut()
        .spawn((
            DeformableBody::from(TetMesh::cuboid(sim::Vec3::new(0.4, 0.05, 0.4), 6)),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 0.05, 0.0),
        ))
        .id();
    let rigid = app
        .world_mut()
        .spawn((
            RigidBody::Dynamic,
            Collider::cuboid(0.3, 0.2, 0.3),
            Mass(mass),
            Transform::from_xyz(0.0, 0.1 + 0.1 + 0.02, 0.0),
        ))
        .id();
    (slab, rigid)
}

#[test]
fn a_rigid_box_comes_to_rest_on_a_soft_slab() {
    let mut app = coupled_app(Vec3::new(0.0, -9.81, 0.0));
    let (_, rigid) = box_on_slab(&mut app, 5.0);
    // Avian's velocity of a body at rest on a support reads `h g (n - 1) / 2n` (its substeps
    // integrate gravity after the support's push): the speed is measured from the motion.
    let dt = 1.0 / 64.0;
    let mut fastest_late = 0.0f32;
    let mut energy_at_2s = 0.0f32;
    let mut energy_max_late = 0.0f32;
    let mut last = app.world().get::<Position>(rigid).unwrap().0;
    for step in 0..(6 * 64) {
        app.update();
        let now = app.world().get::<Position>(rigid).unwrap().0;
        let v = (now - last) / dt;
        last = now;
        let energy = 0.5 * 5.0 * v.length_squared();
        if step == 2 * 64 {
            energy_at_2s = energy;
        }
        if step >= 2 * 64 {
            fastest_late = fastest_late.max(v.length());
            energy_max_late = energy_max_late.max(energy);
        }
    }
    assert!(
        fastest_late < 5e-3,
        "the box moves at {fastest_late} m/s after 2 s"
    );
    assert!(
        energy_max_late <= energy_at_2s.max(1e-7) * 1.5 + 1e-7,
        "kinetic energy {energy_max_late} J, {energy_at_2s} J at 2 s"
    );
    let bottom = app.world().get::<Position>(rigid).unwrap().y - 0.1;
    assert!(
        (0.088..0.101).contains(&bottom),
        "the box's bottom at {bottom} m"
    );
    let impulse = *app.world().get::<RigidBodyImpulse>(rigid).unwrap();
    let weight = 5.0 * 9.81 / 64.0;
    assert!(
        (impulse.impulse.y - weight).abs() < 0.03 * weight,
        "{impulse:?} against {weight}"
    );
}

#[test]
fn a_soft_ball_and_a_free_rigid_box_conserve_momentum_head_on() {
    let mut app = coupled_app(Vec3::ZERO);
    let ball = app
        .world_mut()
        .spawn((
            DeformableBody::from(TetMesh::sphere(0.15, 6)),
            SoftMaterial {
                friction: 0.0,
                ..SoftMaterial::JELLY
            },
            InitialVelocity(Vec3::new(2.0, 0.0, 0.0)),
            Transform::from_xyz(-0.4, 0.0, 0.0),
        ))
        .id();
    app.update();
    let ball_mass = soft_mass(&app, ball);
    let rigid = app
        .world_mut()
        .spawn((
            RigidBody::Dynamic,
            Collider::cuboid(0.3, 0.3, 0.3),
            Mass(ball_mass),
            Friction::new(0.0),
            Transform::default(),
        ))
        .id();
    let start = soft_momentum(&app, ball);
    for _ in 0..64 {
        app.update();
        let v = app.world().get::<LinearVelocity>(rigid).unwrap().0;
        let total = soft_momentum(&app, ball) + ball_mass * v;
        assert!(
            (total - start).length() <= 0.01 * start.length(),
            "momentum {total} against {start}"
        );
    }
    let v = app.world().get::<LinearVelocity>(rigid).unwrap().0;
    assert!(v.x > 0.9, "the box moves at {v} m/s");
}

#[test]
fn a_soft_body_on_a_plank_tips_it_towards_its_side() {
    let mut app = coupled_app(Vec3::new(0.0, -9.81, 0.0));
    // A floor, a static fulcrum under the plank's middle, the plank level on it: tipped
    // over, an end rests on the floor 20 cm down.
    spawn_floor(&mut app);
    app.world_mut().spawn((
        RigidBody::Static,
        Collider::cuboid(0.1, 0.2, 0.6),
        Transform::from_xyz(0.0, 0.1, 0.0),
    ));
    let plank = app
        .world_mut()
        .spawn((
            RigidBody::Dynamic,
            Collider::cuboid(1.2, 0.04, 0.4),
            Mass(2.0),
            Transform::from_xyz(0.0, 0.22, 0.0),
        ))
        .id();
    app.world_mut().spawn((
        DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.1), 4)),
        SoftMaterial::RUBBER,
        Transform::from_xyz(0.45, 0.4, 0.0),
    ));
    for _ in 0..64 {
        app.update();
    }
    // The soft cube landed on the +x end: the plank turns about -z (its +x end goes down).
    let turn = app.world().get::<Rotation>(plank).unwrap().0;
    let end = turn * Vec3::X;
    assert!(end.y < -0.1, "the plank's +x end points along {end}");
}

#[test]
fn removing_a_coupled_collider_in_contact_frees_the_soft_body() {
    let mut app = coupled_app(Vec3::new(0.0, -9.81, 0.0));
    let (slab, rigid) = box_on_slab(&mut app, 20.0);
    for _ in 0..64 {
        app.update();
    }
    let top = |app: &App| {
        let world = app.world().resource::<DeformableWorld>();
        world
            .positions(slab)
            .unwrap()
            .iter()
            .filter(|p| p.x.abs() < 0.1 && p.z.abs() < 0.1)
            .map(|p| p.y)
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let pressed = top(&app);
    app.world_mut().entity_mut(rigid).despawn();
    for _ in 0..64 {
        app.update();
    }
    assert!(
        top(&app) > pressed + 2e-4,
        "the slab's top {} m, {pressed} m under the box",
        top(&app)
    );
    let world = app.world().resource::<DeformableWorld>();
    assert!(
        world
            .world()
            .obstacles()
            .iter()
            .all(|o| o.coupling().is_none())
    );
}

#[test]
fn a_soft_ball_knocks_over_a_stack_of_light_crates() {
    let mut app = coupled_app(Vec3::new(0.0, -9.81, 0.0));
    spawn_floor(&mut app);
    // Three cardboard crates (0.3 m, 20 kg/m^3: 0.54 kg each) stacked on the floor.
    let crates: Vec<Entity> = (0..3)
        .map(|k| {
            app.world_mut()
                .spawn((
                    RigidBody::Dynamic,
                    Collider::cuboid(0.3, 0.3, 0.3),
                    ColliderDensity(20.0),
                    Transform::from_xyz(0.0, 0.15 + 0.3 * k as f32, 0.0),
                ))
                .id()
        })
        .collect();
    for _ in 0..30 {
        app.update();
    }
    let top_before = app.world().get::<Position>(crates[2]).unwrap().0;
    // A jelly ball (about 14 kg) thrown at the middle crate at 4 m/s.
    app.world_mut().spawn((
        DeformableBody::from(TetMesh::sphere(0.15, 5)),
        SoftMaterial::JELLY,
        InitialVelocity(Vec3::new(4.0, 0.0, 0.0)),
        Transform::from_xyz(-0.6, 0.45, 0.0),
    ));
    for _ in 0..96 {
        app.update();
    }
    let middle = app.world().get::<Position>(crates[1]).unwrap().0;
    let top = app.world().get::<Position>(crates[2]).unwrap().0;
    assert!(middle.x > 0.3, "the middle crate is at {middle}");
    assert!(
        top.y < top_before.y - 0.2 || (top - top_before).length() > 0.3,
        "the top crate stayed at {top} (from {top_before})"
    );
}

#[test]
fn a_crate_of_avians_default_density_rests_on_a_rubber_cube() {
    // Avian's default density is 1 kg/m^3: this 0.15 m crate weighs 3.4 g, and its contact
    // with rubber is millions of times stiffer than its mass over a step squared.
    let mut app = coupled_app(Vec3::new(0.0, -9.81, 0.0));
    spawn_floor(&mut app);
    app.world_mut().spawn((
        DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.1), 3)),
        SoftMaterial::RUBBER,
        Transform::from_xyz(0.0, 0.1, 0.0),
    ));
    let crate_box = app
        .world_mut()
        .spawn((
            RigidBody::Dynamic,
            Collider::cuboid(0.15, 0.15, 0.15),
            Transform::from_xyz(0.0, 0.28, 0.0),
        ))
        .id();
    let dt = 1.0 / 64.0;
    let mut last = app.world().get::<Position>(crate_box).unwrap().0;
    let (mut fastest, mut turning) = (0.0f32, 0.0f32);
    for step in 0..96 {
        app.update();
        let now = app.world().get::<Position>(crate_box).unwrap().0;
        if step >= 64 {
            fastest = fastest.max((now - last).length() / dt);
            let w = app.world().get::<AngularVelocity>(crate_box).unwrap().0;
            turning = turning.max(w.length());
        }
        last = now;
    }
    assert!(fastest < 5e-3, "the crate moves at {fastest} m/s after 1 s");
    assert!(
        turning < 0.01,
        "the crate turns at {turning} rad/s after 1 s"
    );
    // On the cube's top (0.2 m), not through it.
    assert!(
        (0.27..0.2751).contains(&last.y),
        "the crate's centre at {last}"
    );
}
