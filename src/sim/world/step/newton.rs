//! A body's share of a Newton iteration ([`crate::sim::world::Solver::NewtonMprgp`]; see
//! `sim::world::solver`), in the places of the PD iteration's local step and unconstrained
//! solve, so that islands, contact rows, friction and re-detection are the same for both
//! solvers.
//!
//! At the iterate `x_k` the step's objective `Phi` (inertia, finite-element energy,
//! attachments, grab spring) has the gradient `g_k` and the Newton matrix `H_k`; the
//! linearised step minimises `1/2 x'H_k x - b_k'x` with `b_k = H_k x_k - g_k`, which is the
//! PD global step's form with `H_k` in place of the constant matrix. The island's QP is
//! then eq. 8 of `../shared/papers/mprgp-collision-qp.txt`.
//!
//! The iterate's residual (see the step's `residual` module) is `g_k - J' lambda - f`; the
//! forces the previous QP balanced are `H_(k-1) x_k - b_(k-1) - kkt`, so it takes one product
//! with the previous matrix before the new one is assembled.

use std::time::Instant;

use super::residual;
use crate::sim::math::Vec3;
use crate::sim::qp::SpdOperator;
use crate::sim::world::WorldSettings;
use crate::sim::world::body::SoftBody;
use crate::sim::world::report::FreezeReason;

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
    state.system.evaluate_elements(x);
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
    if first || !state.factored {
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
/// matrix at the iterate and its factor, and the right-hand side `b = H x - g` into `ws.b`.
///
/// # Errors
/// The Newton matrix could not be factored (a non-finite iterate).
pub(super) fn factor_and_rhs(body: &mut SoftBody) -> Result<(), FreezeReason> {
    let SoftBody {
        pd,
        newton,
        ws,
        last_step,
        ..
    } = body;
    let (Some(pd), Some(state)) = (pd.as_ref(), newton.as_mut()) else {
        return Ok(());
    };
    let t = Instant::now();
    let couplings = pd.outer_hessian(&mut state.diagonal);
    state
        .system
        .assemble_newton_matrix(&state.diagonal, couplings, true);
    let factored = state.system.factor_newton_matrix();
    state.factored = factored.is_ok();
    let result = factored.map_err(|e| FreezeReason::Factorization(e.to_string()));
    if result.is_ok() {
        state.system.operator().apply(&state.x_free, &mut ws.b);
        for (b, g) in ws.b.iter_mut().zip(&state.gradient) {
            *b -= g;
        }
        // For the next iterate's residual.
        ws.b_prev.copy_from_slice(&ws.b);
    }
    last_step.0.timings.global += t.elapsed();
    result
}

/// The Newton iteration's unconstrained solve, `x_free = H^-1 (b + force)`, through the factor
/// of this iteration (in f64: the matrix changes every iteration, so there is no standing
/// factor to correct against).
pub(super) fn unconstrained_solve(body: &mut SoftBody, force: &[Vec3]) {
    let SoftBody {
        newton,
        ws,
        last_step,
        ..
    } = body;
    let Some(state) = newton.as_mut() else { return };
    let t = Instant::now();
    let n = ws.b.len();
    ws.x_free.resize(n, Vec3::zeros());
    for (xf, (b, f)) in ws.x_free.iter_mut().zip(ws.b.iter().zip(force)) {
        *xf = b + f;
    }
    state.system.solve_newton_matrix(&mut ws.x_free);
    last_step.0.timings.global += t.elapsed();
}
