//! The convergence measure of the PD iterations: the relative residual of the implicit step's
//! optimality condition, which the iterations stop on ([`WorldSettings::pd_tolerance`]) and
//! [`WorldSettings::measure_residual`] reports.
//!
//! One implicit Euler step with contact minimises the PD objective `Phi`
//! ([`crate::sim::pd`]) subject to the contact rows; at its solution the gradient of `Phi` is
//! balanced by the contact forces `J' lambda` and the friction forces `f`:
//!
//! `r(x) = grad Phi(x) - J' lambda - f = 0` (over the free vertices).
//!
//! The residual is relative to the step's scale `max(||grad Phi(x_0)||, ||M g||)`: the
//! gradient at the first iterate `x_0 = x + h v` (the elastic and attachment forces there, less
//! the weight), or the body's weight where that is larger (a body at rest starts at its
//! solution, where the gradient is rounding; measured against it, rounding would never
//! converge).
//!
//! **In the iterations.** `grad Phi(x) = A x - b(x)`, with `b(x)` the right-hand side of the
//! local step at `x`. The iterate `x_k` is the constrained step's solution for `b_qp = b(x_{k-1})`
//! plus the applied reactions and friction, so `A x_k - b_qp - J' lambda = kkt_k` is what the QP
//! left (zero if solved exactly), and
//!
//! `r(x_k) = kkt_k + b(x_{k-1}) - b(x_k)`:
//!
//! the next iteration's local step, which computes `b(x_k)` anyway, yields the residual of
//! `x_k` at the cost of one pass over the vertices. An island stops where its residual (summed
//! over its members, against their summed scales) reaches the tolerance; that iteration's
//! local step is then the only work spent on measuring.
//!
//! **Measured** ([`WorldSettings::measure_residual`]): after the last iteration, one extra local
//! step and product with the global matrix per body, on scratch buffers, so the simulation is
//! the same with the measure on or off; reported in [`super::super::BodyStepStats::residual`]
//! and [`super::super::StepReport::residual`].

use rayon::prelude::*;

use super::state::StepState;
use crate::sim::math::Vec3;
use crate::sim::pd::PdSystem;
use crate::sim::world::body::SoftBody;
use crate::sim::world::island::NO_ISLAND;
use crate::sim::world::settings::WorldSettings;

/// The squared residual scale `max(||grad Phi(x_0)||, ||M g||)^2` of a step (N^2), from the
/// first iterate `x_0` (all vertices) and the right-hand side `b` there (free vertices);
/// `positions` and `gradient` are scratch.
pub(crate) fn scale2(
    pd: &PdSystem,
    x_0: &[Vec3],
    b: &[Vec3],
    gravity: &Vec3,
    positions: &mut Vec<Vec3>,
    gradient: &mut Vec<Vec3>,
) -> f64 {
    positions.clear();
    positions.extend(pd.free_vertices().iter().map(|&v| x_0[v as usize]));
    gradient.resize(b.len(), Vec3::zeros());
    pd.gradient(positions, b, gradient);
    scale2_of_gradient(pd, gradient, gravity)
}

/// The squared residual scale `max(||g||, ||M g||)^2` (N^2) of a step whose first iterate has
/// the gradient `gradient` (free vertices).
pub(crate) fn scale2_of_gradient(pd: &PdSystem, gradient: &[Vec3], gravity: &Vec3) -> f64 {
    norm(gradient).powi(2).max(weight2(pd, gravity))
}

/// `||M g||^2` over the free vertices (N^2).
fn weight2(pd: &PdSystem, gravity: &Vec3) -> f64 {
    let m = pd.masses();
    pd.free_vertices()
        .iter()
        .map(|&v| m[v as usize].powi(2))
        .sum::<f64>()
        * gravity.norm_squared()
}

/// `||kkt + b_prev - b||^2` (N^2): the squared residual of an iterate from the QP's leftover
/// `kkt` of the step that produced it, the right-hand side `b_prev` it was solved with, and
/// the right-hand side `b` at it.
pub(crate) fn iterate_residual2(kkt: &[Vec3], b_prev: &[Vec3], b: &[Vec3]) -> f64 {
    kkt.iter()
        .zip(b_prev.iter().zip(b))
        .map(|(k, (p, b))| (k + p - b).norm_squared())
        .sum()
}

/// `grad Phi` at the body's current positions into `scratch.gradient`: the PD objective's, or
/// with the Newton solver the finite-element one's.
fn gradient(body: &mut SoftBody) -> bool {
    let SoftBody {
        pd,
        newton,
        x,
        targets,
        ws,
        ..
    } = body;
    let Some(pd) = pd.as_ref() else { return false };
    let scratch = &mut ws.residual;
    let n = pd.free_vertices().len();
    if let Some(state) = newton {
        scratch.gradient.resize(n, Vec3::zeros());
        state.ensure_evaluated(x);
        pd.outer_gradient(x, &ws.y, targets, &mut scratch.gradient);
        state.system.add_elastic_gradient(&mut scratch.gradient);
        return true;
    }
    scratch.x.clear();
    scratch
        .x
        .extend(pd.free_vertices().iter().map(|&v| x[v as usize]));
    scratch.b.resize(n, Vec3::zeros());
    scratch.gradient.resize(n, Vec3::zeros());
    // The step's own contributions are rewritten by its next local step before they are read.
    pd.local_step(x, &ws.start_stretches, &mut ws.contributions);
    pd.assemble_rhs(&ws.y, targets, &ws.contributions, &mut scratch.b);
    pd.gradient(&scratch.x, &scratch.b, &mut scratch.gradient);
    true
}

fn norm(v: &[Vec3]) -> f64 {
    v.iter().map(Vec3::norm_squared).sum::<f64>().sqrt()
}

/// Before the iterations: the residual's scale at each simulated body's first iterate.
pub(super) fn measure_start(bodies: &mut [SoftBody], st: &StepState, settings: &WorldSettings) {
    bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
        if st.island_of[i] == NO_ISLAND || b.is_static() {
            return;
        }
        if gradient(b)
            && let Some(pd) = b.pd.as_ref()
        {
            let g2 = norm(&b.ws.residual.gradient).powi(2);
            b.ws.residual.start = g2.max(weight2(pd, &settings.gravity)).sqrt();
        }
    });
}

/// After the iterations: each simulated body's relative residual, with the forces of its
/// island's last constrained global step (recorded in `Island::audit_forces`; none where the
/// island had no rows).
pub(super) fn measure_end(bodies: &mut [SoftBody], st: &StepState) {
    bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
        let id = st.island_of[i];
        if id == NO_ISLAND || b.is_static() || !gradient(b) {
            return;
        }
        let island = &st.islands[id as usize];
        let o = st.offset_of[i] as usize;
        let scratch = &mut b.ws.residual;
        let forces = island.audit_forces.get(o..o + scratch.gradient.len());
        let residual = match forces {
            Some(forces) => scratch
                .gradient
                .iter()
                .zip(forces)
                .map(|(g, (contact, friction))| (g - contact - friction).norm_squared())
                .sum::<f64>()
                .sqrt(),
            None => norm(&scratch.gradient),
        };
        b.last_step.0.residual = Some(if scratch.start > 0.0 {
            residual / scratch.start
        } else {
            0.0
        });
    });
}
