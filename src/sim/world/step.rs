//! One implicit step of one body: predict, detect, constrain, solve (PD with MPRGP), respond,
//! guard (`../shared/DESIGN.md` section 3, phases 2-7).

use std::time::Instant;

use super::WorldSettings;
use super::body::SoftBody;
use super::report::{BodyStepStats, FreezeReason};
use crate::sim::contact::{Obstacle, build_rows, detect_contacts, detect_contacts_swept};
use crate::sim::math::{Mat3, Vec3, all_finite};
use crate::sim::pd::PINNED;
use crate::sim::qp::{ConstraintRow, QpProblem, SpdOperator};
use crate::sim::sparse::SymmetricMatrix;

/// Extra PD iterations allowed when the last iteration found new penetrations.
const EXTRA_ITERATIONS: usize = 2;

/// Advances `body` by `h` seconds. On failure the body is restored to its last good state and
/// frozen; the reason is returned.
pub(crate) fn step_body(
    body: &mut SoftBody,
    obstacles: &[Obstacle],
    settings: &WorldSettings,
    h: f64,
) -> (BodyStepStats, Option<FreezeReason>) {
    let mut stats = BodyStepStats::default();
    if body.frozen.is_some() {
        return (stats, None);
    }
    if !(all_finite(&body.x) && all_finite(&body.v)) {
        body.freeze(FreezeReason::NonFiniteInput);
        return (stats, body.frozen.clone());
    }
    let t = Instant::now();
    if let Err(reason) = body.ensure_system(h) {
        body.freeze(reason);
        return (stats, body.frozen.clone());
    }
    stats.timings.refactor = t.elapsed();
    match solve_positions(body, obstacles, settings, h, &mut stats) {
        Ok(()) => {}
        Err(reason) => {
            body.freeze(reason);
            return (stats, body.frozen.clone());
        }
    }
    let t = Instant::now();
    let verdict = respond_and_guard(body, obstacles, settings, h);
    stats.max_penetration = max_penetration(body, obstacles);
    stats.timings.velocity = t.elapsed();
    match verdict {
        Ok(()) => {
            body.good_x.copy_from_slice(&body.x);
            body.good_v.copy_from_slice(&body.v);
            (stats, None)
        }
        Err(reason) => {
            body.freeze(reason);
            (stats, body.frozen.clone())
        }
    }
}

/// Phases 2-5: predict, detect, constrain, and the PD iterations with MPRGP global steps.
fn solve_positions(
    body: &mut SoftBody,
    obstacles: &[Obstacle],
    settings: &WorldSettings,
    h: f64,
    stats: &mut BodyStepStats,
) -> Result<(), FreezeReason> {
    let SoftBody {
        pd,
        x,
        v,
        pinned,
        targets,
        proxies,
        ws,
        ..
    } = body;
    let pd = pd
        .as_mut()
        .ok_or_else(|| FreezeReason::Factorization("missing system".into()))?;
    let n = x.len();
    let n_free = pd.free_vertices().len();

    // 2. Predict: y = x + h v + h^2 g; pinned vertices go to their targets.
    let t = Instant::now();
    ws.y.resize(n, Vec3::zeros());
    ws.x_start.resize(n, Vec3::zeros());
    ws.x_start.copy_from_slice(x);
    let hg = h * h * settings.gravity;
    for i in 0..n {
        ws.y[i] = if pinned[i] {
            targets[i]
        } else {
            x[i] + h * v[i] + hg
        };
    }
    x.copy_from_slice(&ws.y);
    ws.contributions.resize(pd.tet_count(), [Vec3::zeros(); 4]);
    ws.frames.resize(pd.tet_count(), Mat3::identity());
    ws.b.resize(n_free, Vec3::zeros());
    ws.x_free.resize(n_free, Vec3::zeros());
    ws.x_alt.resize(n_free, Vec3::zeros());
    stats.timings.predict += t.elapsed();

    // 3-4. Detect speculatively along the predicted motion and build decoupled rows.
    let t = Instant::now();
    ws.contacts.clear();
    detect_contacts_swept(
        proxies,
        &ws.x_start,
        &ws.y,
        obstacles,
        settings.contact_margin,
        &mut ws.proxy_positions,
        &mut ws.proxy_predictions,
        &mut ws.contacts,
    );
    ws.rows.reset(n_free);
    ws.lambda.clear();
    build_rows(&mut ws.contacts, proxies, pd.dof_map(), x, &mut ws.rows);
    stats.timings.detect += t.elapsed();

    // 5. PD local/global iterations.
    let mut iterations = settings.pd_iterations.max(1);
    let mut it = 0;
    while it < iterations {
        it += 1;
        let t = Instant::now();
        pd.local_step_warm(x, &mut ws.contributions, &mut ws.frames);
        stats.timings.local += t.elapsed();

        let t = Instant::now();
        pd.assemble_rhs(&ws.y, targets, &ws.contributions, &mut ws.b);
        // Unconstrained solve with the previous iteration's contact forces added,
        // x0 = A^-1 (b + J' lambda_prev): the factor spreads the contact response through the
        // whole body, so MPRGP starts next to the constrained optimum.
        ws.x_free.copy_from_slice(&ws.b);
        for (row, &l) in ws.rows.rows.iter().zip(&ws.lambda) {
            if l > 0.0 {
                row.add_scaled(l, &mut ws.x_free);
            }
        }
        pd.solve_in_place(&mut ws.x_free);
        stats.timings.global += t.elapsed();

        if !ws.rows.rows.is_empty() {
            let t = Instant::now();
            for (d, &vi) in pd.free_vertices().iter().enumerate() {
                ws.x_alt[d] = x[vi as usize];
            }
            let matrix = pd.matrix();
            // Warm start: the better of the projected unconstrained solution and the projected
            // previous iterate.
            let f_new = projected_objective(
                matrix,
                &ws.b,
                &ws.rows.rows,
                &mut ws.x_free,
                &mut ws.gradient,
            );
            let f_old = projected_objective(
                matrix,
                &ws.b,
                &ws.rows.rows,
                &mut ws.x_alt,
                &mut ws.gradient,
            );
            if f_old < f_new {
                ws.x_free.copy_from_slice(&ws.x_alt);
            }
            ws.mprgp.settings = settings.mprgp;
            let problem = QpProblem {
                a: matrix,
                b: &ws.b,
                rows: &ws.rows.rows,
            };
            let qp = ws
                .mprgp
                .solve(&problem, &mut ws.x_free)
                .map_err(|e| FreezeReason::ContactSolve(e.to_string()))?;
            ws.forces.compute(&problem, &ws.x_free, &mut ws.lambda);
            stats.mprgp_iterations += qp.iterations;
            stats.mprgp_cg_steps += qp.cg_steps;
            stats.kkt_residual = qp.relative_residual;
            stats.active_constraints = qp.active;
            stats.timings.mprgp += t.elapsed();
        }
        for (d, &vi) in pd.free_vertices().iter().enumerate() {
            x[vi as usize] = ws.x_free[d];
        }

        // Re-detect: penetrations without a row (a proxy that was outside at the prediction, or
        // a vertex pushed into a second obstacle) get one for the next iteration; `build_rows`
        // skips contacts a row already covers.
        let t = Instant::now();
        ws.contacts.clear();
        detect_contacts(
            proxies,
            x,
            obstacles,
            0.0,
            &[],
            &mut ws.proxy_positions,
            &mut ws.contacts,
        );
        ws.contacts.retain(|c| c.depth > 1e-9);
        if !ws.contacts.is_empty() {
            let added = build_rows(&mut ws.contacts, proxies, pd.dof_map(), x, &mut ws.rows);
            if added > 0
                && it == iterations
                && iterations < settings.pd_iterations.max(1) + EXTRA_ITERATIONS
            {
                iterations += 1;
            }
        }
        stats.timings.detect += t.elapsed();
    }
    stats.pd_iterations = it;
    stats.constraints = ws.rows.rows.len();
    if !all_finite(x) {
        return Err(FreezeReason::NonFiniteState);
    }
    Ok(())
}

/// Projects `x` onto the rows (closed form for decoupled rows) and returns `1/2 x'Lx - b'x`.
fn projected_objective(
    matrix: &SymmetricMatrix,
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

/// Phases 6-7: velocities, Coulomb friction against obstacles, deformation damping, guard.
fn respond_and_guard(
    body: &mut SoftBody,
    obstacles: &[Obstacle],
    settings: &WorldSettings,
    h: f64,
) -> Result<(), FreezeReason> {
    let SoftBody {
        pd,
        x,
        v,
        material,
        proxies,
        ws,
        ..
    } = body;
    let Some(pd) = pd.as_ref() else {
        return Err(FreezeReason::Factorization("missing system".into()));
    };
    let masses = pd.masses();
    let dof = pd.dof_map();
    let ke_before: f64 = 0.5
        * v.iter()
            .zip(masses)
            .map(|(vi, m)| m * vi.norm_squared())
            .sum::<f64>();
    for i in 0..x.len() {
        v[i] = (x[i] - ws.x_start[i]) / h;
    }

    // Friction: per active row, a tangential impulse bounded by mu times the normal impulse
    // (lambda h), opposing the proxy's velocity relative to the obstacle.
    if !ws.rows.rows.is_empty() {
        let problem = QpProblem {
            a: pd.matrix(),
            b: &ws.b,
            rows: &ws.rows.rows,
        };
        ws.forces.compute(&problem, &ws.x_free, &mut ws.lambda);
        for (j, c) in ws.rows.contacts.iter().enumerate() {
            let lambda = ws.lambda[j];
            if lambda <= 0.0 {
                continue;
            }
            let obstacle = &obstacles[c.obstacle as usize];
            let mu = (material.friction * obstacle.friction()).sqrt();
            let proxy = &proxies[c.proxy as usize];
            let mut inv_m_eff = 0.0;
            for k in 0..4 {
                let vk = proxy.vertices[k] as usize;
                if proxy.weights[k] != 0.0 && dof[vk] != PINNED {
                    inv_m_eff += proxy.weights[k] * proxy.weights[k] / masses[vk];
                }
            }
            if !(inv_m_eff > 0.0) {
                continue;
            }
            let rel = proxy.velocity(v) - obstacle.velocity_at(&c.point);
            let vt = rel - c.normal * c.normal.dot(&rel);
            let speed = vt.norm();
            if speed < 1e-12 {
                continue;
            }
            let impulse = (speed / inv_m_eff).min(mu * lambda * h);
            let dp = -vt * (impulse / speed);
            for k in 0..4 {
                let vk = proxy.vertices[k] as usize;
                if proxy.weights[k] != 0.0 && dof[vk] != PINNED {
                    v[vk] += proxy.weights[k] * dp / masses[vk];
                }
            }
        }
    }

    // Damping of the deformation only: rigid translation and rotation are kept.
    if material.damping > 0.0 {
        damp_deformation(x, v, masses, dof, (-material.damping * h).exp());
    }

    // Guard.
    if !(all_finite(x) && all_finite(v)) {
        return Err(FreezeReason::NonFiniteState);
    }
    let max_speed = v.iter().map(|vi| vi.norm()).fold(0.0, f64::max);
    if max_speed > settings.max_speed {
        return Err(FreezeReason::SpeedLimit { speed: max_speed });
    }
    let total_mass: f64 = masses.iter().sum();
    let ke_after: f64 = 0.5
        * v.iter()
            .zip(masses)
            .map(|(vi, m)| m * vi.norm_squared())
            .sum::<f64>();
    let reference = ke_before.max(0.5 * total_mass);
    if ke_after > settings.runaway_energy_factor * reference {
        return Err(FreezeReason::EnergyRunaway {
            before: ke_before,
            after: ke_after,
        });
    }
    Ok(())
}

/// Scales the non-rigid part of the free vertices' velocities by `factor`.
fn damp_deformation(x: &[Vec3], v: &mut [Vec3], masses: &[f64], dof: &[u32], factor: f64) {
    let total: f64 = masses.iter().sum();
    if !(total > 0.0) {
        return;
    }
    let c = x.iter().zip(masses).map(|(p, &m)| m * p).sum::<Vec3>() / total;
    let vcm = v.iter().zip(masses).map(|(u, &m)| m * u).sum::<Vec3>() / total;
    let mut l = Vec3::zeros();
    let mut inertia = Mat3::zeros();
    for ((p, u), &m) in x.iter().zip(v.iter()).zip(masses) {
        let r = p - c;
        l += m * r.cross(&(u - vcm));
        inertia += m * (Mat3::identity() * r.norm_squared() - r * r.transpose());
    }
    let omega = inertia.try_inverse().map_or(Vec3::zeros(), |inv| inv * l);
    for i in 0..v.len() {
        if dof[i] == PINNED {
            continue;
        }
        let rigid = vcm + omega.cross(&(x[i] - c));
        v[i] = rigid + (v[i] - rigid) * factor;
    }
}

/// Deepest penetration (m) of any proxy into any obstacle at the body's positions.
fn max_penetration(body: &mut SoftBody, obstacles: &[Obstacle]) -> f64 {
    let ws = &mut body.ws;
    ws.contacts.clear();
    detect_contacts(
        &body.proxies,
        &body.x,
        obstacles,
        0.0,
        &[],
        &mut ws.proxy_positions,
        &mut ws.contacts,
    );
    ws.contacts.iter().map(|c| c.depth).fold(0.0, f64::max)
}
