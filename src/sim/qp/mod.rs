//! Convex quadratic programs with decoupled linear inequality constraints:
//!
//! ```text
//! min_x  1/2 x'Ax - b'x   s.t.  J x >= c
//! ```
//!
//! `x` is a list of 3-vectors (one per free vertex), `A` symmetric positive definite, and each
//! row of `J` touches at most four vertices (a vertex against an obstacle, or a point of a
//! triangle or tet against a surface: eq. (8) of the MPRGP paper, Li et al. 2015).
//! The solvers require *decoupled* rows (section 5 of the paper, "collision decoupling"): no
//! vertex appears in two rows, except that up to three one-vertex rows may share a vertex (a
//! corner). `J J'` is then block diagonal with blocks of size at most 3 and every MPRGP operator
//! is an exact closed form per block (`groups`).
//!
//! - [`mprgp::Mprgp`] solves the primal problem (the paper's extended MPRGP).
//! - [`pgs::DualPgs`] solves the dual LCP by projected Gauss-Seidel (the ICA-style baseline).
//! - [`kkt_residual`] measures any candidate the same way, for tests and benchmarks.

pub mod coarse;
pub(crate) mod dense_lcp;
pub(crate) mod groups;
pub mod mprgp;
pub mod pgs;
pub(crate) mod updatable_cholesky;

use thiserror::Error;

use super::math::Vec3;
use groups::RowGroups;

/// Most vertices a [`ConstraintRow`] may have: an embedded point's four against another
/// embedded point's four (a drawn surface's point against another body's drawn triangle, in
/// the contact subspace).
pub const MAX_ROW_VERTICES: usize = 8;

/// One linear inequality `sum_e coeffs[e] . x[vertices[e]] >= rhs` over up to
/// [`MAX_ROW_VERTICES`] vertices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConstraintRow {
    /// Vertex (unknown) indices; only the first `len` are used.
    pub vertices: [u32; MAX_ROW_VERTICES],
    /// Coefficient 3-vector of each vertex (for eq. (8): `w_e n`).
    pub coeffs: [Vec3; MAX_ROW_VERTICES],
    /// Number of entries used (1..=[`MAX_ROW_VERTICES`]).
    pub len: u8,
    /// Right-hand side `c`.
    pub rhs: f64,
}

impl ConstraintRow {
    /// A one-vertex row `n . x_v >= rhs`.
    pub fn single(vertex: u32, normal: Vec3, rhs: f64) -> Self {
        Self {
            vertices: {
                let mut v = [0; MAX_ROW_VERTICES];
                v[0] = vertex;
                v
            },
            coeffs: {
                let mut c = [Vec3::zeros(); MAX_ROW_VERTICES];
                c[0] = normal;
                c
            },
            len: 1,
            rhs,
        }
    }

    /// The used `(vertex, coefficient)` entries.
    #[inline]
    pub fn entries(&self) -> impl Iterator<Item = (usize, &Vec3)> + '_ {
        self.vertices[..self.len as usize]
            .iter()
            .map(|&v| v as usize)
            .zip(&self.coeffs[..self.len as usize])
    }

    /// `J_j . x`.
    #[inline]
    pub fn dot(&self, x: &[Vec3]) -> f64 {
        self.entries().map(|(v, a)| a.dot(&x[v])).sum()
    }

    /// `|J_j|^2`.
    #[inline]
    pub fn norm_squared(&self) -> f64 {
        self.entries().map(|(_, a)| a.norm_squared()).sum()
    }

    /// `x += s J_j'`.
    #[inline]
    pub fn add_scaled(&self, s: f64, x: &mut [Vec3]) {
        for (v, a) in self.entries() {
            x[v] += s * a;
        }
    }
}

/// A symmetric positive definite operator on lists of 3-vectors.
pub trait SpdOperator: Sync {
    /// Number of 3-vectors in `x`.
    fn len(&self) -> usize;
    /// True if the operator acts on nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `out = A x`.
    fn apply(&self, x: &[Vec3], out: &mut [Vec3]);
    /// The diagonal of `A`, per coordinate.
    fn diagonal(&self, out: &mut [Vec3]);
    /// `diag(A)^-1/2` per coordinate into `out`: the Jacobi scaling MPRGP solves with
    /// (non-finite or zero where a diagonal entry is not positive and finite). The default
    /// computes it from [`SpdOperator::diagonal`]; an operator may keep it.
    fn jacobi_scale(&self, out: &mut [Vec3]) {
        jacobi_scale_of_diagonal(self, out);
    }
    /// `out = S A S x` with `S = diag(scale)`, where `scale` is `diag(A)^-1/2` as
    /// [`SpdOperator::jacobi_scale`] gives it: the Jacobi-scaled operator MPRGP iterates with.
    /// `tmp` is scratch of `x`'s length. The default scales around [`SpdOperator::apply`]
    /// (three passes); an operator that keeps a scaled copy of itself applies that in one,
    /// and may then ignore `scale` (it must be the scaling described).
    fn apply_scaled(&self, scale: &[Vec3], x: &[Vec3], tmp: &mut [Vec3], out: &mut [Vec3]) {
        scale_around_apply(self, scale, x, tmp, out);
    }
    /// Row `v` of `A x` alone, where the operator's storage gives one row cheaply (a sparse
    /// matrix: the row's entries only), computed exactly as [`SpdOperator::apply`] computes
    /// that row; `None` (the default) where it cannot. MPRGP forms `d'A d` for vectors `d`
    /// that are zero off the rows' few unknowns this way instead of by a whole product.
    fn product_row(&self, _x: &[Vec3], _v: usize) -> Option<Vec3> {
        None
    }
    /// Whether [`SpdOperator::add_coarse_correction`] applies a coarse space
    /// ([`coarse::CoarseSpace`]): MPRGP then preconditions its CG steps with it. False by
    /// default.
    fn has_coarse_space(&self) -> bool {
        false
    }
    /// `out += Z (P'AP)^-1 Z' r`, the coarse level of MPRGP's two-level preconditioner, for `r`
    /// and `out` in the Jacobi-scaled variables of [`SpdOperator::jacobi_scale`]
    /// (`Z = diag(scale)^-1 P`; see [`coarse`]). `coarse` is scratch. Nothing by default.
    fn add_coarse_correction(&self, _r: &[Vec3], _coarse: &mut Vec<Vec3>, _out: &mut [Vec3]) {}
}

/// [`SpdOperator::jacobi_scale`]'s default: `diag(A)^-1/2` from [`SpdOperator::diagonal`].
pub(crate) fn jacobi_scale_of_diagonal<A: SpdOperator + ?Sized>(a: &A, out: &mut [Vec3]) {
    a.diagonal(out);
    for s in out.iter_mut() {
        *s = s.map(|d| 1.0 / d.sqrt());
    }
}

/// [`SpdOperator::apply_scaled`]'s default: `out = S A S x` in three passes around
/// [`SpdOperator::apply`].
pub(crate) fn scale_around_apply<A: SpdOperator + ?Sized>(
    a: &A,
    scale: &[Vec3],
    x: &[Vec3],
    tmp: &mut [Vec3],
    out: &mut [Vec3],
) {
    for ((t, v), s) in tmp.iter_mut().zip(x).zip(scale) {
        *t = v.component_mul(s);
    }
    a.apply(tmp, out);
    for (o, s) in out.iter_mut().zip(scale) {
        *o = o.component_mul(s);
    }
}

/// An SPD operator that can also solve `A x = b` (a prefactored direct solver).
pub trait SpdSolve: SpdOperator {
    /// Replaces `x` (holding `b`) by `A^-1 b`.
    fn solve_in_place(&mut self, x: &mut [Vec3]);
}

/// The data of one QP: operator, linear term and decoupled constraint rows.
#[derive(Clone, Copy)]
pub struct QpProblem<'a, A: ?Sized> {
    /// The SPD matrix `A`.
    pub a: &'a A,
    /// The linear term `b` (minimise `1/2 x'Ax - b'x`).
    pub b: &'a [Vec3],
    /// The rows of `J x >= c`, decoupled as described in `qp::groups`.
    pub rows: &'a [ConstraintRow],
}

/// Why a QP could not be solved.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum QpError {
    /// Two rows share a vertex: the decoupled operators do not apply.
    #[error("constraint rows {first} and {second} share vertex {vertex}; rows must be decoupled")]
    CoupledRows {
        /// The earlier row.
        first: usize,
        /// The later row.
        second: usize,
        /// The shared vertex.
        vertex: usize,
    },
    /// A row has no non-zero coefficient or refers to a vertex out of range.
    #[error("constraint row {0} is empty or out of range")]
    InvalidRow(usize),
    /// The vectors do not match the operator's size.
    #[error("dimension mismatch: operator {operator}, vector {vector}")]
    Dimension {
        /// Operator size.
        operator: usize,
        /// Vector size.
        vector: usize,
    },
    /// A non-finite value appeared.
    #[error("non-finite value in the QP")]
    NonFinite,
}

/// How far a candidate is from the QP's optimum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KktReport {
    /// `||phi + beta||` at the projected candidate: the projected-gradient norm, zero exactly at
    /// the optimum (the MPRGP stopping quantity, in the unscaled Euclidean metric).
    pub projected_gradient: f64,
    /// `||phi + beta|| / ||b||` (or the absolute value when `b = 0`).
    pub relative: f64,
    /// Largest constraint violation `max_j (c_j - J_j x)^+` of the candidate before projection.
    pub max_violation: f64,
    /// Objective `1/2 x'Ax - b'x` at the projected candidate.
    pub objective: f64,
}

/// Measures a candidate `x`: it is first projected onto the feasible set (closed form for
/// decoupled rows), then the free and chopped gradients of the paper's section 4 are formed.
pub fn kkt_residual<A: SpdOperator + ?Sized>(problem: &QpProblem<'_, A>, x: &[Vec3]) -> KktReport {
    let mut groups = RowGroups::default();
    let n = x.len();
    let grouped = groups.build(problem.rows, n).is_ok();
    let mut xp = x.to_vec();
    let mut max_violation: f64 = 0.0;
    for row in problem.rows {
        let gap = row.dot(&xp) - row.rhs;
        if gap < 0.0 {
            max_violation = max_violation.max(-gap / row.norm_squared().sqrt());
        }
    }
    if grouped {
        groups::project(problem.rows, &groups, &mut xp);
    }
    let mut g = vec![Vec3::zeros(); n];
    problem.a.apply(&xp, &mut g);
    let objective: f64 = xp
        .iter()
        .zip(&g)
        .zip(problem.b)
        .map(|((xi, axi), bi)| 0.5 * xi.dot(axi) - bi.dot(xi))
        .sum();
    for (gi, bi) in g.iter_mut().zip(problem.b) {
        *gi -= bi;
    }
    let active = active_rows(problem.rows, &xp, 1e-10);
    let mut phi = vec![Vec3::zeros(); n];
    let mut beta = vec![Vec3::zeros(); n];
    if grouped {
        groups::free_gradient(problem.rows, &groups, &active, &g, &mut phi);
        groups::chopped_gradient(problem.rows, &groups, &active, &g, &mut beta);
    } else {
        phi.copy_from_slice(&g);
    }
    let pg = phi
        .iter()
        .zip(&beta)
        .map(|(f, b)| (f + b).norm_squared())
        .sum::<f64>()
        .sqrt();
    let bn = super::math::norm_squared(problem.b).sqrt();
    KktReport {
        projected_gradient: pg,
        relative: if bn > 0.0 { pg / bn } else { pg },
        max_violation,
        objective,
    }
}

/// Rows whose gap `J_j x - c_j` is at most `rel` times the row's scale.
fn active_rows(rows: &[ConstraintRow], x: &[Vec3], rel: f64) -> Vec<bool> {
    let mut out = Vec::with_capacity(rows.len());
    mark_active(rows, x, rel, &mut out);
    out
}

fn mark_active(rows: &[ConstraintRow], x: &[Vec3], rel: f64, out: &mut Vec<bool>) {
    out.clear();
    out.extend(rows.iter().map(|row| {
        let gap = row.dot(x) - row.rhs;
        let scale = rel
            * (row.rhs.abs()
                + row
                    .entries()
                    .map(|(v, a)| a.norm() * x[v].norm())
                    .sum::<f64>())
            + 1e-14;
        gap <= scale
    }));
}

/// Reusable buffers of [`ContactForces::compute`].
#[derive(Debug, Clone, Default)]
pub struct ContactForces {
    groups: RowGroups,
    active: Vec<bool>,
    gradient: Vec<Vec3>,
}

impl ContactForces {
    /// `A x - b` at the `x` of the last [`ContactForces::compute`].
    pub fn gradient(&self) -> &[Vec3] {
        &self.gradient
    }

    /// Contact multipliers at `x` for rows active there (0 for inactive rows): per group, the
    /// least-squares `lambda >= 0` of `J_S' lambda = A x - b` on the active rows. At a feasible
    /// optimum `A x - b = J' lambda`; for rows built from unit normals, `lambda_j` is the normal
    /// force (N when `A` and `b` are those of a PD step). Allocates nothing once warmed up.
    pub fn compute<A: SpdOperator + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        x: &[Vec3],
        out: &mut Vec<f64>,
    ) {
        self.gradient.resize(x.len(), Vec3::zeros());
        problem.a.apply(x, &mut self.gradient);
        for (gi, bi) in self.gradient.iter_mut().zip(problem.b) {
            *gi -= bi;
        }
        self.multipliers(problem.rows, x, out);
    }

    /// [`ContactForces::compute`] from `A x - b` already known (a solver's final gradient,
    /// [`mprgp::Mprgp::final_gradient`]), which it keeps (see [`ContactForces::gradient`]).
    pub fn compute_from_gradient(
        &mut self,
        rows: &[ConstraintRow],
        x: &[Vec3],
        gradient: &mut Vec<Vec3>,
        out: &mut Vec<f64>,
    ) {
        std::mem::swap(&mut self.gradient, gradient);
        self.multipliers(rows, x, out);
    }

    fn multipliers(&mut self, rows: &[ConstraintRow], x: &[Vec3], out: &mut Vec<f64>) {
        out.clear();
        out.resize(rows.len(), 0.0);
        if self.groups.build(rows, x.len()).is_err() {
            return;
        }
        mark_active(rows, x, 1e-8, &mut self.active);
        groups::multipliers_from_gradient(rows, &self.groups, &self.active, &self.gradient, out);
    }
}

/// [`ContactForces::compute`] with fresh buffers.
pub fn multipliers<A: SpdOperator + ?Sized>(problem: &QpProblem<'_, A>, x: &[Vec3]) -> Vec<f64> {
    let mut out = Vec::new();
    ContactForces::default().compute(problem, x, &mut out);
    out
}

/// A dense SPD operator (row-major `3n x 3n`, dof `3 i + c`), for tests and small problems.
#[derive(Debug, Clone)]
pub struct DenseSpd {
    matrix: nalgebra::DMatrix<f64>,
    cholesky: Option<nalgebra::Cholesky<f64, nalgebra::Dyn>>,
}

impl DenseSpd {
    /// Wraps a symmetric positive definite `3n x 3n` matrix; `None` if it is not square, not of a
    /// multiple-of-3 size, or not positive definite.
    pub fn new(matrix: nalgebra::DMatrix<f64>) -> Option<Self> {
        if matrix.nrows() != matrix.ncols() || !matrix.nrows().is_multiple_of(3) {
            return None;
        }
        let cholesky = Some(matrix.clone().cholesky()?);
        Some(Self { matrix, cholesky })
    }

    /// The matrix.
    pub fn matrix(&self) -> &nalgebra::DMatrix<f64> {
        &self.matrix
    }

    /// Row `i` of `A x`.
    fn row_product(&self, x: &[Vec3], i: usize) -> Vec3 {
        let n = self.len();
        Vec3::from_fn(|c, _| {
            let row = self.matrix.row(3 * i + c);
            let mut s = 0.0;
            for (j, xj) in x.iter().enumerate().take(n) {
                s += row[3 * j] * xj.x + row[3 * j + 1] * xj.y + row[3 * j + 2] * xj.z;
            }
            s
        })
    }
}

impl SpdOperator for DenseSpd {
    fn len(&self) -> usize {
        self.matrix.nrows() / 3
    }
    fn apply(&self, x: &[Vec3], out: &mut [Vec3]) {
        for (i, o) in out.iter_mut().enumerate().take(self.len()) {
            *o = self.row_product(x, i);
        }
    }
    fn product_row(&self, x: &[Vec3], v: usize) -> Option<Vec3> {
        Some(self.row_product(x, v))
    }
    fn diagonal(&self, out: &mut [Vec3]) {
        for (i, o) in out.iter_mut().enumerate().take(self.len()) {
            *o = Vec3::new(
                self.matrix[(3 * i, 3 * i)],
                self.matrix[(3 * i + 1, 3 * i + 1)],
                self.matrix[(3 * i + 2, 3 * i + 2)],
            );
        }
    }
}

impl SpdSolve for DenseSpd {
    fn solve_in_place(&mut self, x: &mut [Vec3]) {
        let Some(ch) = &self.cholesky else { return };
        let n = self.len();
        let b = nalgebra::DVector::from_fn(3 * n, |k, _| x[k / 3][k % 3]);
        let s = ch.solve(&b);
        for (i, xi) in x.iter_mut().enumerate().take(n) {
            *xi = Vec3::new(s[3 * i], s[3 * i + 1], s[3 * i + 2]);
        }
    }
}

impl SpdOperator for super::sparse::SymmetricMatrix {
    fn len(&self) -> usize {
        self.dim()
    }
    fn apply(&self, x: &[Vec3], out: &mut [Vec3]) {
        self.mul_vec3(x, out);
    }
    fn diagonal(&self, out: &mut [Vec3]) {
        for (i, o) in out.iter_mut().enumerate().take(self.dim()) {
            *o = Vec3::repeat(super::sparse::SymmetricMatrix::diagonal(self, i));
        }
    }
    fn product_row(&self, x: &[Vec3], v: usize) -> Option<Vec3> {
        Some(self.mul_row(x, v))
    }
}

#[cfg(test)]
pub(crate) mod test_problems {
    //! Random well-posed QPs with decoupled rows, shared by the solver tests.
    use super::*;

    /// A tiny deterministic generator (SplitMix64).
    pub struct Rng(pub u64);
    impl Rng {
        pub fn next_f64(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
        pub fn unit(&mut self) -> Vec3 {
            loop {
                let v = Vec3::new(self.next_f64(), self.next_f64(), self.next_f64()) * 2.0
                    - Vec3::repeat(1.0);
                let n = v.norm();
                if n > 0.1 && n <= 1.0 {
                    return v / n;
                }
            }
        }
    }

    /// Random SPD `A = Q'Q + shift I` of `n` vertices, random `b`, and `m` decoupled rows with up
    /// to four vertices each, whose constraints cut through the unconstrained optimum.
    pub fn random_qp(seed: u64, n: usize, m: usize) -> (DenseSpd, Vec<Vec3>, Vec<ConstraintRow>) {
        let mut rng = Rng(seed);
        let d = 3 * n;
        let q = nalgebra::DMatrix::from_fn(d, d, |_, _| rng.next_f64() - 0.5);
        let a = q.transpose() * &q + nalgebra::DMatrix::identity(d, d) * 0.05 * d as f64;
        let a = DenseSpd::new(a).unwrap();
        let b: Vec<Vec3> = (0..n)
            .map(|_| rng.unit() * (1.0 + rng.next_f64()))
            .collect();
        let mut x_free = b.clone();
        let mut solver = a.clone();
        solver.solve_in_place(&mut x_free);
        let mut rows = Vec::new();
        let mut next = 0usize;
        for j in 0..m {
            let len = 1 + (j % 4).min(n.saturating_sub(next + 1));
            if next + len > n {
                break;
            }
            let mut row = ConstraintRow::single(0, Vec3::zeros(), 0.0);
            row.len = len as u8;
            let normal = rng.unit();
            for e in 0..len {
                row.vertices[e] = (next + e) as u32;
                let w = if e == 0 {
                    1.0
                } else {
                    -(0.2 + 0.3 * rng.next_f64())
                };
                row.coeffs[e] = w * normal;
            }
            next += len;
            // Make about two thirds of the rows violated by the unconstrained optimum.
            let at_free = row.dot(&x_free);
            row.rhs = at_free + (rng.next_f64() - 0.33) * 0.5;
            rows.push(row);
        }
        (a, b, rows)
    }
}
