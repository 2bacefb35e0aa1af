//! A body's share of a Newton iteration ([`crate::sim::world::Solver::NewtonMprgp`]; see
//! `sim::world::solver`), in the places of the PD iteration's local step and unconstrained
//! solve, so that islands, contact rows, friction and re-detection are the same for both
//! solvers.
//!
//! At the iterate `x_k` the step's objective `Phi` (inertia, finite-element energy,
//! attachments, grab spring) has the gradient `g_k` and the Newton matrix `H_k`; the
//! linearised step minimises `1/2 x'H_k x - b_k'x` with `b_k = H_k x_k - g_k`, which is the
//! PD global step's form with `H_k` in place of the constant matrix. The island's QP is
//! then eq. 8 of Li et al. 2015.
//!
//! The iterate's residual (see the step's `residual` module) is `g_k - J' lambda - f`; the
//! forces the previous QP balanced are `H_(k-1) x_k - b_(k-1) - kkt`, so it takes one product
//! with the previous matrix before the new one is assembled.

use std::time::Instant;

use super::residual;
use crate::sim::math::Vec3;
use crate::sim::qp::SpdOperator;
use crate::sim::world::body::SoftBody;
use crate::sim::world::report::FreezeReason;
use crate::sim::world::settings::WorldSettings;
use crate::sim::world::solver::NewtonState;

/// The Newton iteration's first per-body part, at the iterate `x` (the body's positions): the
/// gradient, and the residual of the iterate (or on the step's first iteration its scale), on
/// which the island decides whether to iterate again before anything is factored.
pub(super) fn gradient_and_residual(
    body: &mut SoftBody,
    kkt: &[Vec3],
    first: bool,
    settings: &WorldSettings,
) {
    let SoftBody {
        pd,
        newton,
        x,
        targets,
        ws,
        last_step,
        ..
    } = body;
    let (Some(pd), Some(state)) = (pd.as_ref(), newton.as_mut()) else {
        return;
    };
    let t = Instant::now();
    state.ensure_evaluated(x);
    last_step.0.timings.local += t.elapsed();
    let t = Instant::now();
    let free = pd.free_vertices();
    let n = free.len();
    for (xf, &v) in state.x_free.iter_mut().zip(free) {
        *xf = x[v as usize];
    }
    pd.outer_gradient(x, &ws.y, targets, &mut state.gradient);
    state.system.add_elastic_gradient(&mut state.gradient);
    ws.b.resize(n, Vec3::zeros());
    ws.b_prev.resize(n, Vec3::zeros());
    if first || !state.assembled {
        ws.residual_scale2 = residual::scale2_of_gradient(pd, &state.gradient, &settings.gravity);
        ws.residual2 = ws.residual_scale2;
    } else {
        // `H_(k-1) x_k - g_k`: the right-hand side the previous matrix would have at `x_k`.
        state
            .system
            .operator()
            .apply(&state.x_free, &mut state.product);
        for (p, g) in state.product.iter_mut().zip(&state.gradient) {
            *p -= g;
        }
        ws.residual2 = residual::iterate_residual2(&kkt[..n], &ws.b_prev, &state.product);
    }
    last_step.0.timings.global += t.elapsed();
}

/// The Newton iteration's second per-body part, where the island iterates again: the Newton
/// matrix at the iterate, and the right-hand side `b = H x - g` into `ws.b`.
pub(super) fn assemble_and_rhs(body: &mut SoftBody) {
    let SoftBody {
        pd,
        newton,
        ws,
        last_step,
        ..
    } = body;
    let (Some(pd), Some(state)) = (pd.as_ref(), newton.as_mut()) else {
        return;
    };
    let t = Instant::now();
    let couplings = pd.outer_hessian(&mut state.diagonal);
    state
        .system
        .assemble_newton_matrix(&state.diagonal, couplings, true);
    state.assembled = true;
    state.system.operator().apply(&state.x_free, &mut ws.b);
    for (b, g) in ws.b.iter_mut().zip(&state.gradient) {
        *b -= g;
    }
    // For the next iterate's residual.
    ws.b_prev.copy_from_slice(&ws.b);
    last_step.0.timings.global += t.elapsed();
}

/// Corrections through a standing factor at most, before it is replaced by a factor of the
/// current matrix.
const MAX_CORRECTIONS: usize = 4;

/// The unconstrained solve is done once its defect is this share of the defect at the iterate
/// (dimensionless).
const SOLVE_TOLERANCE: f64 = 1e-9;

/// A correction through a standing factor that leaves more than this share of the defect
/// (dimensionless) shows the factor too far from the current matrix: it is refactored.
const SLOW_CORRECTION: f64 = 0.1;

/// The Newton iteration's unconstrained solve, `x_free = H^-1 (b + force)`, by defect
/// correction from the iterate through the body's standing factor of an earlier Newton matrix,
/// `x += H_old^-1 (b + force - H x)`, refactored only where the corrections stall
/// ([`SLOW_CORRECTION`], [`MAX_CORRECTIONS`]): a body at rest or moving gently keeps one factor
/// for many steps (the factorization is a third of the Newton step of a 1,000-vertex cube),
/// and the solution is the exact Newton step's to [`SOLVE_TOLERANCE`] either way.
///
/// # Errors
/// A Newton matrix could not be factored (a non-finite iterate).
pub(super) fn unconstrained_solve(body: &mut SoftBody, force: &[Vec3]) -> Result<(), FreezeReason> {
    let SoftBody {
        newton,
        ws,
        last_step,
        ..
    } = body;
    let Some(state) = newton.as_mut() else {
        return Ok(());
    };
    let t = Instant::now();
    let n = ws.b.len();
    ws.x_free.resize(n, Vec3::zeros());
    ws.x_free.copy_from_slice(&state.x_free);
    ws.defect.resize(n, Vec3::zeros());
    // The defect `b + force - H x` into `ws.defect`; its norm.
    let defect = |state: &mut NewtonState, x: &[Vec3], b: &[Vec3], out: &mut [Vec3]| {
        state.system.operator().apply(x, out);
        let mut norm2 = 0.0;
        for (d, (b, f)) in out.iter_mut().zip(b.iter().zip(force)) {
            *d = b + f - *d;
            norm2 += d.norm_squared();
        }
        norm2.sqrt()
    };
    let start = defect(state, &ws.x_free, &ws.b, &mut ws.defect);
    // Done at the tolerance, or at the rounding of the defect itself (`H x` and `b + force`
    // are formed to about `eps |b + force|`; at rest the defect at the iterate is that
    // rounding already).
    let scale: f64 =
        ws.b.iter()
            .zip(force)
            .map(|(b, f)| (b + f).norm_squared())
            .sum::<f64>()
            .sqrt();
    let target = (SOLVE_TOLERANCE * start).max(64.0 * f64::EPSILON * scale);
    let mut current = start;
    // The first factor of the body (the friction update solves through it even where the
    // iterate needs no correction).
    let mut corrections = if state.factor_ready {
        0
    } else {
        MAX_CORRECTIONS
    };
    let mut fresh = false;
    let mut result = Ok(());
    while current > target || !state.factor_ready {
        if corrections >= MAX_CORRECTIONS && !fresh {
            let factored = state.system.factor_newton_matrix();
            state.factor_ready = factored.is_ok();
            if let Err(e) = factored {
                result = Err(FreezeReason::Factorization(e.to_string()));
                break;
            }
            fresh = true;
            corrections = 0;
        }
        state.system.solve_newton_matrix(&mut ws.defect);
        for (x, d) in ws.x_free.iter_mut().zip(&ws.defect) {
            *x += d;
        }
        corrections += 1;
        let next = defect(state, &ws.x_free, &ws.b, &mut ws.defect);
        if next > SLOW_CORRECTION * current && !fresh {
            // Too far from the matrix: refactor before the next correction.
            corrections = MAX_CORRECTIONS;
        } else if fresh && corrections >= MAX_CORRECTIONS {
            // A fresh factor that does not converge: rounding at the solution.
            break;
        }
        current = next;
    }
    last_step.0.timings.global += t.elapsed();
    result
}
