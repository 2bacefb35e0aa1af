//! [`Layout`]: where each body's unknowns are in its island's QP, and [`NO_ISLAND`]. A leaf of
//! the island, filled when islands form (the step's `islands`).

use crate::sim::pd::PINNED;
use crate::sim::world::body::SoftBody;

/// Island id of a body that is in none (frozen).
pub(crate) const NO_ISLAND: u32 = u32::MAX;

/// Where each body's unknowns are: its island and the island index of its first free vertex.
#[derive(Clone, Copy)]
pub(crate) struct Layout<'a> {
    /// Per body: its island, or [`NO_ISLAND`].
    pub island_of: &'a [u32],
    /// Per body: offset of its free vertices in its island's unknowns.
    pub offset_of: &'a [u32],
}

impl Layout<'_> {
    /// The unknown of `vertex` of `body` in island `island`, or `None` if it cannot move there.
    pub(crate) fn unknown(
        &self,
        island: u32,
        bodies: &[SoftBody],
        body: usize,
        vertex: usize,
    ) -> Option<u32> {
        if self.island_of[body] != island {
            return None;
        }
        let d = bodies[body].pd.as_ref()?.dof_map()[vertex];
        (d != PINNED).then(|| self.offset_of[body] + d)
    }
}
