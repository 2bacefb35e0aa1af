//! [`StepState`]: the world-level buffers of the step, kept from substep to substep (islands,
//! soft contacts, the contact memory, the velocity LCP, sleeping's record). Every stage reads
//! or fills a part of it; it imports the stages' state types, never their functions.

use super::detect::PairDetection;
use crate::sim::contact::{ContactLcp, EdgeContact, SoftContact};
use crate::sim::world::coupling::Coupling;
#[cfg(test)]
use crate::sim::world::island::Layout;
use crate::sim::world::island::{ContactMemory, Island};
use crate::sim::world::report::{ContactPoint, FreezeReason};
use crate::sim::world::sleeping::SleepState;

/// World-level buffers of the step, reused (no allocation once warmed up).
#[derive(Debug, Default, Clone)]
pub(crate) struct StepState {
    pub(super) islands: Vec<Island>,
    pub(super) island_count: usize,
    pub(super) island_of: Vec<u32>,
    pub(super) offset_of: Vec<u32>,
    pub(super) island_size: Vec<u32>,
    pub(super) parent: Vec<u32>,
    pub(super) soft_contacts: Vec<SoftContact>,
    pub(super) edge_contacts: Vec<EdgeContact>,
    /// Per body: the soft detection of its pairs as the first body ([`super::detect::detect_soft`]).
    pub(super) detection: Vec<PairDetection>,
    /// Per body: whether its edge tree was fitted in this substep
    /// ([`super::detect::fit_edge_trees`]).
    pub(super) edges_fitted: Vec<bool>,
    pub(super) failures: Vec<Option<FreezeReason>>,
    /// Per island: the rebound velocity its contacts lack, then the scale of its response.
    pub(super) deficits: Vec<Option<f64>>,
    /// Per island: whether one of its bodies is held or carried (none of them settles).
    pub(super) held: Vec<bool>,
    pub(super) lcp: ContactLcp,
    /// First global vertex id of each body, plus the total.
    pub(super) vertex_offsets: Vec<u32>,
    /// Inverse mass (1/kg) per global vertex: 0 for pinned vertices and frozen bodies.
    pub(super) inv_mass: Vec<f64>,
    /// The contacts of the last velocity LCP, for debug drawing.
    pub points: Vec<ContactPoint>,
    /// Coupled obstacles' state in the substep (`world::coupling`).
    pub(super) coupling: Coupling,
    /// Scratch of [`super::islands::form_islands`]: per coupled body, the first body touching it, and the
    /// links to the others.
    pub(super) coupled_first: Vec<u32>,
    pub(super) coupled_links: Vec<(u32, u32)>,
    /// The contact forces the last step ended with (friction per group and per contact,
    /// normal forces per contact), to start the next step's from.
    pub(super) contact_memory: ContactMemory,
    /// What the wake pass keeps between steps.
    pub sleep: SleepState,
}

impl StepState {
    /// What of `source` a later step reads, into `self` (buffers reused): the contact memory,
    /// the wake pass's record, the coupled rigid bodies' state and what each island slot
    /// carries ([`Island::copy_carried_from`]); the rest is rebuilt by every step (a world
    /// snapshot's copy, `crate::sim::world::snapshot`).
    pub fn copy_state_from(&mut self, source: &Self) {
        // Every slot: one the step does not use now keeps its state for when it does. A slot
        // `source` has not had yet is a new one's.
        if self.islands.len() < source.islands.len() {
            self.islands
                .resize_with(source.islands.len(), Island::default);
        }
        let fresh = Island::default();
        for (k, island) in self.islands.iter_mut().enumerate() {
            island.copy_carried_from(source.islands.get(k).unwrap_or(&fresh));
        }
        self.contact_memory.clone_from(&source.contact_memory);
        self.sleep.clone_from(&source.sleep);
        self.coupling.clone_from(&source.coupling);
    }

    /// Island `id` of the last step with the layout of its unknowns (for the island's tests).
    #[cfg(test)]
    pub(crate) fn island(&self, id: usize) -> (&Island, Layout<'_>) {
        let layout = Layout {
            island_of: &self.island_of,
            offset_of: &self.offset_of,
        };
        (&self.islands[id], layout)
    }

    /// Forgets the contact forces of the last step (body or obstacle indices changed).
    pub fn forget_contact_forces(&mut self) {
        self.contact_memory.clear();
    }

    /// Forgets the normal forces of the last step, not its friction (a test's cold start of
    /// the contact QPs).
    #[cfg(test)]
    pub fn forget_normal_forces(&mut self) {
        self.contact_memory.forget_normal_forces();
    }

    /// The contact forces the next step starts from.
    pub fn contact_memory(&self) -> &ContactMemory {
        &self.contact_memory
    }

    /// The contact forces the next step starts from, to replace (a loaded saved world).
    pub fn contact_memory_mut(&mut self) -> &mut ContactMemory {
        &mut self.contact_memory
    }

    /// The last velocity LCP.
    pub fn lcp(&self) -> &ContactLcp {
        &self.lcp
    }
}
