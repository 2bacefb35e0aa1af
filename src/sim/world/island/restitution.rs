//! The island's restitution stage (phase 5 of the substep, called by the step's `respond`
//! after the position solve and before the velocity LCP): restitution by Newton's rule — a
//! bouncing contact should leave at `e` times the normal speed it approached with at the start
//! of the step (a ratio of speeds, not Poisson's ratio of impulses) — applied as a rebound
//! force through the bodies' prefactored matrices, one scale per island.
//!
//! Which contacts bounce is set when they join the island ([`Island::setup_contacts`]:
//! approach speed at the start of the step, [`approach_speed`], above the threshold, and not
//! against a coupled rigid body).

use super::Island;
use super::contact::IslandContact;
use super::layout::Layout;
use crate::sim::contact::ObstacleCollider;
use crate::sim::math::Vec3;
use crate::sim::world::body::SoftBody;

/// The restitution data of one island's contacts, set as they join it
/// ([`Island::setup_contacts`]) and read by [`Island::restitution_force`] after the position
/// solve (and by the velocity LCP, which lets a contact that does not bounce take back at most
/// its push).
#[derive(Debug, Default, Clone)]
pub(crate) struct Restitution {
    /// Per contact: its restitution coefficient where its approach speed at the start of the
    /// step exceeds the threshold, else 0 (see [`Island::restitution_force`]).
    pub(crate) coefficient: Vec<f64>,
    /// Per contact: its normal approach speed at the start of the step (m/s).
    pub(super) approach: Vec<f64>,
    /// `sum_c e_c lambda_c` of the bouncing contacts (N), set by the restitution force.
    pub(super) weight: f64,
}

impl Island {
    /// Restitution, first half. Every contact that closed faster than the threshold at the start
    /// of the step should leave at `e` times that speed (Newton's rule, eq. (9) of the regions
    /// paper). The rebound is applied as a force with the shape of the step's contact forces,
    /// `F = sum_c e_c lambda_c n_c J_c'` (into [`Island::force`]), scaled by a factor `alpha`
    /// chosen so that the contacts' normal velocity, averaged with the weights `e_c lambda_c`,
    /// reaches the same average of `e_c` times their approach speeds. Through each body's
    /// prefactored matrix (`dv = alpha A^-1 F / h`, [`Island::restitution_scale`]) the rebound
    /// spreads through the body as the impact did: a velocity-level impulse on the few contact
    /// vertices alone would hand them the whole body's rebound momentum. Returns the average
    /// velocity the contacts still lack (m/s), or `None` if nothing bounces.
    pub fn restitution_force(
        &mut self,
        id: u32,
        bodies: &[SoftBody],
        obstacles: &[ObstacleCollider],
        layout: Layout<'_>,
    ) -> Option<f64> {
        self.force.iter_mut().for_each(|f| *f = Vec3::zeros());
        let (mut weight, mut deficit) = (0.0, 0.0);
        for (i, contact) in self.contacts.iter().enumerate() {
            let push = self.restitution.coefficient[i] * self.lambda[i];
            if !(push > 0.0) {
                continue;
            }
            let n = contact.normal();
            let (terms, count) = contact.terms(bodies);
            let mut velocity = Vec3::zeros();
            for &(b, v, w) in &terms[..count] {
                velocity += w * bodies[b as usize].velocity(v as usize);
                if let Some(u) = layout.unknown(id, bodies, b as usize, v as usize) {
                    self.force[u as usize] += (push * w) * n;
                }
            }
            if let IslandContact::Obstacle { contact, .. } = contact {
                velocity -= obstacles[contact.obstacle as usize].velocity_at(&contact.point);
            }
            weight += push;
            deficit += push
                * (self.restitution.coefficient[i] * self.restitution.approach[i]
                    - n.dot(&velocity));
        }
        self.restitution.weight = weight;
        (weight > 0.0 && deficit > 0.0).then(|| deficit / weight)
    }

    /// Restitution, second half: the factor `alpha` for a deficit `deficit` (m/s), given each
    /// member's response `A^-1 F / h` to the force of [`Island::restitution_force`] per free
    /// vertex in its workspace (`ws.x_free`). The contacts' weighted normal velocity change is
    /// `sum_c e_c lambda_c n_c . J_c dv = F . dv`.
    pub fn restitution_scale(&self, bodies: &[SoftBody], layout: Layout<'_>, deficit: f64) -> f64 {
        let mut response = 0.0;
        for &b in &self.members {
            let body = &bodies[b as usize];
            let o = layout.offset_of[b as usize] as usize;
            let n = body.free_count();
            response += self.force[o..o + n]
                .iter()
                .zip(&body.ws.x_free[..n])
                .map(|(f, dv)| f.dot(dv))
                .sum::<f64>();
        }
        if response > 0.0 {
            deficit * self.restitution.weight / response
        } else {
            0.0
        }
    }
}

/// The normal approach speed (m/s) of a contact at the start of the step (positive when
/// closing).
pub(super) fn approach_speed(
    contact: &IslandContact,
    bodies: &[SoftBody],
    obstacles: &[ObstacleCollider],
) -> f64 {
    let (terms, count) = contact.terms(bodies);
    let mut v: Vec3 = terms[..count]
        .iter()
        .map(|&(b, i, w)| w * bodies[b as usize].start_velocity(i as usize))
        .sum();
    if let IslandContact::Obstacle { contact, .. } = contact {
        v -= obstacles[contact.obstacle as usize].velocity_at(&contact.point);
    }
    -contact.normal().dot(&v)
}
