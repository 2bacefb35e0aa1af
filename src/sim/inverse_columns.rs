//! Columns of the inverse of a body's PD matrix, cached per free vertex: the response of the
//! whole body to a unit force on one vertex, `A^-1 e_v` (m/N; the same for x, y and z, since
//! `A` acts alike on the three coordinates). Used by the world's contact stage, in the island
//! solve, when a contact QP is solved in the contact subspace.
//!
//! With the columns of the vertices a contact QP touches, the QP can be solved in the contact
//! subspace, through the contact-space (Delassus) matrix `J A^-1 J'` of the prefactored system.
//!
//! What comes from the paper: Wang et al. 2020 (section 4) reduce the PD global step to a set
//! of collision-prone nodes `C` chosen in advance, by a partial Cholesky factorization that
//! leaves the Schur complement `S = A_CC - A_CS A_SS^-1 A_SC` of the collision-safe nodes, to
//! which their penalty collision terms are added as sparse updates before a dense refactorization.
//! Since `(A^-1)_CC = S^-1`, the block of `A^-1` on the nodes contacts touch is the inverse of
//! that Schur complement.
//!
//! Deviation (ours): the contacts are constraints of a QP, not penalty terms, so what is formed
//! is `J A^-1 J'` (the Schur complement of the QP's KKT system with respect to its multipliers),
//! not the paper's `S`; the vertices are those contacts touch, found at run time, not a region
//! fixed in advance; and their columns come from the existing full factor, one scalar solve
//! each, instead of a partial factorization. The matrix is constant while the body's material,
//! pins and time step are, so a column stays valid across steps until the factor changes
//! ([`InverseColumns::reset`]). Memory is bounded (`memory_bytes` of [`InverseColumns::reset`]); when full, the
//! least recently used column not used in the current step is replaced.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::pd::PdSystem;
use super::sparse::SolveScratch;

/// The last [`InverseColumns::generation`] handed out (process-wide, so that two caches never
/// share one).
static LAST_GENERATION: AtomicU64 = AtomicU64::new(0);

/// No slot.
const NONE: u32 = u32::MAX;

/// The cached columns of one body's `A^-1`.
#[derive(Debug, Default)]
pub struct InverseColumns {
    /// Free vertices of the body (the length of a column).
    n: usize,
    /// Most columns held.
    capacity: usize,
    /// Per free vertex: its slot, or [`NONE`].
    slot_of: Vec<u32>,
    /// Per slot: its free vertex.
    vertex_of: Vec<u32>,
    /// Per slot: the stamp of the step that last used it.
    used: Vec<u64>,
    /// Per slot: its column. Shared with the clones of the cache (a world snapshot), so that a
    /// clone copies pointers, not columns: a column is never changed while shared (a slot
    /// given to another vertex gets a new one where its old column is still shared).
    values: Vec<Arc<[f64]>>,
    /// The current step's stamp.
    stamp: u64,
    /// Per free vertex: the [`InverseColumns::plan`] call that last counted it.
    planned: Vec<u64>,
    /// The current [`InverseColumns::plan`] call.
    plan_stamp: u64,
    /// Identifies the factor the columns are of (see [`InverseColumns::generation`]).
    generation: u64,
    scratch: SolveScratch,
}

/// Field by field, so that `clone_from` (a world snapshot taken into a kept one, and a restore)
/// reuses the buffers; the columns themselves are shared, and the solve's scratch is not
/// copied.
impl Clone for InverseColumns {
    fn clone(&self) -> Self {
        let mut out = Self::default();
        out.clone_from(self);
        out
    }

    fn clone_from(&mut self, source: &Self) {
        let Self {
            n,
            capacity,
            slot_of,
            vertex_of,
            used,
            values,
            stamp,
            planned,
            plan_stamp,
            generation,
            scratch: _,
        } = source;
        self.n = *n;
        self.capacity = *capacity;
        self.slot_of.clone_from(slot_of);
        self.vertex_of.clone_from(vertex_of);
        self.used.clone_from(used);
        self.values.clone_from(values);
        self.stamp = *stamp;
        self.planned.clone_from(planned);
        self.plan_stamp = *plan_stamp;
        self.generation = *generation;
    }
}

impl InverseColumns {
    /// An empty cache for a body with `n` free vertices, holding at most as many columns as
    /// fit in `memory_bytes` (and at most `n`). Tests only: the world resets a default cache.
    #[cfg(test)]
    pub fn new(n: usize, memory_bytes: usize) -> Self {
        let mut columns = Self::default();
        columns.reset(n, memory_bytes);
        columns
    }

    /// Forgets every column (the factor changed) and sizes the cache for `n` free vertices.
    pub fn reset(&mut self, n: usize, memory_bytes: usize) {
        self.generation = LAST_GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
        self.n = n;
        self.capacity = (memory_bytes / (8 * n.max(1))).min(n);
        self.slot_of.clear();
        self.slot_of.resize(n, NONE);
        self.planned.clear();
        self.planned.resize(n, 0);
        self.vertex_of.clear();
        self.used.clear();
        self.values.clear();
    }

    /// Identifies the factor the columns are of: unique among all caches of the process, and
    /// changed by every [`InverseColumns::reset`]. A column cached under one generation has the
    /// same values whenever it is (re)computed under it, so values derived from the columns
    /// (the contact-space matrix `J A^-1 J'`) stay valid while the generation does.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Starts a new step: columns used from now on are kept over those used before.
    pub fn next_step(&mut self) {
        self.stamp += 1;
    }

    /// Most columns the cache holds.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Columns held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.vertex_of.len()
    }

    /// Whether no column is held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.vertex_of.is_empty()
    }

    /// Marks the cached columns of `vertices` (free vertices, repeats allowed) as used in
    /// this step and returns whether all of them fit in the cache at once. Where they do not,
    /// computing any of them is wasted: a contact QP in the subspace needs them all, and a new
    /// column would only replace another one the QP needs.
    pub fn plan(&mut self, vertices: impl Iterator<Item = u32>) -> bool {
        self.plan_stamp += 1;
        let mut needed = 0usize;
        for d in vertices {
            let Some(planned) = self.planned.get_mut(d as usize) else {
                continue;
            };
            if *planned == self.plan_stamp {
                continue;
            }
            *planned = self.plan_stamp;
            needed += 1;
            let slot = self.slot_of[d as usize];
            if slot != NONE {
                self.used[slot as usize] = self.stamp;
            }
        }
        needed <= self.capacity
    }

    /// The column of free vertex `d`, if cached.
    pub fn column(&self, d: u32) -> Option<&[f64]> {
        let slot = *self.slot_of.get(d as usize)?;
        (slot != NONE).then(|| &self.values[slot as usize][..])
    }

    /// Makes sure the column of free vertex `d` is cached, computing it with one scalar solve
    /// through `pd`'s factor (which must be the one the cache was reset for) if it is not and
    /// `budget` allows (decremented per solve). Returns whether the column is cached.
    pub fn ensure(&mut self, pd: &PdSystem, d: u32, budget: &mut usize) -> bool {
        let Some(&slot) = self.slot_of.get(d as usize) else {
            return false;
        };
        if slot != NONE {
            self.used[slot as usize] = self.stamp;
            return true;
        }
        if *budget == 0 || self.capacity == 0 {
            return false;
        }
        let slot = if self.vertex_of.len() < self.capacity {
            self.vertex_of.push(d);
            self.used.push(self.stamp);
            self.values.push(Arc::from(vec![0.0; self.n]));
            self.vertex_of.len() - 1
        } else {
            // The least recently used slot, unless it is in use in this step.
            let Some((oldest, _)) = self
                .used
                .iter()
                .enumerate()
                .filter(|&(_, &u)| u != self.stamp)
                .min_by_key(|&(s, &u)| (u, s))
            else {
                return false;
            };
            self.slot_of[self.vertex_of[oldest] as usize] = NONE;
            self.vertex_of[oldest] = d;
            self.used[oldest] = self.stamp;
            oldest
        };
        *budget -= 1;
        self.slot_of[d as usize] = slot as u32;
        if Arc::get_mut(&mut self.values[slot]).is_none() {
            self.values[slot] = Arc::from(vec![0.0; self.n]);
        }
        let Some(column) = Arc::get_mut(&mut self.values[slot]) else {
            return false;
        };
        column.iter_mut().for_each(|c| *c = 0.0);
        column[d as usize] = 1.0;
        pd.solve_scalar_with(column, &mut self.scratch);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::material::MaterialParams;
    use crate::sim::math::Vec3;
    use crate::sim::mesh::TetMesh;
    use crate::sim::pd::PdSetup;

    fn system() -> PdSystem {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.1), 3);
        let pinned: Vec<bool> = (0..mesh.vertex_count()).map(|v| v == 0 || v == 5).collect();
        PdSystem::new(
            &mesh,
            PdSetup {
                material: &MaterialParams::RUBBER,
                dt: 1.0 / 60.0,
                pinned: &pinned,
                attach_stiffness: &[],
                spring: None,
            },
        )
        .unwrap()
    }

    /// A column times the matrix is the unit vector it was solved for.
    #[test]
    fn a_column_solves_a_unit_force() {
        let pd = system();
        let n = pd.free_vertices().len();
        let mut columns = InverseColumns::new(n, 1 << 20);
        let mut budget = 10;
        for d in [0u32, 7, n as u32 - 1] {
            assert!(columns.ensure(&pd, d, &mut budget));
            let column = columns.column(d).unwrap();
            let x: Vec<Vec3> = column.iter().map(|&c| Vec3::new(c, 0.0, 0.0)).collect();
            let mut ax = vec![Vec3::zeros(); n];
            pd.matrix().mul_vec3(&x, &mut ax);
            for (i, v) in ax.iter().enumerate() {
                let expected = if i == d as usize { 1.0 } else { 0.0 };
                assert!((v.x - expected).abs() < 1e-9, "{d} {i}: {}", v.x);
            }
        }
        assert_eq!(budget, 7);
    }

    /// The budget bounds the solves; a full cache replaces the least recently used column that
    /// the current step has not used, and never one it has.
    #[test]
    fn the_cache_keeps_within_its_budget_and_capacity() {
        let pd = system();
        let n = pd.free_vertices().len();
        let mut columns = InverseColumns::new(n, 2 * 8 * n);
        assert_eq!(columns.capacity(), 2);
        let mut budget = 1;
        assert!(columns.ensure(&pd, 1, &mut budget));
        assert!(!columns.ensure(&pd, 2, &mut budget), "over budget");
        assert!(columns.ensure(&pd, 1, &mut budget), "cached: no solve");
        let mut budget = 10;
        assert!(columns.ensure(&pd, 2, &mut budget));
        assert!(
            !columns.ensure(&pd, 3, &mut budget),
            "both used in this step"
        );
        columns.next_step();
        assert!(columns.ensure(&pd, 2, &mut budget));
        assert!(columns.ensure(&pd, 3, &mut budget), "replaces vertex 1");
        assert!(columns.column(1).is_none());
        assert!(columns.column(2).is_some() && columns.column(3).is_some());
        assert_eq!(columns.len(), 2);
        // Three distinct vertices (one repeated) do not fit in two slots; two do, and planning
        // them protects their columns from replacement in this step.
        columns.next_step();
        assert!(!columns.plan([2u32, 3, 4, 2].into_iter()));
        assert!(columns.plan([3u32, 2, 3].into_iter()));
        assert!(
            !columns.ensure(&pd, 4, &mut budget),
            "2 and 3 are planned for this step"
        );
        columns.reset(n, 0);
        assert!(columns.is_empty());
        assert!(!columns.ensure(&pd, 2, &mut budget), "no room at all");
    }
}
