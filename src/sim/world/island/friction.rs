//! Coulomb friction inside the implicit step: the projected update of every contact's friction
//! force after each constrained global step.

use super::{Island, IslandContact, Layout};
use crate::sim::contact::lcp::tangents;
use crate::sim::contact::{FrictionModel, Obstacle};
use crate::sim::math::Vec3;
use crate::sim::world::WorldSettings;
use crate::sim::world::body::SoftBody;

impl Island {
    /// One projected Jacobi update of every contact's friction force after a constrained step
    /// (Coulomb friction inside the implicit step, as in projective dynamics with dry frictional
    /// contact). With the contact's relative tangential displacement over the step `s` at the
    /// new iterate and `s_c = sum_v w_v^2 / m_v`, the force that would cancel it if only the
    /// contact's own masses moved is `-s / (h^2 s_c)`:
    ///
    /// `f <- Proj_{|f| <= mu lambda}(f - s / (h^2 s_c))`
    ///
    /// projected on the disc (cone) or the square of the contact's tangents (pyramid). Because
    /// `A >= M / h^2`, a force moves its vertices at most as far as the mass-only estimate says,
    /// so the iteration never overshoots and converges to the sticking force inside the cone,
    /// or to `mu lambda` against the slip on its rim. The forces enter the next iteration's QP
    /// as external forces, so the whole body (not only the contact vertices) carries them, and
    /// they are remembered at the contacts' vertices to start the next step.
    pub(super) fn update_friction(
        &mut self,
        id: u32,
        bodies: &[SoftBody],
        obstacles: &[Obstacle],
        layout: Layout<'_>,
        settings: &WorldSettings,
        h: f64,
    ) {
        self.friction_force
            .iter_mut()
            .for_each(|f| *f = Vec3::zeros());
        self.groups.clear();
        self.slips.clear();
        // Pass 1: each contact's slip, compliance and group (the pair of bodies, or the body and
        // the obstacle, it connects; `sign` orients a soft contact within its pair).
        for (i, contact) in self.contacts.iter().enumerate() {
            let limit = self.mu[i] * self.lambda[i];
            let (terms, count) = contact.terms(bodies);
            let mut moved = Vec3::zeros();
            let mut compliance = 0.0;
            for &(b, v, w) in &terms[..count] {
                let body = &bodies[b as usize];
                let u = layout.unknown(id, bodies, b as usize, v as usize);
                let now = u.map_or(body.x[v as usize], |u| self.x[u as usize]);
                moved += w * (now - body.start_position(v as usize));
                if let (Some(_), Some(pd)) = (u, body.pd.as_ref()) {
                    let m = pd.masses()[v as usize];
                    if m > 0.0 {
                        compliance += w * w / m;
                    }
                }
            }
            let (key, sign, inv_mass) = match contact {
                IslandContact::Obstacle { body, contact } => {
                    moved -= h * obstacles[contact.obstacle as usize].velocity_at(&contact.point);
                    (
                        (*body, u32::MAX - contact.obstacle),
                        1.0,
                        self.inverse_mass(*body),
                    )
                }
                IslandContact::Soft(_) | IslandContact::Edge(_) => {
                    let (a, b) = contact.soft_bodies().unwrap_or_default();
                    let inv = if a == b {
                        0.0
                    } else {
                        self.inverse_mass(a) + self.inverse_mass(b)
                    };
                    ((a.min(b), a.max(b)), if a <= b { 1.0 } else { -1.0 }, inv)
                }
            };
            let n = contact.normal();
            let slip = moved - n * n.dot(&moved);
            let active = limit > 0.0 && compliance > 0.0;
            let group = match self.groups.iter().position(|g| g.0 == key) {
                Some(g) => g,
                None => {
                    self.groups.push((key, Vec3::zeros(), 0.0, inv_mass));
                    self.groups.len() - 1
                }
            };
            if active {
                self.groups[group].1 += sign * slip;
                self.groups[group].2 += 1.0;
            }
            self.slips.push((slip, compliance, group as u32, sign));
        }
        // Pass 2: the projected update. The slip's mean over a group moves with the bodies'
        // whole masses (the rigid sliding of one body on the other), so that part is cancelled
        // with the group's effective mass `1 / (1/M_a + 1/M_b)` shared by its contacts; the
        // rest moves with the contact's own masses (the mass-only estimate above). One
        // compliance for both would take hundreds of iterations to build up the force that
        // holds a block, as the contacts at the Coulomb limit leave the work to the others.
        for (i, contact) in self.contacts.iter().enumerate() {
            let limit = self.mu[i] * self.lambda[i];
            let (slip, compliance, group, sign) = self.slips[i];
            if !(limit > 0.0 && compliance > 0.0) {
                self.friction[i] = Vec3::zeros();
                continue;
            }
            let (_, sum, count, inv_mass) = self.groups[group as usize];
            let mean = sum / count;
            let local = slip - sign * mean;
            let rigid = if inv_mass > 0.0 {
                sign * mean / (h * h * inv_mass * count)
            } else {
                sign * mean / (h * h * compliance)
            };
            let n = contact.normal();
            let trial = self.friction[i] - local / (h * h * compliance) - rigid;
            let trial = trial - n * n.dot(&trial);
            let f = match settings.lcp.friction {
                FrictionModel::Cone => {
                    let norm = trial.norm();
                    if norm > limit {
                        trial * (limit / norm)
                    } else {
                        trial
                    }
                }
                FrictionModel::Pyramid => {
                    let (t1, t2) = tangents(&n);
                    t1 * t1.dot(&trial).clamp(-limit, limit)
                        + t2 * t2.dot(&trial).clamp(-limit, limit)
                }
            };
            self.friction[i] = f;
            let (terms, count) = contact.terms(bodies);
            for &(b, v, w) in &terms[..count] {
                if let Some(u) = layout.unknown(id, bodies, b as usize, v as usize) {
                    self.friction_force[u as usize] += w * f;
                }
            }
        }
    }

    /// `1 / M` (1/kg) of a member body's free vertices; 0 for a body outside the island.
    fn inverse_mass(&self, body: u32) -> f64 {
        self.members
            .iter()
            .position(|&m| m == body)
            .map_or(0.0, |k| self.member_inverse_mass[k])
    }
}
