//! The inspector's code paths driven headless: the panel edits `DeformableConfig`,
//! `SoftMaterial`, `Pin` and `GrabTool` and writes `ResetScene`, `SaveTuning` and `LoadTuning`;
//! here a test does the same and checks what the next steps do.

use std::path::PathBuf;
use std::time::Duration;

mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;
use common::app::positions;

fn app(tuning: Option<PathBuf>) -> App {
    let mut app = common::app::headless_app(None, DeformablePlugin::default());
    if let Some(path) = tuning {
        app.add_plugins(TuningPlugin { path });
    }
    app
}

fn spawn_cube(app: &mut App, name: &str, at: Vec3) -> Entity {
    app.world_mut()
        .spawn((
            Name::new(name.to_owned()),
            DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.2), 3)),
            SoftMaterial::RUBBER,
            Transform::from_translation(at),
        ))
        .id()
}

fn steps(app: &mut App, n: usize) {
    for _ in 0..n {
        app.update();
    }
}

fn refactor_time(app: &App, e: Entity) -> Option<Duration> {
    let w = app.world().resource::<DeformableWorld>();
    w.world().last_refactor(w.body(e)?).ok().flatten()
}

/// Two identical apps; one gets a settings edit (gravity off, as the panel's gravity field
/// does): the very next step differs, and the steps before were identical.
#[test]
fn a_settings_edit_changes_the_next_step() {
    let mut a = app(None);
    let mut b = app(None);
    let ea = spawn_cube(&mut a, "cube", Vec3::new(0.0, 2.0, 0.0));
    let eb = spawn_cube(&mut b, "cube", Vec3::new(0.0, 2.0, 0.0));
    steps(&mut a, 6);
    steps(&mut b, 6);
    assert_eq!(positions(&a, ea), positions(&b, eb));
    let before = positions(&b, eb);
    b.world_mut().resource_mut::<DeformableConfig>().gravity = Vec3::ZERO;
    steps(&mut a, 1);
    steps(&mut b, 1);
    assert_ne!(positions(&a, ea), positions(&b, eb));
    // Without gravity the body keeps its velocity: it moves by the same amount again.
    let after = positions(&b, eb);
    steps(&mut b, 1);
    let again = positions(&b, eb);
    for ((p0, p1), p2) in before.iter().zip(&after).zip(&again) {
        assert!(((p2 - p1) - (p1 - p0)).norm() < 1e-9);
    }
}

/// A material edit refactors that body only, on the next step, and the time is reported.
#[test]
fn a_material_edit_refactors_only_that_body() {
    let mut app = app(None);
    let edited = spawn_cube(&mut app, "edited", Vec3::new(-1.0, 2.0, 0.0));
    let other = spawn_cube(&mut app, "other", Vec3::new(1.0, 2.0, 0.0));
    steps(&mut app, 3);
    let (e0, o0) = (refactor_time(&app, edited), refactor_time(&app, other));
    assert!(e0.is_some() && o0.is_some(), "built on the first step");
    app.world_mut()
        .get_mut::<SoftMaterial>(edited)
        .unwrap()
        .youngs_modulus = 5.0e4;
    steps(&mut app, 1);
    assert_eq!(refactor_time(&app, other), o0);
    assert_ne!(refactor_time(&app, edited), e0);
    // A preset through the same path.
    *app.world_mut().get_mut::<SoftMaterial>(other).unwrap() = MaterialPreset::Jelly.material();
    steps(&mut app, 1);
    assert_ne!(refactor_time(&app, other), o0);
}

fn temp_file(name: &str) -> PathBuf {
    std::env::temp_dir()
        .join(format!("bevy_deformable_test_{}", std::process::id()))
        .join(name)
}

/// Save through the message the panel's button writes, change everything, load: the scene is
/// back exactly. A second app with the same file starts with the tuning applied.
#[test]
fn tuning_saves_to_ron_and_loads_back_exactly() {
    let path = temp_file("scene.ron");
    let mut app = app(Some(path.clone()));
    let body = spawn_cube(&mut app, "jelly", Vec3::new(0.0, 1.0, 0.0));
    app.update();
    let tuned = SoftMaterial::JELLY
        .with_youngs_modulus(12_345.6)
        .with_friction(0.3);
    *app.world_mut().get_mut::<SoftMaterial>(body).unwrap() = tuned;
    {
        let mut c = app.world_mut().resource_mut::<DeformableConfig>();
        c.solver.pd_iterations = 13;
        c.gravity = Vec3::new(0.5, -3.0, 0.25);
        c.contact.friction_model = FrictionModel::Pyramid;
    }
    app.world_mut()
        .resource_mut::<Time<Fixed>>()
        .set_timestep_hz(90.0);
    app.world_mut()
        .resource_mut::<Time<Virtual>>()
        .set_relative_speed(0.5);
    app.world_mut().resource_mut::<GrabTool>().stiffness = 777.0;
    let config = app.world().resource::<DeformableConfig>().clone();
    let timestep = app.world().resource::<Time<Fixed>>().timestep();
    app.world_mut().write_message(SaveTuning);
    app.update();
    assert!(
        path.exists(),
        "{}",
        app.world().resource::<TuningFile>().status
    );
    let saved = SceneTuning::load(&path).unwrap();
    assert_eq!(saved.materials["jelly"], tuned);
    assert_eq!(saved.config, config);

    // Untune everything, then load.
    *app.world_mut().get_mut::<SoftMaterial>(body).unwrap() = SoftMaterial::RUBBER;
    *app.world_mut().resource_mut::<DeformableConfig>() = DeformableConfig::default();
    app.world_mut()
        .resource_mut::<Time<Fixed>>()
        .set_timestep_hz(64.0);
    app.world_mut().resource_mut::<GrabTool>().stiffness = 1.0;
    app.world_mut().write_message(LoadTuning);
    app.update();
    assert_eq!(*app.world().get::<SoftMaterial>(body).unwrap(), tuned);
    assert_eq!(*app.world().resource::<DeformableConfig>(), config);
    assert_eq!(app.world().resource::<Time<Fixed>>().timestep(), timestep);
    assert_eq!(app.world().resource::<GrabTool>().stiffness, 777.0);
    assert_eq!(
        app.world().resource::<Time<Virtual>>().relative_speed(),
        0.5
    );

    // A restart: the file is loaded once the scene has spawned.
    let mut restarted = self::app(Some(path.clone()));
    restarted.add_systems(Startup, |mut commands: Commands| {
        commands.spawn((
            Name::new("jelly"),
            DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.2), 3)),
            SoftMaterial::RUBBER,
        ));
    });
    restarted.update();
    let mut q = restarted.world_mut().query::<(&Name, &SoftMaterial)>();
    let (_, m) = q.single(restarted.world()).unwrap();
    assert_eq!(*m, tuned);
    assert_eq!(*restarted.world().resource::<DeformableConfig>(), config);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// The grab tool as the mouse drives it: pick with a ray, hold, drag the target; the picked
/// point follows the target, and letting go leaves the body free.
#[test]
fn the_grab_spring_pulls_the_picked_point_to_the_target() {
    let mut app = app(None);
    app.world_mut().resource_mut::<DeformableConfig>().gravity = Vec3::ZERO;
    let body = spawn_cube(&mut app, "cube", Vec3::ZERO);
    steps(&mut app, 2);
    let hit = app
        .world()
        .resource::<DeformableWorld>()
        .ray_cast(Vec3::new(0.03, 0.05, 3.0), Vec3::NEG_Z, 100.0)
        .expect("the ray hits the cube");
    assert_eq!(hit.entity, body);
    assert!((hit.point.z - 0.2).abs() < 1e-5);
    let target = hit.point + Vec3::new(0.6, 0.3, 0.0);
    {
        let mut grab = app.world_mut().resource_mut::<GrabTool>();
        grab.stiffness = 20_000.0;
        grab.grab(&hit);
        grab.drag_to(target);
    }
    let held = app.world().resource::<GrabTool>().held.unwrap();
    let start = held
        .position(app.world().resource::<DeformableWorld>())
        .unwrap();
    let mut closest = start.distance(target);
    for _ in 0..90 {
        app.update();
        let p = held
            .position(app.world().resource::<DeformableWorld>())
            .unwrap();
        closest = closest.min(p.distance(target));
    }
    assert!(
        closest < 0.1 * start.distance(target),
        "closest {closest} from {}",
        start.distance(target)
    );
    app.world_mut().resource_mut::<GrabTool>().release();
    steps(&mut app, 1);
    let w = app.world().resource::<DeformableWorld>();
    assert!(
        w.world()
            .grab_spring(w.body(body).unwrap())
            .unwrap()
            .is_none()
    );
}

/// Reset puts bodies back where they started (and unfreezes); a pin added at run time holds its
/// vertex where it was.
#[test]
fn reset_restores_the_start_and_run_time_pins_hold() {
    let mut app = app(None);
    let body = spawn_cube(&mut app, "cube", Vec3::new(0.0, 2.0, 0.0));
    app.world_mut()
        .spawn((Transform::default(), Obstacle::halfspace(Vec3::Y)));
    // The first update only starts the clock; the second creates the body and steps once.
    steps(&mut app, 2);
    let start = positions(&app, body);
    steps(&mut app, 20);
    assert_ne!(positions(&app, body), start);
    app.world_mut().write_message(ResetScene);
    steps(&mut app, 1);
    // One step after the reset is the first step again.
    for (a, b) in positions(&app, body).iter().zip(&start) {
        assert!((a - b).norm() < 1e-9, "{a} vs {b}");
    }

    // Pin vertex 0 now; it stays while the rest falls.
    let held = positions(&app, body)[0];
    app.world_mut()
        .entity_mut(body)
        .insert(Pin::indices(vec![0]));
    steps(&mut app, 10);
    assert!((positions(&app, body)[0] - held).norm() < 1e-12);
    // Unpinned again, it falls.
    app.world_mut()
        .get_mut::<Pin>(body)
        .unwrap()
        .vertices
        .clear();
    steps(&mut app, 10);
    assert!(positions(&app, body)[0].y < held.y - 0.01);
}
