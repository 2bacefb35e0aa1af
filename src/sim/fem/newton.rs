//! Newton's method on one body's incremental potential, without contact: the unconstrained core
//! of the MPRGP paper's time step (Li et al. 2015, eq. 4-7), which
//! takes one Newton step of implicit Euler per frame and solves its linear system (with the
//! contact rows, eq. 8) as a QP.
//!
//! The potential over the positions `x` (m) is
//! `Phi(x) = w/2 sum_i m_i |x_i - y_i|^2 + sum_t V_t Psi(F_t) - sum_i f_i . x_i` (J): with
//! `w = 1/h^2` and `y` the inertial prediction its minimiser is the implicit Euler step; with
//! `w = 0` it is the static equilibrium under the forces `f` (N). Each Newton iteration
//! assembles `w M + K(x)` with the element Hessians projected to positive semi-definite
//! ([`super::element::hessian`]), so the direction always descends, solves it through a sparse
//! Cholesky factor (pattern analysed once), and backtracks on `Phi` (Armijo) where the full step
//! would not decrease it. With contact rows the step is a QP instead ([`super::constrained`]).
//! Pinned vertices keep their positions.
//!
//! Once an iteration has taken the full step (the iterate is in Newton's basin), the next one
//! tries the exact Hessian first and projects only if that fails to factor: compressed
//! elements have negative twist eigenvalues even at a stable equilibrium, where the sum is
//! still positive definite, and clamping them there makes the convergence linear (measured on
//! a sagging rubber beam: a rate of about 0.32 per iteration with clamping alone, quadratic
//! with the exact Hessian at the end; the test below).

use rayon::prelude::*;

use super::assembly::HessianPattern;
use super::element::{evaluate, hessian_of};
use super::energy::{FemModel, Lame};
use super::scaled_blocks::ScaledBlocks;
use crate::sim::math::{Mat3, Vec3};
use crate::sim::mesh::TetMesh;
use crate::sim::pd::{PINNED, free_numbering, gradient_rows};
use crate::sim::polar::{Svd3, svd3};
use crate::sim::sparse::{FactorError, SolveScratch, SparseCholesky};

/// Armijo's sufficient-decrease constant.
const ARMIJO: f64 = 1e-4;

/// Armijo's condition on a step of length `step` along a direction of slope `slope` (J per unit
/// step) from `start` to `value` (J); where the predicted decrease is below the rounding of the
/// potential (an iterate at the minimum to round-off), any value within that rounding passes,
/// so that the last Newton steps are not refused by noise.
pub(crate) fn sufficient_decrease(start: f64, value: f64, step: f64, slope: f64) -> bool {
    let rounding = 64.0 * f64::EPSILON * start.abs().max(value.abs());
    value <= start + ARMIJO * step * slope.min(0.0)
        || (-slope <= rounding && value <= start + rounding)
}

/// Most halvings of the step in one line search.
pub(super) const MAX_HALVINGS: usize = 30;

/// What a [`NewtonSystem`] is built from.
#[derive(Debug, Clone, Copy)]
pub struct NewtonSetup<'a> {
    /// The elastic model.
    pub model: FemModel,
    /// Its Lame parameters (Pa).
    pub lame: Lame,
    /// Density (kg/m^3), for the lumped masses.
    pub density: f64,
    /// Per vertex: pinned (kept in place); shorter than the mesh means the rest are free.
    pub pinned: &'a [bool],
}

/// Why a [`NewtonSystem`] could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NewtonSetupError {
    /// A material value out of range: density or shear modulus not finite and positive, or a
    /// bulk modulus `lambda + 2 mu / 3` not positive.
    #[error("invalid {what}: {value}")]
    InvalidMaterial {
        /// Which value.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// More pin flags than vertices.
    #[error("{pinned} pin flags for {vertices} vertices")]
    PinnedLength {
        /// Flags given.
        pinned: usize,
        /// Vertices of the mesh.
        vertices: usize,
    },
    /// The Newton matrix's pattern could not be analysed.
    #[error(transparent)]
    Factor(#[from] FactorError),
}

/// The potential a solve minimises (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Potential<'a> {
    /// `w` (1/s^2): `1/h^2` for an implicit Euler step, 0 for statics.
    pub inertia: f64,
    /// The inertial prediction `y` per vertex (m); unused where `inertia` is 0.
    pub target: &'a [Vec3],
    /// External force per vertex (N), e.g. `m_i g`.
    pub force: &'a [Vec3],
}

/// Stopping rule of [`NewtonSystem::solve`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NewtonSettings {
    /// The most Newton iterations.
    pub max_iterations: usize,
    /// Stop once `|grad Phi|` over the free vertices is at most this share of its value at the
    /// start (dimensionless).
    pub tolerance: f64,
}

/// What one [`NewtonSystem::solve`] did.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NewtonStats {
    /// Newton iterations taken.
    pub iterations: usize,
    /// Step halvings of the line searches, summed.
    pub halvings: usize,
    /// Iterations that used the projected Hessian (the others factored the exact one).
    pub projected: usize,
    /// `|grad Phi|` at the start (N).
    pub initial_gradient: f64,
    /// `|grad Phi|` at the end (N).
    pub final_gradient: f64,
    /// Whether the tolerance was reached.
    pub converged: bool,
}

/// One body's elastic energy, its derivatives and the Newton matrix.
#[derive(Debug, Clone)]
pub struct NewtonSystem {
    pub(super) model: FemModel,
    pub(super) lame: Lame,
    pub(super) tets: Vec<[u32; 4]>,
    pub(super) grads: Vec<[Vec3; 4]>,
    pub(super) volumes: Vec<f64>,
    masses: Vec<f64>,
    pub(super) dof: Vec<u32>,
    pub(super) free: Vec<u32>,
    pub(super) pattern: HessianPattern,
    /// The Jacobi-scaled block copy of the last assembled matrix (MPRGP's products).
    pub(super) scaled: ScaledBlocks,
    pub(super) chol: SparseCholesky,
    pub(super) scratch: SolveScratch,
    /// Per tet: its Hessian blocks, and its energy, gradient and SVD at the positions last
    /// evaluated (the parallel parts' output).
    blocks: Vec<[[Mat3; 4]; 4]>,
    pub(super) tet_state: Vec<(f64, [Vec3; 4], Svd3)>,
    pub(super) diagonal: Vec<f64>,
    pub(super) direction: Vec<f64>,
    gradient: Vec<Vec3>,
    step: Vec<Vec3>,
    trial: Vec<Vec3>,
}

impl NewtonSystem {
    /// The system of `mesh` (analyses the Newton matrix's pattern; nothing is factored yet).
    ///
    /// # Errors
    /// [`NewtonSetupError::InvalidMaterial`] for a density or shear modulus that is not finite
    /// and positive or a bulk modulus that is not positive, [`NewtonSetupError::PinnedLength`]
    /// for more pin flags than vertices, [`NewtonSetupError::Factor`] if the pattern cannot be
    /// analysed.
    pub fn new(mesh: &TetMesh, setup: NewtonSetup<'_>) -> Result<Self, NewtonSetupError> {
        let Lame { mu, lambda } = setup.lame;
        for (what, value) in [("density", setup.density), ("shear modulus mu", mu)] {
            if !(value.is_finite() && value > 0.0) {
                return Err(NewtonSetupError::InvalidMaterial { what, value });
            }
        }
        let bulk = lambda + 2.0 * mu / 3.0;
        if !(bulk.is_finite() && bulk > 0.0) {
            return Err(NewtonSetupError::InvalidMaterial {
                what: "bulk modulus lambda + 2 mu / 3",
                value: bulk,
            });
        }
        if setup.pinned.len() > mesh.vertex_count() {
            return Err(NewtonSetupError::PinnedLength {
                pinned: setup.pinned.len(),
                vertices: mesh.vertex_count(),
            });
        }
        let (dof, free) = free_numbering(mesh.vertex_count(), setup.pinned);
        let tets = mesh.tets().to_vec();
        let grads = gradient_rows(mesh);
        let pattern = HessianPattern::new(&tets, &dof, free.len());
        let coordinates: Vec<Vec3> = free
            .iter()
            .flat_map(|&v| [mesh.rest_positions()[v as usize]; 3])
            .collect();
        let chol = SparseCholesky::analyse_with_coordinates(pattern.matrix(), &coordinates)?;
        let t = tets.len();
        Ok(Self {
            model: setup.model,
            lame: setup.lame,
            grads,
            volumes: mesh.rest_volumes().to_vec(),
            masses: mesh.lumped_masses(setup.density),
            scaled: ScaledBlocks::of_pattern(pattern.matrix()),
            pattern,
            chol,
            scratch: SolveScratch::default(),
            blocks: vec![[[Mat3::zeros(); 4]; 4]; t],
            tet_state: vec![(0.0, [Vec3::zeros(); 4], svd3(&Mat3::identity())); t],
            diagonal: vec![0.0; free.len()],
            direction: vec![0.0; 3 * free.len()],
            gradient: vec![Vec3::zeros(); free.len()],
            step: vec![Vec3::zeros(); free.len()],
            trial: Vec::with_capacity(mesh.vertex_count()),
            tets,
            dof,
            free,
        })
    }

    /// Lumped vertex masses (kg).
    pub fn masses(&self) -> &[f64] {
        &self.masses
    }

    /// The weight `m_i g` of every vertex (N) for gravity `g` (m/s^2), as
    /// [`Potential::force`] takes it.
    pub fn gravity_forces(&self, gravity: Vec3) -> Vec<Vec3> {
        self.masses.iter().map(|&m| m * gravity).collect()
    }

    /// The free vertices, in the order of the matrix's rows.
    pub fn free_vertices(&self) -> &[u32] {
        &self.free
    }

    /// `Phi(x)` (J) for positions `x` of every vertex.
    pub fn potential(&mut self, x: &[Vec3], potential: &Potential<'_>) -> f64 {
        self.evaluate_tets(x);
        self.cached_potential(x, potential)
    }

    /// `grad Phi(x)` over the free vertices (N), into `out` (one entry per free vertex).
    pub fn gradient(&mut self, x: &[Vec3], potential: &Potential<'_>, out: &mut [Vec3]) {
        self.evaluate_tets(x);
        self.cached_gradient(x, potential, out);
    }

    /// Per tet at `x`: energy, gradient and the signed SVD of `F`, the one pass over the tets
    /// that `Phi`, its gradient and the Hessian at `x` share (in parallel).
    pub(super) fn evaluate_tets(&mut self, x: &[Vec3]) {
        let (model, lame) = (self.model, self.lame);
        let (tets, grads, volumes) = (&self.tets, &self.grads, &self.volumes);
        self.tet_state
            .par_iter_mut()
            .enumerate()
            .for_each(|(t, state)| {
                let xt = tets[t].map(|v| x[v as usize]);
                *state = evaluate(model, lame, volumes[t], &grads[t], &xt);
            });
    }

    /// `Phi(x)` from the last [`NewtonSystem::evaluate_tets`] (at `x`).
    pub(super) fn cached_potential(&self, x: &[Vec3], potential: &Potential<'_>) -> f64 {
        // Summed in tet order: the same value whatever the thread count.
        let elastic: f64 = self.tet_state.iter().map(|s| s.0).sum();
        let mut outer = 0.0;
        for &v in &self.free {
            let i = v as usize;
            if potential.inertia > 0.0 {
                outer += 0.5
                    * potential.inertia
                    * self.masses[i]
                    * (x[i] - potential.target[i]).norm_squared();
            }
            outer -= potential.force[i].dot(&x[i]);
        }
        elastic + outer
    }

    /// `grad Phi(x)` from the last [`NewtonSystem::evaluate_tets`] (at `x`).
    pub(super) fn cached_gradient(&self, x: &[Vec3], potential: &Potential<'_>, out: &mut [Vec3]) {
        for (d, &v) in self.free.iter().enumerate() {
            let i = v as usize;
            out[d] = -potential.force[i];
            if potential.inertia > 0.0 {
                out[d] += potential.inertia * self.masses[i] * (x[i] - potential.target[i]);
            }
        }
        for (tet, state) in self.tets.iter().zip(&self.tet_state) {
            for (k, &v) in tet.iter().enumerate() {
                let d = self.dof[v as usize];
                if d != PINNED {
                    out[d as usize] += state.1[k];
                }
            }
        }
    }

    /// Assembles `w M + K(x)` ([`NewtonSystem::hessian_matrix`]), with the element Hessians
    /// projected to positive semi-definite where `project`.
    pub fn assemble_hessian(&mut self, x: &[Vec3], inertia: f64, project: bool) {
        self.evaluate_tets(x);
        self.assemble_cached_hessian(inertia, project);
    }

    /// [`NewtonSystem::assemble_hessian`] at the positions of the last
    /// [`NewtonSystem::evaluate_tets`].
    pub(super) fn assemble_cached_hessian(&mut self, inertia: f64, project: bool) {
        for (d, &v) in self.free.iter().enumerate() {
            self.diagonal[d] = inertia * self.masses[v as usize];
        }
        self.assemble_cached_hessian_with_diagonal(project);
        self.scaled.refresh(self.pattern.matrix());
    }

    /// The element Hessians at the positions of the last [`NewtonSystem::evaluate_tets`]
    /// (projected where `project`), assembled with `self.diagonal` on the diagonal.
    pub(super) fn assemble_cached_hessian_with_diagonal(&mut self, project: bool) {
        let (model, lame) = (self.model, self.lame);
        let (grads, volumes, states) = (&self.grads, &self.volumes, &self.tet_state);
        self.blocks.par_iter_mut().enumerate().for_each(|(t, b)| {
            *b = hessian_of(model, lame, volumes[t], &grads[t], &states[t].2, project);
        });
        self.pattern.assemble(&self.blocks, &self.diagonal);
    }

    /// The Newton matrix last assembled, over the free coordinates (row `3 d + a`: coordinate
    /// `a` of free vertex `d`; N/m).
    pub fn hessian_matrix(&self) -> &crate::sim::sparse::SymmetricMatrix {
        self.pattern.matrix()
    }

    /// Assembles ([`NewtonSystem::assemble_hessian`]) and factors `w M + K(x)`.
    ///
    /// # Errors
    /// [`FactorError::NotPositiveDefinite`] if the matrix is not positive definite (without
    /// `project`: an indefinite Hessian; with it: no inertia and no pins leave the rigid
    /// motions free).
    pub fn factor_hessian(
        &mut self,
        x: &[Vec3],
        inertia: f64,
        project: bool,
    ) -> Result<(), FactorError> {
        self.evaluate_tets(x);
        self.factor_cached_hessian(inertia, project)
    }

    /// [`NewtonSystem::factor_hessian`] at the positions of the last
    /// [`NewtonSystem::evaluate_tets`].
    fn factor_cached_hessian(&mut self, inertia: f64, project: bool) -> Result<(), FactorError> {
        self.assemble_cached_hessian(inertia, project);
        self.chol.factorize(self.pattern.matrix())
    }

    /// Solves `(w M + K) delta = -g` with the last factor, `g` per free vertex; the direction
    /// into `out` (per free vertex, m).
    pub fn newton_direction(&mut self, g: &[Vec3], out: &mut [Vec3]) {
        for (o, gd) in out.iter_mut().zip(g) {
            *o = -gd;
        }
        self.solve_newton_matrix(out);
    }

    /// Newton iterations with a backtracking line search from `x` (every vertex, m; updated in
    /// place) until `|grad Phi|` falls to `settings.tolerance` times its start value, or a line
    /// search finds no decrease of `Phi` in `MAX_HALVINGS` (30) halvings (round-off at the
    /// minimum: the iterate is kept, and the stats say whether the tolerance was reached).
    ///
    /// # Errors
    /// [`FactorError`] if a Newton matrix cannot be factored (see
    /// [`NewtonSystem::factor_hessian`]); `x` then holds the last iterate.
    pub fn solve(
        &mut self,
        x: &mut [Vec3],
        potential: &Potential<'_>,
        settings: NewtonSettings,
    ) -> Result<NewtonStats, FactorError> {
        let nf = self.free.len();
        let mut gradient = std::mem::take(&mut self.gradient);
        let mut trial = std::mem::take(&mut self.trial);
        let mut direction = std::mem::take(&mut self.step);
        direction.resize(nf, Vec3::zeros());
        gradient.resize(nf, Vec3::zeros());
        // One pass over the tets per trial point: its energy, gradient and SVD serve the line
        // search, the gradient and the next Hessian.
        self.evaluate_tets(x);
        self.cached_gradient(x, potential, &mut gradient);
        let mut current = self.cached_potential(x, potential);
        let norm = |g: &[Vec3]| g.iter().map(|v| v.norm_squared()).sum::<f64>().sqrt();
        let mut stats = NewtonStats {
            initial_gradient: norm(&gradient),
            ..NewtonStats::default()
        };
        stats.final_gradient = stats.initial_gradient;
        let target = settings.tolerance * stats.initial_gradient;
        let mut result = Ok(());
        let mut full_step = false;
        while stats.final_gradient > target && stats.iterations < settings.max_iterations {
            let exact = full_step && self.factor_cached_hessian(potential.inertia, false).is_ok();
            if !exact {
                stats.projected += 1;
                if let Err(e) = self.factor_cached_hessian(potential.inertia, true) {
                    result = Err(e);
                    break;
                }
            }
            self.newton_direction(&gradient, &mut direction);
            let slope: f64 = gradient.iter().zip(&direction).map(|(g, d)| g.dot(d)).sum();
            let mut step = 1.0;
            trial.clear();
            trial.extend_from_slice(x);
            let mut halvings = 0;
            let accepted = loop {
                for (d, &v) in self.free.iter().enumerate() {
                    trial[v as usize] = x[v as usize] + step * direction[d];
                }
                self.evaluate_tets(&trial);
                let value = self.cached_potential(&trial, potential);
                if sufficient_decrease(current, value, step, slope) {
                    current = value;
                    break true;
                }
                if halvings == MAX_HALVINGS {
                    break false;
                }
                step *= 0.5;
                halvings += 1;
            };
            stats.halvings += halvings;
            if !accepted {
                // No decrease along the direction (round-off at a minimum): keep the iterate.
                break;
            }
            x.copy_from_slice(&trial);
            full_step = halvings == 0;
            stats.iterations += 1;
            self.cached_gradient(x, potential, &mut gradient);
            stats.final_gradient = norm(&gradient);
        }
        stats.converged = stats.final_gradient <= target;
        self.gradient = gradient;
        self.trial = trial;
        self.step = direction;
        result.map(|()| stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rubber() -> Lame {
        Lame::of(
            &crate::sim::MaterialParams::RUBBER
                .with_youngs_modulus(1.0e5)
                .with_poisson_ratio(0.3),
        )
    }

    fn system(mesh: &TetMesh, model: FemModel, pinned: &[bool]) -> NewtonSystem {
        NewtonSystem::new(
            mesh,
            NewtonSetup {
                model,
                lame: rubber(),
                density: 1000.0,
                pinned,
            },
        )
        .unwrap()
    }

    #[test]
    fn invalid_setups_are_typed_errors() {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.1), 1);
        let setup = |density: f64, mu: f64, lambda: f64, pinned: &[bool]| {
            NewtonSystem::new(
                &mesh,
                NewtonSetup {
                    model: FemModel::FixedCorotated,
                    lame: Lame { mu, lambda },
                    density,
                    pinned,
                },
            )
            .err()
        };
        fn invalid(what: &'static str) -> impl Fn(Option<NewtonSetupError>) -> bool {
            move |e| matches!(e, Some(NewtonSetupError::InvalidMaterial { what: w, .. }) if w == what)
        }
        assert!(invalid("density")(setup(0.0, 1e5, 1e5, &[])));
        assert!(invalid("density")(setup(f64::NAN, 1e5, 1e5, &[])));
        assert!(invalid("shear modulus mu")(setup(1000.0, -1.0, 1e5, &[])));
        assert!(invalid("shear modulus mu")(setup(
            1000.0,
            f64::INFINITY,
            1e5,
            &[]
        )));
        assert!(invalid("bulk modulus lambda + 2 mu / 3")(setup(
            1000.0,
            3e4,
            -3e4,
            &[]
        )));
        let too_many = vec![false; mesh.vertex_count() + 1];
        assert!(matches!(
            setup(1000.0, 1e5, 1e5, &too_many),
            Some(NewtonSetupError::PinnedLength { .. })
        ));
        // A negative lambda with a positive bulk modulus (an auxetic material) is valid.
        assert!(setup(1000.0, 3e4, -1e4, &[]).is_none());
    }

    #[test]
    fn potential_gradient_matches_finite_differences() {
        let mesh = TetMesh::cuboid(Vec3::new(0.2, 0.1, 0.1), 4);
        let pinned: Vec<bool> = mesh.rest_positions().iter().map(|p| p.x < -0.19).collect();
        for model in [FemModel::FixedCorotated, FemModel::StableNeoHookean] {
            let mut system = system(&mesh, model, &pinned);
            let x: Vec<Vec3> = mesh
                .rest_positions()
                .iter()
                .map(|p| p + 0.02 * Vec3::new((7.0 * p.y).sin(), (5.0 * p.x).cos(), p.z))
                .collect();
            let target: Vec<Vec3> = mesh.rest_positions().to_vec();
            let force = system.gravity_forces(Vec3::new(0.0, -9.81, 0.0));
            let potential = Potential {
                inertia: 3600.0,
                target: &target,
                force: &force,
            };
            let mut g = vec![Vec3::zeros(); system.free_vertices().len()];
            system.gradient(&x, &potential, &mut g);
            let h = 1e-7;
            for (d, &v) in system
                .free_vertices()
                .to_vec()
                .iter()
                .enumerate()
                .step_by(7)
            {
                for a in 0..3 {
                    let (mut xp, mut xm) = (x.clone(), x.clone());
                    xp[v as usize][a] += h;
                    xm[v as usize][a] -= h;
                    let fd = (system.potential(&xp, &potential)
                        - system.potential(&xm, &potential))
                        / (2.0 * h);
                    assert!(
                        (fd - g[d][a]).abs() <= 1e-5 * (1.0 + g[d][a].abs()),
                        "{model:?} vertex {v} coordinate {a}: {fd} vs {}",
                        g[d][a]
                    );
                }
            }
        }
    }

    #[test]
    fn newton_direction_solves_the_assembled_system_exactly() {
        let mesh = TetMesh::cuboid(Vec3::new(0.1, 0.1, 0.1), 2);
        let mut system = system(&mesh, FemModel::FixedCorotated, &[]);
        // A strongly deformed state, some tets inverted.
        let x: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| Vec3::new(p.x, -0.8 * p.y + 0.3 * p.x, p.z + 0.5 * p.y * p.y))
            .collect();
        let inertia = 3600.0;
        system.factor_hessian(&x, inertia, true).unwrap();
        let nf = system.free_vertices().len();
        let g: Vec<Vec3> = (0..nf)
            .map(|d| Vec3::new((d as f64).sin(), (d as f64).cos(), 0.5))
            .collect();
        let mut direction = vec![Vec3::zeros(); nf];
        system.newton_direction(&g, &mut direction);
        // Independent: the dense sum of the projected element Hessians plus w M, solved by LU.
        let mut dense = nalgebra::DMatrix::<f64>::zeros(3 * nf, 3 * nf);
        for d in 0..nf {
            for a in 0..3 {
                dense[(3 * d + a, 3 * d + a)] = inertia * system.masses()[d];
            }
        }
        for (t, tet) in mesh.tets().iter().enumerate() {
            let xt = tet.map(|v| x[v as usize]);
            let blocks = crate::sim::fem::element::hessian(
                FemModel::FixedCorotated,
                rubber(),
                mesh.rest_volumes()[t],
                &system.grads[t],
                &xt,
                true,
            );
            for k in 0..4 {
                for l in 0..4 {
                    for a in 0..3 {
                        for b in 0..3 {
                            dense[(3 * tet[k] as usize + a, 3 * tet[l] as usize + b)] +=
                                blocks[k][l][(a, b)];
                        }
                    }
                }
            }
        }
        let rhs = nalgebra::DVector::from_fn(3 * nf, |r, _| -g[r / 3][r % 3]);
        let exact = dense.lu().solve(&rhs).unwrap();
        for d in 0..nf {
            for a in 0..3 {
                let e = exact[3 * d + a];
                assert!((direction[d][a] - e).abs() <= 1e-9 * (1.0 + e.abs()));
            }
        }
    }

    #[test]
    fn static_solve_converges_quadratically_descends_and_keeps_pins() {
        let mesh = TetMesh::cuboid(Vec3::new(0.3, 0.05, 0.05), 12);
        let pinned: Vec<bool> = mesh.rest_positions().iter().map(|p| p.x < -0.29).collect();
        for model in [FemModel::FixedCorotated, FemModel::StableNeoHookean] {
            let mut system = system(&mesh, model, &pinned);
            let force = system.gravity_forces(Vec3::new(0.0, -9.81, 0.0));
            let target = mesh.rest_positions().to_vec();
            let potential = Potential {
                inertia: 0.0,
                target: &target,
                force: &force,
            };
            // The iterates of one solve, k = 1, 2, ... iterations from the rest shape (the
            // same sequence each time: the solve is deterministic).
            let mut values = vec![system.potential(mesh.rest_positions(), &potential)];
            let mut gradients = Vec::new();
            let mut x = mesh.rest_positions().to_vec();
            for k in 1..=25 {
                x.copy_from_slice(mesh.rest_positions());
                let stats = system
                    .solve(
                        &mut x,
                        &potential,
                        NewtonSettings {
                            max_iterations: k,
                            tolerance: 0.0,
                        },
                    )
                    .unwrap();
                values.push(system.potential(&x, &potential));
                gradients.push(stats.final_gradient);
                if stats.final_gradient < 1e-9 {
                    assert!(stats.projected < stats.iterations, "{model:?}: {stats:?}");
                    break;
                }
            }
            for w in values.windows(2) {
                assert!(w[1] <= w[0] + 1e-12 * w[0].abs(), "{model:?}: {values:?}");
            }
            let last = gradients.len() - 1;
            assert!(gradients[last] < 1e-9, "{model:?}: {gradients:?}");
            // Quadratic convergence at the end: each of the last steps at least squares the
            // gradient's ratio to its start, far past what a linear rate would give.
            assert!(
                gradients[last - 1] < 1e-3 * gradients[last - 2],
                "{model:?}: {gradients:?}"
            );
            for (i, p) in pinned.iter().enumerate() {
                if *p {
                    assert_eq!(x[i], mesh.rest_positions()[i]);
                }
            }
            // It sags: the free end is below the pinned one.
            let tip = x
                .iter()
                .zip(mesh.rest_positions())
                .filter(|(_, r)| r.x > 0.29)
                .map(|(p, r)| p.y - r.y)
                .fold(0.0, f64::min);
            assert!(tip < -1e-3, "{model:?}: {tip}");
        }
    }
}
