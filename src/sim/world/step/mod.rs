//! One substep of the world: [`substep`] calls the stages below in this order, each in the
//! file named. Bodies and islands are advanced in parallel, in a fixed order, with sequential
//! arithmetic inside each body and island, so the result does not depend on the thread count.
//!
//! 0. **Wake and couple** (world): sleeping bodies something may reach in this substep wake
//!    (`world::sleeping`, `wake_touched`); coupled rigid bodies take their free motion
//!    (`world::coupling`, `Coupling::begin`).
//! 1. **Predict** (per body, parallel; `predict.rs`): `y = x + h v + h^2 g`, speculative
//!    obstacle contacts along the predicted motion of every collider (the proxies, and every
//!    vertex that is not one, interior vertices included: a crushed surface layer cannot let
//!    the inside through an obstacle), the surface BVHs fitted over the motion.
//! 2. **Detect soft contacts** (world, the pairs of each first body in parallel, their lists
//!    joined in body order; `detect.rs`): every pair of bodies whose BVHs overlap, and each
//!    body with itself when self-collision is on ([`crate::sim::contact::soft`]); edge-edge
//!    contacts between creases of two bodies ([`crate::sim::contact::edge_edge`]), whose edge
//!    trees are fitted first, only for bodies near another (`fit_edge_trees`).
//! 3. **Form islands** (`islands.rs`): bodies linked by soft contacts (or touching one coupled
//!    rigid body) share one QP; each island starts its step with its contacts (`world::island`,
//!    `Island::begin`).
//! 4. **Iterate** (`iterate.rs`): local steps and prefactored solves per body (parallel); the
//!    constrained global step per island, in the contact subspace or by MPRGP (parallel;
//!    `world::island`); re-detection at the iterate (`island/redetect.rs`). The iterations stop
//!    on [`WorldSettings::pd_tolerance`] (their residual: `residual.rs`), and their right-hand
//!    sides are extrapolated by Chebyshev's semi-iterative method
//!    ([`WorldSettings::chebyshev_rho`]; Wang 2015, "A Chebyshev semi-iterative approach for
//!    accelerating projective and position-based dynamics", section 4). Deviation: Wang
//!    extrapolates the iterates; here the right-hand sides are, so that the constrained step
//!    projects the extrapolation and every iterate satisfies the contacts (the same method
//!    where nothing touches, since `x = A^-1 b`), and the sequence restarts where the
//!    residual grows or re-detection changes the contacts, instead of a fixed start delay. A
//!    contact that started the step inside (an overlapping spawn, a teleport) is pushed out by
//!    at most [`WorldSettings::max_depenetration_speed`] times `h` per step, so that it
//!    separates over several steps instead of being launched. With
//!    [`WorldSettings::anderson_window`] set, Anderson acceleration (`world::anderson`)
//!    combines the right-hand sides instead of the Chebyshev weights. With
//!    [`Solver::NewtonMprgp`](crate::sim::world::Solver::NewtonMprgp) each iteration is a
//!    Newton iteration instead (`newton.rs`, `world::solver`): the gradient and residual at the
//!    iterate, then the Newton matrix and the step `b = H x - g` in the places of the local step
//!    and the right-hand side, the island's QP on the Newton matrices, and a line search on the
//!    island's step (`island/line_search.rs`); no extrapolation.
//! 5. **Respond** (world), after the position solve, on velocities only:
//!    1. velocities `v = (x - x_start) / h` (here), and coupled rigid bodies to their end poses
//!       and velocities (`world::coupling`, `Coupling::settle`);
//!    2. **restitution** (`respond.rs`, `restitute`, with the island's restitution stage
//!       `island/restitution.rs`): Newton's rule, each bouncing contact (approach speed at the
//!       step's start above [`WorldSettings::restitution_threshold`]) should leave at `e` times
//!       that speed. The rebound is a force with the shape of the QP's normal forces, `F = sum_c
//!       e_c lambda_c n_c J_c'`, solved through each body's prefactored matrix, `dv = alpha A^-1
//!       F / h`, with one scale `alpha` per island chosen so that the bouncing contacts' normal
//!       velocity, averaged with the weights `e_c lambda_c`, reaches that target; a velocity-level
//!       restitution impulse on the few contact vertices would hand them the whole body's
//!       rebound momentum. Restitution is therefore not in the velocity LCP's `b` (the regions
//!       paper's eq. (12));
//!    3. **the velocity-level contact LCP** (`respond.rs`, `respond`) of every contact that
//!       touches at the end — Signorini and Coulomb friction, region by region
//!       ([`crate::sim::contact::lcp`]), the position-level normal impulse `lambda h` of the QP
//!       counted in the friction bound and, for contacts that do not bounce, also the most it
//!       may take back (a push out of a penetration the step started in must not launch the
//!       body) — whose impulses change the velocities only. The positions stay the QP's: static
//!       friction is held there, by the friction forces of the implicit step
//!       (`island/friction.rs`); moving the contact vertices by the LCP's friction impulses
//!       too, as an earlier version did, strained the bodies around them every step, and a
//!       stack of five cubes swayed on the energy;
//!    4. coupled rigid bodies take their response (`Coupling::finish`).
//! 6. **Guard** (per body; `guard.rs`): deformation damping; settling of slow, supported
//!    bodies (`world::settling`); a non-finite state, a runaway speed or energy freezes the
//!    body at its last good state. Then bodies and islands at rest fall asleep
//!    (`world::sleeping`, `fall_asleep`).
//!
//! The buffers kept between substeps are in [`StepState`] (`state.rs`). With
//! [`WorldSettings::energy_audit`] on, each body's energy is measured at the start (`predict.rs`),
//! after the iterations, and around every velocity phase (`respond.rs`,
//! `audit_velocity_phase`; [`crate::sim::world::EnergyAudit`]). With
//! [`WorldSettings::measure_residual`] on, the iterations' convergence is measured around them
//! (`residual.rs`).

use std::time::{Duration, Instant};

use rayon::prelude::*;

mod detect;
mod guard;
mod islands;
mod iterate;
mod newton;
mod predict;
mod residual;
mod respond;
mod state;

pub(crate) use state::StepState;

use super::body::SoftBody;
use super::island::{Island, NO_ISLAND};
use super::settings::WorldSettings;
use super::sleeping::{fall_asleep, wake_touched};
use crate::sim::contact::{LcpStats, ObstacleCollider};

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

/// Advances every body by `h` seconds: the phases of the module docs, in order.
pub(crate) fn substep(
    bodies: &mut [SoftBody],
    obstacles_mut: &mut [ObstacleCollider],
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
        .for_each(|b| predict::prepare(b, obstacles, settings, h));
    if settings.soft_contacts {
        detect::fit_edge_trees(bodies, settings, &mut st.edges_fitted);
        detect::detect_soft(
            bodies,
            settings,
            &st.edges_fitted,
            &mut st.detection,
            &mut st.soft_contacts,
            &mut st.edge_contacts,
        );
    } else {
        st.soft_contacts.clear();
        st.edge_contacts.clear();
    }
    summary.soft_contacts = st.soft_contacts.len() + st.edge_contacts.len();
    islands::form_islands(bodies, obstacles, settings, h, st);
    summary.islands = st.island_count;
    summary.largest_island = st.island_size.iter().copied().max().unwrap_or(0) as usize;
    if settings.measure_residual {
        residual::measure_start(bodies, st, settings);
    }
    iterate::iterate(bodies, obstacles, settings, h, st);
    if settings.measure_residual {
        residual::measure_end(bodies, st);
    }
    summary.soft_penetration = iterate::soft_penetration(bodies, st);

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
        let islands = &st.islands[..st.island_count];
        st.coupling.settle(
            obstacles_mut,
            islands.iter().flat_map(Island::rigid_shares),
            islands.iter().flat_map(Island::obstacle_contacts),
            bodies,
            h,
        );
    }
    let obstacles = &*obstacles_mut;
    if settings.energy_audit {
        respond::audit_velocity_phase(bodies, settings, respond::AuditMark::Solved);
    }
    respond::restitute(bodies, obstacles, h, st);
    if settings.energy_audit {
        respond::audit_velocity_phase(bodies, settings, respond::AuditMark::Restituted);
    }
    summary.lcp = respond::respond(bodies, obstacles, settings, h, st);
    if settings.energy_audit {
        respond::audit_velocity_phase(bodies, settings, respond::AuditMark::Responded);
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
