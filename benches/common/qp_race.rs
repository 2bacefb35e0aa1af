//! MPRGP against ICA-style dual projected Gauss-Seidel on one recorded contact QP: the time
//! each takes to a relative KKT residual, both from the unconstrained solution (PGS: no
//! contact force), shared by the `solver` and `paper` benches.

use std::time::Instant;

use bevy_deformable::sim::Vec3;
use bevy_deformable::sim::qp::mprgp::{Mprgp, MprgpSettings};
use bevy_deformable::sim::qp::pgs::{DualPgs, PgsSettings};
use bevy_deformable::sim::qp::{ConstraintRow, QpProblem, SpdSolve, kkt_residual};

use super::timing::time_to_residual;

/// What [`time_to_residual`] found: the cap and its median time (ms), if reached.
pub type CapTime = Option<(usize, f64)>;

/// Per residual target: (target, MPRGP's iterations and ms, PGS's sweeps and ms).
pub type Race = Vec<(f64, CapTime, CapTime)>;

/// Races MPRGP and dual PGS on `1/2 x'Ax - b'x` subject to `rows` to each of `targets`; `a`
/// is the operator (and MPRGP's start solve), `solver` a second copy of the same matrix for
/// PGS's `A^-1` (the problem borrows `a` meanwhile).
pub fn race<A: SpdSolve>(
    a: &mut A,
    solver: &mut A,
    b: &[Vec3],
    rows: &[ConstraintRow],
    targets: &[f64],
) -> Race {
    let n = b.len();
    let mut mprgp = Mprgp::new(MprgpSettings::default());
    let mut pgs = DualPgs::new(PgsSettings::default());
    let mut table = Vec::new();
    for &target in targets {
        let mprgp_result = time_to_residual(
            |cap| {
                let t = Instant::now();
                let mut x = b.to_vec();
                a.solve_in_place(&mut x);
                mprgp.settings = MprgpSettings {
                    tolerance: 0.0,
                    max_iterations: cap,
                    ..MprgpSettings::default()
                };
                let problem = QpProblem { a: &*a, b, rows };
                mprgp.solve(&problem, &mut x).expect("valid QP");
                let d = t.elapsed();
                (kkt_residual(&problem, &x).relative, d)
            },
            target,
            100_000,
        );
        let pgs_result = time_to_residual(
            |cap| {
                let t = Instant::now();
                let mut x = vec![Vec3::zeros(); n];
                let problem = QpProblem { a: &*a, b, rows };
                pgs.setup(&problem, solver).expect("valid QP");
                pgs.sweep(cap);
                pgs.primal(&problem, solver, &mut x);
                let d = t.elapsed();
                (kkt_residual(&problem, &x).relative, d)
            },
            target,
            200_000,
        );
        table.push((target, mprgp_result, pgs_result));
    }
    table
}

/// PGS's time over MPRGP's, where both reached the target.
pub fn speedup(m: &CapTime, p: &CapTime) -> Option<f64> {
    match (m, p) {
        (Some((_, tm)), Some((_, tp))) => Some(tp / tm),
        _ => None,
    }
}

/// Prints the race as a table under `title`.
pub fn print_race(title: &str, race: &Race) {
    println!("\n{title}");
    println!(
        "{:>9} {:>16} {:>16} {:>9}",
        "residual", "MPRGP ms (its)", "PGS ms (sweeps)", "speed-up"
    );
    let fmt = |r: &CapTime| match r {
        Some((k, t)) => format!("{t:.3} ({k})"),
        None => "not reached".to_string(),
    };
    for (target, m, p) in race {
        println!(
            "{:>9.0e} {:>16} {:>16} {:>9}",
            target,
            fmt(m),
            fmt(p),
            speedup(m, p).map_or("-".to_string(), |s| format!("{s:.1}x"))
        );
    }
}
