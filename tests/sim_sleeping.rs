//! Sleeping: bodies at rest are skipped by the step, and every wake cause brings them back.

use std::sync::Arc;

use bevy_deformable::sim::{
    BodyHandle, EmbeddedPoint, MaterialParams, ObstacleCollider, Sleeping, SoftWorld, TetMesh,
    Vec3, WorldSettings,
};

mod common;
use common::intersections;

const DT: f64 = 1.0 / 60.0;

fn cube() -> Arc<TetMesh> {
    Arc::new(TetMesh::try_cuboid(Vec3::repeat(0.2), 3).unwrap())
}

fn floor() -> ObstacleCollider {
    ObstacleCollider::halfspace(Vec3::y()).unwrap()
}

/// A rubber cube with its bottom `height - 0.2` m above a floor (default settings).
fn cube_above_floor(height: f64) -> (SoftWorld, BodyHandle) {
    let mut world = SoftWorld::new(WorldSettings::default());
    let body = world
        .add_body(cube(), MaterialParams::RUBBER, Vec3::new(0.0, height, 0.0))
        .unwrap();
    world.add_obstacle(floor()).unwrap();
    (world, body)
}

/// A rubber cube dropped 1 cm onto a floor, stepped until it sleeps (at most 5 s).
fn sleeping_cube() -> (SoftWorld, BodyHandle) {
    let (mut world, body) = cube_above_floor(0.21);
    for _ in 0..300 {
        world.step(DT).unwrap();
        if world.is_asleep(body).unwrap() {
            return (world, body);
        }
    }
    panic!("the cube never fell asleep");
}

fn displacement(a: &[Vec3], b: &[Vec3]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| (p - q).norm())
        .fold(0.0, f64::max)
}

#[test]
fn a_resting_cube_falls_asleep_and_the_step_skips_it() {
    let (mut world, body) = cube_above_floor(0.5);
    let mut slept_at = None;
    for step in 0..300 {
        let report = world.step(DT).unwrap();
        if !report.slept.is_empty() {
            assert_eq!(report.slept, vec![body]);
            assert!(slept_at.is_none(), "fell asleep twice");
            slept_at = Some(step);
        }
        assert!(report.woke.is_empty(), "nothing should wake it");
    }
    let slept_at = slept_at.expect("the cube fell asleep");
    // It had to land and stay slow for the delay first.
    assert!(slept_at as f64 * DT > 0.5, "asleep after {slept_at} steps");
    let x = world.positions(body).unwrap().to_vec();
    assert!(
        world
            .velocities(body)
            .unwrap()
            .iter()
            .all(|v| *v == Vec3::zeros())
    );
    let lowest = x.iter().map(|p| p.y).fold(f64::MAX, f64::min);
    assert!(lowest > -1e-3, "asleep {lowest} m below the floor");
    for _ in 0..60 {
        let report = world.step(DT).unwrap();
        assert_eq!(report.sleeping_bodies, 1);
        assert_eq!(report.pd_iterations, 0);
        assert_eq!(report.mprgp_iterations, 0);
        assert!(world.last_step_stats(body).unwrap().asleep);
    }
    assert_eq!(
        world.positions(body).unwrap(),
        &x[..],
        "a sleeping body moved"
    );
}

/// Each cause wakes the sleeping cube: it is reported woken and moves again.
#[test]
fn every_wake_cause_wakes_the_body_and_it_moves_again() {
    type Cause = (&'static str, fn(&mut SoftWorld, BodyHandle));
    let causes: [Cause; 10] = [
        ("softer material", |w, b| {
            w.set_material(b, MaterialParams::RUBBER.with_youngs_modulus(1e4))
                .unwrap();
        }),
        ("teleport up", |w, b| {
            w.positions_mut(b)
                .unwrap()
                .iter_mut()
                .for_each(|p| p.y += 0.3);
        }),
        ("kick", |w, b| {
            w.velocities_mut(b)
                .unwrap()
                .iter_mut()
                .for_each(|v| v.x = 1.0);
        }),
        ("pin moved up", |w, b| {
            let top = top_vertex(w, b);
            let target = w.positions(b).unwrap()[top] + Vec3::new(0.0, 0.1, 0.0);
            w.pin(b, top, target).unwrap();
        }),
        ("attachment", |w, b| {
            let top = top_vertex(w, b);
            let target = w.positions(b).unwrap()[top] + Vec3::new(0.2, 0.2, 0.0);
            w.attach(b, top, 1e4, target).unwrap();
        }),
        ("grab", |w, b| {
            let top = top_vertex(w, b);
            let target = w.positions(b).unwrap()[top] + Vec3::new(0.0, 0.3, 0.0);
            w.grab(b, EmbeddedPoint::vertex(top as u32), 1e4, target)
                .unwrap();
        }),
        ("sideways gravity", |w, _| {
            w.settings_mut().gravity = Vec3::new(9.81, -9.81, 0.0);
        }),
        ("floor removed", |w, _| {
            let floor = w.obstacle_handles().next().unwrap();
            w.remove_obstacle(floor);
        }),
        ("reset", |w, b| w.reset_body(b).unwrap()),
        ("explicit wake, then a push sideways", |w, b| {
            w.wake(b).unwrap();
            w.velocities_mut(b)
                .unwrap()
                .iter_mut()
                .for_each(|v| v.z = -1.0);
        }),
    ];
    for (name, cause) in causes {
        let (mut world, body) = sleeping_cube();
        let before = world.positions(body).unwrap().to_vec();
        cause(&mut world, body);
        let after_edit = world.positions(body).unwrap().to_vec();
        let report = world.step(DT).unwrap();
        assert_eq!(report.woke, vec![body], "{name}: not reported woken");
        assert!(!world.is_asleep(body).unwrap(), "{name}: still asleep");
        for _ in 0..20 {
            world.step(DT).unwrap();
        }
        let moved = displacement(world.positions(body).unwrap(), &after_edit);
        let from_sleep = displacement(world.positions(body).unwrap(), &before);
        assert!(
            moved > 2e-3 || from_sleep > 2e-3,
            "{name}: moved only {moved} m after waking"
        );
    }
}

fn top_vertex(world: &SoftWorld, body: BodyHandle) -> usize {
    let x = world.positions(body).unwrap();
    (0..x.len())
        .max_by(|&a, &b| x[a].y.total_cmp(&x[b].y))
        .unwrap()
}

#[test]
fn a_moving_obstacle_wakes_what_it_reaches_and_a_still_one_does_not() {
    let (mut world, body) = sleeping_cube();
    // A box beside the cube, 30 cm away: set to its own pose every step (as the plugin does
    // for every obstacle each frame), it wakes nothing.
    let pusher = world
        .add_obstacle(
            ObstacleCollider::cuboid(Vec3::new(0.1, 0.1, 0.1))
                .unwrap()
                .with_position(Vec3::new(-0.6, 0.15, 0.0)),
        )
        .unwrap();
    // Moves the box by `dx` (m) over one step, as the plugin does every frame.
    let shift = |world: &mut SoftWorld, dx: f64| {
        let pose = world.obstacles()[1].position() + Vec3::new(dx, 0.0, 0.0);
        let rotation = world.obstacles()[1].rotation();
        world
            .obstacle_mut(pusher)
            .unwrap()
            .move_to(pose, rotation, DT)
            .unwrap();
    };
    // Adding it far away wakes nothing either.
    for _ in 0..30 {
        shift(&mut world, 0.0);
        let report = world.step(DT).unwrap();
        assert!(report.woke.is_empty(), "a still obstacle woke the cube");
    }
    assert!(world.is_asleep(body).unwrap());
    // Now it slides in at 1 m/s.
    let mut woke = false;
    for _ in 0..60 {
        shift(&mut world, DT);
        woke |= world.step(DT).unwrap().woke.contains(&body);
    }
    assert!(woke, "the pushing box never woke the cube");
    let centre_x = world
        .positions(body)
        .unwrap()
        .iter()
        .map(|p| p.x)
        .sum::<f64>()
        / world.positions(body).unwrap().len() as f64;
    assert!(
        centre_x > 0.05,
        "the cube was not pushed: centre at {centre_x}"
    );
}

/// A stack of three cubes falls asleep; a ball dropped on it wakes the stack, no surface
/// crosses another while it settles, and everything falls asleep again. (The stack of
/// `sim_contacts`: 1 MPa rubber, whose stacks are free of crossings with sleeping off too.)
#[test]
fn a_sleeping_pile_under_a_dropped_ball_wakes_and_stays_free_of_crossings() {
    let mut world = SoftWorld::new(WorldSettings::default());
    let rubber = MaterialParams::RUBBER.with_youngs_modulus(1e6);
    let cubes: Vec<BodyHandle> = (0..3)
        .map(|i| {
            world
                .add_body(
                    Arc::new(TetMesh::try_cuboid(Vec3::repeat(0.1), 4).unwrap()),
                    rubber,
                    Vec3::new(0.013 * i as f64, 0.11 + 0.23 * i as f64, -0.007 * i as f64),
                )
                .unwrap()
        })
        .collect();
    world.add_obstacle(floor()).unwrap();
    let mut asleep = false;
    for _ in 0..600 {
        let report = world.step(DT).unwrap();
        if report.sleeping_bodies == 3 {
            asleep = true;
            break;
        }
    }
    assert!(asleep, "the pile never fell asleep");
    let ball = world
        .add_body(
            Arc::new(TetMesh::try_sphere(0.1, 6).unwrap()),
            rubber,
            Vec3::new(0.03, 1.5, 0.0),
        )
        .unwrap();
    let mut woken = Vec::new();
    let mut deepest: f64 = 0.0;
    let mut asleep_again = false;
    let bodies: Vec<BodyHandle> = world.bodies().collect();
    for step in 0..900 {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
        woken.extend(report.woke.iter().copied());
        deepest = deepest.max(report.max_penetration);
        if step % 3 == 0 {
            for (i, &a) in bodies.iter().enumerate() {
                for &b in &bodies[i + 1..] {
                    let crossing = intersections(&world, a, b);
                    assert_eq!(crossing, 0, "step {step}: {a:?} and {b:?} cross");
                }
            }
        }
        if report.sleeping_bodies == 4 {
            asleep_again = true;
            break;
        }
    }
    for c in &cubes {
        assert!(woken.contains(c), "cube {c:?} was never woken");
    }
    // The impact presses the surfaces into each other's contact margin: measured 6.9 mm deep,
    // the same with sleeping off (the stack awake under the ball).
    assert!(
        deepest < 1e-2,
        "surfaces pressed {deepest} m into each other"
    );
    assert!(
        asleep_again,
        "the pile and the ball never fell asleep again"
    );
    // The ball rests on the pile, not inside it.
    let ball_low = world
        .positions(ball)
        .unwrap()
        .iter()
        .map(|p| p.y)
        .fold(f64::MAX, f64::min);
    // The stack's top is at 0.6 m.
    assert!(ball_low > 0.55, "the ball sank to {ball_low} m");
}

#[test]
fn a_grabbed_body_never_sleeps_and_sleeping_off_keeps_every_body_awake() {
    let (mut world, body) = cube_above_floor(0.21);
    let top = top_vertex(&world, body);
    let target = world.positions(body).unwrap()[top];
    world
        .grab(body, EmbeddedPoint::vertex(top as u32), 1e3, target)
        .unwrap();
    for _ in 0..180 {
        world.step(DT).unwrap();
    }
    assert!(!world.is_asleep(body).unwrap(), "a held body fell asleep");
    world.release(body).unwrap();
    world.settings_mut().sleeping = Sleeping::OFF;
    for _ in 0..180 {
        assert!(world.step(DT).unwrap().slept.is_empty());
    }
    assert!(!world.is_asleep(body).unwrap());
    // Turned back on, it sleeps; turned off while it sleeps, it wakes.
    world.settings_mut().sleeping = Sleeping::default();
    for _ in 0..120 {
        world.step(DT).unwrap();
    }
    assert!(world.is_asleep(body).unwrap());
    world.settings_mut().sleeping = Sleeping::OFF;
    assert!(!world.is_asleep(body).unwrap());
}

#[test]
fn unchanged_pin_targets_leave_a_hanging_body_asleep() {
    let mut world = SoftWorld::new(WorldSettings::default());
    let body = world
        .add_body(cube(), MaterialParams::RUBBER, Vec3::new(0.0, 1.0, 0.0))
        .unwrap();
    // Hung by its whole top face (one vertex alone would let it swing as a pendulum, which
    // nothing damps).
    let x = world.positions(body).unwrap().to_vec();
    let high = x[top_vertex(&world, body)].y;
    let top: Vec<usize> = (0..x.len()).filter(|&v| x[v].y > high - 1e-9).collect();
    for &v in &top {
        world.pin(body, v, x[v]).unwrap();
    }
    let (top, anchor) = (top[0], x[top[0]]);
    let mut slept = false;
    for _ in 0..600 {
        world.step(DT).unwrap();
        // The game sets the same target every frame.
        world.set_pin_target(body, top, anchor).unwrap();
        if world.is_asleep(body).unwrap() {
            slept = true;
            break;
        }
    }
    assert!(slept, "the hanging cube never fell asleep");
    for _ in 0..30 {
        world.set_pin_target(body, top, anchor).unwrap();
        assert!(world.step(DT).unwrap().woke.is_empty());
    }
    world
        .set_pin_target(body, top, anchor + Vec3::new(0.1, 0.0, 0.0))
        .unwrap();
    assert!(!world.is_asleep(body).unwrap());
}

/// Twelve rubber cubes and balls poured into a bin (the `pile` bench's first three layers):
/// their vertices jitter in place by a millimetre or two a step while the pile stands, and the
/// whole pile falls asleep by where its vertices stay, not how fast they jitter. Measured at
/// 64 Hz: every body asleep 3.9 s after the start; by the speed of the fastest vertex (before)
/// the pile was still awake at 10 s.
#[test]
fn a_poured_pile_whose_vertices_jitter_in_place_falls_asleep() {
    let mut world = SoftWorld::new(WorldSettings::default());
    common::add_bin(&mut world, 0.6, 1.1, 0.05);
    common::add_pile_bodies(&mut world, 12);
    let dt = 1.0 / 64.0;
    let mut asleep_at = None;
    for step in 0..(10.0 / dt) as usize {
        let report = world.step(dt).unwrap();
        assert!(report.frozen.is_empty(), "step {step}: {:?}", report.frozen);
        if report.sleeping_bodies == 12 {
            asleep_at = Some((step + 1) as f64 * dt);
            break;
        }
    }
    let asleep_at = asleep_at.expect("the pile never fell asleep within 10 s");
    assert!(asleep_at < 6.0, "asleep only at {asleep_at} s");
}
