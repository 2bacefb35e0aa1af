//! The contact QP solved in the contact subspace (`WorldSettings::contact_subspace`) against
//! MPRGP solved tightly: the same constrained steps.

use std::sync::Arc;

use bevy_deformable::sim::{
    BodyHandle, MaterialParams, ObstacleCollider, Sleeping, SoftWorld, StepReport, TetMesh, Vec3,
    WorldSettings,
};

const DT: f64 = 1.0 / 60.0;

/// Settings for an exact comparison: a fixed number of iterations, MPRGP (where it runs) to
/// rounding, no sleeping.
fn settings(subspace: bool) -> WorldSettings {
    let mut s = WorldSettings {
        contact_subspace: subspace,
        pd_tolerance: 0.0,
        pd_iterations: 6,
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    };
    s.mprgp.tolerance = 1e-12;
    s.mprgp.max_iterations = 20_000;
    s
}

/// Two rubber cubes, one on the other, on a floor, `steps` steps after being placed.
fn stack(subspace: bool, steps: usize) -> (SoftWorld, Vec<BodyHandle>) {
    let mut world = SoftWorld::new(settings(subspace));
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 4));
    let bodies = (0..2)
        .map(|i| {
            world
                .add_body(
                    mesh.clone(),
                    MaterialParams::RUBBER,
                    Vec3::new(0.01 * i as f64, 0.101 + 0.202 * i as f64, 0.0),
                )
                .unwrap()
        })
        .collect();
    for _ in 0..steps {
        world.step(DT).unwrap();
    }
    (world, bodies)
}

fn largest_difference(a: &SoftWorld, b: &SoftWorld, bodies: &[BodyHandle]) -> f64 {
    bodies
        .iter()
        .flat_map(|&h| {
            let (xa, xb) = (a.positions(h).unwrap(), b.positions(h).unwrap());
            xa.iter()
                .zip(xb)
                .map(|(p, q)| (p - q).norm())
                .collect::<Vec<_>>()
        })
        .fold(0.0, f64::max)
}

/// Steps both worlds from the same state (the subspace world's), each with its own solver.
fn step_both(state: &SoftWorld, bodies: &[BodyHandle]) -> (SoftWorld, SoftWorld, StepReport) {
    let copy = |subspace: bool| {
        let (mut world, _) = stack(subspace, 0);
        for &h in bodies {
            world
                .positions_mut(h)
                .unwrap()
                .copy_from_slice(state.positions(h).unwrap());
            world
                .velocities_mut(h)
                .unwrap()
                .copy_from_slice(state.velocities(h).unwrap());
        }
        world
    };
    let (mut subspace, mut mprgp) = (copy(true), copy(false));
    // Warm up: the columns are computed a few per iteration; a step from rest at the same
    // state fills them without moving far.
    let report = subspace.step(DT).unwrap();
    mprgp.step(DT).unwrap();
    (subspace, mprgp, report)
}

#[test]
fn a_stack_steps_the_same_in_the_contact_subspace_as_by_mprgp() {
    let (state, bodies) = stack(true, 40);
    // The same state, stepped again and again by both: the subspace takes over once its
    // columns are in, and every step agrees with MPRGP's.
    let (mut subspace, mut mprgp, _) = step_both(&state, &bodies);
    let mut solved_in_subspace = 0;
    for step in 0..20 {
        let report = subspace.step(DT).unwrap();
        let reference = mprgp.step(DT).unwrap();
        solved_in_subspace += report.subspace_solves;
        assert_eq!(reference.subspace_solves, 0);
        assert!(report.active_constraints > 0, "the stack touches");
        let d = largest_difference(&subspace, &mprgp, &bodies);
        assert!(d < 1e-7, "step {step}: the solutions differ by {d} m");
    }
    assert!(
        solved_in_subspace >= 20 * 6,
        "{solved_in_subspace} constrained steps in the subspace"
    );
}

/// A change of material refactors the bodies' systems: their cached columns are dropped and
/// recomputed from the new factor (stale ones would solve the old matrix).
#[test]
fn a_refactored_body_drops_its_columns() {
    let (state, bodies) = stack(true, 40);
    let (mut subspace, mut mprgp, _) = step_both(&state, &bodies);
    for _ in 0..3 {
        subspace.step(DT).unwrap();
        mprgp.step(DT).unwrap();
    }
    for world in [&mut subspace, &mut mprgp] {
        for &h in &bodies {
            world
                .set_material(h, MaterialParams::RUBBER.with_youngs_modulus(1e6))
                .unwrap();
        }
    }
    let mut solved_in_subspace = 0;
    for step in 0..10 {
        solved_in_subspace += subspace.step(DT).unwrap().subspace_solves;
        mprgp.step(DT).unwrap();
        let d = largest_difference(&subspace, &mprgp, &bodies);
        assert!(
            d < 1e-7,
            "step {step} after the change: the solutions differ by {d} m"
        );
    }
    assert!(solved_in_subspace > 0);
}

/// A body of 2,197 vertices, large enough for MPRGP to precondition its CG steps with the
/// body's coarse space (`sim::qp::coarse`, from 2,048 free vertices): landed on the floor, then
/// stepped both ways from one state, the preconditioned MPRGP steps agree with the exact
/// steps of the contact subspace (once its columns are in; before, both worlds run MPRGP).
#[test]
fn a_large_body_steps_the_same_by_preconditioned_mprgp() {
    let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.25), 12));
    assert!(mesh.vertex_count() >= bevy_deformable::sim::qp::coarse::COARSE_MIN_UNKNOWNS);
    let world = |subspace: bool| {
        let mut world = SoftWorld::new(settings(subspace));
        world
            .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
            .unwrap();
        let body = world
            .add_body(
                mesh.clone(),
                MaterialParams::RUBBER,
                Vec3::new(0.0, 0.252, 0.0),
            )
            .unwrap();
        (world, body)
    };
    let (mut state, body) = world(true);
    for _ in 0..20 {
        state.step(DT).unwrap();
    }
    let copy = |subspace: bool| {
        let (mut copy, _) = world(subspace);
        copy.positions_mut(body)
            .unwrap()
            .copy_from_slice(state.positions(body).unwrap());
        copy.velocities_mut(body)
            .unwrap()
            .copy_from_slice(state.velocities(body).unwrap());
        copy
    };
    let (mut subspace, mut mprgp) = (copy(true), copy(false));
    let (mut solved_in_subspace, mut mprgp_iterations) = (0, 0);
    // The subspace takes over once the bottom face's columns are in (two per iteration).
    for step in 0..24 {
        let report = subspace.step(DT).unwrap();
        let reference = mprgp.step(DT).unwrap();
        solved_in_subspace += report.subspace_solves;
        mprgp_iterations += reference.mprgp_iterations;
        assert!(report.active_constraints > 0, "the cube rests on the floor");
        let d = largest_difference(&subspace, &mprgp, &[body]);
        assert!(d < 1e-7, "step {step}: the solutions differ by {d} m");
    }
    assert!(
        solved_in_subspace > 0 && mprgp_iterations > 0,
        "{solved_in_subspace} steps in the subspace, {mprgp_iterations} MPRGP iterations"
    );
}
