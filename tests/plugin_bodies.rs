//! The Bevy plugin headless: bodies created from code and from assets (and refused with typed
//! errors), despawned, edited, paused, reflected, and the step in the schedule the plugin
//! names, its systems unambiguously ordered.

mod common;

use bevy::asset::LoadState;
use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;
use common::app::*;

#[test]
fn a_body_from_a_tetgen_asset_falls_onto_the_floor() {
    let mut app = app();
    let handle: Handle<TetMeshAsset> = app
        .world()
        .resource::<AssetServer>()
        .load("meshes/armadillo_4k.node");
    let body = app
        .world_mut()
        .spawn((
            DeformableBody::from(handle.clone()),
            SoftMaterial::RUBBER,
            // The armadillo file is about 100 units across: scale it to about 1 m.
            Transform::from_xyz(0.0, 1.5, 0.0).with_scale(Vec3::splat(0.01)),
        ))
        .id();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    // Until the asset has loaded, the body waits.
    assert_eq!(
        app.world().get::<DeformableState>(body).unwrap().status(),
        BodyStatus::Waiting
    );
    let mut waited = 0;
    while !app
        .world()
        .get::<DeformableState>(body)
        .unwrap()
        .is_simulated()
    {
        app.update();
        std::thread::sleep(std::time::Duration::from_millis(2));
        waited += 1;
        assert!(waited < 2000, "asset never loaded");
    }
    assert_eq!(
        app.world()
            .get::<DeformableState>(body)
            .unwrap()
            .vertex_count(),
        1180
    );
    let start = lowest(&positions(&app, body));
    for _ in 0..90 {
        app.update();
    }
    let end = lowest(&positions(&app, body));
    assert!(end < start - 0.2, "it fell from {start} to {end}");
    assert!(end > -1e-3, "it sank into the floor: {end}");
}

#[test]
fn a_corrupt_asset_fails_to_load_without_a_panic() {
    let mut app = app_with_assets(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/assets"));
    let handle: Handle<TetMeshAsset> = app.world().resource::<AssetServer>().load("corrupt.node");
    let body = app
        .world_mut()
        .spawn(DeformableBody::from(handle.clone()))
        .id();
    let other = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(3.0, 1.0, 0.0)))
        .id();
    let mut failed = None;
    for _ in 0..2000 {
        app.update();
        if let LoadState::Failed(e) = app.world().resource::<AssetServer>().load_state(&handle) {
            failed = Some(e.to_string());
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let message = failed.expect("the load failed");
    assert!(
        message.contains("line 4"),
        "typed message with the line: {message}"
    );
    for _ in 0..10 {
        app.update();
    }
    assert!(
        !app.world()
            .get::<DeformableState>(body)
            .unwrap()
            .is_simulated()
    );
    assert!(
        app.world()
            .get::<DeformableState>(other)
            .unwrap()
            .is_simulated()
    );
}

#[test]
fn despawning_a_body_leaves_the_others_stepping() {
    let mut app = app();
    let a = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 2.0, 0.0)))
        .id();
    let b = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(2.0, 2.0, 0.0)))
        .id();
    for _ in 0..10 {
        app.update();
    }
    let handle = |app: &App, e: Entity| app.world().get::<DeformableHandle>(e).unwrap().handle();
    let (ha, hb) = (handle(&app, a), handle(&app, b));
    let entity_of = |app: &App, h| app.world().resource::<DeformableWorld>().entity_of(h);
    assert_eq!(
        (entity_of(&app, ha), entity_of(&app, hb)),
        (Some(a), Some(b))
    );
    app.world_mut().despawn(a);
    let before = lowest(&positions(&app, b));
    for _ in 0..10 {
        app.update();
    }
    assert!(
        app.world()
            .resource::<DeformableWorld>()
            .positions(a)
            .is_none()
    );
    // The handle maps forget the despawned body and keep the other.
    assert_eq!((entity_of(&app, ha), entity_of(&app, hb)), (None, Some(b)));
    assert!(lowest(&positions(&app, b)) < before - 0.05);
}

/// Switching `DeformableConfig::solver.method` mid-run moves the world to the Newton solver and back;
/// the body keeps falling and resting on the floor throughout, and the two solvers' runs differ.
#[test]
fn the_solver_switches_live_from_the_config() {
    let run = |switch: bool| {
        let mut app = app();
        let body = resting_cube(&mut app);
        for step in 0..60 {
            if switch && step == 10 {
                app.world_mut()
                    .resource_mut::<DeformableConfig>()
                    .solver
                    .method = SolverChoice::NewtonMprgp;
            }
            if switch && step == 50 {
                app.world_mut()
                    .resource_mut::<DeformableConfig>()
                    .solver
                    .method = SolverChoice::ProjectiveDynamics;
            }
            app.update();
            let expected = if switch && (10..50).contains(&step) {
                sim::Solver::NewtonMprgp
            } else {
                sim::Solver::ProjectiveDynamics
            };
            let world = app.world().resource::<DeformableWorld>().world();
            assert_eq!(world.settings().solver, expected, "step {step}");
            assert!(lowest(&positions(&app, body)) > -1e-3, "step {step}");
        }
        positions(&app, body)
    };
    assert_ne!(run(false), run(true));
}

#[test]
fn a_material_edit_changes_the_next_steps() {
    let run = |edit: bool| {
        let mut app = app();
        let body = resting_cube(&mut app);
        for step in 0..40 {
            if edit && step == 20 {
                app.world_mut()
                    .get_mut::<SoftMaterial>(body)
                    .unwrap()
                    .youngs_modulus = 5.0e3;
            }
            app.update();
        }
        positions(&app, body)
    };
    let stiff = run(false);
    let soft = run(true);
    // The softened body sags: its top comes down.
    let top = |x: &[sim::Vec3]| x.iter().map(|v| v.y).fold(f64::NEG_INFINITY, f64::max);
    assert!(
        top(&soft) < top(&stiff) - 0.01,
        "{} vs {}",
        top(&soft),
        top(&stiff)
    );
}

#[test]
fn the_same_scene_twice_is_bit_identical() {
    let run = || {
        let mut app = app();
        let [a, b] = dropped_cubes(&mut app);
        app.world_mut()
            .spawn((Obstacle::ball(0.2), Transform::from_xyz(0.5, 0.0, 0.0)));
        for _ in 0..45 {
            app.update();
        }
        (positions(&app, a), positions(&app, b))
    };
    assert_eq!(run(), run());
}

#[test]
fn invalid_obstacles_and_materials_are_reported_not_fatal() {
    let mut app = app();
    let bad_body = app
        .world_mut()
        .spawn((cube(), SoftMaterial::RUBBER.with_youngs_modulus(-5.0)))
        .id();
    let bad_pin = app
        .world_mut()
        .spawn((
            cube(),
            Pin::indices(vec![3, 10_000]),
            Transform::from_xyz(3.0, 1.0, 0.0),
        ))
        .id();
    let body = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 1.0, 0.0)))
        .id();
    let table = app
        .world_mut()
        .spawn((Obstacle::ball(-1.0), Transform::from_xyz(0.0, 0.0, 0.0)))
        .id();
    for _ in 0..5 {
        app.update();
    }
    assert!(app.world().get::<DeformableHandle>(bad_pin).is_none());
    assert_eq!(
        app.world()
            .get::<DeformableState>(bad_pin)
            .unwrap()
            .status(),
        BodyStatus::Rejected(BodyError::VertexOutOfRange {
            role: "pinned",
            vertex: 10_000,
            count: 64
        })
    );
    let state = app.world().get::<DeformableState>(bad_body).unwrap();
    assert!(!state.is_simulated());
    assert!(
        matches!(
            state.status(),
            BodyStatus::Rejected(BodyError::World(sim::WorldError::Material(
                sim::MaterialError::YoungsModulus(_)
            )))
        ),
        "{:?}",
        state.status()
    );
    // The rejected ball says why on its entity ...
    assert!(matches!(
        app.world().get::<ObstacleStatus>(table).unwrap().rejected,
        Some(sim::WorldError::Obstacle(_))
    ));
    // ... and is not in the world: the body falls freely ...
    assert!(
        app.world()
            .resource::<DeformableWorld>()
            .world()
            .obstacles()
            .is_empty()
    );
    // ... until the shape is fixed, which adds it.
    app.world_mut().get_mut::<Obstacle>(table).unwrap().shape =
        sim::ObstacleShape::Ball { radius: 0.5 };
    for _ in 0..90 {
        app.update();
    }
    assert_eq!(
        app.world()
            .resource::<DeformableWorld>()
            .world()
            .obstacles()
            .len(),
        1
    );
    let low = lowest(&positions(&app, body));
    assert!(
        low > 0.45,
        "the body rests on the ball: lowest vertex at {low}"
    );
    assert_eq!(
        app.world().get::<ObstacleStatus>(table).unwrap(),
        &ObstacleStatus::default()
    );
    // A non-finite transform: the ball is not moved, and its status says why until a valid
    // transform moves it again.
    app.world_mut()
        .get_mut::<Transform>(table)
        .unwrap()
        .translation
        .x = f32::NAN;
    app.update();
    let status = app.world().get::<ObstacleStatus>(table).unwrap();
    assert!(status.move_refused.is_some(), "{status:?}");
    let world = app.world().resource::<DeformableWorld>().world();
    assert!(
        world.obstacles()[0]
            .position()
            .iter()
            .all(|c| c.is_finite())
    );
    app.world_mut()
        .get_mut::<Transform>(table)
        .unwrap()
        .translation = Vec3::ZERO;
    app.update();
    assert_eq!(
        app.world()
            .get::<ObstacleStatus>(table)
            .unwrap()
            .move_refused,
        None
    );
    // An obstacle spawned with a non-finite transform is rejected with the reason.
    let lost = app
        .world_mut()
        .spawn((
            Obstacle::ball(0.5),
            Transform::from_xyz(0.0, f32::INFINITY, 0.0),
        ))
        .id();
    app.update();
    assert!(matches!(
        app.world().get::<ObstacleStatus>(lost).unwrap().rejected,
        Some(sim::WorldError::Obstacle(
            sim::ObstacleError::InvalidValue { .. }
        ))
    ));
}

#[test]
fn pausing_stops_the_world_and_single_step_advances_it_once() {
    let mut app = app();
    let body = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 1.0, 0.0)))
        .id();
    app.update();
    app.world_mut().resource_mut::<DeformableConfig>().paused = true;
    let held = positions(&app, body);
    for _ in 0..3 {
        app.update();
    }
    assert_eq!(positions(&app, body), held);
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .single_step = true;
    app.update();
    let stepped = positions(&app, body);
    assert!(lowest(&stepped) < lowest(&held), "one step of free fall");
    assert!(!app.world().resource::<DeformableConfig>().single_step);
    app.update();
    assert_eq!(positions(&app, body), stepped, "only one step");
    // While paused the drawing holds the last step, whatever the overstep.
    let fixed = app.world().resource::<Time<Fixed>>().timestep();
    app.insert_resource(TimeUpdateStrategy::ManualDuration(fixed.mul_f64(0.7)));
    let tet = TetMesh::cuboid(sim::Vec3::repeat(0.2), 3);
    for _ in 0..4 {
        app.update();
        for (got, &v) in drawn(&app, body).iter().zip(tet.surface_vertices()) {
            let got = sim::Vec3::new(got.x as f64, got.y as f64, got.z as f64);
            assert!((got - stepped[v as usize]).norm() < 1e-5);
        }
    }
}

/// Every component of the crate is registered for reflection with its `ReflectComponent`
/// (editor and inspector crates find them), and a reflected `Pin` shows its vertices.
#[test]
fn components_are_reflected() {
    use bevy::ecs::reflect::{AppTypeRegistry, ReflectComponent};
    use bevy::reflect::{ReflectRef, TypeRegistration};
    let app = app();
    let registry = app.world().resource::<AppTypeRegistry>().read();
    let has_component =
        |r: Option<&TypeRegistration>| r.is_some_and(|r| r.data::<ReflectComponent>().is_some());
    assert!(has_component(
        registry.get(std::any::TypeId::of::<DeformableBody>())
    ));
    assert!(has_component(
        registry.get(std::any::TypeId::of::<SoftMaterial>())
    ));
    assert!(has_component(
        registry.get(std::any::TypeId::of::<CollisionProxy>())
    ));
    assert!(has_component(
        registry.get(std::any::TypeId::of::<Obstacle>())
    ));
    assert!(has_component(registry.get(std::any::TypeId::of::<Pin>())));
    assert!(has_component(
        registry.get(std::any::TypeId::of::<Attachment>())
    ));
    assert!(has_component(
        registry.get(std::any::TypeId::of::<InitialVelocity>())
    ));
    let pin = Pin::indices(vec![1, 2, 3]);
    let ReflectRef::Struct(fields) = bevy::reflect::PartialReflect::reflect_ref(&pin) else {
        panic!("a struct");
    };
    let vertices = fields
        .field("vertices")
        .and_then(|v| v.try_downcast_ref::<Vec<u32>>())
        .expect("reflected vertices");
    assert_eq!(vertices, &vec![1, 2, 3]);
}

/// `DeformablePlugin::new` puts the step in another schedule: in `FixedPostUpdate` a body falls
/// exactly as in the default `FixedUpdate` (same fixed clock, same steps); in a schedule of the
/// game's own, run by hand, it steps only when that schedule runs.
#[test]
fn the_step_runs_in_the_schedule_the_plugin_names() {
    #[derive(bevy::ecs::schedule::ScheduleLabel, Debug, Clone, PartialEq, Eq, Hash)]
    struct GamePhysics;
    let fall = |plugin: DeformablePlugin, run_by_hand: bool| {
        let mut app = app_with_plugin(concat!(env!("CARGO_MANIFEST_DIR"), "/assets"), plugin);
        let body = app
            .world_mut()
            .spawn((cube(), Transform::from_xyz(0.0, 2.0, 0.0)))
            .id();
        let mut heights = Vec::new();
        for _ in 0..10 {
            app.update();
            if run_by_hand && heights.len() % 2 == 0 {
                app.world_mut().run_schedule(GamePhysics);
            }
            heights.push(
                app.world()
                    .resource::<DeformableWorld>()
                    .positions(body)
                    .map_or(f64::NAN, lowest),
            );
        }
        heights
    };
    let default = fall(DeformablePlugin::default(), false);
    let post = fall(DeformablePlugin::new(FixedPostUpdate), false);
    assert_eq!(default, post);
    assert!(default[9] < default[0] - 1e-3, "{default:?}");
    // By hand, every other update: five steps of the game's schedule (its `Time` there is the
    // virtual clock, advanced by one fixed step per update by the test's time strategy).
    let by_hand = fall(DeformablePlugin::new(GamePhysics), true);
    let moved = by_hand.windows(2).filter(|w| w[1] != w[0]).count();
    assert!((4..=5).contains(&moved), "{by_hand:?}");
    assert!(by_hand[9] < by_hand[0] - 1e-3, "{by_hand:?}");
}

#[test]
fn the_plugin_systems_have_no_ambiguous_order() {
    use bevy::ecs::schedule::{LogLevel, ScheduleBuildSettings, ScheduleLabel};
    let mut app = common::app::headless_app(None, DeformablePlugin::default());
    // Every pair of systems that touch the same data in these schedules must be ordered
    // (Bevy fails the schedule's build otherwise), so results never depend on the
    // executor's choice.
    for label in [FixedUpdate.intern(), PostUpdate.intern()] {
        app.edit_schedule(label, |schedule| {
            schedule.set_build_settings(ScheduleBuildSettings {
                ambiguity_detection: LogLevel::Error,
                ..default()
            });
        });
    }
    app.world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 1.0, 0.0)));
    app.update();
    app.update();
}

/// `DeformableWorld::apply_impulse` kicks a body as a rigid body's momentum would change (in
/// zero gravity, the body's momentum after a step is the impulse), and refuses an entity
/// without a body and a non-finite impulse by type.
#[test]
fn an_impulse_applied_through_the_world_moves_the_body_by_its_momentum() {
    let mut app = app();
    app.world_mut().resource_mut::<DeformableConfig>().gravity = Vec3::ZERO;
    let body = app
        .world_mut()
        .spawn((
            DeformableBody::cuboid(Vec3::splat(0.2), 3).unwrap(),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 1.0, 0.0),
        ))
        .id();
    app.update();
    let impulse = Vec3::new(3.0, 0.0, -1.0);
    let mut world = app.world_mut().resource_mut::<DeformableWorld>();
    assert!(
        world
            .apply_impulse(body, Vec3::new(0.0, 1.2, 0.0), impulse)
            .unwrap()
    );
    assert!(matches!(
        world.apply_impulse(body, Vec3::new(0.0, 1.2, 0.0), Vec3::NAN),
        Err(DeformableImpulseError::World(_))
    ));
    let stranger = Entity::from_raw_u32(12345).unwrap();
    assert_eq!(
        world.apply_impulse(stranger, Vec3::ZERO, impulse),
        Err(DeformableImpulseError::NotABody(stranger))
    );
    app.update();
    let masses = sim::TetMesh::cuboid(sim::Vec3::repeat(0.2), 3)
        .lumped_masses(f64::from(SoftMaterial::RUBBER.density));
    let world = app.world().resource::<DeformableWorld>();
    let v = world.world().velocities(world.body(body).unwrap()).unwrap();
    let momentum: sim::Vec3 = v.iter().zip(&masses).map(|(u, &m)| m * u).sum();
    let expected = sim::Vec3::new(3.0, 0.0, -1.0);
    assert!(
        (momentum - expected).norm() < 1e-6,
        "momentum {momentum} after the step, expected {expected}"
    );
}
