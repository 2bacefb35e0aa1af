//! MPRGP extended to decoupled linear inequality constraints (Li, Pan, Huang, Bao, Jin,
//! Li et al. 2015, sections 3.3-5; Dostal 2009 for the original box-constrained method).
//!
//! MPRGP ("modified proportioning with reduced gradient projections") minimises a convex QP with
//! three kinds of steps chosen by comparing the *chopped gradient* `beta` (how much the objective
//! wants to leave the active constraints) with the *reduced free gradient* `phi~` (how much
//! progress remains inside the current face):
//!
//! - **CG step** (`||beta||^2 <= Gamma^2 phi~'phi`): conjugate gradients restricted to the face of
//!   the active constraints, as long as the full step stays feasible
//!   ([`CgChain::Feasible`]), or, as the paper's Alg. 2 (Dostal's monotone MPRGP), on through
//!   infeasible iterates `y` while the objective at their projections `f(P(y))` does not rise
//!   ([`CgChain::Monotone`]);
//! - **expansion step**: when the CG chain ends outside the feasible set, go to the boundary with
//!   the largest feasible step (or, after infeasible chain steps, to the projection of the last),
//!   then take a fixed-length projected gradient step `x <- P(x - alpha_bar phi(x))` that may
//!   activate many constraints at once; where it would increase the objective, the step is
//!   halved ([`ExpansionSafeguard::Halving`], a deviation) or followed by projected steps along
//!   the whole gradient as in the paper's Alg. 3 ([`ExpansionSafeguard::RepeatedGradient`]);
//! - **proportioning step** (otherwise): a line search along `-beta`, releasing constraints.
//!
//! Which chain and safeguard: `cargo bench --bench newton -- --variants` (a 1,000-vertex cube
//! dropped 2 cm onto a floor, one Newton step per frame, QP tolerance 1e-4; two runs): for a
//! stiff cube (1e7 Pa), whose QPs are mostly expansions, the monotone chain with halving took
//! 3.8-3.9 ms per step and 29.7 MPRGP iterations (37 % CG steps) against 12.1-12.9 ms and 39.0
//! (10 %) for the feasible chain with halving, 5.7-6.0 ms with the feasible chain and the
//! paper's repeated gradient steps, 5.5-6.3 ms with both of the paper's rules; for rubber (2e5
//! Pa), whose QPs are nearly all CG steps, 4.4-4.5 ms and 16.3 iterations against 4.3-4.4 ms
//! and 14.7. The defaults are therefore the paper's Alg. 2 with halving (a deviation from its
//! Alg. 3, kept for the measurement above).
//!
//! With *decoupled* rows (no vertex in two rows, section 5) the paper's three generalised
//! operators have closed forms, row by row, because `J J'` is diagonal (up to three one-vertex
//! rows on one vertex form a 3x3 block, solved exactly in `qp::groups`):
//!
//! - free gradient (eq. 15-16): `phi = g - sum_{j active} J_j' (J_j g) / |J_j|^2`;
//! - chopped gradient (eq. 17-18): `beta = sum_{j active} J_j' min(J_j g, 0) / |J_j|^2`;
//! - projection (eq. 19-20): `P(x) = x + sum_j J_j' max(c_j - J_j x, 0) / |J_j|^2`.
//!
//! Preconditioning: the problem is solved in Jacobi-scaled variables `z = D^{1/2} x`
//! (`D = diag A`), i.e. for `D^{-1/2} A D^{-1/2}` with rows `J D^{-1/2}` — still decoupled, so
//! every operator above stays closed-form. `alpha_bar = 1.9 / ||A||` with `||A||` from a power
//! iteration warm-started with the previous call's vector. The solver stops when
//! `||phi + beta|| <= tolerance * ||b||` in the scaled metric.
//!
//! Where the operator has a coarse space ([`SpdOperator::has_coarse_space`]; a PD body of
//! 2,048 free vertices or more, [`super::coarse`]), the CG steps are preconditioned within the
//! face (Dostal 2009, section 9.6): a chain starts along `pre = F M^-1 phi` instead of `phi`
//! and each next direction is `pre - (pre' A~ p / p' A~ p) p`, where `M^-1` is the two-level
//! preconditioner (identity plus the coarse correction, in the scaled variables) and `F`
//! removes the components along the active rows. The step lengths, the proportioning test,
//! the expansion and proportioning steps and the stopping rule are unchanged, and so is the
//! solution. Measured on the 10,648-vertex cube dropped on the floor (40 steps, a scratch
//! driver, two runs each way): 106 -> 51 MPRGP iterations per step, the iterations' loop
//! 839-881 -> 567-580 ms in all, the QP 31.7-32.5 -> 24.6-26.1 ms per step (the solves'
//! fixed costs, about 0.6 ms a call, are not the coarse space's to cut: see the start product
//! below); on the 39,304-vertex cube (10 steps) 140 -> 65
//! iterations, the loop 1,034 -> 625 ms, the QP 163 -> 119 ms per step.
//!
//! Cost: off the rows' unknowns `phi = g` and `beta = 0`, so every norm and inner product the
//! step choice needs is one sum kept with `g` plus a sum over the few unknowns rows touch, and a
//! CG step is the product with `A` and four fused passes over the vectors (about a dozen
//! before). Measured with `cargo bench --bench solver` (the binaries before and after
//! alternated twice, same iterations): the 10,648-vertex cube's global step and QP 136 and 145
//! -> 114 and 130 ms per step, the 39,304-vertex cube's 755 and 728 -> 612 and 620 ms.
//!
//! The scaled operator is applied in one pass where the operator keeps a scaled copy of
//! itself ([`SpdOperator::apply_scaled`], [`SpdOperator::jacobi_scale`]; a PD system keeps its
//! matrix's, [`crate::sim::pd::PdSystem::apply_jacobi_scaled`]) instead of scaling its input
//! and output around every product; and from [`crate::sim::sparse::PARALLEL_MATVEC_ROWS`]
//! unknowns the CG step's passes and the product's dot products run on both threads, over
//! chunks of 1,024 unknowns whose sums are added in order (the same bits on any
//! number of threads, tested). Measured on the 10,648-vertex cube dropped on the floor (40
//! steps, 107 MPRGP iterations per step, nearly all CG steps; three runs each, binaries
//! alternated): the QP 26.1-27.3 -> 19.9-20.2 ms per step, the whole step 79.8-84.0 ->
//! 73.9-75.8 ms; the 39,304-vertex cube's QP (8 steps, one run each) 92.2 -> 73.3 ms.
//! The Newton matrix keeps such a copy too, as 3x3 blocks
//! (`crate::sim::fem::scaled_blocks`).
//!
//! A caller that knows `A (x - anchor)` for its (feasible) start passes it
//! ([`Mprgp::solve_about_from`]) and MPRGP forms its first gradient from it instead of by a
//! product; the world's islands do for the previous PD iterate, from the gradient the last QP
//! ended with (`crate::sim::world::island`'s `warm_start`, which also compares the two warm
//! starts without products). Measured with a scratch driver timing the solves' parts (the
//! 10,648-vertex cube dropped on the floor, 30 steps, 8.7 QPs per step; two runs each,
//! alternated): the warm start, first gradient and final bookkeeping 6.3-6.9 -> 3.5-3.6 ms per
//! step of a QP of 27-32 ms; on the 39,304-vertex cube (8 steps, 6.4 QPs per step) 25-27 ->
//! 16-19 ms of 120-140 ms. The solver bench's 10K and 40K cubes (fewer QPs per step) took the
//! same MPRGP iterations and residuals, and their times moved less than this machine's noise
//! (three runs each, alternated).
//!
//! An infeasible step of the monotone chain needs `d'A d` for the projection's correction `d`,
//! which is zero off the rows' unknowns: it is summed from the product's rows at those
//! unknowns alone ([`SpdOperator::product_row`]), not from a whole product. Measured with
//! `cargo bench --bench paper -- --quick` (Newton QPs, where a third to two thirds of the
//! iterations are such steps; one run each, same session): the Fig. 3 scene's QP (46,397
//! vertices, 182 iterations) 954 ms per step before, 990 with the Newton matrix's block copy
//! alone, 576 with both; Fig. 5's (12,095 vertices) 77, 76, 63.

use rayon::prelude::*;

use super::groups::{self, RowGroups};
use super::{ConstraintRow, QpError, QpProblem, SpdOperator};
use crate::sim::math::{Vec3, dot, norm_squared};

/// Settings of [`Mprgp`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MprgpSettings {
    /// Relative stopping tolerance on `||phi + beta|| / ||b||` (Jacobi-scaled). Default: 1e-5.
    pub tolerance: f64,
    /// Iteration cap. Default: 500.
    pub max_iterations: usize,
    /// The proportioning constant `Gamma > 0`. Default: 1.
    pub gamma: f64,
    /// Power iterations to estimate `||A||` on each call (warm-started). Default: 6.
    pub power_iterations: usize,
    /// What follows a CG step that would leave the feasible set. Default:
    /// [`CgChain::Monotone`] (see the module docs for the measurement).
    pub chain: CgChain,
    /// How the expansion step keeps the objective from rising. Default:
    /// [`ExpansionSafeguard::Halving`].
    pub safeguard: ExpansionSafeguard,
}

/// What MPRGP does when the next CG step would leave the feasible set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CgChain {
    /// Dostal's MPRGP: go as far along the step as stays feasible, then take an expansion
    /// step from there; every iterate is feasible.
    Feasible,
    /// The paper's Alg. 2 (Dostal's monotone MPRGP): take the infeasible CG step anyway and go
    /// on with the chain while the objective at the iterates' projections, `f(P(y))`, does not
    /// rise; where it would, take the expansion step from the projection of the chain's last
    /// iterate. Each infeasible step costs `A`'s rows at the rows' unknowns (for `f(P(y))`;
    /// one whole product with an operator that cannot form single rows).
    #[default]
    Monotone,
}

impl CgChain {
    /// Both chains.
    pub const ALL: [Self; 2] = [Self::Feasible, Self::Monotone];
}

/// How an expansion step `P(z - alpha_bar phi)` that raised the objective is corrected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExpansionSafeguard {
    /// Deviation from the paper: halve the step length until the objective does not rise
    /// (at most 30 times; otherwise stay).
    #[default]
    Halving,
    /// The paper's Alg. 3: from the new point, projected steps of full length along the
    /// whole gradient, `z <- P(z - alpha_bar g(z))`, while the objective is above the step's
    /// start (at most 30; otherwise stay at the start).
    RepeatedGradient,
}

impl ExpansionSafeguard {
    /// Both safeguards.
    pub const ALL: [Self; 2] = [Self::Halving, Self::RepeatedGradient];
}

impl MprgpSettings {
    /// Every combination of [`CgChain`] and [`ExpansionSafeguard`] (for tests and benches that
    /// compare them).
    pub fn variants() -> impl Iterator<Item = (CgChain, ExpansionSafeguard)> {
        CgChain::ALL
            .into_iter()
            .flat_map(|c| ExpansionSafeguard::ALL.map(|s| (c, s)))
    }
}

impl Default for MprgpSettings {
    fn default() -> Self {
        Self {
            tolerance: 1e-5,
            max_iterations: 500,
            gamma: 1.0,
            power_iterations: 6,
            chain: CgChain::Monotone,
            safeguard: ExpansionSafeguard::Halving,
        }
    }
}

/// What one [`Mprgp::solve`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MprgpStats {
    /// Total iterations (CG + expansion + proportioning).
    pub iterations: usize,
    /// CG steps taken.
    pub cg_steps: usize,
    /// Expansion steps taken.
    pub expansion_steps: usize,
    /// CG steps of a [`CgChain::Monotone`] chain that left the feasible set (counted in
    /// [`MprgpStats::cg_steps`] too).
    pub infeasible_cg_steps: usize,
    /// Proportioning steps taken.
    pub proportioning_steps: usize,
    /// Final `||phi + beta|| / ||b||` (scaled metric; with [`Mprgp::solve_about`], of the
    /// problem moved to the anchor: `b - A anchor`).
    pub relative_residual: f64,
    /// Whether the tolerance was reached.
    pub converged: bool,
    /// Constraints active at the solution.
    pub active: usize,
}

impl MprgpStats {
    /// Share of CG steps among all iterations (the paper's `cg/it`, Table 1).
    pub fn cg_share(&self) -> f64 {
        if self.iterations == 0 {
            1.0
        } else {
            self.cg_steps as f64 / self.iterations as f64
        }
    }
}

/// Reusable MPRGP solver: owns its scratch vectors, so repeated solves of equally sized problems
/// allocate nothing.
#[derive(Debug, Clone, Default)]
pub struct Mprgp {
    /// Settings used by [`Mprgp::solve`].
    pub settings: MprgpSettings,
    scale: Vec<Vec3>,
    rows: Vec<ConstraintRow>,
    row_norm2: Vec<f64>,
    active: Vec<bool>,
    z: Vec<Vec3>,
    b: Vec<Vec3>,
    g: Vec<Vec3>,
    p: Vec<Vec3>,
    ap: Vec<Vec3>,
    phi: Vec<Vec3>,
    beta: Vec<Vec3>,
    tmp: Vec<Vec3>,
    tmp2: Vec<Vec3>,
    power: Vec<Vec3>,
    /// A monotone chain's `S (P(y) - y)` (zero off the rows' unknowns between uses) and its
    /// product with `A` ([`Mprgp::projected_trial_objective`]).
    chain_d: Vec<Vec3>,
    chain_ad: Vec<Vec3>,
    groups: RowGroups,
    has_corners: bool,
    /// Per unknown: 1 where no row touches it, 0 where one does (see [`Mprgp::refresh_free`]).
    free_mask: Vec<f64>,
    /// The unknowns rows touch, each once.
    touched: Vec<u32>,
    /// `sum |g|^2` over the unknowns no row touches, where `phi = g` and `beta = 0`.
    untouched_g2: f64,
    /// Per chunk of [`PASS_CHUNK`] unknowns: the partial sums of a pass's dot products.
    partials: Vec<[f64; 2]>,
    /// The problem moved to an anchor ([`Mprgp::solve_about`]): its `b` and rows.
    shifted_b: Vec<Vec3>,
    shifted_rows: Vec<ConstraintRow>,
    /// The last `||A||` estimate (scaled operator) and whether the next solve reuses it
    /// ([`Mprgp::reuse_norm_estimate`]).
    norm_estimate: Option<f64>,
    reuse_norm: bool,
    /// Whether the operator has a coarse space ([`SpdOperator::has_coarse_space`]): the CG
    /// steps then follow the preconditioned free gradient `pre` instead of `phi`.
    preconditioned: bool,
    pre: Vec<Vec3>,
    /// Scratch of the coarse correction.
    coarse: Vec<Vec3>,
}

/// Unknowns per chunk of the passes over the vectors ([`Mprgp::cg_step`] and the products'
/// dot products): each chunk's sums are formed alone and the chunks' added in order, so the
/// result is the same on any number of threads.
pub(crate) const PASS_CHUNK: usize = 1024;

/// Unknowns from which those chunks run in parallel (rayon), as the matrix products do
/// ([`crate::sim::sparse::PARALLEL_MATVEC_ROWS`]): below, handing chunks to the other thread
/// costs about what it saves.
const PARALLEL_PASS: usize = crate::sim::sparse::PARALLEL_MATVEC_ROWS;

/// The least number of chunks a rayon task takes for `n` unknowns: all of them (one task on
/// the calling thread) below [`PARALLEL_PASS`].
pub(crate) fn min_chunks(n: usize) -> usize {
    if n >= PARALLEL_PASS { 1 } else { usize::MAX }
}

/// The chunks' partial sums, added in order.
pub(crate) fn total(partials: &[[f64; 2]]) -> [f64; 2] {
    partials
        .iter()
        .fold([0.0; 2], |acc, p| [acc[0] + p[0], acc[1] + p[1]])
}

/// `a . b` over chunks of [`PASS_CHUNK`] unknowns (in parallel from [`PARALLEL_PASS`]), the
/// chunks' sums added in order: the same bits on any number of threads.
fn chunked_dot(partials: &mut Vec<[f64; 2]>, a: &[Vec3], b: &[Vec3]) -> f64 {
    let n = a.len();
    partials.resize(n.div_ceil(PASS_CHUNK), [0.0; 2]);
    partials
        .par_iter_mut()
        .zip(a.par_chunks(PASS_CHUNK))
        .zip(b.par_chunks(PASS_CHUNK))
        .with_min_len(min_chunks(n))
        .for_each(|((out, a), b)| {
            *out = [a.iter().zip(b).map(|(x, y)| x.dot(y)).sum(), 0.0];
        });
    total(partials)[0]
}

/// Most step lengths ([`ExpansionSafeguard::Halving`]) or repeated steps
/// ([`ExpansionSafeguard::RepeatedGradient`]) an expansion tries before it stays where it was.
const SAFEGUARD_STEPS: usize = 30;

/// [`Mprgp::solve_about`] stops at the latest where the residual is this small relative to the
/// original problem's Jacobi-scaled `||b||` (far above the rounding of moving the problem).
const ANCHORED_FLOOR: f64 = 1e-13;

impl Mprgp {
    /// A solver with the given settings.
    pub fn new(settings: MprgpSettings) -> Self {
        Self {
            settings,
            ..Self::default()
        }
    }

    /// Whether the next solves reuse the last solve's `||A||` estimate instead of refining it
    /// by [`MprgpSettings::power_iterations`] products with `A`: for a caller that solves
    /// several QPs with the same matrix (the PD iterations of one step). The estimate only sets
    /// the expansion step's length, which is halved while it would raise the objective.
    pub fn reuse_norm_estimate(&mut self, reuse: bool) {
        self.reuse_norm = reuse;
    }

    /// What of `source` the next solve starts from, into `self` (buffers reused): the power
    /// iteration's vector and the `||A||` estimate, which carry from solve to solve; the rest
    /// is scratch every solve writes first. A world snapshot's copy.
    pub fn copy_warm_start_from(&mut self, source: &Self) {
        self.power.clone_from(&source.power);
        self.norm_estimate = source.norm_estimate;
        self.reuse_norm = source.reuse_norm;
    }

    /// `A x - b` at the last solution (N for a PD step): the gradient the solver ended with,
    /// in the original variables, without a product with `A`.
    pub fn final_gradient(&self, out: &mut Vec<Vec3>) {
        out.clear();
        out.extend(
            self.g
                .iter()
                .zip(&self.scale)
                .map(|(g, s)| g.component_div(s)),
        );
    }

    /// Solves the QP starting from `x` (any point; it is projected first) and writes the solution
    /// to `x`.
    ///
    /// # Errors
    /// [`QpError`] for coupled or invalid rows, mismatched sizes, or non-finite data.
    pub fn solve<A: SpdOperator + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        x: &mut [Vec3],
    ) -> Result<MprgpStats, QpError> {
        self.solve_with_floor(problem, x, 0.0, None)
    }

    /// [`Mprgp::solve`] for the displacement `x - anchor`: the same solution (written to `x`),
    /// with the tolerance relative to `||b - A anchor||` instead of `||b||`.
    ///
    /// Where `x` are positions, `b` holds `A` times where the bodies are (the implicit step's
    /// inertia term `M y / h^2`), so a tolerance relative to `||b||` loosens with the bodies'
    /// distance from the world origin. About an anchor near the solution (the step's inertial
    /// prediction) `b - A anchor` is the force that moves the bodies from there, the same
    /// wherever they are: measured with the world's residual
    /// ([`crate::sim::world::WorldSettings::measure_residual`]), a cube resting on a floor at
    /// 100 m from the origin ended its steps 30-40 times further from the implicit step's
    /// solution than at the origin, and at 1 km MPRGP stopped after 1-8 iterations. The solve
    /// stops at the latest at `ANCHORED_FLOOR` (1e-13) times the original `||b||` (scaled), so that a
    /// `b - A anchor` at the level of rounding does not ask for the impossible.
    ///
    /// # Errors
    /// As [`Mprgp::solve`].
    pub fn solve_about<A: SpdOperator + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        anchor: &[Vec3],
        x: &mut [Vec3],
    ) -> Result<MprgpStats, QpError> {
        self.solve_about_with(problem, anchor, None, x)
    }

    /// [`Mprgp::solve_about`] with `A anchor` given (for a caller that solves several QPs
    /// about one anchor with one matrix).
    ///
    /// # Errors
    /// As [`Mprgp::solve`].
    pub fn solve_about_with<A: SpdOperator + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        anchor: &[Vec3],
        a_anchor: Option<&[Vec3]>,
        x: &mut [Vec3],
    ) -> Result<MprgpStats, QpError> {
        self.solve_about_from(problem, anchor, a_anchor, None, x)
    }

    /// [`Mprgp::solve_about_with`] with, optionally, `A (x - anchor)` for the `x` given (a
    /// caller that knows it saves the product of the first gradient). It must be that product
    /// for a feasible `x`: where the solver's own projection of `x` moves it by more than
    /// rounding (`1e-12` relative), the product is not used and the gradient is formed by one.
    ///
    /// # Errors
    /// As [`Mprgp::solve`].
    pub fn solve_about_from<A: SpdOperator + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        anchor: &[Vec3],
        a_anchor: Option<&[Vec3]>,
        start_product: Option<&[Vec3]>,
        x: &mut [Vec3],
    ) -> Result<MprgpStats, QpError> {
        let n = problem.a.len();
        let given = a_anchor.map_or(n, <[Vec3]>::len);
        let started = start_product.map_or(n, <[Vec3]>::len);
        if problem.b.len() != n || x.len() != n || anchor.len() != n || given != n || started != n {
            return Err(QpError::Dimension {
                operator: n,
                vector: problem
                    .b
                    .len()
                    .min(x.len())
                    .min(anchor.len())
                    .min(given)
                    .min(started),
            });
        }
        let mut b = std::mem::take(&mut self.shifted_b);
        let mut rows = std::mem::take(&mut self.shifted_rows);
        b.clear();
        match a_anchor {
            Some(product) => b.extend_from_slice(product),
            None => {
                b.resize(n, Vec3::zeros());
                problem.a.apply(anchor, &mut b);
            }
        }
        self.tmp.resize(n, Vec3::zeros());
        problem.a.jacobi_scale(&mut self.tmp);
        // `b' D^-1 b` (`D = diag A`), the Jacobi-scaled `||b||^2` of the original problem; a
        // scaling that is not finite (a diagonal entry not positive) counts nothing here and
        // fails the solve in `prepare`.
        let mut original = 0.0;
        for ((shifted, b0), s) in b.iter_mut().zip(problem.b).zip(&self.tmp) {
            let scaled = b0.component_mul(&s.map(|c| if c.is_finite() { c } else { 0.0 }));
            original += scaled.norm_squared();
            *shifted = b0 - *shifted;
        }
        rows.clear();
        rows.extend(problem.rows.iter().map(|r| ConstraintRow {
            rhs: r.rhs - r.dot(anchor),
            ..*r
        }));
        for (xi, a) in x.iter_mut().zip(anchor) {
            *xi -= a;
        }
        let shifted = QpProblem {
            a: problem.a,
            b: &b,
            rows: &rows,
        };
        let floor = ANCHORED_FLOOR * original.sqrt();
        let result = self.solve_with_floor(&shifted, x, floor, start_product);
        for (xi, a) in x.iter_mut().zip(anchor) {
            *xi += a;
        }
        self.shifted_b = b;
        self.shifted_rows = rows;
        result
    }

    /// [`Mprgp::solve`], stopping at the latest where the scaled residual is `floor`; with
    /// `start_product` `A x` (see [`Mprgp::solve_about_from`]).
    fn solve_with_floor<A: SpdOperator + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        x: &mut [Vec3],
        floor: f64,
        start_product: Option<&[Vec3]>,
    ) -> Result<MprgpStats, QpError> {
        let n = problem.a.len();
        if problem.b.len() != n || x.len() != n {
            return Err(QpError::Dimension {
                operator: n,
                vector: problem.b.len().min(x.len()),
            });
        }
        self.groups.build(problem.rows, n)?;
        self.has_corners = (0..self.groups.len()).any(|g| self.groups.group(g).len() > 1);
        self.prepare(problem, x)?;
        let mut stats = MprgpStats::default();
        let b_norm = norm_squared(&self.b).sqrt();
        let tol = (self.settings.tolerance * if b_norm > 0.0 { b_norm } else { 1.0 }).max(floor);
        let alpha_bar = 1.9 / self.estimate_norm(problem.a).max(f64::MIN_POSITIVE);

        let kept = self.projection_keeps_z();
        match start_product {
            Some(product) if kept => self.gradient_from_product(product),
            _ => self.gradient(problem.a),
        }
        self.update_active();
        self.free_gradient_into_p(problem.a);
        // Whether `z` is an infeasible iterate of a monotone chain ([`CgChain::Monotone`]),
        // and then `f(P(z))`.
        let mut outside = false;
        let mut outside_objective = 0.0;
        loop {
            // `phi` is current everywhere here; `beta` is zero off the rows.
            self.chopped_at_rows();
            let residual = self.residual_norm();
            stats.relative_residual = residual / if b_norm > 0.0 { b_norm } else { 1.0 };
            if !residual.is_finite() {
                return Err(QpError::NonFinite);
            }
            if outside && residual <= tol {
                // Stationary on the face but infeasible: back to the projection, whose
                // residual the next pass measures.
                self.leave_chain(problem.a);
                outside = false;
                continue;
            }
            if residual <= tol {
                stats.converged = true;
                break;
            }
            if stats.iterations >= self.settings.max_iterations {
                break;
            }
            stats.iterations += 1;
            let beta2 = self.touched_norm2_beta();
            let gamma2 = self.settings.gamma * self.settings.gamma;
            let proportional = beta2 <= gamma2 * self.reduced_free_dot_free(alpha_bar);
            if outside && !proportional {
                // Alg. 2's chain also ends where the proportioning test fails: expansion
                // from the projection of its last iterate.
                stats.expansion_steps += 1;
                self.leave_chain(problem.a);
                outside = false;
                self.expansion(problem.a, alpha_bar);
                self.update_active();
                self.free_gradient_into_p(problem.a);
                continue;
            }
            if proportional {
                // Trial CG step along p.
                let (pap, gp) = self.apply_scaled_p_with_dots(problem.a);
                if !(pap > 0.0) {
                    // p vanished (phi = 0 on this face): restart from the free gradient.
                    self.restart_chain(problem.a);
                    continue;
                }
                let alpha_cg = gp / pap;
                let alpha_f = self.max_feasible_step();
                if !outside && alpha_cg <= alpha_f {
                    stats.cg_steps += 1;
                    self.cg_step(problem.a, alpha_cg, pap);
                    // Round-off lets p and z drift off the face; long CG chains amplify it.
                    self.restore_face();
                    continue;
                }
                if self.settings.chain == CgChain::Monotone {
                    let f_z = self.objective();
                    let reference = if outside { outside_objective } else { f_z };
                    let (f_projected, feasible) =
                        self.projected_trial_objective(problem.a, alpha_cg, f_z, gp, pap);
                    if f_projected <= reference {
                        stats.cg_steps += 1;
                        if !feasible {
                            stats.infeasible_cg_steps += 1;
                        }
                        self.cg_step(problem.a, alpha_cg, pap);
                        self.restore_face();
                        outside = !feasible;
                        outside_objective = f_projected;
                        continue;
                    }
                }
                stats.expansion_steps += 1;
                if outside {
                    self.leave_chain(problem.a);
                    outside = false;
                } else {
                    // Dostal's half step to the boundary first (it lowers the objective; the
                    // paper's Alg. 1-3 expand from `P(x^k)` itself).
                    axpy_neg(alpha_f, &self.p, &mut self.z);
                    axpy_neg(alpha_f, &self.ap, &mut self.g);
                    self.update_active();
                    self.refresh_free();
                }
                self.expansion(problem.a, alpha_bar);
                self.update_active();
                self.free_gradient_into_p(problem.a);
            } else {
                stats.proportioning_steps += 1;
                self.apply_scaled(problem.a, Which::Beta);
                let bab = dot(&self.beta, &self.ap);
                if !(bab > 0.0) {
                    break;
                }
                let alpha_p = dot(&self.g, &self.beta) / bab;
                if self.has_corners {
                    // With several rows on a vertex, -beta may cut an inactive row of the same
                    // vertex: project back, and fall back to projected gradient steps while the
                    // objective would rise (the safeguard of Alg. 3).
                    let f0 = self.objective();
                    self.tmp2.copy_from_slice(&self.z);
                    axpy_neg(alpha_p, &self.beta, &mut self.z);
                    self.project_z();
                    self.gradient(problem.a);
                    if self.objective() > f0 {
                        self.z.copy_from_slice(&self.tmp2);
                        self.gradient(problem.a);
                        self.update_active();
                        self.refresh_free();
                        self.g_step_safeguard(problem.a, alpha_bar);
                    }
                } else {
                    axpy_neg(alpha_p, &self.beta, &mut self.z);
                    axpy_neg(alpha_p, &self.ap, &mut self.g);
                }
                self.update_active();
                self.free_gradient_into_p(problem.a);
            }
        }
        if outside {
            // Out of iterations inside a chain: return its projection, with its residual.
            self.leave_chain(problem.a);
            self.chopped_at_rows();
            stats.relative_residual =
                self.residual_norm() / if b_norm > 0.0 { b_norm } else { 1.0 };
        }
        stats.active = self.active.iter().filter(|&&a| a).count();
        for ((xi, zi), si) in x.iter_mut().zip(&self.z).zip(&self.scale) {
            *xi = zi.component_mul(si);
        }
        Ok(stats)
    }

    fn prepare<A: SpdOperator + ?Sized>(
        &mut self,
        problem: &QpProblem<'_, A>,
        x: &[Vec3],
    ) -> Result<(), QpError> {
        let n = x.len();
        // `beta` must be zero off the rows' unknowns and `chain_d` everywhere; the other
        // vectors are written before they are read. With the last solve's length, `beta` is
        // nonzero at most at its rows' unknowns and `chain_d` was left zero: no pass over all.
        if self.beta.len() == n && self.chain_d.len() == n {
            for &v in &self.touched {
                self.beta[v as usize] = Vec3::zeros();
            }
        } else {
            for v in [&mut self.beta, &mut self.chain_d] {
                v.clear();
                v.resize(n, Vec3::zeros());
            }
        }
        for v in [
            &mut self.scale,
            &mut self.z,
            &mut self.b,
            &mut self.g,
            &mut self.p,
            &mut self.ap,
            &mut self.phi,
            &mut self.tmp,
            &mut self.tmp2,
            &mut self.chain_ad,
        ] {
            v.resize(n, Vec3::zeros());
        }
        self.preconditioned = problem.a.has_coarse_space();
        if self.preconditioned {
            self.pre.resize(n, Vec3::zeros());
        }
        problem.a.jacobi_scale(&mut self.scale);
        if !self
            .scale
            .iter()
            .all(|s| s.iter().all(|&c| c > 0.0 && c.is_finite()))
        {
            return Err(QpError::NonFinite);
        }
        for (i, s) in self.scale.iter().enumerate() {
            self.z[i] = x[i].component_div(s);
            self.b[i] = problem.b[i].component_mul(s);
        }
        if !(crate::sim::math::all_finite(&self.z) && crate::sim::math::all_finite(&self.b)) {
            return Err(QpError::NonFinite);
        }
        self.rows.clear();
        self.row_norm2.clear();
        for row in problem.rows {
            let mut r = *row;
            for e in 0..r.len as usize {
                r.coeffs[e] = r.coeffs[e].component_mul(&self.scale[r.vertices[e] as usize]);
            }
            self.row_norm2.push(r.norm_squared());
            self.rows.push(r);
        }
        self.active.clear();
        self.active.resize(self.rows.len(), false);
        self.free_mask.clear();
        self.free_mask.resize(n, 1.0);
        self.touched.clear();
        for row in &self.rows {
            for (v, _) in row.entries() {
                if self.free_mask[v] != 0.0 {
                    self.free_mask[v] = 0.0;
                    self.touched.push(v as u32);
                }
            }
        }
        if self.power.len() != n {
            self.power.clear();
            self.power.resize(n, Vec3::repeat(1.0));
            self.norm_estimate = None;
        }
        Ok(())
    }

    /// `||A||_2` of the scaled operator by a warm-started power iteration, with a 5 % margin
    /// (the last estimate where [`Mprgp::reuse_norm_estimate`] asks for it).
    fn estimate_norm<A: SpdOperator + ?Sized>(&mut self, a: &A) -> f64 {
        if self.reuse_norm
            && let Some(estimate) = self.norm_estimate
        {
            return estimate;
        }
        let estimate = self.power_iteration(a);
        self.norm_estimate = Some(estimate);
        estimate
    }

    fn power_iteration<A: SpdOperator + ?Sized>(&mut self, a: &A) -> f64 {
        let mut lambda = 0.0;
        let its = if self.power.iter().all(|v| *v == Vec3::repeat(1.0)) {
            self.settings.power_iterations.max(12)
        } else {
            self.settings.power_iterations.max(1)
        };
        for _ in 0..its {
            let nrm = norm_squared(&self.power).sqrt();
            if !(nrm > 0.0) || !nrm.is_finite() {
                self.power.iter_mut().for_each(|v| *v = Vec3::repeat(1.0));
                continue;
            }
            self.power.iter_mut().for_each(|v| *v /= nrm);
            a.apply_scaled(&self.scale, &self.power, &mut self.tmp, &mut self.tmp2);
            lambda = dot(&self.power, &self.tmp2);
            std::mem::swap(&mut self.power, &mut self.tmp2);
        }
        lambda * 1.05
    }

    /// `ap = A~ beta` or `ap = A~ z` (scaled operator).
    fn apply_scaled<A: SpdOperator + ?Sized>(&mut self, a: &A, which: Which) {
        let src = match which {
            Which::Beta => &self.beta,
            Which::Z => &self.z,
        };
        a.apply_scaled(&self.scale, src, &mut self.tmp, &mut self.ap);
    }

    /// `g = A~ z - b~`.
    fn gradient<A: SpdOperator + ?Sized>(&mut self, a: &A) {
        self.apply_scaled(a, Which::Z);
        for i in 0..self.g.len() {
            self.g[i] = self.ap[i] - self.b[i];
        }
    }

    /// Projects `z` and tells whether that moved it by no more than rounding: `1e-12` times its
    /// norm, over the unknowns the rows touch (the projection moves no other).
    fn projection_keeps_z(&mut self) -> bool {
        for &v in &self.touched {
            self.tmp2[v as usize] = self.z[v as usize];
        }
        self.project_z();
        let (mut moved, mut size) = (0.0, 0.0);
        for &v in &self.touched {
            let v = v as usize;
            moved += (self.z[v] - self.tmp2[v]).norm_squared();
            size += self.z[v].norm_squared();
        }
        moved <= 1e-24 * size
    }

    /// `g = A~ z - b~` from the product `A x` (`x = S z`): `A~ z = S A x`.
    fn gradient_from_product(&mut self, product: &[Vec3]) {
        for (((g, p), s), b) in self.g.iter_mut().zip(product).zip(&self.scale).zip(&self.b) {
            *g = p.component_mul(s) - b;
        }
    }

    /// `f(z) = 1/2 z'A~z - b~'z = 1/2 z'(g - b~)`.
    fn objective(&self) -> f64 {
        self.z
            .iter()
            .zip(&self.g)
            .zip(&self.b)
            .map(|((z, g), b)| 0.5 * z.dot(&(g - b)))
            .sum()
    }

    fn gap(&self, j: usize) -> f64 {
        self.rows[j].dot(&self.z) - self.rows[j].rhs
    }

    fn active_tolerance(&self, j: usize) -> f64 {
        let r = &self.rows[j];
        1e-11
            * (r.rhs.abs()
                + r.entries()
                    .map(|(v, a)| a.norm() * self.z[v].norm())
                    .sum::<f64>())
            + 1e-300
    }

    fn update_active(&mut self) {
        for j in 0..self.rows.len() {
            self.active[j] = self.gap(j) <= self.active_tolerance(j);
        }
    }

    /// Projection onto `{J~ z >= c}`, exact group by group.
    fn project_z(&mut self) {
        groups::project(&self.rows, &self.groups, &mut self.z);
    }

    /// `phi` from `g` and the active set, everywhere, and [`Mprgp::untouched_g2`] with it.
    ///
    /// Off the rows `phi = g` and `beta = 0`, so the sums the loop needs split into that one
    /// (kept whenever `g` changes) and sums over the few unknowns rows touch: a CG step then
    /// costs the product with `A` and four passes over the vectors instead of a dozen.
    fn refresh_free(&mut self) {
        groups::free_gradient(
            &self.rows,
            &self.groups,
            &self.active,
            &self.g,
            &mut self.phi,
        );
        self.untouched_g2 = self
            .g
            .iter()
            .zip(&self.free_mask)
            .map(|(g, m)| m * g.norm_squared())
            .sum();
    }

    /// Removes from `p` its components along the active rows and puts `z` back exactly on them.
    fn restore_face(&mut self) {
        groups::remove_active_components(&self.rows, &self.groups, &self.active, &mut self.p);
        groups::snap_to_active(&self.rows, &self.groups, &self.active, &mut self.z);
    }

    /// `phi` from `g` ([`Mprgp::refresh_free`]) and a new CG chain along it, preconditioned
    /// where the operator has a coarse space.
    fn free_gradient_into_p<A: SpdOperator + ?Sized>(&mut self, a: &A) {
        self.refresh_free();
        self.restart_chain(a);
    }

    /// `p` from the current `phi`: `phi` itself, or its preconditioned `pre`.
    fn restart_chain<A: SpdOperator + ?Sized>(&mut self, a: &A) {
        if self.preconditioned {
            self.precondition(a);
            self.p.copy_from_slice(&self.pre);
        } else {
            self.p.copy_from_slice(&self.phi);
        }
    }

    /// `pre = phi + Z (P'AP)^-1 Z' phi` less its components along the active rows: the free
    /// gradient preconditioned within the face of the active constraints by the two-level
    /// preconditioner of [`super::coarse`] (`phi` lies in the face already).
    fn precondition<A: SpdOperator + ?Sized>(&mut self, a: &A) {
        self.pre.copy_from_slice(&self.phi);
        a.add_coarse_correction(&self.phi, &mut self.coarse, &mut self.pre);
        groups::remove_active_components(&self.rows, &self.groups, &self.active, &mut self.pre);
    }

    /// `beta` at the rows' unknowns from `g` and the active set (zero elsewhere already).
    fn chopped_at_rows(&mut self) {
        groups::chopped_gradient_at_rows(
            &self.rows,
            &self.groups,
            &self.active,
            &self.g,
            &mut self.beta,
        );
    }

    /// `||phi + beta||`.
    fn residual_norm(&self) -> f64 {
        let touched: f64 = self
            .touched
            .iter()
            .map(|&v| (self.phi[v as usize] + self.beta[v as usize]).norm_squared())
            .sum();
        (self.untouched_g2 + touched).sqrt()
    }

    /// `||beta||^2` (zero off the rows).
    fn touched_norm2_beta(&self) -> f64 {
        self.touched
            .iter()
            .map(|&v| self.beta[v as usize].norm_squared())
            .sum()
    }

    /// `phi~(z)' phi(z)` with `phi~ = (z - P(z - alpha phi)) / alpha` (eq. 13). Off the rows
    /// the projection is the identity, so `phi~ = phi = g` there.
    fn reduced_free_dot_free(&mut self, alpha: f64) -> f64 {
        for &v in &self.touched {
            let v = v as usize;
            self.tmp[v] = self.z[v] - alpha * self.phi[v];
        }
        groups::project(&self.rows, &self.groups, &mut self.tmp);
        let touched: f64 = self
            .touched
            .iter()
            .map(|&v| {
                let v = v as usize;
                ((self.z[v] - self.tmp[v]) / alpha).dot(&self.phi[v])
            })
            .sum();
        self.untouched_g2 + touched
    }

    /// `ap = A~ p`, returning `p' A~ p` and `g' p` from the same pass.
    fn apply_scaled_p_with_dots<A: SpdOperator + ?Sized>(&mut self, a: &A) -> (f64, f64) {
        a.apply_scaled(&self.scale, &self.p, &mut self.tmp, &mut self.ap);
        let n = self.p.len();
        self.partials.resize(n.div_ceil(PASS_CHUNK), [0.0; 2]);
        self.partials
            .par_iter_mut()
            .zip(self.ap.par_chunks(PASS_CHUNK))
            .zip(self.p.par_chunks(PASS_CHUNK))
            .zip(self.g.par_chunks(PASS_CHUNK))
            .with_min_len(min_chunks(n))
            .for_each(|(((out, ap), p), g)| {
                let (mut pap, mut gp) = (0.0, 0.0);
                for ((ap, p), g) in ap.iter().zip(p).zip(g) {
                    pap += p.dot(ap);
                    gp += g.dot(p);
                }
                *out = [pap, gp];
            });
        let [pap, gp] = total(&self.partials);
        (pap, gp)
    }

    /// The CG step `z -= alpha p`, `g -= alpha ap`, then `phi` from the new `g` and the next
    /// conjugate direction `p = phi - (phi' ap / pap) p`: two passes over the vectors (the
    /// active set is unchanged, so the rows' part of `phi` is a correction at their unknowns).
    /// With a coarse space, `p = pre - (pre' ap / pap) p` from the preconditioned `pre`
    /// ([`Mprgp::precondition`]), at the cost of the correction and one more pass.
    fn cg_step<A: SpdOperator + ?Sized>(&mut self, a: &A, alpha: f64, pap: f64) {
        let n = self.z.len();
        self.partials.resize(n.div_ceil(PASS_CHUNK), [0.0; 2]);
        self.partials
            .par_iter_mut()
            .zip(self.z.par_chunks_mut(PASS_CHUNK))
            .zip(self.g.par_chunks_mut(PASS_CHUNK))
            .zip(self.phi.par_chunks_mut(PASS_CHUNK))
            .zip(self.p.par_chunks(PASS_CHUNK))
            .zip(self.ap.par_chunks(PASS_CHUNK))
            .zip(self.free_mask.par_chunks(PASS_CHUNK))
            .with_min_len(min_chunks(n))
            .for_each(|((((((out, z), g), phi), p), ap), mask)| {
                let (mut g2, mut phi_ap) = (0.0, 0.0);
                for i in 0..z.len() {
                    z[i] -= alpha * p[i];
                    let gi = g[i] - alpha * ap[i];
                    g[i] = gi;
                    phi[i] = gi;
                    let m = mask[i];
                    g2 += m * gi.norm_squared();
                    phi_ap += m * gi.dot(&ap[i]);
                }
                *out = [g2, phi_ap];
            });
        let [g2, mut phi_ap] = total(&self.partials);
        self.untouched_g2 = g2;
        groups::remove_active_components(&self.rows, &self.groups, &self.active, &mut self.phi);
        phi_ap += self
            .touched
            .iter()
            .map(|&v| self.phi[v as usize].dot(&self.ap[v as usize]))
            .sum::<f64>();
        // Preconditioned: the next direction is conjugate to `p` from `pre` instead of `phi`.
        let direction = if self.preconditioned {
            self.precondition(a);
            phi_ap = chunked_dot(&mut self.partials, &self.pre, &self.ap);
            &self.pre
        } else {
            &self.phi
        };
        let gamma = phi_ap / pap;
        self.p
            .par_chunks_mut(PASS_CHUNK)
            .zip(direction.par_chunks(PASS_CHUNK))
            .with_min_len(min_chunks(n))
            .for_each(|(p, phi)| {
                for (p, phi) in p.iter_mut().zip(phi) {
                    *p = phi - gamma * *p;
                }
            });
    }

    /// `f(P(y))` for the trial CG iterate `y = z - alpha p`, and whether `y` is feasible, from
    /// `f(z)`, `g'p` and `p'A~p`: `f(y) = f(z) - alpha g'p + alpha^2 p'A~p / 2`, and with
    /// `d = P(y) - y` (nonzero only at the rows' unknowns) and `g(y) = g - alpha A~p`,
    /// `f(P(y)) = f(y) + g(y)'d + d'A~d / 2`: `A`'s rows at the rows' unknowns where `y` is
    /// infeasible ([`SpdOperator::product_row`]).
    fn projected_trial_objective<A: SpdOperator + ?Sized>(
        &mut self,
        a: &A,
        alpha: f64,
        f_z: f64,
        gp: f64,
        pap: f64,
    ) -> (f64, bool) {
        let f_y = f_z - alpha * gp + 0.5 * alpha * alpha * pap;
        for &v in &self.touched {
            let v = v as usize;
            self.tmp[v] = self.z[v] - alpha * self.p[v];
        }
        groups::project(&self.rows, &self.groups, &mut self.tmp);
        let mut feasible = true;
        let mut linear = 0.0;
        for &v in &self.touched {
            let v = v as usize;
            let d = self.tmp[v] - (self.z[v] - alpha * self.p[v]);
            if d != Vec3::zeros() {
                feasible = false;
            }
            self.chain_d[v] = d.component_mul(&self.scale[v]);
            linear += (self.g[v] - alpha * self.ap[v]).dot(&d);
        }
        if feasible {
            return (f_y, true);
        }
        // `d'A~d = (S d)' A (S d)` with `S d` in `chain_d`, zero off the rows' unknowns: their
        // rows of the product alone where the operator forms single rows, else one product.
        let mut quadratic = 0.0;
        let mut by_rows = true;
        for &v in &self.touched {
            let v = v as usize;
            match a.product_row(&self.chain_d, v) {
                Some(row) => quadratic += self.chain_d[v].dot(&row),
                None => {
                    by_rows = false;
                    break;
                }
            }
        }
        if !by_rows {
            a.apply(&self.chain_d, &mut self.chain_ad);
            quadratic = self
                .touched
                .iter()
                .map(|&v| self.chain_d[v as usize].dot(&self.chain_ad[v as usize]))
                .sum();
        }
        for &v in &self.touched {
            self.chain_d[v as usize] = Vec3::zeros();
        }
        (f_y + linear + 0.5 * quadratic, false)
    }

    /// Ends a monotone chain: `z` onto the feasible set, with its gradient, active set and
    /// free gradient (`p = phi`, or its preconditioned `pre`).
    fn leave_chain<A: SpdOperator + ?Sized>(&mut self, a: &A) {
        self.project_z();
        self.gradient(a);
        self.update_active();
        self.free_gradient_into_p(a);
    }

    /// Largest `alpha >= 0` with `z - alpha p` feasible.
    fn max_feasible_step(&self) -> f64 {
        let mut alpha = f64::INFINITY;
        for (j, row) in self.rows.iter().enumerate() {
            if self.active[j] {
                continue;
            }
            let ap = row.dot(&self.p);
            if ap > 0.0 {
                alpha = alpha.min((self.gap(j).max(0.0)) / ap);
            }
        }
        alpha
    }

    /// `z <- P(z - alpha_bar phi)` with the [`MprgpSettings::safeguard`] while the objective
    /// would rise. Recomputes `g` exactly.
    fn expansion<A: SpdOperator + ?Sized>(&mut self, a: &A, alpha_bar: f64) {
        self.projected_step(a, alpha_bar, false);
    }

    /// `z <- P(z - alpha_bar g)` with the safeguard, used when a proportioning step through a
    /// corner would raise the objective.
    fn g_step_safeguard<A: SpdOperator + ?Sized>(&mut self, a: &A, alpha_bar: f64) {
        self.projected_step(a, alpha_bar, true);
    }

    fn projected_step<A: SpdOperator + ?Sized>(
        &mut self,
        a: &A,
        alpha_bar: f64,
        full_gradient: bool,
    ) {
        let f0 = self.objective();
        self.tmp2.copy_from_slice(&self.z);
        if full_gradient {
            self.phi.copy_from_slice(&self.g);
        }
        match self.settings.safeguard {
            ExpansionSafeguard::Halving => {
                let mut alpha = alpha_bar;
                for _ in 0..SAFEGUARD_STEPS {
                    for i in 0..self.z.len() {
                        self.z[i] = self.tmp2[i] - alpha * self.phi[i];
                    }
                    self.project_z();
                    self.gradient(a);
                    if self.objective() <= f0 {
                        return;
                    }
                    alpha *= 0.5;
                }
            }
            ExpansionSafeguard::RepeatedGradient => {
                for i in 0..self.z.len() {
                    self.z[i] = self.tmp2[i] - alpha_bar * self.phi[i];
                }
                self.project_z();
                self.gradient(a);
                for _ in 0..SAFEGUARD_STEPS {
                    if self.objective() <= f0 {
                        return;
                    }
                    axpy_neg(alpha_bar, &self.g, &mut self.z);
                    self.project_z();
                    self.gradient(a);
                }
            }
        }
        // No decrease found: stay where we were.
        self.z.copy_from_slice(&self.tmp2);
        self.gradient(a);
    }
}

#[derive(Clone, Copy)]
enum Which {
    Beta,
    Z,
}

#[inline]
fn axpy_neg(alpha: f64, x: &[Vec3], y: &mut [Vec3]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi -= alpha * xi;
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_problems::random_qp;
    use super::super::{kkt_residual, multipliers};
    use super::*;

    /// The same QPs moved 1e4 away from the origin (`x -> x + t`: `b + A t`, `c + J t`): about
    /// an anchor at `t` MPRGP finds the moved solution as accurately as the original one,
    /// whereas a tolerance relative to the moved `||b||` stops far from it.
    #[test]
    fn anchored_solves_are_as_accurate_far_from_the_origin() {
        let mut worse = 0;
        for seed in 0..20u64 {
            let n = 4 + (seed as usize % 9);
            let m = 1 + (seed as usize % 5);
            let (a, b, rows) = random_qp(seed, n, m);
            let settings = MprgpSettings {
                tolerance: 1e-8,
                max_iterations: 5000,
                ..MprgpSettings::default()
            };
            let mut truth = vec![Vec3::zeros(); n];
            Mprgp::new(MprgpSettings {
                tolerance: 1e-13,
                ..settings
            })
            .solve(
                &QpProblem {
                    a: &a,
                    b: &b,
                    rows: &rows,
                },
                &mut truth,
            )
            .unwrap();
            let t: Vec<Vec3> = (0..n)
                .map(|i| Vec3::new(1e4, -2e4 + i as f64, 3e4))
                .collect();
            let mut moved_b = vec![Vec3::zeros(); n];
            a.apply(&t, &mut moved_b);
            moved_b.iter_mut().zip(&b).for_each(|(m, b)| *m += b);
            let moved_rows: Vec<ConstraintRow> = rows
                .iter()
                .map(|r| ConstraintRow {
                    rhs: r.rhs + r.dot(&t),
                    ..*r
                })
                .collect();
            let moved = QpProblem {
                a: &a,
                b: &moved_b,
                rows: &moved_rows,
            };
            let scale = truth.iter().map(|v| v.amax()).fold(1.0, f64::max);
            let error = |x: &[Vec3]| {
                x.iter()
                    .zip(&t)
                    .zip(&truth)
                    .map(|((x, t), s)| (x - t - s).amax())
                    .fold(0.0, f64::max)
            };
            let mut original = vec![Vec3::zeros(); n];
            Mprgp::new(settings)
                .solve(
                    &QpProblem {
                        a: &a,
                        b: &b,
                        rows: &rows,
                    },
                    &mut original,
                )
                .unwrap();
            let original_error = original
                .iter()
                .zip(&truth)
                .map(|(x, s)| (x - s).amax())
                .fold(0.0, f64::max);
            let mut anchored = t.clone();
            Mprgp::new(settings)
                .solve_about(&moved, &t, &mut anchored)
                .unwrap();
            // As accurate as the original, up to the rounding of positions at 3e4 (1e-11).
            assert!(
                error(&anchored) < 10.0 * original_error + 1e-9 * scale,
                "seed {seed}: anchored error {}, original {original_error}",
                error(&anchored)
            );
            let mut plain = t.clone();
            Mprgp::new(settings).solve(&moved, &mut plain).unwrap();
            if error(&plain) > 1e3 * error(&anchored).max(1e-12) {
                worse += 1;
            }
        }
        // The test is a real one: relative to the moved `||b||`, most solves stop early.
        assert!(worse >= 10, "{worse} of 20 plain solves were worse");
    }

    #[test]
    fn random_qps_satisfy_kkt_conditions() {
        for (chain, safeguard) in MprgpSettings::variants() {
            random_qps_satisfy_kkt_conditions_with(chain, safeguard);
        }
    }

    fn random_qps_satisfy_kkt_conditions_with(chain: CgChain, safeguard: ExpansionSafeguard) {
        for seed in 0..40u64 {
            let n = 4 + (seed as usize % 9);
            let m = 1 + (seed as usize % 5);
            let (a, b, rows) = random_qp(seed, n, m);
            let problem = QpProblem {
                a: &a,
                b: &b,
                rows: &rows,
            };
            let mut solver = Mprgp::new(MprgpSettings {
                tolerance: 1e-12,
                max_iterations: 2000,
                chain,
                safeguard,
                ..MprgpSettings::default()
            });
            let mut x = vec![Vec3::zeros(); n];
            let stats = solver.solve(&problem, &mut x).unwrap();
            assert!(
                stats.converged,
                "{chain:?} {safeguard:?} seed {seed}: {stats:?}"
            );
            // Feasibility.
            for row in &rows {
                assert!(
                    row.dot(&x) - row.rhs >= -1e-9,
                    "seed {seed}: infeasible {} {:?}",
                    row.dot(&x) - row.rhs,
                    stats
                );
            }
            // Stationarity and sign of multipliers: A x - b = J' lambda, lambda >= 0,
            // complementarity lambda_j (J_j x - c_j) = 0.
            let lambda = multipliers(&problem, &x);
            let mut r = vec![Vec3::zeros(); n];
            a.apply(&x, &mut r);
            for (ri, bi) in r.iter_mut().zip(&b) {
                *ri -= bi;
            }
            for (row, &l) in rows.iter().zip(&lambda) {
                assert!(l >= 0.0);
                assert!((l * (row.dot(&x) - row.rhs)).abs() < 1e-8);
                row.add_scaled(-l, &mut r);
            }
            let bn = norm_squared(&b).sqrt();
            assert!(
                norm_squared(&r).sqrt() < 1e-8 * bn,
                "seed {seed}: stationarity"
            );
            // No active row wants to be released (dual feasibility on the active set).
            let kkt = kkt_residual(&problem, &x);
            assert!(kkt.relative < 1e-8, "seed {seed}: {kkt:?}");
        }
    }

    /// An operator with only its product and diagonal: MPRGP then uses the trait's defaults
    /// (it scales around the plain product, and forms `d'A d` by whole products).
    struct PlainProducts<'a, A>(&'a A);

    impl<A: SpdOperator> SpdOperator for PlainProducts<'_, A> {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn apply(&self, x: &[Vec3], out: &mut [Vec3]) {
            self.0.apply(x, out);
        }
        fn diagonal(&self, out: &mut [Vec3]) {
            self.0.diagonal(out);
        }
    }

    /// [`PlainProducts`] that counts its products.
    struct CountedProducts<'a, A>(&'a A, std::sync::atomic::AtomicUsize);

    impl<A: SpdOperator> SpdOperator for CountedProducts<'_, A> {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn apply(&self, x: &[Vec3], out: &mut [Vec3]) {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.apply(x, out);
        }
        fn diagonal(&self, out: &mut [Vec3]) {
            self.0.diagonal(out);
        }
    }

    /// Given `A (x - anchor)` for a feasible start, MPRGP takes its first gradient from it: one
    /// product fewer, as many iterations and the same solution (within 1e-9 relative). A
    /// product given with a start that the solver's projection moves is not used: the solve is
    /// the one without it, bit for bit.
    #[test]
    fn a_start_product_replaces_the_first_gradients_product() {
        let (pd, b, rows) = floor_qp();
        let settings = MprgpSettings {
            tolerance: 1e-10,
            max_iterations: 5000,
            ..MprgpSettings::default()
        };
        let anchor = vec![Vec3::new(0.1, -0.2, 0.05); b.len()];
        let solve = |start: &[Vec3], product: Option<&[Vec3]>| {
            let counted = CountedProducts(&pd, std::sync::atomic::AtomicUsize::new(0));
            let mut x = start.to_vec();
            let stats = Mprgp::new(settings)
                .solve_about_from(
                    &QpProblem {
                        a: &counted,
                        b: &b,
                        rows: &rows,
                    },
                    &anchor,
                    None,
                    product,
                    &mut x,
                )
                .unwrap();
            (x, stats.iterations, counted.1.into_inner())
        };
        // The origin is feasible: every row asks y >= -0.49.
        let feasible = vec![Vec3::zeros(); b.len()];
        let offset: Vec<Vec3> = feasible.iter().zip(&anchor).map(|(x, y)| x - y).collect();
        let mut product = vec![Vec3::zeros(); b.len()];
        pd.apply(&offset, &mut product);
        let (plain, plain_its, plain_products) = solve(&feasible, None);
        let (given, given_its, given_products) = solve(&feasible, Some(&product));
        assert_eq!(given_products + 1, plain_products);
        assert_eq!(given_its, plain_its);
        let scale = plain.iter().map(|v| v.amax()).fold(0.0, f64::max);
        let gap = plain
            .iter()
            .zip(&given)
            .map(|(a, b)| (a - b).amax())
            .fold(0.0, f64::max);
        assert!(gap < 1e-9 * scale, "{gap} m apart ({scale} m)");
        // Below the floor: projected, so a (wrong) product is ignored.
        let infeasible = vec![Vec3::new(0.0, -0.6, 0.0); b.len()];
        let wrong = vec![Vec3::zeros(); b.len()];
        let (plain, plain_its, plain_products) = solve(&infeasible, None);
        let (given, given_its, given_products) = solve(&infeasible, Some(&wrong));
        assert_eq!(
            (given, given_its, given_products),
            (plain, plain_its, plain_products)
        );
    }

    /// A cube of 4,913 vertices (above the size from which the passes run in parallel) whose
    /// bottom is pushed 1 cm up by its rows, under gravity: the QP of a PD step on the floor.
    fn floor_qp() -> (crate::sim::pd::PdSystem, Vec<Vec3>, Vec<ConstraintRow>) {
        use crate::sim::material::MaterialParams;
        use crate::sim::mesh::TetMesh;
        use crate::sim::pd::{PdSetup, PdSystem};
        let mesh = TetMesh::cuboid(Vec3::repeat(0.5), 16);
        assert!(mesh.vertex_count() >= PARALLEL_PASS);
        let pd = PdSystem::new(
            &mesh,
            PdSetup {
                material: &MaterialParams::RUBBER,
                dt: 1.0 / 60.0,
                pinned: &[],
                attach_stiffness: &[],
                spring: None,
            },
        )
        .unwrap();
        let x0 = mesh.rest_positions();
        let mut b = vec![Vec3::zeros(); x0.len()];
        pd.apply(x0, &mut b);
        for (bi, m) in b.iter_mut().zip(pd.masses()) {
            bi.y -= 9.81 * m;
        }
        let rows = x0
            .iter()
            .enumerate()
            .filter(|(_, p)| p.y < -0.5 + 1e-9)
            .map(|(v, p)| ConstraintRow::single(v as u32, Vec3::y(), p.y + 0.01))
            .collect();
        (pd, b, rows)
    }

    /// The passes over the vectors split into fixed chunks whose sums are added in order: on
    /// one thread or two, the same bits; and the solution satisfies the KKT conditions.
    #[test]
    fn a_large_qp_solves_alike_on_any_number_of_threads() {
        let (pd, b, rows) = floor_qp();
        let problem = QpProblem {
            a: &pd,
            b: &b,
            rows: &rows,
        };
        let settings = MprgpSettings {
            tolerance: 1e-10,
            max_iterations: 5000,
            ..MprgpSettings::default()
        };
        let solve = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut x = vec![Vec3::zeros(); b.len()];
                let stats = Mprgp::new(settings).solve(&problem, &mut x).unwrap();
                assert!(stats.converged, "{stats:?}");
                assert!(stats.cg_steps > 10, "a real solve: {stats:?}");
                x
            })
        };
        let (one, two) = (solve(1), solve(2));
        let bits = |x: &[Vec3]| -> Vec<u64> { x.iter().flatten().map(|c| c.to_bits()).collect() };
        assert_eq!(bits(&one), bits(&two));
        let kkt = kkt_residual(&problem, &one);
        assert!(kkt.relative < 1e-8, "{kkt:?}");
    }

    /// The kept Jacobi-scaled copy of a PD matrix solves the QP that scaling around the plain
    /// product solves; the PD system also preconditions with its coarse space, the plain
    /// products do not.
    #[test]
    fn the_kept_scaled_matrix_solves_as_the_scaled_product_does() {
        let (pd, b, rows) = floor_qp();
        let settings = MprgpSettings {
            tolerance: 1e-11,
            max_iterations: 5000,
            ..MprgpSettings::default()
        };
        let mut kept = vec![Vec3::zeros(); b.len()];
        let mut around = kept.clone();
        Mprgp::new(settings)
            .solve(
                &QpProblem {
                    a: &pd,
                    b: &b,
                    rows: &rows,
                },
                &mut kept,
            )
            .unwrap();
        Mprgp::new(settings)
            .solve(
                &QpProblem {
                    a: &PlainProducts(&pd),
                    b: &b,
                    rows: &rows,
                },
                &mut around,
            )
            .unwrap();
        let scale = around.iter().map(|v| v.amax()).fold(0.0, f64::max);
        let gap = kept
            .iter()
            .zip(&around)
            .map(|(a, b)| (a - b).amax())
            .fold(0.0, f64::max);
        assert!(gap < 1e-9 * scale, "{gap} m apart ({scale} m)");
    }

    /// The floor QP's cube has a coarse space ([`crate::sim::qp::coarse`]): preconditioned
    /// by it, MPRGP reaches the KKT conditions in a fifth fewer iterations at least than with
    /// Jacobi alone (the plain products, which have none; 50 against 70 when written), at the
    /// same solution (the test above). The larger the body, the larger the gap (106 against
    /// 51 iterations per step on the solver bench's 10,648-vertex cube).
    #[test]
    fn the_coarse_space_cuts_the_iterations() {
        let (pd, b, rows) = floor_qp();
        assert!(pd.coarse_space().is_some());
        let settings = MprgpSettings {
            tolerance: 1e-8,
            max_iterations: 5000,
            ..MprgpSettings::default()
        };
        let solve = |problem: &QpProblem<'_, dyn SpdOperator>| {
            let mut x = vec![Vec3::zeros(); b.len()];
            let stats = Mprgp::new(settings).solve(problem, &mut x).unwrap();
            assert!(stats.converged, "{stats:?}");
            let kkt = kkt_residual(problem, &x);
            assert!(kkt.relative < 1e-6, "{kkt:?}");
            stats
        };
        let plain = PlainProducts(&pd);
        let coarse = solve(&QpProblem {
            a: &pd,
            b: &b,
            rows: &rows,
        });
        let jacobi = solve(&QpProblem {
            a: &plain,
            b: &b,
            rows: &rows,
        });
        assert!(
            5 * coarse.iterations < 4 * jacobi.iterations,
            "{coarse:?} against {jacobi:?}"
        );
    }

    #[test]
    fn unconstrained_problem_matches_direct_solve() {
        let (a, b, _) = random_qp(99, 10, 0);
        let mut exact = b.clone();
        let mut direct = a.clone();
        crate::sim::qp::SpdSolve::solve_in_place(&mut direct, &mut exact);
        let mut x = vec![Vec3::zeros(); 10];
        let mut solver = Mprgp::new(MprgpSettings {
            tolerance: 1e-13,
            ..MprgpSettings::default()
        });
        let stats = solver
            .solve(
                &QpProblem {
                    a: &a,
                    b: &b,
                    rows: &[],
                },
                &mut x,
            )
            .unwrap();
        assert!(stats.converged);
        assert_eq!(stats.cg_steps, stats.iterations);
        for (u, v) in x.iter().zip(&exact) {
            assert!((u - v).norm() < 1e-10);
        }
    }

    #[test]
    fn rows_sharing_a_vertex_are_rejected_unless_they_form_a_corner() {
        let (a, b, _) = random_qp(3, 4, 0);
        let mut embedded = ConstraintRow::single(1, Vec3::y(), 0.0);
        embedded.vertices[1] = 2;
        embedded.coeffs[1] = Vec3::y();
        embedded.len = 2;
        let rows = [ConstraintRow::single(1, Vec3::x(), 0.0), embedded];
        let mut x = vec![Vec3::zeros(); 4];
        let err = Mprgp::default()
            .solve(
                &QpProblem {
                    a: &a,
                    b: &b,
                    rows: &rows,
                },
                &mut x,
            )
            .unwrap_err();
        assert_eq!(
            err,
            QpError::CoupledRows {
                first: 0,
                second: 1,
                vertex: 1
            }
        );
    }

    /// Vertices with two or three one-vertex rows (corners): MPRGP must reach the same optimum
    /// as dual PGS, which handles coupled rows as a general LCP.
    #[test]
    fn corner_rows_reach_the_dual_pgs_optimum() {
        for (chain, safeguard) in MprgpSettings::variants() {
            corner_rows_reach_the_dual_pgs_optimum_with(chain, safeguard);
        }
    }

    fn corner_rows_reach_the_dual_pgs_optimum_with(chain: CgChain, safeguard: ExpansionSafeguard) {
        use super::super::pgs::{DualPgs, PgsSettings};
        use super::super::test_problems::Rng;
        for seed in 0..25u64 {
            let n = 6;
            let (a, b, _) = random_qp(seed + 500, n, 0);
            let mut x_free = b.clone();
            let mut solver = a.clone();
            crate::sim::qp::SpdSolve::solve_in_place(&mut solver, &mut x_free);
            let mut rng = Rng(seed);
            let mut rows = Vec::new();
            for (v, xv) in x_free.iter().enumerate() {
                let k = 1 + v % 3;
                for _ in 0..k {
                    let normal = rng.unit();
                    let rhs = normal.dot(xv) + (rng.next_f64() - 0.3) * 0.5;
                    rows.push(ConstraintRow::single(v as u32, normal, rhs));
                }
            }
            let problem = QpProblem {
                a: &a,
                b: &b,
                rows: &rows,
            };
            let mut x = vec![Vec3::zeros(); n];
            let stats = Mprgp::new(MprgpSettings {
                tolerance: 1e-12,
                max_iterations: 5000,
                chain,
                safeguard,
                ..MprgpSettings::default()
            })
            .solve(&problem, &mut x)
            .unwrap();
            assert!(
                stats.converged,
                "{chain:?} {safeguard:?} seed {seed}: {stats:?}"
            );
            let mut x_pgs = vec![Vec3::zeros(); n];
            let pgs = DualPgs::new(PgsSettings {
                tolerance: 1e-13,
                max_sweeps: 400_000,
            })
            .solve(&problem, &mut solver, &mut x_pgs)
            .unwrap();
            assert!(pgs.converged, "seed {seed}: {pgs:?}");
            for (p, q) in x.iter().zip(&x_pgs) {
                assert!(
                    (p - q).norm() < 1e-6 * (1.0 + q.norm()),
                    "seed {seed}: {p:?} vs {q:?}"
                );
            }
            for row in &rows {
                assert!(row.dot(&x) - row.rhs >= -1e-9);
            }
        }
    }

    #[test]
    fn objective_never_increases_across_iterations() {
        // Run with growing iteration caps: the objective of the returned (feasible) iterate
        // must decrease monotonically (MPRGP is a monotone method; a monotone chain returns
        // the projection of its last iterate, whose objective the chain kept from rising).
        for (chain, safeguard) in MprgpSettings::variants() {
            for seed in [7, 8, 9] {
                let (a, b, rows) = random_qp(seed, 12, 5);
                let problem = QpProblem {
                    a: &a,
                    b: &b,
                    rows: &rows,
                };
                let mut last = f64::INFINITY;
                for cap in 0..40 {
                    let mut solver = Mprgp::new(MprgpSettings {
                        tolerance: 0.0,
                        max_iterations: cap,
                        chain,
                        safeguard,
                        ..MprgpSettings::default()
                    });
                    let mut x = vec![Vec3::zeros(); 12];
                    solver.solve(&problem, &mut x).unwrap();
                    for row in &rows {
                        assert!(row.dot(&x) - row.rhs >= -1e-9, "{chain:?} cap {cap}");
                    }
                    let f = kkt_residual(&problem, &x).objective;
                    assert!(
                        f <= last + 1e-10 * last.abs().max(1.0),
                        "{chain:?} {safeguard:?} seed {seed} cap {cap}: {last} -> {f}"
                    );
                    last = f;
                }
            }
        }
    }

    /// The monotone chain is exercised: on QPs whose unconstrained CG steps cross many rows,
    /// it takes infeasible CG steps (and then fewer expansion steps than the feasible chain).
    #[test]
    fn the_monotone_chain_takes_infeasible_steps() {
        let (mut infeasible, mut expansions_feasible, mut expansions_monotone) = (0, 0, 0);
        for seed in 0..40u64 {
            let (a, b, rows) = random_qp(seed + 900, 12, 6);
            let problem = QpProblem {
                a: &a,
                b: &b,
                rows: &rows,
            };
            for chain in [CgChain::Feasible, CgChain::Monotone] {
                let mut x = vec![Vec3::zeros(); 12];
                let stats = Mprgp::new(MprgpSettings {
                    tolerance: 1e-10,
                    max_iterations: 2000,
                    chain,
                    ..MprgpSettings::default()
                })
                .solve(&problem, &mut x)
                .unwrap();
                assert!(stats.converged, "{chain:?} seed {seed}: {stats:?}");
                match chain {
                    CgChain::Feasible => {
                        assert_eq!(stats.infeasible_cg_steps, 0);
                        expansions_feasible += stats.expansion_steps;
                    }
                    CgChain::Monotone => {
                        infeasible += stats.infeasible_cg_steps;
                        expansions_monotone += stats.expansion_steps;
                    }
                }
            }
        }
        assert!(infeasible > 0, "no infeasible CG step in 40 QPs");
        assert!(
            expansions_monotone < expansions_feasible,
            "expansions: monotone {expansions_monotone}, feasible {expansions_feasible}"
        );
    }

    /// The monotone chain's infeasible steps measure `d'A d` through the rows' unknowns'
    /// rows of the product: the same iterates, to the bit, as through whole products.
    #[test]
    fn infeasible_steps_by_rows_match_whole_products() {
        let mut infeasible = 0;
        for seed in 0..40u64 {
            let (a, b, rows) = random_qp(seed + 900, 12, 6);
            let solve = |op: &dyn SpdOperator| {
                let mut x = vec![Vec3::zeros(); 12];
                let stats = Mprgp::new(MprgpSettings {
                    tolerance: 1e-10,
                    max_iterations: 2000,
                    chain: CgChain::Monotone,
                    ..MprgpSettings::default()
                })
                .solve(
                    &QpProblem {
                        a: op,
                        b: &b,
                        rows: &rows,
                    },
                    &mut x,
                )
                .unwrap();
                (stats, x)
            };
            let (by_rows, x_rows) = solve(&a);
            let (whole, x_whole) = solve(&PlainProducts(&a));
            assert_eq!(by_rows, whole, "seed {seed}");
            let bits =
                |x: &[Vec3]| -> Vec<u64> { x.iter().flatten().map(|c| c.to_bits()).collect() };
            assert_eq!(bits(&x_rows), bits(&x_whole), "seed {seed}");
            infeasible += by_rows.infeasible_cg_steps;
        }
        assert!(infeasible > 0, "no infeasible CG step in 40 QPs");
    }
}
