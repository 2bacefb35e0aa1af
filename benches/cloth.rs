//! Cloth benchmark (`sim::cloth`, stepped on its own): a flag of 32 x 32 and 64 x 64 cells
//! (1 m square, cotton), pinned along one edge, in a steady 3 m/s wind under gravity, at
//! 1/60 s with ten PD iterations; one and two threads. No contact: the cloth is not in the
//! world yet, so the goals (with self-collision) are not what this measures.
//!
//! `cargo bench --bench cloth` prints the mean step after a second of settling in, and writes
//! `target/bench/cloth.json`.

use std::sync::Arc;
use std::time::Instant;

use bevy_deformable::sim::Vec3;
use bevy_deformable::sim::cloth::{ClothMaterial, ClothMesh, ClothSystem};

const DT: f64 = 1.0 / 60.0;
/// Steps before the timed ones, and timed.
const WARM: usize = 60;
const TIMED: usize = 120;

/// The mean step (ms) of an `n` x `n` flag.
fn run(n: usize) -> (usize, f64) {
    let mesh = Arc::new(ClothMesh::rectangle(1.0, 1.0, n, n).expect("a rectangle"));
    let mut cloth = ClothSystem::new(mesh.clone(), ClothMaterial::COTTON, DT).expect("a cloth");
    for v in 0..mesh.vertex_count() {
        let p = mesh.rest_positions()[v];
        if p.z > 0.5 - 1e-9 {
            cloth.pin(v, Some(p)).expect("a pin");
        }
    }
    let (gravity, wind) = (Vec3::new(0.0, -9.81, 0.0), Vec3::new(3.0, 0.0, 0.0));
    for _ in 0..WARM {
        cloth.step(gravity, wind).expect("a stable step");
    }
    let started = Instant::now();
    for _ in 0..TIMED {
        cloth.step(gravity, wind).expect("a stable step");
    }
    (
        mesh.vertex_count(),
        started.elapsed().as_secs_f64() * 1e3 / TIMED as f64,
    )
}

fn main() {
    println!("cloth: a flag pinned along one edge in wind, 1/60 s, ten PD iterations, no contact");
    println!("| cells | vertices | threads | ms/step |");
    println!("| ---: | ---: | ---: | ---: |");
    let mut json = Vec::new();
    for n in [32, 64] {
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a thread pool");
            let (vertices, ms) = pool.install(|| run(n));
            println!("| {n} x {n} | {vertices} | {threads} | {ms:.3} |");
            json.push(format!(
                "{{\"cells\": {n}, \"vertices\": {vertices}, \"threads\": {threads}, \"ms_per_step\": {ms:.4}}}"
            ));
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    let text = format!("[{}]\n", json.join(", "));
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("cloth.json"), text)) {
        Ok(()) => println!("\nwrote {}", dir.join("cloth.json").display()),
        Err(e) => eprintln!("could not write cloth.json: {e}"),
    }
}
