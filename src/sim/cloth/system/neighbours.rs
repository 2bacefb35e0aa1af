//! What a cloth's pairs with other cloths put on them: the reactions a game hands to the other
//! cloths ([`ClothSystem::neighbour_impulses`], [`ClothSystem::apply_impulse`]) so that each
//! feels the other's weight, impacts and friction, one step late.
//!
//! What the other cloths put on the cloth over the step, all together, comes from its momentum
//! balance (implicit Euler, as for the pins, `pins.rs`): summed over the free vertices,
//! `sum m (x1 - x0 - h v0) / h^2 = sum f_external + sum f_elastic + f_obstacles + f_cloths`,
//! where the elastic forces, internal, cancel but for what the pinned vertices' rows hand over
//! (`sum_free f_elastic = -sum_pinned f_elastic`, each the last local step's projections
//! `(J p)_v` less the row of the elastic matrix times the positions, `(L x1)_v`), and
//! `f_obstacles` is the opposite of [`ClothSystem::obstacle_impulses`] over `h`. Self-collision
//! is internal too; the impact zones with the other cloths count as theirs. So a cloth resting
//! on another puts its weight on it (times `h`) whatever the iterations left undone, and a
//! cloth stopped by another hands it its momentum.
//!
//! That total is shared among the pairs that touched in proportion to how far the last
//! projection pushed each (over its weight), and each pair's share, reversed, among the
//! neighbour's vertices of the pair (`other_cloths.rs`): the exchange conserves momentum.
//!
//! Deviation from per-contact forces: the share of a pair is its push's, not its own momentum
//! balance (a vertex's balance carries the elastic forces of the projections' moves after the
//! last global solve, which are larger than a light cloth's weight: measured on a cotton
//! hammock under a resting denim sheet, per-vertex balances summed over the touching vertices
//! came to about 30 times the hammock's own weight), so all of a step's reaction points the
//! way of the total.

use super::{ClothSystem, PINNED};
use crate::sim::math::Vec3;

impl ClothSystem {
    /// Fills the other cloths' impulses for the step that just ended (`x` its end, `start` its
    /// start, `v` the velocities it started with, `force` its external forces).
    pub(super) fn record_neighbour_impulses(&mut self) {
        if !self.other_cloths.touching() {
            return;
        }
        let h = self.h;
        let mut on_cloth = Vec3::zeros();
        for (v, &u) in self.unknown_of.iter().enumerate() {
            if u != PINNED {
                let change = self.x[v] - self.start[v] - h * self.v[v];
                on_cloth += change * (self.mass[v] / h) - self.force[v] * h;
            }
        }
        // Less the elastic forces the pinned vertices hand to the free ones (the opposite of
        // those on the pinned vertices).
        let terms = self.local_terms();
        for row in self.pin_rows.chunk_by(|a, b| a.0 == b.0) {
            let p = row[0].0 as usize;
            let stiffness: Vec3 = row.iter().map(|&(_, b, c)| c * self.x[b as usize]).sum();
            on_cloth += (terms.added_at(p, Vec3::zeros()) - stiffness) * h;
        }
        // Less what the obstacles put on the cloth.
        on_cloth += self.contacts.impulses().map(|(_, _, j)| j).sum::<Vec3>();
        self.other_cloths.share_out(on_cloth);
    }

    /// Per vertex of the other cloths the last step's pairs touched
    /// ([`ClothSystem::step_among_cloths`]): the neighbour's id, the vertex (its index in the
    /// neighbour's positions) and the impulse (N s) this cloth put on it over the step, the
    /// reaction to what the other cloths put on this one (see the module docs): a cloth resting
    /// on another puts its weight on it (times `h`). A game gives these to the neighbours that
    /// stepped before this cloth in its frame (those it stepped among along their paths;
    /// [`ClothSystem::apply_impulse`]), and steps first the cloths reaching lowest along
    /// gravity, so that a cloth under another feels its weight and impacts, one step late; a
    /// neighbour stepping after it feels this cloth through its own pairs (`other_cloths.rs`
    /// says why one way).
    pub fn neighbour_impulses(&self) -> impl Iterator<Item = (u64, usize, Vec3)> + '_ {
        self.other_cloths.impulses()
    }
}
