//! World snapshots: take one, step on, restore it, step again: the same steps bit for bit
//! (positions and velocities of every body after every step), with soft-soft contact, pins,
//! attachments, a grab spring, a moving obstacle, friction and sleeping, for both solvers.
//! And a snapshot of other bodies or obstacles is refused with a typed error, the world
//! unchanged.

use std::sync::Arc;

use bevy_deformable::sim::{
    BodyHandle, EmbeddedPoint, MaterialParams, ObstacleCollider, ObstacleHandle, SnapshotError,
    SoftWorld, Solver, TetMesh, Vec3, WorldSettings, WorldSnapshot,
};
use nalgebra::UnitQuaternion;

mod common;
use common::pushed::{crate_over_slab, pushed_bodies};

const DT: f64 = 1.0 / 60.0;

/// Four rubber bodies dropped onto each other and a floor, one pinned by a corner, one
/// attached by a vertex to a moving target, one grabbed; a kinematic box sweeping past them.
fn scene(solver: Solver) -> (SoftWorld, Vec<BodyHandle>, ObstacleHandle) {
    scene_with(WorldSettings {
        solver,
        ..WorldSettings::default()
    })
}

/// [`scene`] with `settings`.
fn scene_with(settings: WorldSettings) -> (SoftWorld, Vec<BodyHandle>, ObstacleHandle) {
    let (mut world, bodies, pusher) = pushed_bodies(settings, 4);
    world
        .grab(
            bodies[3],
            EmbeddedPoint::vertex(3),
            500.0,
            Vec3::new(0.1, 0.9, 0.0),
        )
        .unwrap();
    (world, bodies, pusher)
}

/// The inputs of step `k`: the pusher's sweep, the attachment's and the grab's targets.
fn drive(world: &mut SoftWorld, bodies: &[BodyHandle], pusher: ObstacleHandle, k: usize) {
    let t = k as f64 * DT;
    let x = -0.6 + 0.4 * t;
    world
        .obstacle_mut(pusher)
        .unwrap()
        .move_to(Vec3::new(x, 0.1, 0.0), UnitQuaternion::identity(), DT)
        .unwrap();
    world
        .set_attachment_target(bodies[2], 5, Vec3::new(0.1 + 0.1 * t.sin(), 0.6, 0.0))
        .unwrap();
    world
        .set_grab_target(bodies[3], Vec3::new(0.1, 0.9 - 0.05 * t, 0.05 * t))
        .unwrap();
}

/// Every body's positions and velocities.
fn state(world: &SoftWorld, bodies: &[BodyHandle]) -> Vec<Vec3> {
    bodies
        .iter()
        .flat_map(|&b| {
            let mut s = world.positions(b).unwrap().to_vec();
            s.extend_from_slice(world.velocities(b).unwrap());
            s
        })
        .collect()
}

/// Restores `snapshot` and steps `world` once per entry of `recorded`, after `drive(world, i)`,
/// asserting that `observe` sees every step as the first run recorded it.
fn assert_replays<T: PartialEq>(
    world: &mut SoftWorld,
    snapshot: &WorldSnapshot,
    recorded: &[T],
    mut drive: impl FnMut(&mut SoftWorld, usize),
    observe: impl Fn(&SoftWorld) -> T,
) {
    world.restore(snapshot).unwrap();
    for (i, expected) in recorded.iter().enumerate() {
        drive(world, i);
        world.step(DT).unwrap();
        assert!(
            &observe(world) == expected,
            "step {i} after the restore differs from the first run"
        );
    }
}

/// Steps `first` steps, snapshots, records `window` steps, restores and steps them again,
/// asserting every step equal; and that the window was not trivial (soft contacts and active
/// contact rows seen).
fn assert_replay_is_bit_identical(solver: Solver, first: usize, window: usize) {
    let settings = WorldSettings {
        solver,
        ..WorldSettings::default()
    };
    assert_replay_is_bit_identical_with(settings, first, window);
}

/// [`assert_replay_is_bit_identical`] with `settings`; returns the collision-prone regions
/// built in the window.
fn assert_replay_is_bit_identical_with(
    settings: WorldSettings,
    first: usize,
    window: usize,
) -> usize {
    let solver = settings.solver;
    let (mut world, bodies, pusher) = scene_with(settings);
    let mut regions = 0;
    for k in 0..first {
        drive(&mut world, &bodies, pusher, k);
        world.step(DT).unwrap();
    }
    let snapshot = world.snapshot();
    let mut recorded = Vec::new();
    let (mut soft, mut constrained) = (0, 0);
    for k in first..first + window {
        drive(&mut world, &bodies, pusher, k);
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "step {k}: {:?}", report.frozen);
        soft += report.soft_contacts;
        constrained += report.active_constraints;
        regions += report.prone_rebuilds;
        recorded.push(state(&world, &bodies));
    }
    assert_replays(
        &mut world,
        &snapshot,
        &recorded,
        |w, i| drive(w, &bodies, pusher, first + i),
        |w| state(w, &bodies),
    );
    assert!(
        soft > 0 && constrained > 0,
        "{solver:?}: {soft} soft contacts, {constrained} active rows"
    );
    regions
}

#[test]
fn projective_dynamics_replays_bit_for_bit_after_a_restore() {
    assert_replay_is_bit_identical(Solver::ProjectiveDynamics, 30, 60);
}

/// Every body localized (`WorldSettings::localized_min_vertices` 0): each one's contact
/// vertices ordered last in its factor, the region rebuilt as the contacts spread. A snapshot
/// taken before the regions are built (the restore rebuilds each system and localizes it as
/// the first run did) and one taken after both replay bit for bit.
#[test]
fn localized_bodies_replay_bit_for_bit_after_a_restore() {
    let settings = WorldSettings {
        localized_min_vertices: 0,
        ..WorldSettings::default()
    };
    let built = assert_replay_is_bit_identical_with(settings, 2, 40);
    assert!(built > 0, "regions were built in the replayed window");
    assert_replay_is_bit_identical_with(settings, 30, 40);
}

#[test]
fn newton_replays_bit_for_bit_after_a_restore() {
    assert_replay_is_bit_identical(Solver::NewtonMprgp, 30, 20);
}

/// A cube resting alone falls asleep inside the window: the sleeping clocks and bounds come
/// back with the snapshot.
#[test]
fn sleeping_replays_bit_for_bit_after_a_restore() {
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let body = world
        .add_body(
            Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 3)),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 0.12, 0.0),
        )
        .unwrap();
    for _ in 0..30 {
        world.step(DT).unwrap();
    }
    let snapshot = world.snapshot();
    let mut recorded = Vec::new();
    let mut slept = false;
    for _ in 0..240 {
        slept |= world.step(DT).unwrap().sleeping_bodies == 1;
        recorded.push((state(&world, &[body]), world.is_asleep(body).unwrap()));
    }
    assert!(slept, "the cube falls asleep in the window");
    assert_replays(
        &mut world,
        &snapshot,
        &recorded,
        |_, _| {},
        |w| (state(w, &[body]), w.is_asleep(body).unwrap()),
    );
}

/// A rigid crate coupled two ways (the core's half of the avian coupling) dropped on a rubber
/// slab: its pose and velocities come back with the snapshot, and so does the slab's state.
#[test]
fn a_coupled_rigid_body_replays_bit_for_bit_after_a_restore() {
    let (mut world, slab, crate_box) = crate_over_slab();
    let crate_state = |w: &SoftWorld| {
        let o = w.obstacle(crate_box).unwrap();
        [o.position(), o.center_velocity()]
    };
    for _ in 0..10 {
        world.step(DT).unwrap();
    }
    let snapshot = world.snapshot();
    let mut recorded = Vec::new();
    let mut touched = false;
    for _ in 0..40 {
        world.step(DT).unwrap();
        touched |= world
            .obstacle(crate_box)
            .unwrap()
            .coupling_response()
            .contacts
            > 0;
        recorded.push((state(&world, &[slab]), crate_state(&world)));
    }
    assert!(touched, "the crate lands on the slab in the window");
    assert_replays(
        &mut world,
        &snapshot,
        &recorded,
        |_, _| {},
        |w| (state(w, &[slab]), crate_state(w)),
    );
}

/// A snapshot taken into a reused one is the same snapshot.
#[test]
fn a_snapshot_taken_into_a_reused_one_restores_the_same() {
    let (mut world, bodies, pusher) = scene(Solver::ProjectiveDynamics);
    let mut reused = world.snapshot();
    for k in 0..20 {
        drive(&mut world, &bodies, pusher, k);
        world.step(DT).unwrap();
    }
    world.snapshot_into(&mut reused);
    let fresh = world.snapshot();
    let mut ends = Vec::new();
    for snapshot in [&reused, &fresh] {
        world.restore(snapshot).unwrap();
        for k in 20..40 {
            drive(&mut world, &bodies, pusher, k);
            world.step(DT).unwrap();
        }
        ends.push(state(&world, &bodies));
    }
    assert!(ends[0] == ends[1]);
}

/// A restore after a material change puts the snapshot's material back (the body refactors;
/// the replay then agrees to the solver's tolerance, not bit for bit).
#[test]
fn a_restore_across_a_material_change_puts_the_material_back() {
    let (mut world, bodies, pusher) = scene(Solver::ProjectiveDynamics);
    for k in 0..20 {
        drive(&mut world, &bodies, pusher, k);
        world.step(DT).unwrap();
    }
    let snapshot = world.snapshot();
    let mut recorded = Vec::new();
    for k in 20..40 {
        drive(&mut world, &bodies, pusher, k);
        world.step(DT).unwrap();
        recorded.push(state(&world, &bodies));
    }
    let stiff = MaterialParams::RUBBER.with_youngs_modulus(5.0e6);
    world.set_material(bodies[1], stiff).unwrap();
    world.step(DT).unwrap();
    world.restore(&snapshot).unwrap();
    assert_eq!(
        world.material(bodies[1]).unwrap(),
        &MaterialParams::RUBBER,
        "the snapshot's material is back"
    );
    for (i, k) in (20..40).enumerate() {
        drive(&mut world, &bodies, pusher, k);
        world.step(DT).unwrap();
        let apart = state(&world, &bodies)
            .iter()
            .zip(&recorded[i])
            .map(|(a, b)| (a - b).norm())
            .fold(0.0, f64::max);
        assert!(apart < 1e-3, "step {k}: {apart} apart (m or m/s)");
    }
}

/// Another world's snapshot, or one taken before a body or obstacle was added or removed, is
/// refused with a typed error, and the world is unchanged.
#[test]
fn a_snapshot_of_other_bodies_is_refused() {
    let (mut world, bodies, _) = scene(Solver::ProjectiveDynamics);
    world.step(DT).unwrap();
    let snapshot = world.snapshot();
    let before = state(&world, &bodies);

    // A body removed since.
    world.remove_body(bodies[3]);
    let kept = &bodies[..3];
    let now = state(&world, kept);
    assert!(matches!(
        world.restore(&snapshot),
        Err(SnapshotError::DifferentBodies { .. })
    ));
    assert!(state(&world, kept) == now, "the world is unchanged");

    // An obstacle added since.
    let (mut world, _, _) = scene(Solver::ProjectiveDynamics);
    world.step(DT).unwrap();
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::x()).unwrap())
        .unwrap();
    assert!(matches!(
        world.restore(&snapshot),
        Err(SnapshotError::DifferentObstacles { .. })
    ));

    // Another world whose bodies have the same handles but other meshes.
    let mut other = SoftWorld::new(WorldSettings::default());
    for normal in [Vec3::y(), Vec3::x()] {
        other
            .add_obstacle(ObstacleCollider::halfspace(normal).unwrap())
            .unwrap();
    }
    for _ in 0..4 {
        other
            .add_body(
                Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 2)),
                MaterialParams::RUBBER,
                Vec3::zeros(),
            )
            .unwrap();
    }
    assert!(matches!(
        other.restore(&snapshot),
        Err(SnapshotError::DifferentMesh { .. })
    ));

    // The world it was taken from takes it.
    let (mut world, bodies, _) = scene(Solver::ProjectiveDynamics);
    world.step(DT).unwrap();
    world.step(DT).unwrap();
    world.restore(&snapshot).unwrap();
    assert!(state(&world, &bodies) == before);
}
