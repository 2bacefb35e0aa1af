//! The Bevy plugin driven headless: `MinimalPlugins`, assets, meshes, transforms, and a manual
//! fixed time step (each `app.update()` runs exactly one fixed step).

use bevy::asset::{AssetPlugin, LoadState};
use bevy::mesh::{Mesh, Mesh3d, MeshPlugin, VertexAttributeValues};
use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy::transform::TransformPlugin;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;

fn app_with_assets(root: &str) -> App {
    app_with_plugin(root, DeformablePlugin::default())
}

fn app_with_plugin(root: &str, plugin: DeformablePlugin) -> App {
    let mut app = App::new();
    app.add_plugins((
        MinimalPlugins,
        AssetPlugin {
            file_path: root.to_string(),
            ..default()
        },
        MeshPlugin,
        TransformPlugin,
        plugin,
    ));
    app.insert_resource(TimeUpdateStrategy::FixedTimesteps(1));
    app.init_resource::<MessageLog>();
    app.add_systems(Update, log_messages);
    // The first update only starts the clock.
    app.update();
    app
}

fn app() -> App {
    app_with_assets(concat!(env!("CARGO_MANIFEST_DIR"), "/assets"))
}

#[derive(Resource, Default)]
struct MessageLog(Vec<String>);

fn log_messages(
    mut log: ResMut<MessageLog>,
    mut started: MessageReader<ContactStarted>,
    mut ended: MessageReader<ContactEnded>,
    mut frozen: MessageReader<BodyFrozen>,
    (mut slept, mut woke): (MessageReader<BodySlept>, MessageReader<BodyWoke>),
) {
    for m in started.read() {
        log.0.push(format!("started {} {}", m.body, m.obstacle));
    }
    for m in ended.read() {
        log.0.push(format!("ended {} {}", m.body, m.obstacle));
    }
    for m in frozen.read() {
        log.0.push(format!("frozen {}", m.entity));
    }
    for m in slept.read() {
        log.0.push(format!("slept {}", m.entity));
    }
    for m in woke.read() {
        log.0.push(format!("woke {}", m.entity));
    }
}

fn cube() -> DeformableBody {
    DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.2), 3))
}

/// A cube spawned just above a floor (both spawned into `app`); returns the cube.
fn resting_cube(app: &mut App) -> Entity {
    let body = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 0.21, 0.0)))
        .id();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    body
}

fn positions(app: &App, e: Entity) -> Vec<sim::Vec3> {
    app.world()
        .resource::<DeformableWorld>()
        .positions(e)
        .expect("body is simulated")
        .to_vec()
}

/// Where a body's render mesh is drawn (m, world): its positions in the body's `Transform`.
fn drawn(app: &App, body: Entity) -> Vec<Vec3> {
    let transform = *app.world().get::<Transform>(body).unwrap();
    let handle = &app.world().get::<Mesh3d>(body).unwrap().0;
    let mesh = app.world().resource::<Assets<Mesh>>().get(handle).unwrap();
    let Some(VertexAttributeValues::Float32x3(rendered)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION)
    else {
        panic!("no positions");
    };
    rendered
        .iter()
        .map(|r| transform.transform_point(Vec3::from_array(*r)))
        .collect()
}

fn lowest(p: &[sim::Vec3]) -> f64 {
    p.iter().map(|v| v.y).fold(f64::INFINITY, f64::min)
}

#[test]
fn a_body_falls_rests_on_an_obstacle_and_its_render_mesh_follows() {
    let mut app = app();
    let body = app
        .world_mut()
        .spawn((
            cube(),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 1.0, 0.0),
        ))
        .id();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    // Drawn at the last step (the default blends the last two: tested below).
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    for _ in 0..150 {
        app.update();
    }
    let x = positions(&app, body);
    assert!(lowest(&x) > -1e-3, "sank to {}", lowest(&x));
    let transform = *app.world().get::<Transform>(body).unwrap();
    assert!(
        (transform.translation.y - 0.2).abs() < 0.03,
        "{transform:?}"
    );
    // The generated render mesh holds the surface vertices relative to the Transform.
    let handle = app
        .world()
        .get::<Mesh3d>(body)
        .expect("render mesh inserted")
        .0
        .clone();
    let meshes = app.world().resource::<Assets<Mesh>>();
    let mesh = meshes.get(&handle).unwrap();
    let Some(VertexAttributeValues::Float32x3(rendered)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION)
    else {
        panic!("no positions");
    };
    let tet = TetMesh::cuboid(sim::Vec3::repeat(0.2), 3);
    assert_eq!(rendered.len(), tet.surface_vertices().len());
    for (r, &v) in rendered.iter().zip(tet.surface_vertices()) {
        let world_pos = transform.transform_point(Vec3::from_array(*r));
        let sim_pos = x[v as usize];
        assert!(
            (world_pos.as_dvec3() - bevy::math::DVec3::new(sim_pos.x, sim_pos.y, sim_pos.z))
                .length()
                < 1e-5
        );
    }
}

/// A pillar spawned leaning falls over: its `Transform` keeps the spawn rotation at first,
/// then turns with the body (so a child entity turns with it), and the render mesh, written
/// in that turned frame, is still drawn where the simulation has the surface.
#[test]
fn a_falling_pillar_turns_its_transform_with_it() {
    let mut app = app();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    let lean = Quat::from_rotation_z(0.35);
    let half = Vec3::new(0.05, 0.4, 0.05);
    let pillar = app
        .world_mut()
        .spawn((
            DeformableBody::cuboid(half, 8).unwrap(),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 0.45, 0.0).with_rotation(lean),
        ))
        .id();
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    for _ in 0..2 {
        app.update();
    }
    let start = app.world().get::<Transform>(pillar).unwrap().rotation;
    assert!(start.angle_between(lean) < 0.01, "{start:?}");
    for _ in 0..240 {
        app.update();
    }
    let transform = *app.world().get::<Transform>(pillar).unwrap();
    let axis = transform.rotation * Vec3::Y;
    assert!(
        axis.y.abs() < 0.2 && axis.x.abs() > 0.95,
        "the pillar's long axis ends at {axis:?}, not lying along x"
    );
    let x = positions(&app, pillar);
    let tet = TetMesh::cuboid(bevy_deformable::convert::to_sim(half), 8);
    let worst = drawn(&app, pillar)
        .iter()
        .zip(tet.surface_vertices())
        .map(|(d, &v)| {
            let p = x[v as usize];
            (*d - Vec3::new(p.x as f32, p.y as f32, p.z as f32)).length()
        })
        .fold(0.0f32, f32::max);
    assert!(
        worst < 1e-4,
        "drawn up to {worst} m off the simulated surface"
    );
}

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

/// Switching `DeformableConfig::solver` mid-run moves the world to the Newton solver and back;
/// the body keeps falling and resting on the floor throughout, and the two solvers' runs differ.
#[test]
fn the_solver_switches_live_from_the_config() {
    let run = |switch: bool| {
        let mut app = app();
        let body = resting_cube(&mut app);
        for step in 0..60 {
            if switch && step == 10 {
                app.world_mut().resource_mut::<DeformableConfig>().solver =
                    SolverChoice::NewtonMprgp;
            }
            if switch && step == 50 {
                app.world_mut().resource_mut::<DeformableConfig>().solver =
                    SolverChoice::ProjectiveDynamics;
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
        let a = app
            .world_mut()
            .spawn((cube(), Transform::from_xyz(0.0, 0.6, 0.0)))
            .id();
        let b = app
            .world_mut()
            .spawn((
                cube(),
                SoftMaterial::JELLY,
                Transform::from_xyz(0.1, 1.3, 0.0),
            ))
            .id();
        app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
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
fn an_embedded_render_mesh_follows_the_coarse_body() {
    let mut app = app();
    let detailed = Sphere::new(0.18).mesh().ico(3).unwrap();
    let rest: Vec<sim::Vec3> = match detailed.attribute(Mesh::ATTRIBUTE_POSITION) {
        Some(VertexAttributeValues::Float32x3(p)) => p
            .iter()
            .map(|a| sim::Vec3::new(a[0] as f64, a[1] as f64, a[2] as f64))
            .collect(),
        _ => panic!("sphere has positions"),
    };
    let handle = app.world_mut().resource_mut::<Assets<Mesh>>().add(detailed);
    let coarse = TetMesh::cuboid(sim::Vec3::repeat(0.2), 2);
    let embedding = sim::embed::embed_points(&coarse, &rest);
    let body = app
        .world_mut()
        .spawn((
            DeformableBody::from(coarse),
            SoftMaterial::JELLY,
            Mesh3d(handle.clone()),
            Transform::from_xyz(0.0, 0.5, 0.0),
        ))
        .id();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    for _ in 0..40 {
        app.update();
    }
    let x = positions(&app, body);
    // The body deforms its own copy; the game's mesh asset is left as it was.
    let own = app.world().get::<Mesh3d>(body).unwrap().0.clone();
    assert_ne!(own, handle);
    let meshes = app.world().resource::<Assets<Mesh>>();
    let Some(VertexAttributeValues::Float32x3(original)) = meshes
        .get(&handle)
        .unwrap()
        .attribute(Mesh::ATTRIBUTE_POSITION)
    else {
        panic!("no positions");
    };
    for (a, p0) in original.iter().zip(&rest) {
        assert_eq!(*a, [p0.x as f32, p0.y as f32, p0.z as f32]);
    }
    let mut moved = 0.0f64;
    for ((got, e), p0) in drawn(&app, body).iter().zip(&embedding).zip(&rest) {
        let expected = e.position(&x);
        let got = sim::Vec3::new(got.x as f64, got.y as f64, got.z as f64);
        assert!((got - expected).norm() < 1e-5, "{got:?} vs {expected:?}");
        moved = moved.max((got - (p0 + sim::Vec3::new(0.0, 0.5, 0.0))).norm());
    }
    assert!(
        moved > 0.1,
        "the render mesh should have moved with the body: {moved}"
    );
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
            Pin {
                vertices: vec![3, 10_000],
            },
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
    // The rejected ball is not in the world: the body falls freely ...
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
}

#[test]
fn pins_hold_and_attachments_follow_their_target() {
    let mut app = app();
    let mesh = TetMesh::cuboid(sim::Vec3::repeat(0.2), 2);
    // Vertex with the largest y + x: a top corner.
    let corner = (0..mesh.vertex_count())
        .max_by(|&a, &b| {
            let (p, q) = (mesh.rest_positions()[a], mesh.rest_positions()[b]);
            (p.x + p.y).total_cmp(&(q.x + q.y))
        })
        .unwrap() as u32;
    let pinned = app
        .world_mut()
        .spawn((
            DeformableBody::from(mesh.clone()),
            Pin {
                vertices: vec![corner],
            },
            Transform::from_xyz(0.0, 2.0, 0.0),
        ))
        .id();
    let hand = app
        .world_mut()
        .spawn(Transform::from_xyz(2.0, 2.2, 0.0))
        .id();
    let held = app
        .world_mut()
        .spawn((
            DeformableBody::from(mesh),
            Attachment {
                target: hand,
                vertices: vec![corner],
                stiffness: 5.0e4,
            },
            Transform::from_xyz(2.0, 2.0, 0.0),
        ))
        .id();
    app.update();
    let pin_at = positions(&app, pinned)[corner as usize];
    let start = positions(&app, held)[corner as usize];
    for step in 0..90 {
        // The hand moves 1 m along +z over the first 60 steps.
        let z = (step.min(60) as f32) / 60.0;
        app.world_mut()
            .get_mut::<Transform>(hand)
            .unwrap()
            .translation
            .z = z;
        app.update();
        assert_eq!(positions(&app, pinned)[corner as usize], pin_at);
    }
    let end = positions(&app, held)[corner as usize];
    assert!(
        (end.z - start.z - 1.0).abs() < 0.05,
        "attached corner moved {} along z",
        end.z - start.z
    );
    // The pinned body hangs below its pin.
    let hang = positions(&app, pinned).iter().map(|p| p.y).sum::<f64>() / 27.0;
    assert!(hang < pin_at.y - 0.15, "{hang} vs {}", pin_at.y);
}

/// Vertex positions after every fixed step, recorded right after the plugin's write-back.
#[derive(Resource, Default)]
struct StepLog(Vec<Vec<sim::Vec3>>);

#[test]
fn rendering_blends_the_last_two_steps_by_the_overstep() {
    let mut app = app();
    // 1.5 fixed steps per frame: the overstep alternates between a half step and none.
    let fixed = app.world().resource::<Time<Fixed>>().timestep();
    app.insert_resource(TimeUpdateStrategy::ManualDuration(fixed.mul_f64(1.5)));
    app.init_resource::<StepLog>();
    let body = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 1.0, 0.0)))
        .id();
    app.add_systems(
        FixedUpdate,
        (move |world: Res<DeformableWorld>, mut log: ResMut<StepLog>| {
            if let Some(x) = world.positions(body) {
                log.0.push(x.to_vec());
            }
        })
        .after(DeformableSystems::Writeback),
    );
    let tet = TetMesh::cuboid(sim::Vec3::repeat(0.2), 3);
    let mut blended_frames = 0;
    for _ in 0..12 {
        app.update();
        let log = &app.world().resource::<StepLog>().0;
        if log.len() < 2 {
            continue;
        }
        let alpha = app.world().resource::<Time<Fixed>>().overstep_fraction() as f64;
        if alpha > 0.25 {
            blended_frames += 1;
        }
        let (before, last) = (&log[log.len() - 2], &log[log.len() - 1]);
        for (got, &v) in drawn(&app, body).iter().zip(tet.surface_vertices()) {
            let v = v as usize;
            let expected = before[v] + alpha * (last[v] - before[v]);
            let got = sim::Vec3::new(got.x as f64, got.y as f64, got.z as f64);
            assert!(
                (got - expected).norm() < 1e-5,
                "alpha {alpha}: {got:?} vs {expected:?}"
            );
        }
    }
    assert!(
        blended_frames >= 4,
        "only {blended_frames} frames fell between steps"
    );
}

#[test]
fn bodies_sharing_a_mesh_handle_deform_their_own_copies() {
    let mut app = app();
    let handle = app
        .world_mut()
        .resource_mut::<Assets<Mesh>>()
        .add(Sphere::new(0.15).mesh().ico(2).unwrap());
    let spawn = |app: &mut App, x: f32| {
        app.world_mut()
            .spawn((
                DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.2), 2)),
                Mesh3d(handle.clone()),
                Transform::from_xyz(x, 0.5, 0.0),
            ))
            .id()
    };
    let (a, b) = (spawn(&mut app, -1.0), spawn(&mut app, 1.0));
    for _ in 0..10 {
        app.update();
    }
    let mesh_of = |e: Entity| app.world().get::<Mesh3d>(e).unwrap().0.clone();
    assert_ne!(mesh_of(a), mesh_of(b));
    assert_ne!(mesh_of(a), handle);
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

#[test]
fn an_enclosed_bunny_is_drawn_exactly_at_rest() {
    let mut app = app();
    app.world_mut().resource_mut::<DeformableConfig>().gravity = Vec3::ZERO;
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    let surface =
        TriangleSurface::from_obj(include_str!("../assets/meshes/bunny_10k.obj")).unwrap();
    let render = app
        .world_mut()
        .resource_mut::<Assets<Mesh>>()
        .add(mesh_from_surface(&surface));
    let at = Transform::from_xyz(0.5, 1.0, -0.2)
        .with_rotation(Quat::from_rotation_y(-0.6))
        .with_scale(Vec3::splat(0.5));
    let body = app
        .world_mut()
        .spawn((enclosing_body(&surface, 7).unwrap(), Mesh3d(render), at))
        .id();
    for _ in 0..2 {
        app.update();
    }
    let mut worst = 0.0f32;
    for (got, p) in drawn(&app, body).iter().zip(surface.positions()) {
        let expected = at.transform_point(Vec3::new(p.x as f32, p.y as f32, p.z as f32));
        worst = worst.max((*got - expected).length());
    }
    assert!(
        worst < 1e-3,
        "render vertices off their rest place by up to {worst} m"
    );
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
    let mut soft_contacts = 0;
    for _ in 0..90 {
        app.update();
        soft_contacts = soft_contacts.max(
            app.world()
                .resource::<DeformableDiagnostics>()
                .soft_contacts,
        );
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
    let diagnostics = app.world().resource::<DeformableDiagnostics>();
    assert!(diagnostics.contact_regions > 0 && diagnostics.islands >= 1);
    // The thrown cube started at 2 m/s along z and slid on the floor (friction stops it).
    let z = positions(&app, thrown).iter().map(|p| p.z).sum::<f64>() / 64.0;
    assert!(z > 0.1, "the thrown cube moved only {z} m");
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
    let pin = Pin {
        vertices: vec![1, 2, 3],
    };
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
    let mut app = App::new();
    app.add_plugins((
        MinimalPlugins,
        AssetPlugin::default(),
        MeshPlugin,
        TransformPlugin,
        DeformablePlugin::default(),
    ));
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
    app.insert_resource(TimeUpdateStrategy::FixedTimesteps(1));
    app.world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 1.0, 0.0)));
    app.update();
    app.update();
}

/// A body held by stiff springs on every vertex to a hook that turns about a tilted axis, with
/// no gravity: it turns rigidly, and its `Transform` carries exactly the hook's rotation (the
/// spawn rotation composed with the turn).
#[test]
fn the_transform_of_a_rigidly_turned_body_carries_its_rotation() {
    let mut app = app_with_plugin(
        concat!(env!("CARGO_MANIFEST_DIR"), "/assets"),
        DeformablePlugin::default().with_gravity(Vec3::ZERO),
    );
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    let hook = app
        .world_mut()
        .spawn(Transform::from_xyz(0.0, 1.0, 0.0))
        .id();
    let spawn = Quat::from_rotation_x(0.3);
    let mesh = TetMesh::cuboid(sim::Vec3::new(0.2, 0.1, 0.05), 3);
    let all = (0..mesh.vertex_count() as u32).collect();
    let body = app
        .world_mut()
        .spawn((
            DeformableBody::from(mesh),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 1.0, 0.0).with_rotation(spawn),
            Attachment {
                target: hook,
                vertices: all,
                stiffness: 1.0e7,
            },
        ))
        .id();
    // Created (its attachment offsets taken) with the hook unturned.
    app.update();
    let axis = Vec3::new(0.3, 1.0, -0.2).normalize();
    for step in 1..=120 {
        let turn = Quat::from_axis_angle(axis, 0.02 * step as f32);
        app.world_mut().get_mut::<Transform>(hook).unwrap().rotation = turn;
        app.update();
    }
    let turn = Quat::from_axis_angle(axis, 0.02 * 120.0);
    let rotation = app.world().get::<Transform>(body).unwrap().rotation;
    let error = rotation.angle_between(turn * spawn);
    assert!(
        error < 2e-3,
        "turned {rotation:?}, expected {:?} ({error} rad off)",
        turn * spawn
    );
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
