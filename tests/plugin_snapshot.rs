//! Snapshots in a Bevy app: a rollback of the `DeformableWorld` resource re-simulates the
//! same frames bit for bit (once, and every frame around a moving paddle as rollback netcode
//! does), and a snapshot taken before a body was despawned or spawned is refused naming the
//! entity; a body frozen after the snapshot is unfrozen by the restore, its `DeformableState`
//! too. And the state saved to a file by `SaveState` comes back with `LoadState`.

mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;
use bevy_deformable::{DeformableSnapshot, DeformableSnapshotError, sim};
use common::app::*;

/// Two cubes dropped on each other and a floor, stepped 20 fixed steps.
fn scene() -> (App, [Entity; 2]) {
    let mut app = app();
    let bodies = dropped_cubes(&mut app);
    for _ in 0..20 {
        app.update();
    }
    (app, bodies)
}

/// What restoring `snapshot` into the app's world answers.
fn restore(app: &mut App, snapshot: &DeformableSnapshot) -> Result<(), DeformableSnapshotError> {
    app.world_mut()
        .resource_mut::<DeformableWorld>()
        .restore(snapshot)
}

fn both(app: &App, bodies: [Entity; 2]) -> Vec<sim::Vec3> {
    bodies.iter().flat_map(|&e| positions(app, e)).collect()
}

#[test]
fn a_rolled_back_world_re_simulates_the_same_frames() {
    let (mut app, bodies) = scene();
    let snapshot = app.world().resource::<DeformableWorld>().snapshot();
    let log = |app: &App| app.world().resource::<MessageLog>().0.clone();
    let before = log(&app).len();
    let first: Vec<_> = (0..40)
        .map(|_| {
            app.update();
            both(&app, bodies)
        })
        .collect();
    let first_messages = log(&app)[before..].to_vec();
    // The bodies moved and met in the window, and touched the floor.
    assert!(first[0] != first[39]);
    assert!(first_messages.iter().any(|m| m.starts_with("started")));
    restore(&mut app, &snapshot).unwrap();
    let before = log(&app).len();
    for (frame, expected) in first.iter().enumerate() {
        app.update();
        assert!(
            &both(&app, bodies) == expected,
            "frame {frame} after the rollback differs"
        );
    }
    // The same contact messages again: the restore put back what each body touched.
    assert_eq!(log(&app)[before..], first_messages[..]);
}

#[test]
fn a_body_frozen_after_the_snapshot_is_unfrozen_by_the_restore() {
    let (mut app, [a, b]) = scene();
    let snapshot = app.world().resource::<DeformableWorld>().snapshot();
    // A reset that starts `a` at a NaN velocity: its next step freezes it.
    app.world_mut()
        .entity_mut(a)
        .insert(InitialVelocity(Vec3::NAN));
    app.world_mut().write_message(ResetScene);
    app.update();
    app.update();
    let state = |app: &App, e| app.world().get::<DeformableState>(e).unwrap().clone();
    assert!(state(&app, a).failed(), "the NaN velocity froze nothing");
    assert!(!state(&app, b).failed());
    restore(&mut app, &snapshot).unwrap();
    app.update();
    assert!(!state(&app, a).failed(), "{:?}", state(&app, a).status());
    assert!(
        positions(&app, a)
            .iter()
            .all(|p| p.iter().all(|c| c.is_finite()))
    );
}

#[test]
fn a_snapshot_from_before_a_despawn_or_a_spawn_names_the_entity() {
    let (mut app, [a, _]) = scene();
    let snapshot = app.world().resource::<DeformableWorld>().snapshot();
    app.world_mut().despawn(a);
    app.update();
    let error = restore(&mut app, &snapshot).unwrap_err();
    assert_eq!(
        error,
        DeformableSnapshotError::Entities {
            spawned: vec![],
            despawned: vec![a],
        }
    );

    let (mut app, _) = scene();
    let snapshot = app.world().resource::<DeformableWorld>().snapshot();
    let c = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(2.0, 1.0, 0.0)))
        .id();
    app.update();
    let before = positions(&app, c);
    let error = restore(&mut app, &snapshot).unwrap_err();
    assert_eq!(
        error,
        DeformableSnapshotError::Entities {
            spawned: vec![c],
            despawned: vec![],
        }
    );
    // Refused: the world is as it was.
    assert_eq!(positions(&app, c), before);
}

#[test]
fn a_scene_rolled_back_every_frame_around_a_moving_paddle_replays_bit_for_bit() {
    // A paddle pushed through the cubes, to where the first run put it in each frame.
    let (mut app, bodies) = scene();
    let paddle = app
        .world_mut()
        .spawn((
            Transform::from_xyz(-0.5, 0.3, 0.0),
            Obstacle::cuboid(Vec3::new(0.05, 0.3, 0.5)),
        ))
        .id();
    app.update();
    let frames = 30;
    let paddle_x = |f: usize| -0.5 + 0.03 * f as f32;
    let step = |app: &mut App, f: usize| {
        let mut transform = app.world_mut().get_mut::<Transform>(paddle).unwrap();
        transform.translation.x = paddle_x(f);
        app.update();
        both(app, bodies)
    };
    // The first run, with the world before each frame.
    let mut before = Vec::new();
    let mut after = Vec::new();
    for f in 0..frames {
        before.push(app.world().resource::<DeformableWorld>().snapshot());
        after.push(step(&mut app, f));
    }
    // The paddle pushed the cubes along +x.
    let mean_x = |p: &[sim::Vec3]| p.iter().map(|p| p.x).sum::<f64>() / p.len() as f64;
    assert!(mean_x(&after[frames - 1]) > mean_x(&after[0]) + 0.05);
    // Then, as rollback netcode does, every frame back five frames and forward again, the
    // snapshots retaken into their buffers on the way.
    let window = 5;
    for now in window..frames {
        restore(&mut app, &before[now - window]).unwrap();
        for f in now - window..now {
            app.world()
                .resource::<DeformableWorld>()
                .snapshot_into(&mut before[f]);
            assert!(
                step(&mut app, f) == after[f],
                "frame {f} differs when rolled back at frame {now}"
            );
        }
    }
}

#[test]
fn a_state_saved_to_a_file_loads_back_through_the_messages() {
    let (mut app, bodies) = scene();
    let path =
        std::env::temp_dir().join(format!("bevy_deformable_state_{}.bin", std::process::id()));
    app.add_plugins(bevy_deformable::state_file::StateFilePlugin { path: path.clone() });
    let status = |app: &App| {
        app.world()
            .resource::<bevy_deformable::state_file::StateFile>()
            .status
            .clone()
    };
    app.world_mut()
        .write_message(bevy_deformable::state_file::SaveState);
    app.update();
    assert!(
        status(&app).starts_with("saved 2 bodies"),
        "{}",
        status(&app)
    );
    let saved = both(&app, bodies);
    for _ in 0..20 {
        app.update();
    }
    assert!(both(&app, bodies) != saved);
    // The load happens in `Update`, after this frame's fixed step.
    app.world_mut()
        .write_message(bevy_deformable::state_file::LoadState);
    app.update();
    assert!(
        status(&app).starts_with("loaded 2 bodies"),
        "{}",
        status(&app)
    );
    assert!(both(&app, bodies) == saved);

    // A corrupt file is refused with the reason.
    std::fs::write(&path, b"BDSAVE\0\0\x02\0\0\0trunc").unwrap();
    app.world_mut()
        .write_message(bevy_deformable::state_file::LoadState);
    app.update();
    assert_eq!(status(&app), "load failed: the saved world is truncated");
    std::fs::remove_file(&path).unwrap();
}
