//! One substep of the world (`docs/ARCHITECTURE.md`, the step's phases 2-7):
//!
//! 1. **Predict** (per body, parallel): `y = x + h v + h^2 g`, speculative obstacle contacts
//!    along the predicted motion of every collider (the proxies, and every vertex that is not
//!    one, interior vertices included: a crushed surface layer cannot let the inside through an
//!    obstacle), the surface BVHs fitted over the motion.
//! 2. **Detect soft contacts** (world, the pairs of each first body in parallel, their lists
//!    joined in body order): every pair of bodies whose BVHs overlap, and each body
//!    with itself when self-collision is on ([`crate::sim::contact::soft`]); edge-edge contacts
//!    between creases of two bodies ([`crate::sim::contact::edge_edge`]).
//! 3. **Islands**: bodies linked by soft contacts share one QP ([`super::island`]).
//! 4. **PD iterations**: local steps and prefactored solves per body (parallel); the
//!    constrained global step per island, in the contact subspace or by MPRGP (parallel);
//!    re-detection at the iterate. The iterations stop on [`WorldSettings::pd_tolerance`], and
//!    their right-hand sides are extrapolated by Chebyshev's semi-iterative method
//!    ([`WorldSettings::chebyshev_rho`]; Wang 2015, "A Chebyshev semi-iterative approach for
//!    accelerating projective and position-based dynamics", section 4). Deviation: Wang
//!    extrapolates the iterates; here the right-hand sides are, so that the constrained step
//!    projects the extrapolation and every iterate satisfies the contacts (the same method
//!    where nothing touches, since `x = A^-1 b`), and the sequence restarts where the
//!    residual grows or re-detection changes the contacts, instead of a fixed start delay. A
//!    contact that started the step inside (an overlapping spawn, a teleport) is pushed out by
//!    at most [`WorldSettings::max_depenetration_speed`] times `h` per step, so that it
//!    separates over several steps instead of being launched. With
//!    [`WorldSettings::anderson_window`] set, Anderson acceleration ([`anderson`]) combines the
//!    right-hand sides instead of the Chebyshev weights. With [`Solver::NewtonMprgp`] each
//!    iteration is a Newton iteration instead ([`newton`], `super::solver`): the gradient and
//!    residual at the iterate, then the Newton matrix and the step `b = H x - g` in the places
//!    of the local step and the right-hand side, the island's QP on the Newton matrices, and a
//!    line search on the island's step; no extrapolation.
//! 5. **Respond** (world): velocities `v = (x - x_start) / h`, then the velocity-level contact
//!    LCP of every contact that touches at the end — Signorini and Coulomb friction, region by
//!    region ([`crate::sim::contact::lcp`]), the position-level normal impulse `lambda h` of the
//!    QP counted in the friction bound and, for contacts that do not bounce, also the most it
//!    may take back (a push out of a penetration the step started in must not launch the
//!    body) — whose impulses change the velocities only. The positions stay the QP's: static
//!    friction is held there, by the friction forces of the implicit step
//!    ([`super::island`]); moving the contact vertices by the LCP's friction impulses too, as
//!    an earlier version did, strained the bodies around them every step, and a stack of five
//!    cubes swayed on the energy. Restitution is not in the LCP's `b`
//!    (the paper's eq. (12)) but applied before it through the bodies' prefactored matrices
//!    ([`super::island::Island::restitution_force`]): a velocity-level restitution impulse on
//!    the few contact vertices would hand them the whole body's rebound momentum.
//!
//! 6. **Guard** (per body): deformation damping; settling of slow, supported bodies
//!    ([`super::settling`]); a non-finite state, a runaway speed or energy freezes the body at
//!    its last good state.
//!
//! With [`WorldSettings::energy_audit`] on, each body's energy is measured at the start, after
//! the iterations, and around every velocity phase ([`super::EnergyAudit`]). With
//! [`WorldSettings::measure_residual`] on, the iterations' convergence is measured around them
//! ([`residual`]).

use std::time::{Duration, Instant};

use rayon::prelude::*;

pub(crate) mod anderson;
mod guard;
mod newton;
mod residual;
mod respond;

pub(crate) use residual::ResidualScratch;

pub use respond::ContactPoint;

use super::audit::{EnergyAudit, gravitational, kinetic};
use super::body::SoftBody;
use super::coupling::{Coupling, NOT_COUPLED};
use super::island::{ContactMemory, Island, IslandContact, Layout, NO_ISLAND};
use super::report::{BodyStepStats, FreezeReason};
use super::sleeping::{SleepState, fall_asleep, wake_touched};
use super::{Solver, WorldSettings};
use crate::sim::contact::{
    BodyBvh, ContactLcp, EdgeContact, LcpStats, Obstacle, OverlapScratch, SoftContact, SoftSurface,
    detect_contacts_swept, detect_deep_overlap, detect_edge_contacts, detect_soft_contacts,
    fit_edge_bvh, fit_surface_bvh,
};
use crate::sim::math::{Vec3, all_finite};
use crate::sim::mesh::TetMesh;

/// Extra PD iterations allowed when the last iteration found new penetrations.
const EXTRA_ITERATIONS: usize = 2;

/// World-level buffers of the step, reused (no allocation once warmed up).
#[derive(Debug, Default)]
pub(crate) struct StepState {
    islands: Vec<Island>,
    island_count: usize,
    island_of: Vec<u32>,
    offset_of: Vec<u32>,
    island_size: Vec<u32>,
    parent: Vec<u32>,
    soft_contacts: Vec<SoftContact>,
    edge_contacts: Vec<EdgeContact>,
    /// Per body: the soft detection of its pairs as the first body ([`detect_soft`]).
    detection: Vec<PairDetection>,
    failures: Vec<Option<FreezeReason>>,
    /// Per island: the rebound velocity its contacts lack, then the scale of its response.
    deficits: Vec<Option<f64>>,
    /// Per island: whether one of its bodies is held or carried (none of them settles).
    held: Vec<bool>,
    lcp: ContactLcp,
    /// First global vertex id of each body, plus the total.
    vertex_offsets: Vec<u32>,
    /// Inverse mass (1/kg) per global vertex: 0 for pinned vertices and frozen bodies.
    inv_mass: Vec<f64>,
    /// The contacts of the last velocity LCP, for debug drawing.
    pub points: Vec<ContactPoint>,
    /// Coupled obstacles' state in the substep ([`super::coupling`]).
    coupling: Coupling,
    /// Scratch of [`form_islands`]: per coupled body, the first body touching it, and the
    /// links to the others.
    coupled_first: Vec<u32>,
    coupled_links: Vec<(u32, u32)>,
    /// The contact forces the last step ended with (friction per group and per contact,
    /// normal forces per contact), to start the next step's from.
    contact_memory: ContactMemory,
    /// What the wake pass keeps between steps.
    pub sleep: SleepState,
}

impl StepState {
    /// Island `id` of the last step with the layout of its unknowns (for the island's tests).
    #[cfg(test)]
    pub(crate) fn island(&self, id: usize) -> (&Island, Layout<'_>) {
        let layout = Layout {
            island_of: &self.island_of,
            offset_of: &self.offset_of,
        };
        (&self.islands[id], layout)
    }

    /// Forgets the contact forces of the last step (body or obstacle indices changed).
    pub fn forget_contact_forces(&mut self) {
        self.contact_memory.clear();
    }

    /// Forgets the normal forces of the last step, not its friction (a test's cold start of
    /// the contact QPs).
    #[cfg(test)]
    pub fn forget_normal_forces(&mut self) {
        self.contact_memory.forget_normal_forces();
    }

    /// The last velocity LCP.
    pub fn lcp(&self) -> &ContactLcp {
        &self.lcp
    }
}

/// What [`detect_soft`] finds for the pairs of one first body, with its scratch.
#[derive(Debug, Default)]
struct PairDetection {
    soft: Vec<SoftContact>,
    edges: Vec<EdgeContact>,
    pairs: Vec<(u32, u32)>,
    overlap: OverlapScratch,
}

/// World-level results of one substep.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SubstepSummary {
    pub soft_contacts: usize,
    pub islands: usize,
    pub largest_island: usize,
    pub lcp: LcpStats,
    pub lcp_time: Duration,
    pub soft_penetration: f64,
}

/// Advances every body by `h` seconds.
pub(crate) fn substep(
    bodies: &mut [SoftBody],
    obstacles_mut: &mut [Obstacle],
    settings: &WorldSettings,
    h: f64,
    st: &mut StepState,
) -> SubstepSummary {
    let mut summary = SubstepSummary::default();
    st.coupling.begin(obstacles_mut, h);
    let obstacles = &*obstacles_mut;
    wake_touched(bodies, obstacles, settings, h, &mut st.sleep);
    bodies
        .par_iter_mut()
        .for_each(|b| prepare(b, obstacles, settings, h));
    if settings.soft_contacts {
        detect_soft(bodies, settings, st);
    } else {
        st.soft_contacts.clear();
        st.edge_contacts.clear();
    }
    summary.soft_contacts = st.soft_contacts.len() + st.edge_contacts.len();
    form_islands(bodies, obstacles, settings, h, st);
    summary.islands = st.island_count;
    summary.largest_island = st.island_size.iter().copied().max().unwrap_or(0) as usize;
    if settings.measure_residual {
        residual::measure_start(bodies, st, settings);
    }
    iterate(bodies, obstacles, settings, h, st);
    if settings.measure_residual {
        residual::measure_end(bodies, st);
    }
    summary.soft_penetration = soft_penetration(bodies, st);

    let t = Instant::now();
    bodies.par_iter_mut().for_each(|b| {
        if !b.is_static() {
            for i in 0..b.x.len() {
                b.v[i] = (b.x[i] - b.ws.x_start[i]) / h;
            }
        }
    });
    // Coupled rigid bodies to their end poses and velocities, for the velocity phases.
    if st.coupling.any() {
        st.coupling
            .settle(obstacles_mut, &st.islands[..st.island_count], bodies, h);
    }
    let obstacles = &*obstacles_mut;
    if settings.energy_audit {
        audit_velocity_phase(bodies, settings, AuditMark::Solved);
    }
    respond::restitute(bodies, obstacles, h, st);
    if settings.energy_audit {
        audit_velocity_phase(bodies, settings, AuditMark::Restituted);
    }
    summary.lcp = respond::respond(bodies, obstacles, settings, h, st);
    if settings.energy_audit {
        audit_velocity_phase(bodies, settings, AuditMark::Responded);
    }
    summary.lcp_time = t.elapsed();
    st.coupling.finish(obstacles_mut, h);
    let obstacles = &*obstacles_mut;

    // Settling: a body settles if supported (an obstacle touched, or another body in its
    // island) and nothing in its island is held or carried (a body on a slowly lifted one is
    // carried too).
    st.held.clear();
    st.held.resize(st.island_count, false);
    for (b, &id) in bodies.iter().zip(&st.island_of) {
        if id != NO_ISLAND && guard::held(b, obstacles) {
            st.held[id as usize] = true;
        }
    }
    let failures = &st.failures;
    let island_of = &st.island_of;
    let island_size = &st.island_size;
    let held = &st.held;
    bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
        let (failure, settles) = match island_of[i] {
            NO_ISLAND => (None, false),
            id => {
                let id = id as usize;
                let supported = island_size[id] > 1 || !b.ws.touching.is_empty();
                (failures[id].clone(), supported && !held[id])
            }
        };
        guard::finish(b, obstacles, settings, h, failure, settles);
    });
    fall_asleep(
        bodies,
        &st.islands[..st.island_count],
        obstacles,
        settings,
        h,
    );
    summary
}

/// Where [`audit_velocity_phase`] is called in the step.
#[derive(Clone, Copy)]
enum AuditMark {
    /// After the PD iterations, `v = (x - x_start) / h` set.
    Solved,
    /// After restitution.
    Restituted,
    /// After the velocity LCP.
    Responded,
}

/// The energy audit at the end of the solve and around the velocity phases of restitution and
/// the contact LCP (which change kinetic energy only).
fn audit_velocity_phase(bodies: &mut [SoftBody], settings: &WorldSettings, mark: AuditMark) {
    bodies.par_iter_mut().for_each(|b| {
        let elastic = match mark {
            AuditMark::Solved => b.elastic_energy(&b.x),
            _ => 0.0,
        };
        let SoftBody {
            pd,
            x,
            v,
            frozen,
            last_step,
            ..
        } = b;
        let (Some(pd), None, Some(audit)) = (pd.as_ref(), frozen.as_ref(), &mut last_step.0.energy)
        else {
            return;
        };
        let ke = kinetic(pd.masses(), v);
        match mark {
            AuditMark::Solved => {
                let end = ke + gravitational(pd.masses(), x, &settings.gravity) + elastic;
                audit.solve = end - audit.start;
                audit.restitution = -ke;
            }
            AuditMark::Restituted => {
                audit.restitution += ke;
                audit.lcp = -ke;
            }
            AuditMark::Responded => audit.lcp += ke,
        }
    });
}

/// Phase 1 for one body: guard the input, build or refactor its system, predict, detect
/// obstacle contacts along the motion, fit the BVHs.
fn prepare(body: &mut SoftBody, obstacles: &[Obstacle], settings: &WorldSettings, h: f64) {
    body.last_step = (BodyStepStats::default(), None);
    if body.asleep {
        // Skipped entirely. The obstacles it touched when it fell asleep stay its contacts
        // (`touching_obstacles`, the plugin's contact messages).
        body.last_step.0.asleep = true;
        return;
    }
    body.ws.touching.clear();
    body.ws.columns_complete = None;
    if body.frozen.is_some() {
        // A frozen body stays where it is: others collide with it as with an obstacle.
        if settings.soft_contacts {
            let ws = &mut body.ws;
            fit_soft_trees(
                &mut ws.bvh,
                &mut ws.bvh_points,
                &body.mesh,
                &body.x,
                &body.x,
                settings,
            );
        }
        return;
    }
    if !(all_finite(&body.x) && all_finite(&body.v)) {
        body.freeze(FreezeReason::NonFiniteInput);
        body.last_step.1 = body.frozen.clone();
        return;
    }
    let t = Instant::now();
    let rebuilt = match body.ensure_system(h) {
        Ok(rebuilt) => rebuilt,
        Err(reason) => {
            body.freeze(reason);
            body.last_step.1 = body.frozen.clone();
            return;
        }
    };
    if rebuilt {
        let n = body.free_count();
        body.ws.columns.reset(n, COLUMN_MEMORY_BYTES);
    }
    if let Err(reason) = body.ensure_newton(settings.solver, settings.fem_model, rebuilt) {
        body.freeze(reason);
        body.last_step.1 = body.frozen.clone();
        return;
    }
    if rebuilt {
        body.last_refactor = Some(t.elapsed());
    }
    if let Some(newton) = &mut body.newton {
        newton.assembled = false;
    }
    let elastic = if settings.energy_audit {
        body.elastic_energy(&body.x)
    } else {
        0.0
    };
    let stats = &mut body.last_step.0;
    stats.timings.refactor = t.elapsed();
    let t = Instant::now();
    let SoftBody {
        pd,
        newton,
        x,
        v,
        pinned,
        targets,
        colliders,
        ws,
        mesh,
        ..
    } = body;
    let Some(pd) = pd.as_ref() else { return };
    ws.columns.next_step();
    if settings.energy_audit {
        let m = pd.masses();
        stats.energy = Some(EnergyAudit {
            start: kinetic(m, v) + gravitational(m, x, &settings.gravity) + elastic,
            ..Default::default()
        });
    }
    let n = x.len();
    let n_free = pd.free_vertices().len();
    ws.y.resize(n, Vec3::zeros());
    ws.x_start.resize(n, Vec3::zeros());
    ws.x_start.copy_from_slice(x);
    ws.v_start.resize(n, Vec3::zeros());
    ws.v_start.copy_from_slice(v);
    let hg = h * h * settings.gravity;
    for i in 0..n {
        ws.y[i] = if pinned[i] {
            targets[i]
        } else {
            x[i] + h * v[i] + hg
        };
    }
    // The iterations start from `x + h v`, not from `y`: the optimum does not depend on the
    // start, but a truncated iteration does, and from `y` a body at rest ends each step short
    // of its equilibrium by what the iterations leave of the `h^2 g` they start away from it
    // (a pinned beam's sag 5.4 % short at 10 iterations; `tests/sim_newton.rs`). From `x + h v`
    // an equilibrium at rest is the iterations' fixed point. Newton's iterations start from
    // `x` itself, the last step's state, where the MPRGP paper linearises (eq. 6-7): where the
    // velocity response left the velocities far from rigid (a stiff, nearly incompressible
    // block whose bottom the contact stopped while its top still falls), `x + h v` crushes
    // the elements (a 1e8 Pa, nu = 0.49 cube landing at 3 m/s: 4e6 J of elastic energy there,
    // which eight Newton iterations did not resolve and which launched the cube 8 m up; from
    // `x` it lands).
    let advance = if newton.is_some() { 0.0 } else { h };
    for i in 0..n {
        if pinned[i] {
            x[i] = targets[i];
        } else {
            x[i] += advance * v[i];
        }
    }
    ws.contributions.resize(pd.tet_count(), [Vec3::zeros(); 4]);
    ws.frames.resize(pd.tet_count());
    if newton.is_none() {
        // The strain-rate damping's reference: the tets' shapes at the step's start.
        pd.start_stretches(&ws.x_start, &ws.frames, &mut ws.start_stretches);
    }
    ws.b.resize(n_free, Vec3::zeros());
    ws.x_free.resize(n_free, Vec3::zeros());
    stats.timings.predict += t.elapsed();

    let t = Instant::now();
    ws.contacts.clear();
    detect_contacts_swept(
        colliders,
        &ws.x_start,
        &ws.y,
        obstacles,
        settings.contact_margin,
        &mut ws.proxy_positions,
        &mut ws.proxy_predictions,
        &mut ws.contacts,
    );
    if settings.soft_contacts {
        fit_soft_trees(
            &mut ws.bvh,
            &mut ws.bvh_points,
            mesh,
            &ws.x_start,
            &ws.y,
            settings,
        );
    }
    stats.timings.detect += t.elapsed();
}

/// Fits a body's soft-contact trees to its motion from `start` to `end` (m): vertices and
/// triangles, and edges when edge-edge contacts are on. `scratch` is reused.
fn fit_soft_trees(
    bvh: &mut BodyBvh,
    scratch: &mut Vec<Vec3>,
    mesh: &TetMesh,
    start: &[Vec3],
    end: &[Vec3],
    settings: &WorldSettings,
) {
    fit_surface_bvh(bvh, mesh, start, end, settings.contact_margin, scratch);
    if settings.edge_contacts {
        fit_edge_bvh(bvh, mesh, start, end, settings.contact_margin);
    }
}

/// The surface of body `i` over this step's motion (a frozen body does not move).
fn swept_surface(i: usize, body: &SoftBody) -> SoftSurface<'_> {
    let (start, end) = if body.frozen.is_some() {
        (&body.x, &body.x)
    } else {
        (&body.ws.x_start, &body.ws.y)
    };
    SoftSurface {
        body: i as u32,
        mesh: &body.mesh,
        x_start: start,
        x_end: end,
        x_reference: start,
        bvh: &body.ws.bvh,
    }
}

/// Phase 2: soft contacts between every pair of bodies (and within each, for self-collision):
/// vertex-triangle both ways (deep overlaps included: `contact::overlap`), and edge-edge once
/// per unordered pair.
fn detect_soft(bodies: &[SoftBody], settings: &WorldSettings, st: &mut StepState) {
    // Pairs grouped by their first body, in parallel; each group's contacts then appended in
    // body order, so the lists (and all that follows from their order) are those of one
    // thread.
    st.detection
        .resize_with(bodies.len(), PairDetection::default);
    st.detection
        .par_iter_mut()
        .enumerate()
        .for_each(|(a, found)| detect_pairs_of(bodies, a, settings, found));
    st.soft_contacts.clear();
    st.edge_contacts.clear();
    for found in &st.detection[..bodies.len()] {
        st.soft_contacts.extend_from_slice(&found.soft);
        st.edge_contacts.extend_from_slice(&found.edges);
    }
}

/// Soft contacts of body `a`'s vertices (and edges) against every body `b` (itself with
/// self-collision on) into `found`.
fn detect_pairs_of(
    bodies: &[SoftBody],
    a: usize,
    settings: &WorldSettings,
    found: &mut PairDetection,
) {
    found.soft.clear();
    found.edges.clear();
    let ba = &bodies[a];
    for (b, bb) in bodies.iter().enumerate() {
        // Nothing awake reaches a sleeping body (the wake pass saw to it).
        let (fa, fb) = (ba.is_static(), bb.is_static());
        let same_group =
            a != b && ba.collision_group.is_some() && ba.collision_group == bb.collision_group;
        if (fa && fb)
            || ba.asleep
            || bb.asleep
            || (a == b && !settings.self_collision)
            || same_group
        {
            continue;
        }
        let first = found.soft.len();
        detect_soft_contacts(
            &swept_surface(a, ba),
            &swept_surface(b, bb),
            settings.contact_margin,
            settings.soft_depth_limit,
            &mut found.pairs,
            &mut found.soft,
        );
        detect_deep_overlap(
            &swept_surface(a, ba),
            &swept_surface(b, bb),
            first,
            &mut found.overlap,
            &mut found.soft,
        );
        if settings.edge_contacts && a <= b {
            detect_edge_contacts(
                &swept_surface(a, ba),
                &swept_surface(b, bb),
                settings.contact_margin,
                a == b,
                &mut found.pairs,
                &mut found.edges,
            );
        }
    }
}

fn find(parent: &mut [u32], mut i: u32) -> u32 {
    while parent[i as usize] != i {
        parent[i as usize] = parent[parent[i as usize] as usize];
        i = parent[i as usize];
    }
    i
}

/// Phase 3: union-find over bodies linked by soft contacts; islands numbered by first body.
fn form_islands(
    bodies: &[SoftBody],
    obstacles: &[Obstacle],
    settings: &WorldSettings,
    h: f64,
    st: &mut StepState,
) {
    let n = bodies.len();
    st.parent.clear();
    st.parent.extend(0..n as u32);
    // Bodies touching one coupled rigid body share its unknowns: one island.
    st.coupled_first.clear();
    st.coupled_first.resize(st.coupling.len(), NO_ISLAND);
    st.coupled_links.clear();
    if st.coupling.any() {
        for (i, b) in bodies.iter().enumerate() {
            if b.is_static() {
                continue;
            }
            for c in &b.ws.contacts {
                let entry = st.coupling.entry_of(c.obstacle);
                if entry == NOT_COUPLED {
                    continue;
                }
                match st.coupled_first[entry as usize] {
                    NO_ISLAND => st.coupled_first[entry as usize] = i as u32,
                    first => st.coupled_links.push((first, i as u32)),
                }
            }
        }
    }
    let links = st
        .soft_contacts
        .iter()
        .map(|c| (c.vertex_body, c.triangle_body));
    let edge_links = st.edge_contacts.iter().map(|c| (c.body_a, c.body_b));
    for (a, b) in links
        .chain(edge_links)
        .chain(st.coupled_links.iter().copied())
    {
        if !bodies[a as usize].is_static() && !bodies[b as usize].is_static() {
            let (ra, rb) = (find(&mut st.parent, a), find(&mut st.parent, b));
            if ra != rb {
                st.parent[ra.max(rb) as usize] = ra.min(rb);
            }
        }
    }
    st.island_of.clear();
    st.island_of.resize(n, NO_ISLAND);
    st.offset_of.clear();
    st.offset_of.resize(n, 0);
    st.island_size.clear();
    let mut count = 0usize;
    for i in 0..n {
        if bodies[i].is_static() {
            continue;
        }
        let root = find(&mut st.parent, i as u32) as usize;
        // The root is the smallest index of its set, so it is numbered before its members.
        let id = if root == i {
            if st.islands.len() <= count {
                st.islands.push(Island::default());
            }
            st.islands[count].members.clear();
            st.island_size.push(0);
            count += 1;
            (count - 1) as u32
        } else {
            st.island_of[root]
        };
        st.island_of[i] = id;
        let island = &mut st.islands[id as usize];
        st.offset_of[i] = island.members.last().map_or(0, |&m| {
            st.offset_of[m as usize] + bodies[m as usize].free_count() as u32
        });
        island.members.push(i as u32);
        st.island_size[id as usize] += 1;
    }
    st.island_count = count;
    st.failures.clear();
    st.failures.resize(count, None);
    for id in 0..count {
        let island_of = &st.island_of;
        let owned = |a: u32, b: u32| {
            let owner = match island_of[a as usize] {
                NO_ISLAND => island_of[b as usize],
                i => i,
            };
            owner == id as u32
        };
        let soft = st
            .soft_contacts
            .iter()
            .copied()
            .filter(|c| owned(c.vertex_body, c.triangle_body));
        let edges = st
            .edge_contacts
            .iter()
            .copied()
            .filter(|c| owned(c.body_a, c.body_b));
        st.islands[id].begin(
            bodies,
            obstacles,
            soft,
            edges,
            &st.contact_memory,
            Layout {
                island_of: &st.island_of,
                offset_of: &st.offset_of,
            },
            id as u32,
            settings,
            &st.coupling,
            h,
        );
    }
}

/// Phase 4: the PD iterations of every island.
fn iterate(
    bodies: &mut [SoftBody],
    obstacles: &[Obstacle],
    settings: &WorldSettings,
    h: f64,
    st: &mut StepState,
) {
    let count = st.island_count;
    let StepState {
        islands,
        island_of,
        offset_of,
        failures,
        contact_memory,
        coupling,
        ..
    } = st;
    let islands = &mut islands[..count];
    let layout = Layout {
        island_of,
        offset_of,
    };
    let limit = settings.iterations() + EXTRA_ITERATIONS;
    while islands.iter().any(Island::active) {
        // Local steps and right-hand sides, per body, with the residual of the iterate.
        {
            let islands = &*islands;
            bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
                let id = island_of[i];
                if id == NO_ISLAND || !islands[id as usize].active() {
                    return;
                }
                let island = &islands[id as usize];
                let o = offset_of[i] as usize;
                let first = island.done == 0;
                if b.newton.is_some() {
                    newton::gradient_and_residual(b, &island.kkt[o..], first, settings);
                } else {
                    local_and_rhs(b, &island.kkt[o..], first, settings);
                    if settings.contact_subspace {
                        // A coupled rigid body is an unknown only in the contact subspace:
                        // its island's columns are all computed at once.
                        let all_now = island.touches_rigid();
                        cache_columns(b, i as u32, &island.contacts, all_now);
                    }
                }
            });
        }
        // Whether each island's iterate is close enough to the step's solution to stop.
        for island in islands.iter_mut() {
            if island.active() {
                island.check_convergence(bodies, settings);
                if island.done == 0 {
                    island.apply_carried_forces(bodies);
                }
            }
        }
        if settings.solver == Solver::NewtonMprgp {
            // Newton iterations are not extrapolated (their right-hand sides are recorded
            // when formed, `newton::factor_and_rhs`).
        } else if settings.anderson_window > 0 {
            accelerate_anderson(bodies, islands, island_of, settings.anderson_window);
        } else {
            // Chebyshev extrapolation of the right-hand sides, per island and body.
            for island in islands.iter_mut() {
                if island.active() {
                    island.chebyshev_weight(settings);
                }
            }
            for_iterating_bodies(bodies, islands, island_of, |b, island| {
                extrapolate_rhs(b, island.omega);
            });
        }
        // Unconstrained solves, per body.
        {
            let islands = &*islands;
            bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
                let id = island_of[i];
                if id == NO_ISLAND || !islands[id as usize].active() {
                    return;
                }
                let o = offset_of[i] as usize;
                let island = &islands[id as usize];
                let force = match island.rows_in_free {
                    true => &island.force[o..],
                    false => &island.applied[o..],
                };
                if b.newton.is_some() {
                    newton::assemble_and_rhs(b);
                    if let Err(reason) = newton::unconstrained_solve(b, force) {
                        b.ws.newton_failure = Some(reason);
                    }
                } else {
                    unconstrained_solve(b, force);
                }
            });
        }
        // A Newton matrix that did not factor fails its island (its bodies freeze).
        for (i, b) in bodies.iter_mut().enumerate() {
            if let Some(reason) = b.ws.newton_failure.take() {
                let id = island_of[i] as usize;
                failures[id] = Some(reason);
                islands[id].done = islands[id].iterations;
            }
        }
        // Constrained global steps, per island.
        {
            let shared = &*bodies;
            islands
                .par_iter_mut()
                .zip(failures.par_iter_mut())
                .enumerate()
                .for_each(|(id, (island, failure))| {
                    if !island.active() {
                        return;
                    }
                    if let Err(reason) =
                        island.solve(id as u32, shared, obstacles, layout, settings, coupling, h)
                    {
                        *failure = Some(reason);
                        island.done = island.iterations;
                    }
                });
        }
        // Positions back to the bodies; BVHs fitted to them for re-detection.
        {
            let islands = &*islands;
            bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
                let id = island_of[i];
                if id == NO_ISLAND || failures[id as usize].is_some() {
                    return;
                }
                let island = &islands[id as usize];
                if island.done >= island.iterations {
                    return;
                }
                let o = offset_of[i] as usize;
                let Some(pd) = b.pd.as_ref() else { return };
                for (d, &vi) in pd.free_vertices().iter().enumerate() {
                    b.x[vi as usize] = island.x[o + d];
                }
                if settings.soft_contacts
                    && island.members.len() + usize::from(settings.self_collision) > 1
                {
                    let ws = &mut b.ws;
                    fit_surface_bvh(
                        &mut ws.bvh,
                        &b.mesh,
                        &b.x,
                        &b.x,
                        settings.contact_margin,
                        &mut ws.bvh_points,
                    );
                }
            });
        }
        // Newton: the line searches' element evaluations at the points taken, to the bodies.
        if settings.solver == Solver::NewtonMprgp {
            for (island, failure) in islands.iter_mut().zip(failures.iter()) {
                island.adopt_line_search(bodies, failure.is_some());
            }
        }
        // Re-detection: penetrations no contact covers get one for the next iteration.
        {
            let shared = &*bodies;
            islands.par_iter_mut().for_each(|island| {
                if !island.active() {
                    return;
                }
                island.done += 1;
                let added = island.redetect(shared, obstacles, settings, h);
                island.added = added;
                if added > 0 && island.done == island.iterations && island.iterations < limit {
                    island.iterations += 1;
                }
            });
        }
    }
    // Friction and normal forces to start the next step from: per vertex, per group and per
    // contact (none from an island whose QP failed: its bodies freeze, and its forces may not
    // be finite).
    contact_memory.clear();
    for (island, failure) in islands.iter().zip(failures.iter()) {
        if failure.is_some() {
            for &b in &island.members {
                bodies[b as usize].ws.friction.clear();
            }
            continue;
        }
        contact_memory.remember(island);
        for &b in &island.members {
            let o = offset_of[b as usize] as usize;
            let body = &mut bodies[b as usize];
            let n = body.free_count();
            if let (Some(audit), Some(pd)) = (&mut body.last_step.0.energy, body.pd.as_ref())
                && island.audit_forces.len() >= o + n
            {
                // The work of the last constrained step's forces over the step's displacement.
                for (d, &vi) in pd.free_vertices().iter().enumerate() {
                    let dx = body.x[vi as usize] - body.ws.x_start[vi as usize];
                    let (contact, friction) = island.audit_forces[o + d];
                    audit.contact_work += contact.dot(&dx);
                    audit.friction_work += friction.dot(&dx);
                }
            }
            body.ws.friction.clear();
            body.ws
                .friction
                .extend_from_slice(&island.friction_force()[o..o + n]);
        }
    }
    contact_memory.finish();
    // Statistics: per-body counts; the island's QP figures on its first member.
    for island in islands.iter() {
        for (k, &b) in island.members.iter().enumerate() {
            let stats = &mut bodies[b as usize].last_step.0;
            stats.pd_iterations = island.done;
            stats.pd_residual = island.residual;
            stats.pd_converged = island.converged;
            if k == 0 {
                stats.mprgp_iterations = island.stats.mprgp_iterations;
                stats.mprgp_cg_steps = island.stats.mprgp_cg_steps;
                stats.subspace_solves = island.stats.subspace_solves;
                stats.kkt_residual = island.stats.kkt_residual;
                stats.active_constraints = island.stats.active;
                stats.constraints = island.contacts.len();
                stats.timings.mprgp += island.stats.mprgp_time;
                stats.timings.qp_solve += island.stats.qp_time;
                stats.timings.detect += island.stats.detect_time;
            }
        }
    }
}

/// One PD iteration's first per-body part: the local step and right-hand side `b(x)` at the
/// iterate `x`, and the iterate's residual into `ws.residual2` (see [`residual`]); on the step's
/// first iteration (`x = x_0 = x + h v`) also the residual's scale into `ws.residual_scale2`.
fn local_and_rhs(body: &mut SoftBody, kkt: &[Vec3], first: bool, settings: &WorldSettings) {
    let SoftBody {
        pd,
        x,
        targets,
        ws,
        last_step,
        ..
    } = body;
    let Some(pd) = pd.as_ref() else { return };
    let t = Instant::now();
    pd.local_step_warm(
        x,
        &ws.start_stretches,
        &mut ws.contributions,
        &mut ws.frames,
    );
    last_step.0.timings.local += t.elapsed();
    let t = Instant::now();
    pd.assemble_rhs(&ws.y, targets, &ws.contributions, &mut ws.b);
    let n = ws.b.len();
    ws.b_prev.resize(n, Vec3::zeros());
    if first {
        ws.residual_scale2 = residual::scale2(
            pd,
            x,
            &ws.b,
            &settings.gravity,
            &mut ws.x_free,
            &mut ws.b_prev,
        );
        ws.residual2 = ws.residual_scale2;
        // The first unconstrained solve corrects the prediction `y` (see `unconstrained_solve`):
        // a body in free fall ends its step there, and the f32 correction's rounding is then
        // relative to the elastic response alone.
        for (xf, &v) in ws.x_free.iter_mut().zip(pd.free_vertices()) {
            *xf = ws.y[v as usize];
        }
    } else {
        ws.residual2 = residual::iterate_residual2(&kkt[..n], &ws.b_prev, &ws.b);
    }
    last_step.0.timings.global += t.elapsed();
}

/// Runs `f` on every body whose island still iterates, with its island (in parallel).
fn for_iterating_bodies(
    bodies: &mut [SoftBody],
    islands: &[Island],
    island_of: &[u32],
    f: impl Fn(&mut SoftBody, &Island) + Sync,
) {
    bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
        let id = island_of[i];
        if id != NO_ISLAND && islands[id as usize].active() {
            f(b, &islands[id as usize]);
        }
    });
}

/// Anderson acceleration of the right-hand sides ([`anderson`]): per island, the history's
/// slot and restart; per body, the difference and its terms of the normal equations; per
/// island, the combination (summed over its members in order); per body, the combined
/// right-hand side.
fn accelerate_anderson(
    bodies: &mut [SoftBody],
    islands: &mut [Island],
    island_of: &[u32],
    window: usize,
) {
    for island in islands.iter_mut() {
        if island.active() {
            island.anderson_begin(window);
        }
    }
    for_iterating_bodies(bodies, islands, island_of, |b, island| {
        let ws = &mut b.ws;
        let n = ws.b.len();
        ws.b_prev.resize(n, Vec3::zeros());
        anderson::record(
            &mut ws.anderson,
            &island.anderson,
            window,
            &ws.b,
            &mut ws.b_prev,
        );
    });
    for island in islands.iter_mut() {
        if island.active() {
            island.anderson_solve(bodies);
        }
    }
    for_iterating_bodies(bodies, islands, island_of, |b, island| {
        let ws = &mut b.ws;
        anderson::apply(&ws.anderson, &island.anderson, &mut ws.b, &mut ws.b_prev);
    });
}

/// The right-hand side the iteration's solves use: `b(x)` extrapolated with the island's
/// Chebyshev weight `omega`, `omega (b(x) - b_before) + b_before` (Wang 2015, with the
/// right-hand sides in place of the iterates: the constrained step then projects the
/// extrapolation, so the iterate stays feasible; without contacts, `x = A^-1 b`, the two are
/// the same); and the history moved on by one.
fn extrapolate_rhs(body: &mut SoftBody, omega: f64) {
    let ws = &mut body.ws;
    let n = ws.b.len();
    ws.b_before.resize(n, Vec3::zeros());
    if omega != 1.0 {
        for (b, before) in ws.b.iter_mut().zip(&ws.b_before) {
            *b = omega * (*b - before) + before;
        }
    }
    std::mem::swap(&mut ws.b_before, &mut ws.b_prev);
    ws.b_prev.copy_from_slice(&ws.b);
}

/// Most bytes of `A^-1` columns a body keeps ([`crate::sim::inverse_columns`]): 16 MiB, all
/// of a body's columns up to 1,448 free vertices, 196 at 10,648.
const COLUMN_MEMORY_BYTES: usize = 16 << 20;

/// Scalar solves a body of `n` free vertices may spend on new columns per PD iteration:
/// `COLUMN_SOLVE_VERTICES / n` (at least 2), so that the columns cost about as much as two of
/// the iteration's three-coordinate solves where `n` is 1,000 (and less where the body is
/// larger: there the contact subspace pays less).
const COLUMN_SOLVE_VERTICES: usize = 6_000;

/// Makes sure body `index` has the `A^-1` columns of the vertices its island's contacts touch,
/// within its budget per iteration (the island solves by MPRGP until they are all there).
fn cache_columns(body: &mut SoftBody, index: u32, contacts: &[IslandContact], all_now: bool) {
    let SoftBody {
        pd,
        ws,
        colliders,
        last_step,
        ..
    } = body;
    let Some(pd) = pd.as_ref() else { return };
    // Contacts only join an island during its step: with as many as when every column was
    // last found cached, there is nothing to do (a pass over all of the island's contacts per
    // body per iteration, 3 % of the `pile` example's profile, otherwise).
    if ws.columns_complete == Some(contacts.len()) {
        return;
    }
    let t = Instant::now();
    let mut budget = match all_now {
        true => usize::MAX,
        false => (COLUMN_SOLVE_VERTICES / pd.free_vertices().len().max(1)).max(2),
    };
    let dof = pd.dof_map();
    let needed = || {
        contacts
            .iter()
            .flat_map(|contact| contact.vertices_of(index, colliders))
            .map(|v| dof[v as usize])
            .filter(|&d| d != crate::sim::pd::PINNED)
    };
    // Where more contact vertices than columns fit, none is computed: the island solves by
    // MPRGP.
    let mut complete = ws.columns.plan(needed());
    if complete {
        for d in needed() {
            complete &= ws.columns.ensure(pd, d, &mut budget);
        }
    }
    ws.columns_complete = complete.then_some(contacts.len());
    last_step.0.timings.global += t.elapsed();
}

/// One PD iteration's second per-body part: the unconstrained solve `A^-1 (b + force)`. After
/// an MPRGP solve `force` holds the last iteration's contact forces, which spread the response
/// through the body so that the QP starts next to its optimum; after a solve in the contact
/// subspace only the reactions and friction (see `Island::rows_in_free`).
///
/// The solve is a correction of the last solution `x_free` (on the step's first iteration, the
/// prediction `y`, which [`local_and_rhs`] leaves there): `x_free += A^-1 (b + force - A x_free)`,
/// the defect `b + force - A x_free` formed in f64 and the correction solved through the factor
/// rounded to f32 (half the memory traffic of the factor, which bounds the solve: measured
/// 2.59 against 1.60 ms at 10,648 vertices, 30.0 against 18.6 ms at 39,304). The f32 solve's
/// relative error (1.0-1.6e-7 on the bench cubes) is then relative to the correction, not to
/// the positions, and the next iteration's defect corrects it: the iterations converge to the
/// f64 solution. From 4,096 vertices the solve runs on both threads, each on its own subtrees
/// of the factor's elimination tree, and one of them on the separators above them after
/// ([`crate::sim::subtree_solve`]).
fn unconstrained_solve(body: &mut SoftBody, force: &[Vec3]) {
    let SoftBody {
        pd, ws, last_step, ..
    } = body;
    let Some(pd) = pd.as_mut() else { return };
    let t = Instant::now();
    let n = ws.x_free.len();
    ws.defect.resize(n, Vec3::zeros());
    pd.matrix().mul_vec3(&ws.x_free, &mut ws.defect);
    for (d, (b, f)) in ws.defect.iter_mut().zip(ws.b.iter().zip(force)) {
        *d = b + f - *d;
    }
    pd.solve_correction_in_place(&mut ws.defect);
    for (xf, d) in ws.x_free.iter_mut().zip(&ws.defect) {
        *xf += d;
    }
    last_step.0.timings.global += t.elapsed();
}

/// Deepest soft-soft penetration (m) at the end of the iterations, along the contacts' frozen
/// normals.
fn soft_penetration(bodies: &[SoftBody], st: &StepState) -> f64 {
    st.islands[..st.island_count]
        .iter()
        .flat_map(|island| island.contacts.iter())
        .filter_map(|c| match c {
            IslandContact::Soft(s) => Some(-s.gap(
                &bodies[s.vertex_body as usize].x,
                &bodies[s.triangle_body as usize].x,
            )),
            IslandContact::Edge(e) => {
                Some(-e.gap(&bodies[e.body_a as usize].x, &bodies[e.body_b as usize].x))
            }
            IslandContact::Obstacle { .. } => None,
        })
        .fold(0.0, f64::max)
}
