//! The MPRGP paper's figure scenes (Li et al. 2015, Table 1) with the
//! world's Newton-MPRGP solver at the paper's sizes and time steps, and its comparison of MPRGP
//! with ICA-style projected Gauss-Seidel (Fig. 10) on a recorded Newton-step QP.
//!
//! The paper's dragon and dinosaur are not among the test meshes; every scene uses a lattice
//! mesh of about the paper's vertex count instead (its tet count then differs: a lattice has
//! about five tets per vertex, the paper's meshes three to five):
//!
//! | paper | stand-in | motion |
//! | --- | --- | --- |
//! | Fig. 3 dragon, 46,736 vertices, h = 10 ms | a cage around the Stanford bunny (`TetMesh::try_enclosing`) | dropped onto the floor at 3 m/s |
//! | Fig. 4 bunny against a fixed glass, 40,107, h = 3 ms | a cage around the bunny | thrown at 3 m/s against a fixed wall |
//! | Fig. 5 dinosaur, 11,944, h = 5 ms | a cage around the armadillo's surface | dropped onto the floor at 3 m/s |
//! | Fig. 12, 9,537 / 49,152, h = 10 ms | the same 16 x 16 x 32-cell box lattice (9,537 vertices) | dropped onto the floor at 3 m/s |
//!
//! Each scene runs one Newton iteration per step (as the paper), rubber at E = 2e5 Pa, nu 0.4,
//! default MPRGP settings (Jacobi-preconditioned, tolerance 1e-3 relative about the inertial
//! prediction), and reports over the steps with contact rows: the QP's time per Newton step
//! (`PhaseTimings::qp_solve`: MPRGP alone), MPRGP iterations and their CG share, beside the
//! paper's figures (an Intel E7500 of 2009; the paper's text gives the times in milliseconds,
//! its table's caption in seconds). The paper runs 200-600 frames; here `STEPS` steps from
//! first contact (fewer with `--quick`). Beside them, the time of one product with each
//! scene's Newton matrix on this machine and how many such products the paper's figure read
//! in milliseconds would allow: 6 to 28, too few for its warm-started power method (up to 40
//! products, included in its times: section 6.1) and MPRGP's product per iteration, so the
//! figures are seconds, as the caption says.
//!
//! Before them, a table of MPRGP's variants ([`CgChain`], [`ExpansionSafeguard`]: the paper's
//! Alg. 2 and 3 against the feasible chain and step halving) on one recorded Newton-step QP of
//! the Fig. 12 box, of rubber and of a stiff material.
//!
//! `cargo bench --bench paper` prints the tables and writes `target/bench/paper.json`;
//! `-- --variants` prints only the variants table.

use std::sync::Arc;
use std::time::Instant;

use bevy_deformable::sim::fem::{FemModel, Lame, NewtonSetup, NewtonSystem};
use bevy_deformable::sim::qp::mprgp::{
    CgChain, ExpansionSafeguard, Mprgp, MprgpSettings, MprgpStats,
};
use bevy_deformable::sim::qp::{ConstraintRow, QpProblem, SpdOperator, kkt_residual};
use bevy_deformable::sim::{
    MaterialParams, ObstacleCollider, Sleeping, SoftWorld, Solver, TetMesh, TriangleSurface, Vec3,
    WorldSettings,
};

#[path = "common/qp_race.rs"]
mod qp_race;
#[path = "common/timing.rs"]
mod timing;
use qp_race::{CapTime, print_race, race, speedup};

/// Steps measured per scene from the first step with contact rows (a Newton step of the
/// 46K-vertex scene takes seconds on this project's 2-core machine).
const STEPS: usize = 10;
/// With `--quick`.
const QUICK_STEPS: usize = 4;

/// The bench's material: rubber at E = 2e5 Pa, nu = 0.4.
fn rubber() -> MaterialParams {
    MaterialParams::RUBBER
        .with_youngs_modulus(2e5)
        .with_poisson_ratio(0.4)
}

/// A row of Table 1.
struct Scene {
    name: &'static str,
    mesh: TetMesh,
    /// Time step (s).
    h: f64,
    /// The paper's QP time per Newton step (ms) and CG share.
    paper_ms: f64,
    paper_cg: f64,
    /// Thrown against a wall instead of dropped onto the floor.
    wall: bool,
}

struct SceneResult {
    name: &'static str,
    vertices: usize,
    tets: usize,
    h: f64,
    steps: usize,
    qp_ms: f64,
    step_ms: f64,
    cg_share: f64,
    iterations: f64,
    rows: f64,
    paper_ms: f64,
    paper_cg: f64,
    /// Median time of one product with the scene's Newton matrix on this machine (ms): the
    /// scalar CSR matrix's and the Jacobi-scaled block copy's MPRGP iterates with.
    csr_product_ms: f64,
    scaled_product_ms: f64,
}

/// The lattice cage around `surface` whose vertex count is nearest `target` (searched over
/// the cells across).
fn cage_near(surface: &TriangleSurface, target: usize) -> TetMesh {
    let (mut lo, mut hi) = (4usize, 160usize);
    let mut best: Option<TetMesh> = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let Ok(mesh) = TetMesh::try_enclosing(surface, mid) else {
            // Past the lattice's cell limit: too fine.
            hi = mid - 1;
            continue;
        };
        let n = mesh.vertex_count();
        let closer = best
            .as_ref()
            .is_none_or(|b| n.abs_diff(target) < b.vertex_count().abs_diff(target));
        let too_many = n > target;
        if closer {
            best = Some(mesh);
        }
        if too_many {
            hi = mid - 1;
        } else {
            lo = mid + 1;
        }
    }
    best.expect("searched at least once")
}

fn scenes() -> Vec<Scene> {
    let bunny = TriangleSurface::from_obj(include_str!("../assets/meshes/bunny_10k.obj"))
        .expect("the bunny parses");
    let armadillo = TetMesh::from_tetgen(
        include_str!("../assets/meshes/armadillo_4k.node"),
        include_str!("../assets/meshes/armadillo_4k.ele"),
    )
    .expect("the armadillo parses");
    let armadillo_surface = TriangleSurface::new(
        armadillo.rest_positions().to_vec(),
        armadillo
            .surface_triangles()
            .iter()
            .map(|t| t.map(|i| i as usize))
            .collect(),
    )
    .expect("a closed surface");
    // Scaled to about a metre.
    let metre = |s: &TriangleSurface| {
        let (lo, hi) = bevy_deformable::sim::mesh::bounds(s.positions());
        s.transformed(1.0 / (hi - lo).max(), Vec3::zeros())
    };
    vec![
        Scene {
            name: "Fig. 3 dragon (bunny cage)",
            mesh: cage_near(&metre(&bunny), 46_736),
            h: 0.010,
            paper_ms: 36.4,
            paper_cg: 0.994,
            wall: false,
        },
        Scene {
            name: "Fig. 4 bunny vs glass",
            mesh: cage_near(&metre(&bunny), 40_107),
            h: 0.003,
            paper_ms: 24.5,
            paper_cg: 0.991,
            wall: true,
        },
        Scene {
            name: "Fig. 5 dino (armadillo)",
            mesh: cage_near(&metre(&armadillo_surface), 11_944),
            h: 0.005,
            paper_ms: 5.13,
            paper_cg: 0.990,
            wall: false,
        },
        Scene {
            name: "Fig. 12 box 16x16x32",
            mesh: TetMesh::cuboid(Vec3::new(0.25, 0.25, 0.5), 32),
            h: 0.010,
            paper_ms: 1.72,
            paper_cg: 0.998,
            wall: false,
        },
    ]
}

/// Runs `scene` with the Newton-MPRGP solver: the body 1 cm from the floor (or the wall)
/// moving towards it at 3 m/s, `steps` steps from the first with contact rows.
fn run(scene: Scene, steps: usize) -> SceneResult {
    let mesh = Arc::new(scene.mesh);
    let (csr_product_ms, scaled_product_ms) = product_ms(&mesh, scene.h);
    let (lo, hi) = mesh.rest_bounds();
    let mut world = SoftWorld::new(WorldSettings {
        solver: Solver::NewtonMprgp,
        // The paper's one Newton iteration per step.
        newton_iterations: 1,
        sleeping: Sleeping::OFF,
        gravity: if scene.wall {
            Vec3::zeros()
        } else {
            Vec3::new(0.0, -9.81, 0.0)
        },
        ..WorldSettings::default()
    });
    let (offset, velocity, obstacle) = if scene.wall {
        (
            Vec3::new(-hi.x - 0.01, 0.0, 0.0),
            Vec3::new(3.0, 0.0, 0.0),
            ObstacleCollider::halfspace(-Vec3::x()).expect("unit normal"),
        )
    } else {
        (
            Vec3::new(0.0, -lo.y + 0.01, 0.0),
            Vec3::new(0.0, -3.0, 0.0),
            ObstacleCollider::halfspace(Vec3::y()).expect("unit normal"),
        )
    };
    let body = world
        .add_body(mesh.clone(), rubber(), offset)
        .expect("valid body");
    world.add_obstacle(obstacle).expect("valid obstacle");
    world
        .velocities_mut(body)
        .expect("live body")
        .iter_mut()
        .for_each(|v| *v = velocity);
    let (mut qp, mut step, mut its, mut cg, mut rows, mut counted) = (0.0, 0.0, 0, 0, 0, 0);
    for _ in 0..steps + 20 {
        let report = world.step(scene.h).expect("valid settings");
        assert!(
            report.frozen.is_empty(),
            "{}: {:?}",
            scene.name,
            report.frozen
        );
        if report.constraints == 0 && counted == 0 {
            continue;
        }
        qp += report.timings.qp_solve.as_secs_f64() * 1e3;
        step += report.wall.as_secs_f64() * 1e3;
        its += report.mprgp_iterations;
        cg += report.mprgp_cg_steps;
        rows += report.constraints;
        counted += 1;
        if counted == steps {
            break;
        }
    }
    let n = counted.max(1) as f64;
    SceneResult {
        name: scene.name,
        vertices: mesh.vertex_count(),
        tets: mesh.tet_count(),
        h: scene.h,
        steps: counted,
        qp_ms: qp / n,
        step_ms: step / n,
        cg_share: cg as f64 / its.max(1) as f64,
        iterations: its as f64 / n,
        rows: rows as f64 / n,
        paper_ms: scene.paper_ms,
        paper_cg: scene.paper_cg,
        csr_product_ms,
        scaled_product_ms,
    }
}

/// The fixed-corotated Newton system of `mesh` in `material`, nothing pinned.
fn corotated_system(mesh: &TetMesh, material: MaterialParams) -> NewtonSystem {
    NewtonSystem::new(
        mesh,
        NewtonSetup {
            model: FemModel::FixedCorotated,
            lame: Lame::of(&material),
            density: material.density,
            pinned: &[],
        },
    )
    .expect("valid system")
}

/// Median times (ms) of one product with `mesh`'s Newton matrix at rest, rubber, time step
/// `h` (both threads): through the scalar CSR matrix, and the Jacobi-scaled one through its
/// block copy (MPRGP's product).
///
/// The paper's QP times include its power method for `||A||` (section 6.1: warm-started,
/// "convergent within 40 iterations"), one product each, besides MPRGP's own product per
/// iteration: `paper_ms / scaled_product_ms` bounds how many products its time would allow on
/// this machine.
fn product_ms(mesh: &TetMesh, h: f64) -> (f64, f64) {
    let mut system = corotated_system(mesh, rubber());
    system.evaluate_elements(mesh.rest_positions());
    let diagonal: Vec<f64> = system.masses().iter().map(|m| m / (h * h)).collect();
    system.assemble_newton_matrix(&diagonal, [], true);
    let operator = system.operator();
    let n = operator.len();
    let x: Vec<Vec3> = (0..n)
        .map(|i| Vec3::new((i % 7) as f64, 1.0, -((i % 3) as f64)))
        .collect();
    let (mut scale, mut tmp, mut out) = (
        vec![Vec3::zeros(); n],
        vec![Vec3::zeros(); n],
        vec![Vec3::zeros(); n],
    );
    operator.jacobi_scale(&mut scale);
    let mut time = |f: &mut dyn FnMut(&mut [Vec3], &mut [Vec3])| {
        let mut samples: Vec<f64> = (0..21)
            .map(|_| {
                let t = Instant::now();
                f(&mut tmp, &mut out);
                timing::ms(t.elapsed())
            })
            .collect();
        timing::median(&mut samples)
    };
    let csr = time(&mut |_, out| operator.apply(&x, out));
    let scaled = time(&mut |tmp, out| operator.apply_scaled(&scale, &x, tmp, out));
    (csr, scaled)
}

/// One Newton-step QP of the Fig. 12 box landing: the box (of `material`) 1 cm above the
/// floor, falling at 3 m/s, the Newton matrix at its (undeformed) state, `b = H x - g`, and a
/// floor row for every vertex whose prediction is within 1 cm of the floor (single-vertex rows:
/// decoupled).
fn record_newton_qp(material: MaterialParams) -> (NewtonSystem, Vec<Vec3>, Vec<ConstraintRow>) {
    let h = 0.010;
    let mesh = TetMesh::cuboid(Vec3::new(0.25, 0.25, 0.5), 32);
    let mut system = corotated_system(&mesh, material);
    let (lo, _) = mesh.rest_bounds();
    let x: Vec<Vec3> = mesh
        .rest_positions()
        .iter()
        .map(|p| p + Vec3::new(0.0, -lo.y + 0.01, 0.0))
        .collect();
    let velocity = Vec3::new(0.0, -3.0, 0.0);
    let gravity = Vec3::new(0.0, -9.81, 0.0);
    let y: Vec<Vec3> = x
        .iter()
        .map(|p| p + h * velocity + h * h * gravity)
        .collect();
    let inertia = 1.0 / (h * h);
    let masses = system.masses().to_vec();
    // The elastic forces vanish at the rest shape: `g = M/h^2 (x - y)`.
    let g: Vec<Vec3> = x
        .iter()
        .zip(&y)
        .zip(&masses)
        .map(|((x, y), m)| inertia * m * (x - y))
        .collect();
    system.evaluate_elements(&x);
    let diagonal: Vec<f64> = masses.iter().map(|m| inertia * m).collect();
    system.assemble_newton_matrix(&diagonal, [], true);
    system.factor_newton_matrix().expect("SPD");
    let mut b = vec![Vec3::zeros(); x.len()];
    bevy_deformable::sim::qp::SpdOperator::apply(&system, &x, &mut b);
    for (b, g) in b.iter_mut().zip(&g) {
        *b -= g;
    }
    let rows = y
        .iter()
        .enumerate()
        .filter(|(_, p)| p.y < 0.01)
        .map(|(i, _)| ConstraintRow::single(i as u32, Vec3::y(), 0.0))
        .collect();
    (system, b, rows)
}

/// The relative KKT residual of the variants table.
const VARIANT_TARGET: f64 = 1e-4;

/// One MPRGP variant's solve of a recorded QP.
struct VariantRun {
    stats: MprgpStats,
    /// Median time of five solves, the start solve excluded (ms).
    ms: f64,
    /// Relative KKT residual reached.
    kkt: f64,
}

/// Solves `1/2 x'Ax - b'x` subject to `rows` from the unconstrained solution with one MPRGP
/// variant to [`VARIANT_TARGET`].
fn variant_run(
    system: &mut NewtonSystem,
    b: &[Vec3],
    rows: &[ConstraintRow],
    chain: CgChain,
    safeguard: ExpansionSafeguard,
) -> VariantRun {
    let mut start = b.to_vec();
    system.solve_newton_matrix(&mut start);
    let problem = QpProblem {
        a: &*system,
        b,
        rows,
    };
    let mut mprgp = Mprgp::new(MprgpSettings {
        tolerance: VARIANT_TARGET,
        max_iterations: 5000,
        chain,
        safeguard,
        ..MprgpSettings::default()
    });
    let (mut times, mut stats, mut kkt) = (Vec::new(), MprgpStats::default(), 0.0);
    for _ in 0..5 {
        let mut x = start.clone();
        let t = Instant::now();
        stats = mprgp.solve(&problem, &mut x).expect("valid QP");
        times.push(timing::ms(t.elapsed()));
        kkt = kkt_residual(&problem, &x).relative;
    }
    VariantRun {
        stats,
        ms: timing::median(&mut times),
        kkt,
    }
}

/// A variants table row: material, chain, safeguard and the run.
type VariantRow = (&'static str, CgChain, ExpansionSafeguard, VariantRun);

/// Prints the variants table and returns its rows.
fn variants_table() -> Vec<VariantRow> {
    // The CG chain and the expansion safeguard of MPRGP (the paper's Alg. 2 and 3 against
    // the feasible chain and step halving) on the same QP, and on that of a stiff box.
    println!(
        "\nMPRGP variants on the Fig. 12 box's Newton-step QP from the unconstrained solution, to a relative KKT residual of {VARIANT_TARGET:e} (median of 5 solves):"
    );
    println!(
        "material      chain     safeguard          its    cg  infeasible  expansions  proportioning      ms   KKT"
    );
    let mut variants = Vec::new();
    for (label, material) in [
        ("rubber 2e5", rubber()),
        ("stiff 1e7", rubber().with_youngs_modulus(1e7)),
    ] {
        let (mut system, b, rows) = record_newton_qp(material);
        for (chain, safeguard) in MprgpSettings::variants() {
            let v = variant_run(&mut system, &b, &rows, chain, safeguard);
            println!(
                "{:<13} {:<9} {:<16} {:>5} {:>5} {:>11} {:>11} {:>14} {:>7.2} {:>5.0e}",
                label,
                format!("{chain:?}"),
                format!("{safeguard:?}"),
                v.stats.iterations,
                v.stats.cg_steps,
                v.stats.infeasible_cg_steps,
                v.stats.expansion_steps,
                v.stats.proportioning_steps,
                v.ms,
                v.kkt
            );
            variants.push((label, chain, safeguard, v));
        }
    }

    variants
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let steps = if quick { QUICK_STEPS } else { STEPS };
    let variants = variants_table();
    if std::env::args().any(|a| a == "--variants") {
        return;
    }
    let t = Instant::now();
    let scenes = scenes();
    println!("meshes built in {:.1} s", t.elapsed().as_secs_f64());
    let results: Vec<SceneResult> = scenes.into_iter().map(|s| run(s, steps)).collect();
    println!(
        "\nTable 1 of the MPRGP paper with the Newton-MPRGP solver (one Newton iteration per step, rubber 2e5 Pa), means over the steps with contact:"
    );
    println!(
        "scene                       verts    tets   h (ms)  steps  rows/step  QP ms/step  paper t (s)  MPRGP its  cg/it  paper cg/it  whole step ms  product ms (CSR / scaled blocks)  products in paper ms"
    );
    for r in &results {
        println!(
            "{:<26} {:>6} {:>7} {:>8.0} {:>6} {:>10.0} {:>11.2} {:>12.2} {:>10.1} {:>6.3} {:>12.3} {:>14.1}  {:>14.3} / {:<14.3}  {:>20.1}",
            r.name,
            r.vertices,
            r.tets,
            r.h * 1e3,
            r.steps,
            r.rows,
            r.qp_ms,
            r.paper_ms,
            r.iterations,
            r.cg_share,
            r.paper_cg,
            r.step_ms,
            r.csr_product_ms,
            r.scaled_product_ms,
            r.paper_ms / r.scaled_product_ms
        );
    }

    // Fig. 10: MPRGP against ICA-style projected Gauss-Seidel on the dual, same QP (the dual
    // solver's `A^-1` through a second copy of the same factor: the problem borrows the first).
    let (mut system, b, rows) = record_newton_qp(rubber());
    let (mut solver, _, _) = record_newton_qp(rubber());
    let n = b.len();
    let table = race(&mut system, &mut solver, &b, &rows, &[1e-2, 1e-4]);
    print_race(
        &format!(
            "Fig. 10: the Newton-step QP of the Fig. 12 box landing ({} vertices, {} rows), time to a relative KKT residual, both from the unconstrained solution:",
            n,
            rows.len()
        ),
        &table,
    );

    // JSON.
    let num = |v: Option<f64>| v.map_or("null".to_string(), |x| format!("{x:.4}"));
    let table1: Vec<String> = results
        .iter()
        .map(|r| {
            format!(
                "{{\"name\": \"{}\", \"vertices\": {}, \"tets\": {}, \"qp_ms_per_step\": {:.4}, \"paper_qp_ms\": {}, \"cg_share\": {:.4}, \"iterations\": {:.2}, \"product_ms\": {:.4}, \"products_in_paper_ms\": {:.2}}}",
                r.name, r.vertices, r.tets, r.qp_ms, r.paper_ms, r.cg_share, r.iterations, r.scaled_product_ms, r.paper_ms / r.scaled_product_ms
            )
        })
        .collect();
    let entry = |(target, m, p): &(f64, CapTime, CapTime)| {
        format!(
            "{{\"residual\": {:e}, \"mprgp_ms\": {}, \"mprgp_iterations\": {}, \"pgs_ms\": {}, \"pgs_sweeps\": {}}}",
            target,
            num(m.map(|x| x.1)),
            m.map_or("null".to_string(), |x| x.0.to_string()),
            num(p.map(|x| x.1)),
            p.map_or("null".to_string(), |x| x.0.to_string())
        )
    };
    let variants_json: Vec<String> = variants
        .iter()
        .map(|(label, chain, safeguard, v)| {
            format!(
                "{{\"material\": \"{label}\", \"chain\": \"{chain:?}\", \"safeguard\": \"{safeguard:?}\", \"iterations\": {}, \"cg_steps\": {}, \"infeasible_cg_steps\": {}, \"expansion_steps\": {}, \"ms\": {:.4}, \"kkt\": {:e}}}",
                v.stats.iterations,
                v.stats.cg_steps,
                v.stats.infeasible_cg_steps,
                v.stats.expansion_steps,
                v.ms,
                v.kkt
            )
        })
        .collect();
    let json = format!(
        "{{\"table1\": [{}], \"variants\": [{}], \"convergence\": {{\"vertices\": {}, \"rows\": {}, \"targets\": [{}], \"speedup_mprgp_vs_pgs_1e-2\": {}, \"speedup_mprgp_vs_pgs_1e-4\": {}}}}}\n",
        table1.join(", "),
        variants_json.join(", "),
        n,
        rows.len(),
        table.iter().map(entry).collect::<Vec<_>>().join(", "),
        num(speedup(&table[0].1, &table[0].2)),
        num(speedup(&table[1].1, &table[1].2))
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("paper.json"), &json))
    {
        Ok(()) => println!("\nwrote {}", dir.join("paper.json").display()),
        Err(e) => eprintln!("could not write paper.json: {e}"),
    }
}
