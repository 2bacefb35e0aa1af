//! The contact QP solved in the contact subspace (`WorldSettings::contact_subspace`), through
//! cached columns of `A^-1` or localized to a collision-prone region ordered last in the
//! factor (`WorldSettings::localized_min_vertices`), against MPRGP solved tightly: the same
//! constrained steps.

use std::sync::Arc;

use bevy_deformable::sim::{
    BodyHandle, MaterialParams, ObstacleCollider, Sleeping, SoftWorld, StepReport, TetMesh, Vec3,
    WorldSettings,
};

const DT: f64 = 1.0 / 60.0;

/// How the contact QPs are solved.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Qp {
    /// By MPRGP.
    Mprgp,
    /// In the contact subspace, through cached columns.
    Subspace,
    /// In the contact subspace, every body localized.
    Localized,
}

/// Settings for an exact comparison: a fixed number of iterations, MPRGP (where it runs) to
/// rounding, no sleeping.
fn settings(qp: Qp) -> WorldSettings {
    let mut s = WorldSettings {
        contact_subspace: qp != Qp::Mprgp,
        localized_min_vertices: match qp {
            Qp::Localized => 0,
            _ => usize::MAX,
        },
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
fn stack(qp: Qp, steps: usize) -> (SoftWorld, Vec<BodyHandle>) {
    let mut world = SoftWorld::new(settings(qp));
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

/// Steps both worlds from the same state (the subspace world's), each with its own solver:
/// `qp`'s, and MPRGP's.
fn step_both(
    state: &SoftWorld,
    bodies: &[BodyHandle],
    qp: Qp,
) -> (SoftWorld, SoftWorld, StepReport) {
    let copy = |qp: Qp| {
        let (mut world, _) = stack(qp, 0);
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
    let (mut subspace, mut mprgp) = (copy(qp), copy(Qp::Mprgp));
    // Warm up: the columns are computed a few per iteration; a step from rest at the same
    // state fills them without moving far.
    let report = subspace.step(DT).unwrap();
    mprgp.step(DT).unwrap();
    (subspace, mprgp, report)
}

#[test]
fn a_stack_steps_the_same_in_the_contact_subspace_as_by_mprgp() {
    same_steps_as_mprgp(Qp::Subspace);
}

/// The same with each cube's contacts localized: its contact vertices (floor and the other
/// cube) ordered last in its factor, whose trailing block is the QP's `A^-1`.
#[test]
fn a_localized_stack_steps_the_same_as_by_mprgp() {
    same_steps_as_mprgp(Qp::Localized);
}

fn same_steps_as_mprgp(qp: Qp) {
    let (state, bodies) = stack(qp, 40);
    // The same state, stepped again and again by both: the subspace takes over once its
    // columns are in, and every step agrees with MPRGP's.
    let (mut subspace, mut mprgp, _) = step_both(&state, &bodies, qp);
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
    refactored_bodies_step_the_same(Qp::Subspace);
}

/// The same localized: the region's block of `A^-1` is formed again from the new factor.
#[test]
fn a_refactored_localized_body_keeps_its_region_with_the_new_matrix() {
    refactored_bodies_step_the_same(Qp::Localized);
}

fn refactored_bodies_step_the_same(qp: Qp) {
    let (state, bodies) = stack(qp, 40);
    let (mut subspace, mut mprgp, _) = step_both(&state, &bodies, qp);
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
    large_body_same_steps(Qp::Subspace);
}

/// The same body localized: its bottom face and two rings above ordered last in its factor.
#[test]
fn a_large_localized_body_steps_the_same_by_preconditioned_mprgp() {
    large_body_same_steps(Qp::Localized);
}

fn large_body_same_steps(qp: Qp) {
    let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.25), 12));
    assert!(mesh.vertex_count() >= bevy_deformable::sim::qp::coarse::COARSE_MIN_UNKNOWNS);
    let world = |qp: Qp| {
        let mut world = SoftWorld::new(settings(qp));
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
    let (mut state, body) = world(qp);
    let mut rebuilds = 0;
    for _ in 0..20 {
        rebuilds += state.step(DT).unwrap().prone_rebuilds;
    }
    // Localized, the region is built when the cube lands, and it stays.
    assert_eq!(
        rebuilds > 0,
        qp == Qp::Localized,
        "{rebuilds} regions built"
    );
    let copy = |qp: Qp| {
        let (mut copy, _) = world(qp);
        copy.positions_mut(body)
            .unwrap()
            .copy_from_slice(state.positions(body).unwrap());
        copy.velocities_mut(body)
            .unwrap()
            .copy_from_slice(state.velocities(body).unwrap());
        copy
    };
    let (mut subspace, mut mprgp) = (copy(qp), copy(Qp::Mprgp));
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

/// Turning localized contact off mid-run hands the bodies back to the column cache: the
/// contact QPs go on in the contact subspace, and the steps agree with MPRGP's.
#[test]
fn turning_localized_contact_off_returns_to_the_columns() {
    let (state, bodies) = stack(Qp::Localized, 30);
    let (mut world, mut mprgp, _) = step_both(&state, &bodies, Qp::Localized);
    for _ in 0..3 {
        world.step(DT).unwrap();
        mprgp.step(DT).unwrap();
    }
    world.settings_mut().localized_min_vertices = usize::MAX;
    let mut solved_in_subspace = 0;
    for step in 0..10 {
        let report = world.step(DT).unwrap();
        solved_in_subspace += report.subspace_solves;
        assert_eq!(report.prone_rebuilds, 0);
        mprgp.step(DT).unwrap();
        let d = largest_difference(&world, &mprgp, &bodies);
        assert!(d < 1e-7, "step {step}: the solutions differ by {d} m");
    }
    assert!(solved_in_subspace > 0, "the columns took over");
}
