//! Snapshots in a Bevy app: a rollback of the `DeformableWorld` resource re-simulates the
//! same frames bit for bit, and a snapshot taken before a body was despawned or spawned is
//! refused naming the entity.

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
    let first: Vec<_> = (0..40)
        .map(|_| {
            app.update();
            both(&app, bodies)
        })
        .collect();
    // The bodies moved and met in the window.
    assert!(first[0] != first[39]);
    restore(&mut app, &snapshot).unwrap();
    for (frame, expected) in first.iter().enumerate() {
        app.update();
        assert!(
            &both(&app, bodies) == expected,
            "frame {frame} after the rollback differs"
        );
    }
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
