//! The choice of solver, and the state a body keeps for the Newton solver.
//!
//! **Projective Dynamics** (the default, [`crate::sim::pd`]) minimises each implicit Euler
//! step's objective by alternating local projections with solves through one constant,
//! prefactored matrix per body: cheap iterations, many of them, and a material that looks
//! softer than it is where they are cut short (stiff bodies, `E >= 1e6` Pa).
//!
//! **Newton-MPRGP** (Li et al. 2015, eq. 4-8) linearises the
//! finite-element elastic forces ([`crate::sim::fem`]) at each iterate: the Newton matrix
//! `M/h^2 + K(x)` (element Hessians projected to positive semi-definite, plus the attachments'
//! and the grab spring's stiffness) is assembled every iteration, and the step with its contact
//! rows is the paper's QP, solved by MPRGP on the island's Newton matrices.
//! The paper takes one Newton step per time step; by default a second runs where the first
//! left the residual above [`super::WorldSettings::pd_tolerance`]
//! ([`DEFAULT_NEWTON_ITERATIONS`]); more iterations converge to the implicit step's solution
//! quadratically where no contact changes.
//!
//! Everything else in the step is shared: contact detection, islands, the decoupled rows,
//! friction inside the implicit step, restitution, the velocity LCP, settling, sleeping and the
//! guard. Deviations from the paper:
//! - the friction update's compliance goes through the body's Newton factor along the friction
//!   group's two tangents (averaged): the Newton matrix does not act alike on x, y and z, and
//!   the PD matrix's compliance, which counts the volume stiffness `lambda` in every direction,
//!   underestimated the Newton system's shear compliance by about `(2 mu + lambda) / mu` (6x at
//!   nu = 0.4): the friction updates overshot and a 2e5 Pa cube at rest on the floor rocked
//!   at 0.15 m/s, the friction doing +0.78 J of work per step (energy audit);
//! - the restitution response still goes through the PD system's prefactored matrix (the
//!   body's rest stiffness), not the current Newton matrix;
//! - the iterations start from the last state `x`, where eq. 6-7 linearise, not from `x + h v` as
//!   PD's (see the step's `prepare`), and each iteration's step is backtracked on a merit
//!   function (`island::line_search`);
//! - the unconstrained solve corrects against a standing factor of an earlier Newton matrix and
//!   refactors only where the corrections stall (the step's `newton` module);
//! - the contact QPs are not solved in the contact subspace (its cached `A^-1` columns belong
//!   to a constant matrix), always by MPRGP;
//! - strain limits ([`crate::sim::StrainLimitParams`]) are PD constraints: the Newton solver does not
//!   apply them.

use crate::sim::fem::stepping::ElementEvaluation;
use crate::sim::fem::{FemModel, Lame, NewtonSetup, NewtonSetupError, NewtonSystem};
use crate::sim::math::Vec3;
use crate::sim::mesh::TetMesh;

use crate::sim::material::MaterialParams;

/// The solver of a [`super::SoftWorld`] (see the module docs of `sim::world::solver` for the
/// trade-offs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Solver {
    /// Projective Dynamics: a constant prefactored matrix per body, up to
    /// [`super::WorldSettings::pd_iterations`] local/global iterations per step.
    #[default]
    ProjectiveDynamics,
    /// Newton's method on the finite-element energy ([`super::WorldSettings::fem_model`]),
    /// each iteration's contact QP solved by MPRGP (the MPRGP paper's solver): up to
    /// [`super::WorldSettings::newton_iterations`] factorizations per step.
    NewtonMprgp,
}

/// The default [`super::WorldSettings::newton_iterations`]: 2, of which the second runs only
/// where the first left the step's residual above [`super::WorldSettings::pd_tolerance`]
/// (deviation: the MPRGP paper takes one Newton step per time step). Measured with `cargo
/// bench --bench newton` (the 1,000-vertex cube dropped 2 cm, binaries alternated twice): 1.36
/// and 1.06 iterations per step at 2e5 and 1e7 Pa, median residuals 5.3e-4 and 3.1e-4 against
/// 9.0e-4 and 1.0e-3 with one, at the same cost within the noise (5.8 and 5.4-5.7 ms against
/// 6.0-6.6 and 5.3-5.6 ms); a stiff block 1 degree below its friction angle creeps 6e-6 m in
/// a second instead of 8e-4 m (`tests/sim_newton_world.rs`). At rest the second iteration
/// costs one gradient: its elements were evaluated by the first one's line search.
pub const DEFAULT_NEWTON_ITERATIONS: usize = 2;

/// What a body keeps for the Newton solver: its finite-element system and the buffers of an
/// iteration (per free vertex).
#[derive(Debug, Clone)]
pub(crate) struct NewtonState {
    /// Energy, forces and the Newton matrix with its factor.
    pub system: NewtonSystem,
    /// The gradient of the step's objective at the iterate (N).
    pub gradient: Vec<Vec3>,
    /// The free vertices' positions at the iterate (m).
    pub x_free: Vec<Vec3>,
    /// Per free vertex: the diagonal of the Newton matrix's non-elastic terms (N/m).
    pub diagonal: Vec<f64>,
    /// Scratch: a product with the Newton matrix (N).
    pub product: Vec<Vec3>,
    /// Whether the Newton matrix was assembled in this step (the residual of an iterate needs
    /// the previous iteration's matrix).
    pub assembled: bool,
    /// Whether the factor holds a factorization of some earlier Newton matrix, which the
    /// unconstrained solves correct against (see the step's `newton` module).
    pub factor_ready: bool,
    /// The positions (every vertex, m) the system's cached element evaluation is of (empty:
    /// none known).
    pub evaluated_at: Vec<Vec3>,
}

impl NewtonState {
    /// The state of a body of mesh `mesh` and `material`, with `pinned` vertices.
    pub fn new(
        mesh: &TetMesh,
        material: &MaterialParams,
        model: FemModel,
        pinned: &[bool],
    ) -> Result<Self, NewtonSetupError> {
        let system = NewtonSystem::new(
            mesh,
            NewtonSetup {
                model,
                lame: Lame::of(material),
                density: material.density,
                pinned,
            },
        )?;
        let n = system.free_vertices().len();
        Ok(Self {
            system,
            gradient: vec![Vec3::zeros(); n],
            x_free: vec![Vec3::zeros(); n],
            diagonal: vec![0.0; n],
            product: vec![Vec3::zeros(); n],
            assembled: false,
            factor_ready: false,
            evaluated_at: Vec::new(),
        })
    }

    /// Evaluates the elements at positions `x` (every vertex, m) unless the cached evaluation
    /// is of exactly these positions (the line search's evaluation at the point the island
    /// took, adopted after the iteration: see `island::line_search`).
    pub fn ensure_evaluated(&mut self, x: &[Vec3]) {
        if self.evaluated_at.as_slice() != x {
            self.system.evaluate_elements(x);
            self.evaluated_at.clear();
            self.evaluated_at.extend_from_slice(x);
        }
    }

    /// Makes `evaluation`, taken at positions `x`, the cached one (see
    /// [`NewtonState::ensure_evaluated`]).
    pub fn adopt_evaluation(&mut self, evaluation: &mut ElementEvaluation, x: &[Vec3]) {
        self.system.adopt_evaluation(evaluation);
        self.evaluated_at.clear();
        self.evaluated_at.extend_from_slice(x);
    }
}
