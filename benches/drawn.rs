//! Drawn-surface contact benchmark: the Stanford bunny (5,002 drawn vertices, about 0.8 m long)
//! in a coarse cage of 5, 7 and 12 cells across, dropped 5 cm onto a floor and left to rest
//! for 3 s at 1/60 s, colliding by its cage or by its drawn surface
//! (`BodyDesc::with_drawn_surface`). One thread.
//!
//! `cargo bench --bench drawn` prints, per cage and mode, the mean step, the PD iterations and
//! relative residual of the last step, and where the lowest drawn point and the lowest cage
//! vertex end (mm above the floor), and writes `target/bench/drawn.json`.

// The bunny scene shared with `tests/sim_drawn.rs`.
#[path = "../tests/common/mod.rs"]
mod common;

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
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    let text = format!("[{}]\n", json.join(", "));
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("drawn.json"), text)) {
        Ok(()) => println!("\nwrote {}", dir.join("drawn.json").display()),
        Err(e) => eprintln!("could not write drawn.json: {e}"),
    }
}
