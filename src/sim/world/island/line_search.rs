//! The Newton solver's line search over an island (`sim::world::solver`).
//!
//! A Newton iteration's QP minimises the quadratic model of the step's objective at the
//! iterate `x_k`. Where the model is poor, a full step overshoots: a rubber cube at
//! `nu = 0.45` landing at 3 m/s with `h = 1/60 s` gained 1e5 J of elastic energy in one full
//! step and froze, where the same drop at `nu = 0.3`, or at `h = 1/200 s`, came to rest. The
//! MPRGP paper takes the full step (its scenes use 3-10 ms steps); here the step is
//! backtracked (deviation, for game time steps): from `x_k` towards the QP's solution
//! `x_QP`, the first of `alpha = 1, 1/2, 1/4, ...` that satisfies Armijo's condition on the
//! merit function
//!
//! `M(x) = Phi(x) - f . x + sum_j mu_j max(0, c_j - J_j x)`:
//!
//! the members' objectives `Phi` (finite-element energy, inertia, attachments, grab spring),
//! the forces `f` the QP applied (reactions and friction), and an exact penalty of the rows
//! with weights `mu_j = 2 lambda_j`, twice the QP's multipliers (the step is then a descent
//! direction of `M` even from an infeasible `x_k`, the classic SQP merit argument; the rows are
//! linear, so their violation shrinks at least linearly along the step). The whole island
//! takes one `alpha`: soft-soft rows couple its bodies.
//!
//! The merit's element evaluation at the point taken (energy, forces and singular values of
//! every element) is handed to the bodies ([`Island::adopt_line_search`]): the next Newton
//! iteration, or the next step, which starts from the same positions, reuses it instead of
//! evaluating the elements again, so an iteration costs one element pass, not two. (Timed with
//! `cargo bench --bench newton`, alternating binaries: 5.5 and 6.5 ms against 7.9 and 6.4 ms
//! per step for the stiff 1,000-vertex cube, within this machine's noise; the profile loses one
//! of its two passes of `svd3`.)

use super::Island;
use super::layout::Layout;
use crate::sim::fem::newton::sufficient_decrease;
use crate::sim::fem::stepping::ElementEvaluation;
use crate::sim::math::Vec3;
use crate::sim::world::body::SoftBody;

/// Most halvings of the step.
const MAX_HALVINGS: usize = 10;

/// Scratch of [`Island::newton_line_search`].
#[derive(Debug, Default, Clone)]
pub(super) struct LineSearch {
    /// Per unknown: the iterate `x_k` (m).
    start: Vec<Vec3>,
    /// Per unknown: the step `x_QP - x_k` (m).
    step: Vec<Vec3>,
    /// Per unknown: the trial point (m).
    trial: Vec<Vec3>,
    /// One member's positions at the trial point, every vertex (m).
    positions: Vec<Vec3>,
    /// Per member: its elements evaluated at the last trial point, which is the point taken.
    evaluations: Vec<ElementEvaluation>,
    /// Whether `evaluations` hold the point the island took in this iteration (see
    /// [`Island::adopt_line_search`]).
    taken: bool,
}

impl Island {
    /// Backtracks the Newton step from the members' positions `x_k` to the QP's solution in
    /// [`Island::x`] (see the module docs), leaving the accepted point in `x`; returns the step
    /// length `alpha` (1: the full step).
    pub(super) fn newton_line_search(&mut self, bodies: &[SoftBody], layout: Layout<'_>) -> f64 {
        let mut ls = std::mem::take(&mut self.line_search);
        let n = self.unknowns;
        ls.start.resize(n, Vec3::zeros());
        ls.step.resize(n, Vec3::zeros());
        ls.trial.resize(n, Vec3::zeros());
        // The slope of `M` along the step at `x_k`: `(g - f) . d` less the penalty's decrease.
        let mut slope = 0.0;
        let mut start_value = 0.0;
        for &b in &self.members {
            let body = &bodies[b as usize];
            let (Some(pd), Some(state)) = (body.pd.as_ref(), body.newton.as_ref()) else {
                continue;
            };
            let o = layout.offset_of[b as usize] as usize;
            for (d, &v) in pd.free_vertices().iter().enumerate() {
                let u = o + d;
                let x_k = body.x[v as usize];
                ls.start[u] = x_k;
                ls.step[u] = self.x[u] - x_k;
                let applied = self.b_qp[u] - self.b[u];
                slope += (state.gradient[d] - applied).dot(&ls.step[u]);
                start_value -= applied.dot(&x_k);
            }
            // The elements were evaluated at `x_k` by this iteration's first part.
            start_value +=
                state.system.elastic_energy() + pd.outer_energy(&body.x, &body.ws.y, &body.targets);
        }
        start_value += self.penalty(&ls.start);
        slope -= self.penalty(&ls.start);
        let mut alpha = 1.0;
        for halvings in 0..=MAX_HALVINGS {
            for ((t, s), d) in ls.trial.iter_mut().zip(&ls.start).zip(&ls.step) {
                *t = s + alpha * d;
            }
            let value = self.merit(bodies, layout, &mut ls);
            if sufficient_decrease(start_value, value, alpha, slope) || halvings == MAX_HALVINGS {
                break;
            }
            alpha *= 0.5;
        }
        // The trial point exactly (`x_k + 1 (x_QP - x_k)` may differ from `x_QP` by rounding):
        // the positions the members' evaluations are of.
        self.x.copy_from_slice(&ls.trial);
        ls.taken = true;
        self.line_search = ls;
        alpha
    }

    /// After the members' positions were set to the point the line search took: hands each
    /// member the evaluation of its elements there, so that the next Newton iteration (or the
    /// next step, which starts from the same positions) need not evaluate them again (one of
    /// the two element passes of a Newton iteration).
    /// Where `failed` (the island's solve failed: its bodies freeze) the evaluations are
    /// dropped instead.
    pub fn adopt_line_search(&mut self, bodies: &mut [SoftBody], failed: bool) {
        if !std::mem::take(&mut self.line_search.taken) || failed {
            return;
        }
        for (k, &b) in self.members.iter().enumerate() {
            let body = &mut bodies[b as usize];
            if let (Some(state), Some(evaluation)) =
                (&mut body.newton, self.line_search.evaluations.get_mut(k))
            {
                state.adopt_evaluation(evaluation, &body.x);
            }
        }
    }

    /// `sum_j 2 lambda_j max(0, c_j - J_j z)` over the rows, at `z` (per unknown; N m).
    fn penalty(&self, z: &[Vec3]) -> f64 {
        self.rows
            .iter()
            .zip(&self.row_lambda)
            .map(|(row, &l)| 2.0 * l * (row.rhs - row.dot(z)).max(0.0))
            .sum()
    }

    /// The merit `M` at `ls.trial` (J).
    fn merit(&self, bodies: &[SoftBody], layout: Layout<'_>, ls: &mut LineSearch) -> f64 {
        let mut value = self.penalty(&ls.trial);
        ls.evaluations
            .resize_with(self.members.len(), ElementEvaluation::default);
        for (k, &b) in self.members.iter().enumerate() {
            let body = &bodies[b as usize];
            let (Some(pd), Some(state)) = (body.pd.as_ref(), body.newton.as_ref()) else {
                continue;
            };
            let o = layout.offset_of[b as usize] as usize;
            ls.positions.clear();
            ls.positions.extend_from_slice(&body.x);
            let free = pd.free_vertices();
            for (d, &v) in free.iter().enumerate() {
                ls.positions[v as usize] = ls.trial[o + d];
                value -= (self.b_qp[o + d] - self.b[o + d]).dot(&ls.trial[o + d]);
            }
            value += state
                .system
                .evaluate_elements_into(&ls.positions, &mut ls.evaluations[k]);
            value += pd.outer_energy(&ls.positions, &body.ws.y, &body.targets);
        }
        value
    }
}
