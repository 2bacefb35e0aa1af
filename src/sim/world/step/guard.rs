//! Phase 6 of a step: a failed QP freezes its bodies; otherwise deformation damping, settling
//! and the guard that freezes a body whose state ran away.

use std::time::Instant;

use super::super::audit::kinetic;
use super::super::body::SoftBody;
use super::super::report::FreezeReason;
use super::super::settings::WorldSettings;
use super::super::settling::{RigidMotion, settle};
use crate::sim::contact::{ObstacleCollider, detect_contacts};
use crate::sim::math::{Vec3, all_finite};
use crate::sim::pd::PINNED;

/// Phase 6 for one body: a failed QP freezes it; otherwise damping (settling only if it
/// `settles`: see [`held`] and the caller), the guard, the deepest obstacle penetration, and
/// the new last good state.
pub(super) fn finish(
    body: &mut SoftBody,
    obstacles: &[ObstacleCollider],
    settings: &WorldSettings,
    h: f64,
    failure: Option<FreezeReason>,
    settles: bool,
) {
    if body.is_static() {
        return;
    }
    let t = Instant::now();
    let verdict = match failure {
        Some(reason) => Err(reason),
        None => guard(body, settings, h, settles),
    };
    match verdict {
        Ok(()) => {
            body.last_step.0.max_penetration = max_penetration(body, obstacles);
            body.last_step.0.inverted_tets = inverted_tets(&body.mesh, &body.x);
            body.good_x.copy_from_slice(&body.x);
            body.good_v.copy_from_slice(&body.v);
        }
        Err(reason) => {
            body.freeze(reason);
            body.last_step.1 = body.frozen.clone();
        }
    }
    body.last_step.0.timings.velocity += t.elapsed();
}

/// Whether the body is held or carried, and so never settles: pinned vertices, attachments, a
/// grab spring, or a moving obstacle under it (a tilting plane must be able to tip a block that
/// rests on it at exactly its friction angle).
pub(super) fn held(body: &SoftBody, obstacles: &[ObstacleCollider]) -> bool {
    body.grab.is_some()
        || body.pinned.iter().any(|&p| p)
        || body.attach_k.iter().any(|&k| k > 0.0)
        || body.ws.touching.iter().any(|&o| {
            obstacles
                .get(o as usize)
                .is_some_and(ObstacleCollider::is_moving)
        })
}

/// Damping of the deformation and, where the body `settles`, settling; then the checks that
/// freeze a body.
fn guard(
    body: &mut SoftBody,
    settings: &WorldSettings,
    h: f64,
    settles: bool,
) -> Result<(), FreezeReason> {
    let SoftBody {
        pd,
        x,
        v,
        material,
        ws,
        slow_for,
        last_step,
        ..
    } = body;
    let Some(pd) = pd.as_ref() else {
        return Err(FreezeReason::Factorization("missing system".into()));
    };
    let masses = pd.masses();
    let ke_before = kinetic(masses, &ws.v_start);
    // The rigid motion, computed once for both dampings: damping the deformation leaves it as
    // it is (what it scales carries no momentum), and a settling body has no pinned vertex.
    let damps = material.damping > 0.0;
    let rigid = (damps || settles)
        .then(|| RigidMotion::of(x, v, masses))
        .flatten();
    // Damping of the deformation only: rigid translation and rotation are kept.
    let auditing = last_step.0.energy.is_some();
    let ke_undamped = if auditing { kinetic(masses, v) } else { 0.0 };
    if let Some(rigid) = rigid.as_ref().filter(|_| damps) {
        damp_deformation(x, v, rigid, pd.dof_map(), (-material.damping * h).exp());
    }
    let ke_damped = if auditing { kinetic(masses, v) } else { 0.0 };
    last_step.0.settling = match rigid.as_ref().filter(|_| settles) {
        Some(rigid) => settle(&settings.settling, rigid, x, v, slow_for, h),
        None => {
            *slow_for = 0.0;
            false
        }
    };
    if let Some(audit) = &mut last_step.0.energy {
        audit.damping = ke_damped - ke_undamped;
        audit.settling = kinetic(masses, v) - ke_damped;
    }
    if !(all_finite(x) && all_finite(v)) {
        return Err(FreezeReason::NonFiniteState);
    }
    let max_speed = v.iter().map(|vi| vi.norm()).fold(0.0, f64::max);
    if max_speed > settings.max_speed {
        return Err(FreezeReason::SpeedLimit { speed: max_speed });
    }
    let total_mass: f64 = masses.iter().sum();
    let ke_after = kinetic(masses, v);
    let reference = ke_before.max(0.5 * total_mass);
    if ke_after > settings.runaway_energy_factor * reference {
        return Err(FreezeReason::EnergyRunaway {
            before: ke_before,
            after: ke_after,
        });
    }
    Ok(())
}

/// Scales the free vertices' velocities relative to the body's `rigid` motion by `factor`.
fn damp_deformation(x: &[Vec3], v: &mut [Vec3], rigid: &RigidMotion, dof: &[u32], factor: f64) {
    for i in 0..v.len() {
        if dof[i] == PINNED {
            continue;
        }
        let r = rigid.velocity_at(&x[i]);
        v[i] = r + (v[i] - r) * factor;
    }
}

/// Deepest penetration (m) of any proxy into any obstacle at the body's positions.
fn max_penetration(body: &mut SoftBody, obstacles: &[ObstacleCollider]) -> f64 {
    let ws = &mut body.ws;
    ws.contacts.clear();
    detect_contacts(
        &body.colliders,
        &body.x,
        obstacles,
        0.0,
        &body.collider_slack,
        &mut ws.proxy_positions,
        &mut ws.contacts,
    );
    ws.contacts.iter().map(|c| c.depth).fold(0.0, f64::max)
}

/// Tets whose volume is zero or negative at `x`.
fn inverted_tets(mesh: &crate::sim::mesh::TetMesh, x: &[Vec3]) -> usize {
    mesh.tets()
        .iter()
        .filter(|t| {
            let [a, b, c, d] = t.map(|v| x[v as usize]);
            crate::sim::mesh::signed_volume(&a, &b, &c, &d) <= 0.0
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::mesh::TetMesh;

    #[test]
    fn inverted_tets_counts_mirrored_and_flat_tets() {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.5), 2);
        let rest = mesh.rest_positions().to_vec();
        assert_eq!(inverted_tets(&mesh, &rest), 0);
        let mirrored: Vec<Vec3> = rest.iter().map(|p| Vec3::new(-p.x, p.y, p.z)).collect();
        assert_eq!(inverted_tets(&mesh, &mirrored), mesh.tet_count());
        let flat: Vec<Vec3> = rest.iter().map(|p| Vec3::new(p.x, 0.0, p.z)).collect();
        assert_eq!(inverted_tets(&mesh, &flat), mesh.tet_count());
    }
}
