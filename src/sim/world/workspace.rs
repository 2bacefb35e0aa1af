//! A body's scratch space: the buffers every stage of the step reuses for one body (no
//! allocation once warmed up). A leaf: the stages fill and read these, none is imported here.

use super::anderson::AndersonHistory;
use super::report::FreezeReason;
use crate::sim::contact::{BodyBvh, Contact};
use crate::sim::math::Vec3;

/// Scratch buffers reused every step (no allocation once warmed up). The constrained global
/// step's vectors live in the body's island (`super::island`).
#[derive(Debug, Default)]
pub(crate) struct Workspace {
    pub y: Vec<Vec3>,
    pub x_start: Vec<Vec3>,
    /// Velocities at the start of the step (m/s), for restitution.
    pub v_start: Vec<Vec3>,
    pub contributions: Vec<[Vec3; 4]>,
    /// Per tet: right singular vectors of the last local step (SVD warm start).
    pub frames: crate::sim::local_step::WarmFrames,
    /// The tets' stretches at the step's start, for the strain-rate damping (empty without it).
    pub start_stretches: crate::sim::local_step::StartStretches,
    /// PD right-hand side over the free vertices.
    pub b: Vec<Vec3>,
    /// Unconstrained global solution over the free vertices.
    pub x_free: Vec<Vec3>,
    /// Scratch of the unconstrained solve: the defect `b + f - A x_free`, then its
    /// correction (the step's `unconstrained_solve`).
    pub defect: Vec<Vec3>,
    /// The right-hand side of the previous PD iteration (N), for the iterate's residual.
    pub b_prev: Vec<Vec3>,
    /// The right-hand side of the PD iteration before the previous one (N), the Chebyshev
    /// extrapolation's second point.
    pub b_before: Vec<Vec3>,
    /// This body's share of the Anderson history (the step's `anderson` module).
    pub anderson: AndersonHistory,
    /// The current iterate's residual, squared (N^2; see the step's `residual` module).
    pub residual2: f64,
    /// The step's residual scale, squared (N^2).
    pub residual_scale2: f64,
    /// Cached columns of the body's `A^-1` at the vertices contacts touch, for the contact
    /// QP in the contact subspace; reset whenever the system is refactored.
    pub columns: crate::sim::inverse_columns::InverseColumns,
    /// The number of island contacts at which every column they need was last found cached
    /// in this step (`None`: not yet, or not all fit).
    pub columns_complete: Option<usize>,
    /// The mesh vertices of the collision-prone region the body's factor was last localized
    /// to (`crate::sim::prone`; empty for none), kept with the state so that a rebuilt system
    /// is localized to it again.
    pub prone_vertices: Vec<u32>,
    /// ObstacleCollider contacts found speculatively at the start of the step.
    pub contacts: Vec<Contact>,
    pub proxy_positions: Vec<Vec3>,
    /// Proxy positions at the prediction (speculative detection).
    pub proxy_predictions: Vec<Vec3>,
    /// BVHs over the surface vertices and boundary triangles (soft-soft contact).
    pub bvh: BodyBvh,
    /// Scratch of the BVH fit.
    pub bvh_points: Vec<Vec3>,
    /// Where the body is drawn ([`super::body::SoftBody::drawn`]): its drawn points'
    /// positions (m) where the step's motion starts, where it ends (the prediction), and at
    /// the present iterate; the surface point positions of soft detection.
    pub drawn_start: Vec<Vec3>,
    /// See [`Workspace::drawn_start`].
    pub drawn_end: Vec<Vec3>,
    /// See [`Workspace::drawn_start`].
    pub drawn_now: Vec<Vec3>,
    /// Obstacles touched at the end of the last step (indices, sorted, unique).
    pub touching: Vec<u32>,
    /// Per free vertex: the friction force (N) of the last step's final friction update, which
    /// the next step's first constrained global step applies (empty: none).
    pub friction: Vec<Vec3>,
    /// Why this iteration's Newton matrix did not factor, until the step reads it.
    pub newton_failure: Option<FreezeReason>,
    /// Scratch of the convergence measure ([`super::WorldSettings::measure_residual`]).
    pub residual: ResidualScratch,
}

/// Scratch of the convergence measure (the step's `residual` module), per body.
#[derive(Debug, Default, Clone)]
pub(crate) struct ResidualScratch {
    /// The free vertices' positions (m).
    pub x: Vec<Vec3>,
    /// The right-hand side at them (N).
    pub b: Vec<Vec3>,
    /// The gradient of the objective at them (N).
    pub gradient: Vec<Vec3>,
    /// `||grad Phi||` at the step's first iterate (N).
    pub start: f64,
}

clone_by_field!(Workspace {
    y,
    x_start,
    v_start,
    contributions,
    frames,
    start_stretches,
    b,
    x_free,
    defect,
    b_prev,
    b_before,
    anderson,
    residual2,
    residual_scale2,
    columns,
    columns_complete,
    prone_vertices,
    contacts,
    proxy_positions,
    proxy_predictions,
    bvh,
    bvh_points,
    drawn_start,
    drawn_end,
    drawn_now,
    touching,
    friction,
    newton_failure,
    residual
});

impl Workspace {
    /// The part of `source` a later step reads, into `self` (its buffers reused): a world
    /// snapshot's copy (`super::snapshot`). The rest is scratch that every step writes before
    /// it reads it; for a sleeping body, which the step skips, nothing of it is read either
    /// (detection skips pairs with a sleeping body, and its BVH is fitted again when it wakes).
    pub(crate) fn copy_state_from(&mut self, source: &Self) {
        let Self {
            y: _,
            x_start: _,
            v_start: _,
            contributions: _,
            frames,
            start_stretches: _,
            b: _,
            x_free: _,
            defect: _,
            b_prev: _,
            b_before: _,
            anderson: _,
            residual2,
            residual_scale2,
            columns,
            columns_complete,
            prone_vertices,
            contacts,
            proxy_positions: _,
            proxy_predictions: _,
            bvh: _,
            bvh_points: _,
            drawn_start: _,
            drawn_end: _,
            drawn_now: _,
            touching,
            friction,
            newton_failure,
            residual: _,
        } = source;
        self.frames.clone_from(frames);
        self.residual2 = *residual2;
        self.residual_scale2 = *residual_scale2;
        self.columns.clone_from(columns);
        self.columns_complete = *columns_complete;
        self.prone_vertices.clone_from(prone_vertices);
        self.contacts.clone_from(contacts);
        self.touching.clone_from(touching);
        self.friction.clone_from(friction);
        self.newton_failure.clone_from(newton_failure);
    }
}
