//! The Newton solver's pieces for a caller that owns the iteration: the world's step, where a
//! body's Newton iterations share their contact QPs with the other bodies of its island
//! (`crate::sim::world`), so the loop of [`NewtonSystem::solve_with_contacts`] cannot be used.
//!
//! Per Newton iteration the caller evaluates the elements at the iterate
//! ([`NewtonSystem::evaluate_elements`]), reads the elastic forces
//! ([`NewtonSystem::add_elastic_gradient`]), adds its own quadratic terms (inertia, attachments,
//! springs) to the elastic Hessian ([`NewtonSystem::assemble_newton_matrix`]), factors it and
//! solves with it ([`NewtonSystem::solve_newton_matrix`]) or hands it to a QP solver as an
//! operator ([`NewtonSystem::operator`]).

use rayon::prelude::*;

use super::constrained::NewtonOperator;
use super::element::evaluate;
use super::energy::{FemModel, Lame};
use super::newton::NewtonSystem;
use crate::sim::math::Mat3;
use crate::sim::math::Vec3;
use crate::sim::pd::PINNED;
use crate::sim::polar::{Svd3, svd3};
use crate::sim::sparse::FactorError;

/// Every element's energy, energy gradient and signed SVD at some positions, in caller-owned
/// buffers (see [`NewtonSystem::evaluate_elements_into`]).
#[derive(Debug, Default, Clone)]
pub struct ElementEvaluation(Vec<(f64, [Vec3; 4], Svd3)>);

impl NewtonSystem {
    /// Replaces the elastic model and its Lame parameters (Pa); takes effect at the next
    /// evaluation.
    pub fn set_model(&mut self, model: FemModel, lame: Lame) {
        self.model = model;
        self.lame = lame;
    }

    /// The elastic model and its Lame parameters.
    pub fn model(&self) -> (FemModel, Lame) {
        (self.model, self.lame)
    }

    /// Evaluates every element at positions `x` (every vertex, m): energy, forces and the
    /// singular values the Hessian needs, in parallel.
    pub fn evaluate_elements(&mut self, x: &[Vec3]) {
        self.evaluate_tets(x);
    }

    /// The elastic energy (J) at the positions last evaluated.
    pub fn elastic_energy(&self) -> f64 {
        // Summed in tet order: the same value whatever the thread count.
        self.tet_state.iter().map(|s| s.0).sum()
    }

    /// The elastic energy (J) at positions `x` (every vertex, m), without touching the cached
    /// evaluation (allocates its scratch: for audits and queries, not the step).
    pub fn elastic_energy_at(&self, x: &[Vec3]) -> f64 {
        self.evaluate_elements_into(x, &mut ElementEvaluation::default())
    }

    /// Evaluates every element at positions `x` (every vertex, m) into caller-owned `out`,
    /// leaving the cached evaluation as it is; returns the elastic energy (J, summed in tet
    /// order: the same value whatever the thread count). [`NewtonSystem::adopt_evaluation`]
    /// makes it the cached one.
    pub fn evaluate_elements_into(&self, x: &[Vec3], out: &mut ElementEvaluation) -> f64 {
        let (model, lame) = (self.model, self.lame);
        out.0.resize(
            self.tets.len(),
            (0.0, [Vec3::zeros(); 4], svd3(&Mat3::identity())),
        );
        out.0
            .par_iter_mut()
            .with_min_len(256)
            .zip(
                self.tets
                    .par_iter()
                    .zip(self.grads.par_iter().zip(&self.volumes)),
            )
            .for_each(|(e, (t, (g, &v)))| {
                *e = evaluate(model, lame, v, g, &t.map(|i| x[i as usize]));
            });
        out.0.iter().map(|s| s.0).sum()
    }

    /// Makes `evaluation` (of [`NewtonSystem::evaluate_elements_into`], at some positions) the
    /// cached evaluation, as if [`NewtonSystem::evaluate_elements`] had run at them; `evaluation`
    /// receives the old cache (its buffers are swapped, not copied).
    pub fn adopt_evaluation(&mut self, evaluation: &mut ElementEvaluation) {
        if evaluation.0.len() == self.tet_state.len() {
            std::mem::swap(&mut self.tet_state, &mut evaluation.0);
        }
    }

    /// Adds the elastic energy's gradient `dE/dx` (N) over the free vertices at the positions
    /// last evaluated to `out` (one entry per free vertex; summed in tet order).
    pub fn add_elastic_gradient(&self, out: &mut [Vec3]) {
        for (tet, state) in self.tets.iter().zip(&self.tet_state) {
            for (k, &v) in tet.iter().enumerate() {
                let d = self.dof[v as usize];
                if d != PINNED {
                    out[d as usize] += state.1[k];
                }
            }
        }
    }

    /// Assembles the Newton matrix at the positions last evaluated: the elastic Hessian
    /// (element blocks projected to positive semi-definite where `project`), plus
    /// `diagonal[d] I` on free vertex `d` (N/m: `m/h^2` and attachment stiffnesses), plus
    /// `k I` on the block of each `(d_a, d_b, k)` of `couplings` (N/m: a point spring's
    /// `k_s w_a w_b`). A coupling whose block is not in the pattern (two vertices that share no
    /// tet) is left out and counted in the result, which is 0 when every coupling was added.
    pub fn assemble_newton_matrix(
        &mut self,
        diagonal: &[f64],
        couplings: impl IntoIterator<Item = (u32, u32, f64)>,
        project: bool,
    ) -> usize {
        self.diagonal.copy_from_slice(&diagonal[..self.free.len()]);
        self.assemble_cached_hessian_with_diagonal(project);
        let matrix = self.pattern.matrix_mut();
        let mut missing = 0;
        for (da, db, k) in couplings {
            for a in 0..3 {
                match matrix.slot(3 * da as usize + a, 3 * db as usize + a) {
                    Some(s) => matrix.values_mut()[s] += k,
                    None => missing += 1,
                }
            }
        }
        self.scaled.refresh(self.pattern.matrix());
        missing
    }

    /// Factors the Newton matrix last assembled.
    ///
    /// # Errors
    /// [`FactorError::NotPositiveDefinite`] if it is not positive definite.
    pub fn factor_newton_matrix(&mut self) -> Result<(), FactorError> {
        self.chol.factorize(self.pattern.matrix())
    }

    /// Solves `H x = b` in place through the last factor (`b` and `x` per free vertex).
    pub fn solve_newton_matrix(&mut self, x: &mut [Vec3]) {
        for (d, v) in x.iter().enumerate() {
            self.direction[3 * d..3 * d + 3].copy_from_slice(v.as_slice());
        }
        self.chol
            .solve_scalar_with(&mut self.direction, &mut self.scratch);
        for (d, v) in x.iter_mut().enumerate() {
            *v = Vec3::new(
                self.direction[3 * d],
                self.direction[3 * d + 1],
                self.direction[3 * d + 2],
            );
        }
    }

    /// Solves `H x = b` in place through the last factor, `b` and `x` over the free
    /// coordinates (entry `3 d + a`: coordinate `a` of free vertex `d`), with caller-owned
    /// scratch.
    pub fn solve_newton_matrix_with(
        &self,
        x: &mut [f64],
        scratch: &mut crate::sim::sparse::SolveScratch,
    ) {
        self.chol.solve_scalar_with(x, scratch);
    }

    /// The Newton matrix last assembled, as an operator on per-vertex 3-vectors.
    pub fn operator(&self) -> NewtonOperator<'_> {
        NewtonOperator::new(self.pattern.matrix()).with_scaled_copy(&self.scaled)
    }
}

/// The Newton matrix last assembled as a QP operator, solving through the last factor (as
/// [`crate::sim::pd::PdSystem`] does with its constant matrix): for the dual solvers that need
/// `A^-1` (projected Gauss-Seidel on `J A^-1 J'`).
impl crate::sim::qp::SpdOperator for NewtonSystem {
    fn len(&self) -> usize {
        self.free.len()
    }
    fn apply(&self, x: &[Vec3], out: &mut [Vec3]) {
        self.operator().apply(x, out);
    }
    fn diagonal(&self, out: &mut [Vec3]) {
        self.operator().diagonal(out);
    }
    fn jacobi_scale(&self, out: &mut [Vec3]) {
        self.operator().jacobi_scale(out);
    }
    fn apply_scaled(&self, scale: &[Vec3], x: &[Vec3], tmp: &mut [Vec3], out: &mut [Vec3]) {
        self.operator().apply_scaled(scale, x, tmp, out);
    }
    fn product_row(&self, x: &[Vec3], v: usize) -> Option<Vec3> {
        self.operator().product_row(x, v)
    }
}

impl crate::sim::qp::SpdSolve for NewtonSystem {
    fn solve_in_place(&mut self, x: &mut [Vec3]) {
        self.solve_newton_matrix(x);
    }
}
