//! Newton iterations whose linear systems carry contact rows: the QP of eq. 8 of
//! Li et al. 2015, solved by MPRGP ([`crate::sim::qp::mprgp`]).
//!
//! At an iterate `x` with gradient `g` and Newton matrix `H = w M + K(x)` (projected element
//! Hessians, [`super::newton`]), the step `d` minimises `1/2 d'Hd + g'd` subject to the rows
//! `J (x + d) >= c`, i.e. `J d >= c - J x`: the paper's QP, whose multipliers are the contact
//! forces (N). The rows are decoupled (at most one row per vertex, up to three one-vertex rows
//! on a corner), so MPRGP's projections are closed forms, and MPRGP runs on `H` as an operator
//! (products only, Jacobi-scaled as in the paper): no factorization in the constrained path.
//!
//! The line search on `Phi` stays inside the feasible set: with `x` and `x + d` feasible, so is
//! every point between them (the rows are linear). An infeasible start (a body spawned in
//! penetration) is first projected onto the rows.

use rayon::prelude::*;

use super::newton::{
    MAX_HALVINGS, NewtonSettings, NewtonStats, NewtonSystem, Potential, sufficient_decrease,
};
use super::scaled_blocks::ScaledBlocks;
use crate::sim::math::Vec3;
use crate::sim::qp::mprgp::{Mprgp, MprgpSettings};
use crate::sim::qp::{ConstraintRow, ContactForces, QpError, QpProblem, SpdOperator};
use crate::sim::sparse::SymmetricMatrix;

/// Vertices per parallel task of [`NewtonOperator`]'s product.
const PARALLEL_MIN_VERTICES: usize = 256;

/// The Newton matrix of a [`NewtonSystem`] as an operator on per-vertex 3-vectors (free
/// vertices): row `3 d + a` of the scalar matrix is coordinate `a` of vertex `d`.
#[derive(Debug, Clone, Copy)]
pub struct NewtonOperator<'a> {
    matrix: &'a SymmetricMatrix,
    /// The matrix's Jacobi-scaled block copy, where the owner keeps one: MPRGP's products.
    scaled: Option<&'a ScaledBlocks>,
}

impl<'a> NewtonOperator<'a> {
    /// The operator of a matrix over `3 n` coordinates whose rows hold whole 3x3 blocks (every
    /// stored column `3 j` comes with `3 j + 1` and `3 j + 2`), as
    /// [`NewtonSystem::hessian_matrix`] does; the product reads the columns in those triples.
    ///
    /// # Panics
    /// If the dimension is not a multiple of 3.
    pub fn new(matrix: &'a SymmetricMatrix) -> Self {
        assert!(matrix.dim().is_multiple_of(3), "a matrix over 3-vectors");
        Self {
            matrix,
            scaled: None,
        }
    }

    /// Row `d` of `H x`. Every block row holds whole 3x3 blocks: its columns come in aligned
    /// triples, one vertex each.
    fn row(&self, x: &[Vec3], d: usize) -> Vec3 {
        Vec3::from_fn(|a, _| {
            let (cols, values) = self.matrix.row_entries(3 * d + a);
            cols.chunks_exact(3)
                .zip(values.chunks_exact(3))
                .map(|(c, v)| {
                    let xj = &x[c[0] as usize / 3];
                    v[0] * xj.x + v[1] * xj.y + v[2] * xj.z
                })
                .sum()
        })
    }

    /// The same operator whose Jacobi-scaled products ([`SpdOperator::apply_scaled`]) go
    /// through `scaled`, a copy refreshed from this matrix's current values.
    ///
    /// # Panics
    /// If `scaled` has another number of rows.
    pub fn with_scaled_copy(self, scaled: &'a ScaledBlocks) -> Self {
        assert_eq!(3 * scaled.len(), self.matrix.dim(), "a copy of this matrix");
        Self {
            scaled: Some(scaled),
            ..self
        }
    }
}

impl SpdOperator for NewtonOperator<'_> {
    fn len(&self) -> usize {
        self.matrix.dim() / 3
    }

    fn apply(&self, x: &[Vec3], out: &mut [Vec3]) {
        // Rows in parallel; each row's sum is the same either way.
        out[..self.len()]
            .par_iter_mut()
            .with_min_len(PARALLEL_MIN_VERTICES)
            .enumerate()
            .for_each(|(d, o)| *o = self.row(x, d));
    }

    fn product_row(&self, x: &[Vec3], v: usize) -> Option<Vec3> {
        Some(self.row(x, v))
    }

    fn diagonal(&self, out: &mut [Vec3]) {
        for (d, o) in out.iter_mut().enumerate().take(self.len()) {
            *o = Vec3::from_fn(|a, _| self.matrix.diagonal(3 * d + a));
        }
    }

    fn jacobi_scale(&self, out: &mut [Vec3]) {
        match self.scaled {
            Some(scaled) => out[..self.len()].copy_from_slice(scaled.scale()),
            None => crate::sim::qp::jacobi_scale_of_diagonal(self, out),
        }
    }

    /// With a scaled copy, one pass over it (`scale` is its own scaling, see
    /// [`SpdOperator::apply_scaled`]); without, the scaling around [`SpdOperator::apply`].
    fn apply_scaled(&self, scale: &[Vec3], x: &[Vec3], tmp: &mut [Vec3], out: &mut [Vec3]) {
        match self.scaled {
            Some(scaled) => scaled.apply(x, out),
            None => crate::sim::qp::scale_around_apply(self, scale, x, tmp, out),
        }
    }
}

/// What [`NewtonSystem::solve_with_contacts`] keeps between solves: its MPRGP solver (settings
/// and norm estimate), the contact forces of the last QP, and buffers, so that a warmed-up
/// solve allocates nothing.
#[derive(Debug, Default)]
pub struct ContactSolve {
    /// The QP solver; its settings (tolerance, iteration cap) apply to each Newton iteration's
    /// QP.
    pub mprgp: Mprgp,
    /// The last QP's contact force per row (N).
    forces: Vec<f64>,
    x_free: Vec<Vec3>,
    shifted: Vec<ConstraintRow>,
    gradient: Vec<Vec3>,
    residual: Vec<Vec3>,
    step: Vec<Vec3>,
    b: Vec<Vec3>,
    trial: Vec<Vec3>,
    contact_forces: ContactForces,
}

impl ContactSolve {
    /// A solver whose QPs use `settings`.
    pub fn new(settings: MprgpSettings) -> Self {
        Self {
            mprgp: Mprgp::new(settings),
            ..Self::default()
        }
    }

    /// The contact force of each row at the last QP (N; 0 for inactive rows).
    pub fn forces(&self) -> &[f64] {
        &self.forces
    }
}

/// What [`NewtonSystem::solve_with_contacts`] did.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ConstrainedStats {
    /// The Newton iterations, with `final_gradient` the stationarity residual
    /// `|g - J' lambda|` (N) at the end.
    pub newton: NewtonStats,
    /// MPRGP iterations, summed over the Newton iterations.
    pub mprgp_iterations: usize,
    /// Of those, CG steps (the paper's `cg/it` is their share).
    pub mprgp_cg_steps: usize,
    /// Rows active (positive multiplier) at the last QP.
    pub active: usize,
}

/// Why a constrained Newton solve stopped without a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConstrainedError {
    /// The contact QP could not be solved (coupled or invalid rows).
    #[error("contact QP: {0}")]
    Qp(#[from] QpError),
}

impl NewtonSystem {
    /// Newton iterations on `Phi` subject to `rows` (`J x >= c` over the free vertices, in the
    /// order of [`NewtonSystem::free_vertices`]), each step a contact QP solved by the MPRGP of
    /// `solver` (its settings: tolerance and iteration cap per QP). Stops once the stationarity
    /// residual `|g - J' lambda|` falls to `settings.tolerance` times `|g|` at the start, after
    /// `settings.max_iterations`, or when a line search finds no decrease. The contact forces
    /// of the last QP are left in [`ContactSolve::forces`].
    ///
    /// # Errors
    /// [`ConstrainedError::Qp`] for coupled or invalid rows; `x` then holds the last iterate.
    pub fn solve_with_contacts(
        &mut self,
        x: &mut [Vec3],
        potential: &Potential<'_>,
        rows: &[ConstraintRow],
        settings: NewtonSettings,
        solver: &mut ContactSolve,
    ) -> Result<ConstrainedStats, ConstrainedError> {
        let ContactSolve {
            mprgp,
            forces,
            x_free,
            shifted,
            gradient,
            residual,
            step,
            b,
            trial,
            contact_forces,
        } = solver;
        let nf = self.free_vertices().len();
        let mut stats = ConstrainedStats::default();
        x_free.clear();
        x_free.extend(self.free_vertices().iter().map(|&v| x[v as usize]));
        // A penetrating start is projected onto the rows first (closed form: decoupled rows).
        shifted.clear();
        shifted.extend_from_slice(rows);
        for row in shifted.iter() {
            let gap = row.dot(x_free) - row.rhs;
            if gap < 0.0 {
                row.add_scaled(-gap / row.norm_squared(), x_free);
            }
        }
        for (d, &v) in self.free_vertices().iter().enumerate() {
            x[v as usize] = x_free[d];
        }
        gradient.clear();
        gradient.resize(nf, Vec3::zeros());
        // One pass over the tets per trial point (see `NewtonSystem::solve`).
        self.evaluate_tets(x);
        self.cached_gradient(x, potential, gradient);
        let mut current = self.cached_potential(x, potential);
        let norm = |g: &[Vec3]| g.iter().map(|v| v.norm_squared()).sum::<f64>().sqrt();
        stats.newton.initial_gradient = norm(gradient);
        stats.newton.final_gradient = stats.newton.initial_gradient;
        let target = settings.tolerance * stats.newton.initial_gradient;
        step.clear();
        step.resize(nf, Vec3::zeros());
        b.clear();
        b.resize(nf, Vec3::zeros());
        trial.clear();
        trial.extend_from_slice(x);
        forces.clear();
        forces.resize(rows.len(), 0.0);
        while stats.newton.final_gradient > target
            && stats.newton.iterations < settings.max_iterations
        {
            // Projected always (MPRGP needs a positive semi-definite operator, and without a
            // factorization there is no cheap test of the exact one); never factored.
            stats.newton.projected += 1;
            self.assemble_cached_hessian(potential.inertia, true);
            for (s, row) in shifted.iter_mut().zip(rows) {
                s.rhs = row.rhs - row.dot(x_free);
            }
            for (bd, gd) in b.iter_mut().zip(gradient.iter()) {
                *bd = -gd;
            }
            step.iter_mut().for_each(|s| *s = Vec3::zeros());
            let operator = self.operator();
            let problem = QpProblem {
                a: &operator,
                b,
                rows: shifted,
            };
            let qp = mprgp.solve(&problem, step)?;
            stats.mprgp_iterations += qp.iterations;
            stats.mprgp_cg_steps += qp.cg_steps;
            stats.active = qp.active;
            contact_forces.compute(&problem, step, forces);
            let slope: f64 = gradient
                .iter()
                .zip(step.iter())
                .map(|(g, s)| g.dot(s))
                .sum();
            let mut alpha = 1.0;
            let mut halvings = 0;
            let accepted = loop {
                for (d, &v) in self.free_vertices().iter().enumerate() {
                    trial[v as usize] = x[v as usize] + alpha * step[d];
                }
                self.evaluate_tets(trial);
                let value = self.cached_potential(trial, potential);
                if sufficient_decrease(current, value, alpha, slope) {
                    current = value;
                    break true;
                }
                if halvings == MAX_HALVINGS {
                    break false;
                }
                alpha *= 0.5;
                halvings += 1;
            };
            stats.newton.halvings += halvings;
            if !accepted {
                break;
            }
            x.copy_from_slice(trial);
            for (d, &v) in self.free_vertices().iter().enumerate() {
                x_free[d] = x[v as usize];
            }
            stats.newton.iterations += 1;
            self.cached_gradient(x, potential, gradient);
            // Stationarity with the last QP's contact forces: g - J' lambda.
            residual.clear();
            residual.extend_from_slice(gradient);
            for (row, &lambda) in rows.iter().zip(forces.iter()) {
                row.add_scaled(-lambda, residual);
            }
            stats.newton.final_gradient = norm(residual);
        }
        stats.newton.converged = stats.newton.final_gradient <= target;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::TetMesh;
    use crate::sim::fem::newton::NewtonSetup;
    use crate::sim::fem::{FemModel, Lame};

    fn lame(e: f64, nu: f64) -> Lame {
        Lame::of(
            &crate::sim::MaterialParams::RUBBER
                .with_youngs_modulus(e)
                .with_poisson_ratio(nu),
        )
    }

    #[test]
    fn operator_matches_the_scalar_rows() {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.1), 2);
        let mut system = NewtonSystem::new(
            &mesh,
            NewtonSetup {
                model: FemModel::FixedCorotated,
                lame: lame(1e5, 0.3),
                density: 1000.0,
                pinned: &[],
            },
        )
        .unwrap();
        let x: Vec<Vec3> = mesh.rest_positions().iter().map(|p| 1.1 * p).collect();
        system.assemble_hessian(&x, 3600.0, true);
        let op = NewtonOperator::new(system.hessian_matrix());
        let n = op.len();
        let v: Vec<Vec3> = (0..n)
            .map(|i| Vec3::new(i as f64, 1.0, -(i as f64).sin()))
            .collect();
        let mut out = vec![Vec3::zeros(); n];
        op.apply(&v, &mut out);
        let m = system.hessian_matrix();
        for (d, o) in out.iter().enumerate() {
            for (a, &value) in o.iter().enumerate() {
                let expected: f64 = (0..3 * n)
                    .map(|c| m.get(3 * d + a, c) * v[c / 3][c % 3])
                    .sum();
                assert!((value - expected).abs() < 1e-9 * (1.0 + expected.abs()));
            }
        }
        // Single rows are the product's rows, to the bit.
        for (d, o) in out.iter().enumerate() {
            assert_eq!(op.product_row(&v, d), Some(*o));
        }
        let mut diag = vec![Vec3::zeros(); n];
        op.diagonal(&mut diag);
        assert_eq!(diag[3][1], m.get(10, 10));
    }

    /// The QP of one Newton step against every active set: the unique one whose equality-
    /// constrained solution is feasible with non-negative multipliers is the solution.
    #[test]
    fn contact_step_matches_active_set_enumeration() {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.1), 1);
        let mut system = NewtonSystem::new(
            &mesh,
            NewtonSetup {
                model: FemModel::StableNeoHookean,
                lame: lame(1e5, 0.3),
                density: 1000.0,
                pinned: &[],
            },
        )
        .unwrap();
        let n = mesh.vertex_count();
        let x: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| Vec3::new(p.x + 0.3 * p.y, 0.9 * p.y, p.z))
            .collect();
        let force = system.gravity_forces(Vec3::new(3.0, -40.0, 5.0));
        let target = x.clone();
        let potential = Potential {
            inertia: 900.0,
            target: &target,
            force: &force,
        };
        system.assemble_hessian(&x, potential.inertia, true);
        let mut g = vec![Vec3::zeros(); n];
        system.gradient(&x, &potential, &mut g);
        // One row per bottom vertex (a tilted floor) and one on a top vertex (a wall).
        let normal = Vec3::new(0.1, 1.0, -0.05).normalize();
        let mut rows = Vec::new();
        for (v, p) in x.iter().enumerate() {
            if mesh.rest_positions()[v].y < 0.0 {
                rows.push(ConstraintRow::single(
                    v as u32,
                    normal,
                    normal.dot(p) - 1e-3,
                ));
            } else if mesh.rest_positions()[v].x > 0.0 && mesh.rest_positions()[v].z > 0.0 {
                rows.push(ConstraintRow::single(v as u32, -Vec3::x(), -p.x - 2e-3));
            }
        }
        let k = rows.len();
        let shifted: Vec<ConstraintRow> = rows
            .iter()
            .map(|r| ConstraintRow {
                rhs: r.rhs - r.dot(&x),
                ..*r
            })
            .collect();
        let b: Vec<Vec3> = g.iter().map(|v| -v).collect();
        // MPRGP on the scalar matrix (scaled around its products) and on the system's
        // Jacobi-scaled block copy.
        let steps: Vec<Vec<Vec3>> = [
            NewtonOperator::new(system.hessian_matrix()),
            system.operator(),
        ]
        .iter()
        .map(|op| {
            let mut step = vec![Vec3::zeros(); n];
            let mut mprgp = Mprgp::new(MprgpSettings {
                tolerance: 1e-13,
                max_iterations: 10_000,
                ..MprgpSettings::default()
            });
            mprgp
                .solve(
                    &QpProblem {
                        a: op,
                        b: &b,
                        rows: &shifted,
                    },
                    &mut step,
                )
                .unwrap();
            step
        })
        .collect();
        // Enumeration with dense KKT systems.
        let h = nalgebra::DMatrix::from_fn(3 * n, 3 * n, |r, c| system.hessian_matrix().get(r, c));
        let rhs_b = nalgebra::DVector::from_fn(3 * n, |r, _| b[r / 3][r % 3]);
        let jrow = |r: &ConstraintRow| {
            let mut j = nalgebra::DVector::zeros(3 * n);
            for (v, c) in r.entries() {
                for a in 0..3 {
                    j[3 * v + a] = c[a];
                }
            }
            j
        };
        let mut found = 0;
        for mask in 0u32..(1 << k) {
            let active: Vec<usize> = (0..k).filter(|i| mask & (1 << i) != 0).collect();
            let m = active.len();
            let mut kkt = nalgebra::DMatrix::zeros(3 * n + m, 3 * n + m);
            kkt.view_mut((0, 0), (3 * n, 3 * n)).copy_from(&h);
            let mut rhs = nalgebra::DVector::zeros(3 * n + m);
            rhs.rows_mut(0, 3 * n).copy_from(&rhs_b);
            for (i, &r) in active.iter().enumerate() {
                let j = jrow(&shifted[r]);
                kkt.view_mut((0, 3 * n + i), (3 * n, 1)).copy_from(&(-&j));
                kkt.view_mut((3 * n + i, 0), (1, 3 * n))
                    .copy_from(&j.transpose());
                rhs[3 * n + i] = shifted[r].rhs;
            }
            let Some(sol) = kkt.lu().solve(&rhs) else {
                continue;
            };
            let d = sol.rows(0, 3 * n);
            let feasible = shifted.iter().all(|r| jrow(r).dot(&d) >= r.rhs - 1e-12);
            let dual = (0..m).all(|i| sol[3 * n + i] >= -1e-9);
            if feasible && dual {
                found += 1;
                for step in &steps {
                    for v in 0..n {
                        for a in 0..3 {
                            assert!(
                                (step[v][a] - d[3 * v + a]).abs() <= 1e-8 * (1.0 + d.norm()),
                                "active set {active:?}: vertex {v}"
                            );
                        }
                    }
                }
            }
        }
        assert_eq!(found, 1, "exactly one active set is optimal");
    }

    #[test]
    fn a_stiff_block_dropped_on_a_floor_rests_on_it_carried_by_its_contact_forces() {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.1), 4);
        let mut system = NewtonSystem::new(
            &mesh,
            NewtonSetup {
                model: FemModel::FixedCorotated,
                lame: lame(1e7, 0.3),
                density: 1000.0,
                pinned: &[],
            },
        )
        .unwrap();
        let h = 1.0 / 60.0;
        let gravity = Vec3::new(0.0, -9.81, 0.0);
        let force = system.gravity_forces(gravity);
        let weight: f64 = system.masses().iter().sum::<f64>() * 9.81;
        let mut x: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| p + Vec3::new(0.0, 0.11, 0.0))
            .collect();
        let mut v = vec![Vec3::zeros(); x.len()];
        let mut solver = ContactSolve::new(MprgpSettings {
            tolerance: 1e-8,
            ..MprgpSettings::default()
        });
        let mut deepest: f64 = 0.0;
        for _ in 0..120 {
            let y: Vec<Vec3> = x.iter().zip(&v).map(|(p, u)| p + h * u).collect();
            // The floor's rows at the vertices the step could bring below it.
            let rows: Vec<ConstraintRow> = y
                .iter()
                .enumerate()
                .filter(|(_, p)| p.y < 0.02)
                .map(|(i, _)| ConstraintRow::single(i as u32, Vec3::y(), 0.0))
                .collect();
            let start = x.clone();
            // One Newton step per frame, as in the paper.
            system
                .solve_with_contacts(
                    &mut x,
                    &Potential {
                        inertia: 1.0 / (h * h),
                        target: &y,
                        force: &force,
                    },
                    &rows,
                    NewtonSettings {
                        max_iterations: 1,
                        tolerance: 0.0,
                    },
                    &mut solver,
                )
                .unwrap();
            for ((u, p), s) in v.iter_mut().zip(&x).zip(&start) {
                *u = (p - s) / h;
            }
            deepest = deepest.max(-x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min));
        }
        assert!(deepest < 1e-6, "deepest {deepest} m below the floor");
        let speed = v.iter().map(|u| u.norm()).fold(0.0, f64::max);
        assert!(speed < 1e-2, "still moving at {speed} m/s after 2 s");
        let carried: f64 = solver.forces().iter().sum();
        assert!(
            (carried - weight).abs() < 0.01 * weight,
            "contact forces {carried} N against the weight {weight} N"
        );
    }
}
