//! One soft body: its state, the edits awaiting a rebuild ([`Rebuild`]), and what every stage
//! asks of it (free vertices, start positions and velocities, freeze, wake, sleep). A leaf: it
//! imports only the leaf types of the world module (its scratch space, `workspace`; the
//! Newton solver's state, `solver`; the report's `FreezeReason`; the energy audit's `kinetic`),
//! never a stage.

use std::sync::Arc;

use super::report::FreezeReason;
use super::solver::{NewtonState, Solver};
use super::workspace::Workspace;
use crate::sim::contact::{DrawnMesh, SurfaceShape};
use crate::sim::embed::EmbeddedPoint;
use crate::sim::fem::{FemModel, Lame};
use crate::sim::material::MaterialParams;
use crate::sim::math::Vec3;
use crate::sim::mesh::TetMesh;
use crate::sim::pd::{PdSetup, PdSystem, PointSpring};

/// An axis-aligned box `(min, max)` (m): a sleeping body's bounds ([`SoftBody::sleep_bounds`]).
pub(crate) type Bounds = (Vec3, Vec3);

/// What must be rebuilt before the next step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Rebuild {
    /// Nothing.
    #[default]
    None,
    /// Values changed (material, attachment stiffness, time step): numeric refactorization.
    Numeric,
    /// The set of pinned vertices changed: new pattern, symbolic and numeric factorization.
    Full,
}

impl Rebuild {
    /// The larger of two rebuilds: `Full` over `Numeric` over `None`.
    pub(crate) fn max_with(self, other: Self) -> Self {
        match (self, other) {
            (Rebuild::Full, _) | (_, Rebuild::Full) => Rebuild::Full,
            (Rebuild::Numeric, _) | (_, Rebuild::Numeric) => Rebuild::Numeric,
            _ => Rebuild::None,
        }
    }
}

/// The points of a body with `vertex_count` vertices that collide with obstacles: `proxies`
/// first (so a proxy's index is its collider index), then every vertex no proxy is exactly.
///
/// These are the obstacle colliders only: soft-soft contact takes the tet mesh's surface
/// vertices against the other body's boundary triangles, whatever the proxies
/// ([`crate::sim::contact::soft`]). Interior vertices collide with obstacles so that a soft
/// body whose surface layer is crushed or inverted on impact (a jelly landing faster than its
/// wave speed) cannot pass its inside through the obstacle and end below the floor. Their rows
/// are single-vertex rows like a vertex proxy's.
pub(crate) fn collision_points(
    vertex_count: usize,
    proxies: &[EmbeddedPoint],
) -> Vec<EmbeddedPoint> {
    let mut is_proxy = vec![false; vertex_count];
    for p in proxies {
        if p.weights[1..].iter().all(|&w| w == 0.0)
            && p.weights[0] == 1.0
            && let Some(flag) = is_proxy.get_mut(p.vertices[0] as usize)
        {
            *flag = true;
        }
    }
    let others: Vec<u32> = (0..vertex_count as u32)
        .filter(|&v| !is_proxy[v as usize])
        .collect();
    listed_collision_points(proxies, &others)
}

/// The proxies, then the listed vertices (see [`super::SoftWorld::set_colliders`]).
pub(crate) fn listed_collision_points(
    proxies: &[EmbeddedPoint],
    vertices: &[u32],
) -> Vec<EmbeddedPoint> {
    let mut out = proxies.to_vec();
    out.extend(vertices.iter().map(|&v| EmbeddedPoint::vertex(v)));
    out
}

/// A body's PD system (its matrix and factor), a function of its mesh, material, pins,
/// attachments, grab spring and time step, built on demand ([`SoftBody::ensure_system`]).
/// Left out of a clone (the clone has none, and builds it before it steps): a
/// [`super::WorldSnapshot`] holds bodies without it, and a restore hands the live body's
/// system back where the factor is the one the snapshot's body had.
#[derive(Debug, Default)]
pub(crate) struct SystemSlot(pub(crate) Option<PdSystem>);

impl Clone for SystemSlot {
    fn clone(&self) -> Self {
        Self(None)
    }
}

impl std::ops::Deref for SystemSlot {
    type Target = Option<PdSystem>;
    fn deref(&self) -> &Option<PdSystem> {
        &self.0
    }
}

impl std::ops::DerefMut for SystemSlot {
    fn deref_mut(&mut self) -> &mut Option<PdSystem> {
        &mut self.0
    }
}

/// A soft body in a [`super::SoftWorld`].
#[derive(Debug)]
pub struct SoftBody {
    pub(crate) mesh: Arc<TetMesh>,
    pub(crate) material: MaterialParams,
    pub(crate) pd: SystemSlot,
    /// The Newton solver's state, with [`super::Solver::NewtonMprgp`] only (built on the first
    /// step with it, and again after every edit that rebuilds or refactors the PD system).
    pub(crate) newton: Option<NewtonState>,
    pub(crate) rebuild: Rebuild,
    pub(crate) x: Vec<Vec3>,
    pub(crate) v: Vec<Vec3>,
    /// Positions at creation (m), for [`super::SoftWorld::reset_body`].
    pub(crate) initial: Vec<Vec3>,
    pub(crate) good_x: Vec<Vec3>,
    pub(crate) good_v: Vec<Vec3>,
    pub(crate) pinned: Vec<bool>,
    pub(crate) attach_k: Vec<f64>,
    /// Target per vertex: pin position for pinned vertices, spring target for attachments.
    pub(crate) targets: Vec<Vec3>,
    pub(crate) proxies: Vec<EmbeddedPoint>,
    /// What collides with obstacles: the proxies, then every vertex that is not a vertex proxy
    /// (interior vertices, and surface vertices where the proxies are embedded points), so
    /// that no part of a body passes through an obstacle (see [`collision_points`]); or the
    /// proxies and a chosen list of vertices ([`super::SoftWorld::set_colliders`]).
    pub(crate) colliders: Vec<EmbeddedPoint>,
    /// Per collider, how far (m) it may go into an obstacle before it collides: empty (none)
    /// unless the body collides by its drawn surface, where the cage vertices have one
    /// ([`super::drawn`]).
    pub(crate) collider_slack: Vec<f64>,
    /// The triangle mesh the body touches other bodies with, where it is drawn with one
    /// ([`super::SoftWorld::set_drawn_mesh`]); `None`: its tet mesh's boundary.
    pub(crate) drawn: Option<Arc<DrawnMesh>>,
    /// Bodies sharing a group never collide with each other (the soft regions of one
    /// character); `None` collides with every body.
    pub(crate) collision_group: Option<u64>,
    /// The grab spring, if the body is held.
    pub(crate) grab: Option<PointSpring>,
    /// How long the last rebuild or refactorization took.
    pub(crate) last_refactor: Option<std::time::Duration>,
    pub(crate) frozen: Option<FreezeReason>,
    /// How long (s) the body's rigid motion has been slower than the settling speed.
    pub(crate) slow_for: f64,
    /// Whether the body sleeps: the step skips it until something wakes it
    /// ([`super::sleeping`]).
    pub(crate) asleep: bool,
    /// How long (s) the vertices have stayed within the sleeping bounds of their places in
    /// [`SoftBody::still_anchor`] ([`super::sleeping`]).
    pub(crate) still_for: f64,
    /// Where the vertices were (m) when the body's present rest window began (empty: none
    /// began yet).
    pub(crate) still_anchor: Vec<Vec3>,
    /// Bounds of a sleeping body (m), padded by the contact margin.
    pub(crate) sleep_bounds: Bounds,
    /// Transitions not yet reported in a [`super::StepReport`]: (fell asleep, woke).
    pub(crate) sleep_events: (bool, bool),
    /// Statistics of the last step and the reason if that step froze the body.
    pub(crate) last_step: (super::report::BodyStepStats, Option<FreezeReason>),
    pub(crate) ws: Workspace,
}

/// Field by field, so that `clone_from` reuses the body's buffers instead of allocating them
/// again: its state (`SoftBody::copy_state_from`) and its scratch. The PD system is left out
/// as `SystemSlot` says.
impl Clone for SoftBody {
    fn clone(&self) -> Self {
        let mut out = Self::new(self.mesh.clone(), self.material, Vec::new());
        out.clone_from(self);
        out
    }

    fn clone_from(&mut self, source: &Self) {
        self.copy_state_from(source);
        self.pd = SystemSlot(None);
        self.ws.clone_from(&source.ws);
    }
}

impl SoftBody {
    /// A body of `source`'s mesh and material with nothing else of it yet: the kept body of a
    /// world snapshot before its first [`SoftBody::copy_state_from`].
    pub(crate) fn empty_like(source: &Self) -> Self {
        Self::new(source.mesh.clone(), source.material, Vec::new())
    }

    /// Everything of `source` a later step reads, into `self` (its buffers reused; no
    /// allocation once `self` has held a body of the same size): a world snapshot's copy and a
    /// restore. Left out: the PD system (see [`SystemSlot`]) and the step's scratch
    /// ([`Workspace::copy_state_from`]).
    pub(crate) fn copy_state_from(&mut self, source: &Self) {
        let Self {
            mesh,
            material,
            pd: _,
            newton,
            rebuild,
            x,
            v,
            initial,
            good_x,
            good_v,
            pinned,
            attach_k,
            targets,
            proxies,
            colliders,
            collider_slack,
            drawn,
            collision_group,
            grab,
            last_refactor,
            frozen,
            slow_for,
            asleep,
            still_for,
            still_anchor,
            sleep_bounds,
            sleep_events,
            last_step,
            ws,
        } = source;
        self.mesh.clone_from(mesh);
        self.material = *material;
        self.newton.clone_from(newton);
        self.rebuild = *rebuild;
        self.x.clone_from(x);
        self.v.clone_from(v);
        self.initial.clone_from(initial);
        self.good_x.clone_from(good_x);
        self.good_v.clone_from(good_v);
        self.pinned.clone_from(pinned);
        self.attach_k.clone_from(attach_k);
        self.targets.clone_from(targets);
        self.proxies.clone_from(proxies);
        self.colliders.clone_from(colliders);
        self.collider_slack.clone_from(collider_slack);
        self.drawn.clone_from(drawn);
        self.collision_group = *collision_group;
        self.grab = *grab;
        self.last_refactor = *last_refactor;
        self.frozen.clone_from(frozen);
        self.slow_for = *slow_for;
        self.asleep = *asleep;
        self.still_for = *still_for;
        self.still_anchor.clone_from(still_anchor);
        self.sleep_bounds = *sleep_bounds;
        self.sleep_events = *sleep_events;
        self.last_step.clone_from(last_step);
        self.ws.copy_state_from(ws);
    }
}

impl SoftBody {
    /// The surface the body touches other bodies with: its drawn mesh, or its tet mesh's
    /// boundary ([`crate::sim::contact::surface_shape`]).
    pub(crate) fn contact_shape(&self) -> SurfaceShape<'_> {
        match &self.drawn {
            Some(d) => SurfaceShape::Drawn(d),
            None => SurfaceShape::Tet(&self.mesh),
        }
    }

    /// The position (m) of surface point `i` (a soft contact's vertex or triangle corner) at
    /// vertex positions `x` (m).
    #[inline]
    pub(crate) fn surface_point(&self, i: u32, x: &[Vec3]) -> Vec3 {
        match &self.drawn {
            Some(d) => d.points()[i as usize].position(x),
            None => x[i as usize],
        }
    }

    /// The `(vertex, weight)` terms of surface point `i`: the vertex itself with weight 1 on a
    /// tet surface, the drawn point's tet vertices with its weights (those of weight 0 left
    /// out) on a drawn one.
    #[inline]
    pub(crate) fn surface_point_terms(&self, i: u32) -> ([(u32, f64); 4], usize) {
        match &self.drawn {
            Some(d) => {
                let p = &d.points()[i as usize];
                let mut out = ([(0, 0.0); 4], 0);
                for (&v, &w) in p.vertices.iter().zip(&p.weights) {
                    if w != 0.0 {
                        out.0[out.1] = (v, w);
                        out.1 += 1;
                    }
                }
                out
            }
            None => ([(i, 1.0), (0, 0.0), (0, 0.0), (0, 0.0)], 1),
        }
    }
}

impl SoftBody {
    pub(crate) fn new(mesh: Arc<TetMesh>, material: MaterialParams, positions: Vec<Vec3>) -> Self {
        let n = mesh.vertex_count();
        let proxies: Vec<EmbeddedPoint> = mesh
            .surface_vertices()
            .iter()
            .map(|&v| EmbeddedPoint::vertex(v))
            .collect();
        let colliders = collision_points(n, &proxies);
        Self {
            mesh,
            material,
            pd: SystemSlot(None),
            newton: None,
            rebuild: Rebuild::Full,
            good_x: positions.clone(),
            initial: positions.clone(),
            good_v: vec![Vec3::zeros(); n],
            x: positions,
            v: vec![Vec3::zeros(); n],
            pinned: vec![false; n],
            attach_k: vec![0.0; n],
            targets: vec![Vec3::zeros(); n],
            proxies,
            colliders,
            collider_slack: Vec::new(),
            drawn: None,
            collision_group: None,
            grab: None,
            last_refactor: None,
            frozen: None,
            slow_for: 0.0,
            asleep: false,
            still_for: 0.0,
            still_anchor: Vec::new(),
            sleep_bounds: (Vec3::zeros(), Vec3::zeros()),
            sleep_events: (false, false),
            last_step: Default::default(),
            ws: Workspace::default(),
        }
    }

    /// Builds or refactors the PD system if an edit asked for it; whether it did.
    pub(crate) fn ensure_system(&mut self, dt: f64) -> Result<bool, FreezeReason> {
        let dt_changed = self.pd.as_ref().is_some_and(|pd| pd.dt() != dt);
        let needs = match (self.rebuild, self.pd.is_some(), dt_changed) {
            (Rebuild::Full, _, _) | (_, false, _) => Rebuild::Full,
            (Rebuild::Numeric, true, _) | (Rebuild::None, true, true) => Rebuild::Numeric,
            (Rebuild::None, true, false) => Rebuild::None,
        };
        match needs {
            Rebuild::None => return Ok(false),
            Rebuild::Numeric => {
                let pd = self
                    .pd
                    .as_mut()
                    .ok_or(FreezeReason::Factorization("missing system".into()))?;
                // Material, attachment stiffness and dt only change values: refill in place
                // and refactor numerically.
                pd.set_attachment_stiffness(&self.attach_k);
                pd.set_point_spring(self.grab);
                pd.set_material(&self.mesh, &self.material, dt)
                    .map_err(|e| FreezeReason::Factorization(e.to_string()))?;
            }
            Rebuild::Full => {
                let pd = PdSystem::new(
                    &self.mesh,
                    PdSetup {
                        material: &self.material,
                        dt,
                        pinned: &self.pinned,
                        attach_stiffness: &self.attach_k,
                        spring: self.grab.as_ref(),
                    },
                )
                .map_err(|e| FreezeReason::Factorization(e.to_string()))?;
                *self.pd = Some(pd);
                self.localize_again();
            }
        }
        self.rebuild = Rebuild::None;
        Ok(true)
    }

    /// Whether the body's system is localized to the region its state keeps
    /// (`Workspace::prone_vertices`), or to none where it keeps none.
    pub(crate) fn localized_as_kept(&self) -> bool {
        let Some(pd) = self.pd.0.as_ref() else {
            return true;
        };
        match pd.prone() {
            None => self.ws.prone_vertices.is_empty(),
            Some(prone) => {
                let free = pd.free_vertices();
                prone.vertices().len() == self.ws.prone_vertices.len()
                    && prone
                        .vertices()
                        .iter()
                        .zip(&self.ws.prone_vertices)
                        .all(|(&d, &v)| free[d as usize] == v)
            }
        }
    }

    /// Orders the collision-prone region the body's state keeps (`Workspace::prone_vertices`,
    /// mesh vertices) last in a newly built system's factor, as it was before the rebuild (a
    /// restored snapshot's body, say), so that its solves are those of the body it replaces.
    /// A region that no longer fits (pins changed) is dropped.
    fn localize_again(&mut self) {
        let Some(pd) = self.pd.0.as_mut() else {
            return;
        };
        if self.ws.prone_vertices.is_empty() {
            return;
        }
        let dof = pd.dof_map();
        let region: Vec<u32> = self
            .ws
            .prone_vertices
            .iter()
            .filter_map(|&v| dof.get(v as usize).copied())
            .filter(|&d| d != crate::sim::pd::PINNED)
            .collect();
        if region.len() != self.ws.prone_vertices.len() || pd.localize(region).is_err() {
            self.ws.prone_vertices.clear();
        }
    }

    /// Builds, keeps or drops the Newton solver's state for `solver` (with `model`): built where
    /// missing or where `rebuilt` (the PD system was just rebuilt or refactored: pins,
    /// material or time step changed), its model updated in place otherwise.
    pub(crate) fn ensure_newton(
        &mut self,
        solver: Solver,
        model: FemModel,
        rebuilt: bool,
    ) -> Result<(), FreezeReason> {
        if solver != Solver::NewtonMprgp {
            self.newton = None;
            return Ok(());
        }
        match &mut self.newton {
            Some(state) if !rebuilt => {
                let lame = Lame::of(&self.material);
                if state.system.model() != (model, lame) {
                    state.system.set_model(model, lame);
                    // The cached evaluation is of the old model.
                    state.evaluated_at.clear();
                }
            }
            _ => {
                let state = NewtonState::new(&self.mesh, &self.material, model, &self.pinned)
                    .map_err(|e| FreezeReason::Factorization(e.to_string()))?;
                self.newton = Some(state);
            }
        }
        Ok(())
    }

    /// The elastic energy (J) of positions `x` under the solver's model: the Newton solver's
    /// finite-element energy where it runs, else the PD energy (0 before the first step).
    pub(crate) fn elastic_energy(&self, x: &[Vec3]) -> f64 {
        match (&self.newton, self.pd.as_ref()) {
            (Some(newton), _) => newton.system.elastic_energy_at(x),
            (None, Some(pd)) => pd.elastic_energy(x),
            (None, None) => 0.0,
        }
    }

    /// Restores the last good state and freezes the body.
    pub(crate) fn freeze(&mut self, reason: FreezeReason) {
        self.x.copy_from_slice(&self.good_x);
        self.v.copy_from_slice(&self.good_v);
        // The SVD warm-start frames may hold the failed step's values.
        self.ws.frames.reset();
        self.frozen = Some(reason);
    }

    /// Number of free (unpinned) vertices: the body's unknowns in its island's QP.
    pub(crate) fn free_count(&self) -> usize {
        self.pd.as_ref().map_or(0, |pd| pd.free_vertices().len())
    }

    /// Whether the body does not move this step: frozen or asleep. Others collide with a frozen
    /// body as with an obstacle; nothing awake reaches a sleeping one.
    pub(crate) fn is_static(&self) -> bool {
        self.frozen.is_some() || self.asleep
    }

    /// Wakes the body if it sleeps, and restarts its rest clock either way.
    pub(crate) fn wake(&mut self) {
        if self.asleep {
            self.asleep = false;
            self.sleep_events.1 = true;
            // The friction it slept with is stale.
            self.ws.friction.clear();
        }
        self.still_for = 0.0;
        self.still_anchor.clear();
    }

    /// Puts the body to sleep where it is, at zero velocity; its bounds are padded by
    /// `margin` (m).
    pub(crate) fn fall_asleep(&mut self, margin: f64) {
        if let (Some(audit), Some(pd)) = (&mut self.last_step.0.energy, self.pd.as_ref()) {
            audit.sleep = -super::audit::kinetic(pd.masses(), &self.v);
        }
        self.asleep = true;
        self.sleep_events.0 = true;
        self.still_for = 0.0;
        self.still_anchor.clear();
        self.v.iter_mut().for_each(|v| *v = Vec3::zeros());
        self.good_v.iter_mut().for_each(|v| *v = Vec3::zeros());
        let (lo, hi) = crate::sim::mesh::bounds(&self.x);
        self.sleep_bounds = (lo - Vec3::repeat(margin), hi + Vec3::repeat(margin));
    }

    /// Where the vertices started the step (m); a frozen or sleeping body stays where it is.
    pub(crate) fn start_positions(&self) -> &[Vec3] {
        if self.is_static() {
            &self.x
        } else {
            &self.ws.x_start
        }
    }

    /// Where `vertex` started the step (m); a frozen or sleeping body stays where it is.
    pub(crate) fn start_position(&self, vertex: usize) -> Vec3 {
        if self.is_static() {
            self.x[vertex]
        } else {
            self.ws.x_start[vertex]
        }
    }

    /// The velocity of `vertex` at the start of the step (m/s); a frozen or sleeping body does not move.
    pub(crate) fn start_velocity(&self, vertex: usize) -> Vec3 {
        if self.is_static() {
            Vec3::zeros()
        } else {
            self.ws.v_start[vertex]
        }
    }

    /// The velocity of `vertex` now (m/s); a frozen or sleeping body does not move.
    pub(crate) fn velocity(&self, vertex: usize) -> Vec3 {
        if self.is_static() {
            Vec3::zeros()
        } else {
            self.v[vertex]
        }
    }

    /// Total mass (kg) with the current material.
    pub(crate) fn masses(&self) -> Vec<f64> {
        self.mesh.lumped_masses(self.material.density)
    }
}
