//! Pour benchmark: a crowd of one hundred small soft bodies (rubber cubes and balls of 216-280
//! vertices) poured into a bin, stepped at 1/60 s on one thread and on two, without Bevy.
//! It measures how the step scales with bodies and threads: the bodies land in layers, form
//! islands of many bodies in contact, and should come to rest and fall asleep.
//!
//! `cargo bench --bench pour` prints, per thread count, the mean step while pouring (steps
//! 11-180: the layers fall and land) and over the whole run, the PD iterations per body and
//! step, the largest island, and the time at which every body is asleep; then the speed-up of
//! two threads over one in the same run, and checks that both runs end bit-identical (the
//! step is deterministic at any thread count). Writes `target/bench/pour.json`.

use std::sync::Arc;
use std::time::Instant;

use bevy_deformable::sim::{MaterialParams, SoftWorld, TetMesh, Vec3, WorldSettings};

// The bin shared with the `pile` bench.
#[path = "../tests/common/mod.rs"]
mod common;

/// The step (s).
const DT: f64 = 1.0 / 60.0;
/// Steps run (4 s: the pour and the first second after it).
const STEPS: usize = 240;
/// The pour: steps 11-180.
const POUR: std::ops::Range<usize> = 10..180;
/// Bodies per layer (a 5 x 4 grid) and layers.
const COLUMNS: usize = 5;
const ROWS: usize = 4;
const LAYERS: usize = 5;

/// A bin (four box walls around a 1.6 m square, friction 0.3) on a floor, and the bodies in
/// five layers of twenty: cubes (5 cells, 216 vertices) and balls (6 cells) of 0.09-0.12 m
/// half size, `E` 100-300 kPa, each layer 0.35 m above the last.
fn scene() -> SoftWorld {
    let mut world = SoftWorld::new(WorldSettings::default());
    common::add_bin(&mut world, 0.8, 1.6, 0.05);
    let cube = Arc::new(TetMesh::cuboid(Vec3::repeat(1.0), 5));
    let ball = Arc::new(TetMesh::sphere(1.0, 6));
    for i in 0..COLUMNS * ROWS * LAYERS {
        let (column, row, layer) = (i % COLUMNS, (i / COLUMNS) % ROWS, i / (COLUMNS * ROWS));
        let size = 0.09 + 0.015 * ((i * 7) % 3) as f64;
        let at = Vec3::new(
            -0.6 + 0.3 * column as f64 + 0.04 * (layer % 2) as f64,
            0.3 + 0.35 * layer as f64,
            -0.45 + 0.3 * row as f64 - 0.04 * (layer % 2) as f64,
        );
        let material = MaterialParams::RUBBER.with_youngs_modulus(1.0e5 + 1.0e5 * (i % 3) as f64);
        let mesh = if i % 2 == 0 { &cube } else { &ball };
        let scaled = Arc::new(mesh.scaled(Vec3::repeat(size)).expect("positive scale"));
        world.add_body(scaled, material, at).expect("valid body");
    }
    world
}

/// One run's figures.
struct Run {
    pour_ms: f64,
    all_ms: f64,
    pd_iterations: f64,
    largest_island: usize,
    /// When every body was first asleep (s), if within the run.
    asleep_at: Option<f64>,
    /// The final positions, for the determinism check.
    positions: Vec<Vec3>,
}

fn run(threads: usize) -> Run {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool");
    pool.install(|| {
        let mut world = scene();
        let bodies = world.bodies().count();
        let (mut pour, mut all, mut pd) = (0.0, 0.0, 0.0);
        let (mut largest_island, mut asleep_at) = (0, None);
        for step in 0..STEPS {
            let report = world.step(DT).expect("the pour steps");
            assert!(report.frozen.is_empty(), "step {step}: {:?}", report.frozen);
            let ms = report.wall.as_secs_f64() * 1e3;
            if POUR.contains(&step) {
                pour += ms;
            }
            all += ms;
            pd += report.pd_iterations as f64 / bodies as f64;
            largest_island = largest_island.max(report.largest_island);
            if asleep_at.is_none() && report.sleeping_bodies == bodies {
                asleep_at = Some((step + 1) as f64 * DT);
            }
            if (step + 1) % 60 == 0 {
                eprintln!(
                    "  {threads} thread(s), {:.0} s: {ms:.1} ms/step, {} asleep, largest island {}",
                    (step + 1) as f64 * DT,
                    report.sleeping_bodies,
                    report.largest_island
                );
            }
        }
        let positions = world
            .bodies()
            .flat_map(|b| world.positions(b).expect("live body").to_vec())
            .collect();
        Run {
            pour_ms: pour / POUR.len() as f64,
            all_ms: all / STEPS as f64,
            pd_iterations: pd / STEPS as f64,
            largest_island,
            asleep_at,
            positions,
        }
    })
}

fn main() {
    let world = scene();
    let bodies = world.bodies().count();
    let vertices: usize = world
        .bodies()
        .map(|b| world.positions(b).map_or(0, <[Vec3]>::len))
        .sum();
    drop(world);
    println!(
        "pour: {bodies} bodies, {vertices} vertices, {STEPS} steps of 1/60 s; pouring = steps {}..{}",
        POUR.start + 1,
        POUR.end
    );
    println!(
        "| threads | ms/step pouring | ms/step whole run | PD its/body/step | largest island | all asleep at (s) | run (s) |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut runs = Vec::new();
    for threads in [1, 2] {
        let started = Instant::now();
        let r = run(threads);
        println!(
            "| {threads} | {:.2} | {:.2} | {:.2} | {} | {} | {:.1} |",
            r.pour_ms,
            r.all_ms,
            r.pd_iterations,
            r.largest_island,
            r.asleep_at.map_or("-".to_string(), |t| format!("{t:.2}")),
            started.elapsed().as_secs_f64()
        );
        runs.push(r);
    }
    let speedup = runs[0].pour_ms / runs[1].pour_ms;
    let identical = runs[0].positions == runs[1].positions;
    println!(
        "two threads over one while pouring: {speedup:.2}x; final states bit-identical: {identical}"
    );
    let json = format!(
        "{{\"bodies\": {bodies}, \"vertices\": {vertices}, \"ms_per_step_pouring_1_thread\": {:.4}, \"ms_per_step_pouring_2_threads\": {:.4}, \"ms_per_step_1_thread\": {:.4}, \"ms_per_step_2_threads\": {:.4}, \"speedup_2_threads\": {speedup:.4}, \"pd_iterations\": {:.4}, \"largest_island\": {}, \"all_asleep_s\": {}, \"bit_identical\": {identical}}}\n",
        runs[0].pour_ms,
        runs[1].pour_ms,
        runs[0].all_ms,
        runs[1].all_ms,
        runs[1].pd_iterations,
        runs[1].largest_island,
        runs[1]
            .asleep_at
            .map_or("null".to_string(), |t| format!("{t:.4}")),
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("pour.json"), &json)) {
        Ok(()) => println!("\nwrote {}", dir.join("pour.json").display()),
        Err(e) => eprintln!("could not write pour.json: {e}"),
    }
    assert!(identical, "the step must not depend on the thread count");
}
