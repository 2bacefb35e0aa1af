//! The Bevy plugin headless: contacts with obstacles and between bodies, their messages,
//! sleeping and waking, and a rigid body of the game's own coupled to a soft slab.

mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;
use common::app::*;

#[test]
fn contact_messages_arrive_in_order() {
    let mut app = app();
    // Set down half a millimetre above the floor so it lands without bouncing.
    let body = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 0.2005, 0.0)))
        .id();
    let floor = app.world_mut().spawn(Obstacle::halfspace(Vec3::Y)).id();
    for _ in 0..60 {
        app.update();
    }
    app.world_mut().despawn(floor);
    for _ in 0..5 {
        app.update();
    }
    let log = &app.world().resource::<MessageLog>().0;
    // At rest, the body falls asleep; the floor's removal wakes it (messages of one update
    // are logged by kind: contacts first).
    assert_eq!(
        log,
        &vec![
            format!("started {body} {floor}"),
            format!("slept {body}"),
            format!("ended {body} {floor}"),
            format!("woke {body}"),
        ],
        "{log:?}"
    );
}

#[test]
fn a_resting_body_sleeps_is_drawn_still_and_wakes_on_a_material_edit() {
    let mut app = app();
    let body = resting_cube(&mut app);
    let asleep = |app: &App| {
        app.world()
            .get::<DeformableState>(body)
            .unwrap()
            .is_asleep()
    };
    let mut steps = 0;
    while !asleep(&app) {
        app.update();
        steps += 1;
        assert!(steps < 300, "never fell asleep");
        if steps == 1 {
            let status = app.world().get::<DeformableState>(body).unwrap().status();
            assert_eq!(status, BodyStatus::Simulated);
            // The created body carries its handle in the simulation.
            let handle = app.world().get::<DeformableHandle>(body).unwrap().handle();
            assert_eq!(
                Some(handle),
                app.world().resource::<DeformableWorld>().body(body)
            );
        }
    }
    assert_eq!(
        app.world().get::<DeformableState>(body).unwrap().status(),
        BodyStatus::Sleeping
    );
    assert_eq!(
        app.world()
            .resource::<DeformableDiagnostics>()
            .sleeping_bodies,
        1
    );
    // The step it fell asleep in is drawn blended with the one before; from the next, the
    // mesh holds that step's shape.
    app.update();
    let still = drawn(&app, body);
    for _ in 0..10 {
        app.update();
    }
    assert_eq!(drawn(&app, body), still, "a sleeping body's mesh moved");
    app.world_mut()
        .get_mut::<SoftMaterial>(body)
        .unwrap()
        .youngs_modulus = 5.0e3;
    for _ in 0..10 {
        app.update();
    }
    assert!(!asleep(&app));
    let log = &app.world().resource::<MessageLog>().0;
    assert_eq!(
        log.iter()
            .filter(|m| m.starts_with("slept") || m.starts_with("woke"))
            .collect::<Vec<_>>(),
        vec![&format!("slept {body}"), &format!("woke {body}")],
        "{log:?}"
    );
    // Softened, it sags: drawn lower than while it slept.
    let top = |p: &[Vec3]| p.iter().map(|v| v.y).fold(f32::MIN, f32::max);
    assert!(top(&drawn(&app, body)) < top(&still) - 0.005);
}

#[test]
fn bodies_land_on_each_other_and_a_thrown_body_moves() {
    let mut app = app();
    let world = app.world_mut();
    world.spawn((Obstacle::halfspace(Vec3::Y), Transform::default()));
    let lower = world
        .spawn((
            cube(),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 0.2, 0.0),
        ))
        .id();
    let upper = world
        .spawn((
            cube(),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.02, 0.7, 0.0),
        ))
        .id();
    let thrown = world
        .spawn((
            cube(),
            InitialVelocity(Vec3::new(0.0, 0.0, 2.0)),
            Transform::from_xyz(3.0, 0.5, 0.0),
        ))
        .id();
    // The most over the run: the stack falls asleep before the end, and a sleeping body has no
    // contacts in the step's diagnostics.
    let (mut soft_contacts, mut regions, mut islands) = (0, 0, 0);
    for _ in 0..90 {
        app.update();
        let diagnostics = app.world().resource::<DeformableDiagnostics>();
        soft_contacts = soft_contacts.max(diagnostics.soft_contacts);
        regions = regions.max(diagnostics.contact_regions);
        islands = islands.max(diagnostics.islands);
    }
    // The upper cube rests on the lower one (centres 0.4 m apart, less a little squash), not
    // inside it or beside it.
    let centre = |p: &[sim::Vec3]| p.iter().sum::<sim::Vec3>() / p.len() as f64;
    let (l, u) = (
        centre(&positions(&app, lower)),
        centre(&positions(&app, upper)),
    );
    assert!(
        (u.y - l.y - 0.4).abs() < 0.02,
        "centres {} m apart",
        u.y - l.y
    );
    assert!((u.x - l.x).abs() < 0.1, "the upper cube slid off");
    assert!(soft_contacts > 0);
    assert!(regions > 0 && islands >= 1);
    // The thrown cube started at 2 m/s along z and slid on the floor (friction stops it).
    let z = positions(&app, thrown).iter().map(|p| p.z).sum::<f64>() / 64.0;
    assert!(z > 0.1, "the thrown cube moved only {z} m");
}

/// The game's own integrator of a coupled rigid body: its free motion plus the soft bodies'
/// velocity change, after the plugin's step.
fn integrate_rigid(
    time: Res<Time>,
    mut bodies: Query<(&mut RigidBodyCoupling, &RigidBodyImpulse, &mut Transform)>,
) {
    let dt = time.delta_secs();
    for (mut rigid, impulse, mut transform) in &mut bodies {
        let v = rigid.linear_velocity + rigid.acceleration * dt + impulse.linear_velocity_change;
        let w = rigid.angular_velocity + impulse.angular_velocity_change;
        transform.translation += v * dt;
        transform.rotation = (Quat::from_scaled_axis(w * dt) * transform.rotation).normalize();
        rigid.linear_velocity = v;
        rigid.angular_velocity = w;
    }
}

#[test]
fn a_coupled_rigid_box_rests_on_a_soft_slab_and_is_pushed_back() {
    let mut app = app();
    app.add_systems(
        FixedUpdate,
        integrate_rigid.after(DeformableSystems::Writeback),
    );
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    app.world_mut().spawn((
        DeformableBody::from(TetMesh::cuboid(sim::Vec3::new(0.4, 0.05, 0.4), 6)),
        SoftMaterial::RUBBER,
        Transform::from_xyz(0.0, 0.05, 0.0),
    ));
    let half = Vec3::new(0.15, 0.1, 0.15);
    let rigid = app
        .world_mut()
        .spawn((
            Obstacle::cuboid(half),
            RigidBodyCoupling::solid_cuboid(5.0, half, Vec3::new(0.0, -9.81, 0.0)),
            Transform::from_xyz(0.0, 0.1 + half.y + 0.02, 0.0),
        ))
        .id();
    let mut touched = false;
    for _ in 0..150 {
        app.update();
        touched |= app.world().get::<RigidBodyImpulse>(rigid).unwrap().contacts > 0;
    }
    assert!(touched, "the box never touched the slab");
    let rigid_state = *app.world().get::<RigidBodyCoupling>(rigid).unwrap();
    let speed = rigid_state.linear_velocity.length();
    assert!(speed < 5e-3, "the box still moves at {speed} m/s");
    // It rests on the slab's top (10 cm), not on the floor through it.
    let bottom = app.world().get::<Transform>(rigid).unwrap().translation.y - half.y;
    assert!((0.085..0.101).contains(&bottom), "bottom at {bottom} m");
    // At rest the slab carries its weight each step.
    let impulse = app.world().get::<RigidBodyImpulse>(rigid).unwrap().impulse;
    let weight = 5.0 * 9.81 / 64.0;
    assert!(
        (impulse.y - weight).abs() < 0.03 * weight,
        "{impulse:?} against {weight}"
    );
}

/// The inspector's localized-contact threshold reaches the world (`u32::MAX`: never).
#[test]
fn the_localized_contact_threshold_reaches_the_world() {
    let mut app = app();
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .contact
        .localized_min_vertices = 1000;
    app.update();
    let world = app.world().resource::<DeformableWorld>();
    assert_eq!(world.world().settings().localized_min_vertices, 1000);
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .contact
        .localized_min_vertices = u32::MAX;
    app.update();
    let world = app.world().resource::<DeformableWorld>();
    assert_eq!(world.world().settings().localized_min_vertices, usize::MAX);
}
