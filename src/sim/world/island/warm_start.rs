//! The contact QP's warm start, chosen without products with the global matrix.
//!
//! Each PD iteration's contact QP (MPRGP) starts from the better of two feasible points: the
//! projection onto the rows of the unconstrained solution `x_free` (which already holds the
//! last iteration's contact forces) and the projection of the previous iterate. Choosing
//! takes both objectives, and MPRGP's first gradient takes `A x` at the point chosen: three
//! products with the island's matrix per QP, as many as a fifth of the QP's products on the
//! 10K-vertex bench cube. Here the products come from what the iteration already knows, about
//! the inertial prediction `y` the QP is solved about (`Mprgp::solve_about`), where the
//! objective is `f(d) = 1/2 d'A d - (b_qp - A y)'d` for `d = x - y`:
//!
//! - `x_free` solves `A x_free = b + f` (the right-hand side and the forces of its unconstrained
//!   solve), so `A (x_free - y) = b + f - A y`, to the accuracy of that solve's f32 correction
//!   (about 1e-7 of the correction): good enough to compare two objectives, not to start
//!   MPRGP from, so where this point wins MPRGP forms its gradient by a product as before;
//! - the previous iterate is the last QP's solution, for which MPRGP ended with the gradient
//!   `A x - b_qp`, so `A (x - y) = g + b_qp - A y`; kept per island, it holds while the bodies
//!   come back with exactly that iterate (checked unknown by unknown as they are copied in) in
//!   the same step, and it is what MPRGP starts from where this point wins;
//! - projecting a point moves only the unknowns of the rows it violates: the change of `A x`
//!   is those columns of `A` times the moves (the PD matrix is symmetric, so a row's entries).
//!
//! The first QP of a step has no previous solution and forms `A (x - y)` of the iterate by a
//! product; Newton matrices change every iteration and keep the products throughout.
//!
//! The products this saves are cheap ones (the PD matrix has about 15 entries a row, and its
//! products run on both threads), so the passes that replace them are fused into one over the
//! unknowns, chunked as MPRGP's (in parallel on large islands, the same bits on any number of
//! threads). Measured on the 10,648-vertex cube (a scratch driver, 30 steps, 8.7 QPs a step):
//! the warm start, MPRGP's first gradient and the bookkeeping after it 6.3-6.9 -> 3.5-3.6 ms
//! per step. The objective compared for `x_free` agrees with the one a product gives to 1e-8
//! relative (at rest, where both are about 1e-20 J, to 1e-23 J), and the choice is the same
//! in every QP checked (the 39,304-vertex cube's 51 QPs of 8 steps).

use rayon::prelude::*;

use super::Island;
use super::layout::Layout;
use super::matrix::IslandMatrix;
use crate::sim::math::Vec3;
use crate::sim::qp::mprgp::{PASS_CHUNK, min_chunks, total};
use crate::sim::qp::{ConstraintRow, SpdOperator};
use crate::sim::world::body::SoftBody;

/// The starting points of one island's MPRGP solves and the products that choose between them
/// without the global matrix (see the module docs), with the inertial prediction the QP is solved
/// about. Filled by [`Island::solve`], read by [`Island::choose_warm_start`] and
/// [`Island::solve_by_mprgp`].
#[derive(Debug, Default, Clone)]
pub(crate) struct WarmStart {
    /// The iterate, projected as a warm start of the QP; after an MPRGP solve, its solution.
    pub(super) x_alt: Vec<Vec3>,
    /// The right-hand side of the unconstrained solves, `b` plus the forces they included:
    /// `A x_free` to their accuracy (see the `warm_start` module).
    pub(super) rhs_free: Vec<Vec3>,
    /// `A (x_alt - y)`, exact where `solution_product_kept` says so.
    pub(super) a_solution: Vec<Vec3>,
    /// Whether `a_solution` is the product for `x_alt` in this step.
    pub(super) solution_product_kept: bool,
    /// Per chunk of unknowns, the warm start's partial sums.
    pub(super) partials: Vec<[f64; 2]>,
    /// The unknowns a warm start's projection moved, with their positions before.
    pub(super) moved: Vec<(u32, Vec3)>,
    /// Scratch flags per unknown of the projection (all false between uses).
    pub(super) moved_mark: Vec<bool>,
    /// Per unknown: the inertial prediction `y`, about which the contact QP is solved.
    pub(super) anchor: Vec<Vec3>,
    /// `A y` (N).
    pub(super) a_anchor: Vec<Vec3>,
    /// Whether `a_anchor` and the MPRGP's `||A||` estimate are set for this step.
    pub(super) step_products: bool,
}

impl Island {
    /// Whether every member advances by the PD matrix, whose products the warm start reuses.
    pub(super) fn products_reusable(&self, bodies: &[SoftBody]) -> bool {
        self.members
            .iter()
            .all(|&b| bodies[b as usize].newton.is_none())
    }

    /// Projects [`Island::x`] (holding `x_free`) and `x_alt` (the iterate) onto the rows and
    /// keeps the one of lower objective in `x`. Returns whether that is the iterate, whose
    /// `A (x - y)` is then exact in `a_solution`; the unconstrained solution's is not, and
    /// MPRGP forms it itself.
    pub(super) fn choose_warm_start(&mut self, bodies: &[SoftBody], layout: Layout<'_>) -> bool {
        let matrix = IslandMatrix {
            bodies,
            members: &self.members,
            layout,
            unknowns: self.unknowns,
        };
        if !self.warm.solution_product_kept {
            // No product kept for the iterate (the step's first QP, or the bodies came back
            // with another one): formed now.
            self.gradient.clear();
            self.gradient.extend(
                self.warm
                    .x_alt
                    .iter()
                    .zip(&self.warm.anchor)
                    .map(|(x, y)| x - y),
            );
            self.warm.a_solution.resize(self.unknowns, Vec3::zeros());
            matrix.apply(&self.gradient, &mut self.warm.a_solution);
            self.warm.solution_product_kept = true;
        }
        // `1/2 d'A delta` of the unconstrained solution's projection, from the moved rows.
        project_tracking(
            &self.rows,
            &mut self.x,
            &mut self.warm.moved,
            &mut self.warm.moved_mark,
        );
        let moved_energy = 0.5
            * moves_dot(
                &matrix,
                &self.unknown_member,
                &self.warm.moved,
                &self.x,
                &self.warm.anchor,
            );
        // The iterate's product follows its projection exactly.
        project_tracking(
            &self.rows,
            &mut self.warm.x_alt,
            &mut self.warm.moved,
            &mut self.warm.moved_mark,
        );
        add_moves_product(
            &matrix,
            &self.unknown_member,
            &self.warm.moved,
            &self.warm.x_alt,
            &mut self.warm.a_solution,
        );
        let [free_dense, f_old] = self.warm_start_objectives();
        if f_old < free_dense + moved_energy {
            self.x.copy_from_slice(&self.warm.x_alt);
            true
        } else {
            false
        }
    }

    /// Both candidates' objectives `1/2 d'(A d) - (b_qp - A y)'d` (`d = x - y`) in one pass
    /// over the unknowns: the unconstrained solution's without its `1/2 d'A delta` (its
    /// product taken as `b + f - A y`), the iterate's whole (from `a_solution`). Chunked as
    /// MPRGP's passes (in parallel on large islands), the chunks' sums added in order.
    fn warm_start_objectives(&mut self) -> [f64; 2] {
        let n = self.unknowns;
        self.warm.partials.resize(n.div_ceil(PASS_CHUNK), [0.0; 2]);
        let (x, alt, anchor) = (&self.x, &self.warm.x_alt, &self.warm.anchor);
        let (rhs, a_anchor, b, a_alt) = (
            &self.warm.rhs_free,
            &self.warm.a_anchor,
            &self.b_qp,
            &self.warm.a_solution,
        );
        self.warm
            .partials
            .par_iter_mut()
            .enumerate()
            .with_min_len(min_chunks(n))
            .for_each(|(k, out)| {
                let (mut free, mut iterate) = (0.0, 0.0);
                for u in k * PASS_CHUNK..((k + 1) * PASS_CHUNK).min(n) {
                    let s = b[u] - a_anchor[u];
                    let d = x[u] - anchor[u];
                    free += d.dot(&(0.5 * (rhs[u] - a_anchor[u]) - s));
                    let d = alt[u] - anchor[u];
                    iterate += d.dot(&(0.5 * a_alt[u] - s));
                }
                *out = [free, iterate];
            });
        total(&self.warm.partials)
    }

    /// After an MPRGP solve: `A (x - y) = (A x - b_qp) + b_qp - A y` of its solution, from the
    /// gradient it ended with, and the solution itself in `x_alt`, against which the next
    /// iteration checks the iterate the bodies hand back.
    pub(super) fn keep_solution_product(&mut self, gradient: &[Vec3]) {
        let n = self.unknowns;
        self.warm.a_solution.resize(n, Vec3::zeros());
        let (x, b, a_anchor) = (&self.x, &self.b_qp, &self.warm.a_anchor);
        self.warm
            .a_solution
            .par_chunks_mut(PASS_CHUNK)
            .zip(self.warm.x_alt.par_chunks_mut(PASS_CHUNK))
            .enumerate()
            .with_min_len(min_chunks(n))
            .for_each(|(k, (product, alt))| {
                let o = k * PASS_CHUNK;
                for (i, (p, a)) in product.iter_mut().zip(alt).enumerate() {
                    let u = o + i;
                    *p = gradient[u] + b[u] - a_anchor[u];
                    *a = x[u];
                }
            });
        self.warm.solution_product_kept = true;
    }
}

#[cfg(test)]
impl Island {
    /// `max |a_solution - A (x_alt - y)|` over `max |A (x_alt - y)|`, the kept product against
    /// one formed now, or `None` where none is kept.
    pub(super) fn kept_product_error(
        &self,
        bodies: &[SoftBody],
        layout: Layout<'_>,
    ) -> Option<f64> {
        if !self.warm.solution_product_kept {
            return None;
        }
        let d: Vec<Vec3> = self
            .warm
            .x_alt
            .iter()
            .zip(&self.warm.anchor)
            .map(|(x, y)| x - y)
            .collect();
        let mut product = vec![Vec3::zeros(); self.unknowns];
        IslandMatrix {
            bodies,
            members: &self.members,
            layout,
            unknowns: self.unknowns,
        }
        .apply(&d, &mut product);
        let scale = product.iter().map(|p| p.amax()).fold(0.0, f64::max);
        let error = product
            .iter()
            .zip(&self.warm.a_solution)
            .map(|(p, k)| (p - k).amax())
            .fold(0.0, f64::max);
        Some(error / scale)
    }
}

/// Projects `x` onto each row it violates (closed form for decoupled rows), recording in
/// `moved` each unknown it moves once, with its position before; `mark` (one flag per unknown,
/// all false) is left as it was found.
fn project_tracking(
    rows: &[ConstraintRow],
    x: &mut [Vec3],
    moved: &mut Vec<(u32, Vec3)>,
    mark: &mut Vec<bool>,
) {
    moved.clear();
    mark.resize(x.len(), false);
    for row in rows {
        let gap = row.dot(x) - row.rhs;
        if gap < 0.0 {
            for (u, _) in row.entries() {
                if !mark[u] {
                    mark[u] = true;
                    moved.push((u as u32, x[u]));
                }
            }
            row.add_scaled(-gap / row.norm_squared(), x);
        }
    }
    for &(u, _) in moved.iter() {
        mark[u as usize] = false;
    }
}

/// The moved unknowns' rows of the island's PD matrix: for each, its offset in the island,
/// its index in its member's matrix, and that matrix.
fn moved_rows<'a>(
    matrix: &'a IslandMatrix<'_>,
    unknown_member: &'a [u32],
    moved: &'a [(u32, Vec3)],
) -> impl Iterator<
    Item = (
        u32,
        Vec3,
        usize,
        usize,
        &'a crate::sim::sparse::SymmetricMatrix,
    ),
> + 'a {
    moved.iter().filter_map(|&(u, before)| {
        let body = matrix.members[unknown_member[u as usize] as usize] as usize;
        let pd = matrix.bodies[body].pd.as_ref()?;
        let o = matrix.layout.offset_of[body] as usize;
        Some((u, before, o, u as usize - o, pd.matrix()))
    })
}

/// `out += A (x - before)` over the moved unknowns: each one's column of its member's PD
/// matrix (symmetric: its row) times its move.
fn add_moves_product(
    matrix: &IslandMatrix<'_>,
    unknown_member: &[u32],
    moved: &[(u32, Vec3)],
    x: &[Vec3],
    out: &mut [Vec3],
) {
    for (u, before, o, local, a) in moved_rows(matrix, unknown_member, moved) {
        let delta = x[u as usize] - before;
        let (columns, values) = a.row_entries(local);
        for (&c, &v) in columns.iter().zip(values) {
            out[o + c as usize] += v * delta;
        }
    }
}

/// `(x - before)' A (x - y)` over the moved unknowns (`A delta` is zero elsewhere).
fn moves_dot(
    matrix: &IslandMatrix<'_>,
    unknown_member: &[u32],
    moved: &[(u32, Vec3)],
    x: &[Vec3],
    anchor: &[Vec3],
) -> f64 {
    moved_rows(matrix, unknown_member, moved)
        .map(|(u, before, o, local, a)| {
            let (columns, values) = a.row_entries(local);
            let row: Vec3 = columns
                .iter()
                .zip(values)
                .map(|(&c, &v)| v * (x[o + c as usize] - anchor[o + c as usize]))
                .sum();
            (x[u as usize] - before).dot(&row)
        })
        .sum()
}
