//! Cloth benchmark (`sim::cloth`, stepped on its own), at 1/60 s with ten PD iterations, on one
//! and two threads:
//! - a flag of 32 x 32 and 64 x 64 cells (1 m square, cotton), pinned along one edge, in a
//!   steady 3 m/s wind under gravity, touching nothing; and the same "in the wind": 25
//!   iterations extrapolated by Chebyshev's method (`FLAG_ITERATIONS`, `FLAG_CHEBYSHEV_RHO`),
//!   which keep it from crumpling at its cells' scale;
//! - a tablecloth of 20 x 20 and 32 x 32 cells (1.5 m x 1.3 m, cotton) dropped from 45 cm onto
//!   a table (a 1.1 m x 0.8 m slab) with a bowl (a 16 cm ball) on it: obstacle contact;
//! - a heap: a sheet of 32 x 32 and 64 x 64 cells (1 m square, cotton) hung upright 5 cm
//!   above the floor and let go, so that it buckles and folds onto itself on the floor.
//!
//! Each without and with self-collision (`ClothSystem::self_collision`). Then cloth on cloth
//! (`ClothSystem::step_among_cloths`): the 20 x 20 tablecloth with a 0.4 m denim napkin of
//! 8 x 8 cells dropped onto it from 30 cm above, the two stepped one after the other, each
//! among the other, the tablecloth given what the napkin's pairs put on it (the row's pairs
//! are the napkin's and the tablecloth's with each other).
//! `cargo bench --bench cloth` prints the mean step over two seconds after a second of
//! settling in, with the mean obstacle contact planes, self-contact pairs (vertex-triangle
//! plus edge-edge) and vertices in impact zones per step, and writes
//! `target/bench/cloth.json`.

use std::sync::Arc;
use std::time::Instant;

use bevy_deformable::sim::cloth::{
    ClothMaterial, ClothMesh, ClothSystem, FLAG_CHEBYSHEV_RHO, FLAG_ITERATIONS, NeighbourCloth,
};
use bevy_deformable::sim::{ObstacleCollider, Vec3};

const DT: f64 = 1.0 / 60.0;
/// Steps before the timed ones, and timed.
const WARM: usize = 60;
const TIMED: usize = 120;

/// The scenes.
#[derive(Clone, Copy)]
enum Scene {
    Flag,
    /// The flag with `FLAG_ITERATIONS` extrapolated by `FLAG_CHEBYSHEV_RHO`.
    WindFlag,
    Tablecloth,
    Heap,
}

/// What one run measured: the vertex count, the mean step (ms), and per step the mean
/// obstacle contact planes, self-contact pairs and vertices in impact zones.
struct Measured {
    vertices: usize,
    ms: f64,
    contacts: f64,
    self_pairs: f64,
    zoned: f64,
}

/// One run of an `n` x `n` cloth in `scene`, colliding with itself or not.
fn run(n: usize, scene: Scene, self_collision: bool) -> Measured {
    let gravity = Vec3::new(0.0, -9.81, 0.0);
    let table = Vec3::new(0.0, 0.9, 0.0);
    let (mesh, wind, obstacles) = match scene {
        Scene::Flag | Scene::WindFlag => (
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
            table_obstacles(table),
        ),
        Scene::Heap => (
            ClothMesh::rectangle(1.0, 1.0, n, n)
                .expect("a rectangle")
                .mapped(|p| Vec3::new(p.x, p.z + 0.55, 0.01 * (7.0 * p.z).sin()))
                .expect("a rectangle"),
            Vec3::zeros(),
            vec![ObstacleCollider::halfspace(Vec3::y()).expect("a floor")],
        ),
    };
    let mesh = Arc::new(mesh);
    let mut cloth = ClothSystem::new(mesh.clone(), ClothMaterial::COTTON, DT).expect("a cloth");
    cloth.self_collision = self_collision;
    if let Scene::WindFlag = scene {
        cloth.iterations = FLAG_ITERATIONS;
        cloth.chebyshev_rho = FLAG_CHEBYSHEV_RHO;
    }
    if let Scene::Flag | Scene::WindFlag = scene {
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
    let started = Instant::now();
    let (mut contacts, mut self_pairs, mut zoned) = (0, 0, 0);
    for _ in 0..TIMED {
        cloth
            .step_among(gravity, wind, &obstacles)
            .expect("a stable step");
        contacts += cloth.contact_count();
        let (points, edges) = cloth.self_contact_count();
        self_pairs += points + edges;
        zoned += cloth.impact_zone_vertices();
    }
    let per_step = |total: usize| total as f64 / TIMED as f64;
    Measured {
        vertices: mesh.vertex_count(),
        ms: started.elapsed().as_secs_f64() * 1e3 / TIMED as f64,
        contacts: per_step(contacts),
        self_pairs: per_step(self_pairs),
        zoned: per_step(zoned),
    }
}

/// The tablecloth scene's obstacles: a floor, the table at `table` (m) and the bowl on it.
fn table_obstacles(table: Vec3) -> Vec<ObstacleCollider> {
    vec![
        ObstacleCollider::halfspace(Vec3::y()).expect("a floor"),
        ObstacleCollider::cuboid(Vec3::new(0.55, 0.03, 0.4))
            .expect("a table")
            .with_position(table),
        ObstacleCollider::ball(0.16)
            .expect("a bowl")
            .with_position(table + Vec3::new(0.1, 0.03, 0.0)),
    ]
}

/// One run of the napkin dropped onto the 20 x 20 tablecloth (see the bench's docs).
fn run_layers() -> Measured {
    let gravity = Vec3::new(0.0, -9.81, 0.0);
    let table = Vec3::new(0.0, 0.9, 0.0);
    let obstacles = table_obstacles(table);
    let cloth = |mesh: ClothMesh, material| {
        ClothSystem::new(Arc::new(mesh), material, DT).expect("a cloth")
    };
    let mut tablecloth = cloth(
        ClothMesh::rectangle(1.5, 1.3, 20, 20)
            .expect("a rectangle")
            .mapped(|p| p + table + Vec3::new(0.0, 0.45, 0.0))
            .expect("a rectangle"),
        ClothMaterial::COTTON,
    );
    let mut napkin = cloth(
        ClothMesh::rectangle(0.4, 0.4, 8, 8)
            .expect("a rectangle")
            .mapped(|p| p + table + Vec3::new(-0.3, 0.75, 0.12))
            .expect("a rectangle"),
        ClothMaterial::DENIM,
    );
    let step = |tablecloth: &mut ClothSystem, napkin: &mut ClothSystem| {
        let (standing, before) = (napkin.positions().to_vec(), tablecloth.positions().to_vec());
        let on_napkin = NeighbourCloth {
            id: 1,
            triangles: napkin.mesh().triangles(),
            start: &standing,
            end: &standing,
            thickness: napkin.material().thickness,
        };
        tablecloth
            .step_among_cloths(gravity, Vec3::zeros(), &obstacles, &[on_napkin])
            .expect("a stable step");
        let on_tablecloth = NeighbourCloth {
            id: 0,
            triangles: tablecloth.mesh().triangles(),
            start: &before,
            end: tablecloth.positions(),
            thickness: tablecloth.material().thickness,
        };
        napkin
            .step_among_cloths(gravity, Vec3::zeros(), &obstacles, &[on_tablecloth])
            .expect("a stable step");
        // The tablecloth, underneath, feels the napkin's weight in its next step.
        let on_it: Vec<(usize, Vec3)> = napkin
            .neighbour_impulses()
            .map(|(_, v, j)| (v, j))
            .collect();
        for (v, j) in on_it {
            tablecloth
                .apply_impulse(v, j)
                .expect("a vertex of the tablecloth");
        }
    };
    for _ in 0..WARM {
        step(&mut tablecloth, &mut napkin);
    }
    let started = Instant::now();
    let (mut contacts, mut pairs) = (0, 0);
    for _ in 0..TIMED {
        step(&mut tablecloth, &mut napkin);
        contacts += tablecloth.contact_count() + napkin.contact_count();
        for c in [&tablecloth, &napkin] {
            let (points, edges) = c.neighbour_contact_count();
            pairs += points + edges;
        }
    }
    let per_step = |total: usize| total as f64 / TIMED as f64;
    Measured {
        vertices: tablecloth.positions().len() + napkin.positions().len(),
        ms: started.elapsed().as_secs_f64() * 1e3 / TIMED as f64,
        contacts: per_step(contacts),
        self_pairs: per_step(pairs),
        zoned: 0.0,
    }
}

fn main() {
    println!("cloth: 1/60 s, ten PD iterations (see the bench's docs for the scenes)");
    println!(
        "| scene | cells | vertices | self-collision | threads | ms/step | contacts/step | self pairs/step | zoned/step |"
    );
    println!("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    let mut json = Vec::new();
    for (scene, name, sizes) in [
        (Scene::Flag, "flag", [32, 64]),
        (Scene::WindFlag, "flag, in the wind", [32, 64]),
        (Scene::Tablecloth, "tablecloth", [20, 32]),
        (Scene::Heap, "heap", [32, 64]),
    ] {
        for n in sizes {
            for self_collision in [false, true] {
                for threads in [1, 2] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .expect("a thread pool");
                    let m = pool.install(|| run(n, scene, self_collision));
                    let on = if self_collision { "on" } else { "off" };
                    println!(
                        "| {name} | {n} x {n} | {} | {on} | {threads} | {:.3} | {:.0} | {:.0} | {:.1} |",
                        m.vertices, m.ms, m.contacts, m.self_pairs, m.zoned
                    );
                    json.push(format!(
                        "{{\"scene\": \"{name}\", \"cells\": {n}, \"vertices\": {}, \"self_collision\": {self_collision}, \"threads\": {threads}, \"ms_per_step\": {:.4}, \"contacts_per_step\": {:.1}, \"self_pairs_per_step\": {:.1}, \"zoned_vertices_per_step\": {:.2}}}",
                        m.vertices, m.ms, m.contacts, m.self_pairs, m.zoned
                    ));
                }
            }
        }
    }
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a thread pool");
        let m = pool.install(run_layers);
        println!(
            "| napkin on tablecloth | 20 x 20 + 8 x 8 | {} | off | {threads} | {:.3} | {:.0} | {:.0} (with each other) | - |",
            m.vertices, m.ms, m.contacts, m.self_pairs
        );
        json.push(format!(
            "{{\"scene\": \"napkin_on_tablecloth\", \"cells\": 20, \"vertices\": {}, \"self_collision\": false, \"threads\": {threads}, \"ms_per_step\": {:.4}, \"contacts_per_step\": {:.1}, \"cloth_pairs_per_step\": {:.1}}}",
            m.vertices, m.ms, m.contacts, m.self_pairs
        ));
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    let text = format!("[{}]\n", json.join(", "));
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("cloth.json"), text)) {
        Ok(()) => println!("\nwrote {}", dir.join("cloth.json").display()),
        Err(e) => eprintln!("could not write cloth.json: {e}"),
    }
}
