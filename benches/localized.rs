//! Localized contact for large bodies (`WorldSettings::localized_min_vertices`): the same
//! scenes stepped with the contact QP localized to a collision-prone region ordered last in the
//! body's factor, and with the whole-body path (MPRGP over the whole body), one after the other
//! in one run.
//!
//! Scenes (rubber, E = 200 kPa, nu = 0.4, dt = 1/60 s, default settings, sleeping off):
//! - `cube_10k_landing`: a 10,648-vertex cube dropped 2 cm onto a floor;
//! - `cube_10k_pressed`, `cube_40k_pressed`: a 10,648- and a 39,304-vertex cube (1 m) pinned
//!   at its base, a kinematic ball (r = 0.3 m) pressed into the middle of its top at 0.3 m/s,
//!   down to 9 cm below the top's rest height (6 cm into the sagging top), and held there.
//!
//! `cargo bench --bench localized` prints a table and writes `target/bench/localized.json`
//! (per scene: `vertices`, `ms_per_step_localized`, `ms_per_step_full`,
//! `speedup_localized_vs_full`, and the figures behind them).
//! `cargo bench --bench localized -- --quick` skips the 40K cube.

use std::sync::Arc;
use std::time::Instant;

use nalgebra::UnitQuaternion;

use bevy_deformable::sim::{
    BodyDesc, MaterialParams, ObstacleCollider, Sleeping, SoftWorld, TetMesh, Vec3, WorldSettings,
};

/// The median of `v` (sorted in place; 0 when empty).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

const DT: f64 = 1.0 / 60.0;

/// How a scene moves its pusher, if it has one.
#[derive(Clone, Copy)]
enum Scene {
    /// Dropped 2 cm onto a floor.
    Landing,
    /// Pinned at its base, a ball pressed into its top.
    Pressed,
}

/// One run of a scene.
struct Run {
    ms_per_step: f64,
    /// Slowest step of the run (ms; the first, or one where the region was built).
    ms_worst: f64,
    /// Slowest step that built a region (ms; 0 where none did).
    ms_rebuild: f64,
    pd_iterations: f64,
    mprgp_iterations: f64,
    subspace_solves: f64,
    rows: f64,
    /// The PD iterations' relative residual at their end (`StepReport::pd_residual`).
    residual: f64,
    rebuilds: usize,
    /// Largest depth (m) of the mesh into the ball or floor at the end.
    penetration: f64,
}

/// The world of `scene` for `mesh`, its contacts localized (every body) or not (none).
fn world_for(mesh: &Arc<TetMesh>, scene: Scene, localized: bool) -> SoftWorld {
    let settings = WorldSettings {
        sleeping: Sleeping::OFF,
        localized_min_vertices: if localized { 0 } else { usize::MAX },
        ..WorldSettings::default()
    };
    let mut world = SoftWorld::new(settings);
    let (lo, hi) = mesh.rest_bounds();
    match scene {
        Scene::Landing => {
            world
                .add_body(
                    mesh.clone(),
                    MaterialParams::RUBBER,
                    Vec3::new(0.0, -lo.y + 0.02, 0.0),
                )
                .expect("valid body");
            world
                .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).expect("valid normal"))
                .expect("valid obstacle");
        }
        Scene::Pressed => {
            let base: Vec<u32> = (0..mesh.vertex_count() as u32)
                .filter(|&v| mesh.rest_positions()[v as usize].y < lo.y + 1e-9)
                .collect();
            world
                .add_body_from(
                    &BodyDesc::new(mesh.clone(), MaterialParams::RUBBER)
                        .with_position(Vec3::new(0.0, -lo.y, 0.0))
                        .with_pins(base),
                )
                .expect("valid body");
            let top = hi.y - lo.y;
            world
                .add_obstacle(
                    ObstacleCollider::ball(BALL_RADIUS)
                        .expect("valid radius")
                        .with_position(Vec3::new(0.0, top + BALL_RADIUS + 0.01, 0.0)),
                )
                .expect("valid obstacle");
        }
    }
    world
}

/// The pressing ball's radius (m).
const BALL_RADIUS: f64 = 0.3;
/// How far below the top's rest height the ball goes (m; the top sags about 3 cm first).
const PRESS_DEPTH: f64 = 0.09;
/// Its speed while it goes down (m/s).
const PRESS_SPEED: f64 = 0.3;
/// The pressed scenes are measured from this step on, with the ball held (it stops at step
/// 20).
const PRESSED_FROM: usize = 25;

/// Steps `world` `steps` times, moving the pusher of a pressed scene; the measured figures of
/// the steps from `measure_from` on.
fn run(mut world: SoftWorld, scene: Scene, steps: usize, measure_from: usize) -> Run {
    let mut times = Vec::new();
    let (mut pd, mut mprgp, mut subspace, mut rows, mut residual) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut rebuilds = 0;
    let (mut worst, mut rebuild_worst) = (0.0f64, 0.0f64);
    let start_y = world
        .obstacles()
        .first()
        .map(|o| o.position().y)
        .unwrap_or(0.0);
    let mut penetration = 0.0;
    for step in 0..steps {
        if let Scene::Pressed = scene {
            let travelled = (PRESS_SPEED * DT * (step + 1) as f64).min(PRESS_DEPTH + 0.01);
            let handle = world.obstacle_handles().next().expect("the ball");
            world
                .obstacle_mut(handle)
                .expect("the ball")
                .move_to(
                    Vec3::new(0.0, start_y - travelled, 0.0),
                    UnitQuaternion::identity(),
                    DT,
                )
                .expect("valid pose");
        }
        let t = Instant::now();
        let report = world.step(DT).expect("valid dt");
        let ms = t.elapsed().as_secs_f64() * 1e3;
        worst = worst.max(ms);
        if report.prone_rebuilds > 0 {
            rebuild_worst = rebuild_worst.max(ms);
        }
        rebuilds += report.prone_rebuilds;
        if step >= measure_from {
            times.push(ms);
            pd.push(report.pd_iterations as f64);
            mprgp.push(report.mprgp_iterations as f64);
            subspace.push(report.subspace_solves as f64);
            rows.push(report.constraints as f64);
            residual.push(report.pd_residual);
        }
        penetration = report.max_penetration;
    }
    Run {
        ms_per_step: median(&mut times),
        ms_worst: worst,
        ms_rebuild: rebuild_worst,
        pd_iterations: median(&mut pd),
        mprgp_iterations: median(&mut mprgp),
        subspace_solves: median(&mut subspace),
        rows: median(&mut rows),
        residual: median(&mut residual),
        rebuilds,
        penetration,
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let cube = |resolution: usize| Arc::new(TetMesh::cuboid(Vec3::repeat(0.5), resolution));
    let cube_10k = cube(21);
    let mut scenes: Vec<(&str, Arc<TetMesh>, Scene, usize, usize)> = vec![
        ("cube_10k_landing", cube_10k.clone(), Scene::Landing, 40, 0),
        (
            "cube_10k_pressed",
            cube_10k,
            Scene::Pressed,
            60,
            PRESSED_FROM,
        ),
    ];
    if !quick {
        scenes.push((
            "cube_40k_pressed",
            cube(33),
            Scene::Pressed,
            45,
            PRESSED_FROM,
        ));
    }
    println!(
        "\nLocalized contact against the whole-body path, dt = 1/60 s, default settings, sleeping \
         off (medians over the steps, the pressed scenes' from step {PRESSED_FROM} with the ball \
         held; ms):"
    );
    println!(
        "{:<18} {:>7} {:>10} {:>9} {:>8} {:>5} {:>9} {:>5} {:>6} {:>6} {:>5} {:>8} {:>8}",
        "scene",
        "verts",
        "path",
        "ms/step",
        "worst",
        "pd",
        "residual",
        "rows",
        "mprgp",
        "subsp",
        "rebld",
        "pen mm",
        "speedup"
    );
    let mut json = Vec::new();
    for (name, mesh, scene, steps, from) in scenes {
        let localized = run(world_for(&mesh, scene, true), scene, steps, from);
        let full = run(world_for(&mesh, scene, false), scene, steps, from);
        let speedup = full.ms_per_step / localized.ms_per_step;
        for (path, r) in [("localized", &localized), ("full", &full)] {
            println!(
                "{:<18} {:>7} {:>10} {:>9.2} {:>8.1} {:>8.1} {:>5.0} {:>9.1e} {:>5.0} {:>6.0} {:>6.0} {:>5} {:>8.2} {:>8}",
                name,
                mesh.vertex_count(),
                path,
                r.ms_per_step,
                r.ms_worst,
                r.ms_rebuild,
                r.pd_iterations,
                r.residual,
                r.rows,
                r.mprgp_iterations,
                r.subspace_solves,
                r.rebuilds,
                r.penetration * 1e3,
                if path == "full" {
                    format!("{speedup:.2}x")
                } else {
                    String::new()
                }
            );
        }
        json.push(format!(
            "{{\"name\": \"{name}\", \"vertices\": {}, \"ms_per_step_localized\": {:.3}, \"ms_per_step_full\": {:.3}, \"speedup_localized_vs_full\": {speedup:.3}, \"worst_step_ms_localized\": {:.2}, \"worst_step_ms_full\": {:.2}, \"rebuild_step_ms\": {:.2}, \"pd_iterations_localized\": {:.1}, \"pd_iterations_full\": {:.1}, \"residual_localized\": {:.2e}, \"residual_full\": {:.2e}, \"region_rebuilds\": {}, \"penetration_mm_localized\": {:.3}, \"penetration_mm_full\": {:.3}}}",
            mesh.vertex_count(),
            localized.ms_per_step,
            full.ms_per_step,
            localized.ms_worst,
            full.ms_worst,
            localized.ms_rebuild,
            localized.pd_iterations,
            full.pd_iterations,
            localized.residual,
            full.residual,
            localized.rebuilds,
            localized.penetration * 1e3,
            full.penetration * 1e3,
        ));
    }
    println!(
        "(worst: the slowest step of the whole run; rebuild: the slowest step that built a region; residual: the PD \
         iterations' relative residual at their end; rows: contact rows; subsp: \
         constrained steps solved in the contact subspace per step; rebld: regions built in the run; \
         pen: deepest penetration after the last step)"
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("bench");
    let text = format!("{{\"scenes\": [{}]}}\n", json.join(", "));
    if let Err(e) =
        std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("localized.json"), text))
    {
        eprintln!("could not write {}: {e}", dir.display());
    } else {
        println!("\nwrote {}", dir.join("localized.json").display());
    }
}
