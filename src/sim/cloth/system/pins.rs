//! The pins' reactions: the impulse a cloth puts on whatever holds its pinned vertices (an
//! entity, a soft body's tets, a character's joint), for contact both ways with what the
//! cloth hangs from.
//!
//! A pinned vertex follows its target, and its pin supplies whatever force that takes. Over a
//! step its momentum balance (implicit Euler, as the free vertices') is
//! `m (x1 - x0 - h v0) / h^2 = f_elastic + f_external + f_pin`, with `f_external` gravity and
//! the wind's drag, and `f_elastic` Projective Dynamics' elastic force at the step's end: the
//! vertex's share of the local step's projections `(J p)_v` minus its row of the elastic
//! matrix times the positions, `(L x)_v` (the rows are kept when the matrix is assembled). The
//! holder then takes `-h f_pin`. A cloth hanging at rest from its pins puts its weight on them
//! (times `h`; `tests/sim_cloth.rs`).
//!
//! Deviation from the exact force: the projections are the last local step's, made from the
//! iterate before the last global solve, and obstacle contacts, friction and self-collision
//! move the free vertices after it; a cloth that has not converged in its iterations (a flag
//! whipping in a gust) gives its pins the force of a nearby state.
//!
//! The pins' total also comes from the whole cloth's momentum balance, where the elastic forces
//! cancel: `sum_v m_v (x1 - x0 - h v0) / h^2 = sum_v f_external + f_contacts + sum_pins f_pin`,
//! `f_contacts` the obstacles' and the other cloths' pushes on the cloth (the opposite of
//! [`ClothSystem::obstacle_impulses`] and [`ClothSystem::neighbour_impulses`] over `h`). That
//! total carries no stiffness: a holder given it feels the cloth's weight, drag and inertia, but not the stiff spring of the pinned
//! vertices' rows, which, handed to a light holder one step late (a 0.64 kg foam cube holding
//! a 0.08 kg leather sheet by one edge), flung its vertices at thousands of m/s within eight
//! steps (the world's speed guard froze it).

use super::ClothSystem;
use crate::sim::math::Vec3;

impl ClothSystem {
    /// Fills `pin_impulses` for the step that just ended (`x` its end, `start` its start, `v`
    /// the velocities it started with, `force` its external forces).
    pub(super) fn record_pin_impulses(&mut self) {
        // Taken out while the terms borrow the rest (put back below: no allocation).
        let mut impulses = std::mem::take(&mut self.pin_impulses);
        impulses.clear();
        let h = self.h;
        let terms = self.local_terms();
        for row in self.pin_rows.chunk_by(|a, b| a.0 == b.0) {
            let v = row[0].0 as usize;
            let stiffness: Vec3 = row.iter().map(|&(_, b, c)| c * self.x[b as usize]).sum();
            let elastic = terms.added_at(v, Vec3::zeros()) - stiffness;
            let inertia = (self.mass[v] / (h * h)) * (self.x[v] - self.start[v] - h * self.v[v]);
            let pin = inertia - elastic - self.force[v];
            impulses.push((row[0].0, -h * pin));
        }
        self.pin_impulses = impulses;
        self.pins_total = Vec3::zeros();
        if self.pin_impulses.is_empty() {
            return;
        }
        let mut momentum = Vec3::zeros();
        for v in 0..self.x.len() {
            let change = self.x[v] - self.start[v] - h * self.v[v];
            momentum += (self.mass[v] / h) * change - h * self.force[v];
        }
        let contacts: Vec3 = self
            .contacts
            .impulses()
            .map(|(_, _, j)| j)
            .chain(self.neighbour_impulses().map(|(_, _, j)| j))
            .sum();
        // On the holders: the opposite of the pins' share of the momentum change.
        self.pins_total = -momentum - contacts;
    }

    /// The impulse (N s) the cloth put on what holds its pins over the last step, all pins
    /// together, from the whole cloth's momentum balance (see the module docs): its weight,
    /// drag and inertia, less what obstacles carried, without the pinned rows' stiffness. A
    /// light holder given [`ClothSystem::pin_impulses`] one step late can go unstable; this
    /// total, shared among the pins, cannot.
    pub fn pins_total_impulse(&self) -> Vec3 {
        self.pins_total
    }

    /// Per pinned vertex: the impulse (N s) the cloth put on what holds it over the last step
    /// (see the module docs): a cloth hanging at rest puts its weight times the step on its
    /// pins. A game applies these to what the pins stand for (a soft body's tets:
    /// [`crate::sim::SoftWorld::apply_impulses`] at the pins' embedded points) for the pull
    /// both ways, one step late.
    pub fn pin_impulses(&self) -> impl Iterator<Item = (usize, Vec3)> + '_ {
        self.pin_impulses.iter().map(|&(v, j)| (v as usize, j))
    }
}
