//! Projective Dynamics for corotated tetrahedra (Bouaziz et al. 2014; the localized-collisions PD
//! paper, Wang et al. 2020 sections 3-4).
//!
//! One implicit Euler step minimises
//!
//! ```text
//! Phi(x) = 1/(2 h^2) ||x - y||_M^2 + sum_t sum_c w_tc / 2 ||F_t(x) - P_tc||_F^2
//!          + sum_a k_a / 2 |x_a - target_a|^2 + k_s / 2 |sum_i w_i x_i - target_s|^2
//! ```
//!
//! over vertex positions `x` (m), with `y = x_n + h v_n + h^2 g` the inertial prediction, `M` the
//! lumped masses (kg), `F_t = D_s D_m^-1` the deformation gradient of tet `t` and `P_tc` the closest
//! point of `F_t` in the set of constraint `c`:
//!
//! | constraint | set | weight |
//! | --- | --- | --- |
//! | corotated (ARAP) | rotations `SO(3)`: `P = U V'` | `2 mu V_t` |
//! | volume | `det P = 1`: `P = U diag(s) V'`, `s` the closest point of `sigma` with `s1 s2 s3 = 1` | `lambda V_t` |
//! | strain limit (optional) | `P = U clamp(sigma, min, max) V'` | `k 2 mu V_t` |
//!
//! `U diag(sigma) V'` is the signed SVD of `F` ([`crate::sim::polar::svd3`]), so inverted tets
//! (`det F < 0`) are projected back to positive orientation. Because `F_t = G_t x` is linear in the
//! tet's four vertices, with `G_t` built from the rows `g_k` of `D_m^-1` (`g_0 = -g_1 - g_2 - g_3`),
//! the *global step* (P fixed) is the linear system
//!
//! ```text
//! (M/h^2 + sum_t w_t G_t'G_t + sum_a k_a) x = M/h^2 y + sum_t w_t G_t' P_t + sum_a k_a target_a
//! ```
//!
//! whose matrix is constant for a body (material, pins, attachments and `h` fixed): it is factored
//! once ([`crate::sim::sparse::SparseCholesky`]) and one factor serves x, y and z. The *local step*
//! (x fixed) computes every `P_tc` independently, in parallel over tets (rayon). Each step of the
//! alternation cannot increase `Phi` (the local step minimises over `P`, the global over `x`).
//!
//! **Strain-rate damping** ([`MaterialParams::strain_damping`] `beta`, s; Kelvin-Voigt) adds a
//! fourth term per tet, `w_d / 2 ||F_t(x) - R_t S_t||^2` with `w_d = beta / h * 2 mu V_t`, `S_t`
//! the tet's symmetric stretch at the step's start (`F_n = R_n S_n`, [`PdSystem::start_stretches`])
//! and `R_t = U V'` the rotation of the current `F_t`: the tet's start shape turned as the tet
//! turned. A rigid motion of the start shape (`F = R S_n`) costs nothing, so rotation is never
//! damped; for small strains the force `w_d (F - R S_n) g_k` is `beta` times the corotated
//! term's force of the strain rate, Rayleigh stiffness damping `-beta K v`. The weight joins
//! the constant matrix (`(w_c + w_v + w_l + w_d) G'G`); the local step adds `w_d R S_n` to its
//! target (one more 3x3 product per tet); the stretches cost one SVD per tet and step.
//! Deviation: the term's own closest point turns `S_n` by `polar(F S_n)`, not by `F`'s rotation;
//! the two differ at second order (the strain times its change over the step: 0.4 % of the force
//! at 2 % strain, test `strain_damping_force_is_the_gradient_of_the_rotated_start_distance`),
//! and the second costs no extra SVD. With it the alternation is no longer a proven descent of
//! `Phi` plus the damping term; the energy tests of `tests/sim_rest.rs` (no rise over any half
//! second after landing, by the audit, with settling on and off) pass with it. Measured
//! (`cargo test --release --test sim_stability -- --ignored`): the stability grid's 9 cells
//! that still bounced after 5 s at `h = 1/240 s` (E = 1e3-1e4 Pa) rest with the default
//! 0.02 s; 144 of 144 pass.
//!
//! Pinned vertices are eliminated from the system: they keep exactly the position they are given,
//! and their coupling terms move to the right-hand side. Attachments are zero-rest-length springs
//! to moving targets (the PD paper's bone attachments); their targets may move every step without
//! refactoring.
//!
//! A [`PointSpring`] (the grab tool) is a zero-rest-length spring from an *embedded* point
//! `sum_i w_i x_i` (barycentric in one tet) to a target. Its Hessian `k_s w w'` couples only
//! vertices of one tet, which the matrix pattern already holds, so it is implicit (stable at any
//! stiffness) and costs one numeric refactorization when it is attached or released; moving
//! its target only changes the right-hand side.

use rayon::prelude::*;

use super::embed::EmbeddedPoint;
pub use super::local_step::{StartStretches, WarmFrames};
use super::local_step::{TetBlocks, local_step, start_stretches};
use super::material::{MaterialParams, StrainLimitParams};
use super::math::{Mat3, Vec3};
use super::mesh::TetMesh;
use super::polar::{Svd3, svd3};
use super::prone::ProneRegion;
use super::qp::coarse::CoarseSpace;
use super::sparse::{FactorError, SparseCholesky, SymmetricMatrix};
use super::volume_stretches::volume_preserving_stretches;

/// Marks a pinned vertex in the vertex-to-unknown map.
pub(crate) const PINNED: u32 = u32::MAX;

/// Precomputed Projective Dynamics data of one body: gradient operators, weights, the global
/// matrix over the free vertices and its Cholesky factor.
#[derive(Debug)]
pub struct PdSystem {
    dt: f64,
    grads: Vec<[Vec3; 4]>,
    tets: Vec<[u32; 4]>,
    /// Per tet: corotated, volume, strain-limit and strain-rate damping weights (N m = J per
    /// unit strain^2).
    weights: Vec<[f64; 4]>,
    /// Whether the material has strain-rate damping (`weights[t][3] > 0`).
    damped: bool,
    limits: Option<StrainLimitParams>,
    masses: Vec<f64>,
    attach_k: Vec<f64>,
    spring: Option<PointSpring>,
    dof: Vec<u32>,
    free: Vec<u32>,
    incidence_ptr: Vec<u32>,
    incidence: Vec<u32>,
    matrix: SymmetricMatrix,
    /// The values of the Jacobi-scaled matrix (see [`PdSystem::apply_jacobi_scaled`]).
    jacobi_values: Vec<f64>,
    /// `1 / sqrt(L_ii)` per unknown, the scaling of [`PdSystem::jacobi_values`].
    jacobi_scale: Vec<f64>,
    chol: SparseCholesky,
    /// The tets again, in blocks for the vectorised local step.
    blocks: TetBlocks,
    /// Tets with a pinned vertex (their contributions carry the pinned coupling terms).
    pinned_tets: Vec<u32>,
    /// The coarse space MPRGP preconditions its CG steps with, for a body of at least
    /// [`crate::sim::qp::coarse::COARSE_MIN_UNKNOWNS`] free vertices; its coarse matrix is
    /// formed with the matrix ([`PdSystem::set_material`]).
    coarse: Option<CoarseSpace>,
    /// The collision-prone region ordered last in `chol` and `(A^-1)` over it, where the body
    /// solves its contacts localized ([`PdSystem::localize`]).
    prone: Option<ProneRegion>,
}

/// Everything [`PdSystem::new`] needs besides the mesh.
#[derive(Debug, Clone, Copy)]
pub struct PdSetup<'a> {
    /// The material.
    pub material: &'a MaterialParams,
    /// Time step h (s), > 0.
    pub dt: f64,
    /// Per vertex: pinned (eliminated) or free. Empty means none pinned.
    pub pinned: &'a [bool],
    /// Per vertex attachment stiffness (N/m), 0 for none. Empty means none.
    pub attach_stiffness: &'a [f64],
    /// A spring from an embedded point to a target (the grab tool), if any.
    pub spring: Option<&'a PointSpring>,
}

/// A zero-rest-length spring pulling an embedded point of the body (barycentric weights over the
/// vertices of one tet, or of one face of a tet) toward a target: the mouse grab.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointSpring {
    /// The pulled point of the body.
    pub point: EmbeddedPoint,
    /// Stiffness (N/m), > 0.
    pub stiffness: f64,
    /// Where the spring pulls the point to (m, world).
    pub target: Vec3,
}

impl PdSystem {
    /// Precomputes and factors the global matrix.
    ///
    /// # Errors
    /// [`FactorError`] if the matrix cannot be factored (it is SPD for valid input, so this means
    /// non-finite or non-physical parameters slipped through).
    pub fn new(mesh: &TetMesh, setup: PdSetup<'_>) -> Result<Self, FactorError> {
        let n = mesh.vertex_count();
        let masses = mesh.lumped_masses(setup.material.density);
        let grads = gradient_rows(mesh);
        let (dof, free) = free_numbering(n, setup.pinned);
        let tets = mesh.tets().to_vec();
        let mut pairs = Vec::with_capacity(tets.len() * 6);
        for t in &tets {
            for a in 0..4 {
                for b in a + 1..4 {
                    let (da, db) = (dof[t[a] as usize], dof[t[b] as usize]);
                    if da != PINNED && db != PINNED {
                        pairs.push((da, db));
                    }
                }
            }
        }
        let matrix = SymmetricMatrix::from_pairs(free.len(), pairs);
        // Vertex -> (tet * 4 + local) incidence, for the deterministic parallel gather.
        let mut incidence_ptr = vec![0u32; n + 1];
        for t in &tets {
            for &v in t {
                incidence_ptr[v as usize + 1] += 1;
            }
        }
        for i in 0..n {
            incidence_ptr[i + 1] += incidence_ptr[i];
        }
        let mut fill = incidence_ptr.clone();
        let mut incidence = vec![0u32; tets.len() * 4];
        for (ti, t) in tets.iter().enumerate() {
            for (k, &v) in t.iter().enumerate() {
                incidence[fill[v as usize] as usize] = (ti * 4 + k) as u32;
                fill[v as usize] += 1;
            }
        }
        let free_rest: Vec<Vec3> = free
            .iter()
            .map(|&v| mesh.rest_positions()[v as usize])
            .collect();
        let chol = SparseCholesky::analyse_with_coordinates(&matrix, &free_rest)?;
        let coarse = CoarseSpace::aggregates(&free_rest);
        let pinned_tets = (0..tets.len() as u32)
            .filter(|&t| tets[t as usize].iter().any(|&v| dof[v as usize] == PINNED))
            .collect();
        let blocks = TetBlocks::new(&tets, &grads, &vec![[0.0; 4]; tets.len()]);
        let mut attach_k = vec![0.0; n];
        for (k, &s) in attach_k.iter_mut().zip(setup.attach_stiffness) {
            *k = s;
        }
        let mut sys = Self {
            dt: setup.dt,
            grads,
            tets,
            weights: Vec::new(),
            damped: false,
            limits: None,
            masses,
            attach_k,
            spring: setup.spring.copied(),
            dof,
            free,
            incidence_ptr,
            incidence,
            matrix,
            jacobi_values: Vec::new(),
            jacobi_scale: Vec::new(),
            chol,
            blocks,
            pinned_tets,
            coarse,
            prone: None,
        };
        sys.set_material(mesh, setup.material, setup.dt)?;
        Ok(sys)
    }

    /// Changes material and/or time step: refills the matrix and refactors numerically (the
    /// sparsity pattern and symbolic analysis are kept).
    ///
    /// # Errors
    /// [`FactorError`] if the new matrix cannot be factored.
    pub fn set_material(
        &mut self,
        mesh: &TetMesh,
        material: &MaterialParams,
        dt: f64,
    ) -> Result<(), FactorError> {
        self.dt = dt;
        self.limits = material.strain_limits;
        self.masses = mesh.lumped_masses(material.density);
        let damping = material.strain_damping / dt;
        self.weights = mesh
            .rest_volumes()
            .iter()
            .map(|&v| {
                let (a, b, c) = material.pd_weights(v);
                [a, b, c, damping * a]
            })
            .collect();
        self.damped = damping > 0.0;
        self.blocks.set_weights(&self.weights);
        self.refill();
        self.chol.factorize(&self.matrix)?;
        if let Some(prone) = self.prone.take() {
            // The factor keeps its order: the region's block of the new `A^-1`.
            let mut block = Vec::new();
            self.chol.trailing_inverse(&mut block)?;
            self.prone = Some(ProneRegion::new(
                self.free.len(),
                prone.vertices().to_vec(),
                block,
            ));
        }
        Ok(())
    }

    /// Orders the free vertices `vertices` (distinct, sorted or not) last in the factor and
    /// refactors, keeping `(A^-1)` over them ([`PdSystem::prone`]; see `crate::sim::prone`).
    /// Costs a symbolic analysis, a numeric factorization and `O(|C|^3)` dense work.
    ///
    /// # Errors
    /// [`FactorError`] if the reordered matrix cannot be analysed or factored; the system is
    /// then as it was.
    pub(crate) fn localize(&mut self, vertices: Vec<u32>) -> Result<(), FactorError> {
        let mut chol = self.chol.analyse_with_trailing(&self.matrix, &vertices)?;
        chol.factorize(&self.matrix)?;
        let mut block = Vec::new();
        chol.trailing_inverse(&mut block)?;
        self.chol = chol;
        self.prone = Some(ProneRegion::new(self.free.len(), vertices, block));
        Ok(())
    }

    /// Drops the collision-prone region ([`PdSystem::prone`] is `None` after); the factor stays
    /// as ordered, which solves the same system.
    pub(crate) fn forget_prone(&mut self) {
        self.prone = None;
    }

    /// The collision-prone region and `(A^-1)` over it, where [`PdSystem::localize`] made one.
    pub(crate) fn prone(&self) -> Option<&ProneRegion> {
        self.prone.as_ref()
    }

    fn refill(&mut self) {
        let inv_h2 = 1.0 / (self.dt * self.dt);
        for v in self.matrix.values_mut() {
            *v = 0.0;
        }
        for (d, &vi) in self.free.iter().enumerate() {
            let s = self.matrix.diag_slot(d);
            let vi = vi as usize;
            self.matrix.values_mut()[s] += self.masses[vi] * inv_h2 + self.attach_k[vi];
        }
        if let Some(spring) = &self.spring {
            let (vs, ws) = (&spring.point.vertices, &spring.point.weights);
            for a in 0..4 {
                let da = self.dof[vs[a] as usize];
                for b in 0..4 {
                    let db = self.dof[vs[b] as usize];
                    if da == PINNED || db == PINNED {
                        continue;
                    }
                    // Every pair of one tet's vertices is in the pattern (checked when the
                    // spring was accepted), so no coupling is lost.
                    if let Some(s) = self.matrix.slot(da as usize, db as usize) {
                        self.matrix.values_mut()[s] += spring.stiffness * ws[a] * ws[b];
                    }
                }
            }
        }
        for (t, (g, w)) in self.tets.iter().zip(self.grads.iter().zip(&self.weights)) {
            let wt = w[0] + w[1] + w[2] + w[3];
            for a in 0..4 {
                let da = self.dof[t[a] as usize];
                if da == PINNED {
                    continue;
                }
                for b in 0..4 {
                    let db = self.dof[t[b] as usize];
                    if db == PINNED {
                        continue;
                    }
                    if let Some(s) = self.matrix.slot(da as usize, db as usize) {
                        self.matrix.values_mut()[s] += wt * g[a].dot(&g[b]);
                    }
                }
            }
        }
        self.matrix
            .jacobi_scaled_values(&mut self.jacobi_scale, &mut self.jacobi_values);
        if let Some(coarse) = &mut self.coarse {
            // Not positive definite to working precision: MPRGP runs with Jacobi alone.
            coarse.set_matrix(&self.matrix);
        }
    }

    /// The coarse space of MPRGP's preconditioner, where the body has one (see
    /// [`crate::sim::qp::coarse`]).
    pub fn coarse_space(&self) -> Option<&CoarseSpace> {
        self.coarse.as_ref().filter(|c| c.is_factored())
    }

    /// Replaces the attachment stiffnesses (N/m per vertex); takes effect at the next
    /// [`PdSystem::set_material`] (a numeric refactorization: the pattern is unchanged).
    pub fn set_attachment_stiffness(&mut self, stiffness: &[f64]) {
        for (i, k) in self.attach_k.iter_mut().enumerate() {
            *k = stiffness.get(i).copied().unwrap_or(0.0);
        }
    }

    /// Replaces the point spring. A new point or stiffness takes effect in the matrix at the
    /// next [`PdSystem::set_material`] (a numeric refactorization); the target at once.
    pub fn set_point_spring(&mut self, spring: Option<PointSpring>) {
        self.spring = spring;
    }

    /// Moves the point spring's target (m): right-hand side only, no refactorization.
    pub fn set_spring_target(&mut self, target: Vec3) {
        if let Some(s) = &mut self.spring {
            s.target = target;
        }
    }

    /// The point spring, if any.
    pub fn point_spring(&self) -> Option<&PointSpring> {
        self.spring.as_ref()
    }

    /// Time step h (s) the matrix was built for.
    pub fn dt(&self) -> f64 {
        self.dt
    }

    /// Lumped masses (kg) per vertex.
    pub fn masses(&self) -> &[f64] {
        &self.masses
    }

    /// Vertex index -> unknown index, [`u32::MAX`] for pinned vertices.
    pub fn dof_map(&self) -> &[u32] {
        &self.dof
    }

    /// The free (unknown) vertices, in unknown order.
    pub fn free_vertices(&self) -> &[u32] {
        &self.free
    }

    /// The global matrix `L` over the free vertices (acts on each coordinate).
    pub fn matrix(&self) -> &SymmetricMatrix {
        &self.matrix
    }

    /// `out = D^-1/2 L D^-1/2 x`, the Jacobi-scaled global matrix (`D` its diagonal), in one
    /// pass over a scaled copy of its values kept with it: the operator MPRGP iterates with
    /// (see [`crate::sim::qp::SpdOperator::apply_scaled`]).
    pub fn apply_jacobi_scaled(&self, x: &[Vec3], out: &mut [Vec3]) {
        self.matrix.mul_vec3_with(&self.jacobi_values, x, out);
    }

    /// The Jacobi scaling `1 / sqrt(L_ii)` of [`PdSystem::apply_jacobi_scaled`], alike on x, y
    /// and z, into `out` (one per unknown).
    pub fn jacobi_scale_into(&self, out: &mut [Vec3]) {
        for (o, &s) in out.iter_mut().zip(&self.jacobi_scale) {
            *o = Vec3::repeat(s);
        }
    }

    /// Number of stored values in the Cholesky factor.
    pub fn factor_nnz(&self) -> usize {
        self.chol.factor_nnz()
    }

    /// Solves `L x = b` in place over the free vertices (three coordinates at once).
    pub fn solve_in_place(&mut self, x: &mut [Vec3]) {
        self.chol.solve_in_place(x);
    }

    /// Solves `L x = b` in place through the factor rounded to f32 (see
    /// [`crate::sim::sparse::SparseCholesky::solve_correction_in_place`]).
    pub fn solve_correction_in_place(&mut self, x: &mut [Vec3]) {
        self.chol.solve_correction_in_place(x);
    }

    /// `x = A^-1 f` for forces `f` (N) on the collision-prone region's vertices alone, in its
    /// order (see [`crate::sim::sparse::SparseCholesky::solve_trailing_with`]).
    pub(crate) fn solve_trailing_with(
        &self,
        forces: &[Vec3],
        x: &mut [Vec3],
        scratch: &mut crate::sim::sparse::TrailingScratch,
    ) {
        self.chol.solve_trailing_with(forces, x, scratch);
    }

    /// Solves `L x = b` for one coordinate in place (`L` acts alike on x, y and z), through the
    /// shared factor with caller-owned scratch.
    pub fn solve_scalar_with(&self, x: &mut [f64], scratch: &mut crate::sim::sparse::SolveScratch) {
        self.chol.solve_scalar_with(x, scratch);
    }

    /// Local step: for every tet, the projections of its deformation gradient at `x` (all
    /// vertices), written as the tet's right-hand-side contributions
    /// `c_k = w P g_k - sum_{l pinned} w (g_k . g_l) x_l` for its four vertices. `start` holds
    /// the tets' start-of-step stretches ([`PdSystem::start_stretches`]); it is read only where
    /// the material has strain-rate damping.
    ///
    /// # Panics
    /// With strain-rate damping, if `start` was not computed for this system.
    pub fn local_step(&self, x: &[Vec3], start: &StartStretches, contributions: &mut [[Vec3; 4]]) {
        let start = self.damped.then_some(start);
        assert!(
            start.is_none_or(|s| s.covers(self.tet_count())),
            "the strain-rate damping needs the step's start stretches (PdSystem::start_stretches)"
        );
        contributions
            .par_iter_mut()
            .with_min_len(256)
            .enumerate()
            .for_each(|(ti, out)| {
                let f = deformation_gradient(x, &self.tets[ti], &self.grads[ti]);
                let svd = svd3(&f);
                let stretch = start.map(|s| s.stretch(ti));
                self.write_contributions(ti, x, &svd, stretch.as_ref(), out);
            });
    }

    /// [`PdSystem::local_step`], vectorised (`crate::sim::local_step`), with the SVD
    /// warm-started from each tet's right singular vectors of the previous call (`frames`,
    /// identity at first, sized by [`WarmFrames::resize`]): the Jacobi sweeps then start from a
    /// nearly diagonal `F'F` and converge in few sweeps, mostly of small rotations. `frames` is
    /// updated in place. Equal to the cold step within 1e-8 relative (tested).
    ///
    /// # Panics
    /// With strain-rate damping, if `start` was not computed for this system.
    pub fn local_step_warm(
        &self,
        x: &[Vec3],
        start: &StartStretches,
        contributions: &mut [[Vec3; 4]],
        frames: &mut WarmFrames,
    ) {
        let start = self.damped.then_some(start);
        assert!(
            start.is_none_or(|s| s.covers(self.tet_count())),
            "the strain-rate damping needs the step's start stretches (PdSystem::start_stretches)"
        );
        local_step(&self.blocks, x, self.limits, start, contributions, frames);
        for &ti in &self.pinned_tets {
            let (t, g, w) = (
                &self.tets[ti as usize],
                &self.grads[ti as usize],
                &self.weights[ti as usize],
            );
            let out = &mut contributions[ti as usize];
            subtract_pinned(&self.dof, x, t, g, w, out);
        }
    }

    /// Whether the material has strain-rate damping
    /// ([`MaterialParams::strain_damping`]` > 0`): then every step needs the tets' stretches at
    /// its start ([`PdSystem::start_stretches`]).
    pub fn is_strain_damped(&self) -> bool {
        self.damped
    }

    /// The tets' stretches `S_n` at the step's start positions `x` (m) into `out`, the SVD
    /// warm-started from `frames`; clears `out` where the material has no strain-rate damping.
    pub fn start_stretches(&self, x: &[Vec3], frames: &WarmFrames, out: &mut StartStretches) {
        if self.damped {
            start_stretches(&self.blocks, x, frames, out);
        } else {
            out.clear();
        }
    }

    #[inline]
    fn write_contributions(
        &self,
        ti: usize,
        x: &[Vec3],
        svd: &Svd3,
        stretch: Option<&Mat3>,
        out: &mut [Vec3; 4],
    ) {
        let t = &self.tets[ti];
        let g = &self.grads[ti];
        let w = &self.weights[ti];
        let mut wp = weighted_projection(svd, w, self.limits);
        if let Some(s) = stretch {
            wp += w[3] * (svd.u * svd.v.transpose()) * s;
        }
        for k in 0..4 {
            out[k] = wp * g[k];
        }
        subtract_pinned(&self.dof, x, t, g, w, out);
    }

    /// Global right-hand side over the free vertices:
    /// `b = M/h^2 y + sum_t c_t + k target` (targets only read where `k > 0`, and for pinned
    /// vertices of the point spring), plus the point spring's `k_s w_i (target_s - sum_pinned w_j
    /// x_j)`.
    pub fn assemble_rhs(
        &self,
        y: &[Vec3],
        targets: &[Vec3],
        contributions: &[[Vec3; 4]],
        b: &mut [Vec3],
    ) {
        let inv_h2 = 1.0 / (self.dt * self.dt);
        let flat: &[Vec3] = contributions.as_flattened();
        b.par_iter_mut()
            .with_min_len(256)
            .enumerate()
            .for_each(|(d, bi)| {
                let v = self.free[d] as usize;
                let mut acc = self.masses[v] * inv_h2 * y[v];
                if self.attach_k[v] > 0.0 {
                    acc += self.attach_k[v] * targets[v];
                }
                let (lo, hi) = (self.incidence_ptr[v], self.incidence_ptr[v + 1]);
                for &e in &self.incidence[lo as usize..hi as usize] {
                    acc += flat[e as usize];
                }
                *bi = acc;
            });
        if let Some(spring) = &self.spring {
            let (vs, ws) = (&spring.point.vertices, &spring.point.weights);
            let mut pull = spring.target;
            for (v, w) in vs.iter().zip(ws) {
                if self.dof[*v as usize] == PINNED {
                    pull -= *w * targets[*v as usize];
                }
            }
            for (v, w) in vs.iter().zip(ws) {
                let d = self.dof[*v as usize];
                if d != PINNED {
                    b[d as usize] += spring.stiffness * *w * pull;
                }
            }
        }
    }

    /// The gradient of the objective `Phi` over the free vertices (N): `out = A x_free - b`,
    /// with `x_free` the free vertices' positions (in [`PdSystem::free_vertices`] order) and `b`
    /// the right-hand side [`PdSystem::assemble_rhs`] built from the local step at the same
    /// positions. The projections are closest points, so their own variation drops out and this
    /// is the exact gradient of `Phi` (the implicit step's optimality residual without contact).
    pub fn gradient(&self, x_free: &[Vec3], b: &[Vec3], out: &mut [Vec3]) {
        self.matrix.mul_vec3(x_free, out);
        for (o, b) in out.iter_mut().zip(b) {
            *o -= b;
        }
    }

    /// The gradient (N) over the free vertices of `Phi`'s terms other than the elastic ones,
    /// the inertia `M/h^2 (x - y)`, the attachments `k_a (x - target)` and the point spring,
    /// into `out`: what an elastic model other than PD's (the Newton solver's FEM energy) adds
    /// its forces to. `x` and `y` hold every vertex (m).
    pub fn outer_gradient(&self, x: &[Vec3], y: &[Vec3], targets: &[Vec3], out: &mut [Vec3]) {
        let inv_h2 = 1.0 / (self.dt * self.dt);
        for (o, &v) in out.iter_mut().zip(&self.free) {
            let v = v as usize;
            *o = self.masses[v] * inv_h2 * (x[v] - y[v]);
            if self.attach_k[v] > 0.0 {
                *o += self.attach_k[v] * (x[v] - targets[v]);
            }
        }
        if let Some(s) = &self.spring {
            let pull = s.stiffness * (s.point.position(x) - s.target);
            for (v, w) in s.point.vertices.iter().zip(&s.point.weights) {
                let d = self.dof[*v as usize];
                if d != PINNED {
                    out[d as usize] += *w * pull;
                }
            }
        }
    }

    /// The terms of [`PdSystem::outer_gradient`] themselves (J):
    /// `sum_i m_i/(2 h^2) |x_i - y_i|^2 + sum_a k_a/2 |x_a - target_a|^2` plus the point
    /// spring's `k_s/2 |p(x) - target_s|^2`, over every vertex (pinned ones sit at `y`).
    pub fn outer_energy(&self, x: &[Vec3], y: &[Vec3], targets: &[Vec3]) -> f64 {
        let inv_h2 = 1.0 / (self.dt * self.dt);
        let mut e = 0.0;
        for &v in &self.free {
            let v = v as usize;
            e += 0.5 * self.masses[v] * inv_h2 * (x[v] - y[v]).norm_squared();
            if self.attach_k[v] > 0.0 {
                e += 0.5 * self.attach_k[v] * (x[v] - targets[v]).norm_squared();
            }
        }
        if let Some(s) = &self.spring {
            e += 0.5 * s.stiffness * (s.point.position(x) - s.target).norm_squared();
        }
        e
    }

    /// The Hessian of the terms of [`PdSystem::outer_gradient`]: per free vertex its diagonal
    /// `m/h^2 + k_a` (N/m) into `diagonal`, and the point spring's couplings
    /// `(d_a, d_b, k_s w_a w_b)` between free vertices (each times the 3x3 identity).
    pub fn outer_hessian(
        &self,
        diagonal: &mut [f64],
    ) -> impl Iterator<Item = (u32, u32, f64)> + '_ {
        let inv_h2 = 1.0 / (self.dt * self.dt);
        for (o, &v) in diagonal.iter_mut().zip(&self.free) {
            *o = self.masses[v as usize] * inv_h2 + self.attach_k[v as usize];
        }
        self.spring.iter().flat_map(move |s| {
            let (vs, ws) = (s.point.vertices, s.point.weights);
            (0..16).filter_map(move |ab| {
                let (a, b) = (ab / 4, ab % 4);
                let (da, db) = (self.dof[vs[a] as usize], self.dof[vs[b] as usize]);
                (da != PINNED && db != PINNED).then(|| (da, db, s.stiffness * ws[a] * ws[b]))
            })
        })
    }

    /// The elastic energy (J) of positions `x`: `sum_t sum_c w_tc/2 ||F_t - P_tc(F_t)||^2`.
    pub fn elastic_energy(&self, x: &[Vec3]) -> f64 {
        let limits = self.limits;
        self.tets
            .iter()
            .zip(self.grads.iter().zip(&self.weights))
            .map(|(t, (g, w))| {
                let f = deformation_gradient(x, t, g);
                let (r, pv, pl) = projections(&f, limits);
                0.5 * (w[0] * (f - r).norm_squared()
                    + w[1] * (f - pv).norm_squared()
                    + w[2] * pl.map_or(0.0, |p| (f - p).norm_squared()))
            })
            .sum()
    }

    /// The PD objective `Phi(x)` (J) of one implicit step (see the module docs), without the
    /// strain-rate damping's term.
    pub fn objective(&self, x: &[Vec3], y: &[Vec3], targets: &[Vec3]) -> f64 {
        let inv_h2 = 1.0 / (self.dt * self.dt);
        let mut e = self.elastic_energy(x);
        for (i, xi) in x.iter().enumerate() {
            e += 0.5 * self.masses[i] * inv_h2 * (xi - y[i]).norm_squared();
            if self.attach_k[i] > 0.0 {
                e += 0.5 * self.attach_k[i] * (xi - targets[i]).norm_squared();
            }
        }
        if let Some(s) = &self.spring {
            e += 0.5 * s.stiffness * (s.point.position(x) - s.target).norm_squared();
        }
        e
    }

    /// Number of tets.
    pub fn tet_count(&self) -> usize {
        self.tets.len()
    }
}

impl crate::sim::qp::SpdOperator for PdSystem {
    fn len(&self) -> usize {
        self.free.len()
    }
    fn apply(&self, x: &[Vec3], out: &mut [Vec3]) {
        self.matrix.mul_vec3(x, out);
    }
    fn diagonal(&self, out: &mut [Vec3]) {
        crate::sim::qp::SpdOperator::diagonal(&self.matrix, out);
    }
    fn jacobi_scale(&self, out: &mut [Vec3]) {
        self.jacobi_scale_into(out);
    }
    fn apply_scaled(&self, _scale: &[Vec3], x: &[Vec3], _tmp: &mut [Vec3], out: &mut [Vec3]) {
        self.apply_jacobi_scaled(x, out);
    }
    fn product_row(&self, x: &[Vec3], v: usize) -> Option<Vec3> {
        Some(self.matrix.mul_row(x, v))
    }
    fn has_coarse_space(&self) -> bool {
        self.coarse_space().is_some()
    }
    fn add_coarse_correction(&self, r: &[Vec3], coarse: &mut Vec<Vec3>, out: &mut [Vec3]) {
        if let Some(space) = self.coarse_space() {
            space.add_correction(r, coarse, out);
        }
    }
}

impl crate::sim::qp::SpdSolve for PdSystem {
    fn solve_in_place(&mut self, x: &mut [Vec3]) {
        self.chol.solve_in_place(x);
    }
}

/// Per tet, the rows `g_k` (1/m) with `F = sum_k x_k g_k'`: the rows of the inverse rest shape
/// matrix for vertices 1-3, and `g_0 = -(g_1 + g_2 + g_3)`.
pub(crate) fn gradient_rows(mesh: &TetMesh) -> Vec<[Vec3; 4]> {
    mesh.inv_rest_shapes()
        .iter()
        .map(|dm_inv| {
            let g: [Vec3; 3] = std::array::from_fn(|r| dm_inv.row(r).transpose());
            [-(g[0] + g[1] + g[2]), g[0], g[1], g[2]]
        })
        .collect()
}

/// The numbering of the free vertices of `n` (`pinned[i]`; missing entries are free): per
/// vertex its free index or [`PINNED`], and the free vertices in order.
pub(crate) fn free_numbering(n: usize, pinned: &[bool]) -> (Vec<u32>, Vec<u32>) {
    let mut dof = vec![0u32; n];
    let mut free = Vec::with_capacity(n);
    for (i, d) in dof.iter_mut().enumerate() {
        if pinned.get(i).copied().unwrap_or(false) {
            *d = PINNED;
        } else {
            *d = free.len() as u32;
            free.push(i as u32);
        }
    }
    (dof, free)
}

/// The pinned vertices' coupling terms of one tet's contributions:
/// `c_k -= sum_{l pinned} w (g_k . g_l) x_l`.
#[inline]
fn subtract_pinned(
    dof: &[u32],
    x: &[Vec3],
    t: &[u32; 4],
    g: &[Vec3; 4],
    w: &[f64; 4],
    out: &mut [Vec3; 4],
) {
    let wt = w[0] + w[1] + w[2] + w[3];
    for l in 0..4 {
        if dof[t[l] as usize] == PINNED {
            let xl = x[t[l] as usize];
            for k in 0..4 {
                out[k] -= wt * g[k].dot(&g[l]) * xl;
            }
        }
    }
}

/// `F = sum_k x_k g_k'` for one tet.
#[inline]
pub fn deformation_gradient(x: &[Vec3], t: &[u32; 4], g: &[Vec3; 4]) -> Mat3 {
    let mut f = Mat3::zeros();
    for k in 0..4 {
        f += x[t[k] as usize] * g[k].transpose();
    }
    f
}

/// `w_c R + w_v P_vol + w_l P_lim` for one tet. All three projections share the signed SVD
/// `F = U diag(sigma) V'`, so the weighted sum is `U diag(w_c + w_v s + w_l clamp(sigma)) V'`.
/// The strain-rate damping's target `w_d R S_n` (`w[3]`) is the caller's.
#[inline]
fn weighted_projection(svd: &Svd3, w: &[f64; 4], limits: Option<StrainLimitParams>) -> Mat3 {
    let s = volume_preserving_stretches(svd.sigma);
    let mut d = Vec3::repeat(w[0]) + w[1] * s;
    if let Some(l) = limits {
        d += w[2] * svd.sigma.map(|x| x.clamp(l.min_stretch, l.max_stretch));
    }
    scaled_columns(&svd.u, &d) * svd.v.transpose()
}

/// `U diag(d)`.
#[inline]
fn scaled_columns(u: &Mat3, d: &Vec3) -> Mat3 {
    Mat3::from_columns(&[u.column(0) * d.x, u.column(1) * d.y, u.column(2) * d.z])
}

/// The closest rotation, the volume-preserving projection and (with limits) the closest
/// strain-limited matrix to `f`.
fn projections(f: &Mat3, limits: Option<StrainLimitParams>) -> (Mat3, Mat3, Option<Mat3>) {
    let svd = svd3(f);
    let vt = svd.v.transpose();
    let r = svd.u * vt;
    let s = volume_preserving_stretches(svd.sigma);
    let pv = scaled_columns(&svd.u, &s) * vt;
    let pl = limits.map(|l| {
        let c = svd.sigma.map(|x| x.clamp(l.min_stretch, l.max_stretch));
        scaled_columns(&svd.u, &c) * vt
    });
    (r, pv, pl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perturbed(mesh: &TetMesh, amount: f64) -> Vec<Vec3> {
        mesh.rest_positions()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let s = (i as f64 * 12.9898).sin() * 43758.5453;
                let r = Vec3::new(s.fract(), (s * 1.3).fract(), (s * 1.7).fract());
                p + amount * (r - Vec3::repeat(0.5))
            })
            .collect()
    }

    /// The gradient of `f` at `x` by central differences of width `2 step` (m).
    fn central_differences(f: impl Fn(&[Vec3]) -> f64, x: &[Vec3], step: f64) -> Vec<Vec3> {
        let mut moved = x.to_vec();
        let mut out = vec![Vec3::zeros(); x.len()];
        for v in 0..x.len() {
            for c in 0..3 {
                moved[v][c] = x[v][c] + step;
                let up = f(&moved);
                moved[v][c] = x[v][c] - step;
                let down = f(&moved);
                moved[v][c] = x[v][c];
                out[v][c] = (up - down) / (2.0 * step);
            }
        }
        out
    }

    /// The tets' stretches of `sys` at positions `x` (empty without strain-rate damping).
    fn stretches_at(sys: &PdSystem, x: &[Vec3]) -> StartStretches {
        let mut frames = WarmFrames::default();
        frames.resize(sys.tet_count());
        let mut out = StartStretches::default();
        sys.start_stretches(x, &frames, &mut out);
        out
    }

    fn system(mesh: &TetMesh, material: &MaterialParams, pinned: &[bool], k: &[f64]) -> PdSystem {
        PdSystem::new(
            mesh,
            PdSetup {
                material,
                dt: 1.0 / 60.0,
                pinned,
                attach_stiffness: k,
                spring: None,
            },
        )
        .unwrap()
    }

    /// The terms the Newton solver takes from the PD system (inertia, attachments, a grab spring
    /// on a tet with a pinned vertex): their gradient against central differences of their
    /// energy, and their Hessian against central differences of the gradient.
    #[test]
    fn outer_terms_gradient_and_hessian_match_finite_differences() {
        let mesh = TetMesh::cuboid(Vec3::new(0.2, 0.1, 0.1), 2);
        let material = MaterialParams::RUBBER;
        let n = mesh.vertex_count();
        let mut pinned = vec![false; n];
        pinned[0] = true;
        let mut k = vec![0.0; n];
        k[3] = 200.0;
        k[7] = 300.0;
        let mut sys = system(&mesh, &material, &pinned, &k);
        let tet = *mesh.tets().iter().find(|t| t.contains(&0)).unwrap();
        sys.set_point_spring(Some(PointSpring {
            point: EmbeddedPoint {
                vertices: tet,
                weights: [0.1, 0.2, 0.3, 0.4],
            },
            stiffness: 500.0,
            target: Vec3::new(0.3, -0.2, 0.1),
        }));
        sys.set_material(&mesh, &material, 1.0 / 60.0).unwrap();
        let mut x = perturbed(&mesh, 0.2);
        let y = perturbed(&mesh, 0.1);
        let targets = perturbed(&mesh, 0.3);
        x[0] = y[0];
        let nf = sys.free_vertices().len();
        let mut g = vec![Vec3::zeros(); nf];
        sys.outer_gradient(&x, &y, &targets, &mut g);
        let mut diagonal = vec![0.0; nf];
        let couplings: Vec<(u32, u32, f64)> = sys.outer_hessian(&mut diagonal).collect();
        let eps = 1e-6;
        for (d, &v) in sys.free_vertices().iter().enumerate() {
            for a in 0..3 {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[v as usize][a] += eps;
                xm[v as usize][a] -= eps;
                let fd = (sys.outer_energy(&xp, &y, &targets)
                    - sys.outer_energy(&xm, &y, &targets))
                    / (2.0 * eps);
                assert!(
                    (fd - g[d][a]).abs() < 1e-5 * (1.0 + fd.abs()),
                    "{d} {a}: {fd} {}",
                    g[d][a]
                );
                // Column `(d, a)` of the Hessian from the gradient's differences.
                let (mut gp, mut gm) = (vec![Vec3::zeros(); nf], vec![Vec3::zeros(); nf]);
                sys.outer_gradient(&xp, &y, &targets, &mut gp);
                sys.outer_gradient(&xm, &y, &targets, &mut gm);
                for e in 0..nf {
                    let column = (gp[e][a] - gm[e][a]) / (2.0 * eps);
                    let mut expected = if e == d { diagonal[d] } else { 0.0 };
                    expected += couplings
                        .iter()
                        .filter(|&&(i, j, _)| i as usize == e && j as usize == d)
                        .map(|c| c.2)
                        .sum::<f64>();
                    assert!(
                        (column - expected).abs() < 1e-4 * (1.0 + expected.abs()),
                        "({e}, {d}) coordinate {a}: {column} vs {expected}"
                    );
                }
            }
        }
    }

    /// The objective with projections held fixed, `1/2 x'Lx - b'x + const`, has gradient
    /// `L x - b`: compare with central finite differences.
    #[test]
    fn global_matrix_is_the_hessian_of_the_fixed_projection_objective() {
        let mesh = TetMesh::cuboid(Vec3::new(0.5, 0.3, 0.2), 3);
        let material = MaterialParams::RUBBER.with_strain_limits(StrainLimitParams::default());
        let n = mesh.vertex_count();
        let mut pinned = vec![false; n];
        pinned[0] = true;
        pinned[5] = true;
        let mut k = vec![0.0; n];
        k[7] = 300.0;
        let mut sys = system(&mesh, &material, &pinned, &k);
        // A grab spring on a tet with a pinned vertex: its coupling to the pinned vertex moves
        // to the right-hand side.
        let tet = *mesh.tets().iter().find(|t| t.contains(&0)).unwrap();
        let spring = PointSpring {
            point: EmbeddedPoint {
                vertices: tet,
                weights: [0.1, 0.2, 0.3, 0.4],
            },
            stiffness: 500.0,
            target: Vec3::new(0.3, -0.2, 0.1),
        };
        sys.set_point_spring(Some(spring));
        sys.set_material(&mesh, &material, 1.0 / 60.0).unwrap();
        let mut x0 = perturbed(&mesh, 0.2);
        let y = perturbed(&mesh, 0.1);
        let targets = perturbed(&mesh, 0.3);
        // Pinned vertices sit at their targets, as in a step.
        x0[0] = targets[0];
        x0[5] = targets[5];
        // The strain-rate damping's reference shapes, from another state.
        assert!(sys.is_strain_damped());
        let start = stretches_at(&sys, &perturbed(&mesh, 0.15));
        let mut contrib = vec![[Vec3::zeros(); 4]; mesh.tet_count()];
        sys.local_step(&x0, &start, &mut contrib);
        // Fixed projections P_t recomputed from x0 for the reference objective, and the
        // damping targets `R S_n`.
        let limits = material.strain_limits;
        let fixed: Vec<(Mat3, Mat3, Option<Mat3>)> = mesh
            .tets()
            .iter()
            .zip(&sys.grads)
            .map(|(t, g)| projections(&deformation_gradient(&x0, t, g), limits))
            .collect();
        let damping_targets: Vec<Mat3> = fixed
            .iter()
            .enumerate()
            .map(|(ti, (r, _, _))| r * start.stretch(ti))
            .collect();
        let phi = |x: &[Vec3]| -> f64 {
            let inv_h2 = 3600.0;
            let mut e = 0.0;
            for i in 0..n {
                e += 0.5 * sys.masses[i] * inv_h2 * (x[i] - y[i]).norm_squared();
                e += 0.5 * k[i] * (x[i] - targets[i]).norm_squared();
            }
            e += 0.5 * spring.stiffness * (spring.point.position(x) - spring.target).norm_squared();
            for (ti, t) in mesh.tets().iter().enumerate() {
                let f = deformation_gradient(x, t, &sys.grads[ti]);
                let w = sys.weights[ti];
                let (r, pv, pl) = fixed[ti];
                e += 0.5 * (w[0] * (f - r).norm_squared() + w[1] * (f - pv).norm_squared());
                e += 0.5 * w[2] * (f - pl.unwrap()).norm_squared();
                e += 0.5 * w[3] * (f - damping_targets[ti]).norm_squared();
            }
            e
        };
        let mut b = vec![Vec3::zeros(); sys.free.len()];
        sys.assemble_rhs(&y, &targets, &contrib, &mut b);
        let xf: Vec<Vec3> = sys.free.iter().map(|&v| x0[v as usize]).collect();
        let mut lx = vec![Vec3::zeros(); xf.len()];
        sys.matrix.mul_vec3(&xf, &mut lx);
        let h = 1e-6;
        let mut max_err: f64 = 0.0;
        let mut max_g: f64 = 0.0;
        for (d, &v) in sys.free.iter().enumerate() {
            for c in 0..3 {
                let mut xp = x0.clone();
                xp[v as usize][c] += h;
                let mut xm = x0.clone();
                xm[v as usize][c] -= h;
                let fd = (phi(&xp) - phi(&xm)) / (2.0 * h);
                let analytic = lx[d][c] - b[d][c];
                max_err = max_err.max((fd - analytic).abs());
                max_g = max_g.max(analytic.abs());
            }
        }
        assert!(
            max_err < 1e-5 * max_g,
            "FD mismatch {max_err} vs scale {max_g}"
        );
    }

    /// The elastic energy's gradient is `sum_t sum_c w_c (F - P_c) g_k` (the projections are
    /// closest points, so their own variation drops out): compare with finite differences.
    #[test]
    fn elastic_energy_gradient_matches_finite_differences() {
        let mesh = TetMesh::cuboid(Vec3::new(0.3, 0.2, 0.2), 2);
        let material = MaterialParams::RUBBER.with_strain_limits(StrainLimitParams {
            min_stretch: 0.9,
            max_stretch: 1.05,
            stiffness_scale: 3.0,
        });
        let sys = system(&mesh, &material, &[], &[]);
        let x = perturbed(&mesh, 0.12);
        let mut grad = vec![Vec3::zeros(); x.len()];
        for (ti, t) in mesh.tets().iter().enumerate() {
            let g = &sys.grads[ti];
            let w = sys.weights[ti];
            let f = deformation_gradient(&x, t, g);
            let (r, pv, pl) = projections(&f, material.strain_limits);
            let stress = w[0] * (f - r) + w[1] * (f - pv) + w[2] * (f - pl.unwrap());
            for k in 0..4 {
                grad[t[k] as usize] += stress * g[k];
            }
        }
        let scale = grad.iter().map(|v| v.amax()).fold(0.0, f64::max);
        let max_err = central_differences(|x| sys.elastic_energy(x), &x, 1e-6)
            .iter()
            .zip(&grad)
            .map(|(a, b)| (a - b).amax())
            .fold(0.0, f64::max);
        assert!(
            max_err < 1e-5 * scale,
            "FD mismatch {max_err} vs scale {scale}"
        );
    }

    /// The residual the step reports is the gradient of the whole objective: inertia, elastic
    /// terms (pinned neighbours included), attachments and the grab spring. Compare with finite
    /// differences of `Phi` over the free vertices.
    #[test]
    fn objective_gradient_matches_finite_differences() {
        let mesh = TetMesh::cuboid(Vec3::new(0.3, 0.2, 0.2), 2);
        // `objective` leaves out the strain-rate damping (tested on its own below).
        let material = MaterialParams::RUBBER.with_strain_damping(0.0);
        let n = mesh.vertex_count();
        let pinned: Vec<bool> = (0..n).map(|i| i % 7 == 0).collect();
        let attach: Vec<f64> = (0..n)
            .map(|i| if i % 5 == 1 { 300.0 } else { 0.0 })
            .collect();
        let free_tet = (0..mesh.tets().len())
            .find(|&t| mesh.tets()[t].iter().all(|&v| !pinned[v as usize]))
            .unwrap();
        let spring = PointSpring {
            point: EmbeddedPoint {
                vertices: mesh.tets()[free_tet],
                weights: [0.1, 0.2, 0.3, 0.4],
            },
            stiffness: 500.0,
            target: Vec3::new(0.1, 0.4, -0.2),
        };
        let sys = PdSystem::new(
            &mesh,
            PdSetup {
                material: &material,
                dt: 1.0 / 60.0,
                pinned: &pinned,
                attach_stiffness: &attach,
                spring: Some(&spring),
            },
        )
        .unwrap();
        let x = perturbed(&mesh, 0.1);
        let y = perturbed(&mesh, 0.05);
        let targets = perturbed(&mesh, 0.08);
        let mut contributions = vec![[Vec3::zeros(); 4]; sys.tet_count()];
        sys.local_step(&x, &StartStretches::default(), &mut contributions);
        let free = sys.free_vertices().to_vec();
        let mut b = vec![Vec3::zeros(); free.len()];
        sys.assemble_rhs(&y, &targets, &contributions, &mut b);
        let x_free: Vec<Vec3> = free.iter().map(|&v| x[v as usize]).collect();
        let mut grad = vec![Vec3::zeros(); free.len()];
        sys.gradient(&x_free, &b, &mut grad);
        let step = 1e-6;
        let scale = grad.iter().map(|v| v.amax()).fold(0.0, f64::max);
        let mut max_err: f64 = 0.0;
        for (d, &v) in free.iter().enumerate() {
            for c in 0..3 {
                let mut xp = x.clone();
                xp[v as usize][c] += step;
                let mut xm = x.clone();
                xm[v as usize][c] -= step;
                let fd = (sys.objective(&xp, &y, &targets) - sys.objective(&xm, &y, &targets))
                    / (2.0 * step);
                max_err = max_err.max((fd - grad[d][c]).abs());
            }
        }
        assert!(scale > 1.0, "a real gradient: {scale}");
        assert!(
            max_err < 1e-5 * scale,
            "FD mismatch {max_err} vs scale {scale}"
        );
    }

    /// The gradient over the free vertices of `sys`'s objective at `x` (y = x, so inertia
    /// drops out), from its local step against the reference shapes `start`.
    fn pd_gradient(sys: &PdSystem, x: &[Vec3], start: &StartStretches) -> Vec<Vec3> {
        let mut contributions = vec![[Vec3::zeros(); 4]; sys.tet_count()];
        sys.local_step(x, start, &mut contributions);
        let free = sys.free_vertices();
        let mut b = vec![Vec3::zeros(); free.len()];
        sys.assemble_rhs(x, &[], &contributions, &mut b);
        let x_free: Vec<Vec3> = free.iter().map(|&v| x[v as usize]).collect();
        let mut grad = vec![Vec3::zeros(); free.len()];
        sys.gradient(&x_free, &b, &mut grad);
        grad
    }

    /// The strain-rate damping's force: the gradient of the damped system minus the undamped
    /// one's at the same positions (N).
    fn damping_force(mesh: &TetMesh, x: &[Vec3], start_x: &[Vec3]) -> Vec<Vec3> {
        let damped = system(mesh, &MaterialParams::RUBBER, &[], &[]);
        let undamped = system(
            mesh,
            &MaterialParams::RUBBER.with_strain_damping(0.0),
            &[],
            &[],
        );
        let start = stretches_at(&damped, start_x);
        let with = pd_gradient(&damped, x, &start);
        let without = pd_gradient(&undamped, x, &StartStretches::default());
        with.iter().zip(&without).map(|(a, b)| a - b).collect()
    }

    /// The vectorised start stretches are the symmetric factors of the polar decompositions
    /// `F = R S` of the scalar signed SVD, inverted tets included, warm frames or not.
    #[test]
    fn start_stretches_are_the_polar_stretches() {
        let mesh = TetMesh::cuboid(Vec3::new(0.3, 0.2, 0.2), 3);
        let sys = system(&mesh, &MaterialParams::RUBBER, &[], &[]);
        let grads = gradient_rows(&mesh);
        let mut frames = WarmFrames::default();
        frames.resize(sys.tet_count());
        let mut contributions = vec![[Vec3::zeros(); 4]; sys.tet_count()];
        let mut start = StartStretches::default();
        let mut inverted = 0;
        for amount in [0.05, 0.3, 0.6, 0.1] {
            let x = perturbed(&mesh, amount);
            sys.start_stretches(&x, &frames, &mut start);
            for (ti, t) in mesh.tets().iter().enumerate() {
                let f = deformation_gradient(&x, t, &grads[ti]);
                let svd = svd3(&f);
                inverted += usize::from(f.determinant() < 0.0);
                let s = svd.v * Mat3::from_diagonal(&svd.sigma) * svd.v.transpose();
                let lanes = start.stretch(ti);
                assert!(
                    (lanes - s).norm() <= 1e-9 * (1.0 + s.norm()),
                    "{amount}: {lanes} against {s}"
                );
                assert!((svd.u * svd.v.transpose() * lanes - f).norm() <= 1e-9 * (1.0 + f.norm()));
            }
            // The next call starts from these positions' frames.
            sys.local_step_warm(&x, &start, &mut contributions, &mut frames);
        }
        assert!(inverted > 0, "inverted tets were tested");
    }

    #[test]
    #[should_panic(expected = "start stretches")]
    fn a_damped_local_step_without_start_stretches_says_what_is_missing() {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.2), 2);
        let sys = system(&mesh, &MaterialParams::RUBBER, &[], &[]);
        let mut contributions = vec![[Vec3::zeros(); 4]; sys.tet_count()];
        sys.local_step(
            mesh.rest_positions(),
            &StartStretches::default(),
            &mut contributions,
        );
    }

    /// Turning and moving a deformed body as a whole is not a strain rate: no damping force.
    #[test]
    fn strain_damping_leaves_rigid_motion_alone() {
        let mesh = TetMesh::cuboid(Vec3::new(0.3, 0.2, 0.2), 3);
        let start = perturbed(&mesh, 0.1);
        let rot = nalgebra::Rotation3::from_euler_angles(0.4, -0.9, 1.3);
        let moved: Vec<Vec3> = start
            .iter()
            .map(|p| rot * p + Vec3::new(0.5, -1.0, 2.0))
            .collect();
        let rigid = damping_force(&mesh, &moved, &start);
        let deformed = damping_force(&mesh, &perturbed(&mesh, 0.13), &start);
        let norm = |f: &[Vec3]| f.iter().map(Vec3::norm_squared).sum::<f64>().sqrt();
        assert!(norm(&deformed) > 1.0, "a real force: {}", norm(&deformed));
        assert!(
            norm(&rigid) < 1e-10 * norm(&deformed),
            "{} against {}",
            norm(&rigid),
            norm(&deformed)
        );
    }

    /// The damping force is the gradient of `D(x) = sum_t w_d / 2 min_R ||F_t - R S_t||^2`
    /// (`w_d = strain_damping / h * 2 mu V`, `S_t` the start shape's stretch), exactly where the
    /// start is the rest shape (`S = I`: the corotated term's own projection) and, because the
    /// local step turns `S` by `F`'s rotation rather than by `polar(F S)`, to within the
    /// strain's size elsewhere (0.4 % at 2 % strain): compare with finite differences of `D`.
    #[test]
    fn strain_damping_force_is_the_gradient_of_the_rotated_start_distance() {
        let mesh = TetMesh::cuboid(Vec3::new(0.3, 0.2, 0.2), 2);
        let material = MaterialParams::RUBBER;
        let sys = system(&mesh, &material, &[], &[]);
        let grads = gradient_rows(&mesh);
        let w_d: Vec<f64> = sys.weights.iter().map(|w| w[3]).collect();
        // (start strain, allowed relative error)
        for (start_amount, tolerance) in [(0.0, 1e-6), (0.02, 0.02)] {
            let start_x = perturbed(&mesh, start_amount);
            let stretches: Vec<Mat3> = mesh
                .tets()
                .iter()
                .zip(&grads)
                .map(|(t, g)| {
                    let svd = svd3(&deformation_gradient(&start_x, t, g));
                    svd.v * Mat3::from_diagonal(&svd.sigma) * svd.v.transpose()
                })
                .collect();
            let distance = |x: &[Vec3]| -> f64 {
                let mut e = 0.0;
                for (ti, t) in mesh.tets().iter().enumerate() {
                    let f = deformation_gradient(x, t, &grads[ti]);
                    let s = stretches[ti];
                    let svd = svd3(&(f * s));
                    let r = svd.u * svd.v.transpose();
                    e += 0.5 * w_d[ti] * (f - r * s).norm_squared();
                }
                e
            };
            // A twist on top of a deformation, so that rotations and strain rates both act.
            let rot = nalgebra::Rotation3::from_euler_angles(0.2, 0.1, -0.3);
            let x: Vec<Vec3> = perturbed(&mesh, start_amount + 0.01)
                .iter()
                .map(|p| rot * p)
                .collect();
            let force = damping_force(&mesh, &x, &start_x);
            let fd = central_differences(distance, &x, 1e-7);
            let scale = fd.iter().map(|v| v.amax()).fold(0.0, f64::max);
            let err = fd
                .iter()
                .zip(&force)
                .map(|(a, b)| (a - b).amax())
                .fold(0.0, f64::max);
            assert!(scale > 1.0, "a real force: {scale}");
            assert!(
                err < tolerance * scale,
                "start strain {start_amount}: error {err} against {scale}"
            );
        }
    }

    #[test]
    fn global_solve_matches_dense_solve() {
        let mesh = TetMesh::cuboid(Vec3::new(0.5, 0.5, 0.5), 3);
        let n = mesh.vertex_count();
        let mut pinned = vec![false; n];
        pinned[3] = true;
        let mut sys = system(&mesh, &MaterialParams::JELLY, &pinned, &[]);
        let m = sys.free.len();
        let dense = nalgebra::DMatrix::from_fn(m, m, |i, j| sys.matrix.get(i, j));
        let b: Vec<Vec3> = (0..m)
            .map(|i| Vec3::new((i as f64).sin(), (i as f64).cos(), 0.5))
            .collect();
        let mut x = b.clone();
        sys.solve_in_place(&mut x);
        let lu = dense.lu();
        for c in 0..3 {
            let xc = lu
                .solve(&nalgebra::DVector::from_fn(m, |i, _| b[i][c]))
                .unwrap();
            for i in 0..m {
                assert!((x[i][c] - xc[i]).abs() < 1e-9 * (1.0 + xc[i].abs()));
            }
        }
    }

    #[test]
    fn local_global_iterations_never_increase_the_objective() {
        let mesh = TetMesh::cuboid(Vec3::new(0.5, 0.25, 0.25), 4);
        let material = MaterialParams::RUBBER
            .with_strain_limits(StrainLimitParams::default())
            .with_strain_damping(0.0);
        let mut sys = system(&mesh, &material, &[], &[]);
        let y = perturbed(&mesh, 0.15);
        let mut x = y.clone();
        let mut contrib = vec![[Vec3::zeros(); 4]; mesh.tet_count()];
        let mut b = vec![Vec3::zeros(); x.len()];
        let mut last = sys.objective(&x, &y, &[]);
        for _ in 0..15 {
            sys.local_step(&x, &StartStretches::default(), &mut contrib);
            sys.assemble_rhs(&y, &[], &contrib, &mut b);
            sys.solve_in_place(&mut b);
            x.copy_from_slice(&b);
            let e = sys.objective(&x, &y, &[]);
            assert!(
                e <= last * (1.0 + 1e-12) + 1e-12,
                "objective rose: {last} -> {e}"
            );
            last = e;
        }
    }

    #[test]
    fn warm_started_local_step_matches_the_cold_one() {
        let mesh = TetMesh::cuboid(Vec3::new(0.5, 0.25, 0.25), 3);
        let material = MaterialParams::RUBBER.with_strain_limits(StrainLimitParams::default());
        // A few pinned vertices: their coupling terms are added after the vectorised kernel.
        let pinned: Vec<bool> = (0..mesh.vertex_count()).map(|i| i % 7 == 0).collect();
        let sys = system(&mesh, &material, &pinned, &[]);
        let mut frames = WarmFrames::default();
        frames.resize(mesh.tet_count());
        let mut cold = vec![[Vec3::zeros(); 4]; mesh.tet_count()];
        let mut warm = cold.clone();
        // With the strain-rate damping's targets, from a state of their own.
        assert!(sys.is_strain_damped());
        let start = stretches_at(&sys, &perturbed(&mesh, 0.08));
        // Several deformations in a row, as in PD iterations, including inverted tets.
        for amount in [0.05, 0.1, 0.3, 0.6, 0.1] {
            let x = perturbed(&mesh, amount);
            sys.local_step(&x, &start, &mut cold);
            sys.local_step_warm(&x, &start, &mut warm, &mut frames);
            for (c, w) in cold.iter().zip(&warm) {
                for k in 0..4 {
                    assert!(
                        (c[k] - w[k]).norm() <= 1e-8 * (1.0 + c[k].norm()),
                        "{amount}"
                    );
                }
            }
            for t in 0..mesh.tet_count() {
                let f = frames.frame(t);
                assert!((f.transpose() * f - Mat3::identity()).norm() < 1e-12);
                assert!((f.determinant() - 1.0).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn rest_state_has_zero_energy_and_rigid_motion_too() {
        let mesh = TetMesh::sphere(0.4, 6);
        let sys = system(&mesh, &MaterialParams::RUBBER, &[], &[]);
        assert!(sys.elastic_energy(mesh.rest_positions()) < 1e-18);
        let rot = nalgebra::Rotation3::from_euler_angles(0.3, -1.1, 2.0);
        let moved: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| rot * p + Vec3::new(1.0, 2.0, 3.0))
            .collect();
        assert!(sys.elastic_energy(&moved) < 1e-14);
    }

    #[test]
    fn volume_projection_is_exact_under_compression_and_stationary_under_expansion() {
        for sigma in [
            Vec3::new(1.3, 0.9, 0.7),
            Vec3::new(2.0, 2.0, 2.0),
            Vec3::new(1.0, 0.5, -0.2),
            Vec3::new(0.5, 0.5, 0.5),
            Vec3::new(1.0, 1.0, 1.0),
            Vec3::new(1.5, 1.2, 0.9),
        ] {
            let s = volume_preserving_stretches(sigma);
            assert!((s.x * s.y * s.z - 1.0).abs() < 1e-9, "{sigma:?} -> {s:?}");
            // Lagrange stationarity: s - sigma is parallel to grad(s1 s2 s3).
            let grad = Vec3::new(s.y * s.z, s.x * s.z, s.x * s.y);
            let d = s - sigma;
            assert!(
                d.cross(&grad).norm() < 1e-8 * (1.0 + d.norm() * grad.norm()),
                "{sigma:?}"
            );
            if sigma.x * sigma.y * sigma.z < 1.0 {
                // Outside the convex set {prod >= 1}: the projection is unique; no sampled point
                // of the surface is closer.
                let d0 = d.norm_squared();
                for i in 0..400 {
                    let a = 0.3 * ((i as f64 * 0.37).sin());
                    let b = 0.3 * ((i as f64 * 0.73).cos());
                    let q = Vec3::new(s.x * (1.0 + a), s.y * (1.0 + b), 0.0);
                    let q = Vec3::new(q.x, q.y, 1.0 / (q.x * q.y));
                    assert!((q - sigma).norm_squared() >= d0 - 1e-12, "{sigma:?}");
                }
            }
        }
    }
}
