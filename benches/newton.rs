//! The Newton solver: its core (`bevy_deformable::sim::fem`) on its own, without the world (one
//! Newton step of implicit Euler per frame with its contact QP solved by MPRGP, the MPRGP
//! paper's time step), the static cantilever against Euler-Bernoulli beam theory, and the two
//! solvers of `SoftWorld` (`Solver::ProjectiveDynamics`, `Solver::NewtonMprgp`) on the same drop.
//!
//! `cargo bench --bench newton` prints the tables and writes `target/bench/newton.json`;
//! `-- --variants` prints only the table of MPRGP's variants on the drops.

use std::time::Instant;

use bevy_deformable::sim::fem::constrained::ContactSolve;
use bevy_deformable::sim::fem::{
    FemModel, Lame, NewtonSettings, NewtonSetup, NewtonSystem, Potential,
};
use bevy_deformable::sim::qp::ConstraintRow;
use bevy_deformable::sim::qp::mprgp::{CgChain, ExpansionSafeguard, MprgpSettings};
use std::sync::Arc;

use bevy_deformable::sim::{
    MaterialParams, ObstacleCollider, Sleeping, SoftWorld, Solver, TetMesh, Vec3, WorldSettings,
};

#[path = "../tests/common/mod.rs"]
mod common;

const H: f64 = 1.0 / 60.0;
const STEPS: usize = 120;

struct DropResult {
    name: &'static str,
    vertices: usize,
    ms_median: f64,
    mprgp_per_step: f64,
    cg_share: f64,
    deepest: f64,
    final_speed: f64,
}

/// A 1 m cube (1,000 vertices) dropped from 2 cm onto a floor, one Newton step per frame, with
/// MPRGP's default chain and safeguard.
fn drop_cube(name: &'static str, model: FemModel, e: f64) -> DropResult {
    let defaults = MprgpSettings::default();
    drop_cube_with(name, model, e, defaults.chain, defaults.safeguard)
}

/// [`drop_cube`] with one of MPRGP's variants.
fn drop_cube_with(
    name: &'static str,
    model: FemModel,
    e: f64,
    chain: CgChain,
    safeguard: ExpansionSafeguard,
) -> DropResult {
    let mesh = TetMesh::cuboid(Vec3::repeat(0.5), 9);
    let mut system = NewtonSystem::new(
        &mesh,
        NewtonSetup {
            model,
            lame: Lame::of(
                &MaterialParams::RUBBER
                    .with_youngs_modulus(e)
                    .with_poisson_ratio(0.4),
            ),
            density: 1000.0,
            pinned: &[],
        },
    )
    .expect("valid system");
    let force = system.gravity_forces(Vec3::new(0.0, -9.81, 0.0));
    let mut x: Vec<Vec3> = mesh
        .rest_positions()
        .iter()
        .map(|p| p + Vec3::new(0.0, 0.52, 0.0))
        .collect();
    let mut v = vec![Vec3::zeros(); x.len()];
    let mut solver = ContactSolve::new(MprgpSettings {
        tolerance: 1e-4,
        chain,
        safeguard,
        ..MprgpSettings::default()
    });
    let mut times = Vec::new();
    let (mut iterations, mut cg_steps, mut deepest) = (0, 0, 0.0f64);
    for _ in 0..STEPS {
        let y: Vec<Vec3> = x.iter().zip(&v).map(|(p, u)| p + H * u).collect();
        let rows: Vec<ConstraintRow> = y
            .iter()
            .enumerate()
            .filter(|(_, p)| p.y < 0.02)
            .map(|(i, _)| ConstraintRow::single(i as u32, Vec3::y(), 0.0))
            .collect();
        let start = x.clone();
        let t = Instant::now();
        let stats = system
            .solve_with_contacts(
                &mut x,
                &Potential {
                    inertia: 1.0 / (H * H),
                    target: &y,
                    force: &force,
                },
                &rows,
                NewtonSettings {
                    max_iterations: 1,
                    tolerance: 0.0,
                },
                &mut solver,
            )
            .expect("decoupled rows");
        times.push(t.elapsed().as_secs_f64() * 1e3);
        iterations += stats.mprgp_iterations;
        cg_steps += stats.mprgp_cg_steps;
        for ((u, p), s) in v.iter_mut().zip(&x).zip(&start) {
            *u = (p - s) / H;
        }
        deepest = deepest.max(-x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min));
    }
    times.sort_by(f64::total_cmp);
    DropResult {
        name,
        vertices: mesh.vertex_count(),
        ms_median: times[times.len() / 2],
        mprgp_per_step: iterations as f64 / STEPS as f64,
        cg_share: cg_steps as f64 / iterations.max(1) as f64,
        deepest,
        final_speed: v.iter().map(|u| u.norm()).fold(0.0, f64::max),
    }
}

struct BeamResult {
    model: FemModel,
    e: f64,
    resolution: usize,
    ratio: f64,
    iterations: usize,
    ms: f64,
}

/// The static cantilever of `tests/sim_newton.rs` (`tests/common/beam.rs`): tip deflection
/// over beam theory's `q L^4 / (8 E I)`.
fn cantilever(model: FemModel, e: f64, resolution: usize) -> BeamResult {
    let t = Instant::now();
    let (deflection, stats) = common::beam::static_tip(model, e, resolution);
    let ms = t.elapsed().as_secs_f64() * 1e3;
    BeamResult {
        model,
        e,
        resolution,
        ratio: deflection / common::beam::beam_theory(e),
        iterations: stats.iterations,
        ms,
    }
}

struct WorldResult {
    solver: Solver,
    e: f64,
    ms_median: f64,
    iterations: f64,
    mprgp_per_step: f64,
    residual_median: f64,
    deepest: f64,
    final_speed: f64,
}

/// The 1 m cube of [`drop_cube`] (1,000 vertices, nu 0.4, friction 0.5) dropped from 2 cm onto
/// a floor in a `SoftWorld` with `solver` and otherwise default settings (sleeping off), for
/// `STEPS` steps: timed once without the residual measure, then run again with it (the
/// measure costs extra evaluations) for the steps' relative residuals.
fn world_drop(solver: Solver, e: f64) -> WorldResult {
    let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.5), 9));
    let run = |measure: bool| {
        let mut world = SoftWorld::new(WorldSettings {
            solver,
            sleeping: Sleeping::OFF,
            measure_residual: measure,
            ..WorldSettings::default()
        });
        let material = MaterialParams::RUBBER
            .with_youngs_modulus(e)
            .with_poisson_ratio(0.4)
            .with_friction(0.5);
        let body = world
            .add_body(mesh.clone(), material, Vec3::new(0.0, 0.52, 0.0))
            .expect("valid body");
        world
            .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).expect("unit normal"))
            .expect("valid obstacle");
        let mut reports = Vec::new();
        let mut deepest = 0.0f64;
        for _ in 0..STEPS {
            let report = world.step(H).expect("valid settings");
            assert!(
                report.frozen.is_empty(),
                "{solver:?} {e:e}: {:?}",
                report.frozen
            );
            let x = world.positions(body).expect("live body");
            deepest = deepest.max(-x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min));
            reports.push(report);
        }
        let speed = world
            .velocities(body)
            .expect("live body")
            .iter()
            .map(|u| u.norm())
            .fold(0.0, f64::max);
        (reports, deepest, speed)
    };
    let (timed, deepest, final_speed) = run(false);
    let (measured, _, _) = run(true);
    let mut times: Vec<f64> = timed.iter().map(|r| r.wall.as_secs_f64() * 1e3).collect();
    times.sort_by(f64::total_cmp);
    let mut residuals: Vec<f64> = measured.iter().filter_map(|r| r.residual).collect();
    residuals.sort_by(f64::total_cmp);
    let n = timed.len() as f64;
    WorldResult {
        solver,
        e,
        ms_median: times[times.len() / 2],
        iterations: timed.iter().map(|r| r.pd_iterations as f64).sum::<f64>() / n,
        mprgp_per_step: timed.iter().map(|r| r.mprgp_iterations as f64).sum::<f64>() / n,
        residual_median: residuals[residuals.len() / 2],
        deepest,
        final_speed,
    }
}

/// MPRGP's variants (the paper's Alg. 2 and 3 against the feasible chain and step halving) on
/// the rubber and the stiff drop: prints a table and returns its JSON entries.
fn variants_table() -> Vec<String> {
    println!(
        "\nMPRGP variants on the same drops (one Newton step per frame, QP tolerance 1e-4, {STEPS} steps):"
    );
    println!(
        "E (Pa)   chain     safeguard         ms/step (median)  MPRGP its/step  cg/it  deepest (m)"
    );
    let mut json = Vec::new();
    for e in [2e5, 1e7] {
        for (chain, safeguard) in MprgpSettings::variants() {
            let d = drop_cube_with("variant", FemModel::FixedCorotated, e, chain, safeguard);
            println!(
                "{:<8.0e} {:<9} {:<16}  {:>16.2}  {:>14.1}  {:>5.2}  {:>11.1e}",
                e,
                format!("{chain:?}"),
                format!("{safeguard:?}"),
                d.ms_median,
                d.mprgp_per_step,
                d.cg_share,
                d.deepest
            );
            json.push(format!(
                "{{\"youngs_modulus\": {e:e}, \"chain\": \"{chain:?}\", \"safeguard\": \"{safeguard:?}\", \"ms_per_step\": {:.4}, \"mprgp_iterations\": {:.2}, \"cg_share\": {:.3}}}",
                d.ms_median, d.mprgp_per_step, d.cg_share
            ));
        }
    }
    json
}

fn main() {
    let variants = variants_table();
    if std::env::args().any(|a| a == "--variants") {
        return;
    }
    let drops = [
        drop_cube("cube_1k rubber (2e5 Pa)", FemModel::FixedCorotated, 2e5),
        drop_cube("cube_1k stiff (1e7 Pa)", FemModel::FixedCorotated, 1e7),
        drop_cube("cube_1k rubber, SNH", FemModel::StableNeoHookean, 2e5),
    ];
    println!(
        "\nOne Newton step per frame (dt = 1/60 s) with its contact QP by MPRGP (tolerance 1e-4), a 1 m cube dropped 2 cm onto a floor, {STEPS} steps:"
    );
    println!(
        "scene                        verts  ms/step (median)  MPRGP its/step  cg/it  deepest (m)  speed at end (m/s)"
    );
    for d in &drops {
        println!(
            "{:<28} {:>5}  {:>16.2}  {:>14.1}  {:>5.2}  {:>11.1e}  {:>18.1e}",
            d.name, d.vertices, d.ms_median, d.mprgp_per_step, d.cg_share, d.deepest, d.final_speed
        );
    }
    println!(
        "\nStatic cantilever (1 m x 0.1 m, nu = 0, under its weight): tip deflection / Euler-Bernoulli"
    );
    println!("model             E (Pa)  cells along  ratio  Newton its  ms");
    let mut beams = Vec::new();
    for model in [FemModel::FixedCorotated, FemModel::StableNeoHookean] {
        for e in [1e6, 1e7, 1e8] {
            for resolution in [20, 40, 60] {
                let b = cantilever(model, e, resolution);
                println!(
                    "{:<16} {:>7.0e}  {:>11}  {:>5.3}  {:>10}  {:>6.1}",
                    format!("{:?}", b.model),
                    b.e,
                    b.resolution,
                    b.ratio,
                    b.iterations,
                    b.ms
                );
                beams.push(b);
            }
        }
    }
    println!(
        "(at 1e6 Pa the beam sags 74 % of its length: beam theory, a small-deflection theory, does not apply there)"
    );
    println!(
        "\nThe world's two solvers, default settings, the same cube dropped 2 cm onto a floor (nu 0.4, friction 0.5), {STEPS} steps:"
    );
    println!(
        "solver               E (Pa)  ms/step (median)  iterations/step  MPRGP its/step  residual (median)  deepest (m)  speed at end (m/s)"
    );
    let mut worlds = Vec::new();
    for e in [2e5, 1e7] {
        for solver in [Solver::ProjectiveDynamics, Solver::NewtonMprgp] {
            let w = world_drop(solver, e);
            println!(
                "{:<19} {:>7.0e}  {:>16.2}  {:>15.2}  {:>14.1}  {:>17.1e}  {:>11.1e}  {:>18.1e}",
                format!("{:?}", w.solver),
                w.e,
                w.ms_median,
                w.iterations,
                w.mprgp_per_step,
                w.residual_median,
                w.deepest,
                w.final_speed
            );
            worlds.push(w);
        }
    }
    let drop_json: Vec<String> = drops
        .iter()
        .map(|d| {
            format!(
                "{{\"name\": \"{}\", \"vertices\": {}, \"ms_per_step\": {:.4}, \"mprgp_iterations\": {:.2}, \"cg_share\": {:.3}, \"deepest_m\": {:.3e}, \"final_speed\": {:.3e}}}",
                d.name, d.vertices, d.ms_median, d.mprgp_per_step, d.cg_share, d.deepest, d.final_speed
            )
        })
        .collect();
    let beam_json: Vec<String> = beams
        .iter()
        .map(|b| {
            format!(
                "{{\"model\": \"{:?}\", \"youngs_modulus\": {:e}, \"cells\": {}, \"ratio\": {:.4}, \"iterations\": {}}}",
                b.model, b.e, b.resolution, b.ratio, b.iterations
            )
        })
        .collect();
    let world_json: Vec<String> = worlds
        .iter()
        .map(|w| {
            format!(
                "{{\"solver\": \"{:?}\", \"youngs_modulus\": {:e}, \"ms_per_step\": {:.4}, \"iterations\": {:.2}, \"mprgp_iterations\": {:.2}, \"residual\": {:.3e}, \"deepest_m\": {:.3e}, \"final_speed\": {:.3e}}}",
                w.solver, w.e, w.ms_median, w.iterations, w.mprgp_per_step, w.residual_median, w.deepest, w.final_speed
            )
        })
        .collect();
    let json = format!(
        "{{\"drop\": [{}], \"variants\": [{}], \"cantilever\": [{}], \"world\": [{}]}}\n",
        drop_json.join(", "),
        variants.join(", "),
        beam_json.join(", "),
        world_json.join(", ")
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("newton.json"), &json))
    {
        Ok(()) => println!("\nwrote {}", dir.join("newton.json").display()),
        Err(e) => eprintln!("could not write newton.json: {e}"),
    }
}
