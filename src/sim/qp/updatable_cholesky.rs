//! A dense Cholesky factor `S_AA = L L'` of a principal submatrix of a symmetric positive
//! definite matrix, kept across changes of the index set `A`: a row leaves by a rank-one update
//! of the trailing block, a row joins by one forward substitution, each `O(k^2)` where
//! factoring anew costs `k^3 / 3`.
//!
//! This is what the dense LCP's successive subspace steps need
//! ([`crate::sim::qp::dense_lcp`]): within one solve the candidate active set of one step
//! differs from the last one's by a row or two (measured on a sim-only replica of the `pile`
//! example, about 220 active rows: half of the factorizations changed at most four rows), so
//! after the first factorization of a solve most of the others can be updates.
//!
//! **Removing** row `p`: with `L = [L11 0 0; l21' l22 0; L31 l32 L33]`, the matrix without row
//! and column `p` is `[L11; L31] [L11; L31]' + [0 0; 0 L33 L33' + l32 l32']`, so `L11` and
//! `L31` stay and `L33` takes the rank-one *update* by `l32` (the classical column sweep of
//! rotations, as in Golub and Van Loan's "Matrix Computations" on updating factorizations):
//! always stable, never a downdate.
//! **Appending** row `a` with entries `b = S_Aa` and diagonal `d`: `l = L^-1 b`,
//! `l_aa = sqrt(d - l' l)`, refused where that is not clearly positive (the set is then
//! singular to working precision and the caller factors anew or gives up).
//!
//! Storage is column-major with a fixed leading dimension (columns contiguous, so the update
//! and the substitutions run down columns); it grows only when a larger set is factored.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{LltParams, LltRegularization, cholesky_in_place};
use faer::{MatMut, Par, Spec};

/// A pivot whose square is below this share of its diagonal entry refuses an append.
const MIN_PIVOT_SHARE: f64 = 1e-12;

/// A Cholesky factor of `S_AA` for an index set `A` kept in factor order.
#[derive(Default)]
pub struct UpdatableCholesky {
    /// The factor's rows (indices into the full matrix), in factor order.
    ids: Vec<usize>,
    /// Column-major lower factor, leading dimension `ld`; entries above the diagonal unused.
    l: Vec<f64>,
    /// Leading dimension (the largest set that fits without growing).
    ld: usize,
    /// Scratch of appends and removals.
    work: Vec<f64>,
    /// faer's factorization scratch and the size it was made for.
    mem: Option<MemBuffer>,
    mem_dim: usize,
}

/// A clone keeps the factor and leaves faer's scratch behind (it is made again on demand).
impl Clone for UpdatableCholesky {
    fn clone(&self) -> Self {
        Self {
            ids: self.ids.clone(),
            l: self.l.clone(),
            ld: self.ld,
            work: self.work.clone(),
            mem: None,
            mem_dim: 0,
        }
    }

    /// The factor into `self`'s buffers (a world snapshot taken into a kept one); the
    /// scratch is left as it is.
    fn clone_from(&mut self, source: &Self) {
        self.ids.clone_from(&source.ids);
        self.l.clone_from(&source.l);
        self.ld = source.ld;
    }
}

impl std::fmt::Debug for UpdatableCholesky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdatableCholesky")
            .field("rows", &self.ids.len())
            .field("capacity", &self.ld)
            .finish()
    }
}

impl UpdatableCholesky {
    /// The rows of the factor, in factor order.
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }

    /// Forgets the factor (the matrix changed).
    pub fn clear(&mut self) {
        self.ids.clear();
    }

    /// Factors `S_AA` anew for the rows `ids`, `fill_column(id, column)` writing
    /// `column[r] = S_{ids[r], id}`. Returns `false` (and holds no factor) where `S_AA` is not
    /// numerically positive definite.
    pub fn factor(
        &mut self,
        ids: &[usize],
        mut fill_column: impl FnMut(usize, &mut [f64]),
    ) -> bool {
        let k = ids.len();
        self.ids.clear();
        if k > self.ld {
            self.ld = (k + k / 4 + 8).next_multiple_of(8);
            self.l.clear();
            self.l.resize(self.ld * self.ld, 0.0);
        }
        let ld = self.ld;
        for (c, &id) in ids.iter().enumerate() {
            // The whole column; faer reads its lower part.
            fill_column(id, &mut self.l[c * ld..c * ld + k]);
        }
        let params = Spec::<LltParams, f64>::default();
        if self.mem.is_none() || self.mem_dim < k {
            let req = faer::linalg::cholesky::llt::factor::cholesky_in_place_scratch::<f64>(
                k,
                Par::Seq,
                params,
            );
            self.mem = Some(MemBuffer::new(req));
            self.mem_dim = k;
        }
        let Some(mem) = self.mem.as_mut() else {
            return false;
        };
        let factor = MatMut::from_column_major_slice_with_stride_mut(
            &mut self.l[..(k.max(1) - 1) * ld + k],
            k,
            k,
            ld,
        );
        if k > 0
            && cholesky_in_place(
                factor,
                LltRegularization::default(),
                Par::Seq,
                MemStack::new(mem),
                params,
            )
            .is_err()
        {
            return false;
        }
        self.ids.extend_from_slice(ids);
        true
    }

    /// Removes the row at factor position `p` (see the module docs).
    pub fn remove(&mut self, p: usize) {
        let k = self.ids.len();
        assert!(p < k, "position {p} outside a factor of {k} rows");
        let ld = self.ld;
        // `x = l32`, the removed column below the diagonal.
        self.work.clear();
        self.work
            .extend_from_slice(&self.l[p * ld + p + 1..p * ld + k]);
        // Columns before `p`: drop row `p`.
        for c in 0..p {
            self.l.copy_within(c * ld + p + 1..c * ld + k, c * ld + p);
        }
        // Columns after `p` move one left and one up.
        for c in p + 1..k {
            self.l
                .copy_within(c * ld + p + 1..c * ld + k, (c - 1) * ld + p);
        }
        self.ids.remove(p);
        // `L33 L33' + x x'` on the trailing block (positions `p..k-1` now).
        let n = k - 1 - p;
        let x = &mut self.work;
        for j in 0..n {
            let col = (p + j) * ld + p;
            let ljj = self.l[col + j];
            let xj = x[j];
            let r = ljj.hypot(xj);
            let (c, s) = (r / ljj, xj / ljj);
            self.l[col + j] = r;
            for (lij, xi) in self.l[col + j + 1..col + n]
                .iter_mut()
                .zip(&mut x[j + 1..n])
            {
                *lij = (*lij + s * *xi) / c;
                *xi = c * *xi - s * *lij;
            }
        }
    }

    /// Appends row `id` with `column[r] = S_{ids[r], id}` over the current rows (factor
    /// order) and diagonal `diagonal`. Returns `false` (the factor unchanged) where the pivot
    /// is not clearly positive, or the set would outgrow the storage.
    pub fn append(&mut self, id: usize, column: &[f64], diagonal: f64) -> bool {
        let k = self.ids.len();
        debug_assert_eq!(column.len(), k);
        if k + 1 > self.ld {
            return false;
        }
        let ld = self.ld;
        // `l = L^-1 b`, column-oriented.
        self.work.clear();
        self.work.extend_from_slice(column);
        for j in 0..k {
            let col = j * ld;
            let lj = self.work[j] / self.l[col + j];
            self.work[j] = lj;
            for (wi, lij) in self.work[j + 1..k]
                .iter_mut()
                .zip(&self.l[col + j + 1..col + k])
            {
                *wi -= lij * lj;
            }
        }
        let pivot2 = diagonal - dot(&self.work, &self.work);
        if !(pivot2 > MIN_PIVOT_SHARE * diagonal.abs()) || !pivot2.is_finite() {
            return false;
        }
        for (j, &lj) in self.work.iter().enumerate() {
            self.l[j * ld + k] = lj;
        }
        self.l[k * ld + k] = pivot2.sqrt();
        self.ids.push(id);
        true
    }

    /// Solves `S_AA y = b` in place, `b` in factor order.
    pub fn solve_in_place(&self, b: &mut [f64]) {
        let k = self.ids.len();
        debug_assert_eq!(b.len(), k);
        let ld = self.ld;
        for j in 0..k {
            let col = j * ld;
            let yj = b[j] / self.l[col + j];
            b[j] = yj;
            for (bi, lij) in b[j + 1..k].iter_mut().zip(&self.l[col + j + 1..col + k]) {
                *bi -= lij * yj;
            }
        }
        for j in (0..k).rev() {
            let col = j * ld;
            let dot = dot(&self.l[col + j + 1..col + k], &b[j + 1..k]);
            b[j] = (b[j] - dot) / self.l[col + j];
        }
    }
}

/// `a . b` in four interleaved sums (which LLVM keeps in vector registers; one running sum
/// would have to be added in order).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut sums = [0.0f64; 4];
    let (a4, b4) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = a4
        .remainder()
        .iter()
        .zip(b4.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a4.zip(b4) {
        for l in 0..4 {
            sums[l] += x[l] * y[l];
        }
    }
    (sums[0] + sums[1]) + (sums[2] + sums[3]) + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    /// Residual `max |S_AA y - b|` of a solve through `chol`, relative to `max |b|`.
    fn solve_residual(chol: &UpdatableCholesky, s: &[f64], m: usize, rng: &mut Rng) -> f64 {
        let ids = chol.ids();
        let b: Vec<f64> = ids.iter().map(|_| rng.signed()).collect();
        let mut y = b.clone();
        chol.solve_in_place(&mut y);
        let worst = ids
            .iter()
            .enumerate()
            .map(|(r, &i)| {
                let sy: f64 = ids.iter().zip(&y).map(|(&j, yj)| s[i * m + j] * yj).sum();
                (sy - b[r]).abs()
            })
            .fold(0.0, f64::max);
        worst / b.iter().fold(0.0f64, |a, v| a.max(v.abs()))
    }

    #[test]
    fn removals_and_appends_solve_the_changed_set() {
        let mut rng = Rng(0xc401_e5a7);
        let m = 40;
        let s = rng.spd(m);
        let column = |id: usize, out: &mut [f64], ids: &[usize]| {
            for (r, &i) in ids.iter().enumerate() {
                out[r] = s[i * m + id];
            }
        };
        let mut chol = UpdatableCholesky::default();
        let mut ids: Vec<usize> = (0..m).filter(|i| i % 3 != 0).collect();
        let start = ids.clone();
        assert!(chol.factor(&start, |id, out| column(id, out, &start)));
        assert!(solve_residual(&chol, &s, m, &mut rng) < 1e-10);
        // Rows leave from the front, the middle and the end, others join; after every change
        // the factor solves the current set as a fresh one would.
        for round in 0..30 {
            if round % 3 != 2 && ids.len() > 2 {
                let p = (rng.signed().abs() * ids.len() as f64) as usize % ids.len();
                chol.remove(p);
                ids.remove(p);
            } else if let Some(id) = (0..m).find(|i| !ids.contains(i)) {
                let mut b = vec![0.0; ids.len()];
                column(id, &mut b, &ids);
                assert!(chol.append(id, &b, s[id * m + id]));
                ids.push(id);
            }
            assert_eq!(chol.ids(), &ids[..]);
            let r = solve_residual(&chol, &s, m, &mut rng);
            assert!(r < 1e-9, "round {round}: relative residual {r}");
        }
    }

    #[test]
    fn a_dependent_row_is_refused_and_leaves_the_factor_as_it_was() {
        // Rows 0 and 1 are the same vector: S is singular on {0, 1}.
        let s = [2.0, 2.0, 0.5, 2.0, 2.0, 0.5, 0.5, 0.5, 1.0];
        let m = 3;
        let mut chol = UpdatableCholesky::default();
        assert!(chol.factor(&[0, 2], |id, out| {
            for (r, &i) in [0usize, 2].iter().enumerate() {
                out[r] = s[i * m + id];
            }
        }));
        assert!(!chol.append(1, &[s[1], s[2 * m + 1]], s[m + 1]));
        assert_eq!(chol.ids(), &[0, 2]);
        let mut rng = Rng(7);
        assert!(solve_residual(&chol, &s, m, &mut rng) < 1e-12);
        // An indefinite set is refused by a fresh factorization.
        let indefinite = [1.0, 2.0, 2.0, 1.0];
        assert!(!chol.factor(&[0, 1], |id, out| {
            for (r, i) in [0usize, 1].into_iter().enumerate() {
                out[r] = indefinite[i * 2 + id];
            }
        }));
        assert!(chol.ids().is_empty());
    }
}
