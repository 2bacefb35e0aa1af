//! The constrained global step in the contact subspace: the QP's dual, a dense LCP over the
//! contact rows, through the cached columns of the members' `A^-1`
//! ([`crate::sim::inverse_columns`]).
//!
//! The iterate's unconstrained solution is `x_free = A^-1 (b_qp + g)`, where `g` is the last
//! iteration's contact forces `J_prev' lambda_prev` after an MPRGP solve (its warm start, see
//! [`Island::solve`]) and zero after a solve in the subspace ([`Island::rows_in_free`]). The QP's
//! solution is `x = A^-1 (b_qp + J' lambda)`, so
//!
//! `x = x_free + A^-1 (J' lambda - g)`, and the rows ask
//! `w = S lambda + q >= 0` with `S = J A^-1 J'` and `q = J (x_free - A^-1 g) - c`,
//!
//! with `lambda >= 0` and `lambda' w = 0`: the LCP of [`DenseLcp`]. `A` is block diagonal over
//! the members, so an entry of `S` pairs the terms of two rows on one body, each a lookup in a
//! column. Solved to rounding, the step is exact: the QP leaves no stationarity error
//! (`Island::kkt` is zero), where MPRGP stops at its tolerance. It costs, per PD iteration, the
//! `m x m` matrix (`m` rows), the LCP, and one pass over each body per vertex with a
//! contact force; the columns themselves are computed once per vertex while the factor stands
//! ([`crate::sim::world::body::SoftBody`]'s workspace keeps them).
//!
//! Used where every vertex of the rows and of the last iteration's forces has its column and
//! the rows are at most [`MAX_DUAL_ROWS`]; otherwise MPRGP solves the QP.

use super::{Island, Layout};
use crate::sim::math::Vec3;
use crate::sim::qp::dense_lcp::DenseLcpStats;
use crate::sim::world::body::SoftBody;

/// Most rows solved in the contact subspace (the LCP's matrix is dense).
pub(crate) const MAX_DUAL_ROWS: usize = 256;

/// Gauss-Seidel sweeps at most per dual solve (the exact refinement usually ends it in a few).
const MAX_SWEEPS: usize = 300;

impl Island {
    /// The body and free vertex of island unknown `u`.
    fn owner(&self, layout: Layout<'_>, u: u32) -> (usize, u32) {
        let k = self.unknown_member[u as usize] as usize;
        let b = self.members[k] as usize;
        (b, u - layout.offset_of[b])
    }

    /// `(A^-1)[u, v]` for island unknowns `u`, `v` (0 across bodies), if `v`'s column is
    /// cached.
    fn inverse_entry(
        &self,
        bodies: &[SoftBody],
        layout: Layout<'_>,
        u: u32,
        v: u32,
    ) -> Option<f64> {
        let (bu, du) = self.owner(layout, u);
        let (bv, dv) = self.owner(layout, v);
        if bu != bv {
            return Some(0.0);
        }
        Some(bodies[bv].ws.columns.column(dv)?[du as usize])
    }

    /// Solves the constrained step in the contact subspace (see the module docs) from
    /// [`Island::x`] holding `x_free`: the solution into `x`, the rows' multipliers into
    /// `row_lambda`. Returns `None`, leaving `x` as it was, where a column is missing, the rows
    /// are too many, or the LCP did not converge.
    pub(super) fn solve_in_contact_subspace(
        &mut self,
        bodies: &[SoftBody],
        layout: Layout<'_>,
    ) -> Option<DenseLcpStats> {
        let m = self.rows.len();
        if m > MAX_DUAL_ROWS {
            return None;
        }
        let has_column = |u: u32| {
            let (b, d) = self.owner(layout, u);
            bodies[b].ws.columns.column(d).is_some()
        };
        let all_cached = self
            .rows
            .iter()
            .all(|r| r.vertices[..r.len as usize].iter().all(|&u| has_column(u)))
            && self.row_force.iter().all(|&(u, _)| has_column(u));
        if !all_cached {
            return None;
        }
        // `A^-1 g` at the rows' unknowns, then `q`.
        self.dual_q.clear();
        for row in &self.rows {
            let mut q = -row.rhs;
            for (u, c) in row.entries() {
                let mut shift = Vec3::zeros();
                for &(v, g) in &self.row_force {
                    shift += self.inverse_entry(bodies, layout, u as u32, v)? * g;
                }
                q += c.dot(&(self.x[u] - shift));
            }
            self.dual_q.push(q);
        }
        // `S = J A^-1 J'`.
        self.dual_s.clear();
        self.dual_s.resize(m * m, 0.0);
        for j in 0..m {
            for k in j..m {
                let (rj, rk) = (&self.rows[j], &self.rows[k]);
                let mut s = 0.0;
                for (u, cu) in rj.entries() {
                    for (v, cv) in rk.entries() {
                        s += cu.dot(cv) * self.inverse_entry(bodies, layout, u as u32, v as u32)?;
                    }
                }
                self.dual_s[j * m + k] = s;
                self.dual_s[k * m + j] = s;
            }
        }
        // Warm start: each row's contact force of the last iteration.
        self.row_lambda.clear();
        self.row_lambda.extend(
            self.row_contact
                .iter()
                .map(|&c| self.lambda_prev[c as usize]),
        );
        let scale = self.dual_q.iter().fold(0.0f64, |a, q| a.max(q.abs()));
        let stats = self.dual_lcp.solve(
            &self.dual_s,
            &self.dual_q,
            &mut self.row_lambda,
            1e-12 + 1e-10 * scale,
            MAX_SWEEPS,
        );
        if !stats.converged {
            return None;
        }
        // `x += A^-1 (J' lambda - g)`, one column per unknown whose force changed.
        self.dual_delta.clear();
        self.dual_delta.resize(self.unknowns, Vec3::zeros());
        self.dual_touched.clear();
        for (row, &l) in self.rows.iter().zip(&self.row_lambda) {
            if l > 0.0 {
                for (u, c) in row.entries() {
                    self.dual_delta[u] += l * c;
                    self.dual_touched.push(u as u32);
                }
            }
        }
        for &(v, g) in &self.row_force {
            self.dual_delta[v as usize] -= g;
            self.dual_touched.push(v);
        }
        self.dual_touched.sort_unstable();
        self.dual_touched.dedup();
        for &u in &self.dual_touched {
            let delta = self.dual_delta[u as usize];
            if delta == Vec3::zeros() {
                continue;
            }
            let (b, d) = self.owner(layout, u);
            let column = bodies[b].ws.columns.column(d)?;
            let o = layout.offset_of[b] as usize;
            for (x, &c) in self.x[o..o + column.len()].iter_mut().zip(column) {
                *x += c * delta;
            }
        }
        Some(stats)
    }
}
