//! Tests of the island's contact step that need the world's internals.

use std::sync::Arc;

use crate::sim::math::Vec3;
use crate::sim::world::{Sleeping, SoftWorld, WorldSettings};
use crate::sim::{MaterialParams, ObstacleCollider, TetMesh};

const DT: f64 = 1.0 / 60.0;

/// Two identical worlds with a 0.5 m rubber cube (343 vertices) dropped onto the floor and
/// stepped `steps` times, its contact QPs solved by MPRGP.
fn dropped_pair(lift: f64, steps: usize) -> (SoftWorld, SoftWorld) {
    let make = || {
        let mut world = SoftWorld::new(WorldSettings {
            contact_subspace: false,
            sleeping: Sleeping::OFF,
            ..WorldSettings::default()
        });
        let mesh = Arc::new(TetMesh::try_cuboid(Vec3::repeat(0.25), 6).unwrap());
        world
            .add_body(mesh, MaterialParams::RUBBER, Vec3::new(0.0, lift, 0.0))
            .unwrap();
        world
            .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
            .unwrap();
        for _ in 0..steps {
            world.step(DT).unwrap();
        }
        world
    };
    (make(), make())
}

fn largest_difference(a: &SoftWorld, b: &SoftWorld) -> f64 {
    let body = a.bodies().next().unwrap();
    a.positions(body)
        .unwrap()
        .iter()
        .zip(b.positions(body).unwrap())
        .map(|(p, q)| (p - q).norm())
        .fold(0.0, f64::max)
}

/// The normal forces carried from the last step only move the first QP's starting point: with
/// the QPs solved to rounding, a step that starts from them and one that forgot them end at
/// the same positions.
#[test]
fn carried_normal_forces_leave_the_step_where_it_was() {
    let (mut carried, mut cold) = dropped_pair(0.26, 60);
    for world in [&mut carried, &mut cold] {
        let settings = world.settings_mut();
        settings.pd_tolerance = 0.0;
        settings.mprgp.tolerance = 1e-13;
        settings.mprgp.max_iterations = 10_000;
    }
    assert_eq!(largest_difference(&carried, &cold), 0.0);
    cold.state.forget_normal_forces();
    carried.step(DT).unwrap();
    cold.step(DT).unwrap();
    let difference = largest_difference(&carried, &cold);
    assert!(difference < 1e-9, "{difference} m apart");
}

/// ... and start it closer to its solution where the last iterate is not already there: a
/// third of a second after a cube dropped 15 cm lands, the step that starts from them needs a
/// third fewer MPRGP iterations (measured: 13 against 22; at rest both start from the last
/// iterate, the step's solution, and take none).
#[test]
fn carried_normal_forces_start_the_contact_qp_closer_to_its_solution() {
    let (mut carried, mut cold) = dropped_pair(0.4, 30);
    cold.state.forget_normal_forces();
    let warm = carried.step(DT).unwrap();
    let fresh = cold.step(DT).unwrap();
    assert!(fresh.active_constraints > 0);
    assert!(
        3 * warm.mprgp_iterations <= 2 * fresh.mprgp_iterations,
        "{} MPRGP iterations from the carried forces, {} without",
        warm.mprgp_iterations,
        fresh.mprgp_iterations
    );
}

/// The product the contact QP's warm start keeps for the last MPRGP solution
/// (`warm_start`, `A (x - y)` from the gradient MPRGP ended with) is the product formed
/// directly, to rounding: checked at the end of every step whose QPs took MPRGP iterations,
/// through a landing and at rest.
#[test]
fn the_kept_solution_product_is_the_direct_one() {
    let (mut world, _) = dropped_pair(0.27, 0);
    let mut checked = 0;
    for _ in 0..90 {
        let report = world.step(DT).unwrap();
        let (island, layout) = world.state.island(0);
        if report.mprgp_iterations == 0 {
            continue;
        }
        let error = island
            .kept_product_error(&world.bodies, layout)
            .expect("an MPRGP solve keeps its product");
        assert!(error < 1e-10, "kept product off by {error:e} relative");
        checked += 1;
    }
    assert!(checked > 30, "only {checked} steps ran MPRGP");
}
