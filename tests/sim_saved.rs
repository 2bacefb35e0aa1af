//! Saved worlds (a game's save files): the binary form decodes to what was saved; a load puts
//! the saved positions, velocities, pins, attachments and obstacle poses back exactly, into
//! the same world or a world built again the same way, and the loaded world continues the
//! saved one to the solver's tolerance; a save of another world, invalid values and corrupt,
//! truncated or fuzzed bytes are refused with a typed error, never a panic, the world
//! unchanged.

use std::sync::Arc;

use bevy_deformable::sim::{
    BodyHandle, MaterialParams, ObstacleCollider, ObstacleHandle, SAVED_WORLD_VERSION, SavedWorld,
    SavedWorldError, SoftWorld, Solver, TetMesh, Vec3, WorldSettings,
};
use nalgebra::UnitQuaternion;

mod common;
use common::pushed::{crate_over_slab, pushed_bodies};

const DT: f64 = 1.0 / 60.0;

/// Three rubber bodies dropped onto each other and a floor, one pinned by a corner, one
/// attached by a vertex; a kinematic box that sweeps into them (moved by [`sweep`]).
fn scene() -> (SoftWorld, Vec<BodyHandle>, ObstacleHandle) {
    pushed_bodies(WorldSettings::default(), 3)
}

/// One step with the pusher moved to where it is at step `k`.
fn sweep(world: &mut SoftWorld, pusher: ObstacleHandle, k: usize) {
    let x = (-0.6 + 0.01 * k as f64).min(0.1);
    world
        .obstacle_mut(pusher)
        .unwrap()
        .move_to(Vec3::new(x, 0.1, 0.0), UnitQuaternion::identity(), DT)
        .unwrap();
    world.step(DT).unwrap();
}

fn all_positions(world: &SoftWorld, bodies: &[BodyHandle]) -> Vec<Vec3> {
    bodies
        .iter()
        .flat_map(|&b| world.positions(b).unwrap().to_vec())
        .collect()
}

fn max_distance(a: &[Vec3], b: &[Vec3]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| (p - q).norm())
        .fold(0.0, f64::max)
}

/// The FNV-1a checksum the format uses (to build payloads that reach the decoder's checks).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `bytes` with its header's checksum and length made to match its payload.
fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.len() >= 28 {
        let len = (bytes.len() - 28) as u64;
        let sum = fnv1a(&bytes[28..]);
        bytes[12..20].copy_from_slice(&len.to_le_bytes());
        bytes[20..28].copy_from_slice(&sum.to_le_bytes());
    }
    bytes
}

#[test]
fn the_binary_form_decodes_to_what_was_saved() {
    let (mut world, _, pusher) = scene();
    for k in 0..20 {
        sweep(&mut world, pusher, k);
    }
    let saved = world.save();
    let bytes = saved.to_bytes();
    assert_eq!(SavedWorld::from_bytes(&bytes).unwrap(), saved);
    // 16 f64 per vertex (10, 3 of friction where it carries some, 3 of the rest anchor while
    // it counts as at rest), one pin bit; 9 per tet; 4-8 f64 per remembered contact force;
    // the header and counts.
    let vertices: usize = saved.bodies.iter().map(|b| b.positions.len()).sum();
    let tets: usize = saved.bodies.iter().map(|b| b.rotations.len()).sum();
    let c = &saved.contacts;
    let contacts = c.groups.len() + c.friction.len() + c.normal_forces.len();
    assert!(
        bytes.len() <= vertices * 129 + tets * 72 + contacts * 64 + 200,
        "{} bytes for {vertices} vertices, {tets} tets and {contacts} contact forces",
        bytes.len()
    );
}

#[test]
fn a_loaded_world_has_the_saved_state_and_replays_the_saved_run_bit_for_bit() {
    let (mut world, bodies, pusher) = scene();
    for k in 0..30 {
        sweep(&mut world, pusher, k);
    }
    let bytes = world.save().to_bytes();
    let first: Vec<Vec<Vec3>> = (30..70)
        .map(|k| {
            sweep(&mut world, pusher, k);
            all_positions(&world, &bodies)
        })
        .collect();
    // The pusher reached the bodies in that window.
    assert!(max_distance(&first[0], &first[39]) > 0.02);

    // Into the same world, 40 steps later, and into a world built again (a new session).
    let (fresh, fresh_bodies, _) = scene();
    for (mut w, b) in [(world, bodies), (fresh, fresh_bodies)] {
        w.load(&SavedWorld::from_bytes(&bytes).unwrap()).unwrap();
        assert_eq!(w.save().to_bytes(), bytes, "the state loaded exactly");
        // Bit for bit: the islands' kept systems, which start empty, only warm up a step.
        for (k, expected) in (30..70).zip(&first) {
            sweep(&mut w, pusher, k);
            assert!(
                all_positions(&w, &b) == *expected,
                "step {k}: {} m from the saved run",
                max_distance(&all_positions(&w, &b), expected)
            );
        }
    }
}

#[test]
fn a_newton_world_loads_the_same_into_any_world_and_starts_at_the_saved_run() {
    let newton = WorldSettings {
        solver: Solver::NewtonMprgp,
        ..WorldSettings::default()
    };
    let (mut world, bodies, pusher) = pushed_bodies(newton, 3);
    for k in 0..30 {
        sweep(&mut world, pusher, k);
    }
    let saved = world.save();
    sweep(&mut world, pusher, 30);
    let saved_run_next = all_positions(&world, &bodies);
    for k in 31..60 {
        sweep(&mut world, pusher, k);
    }
    // Into the world that ran on and into a world built again: the Newton state, not in the
    // file, starts afresh in both, so they replay alike bit for bit.
    let (fresh, fresh_bodies, _) = pushed_bodies(newton, 3);
    let mut replays = Vec::new();
    for (mut w, b) in [(world, bodies), (fresh, fresh_bodies)] {
        w.load(&saved).unwrap();
        let replay: Vec<Vec<Vec3>> = (30..60)
            .map(|k| {
                sweep(&mut w, pusher, k);
                all_positions(&w, &b)
            })
            .collect();
        replays.push(replay);
    }
    assert!(replays[0] == replays[1], "the loads replay differently");
    // Its first step agrees with the saved run's to the solver's tolerance (the factor the
    // saved run's Newton solver corrected against is not in the file).
    let first = max_distance(&replays[0][0], &saved_run_next);
    assert!(first < 1e-4, "{first} m from the saved run after one step");
}

#[test]
fn a_loaded_world_with_a_coupled_rigid_crate_replays_to_round_off() {
    let (mut world, slab, crate_box) = crate_over_slab();
    let state = |w: &SoftWorld| {
        let o = w.obstacle(crate_box).unwrap();
        (
            w.positions(slab).unwrap().to_vec(),
            o.position(),
            o.rotation(),
        )
    };
    // Saved as the crate falls; it lands on the slab within the 30 steps after.
    for _ in 0..5 {
        world.step(DT).unwrap();
    }
    let saved = world.save();
    let first: Vec<_> = (0..30)
        .map(|_| {
            world.step(DT).unwrap();
            state(&world)
        })
        .collect();
    let touched = world
        .obstacle(crate_box)
        .unwrap()
        .coupling_response()
        .contacts
        > 0;
    assert!(touched, "the crate is on the slab");
    // The island of a coupled body keeps state between steps that the file does not hold: the
    // replay is to round-off (2.0e-10 m and 2.5e-9 rad over these 30 steps), not bit for bit.
    world.load(&saved).unwrap();
    for (k, expected) in first.iter().enumerate() {
        world.step(DT).unwrap();
        let (x, p, q) = state(&world);
        let moved = max_distance(&x, &expected.0).max((p - expected.1).norm());
        let turned = q.angle_to(&expected.2);
        assert!(
            moved < 1e-8 && turned < 1e-7,
            "step {k}: {moved} m, {turned} rad"
        );
    }
}

#[test]
fn a_load_puts_pins_and_attachments_back() {
    let (mut world, bodies, pusher) = scene();
    sweep(&mut world, pusher, 0);
    let saved = world.save();
    world.unpin(bodies[0], 0).unwrap();
    world.attach(bodies[2], 5, 0.0, Vec3::zeros()).unwrap();
    world.pin(bodies[1], 3, Vec3::new(0.0, 1.0, 0.0)).unwrap();
    assert_ne!(world.save(), saved);
    world.load(&saved).unwrap();
    assert_eq!(world.save(), saved);
    for k in 1..30 {
        sweep(&mut world, pusher, k);
    }
    assert!(world.pinned(bodies[0]).unwrap()[0]);
    assert!(!world.pinned(bodies[1]).unwrap()[3]);
    assert_eq!(
        world.positions(bodies[0]).unwrap()[0],
        Vec3::new(-0.1, 0.02, -0.1)
    );
}

#[test]
fn a_save_of_another_world_or_with_invalid_values_is_refused_and_the_world_kept() {
    let (mut world, _, pusher) = scene();
    sweep(&mut world, pusher, 0);
    let good = world.save();
    let refused = |world: &mut SoftWorld, saved: &SavedWorld| {
        let before = world.save();
        let error = world.load(saved).unwrap_err();
        assert_eq!(world.save(), before, "{error}: the world changed");
        error
    };

    let mut fewer = good.clone();
    fewer.bodies.pop();
    assert_eq!(
        refused(&mut world, &fewer),
        SavedWorldError::DifferentBodies { saved: 2, world: 3 }
    );
    let mut other_mesh = good.clone();
    other_mesh.bodies.swap(0, 1);
    assert!(matches!(
        refused(&mut world, &other_mesh),
        SavedWorldError::DifferentMesh { body: 0, .. }
    ));
    let mut more_obstacles = good.clone();
    more_obstacles.obstacles.push(good.obstacles[0]);
    assert_eq!(
        refused(&mut world, &more_obstacles),
        SavedWorldError::DifferentObstacles { saved: 3, world: 2 }
    );
    let mut short = good.clone();
    short.bodies[1].velocities.pop();
    assert!(matches!(
        refused(&mut world, &short),
        SavedWorldError::WrongLength {
            body: 1,
            what: "velocities",
            ..
        }
    ));
    let mut nan = good.clone();
    nan.bodies[2].positions[7][1] = f64::NAN;
    assert!(matches!(
        refused(&mut world, &nan),
        SavedWorldError::InvalidValue {
            what: "positions",
            ..
        }
    ));
    let mut negative = good.clone();
    negative.bodies[0].attachment_stiffness[1] = -1.0;
    assert!(matches!(
        refused(&mut world, &negative),
        SavedWorldError::InvalidValue { .. }
    ));
    let mut no_rotation = good.clone();
    no_rotation.obstacles[1].rotation = [0.0; 4];
    assert!(matches!(
        refused(&mut world, &no_rotation),
        SavedWorldError::InvalidValue {
            what: "rotation",
            ..
        }
    ));
    let mut skewed = good.clone();
    skewed.bodies[1].rotations[4][0] = 1.5;
    assert!(matches!(
        refused(&mut world, &skewed),
        SavedWorldError::InvalidValue {
            what: "rotations",
            ..
        }
    ));
    let mut fast = good.clone();
    fast.obstacles[1].linear_velocity[0] = f64::INFINITY;
    assert!(matches!(
        refused(&mut world, &fast),
        SavedWorldError::InvalidValue { .. }
    ));
    let mut short_anchor = good.clone();
    short_anchor.bodies[0].still_anchor = vec![[0.0; 3]; 2];
    assert!(matches!(
        refused(&mut world, &short_anchor),
        SavedWorldError::WrongLength {
            body: 0,
            what: "rest anchor (one per vertex)",
            ..
        }
    ));
    let mut nan_anchor = good.clone();
    nan_anchor.bodies[0].still_anchor = good.bodies[0].positions.clone();
    nan_anchor.bodies[0].still_anchor[3][2] = f64::NAN;
    assert!(matches!(
        refused(&mut world, &nan_anchor),
        SavedWorldError::InvalidValue {
            what: "rest anchor",
            ..
        }
    ));
}

/// A world saved while its bodies count as at rest (landed, not yet asleep) keeps where their
/// rest began: the loaded world puts them to sleep at the same step as the saved run, with the
/// same positions.
#[test]
fn a_world_saved_during_a_rest_falls_asleep_at_the_same_step_after_a_load() {
    let scene = || {
        let mut world = SoftWorld::new(WorldSettings::default());
        world
            .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
            .unwrap();
        let bodies: Vec<BodyHandle> = [Vec3::new(0.0, 0.3, 0.0), Vec3::new(0.05, 0.6, 0.0)]
            .into_iter()
            .map(|at| {
                let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 3));
                world.add_body(mesh, MaterialParams::RUBBER, at).unwrap()
            })
            .collect();
        (world, bodies)
    };
    let (mut world, bodies) = scene();
    let mut saved = None;
    for _ in 0..600 {
        world.step(DT).unwrap();
        let s = world.save();
        if s.bodies.iter().all(|b| !b.asleep && b.still_for > 0.2) {
            saved = Some(s);
            break;
        }
    }
    let saved = saved.expect("the bodies rested without falling asleep");
    assert!(saved.bodies.iter().all(|b| !b.still_anchor.is_empty()));
    let bytes = saved.to_bytes();
    let run = |world: &mut SoftWorld| {
        (0..60)
            .map(|_| {
                let report = world.step(DT).unwrap();
                (report.sleeping_bodies, all_positions(world, &bodies))
            })
            .collect::<Vec<_>>()
    };
    let first = run(&mut world);
    assert!(first.iter().any(|(asleep, _)| *asleep == bodies.len()));
    let (mut fresh, _) = scene();
    fresh
        .load(&SavedWorld::from_bytes(&bytes).unwrap())
        .unwrap();
    let again = run(&mut fresh);
    for (k, ((a, x), (b, y))) in first.iter().zip(&again).enumerate() {
        assert_eq!(a, b, "step {k}: {a} against {b} asleep");
        assert!(
            max_distance(x, y) < 1e-9,
            "step {k}: {} m apart",
            max_distance(x, y)
        );
    }
}

/// A serde form written before the rest anchor existed still decodes (no anchor: the rest
/// starts over at the load) and loads.
#[test]
fn a_serde_form_without_the_rest_anchor_loads() {
    let (mut world, _, pusher) = scene();
    sweep(&mut world, pusher, 0);
    let saved = world.save();
    let mut value = serde_json::to_value(&saved).unwrap();
    for body in value["bodies"].as_array_mut().unwrap() {
        body.as_object_mut().unwrap().remove("still_anchor");
    }
    let old: SavedWorld = serde_json::from_value(value).unwrap();
    assert!(old.bodies.iter().all(|b| b.still_anchor.is_empty()));
    world.load(&old).unwrap();
}

#[test]
fn corrupt_and_truncated_bytes_are_refused() {
    let (mut world, _, pusher) = scene();
    sweep(&mut world, pusher, 0);
    let bytes = world.save().to_bytes();
    assert_eq!(
        SavedWorld::from_bytes(b"not a save at all, just text"),
        Err(SavedWorldError::NotASavedWorld)
    );
    let mut version = bytes.clone();
    version[8] = 7;
    assert_eq!(
        SavedWorld::from_bytes(&version),
        Err(SavedWorldError::UnsupportedVersion {
            found: 7,
            supported: SAVED_WORLD_VERSION
        })
    );
    // Every prefix: the magic cut short reads as another file, the rest as truncated.
    for len in 0..bytes.len() {
        let error = SavedWorld::from_bytes(&bytes[..len]).unwrap_err();
        assert!(
            matches!(
                error,
                SavedWorldError::Truncated | SavedWorldError::NotASavedWorld
            ),
            "{len}: {error}"
        );
    }
    let mut flipped = bytes.clone();
    flipped[100] ^= 0x10;
    assert!(matches!(
        SavedWorld::from_bytes(&flipped),
        Err(SavedWorldError::Corrupt(_))
    ));
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        SavedWorld::from_bytes(&longer),
        Err(SavedWorldError::Corrupt(_))
    ));
    assert!(matches!(
        SavedWorld::from_bytes(&resealed(longer)),
        Err(SavedWorldError::Corrupt(_))
    ));
}

#[test]
fn fuzzed_bytes_never_panic_and_never_leave_a_world_broken() {
    let (mut world, bodies, pusher) = scene();
    for k in 0..10 {
        sweep(&mut world, pusher, k);
    }
    let bytes = world.save().to_bytes();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut decoded, mut loaded) = (0, 0);
    for trial in 0..3_000 {
        let mut mutated = bytes.clone();
        match trial % 4 {
            // A few random bytes anywhere.
            0 | 1 => {
                for _ in 0..1 + next() % 4 {
                    let i = (next() % mutated.len() as u64) as usize;
                    mutated[i] = next() as u8;
                }
            }
            // Cut or extended by random bytes.
            2 => {
                let len = (next() % (mutated.len() as u64 + 64)) as usize;
                mutated.resize(len, 0);
                for b in mutated.iter_mut().skip(bytes.len()) {
                    *b = next() as u8;
                }
            }
            // A count or a value overwritten by a random word.
            _ => {
                let i = 28 + (next() % (mutated.len() as u64 - 36)) as usize;
                mutated[i..i + 8].copy_from_slice(&next().to_le_bytes());
            }
        }
        // Half of them with a matching checksum, to reach the payload's decoding.
        if trial % 2 == 0 {
            mutated = resealed(mutated);
        }
        let Ok(saved) = SavedWorld::from_bytes(&mutated) else {
            continue;
        };
        decoded += 1;
        if world.load(&saved).is_ok() {
            loaded += 1;
            world.step(DT).unwrap();
            let finite = bodies.iter().all(|&b| {
                let x = world.positions(b).unwrap();
                x.iter().all(|p| p.iter().all(|c| c.is_finite()))
                    || world.frozen(b).unwrap().is_some()
            });
            assert!(
                finite,
                "trial {trial}: a loaded world stepped to non-finite positions"
            );
            world
                .load(&SavedWorld::from_bytes(&bytes).unwrap())
                .unwrap();
        }
    }
    // The resealed mutations reached the decoder and the load's checks.
    assert!(
        decoded > 300 && loaded > 100,
        "{decoded} decoded, {loaded} loaded"
    );
}
