//! Phase 4 of a substep, the iterations of every island: per iteration, the local steps and
//! right-hand sides per body (or with [`Solver::NewtonMprgp`] the Newton gradient, `newton`),
//! the islands' convergence check, Chebyshev or Anderson extrapolation of the right-hand sides,
//! the unconstrained solves per body, the constrained global step per island
//! ([`Island::solve`]), the positions back to the bodies, and re-detection at the iterate
//! ([`Island::redetect`]). After the last iteration: the contact forces to remember for the
//! next step, and the statistics.

use std::time::Instant;

use rayon::prelude::*;

use super::newton;
use super::predict::COLUMN_MEMORY_BYTES;
use super::residual;
use super::state::StepState;
use crate::sim::contact::{ObstacleCollider, SurfaceShape, fit_surface_bvh};
use crate::sim::math::Vec3;
use crate::sim::prone::ProneRegion;
use crate::sim::world::anderson;
use crate::sim::world::body::SoftBody;
use crate::sim::world::island::MAX_DUAL_ROWS;
use crate::sim::world::island::{Island, IslandContact, Layout, NO_ISLAND, edge_gap, soft_gap};
use crate::sim::world::settings::WorldSettings;
use crate::sim::world::solver::Solver;

/// Extra PD iterations allowed when the last iteration found new penetrations.
const EXTRA_ITERATIONS: usize = 2;

/// Phase 4: the PD iterations of every island.
pub(super) fn iterate(
    bodies: &mut [SoftBody],
    obstacles: &[ObstacleCollider],
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
                        cache_columns(b, i as u32, &island.contacts, all_now, settings);
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
                    let (shape, now) = match &b.drawn {
                        None => (SurfaceShape::Tet(&b.mesh), &b.x),
                        Some(d) => {
                            d.positions_into(&b.x, &mut ws.drawn_now);
                            (SurfaceShape::Drawn(d), &ws.drawn_now)
                        }
                    };
                    fit_surface_bvh(
                        &mut ws.bvh,
                        shape,
                        now,
                        now,
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

/// Scalar solves a body of `n` free vertices may spend on new columns per PD iteration:
/// `COLUMN_SOLVE_VERTICES / n` (at least 2), so that the columns cost about as much as two of
/// the iteration's three-coordinate solves where `n` is 1,000 (and less where the body is
/// larger: there the contact subspace pays less).
const COLUMN_SOLVE_VERTICES: usize = 6_000;

/// Makes sure body `index` has the `A^-1` columns of the vertices its island's contacts touch,
/// within its budget per iteration (the island solves by MPRGP until they are all there).
fn cache_columns(
    body: &mut SoftBody,
    index: u32,
    contacts: &[IslandContact],
    all_now: bool,
    settings: &WorldSettings,
) {
    let SoftBody {
        mesh,
        pd,
        ws,
        colliders,
        drawn,
        last_step,
        ..
    } = body;
    let Some(pd) = pd.as_mut() else { return };
    // Contacts only join an island during its step: with as many as when every column was
    // last found cached, there is nothing to do (a pass over all of the island's contacts per
    // body per iteration, 3 % of the `pile` example's profile, otherwise).
    if ws.columns_complete == Some(contacts.len()) {
        return;
    }
    let t = Instant::now();
    let localized = pd.free_vertices().len() >= settings.localized_min_vertices;
    if !localized && pd.prone().is_some() {
        // Localized before (the setting changed since): the columns serve from now on.
        pd.forget_prone();
        ws.prone_vertices.clear();
    }
    let dof = pd.dof_map();
    let needed = || {
        contacts
            .iter()
            .flat_map(|contact| contact.vertices_of(index, colliders, drawn.as_deref()))
            .map(|v| dof[v as usize])
            .filter(|&d| d != crate::sim::pd::PINNED)
    };
    if localized {
        // Localized: the contacts' vertices must be in the collision-prone region, which a
        // contact outside it rebuilds (one refactorization; `crate::sim::prone`).
        let inside = match pd.prone() {
            Some(p) => needed().all(|d| p.contains(d)),
            None => needed().next().is_none(),
        };
        // More contact vertices than the contact subspace takes rows: MPRGP solves the QP,
        // and a region would only cost its refactorization.
        // (Counted only where the region is rebuilt, which allocates anyway.)
        let too_many = || {
            let mut seen: Vec<u32> = needed().collect();
            seen.sort_unstable();
            seen.dedup();
            seen.len() > MAX_DUAL_ROWS
        };
        let complete = inside
            || !too_many()
                && match ProneRegion::grown(
                    pd.prone(),
                    pd.matrix(),
                    &reachable_vertices(mesh, colliders, drawn.as_deref(), dof),
                    needed(),
                ) {
                    Some(region) => {
                        let done = pd.localize(region).is_ok();
                        last_step.0.prone_rebuilds += 1;
                        // The factor changed: the old one's columns go, and the region is
                        // kept with the body's state (a system rebuilt after a restore is
                        // localized to it again).
                        ws.columns
                            .reset(pd.free_vertices().len(), COLUMN_MEMORY_BYTES);
                        ws.prone_vertices.clear();
                        if let Some(prone) = pd.prone() {
                            let free = pd.free_vertices();
                            ws.prone_vertices
                                .extend(prone.vertices().iter().map(|&d| free[d as usize]));
                        }
                        done
                    }
                    None => false,
                };
        ws.columns_complete = complete.then_some(contacts.len());
        last_step.0.timings.global += t.elapsed();
        return;
    }
    let mut budget = match all_now {
        true => usize::MAX,
        false => (COLUMN_SOLVE_VERTICES / pd.free_vertices().len().max(1)).max(2),
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

/// Per free vertex, whether a contact row can touch it: a surface vertex of the mesh, or a
/// vertex of the tet of an embedded collider or drawn point (their rows spread over the tet).
fn reachable_vertices(
    mesh: &crate::sim::TetMesh,
    colliders: &[crate::sim::embed::EmbeddedPoint],
    drawn: Option<&crate::sim::contact::DrawnMesh>,
    dof: &[u32],
) -> Vec<bool> {
    let free = dof.iter().filter(|&&d| d != crate::sim::pd::PINNED).count();
    let mut reachable = vec![false; free];
    let mut mark = |v: u32| {
        let d = dof[v as usize];
        if d != crate::sim::pd::PINNED {
            reachable[d as usize] = true;
        }
    };
    for &v in mesh.surface_vertices() {
        mark(v);
    }
    let embedded = colliders
        .iter()
        .chain(drawn.into_iter().flat_map(|d| d.points()))
        .filter(|p| p.weights.iter().filter(|&&w| w != 0.0).count() > 1);
    for point in embedded {
        for &v in &point.vertices {
            mark(v);
        }
    }
    reachable
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
/// (`crate::sim::sparse`, split along the elimination tree).
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
pub(super) fn soft_penetration(bodies: &[SoftBody], st: &StepState) -> f64 {
    st.islands[..st.island_count]
        .iter()
        .flat_map(|island| island.contacts.iter())
        .filter_map(|c| match c {
            IslandContact::Soft(s) => {
                let (a, t) = (
                    &bodies[s.vertex_body as usize],
                    &bodies[s.triangle_body as usize],
                );
                Some(-soft_gap(s, a, &a.x, t, &t.x))
            }
            IslandContact::Edge(e) => {
                let (a, b) = (&bodies[e.body_a as usize], &bodies[e.body_b as usize]);
                Some(-edge_gap(e, a, &a.x, b, &b.x))
            }
            IslandContact::Obstacle { .. } => None,
        })
        .fold(0.0, f64::max)
}
