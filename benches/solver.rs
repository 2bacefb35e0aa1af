//! Solver benchmark: whole steps of soft bodies dropped on a floor, and MPRGP against dual PGS
//! on one recorded contact QP.
//!
//! `cargo bench --bench solver` prints a table and writes `target/bench/solver.json`.
//! `cargo bench --bench solver -- --quick` skips the 10K and 40K cubes.

use std::sync::Arc;

use bevy_deformable::sim::contact::{RowDecoupler, RowSource, RowSpec, RowTerm, detect_contacts};
use bevy_deformable::sim::pd::{PdSetup, PdSystem, StartStretches, WarmFrames};
use bevy_deformable::sim::qp::ConstraintRow;
use bevy_deformable::sim::qp::mprgp::MprgpSettings;
use bevy_deformable::sim::{
    MaterialParams, ObstacleCollider, Sleeping, SoftWorld, TetMesh, Vec3, WorldSettings,
};

#[path = "common/qp_race.rs"]
mod qp_race;
#[path = "common/timing.rs"]
mod timing;
use qp_race::{print_race, race};
use timing::{median, ms};

const DT: f64 = 1.0 / 60.0;

struct SceneResult {
    name: String,
    vertices: usize,
    tets: usize,
    ms_per_step_median: f64,
    ms_local: f64,
    ms_global: f64,
    ms_contact: f64,
    mprgp_iterations: f64,
    /// PD iterations per step (median of the measured steps after the timed ones).
    pd_iterations: f64,
    /// Relative residual of the implicit step's optimality condition at the end of the
    /// iterations (median of the measured steps after the timed ones).
    residual: f64,
    /// The same measure for ten plain iterations (no acceleration, no tolerance to stop on,
    /// contact QPs solved to 1e-3),
    /// the accuracy the defaults must not fall below (median over the same steps of a run of
    /// its own).
    residual_plain10: f64,
    first_step_ms: f64,
}

/// A world with `mesh` 2 cm above the floor, stepped with `settings` (sleeping off: a body at
/// rest would fall asleep and cost nothing).
fn dropped(mesh: &Arc<TetMesh>, settings: WorldSettings) -> SoftWorld {
    let (lo, _) = mesh.rest_bounds();
    let mut world = SoftWorld::new(WorldSettings {
        sleeping: Sleeping::OFF,
        ..settings
    });
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
    world
}

/// The median residual (see [`SceneResult::residual`]) of `world` over `count` steps, after
/// `skip` unmeasured ones; with the PD iterations per step.
fn measured_residual(world: &mut SoftWorld, skip: usize, count: usize) -> (f64, f64) {
    for _ in 0..skip {
        world.step(DT).expect("valid dt");
    }
    world.settings_mut().measure_residual = true;
    let (mut pd, mut residual) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let r = world.step(DT).expect("valid dt");
        pd.push(r.pd_iterations as f64);
        residual.push(r.residual.expect("measured"));
    }
    (median(&mut pd), median(&mut residual))
}

/// Drops `mesh` from 2 cm above the floor and measures `steps` steps after the first (which
/// includes the factorization) with the default settings, then the residual over up to 20
/// further steps; and the residual of ten plain iterations over the same steps of a run of
/// its own.
fn scene(name: &str, mesh: TetMesh, steps: usize) -> SceneResult {
    let mesh = Arc::new(mesh);
    let mut world = dropped(&mesh, WorldSettings::default());
    let first = world.step(DT).expect("valid dt");
    let (mut total, mut local, mut global, mut contact, mut its) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..steps {
        let r = world.step(DT).expect("valid dt");
        assert!(r.frozen.is_empty(), "{name}: body froze: {:?}", r.frozen);
        total.push(ms(r.wall));
        local.push(ms(r.timings.local));
        global.push(ms(r.timings.global + r.timings.mprgp));
        contact.push(ms(r.timings.detect + r.timings.velocity));
        its.push(r.mprgp_iterations as f64);
    }
    // The residual is measured on further steps, so that its extra local steps stay out of the
    // timings.
    let (pd_iterations, residual) = measured_residual(&mut world, 0, steps.min(20));
    // The reference accuracy: ten plain iterations as the real-time issue found them, their
    // contact QPs solved to 1e-3 (the default QP tolerance then; today's default is a looser
    // cap that the PD tolerance tightens, and without a PD tolerance it would loosen the
    // reference itself).
    let defaults = WorldSettings::default();
    let plain = WorldSettings {
        pd_iterations: 10,
        pd_tolerance: 0.0,
        chebyshev_rho: 0.0,
        anderson_window: 0,
        mprgp: MprgpSettings {
            tolerance: 1e-3,
            ..defaults.mprgp
        },
        ..defaults
    };
    let (_, residual_plain10) =
        measured_residual(&mut dropped(&mesh, plain), 1 + steps, steps.min(20));
    SceneResult {
        pd_iterations,
        residual,
        residual_plain10,
        name: name.to_string(),
        vertices: mesh.vertex_count(),
        tets: mesh.tet_count(),
        ms_per_step_median: median(&mut total),
        ms_local: median(&mut local),
        ms_global: median(&mut global),
        ms_contact: median(&mut contact),
        mprgp_iterations: median(&mut its),
        first_step_ms: ms(first.wall),
    }
}

/// A settled pile: two stacks of three rubber cubes (125 vertices each) on a
/// floor. Returns the median ms per step with everything awake (sleeping off, after 3 s) and
/// with the pile asleep (sleeping on, once every body sleeps).
fn sleeping_pile() -> (f64, f64) {
    let pile = |sleeping: Sleeping| {
        let mut world = SoftWorld::new(WorldSettings {
            sleeping,
            ..WorldSettings::default()
        });
        world
            .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).expect("valid normal"))
            .expect("valid obstacle");
        let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 4));
        for stack in 0..2 {
            for level in 0..3 {
                let at = Vec3::new(
                    0.4 * stack as f64 + 0.013 * level as f64,
                    0.11 + 0.23 * level as f64,
                    -0.007 * level as f64,
                );
                world
                    .add_body(
                        mesh.clone(),
                        MaterialParams::RUBBER.with_youngs_modulus(1e6),
                        at,
                    )
                    .expect("valid body");
            }
        }
        world
    };
    let measure = |world: &mut SoftWorld| {
        let mut t: Vec<f64> = (0..30)
            .map(|_| ms(world.step(DT).expect("valid dt").wall))
            .collect();
        median(&mut t)
    };
    let mut awake = pile(Sleeping::OFF);
    for _ in 0..180 {
        awake.step(DT).expect("valid dt");
    }
    let ms_awake = measure(&mut awake);
    let mut asleep = pile(Sleeping::default());
    for _ in 0..600 {
        if asleep.step(DT).expect("valid dt").sleeping_bodies == 6 {
            break;
        }
    }
    let ms_asleep = measure(&mut asleep);
    (ms_awake, ms_asleep)
}

/// One contact QP of a PD global step: a cube pressed 1 cm into the floor, squashed by its
/// prediction, first PD iteration.
struct RecordedQp {
    pd: PdSystem,
    b: Vec<Vec3>,
    rows: Vec<ConstraintRow>,
}

fn record_qp(resolution: usize) -> RecordedQp {
    let mesh = TetMesh::cuboid(Vec3::repeat(0.5), resolution);
    let material = MaterialParams::RUBBER;
    let mut pd = PdSystem::new(
        &mesh,
        PdSetup {
            material: &material,
            dt: DT,
            pinned: &[],
            attach_stiffness: &[],
            spring: None,
        },
    )
    .expect("factorizable");
    // The body falls at 3 m/s and its bottom is 1 cm above the floor: the prediction penetrates.
    let x: Vec<Vec3> = mesh
        .rest_positions()
        .iter()
        .map(|p| p + Vec3::new(0.0, 0.51, 0.0))
        .collect();
    let y: Vec<Vec3> = x
        .iter()
        .map(|p| p + DT * Vec3::new(0.0, -3.0, 0.0) + DT * DT * Vec3::new(0.0, -9.81, 0.0))
        .collect();
    let mut contributions = vec![[Vec3::zeros(); 4]; mesh.tet_count()];
    // The QP's right-hand side at the prediction, the strain-rate damping's reference shapes
    // those of the step's start.
    let mut frames = WarmFrames::default();
    frames.resize(mesh.tet_count());
    let mut start = StartStretches::default();
    pd.start_stretches(&x, &frames, &mut start);
    pd.local_step(&y, &start, &mut contributions);
    let mut b = vec![Vec3::zeros(); mesh.vertex_count()];
    pd.assemble_rhs(&y, &[], &contributions, &mut b);
    let proxies: Vec<_> = mesh
        .surface_vertices()
        .iter()
        .map(|&v| bevy_deformable::sim::EmbeddedPoint::vertex(v))
        .collect();
    let floor = [ObstacleCollider::halfspace(Vec3::y()).expect("valid normal")];
    let mut contacts = Vec::new();
    let mut scratch = Vec::new();
    detect_contacts(&proxies, &y, &floor, 0.01, &[], &mut scratch, &mut contacts);
    // Decoupled rows, deepest first, as the step builds them.
    contacts.sort_by(|a, b| b.depth.total_cmp(&a.depth).then(a.proxy.cmp(&b.proxy)));
    let mut decoupler = RowDecoupler::default();
    decoupler.reset(pd.free_vertices().len());
    let (mut rows, mut held) = (Vec::new(), Vec::new());
    for c in &contacts {
        let v = proxies[c.proxy as usize].vertices[0] as usize;
        let d = pd.dof_map()[v];
        let term = RowTerm {
            // Nothing is pinned here: every vertex is an unknown.
            unknown: ((d as usize) < pd.free_vertices().len()).then_some(d),
            coeff: c.normal,
            x: y[v],
            held: false,
        };
        let spec = RowSpec {
            rhs: c.normal.dot(&c.point),
            normal: c.normal,
            source: RowSource::Obstacle(c.obstacle),
            hold: false,
        };
        decoupler.add(&[term], spec, &mut rows, &mut held);
    }
    // Keep `pd` usable as a solver: one solve to check it is factored.
    let mut probe = b.clone();
    pd.solve_in_place(&mut probe);
    RecordedQp { pd, b, rows }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let mut scenes = Vec::new();
    let armadillo = TetMesh::from_tetgen(
        include_str!("../assets/meshes/armadillo_4k.node"),
        include_str!("../assets/meshes/armadillo_4k.ele"),
    )
    .expect("armadillo loads");
    // The armadillo file is in its own units (about 100 across): scale to 1 m.
    let (lo, hi) = armadillo.rest_bounds();
    let scale = 1.0 / (hi - lo).max();
    let armadillo = TetMesh::new(
        armadillo
            .rest_positions()
            .iter()
            .map(|p| p * scale)
            .collect(),
        armadillo
            .tets()
            .iter()
            .map(|t| t.map(|i| i as usize))
            .collect(),
    )
    .expect("scaled armadillo valid");
    scenes.push(scene("cube_1k", TetMesh::cuboid(Vec3::repeat(0.5), 9), 120));
    scenes.push(scene("armadillo_1k", armadillo, 120));
    if !quick {
        scenes.push(scene(
            "cube_10k",
            TetMesh::cuboid(Vec3::repeat(0.5), 21),
            30,
        ));
        scenes.push(scene("cube_40k", TetMesh::cuboid(Vec3::repeat(0.5), 33), 8));
    }
    println!(
        "\nWhole steps, dropped on a floor, dt = 1/60 s, default settings (at most 10 PD \
         iterations, stopping at a relative residual of 1e-3; medians, ms):"
    );
    println!(
        "{:<14} {:>8} {:>8} {:>10} {:>8} {:>8} {:>9} {:>7} {:>4} {:>9} {:>9} {:>11}",
        "scene",
        "verts",
        "tets",
        "ms/step",
        "local",
        "global",
        "contact",
        "mprgp",
        "pd",
        "residual",
        "plain 10",
        "first step"
    );
    for s in &scenes {
        println!(
            "{:<14} {:>8} {:>8} {:>10.2} {:>8.2} {:>8.2} {:>9.2} {:>7.0} {:>4.0} {:>9.1e} {:>9.1e} {:>11.1}",
            s.name,
            s.vertices,
            s.tets,
            s.ms_per_step_median,
            s.ms_local,
            s.ms_global,
            s.ms_contact,
            s.mprgp_iterations,
            s.pd_iterations,
            s.residual,
            s.residual_plain10,
            s.first_step_ms
        );
    }
    println!(
        "(pd: PD iterations per step; residual: the implicit step's relative optimality residual \
         at the end of the iterations, `WorldSettings::measure_residual`, over 20 further steps; \
         plain 10: the same for ten iterations without acceleration or tolerance, contact QPs at 1e-3, a run of its own)"
    );

    let (ms_awake, ms_asleep) = sleeping_pile();
    println!(
        "\nSettled pile of six cubes: {ms_awake:.3} ms per step awake, {ms_asleep:.4} ms asleep \
         ({:.2} %)",
        100.0 * ms_asleep / ms_awake
    );

    // MPRGP vs dual PGS on the same QP. `qp.pd` is the operator; `solver` an identical factor
    // that PGS may use mutably.
    let mut qp = record_qp(9);
    let mut solver = record_qp(9).pd;
    let rows = qp.rows.clone();
    let b = qp.b.clone();
    let n = b.len();
    let table = race(&mut qp.pd, &mut solver, &b, &rows, &[1e-2, 1e-4]);
    print_race(
        &format!(
            "Contact QP of a {}-vertex cube on the floor ({} constraints), time to a relative KKT residual:",
            n,
            rows.len()
        ),
        &table,
    );

    // JSON.
    let num = |v: Option<f64>| v.map_or("null".to_string(), |x| format!("{x:.4}"));
    let scenes_json: Vec<String> = scenes
        .iter()
        .map(|s| {
            format!(
                "{{\"name\": \"{}\", \"vertices\": {}, \"tets\": {}, \"ms_per_step_median\": {:.4}, \"ms_local\": {:.4}, \"ms_global\": {:.4}, \"ms_contact\": {:.4}, \"mprgp_iterations\": {:.1}, \"pd_iterations\": {:.1}, \"residual\": {:.3e}, \"residual_plain10\": {:.3e}}}",
                s.name, s.vertices, s.tets, s.ms_per_step_median, s.ms_local, s.ms_global, s.ms_contact, s.mprgp_iterations, s.pd_iterations, s.residual, s.residual_plain10
            )
        })
        .collect();
    let qp_field = |i: usize| {
        let (_, m, p) = &table[i];
        let tm = m.map(|(_, t)| t);
        let tp = p.map(|(_, t)| t);
        let sp = match (tm, tp) {
            (Some(a), Some(b)) => Some(b / a),
            _ => None,
        };
        (num(tm), num(tp), num(sp))
    };
    let (m2, p2, s2) = qp_field(0);
    let (m4, p4, s4) = qp_field(1);
    let json = format!(
        "{{\"scenes\": [{}], \"sleeping\": {{\"ms_awake\": {ms_awake:.4}, \"ms_asleep\": {ms_asleep:.5}, \"ratio\": {:.5}}}, \"qp\": {{\"constraints\": {}, \"mprgp_ms_1e-2\": {m2}, \"pgs_ms_1e-2\": {p2}, \"speedup_mprgp_vs_pgs_1e-2\": {s2}, \"mprgp_ms_1e-4\": {m4}, \"pgs_ms_1e-4\": {p4}, \"speedup_mprgp_vs_pgs_1e-4\": {s4}}}}}\n",
        scenes_json.join(", "),
        ms_asleep / ms_awake,
        rows.len()
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("bench");
    if let Err(e) =
        std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("solver.json"), &json))
    {
        eprintln!("could not write {}: {e}", dir.display());
    } else {
        println!("\nwrote {}", dir.join("solver.json").display());
    }
}
