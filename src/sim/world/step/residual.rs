//! The convergence measure of the PD iterations ([`WorldSettings::measure_residual`]): the
//! relative residual of the implicit step's optimality condition.
//!
//! One implicit Euler step with contact minimises the PD objective `Phi`
//! ([`crate::sim::pd`]) subject to the contact rows; at its solution the gradient of `Phi` is
//! balanced by the contact forces `J' lambda` and the friction forces `f`:
//!
//! `r(x) = grad Phi(x) - J' lambda - f = 0` (over the free vertices).
//!
//! The PD iterations (local step, then the constrained global step) approach that point; after
//! the last one, `||r(x)||` with the multipliers and friction forces of the last constrained
//! global step, over `||grad Phi(x_0)||` at the step's first iterate (the inertial prediction
//! `y`, so the elastic and attachment forces there), is the relative residual reported in
//! [`super::super::BodyStepStats::residual`] and [`super::super::StepReport::residual`].
//!
//! Measuring costs one extra local step and one product with the global matrix per body at each
//! end of the iterations, on scratch buffers: the simulation itself is the same with the
//! measure on or off.

use rayon::prelude::*;

use super::StepState;
use crate::sim::math::Vec3;
use crate::sim::world::body::SoftBody;
use crate::sim::world::island::NO_ISLAND;

/// Scratch of the measure, per body.
#[derive(Debug, Default)]
pub(crate) struct ResidualScratch {
    /// The free vertices' positions (m).
    x: Vec<Vec3>,
    /// The right-hand side at them (N).
    b: Vec<Vec3>,
    /// The gradient of the objective at them (N).
    gradient: Vec<Vec3>,
    /// `||grad Phi||` at the step's first iterate (N).
    start: f64,
}

/// `grad Phi` at the body's current positions into `scratch.gradient`.
fn gradient(body: &mut SoftBody) -> bool {
    let SoftBody {
        pd, x, targets, ws, ..
    } = body;
    let Some(pd) = pd.as_ref() else { return false };
    let scratch = &mut ws.residual;
    let n = pd.free_vertices().len();
    scratch.x.clear();
    scratch
        .x
        .extend(pd.free_vertices().iter().map(|&v| x[v as usize]));
    scratch.b.resize(n, Vec3::zeros());
    scratch.gradient.resize(n, Vec3::zeros());
    // The step's own contributions are rewritten by its next local step before they are read.
    pd.local_step(x, &mut ws.contributions);
    pd.assemble_rhs(&ws.y, targets, &ws.contributions, &mut scratch.b);
    pd.gradient(&scratch.x, &scratch.b, &mut scratch.gradient);
    true
}

fn norm(v: &[Vec3]) -> f64 {
    v.iter().map(Vec3::norm_squared).sum::<f64>().sqrt()
}

/// Before the iterations: `||grad Phi||` at each simulated body's first iterate.
pub(super) fn measure_start(bodies: &mut [SoftBody], st: &StepState) {
    bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
        if st.island_of[i] == NO_ISLAND || b.is_static() {
            return;
        }
        if gradient(b) {
            b.ws.residual.start = norm(&b.ws.residual.gradient);
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
