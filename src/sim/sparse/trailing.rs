//! A factor whose last rows are a chosen set `C` (the collision-prone vertices), and the dense
//! block `(A^-1)_CC` that comes out of it.
//!
//! Ordering the vertices of `C` after all others, `A = L L'` splits as
//!
//! `L = [L_FF 0; L_CF L_CC]`, with `L_CC L_CC' = S = A_CC - A_CF A_FF^-1 A_FC`,
//!
//! so the factor's trailing diagonal block is the Cholesky factor of the Schur complement of
//! the other vertices, and `(A^-1)_CC = S^-1 = L_CC^-T L_CC^-1` (Wang et al. 2020, "Fast
//! Projective Dynamics with localized collisions", section 4.3, eq. 14: the partial
//! factorization is the first part of the full one). Rows of a contact QP that touch only
//! vertices of `C` then see the whole body through this `|C| x |C|` matrix.
//!
//! The other vertices keep the order of the first analysis (nested dissection or AMD). The
//! fill grows by the trailing block and by the rows of `L_CF`, which reach every separator
//! the region borders: the paper measures under 1 % on its meshes; a scratch timing of ours,
//! 3.14 M against 2.44 M entries (the 10,648-vertex bench cube with its 484-vertex bottom
//! face last; 60 against 32-42 ms to factor) and 15.8 M against 15.7 M (the 39,304-vertex
//! cube with a 256-vertex patch of its top last). Ordering the other vertices by nested
//! dissection of their own graph instead filled as much (3.18 M).
//!
//! Deviation: the paper keeps the partial factor's Schur complement `S` and refactors it
//! densely on a GPU with its penalty terms added; ours are hard constraints, so what is kept
//! is `S^-1`, computed once per factorization (one dense triangular inverse and one product of
//! two triangles, `O(|C|^3)`), and the contact rows' dual matrix reads its entries.

use faer::linalg::matmul::triangular::{BlockStructure, matmul};
use faer::linalg::triangular_inverse::invert_lower_triangular;
use faer::perm::PermRef;
use faer::sparse::linalg::cholesky::supernodal::SupernodalLltRef;
use faer::sparse::linalg::cholesky::{SymbolicCholeskyRaw, SymmetricOrdering};
use faer::{Accum, Mat, Par};

use super::subtree_solve::{self, SplitScratch};
use super::{FactorError, SolveScratch, SparseCholesky, SymmetricMatrix, symbolic_cholesky};
use crate::sim::math::Vec3;

impl SparseCholesky {
    /// The symbolic analysis of `matrix` (the pattern `self` was analysed for) with the rows
    /// `trailing` (distinct, each `< n`) ordered last, in that order, and the others in the
    /// order of `self`'s first analysis (so the result does not depend on earlier trailing
    /// rows). The result is not factored ([`SparseCholesky::factorize`] next).
    ///
    /// # Errors
    /// [`FactorError::Internal`] if faer fails to analyse the pattern, or a row of `trailing`
    /// is out of range or repeated.
    pub fn analyse_with_trailing(
        &self,
        matrix: &SymmetricMatrix,
        trailing: &[u32],
    ) -> Result<Self, FactorError> {
        let n = matrix.dim();
        let mut last = vec![false; n];
        for &v in trailing {
            match last.get_mut(v as usize) {
                Some(seen) if !*seen => *seen = true,
                _ => {
                    return Err(FactorError::Internal(format!(
                        "trailing row {v} out of range or repeated"
                    )));
                }
            }
        }
        let mut forward: Vec<usize> = match &self.base_order {
            Some(base) => base.iter().copied().filter(|&v| !last[v]).collect(),
            None => (0..n).filter(|&v| !last[v]).collect(),
        };
        forward.extend(trailing.iter().map(|&v| v as usize));
        let mut inverse = vec![0usize; n];
        for (k, &v) in forward.iter().enumerate() {
            inverse[v] = k;
        }
        let (upper, upper_from_full) = (self.upper.clone(), self.upper_from_full.clone());
        let perm = PermRef::new_checked(&forward, &inverse, n);
        let symbolic = symbolic_cholesky(&upper, SymmetricOrdering::Custom(perm))?;
        let mut result = Self::with_symbolic(symbolic, upper, upper_from_full, self.ordering)?;
        result.trailing = trailing.len();
        result.base_order = self.base_order.clone();
        Ok(result)
    }

    /// Rows ordered last by [`SparseCholesky::analyse_with_trailing`] (0 for other factors).
    pub fn trailing_len(&self) -> usize {
        self.trailing
    }

    /// The dense block of `A^-1` over the trailing rows, `k x k` column-major (`k` =
    /// [`SparseCholesky::trailing_len`]), in the order they were given: `S^-1` for the
    /// trailing block's Schur complement (module docs).
    ///
    /// # Errors
    /// [`FactorError::Internal`] if the matrix is not factored.
    pub fn trailing_inverse(&self, out: &mut Vec<f64>) -> Result<(), FactorError> {
        if !self.factored {
            return Err(FactorError::Internal("not factored".into()));
        }
        let n = self.symbolic.nrows();
        let k = self.trailing;
        let first = n - k;
        out.clear();
        out.resize(k * k, 0.0);
        match self.symbolic.raw() {
            SymbolicCholeskyRaw::Supernodal(supernodal) => {
                // `L_CC` from the supernodes holding the trailing columns.
                let mut l = Mat::<f64>::zeros(k, k);
                let llt = SupernodalLltRef::new(supernodal, &self.factor_values);
                for s in 0..supernodal.n_supernodes() {
                    let node = llt.supernode(s);
                    let (start, pattern, block) = (node.start(), node.pattern(), node.val());
                    let size = block.ncols();
                    if start + size <= first {
                        continue;
                    }
                    for c in first.saturating_sub(start)..size {
                        let j = start + c - first;
                        for r in c..size {
                            l[(start + r - first, j)] = block[(r, c)];
                        }
                        for (p, &row) in pattern.iter().enumerate() {
                            l[(row - first, j)] = block[(size + p, c)];
                        }
                    }
                }
                let mut inverse = Mat::<f64>::zeros(k, k);
                invert_lower_triangular(inverse.as_mut(), l.as_ref(), Par::rayon(0));
                // `L_CC^-T L_CC^-1`: its lower half from the two triangles (a sixth of a
                // dense product's work), then mirrored.
                let mut product = Mat::<f64>::zeros(k, k);
                matmul(
                    product.as_mut(),
                    BlockStructure::TriangularLower,
                    Accum::Replace,
                    inverse.transpose(),
                    BlockStructure::TriangularUpper,
                    inverse.as_ref(),
                    BlockStructure::TriangularLower,
                    1.0,
                    Par::rayon(0),
                );
                for j in 0..k {
                    for i in j..k {
                        let value = product[(i, j)];
                        out[j * k + i] = value;
                        out[i * k + j] = value;
                    }
                }
            }
            SymbolicCholeskyRaw::Simplicial(_) => {
                // A small or very sparse factor: one solve per trailing row.
                let perm = self.symbolic.perm().map(|p| p.arrays().0);
                let row_of = |position: usize| perm.map_or(position, |forward| forward[position]);
                let mut scratch = SolveScratch::default();
                let mut column = vec![0.0; n];
                for j in 0..k {
                    column.fill(0.0);
                    column[row_of(first + j)] = 1.0;
                    self.solve_scalar_with(&mut column, &mut scratch);
                    for i in 0..k {
                        out[j * k + i] = column[row_of(first + i)];
                    }
                }
            }
        }
        Ok(())
    }
}

/// Caller-owned scratch of [`SparseCholesky::solve_trailing_with`].
#[derive(Debug, Default, Clone)]
pub struct TrailingScratch {
    rhs: Vec<f32>,
    product: Vec<f32>,
    split: SplitScratch,
    full: SolveScratch,
}

impl SparseCholesky {
    /// `x = A^-1 f` for a right-hand side `f` that is zero but on the trailing rows, where it is
    /// `forces` (in the trailing order, three coordinates), through the factor rounded to f32
    /// and a shared factor with caller-owned scratch. `x` is written over all rows.
    ///
    /// Since the trailing rows come last, the forward substitution leaves every other row at
    /// zero and only the supernodes holding trailing columns run; the backward substitution is
    /// whole (on two threads where the factor's tree splits, as in
    /// [`SparseCholesky::solve_correction_in_place`]). About half of a solve.
    ///
    /// # Panics
    /// If `forces` is not [`SparseCholesky::trailing_len`] long or `x` is shorter than the
    /// matrix.
    pub fn solve_trailing_with(
        &self,
        forces: &[Vec3],
        x: &mut [Vec3],
        scratch: &mut TrailingScratch,
    ) {
        let n = self.symbolic.nrows();
        let k = self.trailing;
        assert_eq!(forces.len(), k, "a force per trailing row");
        if !self.factored {
            return;
        }
        let first = n - k;
        let SymbolicCholeskyRaw::Supernodal(supernodal) = self.symbolic.raw() else {
            // A small or very sparse factor: the whole solve.
            let perm = self.symbolic.perm().map(|p| p.arrays().0);
            x[..n].fill(Vec3::zeros());
            for (j, f) in forces.iter().enumerate() {
                x[perm.map_or(first + j, |forward| forward[first + j])] = *f;
            }
            let mut buffer = std::mem::take(&mut scratch.rhs);
            self.solve_correction_with(x, &mut buffer, &mut scratch.full);
            scratch.rhs = buffer;
            return;
        };
        let llt = SupernodalLltRef::new(supernodal, &self.factor_values_f32);
        let rhs = &mut scratch.rhs;
        rhs.clear();
        rhs.resize(3 * n, 0.0);
        for (j, f) in forces.iter().enumerate() {
            rhs[first + j] = f.x as f32;
            rhs[n + first + j] = f.y as f32;
            rhs[2 * n + first + j] = f.z as f32;
        }
        let longest = (0..supernodal.n_supernodes())
            .map(|s| supernodal.supernode(s).pattern().len())
            .max()
            .unwrap_or(0);
        scratch.product.resize(3 * longest, 0.0);
        // Supernodes end in increasing order: those holding trailing columns are the last.
        let ends = supernodal.supernode_end();
        let from = ends.partition_point(|&end| end <= first);
        for s in from..supernodal.n_supernodes() {
            subtree_solve::forward(llt, s, rhs, &mut scratch.product);
        }
        match &self.subtree_split {
            Some(split) => split.backward_with(llt, rhs, &mut scratch.split),
            None => {
                for s in (0..supernodal.n_supernodes()).rev() {
                    subtree_solve::backward(llt, s, rhs, &mut scratch.product);
                }
            }
        }
        let perm = self.symbolic.perm().map(|p| p.arrays().1);
        for (i, v) in x.iter_mut().enumerate().take(n) {
            let p = perm.map_or(i, |inverse| inverse[i]);
            *v = Vec3::new(rhs[p] as f64, rhs[n + p] as f64, rhs[2 * n + p] as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lattice_test_system;
    use super::*;

    /// The trailing block's inverse equals the block of the inverse found by one solve per
    /// column through the plain factor, in the order the rows were given; solves through
    /// the reordered factor agree with the plain ones. Both of faer's factor kinds.
    #[test]
    fn the_trailing_inverse_is_the_block_of_the_inverse() {
        check_trailing_inverse(3, false);
        check_trailing_inverse(10, true);
    }

    fn check_trailing_inverse(resolution: usize, supernodal: bool) {
        let (matrix, coordinates) = lattice_test_system(resolution);
        let n = matrix.dim();
        let mut plain = SparseCholesky::analyse_with_coordinates(&matrix, &coordinates).unwrap();
        plain.factorize(&matrix).unwrap();
        // A bottom face and a few scattered rows, out of order.
        let mut trailing: Vec<u32> = (0..n as u32)
            .filter(|&v| coordinates[v as usize].z < -0.2)
            .collect();
        for v in [n as u32 / 2, 3, n as u32 - 5] {
            if !trailing.contains(&v) {
                trailing.push(v);
            }
        }
        trailing.reverse();
        let mut reordered = plain.analyse_with_trailing(&matrix, &trailing).unwrap();
        assert_eq!(
            matches!(reordered.symbolic.raw(), SymbolicCholeskyRaw::Supernodal(_)),
            supernodal
        );
        reordered.factorize(&matrix).unwrap();
        let k = trailing.len();
        assert_eq!(reordered.trailing_len(), k);
        let mut block = Vec::new();
        reordered.trailing_inverse(&mut block).unwrap();
        let mut scratch = SolveScratch::default();
        let mut worst = 0.0f64;
        for (j, &v) in trailing.iter().enumerate() {
            let mut column = vec![0.0; n];
            column[v as usize] = 1.0;
            plain.solve_scalar_with(&mut column, &mut scratch);
            for (i, &u) in trailing.iter().enumerate() {
                let truth = column[u as usize];
                worst = worst.max((block[j * k + i] - truth).abs() / column[v as usize]);
            }
        }
        assert!(worst < 1e-12, "largest relative difference {worst:e}");
        let mut x: Vec<_> = coordinates.iter().map(|c| c * 2.0).collect();
        let mut y = x.clone();
        plain.solve_in_place(&mut x);
        reordered.solve_in_place(&mut y);
        for (a, b) in x.iter().zip(&y) {
            assert!((a - b).norm() < 1e-10 * (1.0 + a.norm()));
        }
    }

    /// A solve with forces on the trailing rows only equals the whole solve of the same
    /// right-hand side (to the f32 factor's rounding), with and without the tree split.
    #[test]
    fn a_trailing_solve_is_the_whole_solve() {
        for resolution in [3, 10, 17] {
            let (matrix, coordinates) = lattice_test_system(resolution);
            let n = matrix.dim();
            let mut plain =
                SparseCholesky::analyse_with_coordinates(&matrix, &coordinates).unwrap();
            plain.factorize(&matrix).unwrap();
            let trailing: Vec<u32> = (0..n as u32)
                .filter(|&v| coordinates[v as usize].y > 0.4)
                .collect();
            let mut reordered = plain.analyse_with_trailing(&matrix, &trailing).unwrap();
            reordered.factorize(&matrix).unwrap();
            let forces: Vec<Vec3> = (0..trailing.len())
                .map(|j| Vec3::new(1.0, (j as f64).sin(), -0.5 + (j % 3) as f64))
                .collect();
            let mut whole = vec![Vec3::zeros(); n];
            for (&v, f) in trailing.iter().zip(&forces) {
                whole[v as usize] = *f;
            }
            plain.solve_in_place(&mut whole);
            let mut x = vec![Vec3::repeat(7.0); n];
            let mut scratch = TrailingScratch::default();
            reordered.solve_trailing_with(&forces, &mut x, &mut scratch);
            let scale = whole.iter().map(|v| v.norm()).fold(0.0, f64::max);
            for (a, b) in whole.iter().zip(&x) {
                assert!((a - b).norm() < 1e-5 * scale, "{a} vs {b}");
            }
            if resolution == 17 {
                assert!(reordered.subtree_split.is_some(), "the split path ran");
            }
        }
    }

    /// Repeated or out-of-range trailing rows are refused.
    #[test]
    fn bad_trailing_rows_are_refused() {
        let (matrix, coordinates) = lattice_test_system(2);
        let plain = SparseCholesky::analyse_with_coordinates(&matrix, &coordinates).unwrap();
        assert!(plain.analyse_with_trailing(&matrix, &[1, 1]).is_err());
        assert!(plain.analyse_with_trailing(&matrix, &[99]).is_err());
    }
}
