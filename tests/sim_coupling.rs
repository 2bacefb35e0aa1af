//! Two-way coupling with rigid bodies (coupled obstacles): momentum, rest, and what a light
//! body on a stiff soft body does. The rigid body is integrated by the world itself here (a
//! coupled obstacle ends each step at its end pose with its final velocities, which is the
//! next step's start), as a rigid-body engine without other contacts would.

use std::sync::Arc;

use bevy_deformable::sim::{
    BodyHandle, MaterialParams, ObstacleCollider, ObstacleError, ObstacleHandle, RigidCoupling,
    Sleeping, SoftWorld, Solver, TetMesh, Vec3, WorldSettings,
};
use nalgebra::Matrix3;

const DT: f64 = 1.0 / 60.0;

fn momentum(world: &SoftWorld, body: BodyHandle) -> Vec3 {
    let density = world.material(body).unwrap().density;
    let masses = world.mesh(body).unwrap().lumped_masses(density);
    let v = world.velocities(body).unwrap();
    masses.iter().zip(v).map(|(&m, v)| m * v).sum()
}

fn soft_mass(world: &SoftWorld, body: BodyHandle) -> f64 {
    let density = world.material(body).unwrap().density;
    world
        .mesh(body)
        .unwrap()
        .lumped_masses(density)
        .iter()
        .sum()
}

fn obstacle(world: &SoftWorld, h: ObstacleHandle) -> &ObstacleCollider {
    let i = world.obstacle_handles().position(|o| o == h).unwrap();
    &world.obstacles()[i]
}

/// A rigid box of `mass` kg on a 10 cm rubber slab lying on the floor, under gravity. Returns
/// the world, the slab and the box.
fn box_on_slab(mass: f64, material: MaterialParams) -> (SoftWorld, BodyHandle, ObstacleHandle) {
    let mut world = SoftWorld::new(WorldSettings {
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    });
    let slab = TetMesh::try_cuboid(Vec3::new(0.4, 0.05, 0.4), 8).unwrap();
    let slab = world
        .add_body(Arc::new(slab), material, Vec3::new(0.0, 0.05, 0.0))
        .unwrap();
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let half = Vec3::new(0.15, 0.1, 0.15);
    let gravity = world.settings().gravity;
    let crate_box = ObstacleCollider::cuboid(half)
        .unwrap()
        .with_position(Vec3::new(0.0, 0.1 + half.y + 0.005, 0.0))
        .with_coupling(RigidCoupling::solid_cuboid(mass, half, gravity))
        .unwrap();
    let crate_box = world.add_obstacle(crate_box).unwrap();
    (world, slab, crate_box)
}

/// Runs `seconds` and returns the rigid box's fastest centre speed over the last `tail` s, its
/// largest kinetic energy over the same tail and at its start, and the deepest penetration.
fn settle(
    world: &mut SoftWorld,
    rigid: ObstacleHandle,
    seconds: f64,
    tail: f64,
) -> (f64, f64, f64, f64) {
    let steps = (seconds / DT).round() as usize;
    let tail_from = steps - (tail / DT).round() as usize;
    let mass = obstacle(world, rigid).coupling().unwrap().mass;
    let (mut fastest, mut energy_max, mut energy_start, mut deepest) =
        (0.0f64, 0.0f64, 0.0, 0.0f64);
    for step in 0..steps {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
        let speed = obstacle(world, rigid).center_velocity().norm();
        assert!(speed.is_finite());
        if step >= tail_from {
            let energy = 0.5 * mass * speed * speed;
            if step == tail_from {
                energy_start = energy;
            }
            fastest = fastest.max(speed);
            energy_max = energy_max.max(energy);
            deepest = deepest.max(report.max_penetration);
        }
    }
    (fastest, energy_max, energy_start, deepest)
}

#[test]
fn a_soft_ball_and_a_free_rigid_box_conserve_momentum_head_on() {
    let mut world = SoftWorld::new(WorldSettings {
        gravity: Vec3::zeros(),
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    });
    let material = MaterialParams {
        friction: 0.0,
        ..MaterialParams::JELLY
    };
    let ball = TetMesh::try_sphere(0.15, 6).unwrap();
    let ball = world
        .add_body(Arc::new(ball), material, Vec3::new(-0.4, 0.0, 0.0))
        .unwrap();
    for v in world.velocities_mut(ball).unwrap() {
        *v = Vec3::new(2.0, 0.0, 0.0);
    }
    let ball_mass = soft_mass(&world, ball);
    let half = Vec3::repeat(0.15);
    let rigid = ObstacleCollider::cuboid(half)
        .unwrap()
        .with_friction(0.0)
        .with_position(Vec3::new(0.0, 0.0, 0.0))
        .with_coupling(RigidCoupling::solid_cuboid(ball_mass, half, Vec3::zeros()))
        .unwrap();
    let rigid = world.add_obstacle(rigid).unwrap();
    let start = momentum(&world, ball);
    let energy_start = world.kinetic_energy(ball).unwrap();
    let mut touched = false;
    for _ in 0..60 {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
        touched |= obstacle(&world, rigid).coupling_response().contacts > 0;
        let o = obstacle(&world, rigid);
        let total = momentum(&world, ball) + ball_mass * o.center_velocity();
        let energy = world.kinetic_energy(ball).unwrap()
            + 0.5 * ball_mass * o.center_velocity().norm_squared();
        assert!(
            energy <= energy_start * 1.001,
            "kinetic energy grew: {energy} J from {energy_start} J"
        );
        // Exact up to the LCP's and the QP's tolerances (measured: 4-5 digits).
        assert!(
            (total - start).norm() <= 1e-3 * start.norm(),
            "momentum {total:?} against {start:?} at the start"
        );
    }
    assert!(touched, "the ball never reached the box");
    let o = obstacle(&world, rigid);
    let box_speed = o.center_velocity().x;
    let ball_speed = momentum(&world, ball).x / ball_mass;
    // Equal masses, inelastic to elastic: the box takes between half and all of the speed.
    assert!(
        (0.9..=2.05).contains(&box_speed),
        "box {box_speed} m/s, ball {ball_speed} m/s"
    );
    assert!(
        o.angular_velocity().norm() < 0.05,
        "{:?}",
        o.angular_velocity()
    );
}

#[test]
fn a_heavy_rigid_box_comes_to_rest_on_a_soft_slab() {
    let (mut world, _, rigid) = box_on_slab(20.0, MaterialParams::RUBBER);
    let (fastest, _, _, deepest) = settle(&mut world, rigid, 3.0, 1.0);
    assert!(fastest < 5e-3, "the box still moves at {fastest} m/s");
    assert!(deepest < 1e-3, "{deepest} m into the box");
    // At rest the soft bodies carry its weight: the step's impulse is M g dt.
    let o = obstacle(&world, rigid);
    let weight = 20.0 * 9.81 * DT;
    let lift = o.coupling_response().impulse.y;
    assert!(
        (lift - weight).abs() < 0.02 * weight,
        "{lift} N s against {weight}"
    );
    // Resting on the slab's top (10 cm) minus its squash, not sunk.
    let bottom = o.center_of_mass().y - 0.1;
    assert!((0.085..0.101).contains(&bottom), "bottom at {bottom} m");
}

#[test]
fn a_light_rigid_box_rests_on_stiff_rubber_without_gaining_energy() {
    // 0.2 kg on rubber: the contact's K h^2 is hundreds of times the mass, where treating the
    // box as kinematic for the soft step and applying the forces after it launches the box.
    let material = MaterialParams {
        youngs_modulus: 2e6,
        ..MaterialParams::RUBBER
    };
    let (mut world, _, rigid) = box_on_slab(0.2, material);
    let (fastest, energy_max, energy_start, deepest) = settle(&mut world, rigid, 10.0, 8.0);
    assert!(fastest < 5e-3, "the box moves at {fastest} m/s after 2 s");
    assert!(
        energy_max <= energy_start.max(1e-9) * 1.5 + 1e-7,
        "kinetic energy {energy_max} J, {energy_start} J at 2 s"
    );
    assert!(deepest < 1e-3, "{deepest} m into the box");
    let bottom = obstacle(&world, rigid).center_of_mass().y - 0.1;
    assert!((0.095..0.101).contains(&bottom), "bottom at {bottom} m");
}

#[test]
fn removing_a_coupled_obstacle_frees_the_soft_body() {
    let (mut world, slab, rigid) = box_on_slab(20.0, MaterialParams::JELLY);
    for _ in 0..60 {
        world.step(DT).unwrap();
    }
    // The slab's top under the box (its corners stay up either way).
    let under = |world: &SoftWorld| {
        world
            .positions(slab)
            .unwrap()
            .iter()
            .filter(|p| p.x.abs() < 0.1 && p.z.abs() < 0.1)
            .map(|p| p.y)
            .fold(0.0, f64::max)
    };
    let squashed = under(&world);
    assert!(world.remove_obstacle(rigid));
    for _ in 0..120 {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty());
    }
    let top = under(&world);
    assert!(
        top > squashed + 1e-3,
        "top {top} m, {squashed} m under the box"
    );
}

#[test]
fn an_uncoupled_obstacle_stays_kinematic_and_reports_nothing() {
    let (mut world, _, rigid) = box_on_slab(20.0, MaterialParams::RUBBER);
    let i = world.obstacle_handles().position(|o| o == rigid).unwrap();
    world
        .obstacle_mut(rigid)
        .unwrap()
        .set_coupling(None)
        .unwrap();
    let before = world.obstacles()[i].position();
    for _ in 0..30 {
        world.step(DT).unwrap();
    }
    let o = &world.obstacles()[i];
    assert_eq!(o.position(), before);
    assert_eq!(o.coupling_response().impulse, Vec3::zeros());
}

#[test]
fn invalid_mass_properties_are_refused() {
    let good = RigidCoupling::solid_ball(1.0, 0.1, Vec3::zeros());
    assert!(good.validate().is_ok());
    let cases = [
        RigidCoupling { mass: 0.0, ..good },
        RigidCoupling {
            mass: f64::NAN,
            ..good
        },
        RigidCoupling {
            local_inverse_inertia: Matrix3::new(1.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0),
            ..good
        },
        RigidCoupling {
            local_inverse_inertia: -Matrix3::identity(),
            ..good
        },
        RigidCoupling {
            acceleration: Vec3::new(0.0, f64::INFINITY, 0.0),
            ..good
        },
        RigidCoupling {
            local_center_of_mass: Vec3::new(f64::NAN, 0.0, 0.0),
            ..good
        },
    ];
    for bad in cases {
        let result = ObstacleCollider::ball(0.1).unwrap().with_coupling(bad);
        assert!(
            matches!(result, Err(ObstacleError::InvalidValue { .. })),
            "{bad:?} accepted"
        );
    }
}

#[test]
fn an_off_centre_hit_turns_the_rigid_body_the_right_way() {
    // Zero gravity: a free plank along x, a jelly ball coming down onto its +x end.
    let mut world = SoftWorld::new(WorldSettings {
        gravity: Vec3::zeros(),
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    });
    let ball = TetMesh::try_sphere(0.1, 5).unwrap();
    let ball = world
        .add_body(
            Arc::new(ball),
            MaterialParams::JELLY,
            Vec3::new(0.45, 0.2, 0.0),
        )
        .unwrap();
    for v in world.velocities_mut(ball).unwrap() {
        *v = Vec3::new(0.0, -1.0, 0.0);
    }
    let half = Vec3::new(0.6, 0.02, 0.2);
    let plank = ObstacleCollider::cuboid(half)
        .unwrap()
        .with_coupling(RigidCoupling::solid_cuboid(2.0, half, Vec3::zeros()))
        .unwrap();
    let plank = world.add_obstacle(plank).unwrap();
    for _ in 0..30 {
        world.step(DT).unwrap();
    }
    let o = obstacle(&world, plank);
    let w = o.angular_velocity();
    // Pushed down at +x: it turns about -z, its centre moves down.
    assert!(w.z < -0.1, "angular velocity {w:?}");
    assert!(o.center_velocity().y < -0.05, "{:?}", o.center_velocity());
    assert!(w.x.abs() < 0.05 * w.z.abs() && w.y.abs() < 0.05 * w.z.abs());
}

#[test]
fn a_heavy_crate_squashes_a_flesh_cushion_and_both_come_to_rest() {
    // 50 kg dropped from 5 cm onto a 10 cm cushion of flesh (E = 5e4 Pa).
    let (mut world, slab, rigid) = box_on_slab(50.0, MaterialParams::FLESH);
    {
        let o = world.obstacle_mut(rigid).unwrap();
        let p = o.position() + Vec3::new(0.0, 0.045, 0.0);
        o.set_state(p, o.rotation(), Vec3::zeros(), Vec3::zeros())
            .unwrap();
    }
    let (fastest, _, _, deepest) = settle(&mut world, rigid, 4.0, 1.5);
    assert!(
        fastest < 5e-3,
        "the crate moves at {fastest} m/s after 2.5 s"
    );
    assert!(deepest < 1e-3, "{deepest} m into the crate");
    // Squashed: sunk into the cushion by more than a millimetre, not through it.
    let bottom = obstacle(&world, rigid).center_of_mass().y - 0.1;
    assert!((0.02..0.099).contains(&bottom), "bottom at {bottom} m");
    let slowest_vertex = world
        .velocities(slab)
        .unwrap()
        .iter()
        .map(|v| v.norm())
        .fold(0.0, f64::max);
    assert!(
        slowest_vertex < 5e-3,
        "the cushion moves at {slowest_vertex} m/s"
    );
}

#[test]
fn held_kinematic_under_the_newton_solver_a_box_neither_launches_nor_sinks() {
    // The Newton solver's QPs go to MPRGP, which cannot take the rigid body's unknowns: the box
    // is held kinematic in each iteration and pushed by the final forces, explicitly, with the
    // launch safeguard.
    let (mut world, _, rigid) = box_on_slab(5.0, MaterialParams::RUBBER);
    world.settings_mut().solver = Solver::NewtonMprgp;
    let mut exact = true;
    let mut fastest = 0.0f64;
    let mut turning = 0.0f64;
    let mut last = obstacle(&world, rigid).center_of_mass();
    for step in 0..180 {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
        let o = obstacle(&world, rigid);
        exact &= o.coupling_response().exact;
        // Held, the body ends each step at its free motion's end and takes the forces' push
        // as velocity for the next (explicit): its speed shows in its motion.
        let now = o.center_of_mass();
        if step >= 120 {
            fastest = fastest.max((now - last).norm() / DT);
            turning = turning.max(o.angular_velocity().norm());
        }
        last = now;
    }
    assert!(!exact, "the Newton solver's steps were reported exact");
    assert!(fastest < 5e-3, "the box moves at {fastest} m/s after 2 s");
    assert!(turning < 1e-3, "the box turns at {turning} rad/s after 2 s");
    let bottom = obstacle(&world, rigid).center_of_mass().y - 0.1;
    assert!((0.085..0.101).contains(&bottom), "bottom at {bottom} m");
}

#[test]
fn a_crate_resting_on_jelly_comes_to_rest() {
    let (mut world, _, rigid) = box_on_slab(10.0, MaterialParams::JELLY);
    let (fastest, energy_max, energy_start, deepest) = settle(&mut world, rigid, 5.0, 2.0);
    assert!(fastest < 5e-3, "the crate moves at {fastest} m/s after 3 s");
    assert!(
        energy_max <= energy_start.max(1e-9) * 1.5 + 1e-7,
        "kinetic energy {energy_max} J, {energy_start} J at 3 s"
    );
    assert!(deepest < 1e-3, "{deepest} m into the crate");
    // Sunk into the jelly, not through it.
    let bottom = obstacle(&world, rigid).center_of_mass().y - 0.1;
    assert!((0.02..0.1).contains(&bottom), "bottom at {bottom} m");
}
