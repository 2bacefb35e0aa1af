//! The triangular solves of a supernodal Cholesky factor on two threads, split along the
//! elimination tree.
//!
//! A supernode's forward step (`x_s <- L_ss^-1 x_s`, then `x_R -= L_Rs x_s` for the rows `R`
//! below its diagonal block) reads and writes only its own rows and those of its ancestors in
//! the supernodal elimination tree; its backward step (`x_s -= L_Rs' x_R`, then
//! `x_s <- L_ss^-T x_s`) writes only its own rows and reads its ancestors'. So two disjoint
//! unions of whole subtrees can be solved at the same time, and only the supernodes above them
//! (the *top*: the separators of a nested-dissection order) are left for one thread (the
//! independence of disjoint subtrees: Liu 1990, "The role of elimination trees in sparse
//! factorization"; the subtree-to-processor mapping of parallel sparse solvers):
//!
//! 1. forward, in parallel: each group runs its supernodes in increasing order on a private copy
//!    of the right-hand side whose top rows start at zero, so what it subtracts from the top
//!    rows is its own sum;
//! 2. the groups' rows are copied back, and each top row gets its two sums added, group 0's
//!    first;
//! 3. forward over the top, then backward over the top, on one thread;
//! 4. backward, in parallel: each group on a private copy (whose top rows are now final).
//!
//! The split depends on the factor's structure alone (never on the number of threads), and each
//! group's arithmetic is fixed, so the result has the same bits on one thread as on two. It is
//! not bitwise faer's sequential solve: a top row's updates are summed per group first.
//!
//! Why: the correction solve is bound by reading the factor (the per-supernode kernels are
//! faer's register-blocked ones, the same as its own solve's), and one core reads memory at
//! only part of the machine's bandwidth. Splitting the three right-hand sides over the threads
//! (x and y on one, z on the other) makes each thread read the whole factor; splitting the
//! tree makes each read a group's share, and one of them the top after (on the bench's lattice
//! cubes under nested dissection: 0.39 and 0.39 of the factor at 10,648 vertices, 0.41 and
//! 0.40 at 39,304, the top the rest). The groups are balanced by the number of factor entries
//! they read ([`SubtreeSplit::new`]).
//!
//! Measured (`cargo bench --bench kernels`, column "f32 solve ms": three right-hand sides on
//! the lattice cubes' PD factors under nested dissection; five runs each, alternated with the
//! coordinate split, on the 2-core AMD EPYC VM): 39,304 vertices 14.3-17.4 ms per solve
//! against 23.1-26.0; 10,648 vertices 1.57-2.73 against 1.86-3.11 (this VM's noise is as large
//! as the difference there). In whole steps of the 40K cube dropped on a floor (a scratch
//! driver stepping two worlds in turn, the split's and the coordinate split's, 10 steps, 8.2
//! PD iterations a step, three runs), the global phase took 206-238 ms per step against
//! 236-315; on the 10K cube (30 steps, two runs) 32.5 and 39.5 against 29.1 and 40.4, no
//! difference beyond the noise. The two worlds' positions agreed to 9e-8 m (40K) and 1e-10 m
//! (10K).
//!
//! Tried and not kept (a scratch driver timing 90 solves of each version alternated in blocks
//! of three, two runs): a kernel of its own for each supernode's product, reading the block once
//! in its stored order instead of faer's product, which packs the block first (`perf` gives
//! the packing about twice the samples of the f32 micro-kernels): 18.3-18.6 against 17.4-17.9
//! ms at 40K, 1.83-3.03 against 1.94-3.10 at 10K; and faer's parallel kernels (`Par::rayon(2)`)
//! for the top's supernodes of 200,000 entries or more, while the other thread is idle:
//! 16.8-18.6 against 16.7-18.4 ms at 40K, and slower at 10K.

use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::prelude::{Reborrow, ReborrowMut};
use faer::sparse::linalg::cholesky::supernodal::{SupernodalLltRef, SymbolicSupernodalCholesky};
use faer::{Accum, MatMut, MatRef, Par};

/// Right-hand sides per solve: the three coordinates.
const RHS: usize = 3;

/// The most the two groups' shares of the factor may differ, as a fraction of the whole
/// factor, before the heaviest subtree is split further.
const BALANCE_TOLERANCE: f64 = 0.08;

/// The largest share of the factor the top (the sequential part) may take; the split stops
/// descending the tree there.
const MAX_TOP_SHARE: f64 = 0.3;

/// A split of a supernodal factor's elimination tree into two groups of whole subtrees and the
/// supernodes above them, with the scratch its solves need.
#[derive(Debug, Clone)]
pub struct SubtreeSplit {
    /// The supernodes of each group, increasing.
    groups: [Vec<usize>; 2],
    /// The supernodes of neither group (all ancestors of the groups' roots), increasing.
    top: Vec<usize>,
    /// Each group's share of the factor's entries.
    shares: [f64; 2],
    /// Per group: a private copy of the right-hand sides (column-major, `n x 3`).
    buffers: [Vec<f32>; 2],
    /// Per group: the product of a supernode's below-diagonal block (longest pattern x 3).
    products: [Vec<f32>; 2],
}

impl SubtreeSplit {
    /// The split of `symbolic`'s elimination tree, or `None` where no two groups of whole
    /// subtrees hold at least 70 % of the factor's entries between them with shares within 8 %
    /// of the factor of each other (a chain-like tree, or a single supernode).
    ///
    /// The work of a supernode is its number of stored entries (what a solve reads). Starting
    /// from the tree's roots as candidates, the candidates are shared between two groups,
    /// heaviest first into the lighter group; while the groups differ by more than the
    /// tolerance, the heaviest candidate moves to the top and its children become candidates.
    pub fn new(symbolic: &SymbolicSupernodalCholesky<usize>) -> Option<Self> {
        let n = symbolic.nrows();
        let count = symbolic.n_supernodes();
        if count < 3 {
            return None;
        }
        let begin = symbolic.supernode_begin();
        let end = symbolic.supernode_end();
        let val_ptr = symbolic.col_ptr_for_val();
        let mut owner = vec![0usize; n];
        for s in 0..count {
            owner[begin[s]..end[s]].fill(s);
        }
        // A supernode's parent owns the first row below its diagonal block; rows below are
        // always later columns, so children come before parents.
        let parent: Vec<Option<usize>> = (0..count)
            .map(|s| symbolic.supernode(s).pattern().first().map(|&r| owner[r]))
            .collect();
        let work: Vec<f64> = (0..count)
            .map(|s| (val_ptr[s + 1] - val_ptr[s]) as f64)
            .collect();
        let total: f64 = work.iter().sum();
        let mut subtree = work.clone();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); count];
        for s in 0..count {
            if let Some(p) = parent[s] {
                subtree[p] += subtree[s];
                children[p].push(s);
            }
        }
        let mut candidates: Vec<usize> = (0..count).filter(|&s| parent[s].is_none()).collect();
        let mut top_work = 0.0;
        let assignment = loop {
            candidates.sort_by(|&a, &b| subtree[b].total_cmp(&subtree[a]).then(a.cmp(&b)));
            let mut bins = [0.0f64; 2];
            let mut roots: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
            for &c in &candidates {
                let g = usize::from(bins[1] < bins[0]);
                bins[g] += subtree[c];
                roots[g].push(c);
            }
            if (bins[0] - bins[1]).abs() <= BALANCE_TOLERANCE * total
                && !roots[0].is_empty()
                && !roots[1].is_empty()
            {
                break Some((roots, bins));
            }
            let heaviest = candidates[0];
            top_work += work[heaviest];
            if top_work > MAX_TOP_SHARE * total {
                break None;
            }
            candidates.remove(0);
            candidates.extend(children[heaviest].iter().copied());
            if candidates.is_empty() {
                break None;
            }
        }?;
        let (roots, bins) = assignment;
        let mut group_of = vec![usize::MAX; count];
        for (g, group_roots) in roots.iter().enumerate() {
            for &r in group_roots {
                group_of[r] = g;
            }
        }
        // Descendants inherit their root's group: parents come after children, so walk down
        // from the end. (A top supernode's children are all roots of a group, and the top's
        // parents are in the top, so the top stays unassigned.)
        for s in (0..count).rev() {
            if group_of[s] == usize::MAX
                && let Some(p) = parent[s]
            {
                group_of[s] = group_of[p];
            }
        }
        let mut groups: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        let mut top = Vec::new();
        for (s, &g) in group_of.iter().enumerate() {
            match g {
                0 | 1 => groups[g].push(s),
                _ => top.push(s),
            }
        }
        let longest = (0..count)
            .map(|s| symbolic.supernode(s).pattern().len())
            .max()
            .unwrap_or(0);
        Some(Self {
            groups,
            top,
            shares: [bins[0] / total, bins[1] / total],
            buffers: [vec![0.0; RHS * n], vec![0.0; RHS * n]],
            products: [vec![0.0; RHS * longest], vec![0.0; RHS * longest]],
        })
    }

    /// Each group's share of the factor's entries (the rest is the top's).
    pub fn shares(&self) -> [f64; 2] {
        self.shares
    }

    /// Solves `L L' x = b` in place for three right-hand sides, `x` column-major `n x 3` in
    /// the factor's (permuted) order.
    ///
    /// # Panics
    /// If `x` is not `3 n` long or `llt` is not the factor this split was made for.
    pub fn solve_in_place(&mut self, llt: SupernodalLltRef<'_, usize, f32>, x: &mut [f32]) {
        let n = llt.symbolic().nrows();
        let (begin, end) = (
            llt.symbolic().supernode_begin(),
            llt.symbolic().supernode_end(),
        );
        assert_eq!(
            x.len(),
            RHS * n,
            "three right-hand sides of the factor's size"
        );
        let Self {
            groups,
            top,
            buffers,
            products,
            ..
        } = self;
        let [buffer_0, buffer_1] = buffers;
        let [product_0, product_1] = products;
        let start_group = |group: &[usize], buffer: &mut Vec<f32>, product: &mut Vec<f32>| {
            buffer.copy_from_slice(x);
            for &s in top.iter() {
                for c in 0..RHS {
                    buffer[c * n + begin[s]..c * n + end[s]].fill(0.0);
                }
            }
            for &s in group {
                forward(llt, s, buffer, product);
            }
        };
        rayon::join(
            || start_group(&groups[0], buffer_0, product_0),
            || start_group(&groups[1], buffer_1, product_1),
        );
        for (group, buffer) in [(&groups[0], &*buffer_0), (&groups[1], &*buffer_1)] {
            copy_rows(llt, group, buffer, x);
        }
        for &s in top.iter() {
            for i in (0..RHS).flat_map(|c| c * n + begin[s]..c * n + end[s]) {
                x[i] = (x[i] + buffer_0[i]) + buffer_1[i];
            }
        }
        for &s in top.iter() {
            forward(llt, s, x, product_0);
        }
        backward_split(
            llt,
            top,
            groups,
            x,
            [buffer_0, buffer_1],
            [product_0, product_1],
        );
    }
}

/// The backward half of a split solve on `x` (`n x 3` column-major, holding `y` of `L' x =
/// y`): the `top` supernodes on this thread, then the two `groups` at once, each on a private
/// copy (`buffers`) of `x` with a supernode product's scratch (`products`).
fn backward_split(
    llt: SupernodalLltRef<'_, usize, f32>,
    top: &[usize],
    groups: &[Vec<usize>; 2],
    x: &mut [f32],
    buffers: [&mut Vec<f32>; 2],
    products: [&mut Vec<f32>; 2],
) {
    let [buffer_0, buffer_1] = buffers;
    let [product_0, product_1] = products;
    for &s in top.iter().rev() {
        backward(llt, s, x, product_0);
    }
    let x_top: &[f32] = x;
    let finish_group = |group: &[usize], buffer: &mut Vec<f32>, product: &mut Vec<f32>| {
        buffer.copy_from_slice(x_top);
        for &s in group.iter().rev() {
            backward(llt, s, buffer, product);
        }
    };
    rayon::join(
        || finish_group(&groups[0], buffer_0, product_0),
        || finish_group(&groups[1], buffer_1, product_1),
    );
    for (group, buffer) in [(&groups[0], &*buffer_0), (&groups[1], &*buffer_1)] {
        copy_rows(llt, group, buffer, x);
    }
}

/// Caller-owned scratch of [`SubtreeSplit::backward_with`]: per group, a copy of the
/// right-hand sides and a supernode's product (grown on first use, then reused).
#[derive(Debug, Default, Clone)]
pub struct SplitScratch {
    buffers: [Vec<f32>; 2],
    products: [Vec<f32>; 2],
}

impl SubtreeSplit {
    /// The backward half of [`SubtreeSplit::solve_in_place`] alone (`L' x = y`, `x` holding
    /// `y`, `n x 3` column-major in the factor's order): the top on this thread, then the two
    /// groups at once, through a shared split with caller-owned scratch.
    pub fn backward_with(
        &self,
        llt: SupernodalLltRef<'_, usize, f32>,
        x: &mut [f32],
        scratch: &mut SplitScratch,
    ) {
        let longest = self.products[0].len();
        for (buffer, product) in scratch.buffers.iter_mut().zip(&mut scratch.products) {
            buffer.resize(x.len(), 0.0);
            product.resize(longest, 0.0);
        }
        let [buffer_0, buffer_1] = &mut scratch.buffers;
        let [product_0, product_1] = &mut scratch.products;
        backward_split(
            llt,
            &self.top,
            &self.groups,
            x,
            [buffer_0, buffer_1],
            [product_0, product_1],
        );
    }
}

/// The rows of `group`'s supernodes, from `from` into `to` (both `n x 3` column-major).
fn copy_rows(llt: SupernodalLltRef<'_, usize, f32>, group: &[usize], from: &[f32], to: &mut [f32]) {
    let symbolic = llt.symbolic();
    let n = symbolic.nrows();
    let (begin, end) = (symbolic.supernode_begin(), symbolic.supernode_end());
    for &s in group {
        for c in 0..RHS {
            let rows = c * n + begin[s]..c * n + end[s];
            to[rows.clone()].copy_from_slice(&from[rows]);
        }
    }
}

/// Supernode `s`'s step of the forward solve `L y = b` on `x` (`n x 3` column-major).
pub(super) fn forward(
    llt: SupernodalLltRef<'_, usize, f32>,
    s: usize,
    x: &mut [f32],
    product: &mut [f32],
) {
    let n = llt.symbolic().nrows();
    let node = llt.supernode(s);
    let (start, pattern, block) = (node.start(), node.pattern(), node.val());
    let size = block.ncols();
    let (diagonal, below) = block.split_at_row(size);
    let mut xs = MatMut::from_column_major_slice_mut(x, n, RHS);
    let mut x_node = xs.rb_mut().subrows_mut(start, size);
    solve_lower_triangular_in_place(diagonal, x_node.rb_mut(), Par::Seq);
    let rows = pattern.len();
    let mut update = MatMut::from_column_major_slice_mut(&mut product[..RHS * rows], rows, RHS);
    matmul(
        update.rb_mut(),
        Accum::Replace,
        below,
        x_node.rb(),
        1.0f32,
        Par::Seq,
    );
    for c in 0..RHS {
        let column = &mut x[c * n..(c + 1) * n];
        for (&i, &u) in pattern.iter().zip(&product[c * rows..(c + 1) * rows]) {
            column[i] -= u;
        }
    }
}

/// Supernode `s`'s step of the backward solve `L' x = y` on `x` (`n x 3` column-major).
pub(super) fn backward(
    llt: SupernodalLltRef<'_, usize, f32>,
    s: usize,
    x: &mut [f32],
    product: &mut [f32],
) {
    let n = llt.symbolic().nrows();
    let node = llt.supernode(s);
    let (start, pattern, block) = (node.start(), node.pattern(), node.val());
    let size = block.ncols();
    let (diagonal, below): (MatRef<'_, f32>, MatRef<'_, f32>) = block.split_at_row(size);
    let rows = pattern.len();
    for c in 0..RHS {
        let column = &x[c * n..(c + 1) * n];
        for (p, &i) in product[c * rows..(c + 1) * rows].iter_mut().zip(pattern) {
            *p = column[i];
        }
    }
    let gathered = MatRef::from_column_major_slice(&product[..RHS * rows], rows, RHS);
    let mut xs = MatMut::from_column_major_slice_mut(x, n, RHS);
    let mut x_node = xs.rb_mut().subrows_mut(start, size);
    matmul(
        x_node.rb_mut(),
        Accum::Add,
        below.transpose(),
        gathered,
        -1.0f32,
        Par::Seq,
    );
    solve_upper_triangular_in_place(diagonal.transpose(), x_node.rb_mut(), Par::Seq);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::sparse::{SparseCholesky, lattice_test_system};

    /// The split's groups are unions of whole subtrees and the top holds every ancestor: each
    /// group supernode's below-diagonal rows lie in its own group or in the top, and a top
    /// supernode's rows lie in the top. This is what lets the groups run at the same time.
    #[test]
    fn groups_are_whole_subtrees_under_the_top() {
        let (m, rest) = lattice_test_system(17);
        let chol = SparseCholesky::analyse_with_coordinates(&m, &rest).unwrap();
        let symbolic = chol.supernodal_symbolic().expect("a supernodal factor");
        let split = SubtreeSplit::new(symbolic).expect("a lattice's tree splits");
        let count = symbolic.n_supernodes();
        let mut part = vec![usize::MAX; count];
        for (g, group) in split.groups.iter().enumerate() {
            assert!(group.windows(2).all(|w| w[0] < w[1]), "increasing");
            for &s in group {
                assert_eq!(part[s], usize::MAX, "supernode {s} in two parts");
                part[s] = g;
            }
        }
        for &s in &split.top {
            assert_eq!(part[s], usize::MAX, "supernode {s} in two parts");
            part[s] = 2;
        }
        assert!(
            part.iter().all(|&p| p != usize::MAX),
            "every supernode has a part"
        );
        let mut owner = vec![0usize; symbolic.nrows()];
        for s in 0..count {
            let (a, b) = (symbolic.supernode_begin()[s], symbolic.supernode_end()[s]);
            owner[a..b].fill(s);
        }
        for s in 0..count {
            for &r in symbolic.supernode(s).pattern() {
                let target = part[owner[r]];
                assert!(
                    target == part[s] || target == 2,
                    "supernode {s} (part {}) updates row {r} of part {target}",
                    part[s]
                );
            }
        }
        let [a, b] = split.shares();
        assert!((a - b).abs() <= BALANCE_TOLERANCE, "{a} against {b}");
        assert!(
            a + b >= 1.0 - MAX_TOP_SHARE,
            "top too large: {}",
            1.0 - a - b
        );
    }

    /// A factor whose tree has no two balanced subtrees (a dense matrix: one supernode, or a
    /// chain) is not split.
    #[test]
    fn a_single_supernode_is_not_split() {
        let n = 150;
        let pairs = (0..n as u32).flat_map(|a| (a + 1..n as u32).map(move |b| (a, b)));
        let mut m = crate::sim::sparse::SymmetricMatrix::from_pairs(n, pairs);
        for i in 0..n {
            let k = m.diag_slot(i);
            m.values_mut()[k] = 2.0 * n as f64;
        }
        let chol = SparseCholesky::analyse(&m).unwrap();
        let symbolic = chol
            .supernodal_symbolic()
            .expect("a dense factor is supernodal");
        assert!(SubtreeSplit::new(symbolic).is_none());
    }
}
