//! Pile benchmark: the `pile` example's scene without Bevy or a renderer, twenty rubber cubes
//! and balls poured into a bucket, stepped at the example's 64 Hz for the frames its headless
//! run measures (11-240). Every body is awake and most touch each other in one island, so this
//! is the workload of the real-time issue's `pile` goal (under 25 ms a step) on the simulation
//! alone: the example's figure adds the renderer's share of the two cores.
//!
//! `cargo bench --bench pile` prints the mean step, its phases, the PD iterations and residual,
//! and how deep bodies cross (the deepest surface vertex inside another body, sampled every
//! third step outside the timings: the accuracy side of a change to the contacts) as the mean,
//! 90th percentile and largest of the 77 samples. It then steps the pile on to 15 s and
//! prints when the last body landed and whether (and how soon after) every body slept, and
//! writes `target/bench/pile.json`. The pour
//! is chaotic, so a change to the contacts moves the crossing of any one step by chance: the
//! mean and percentile are the steadier yardstick (the largest of 10 samples every 23 steps, the
//! bench's figure before, went from 20 to 31 mm in one session with a change that moved the
//! mean from 5.6 to 7.3 mm). The scene's numbers are the example's (`examples/pile.rs`); keep
//! them in step when either changes.

use std::time::Instant;

use bevy_deformable::sim::{BodyHandle, SavedWorld, SoftWorld, Vec3, WorldSettings};

// The integration tests' crossing measures.
#[path = "../tests/common/mod.rs"]
mod common;

/// The example's fixed step (s).
const DT: f64 = 1.0 / 64.0;
/// Steps run, as the example's headless run draws frames.
const STEPS: usize = 240;
/// Steps before the measured ones (the example measures frames 11 on).
const SKIPPED: usize = 10;
/// Measured steps between two measures of the deepest crossing (outside the timings).
const DEPTH_EVERY: usize = 3;
/// How long (s) the pile is stepped in all, after the timed steps, to see when it sleeps.
const REST_WATCH: f64 = 15.0;
/// A body whose centre moves down faster than this (m/s) is still falling: the pile's last
/// landing is the last step with such a body.
const FALLING_SPEED: f64 = 0.3;

/// The bucket (four box walls around a 1.2 m square, friction 0.3), the floor, and twenty
/// bodies in five layers: cubes and balls of 0.1-0.17 m half size, `E` 100-300 kPa.
fn scene() -> SoftWorld {
    let mut world = SoftWorld::new(WorldSettings::default());
    common::add_bin(&mut world, 0.6, 1.1, 0.05);
    common::add_pile_bodies(&mut world, 20);
    world
}

/// Snapshots and restores timed per call.
const SNAPSHOT_REPEATS: usize = 50;

/// When the pile's bodies last fell and when all of them slept (the real-content issue's "asleep
/// within 3 s of the last landing").
#[derive(Default)]
struct RestWatch {
    /// The last step (0-based) in which some body's centre moved down faster than
    /// [`FALLING_SPEED`].
    last_falling: Option<usize>,
    /// The first step after which every body slept, if it came (and stayed to the end).
    all_asleep: Option<usize>,
}

/// What [`RestWatch`] saw after [`REST_WATCH`] seconds.
struct RestFigures {
    /// Time of the last landing (s).
    last_landing_s: f64,
    /// Seconds from the last landing until every body slept; `None`: not within the watch.
    asleep_after_s: Option<f64>,
    /// Bodies awake at the end of the watch.
    awake_at_end: usize,
    /// Fastest vertex (m/s) of the awake bodies at the end of the watch.
    fastest_awake_m_s: f64,
}

impl RestWatch {
    /// Records step `step`'s falling bodies and sleep.
    fn observe(&mut self, world: &SoftWorld, step: usize) {
        let falling = world.bodies().any(|b| {
            let v = world.velocities(b).expect("a body");
            let down = -v.iter().map(|v| v.y).sum::<f64>() / v.len() as f64;
            down > FALLING_SPEED
        });
        if falling {
            self.last_falling = Some(step);
        }
        let asleep = world.bodies().all(|b| world.is_asleep(b).expect("a body"));
        self.all_asleep = match (asleep, self.all_asleep) {
            (true, None) => Some(step),
            (true, kept) => kept,
            (false, _) => None,
        };
    }

    /// Steps `world` on from step `from` until [`REST_WATCH`] seconds in all, observing.
    fn watch_on(mut self, world: &mut SoftWorld, from: usize) -> RestFigures {
        let total = (REST_WATCH / DT).round() as usize;
        for step in from..total {
            let report = world.step(DT).expect("the pile steps");
            assert!(report.frozen.is_empty(), "step {step}: {:?}", report.frozen);
            self.observe(world, step);
        }
        let time = |step: usize| (step + 1) as f64 * DT;
        let last_landing_s = self.last_falling.map_or(0.0, time);
        let awake: Vec<BodyHandle> = world
            .bodies()
            .filter(|&b| !world.is_asleep(b).expect("a body"))
            .collect();
        let fastest_awake_m_s = awake
            .iter()
            .flat_map(|&b| {
                world
                    .velocities(b)
                    .expect("a body")
                    .iter()
                    .map(|v| v.norm())
            })
            .fold(0.0, f64::max);
        RestFigures {
            last_landing_s,
            asleep_after_s: self.all_asleep.map(|s| time(s) - last_landing_s),
            awake_at_end: awake.len(),
            fastest_awake_m_s,
        }
    }
}

impl RestFigures {
    /// The printed line.
    fn line(&self) -> String {
        let asleep = match self.asleep_after_s {
            Some(s) => format!("every body asleep {s:.2} s after it"),
            None => format!(
                "not all asleep within {REST_WATCH} s: {} bodies awake, fastest vertex {:.3} m/s",
                self.awake_at_end, self.fastest_awake_m_s
            ),
        };
        format!(
            "rest (stepped on to {REST_WATCH} s): last landing at {:.2} s (a centre falling faster than {FALLING_SPEED} m/s), {asleep}",
            self.last_landing_s
        )
    }

    /// The JSON fields.
    fn json(&self) -> String {
        let asleep = self
            .asleep_after_s
            .map_or("null".to_string(), |s| format!("{s:.3}"));
        format!(
            "\"last_landing_s\": {:.3}, \"asleep_after_landing_s\": {asleep}, \"awake_at_end\": {}, \"fastest_awake_m_s\": {:.4}",
            self.last_landing_s, self.awake_at_end, self.fastest_awake_m_s
        )
    }
}

/// The mean time (ms) of a snapshot taken into a reused one and of a restore, on the world as
/// it is (the first snapshot, which allocates, is not timed).
fn snapshot_costs(world: &mut SoftWorld) -> (f64, f64) {
    let mut snapshot = world.snapshot();
    let started = Instant::now();
    for _ in 0..SNAPSHOT_REPEATS {
        world.snapshot_into(&mut snapshot);
    }
    let take = started.elapsed().as_secs_f64() * 1e3 / SNAPSHOT_REPEATS as f64;
    let started = Instant::now();
    for _ in 0..SNAPSHOT_REPEATS {
        world.restore(&snapshot).expect("the world's own snapshot");
    }
    let restore = started.elapsed().as_secs_f64() * 1e3 / SNAPSHOT_REPEATS as f64;
    (take, restore)
}

/// The world's save file: its size (bytes) and the mean time (ms) to save and encode it and
/// to decode and load it.
fn save_file_costs(world: &mut SoftWorld) -> (usize, f64, f64) {
    let started = Instant::now();
    let mut bytes = Vec::new();
    for _ in 0..SNAPSHOT_REPEATS {
        bytes = world.save().to_bytes();
    }
    let save = started.elapsed().as_secs_f64() * 1e3 / SNAPSHOT_REPEATS as f64;
    let started = Instant::now();
    for _ in 0..SNAPSHOT_REPEATS {
        let saved = SavedWorld::from_bytes(&bytes).expect("the world's own save");
        world.load(&saved).expect("the world's own save");
    }
    let load = started.elapsed().as_secs_f64() * 1e3 / SNAPSHOT_REPEATS as f64;
    (bytes.len(), save, load)
}

/// The deepest surface vertex of any body inside another (m): for each vertex strictly inside
/// a deformed tet of another body, its distance to that body's surface (pairs whose bounds
/// overlap).
fn deepest_crossing(world: &SoftWorld) -> f64 {
    let handles: Vec<BodyHandle> = world.bodies().collect();
    let bounds: Vec<(Vec3, Vec3)> = handles
        .iter()
        .map(|&h| {
            world.positions(h).expect("live body").iter().fold(
                (Vec3::repeat(f64::INFINITY), Vec3::repeat(f64::NEG_INFINITY)),
                |(lo, hi), p| (lo.inf(p), hi.sup(p)),
            )
        })
        .collect();
    let mut deepest = 0.0f64;
    for (i, &a) in handles.iter().enumerate() {
        for (j, &b) in handles.iter().enumerate() {
            let ((lo_a, hi_a), (lo_b, hi_b)) = (bounds[i], bounds[j]);
            if i == j || (0..3).any(|k| lo_a[k] > hi_b[k] || lo_b[k] > hi_a[k]) {
                continue;
            }
            deepest = deepest.max(common::penetration(world, a, b));
        }
    }
    deepest
}

fn main() {
    let mut world = scene();
    let bodies = world.bodies().count() as f64;
    let vertices: usize = world
        .bodies()
        .map(|b| world.positions(b).map_or(0, <[Vec3]>::len))
        .sum();
    // Sums over the measured steps (ms; the phases are summed over bodies, so on two cores
    // they add up to about twice the wall time they take).
    let (mut wall, mut local, mut global, mut qp, mut detect) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let (mut pd, mut log_residual, mut largest_island) = (0.0, 0.0, 0usize);
    // Deepest surface vertex inside another body (m), every `DEPTH_EVERY` measured steps.
    let mut crossings = Vec::with_capacity((STEPS - SKIPPED).div_ceil(DEPTH_EVERY));
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let started = Instant::now();
    let mut rest = RestWatch::default();
    for step in 0..STEPS {
        let report = world.step(DT).expect("the pile steps");
        assert!(report.frozen.is_empty(), "step {step}: {:?}", report.frozen);
        rest.observe(&world, step);
        if step < SKIPPED {
            continue;
        }
        wall += ms(report.wall);
        local += ms(report.timings.local);
        global += ms(report.timings.global);
        qp += ms(report.timings.mprgp);
        detect += ms(report.timings.detect);
        pd += report.pd_iterations as f64 / bodies;
        log_residual += report.pd_residual.max(1e-300).ln();
        largest_island = largest_island.max(report.largest_island);
        if (step - SKIPPED).is_multiple_of(DEPTH_EVERY) {
            crossings.push(deepest_crossing(&world));
        }
    }
    let n = (STEPS - SKIPPED) as f64;
    crossings.sort_by(f64::total_cmp);
    let crossing_mean = crossings.iter().sum::<f64>() / crossings.len() as f64;
    let crossing_p90 = crossings[crossings.len() * 9 / 10];
    let deepest = crossings.last().copied().unwrap_or(0.0);
    let residual = (log_residual / n).exp();
    // Per column: its JSON key and the mean per measured step.
    let columns = [
        ("ms_per_step", wall),
        ("ms_local", local),
        ("ms_global", global),
        ("ms_contact_qp", qp),
        ("ms_detect", detect),
        ("pd_iterations", pd),
    ]
    .map(|(key, sum)| (key, sum / n));
    println!(
        "pile: {bodies} bodies, {vertices} vertices, {STEPS} steps of 1/64 s (mean of steps {}..{STEPS}), run {:.1} s",
        SKIPPED + 1,
        started.elapsed().as_secs_f64()
    );
    println!(
        "| ms/step | local | global | contact QP | detect | PD its/step | residual (geomean) | crossing mean / p90 / max (mm) | largest island |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let cells: Vec<String> = columns.iter().map(|(_, v)| format!("{v:.2}")).collect();
    println!(
        "| {} | {residual:.2e} | {:.2} / {:.2} / {:.2} | {largest_island} |",
        cells.join(" | "),
        crossing_mean * 1e3,
        crossing_p90 * 1e3,
        deepest * 1e3
    );
    println!(
        "(phases summed over bodies: CPU time across both threads; the residual is the worst island's at its last iteration; the crossing is the deepest vertex inside another body, sampled every {DEPTH_EVERY} steps: {} samples)",
        crossings.len()
    );
    let rest_figures = rest.watch_on(&mut world, STEPS);
    println!("{}", rest_figures.line());
    let (snapshot_ms, restore_ms) = snapshot_costs(&mut world);
    println!(
        "snapshot of the pile after the run: {snapshot_ms:.3} ms to take (into a reused one), {restore_ms:.3} ms to restore (means of {SNAPSHOT_REPEATS})"
    );
    let (save_bytes, save_ms, load_ms) = save_file_costs(&mut world);
    println!(
        "save file of the pile after the run: {save_bytes} bytes ({} per body), {save_ms:.3} ms to save and encode, {load_ms:.3} ms to decode and load",
        save_bytes / world.bodies().count().max(1)
    );
    let fields: Vec<String> = columns
        .iter()
        .map(|(key, v)| format!("\"{key}\": {v:.4}"))
        .collect();
    let json = format!(
        "{{{}, \"residual\": {residual:.4e}, \"deepest_m\": {deepest:.4e}, \"crossing_mean_m\": {crossing_mean:.4e}, \"crossing_p90_m\": {crossing_p90:.4e}, \"largest_island\": {largest_island}, \"snapshot_ms\": {snapshot_ms:.4}, \"restore_ms\": {restore_ms:.4}, \"save_bytes\": {save_bytes}, \"save_ms\": {save_ms:.4}, \"load_ms\": {load_ms:.4}, {}}}\n",
        fields.join(", "),
        rest_figures.json()
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("pile.json"), &json)) {
        Ok(()) => println!("\nwrote {}", dir.join("pile.json").display()),
        Err(e) => eprintln!("could not write pile.json: {e}"),
    }
}
