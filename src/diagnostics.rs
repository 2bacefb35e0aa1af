//! Solver statistics of the last fixed step, as a resource and as Bevy diagnostics.

use bevy::diagnostic::DiagnosticPath;
use bevy::prelude::{Reflect, ReflectResource, Resource};

use crate::sim::StepReport;

/// Wall time of the last step (ms).
pub const STEP_TIME: DiagnosticPath = DiagnosticPath::const_new("deformable/step_ms");
/// MPRGP iterations of the last step.
pub const MPRGP_ITERATIONS: DiagnosticPath =
    DiagnosticPath::const_new("deformable/mprgp_iterations");
/// Contact constraints of the last step.
pub const CONSTRAINTS: DiagnosticPath = DiagnosticPath::const_new("deformable/constraints");
/// Relative KKT residual of the last step's contact QPs.
pub const KKT_RESIDUAL: DiagnosticPath = DiagnosticPath::const_new("deformable/kkt_residual");
/// Contact regions of the last step's velocity LCP.
pub const CONTACT_REGIONS: DiagnosticPath = DiagnosticPath::const_new("deformable/contact_regions");
/// LCP iterations (projected CG plus Gauss-Seidel sweeps, summed over regions) of the last step.
pub const LCP_ITERATIONS: DiagnosticPath = DiagnosticPath::const_new("deformable/lcp_iterations");
/// Largest natural-map residual (m/s) of the last step's contact LCP.
pub const LCP_RESIDUAL: DiagnosticPath = DiagnosticPath::const_new("deformable/lcp_residual");

/// What the last fixed step did (the latest [`StepReport`] in Reflect-friendly form).
#[derive(Resource, Reflect, Debug, Clone, Default, PartialEq)]
#[reflect(Resource)]
pub struct DeformableDiagnostics {
    /// Wall time of the step (ms).
    pub step_ms: f64,
    /// Wall time of the cloths' steps after it (ms; [`crate::cloth`]).
    pub cloth_ms: f64,
    /// Time in PD local steps, summed over bodies (ms).
    pub local_ms: f64,
    /// Time in PD global steps and MPRGP, summed over bodies (ms).
    pub global_ms: f64,
    /// Time in contact detection and the velocity update, summed over bodies (ms).
    pub contact_ms: f64,
    /// Time in contact detection alone (obstacles, soft-soft, re-detection), summed over
    /// bodies (ms).
    pub detect_ms: f64,
    /// Time writing the bodies back to the ECS: render points after the last step plus the
    /// last frame's interpolated meshes (ms).
    pub writeback_ms: f64,
    /// Wall time of the soft skins' write-back into their skinned meshes this frame (ms).
    pub skin_ms: f64,
    /// Time in the velocity-level contact LCP: restitution and friction (ms).
    pub lcp_ms: f64,
    /// Time refactoring after edits (ms).
    pub refactor_ms: f64,
    /// PD iterations, summed over bodies.
    pub pd_iterations: usize,
    /// Largest relative residual of the PD iterations' last measured iterate (see
    /// [`crate::sim::BodyStepStats::pd_residual`]).
    pub pd_residual: f64,
    /// MPRGP iterations, summed over bodies.
    pub mprgp_iterations: usize,
    /// Contact QPs solved in the contact subspace instead of by MPRGP.
    pub subspace_solves: usize,
    /// Share of MPRGP iterations that were CG steps.
    pub cg_share: f64,
    /// Contact constraints.
    pub constraints: usize,
    /// Active contact constraints.
    pub active_constraints: usize,
    /// Largest relative KKT residual of the contact QPs.
    pub kkt_residual: f64,
    /// Deepest penetration (m): a proxy into an obstacle, or a surface vertex into a body.
    pub max_penetration: f64,
    /// Soft-soft contacts (vertex against triangle, self-collisions included).
    pub soft_contacts: usize,
    /// Islands: groups of touching bodies solved together (a lone body is one).
    pub islands: usize,
    /// Bodies in the largest island.
    pub largest_island: usize,
    /// Contact regions of the velocity LCP.
    pub contact_regions: usize,
    /// Contacts in the largest region.
    pub largest_region: usize,
    /// LCP iterations: projected CG plus Gauss-Seidel sweeps, summed over regions.
    pub lcp_iterations: usize,
    /// Largest natural-map residual of the LCP (m/s).
    pub lcp_residual: f64,
    /// Tets with non-positive volume after the step, over all bodies.
    pub inverted_tets: usize,
    /// Bodies simulated.
    pub bodies: usize,
    /// Bodies frozen now (after a numerical failure; a reset unfreezes them).
    pub frozen_bodies: usize,
    /// Bodies whose rigid motion settling damped in the last step.
    pub settling_bodies: usize,
    /// Bodies asleep after the last step (skipped by the step until woken).
    pub sleeping_bodies: usize,
}

impl DeformableDiagnostics {
    pub(crate) fn record(&mut self, r: &StepReport) {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        self.step_ms = ms(r.wall);
        self.local_ms = ms(r.timings.local);
        self.global_ms = ms(r.timings.global + r.timings.mprgp);
        self.contact_ms = ms(r.timings.detect + r.timings.velocity);
        self.detect_ms = ms(r.timings.detect);
        self.inverted_tets = r.inverted_tets;
        self.refactor_ms = ms(r.timings.refactor);
        self.pd_iterations = r.pd_iterations;
        self.pd_residual = r.pd_residual;
        self.mprgp_iterations = r.mprgp_iterations;
        self.cg_share = r.cg_share();
        self.subspace_solves = r.subspace_solves;
        self.constraints = r.constraints;
        self.active_constraints = r.active_constraints;
        self.kkt_residual = r.kkt_residual;
        self.max_penetration = r.max_penetration;
        self.lcp_ms = ms(r.timings.lcp);
        self.soft_contacts = r.soft_contacts;
        self.islands = r.islands;
        self.largest_island = r.largest_island;
        self.settling_bodies = r.settling_bodies;
        self.sleeping_bodies = r.sleeping_bodies;
        self.contact_regions = r.lcp.regions;
        self.largest_region = r.lcp.largest_region;
        self.lcp_iterations = r.lcp.cg_iterations + r.lcp.gs_sweeps;
        self.lcp_residual = r.lcp.residual;
    }
}
