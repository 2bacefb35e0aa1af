//! [`SymmetricMatrix`]: a symmetric sparse matrix over mesh vertices with a fixed pattern (full
//! CSR storage), and its products with vertex vectors. The PD global matrix, the Newton
//! Hessians and the coarse contact operators are stored in it; [`super::SparseCholesky`]
//! factors it.

use rayon::prelude::*;

use crate::sim::math::Vec3;

/// A symmetric `n x n` sparse matrix with a fixed pattern, full CSR storage.
#[derive(Debug, Clone)]
pub struct SymmetricMatrix {
    /// Number of rows (and columns).
    pub(super) n: usize,
    /// CSR row starts: row `i`'s entries are `row_ptr[i]..row_ptr[i + 1]`.
    pub(super) row_ptr: Vec<usize>,
    /// Column of each stored entry, sorted within a row.
    pub(super) col_idx: Vec<u32>,
    /// Value of each stored entry.
    pub(super) values: Vec<f64>,
    /// Index of each row's diagonal entry in `values`.
    pub(super) diag_slot: Vec<usize>,
}

impl SymmetricMatrix {
    /// Builds the pattern from the diagonal plus the given off-diagonal pairs (either order,
    /// duplicates allowed); all values start at zero.
    pub fn from_pairs(n: usize, pairs: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let mut entries: Vec<(u32, u32)> = (0..n as u32).map(|i| (i, i)).collect();
        for (a, b) in pairs {
            if a != b {
                entries.push((a, b));
                entries.push((b, a));
            }
        }
        entries.sort_unstable();
        entries.dedup();
        let mut row_ptr = vec![0usize; n + 1];
        for &(r, _) in &entries {
            row_ptr[r as usize + 1] += 1;
        }
        for i in 0..n {
            row_ptr[i + 1] += row_ptr[i];
        }
        let col_idx: Vec<u32> = entries.iter().map(|&(_, c)| c).collect();
        let mut m = Self {
            n,
            row_ptr,
            values: vec![0.0; col_idx.len()],
            col_idx,
            diag_slot: Vec::new(),
        };
        m.diag_slot = (0..n).map(|i| m.slot(i, i).unwrap_or(0)).collect();
        m
    }

    /// Dimension `n`.
    pub fn dim(&self) -> usize {
        self.n
    }

    /// Number of stored entries (both triangles).
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Position of entry `(i, j)` in the value array, if it is in the pattern.
    pub fn slot(&self, i: usize, j: usize) -> Option<usize> {
        let (lo, hi) = (self.row_ptr[i], self.row_ptr[i + 1]);
        self.col_idx[lo..hi]
            .binary_search(&(j as u32))
            .ok()
            .map(|k| lo + k)
    }

    /// Position of the diagonal entry `(i, i)`.
    pub fn diag_slot(&self, i: usize) -> usize {
        self.diag_slot[i]
    }

    /// Mutable values, in the order of [`SymmetricMatrix::slot`].
    pub fn values_mut(&mut self) -> &mut [f64] {
        &mut self.values
    }

    /// Values, in the order of [`SymmetricMatrix::slot`].
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Entry `(i, j)`, zero outside the pattern.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.slot(i, j).map_or(0.0, |s| self.values[s])
    }

    /// The diagonal entry `(i, i)`.
    pub fn diagonal(&self, i: usize) -> f64 {
        self.values[self.diag_slot[i]]
    }

    /// `out = L x` applied to each coordinate of the 3-vectors (`(L (x) I_3) x`). Rows in
    /// parallel (rayon) from [`PARALLEL_MATVEC_ROWS`] rows on; each row's sum is the same either
    /// way.
    pub fn mul_vec3(&self, x: &[Vec3], out: &mut [Vec3]) {
        self.mul_vec3_with(&self.values, x, out);
    }

    /// The values of the Jacobi-scaled matrix `D^-1/2 L D^-1/2` (`D` the diagonal) on this
    /// pattern into `out`, and the scaling into `scale`: entry `(i, j)` is `L_ij * (s_i * s_j)`
    /// with `s_i = 1 / sqrt(L_ii)`,
    /// the scaling [`crate::sim::qp::mprgp::Mprgp`] solves with. Non-positive diagonal entries
    /// give non-finite values (MPRGP refuses such a matrix before it applies them).
    pub fn jacobi_scaled_values(&self, scale: &mut Vec<f64>, out: &mut Vec<f64>) {
        scale.clear();
        scale.extend((0..self.n).map(|i| 1.0 / self.diagonal(i).sqrt()));
        out.clear();
        out.resize(self.values.len(), 0.0);
        for i in 0..self.n {
            for k in self.row_ptr[i]..self.row_ptr[i + 1] {
                out[k] = self.values[k] * (scale[i] * scale[self.col_idx[k] as usize]);
            }
        }
    }

    /// [`SymmetricMatrix::mul_vec3`] with `values` (in the order of [`SymmetricMatrix::slot`])
    /// in place of the matrix's own: another matrix on the same pattern, such as the
    /// [`SymmetricMatrix::jacobi_scaled_values`].
    ///
    /// # Panics
    /// If `values` does not have one value per stored entry.
    pub fn mul_vec3_with(&self, values: &[f64], x: &[Vec3], out: &mut [Vec3]) {
        assert_eq!(values.len(), self.values.len(), "one value per entry");
        let out = &mut out[..self.n];
        if self.n < PARALLEL_MATVEC_ROWS {
            self.mul_rows(values, 0, x, out);
        } else {
            out.par_chunks_mut(MATVEC_CHUNK_ROWS)
                .enumerate()
                .for_each(|(c, rows)| self.mul_rows(values, c * MATVEC_CHUNK_ROWS, x, rows));
        }
    }

    /// Rows `first..first + out.len()` of `L x`, `L` with `values`.
    fn mul_rows(&self, values: &[f64], first: usize, x: &[Vec3], out: &mut [Vec3]) {
        for (r, o) in out.iter_mut().enumerate() {
            *o = self.mul_row_with(values, x, first + r);
        }
    }

    /// Row `i` of `L x` (as [`SymmetricMatrix::mul_vec3`] forms it).
    pub fn mul_row(&self, x: &[Vec3], i: usize) -> Vec3 {
        self.mul_row_with(&self.values, x, i)
    }

    /// Row `i` of `L x`, `L` with `values`.
    fn mul_row_with(&self, values: &[f64], x: &[Vec3], i: usize) -> Vec3 {
        let mut acc = Vec3::zeros();
        for k in self.row_ptr[i]..self.row_ptr[i + 1] {
            acc += values[k] * x[self.col_idx[k] as usize];
        }
        acc
    }

    /// The columns of row `i`'s stored entries, sorted (the diagonal included).
    pub fn neighbours(&self, i: usize) -> &[u32] {
        &self.col_idx[self.row_ptr[i]..self.row_ptr[i + 1]]
    }

    /// Row `i`'s stored columns (sorted) and values.
    pub fn row_entries(&self, i: usize) -> (&[u32], &[f64]) {
        let range = self.row_ptr[i]..self.row_ptr[i + 1];
        (&self.col_idx[range.clone()], &self.values[range])
    }

    /// Iterates the stored entries `(col, value)` of row `i`.
    pub fn row(&self, i: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        (self.row_ptr[i]..self.row_ptr[i + 1]).map(|k| (self.col_idx[k] as usize, self.values[k]))
    }
}

/// Rows from which [`SymmetricMatrix::mul_vec3`] runs in parallel: below, a product costs
/// about as much as handing it to the other threads (0.01 ms at 1,000 rows on this project's
/// 2-core machine).
pub const PARALLEL_MATVEC_ROWS: usize = 4096;

/// Rows per parallel task of [`SymmetricMatrix::mul_vec3`].
const MATVEC_CHUNK_ROWS: usize = 1024;
