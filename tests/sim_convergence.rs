//! The convergence measure of the PD iterations (`WorldSettings::measure_residual`): the
//! relative residual of the implicit step's optimality condition, contact forces included.

use std::sync::Arc;

use bevy_deformable::sim::{
    Obstacle, SoftMaterial, SoftWorld, StepReport, TetMesh, Vec3, WorldSettings,
};

const DT: f64 = 1.0 / 60.0;

/// A rubber cube dropped onto the floor, stepped `steps` times with the defaults.
fn landed_cube(steps: usize) -> SoftWorld {
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(Obstacle::halfspace(Vec3::y()).unwrap())
        .unwrap();
    world
        .add_body(
            Arc::new(TetMesh::cuboid(Vec3::repeat(0.15), 4)),
            SoftMaterial::RUBBER.with_youngs_modulus(1e5),
            Vec3::new(0.0, 0.2, 0.0),
        )
        .unwrap();
    for _ in 0..steps {
        world.step(DT).unwrap();
    }
    world
}

/// One measured step of `world` with `iterations` PD iterations.
fn measured_step(world: &mut SoftWorld, iterations: usize) -> StepReport {
    let settings = world.settings_mut();
    settings.measure_residual = true;
    settings.pd_iterations = iterations;
    world.step(DT).unwrap()
}

#[test]
fn the_residual_falls_with_more_iterations_and_counts_the_contact_forces() {
    // From the same state (the cube landed and squashed on the floor, 45 steps after the
    // drop), one step with 3, 10, 40 and 200 iterations, each contact QP solved tightly (at the
    // default MPRGP tolerance, relative to the QP's `||b||`, its own error is about 1e-3 of the
    // start gradient here, and the residual stops there).
    let residual = |iterations| {
        let mut world = landed_cube(45);
        world.settings_mut().mprgp.tolerance = 1e-11;
        world.settings_mut().mprgp.max_iterations = 5000;
        let report = measured_step(&mut world, iterations);
        assert!(report.active_constraints > 0, "the cube touches the floor");
        report.residual.expect("measured")
    };
    let r: Vec<f64> = [3, 10, 40, 200].into_iter().map(residual).collect();
    assert!(
        r.windows(2).all(|w| w[1] < w[0]),
        "the residual does not fall: {r:?}"
    );
    // Converged, with the floor's forces balancing the weight and the squash. Without the
    // contact multipliers in the residual it would stay near the weight's share of the start
    // gradient, far from zero.
    assert!(r[3] < 1e-4 * r[0], "{r:?}");
}

/// A cube stretched by 20 % along x in zero gravity: its step starts far from its solution.
fn stretched_cube() -> SoftWorld {
    let mut world = SoftWorld::new(WorldSettings {
        gravity: Vec3::zeros(),
        ..WorldSettings::default()
    });
    let body = world
        .add_body(
            Arc::new(TetMesh::cuboid(Vec3::repeat(0.15), 3)),
            SoftMaterial::RUBBER,
            Vec3::zeros(),
        )
        .unwrap();
    for p in world.positions_mut(body).unwrap() {
        p.x *= 1.2;
    }
    world
}

#[test]
fn a_deformed_body_without_contact_converges_to_a_zero_residual() {
    let few = measured_step(&mut stretched_cube(), 2).residual.unwrap();
    let many = measured_step(&mut stretched_cube(), 500).residual.unwrap();
    assert!(few > 1e-3, "two iterations leave a residual: {few}");
    assert!(
        many < 1e-6,
        "500 iterations converge: {many} (2 iterations: {few})"
    );
}

#[test]
fn measuring_leaves_the_simulation_unchanged() {
    let run = |measure: bool| {
        let mut world = landed_cube(0);
        world.settings_mut().measure_residual = measure;
        for _ in 0..60 {
            let report = world.step(DT).unwrap();
            assert_eq!(report.residual.is_some(), measure);
        }
        let body = world.bodies().next().unwrap();
        world.positions(body).unwrap().to_vec()
    };
    assert_eq!(run(true), run(false));
}
