//! Phase 1 of a substep, per body (in parallel): guard the input, build or refactor the body's
//! system, predict `y = x + h v + h^2 g`, detect obstacle contacts along the predicted motion
//! of every collider (speculative contacts), and fit the surface BVHs over the motion for the
//! soft detection of phase 2.

use std::time::Instant;

use crate::sim::contact::{
    DrawnMesh, ObstacleCollider, SurfaceShape, detect_contacts_swept, fit_surface_bvh,
};
use crate::sim::math::{Vec3, all_finite};
use crate::sim::mesh::TetMesh;
use crate::sim::world::audit::{EnergyAudit, gravitational, kinetic};
use crate::sim::world::body::SoftBody;
use crate::sim::world::report::{BodyStepStats, FreezeReason};
use crate::sim::world::settings::WorldSettings;
use crate::sim::world::workspace::Workspace;

/// Phase 1 for one body: guard the input, build or refactor its system, predict, detect
/// obstacle contacts along the motion, fit the BVHs.
pub(super) fn prepare(
    body: &mut SoftBody,
    obstacles: &[ObstacleCollider],
    settings: &WorldSettings,
    h: f64,
) {
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
            fit_soft_trees(
                &mut body.ws,
                &body.mesh,
                body.drawn.as_deref(),
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
        collider_slack,
        ws,
        mesh,
        drawn,
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
        collider_slack,
        &mut ws.proxy_positions,
        &mut ws.proxy_predictions,
        &mut ws.contacts,
    );
    if settings.soft_contacts {
        let (x_start, y) = (std::mem::take(&mut ws.x_start), std::mem::take(&mut ws.y));
        fit_soft_trees(ws, mesh, drawn.as_deref(), &x_start, &y, settings);
        (ws.x_start, ws.y) = (x_start, y);
    }
    stats.timings.detect += t.elapsed();
}

/// Fits a body's soft-contact trees to its motion from vertex positions `start` to `end` (m):
/// its surface points and triangles (where it is drawn, its drawn points, their positions
/// kept in the workspace's `drawn_start` and `drawn_end`). Its edge tree is fitted later, only
/// where another body's surface comes near (`detect::fit_edge_trees`).
fn fit_soft_trees(
    ws: &mut Workspace,
    mesh: &TetMesh,
    drawn: Option<&DrawnMesh>,
    start: &[Vec3],
    end: &[Vec3],
    settings: &WorldSettings,
) {
    let Workspace {
        bvh,
        bvh_points,
        drawn_start,
        drawn_end,
        ..
    } = ws;
    let (shape, start, end) = match drawn {
        None => (SurfaceShape::Tet(mesh), start, end),
        Some(d) => {
            d.positions_into(start, drawn_start);
            if std::ptr::eq(start, end) {
                (SurfaceShape::Drawn(d), &drawn_start[..], &drawn_start[..])
            } else {
                d.positions_into(end, drawn_end);
                (SurfaceShape::Drawn(d), &drawn_start[..], &drawn_end[..])
            }
        }
    };
    fit_surface_bvh(bvh, shape, start, end, settings.contact_margin, bvh_points);
}

/// Most bytes of `A^-1` columns a body keeps ([`crate::sim::inverse_columns`]): 16 MiB, all
/// of a body's columns up to 1,448 free vertices, 196 at 10,648.
pub(super) const COLUMN_MEMORY_BYTES: usize = 16 << 20;
