//! An LCP solved with dense subspace steps: `w = S lambda + q >= 0`, `lambda >= 0`,
//! `lambda' w = 0` for a symmetric positive definite `S`, stored by its nonzero rows
//! ([`SymmetricRows`]): the minimiser of `1/2 lambda' S lambda + q' lambda` over
//! `lambda >= 0`, the dual of a contact QP in the contact subspace, where `S = J A^-1 J'` is
//! the Schur complement of the contact rows (see
//! [`crate::sim::inverse_columns::InverseColumns`]).
//!
//! Projected Gauss-Seidel sweeps find the active set; once a sweep leaves the candidate active
//! set `A = {lambda_j > 0}` unchanged (or after 16 sweeps), a subspace minimisation solves it
//! exactly (dense Cholesky of
//! `S_AA`, faer's blocked factorization) and moves `lambda` toward that minimiser as far as
//! `lambda_A >= 0` allows (the PGS-SM method of Morales, Nocedal and Smelyanskiy 2008, "An
//! algorithm for the fast solution of symmetric linear complementarity problems"). The step
//! lowers the objective whether or not the candidate is feasible, so every factorization pays;
//! when the candidate is the solution, the next residual check ends the solve at the exact
//! answer instead of PGS's linear convergence. Allocates nothing once its buffers have grown
//! to the largest problem.
//!
//! Deviation from the paper: the step is the ratio-test step onto the feasible segment, not a
//! projected search along the path `max(0, lambda + t d)`, which would need an objective
//! evaluation (`m^2`) per trial. Measured on the `pile` example's largest island (17 bodies,
//! about 410 rows, 225 active): 9-18 sweeps per solve with one accepted exact solve in four
//! attempts when a candidate was taken only if it solved the LCP outright (each rejected
//! attempt a wasted factorization); 6-9 sweeps and 2-3 subspace steps with the ratio test.
//!
//! Deviation: the paper's sweeps per subspace step are a fixed count. Here a sweep that changes
//! no row between zero and positive ends the sweeps: on a sim-only replica of the `pile`
//! example (islands of up to 20 bodies, about 250 rows on average over the run) a
//! factorization costs about eight sweeps, and three fixed sweeps per subspace step gave 1.9
//! factorizations per solve against 1.5 with the rule, the LCP's share of a step 6.0-6.4 ms
//! against 5.0-5.3 ms.
//!
//! Deviation, on request ([`DenseLcp::set_projected_steps`], for islands whose rows are
//! nearly dependent): a subspace step first tries the candidate projected onto `lambda >= 0`,
//! which the paper's projected search would reach at its first trial, and takes it where the
//! objective falls (two objective evaluations, `O(nnz(S))` each); otherwise the ratio test.
//!
//! Within one solve the factor of `S_AA` is kept from one subspace step to the next and
//! updated where the candidate set changed by at most `k / 16` rows
//! ([`UpdatableCholesky`]: a row leaves by a rank-one update, a row joins by a forward
//! substitution, each `O(k^2)`): successive candidate sets mostly differ by the row the last
//! ratio test blocked and a row or two PGS opened. On the `pile` replica (about 230 active rows)
//! half of the subspace steps were updates, at 25 us against 236 us for a factorization, and
//! the LCP's time per solve, scaled to the same active-set size, fell from 382-396 us to
//! 284-291 us (two runs each; sweeps and subspace steps per solve unchanged, 9.3-9.4 and 2.1).

use super::updatable_cholesky::UpdatableCholesky;

/// What [`DenseLcp::solve`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DenseLcpStats {
    /// Gauss-Seidel sweeps.
    pub sweeps: usize,
    /// Subspace minimisations (exact solves of a candidate active set) that moved `lambda`.
    pub refinements: usize,
    /// Subspace minimisations refused: the candidate set's `S_AA` was singular to working
    /// precision. Such a set is not tried again in the same solve.
    pub failed_refinements: usize,
    /// The natural-map residual `max_j |min(lambda_j S_jj, w_j)|` at the end (the units of
    /// `q`).
    pub residual: f64,
    /// Whether the residual reached the tolerance.
    pub converged: bool,
}

/// A symmetric matrix stored by rows, nonzeros only: `entries[row_ptr[j]..row_ptr[j + 1]]`
/// are row `j`'s `(column, value)` in increasing column order, the diagonal among them and in
/// `diagonal` too. Contact rows on different bodies do not couple, so in an island of many
/// bodies `S` is mostly zeros; built row by row, its `m^2` zeros never reach memory.
#[derive(Debug, Default)]
pub struct SymmetricRows {
    /// Start of each row in `entries`, plus the end.
    pub row_ptr: Vec<usize>,
    /// `(column, value)` of the nonzeros, row after row.
    pub entries: Vec<(u32, f64)>,
    /// The diagonal.
    pub diagonal: Vec<f64>,
}

clone_by_field!(SymmetricRows {
    row_ptr,
    entries,
    diagonal
});

impl SymmetricRows {
    /// Rows.
    pub fn dim(&self) -> usize {
        self.diagonal.len()
    }

    /// Empties the matrix (keeping its buffers) to build it again row by row with
    /// [`SymmetricRows::push`] and [`SymmetricRows::end_row`].
    pub fn clear(&mut self) {
        self.row_ptr.clear();
        self.row_ptr.push(0);
        self.entries.clear();
        self.diagonal.clear();
    }

    /// Appends entry `(column, value)` to the row being built (columns in increasing order).
    pub fn push(&mut self, column: u32, value: f64) {
        self.entries.push((column, value));
    }

    /// Ends the row being built, whose diagonal entry is `diagonal`.
    pub fn end_row(&mut self, diagonal: f64) {
        self.row_ptr.push(self.entries.len());
        self.diagonal.push(diagonal);
    }

    /// Appends the rows of `other` (their columns unchanged) after this matrix's rows.
    pub fn append_rows(&mut self, other: &SymmetricRows) {
        let base = self.entries.len();
        self.entries.extend_from_slice(&other.entries);
        self.row_ptr
            .extend(other.row_ptr[1..].iter().map(|&end| base + end));
        self.diagonal.extend_from_slice(&other.diagonal);
    }

    /// The nonzeros of the row-major `m x m` matrix `s` (tests only).
    #[cfg(test)]
    #[allow(clippy::wrong_self_convention)] // fills `self`, like `from_upper`
    pub fn from_dense(&mut self, s: &[f64], m: usize) {
        self.clear();
        for j in 0..m {
            for (k, &v) in s[j * m..(j + 1) * m].iter().enumerate() {
                if v != 0.0 {
                    self.push(k as u32, v);
                }
            }
            self.end_row(s[j * m + j]);
        }
    }

    /// The whole matrix from its upper triangle `upper` (each row's entries at columns from its
    /// own on, the diagonal first), `cursor` being scratch: row `r` is the upper rows' entries
    /// at column `r` (as columns `j < r`, in increasing order) followed by upper row `r`.
    // Fills `self` in place (its buffers are reused); clippy asks `from_*` to build a new
    // value, which it only checks on crate-private items. The name is kept for its caller.
    #[allow(clippy::wrong_self_convention)]
    pub fn from_upper(&mut self, upper: &SymmetricRows, cursor: &mut Vec<usize>) {
        let m = upper.dim();
        cursor.clear();
        cursor.resize(m + 1, 0);
        for j in 0..m {
            cursor[j + 1] += upper.row(j).len();
            for &(k, _) in upper.row(j) {
                if k as usize > j {
                    cursor[k as usize + 1] += 1;
                }
            }
        }
        for r in 0..m {
            cursor[r + 1] += cursor[r];
        }
        self.row_ptr.clear();
        self.row_ptr.extend_from_slice(cursor);
        self.entries.clear();
        self.entries.resize(cursor[m], (0, 0.0));
        self.diagonal.clear();
        self.diagonal.extend_from_slice(&upper.diagonal);
        for j in 0..m {
            for &(k, v) in upper.row(j) {
                if k as usize > j {
                    self.entries[cursor[k as usize]] = (j as u32, v);
                    cursor[k as usize] += 1;
                }
            }
        }
        for (r, &end) in self.row_ptr[1..].iter().enumerate() {
            let row = upper.row(r);
            self.entries[end - row.len()..end].copy_from_slice(row);
        }
    }

    /// Adds `value` to diagonal entry `j` (which must be among row `j`'s nonzeros, as in every
    /// matrix built by [`SymmetricRows::end_row`] with its diagonal pushed).
    pub fn add_to_diagonal(&mut self, j: usize, value: f64) {
        self.diagonal[j] += value;
        let (start, end) = (self.row_ptr[j], self.row_ptr[j + 1]);
        if let Some(e) = self.entries[start..end]
            .iter_mut()
            .find(|e| e.0 as usize == j)
        {
            e.1 += value;
        }
    }

    /// Row `j`'s nonzeros.
    #[inline]
    pub fn row(&self, j: usize) -> &[(u32, f64)] {
        &self.entries[self.row_ptr[j]..self.row_ptr[j + 1]]
    }
}

/// Reusable buffers of the solver.
#[derive(Default)]
pub struct DenseLcp {
    active: Vec<usize>,
    /// Per row: its place in `active`, or `u32::MAX`.
    active_at: Vec<u32>,
    /// Per row: whether the kept factor holds it.
    in_factor: Vec<bool>,
    /// Per row: its place in the factor, or `u32::MAX` (scratch of the appends).
    position: Vec<u32>,
    /// A row of `S` at the factor's rows (scratch of an append).
    column: Vec<f64>,
    /// The factor of the last subspace step's `S_AA`, valid while the matrix is the same
    /// (within one solve, and across solves of [`DenseLcp::solve_again`] that say so).
    cholesky: UpdatableCholesky,
    /// The last active set whose subspace step failed in this solve.
    failed: Vec<usize>,
    /// Subspace steps that failed in this solve.
    failed_refinements: usize,
    candidate: Vec<f64>,
    /// Whether a subspace step may take the projected candidate `max(0, c)` (see
    /// [`DenseLcp::set_projected_steps`]).
    projected_steps: bool,
    /// The multipliers before a projected step (scratch).
    before: Vec<f64>,
    /// Whether active sets up to [`MAX_LARGE_EXACT_ACTIVE`] are solved exactly (see
    /// [`DenseLcp::set_large_active_sets`]).
    large_active_sets: bool,
}

clone_by_field!(DenseLcp {
    active,
    active_at,
    in_factor,
    position,
    column,
    cholesky,
    failed,
    failed_refinements,
    candidate,
    projected_steps,
    before,
    large_active_sets
});

impl std::fmt::Debug for DenseLcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseLcp")
            .field("factor", &self.cholesky)
            .finish()
    }
}

/// Most Gauss-Seidel sweeps between exact solves of the candidate active set.
const MAX_SWEEPS_PER_REFINEMENT: usize = 16;

/// Largest active set solved exactly (a dense factorization costs its cube over three: 19 M
/// flops at 384).
pub const MAX_EXACT_ACTIVE: usize = 384;

/// Largest active set solved exactly with [`DenseLcp::set_large_active_sets`]: 358 M flops per
/// factorization at 1,024, paid where the active set changes (a large body localized to its
/// contact region: `crate::sim::prone`; the 10,648-vertex bench cube rests on 484 active
/// rows, where MPRGP is the other solver).
pub const MAX_LARGE_EXACT_ACTIVE: usize = 1024;

impl DenseLcp {
    /// Lets a subspace step first try the candidate projected onto `lambda >= 0` (every
    /// negative multiplier zeroed at once), taken where it lowers the objective, before the
    /// ratio-test step (see the module docs). For nearly dependent rows: where dozens of rows
    /// share a few vertices (a drawn surface resting on another) the candidate has many
    /// negative multipliers, and a ratio-test step drops one of them at a time while the
    /// sweeps bring others back (a drawn box dropped onto another cycled through 140 subspace
    /// steps in 300 sweeps without converging).
    pub fn set_projected_steps(&mut self, on: bool) {
        self.projected_steps = on;
    }

    /// Solves active sets of up to [`MAX_LARGE_EXACT_ACTIVE`] rows exactly instead of
    /// [`MAX_EXACT_ACTIVE`]: where the caller has no cheaper solver for many active rows.
    pub fn set_large_active_sets(&mut self, on: bool) {
        self.large_active_sets = on;
    }

    /// The largest active set solved exactly.
    fn max_exact_active(&self) -> usize {
        match self.large_active_sets {
            true => MAX_LARGE_EXACT_ACTIVE,
            false => MAX_EXACT_ACTIVE,
        }
    }

    /// Solves the LCP of the symmetric positive definite matrix `s` and the vector `q`,
    /// starting from `lambda` (clamped to `>= 0`) and writing the solution there. Stops where
    /// the natural-map residual is at most `tolerance` (the units of `q`), or unconverged after
    /// `max_sweeps` or once the candidate active set exceeds [`MAX_EXACT_ACTIVE`] (see
    /// [`DenseLcp::set_large_active_sets`]). Tests only:
    /// the world calls [`DenseLcp::solve_again`].
    #[cfg(test)]
    pub fn solve(
        &mut self,
        s: &SymmetricRows,
        q: &[f64],
        lambda: &mut [f64],
        tolerance: f64,
        max_sweeps: usize,
    ) -> DenseLcpStats {
        self.solve_again(s, q, lambda, tolerance, max_sweeps, false)
    }

    /// `DenseLcp::solve`, where `same_matrix` says that `s` is the matrix of this solver's
    /// last solve, unchanged: the factor of the last subspace step's active set then still
    /// holds, and is updated or used as it is instead of factored anew (a contact QP whose rows
    /// stay from one PD iteration to the next, and whose active set does, costs a triangular
    /// solve pair instead of a factorization).
    pub fn solve_again(
        &mut self,
        s: &SymmetricRows,
        q: &[f64],
        lambda: &mut [f64],
        tolerance: f64,
        max_sweeps: usize,
        same_matrix: bool,
    ) -> DenseLcpStats {
        let m = q.len();
        debug_assert_eq!(s.dim(), m);
        debug_assert_eq!(lambda.len(), m);
        let mut stats = DenseLcpStats::default();
        if !same_matrix || self.cholesky.ids().iter().any(|&a| a >= m) {
            // A new matrix: the factor of the last solve's active set does not hold, and a set
            // that failed may not fail now.
            self.cholesky.clear();
            self.failed.clear();
        }
        self.failed_refinements = 0;
        lambda.iter_mut().for_each(|l| *l = l.max(0.0));
        loop {
            stats.residual = residual(s, q, lambda);
            stats.failed_refinements = self.failed_refinements;
            if stats.residual <= tolerance {
                stats.converged = true;
                return stats;
            }
            if stats.sweeps >= max_sweeps {
                return stats;
            }
            // Sweeps until one leaves the candidate active set as it was (then PGS only
            // polishes values, which the exact solve does at once), at most
            // `MAX_SWEEPS_PER_REFINEMENT`.
            for _ in 0..MAX_SWEEPS_PER_REFINEMENT {
                let mut changed = false;
                for j in 0..m {
                    let w = row_times(s, j, lambda) + q[j];
                    let was = lambda[j] > 0.0;
                    lambda[j] = (lambda[j] - w / s.diagonal[j]).max(0.0);
                    changed |= was != (lambda[j] > 0.0);
                }
                stats.sweeps += 1;
                if !changed {
                    break;
                }
            }
            if self.refine(s, q, lambda) {
                stats.refinements += 1;
            } else if self.active.len() > self.max_exact_active() {
                // Too many active rows to solve exactly: PGS alone would converge linearly at
                // `m^2` a sweep, so the caller's other solver is the better use of the time.
                return stats;
            }
        }
    }

    /// The subspace minimisation: `lambda_A` moved toward the minimiser over the candidate
    /// active set as far as `lambda_A >= 0` allows. Returns whether it moved.
    ///
    /// The factor of `S_AA` is kept from the solve's last subspace step and updated where the
    /// set changed by at most [`max_updates`] rows (see [`UpdatableCholesky`]), else factored
    /// anew.
    fn refine(&mut self, s: &SymmetricRows, q: &[f64], lambda: &mut [f64]) -> bool {
        let m = q.len();
        self.active.clear();
        self.active.extend((0..m).filter(|&j| lambda[j] > 0.0));
        let k = self.active.len();
        if k == 0 || k > self.max_exact_active() {
            return false;
        }
        if self.failed.as_slice() == self.active.as_slice() {
            // This very set failed before in this solve: PGS must change it first.
            return false;
        }
        if !self.update_factor(s) && !self.refactor(s) {
            self.fail();
            return false;
        }
        // The candidate `S_AA^-1 (-q_A)`, in factor order.
        self.candidate.clear();
        self.candidate
            .extend(self.cholesky.ids().iter().map(|&a| -q[a]));
        self.cholesky.solve_in_place(&mut self.candidate);
        if self.candidate.iter().any(|c| !c.is_finite()) {
            self.fail();
            return false;
        }
        if self.projected_steps {
            // The projected candidate, taken if it lowers the objective.
            let before = objective(s, q, lambda);
            self.before.clear();
            self.before.extend_from_slice(lambda);
            for (&a, &c) in self.cholesky.ids().iter().zip(&self.candidate) {
                lambda[a] = c.max(0.0);
            }
            if objective(s, q, lambda) < before {
                return true;
            }
            lambda.copy_from_slice(&self.before);
        }
        // Ratio test: the largest step in (0, 1] keeping every active multiplier >= 0.
        let ids = self.cholesky.ids();
        let mut step = 1.0f64;
        let mut blocking = None;
        for (i, (&a, &c)) in ids.iter().zip(&self.candidate).enumerate() {
            if c < 0.0 {
                let t = lambda[a] / (lambda[a] - c);
                if t < step {
                    step = t;
                    blocking = Some(i);
                }
            }
        }
        for (i, (&a, &c)) in ids.iter().zip(&self.candidate).enumerate() {
            lambda[a] = if Some(i) == blocking {
                0.0
            } else {
                (lambda[a] + step * (c - lambda[a])).max(0.0)
            };
        }
        true
    }

    /// Forgets the factor and remembers the active set as one that cannot be solved exactly
    /// (singular to working precision), so that it is not factored again in this solve.
    fn fail(&mut self) {
        self.cholesky.clear();
        self.failed.clear();
        self.failed.extend_from_slice(&self.active);
        self.failed_refinements += 1;
    }

    /// Brings the kept factor to the active set by removals and appends, where it differs by
    /// at most [`max_updates`] rows. Returns whether the factor now holds the active set.
    fn update_factor(&mut self, s: &SymmetricRows) -> bool {
        if self.cholesky.ids().is_empty() {
            return false;
        }
        let m = s.dim();
        self.in_factor.clear();
        self.in_factor.resize(m, false);
        for &a in self.cholesky.ids() {
            self.in_factor[a] = true;
        }
        self.active_at.clear();
        self.active_at.resize(m, u32::MAX);
        for (i, &a) in self.active.iter().enumerate() {
            self.active_at[a] = i as u32;
        }
        let leaving = self
            .cholesky
            .ids()
            .iter()
            .filter(|&&a| self.active_at[a] == u32::MAX)
            .count();
        let joining = self.active.iter().filter(|&&a| !self.in_factor[a]).count();
        if leaving + joining > max_updates(self.active.len()) {
            return false;
        }
        // Removals from the back, so that the positions still to visit stay put.
        for p in (0..self.cholesky.ids().len()).rev() {
            if self.active_at[self.cholesky.ids()[p]] == u32::MAX {
                self.cholesky.remove(p);
            }
        }
        // Each row's place in the factor, kept up to date as rows join at its end.
        self.position.clear();
        self.position.resize(m, u32::MAX);
        for (r, &id) in self.cholesky.ids().iter().enumerate() {
            self.position[id] = r as u32;
        }
        for i in 0..self.active.len() {
            let a = self.active[i];
            if self.in_factor[a] {
                continue;
            }
            // Row `a` of `S` at the factor's rows.
            self.column.clear();
            self.column.resize(self.cholesky.ids().len(), 0.0);
            for &(c, v) in s.row(a) {
                let r = self.position[c as usize];
                if r != u32::MAX {
                    self.column[r as usize] = v;
                }
            }
            if !self.cholesky.append(a, &self.column, s.diagonal[a]) {
                return false;
            }
            self.position[a] = (self.cholesky.ids().len() - 1) as u32;
        }
        true
    }

    /// Factors `S_AA` anew for the active set. Returns whether it is positive definite.
    fn refactor(&mut self, s: &SymmetricRows) -> bool {
        let m = s.dim();
        self.active_at.clear();
        self.active_at.resize(m, u32::MAX);
        for (i, &a) in self.active.iter().enumerate() {
            self.active_at[a] = i as u32;
        }
        let active_at = &self.active_at;
        self.cholesky.factor(&self.active, |id, column| {
            column.iter_mut().for_each(|v| *v = 0.0);
            for &(c, v) in s.row(id) {
                let at = active_at[c as usize];
                if at != u32::MAX {
                    column[at as usize] = v;
                }
            }
        })
    }
}

/// Most rows a kept factor of `k` active rows is updated by before factoring anew is cheaper:
/// an update costs about `k^2` operations and a factorization `k^3 / 3` (at faer's blocked
/// speed, several times the updates' per operation).
fn max_updates(k: usize) -> usize {
    (k / 16).max(1)
}

/// Row `j` of `s` times `lambda`, over the row's nonzeros.
#[inline]
fn row_times(s: &SymmetricRows, j: usize, lambda: &[f64]) -> f64 {
    s.row(j).iter().map(|&(k, v)| v * lambda[k as usize]).sum()
}

/// `1/2 lambda' S lambda + q' lambda`.
fn objective(s: &SymmetricRows, q: &[f64], lambda: &[f64]) -> f64 {
    (0..q.len())
        .filter(|&j| lambda[j] != 0.0)
        .map(|j| lambda[j] * (0.5 * row_times(s, j, lambda) + q[j]))
        .sum()
}

/// `max_j |min(lambda_j S_jj, w_j)|` with `w = S lambda + q`.
fn residual(s: &SymmetricRows, q: &[f64], lambda: &[f64]) -> f64 {
    let m = q.len();
    let mut worst: f64 = 0.0;
    for j in 0..m {
        let w = row_times(s, j, lambda) + q[j];
        let r = (lambda[j] * s.diagonal[j]).min(w);
        if !r.is_finite() {
            return f64::INFINITY;
        }
        worst = worst.max(r.abs());
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    /// The nonzeros of the row-major `m x m` matrix `s`.
    fn rows(s: &[f64], m: usize) -> SymmetricRows {
        let mut rows = SymmetricRows::default();
        rows.from_dense(s, m);
        rows
    }

    /// Unblocked row-major Cholesky, the enumeration's own (independent of faer's).
    fn cholesky_in_place(a: &mut [f64], k: usize) -> bool {
        for j in 0..k {
            let mut d = a[j * k + j];
            for p in 0..j {
                d -= a[j * k + p] * a[j * k + p];
            }
            if !(d > 0.0) {
                return false;
            }
            let d = d.sqrt();
            a[j * k + j] = d;
            for i in j + 1..k {
                let mut v = a[i * k + j];
                for p in 0..j {
                    v -= a[i * k + p] * a[j * k + p];
                }
                a[i * k + j] = v / d;
            }
        }
        true
    }

    fn cholesky_solve(l: &[f64], k: usize, b: &mut [f64]) {
        for i in 0..k {
            let mut v = b[i];
            for p in 0..i {
                v -= l[i * k + p] * b[p];
            }
            b[i] = v / l[i * k + i];
        }
        for i in (0..k).rev() {
            let mut v = b[i];
            for p in i + 1..k {
                v -= l[p * k + i] * b[p];
            }
            b[i] = v / l[i * k + i];
        }
    }

    /// A random SPD matrix `B B' + 0.1 I` and vector `q`.
    fn random_lcp(rng: &mut Rng, m: usize) -> (Vec<f64>, Vec<f64>) {
        let s = rng.spd(m);
        let q = (0..m).map(|_| rng.signed()).collect();
        (s, q)
    }

    /// The exact solution by enumeration: the one active set whose solve is feasible and
    /// leaves the other rows open.
    fn enumerate(s: &[f64], q: &[f64]) -> Vec<f64> {
        let m = q.len();
        for mask in 0u32..1 << m {
            let active: Vec<usize> = (0..m).filter(|&j| mask >> j & 1 == 1).collect();
            let k = active.len();
            let mut a: Vec<f64> = active
                .iter()
                .flat_map(|&i| active.iter().map(move |&j| s[i * m + j]))
                .collect();
            let mut x: Vec<f64> = active.iter().map(|&i| -q[i]).collect();
            if k > 0 {
                assert!(cholesky_in_place(&mut a, k));
                cholesky_solve(&a, k, &mut x);
            }
            let mut lambda = vec![0.0; m];
            for (&i, &v) in active.iter().zip(&x) {
                lambda[i] = v;
            }
            let feasible = lambda.iter().all(|&l| l >= -1e-12);
            let open = (0..m).all(|j| {
                let w: f64 = (0..m).map(|k| s[j * m + k] * lambda[k]).sum::<f64>() + q[j];
                mask >> j & 1 == 1 || w >= -1e-12
            });
            if feasible && open {
                return lambda;
            }
        }
        panic!("an SPD LCP has a solution");
    }

    #[test]
    fn random_lcps_match_enumeration() {
        let mut rng = Rng(7);
        let mut solver = DenseLcp::default();
        for m in 1..=8 {
            for _ in 0..20 {
                let (s, q) = random_lcp(&mut rng, m);
                let exact = enumerate(&s, &q);
                let mut lambda = vec![0.0; m];
                let stats = solver.solve(&rows(&s, m), &q, &mut lambda, 1e-12, 10_000);
                assert!(stats.converged, "{m}: {stats:?}");
                for (a, b) in lambda.iter().zip(&exact) {
                    assert!((a - b).abs() < 1e-8, "{m}: {lambda:?} vs {exact:?}");
                }
            }
        }
    }

    /// Many rows over few unknowns, made definite by a small compliance (rows of a drawn
    /// surface's points against a few cage vertices, `S = J J' + 1e-3 diag(J J')`, `J` 8 x 3):
    /// with projected steps the solver reaches the enumerated solution, as with ratio-test
    /// steps alone; and `add_to_diagonal` keeps the stored diagonal and the row's entry equal.
    #[test]
    fn nearly_dependent_rows_with_projected_steps_match_enumeration() {
        let mut rng = Rng(11);
        let (m, n) = (8, 3);
        for trial in 0..20 {
            let j: Vec<f64> = (0..m * n).map(|_| rng.signed()).collect();
            let mut s = vec![0.0; m * m];
            for a in 0..m {
                for b in 0..m {
                    s[a * m + b] = (0..n).map(|k| j[a * n + k] * j[b * n + k]).sum();
                }
            }
            let mut sparse = rows(&s, m);
            for a in 0..m {
                let d = s[a * m + a];
                s[a * m + a] += 1e-3 * d;
                sparse.add_to_diagonal(a, 1e-3 * d);
                let entry = sparse.row(a).iter().find(|e| e.0 as usize == a).unwrap();
                assert_eq!(entry.1, sparse.diagonal[a]);
                assert_eq!(sparse.diagonal[a], s[a * m + a]);
            }
            let q: Vec<f64> = (0..m).map(|_| rng.signed()).collect();
            let exact = enumerate(&s, &q);
            for projected in [false, true] {
                let mut solver = DenseLcp::default();
                solver.set_projected_steps(projected);
                let mut lambda = vec![0.0; m];
                let stats = solver.solve(&sparse, &q, &mut lambda, 1e-12, 100_000);
                assert!(stats.converged, "{trial} {projected}: {stats:?}");
                for (a, b) in lambda.iter().zip(&exact) {
                    assert!(
                        (a - b).abs() < 1e-6 * (1.0 + b.abs()),
                        "{trial} {projected}: {lambda:?} vs {exact:?}"
                    );
                }
            }
        }
    }

    /// Rows in three groups, coupled within a group and between neighbouring groups only (as
    /// contact rows are through the bodies they share): the solution satisfies the
    /// complementarity conditions, with most of the matrix zero.
    #[test]
    fn block_sparse_lcps_satisfy_complementarity() {
        let mut rng = Rng(5);
        let (groups, per) = (3, 40);
        let m = groups * per;
        let mut s = vec![0.0; m * m];
        for g in 0..groups {
            for h in g..(g + 2).min(groups) {
                let (dense, _) = random_lcp(&mut rng, per);
                for i in 0..per {
                    for j in 0..per {
                        // A diagonal block keeps its own SPD matrix; a coupling block is small.
                        let v = if g == h {
                            dense[i * per + j]
                        } else {
                            0.02 * rng.signed()
                        };
                        s[(g * per + i) * m + h * per + j] = v;
                        s[(h * per + j) * m + g * per + i] = v;
                    }
                }
            }
        }
        for i in 0..m {
            s[i * m + i] += 0.5;
        }
        let q: Vec<f64> = (0..m).map(|_| rng.signed() * 3.0).collect();
        let mut solver = DenseLcp::default();
        let mut lambda = vec![0.0; m];
        let stats = solver.solve(&rows(&s, m), &q, &mut lambda, 1e-11, 10_000);
        assert!(stats.converged, "{stats:?}");
        for j in 0..m {
            let w: f64 = (0..m).map(|k| s[j * m + k] * lambda[k]).sum::<f64>() + q[j];
            assert!(lambda[j] >= 0.0 && w >= -1e-9, "{j}: {} {w}", lambda[j]);
            assert!((lambda[j] * w).abs() < 1e-9, "{j}: {} {w}", lambda[j]);
        }
        assert!(lambda.iter().filter(|&&l| l > 0.0).count() > 10);
    }

    /// A matrix rebuilt from its upper triangle is the matrix.
    #[test]
    fn appended_blocks_of_rows_are_the_whole_matrix() {
        let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B);
        let m = 7;
        let (s, _) = random_lcp(&mut rng, m);
        let whole = rows(&s, m);
        let mut joined = SymmetricRows::default();
        joined.clear();
        for block in [0..3, 3..4, 4..7] {
            let mut part = SymmetricRows::default();
            part.clear();
            for j in block {
                for &(k, v) in whole.row(j) {
                    part.push(k, v);
                }
                part.end_row(whole.diagonal[j]);
            }
            joined.append_rows(&part);
        }
        assert_eq!(joined.row_ptr, whole.row_ptr);
        assert_eq!(joined.entries, whole.entries);
        assert_eq!(joined.diagonal, whole.diagonal);
    }

    #[test]
    fn the_upper_triangle_gives_the_whole_matrix() {
        let mut rng = Rng(3);
        let m = 9;
        let (mut s, _) = random_lcp(&mut rng, m);
        // Zeros between blocks, as between rows on different bodies.
        for j in 0..m {
            for k in 0..m {
                if (j / 3 + k / 3) % 3 == 1 && j != k {
                    s[j * m + k] = 0.0;
                }
            }
        }
        let mut upper = SymmetricRows::default();
        upper.clear();
        for j in 0..m {
            for k in j..m {
                if s[j * m + k] != 0.0 {
                    upper.push(k as u32, s[j * m + k]);
                }
            }
            upper.end_row(s[j * m + j]);
        }
        let mut whole = SymmetricRows::default();
        whole.from_upper(&upper, &mut Vec::new());
        let dense = rows(&s, m);
        assert_eq!(whole.row_ptr, dense.row_ptr);
        assert_eq!(whole.entries, dense.entries);
        assert_eq!(whole.diagonal, dense.diagonal);
    }

    /// A set of rows whose `S_AA` is singular is factored once per solve, not after every
    /// sweep that leaves it active.
    #[test]
    fn a_singular_active_set_is_tried_once() {
        // Rows 0 and 1 are the same constraint: any set holding both is singular, and PGS
        // keeps both positive from this start while it converges.
        let s = [1.0, 1.0, 0.5, 1.0, 1.0, 0.5, 0.5, 0.5, 1.0];
        let q = [-1.0, -1.0, -1.0];
        let mut lambda = vec![0.5, 0.5, 0.5];
        let stats = DenseLcp::default().solve(&rows(&s, 3), &q, &mut lambda, 1e-12, 1000);
        assert!(stats.converged, "{stats:?}");
        assert_eq!(stats.failed_refinements, 1, "{stats:?}");
        // The solution: lambda_0 + lambda_1 = 2/3, lambda_2 = 2/3 (w = 0 on all three).
        assert!(
            (lambda[0] + lambda[1] - 2.0 / 3.0).abs() < 1e-10,
            "{lambda:?}"
        );
        assert!((lambda[2] - 2.0 / 3.0).abs() < 1e-10, "{lambda:?}");
    }

    /// A warm start at the solution needs no sweep; the exact refinement ends a solve long
    /// before PGS alone would converge.
    #[test]
    fn warm_starts_and_refinement_cut_the_sweeps() {
        let mut rng = Rng(11);
        let mut solver = DenseLcp::default();
        let (s, q) = random_lcp(&mut rng, 40);
        let mut lambda = vec![0.0; 40];
        let sparse = rows(&s, 40);
        let cold = solver.solve(&sparse, &q, &mut lambda, 1e-10, 100_000);
        assert!(cold.converged && cold.refinements > 0, "{cold:?}");
        let warm = solver.solve(&sparse, &q, &mut lambda, 1e-10, 100_000);
        assert_eq!(warm.sweeps, 0, "{warm:?}");
        let mut plain = vec![0.0; 40];
        let mut sweeps = 0;
        // PGS alone, for comparison.
        while sweeps < 100_000 {
            for j in 0..40 {
                let w: f64 = (0..40).map(|k| s[j * 40 + k] * plain[k]).sum::<f64>() + q[j];
                plain[j] = (plain[j] - w / s[j * 40 + j]).max(0.0);
            }
            sweeps += 1;
            if plain.iter().zip(&lambda).all(|(a, b)| (a - b).abs() < 1e-8) {
                break;
            }
        }
        assert!(
            cold.sweeps < sweeps,
            "{cold:?} against {sweeps} plain sweeps"
        );
    }

    /// Solves of one matrix with new right-hand sides, the factor kept from one to the next
    /// (`solve_again` with `same_matrix`), give what a fresh solver gives.
    #[test]
    fn a_kept_factor_solves_new_right_hand_sides() {
        let mut rng = Rng(23);
        let m = 30;
        let (s, q) = random_lcp(&mut rng, m);
        let sparse = rows(&s, m);
        let mut kept = DenseLcp::default();
        let mut lambda = vec![0.0; m];
        assert!(
            kept.solve(&sparse, &q, &mut lambda, 1e-11, 100_000)
                .converged
        );
        for trial in 0..12 {
            // Small changes keep the active set (the factor is used as it is); large ones
            // change it (updates or a new factorization).
            let size = if trial % 2 == 0 { 1e-3 } else { 0.5 };
            let q2: Vec<f64> = q.iter().map(|v| v + size * rng.signed()).collect();
            let mut again = lambda.clone();
            let stats = kept.solve_again(&sparse, &q2, &mut again, 1e-11, 100_000, true);
            assert!(stats.converged, "{trial}: {stats:?}");
            let mut fresh = vec![0.0; m];
            assert!(
                DenseLcp::default()
                    .solve(&sparse, &q2, &mut fresh, 1e-11, 100_000)
                    .converged
            );
            for (a, b) in again.iter().zip(&fresh) {
                assert!((a - b).abs() < 1e-8, "{trial}: {a} against {b}");
            }
            lambda = again;
        }
    }
}
