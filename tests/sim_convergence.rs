//! The convergence measure of the PD iterations (`WorldSettings::measure_residual`): the
//! relative residual of the implicit step's optimality condition, contact forces included.

use std::sync::Arc;

use bevy_deformable::sim::{
    DEFAULT_CHEBYSHEV_RHO, MAX_ANDERSON_WINDOW, MaterialParams, ObstacleCollider,
    SUGGESTED_ANDERSON_WINDOW, Sleeping, SoftWorld, StepReport, TetMesh, Vec3, WorldError,
    WorldSettings,
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
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    world
        .add_body(
            Arc::new(TetMesh::cuboid(Vec3::repeat(0.15), 4)),
            MaterialParams::RUBBER.with_youngs_modulus(1e5),
            Vec3::new(0.0, 0.2, 0.0),
        )
        .unwrap();
    for _ in 0..steps {
        world.step(DT).unwrap();
    }
    world
}

/// One measured step of `world` with exactly `iterations` PD iterations (no tolerance to stop
/// on).
fn measured_step(world: &mut SoftWorld, iterations: usize) -> StepReport {
    let settings = world.settings_mut();
    settings.measure_residual = true;
    settings.pd_iterations = iterations;
    settings.pd_tolerance = 0.0;
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
            MaterialParams::RUBBER,
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
                ObstacleCollider::halfspace(Vec3::y())
                    .unwrap()
                    .with_position(Vec3::new(0.0, lift, 0.0))
                    .with_friction(0.0),
            )
            .unwrap();
        // Frictionless: a resting cube's friction, carried over many steps that each stopped
        // after one iteration, leaves the first step forced to ten iterations a residual of
        // about 0.15 at either place (measured at the origin: 0.17 after 200 steps without
        // strain-rate damping, 0.03 after 45 with it, which rests sooner), which this test of
        // precision far from the origin is not about.
        let body = world
            .add_body(
                Arc::new(TetMesh::cuboid(Vec3::repeat(0.15), 4)),
                MaterialParams::RUBBER
                    .with_youngs_modulus(1e5)
                    .with_friction(0.0),
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

/// With `pd_tolerance`, an island stops at the first iterate whose residual (measured inside
/// the iterations from the local step's right-hand sides) is within the tolerance; the
/// independent measure after the iterations finds the same residual at that iterate.
#[test]
fn the_iterations_stop_on_the_tolerance_at_the_residual_measured_after_them() {
    let mut world = landed_cube(0);
    world.settings_mut().measure_residual = true;
    let tolerance = world.settings().pd_tolerance;
    assert!(tolerance > 0.0, "the default stops on a tolerance");
    let mut stopped = 0;
    for _ in 0..120 {
        let report = world.step(DT).unwrap();
        let body = world.bodies().next().unwrap();
        let stats = *world.last_step_stats(body).unwrap();
        let measured = report.residual.expect("measured");
        if stats.pd_converged {
            stopped += 1;
            assert!(stats.pd_residual <= tolerance, "{stats:?}");
            assert!(stats.pd_iterations < world.settings().pd_iterations);
            assert!(
                // The in-iteration measure takes the unconstrained solve as exact, but its
                // correction is solved in f32: rounding of about 1e-7 of the step's scale
                // (measured: at most 2.3e-7 over these steps, 9.6e-8 without strain-rate
                // damping, whose weight adds to the matrix), where f64 left about 1e-12.
                (stats.pd_residual - measured).abs() <= 1e-6 * measured + 4e-7,
                "in the iterations {:e}, measured after them {measured:e}",
                stats.pd_residual
            );
        } else {
            assert_eq!(stats.pd_iterations, world.settings().pd_iterations);
        }
    }
    // The cube lands within the first half second and rests for the rest of the two seconds.
    assert!(stopped > 60, "only {stopped} of 120 steps stopped early");
}

/// The tolerance sets how close a step ends to the implicit step's solution: from the same
/// state (the cube landing, 15 steps after the drop: with strain-rate damping it rests by
/// step 45, where one iteration already ends within 0.6 um of the solution), each tenfold tighter tolerance takes more
/// iterations and ends several times closer to a step converged with 400 iterations, and the
/// residual measured after the iterations is within the tolerance.
#[test]
fn a_tighter_tolerance_ends_closer_to_the_solution() {
    let step = |iterations: usize, tolerance: f64| {
        let mut world = landed_cube(20);
        let settings = world.settings_mut();
        settings.pd_iterations = iterations;
        settings.pd_tolerance = tolerance;
        settings.measure_residual = true;
        let report = world.step(DT).unwrap();
        let body = world.bodies().next().unwrap();
        let x = world.positions(body).unwrap().to_vec();
        (x, report.pd_iterations, report.residual.unwrap())
    };
    let (solution, _, converged) = step(400, 0.0);
    assert!(converged < 1e-7, "400 iterations converge: {converged}");
    let distance = |a: &[Vec3]| {
        a.iter()
            .zip(&solution)
            .map(|(p, q)| (p - q).norm())
            .fold(0.0, f64::max)
    };
    let mut last: Option<(usize, f64)> = None;
    for tolerance in [1e-3, 1e-4, 1e-5] {
        let (x, iterations, residual) = step(200, tolerance);
        let error = distance(&x);
        assert!(residual <= tolerance, "{tolerance}: residual {residual}");
        // Measured: 14, 35 and 86 iterations, 10.3, 2.2 and 0.45 micrometres.
        if let Some((fewer, larger)) = last {
            assert!(iterations > fewer, "{tolerance}: {iterations} iterations");
            assert!(
                error < 0.5 * larger,
                "{tolerance}: {error} m from the solution, {larger} m at ten times the tolerance"
            );
        }
        last = Some((iterations, error));
    }
}

/// An undeformed body in free fall starts each step at the implicit step's solution: judged
/// against its weight, one iteration suffices (against `grad Phi(y)`, which is rounding
/// there, it never would).
#[test]
fn a_falling_undeformed_body_takes_one_iteration_per_step() {
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_body(
            Arc::new(TetMesh::cuboid(Vec3::repeat(0.15), 3)),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 10.0, 0.0),
        )
        .unwrap();
    for _ in 0..30 {
        let report = world.step(DT).unwrap();
        assert_eq!(report.pd_iterations, 1);
        assert!(report.pd_residual < 1e-8, "{}", report.pd_residual);
    }
}

/// How the iterations are accelerated.
#[derive(Debug, Clone, Copy)]
enum Acceleration {
    Plain,
    Chebyshev(f64),
    Anderson(usize),
}

/// One step of `world` with exactly `iterations` PD iterations and the given acceleration:
/// the positions after it and its measured residual.
fn step_with(
    mut world: SoftWorld,
    iterations: usize,
    acceleration: Acceleration,
) -> (Vec<Vec3>, f64) {
    let settings = world.settings_mut();
    (settings.chebyshev_rho, settings.anderson_window) = match acceleration {
        Acceleration::Plain => (0.0, 0),
        Acceleration::Chebyshev(rho) => (rho, 0),
        Acceleration::Anderson(window) => (0.0, window),
    };
    let report = measured_step(&mut world, iterations);
    let body = world.bodies().next().unwrap();
    (
        world.positions(body).unwrap().to_vec(),
        report.residual.unwrap(),
    )
}

fn farthest(a: &[Vec3], b: &[Vec3]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| (p - q).norm())
        .fold(0.0, f64::max)
}

#[test]
fn accelerated_and_plain_iterations_reach_the_same_implicit_step() {
    // Without contact (a stretched cube) and with it (a cube landed on the floor), 400
    // iterations each way: the same solution, to a tenth of a micrometre.
    for (name, world) in [
        ("stretched", stretched_cube as fn() -> SoftWorld),
        ("landed", || landed_cube(45)),
    ] {
        let (plain, plain_residual) = step_with(world(), 400, Acceleration::Plain);
        assert!(
            plain_residual < 1e-7,
            "{name}: plain residual {plain_residual}"
        );
        for acceleration in [
            Acceleration::Chebyshev(DEFAULT_CHEBYSHEV_RHO),
            Acceleration::Anderson(SUGGESTED_ANDERSON_WINDOW),
        ] {
            let (accelerated, residual) = step_with(world(), 400, acceleration);
            assert!(
                residual < 1e-7,
                "{name}, {acceleration:?}: residual {residual}"
            );
            let apart = farthest(&plain, &accelerated);
            assert!(apart < 1e-7, "{name}, {acceleration:?}: {apart} m apart");
        }
    }
}

#[test]
fn acceleration_lowers_the_residual_at_equal_iterations() {
    // Chebyshev, measured without strain-rate damping: 1.25e-2 plain, 6.0e-3 at rho 0.7,
    // 5.6e-3 at 0.8; at 0.9 and 0.95 the extrapolation overshoots (2.3e-2, 5.9e-2) and the
    // restarts cannot make up for it.
    let (_, plain) = step_with(stretched_cube(), 8, Acceleration::Plain);
    let (_, chebyshev) = step_with(
        stretched_cube(),
        8,
        Acceleration::Chebyshev(DEFAULT_CHEBYSHEV_RHO),
    );
    let (_, anderson) = step_with(
        stretched_cube(),
        8,
        Acceleration::Anderson(SUGGESTED_ANDERSON_WINDOW),
    );
    // Anderson, measured: 8.0e-4 (window 5); in positions 0.11 mm from the
    // implicit step's solution against 0.55 mm (Chebyshev) and 1.3 mm (plain).
    // Those figures are without strain-rate damping; with the default (0.02 s), which damps
    // the stretched cube's return and lets plain iterations converge faster: 2.2e-3 plain,
    // 1.5e-3 Chebyshev (1.4e-3 at rho 0.6, 5.7e-3 at 0.8), 3.2e-4 Anderson.
    assert!(
        chebyshev < 0.75 * plain && anderson < 0.25 * chebyshev,
        "8 iterations: {plain} plain, {chebyshev} Chebyshev, {anderson} Anderson"
    );
}

#[test]
fn an_out_of_range_chebyshev_rho_steps_as_plain_iterations() {
    let (plain, _) = step_with(stretched_cube(), 8, Acceleration::Plain);
    for rho in [1.0, 2.5, -0.3, f64::NAN, f64::INFINITY] {
        let (x, residual) = step_with(stretched_cube(), 8, Acceleration::Chebyshev(rho));
        assert!(residual.is_finite(), "{rho}: {residual}");
        assert_eq!(x, plain, "{rho}");
    }
}

#[test]
fn an_anderson_window_over_the_most_is_refused() {
    let mut world = stretched_cube();
    world.settings_mut().anderson_window = MAX_ANDERSON_WINDOW + 1;
    assert!(matches!(
        world.step(DT),
        Err(WorldError::InvalidSetting {
            what: "anderson_window",
            ..
        })
    ));
    world.settings_mut().anderson_window = MAX_ANDERSON_WINDOW;
    assert!(world.step(DT).is_ok());
}
