//! Drawn-surface contact benchmark: the Stanford bunny (5,002 drawn vertices, about 0.8 m long)
//! in a coarse cage of 5, 7 and 12 cells across, dropped 5 cm onto a floor and left to rest
//! for 3 s at 1/60 s, colliding by its cage or by its drawn surface
//! (`BodyDesc::with_drawn_surface`). One thread.
//!
//! `cargo bench --bench drawn` prints, per cage and mode, the mean step, the PD iterations and
//! relative residual of the last step, and where the lowest drawn point and the lowest cage
//! vertex end (mm above the floor); then two such bunnies, one dropped 5 cm onto the other
//! (5 cm to the side; and squarely, with a compression limit), touching by their drawn meshes
//! (`BodyDesc::with_drawn_mesh`) or by their cages (drawn points against obstacles only): the
//! mean step, the closest the upper bunny's drawn points come to the lower one's drawn
//! triangles, and how many of their drawn triangles cross. It writes
//! `target/bench/drawn.json`.

// The bunny scene shared with `tests/sim_drawn.rs`.
#[path = "../tests/common/mod.rs"]
mod common;

use bevy_deformable::sim::contact::closest_point_on_triangle;
use bevy_deformable::sim::{MaterialParams, Vec3};

const STEPS: usize = 180;

/// One run: the cage's vertices, ms per step, the last step's PD iterations and residual, the
/// lowest drawn point and cage vertex (m).
fn run(cells: usize, drawn: bool) -> (usize, f64, usize, f64, f64, f64) {
    let (mut world, points) = common::bunny::dropped_bunny(cells, drawn);
    let h = world.bodies().next().expect("the bunny");
    let mut wall = 0.0;
    let mut last = (0, 0.0);
    for _ in 0..STEPS {
        let report = world.step(1.0 / 60.0).expect("the bunny steps");
        wall += report.wall.as_secs_f64() * 1e3;
        last = (report.pd_iterations, report.pd_residual);
    }
    let x = world.positions(h).expect("live body");
    let drawn_low = points
        .iter()
        .map(|p| p.position(x).y)
        .fold(f64::INFINITY, f64::min);
    let cage_low = x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min);
    (
        x.len(),
        wall / STEPS as f64,
        last.0,
        last.1,
        drawn_low,
        cage_low,
    )
}

/// How the upper bunny of [`stacked`] is dropped.
#[derive(Clone, Copy)]
enum Landing {
    /// 5 cm to the side of the lower one.
    OffCentre,
    /// Squarely, both bunnies with a compression limit (`StrainLimitParams`, `min_stretch`
    /// 0.5): without it a 5-cell cage is crushed inside out and the upper bunny sinks in, at
    /// seconds per step (docs/PERFORMANCE.md).
    SquarelyLimited,
}

/// Two bunnies in cages of `cells` cells, the upper dropped 5 cm onto the lower as `drop`
/// says, stepped for [`STEPS`] steps; touching by their drawn meshes (`mesh`) or their cages.
/// Returns ms per step, the closest the upper's drawn points come to the lower's drawn
/// triangles (m), the pairs of their drawn triangles that cross, and the lowest drawn point (m).
fn stacked(cells: usize, mesh: bool, drop: Landing) -> (f64, f64, usize, f64) {
    let (shift, material) = match drop {
        Landing::OffCentre => (0.05, MaterialParams::JELLY),
        Landing::SquarelyLimited => (
            0.0,
            common::bunny::compression_limited(MaterialParams::JELLY),
        ),
    };
    let mut scene = common::bunny::stacked_bunnies(cells, shift, material, mesh);
    let mut wall = 0.0;
    for _ in 0..STEPS {
        wall += scene
            .world
            .step(1.0 / 60.0)
            .expect("the bunnies step")
            .wall
            .as_secs_f64()
            * 1e3;
    }
    let (a, b) = (scene.drawn(scene.lower), scene.drawn(scene.upper));
    let triangles = &scene.triangles;
    let corners = |x: &[Vec3], t: &[u32; 3]| t.map(|v| x[v as usize]);
    let boxed = |t: &[Vec3; 3]| (t[0].inf(&t[1]).inf(&t[2]), t[0].sup(&t[1]).sup(&t[2]));
    let lower_triangles: Vec<[Vec3; 3]> = triangles.iter().map(|t| corners(&a, t)).collect();
    let lower_boxes: Vec<(Vec3, Vec3)> = lower_triangles.iter().map(boxed).collect();
    let crossings = common::bunny::crossing_pairs(&a, &b, triangles);
    let mut gap = f64::INFINITY;
    for p in &b {
        for (u, (ulo, uhi)) in lower_triangles.iter().zip(&lower_boxes) {
            // Only triangles whose box comes within the best distance yet can be closer.
            let outside = (0..3)
                .map(|k| (ulo[k] - p[k]).max(p[k] - uhi[k]).max(0.0))
                .fold(0.0, f64::max);
            if outside < gap {
                let q = closest_point_on_triangle(p, &u[0], &u[1], &u[2]).1;
                gap = gap.min((p - q).norm());
            }
        }
    }
    let lowest = a
        .iter()
        .chain(&b)
        .map(|p| p.y)
        .fold(f64::INFINITY, f64::min);
    (wall / STEPS as f64, gap, crossings, lowest)
}

fn main() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a thread pool");
    println!("drawn: the bunny resting on a floor, {STEPS} steps of 1/60 s, one thread");
    println!(
        "| cage cells | cage vertices | collides by | ms/step | PD its (last step) | residual (last step) | lowest drawn point (mm) | lowest cage vertex (mm) |"
    );
    println!("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    let mut json = Vec::new();
    for cells in [5, 7, 12] {
        for drawn in [false, true] {
            let (vertices, ms, its, residual, drawn_low, cage_low) =
                pool.install(|| run(cells, drawn));
            let mode = if drawn { "drawn surface" } else { "cage" };
            println!(
                "| {cells} | {vertices} | {mode} | {ms:.2} | {its} | {residual:.1e} | {:.2} | {:.2} |",
                drawn_low * 1e3,
                cage_low * 1e3
            );
            json.push(format!(
                "{{\"cells\": {cells}, \"vertices\": {vertices}, \"drawn\": {drawn}, \"ms_per_step\": {ms:.4}, \"residual\": {residual:.4e}, \"lowest_drawn_m\": {drawn_low:.4e}, \"lowest_cage_m\": {cage_low:.4e}}}"
            ));
        }
    }
    println!("\ntwo bunnies, one dropped onto the other, {STEPS} steps, one thread");
    println!(
        "| cage cells | touching by | drop | ms/step | closest drawn points (mm) | crossing drawn triangle pairs | lowest drawn point (mm) |"
    );
    println!("| ---: | --- | --- | ---: | ---: | ---: | ---: |");
    let runs = [5, 7]
        .into_iter()
        .flat_map(|cells| [(cells, false), (cells, true)])
        .map(|(cells, mesh)| (cells, mesh, Landing::OffCentre))
        .chain([(5, true, Landing::SquarelyLimited)]);
    for (cells, mesh, drop) in runs {
        let (ms, gap, crossings, lowest) = pool.install(|| stacked(cells, mesh, drop));
        let mode = if mesh { "drawn meshes" } else { "cages" };
        let how = match drop {
            Landing::OffCentre => "off-centre",
            Landing::SquarelyLimited => "squarely, compression limit",
        };
        println!(
            "| {cells} | {mode} | {how} | {ms:.2} | {:.2} | {crossings} | {:.2} |",
            gap * 1e3,
            lowest * 1e3
        );
        json.push(format!(
            "{{\"stacked_cells\": {cells}, \"drawn_mesh\": {mesh}, \"drop\": \"{how}\", \"ms_per_step\": {ms:.4}, \"closest_m\": {gap:.4e}, \"crossings\": {crossings}, \"lowest_drawn_m\": {lowest:.4e}}}"
        ));
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    let text = format!("[{}]\n", json.join(", "));
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("drawn.json"), text)) {
        Ok(()) => println!("\nwrote {}", dir.join("drawn.json").display()),
        Err(e) => eprintln!("could not write drawn.json: {e}"),
    }
}
