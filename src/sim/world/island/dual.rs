//! The constrained global step in the contact subspace: the QP's dual, an LCP over the
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
//! (`Island::kkt` is zero), where MPRGP stops at its tolerance. It costs, per PD iteration,
//! `S`'s nonzeros (built row by row, upper triangle only, then mirrored: only rows on a common
//! body couple, and the dense `m x m` matrix this replaced was 3-5 MB to clear and fill every
//! iteration in the `pile` example's island of about 600-770 rows), the LCP, and
//! one pass over each body per vertex with a contact force; the columns themselves are
//! computed once per vertex while the factor stands
//! ([`crate::sim::world::body::SoftBody`]'s workspace keeps them).
//!
//! `S` depends only on the rows' terms (vertices and coefficients) and on the members'
//! factors, so where the rows of an iteration are those of the last solve in the subspace, in
//! any order (each iteration re-ranks them by depth), `S` is kept, and with it the LCP's factor
//! of the last active set ([`DenseLcp::solve_again`]): the LCP is solved in the kept order of
//! the rows, `q` and the warm start permuted in and the multipliers out. A body resting or
//! jiggling on the floor keeps its rows step after step, and each iteration's LCP is then a
//! triangular solve pair. Measured on the solver bench's 1,000-vertex cube over its 40 steps
//! after landing (ten iterations each, 100 rows; three runs each, alternated): 1.37-1.45 ms of
//! constrained steps per step against 2.12-2.37 ms rebuilding `S` and factoring every
//! iteration, 4.93-5.27 ms per step against 5.96-6.84 ms.
//!
//! [`DenseLcp`]: crate::sim::qp::dense_lcp::DenseLcp
//! [`DenseLcp::solve_again`]: crate::sim::qp::dense_lcp::DenseLcp::solve_again
//!
//! Used where every vertex of the rows and of the last iteration's forces has its column and
//! the rows are at most [`MAX_DUAL_ROWS`]; otherwise MPRGP solves the QP.

use rayon::prelude::*;

use super::layout::Layout;
use super::{Island, IslandContact};
use crate::sim::math::Vec3;
use crate::sim::prone::ProneColumn;
use crate::sim::qp::MAX_ROW_VERTICES;
use crate::sim::qp::dense_lcp::{DenseLcpStats, SymmetricRows};
use crate::sim::world::body::SoftBody;

/// Most rows solved in the contact subspace (the LCP's matrix is dense: 8 MB and about 1 M
/// multiply-adds per Gauss-Seidel sweep at 1,024).
pub(crate) const MAX_DUAL_ROWS: usize = 1024;

/// One entry of a contact row, on one body: the row's coefficient (per coordinate) on one of
/// the body's free vertices.
#[derive(Debug, Clone, Copy)]
pub(super) struct DualEntry {
    body: u32,
    row: u32,
    vertex: u32,
    coeff: Vec3,
}

/// The identity of a contact row in the island's `S` (see
/// [`Island::solve_in_contact_subspace`]): per term, the body, its column cache's generation,
/// the free vertex and the coefficient's bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct RowKey {
    len: u8,
    terms: [(u32, u64, u32, [u64; 3]); MAX_ROW_VERTICES],
}

/// The compliance of a row over embedded points in the contact subspace (a drawn point against
/// an obstacle or another drawn surface), as a share of its diagonal entry of `S` (see
/// `Island::build_schur`): such a row may be violated by this share of the displacement its
/// own force causes.
const EMBEDDED_ROW_COMPLIANCE: f64 = 1e-3;

/// The dense LCP's tolerance where rows are compliant, relative to the largest `|q|` (the
/// largest gap change asked, m). Where dozens of embedded rows share a few vertices the solves
/// stalled at natural-map residuals of 2e-5 to 4e-4 of it (1e-7 to 2e-6 m against 5 mm: a
/// drawn box dropped onto another, 140 subspace steps in 300 sweeps) and the island fell back
/// to MPRGP; 1e-3 of it is a few micrometres, the order of the compliance's own give (1e-3 of
/// the displacement a row's force causes).
const EMBEDDED_LCP_TOLERANCE: f64 = 1e-3;

/// Sorts row indices by their keys (ties cannot matter: equal keys are equal rows).
fn sort_by_key(order: &mut [u32], keys: &[RowKey]) {
    order.sort_unstable_by(|&a, &b| keys[a as usize].cmp(&keys[b as usize]));
}

/// Rows of `S`'s upper triangle per parallel block (each row's entries are summed in the same
/// order whatever the blocks, so the matrix does not depend on the thread count).
const UPPER_BLOCK_ROWS: usize = 48;

/// A block of rows of `S`'s upper triangle and its scratch.
#[derive(Debug, Default, Clone)]
pub(super) struct UpperBlock {
    /// The rows, their columns those of the whole matrix.
    rows: SymmetricRows,
    /// One row's sums, by column; zero between rows.
    accumulator: Vec<f64>,
    /// The columns one row touches.
    columns: Vec<u32>,
    /// Whether a column of `A^-1` was missing (the solve falls back to MPRGP).
    missing: bool,
}

impl UpperBlock {
    /// Rows `rows` of the upper triangle of `S = J A^-1 J'` from the island's rows and
    /// `dual_entries` (grouped by body, sorted by row).
    fn build(
        &mut self,
        island: &Island,
        bodies: &[SoftBody],
        layout: Layout<'_>,
        rows: std::ops::Range<usize>,
    ) {
        let m = island.rows.len();
        self.rows.clear();
        self.missing = false;
        self.accumulator.clear();
        self.accumulator.resize(m, 0.0);
        for j in rows {
            self.columns.clear();
            for (u, c) in island.rows[j].entries() {
                let (b, d) = island.owner(layout, u as u32);
                let Some(column) = inverse_column(&bodies[b], d) else {
                    self.missing = true;
                    return;
                };
                let (first, last) = island.dual.body_entries[b];
                let group = &island.dual.entries[first as usize..last as usize];
                // Sorted by row: the entries of rows `>= j` on this body.
                let from = group.partition_point(|e| (e.row as usize) < j);
                for e in &group[from..] {
                    let k = e.row as usize;
                    if self.accumulator[k] == 0.0 {
                        self.columns.push(e.row);
                    }
                    let Some(entry) = column.at(e.vertex) else {
                        self.missing = true;
                        return;
                    };
                    self.accumulator[k] += c.dot(&e.coeff) * entry;
                }
            }
            // A coupled rigid body's term between this row and the later rows on it.
            let rigid = &island.coupled.row_rigid;
            for &(b, k) in island.rigid_rows_from(j) {
                let k = k as usize;
                if self.accumulator[k] == 0.0 {
                    self.columns.push(k as u32);
                }
                self.accumulator[k] +=
                    island.coupled.bodies[b as usize].coupling_term(&rigid[j], &rigid[k]);
            }
            self.columns.sort_unstable();
            self.columns.dedup();
            let row_start = self.rows.entries.len();
            for &k in &self.columns {
                let value = std::mem::take(&mut self.accumulator[k as usize]);
                if value != 0.0 {
                    self.rows.push(k, value);
                }
            }
            let diagonal = match self.rows.entries.get(row_start) {
                Some(&(k, v)) if k as usize == j => v,
                _ => 0.0,
            };
            self.rows.end_row(diagonal);
        }
    }
}

/// A column of a member's `A^-1` (m/N): cached whole (`crate::sim::inverse_columns`), or over
/// the body's collision-prone region (`crate::sim::prone`).
#[derive(Debug, Clone, Copy)]
enum InverseColumn<'a> {
    Whole(&'a [f64]),
    Prone(ProneColumn<'a>),
}

impl InverseColumn<'_> {
    /// The entry at free vertex `d`, where the column has it.
    #[inline]
    fn at(&self, d: u32) -> Option<f64> {
        match self {
            Self::Whole(values) => values.get(d as usize).copied(),
            Self::Prone(column) => column.at(d),
        }
    }
}

/// Column `d` of `body`'s `A^-1`, from its collision-prone region where it has one, else from
/// its column cache.
fn inverse_column(body: &SoftBody, d: u32) -> Option<InverseColumn<'_>> {
    match body.pd.as_ref().and_then(|pd| pd.prone()) {
        Some(prone) => prone.column(d).map(InverseColumn::Prone),
        None => body.ws.columns.column(d).map(InverseColumn::Whole),
    }
}

/// Identifies the factor `body`'s columns are of (see [`inverse_column`]).
fn inverse_generation(body: &SoftBody) -> u64 {
    match body.pd.as_ref().and_then(|pd| pd.prone()) {
        Some(prone) => prone.generation(),
        None => body.ws.columns.generation(),
    }
}

/// Gauss-Seidel sweeps at most per dual solve (the exact refinement usually ends it in a few).
const MAX_SWEEPS: usize = 300;

/// The contact subspace's state of one island, kept from iteration to iteration while its rows come
/// back (the kept `S`, its rows' keys, the dense LCP) and the scratch that builds it. Used by
/// [`Island::solve_in_contact_subspace`] alone, and [`Island::solve`] records `lambda_prev`.
#[derive(Debug, Default, Clone)]
pub(crate) struct DualState {
    /// [`Island::lambda`] of the last constrained step, the contact subspace's warm start.
    pub(super) lambda_prev: Vec<f64>,
    /// The contact subspace's `S = J A^-1 J'` , kept while its rows come back.
    pub(super) s: crate::sim::qp::dense_lcp::SymmetricRows,
    /// The upper triangle of `S` as the blocks build it, before it is copied into `s`.
    pub(super) upper: crate::sim::qp::dense_lcp::SymmetricRows,
    /// Blocks of rows of `S`'s upper triangle, built in parallel .
    pub(super) blocks: Vec<UpperBlock>,
    /// Scratch of that copy: per row, where its entries continue.
    pub(super) cursor: Vec<usize>,
    /// Per world body: the range of its entries in `entries`.
    pub(super) body_entries: Vec<(u32, u32)>,
    /// The LCP's `q` per current row (m).
    pub(super) q: Vec<f64>,
    /// The solution's change per unknown from the multipliers (m), and the unknowns it touches.
    pub(super) delta: Vec<Vec3>,
    /// The unknowns `delta` touches, sorted and unique.
    pub(super) touched: Vec<u32>,
    /// Every row's entries on the members' free vertices, grouped by body.
    pub(super) entries: Vec<DualEntry>,
    /// The dense LCP over the rows, with its factor of the kept `S`.
    pub(super) lcp: crate::sim::qp::dense_lcp::DenseLcp,
    /// The rows the kept `S` (`s`) and the LCP's factor are of, in the kept order; empty
    /// where none is kept .
    pub(super) keys: Vec<RowKey>,
    /// `keys`' indices sorted by key.
    pub(super) order: Vec<u32>,
    /// The current rows' keys, compared with `keys`.
    pub(super) keys_next: Vec<RowKey>,
    /// `keys_next`' indices sorted by key.
    pub(super) order_next: Vec<u32>,
    /// Per current row, its index in the kept matrix.
    pub(super) kept_of: Vec<u32>,
    /// `q` and the multipliers in the kept matrix's order of the rows.
    pub(super) q_kept: Vec<f64>,
    /// The multipliers in the kept matrix's order of the rows (N).
    pub(super) lambda_kept: Vec<f64>,
    /// A localized member's changed forces: free vertex and force (N).
    pub(super) forces: Vec<(u32, Vec3)>,
    /// The same forces per vertex of the member's collision-prone region, in its order (N).
    pub(super) region_forces: Vec<Vec3>,
    /// A localized member's response to them, per free vertex (m).
    pub(super) response: Vec<Vec3>,
    /// The scratch of that solve.
    pub(super) solve_scratch: crate::sim::sparse::TrailingScratch,
}

impl DualState {
    /// What a later step reads of `source`, into `self` (buffers reused): the kept `S`, its
    /// rows' keys and the dense LCP's factor, which a later step solves with again where its
    /// rows come back, and the last multipliers that warm-start it. A world snapshot's copy.
    fn copy_carried_from(&mut self, source: &Self) {
        let Self {
            lambda_prev,
            s,
            upper: _,
            blocks: _,
            cursor: _,
            body_entries: _,
            q: _,
            delta: _,
            touched: _,
            entries: _,
            lcp,
            keys,
            order,
            keys_next: _,
            order_next: _,
            kept_of: _,
            q_kept: _,
            lambda_kept: _,
            forces: _,
            region_forces: _,
            response: _,
            solve_scratch: _,
        } = source;
        self.lambda_prev.clone_from(lambda_prev);
        self.s.clone_from(s);
        self.lcp.clone_from(lcp);
        self.keys.clone_from(keys);
        self.order.clone_from(order);
    }
}

impl Island {
    /// What of `source` a later step reads, into `self` (buffers reused): the contact
    /// subspace's kept matrix and factor and the MPRGP's norm estimate, which carry from step
    /// to step in the island's slot; everything else an island holds is written by the step
    /// before it is read. A world snapshot's copy (`crate::sim::world::snapshot`).
    pub(crate) fn copy_carried_from(&mut self, source: &Self) {
        self.dual.copy_carried_from(&source.dual);
        self.mprgp.copy_warm_start_from(&source.mprgp);
    }
}

impl Island {
    /// Whether row `j` is over embedded points: an obstacle row of an embedded point (more than
    /// one vertex), or a soft or edge row with a drawn surface on either side (see
    /// [`EMBEDDED_ROW_COMPLIANCE`]).
    fn row_is_embedded(&self, j: usize, bodies: &[SoftBody]) -> bool {
        match &self.contacts[self.row_contact[j] as usize] {
            IslandContact::Soft(c) => {
                bodies[c.vertex_body as usize].drawn.is_some()
                    || bodies[c.triangle_body as usize].drawn.is_some()
            }
            IslandContact::Obstacle { .. } => self.rows[j].len > 1,
            IslandContact::Edge(c) => {
                bodies[c.body_a as usize].drawn.is_some()
                    || bodies[c.body_b as usize].drawn.is_some()
            }
        }
    }

    /// The body and free vertex of island unknown `u`.
    fn owner(&self, layout: Layout<'_>, u: u32) -> (usize, u32) {
        let k = self.unknown_member[u as usize] as usize;
        let b = self.members[k] as usize;
        (b, u - layout.offset_of[b])
    }

    /// Whether island unknown `u`'s column of `A^-1` is cached.
    fn has_column(&self, bodies: &[SoftBody], layout: Layout<'_>, u: u32) -> bool {
        let (b, d) = self.owner(layout, u);
        inverse_column(&bodies[b], d).is_some()
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
        inverse_column(&bodies[bv], dv)?.at(du)
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
        let has_column = |u: u32| self.has_column(bodies, layout, u);
        let all_cached = self
            .rows
            .iter()
            .all(|r| r.vertices[..r.len as usize].iter().all(|&u| has_column(u)))
            && self.row_force.iter().all(|&(u, _)| has_column(u));
        if !all_cached {
            return None;
        }
        // `A^-1 g` at the rows' unknowns, then `q`.
        self.dual.q.clear();
        for row in &self.rows {
            let mut q = -row.rhs;
            for (u, c) in row.entries() {
                let mut shift = Vec3::zeros();
                for &(v, g) in &self.row_force {
                    shift += self.inverse_entry(bodies, layout, u as u32, v)? * g;
                }
                q += c.dot(&(self.x[u] - shift));
            }
            self.dual.q.push(q);
        }
        // Coupled rigid bodies: their free displacement is that of their applied forces.
        if !self.coupled.rigid_rows.is_empty() {
            for j in 0..m {
                self.dual.q[j] += self.rigid_q(j);
            }
        }
        // `S` depends on the rows' terms and the members' factors only. The rows are rebuilt
        // (and re-ranked by depth) every iteration; where they are those of the matrix kept
        // from the last solve in the subspace, in any order (a body resting on the floor,
        // iteration after iteration and step after step), the LCP is solved in the kept
        // matrix's order of the rows, with its factor: `q` and the warm start permuted in,
        // the multipliers out.
        self.dual.keys_next.clear();
        for row in &self.rows {
            let mut key = RowKey {
                len: row.len,
                terms: [(0, 0, 0, [0; 3]); MAX_ROW_VERTICES],
            };
            for (t, (u, c)) in row.entries().enumerate() {
                let (b, d) = self.owner(layout, u as u32);
                key.terms[t] = (
                    b as u32,
                    inverse_generation(&bodies[b]),
                    d,
                    [c.x.to_bits(), c.y.to_bits(), c.z.to_bits()],
                );
            }
            self.dual.keys_next.push(key);
        }
        // Rows on a coupled rigid body carry its terms, which the keys do not describe (its
        // arms move with it): such a matrix is built every time and never kept.
        let coupled = !self.coupled.rigid_rows.is_empty();
        let same_matrix = !coupled && self.match_kept_rows();
        if !same_matrix {
            std::mem::swap(&mut self.dual.keys, &mut self.dual.keys_next);
            self.dual.order.clear();
            self.dual.order.extend(0..m as u32);
            sort_by_key(&mut self.dual.order, &self.dual.keys);
            if !self.build_schur(bodies, layout) {
                self.dual.keys.clear();
                self.dual.order.clear();
                return None;
            }
            self.dual.kept_of.clear();
            self.dual.kept_of.extend(0..m as u32);
            if coupled {
                self.dual.keys.clear();
            }
        }
        // Warm start: each row's contact force of the last iteration, in the kept order.
        self.dual.q_kept.clear();
        self.dual.q_kept.resize(m, 0.0);
        self.dual.lambda_kept.clear();
        self.dual.lambda_kept.resize(m, 0.0);
        for (j, &k) in self.dual.kept_of.iter().enumerate() {
            self.dual.q_kept[k as usize] = self.dual.q[j];
            self.dual.lambda_kept[k as usize] = self.dual.lambda_prev[self.row_contact[j] as usize];
        }
        let scale = self.dual.q.iter().fold(0.0f64, |a, q| a.max(q.abs()));
        // Compliant rows are solved to what their compliance leaves anyway (see
        // `EMBEDDED_ROW_COMPLIANCE`), the others to round-off.
        let compliant = (0..m).any(|j| self.row_is_embedded(j, bodies));
        let relative = if compliant {
            EMBEDDED_LCP_TOLERANCE
        } else {
            1e-10
        };
        self.dual.lcp.set_projected_steps(compliant);
        // A localized member's contact patch may hold hundreds of active rows, where only
        // MPRGP over the whole body is the other way (see `crate::sim::prone`).
        let localized = self.members.iter().any(|&b| {
            bodies[b as usize]
                .pd
                .as_ref()
                .is_some_and(|pd| pd.prone().is_some())
        });
        self.dual.lcp.set_large_active_sets(localized);
        let stats = self.dual.lcp.solve_again(
            &self.dual.s,
            &self.dual.q_kept,
            &mut self.dual.lambda_kept,
            1e-12 + relative * scale,
            MAX_SWEEPS,
            same_matrix,
        );
        if !stats.converged {
            return None;
        }
        self.row_lambda.clear();
        self.row_lambda.extend(
            self.dual
                .kept_of
                .iter()
                .map(|&k| self.dual.lambda_kept[k as usize]),
        );
        // `x += A^-1 (J' lambda - g)`, one column per unknown whose force changed.
        self.dual.delta.clear();
        self.dual.delta.resize(self.unknowns, Vec3::zeros());
        self.dual.touched.clear();
        for (row, &l) in self.rows.iter().zip(&self.row_lambda) {
            if l > 0.0 {
                for (u, c) in row.entries() {
                    self.dual.delta[u] += l * c;
                    self.dual.touched.push(u as u32);
                }
            }
        }
        for &(v, g) in &self.row_force {
            self.dual.delta[v as usize] -= g;
            self.dual.touched.push(v);
        }
        self.dual.touched.sort_unstable();
        self.dual.touched.dedup();
        // Every column is looked up before `x` changes, so that a missing one leaves `x` as it
        // was (the check of the rows' and forces' unknowns above covers them; this keeps the
        // promise should that check change).
        if self.dual.touched.iter().any(|&u| {
            self.dual.delta[u as usize] != Vec3::zeros() && !self.has_column(bodies, layout, u)
        }) {
            return None;
        }
        let mut localized = false;
        for &u in &self.dual.touched {
            let delta = self.dual.delta[u as usize];
            if delta == Vec3::zeros() {
                continue;
            }
            let (b, d) = self.owner(layout, u);
            match inverse_column(&bodies[b], d)? {
                InverseColumn::Whole(column) => {
                    let o = layout.offset_of[b] as usize;
                    for (x, &c) in self.x[o..o + column.len()].iter_mut().zip(column) {
                        *x += c * delta;
                    }
                }
                InverseColumn::Prone(_) => localized = true,
            }
        }
        if localized {
            self.apply_localized_forces(bodies, layout);
        }
        Some(stats)
    }

    /// `x += A^-1 delta` on the members with a collision-prone region, `delta` (N) on its
    /// vertices (the forces the subspace solve changed, all in the region: the solve checked
    /// that each has its column): one solve through the body's factor rounded to f32 whose
    /// forward half runs over the region's trailing block alone
    /// (`crate::sim::sparse::SparseCholesky::solve_trailing_with`). Its rounding is relative
    /// to the response (about 1e-7 of it), as the unconstrained solves' is; an exact
    /// overwrite of the region's entries from its block of `A^-1` was measured at half of the
    /// QP's time on the 10K cube (484 forces times a 1,452-vertex region) and dropped.
    fn apply_localized_forces(&mut self, bodies: &[SoftBody], layout: Layout<'_>) {
        for &b in &self.members {
            let b = b as usize;
            let Some(pd) = bodies[b].pd.as_ref() else {
                continue;
            };
            let Some(prone) = pd.prone() else { continue };
            let n = pd.free_vertices().len();
            let o = layout.offset_of[b] as usize;
            let dual = &mut self.dual;
            dual.forces.clear();
            for &u in &dual.touched {
                let u = u as usize;
                if u >= o && u < o + n && dual.delta[u] != Vec3::zeros() {
                    dual.forces.push(((u - o) as u32, dual.delta[u]));
                }
            }
            if dual.forces.is_empty() {
                continue;
            }
            // The forces in the region's (the factor's trailing) order.
            dual.region_forces.clear();
            dual.region_forces
                .resize(prone.vertices().len(), Vec3::zeros());
            for &(d, f) in &dual.forces {
                if let Some(slot) = prone.slot(d) {
                    dual.region_forces[slot] = f;
                }
            }
            dual.response.resize(n, Vec3::zeros());
            pd.solve_trailing_with(
                &dual.region_forces,
                &mut dual.response,
                &mut dual.solve_scratch,
            );
            for (x, r) in self.x[o..o + n].iter_mut().zip(&dual.response) {
                *x += r;
            }
        }
    }

    /// Whether the current rows (their keys in `dual_keys_next`) are the kept matrix's rows
    /// in some order; if so, `dual_kept_of[j]` is row `j`'s index in the kept matrix.
    fn match_kept_rows(&mut self) -> bool {
        let m = self.dual.keys_next.len();
        if m != self.dual.keys.len() || m == 0 {
            return false;
        }
        self.dual.order_next.clear();
        self.dual.order_next.extend(0..m as u32);
        sort_by_key(&mut self.dual.order_next, &self.dual.keys_next);
        self.dual.kept_of.clear();
        self.dual.kept_of.resize(m, 0);
        for (&new, &kept) in self.dual.order_next.iter().zip(&self.dual.order) {
            if self.dual.keys_next[new as usize] != self.dual.keys[kept as usize] {
                return false;
            }
            self.dual.kept_of[new as usize] = kept;
        }
        true
    }

    /// Builds `S = J A^-1 J'` of the island's rows into `dual_s` from the members' cached
    /// columns. Returns false where a column is missing.
    fn build_schur(&mut self, bodies: &[SoftBody], layout: Layout<'_>) -> bool {
        let m = self.rows.len();
        // `S = J A^-1 J'`: `A` is block diagonal over the members, so only the entries of two
        // rows on one body meet. The rows' entries grouped by body; then, row by row, its upper
        // triangle, pairing each entry of the row with the entries of later rows on its body
        // (summed in a dense accumulator of one row), in blocks of rows in parallel; and the
        // whole matrix from that.
        self.dual.entries.clear();
        for (j, row) in self.rows.iter().enumerate() {
            for (u, c) in row.entries() {
                let (b, d) = self.owner(layout, u as u32);
                self.dual.entries.push(DualEntry {
                    body: b as u32,
                    row: j as u32,
                    vertex: d,
                    coeff: *c,
                });
            }
        }
        self.dual
            .entries
            .sort_unstable_by_key(|e| (e.body, e.row, e.vertex));
        self.dual.body_entries.clear();
        self.dual.body_entries.resize(bodies.len(), (0, 0));
        let mut start = 0;
        for group in self.dual.entries.chunk_by(|a, b| a.body == b.body) {
            let end = start + group.len();
            self.dual.body_entries[group[0].body as usize] = (start as u32, end as u32);
            start = end;
        }
        let count = m.div_ceil(UPPER_BLOCK_ROWS);
        // Out of the island while the blocks read it (put back below; no allocation).
        let mut blocks = std::mem::take(&mut self.dual.blocks);
        if blocks.len() < count {
            blocks.resize_with(count, UpperBlock::default);
        }
        {
            let island = &*self;
            blocks[..count]
                .par_iter_mut()
                .enumerate()
                .for_each(|(i, block)| {
                    let rows = i * UPPER_BLOCK_ROWS..((i + 1) * UPPER_BLOCK_ROWS).min(m);
                    block.build(island, bodies, layout, rows);
                });
        }
        let missing = blocks[..count].iter().any(|b| b.missing);
        if !missing {
            self.dual.upper.clear();
            for block in &blocks[..count] {
                self.dual.upper.append_rows(&block.rows);
            }
        }
        self.dual.blocks = blocks;
        if missing {
            return false;
        }
        self.dual
            .s
            .from_upper(&self.dual.upper, &mut self.dual.cursor);
        // Rows of embedded points are many more than the vertices they move (dozens of drawn
        // points per cage tet near a floor or another drawn surface), so `S` is singular over
        // them: a compliance of `EMBEDDED_ROW_COMPLIANCE` times each such row's diagonal makes
        // it definite.
        for j in 0..m {
            if self.row_is_embedded(j, bodies) {
                let d = self.dual.s.diagonal[j];
                self.dual.s.add_to_diagonal(j, EMBEDDED_ROW_COMPLIANCE * d);
            }
        }
        true
    }
}
