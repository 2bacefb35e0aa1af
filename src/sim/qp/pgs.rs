//! Projected Gauss-Seidel on the dual of the contact QP: the ICA-style baseline the MPRGP paper
//! compares against (Li et al. 2015, section 6.2, and eq. (2)).
//!
//! The KKT conditions of `min 1/2 x'Ax - b'x s.t. Jx >= c` are `A x - b = J' lambda`,
//! `lambda >= 0`, `J x - c >= 0`, complementary. Eliminating `x = x_u + A^-1 J' lambda`
//! (`x_u = A^-1 b`) leaves the LCP
//!
//! ```text
//! 0 <= lambda  _|_  D lambda - q >= 0,   D = J A^-1 J',  q = c - J x_u
//! ```
//!
//! solved by sweeps of `lambda_j <- max(0, lambda_j - (D lambda - q)_j / D_jj)`. Forming `D`
//! needs one solve with the prefactored `A` per constraint; that cost belongs to the method and
//! is included in its timings. PGS damps high-frequency error quickly but converges slowly on the
//! smooth error that couples distant contacts through the elastic body, which is where MPRGP wins.

use super::groups::RowGroups;
use super::{QpError, QpProblem, SpdSolve};
use crate::sim::math::Vec3;

/// Settings of [`DualPgs`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PgsSettings {
    /// Relative stopping tolerance on the LCP residual `||min(lambda, D lambda - q)|| / ||q||`.
    /// Default: 1e-6.
    pub tolerance: f64,
    /// Sweep cap. Default: 10,000.
    pub max_sweeps: usize,
}

impl Default for PgsSettings {
    fn default() -> Self {
        Self {
            tolerance: 1e-6,
            max_sweeps: 10_000,
        }
    }
}

/// What one PGS solve did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PgsStats {
    /// Sweeps over all constraints.
    pub sweeps: usize,
    /// Final relative LCP residual.
    pub relative_residual: f64,
    /// Whether the tolerance was reached.
    pub converged: bool,
}

/// Reusable dual projected Gauss-Seidel solver.
#[derive(Debug, Clone, Default)]
pub struct DualPgs {
    /// Settings used by [`DualPgs::solve`].
    pub settings: PgsSettings,
    delassus: Vec<f64>,
    q: Vec<f64>,
    lambda: Vec<f64>,
    x_free: Vec<Vec3>,
    column: Vec<Vec3>,
    groups: RowGroups,
}

impl DualPgs {
    /// A solver with the given settings.
    pub fn new(settings: PgsSettings) -> Self {
        Self {
            settings,
            ..Self::default()
        }
    }

    /// Forms `x_u = A^-1 b`, the Delassus matrix `D = J A^-1 J'` and `q`, and resets `lambda`.
    ///
    /// # Errors
    /// [`QpError`] for coupled or invalid rows or mismatched sizes.
    pub fn setup<A: SpdSolve + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        solver: &mut A,
    ) -> Result<(), QpError> {
        let n = problem.b.len();
        if solver.len() != n {
            return Err(QpError::Dimension {
                operator: solver.len(),
                vector: n,
            });
        }
        self.groups.build(problem.rows, n)?;
        let m = problem.rows.len();
        self.x_free.clear();
        self.x_free.extend_from_slice(problem.b);
        solver.solve_in_place(&mut self.x_free);
        self.delassus.clear();
        self.delassus.resize(m * m, 0.0);
        self.column.clear();
        self.column.resize(n, Vec3::zeros());
        for (j, row) in problem.rows.iter().enumerate() {
            self.column.iter_mut().for_each(|c| *c = Vec3::zeros());
            row.add_scaled(1.0, &mut self.column);
            solver.solve_in_place(&mut self.column);
            for (i, other) in problem.rows.iter().enumerate() {
                self.delassus[i * m + j] = other.dot(&self.column);
            }
        }
        self.q.clear();
        self.q
            .extend(problem.rows.iter().map(|r| r.rhs - r.dot(&self.x_free)));
        self.lambda.clear();
        self.lambda.resize(m, 0.0);
        Ok(())
    }

    /// Runs `count` Gauss-Seidel sweeps.
    pub fn sweep(&mut self, count: usize) {
        let m = self.lambda.len();
        for _ in 0..count {
            for j in 0..m {
                let row = &self.delassus[j * m..(j + 1) * m];
                let w: f64 = row
                    .iter()
                    .zip(&self.lambda)
                    .map(|(d, l)| d * l)
                    .sum::<f64>()
                    - self.q[j];
                let d = row[j];
                if d > 0.0 {
                    self.lambda[j] = (self.lambda[j] - w / d).max(0.0);
                }
            }
        }
    }

    /// The LCP residual `||min(lambda, D lambda - q)|| / ||q||`.
    pub fn lcp_residual(&self) -> f64 {
        let m = self.lambda.len();
        let mut r2 = 0.0;
        for j in 0..m {
            let w: f64 = self.delassus[j * m..(j + 1) * m]
                .iter()
                .zip(&self.lambda)
                .map(|(d, l)| d * l)
                .sum::<f64>()
                - self.q[j];
            let r = self.lambda[j].min(w);
            r2 += r * r;
        }
        let qn = self.q.iter().map(|v| v * v).sum::<f64>().sqrt();
        r2.sqrt() / if qn > 0.0 { qn } else { 1.0 }
    }

    /// The primal point `x = x_u + A^-1 J' lambda` of the current multipliers.
    pub fn primal<A: SpdSolve + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        solver: &mut A,
        x: &mut [Vec3],
    ) {
        self.column.iter_mut().for_each(|c| *c = Vec3::zeros());
        for (row, &l) in problem.rows.iter().zip(&self.lambda) {
            if l != 0.0 {
                row.add_scaled(l, &mut self.column);
            }
        }
        solver.solve_in_place(&mut self.column);
        for ((xi, xu), c) in x.iter_mut().zip(&self.x_free).zip(&self.column) {
            *xi = xu + c;
        }
    }

    /// The current multipliers.
    pub fn lambda(&self) -> &[f64] {
        &self.lambda
    }

    /// Setup, sweeps until the LCP residual is below tolerance (checked every 8 sweeps), and
    /// the primal solution into `x`.
    ///
    /// # Errors
    /// [`QpError`] for coupled or invalid rows or mismatched sizes.
    pub fn solve<A: SpdSolve + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        solver: &mut A,
        x: &mut [Vec3],
    ) -> Result<PgsStats, QpError> {
        self.setup(problem, solver)?;
        let mut stats = PgsStats::default();
        loop {
            stats.relative_residual = self.lcp_residual();
            if stats.relative_residual <= self.settings.tolerance {
                stats.converged = true;
                break;
            }
            if stats.sweeps >= self.settings.max_sweeps {
                break;
            }
            self.sweep(8);
            stats.sweeps += 8;
        }
        self.primal(problem, solver, x);
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::super::kkt_residual;
    use super::super::mprgp::{Mprgp, MprgpSettings};
    use super::super::test_problems::random_qp;
    use super::*;

    #[test]
    fn pgs_reaches_the_same_optimum_as_mprgp() {
        for seed in 0..20u64 {
            let n = 5 + seed as usize % 7;
            let (a, b, rows) = random_qp(seed + 100, n, 4);
            let mut solver = a.clone();
            let problem = QpProblem {
                a: &a,
                b: &b,
                rows: &rows,
            };
            let mut x_pgs = vec![Vec3::zeros(); n];
            let stats = DualPgs::new(PgsSettings {
                tolerance: 1e-13,
                max_sweeps: 200_000,
            })
            .solve(&problem, &mut solver, &mut x_pgs)
            .unwrap();
            assert!(stats.converged, "seed {seed}: {stats:?}");
            let mut x_mprgp = vec![Vec3::zeros(); n];
            Mprgp::new(MprgpSettings {
                tolerance: 1e-13,
                max_iterations: 5000,
                ..MprgpSettings::default()
            })
            .solve(&problem, &mut x_mprgp)
            .unwrap();
            for (p, q) in x_pgs.iter().zip(&x_mprgp) {
                assert!((p - q).norm() < 1e-7 * (1.0 + q.norm()), "seed {seed}");
            }
            assert!(kkt_residual(&problem, &x_pgs).relative < 1e-7);
        }
    }
}
