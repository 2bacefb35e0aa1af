//! Cloth benchmark (`sim::cloth`, stepped on its own), at 1/60 s with ten PD iterations, on one
//! and two threads:
//! - a flag of 32 x 32 and 64 x 64 cells (1 m square, cotton), pinned along one edge, in a
//!   steady 3 m/s wind under gravity, touching nothing;
//! - a tablecloth of 20 x 20 and 32 x 32 cells (1.5 m x 1.3 m, cotton) dropped from 45 cm onto
//!   a table (a 1.1 m x 0.8 m slab) with a bowl (a 16 cm ball) on it: obstacle contact.
//!
//! No self-collision (the cloth does not have it yet), so the goals are not what this
//! measures. `cargo bench --bench cloth` prints the mean step after a second of settling in
//! (with the mean contact planes per step), and writes `target/bench/cloth.json`.

use std::sync::Arc;
use std::time::Instant;

use bevy_deformable::sim::cloth::{ClothMaterial, ClothMesh, ClothSystem};
use bevy_deformable::sim::{ObstacleCollider, Vec3};

const DT: f64 = 1.0 / 60.0;
/// Steps before the timed ones, and timed.
const WARM: usize = 60;
const TIMED: usize = 120;

/// The scenes.
#[derive(Clone, Copy)]
enum Scene {
    Flag,
    Tablecloth,
}

/// The vertex count, the mean step (ms) and the mean contact planes per step of an `n` x `n`
/// cloth in `scene`.
fn run(n: usize, scene: Scene) -> (usize, f64, f64) {
    let gravity = Vec3::new(0.0, -9.81, 0.0);
    let table = Vec3::new(0.0, 0.9, 0.0);
    let (mesh, wind, obstacles) = match scene {
        Scene::Flag => (
            ClothMesh::rectangle(1.0, 1.0, n, n).expect("a rectangle"),
            Vec3::new(3.0, 0.0, 0.0),
            Vec::new(),
        ),
        Scene::Tablecloth => (
            ClothMesh::rectangle(1.5, 1.3, n, n)
                .expect("a rectangle")
                .mapped(|p| p + table + Vec3::new(0.0, 0.45, 0.0))
                .expect("a rectangle"),
            Vec3::zeros(),
            vec![
                ObstacleCollider::halfspace(Vec3::y()).expect("a floor"),
                ObstacleCollider::cuboid(Vec3::new(0.55, 0.03, 0.4))
                    .expect("a table")
                    .with_position(table),
                ObstacleCollider::ball(0.16)
                    .expect("a bowl")
                    .with_position(table + Vec3::new(0.1, 0.03, 0.0)),
            ],
        ),
    };
    let mesh = Arc::new(mesh);
    let mut cloth = ClothSystem::new(mesh.clone(), ClothMaterial::COTTON, DT).expect("a cloth");
    if let Scene::Flag = scene {
        for v in 0..mesh.vertex_count() {
            let p = mesh.rest_positions()[v];
            if p.z > 0.5 - 1e-9 {
                cloth.pin(v, Some(p)).expect("a pin");
            }
        }
    }
    for _ in 0..WARM {
        cloth
            .step_among(gravity, wind, &obstacles)
            .expect("a stable step");
    }
    let (started, mut contacts) = (Instant::now(), 0);
    for _ in 0..TIMED {
        cloth
            .step_among(gravity, wind, &obstacles)
            .expect("a stable step");
        contacts += cloth.contact_count();
    }
    (
        mesh.vertex_count(),
        started.elapsed().as_secs_f64() * 1e3 / TIMED as f64,
        contacts as f64 / TIMED as f64,
    )
}

fn main() {
    println!("cloth: 1/60 s, ten PD iterations (see the bench's docs for the scenes)");
    println!("| scene | cells | vertices | threads | ms/step | contacts/step |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let mut json = Vec::new();
    for (scene, name, sizes) in [
        (Scene::Flag, "flag", [32, 64]),
        (Scene::Tablecloth, "tablecloth", [20, 32]),
    ] {
        for n in sizes {
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .expect("a thread pool");
                let (vertices, ms, contacts) = pool.install(|| run(n, scene));
                println!(
                    "| {name} | {n} x {n} | {vertices} | {threads} | {ms:.3} | {contacts:.0} |"
                );
                json.push(format!(
                    "{{\"scene\": \"{name}\", \"cells\": {n}, \"vertices\": {vertices}, \"threads\": {threads}, \"ms_per_step\": {ms:.4}, \"contacts_per_step\": {contacts:.1}}}"
                ));
            }
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    let text = format!("[{}]\n", json.join(", "));
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("cloth.json"), text)) {
        Ok(()) => println!("\nwrote {}", dir.join("cloth.json").display()),
        Err(e) => eprintln!("could not write cloth.json: {e}"),
    }
}
