//! Coulomb friction inside the implicit step: the projected update of every contact's friction
//! force after each constrained global step.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::Island;
use super::contact::{ContactKey, IslandContact};
use super::layout::Layout;
use super::rigid::NO_RIGID;
use crate::sim::contact::lcp::tangents;
use crate::sim::contact::{FrictionModel, ObstacleCollider};
use crate::sim::math::Vec3;
use crate::sim::world::body::SoftBody;
use crate::sim::world::settings::WorldSettings;

/// The contacts between one pair of bodies, or between a body and an obstacle, in one friction
/// update.
#[derive(Debug, Clone, Copy)]
pub(super) struct FrictionGroup {
    /// `(body, other body)` with the smaller index first, or `(body, u32::MAX - obstacle)`.
    key: (u32, u32),
    /// Sum of the carrying contacts' slips (m), oriented from the first body.
    slip: Vec3,
    /// Number of carrying contacts (with a normal force and a movable vertex).
    count: f64,
    /// The bodies that slide rigidly against each other: both of a pair, the body alone
    /// against an obstacle, none for contacts of a body with itself.
    bodies: [Option<u32>; 2],
    /// How far the mean slip moves per newton of the group's force (m/N):
    /// `sum_b k_b u_b' A_b^-1 d_b` over those bodies, `d_b` the force's distribution over the
    /// body's contact vertices, `u_b` the mean slip's, and `k_b` the number of groups the body
    /// slides in (see [`Island::update_friction`]); 0 without rigid sliding.
    compliance: f64,
    /// Sum of the carrying contacts' normal forces (N).
    normal_force: f64,
    /// Sum of the carrying contacts' friction limits `mu lambda` (N).
    limit: f64,
    /// Sum of the carrying contacts' normals weighted by their normal forces (N), oriented from
    /// the first body.
    normal: Vec3,
    /// Index of the group's total force in `Island::group_force` (set in the update's pass 2).
    force: usize,
    /// The coupled rigid body of an obstacle group ([`super::rigid`]; `NO_RIGID` for others),
    /// which the group's force moves too, and the sum of the carrying contacts' points (m).
    rigid: u32,
    points: Vec3,
}

/// Where a group's step-long values are (see [`Island::update_friction`]): its index in
/// `Island::group_force` and in `Island::group_compliance`, `u32::MAX` where it has none yet.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepGroup {
    force: u32,
    compliance: u32,
}

impl StepGroup {
    const NONE: Self = Self {
        force: u32::MAX,
        compliance: u32::MAX,
    };
}

/// Cosine of the largest angle (25 degrees) between a contact's normals in two steps for its
/// local friction part to carry over.
const CARRY_NORMAL_COS: f64 = 0.9;

/// The contact forces a step ends with, for the next step to start from: its friction and
/// the normal forces of its contacts.
#[derive(Debug, Default)]
pub(crate) struct ContactMemory {
    /// Per friction group (keyed as [`FrictionGroup::key`]): its total force (N).
    groups: Vec<((u32, u32), Vec3)>,
    /// Per contact that carried friction, sorted by key: its local part (N; see
    /// [`Island::update_friction`]) and its normal.
    locals: Vec<(ContactKey, Vec3, Vec3)>,
    /// Per contact that pushed, sorted by key: its normal force `lambda` (N) and its normal.
    normal_forces: Vec<(ContactKey, f64, Vec3)>,
}

clone_by_field!(ContactMemory {
    groups,
    locals,
    normal_forces
});

impl ContactMemory {
    /// Forgets everything (body indices changed, or a new step's memory begins).
    pub fn clear(&mut self) {
        self.groups.clear();
        self.locals.clear();
        self.normal_forces.clear();
    }

    /// Forgets the normal forces alone (a test's cold start of the contact QPs).
    #[cfg(test)]
    pub fn forget_normal_forces(&mut self) {
        self.normal_forces.clear();
    }

    /// Adds the friction and normal forces `island` ends its step with.
    pub fn remember(&mut self, island: &Island) {
        self.groups.extend(
            island
                .friction_update
                .groups
                .iter()
                .filter(|g| g.count > 0.0)
                .map(|g| island.friction_update.group_force[g.force]),
        );
        for (i, contact) in island.contacts.iter().enumerate() {
            let Some(key) = contact.key() else { continue };
            let lambda = island.lambda[i];
            if island.mu[i] * lambda > 0.0 {
                self.locals
                    .push((key, island.friction_update.local[i], contact.normal()));
            }
            if lambda > 0.0 {
                self.normal_forces.push((key, lambda, contact.normal()));
            }
        }
    }

    /// The memory as plain data: per friction group its key and force (N); per contact that
    /// carried friction its key, local part (N) and normal; per contact that pushed its key,
    /// normal force (N) and normal (for saved worlds).
    #[allow(clippy::type_complexity)]
    pub fn parts(
        &self,
    ) -> (
        &[((u32, u32), Vec3)],
        &[(ContactKey, Vec3, Vec3)],
        &[(ContactKey, f64, Vec3)],
    ) {
        (&self.groups, &self.locals, &self.normal_forces)
    }

    /// Replaces the memory by [`ContactMemory::parts`]' data; the contacts' lists are sorted
    /// here (a saved world's are, unless its bytes were edited).
    pub fn set_parts(
        &mut self,
        groups: impl Iterator<Item = ((u32, u32), Vec3)>,
        locals: impl Iterator<Item = (ContactKey, Vec3, Vec3)>,
        normal_forces: impl Iterator<Item = (ContactKey, f64, Vec3)>,
    ) {
        self.clear();
        self.groups.extend(groups);
        self.locals.extend(locals);
        self.normal_forces.extend(normal_forces);
        self.finish();
    }

    /// Sorts what was remembered for lookup; call once every island is in.
    pub fn finish(&mut self) {
        self.locals.sort_unstable_by_key(|(key, _, _)| *key);
        self.normal_forces.sort_unstable_by_key(|(key, _, _)| *key);
    }

    /// The local part contact `key` ended the last step with, if it carried friction then and
    /// its normal then was within 25 degrees of `normal` (a vertex that slid onto another face of
    /// the other body starts afresh).
    fn local(&self, key: &ContactKey, normal: &Vec3) -> Option<Vec3> {
        let at = self.locals.binary_search_by_key(key, |(k, _, _)| *k).ok()?;
        let (_, local, n) = self.locals[at];
        (n.dot(normal) > CARRY_NORMAL_COS).then_some(local)
    }

    /// The normal force (N) contact `key` ended the last step with, if it pushed then and its
    /// normal then was within 25 degrees of `normal`.
    pub(super) fn normal_force(&self, key: &ContactKey, normal: &Vec3) -> Option<f64> {
        let at = self
            .normal_forces
            .binary_search_by_key(key, |(k, _, _)| *k)
            .ok()?;
        let (_, lambda, n) = self.normal_forces[at];
        (n.dot(normal) > CARRY_NORMAL_COS).then_some(lambda)
    }
}

/// `v` projected on the friction set of radius `limit` around the normal `n`: the disc (cone)
/// or the square along `n`'s tangents (pyramid).
fn project(v: Vec3, n: &Vec3, limit: f64, model: FrictionModel) -> Vec3 {
    let v = v - n * n.dot(&v);
    match model {
        FrictionModel::Cone => {
            let norm = v.norm();
            if norm > limit { v * (limit / norm) } else { v }
        }
        FrictionModel::Pyramid => {
            let (t1, t2) = tangents(n);
            t1 * t1.dot(&v).clamp(-limit, limit) + t2 * t2.dot(&v).clamp(-limit, limit)
        }
    }
}

/// `share + local`, with `local` projected on what the contact's friction set leaves around
/// `share`, symmetrically: on the disc of radius `limit - |share|` (cone), or per tangent on
/// `limit - |share_t|` (pyramid). Clipping the sum instead would cut the local parts that point
/// along the share and keep those against it, and so lose part of the group's force exactly
/// when the group is near its limit.
fn combine(share: Vec3, local: Vec3, n: &Vec3, limit: f64, model: FrictionModel) -> Vec3 {
    let local = local - n * n.dot(&local);
    match model {
        FrictionModel::Cone => {
            let share = project(share, n, limit, model);
            share + project(local, n, (limit - share.norm()).max(0.0), model)
        }
        FrictionModel::Pyramid => {
            let (t1, t2) = tangents(n);
            [t1, t2]
                .iter()
                .map(|t| {
                    let s = t.dot(&share).clamp(-limit, limit);
                    let room = limit - s.abs();
                    t * (s + t.dot(&local).clamp(-room, room))
                })
                .sum()
        }
    }
}

/// The friction update's state of one island ([`Island::update_friction`]): the groups of
/// contacts per pair of bodies (or body and obstacle), their forces and compliances in this step,
/// each contact's force beyond its group's share, and the scratch of the compliance solves.
#[derive(Debug, Default, Clone)]
pub(crate) struct FrictionUpdate {
    /// Scratch of the friction update: per member, the number of groups it slides in.
    pub(super) member_degree: Vec<f64>,
    /// Scratch of the friction update: per contact `(slip, compliance, group, sign)`.
    pub(super) slips: Vec<(Vec3, f64, u32, f64)>,
    /// Scratch of the friction update: the contacts per pair of bodies (or body and obstacle).
    pub(super) groups: Vec<FrictionGroup>,
    /// Scratch of the friction update: each group's index in `groups`, by its key (a scan of
    /// the groups per contact grew with contacts x groups in large islands).
    pub(super) group_of: HashMap<(u32, u32), u32>,
    /// Per group (pair of bodies, or body and obstacle): its total friction force (N) in this
    /// step (see [`Island::update_friction`]).
    pub(super) group_force: Vec<((u32, u32), Vec3)>,
    /// Per contact: the part of its friction force beyond its share of its group's (N).
    pub(super) local: Vec<Vec3>,
    /// Per group of this step: the compliances of its bodies (m/N; see
    /// [`FrictionGroup`]), computed when the group first appears in the step.
    pub(super) group_compliance: Vec<((u32, u32), [f64; 2])>,
    /// Per group key of this step: where its values are in `group_force` and
    /// `group_compliance` (scans of those lists per group grew with the square of the groups).
    pub(super) step_groups: HashMap<(u32, u32), StepGroup>,
    /// Scratch of the compliance solves, per free vertex of one body: the force's distribution.
    pub(super) compliance_d: Vec<f64>,
    /// Scratch of the compliance solves: the mean slip's distribution.
    pub(super) compliance_u: Vec<f64>,
    /// Scratch of the compliance solves: the response.
    pub(super) compliance_z: Vec<f64>,
    /// Scratch of the compliance solves' sparse solves.
    pub(super) solve_scratch: crate::sim::sparse::SolveScratch,
    /// Scratch of the friction update: per rigid body, the number of groups it slides in.
    pub(super) rigid_degree: Vec<f64>,
    /// Scratch of the friction update: per rigid body, the number of its contacts that carry
    /// friction.
    pub(super) rigid_carrying: Vec<f64>,
}

impl Island {
    /// Starts the step's friction from the last step's: each group's total force, each
    /// contact's local part, and the per-vertex forces the final update found, which the first
    /// constrained step applies. The first update then corrects what was applied, as every
    /// later one does; starting from zero instead, every step's first iteration would let
    /// resting bodies slip.
    ///
    /// The local parts are carried per contact ([`IslandContact::key`]): the first QP applies
    /// them (inside the per-vertex forces), so a first update that started them from zero would
    /// drop them after the QP had already moved the body with them. Where a soft body sags,
    /// that drop and the force's rebuild over the step's iterations did positive work every
    /// step: the energy audit measured +1 to +3 J per 0.5 s from friction on a 0.5 m cube at
    /// E = 1e4 Pa resting on the floor, which walked 17 cm along its diagonal.
    pub(super) fn remember_friction(&mut self, bodies: &[SoftBody], memory: &ContactMemory) {
        self.friction_update.group_force.clear();
        self.friction_update.group_force.extend(
            memory
                .groups
                .iter()
                .filter(|(key, _)| self.members.binary_search(&key.0).is_ok()),
        );
        self.friction_update.step_groups.clear();
        for (at, (key, _)) in self.friction_update.group_force.iter().enumerate() {
            // The first of equal keys, as a scan would find.
            self.friction_update
                .step_groups
                .entry(*key)
                .or_insert(StepGroup {
                    force: at as u32,
                    compliance: u32::MAX,
                });
        }
        for (i, contact) in self.contacts.iter().enumerate() {
            if let Some(local) = contact
                .key()
                .and_then(|key| memory.local(&key, &contact.normal()))
            {
                self.friction_update.local[i] = local;
            }
        }
        self.friction_force.clear();
        for &b in &self.members {
            let body = &bodies[b as usize];
            let n = body.free_count();
            match body.ws.friction.len() == n {
                true => self.friction_force.extend_from_slice(&body.ws.friction),
                false => self
                    .friction_force
                    .extend(std::iter::repeat_n(Vec3::zeros(), n)),
            }
        }
        self.force.clear();
        self.force.extend_from_slice(&self.friction_force);
    }

    /// The index in `members` (increasing) of body `b`.
    fn member_slot(&self, b: u32) -> Option<usize> {
        self.members.binary_search(&b).ok()
    }

    /// Per unknown: the friction forces of the last update (N).
    pub(crate) fn friction_force(&self) -> &[Vec3] {
        &self.friction_force
    }

    /// The compliance `u_b' A_b^-1 d_b` (m/N) of each rigidly sliding body of group `gi` (see
    /// [`FrictionGroup::compliance`]), computed by one solve through the body's prefactored
    /// matrix (with the Newton solver: two, along the group's tangents, through the Newton
    /// matrix's factor of the iteration) the first time the group appears in a step and kept for the step's later
    /// iterations. `d_b` spreads a unit force over the group's carrying contacts in proportion
    /// to their normal forces, then over each contact's vertices by its weights (as pass 3
    /// applies the group's force); `u_b` averages the contacts' displacements as the group's
    /// mean slip does; `A_b` acts alike on x, y and z, so one coordinate gives it.
    fn body_compliances(
        &mut self,
        gi: usize,
        id: u32,
        bodies: &[SoftBody],
        layout: Layout<'_>,
    ) -> [f64; 2] {
        let g = self.friction_update.groups[gi];
        let known = self
            .friction_update
            .step_groups
            .get(&g.key)
            .map(|s| s.compliance);
        if let Some(&(_, c)) =
            known.and_then(|at| self.friction_update.group_compliance.get(at as usize))
        {
            return c;
        }
        let mut out = [0.0; 2];
        for (slot, b) in g.bodies.iter().enumerate() {
            let Some(b) = *b else { continue };
            let body = &bodies[b as usize];
            let Some(pd) = body.pd.as_ref() else { continue };
            let offset = layout.offset_of[b as usize] as usize;
            let n = pd.free_vertices().len();
            self.friction_update.compliance_d.clear();
            self.friction_update.compliance_d.resize(n, 0.0);
            self.friction_update.compliance_u.clear();
            self.friction_update.compliance_u.resize(n, 0.0);
            for (i, contact) in self.contacts.iter().enumerate() {
                let (_, compliance, group, sign) = self.friction_update.slips[i];
                let limit = self.mu[i] * self.lambda[i];
                if group as usize != gi || !(limit > 0.0 && compliance > 0.0) {
                    continue;
                }
                // The contact's force is `sign * share * F` (see pass 3).
                let share = sign * self.lambda[i] / g.normal_force;
                let (terms, count) = contact.terms(bodies);
                for &(tb, v, w) in &terms[..count] {
                    if tb != b {
                        continue;
                    }
                    if let Some(u) = layout.unknown(id, bodies, b as usize, v as usize) {
                        self.friction_update.compliance_d[u as usize - offset] += share * w;
                        self.friction_update.compliance_u[u as usize - offset] +=
                            sign * w / g.count;
                    }
                }
            }
            let (mean, own) = match &body.newton {
                Some(state) => {
                    // The Newton matrix does not act alike on x, y and z: the response along
                    // the group's two tangents, averaged.
                    let n = g.normal.try_normalize(1e-12).unwrap_or_else(Vec3::y);
                    let (t1, t2) = tangents(&n);
                    let (mut mean, mut own) = (0.0, 0.0);
                    for t in [t1, t2] {
                        self.friction_update.compliance_z.clear();
                        self.friction_update.compliance_z.extend(
                            self.friction_update
                                .compliance_d
                                .iter()
                                .flat_map(|&d| (d * t).data.0[0]),
                        );
                        state.system.solve_newton_matrix_with(
                            &mut self.friction_update.compliance_z,
                            &mut self.friction_update.solve_scratch,
                        );
                        let along = |a: &[f64]| {
                            a.iter()
                                .zip(self.friction_update.compliance_z.chunks_exact(3))
                                .map(|(a, z)| a * t.dot(&Vec3::new(z[0], z[1], z[2])))
                                .sum::<f64>()
                        };
                        mean += 0.5 * along(&self.friction_update.compliance_u);
                        own += 0.5 * along(&self.friction_update.compliance_d);
                    }
                    (mean, own)
                }
                None => {
                    self.friction_update.compliance_z.clear();
                    self.friction_update
                        .compliance_z
                        .extend_from_slice(&self.friction_update.compliance_d);
                    pd.solve_scalar_with(
                        &mut self.friction_update.compliance_z,
                        &mut self.friction_update.solve_scratch,
                    );
                    let dot = |a: &[f64]| {
                        a.iter()
                            .zip(&self.friction_update.compliance_z)
                            .map(|(a, z)| a * z)
                            .sum::<f64>()
                    };
                    (
                        dot(&self.friction_update.compliance_u),
                        dot(&self.friction_update.compliance_d),
                    )
                }
            };
            // The mean slip's response; the force's own (`d' A^-1 d > 0`) should contacts that
            // pull apart make it vanish.
            out[slot] = if mean > 0.0 { mean } else { own.max(0.0) };
        }
        self.friction_update
            .step_groups
            .entry(g.key)
            .or_insert(StepGroup::NONE)
            .compliance = self.friction_update.group_compliance.len() as u32;
        self.friction_update.group_compliance.push((g.key, out));
        out
    }

    /// One projected update of every contact's friction force after a constrained step
    /// (Coulomb friction inside the implicit step, as in projective dynamics with dry frictional
    /// contact). A contact's relative tangential displacement over the step at the new iterate,
    /// its slip `s`, has two parts, cancelled by two parts of its force:
    ///
    /// - **The group's share.** The mean slip `s_g` of the contacts between two bodies (or a
    ///   body and an obstacle), the sliding of one on the other, is cancelled by the group's
    ///   total force `F`, shared among the contacts in proportion to their normal forces:
    ///   `F <- Proj_{|F| <= sum mu lambda}(F - s_g / c_g)`, with `c_g = sum_b k_b u_b' A_b^-1
    ///   d_b` the exact response of the mean slip to a unit `F` through each body's system
    ///   matrix ([`FrictionGroup::compliance`], one prefactored solve per body when the group
    ///   first appears in a step), and `k_b` the number of groups the body slides in (mass
    ///   splitting: the groups update at once, and a body between two others would otherwise
    ///   be corrected twice over). The total lives on the group, not on the contacts: where two
    ///   faces press together each contact is seen from both faces, the decoupler gives a
    ///   vertex one row, and the rows move between the twins from iteration to iteration; a
    ///   contact that loses its row hands its share on instead of taking it along.
    ///
    ///   Deviation (from the earlier version of this update, which used the rigid response
    ///   `c_g = h^2 sum_b k_b / M_b`): a soft body answers a force on its contact patch mostly
    ///   locally, its patch moving many times further than the whole body would, so the rigid
    ///   step overshot every iteration, and the lagged force did positive work on the slip.
    ///   The energy audit ([`crate::sim::world::EnergyAudit`]) measured a jelly sphere
    ///   (`MaterialParams::JELLY`, 0.3 m, on the floor) gaining 30-50 J per second from friction
    ///   and rolling off by metres; with the exact response friction takes energy out and the
    ///   sphere comes to rest (`tests/sim_rest.rs`).
    /// - **The local part**, `l <- l - (s - s_g) / (h^2 s_c)` with `s_c = sum_v w_v^2 / m_v`:
    ///   the force that would cancel the rest of the slip if only the contact's own masses
    ///   moved. Because `A >= M / h^2`, it never overshoots. It is projected on what the
    ///   contact's cone (or pyramid) of radius `mu lambda` leaves around its share.
    ///
    /// The forces enter the next iteration's QP as external forces, so the whole body (not only
    /// the contact vertices) carries them. Each step starts from the last step's forces, which
    /// its first QP applies, and from the last step's group totals and local parts
    /// ([`Island::remember_friction`]), so the split (and so damped) group update converges
    /// over the steps rather than having to within one.
    pub(super) fn update_friction(
        &mut self,
        id: u32,
        bodies: &[SoftBody],
        obstacles: &[ObstacleCollider],
        layout: Layout<'_>,
        settings: &WorldSettings,
        h: f64,
    ) {
        self.friction_force
            .iter_mut()
            .for_each(|f| *f = Vec3::zeros());
        self.friction_update.groups.clear();
        self.friction_update.group_of.clear();
        self.friction_update.slips.clear();
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
            let mut rigid = NO_RIGID;
            let (key, sign, pair) = match contact {
                IslandContact::Obstacle { body, contact } => {
                    rigid = self
                        .coupled
                        .contact_rigid
                        .get(i)
                        .copied()
                        .unwrap_or(NO_RIGID);
                    // A coupled rigid body moves beyond its velocity by its displacement.
                    moved -= h * obstacles[contact.obstacle as usize].velocity_at(&contact.point)
                        + self.rigid_shift(i, &contact.point);
                    (
                        (*body, u32::MAX - contact.obstacle),
                        1.0,
                        [Some(*body), None],
                    )
                }
                IslandContact::Soft(_) | IslandContact::Edge(_) => {
                    let (a, b) = contact.soft_bodies().unwrap_or_default();
                    let pair = if a == b {
                        [None, None]
                    } else {
                        [Some(a), Some(b)]
                    };
                    ((a.min(b), a.max(b)), if a <= b { 1.0 } else { -1.0 }, pair)
                }
            };
            let n = contact.normal();
            let slip = moved - n * n.dot(&moved);
            let active = limit > 0.0 && compliance > 0.0;
            let group = match self.friction_update.group_of.entry(key) {
                Entry::Occupied(at) => *at.get() as usize,
                Entry::Vacant(at) => {
                    at.insert(self.friction_update.groups.len() as u32);
                    self.friction_update.groups.push(FrictionGroup {
                        key,
                        slip: Vec3::zeros(),
                        count: 0.0,
                        bodies: pair,
                        compliance: 0.0,
                        normal_force: 0.0,
                        limit: 0.0,
                        normal: Vec3::zeros(),
                        force: 0,
                        rigid,
                        points: Vec3::zeros(),
                    });
                    self.friction_update.groups.len() - 1
                }
            };
            if active {
                let g = &mut self.friction_update.groups[group];
                g.slip += sign * slip;
                g.count += 1.0;
                g.normal_force += self.lambda[i];
                g.limit += limit;
                g.normal += (sign * self.lambda[i]) * n;
                if let IslandContact::Obstacle { contact, .. } = contact {
                    g.points += contact.point;
                }
            }
            self.friction_update
                .slips
                .push((slip, compliance, group as u32, sign));
        }
        // Pass 2: the groups' total forces, kept across iterations and steps. All groups
        // update at once (Jacobi), so a body in `k` groups (a cube in a stack, between the one
        // below and the one above) would be corrected `k` times over: its inverse mass counts
        // `k` times (mass splitting), which keeps the joint update from overshooting.
        self.friction_update.member_degree.clear();
        self.friction_update
            .member_degree
            .resize(self.members.len(), 0.0);
        for g in self.friction_update.groups.iter().filter(|g| g.count > 0.0) {
            for b in g.bodies.iter().flatten() {
                if let Some(k) = self.member_slot(*b) {
                    self.friction_update.member_degree[k] += 1.0;
                }
            }
        }
        // A coupled rigid body slides with its groups' forces too: its compliance counts, once
        // per group it is in (without it, a light box's friction reaction overshot and the box
        // shuffled sideways at 5-10 cm/s on a slab).
        self.friction_update.rigid_degree.clear();
        self.friction_update
            .rigid_degree
            .resize(self.coupled.bodies.len(), 0.0);
        self.friction_update.rigid_carrying.clear();
        self.friction_update
            .rigid_carrying
            .resize(self.coupled.bodies.len(), 0.0);
        for (i, &(_, compliance, _, _)) in self.friction_update.slips.iter().enumerate() {
            if let Some(&k) = self.coupled.contact_rigid.get(i)
                && k != NO_RIGID
                && self.mu[i] * self.lambda[i] > 0.0
                && compliance > 0.0
            {
                self.friction_update.rigid_carrying[k as usize] += 1.0;
            }
        }
        for g in self
            .friction_update
            .groups
            .iter()
            .filter(|g| g.count > 0.0 && g.rigid != NO_RIGID)
        {
            self.friction_update.rigid_degree[g.rigid as usize] += 1.0;
        }
        let model = settings.lcp.friction;
        for gi in 0..self.friction_update.groups.len() {
            let g = self.friction_update.groups[gi];
            let parts = if g.count > 0.0 {
                self.body_compliances(gi, id, bodies, layout)
            } else {
                [0.0; 2]
            };
            let rigid = match (g.rigid, g.count > 0.0) {
                (NO_RIGID, _) | (_, false) => 0.0,
                (k, true) => {
                    let r = &self.coupled.bodies[k as usize];
                    let arm = g.points / g.count - r.state.center;
                    self.friction_update.rigid_degree[k as usize] * r.sliding_compliance(&arm)
                }
            };
            let compliance: f64 = rigid
                + g.bodies
                    .iter()
                    .zip(parts)
                    .filter_map(|(b, c)| {
                        let k = self.member_slot((*b)?)?;
                        Some(self.friction_update.member_degree[k] * c)
                    })
                    .sum::<f64>();
            let slot = self
                .friction_update
                .step_groups
                .entry(g.key)
                .or_insert(StepGroup::NONE);
            if slot.force == StepGroup::NONE.force {
                slot.force = self.friction_update.group_force.len() as u32;
                self.friction_update
                    .group_force
                    .push((g.key, Vec3::zeros()));
            }
            let force = slot.force as usize;
            let g = &mut self.friction_update.groups[gi];
            g.compliance = compliance;
            g.force = force;
            if g.count > 0.0 && g.compliance > 0.0 {
                let total = &mut self.friction_update.group_force[g.force].1;
                let slip = g.slip / g.count;
                let trial = *total - slip / g.compliance;
                let n = g.normal.try_normalize(1e-12).unwrap_or_else(Vec3::zeros);
                *total = project(trial, &n, g.limit, model);
            }
        }
        // Pass 3: each contact's force, its share of its group's plus its local part.
        for (i, contact) in self.contacts.iter().enumerate() {
            let limit = self.mu[i] * self.lambda[i];
            let (slip, compliance, group, sign) = self.friction_update.slips[i];
            if !(limit > 0.0 && compliance > 0.0) {
                self.friction[i] = Vec3::zeros();
                continue;
            }
            let g = &self.friction_update.groups[group as usize];
            let (share, local_slip) = if g.compliance > 0.0 {
                let total = self.friction_update.group_force[g.force].1;
                (
                    sign * total * (self.lambda[i] / g.normal_force),
                    slip - sign * g.slip / g.count,
                )
            } else {
                // A body against itself: no rigid sliding, all of the slip is local.
                (Vec3::zeros(), slip)
            };
            let n = contact.normal();
            // A coupled rigid body moves with the local parts too: its compliance at the
            // contact counts, once per carrying contact on it (their local parts update at
            // once). Without it, the local parts' torque spun a 3 g box at 2.5 rad/s about the
            // vertical on landing on a rubber cube.
            let rigid = match (self.coupled.contact_rigid.get(i), contact) {
                (Some(&k), IslandContact::Obstacle { contact, .. }) if k != NO_RIGID => {
                    let r = &self.coupled.bodies[k as usize];
                    self.friction_update.rigid_carrying[k as usize]
                        * r.sliding_compliance(&(contact.point - r.state.center))
                }
                _ => 0.0,
            };
            let local = self.friction_update.local[i] - local_slip / (h * h * compliance + rigid);
            let f = combine(share, local, &n, limit, model);
            self.friction[i] = f;
            self.friction_update.local[i] = f - project(share, &n, limit, model);
            let (terms, count) = contact.terms(bodies);
            for &(b, v, w) in &terms[..count] {
                if let Some(u) = layout.unknown(id, bodies, b as usize, v as usize) {
                    self.friction_force[u as usize] += w * f;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    fn random_tangential(rng: &mut Rng, n: &Vec3, scale: f64) -> Vec3 {
        let v = Vec3::new(rng.signed(), rng.signed(), rng.signed());
        (v - n * n.dot(&v)) * scale
    }

    #[test]
    fn combined_forces_stay_in_the_friction_set_and_keep_a_share_inside_it() {
        let mut rng = Rng(7);
        for _ in 0..500 {
            let n = Vec3::new(rng.signed(), rng.signed(), rng.signed()).normalize();
            let limit = 0.1 + 2.0 * rng.unit();
            let share = random_tangential(&mut rng, &n, limit);
            let local = random_tangential(&mut rng, &n, 3.0 * limit);
            for model in [FrictionModel::Cone, FrictionModel::Pyramid] {
                let f = combine(share, local, &n, limit, model);
                assert!(n.dot(&f).abs() < 1e-12);
                match model {
                    FrictionModel::Cone => assert!(f.norm() <= limit * (1.0 + 1e-12)),
                    FrictionModel::Pyramid => {
                        let (t1, t2) = tangents(&n);
                        assert!(t1.dot(&f).abs().max(t2.dot(&f).abs()) <= limit * (1.0 + 1e-12));
                    }
                }
                // A share already inside the set is kept whole: the local part only uses the
                // room around it.
                let inside = project(share, &n, limit, model);
                if (inside - share).norm() < 1e-12 {
                    let without_local = combine(share, Vec3::zeros(), &n, limit, model);
                    assert!((without_local - share).norm() < 1e-12);
                }
            }
        }
    }

    #[test]
    fn remembered_forces_are_found_by_key_while_the_normal_holds() {
        let mut memory = ContactMemory::default();
        let f = |x: f64| Vec3::new(x, 0.0, 0.0);
        memory.locals.extend([
            ([1, 0, 7, 2], f(3.0), Vec3::y()),
            ([0, 1, 4, 0], f(1.0), Vec3::y()),
            ([0, 0, 9, 0], f(2.0), Vec3::y()),
        ]);
        memory.normal_forces.extend([
            ([1, 0, 7, 2], 30.0, Vec3::y()),
            ([0, 1, 4, 0], 10.0, Vec3::y()),
            ([0, 0, 9, 0], 20.0, Vec3::y()),
        ]);
        memory.finish();
        assert_eq!(memory.local(&[0, 1, 4, 0], &Vec3::y()), Some(f(1.0)));
        assert_eq!(memory.local(&[0, 0, 9, 0], &Vec3::y()), Some(f(2.0)));
        assert_eq!(memory.local(&[1, 0, 7, 2], &Vec3::y()), Some(f(3.0)));
        assert_eq!(memory.normal_force(&[0, 1, 4, 0], &Vec3::y()), Some(10.0));
        assert_eq!(memory.normal_force(&[0, 0, 9, 0], &Vec3::y()), Some(20.0));
        assert_eq!(memory.normal_force(&[1, 0, 7, 2], &Vec3::y()), Some(30.0));
        // Another contact, or the same one turned by 30 degrees, starts afresh.
        assert_eq!(memory.local(&[0, 1, 4, 1], &Vec3::y()), None);
        assert_eq!(memory.normal_force(&[0, 1, 4, 1], &Vec3::y()), None);
        let turned = Vec3::new(0.5, 0.75f64.sqrt(), 0.0);
        assert_eq!(memory.local(&[0, 1, 4, 0], &turned), None);
        assert_eq!(memory.normal_force(&[0, 1, 4, 0], &turned), None);
        memory.clear();
        assert_eq!(memory.local(&[0, 1, 4, 0], &Vec3::y()), None);
        assert_eq!(memory.normal_force(&[0, 1, 4, 0], &Vec3::y()), None);
    }

    #[test]
    fn local_parts_are_clipped_symmetrically_around_the_share() {
        // A share at 90 % of the limit: a local part along it and one against it of the same
        // size move the force by the same amount, so zero-sum local parts keep the group's
        // total (clipping the sum would keep only the one against the share).
        let n = Vec3::y();
        let share = Vec3::new(0.9, 0.0, 0.0);
        for model in [FrictionModel::Cone, FrictionModel::Pyramid] {
            let along = combine(share, Vec3::new(0.5, 0.0, 0.0), &n, 1.0, model);
            let against = combine(share, Vec3::new(-0.5, 0.0, 0.0), &n, 1.0, model);
            assert!((along + against - 2.0 * share).norm() < 1e-12, "{model:?}");
        }
    }
}
