//! The collision-prone region of a large body: the free vertices its contacts may touch,
//! ordered last in the body's factor, and the dense block `(A^-1)_CC` over them that the
//! contact QP reads in the contact subspace (localized contact, Wang et al. 2020, section 4;
//! the factor side is `crate::sim::sparse`'s trailing block).
//!
//! A body's contact QP in the contact subspace needs `(A^-1)[u, v]` for every pair of vertices
//! its rows touch. Small bodies cache whole columns of `A^-1` (`crate::sim::inverse_columns`),
//! one solve each; a large body's columns are long and its contact patch has many vertices
//! (the 10,648-vertex bench cube rests on 484), so they neither fit nor pay. With the region's
//! vertices ordered last, the factor's trailing block gives all of `(A^-1)_CC` at the cost of
//! one factorization and one dense `|C|^3` product, and the QP's matrix is read from it.
//!
//! Deviations from the paper, which tags the region offline and keeps it:
//! - the region follows the contacts: it is the vertices contacts touch, grown by
//!   [`PRONE_RINGS`] rings of mesh neighbours along the vertices rows can touch (the surface,
//!   and the tets of embedded points), and is rebuilt (one refactorization, see
//!   `PdSystem::localize`) when a contact touches a vertex outside it;
//! - its size is capped ([`MAX_PRONE_VERTICES`]): beyond it the QP is solved by MPRGP, as
//!   without a region.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sim::sparse::SymmetricMatrix;

/// Rings of mesh neighbours added around the vertices contacts touch when the region is
/// rebuilt, so that a contact patch that spreads or slides a little stays inside it.
pub const PRONE_RINGS: usize = 4;

/// Most vertices of a region: its dense block is `8 |C|^2` bytes (32 MiB here) and costs
/// `|C|^3` multiply-adds to form.
pub const MAX_PRONE_VERTICES: usize = 2048;

/// The last [`ProneRegion::generation`] handed out (process-wide, so that two regions never
/// share one).
static LAST_GENERATION: AtomicU64 = AtomicU64::new(0);

/// No slot.
const NONE: u32 = u32::MAX;

/// A body's collision-prone free vertices and `(A^-1)` over them (m/N).
#[derive(Debug, Clone)]
pub struct ProneRegion {
    /// The free vertices, in the factor's trailing order.
    vertices: Vec<u32>,
    /// Per free vertex: its index in `vertices`, or [`NONE`].
    slot_of: Vec<u32>,
    /// `(A^-1)` over `vertices`, column-major. Shared with clones (world snapshots).
    block: Arc<[f64]>,
    /// Identifies the factor the block is of (see [`ProneRegion::generation`]).
    generation: u64,
}

impl ProneRegion {
    /// A region of `vertices` (free vertices of a body with `free` of them) with its block
    /// `(A^-1)` over them, `vertices.len()^2` values column-major.
    ///
    /// # Panics
    /// If the block's size does not match, or a vertex is out of range.
    pub fn new(free: usize, vertices: Vec<u32>, block: Vec<f64>) -> Self {
        assert_eq!(block.len(), vertices.len() * vertices.len());
        let mut slot_of = vec![NONE; free];
        for (k, &v) in vertices.iter().enumerate() {
            slot_of[v as usize] = k as u32;
        }
        Self {
            vertices,
            slot_of,
            block: block.into(),
            generation: LAST_GENERATION.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }

    /// The region's free vertices, in the factor's trailing order.
    pub fn vertices(&self) -> &[u32] {
        &self.vertices
    }

    /// Whether free vertex `d` is in the region.
    pub fn contains(&self, d: u32) -> bool {
        self.slot_of.get(d as usize).is_some_and(|&s| s != NONE)
    }

    /// The index of free vertex `d` in [`ProneRegion::vertices`], if it is in the region.
    pub fn slot(&self, d: u32) -> Option<usize> {
        let slot = *self.slot_of.get(d as usize)?;
        (slot != NONE).then_some(slot as usize)
    }

    /// Identifies the factor and region the block is of: unique in the process, and new for
    /// every region made (values derived from the block stay valid while it stands).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Column `d` of the block (`(A^-1)[., d]` over the region), if `d` is in the region.
    pub fn column(&self, d: u32) -> Option<ProneColumn<'_>> {
        let slot = *self.slot_of.get(d as usize)?;
        if slot == NONE {
            return None;
        }
        let k = self.vertices.len();
        let start = slot as usize * k;
        Some(ProneColumn {
            values: &self.block[start..start + k],
            slot_of: &self.slot_of,
        })
    }

    /// The region for contacts at `touched` (free vertices, repeats allowed): `touched`, grown
    /// by [`PRONE_RINGS`] rings of `matrix`'s neighbours (the mesh's) among the vertices
    /// `reachable` marks (those a contact row can touch: the surface and the tets of
    /// embedded points; a region through the interior would only cost), plus `previous`'
    /// vertices where both fit in [`MAX_PRONE_VERTICES`]. `None` where the touched vertices
    /// with their rings alone do not fit. Sorted.
    pub fn grown(
        previous: Option<&Self>,
        matrix: &SymmetricMatrix,
        reachable: &[bool],
        touched: impl Iterator<Item = u32>,
    ) -> Option<Vec<u32>> {
        let n = matrix.dim();
        let mut inside = vec![false; n];
        let mut region: Vec<u32> = Vec::new();
        for d in touched {
            if let Some(flag) = inside.get_mut(d as usize)
                && !*flag
            {
                *flag = true;
                region.push(d);
            }
        }
        let mut frontier = 0;
        for _ in 0..PRONE_RINGS {
            let end = region.len();
            for k in frontier..end {
                for &w in matrix.neighbours(region[k] as usize) {
                    if !inside[w as usize] && reachable.get(w as usize).copied().unwrap_or(false) {
                        inside[w as usize] = true;
                        region.push(w);
                    }
                }
            }
            frontier = end;
        }
        if region.len() > MAX_PRONE_VERTICES {
            return None;
        }
        if let Some(previous) = previous {
            let extra = previous.vertices.iter().filter(|&&v| !inside[v as usize]);
            if region.len() + extra.clone().count() <= MAX_PRONE_VERTICES {
                region.extend(extra);
            }
        }
        region.sort_unstable();
        Some(region)
    }
}

/// One column of a [`ProneRegion`]'s block.
#[derive(Debug, Clone, Copy)]
pub struct ProneColumn<'a> {
    values: &'a [f64],
    slot_of: &'a [u32],
}

impl ProneColumn<'_> {
    /// `(A^-1)[d, column]` (m/N), if free vertex `d` is in the region.
    pub fn at(&self, d: u32) -> Option<f64> {
        let slot = *self.slot_of.get(d as usize)?;
        (slot != NONE).then(|| self.values[slot as usize])
    }
}
