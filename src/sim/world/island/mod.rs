//! Islands: bodies that touch each other share one constrained global step.
//!
//! A soft-soft contact row couples the unknowns of two bodies, so the PD global step of bodies
//! in contact is one QP over all of their free vertices: `A` block diagonal (each body's
//! prefactored PD matrix), `b` the stacked right-hand sides, and the rows of every obstacle and
//! soft-soft contact of the group (eq. (8) of Li et al. 2015). Bodies linked by
//! contacts, directly or through others, form an *island* (union-find at the start of the step);
//! a body touching nothing is an island of one, which is exactly the single-body step. Islands
//! are independent and solved in parallel; the local steps and prefactored solves stay per body.
//!
//! Rows are rebuilt from the island's contacts at every PD iteration, obstacle rows first, each
//! kind deepest first at the current iterate, through the [`RowDecoupler`]. A soft-soft row
//! pairs the surface vertex with one corner of the triangle it touches (see
//! [`Island::build_rows`]). Where the surface vertex is already taken (by an obstacle row, say)
//! the row holds it at its position and constrains
//! the corner alone; the vertex's share of the row's force is applied to it as a force in the
//! next iteration's QP (a lagged reaction), so contact forces stay equal and opposite. A vertex
//! of a frozen body (or a pinned vertex) is a fixed term of the right-hand side: a frozen body is
//! an immovable obstacle for the others. An edge-edge row pairs one free end of each edge and
//! never holds; edge rows compete by depth with the other soft rows, and are frictionless (the
//! vertex contacts around a crossing carry its friction).
//!
//! The QP itself is solved in the contact subspace where the members' `A^-1` columns of its
//! vertices are cached ([`dual`]: exact, a dense LCP over the rows), else by MPRGP, started from
//! the unconstrained solve with the last iteration's contact forces (on a step's first
//! iteration, the normal forces its contacts ended the last step with:
//! [`Island::apply_carried_forces`]) or from the last iterate, whichever has the lower
//! objective. A coupled
//! rigid body the island touches is six more unknowns of the QP in the contact subspace, and
//! held at a pose around an MPRGP solve ([`rigid`]; `crate::sim::world::coupling`).
//!
//! Friction is a force of the same QP, iterated with the PD iterations
//! ([`Island::update_friction`]); restitution a rebound force applied after them
//! ([`Island::restitution_force`]).
//!
//! | File | What it holds |
//! |------|---------------|
//! | `contact.rs` | [`IslandContact`]: a contact the QP constrains, its terms, key and coefficients |
//! | `layout.rs` | [`Layout`]: where each body's unknowns are; [`NO_ISLAND`] |
//! | `matrix.rs` | `IslandMatrix`: the island's `A` as an operator over the members' blocks |
//! | `mod.rs` | [`Island`] (the fields every stage shares), [`Island::begin`], the rows ([`Island::build_rows`]), the constrained global step ([`Island::solve`]), convergence and the Chebyshev and Anderson weights |
//! | `dual.rs` | the QP in the contact subspace, a dense LCP over the rows (`DualState`) |
//! | `warm_start.rs` | the MPRGP solve's starting point (`WarmStart`) |
//! | `rigid.rs` | coupled rigid bodies as unknowns of the QP (`CoupledRigid`) |
//! | `friction.rs` | the friction update after each constrained step (`FrictionUpdate`), and the contact memory carried between steps ([`ContactMemory`]) |
//! | `line_search.rs` | the Newton solver's line search (`LineSearch`) |
//! | `redetect.rs` | re-detection at the iterate (`Redetection`) |
//! | `restitution.rs` | the rebound force after the position solve (`Restitution`) |
//! | `tests.rs` | tests that need the world's internals |

mod contact;
mod dual;
mod friction;
mod layout;
mod line_search;
mod matrix;
mod redetect;
mod restitution;
mod rigid;
#[cfg(test)]
mod tests;
mod warm_start;

pub(crate) use contact::{EDGE_SKIN_SHARE, IslandContact, edge_gap, edge_point, soft_gap};
pub(crate) use dual::MAX_DUAL_ROWS;
pub(crate) use friction::ContactMemory;
pub(crate) use layout::{Layout, NO_ISLAND};
use matrix::IslandMatrix;

use std::time::{Duration, Instant};

use super::body::SoftBody;
use super::coupling::Coupling;
use super::report::FreezeReason;
use super::settings::WorldSettings;
use super::solver::Solver;
use crate::sim::contact::{
    Contact, EdgeContact, ObstacleCollider, RowDecoupler, RowSource, RowSpec, RowTerm, SoftContact,
};
use crate::sim::math::Vec3;
use crate::sim::qp::mprgp::Mprgp;
use crate::sim::qp::{ConstraintRow, ContactForces, MAX_ROW_VERTICES, QpProblem, SpdOperator};
use crate::sim::world::anderson::{AndersonState, MAX_ANDERSON_WINDOW};

/// Depth (m) past which a known obstacle contact at the end of an iteration asks for another
/// one (see [`Island::redetect`]).
pub(crate) const VIOLATION_TOLERANCE: f64 = 1e-4;

/// Where rows are coupled (the QP in the contact subspace), an embedded point's obstacle row
/// is left out while the point is further than this share of the contact margin from the
/// obstacle at the iterate (1 mm at the default margin). A detailed drawn surface puts hundreds
/// of points within the margin of a floor, and the subspace's `S` is rebuilt whenever its rows
/// change: measured on the bunny of `tests/sim_drawn.rs` (180 steps resting, release), 2.1 s
/// with every point in the margin against 1.0 s, and 10.3 s against 3.4 s in a 12-cell cage,
/// at the same residuals and with no drawn point below the floor. A point the iterate brings
/// closer gets its row in the next iteration (and re-detection finds one that crossed).
const COUPLED_GAP_SHARE: f64 = 0.1;

/// The contact QP's tolerance, as a share of the PD iterations' relative residual (see
/// [`Island::solve`]).
const QP_TOLERANCE_SHARE: f64 = 0.25;

/// What the island's constrained global steps did in this step.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IslandStats {
    /// MPRGP iterations, summed over the step's QPs.
    pub mprgp_iterations: usize,
    /// MPRGP's conjugate-gradient steps, summed over the step's QPs.
    pub mprgp_cg_steps: usize,
    /// The last QP's relative KKT residual (0 where solved in the contact subspace).
    pub kkt_residual: f64,
    /// Active rows at the last QP.
    pub active: usize,
    /// Time in the constrained global steps.
    pub mprgp_time: Duration,
    /// Of `mprgp_time`, the QP solver alone (MPRGP or the contact subspace).
    pub qp_time: Duration,
    /// Time in re-detection.
    pub detect_time: Duration,
    /// Constrained steps solved in the contact subspace ([`dual`]) instead of by MPRGP.
    pub subspace_solves: usize,
}

/// One island's QP data, reused from step to step: the fields every stage of the island shares
/// (members, contacts and their forces, the unknowns' solution and forces, the rows of the
/// current constrained step, the iterations' progress), and one struct per stage file for what
/// only that stage keeps: the contact subspace (`dual`), the friction update (`friction`),
/// the coupled rigid bodies (`rigid`), the MPRGP warm start (`warm_start`), re-detection
/// (`redetect`), the Newton line search (`line_search`) and restitution (`restitution`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Island {
    /// Member bodies (world indices), increasing.
    pub members: Vec<u32>,
    /// Number of unknowns (free vertices of all members).
    pub unknowns: usize,
    /// Contacts of the step (speculative ones first, then those re-detected at iterates).
    pub contacts: Vec<IslandContact>,
    /// Per contact: its normal force (N) at the last constrained global step (0 without a row).
    pub lambda: Vec<f64>,
    /// Per contact: its restitution coefficient and approach speed; the rebound's weight
    /// ([`restitution`]).
    pub(crate) restitution: restitution::Restitution,
    /// Per contact: its combined friction coefficient.
    pub mu: Vec<f64>,
    /// Per contact: its friction force (N, tangential, on the positive side), iterated with the
    /// PD iterations (see [`Island::update_friction`]).
    pub friction: Vec<Vec3>,
    /// The friction forces per unknown, for the next constrained step.
    friction_force: Vec<Vec3>,
    /// The friction update's groups, per-step memory and scratch ([`Island::update_friction`]).
    friction_update: friction::FrictionUpdate,
    /// PD iterations planned (grows by re-detection up to the step's limit).
    pub iterations: usize,
    /// PD iterations run.
    pub done: usize,
    /// What the island's constrained global steps did in this step.
    pub stats: IslandStats,
    /// Per unknown: the contact, reaction and friction forces of the last iteration, added to
    /// the next unconstrained solve; after the iterations, the restitution force.
    pub force: Vec<Vec3>,
    /// The constrained solution per unknown.
    pub x: Vec<Vec3>,
    /// Per unknown: what the last constrained global step left of its optimality condition,
    /// `A x - b_qp - J' lambda` (N; the stale contact force where it had no rows), from which
    /// the next local step measures the iterate's residual (see the step's `residual` module).
    pub kkt: Vec<Vec3>,
    /// `||grad Phi||` scale of the step, squared and summed over the members (N^2; see the
    /// step's `residual` module), set by the first iteration.
    pub residual_scale2: f64,
    /// The relative residual of the last iterate measured (1 before any: the step's start).
    pub residual: f64,
    /// Whether the iterations stopped on [`WorldSettings::pd_tolerance`].
    pub converged: bool,
    /// Contacts the last re-detection added or found violated (0 before any).
    pub added: usize,
    /// The Chebyshev weight of the current iteration's right-hand sides (1: a plain step).
    pub omega: f64,
    /// Plain or accelerated iterations since the Chebyshev sequence last restarted.
    chebyshev_run: usize,
    /// The relative residual of the iterate before the current one.
    residual_before: f64,
    /// The Anderson history's slots and combination
    /// ([`WorldSettings::anderson_window`]).
    pub anderson: AndersonState,
    /// With the energy audit on: per unknown, the contact forces (rows and held reactions) and
    /// the friction forces the last constrained step solved with (N).
    pub audit_forces: Vec<(Vec3, Vec3)>,
    /// The decoupled rows of the current constrained step ([`Island::build_rows`]).
    rows: Vec<ConstraintRow>,
    /// Per row: its contact's index in [`Island::contacts`].
    row_contact: Vec<u32>,
    /// `(row, unknown, coefficient)` of the terms the rows hold (see [`RowDecoupler`]).
    held: Vec<(u32, u32, Vec3)>,
    /// The held terms' share of the last iteration's contact forces, per unknown: applied as a
    /// force in the next constrained step, so that a held row's force has its reaction.
    reaction: Vec<Vec3>,
    /// `b` of the QP: the PD right-hand side plus the reactions.
    b_qp: Vec<Vec3>,
    /// Per row: its multiplier (N) from the last constrained step.
    row_lambda: Vec<f64>,
    /// Scratch of [`Island::build_rows`]: `(violation, contact)`, in the order rows are built.
    order: Vec<(f64, u32)>,
    /// Builds decoupled rows, each unknown claimed by at most one ([`RowDecoupler`]).
    decoupler: RowDecoupler,
    /// The members' PD right-hand sides per unknown (N), copied in by [`Island::solve`].
    b: Vec<Vec3>,
    /// The MPRGP solve's starting points and the products that choose between them
    /// ([`warm_start`]).
    warm: warm_start::WarmStart,
    /// Per unknown: the index in [`Island::members`] of its body.
    unknown_member: Vec<u32>,
    /// `J' lambda` of the last constrained step, per unknown it touches (N): the contact force
    /// the next unconstrained solve includes.
    row_force: Vec<(u32, Vec3)>,
    /// Per unknown a carried contact touches: the normal forces the last step ended with
    /// (N; see [`Island::warm_start_normal_forces`]).
    carried: Vec<(u32, Vec3)>,
    /// Whether the next unconstrained solve includes the last constrained step's contact
    /// forces ([`Island::force`]) or only the reactions and friction ([`Island::applied`]):
    /// after a solve in the contact subspace, which needs no warm start, it leaves them out.
    pub rows_in_free: bool,
    /// The reactions and friction forces per unknown (N), for an unconstrained solve without
    /// the contact forces.
    pub applied: Vec<Vec3>,
    /// The contact subspace's state ([`dual`]): the kept `S = J A^-1 J'`, its rows' keys, the
    /// dense LCP and its scratch.
    dual: dual::DualState,
    /// `A x - b_qp` per unknown (N) after an MPRGP solve; scratch of the objectives before it.
    gradient: Vec<Vec3>,
    /// The MPRGP solver and its scratch.
    mprgp: Mprgp,
    /// The contact forces recovered from MPRGP's final gradient.
    forces: ContactForces,
    /// Scratch of the Newton solver's line search ([`Island::newton_line_search`]).
    line_search: line_search::LineSearch,
    /// Re-detection's scratch and findings ([`Island::redetect`]).
    redetection: redetect::Redetection,
    /// The coupled rigid bodies the island's contacts touch, and their rows' terms ([`rigid`]).
    coupled: rigid::CoupledRigid,
}

impl Island {
    /// Starts a step once [`Island::members`] is filled: their unknowns and the contacts found
    /// at the start.
    #[allow(clippy::too_many_arguments)]
    pub fn begin(
        &mut self,
        bodies: &[SoftBody],
        obstacles: &[ObstacleCollider],
        soft: impl Iterator<Item = SoftContact>,
        edges: impl Iterator<Item = EdgeContact>,
        memory: &ContactMemory,
        layout: Layout<'_>,
        id: u32,
        settings: &WorldSettings,
        coupling: &Coupling,
        h: f64,
    ) {
        self.unknowns = self
            .members
            .iter()
            .map(|&b| bodies[b as usize].free_count())
            .sum();
        self.contacts.clear();
        for &b in &self.members {
            self.contacts.extend(
                bodies[b as usize]
                    .ws
                    .contacts
                    .iter()
                    .map(|&contact| IslandContact::Obstacle { body: b, contact }),
            );
        }
        self.contacts.extend(soft.map(IslandContact::Soft));
        self.contacts.extend(edges.map(IslandContact::Edge));
        self.lambda.clear();
        self.restitution.coefficient.clear();
        self.restitution.approach.clear();
        self.mu.clear();
        self.friction.clear();
        self.friction_update.local.clear();
        self.friction_update.group_compliance.clear();
        self.friction_update.step_groups.clear();
        self.setup_contacts(0, bodies, obstacles, settings);
        self.begin_rigid(coupling, h);
        self.remember_friction(bodies, memory);
        self.reaction.clear();
        self.reaction.resize(self.unknowns, Vec3::zeros());
        self.b_qp.resize(self.unknowns, Vec3::zeros());
        self.x.resize(self.unknowns, Vec3::zeros());
        self.b.resize(self.unknowns, Vec3::zeros());
        self.warm.x_alt.resize(self.unknowns, Vec3::zeros());
        self.warm.anchor.resize(self.unknowns, Vec3::zeros());
        self.warm.a_anchor.resize(self.unknowns, Vec3::zeros());
        self.warm.step_products = false;
        self.warm.solution_product_kept = false;
        self.unknown_member.clear();
        for (k, &b) in self.members.iter().enumerate() {
            let n = bodies[b as usize].free_count();
            self.unknown_member.extend(std::iter::repeat_n(k as u32, n));
        }
        self.row_force.clear();
        self.rows_in_free = true;
        self.applied.clear();
        self.applied.resize(self.unknowns, Vec3::zeros());
        self.kkt.clear();
        self.kkt.resize(self.unknowns, Vec3::zeros());
        self.residual_scale2 = 0.0;
        self.residual = 1.0;
        self.converged = false;
        self.added = 0;
        self.omega = 1.0;
        self.chebyshev_run = 0;
        self.residual_before = f64::INFINITY;
        self.iterations = settings.iterations();
        self.done = 0;
        self.stats = IslandStats::default();
        self.carried.clear();
        // Newton-MPRGP keeps its cold start: its matrix changes every iteration, and the warm
        // start was not measured with it.
        if settings.solver == Solver::ProjectiveDynamics {
            self.warm_start_normal_forces(bodies, memory, layout, id);
        }
    }

    /// Starts the step's contacts from the normal forces they ended the last step with: each
    /// one's `lambda` (the contact subspace's warm start) and, in [`Island::carried`], its
    /// force `lambda J'` on the island's unknowns, for [`Island::apply_carried_forces`].
    fn warm_start_normal_forces(
        &mut self,
        bodies: &[SoftBody],
        memory: &ContactMemory,
        layout: Layout<'_>,
        id: u32,
    ) {
        for (i, contact) in self.contacts.iter().enumerate() {
            let normal = contact.normal();
            let Some(lambda) = contact
                .key()
                .and_then(|key| memory.normal_force(&key, &normal))
            else {
                continue;
            };
            self.lambda[i] = lambda;
            let (terms, count) = contact.terms(bodies);
            for &(body, vertex, weight) in &terms[..count] {
                if let Some(u) = layout.unknown(id, bodies, body as usize, vertex as usize) {
                    self.carried.push((u, normal * (lambda * weight)));
                }
            }
        }
    }

    /// On the step's first iteration, after the local steps cached the members' columns: the
    /// carried normal forces ([`Island::warm_start_normal_forces`]) join the forces the first
    /// unconstrained solve includes ([`Island::force`]), as every later solve includes the
    /// last iteration's, listed in [`Island::row_force`] as those are. Without them the first
    /// solve lets a resting body fall by `h^2 g`, and where the QP starts there (rather than
    /// at the last iterate, [`Island::solve_by_mprgp`]) it lifts the whole body back: measured
    /// on a 10,648-vertex cube on the floor, 26-35 MPRGP iterations in the first QP of a step,
    /// its correction as large at the top of the cube as at the bottom. Only the QP's starting
    /// point changes, not its solution (measured 3.4e-15 m apart; the test asserts 1e-9 m).
    /// An island whose members have every contact's column (it will solve in the contact
    /// subspace, exactly from any start) leaves them out: there they would only add the f32 correction solve's rounding of their
    /// response and a column lookup per row and force.
    ///
    /// Measured (`cargo bench --bench solver`, MPRGP iterations per step, median): cube_10k
    /// 134 -> 129, cube_40k 159 -> 139; a step of a 343-vertex cube a third of a second
    /// after its landing 22 -> 13 (test). Starting every QP from the unconstrained solution instead of
    /// the better of it and the last iterate was tried with it: 107 and 174, and in `cargo
    /// bench --bench pile`, its crossing sampled every third step, a mean of 7.3 mm against
    /// 5.6 mm before and 4.5 mm with the carried forces alone; not kept.
    pub fn apply_carried_forces(&mut self, bodies: &[SoftBody]) {
        let in_subspace = self
            .members
            .iter()
            .all(|&b| bodies[b as usize].ws.columns_complete == Some(self.contacts.len()));
        if in_subspace {
            return;
        }
        for &(u, f) in &self.carried {
            self.force[u as usize] += f;
        }
        self.row_force.extend_from_slice(&self.carried);
    }

    /// Before an iteration's global steps, with the members' residuals of the current iterate
    /// measured by their local steps: the island's relative residual, and whether the
    /// iterations stop here because it reached [`WorldSettings::pd_tolerance`] (after at least
    /// one constrained step, and not right after re-detection found new contacts).
    pub fn check_convergence(&mut self, bodies: &[SoftBody], settings: &WorldSettings) {
        let (mut residual2, mut scale2) = (0.0, 0.0);
        for &b in &self.members {
            let ws = &bodies[b as usize].ws;
            residual2 += ws.residual2;
            scale2 += ws.residual_scale2;
        }
        if self.done == 0 {
            self.residual_scale2 = scale2;
        }
        self.residual = if self.residual_scale2 > 0.0 {
            (residual2 / self.residual_scale2).sqrt()
        } else if residual2 > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        if settings.pd_tolerance > 0.0
            && self.done > 0
            && self.added == 0
            && self.residual <= settings.pd_tolerance
        {
            self.converged = true;
            self.iterations = self.done;
        }
    }

    /// After [`Island::check_convergence`]: the Chebyshev weight of this iteration's
    /// right-hand sides, `omega_1 = 1`, `omega_2 = 2 / (2 - rho^2)`,
    /// `omega_k = 4 / (4 - rho^2 omega_(k-1))` (Wang 2015, eq. (11)), restarted at 1 where the
    /// residual grew or re-detection changed the contacts.
    pub fn chebyshev_weight(&mut self, settings: &WorldSettings) {
        // Outside `[0, 1)` (or NaN) the weights would not converge to a finite limit: off.
        let rho = settings.chebyshev_rho;
        let rho = if (0.0..1.0).contains(&rho) { rho } else { 0.0 };
        let restart =
            rho == 0.0 || self.done == 0 || self.added > 0 || self.residual > self.residual_before;
        self.chebyshev_run = if restart { 0 } else { self.chebyshev_run + 1 };
        let r2 = rho * rho;
        self.omega = match self.chebyshev_run {
            0 | 1 => 1.0,
            2 => 2.0 / (2.0 - r2),
            _ => 4.0 / (4.0 - r2 * self.omega),
        };
        self.residual_before = self.residual;
    }

    /// After [`Island::check_convergence`], with Anderson acceleration on: where this
    /// iteration's difference goes, the history dropped on the step's first iteration and
    /// where the residual grew or re-detection changed the contacts (the restart rule of
    /// [`Island::chebyshev_weight`]).
    pub fn anderson_begin(&mut self, window: usize) {
        let restart = self.added > 0 || self.residual > self.residual_before;
        self.anderson.begin(self.done == 0, restart, window);
        self.residual_before = self.residual;
    }

    /// The Anderson combination from the members' terms of the normal equations, summed in
    /// member order.
    pub fn anderson_solve(&mut self, bodies: &[SoftBody]) {
        let mut gram = [[0.0; MAX_ANDERSON_WINDOW]; MAX_ANDERSON_WINDOW];
        let mut rhs = [0.0; MAX_ANDERSON_WINDOW];
        let m = self.anderson.count;
        for &b in &self.members {
            let h = &bodies[b as usize].ws.anderson;
            for (row, body_row) in gram.iter_mut().zip(&h.gram).take(m) {
                for (g, b) in row.iter_mut().zip(body_row).take(m) {
                    *g += b;
                }
            }
            for (r, b) in rhs.iter_mut().zip(&h.rhs).take(m) {
                *r += b;
            }
        }
        self.anderson.solve(&gram, &rhs);
    }

    /// Per-contact data of contacts `first..`: zero normal and friction force, restitution
    /// target, friction coefficient.
    fn setup_contacts(
        &mut self,
        first: usize,
        bodies: &[SoftBody],
        obstacles: &[ObstacleCollider],
        settings: &WorldSettings,
    ) {
        for c in &self.contacts[first..] {
            self.lambda.push(0.0);
            let (mu, e) = c.coefficients(bodies, obstacles);
            self.mu.push(mu);
            let approach = restitution::approach_speed(c, bodies, obstacles);
            self.restitution.approach.push(approach);
            // Contacts with a coupled rigid body are inelastic: the rebound pass treats
            // obstacles as immovable, and its reaction would give a light body more than the
            // rebound (energy from nowhere).
            let coupled = matches!(c, IslandContact::Obstacle { contact, .. }
                if obstacles.get(contact.obstacle as usize).is_some_and(|o| o.coupling().is_some()));
            self.restitution.coefficient.push(
                if approach > settings.restitution_threshold && !coupled {
                    e
                } else {
                    0.0
                },
            );
            self.friction.push(Vec3::zeros());
            self.friction_update.local.push(Vec3::zeros());
        }
    }

    /// Whether the island runs another PD iteration.
    pub fn active(&self) -> bool {
        self.done < self.iterations
    }

    /// The island's obstacle contacts, `(body, contact)`, in order.
    pub fn obstacle_contacts(&self) -> impl Iterator<Item = (u32, &Contact)> + '_ {
        self.contacts.iter().filter_map(|c| match c {
            IslandContact::Obstacle { body, contact } => Some((*body, contact)),
            _ => None,
        })
    }

    /// The gap-violation `c - J x` of contact `i` at the bodies' positions (m; positive when
    /// violated).
    fn violation(&self, i: usize, bodies: &[SoftBody], skin: f64) -> f64 {
        match &self.contacts[i] {
            IslandContact::Obstacle { body, contact } => {
                let b = &bodies[*body as usize];
                let p = b.colliders[contact.proxy as usize].position(&b.x);
                contact.normal.dot(&(contact.point - p))
            }
            IslandContact::Soft(c) => {
                let (a, t) = (
                    &bodies[c.vertex_body as usize],
                    &bodies[c.triangle_body as usize],
                );
                skin - soft_gap(c, a, &a.x, t, &t.x)
            }
            IslandContact::Edge(c) => {
                let (a, b) = (&bodies[c.body_a as usize], &bodies[c.body_b as usize]);
                EDGE_SKIN_SHARE * skin - edge_gap(c, a, &a.x, b, &b.x)
            }
        }
    }

    /// Whether every member has the `A^-1` column of each vertex its contacts touch, so that
    /// the QP goes to the contact subspace whatever vertices its rows take (short of the row
    /// limit: [`Island::solve`] then rebuilds the rows decoupled for MPRGP).
    fn columns_for_every_contact(&self, bodies: &[SoftBody]) -> bool {
        self.members
            .iter()
            .all(|&b| bodies[b as usize].ws.columns_complete.is_some())
    }

    /// Decoupled rows of every contact at the bodies' current positions, deepest first. An
    /// obstacle contact is eq. (8)'s row over its proxy's vertices; a soft-soft contact a row
    /// pairing its surface vertex with the triangle corner that carries the contact point (see
    /// the comments inside). With `coupled` (the QP goes to the contact subspace, which takes
    /// any rows), obstacle rows over several vertices may share them
    /// ([`RowDecoupler::reset_with`]), and so may the rows of a drawn surface's points and
    /// triangles ([`RowDecoupler::add_shared`]), each over a drawn point's tet and a triangle
    /// corner's tet.
    ///
    /// Depenetration is limited to `push_out` (m, the most a row may move its contact out of
    /// a penetration it started the step in, [`WorldSettings::max_depenetration_speed`] times
    /// `h`): a row whose contact started inside asks only for `push_out` beyond the start gap,
    /// plus the obstacle's own approach, so that overlapping spawns and teleports separate over
    /// several steps instead of being launched (PhysX's max depenetration velocity).
    #[allow(clippy::too_many_arguments)]
    fn build_rows(
        &mut self,
        id: u32,
        bodies: &[SoftBody],
        obstacles: &[ObstacleCollider],
        layout: Layout<'_>,
        skin: f64,
        push_out: f64,
        h: f64,
        coupled: bool,
        coupled_gap: f64,
    ) {
        self.order.clear();
        for i in 0..self.contacts.len() {
            let v = self.violation(i, bodies, skin);
            self.order.push((v, i as u32));
        }
        // ObstacleCollider rows first, then the soft rows, each deepest first. An obstacle row is the
        // only thing that keeps a vertex out of an immovable obstacle, while a soft row whose
        // vertex is taken holds it and constrains the other body's corner alone: ranked by
        // depth among the soft rows, a vertex pressed by a neighbour into a wall could lose its
        // wall row and end outside (a pile poured into a bucket, `tests/sim_contacts.rs`:
        // 1.1-1.7 mm through a wall or the floor; obstacle rows first: none).
        //
        // Edge rows compete by depth with the vertex-triangle rows. They used to come after
        // every other row unless violated, taking only vertices no vertex row needed: at a
        // stack's overhang, where the creases of two cubes cross between the vertices of their
        // touching faces, the face rows then took the creases' vertices first, and under a
        // hard impact the creases crossed by a fraction of a millimetre (a sleeping
        // three-cube stack hit by a ball, `tests/sim_sleeping.rs`: 9 of 24 runs with starts
        // moved by 1e-9 m, 22 of 24 with the PD tolerance; by depth, 0 of 24 either way). The
        // smaller gap edge rows keep ([`EDGE_SKIN_SHARE`]) still puts the vertex rows of faces
        // resting on faces first.
        let contacts = &self.contacts;
        let soft = |i: u32| !matches!(contacts[i as usize], IslandContact::Obstacle { .. });
        self.order.sort_unstable_by(|a, b| {
            soft(a.1)
                .cmp(&soft(b.1))
                .then(b.0.total_cmp(&a.0))
                .then(a.1.cmp(&b.1))
        });
        self.decoupler.reset_with(self.unknowns, coupled);
        self.rows.clear();
        self.row_contact.clear();
        self.held.clear();
        let mut terms = [RowTerm {
            unknown: None,
            coeff: Vec3::zeros(),
            x: Vec3::zeros(),
            held: false,
        }; MAX_ROW_VERTICES];
        let drawn_side = |c: &SoftContact| {
            bodies[c.vertex_body as usize].drawn.is_some()
                || bodies[c.triangle_body as usize].drawn.is_some()
        };
        let drawn_edges = |c: &EdgeContact| {
            bodies[c.body_a as usize].drawn.is_some() || bodies[c.body_b as usize].drawn.is_some()
        };
        for &(violation, i) in &self.order {
            let (count, rhs, normal, source, hold, shared) = match &self.contacts[i as usize] {
                IslandContact::Obstacle { body, contact } => {
                    let b = &bodies[*body as usize];
                    let proxy = &b.colliders[contact.proxy as usize];
                    // Coupled, an embedded point's row waits until the point comes within
                    // `coupled_gap` of the obstacle (see `COUPLED_GAP_SHARE`).
                    let embedded = proxy.weights[1..].iter().any(|&w| w != 0.0);
                    if coupled && embedded && violation < -coupled_gap {
                        continue;
                    }
                    for (term, (&v, &w)) in terms
                        .iter_mut()
                        .zip(proxy.vertices.iter().zip(&proxy.weights))
                    {
                        *term = RowTerm {
                            unknown: layout.unknown(id, bodies, *body as usize, v as usize),
                            coeff: w * contact.normal,
                            x: b.x[v as usize],
                            held: false,
                        };
                    }
                    // `n . p >= n . point`, or less where the proxy started inside: out by at
                    // most `push_out` plus the obstacle's approach over the step.
                    let n = contact.normal;
                    let start = n.dot(&proxy.position(b.start_positions()));
                    let approach = obstacles
                        .get(contact.obstacle as usize)
                        .map_or(0.0, |o| n.dot(&o.velocity_at(&contact.point)).max(0.0));
                    let rhs = n.dot(&contact.point).min(start + push_out + approach * h);
                    (
                        4,
                        rhs,
                        n,
                        RowSource::Obstacle(contact.obstacle),
                        false,
                        None,
                    )
                }
                IslandContact::Soft(c) if drawn_side(c) => {
                    let (a, t) = (c.vertex_body as usize, c.triangle_body as usize);
                    let (ba, bt) = (&bodies[a], &bodies[t]);
                    let n = c.normal;
                    let start = soft_gap(c, ba, ba.start_positions(), bt, bt.start_positions());
                    let target = skin.min(start + push_out);
                    let corners = c.triangle_vertices;
                    let q: Vec3 = (0..3)
                        .map(|k| c.weights[k] * bt.surface_point(corners[k], &bt.x))
                        .sum();
                    let source = RowSource::Soft {
                        vertex_body: c.vertex_body,
                        triangle_body: c.triangle_body,
                    };
                    if coupled {
                        // The contact subspace takes rows over several embedded points: the
                        // point's tet vertices against those of the triangle's corner of
                        // largest weight, which carries the triangle's point (the offset
                        // `n . (q - corner)` of the present positions on the right-hand side,
                        // refreshed every iteration). Like an embedded obstacle row, it waits
                        // until the point comes within `coupled_gap` of the triangle.
                        if violation < -coupled_gap {
                            continue;
                        }
                        let k = (0..3)
                            .max_by(|&x, &y| c.weights[x].total_cmp(&c.weights[y]))
                            .unwrap_or(0);
                        let (point, pc) = ba.surface_point_terms(c.vertex);
                        let (corner, cc) = bt.surface_point_terms(corners[k]);
                        let count = two_sided_terms(
                            &mut terms,
                            (id, bodies, layout),
                            n,
                            [(a, &point[..pc]), (t, &corner[..cc])],
                        );
                        let rhs = target + n.dot(&(q - bt.surface_point(corners[k], &bt.x)));
                        (count, rhs, n, source, false, Some(pc))
                    } else {
                        // Decoupled, as a tet surface's row below: each side carried by one
                        // vertex, its free vertex of largest weight (the point's: its tet's;
                        // the triangle's: its corners' tets', weights multiplied), the rest of
                        // each side an offset of the present positions on the right-hand side.
                        // Where every vertex of the point is taken, the largest is held; where
                        // every vertex of the triangle is, there is no row this iteration.
                        let (point, pc) = ba.surface_point_terms(c.vertex);
                        let mut triangle = [(0u32, 0.0f64); 12];
                        let mut tc = 0;
                        for (&k, &weight) in corners.iter().zip(&c.weights) {
                            let (corner, cc) = bt.surface_point_terms(k);
                            for &(v, w) in &corner[..cc] {
                                match triangle[..tc].iter_mut().find(|e| e.0 == v) {
                                    Some(e) => e.1 += weight * w,
                                    None => {
                                        triangle[tc] = (v, weight * w);
                                        tc += 1;
                                    }
                                }
                            }
                        }
                        let free = |b: usize, list: &[(u32, f64)]| {
                            list.iter()
                                .filter(|e| e.1 > 1e-12)
                                .filter_map(|&(v, w)| {
                                    let u = layout.unknown(id, bodies, b, v as usize)?;
                                    self.decoupler.is_free(u).then_some((v, w, Some(u)))
                                })
                                .max_by(|x, y| x.1.total_cmp(&y.1))
                        };
                        let Some((vt, _, ut)) = free(t, &triangle[..tc]) else {
                            continue;
                        };
                        let Some((vp, _, up)) = free(a, &point[..pc]).or_else(|| {
                            point[..pc]
                                .iter()
                                .max_by(|x, y| x.1.total_cmp(&y.1))
                                .map(|&(v, w)| (v, w, layout.unknown(id, bodies, a, v as usize)))
                        }) else {
                            continue;
                        };
                        let (xp, xt) = (ba.x[vp as usize], bt.x[vt as usize]);
                        let p = ba.surface_point(c.vertex, &ba.x);
                        terms[0] = RowTerm {
                            unknown: up,
                            coeff: n,
                            x: xp,
                            held: false,
                        };
                        terms[1] = RowTerm {
                            unknown: ut,
                            coeff: -n,
                            x: xt,
                            held: false,
                        };
                        let rhs = target + n.dot(&(q - xt)) - n.dot(&(p - xp));
                        (2, rhs, n, source, true, None)
                    }
                }
                IslandContact::Soft(c) => {
                    // The triangle's point is carried by one of its corners: the free corner
                    // of largest weight, `q`, with the offset `n . (sum_k w_k x_k - x_q)` of
                    // the present positions on the right-hand side (refreshed every PD
                    // iteration). The row `n . (x_p - x_q) >= skin + offset` pairs two vertices
                    // with equal and opposite forces and claims only those two, so face-to-face
                    // contact keeps a row for nearly every vertex while the rows stay
                    // decoupled; where both sides already pair (two bodies each find the
                    // other's face) the second row finds its vertices taken. Without a free
                    // corner the contact has no row in this iteration.
                    let (a, t) = (c.vertex_body as usize, c.triangle_body as usize);
                    let n = c.normal;
                    let p = layout.unknown(id, bodies, a, c.vertex as usize);
                    // A vertex already paired with the other body (found from the other side:
                    // two faces pressed together see each contact twice) needs no second row:
                    // holding it would apply the same force twice.
                    let pair = |s: RowSource| {
                        matches!(s, RowSource::Soft { vertex_body, triangle_body }
                            if vertex_body == c.triangle_body && triangle_body == c.vertex_body)
                    };
                    if p.is_some_and(|p| self.decoupler.sources_at(p).any(pair)) {
                        continue;
                    }
                    terms[0] = RowTerm {
                        unknown: p,
                        coeff: n,
                        x: bodies[a].x[c.vertex as usize],
                        held: false,
                    };
                    let corner = (0..3)
                        .filter(|&k| c.weights[k] > 1e-12)
                        .filter_map(|k| {
                            let u =
                                layout.unknown(id, bodies, t, c.triangle_vertices[k] as usize)?;
                            self.decoupler.is_free(u).then_some((k, u))
                        })
                        .max_by(|x, y| c.weights[x.0].total_cmp(&c.weights[y.0]));
                    match corner {
                        Some((k, u)) => {
                            let xt = |j: usize| bodies[t].x[c.triangle_vertices[j] as usize];
                            let point: Vec3 = (0..3).map(|j| c.weights[j] * xt(j)).sum();
                            terms[1] = RowTerm {
                                unknown: Some(u),
                                coeff: -n,
                                x: xt(k),
                                held: false,
                            };
                            // The gap kept: the skin, or where the vertex started deeper, its
                            // start gap plus `push_out`.
                            let start =
                                c.gap(bodies[a].start_positions(), bodies[t].start_positions());
                            (
                                2,
                                skin.min(start + push_out) + n.dot(&(point - xt(k))),
                                n,
                                RowSource::Soft {
                                    vertex_body: c.vertex_body,
                                    triangle_body: c.triangle_body,
                                },
                                true,
                                None,
                            )
                        }
                        // No free corner: no row in this iteration. Holding the triangle and
                        // applying its share as a lagged force was tried: in a pile of twenty
                        // bodies the lagged forces fed back and blew the pile apart.
                        None => continue,
                    }
                }
                IslandContact::Edge(c) if drawn_edges(c) => {
                    let (a, b) = (c.body_a as usize, c.body_b as usize);
                    let (ba, bb) = (&bodies[a], &bodies[b]);
                    let n = c.normal;
                    let start = edge_gap(c, ba, ba.start_positions(), bb, bb.start_positions());
                    let target = (EDGE_SKIN_SHARE * skin).min(start + push_out);
                    let (qa, qb) = (
                        edge_point(c.edge_a, c.s, ba, &ba.x),
                        edge_point(c.edge_b, c.t, bb, &bb.x),
                    );
                    let source = RowSource::Edge {
                        body_a: c.body_a,
                        body_b: c.body_b,
                    };
                    if coupled {
                        // As a drawn point's row: each edge carried by its end of larger
                        // weight, a drawn point whose tet vertices are the row's terms (the
                        // contact subspace takes rows that share them), the other end's share
                        // an offset of the present positions on the right-hand side. It waits
                        // until the edges come within `coupled_gap`.
                        if violation < -coupled_gap {
                            continue;
                        }
                        let (ea, eb) = (
                            c.edge_a[usize::from(c.s > 0.5)],
                            c.edge_b[usize::from(c.t > 0.5)],
                        );
                        let (end_a, count_a) = ba.surface_point_terms(ea);
                        let (end_b, count_b) = bb.surface_point_terms(eb);
                        let count = two_sided_terms(
                            &mut terms,
                            (id, bodies, layout),
                            n,
                            [(a, &end_a[..count_a]), (b, &end_b[..count_b])],
                        );
                        let (pa, pb) = (ba.surface_point(ea, &ba.x), bb.surface_point(eb, &bb.x));
                        let rhs = target + n.dot(&((qb - pb) - (qa - pa)));
                        (count, rhs, n, source, false, Some(count_a))
                    } else {
                        // Decoupled, as a drawn point's row: each edge carried by its free
                        // vertex of largest weight (its ends' tet vertices, weighted by the
                        // edge parameter), the rest an offset on the right-hand side. Where
                        // either edge has no free vertex the row waits for the next iteration,
                        // as a tet surface's edge row does.
                        let carrier = |body: usize, bd: &SoftBody, edge: [u32; 2], s: f64| {
                            let mut best: Option<(u32, f64, u32)> = None;
                            for (p, share) in [(edge[0], 1.0 - s), (edge[1], s)] {
                                let (end, count) = bd.surface_point_terms(p);
                                for &(v, w) in &end[..count] {
                                    let weight = share * w;
                                    if weight <= 1e-12 || best.is_some_and(|e| e.1 >= weight) {
                                        continue;
                                    }
                                    let Some(u) = layout.unknown(id, bodies, body, v as usize)
                                    else {
                                        continue;
                                    };
                                    if self.decoupler.is_free(u) {
                                        best = Some((v, weight, u));
                                    }
                                }
                            }
                            best.map(|(v, _, u)| (v, u))
                        };
                        let (Some((va, ua)), Some((vb, ub))) =
                            (carrier(a, ba, c.edge_a, c.s), carrier(b, bb, c.edge_b, c.t))
                        else {
                            continue;
                        };
                        let (xa, xb) = (ba.x[va as usize], bb.x[vb as usize]);
                        terms[0] = RowTerm {
                            unknown: Some(ua),
                            coeff: n,
                            x: xa,
                            held: false,
                        };
                        terms[1] = RowTerm {
                            unknown: Some(ub),
                            coeff: -n,
                            x: xb,
                            held: false,
                        };
                        let rhs = target + n.dot(&((qb - xb) - (qa - xa)));
                        (2, rhs, n, source, false, None)
                    }
                }
                IslandContact::Edge(c) => {
                    // Like a vertex-triangle row: one end of each edge carries the edge's
                    // closest point (the nearer end if it is free), and the other end's share is
                    // an offset on the right-hand side, refreshed every PD iteration. Both ends
                    // are taken exclusively; where an edge has no free end the row waits for
                    // the next iteration. Holding a taken end, as vertex rows do, was tried: the
                    // lagged reactions at vertices shared with vertex rows jolted a stack of
                    // cubes sideways on landing.
                    let free_end = |b: u32, e: [u32; 2], u: f64| {
                        let nearer = usize::from(u > 0.5);
                        [nearer, 1 - nearer].into_iter().find_map(|k| {
                            let d = layout.unknown(id, bodies, b as usize, e[k] as usize)?;
                            self.decoupler.is_free(d).then_some((k, d))
                        })
                    };
                    let (Some((ka, da)), Some((kb, db))) = (
                        free_end(c.body_a, c.edge_a, c.s),
                        free_end(c.body_b, c.edge_b, c.t),
                    ) else {
                        continue;
                    };
                    let (xa, xb) = (&bodies[c.body_a as usize].x, &bodies[c.body_b as usize].x);
                    let (pa, pb) = (xa[c.edge_a[ka] as usize], xb[c.edge_b[kb] as usize]);
                    let n = c.normal;
                    terms[0] = RowTerm {
                        unknown: Some(da),
                        coeff: n,
                        x: pa,
                        held: false,
                    };
                    terms[1] = RowTerm {
                        unknown: Some(db),
                        coeff: -n,
                        x: pb,
                        held: false,
                    };
                    // `n . (q_a - q_b) >= target` for the edge points `q`, with the chosen ends
                    // `p` as unknowns: `n . (p_a - p_b) >= target + n . ((q_b - p_b) - (q_a - p_a))`.
                    let offset = n.dot(&((c.point_b(xb) - pb) - (c.point_a(xa) - pa)));
                    let start = c.gap(
                        bodies[c.body_a as usize].start_positions(),
                        bodies[c.body_b as usize].start_positions(),
                    );
                    (
                        2,
                        (EDGE_SKIN_SHARE * skin).min(start + push_out) + offset,
                        n,
                        RowSource::Edge {
                            body_a: c.body_a,
                            body_b: c.body_b,
                        },
                        false,
                        None,
                    )
                }
            };
            let spec = RowSpec {
                rhs,
                normal,
                source,
                hold,
            };
            let admitted = if let Some(key_terms) = shared {
                self.decoupler.add_shared(
                    &terms[..count],
                    key_terms,
                    spec,
                    &mut self.rows,
                    &mut self.held,
                )
            } else {
                self.decoupler
                    .add(&terms[..count], spec, &mut self.rows, &mut self.held)
            };
            if admitted {
                self.row_contact.push(i);
            }
        }
    }

    /// One constrained global step: the QP over the island's unknowns, from the members'
    /// right-hand sides and unconstrained solutions (in their workspaces). Leaves the solution
    /// in [`Island::x`], the contact forces in [`Island::lambda`] and [`Island::force`].
    ///
    /// # Errors
    /// The QP failed (a non-finite value): the island's bodies must be frozen.
    #[allow(clippy::too_many_arguments)]
    pub fn solve(
        &mut self,
        id: u32,
        bodies: &[SoftBody],
        obstacles: &[ObstacleCollider],
        layout: Layout<'_>,
        settings: &WorldSettings,
        coupling: &Coupling,
        h: f64,
    ) -> Result<(), FreezeReason> {
        let t = Instant::now();
        // The forces the unconstrained solves included (see the step's `iterate`).
        let carried = if self.rows_in_free {
            &self.force
        } else {
            &self.applied
        };
        self.warm.rhs_free.resize(self.unknowns, Vec3::zeros());
        let mut iterate_kept = true;
        for &b in &self.members {
            let body = &bodies[b as usize];
            let Some(pd) = body.pd.as_ref() else { continue };
            let o = layout.offset_of[b as usize] as usize;
            let n = pd.free_vertices().len();
            self.b[o..o + n].copy_from_slice(&body.ws.b[..n]);
            self.x[o..o + n].copy_from_slice(&body.ws.x_free[..n]);
            for (d, &vi) in pd.free_vertices().iter().enumerate() {
                let x = body.x[vi as usize];
                iterate_kept &= self.warm.x_alt[o + d] == x;
                self.warm.x_alt[o + d] = x;
                self.warm.anchor[o + d] = body.ws.y[vi as usize];
                self.warm.rhs_free[o + d] = body.ws.b[d] + carried[o + d];
            }
        }
        // The last QP's product holds for the iterate only if the bodies hand back its
        // solution unchanged (see `warm_start`).
        self.warm.solution_product_kept &= iterate_kept;
        let push_out = settings.max_depenetration_speed * h;
        let in_subspace =
            settings.contact_subspace && settings.solver == Solver::ProjectiveDynamics;
        let coupled = in_subspace && self.columns_for_every_contact(bodies);
        self.build_rows(
            id,
            bodies,
            obstacles,
            layout,
            settings.soft_contact_skin,
            push_out,
            h,
            coupled,
            COUPLED_GAP_SHARE * settings.contact_margin,
        );
        self.prepare_rigid_rows(coupling, h);
        for (q, ((b, r), f)) in self
            .b_qp
            .iter_mut()
            .zip(self.b.iter().zip(&self.reaction).zip(&self.friction_force))
        {
            *q = b + r + f;
        }
        self.dual.lambda_prev.clear();
        self.dual.lambda_prev.extend_from_slice(&self.lambda);
        self.lambda.iter_mut().for_each(|l| *l = 0.0);
        if self.rows.is_empty() {
            // The unconstrained solution solved with the last iteration's forces, which no row
            // balances now: all of them are left over.
            let solved_with = if self.rows_in_free {
                &self.force
            } else {
                &self.applied
            };
            self.kkt.copy_from_slice(solved_with);
        }
        self.force.iter_mut().for_each(|f| *f = Vec3::zeros());
        self.reaction.iter_mut().for_each(|f| *f = Vec3::zeros());
        if self.rows.is_empty() {
            if settings.solver == Solver::NewtonMprgp
                && self.newton_line_search(bodies, layout) < 1.0
            {
                // A shortened Newton step: all of `A x - b` is left over.
                self.leftover_at_shortened_step(bodies, layout, false);
            }
            // Nothing touches: no contact force, so no friction either.
            self.audit_forces.clear();
            self.friction.iter_mut().for_each(|f| *f = Vec3::zeros());
            self.friction_force
                .iter_mut()
                .for_each(|f| *f = Vec3::zeros());
            self.friction_update.groups.clear();
            self.row_force.clear();
            self.rigid_untouched();
            self.rows_in_free = true;
            self.stats.mprgp_time += t.elapsed();
            return Ok(());
        }
        // The subspace's columns are of the PD matrix: the Newton solver's matrix changes
        // every iteration.
        let t_qp = Instant::now();
        let subspace = if in_subspace {
            self.solve_in_contact_subspace(bodies, layout)
        } else {
            None
        };
        if subspace.is_none() && coupled {
            // MPRGP needs decoupled rows.
            self.build_rows(
                id,
                bodies,
                obstacles,
                layout,
                settings.soft_contact_skin,
                push_out,
                h,
                false,
                0.0,
            );
            self.prepare_rigid_rows(coupling, h);
        }
        if subspace.is_some() {
            self.stats.subspace_solves += 1;
            self.stats.kkt_residual = 0.0;
            self.stats.active = self.row_lambda.iter().filter(|&&l| l > 0.0).count();
            self.rigid_solved(h);
        } else {
            // Coupled rigid bodies cannot be MPRGP's unknowns (their rows share them): held
            // where they are for this iteration.
            self.hold_rigid();
            self.solve_by_mprgp(bodies, layout, settings)?;
            if self.touches_rigid() {
                let mut diagonal = std::mem::take(&mut self.coupled.diagonal);
                diagonal.resize(self.unknowns, Vec3::zeros());
                IslandMatrix {
                    bodies,
                    members: &self.members,
                    layout,
                    unknowns: self.unknowns,
                }
                .diagonal(&mut diagonal);
                self.rigid_held(h, &diagonal);
                self.coupled.diagonal = diagonal;
            }
        }
        self.stats.qp_time += t_qp.elapsed();
        for (j, row) in self.rows.iter().enumerate() {
            let l = self.row_lambda[j];
            self.lambda[self.row_contact[j] as usize] = l;
            if l > 0.0 {
                row.add_scaled(l, &mut self.force);
            }
        }
        self.row_force.clear();
        for (row, &l) in self.rows.iter().zip(&self.row_lambda) {
            if l > 0.0 {
                self.row_force
                    .extend(row.entries().map(|(u, c)| (u as u32, l * c)));
            }
        }
        let alpha = if settings.solver == Solver::NewtonMprgp {
            self.newton_line_search(bodies, layout)
        } else {
            1.0
        };
        if subspace.is_some() {
            // Solved exactly: no stationarity error left.
            self.kkt.iter_mut().for_each(|k| *k = Vec3::zeros());
        } else if alpha < 1.0 {
            // A shortened Newton step: what is left at the point taken, `A x - b_qp - J' lambda`.
            self.leftover_at_shortened_step(bodies, layout, true);
        } else {
            for (k, (g, f)) in self
                .kkt
                .iter_mut()
                .zip(self.forces.gradient().iter().zip(&self.force))
            {
                *k = g - f;
            }
        }
        if settings.energy_audit || settings.measure_residual {
            // What this QP solved with: its rows' forces plus the applied reactions and
            // friction (`b_qp - b`), before the friction update replaces them.
            self.audit_forces.clear();
            self.audit_forces.extend((0..self.unknowns).map(|u| {
                let friction = self.friction_force[u];
                let applied = self.b_qp[u] - self.b[u];
                (self.force[u] + applied - friction, friction)
            }));
        }
        for &(j, d, coeff) in &self.held {
            let l = self.row_lambda[j as usize];
            if l > 0.0 {
                self.reaction[d as usize] += l * coeff;
            }
        }
        self.update_friction(id, bodies, obstacles, layout, settings, h);
        for (f, (r, fr)) in self
            .force
            .iter_mut()
            .zip(self.reaction.iter().zip(&self.friction_force))
        {
            *f += r + fr;
        }
        self.rows_in_free = subspace.is_none();
        if !self.rows_in_free {
            for (a, (r, fr)) in self
                .applied
                .iter_mut()
                .zip(self.reaction.iter().zip(&self.friction_force))
            {
                *a = r + fr;
            }
            self.row_force.clear();
        }
        self.stats.mprgp_time += t.elapsed();
        Ok(())
    }

    /// [`Island::kkt`] at a point the Newton line search shortened the step to: `A x - b_qp -
    /// J' lambda` with the QP's rows and forces, or `A x - b` (every applied force left over)
    /// without rows.
    fn leftover_at_shortened_step(&mut self, bodies: &[SoftBody], layout: Layout<'_>, rows: bool) {
        let matrix = IslandMatrix {
            bodies,
            members: &self.members,
            layout,
            unknowns: self.unknowns,
        };
        self.gradient.resize(self.unknowns, Vec3::zeros());
        matrix.apply(&self.x, &mut self.gradient);
        let (b, force) = if rows {
            (&self.b_qp, Some(&self.force))
        } else {
            (&self.b, None)
        };
        for (u, (k, (g, b))) in self
            .kkt
            .iter_mut()
            .zip(self.gradient.iter().zip(b))
            .enumerate()
        {
            *k = g - b - force.map_or(Vec3::zeros(), |f| f[u]);
        }
    }

    /// The constrained step by MPRGP, from [`Island::x`] holding `x_free`: the solution into
    /// `x`, the rows' multipliers into `row_lambda`, `A x - b_qp` into the contact-force
    /// buffers' gradient.
    fn solve_by_mprgp(
        &mut self,
        bodies: &[SoftBody],
        layout: Layout<'_>,
        settings: &WorldSettings,
    ) -> Result<(), FreezeReason> {
        // About the inertial prediction, so that the QP's tolerance is relative to the forces
        // that move the bodies, not to where they are (see `Mprgp::solve_about`). The PD
        // matrix and the prediction are the same for every QP of the step: `A y` and the
        // estimate of `||A||` come from its first (the Newton matrix changes every iteration).
        if settings.solver == Solver::NewtonMprgp {
            self.warm.step_products = false;
        }
        if !self.warm.step_products {
            IslandMatrix {
                bodies,
                members: &self.members,
                layout,
                unknowns: self.unknowns,
            }
            .apply(&self.warm.anchor, &mut self.warm.a_anchor);
        }
        // Warm start: the better of the projected unconstrained solution (which already holds
        // the last iteration's contact forces) and the projected previous iterate, with the
        // products the iteration knows where the matrix is the PD one (`warm_start`).
        let reuse = self.products_reusable(bodies);
        let from_iterate = if reuse {
            self.choose_warm_start(bodies, layout)
        } else {
            self.warm.solution_product_kept = false;
            let matrix = IslandMatrix {
                bodies,
                members: &self.members,
                layout,
                unknowns: self.unknowns,
            };
            let f_new = projected_objective(
                &matrix,
                &self.b_qp,
                &self.rows,
                &mut self.x,
                &mut self.gradient,
            );
            let f_old = projected_objective(
                &matrix,
                &self.b_qp,
                &self.rows,
                &mut self.warm.x_alt,
                &mut self.gradient,
            );
            if f_old < f_new {
                self.x.copy_from_slice(&self.warm.x_alt);
            }
            false
        };
        let matrix = IslandMatrix {
            bodies,
            members: &self.members,
            layout,
            unknowns: self.unknowns,
        };
        self.mprgp.settings = settings.mprgp;
        if settings.pd_tolerance > 0.0 {
            // An inexact step: the QP's error kept to a share of what is left of the PD
            // iterations' own, so that it never sets the floor of the residual they stop on.
            self.mprgp.settings.tolerance = settings
                .mprgp
                .tolerance
                .min(QP_TOLERANCE_SHARE * self.residual.max(settings.pd_tolerance));
        }
        let problem = QpProblem {
            a: &matrix,
            b: &self.b_qp,
            rows: &self.rows,
        };
        self.mprgp.reuse_norm_estimate(self.warm.step_products);
        let qp = self
            .mprgp
            .solve_about_from(
                &problem,
                &self.warm.anchor,
                Some(&self.warm.a_anchor),
                from_iterate.then_some(self.warm.a_solution.as_slice()),
                &mut self.x,
            )
            .map_err(|e| FreezeReason::ContactSolve(e.to_string()))?;
        self.warm.step_products = true;
        self.mprgp.final_gradient(&mut self.gradient);
        if reuse {
            let gradient = std::mem::take(&mut self.gradient);
            self.keep_solution_product(&gradient);
            self.gradient = gradient;
        }
        self.forces.compute_from_gradient(
            &self.rows,
            &self.x,
            &mut self.gradient,
            &mut self.row_lambda,
        );
        self.stats.mprgp_iterations += qp.iterations;
        self.stats.mprgp_cg_steps += qp.cg_steps;
        self.stats.kkt_residual = qp.relative_residual;
        self.stats.active = qp.active;
        Ok(())
    }
}

/// Fills `terms` with a coupled row's terms over embedded points, normal `n`: `+w n` for each
/// `(vertex, weight)` of the first side's body (a world index), `-w n` for the second's, each
/// with its unknown in island `id` (none where the vertex is not one); returns how many.
fn two_sided_terms(
    terms: &mut [RowTerm],
    (id, bodies, layout): (u32, &[SoftBody], Layout<'_>),
    n: Vec3,
    sides: [(usize, &[(u32, f64)]); 2],
) -> usize {
    let mut count = 0;
    for ((b, list), sign) in sides.into_iter().zip([1.0, -1.0]) {
        for &(v, w) in list {
            terms[count] = RowTerm {
                unknown: layout.unknown(id, bodies, b, v as usize),
                coeff: (sign * w) * n,
                x: bodies[b].x[v as usize],
                held: false,
            };
            count += 1;
        }
    }
    count
}

/// Projects `x` onto the rows (closed form for decoupled rows) and returns `1/2 x'Ax - b'x`.
fn projected_objective(
    matrix: &impl SpdOperator,
    b: &[Vec3],
    rows: &[ConstraintRow],
    x: &mut [Vec3],
    scratch: &mut Vec<Vec3>,
) -> f64 {
    for row in rows {
        let gap = row.dot(x) - row.rhs;
        if gap < 0.0 {
            row.add_scaled(-gap / row.norm_squared(), x);
        }
    }
    scratch.resize(x.len(), Vec3::zeros());
    matrix.apply(x, scratch);
    x.iter()
        .zip(scratch.iter())
        .zip(b)
        .map(|((xi, lxi), bi)| 0.5 * xi.dot(lxi) - bi.dot(xi))
        .sum()
}
