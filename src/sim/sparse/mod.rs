//! A symmetric sparse matrix over mesh vertices and its prefactored sparse Cholesky solve.
//!
//! The Projective Dynamics global matrix `A = M / h^2 + sum_t w_t G_t' G_t` acts identically on
//! the x, y and z coordinates (it is `L (x) I_3` for a scalar `n x n` matrix `L`), so one scalar
//! matrix over the free vertices is stored and factored, and every solve handles the three
//! coordinates as three right-hand sides (Bouaziz et al. 2014, section 5).
//!
//! Storage: the full matrix in CSR (sorted columns) for the matrix-vector products of the
//! iterative solvers, plus the upper triangle in CSC that faer's supernodal Cholesky reads; a
//! precomputed index map refills it from the CSR values. The symbolic analysis (fill-reducing
//! ordering, supernodal structure) runs once per sparsity pattern; a change of material, pins or time step
//! only refills values and runs the numeric factorization again (factor once, refactor numerically on change, solve every step).
//!
//! Used when a body is created or its material, pins or time step change (analysis and
//! factorization), and in every PD and Newton iteration of the step (the solves).
//!
//! | file | what |
//! | --- | --- |
//! | `mod.rs` | [`SparseCholesky`]: analysis, factorization and the solves |
//! | `matrix.rs` | [`SymmetricMatrix`], the matrix it factors |
//! | `ordering.rs` | the geometric nested-dissection ordering tried against AMD |
//! | `subtree_solve.rs` | the f32 triangular solves on two threads, split along the elimination tree |
//! | `trailing.rs` | a factor with chosen rows last, and the block of `A^-1` over them |

use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::cholesky::llt::factor::{LltError, LltRegularization};
use faer::perm::PermRef;
use faer::sparse::linalg::cholesky::supernodal::SupernodalLltRef;
use faer::sparse::linalg::cholesky::{
    CholeskySymbolicParams, LltRef, SymbolicCholesky, SymbolicCholeskyRaw, SymmetricOrdering,
    factorize_symbolic_cholesky,
};
use faer::sparse::{SparseColMatRef, SymbolicSparseColMat};
use faer::{Conj, MatMut, Par, Side, Spec};
use thiserror::Error;

use crate::sim::math::Vec3;
use subtree_solve::SubtreeSplit;

mod matrix;
mod ordering;
mod subtree_solve;
mod trailing;

pub use matrix::{PARALLEL_MATVEC_ROWS, SymmetricMatrix};
pub use trailing::TrailingScratch;

/// Failure of a sparse factorization.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum FactorError {
    /// The matrix is not numerically positive definite.
    #[error("matrix is not positive definite (pivot {pivot})")]
    NotPositiveDefinite {
        /// The pivot where the factorization broke down (in the permuted order).
        pivot: usize,
    },
    /// faer could not allocate or analyse the matrix.
    #[error("sparse factorization failed: {0}")]
    Internal(String),
}

/// Rows from which [`SparseCholesky::solve_correction_in_place`] runs on two threads: split
/// along the elimination tree (the `subtree_solve` module) where the factor's tree allows, else
/// x and y on one thread and z on another (below, handing work to the other thread costs
/// about what it saves).
pub const SPLIT_SOLVE_ROWS: usize = 4096;

/// A prefactored sparse Cholesky `L = C C'` of a [`SymmetricMatrix`], solving three right-hand
/// sides at once. Symbolic analysis once, numeric refactorization on demand.
pub struct SparseCholesky {
    /// The symbolic analysis, fixed once made: shared by clones.
    symbolic: std::sync::Arc<SymbolicCholesky<usize>>,
    upper: SymbolicSparseColMat<usize>,
    /// For each upper-CSC entry, its slot in the CSR value array.
    upper_from_full: Vec<usize>,
    upper_values: Vec<f64>,
    factor_values: Vec<f64>,
    /// The factor rounded to f32, for [`SparseCholesky::solve_correction_in_place`].
    factor_values_f32: Vec<f32>,
    rhs: Vec<f64>,
    rhs_f32: Vec<f32>,
    mem: MemBuffer,
    /// Scratch of the single-coordinate half of a split solve (see [`SPLIT_SOLVE_ROWS`]).
    mem_split: MemBuffer,
    /// Scratch one solve of a single right-hand side needs ([`SparseCholesky::solve_scalar_with`]).
    scalar_req: StackReq,
    /// The elimination tree's split for the correction solve (from [`SPLIT_SOLVE_ROWS`] rows,
    /// supernodal factors whose tree splits).
    subtree_split: Option<SubtreeSplit>,
    ordering: FillOrdering,
    /// Rows ordered last on purpose ([`SparseCholesky::analyse_with_trailing`]), else 0.
    trailing: usize,
    /// The fill-reducing order the first analysis chose (forward: position to row; `None`
    /// for the identity), which every [`SparseCholesky::analyse_with_trailing`] starts from,
    /// so that a reordered factor depends on its trailing rows alone, not on earlier ones.
    base_order: Option<std::sync::Arc<[usize]>>,
    factored: bool,
}

/// A clone holds the same factor (bit for bit) and scratch of its own.
impl Clone for SparseCholesky {
    fn clone(&self) -> Self {
        let (req, split_req) = Self::scratch_of(&self.symbolic);
        Self {
            symbolic: self.symbolic.clone(),
            upper: self.upper.clone(),
            upper_from_full: self.upper_from_full.clone(),
            upper_values: self.upper_values.clone(),
            factor_values: self.factor_values.clone(),
            factor_values_f32: self.factor_values_f32.clone(),
            rhs: self.rhs.clone(),
            rhs_f32: self.rhs_f32.clone(),
            mem: MemBuffer::new(req),
            mem_split: MemBuffer::new(split_req),
            scalar_req: self.scalar_req,
            subtree_split: self.subtree_split.clone(),
            ordering: self.ordering,
            trailing: self.trailing,
            base_order: self.base_order.clone(),
            factored: self.factored,
        }
    }
}

/// The fill-reducing ordering of a [`SparseCholesky`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillOrdering {
    /// faer's approximate minimum degree.
    Amd,
    /// Geometric nested dissection (the `ordering` module).
    NestedDissection,
}

/// The upper triangle of `matrix` in CSC, and for each of its entries the slot in the CSR
/// value array. Column `j` holds rows `i <= j`, which are the entries `(j, i)` of row `j` of the
/// CSR with `i <= j` (symmetry), already sorted.
fn upper_triangle(matrix: &SymmetricMatrix) -> (SymbolicSparseColMat<usize>, Vec<usize>) {
    let n = matrix.n;
    let mut col_ptr = Vec::with_capacity(n + 1);
    let mut row_idx = Vec::new();
    let mut upper_from_full = Vec::new();
    col_ptr.push(0usize);
    for j in 0..n {
        for k in matrix.row_ptr[j]..matrix.row_ptr[j + 1] {
            let i = matrix.col_idx[k] as usize;
            if i <= j {
                row_idx.push(i);
                upper_from_full.push(k);
            }
        }
        col_ptr.push(row_idx.len());
    }
    (
        SymbolicSparseColMat::new_checked(n, n, col_ptr, None, row_idx),
        upper_from_full,
    )
}

/// faer's symbolic Cholesky (elimination tree, supernodes) of `upper` under `ordering`.
fn symbolic_cholesky(
    upper: &SymbolicSparseColMat<usize>,
    ordering: SymmetricOrdering<'_, usize>,
) -> Result<SymbolicCholesky<usize>, FactorError> {
    factorize_symbolic_cholesky(
        upper.as_ref(),
        Side::Upper,
        ordering,
        CholeskySymbolicParams::default(),
    )
    .map_err(|e| FactorError::Internal(format!("{e:?}")))
}

/// Caller-owned scratch of [`SparseCholesky::solve_scalar_with`], so that threads holding the
/// factor by shared reference can solve through it. Grows to the largest factor it served and
/// is then reused (no allocation once warmed up).
#[derive(Default)]
pub struct SolveScratch {
    mem: Option<MemBuffer>,
    bytes: usize,
}

/// A clone is empty scratch (it grows again on its first solve).
impl Clone for SolveScratch {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl SolveScratch {
    /// The scratch, grown to at least `req`.
    fn buffer(&mut self, req: StackReq) -> &mut MemBuffer {
        let need = req.unaligned_bytes_required();
        if self.mem.is_none() || self.bytes < need {
            self.bytes = need;
            self.mem = Some(MemBuffer::new(req));
        }
        self.mem.get_or_insert_with(|| MemBuffer::new(req))
    }
}

impl std::fmt::Debug for SolveScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SolveScratch")
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl std::fmt::Debug for SparseCholesky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseCholesky")
            .field("n", &self.symbolic.nrows())
            .field("factor_nnz", &self.factor_values.len())
            .field("ordering", &self.ordering)
            .field("factored", &self.factored)
            .finish()
    }
}

impl SparseCholesky {
    /// Symbolic analysis (AMD ordering, supernodes) of the pattern of `matrix`.
    ///
    /// # Errors
    /// [`FactorError::Internal`] if faer fails to analyse the pattern.
    pub fn analyse(matrix: &SymmetricMatrix) -> Result<Self, FactorError> {
        let (upper, upper_from_full) = upper_triangle(matrix);
        let symbolic = symbolic_cholesky(&upper, SymmetricOrdering::Amd)?;
        Self::with_symbolic(symbolic, upper, upper_from_full, FillOrdering::Amd)
    }

    /// Symbolic analysis of the pattern of `matrix`, whose row `i` is a mesh vertex at
    /// `coordinates[i]` (m): analyses both the geometric nested dissection (the `ordering`
    /// module) and AMD, and keeps the ordering whose factor has fewer entries.
    ///
    /// # Errors
    /// [`FactorError::Internal`] if faer fails to analyse the pattern.
    ///
    /// # Panics
    /// If `coordinates` is shorter than the matrix.
    pub fn analyse_with_coordinates(
        matrix: &SymmetricMatrix,
        coordinates: &[Vec3],
    ) -> Result<Self, FactorError> {
        let (upper, upper_from_full) = upper_triangle(matrix);
        let amd = symbolic_cholesky(&upper, SymmetricOrdering::Amd)?;
        if matrix.n <= ordering::LEAF_VERTICES {
            return Self::with_symbolic(amd, upper, upper_from_full, FillOrdering::Amd);
        }
        let forward = ordering::nested_dissection(matrix, coordinates);
        let mut inverse = vec![0usize; forward.len()];
        for (k, &v) in forward.iter().enumerate() {
            inverse[v] = k;
        }
        let perm = PermRef::new_checked(&forward, &inverse, matrix.n);
        let dissection = symbolic_cholesky(&upper, SymmetricOrdering::Custom(perm))?;
        if dissection.len_val() < amd.len_val() {
            Self::with_symbolic(
                dissection,
                upper,
                upper_from_full,
                FillOrdering::NestedDissection,
            )
        } else {
            Self::with_symbolic(amd, upper, upper_from_full, FillOrdering::Amd)
        }
    }

    /// faer's scratch of the factorization and the three-coordinate solves, and of the
    /// single-coordinate half of a split solve.
    fn scratch_of(symbolic: &SymbolicCholesky<usize>) -> (StackReq, StackReq) {
        let req = StackReq::any_of(&[
            symbolic.factorize_numeric_llt_scratch::<f64>(Par::Seq, Spec::default()),
            symbolic.solve_in_place_scratch::<f64>(3, Par::Seq),
            symbolic.solve_in_place_scratch::<f32>(3, Par::Seq),
        ]);
        (req, symbolic.solve_in_place_scratch::<f32>(1, Par::Seq))
    }

    fn with_symbolic(
        symbolic: SymbolicCholesky<usize>,
        upper: SymbolicSparseColMat<usize>,
        upper_from_full: Vec<usize>,
        ordering: FillOrdering,
    ) -> Result<Self, FactorError> {
        let n = symbolic.nrows();
        let symbolic_perm: Option<Vec<usize>> = symbolic.perm().map(|p| p.arrays().0.to_vec());
        let (req, split_req) = Self::scratch_of(&symbolic);
        let mem = MemBuffer::try_new(req).map_err(|e| FactorError::Internal(format!("{e:?}")))?;
        let scalar_req = symbolic.solve_in_place_scratch::<f64>(1, Par::Seq);
        let mem_split =
            MemBuffer::try_new(split_req).map_err(|e| FactorError::Internal(format!("{e:?}")))?;
        let subtree_split = match symbolic.raw() {
            SymbolicCholeskyRaw::Supernodal(supernodal) if n >= SPLIT_SOLVE_ROWS => {
                SubtreeSplit::new(supernodal)
            }
            _ => None,
        };
        Ok(Self {
            factor_values: vec![0.0; symbolic.len_val()],
            factor_values_f32: vec![0.0; symbolic.len_val()],
            rhs_f32: vec![0.0; 3 * n],
            upper_values: vec![0.0; upper_from_full.len()],
            rhs: vec![0.0; 3 * n],
            symbolic: std::sync::Arc::new(symbolic),
            upper,
            upper_from_full,
            mem,
            mem_split,
            scalar_req,
            subtree_split,
            ordering,
            trailing: 0,
            base_order: symbolic_perm.map(Into::into),
            factored: false,
        })
    }

    /// The fill-reducing ordering the analysis kept.
    pub fn ordering(&self) -> FillOrdering {
        self.ordering
    }

    /// Numeric factorization with the current values of `matrix` (same pattern as analysed).
    ///
    /// # Errors
    /// [`FactorError::NotPositiveDefinite`] if a pivot is not positive.
    pub fn factorize(&mut self, matrix: &SymmetricMatrix) -> Result<(), FactorError> {
        self.factored = false;
        for (dst, &src) in self.upper_values.iter_mut().zip(&self.upper_from_full) {
            *dst = matrix.values[src];
        }
        let a = SparseColMatRef::new(self.upper.as_ref(), &self.upper_values);
        let stack = MemStack::new(&mut self.mem);
        let result = self.symbolic.factorize_numeric_llt(
            &mut self.factor_values,
            a,
            Side::Upper,
            LltRegularization::default(),
            Par::Seq,
            stack,
            Spec::default(),
        );
        match result {
            Ok(_) => {
                for (lo, &hi) in self.factor_values_f32.iter_mut().zip(&self.factor_values) {
                    *lo = hi as f32;
                }
                self.factored = true;
                Ok(())
            }
            Err(LltError::NonPositivePivot { index }) => {
                Err(FactorError::NotPositiveDefinite { pivot: index })
            }
        }
    }

    /// True once [`SparseCholesky::factorize`] has succeeded.
    pub fn is_factored(&self) -> bool {
        self.factored
    }

    /// Solves `L x = b` for the three coordinates in place (`x` holds `b` on entry).
    /// Does nothing if no factorization succeeded.
    pub fn solve_in_place(&mut self, x: &mut [Vec3]) {
        if !self.factored {
            return;
        }
        let n = self.symbolic.nrows();
        for (i, v) in x.iter().enumerate().take(n) {
            self.rhs[i] = v.x;
            self.rhs[n + i] = v.y;
            self.rhs[2 * n + i] = v.z;
        }
        let llt = LltRef::new(&self.symbolic, &self.factor_values);
        let rhs = MatMut::from_column_major_slice_mut(&mut self.rhs, n, 3);
        let stack = MemStack::new(&mut self.mem);
        llt.solve_in_place_with_conj(Conj::No, rhs, Par::Seq, stack);
        for (i, v) in x.iter_mut().enumerate().take(n) {
            *v = Vec3::new(self.rhs[i], self.rhs[n + i], self.rhs[2 * n + i]);
        }
    }

    /// Solves `L x = b` for the three coordinates in place through the factor rounded to f32
    /// (half the memory traffic of [`SparseCholesky::solve_in_place`]): a relative error of about
    /// `cond(L) * 6e-8`, meant for corrections whose size is small next to the solution's.
    ///
    /// From [`SPLIT_SOLVE_ROWS`] rows on, the solve runs on two threads (rayon): a single
    /// body's solve otherwise leaves the second core idle. A supernodal factor whose
    /// elimination tree splits into two balanced groups of subtrees is solved by
    /// `SubtreeSplit` (the `subtree_solve` module), each thread reading its half of the factor; otherwise x and y are
    /// solved on one thread and z on another, each reading the whole factor. Which path runs
    /// depends on the factor alone, so the result does not depend on the thread count.
    /// Measured for the coordinate split (40K-vertex cube, 10 solves, three runs): 14.8-16.5
    /// ms against 18.3 ms on one thread; at 10K 1.55-1.71 against 1.72 ms; faer's own parallel
    /// solve (`Par::rayon(2)`) took 94.6 and 20.4 ms. The tree split against the coordinate
    /// split: see the `subtree_solve` module (40K: 14.3-17.4 against 23.1-26.0 ms).
    pub fn solve_correction_in_place(&mut self, x: &mut [Vec3]) {
        if !self.factored {
            return;
        }
        let n = self.symbolic.nrows();
        if let (Some(split), SymbolicCholeskyRaw::Supernodal(supernodal)) =
            (&mut self.subtree_split, self.symbolic.raw())
        {
            let rhs = &mut self.rhs_f32[..3 * n];
            let perm = self.symbolic.perm().map(|p| p.arrays());
            for i in 0..n {
                let v = x[perm.map_or(i, |(forward, _)| forward[i])];
                rhs[i] = v.x as f32;
                rhs[n + i] = v.y as f32;
                rhs[2 * n + i] = v.z as f32;
            }
            split.solve_in_place(
                SupernodalLltRef::new(supernodal, &self.factor_values_f32),
                rhs,
            );
            for (i, v) in x.iter_mut().enumerate().take(n) {
                let k = perm.map_or(i, |(_, inverse)| inverse[i]);
                *v = Vec3::new(rhs[k] as f64, rhs[n + k] as f64, rhs[2 * n + k] as f64);
            }
            return;
        }
        for (i, v) in x.iter().enumerate().take(n) {
            self.rhs_f32[i] = v.x as f32;
            self.rhs_f32[n + i] = v.y as f32;
            self.rhs_f32[2 * n + i] = v.z as f32;
        }
        let llt = LltRef::new(&self.symbolic, &self.factor_values_f32);
        if n >= SPLIT_SOLVE_ROWS {
            let (xy, z) = self.rhs_f32[..3 * n].split_at_mut(2 * n);
            let (mem, mem_z) = (&mut self.mem, &mut self.mem_split);
            rayon::join(
                || {
                    let rhs = MatMut::from_column_major_slice_mut(xy, n, 2);
                    llt.solve_in_place_with_conj(Conj::No, rhs, Par::Seq, MemStack::new(mem));
                },
                || {
                    let rhs = MatMut::from_column_major_slice_mut(z, n, 1);
                    llt.solve_in_place_with_conj(Conj::No, rhs, Par::Seq, MemStack::new(mem_z));
                },
            );
        } else {
            let rhs = MatMut::from_column_major_slice_mut(&mut self.rhs_f32, n, 3);
            let stack = MemStack::new(&mut self.mem);
            llt.solve_in_place_with_conj(Conj::No, rhs, Par::Seq, stack);
        }
        for (i, v) in x.iter_mut().enumerate().take(n) {
            *v = Vec3::new(
                self.rhs_f32[i] as f64,
                self.rhs_f32[n + i] as f64,
                self.rhs_f32[2 * n + i] as f64,
            );
        }
    }

    /// Solves `L x = b` for one right-hand side in place, through a shared factor with
    /// caller-owned scratch. Does nothing if no factorization succeeded.
    pub fn solve_scalar_with(&self, x: &mut [f64], scratch: &mut SolveScratch) {
        if !self.factored {
            return;
        }
        let mem = scratch.buffer(self.scalar_req);
        let n = self.symbolic.nrows();
        let llt = LltRef::new(&self.symbolic, &self.factor_values);
        let rhs = MatMut::from_column_major_slice_mut(&mut x[..n], n, 1);
        llt.solve_in_place_with_conj(Conj::No, rhs, Par::Seq, MemStack::new(mem));
    }

    /// Solves `L x = b` for the three coordinates in place through the factor rounded to f32,
    /// as [`SparseCholesky::solve_correction_in_place`] does but through a shared factor,
    /// on one thread, with caller-owned scratch (`buffer` holds the f32 right-hand sides).
    /// Does nothing if no factorization succeeded.
    pub fn solve_correction_with(
        &self,
        x: &mut [Vec3],
        buffer: &mut Vec<f32>,
        scratch: &mut SolveScratch,
    ) {
        if !self.factored {
            return;
        }
        let n = self.symbolic.nrows();
        buffer.clear();
        buffer.resize(3 * n, 0.0);
        for (i, v) in x.iter().enumerate().take(n) {
            buffer[i] = v.x as f32;
            buffer[n + i] = v.y as f32;
            buffer[2 * n + i] = v.z as f32;
        }
        let mem = scratch.buffer(self.symbolic.solve_in_place_scratch::<f32>(3, Par::Seq));
        let llt = LltRef::new(&self.symbolic, &self.factor_values_f32);
        let rhs = MatMut::from_column_major_slice_mut(buffer, n, 3);
        llt.solve_in_place_with_conj(Conj::No, rhs, Par::Seq, MemStack::new(mem));
        for (i, v) in x.iter_mut().enumerate().take(n) {
            *v = Vec3::new(
                buffer[i] as f64,
                buffer[n + i] as f64,
                buffer[2 * n + i] as f64,
            );
        }
    }

    /// Each thread's share of the factor in the correction solve's split along the elimination
    /// tree (`SubtreeSplit::shares`), or `None` where the solve does not split the tree.
    pub fn subtree_shares(&self) -> Option<[f64; 2]> {
        self.subtree_split.as_ref().map(SubtreeSplit::shares)
    }

    /// The supernodal structure of the factor, where faer chose a supernodal one.
    #[cfg(test)]
    pub(crate) fn supernodal_symbolic(
        &self,
    ) -> Option<&faer::sparse::linalg::cholesky::supernodal::SymbolicSupernodalCholesky<usize>>
    {
        match self.symbolic.raw() {
            SymbolicCholeskyRaw::Supernodal(supernodal) => Some(supernodal),
            SymbolicCholeskyRaw::Simplicial(_) => None,
        }
    }

    /// Number of stored values of the factor.
    pub fn factor_nnz(&self) -> usize {
        self.factor_values.len()
    }
}

/// A lattice cube's PD-like matrix (graph Laplacian of its tets' edges plus 0.3 on the
/// diagonal, a mass term) with `(resolution + 1)^3` vertices, and the vertices' positions (m).
#[cfg(test)]
pub(crate) fn lattice_test_system(resolution: usize) -> (SymmetricMatrix, Vec<Vec3>) {
    let mesh = crate::sim::TetMesh::cuboid(Vec3::repeat(0.5), resolution);
    let pairs: Vec<(u32, u32)> = mesh
        .tets()
        .iter()
        .flat_map(|t| (0..4).flat_map(move |a| (a + 1..4).map(move |b| (t[a], t[b]))))
        .collect();
    let n = mesh.vertex_count();
    let mut m = SymmetricMatrix::from_pairs(n, pairs.iter().copied());
    for &(a, b) in &pairs {
        for (i, j, s) in [(a, a, 1.0), (b, b, 1.0), (a, b, -1.0), (b, a, -1.0)] {
            let k = m.slot(i as usize, j as usize).unwrap();
            m.values_mut()[k] += s;
        }
    }
    for i in 0..n {
        let k = m.diag_slot(i);
        m.values_mut()[k] += 0.3;
    }
    (m, mesh.rest_positions().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random SPD matrix on a 1D chain plus random long-range couplings.
    fn test_matrix(n: usize) -> SymmetricMatrix {
        let mut seed = 7u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 11) as f64) / ((1u64 << 53) as f64)
        };
        let mut pairs: Vec<(u32, u32)> = (1..n as u32).map(|i| (i - 1, i)).collect();
        for _ in 0..n {
            let a = (rnd() * n as f64) as u32 % n as u32;
            let b = (rnd() * n as f64) as u32 % n as u32;
            pairs.push((a, b));
        }
        let mut m = SymmetricMatrix::from_pairs(n, pairs.clone());
        for &(a, b) in &pairs {
            if a == b {
                continue;
            }
            let w = rnd() + 0.1;
            // Add a Laplacian edge term: keeps symmetry and positive semi-definiteness.
            for (i, j, s) in [(a, a, w), (b, b, w), (a, b, -w), (b, a, -w)] {
                let k = m.slot(i as usize, j as usize).unwrap();
                m.values_mut()[k] += s;
            }
        }
        for i in 0..n {
            let k = m.diag_slot(i);
            m.values_mut()[k] += 0.5 + rnd();
        }
        m
    }

    /// The kept Jacobi-scaled values applied in one pass equal the scaling around the plain
    /// product, `D^-1/2 (L (D^-1/2 x))`.
    #[test]
    fn jacobi_scaled_values_scale_the_product() {
        let n = 60;
        let m = test_matrix(n);
        let (mut scale, mut values) = (Vec::new(), Vec::new());
        m.jacobi_scaled_values(&mut scale, &mut values);
        for (i, s) in scale.iter().enumerate() {
            assert_eq!(*s, 1.0 / m.diagonal(i).sqrt());
        }
        let x: Vec<Vec3> = (0..n)
            .map(|i| Vec3::new((i as f64).cos(), 0.5 - i as f64 * 0.01, (i % 3) as f64))
            .collect();
        let scaled_x: Vec<Vec3> = x.iter().zip(&scale).map(|(x, s)| x * *s).collect();
        let mut plain = vec![Vec3::zeros(); n];
        m.mul_vec3(&scaled_x, &mut plain);
        let mut kept = vec![Vec3::zeros(); n];
        m.mul_vec3_with(&values, &x, &mut kept);
        for ((p, k), s) in plain.iter().zip(&kept).zip(&scale) {
            assert!((p * *s - k).norm() < 1e-14 * (1.0 + k.norm()), "{p} vs {k}");
        }
        // Single rows are the product's rows, to the bit.
        for (i, p) in plain.iter().enumerate() {
            assert_eq!(m.mul_row(&scaled_x, i), *p);
        }
    }

    #[test]
    fn cholesky_solve_matches_dense_solve() {
        let n = 60;
        let m = test_matrix(n);
        let dense = nalgebra::DMatrix::from_fn(n, n, |i, j| m.get(i, j));
        assert!((dense.clone() - dense.transpose()).norm() < 1e-14);
        let mut chol = SparseCholesky::analyse(&m).unwrap();
        chol.factorize(&m).unwrap();
        let b: Vec<Vec3> = (0..n)
            .map(|i| Vec3::new(i as f64, (i * i) as f64 * 0.01, 1.0 - i as f64 * 0.3))
            .collect();
        let mut x = b.clone();
        chol.solve_in_place(&mut x);
        let dense_chol = dense.clone().cholesky().unwrap();
        for c in 0..3 {
            let bc = nalgebra::DVector::from_fn(n, |i, _| b[i][c]);
            let xc = dense_chol.solve(&bc);
            for i in 0..n {
                assert!((x[i][c] - xc[i]).abs() < 1e-10 * (1.0 + xc[i].abs()));
            }
        }
        // Residual through the CSR product.
        let mut ax = vec![Vec3::zeros(); n];
        m.mul_vec3(&x, &mut ax);
        for i in 0..n {
            assert!((ax[i] - b[i]).norm() < 1e-9);
        }
    }

    #[test]
    fn shared_scalar_solve_matches_the_dense_solve() {
        let n = 60;
        let m = test_matrix(n);
        let dense = nalgebra::DMatrix::from_fn(n, n, |i, j| m.get(i, j));
        let mut chol = SparseCholesky::analyse(&m).unwrap();
        chol.factorize(&m).unwrap();
        let mut scratch = SolveScratch::default();
        for k in 0..3 {
            let b: Vec<f64> = (0..n).map(|i| ((i * (k + 2)) % 7) as f64 - 3.0).collect();
            let mut x = b.clone();
            chol.solve_scalar_with(&mut x, &mut scratch);
            let xd = dense
                .clone()
                .cholesky()
                .unwrap()
                .solve(&nalgebra::DVector::from_column_slice(&b));
            for i in 0..n {
                assert!((x[i] - xd[i]).abs() < 1e-10 * (1.0 + xd[i].abs()));
            }
        }
    }

    #[test]
    fn f32_correction_solve_is_accurate_to_its_rounding_and_refines_to_the_f64_solution() {
        let n = 60;
        let m = test_matrix(n);
        let dense = nalgebra::DMatrix::from_fn(n, n, |i, j| m.get(i, j));
        let mut chol = SparseCholesky::analyse(&m).unwrap();
        chol.factorize(&m).unwrap();
        let b: Vec<Vec3> = (0..n)
            .map(|i| Vec3::new((i as f64).sin(), 1.0 - i as f64 * 0.3, (i % 5) as f64))
            .collect();
        let dense_chol = dense.cholesky().unwrap();
        let exact: Vec<Vec3> = {
            let cols: Vec<_> = (0..3)
                .map(|c| dense_chol.solve(&nalgebra::DVector::from_fn(n, |i, _| b[i][c])))
                .collect();
            (0..n)
                .map(|i| Vec3::new(cols[0][i], cols[1][i], cols[2][i]))
                .collect()
        };
        let norm = |v: &[Vec3]| v.iter().map(|p| p.norm_squared()).sum::<f64>().sqrt();
        let error = |x: &[Vec3]| {
            let d: Vec<Vec3> = x.iter().zip(&exact).map(|(a, e)| a - e).collect();
            norm(&d) / norm(&exact)
        };
        let mut x = b.clone();
        chol.solve_correction_in_place(&mut x);
        let first = error(&x);
        // f32 rounding (6e-8) times the small condition number of the test matrix.
        assert!(first < 1e-5, "{first:e}");
        assert!(
            first > 1e-12,
            "a solve in f32 should not be f64-exact: {first:e}"
        );
        // Defect correction, as the PD iterations use it: x += A^-1 (b - A x), the defect in
        // f64, converges to the f64 solution.
        let mut defect = vec![Vec3::zeros(); n];
        for _ in 0..3 {
            m.mul_vec3(&x, &mut defect);
            for (d, bi) in defect.iter_mut().zip(&b) {
                *d = bi - *d;
            }
            chol.solve_correction_in_place(&mut defect);
            for (xi, d) in x.iter_mut().zip(&defect) {
                *xi += d;
            }
        }
        assert!(error(&x) < 1e-13, "{:e}", error(&x));
    }

    #[test]
    fn nested_dissection_factor_solves_a_lattice_system_with_less_fill() {
        // A 22^3-vertex lattice's PD-like matrix (graph Laplacian plus mass): the dissection
        // ordering must be kept (fewer factor entries than AMD) and solve to the same answer
        // as the AMD factor, with a small residual through the CSR product.
        let (m, rest) = lattice_test_system(21);
        let n = m.dim();
        let mut amd = SparseCholesky::analyse(&m).unwrap();
        let mut nd = SparseCholesky::analyse_with_coordinates(&m, &rest).unwrap();
        assert_eq!(nd.ordering(), FillOrdering::NestedDissection);
        assert!(nd.factor_nnz() < amd.factor_nnz());
        amd.factorize(&m).unwrap();
        nd.factorize(&m).unwrap();
        let b: Vec<Vec3> = rest.iter().map(|p| p.map(f64::sin)).collect();
        let (mut x_amd, mut x_nd) = (b.clone(), b.clone());
        amd.solve_in_place(&mut x_amd);
        nd.solve_in_place(&mut x_nd);
        let mut ax = vec![Vec3::zeros(); n];
        m.mul_vec3(&x_nd, &mut ax);
        for i in 0..n {
            assert!((x_nd[i] - x_amd[i]).norm() < 1e-10 * (1.0 + x_amd[i].norm()));
            assert!((ax[i] - b[i]).norm() < 1e-9);
        }
    }

    /// The correction solve of a large factor, split along its elimination tree, solves to
    /// f32 accuracy (against the f64 solve) and gives the same bits on one thread as on two.
    #[test]
    fn the_tree_split_correction_solve_matches_the_f64_solve_on_any_thread_count() {
        let (m, rest) = lattice_test_system(21);
        let n = m.dim();
        assert!(n >= SPLIT_SOLVE_ROWS);
        let mut chol = SparseCholesky::analyse_with_coordinates(&m, &rest).unwrap();
        chol.factorize(&m).unwrap();
        let shares = chol.subtree_shares().expect("a lattice's tree splits");
        assert!(shares.iter().all(|&s| s > 0.3), "{shares:?}");
        let b: Vec<Vec3> = rest.iter().map(|p| p.map(|c| (7.0 * c).sin())).collect();
        let mut exact = b.clone();
        chol.solve_in_place(&mut exact);
        let mut solve_on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut x = b.clone();
            pool.install(|| chol.solve_correction_in_place(&mut x));
            x
        };
        let (one, two) = (solve_on(1), solve_on(2));
        assert_eq!(
            one, two,
            "the split's bits must not depend on the thread count"
        );
        let scale = exact.iter().map(|v| v.norm()).fold(0.0, f64::max);
        let error = exact
            .iter()
            .zip(&two)
            .map(|(e, x)| (e - x).norm())
            .fold(0.0, f64::max);
        // f32 rounding (6e-8) times the lattice matrix's condition number (about 50).
        assert!(error < 1e-5 * scale, "{error:e} of {scale:e}");
        assert!(error > 0.0, "an f32 solve should not be f64-exact");
    }

    #[test]
    fn indefinite_matrix_is_reported() {
        let mut m = SymmetricMatrix::from_pairs(3, [(0, 1), (1, 2)]);
        for i in 0..3 {
            let k = m.diag_slot(i);
            m.values_mut()[k] = 1.0;
        }
        let k = m.slot(0, 1).unwrap();
        m.values_mut()[k] = 3.0;
        let k = m.slot(1, 0).unwrap();
        m.values_mut()[k] = 3.0;
        let mut chol = SparseCholesky::analyse(&m).unwrap();
        assert!(matches!(
            chol.factorize(&m),
            Err(FactorError::NotPositiveDefinite { .. })
        ));
        assert!(!chol.is_factored());
    }
}
