//! The convergence measure of the PD iterations (`WorldSettings::measure_residual`): the
//! relative residual of the implicit step's optimality condition, contact forces included.

use std::sync::Arc;

use bevy_deformable::sim::{
    Obstacle, Sleeping, SoftMaterial, SoftWorld, StepReport, TetMesh, Vec3, WorldSettings,
};

const DT: f64 = 1.0 / 60.0;

/// A rubber cube dropped onto the floor, stepped `steps` times with the defaults.
fn landed_cube(steps: usize) -> SoftWorld {
    // The solver at rest: asleep, the cube would not be stepped at all.
    let mut world = SoftWorld::new(WorldSettings {
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    });
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
    // default MPRGP tolerance its own error, about 1e-3 of the force that moves the body, would
    // bound the residual).
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

/// The contact QPs are solved about the bodies' inertial prediction, so their tolerance does not
/// loosen with the distance from the world origin. Before, a cube resting on a floor 1 km up
/// ended its steps with a residual of 0.4-1 (MPRGP stopped after 1-8 iterations) against 1e-3
/// at the origin, and rested 1.8 mm lower.
#[test]
fn a_cube_resting_far_from_the_origin_converges_as_well_as_at_it() {
    let rest = |lift: f64| {
        let mut world = SoftWorld::new(WorldSettings::default());
        world
            .add_obstacle(
                Obstacle::halfspace(Vec3::y())
                    .unwrap()
                    .with_position(Vec3::new(0.0, lift, 0.0)),
            )
            .unwrap();
        let body = world
            .add_body(
                Arc::new(TetMesh::cuboid(Vec3::repeat(0.15), 4)),
                SoftMaterial::RUBBER.with_youngs_modulus(1e5),
                Vec3::new(0.0, lift + 0.2, 0.0),
            )
            .unwrap();
        for _ in 0..45 {
            world.step(DT).unwrap();
        }
        let worst = (0..5)
            .map(|_| measured_step(&mut world, 10).residual.unwrap())
            .fold(0.0, f64::max);
        let x = world.positions(body).unwrap();
        let height = x.iter().map(|p| p.y).sum::<f64>() / x.len() as f64 - lift;
        (worst, height)
    };
    let (at_origin, height_at_origin) = rest(0.0);
    let (far, height_far) = rest(1000.0);
    assert!(at_origin < 2e-3, "{at_origin}");
    assert!(
        far < 2.0 * at_origin,
        "residual {far} at 1 km, {at_origin} at the origin"
    );
    assert!(
        (height_far - height_at_origin).abs() < 1e-4,
        "rests at {height_far} m at 1 km, {height_at_origin} m at the origin"
    );
}
