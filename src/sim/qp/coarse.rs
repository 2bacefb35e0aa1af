//! A coarse space for MPRGP's conjugate gradient steps: the second level of a two-level
//! additive preconditioner.
//!
//! MPRGP ([`super::mprgp`]) iterates with the Jacobi-scaled matrix `A~ = S A S`
//! (`S = diag(A)^-1/2`). Jacobi leaves the smooth, body-wide error modes alone: a contact force
//! on one face bends the whole body, and conjugate gradients need about as many steps as the
//! body has cells across to carry it there (a 10,648-vertex rubber cube's contact QPs took
//! 106 iterations per step, nearly all CG steps). A coarse space corrects those modes
//! directly. Here it is unsmoothed aggregation: a box grid over the unknowns' rest positions
//! groups them into aggregates (the unknowns in one grid cell), and `P` (`n x k`, one column
//! per aggregate, alike in x, y and z) is 1 where an unknown belongs to an aggregate. The
//! preconditioner, in MPRGP's scaled variables (`Z = S^-1 P`, so `Z' A~ Z = P'AP`), is
//!
//! `M^-1 r = r + Z (P'AP)^-1 Z' r`,
//!
//! the additive two-level Schwarz method with point-Jacobi as its first level (Toselli and
//! Widlund, "Domain Decomposition Methods", 2005, chapter 2; Dostal, "Optimal Quadratic
//! Programming Algorithms", 2009, section 9.6, for CG steps preconditioned within the face of
//! the active constraints, which is how MPRGP applies it, [`super::mprgp`]). `M^-1` is
//! symmetric positive definite, so restricted to a face it is still a valid preconditioner
//! for CG on that face.
//!
//! `P'AP` is formed once per matrix (a factorization or material change, like the sparse
//! factor): the sums of `A`'s entries between two aggregates, at most
//! [`MAX_CELLS_PER_AXIS`]`^3` aggregates, factored by a dense Cholesky and kept as its explicit
//! inverse (1.3-2.0 ms for the 10,648-vertex cube's 125 aggregates, 50-60 ms for the
//! 39,304-vertex cube's 512, whose `PdSystem::new` takes 0.9 s). An application is a sum per
//! aggregate over its unknowns, one dense product with three right-hand sides, and one pass
//! adding each unknown's aggregate value (about 0.2 ms at 39,304 vertices, 0.06-0.07 ms each,
//! under half a product with the matrix).
//!
//! Measured with plain CG on the PD matrices of rubber lattice cubes with their bottom face
//! held (the face CG works on once a cube rests on a floor; a mixed smooth and random
//! right-hand side, iterations to a relative residual of 1e-3; a scratch driver): 10,648
//! vertices 42 iterations with Jacobi alone, 20 with 4 or 6 aggregates per axis, 16 with 8;
//! 39,304 vertices 63 with Jacobi, 30, 26 and 21 with 5, 7 and 9 per axis. Deviation from
//! the usual trilinear coarse space (eight weights per unknown): it took fewer iterations
//! (13-15 and 16 in the same tests) but its application cost more than a product with the
//! matrix (0.6-0.9 ms at 39,304 vertices against about 0.2 for aggregation), and in the world
//! the loop of MPRGP iterations was then no faster than without a coarse space.
//!
//! Only bodies of at least [`COARSE_MIN_UNKNOWNS`] free vertices get a coarse space: smaller
//! ones solve their contact QPs in the contact subspace, and their CG chains are short.

use rayon::prelude::*;

use super::updatable_cholesky::UpdatableCholesky;
use crate::sim::math::Vec3;
use crate::sim::sparse::SymmetricMatrix;

/// Fewest unknowns for which a body builds a coarse space.
pub const COARSE_MIN_UNKNOWNS: usize = 2048;

/// Most aggregates along one axis (`8^3 = 512` at most: the dense inverse's product, `k^2`
/// multiply-adds per coordinate, stays a small share of a product with the matrix of a body
/// that large).
pub const MAX_CELLS_PER_AXIS: usize = 8;

/// Unknowns per aggregate along the body's longest axis, about: the grid has
/// `cbrt(n) / UNKNOWNS_PER_CELL` cells there (5 for the 10,648-vertex cube, 8 for the
/// 39,304-vertex one).
const UNKNOWNS_PER_CELL: f64 = 4.2;

/// Unknowns from which the passes over the unknowns run in parallel (as the matrix products
/// do, [`crate::sim::sparse::PARALLEL_MATVEC_ROWS`]).
const PARALLEL_UNKNOWNS: usize = crate::sim::sparse::PARALLEL_MATVEC_ROWS;

/// Unknowns per chunk of the prolongation.
const CHUNK: usize = 2048;

/// Aggregates from which the dense product runs in parallel, by rows.
const PARALLEL_CELLS: usize = 256;

/// Added to the coarse matrix's diagonal, relative to its largest entry, so that `P'AP`
/// factors whatever round-off does to nearly dependent aggregates.
const COARSE_REGULARIZATION: f64 = 1e-12;

/// The aggregates of one body's unknowns and the inverse of their coarse matrix `P'AP` (see
/// the module docs).
#[derive(Default)]
pub struct CoarseSpace {
    /// Where each aggregate's unknowns start in [`CoarseSpace::unknowns`], plus the end.
    /// Empty cells of the grid are not aggregates.
    start: Vec<u32>,
    /// The unknowns, aggregate by aggregate (increasing within one).
    unknowns: Vec<u32>,
    /// Per unknown: `sqrt(A_ii)` of the matrix last set (its entry of `Z = S^-1 P`).
    roots: Vec<f64>,
    /// Per unknown: its aggregate.
    aggregate_of: Vec<u32>,
    /// `(P'AP)^-1`, dense, `k^2`; empty until [`CoarseSpace::set_matrix`] succeeded.
    inverse: Vec<f64>,
}

impl std::fmt::Debug for CoarseSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoarseSpace")
            .field("unknowns", &self.unknowns.len())
            .field("aggregates", &self.aggregate_count())
            .field("factored", &self.is_factored())
            .finish()
    }
}

impl CoarseSpace {
    /// Aggregates of `points` (the unknowns' rest positions, m) by a box grid whose spacing is
    /// the longest extent of their bounds over `cbrt(n) / 4.2` cells (at most
    /// [`MAX_CELLS_PER_AXIS`] along any axis, at least one). `None` below
    /// [`COARSE_MIN_UNKNOWNS`] points or for non-finite or degenerate bounds.
    pub fn aggregates(points: &[Vec3]) -> Option<Self> {
        let n = points.len();
        if n < COARSE_MIN_UNKNOWNS {
            return None;
        }
        let mut lo = Vec3::repeat(f64::INFINITY);
        let mut hi = Vec3::repeat(f64::NEG_INFINITY);
        for p in points {
            lo = lo.inf(p);
            hi = hi.sup(p);
        }
        let extent = hi - lo;
        let longest = extent.max();
        if !(longest.is_finite() && longest > 0.0) {
            return None;
        }
        let max_cells = MAX_CELLS_PER_AXIS as f64;
        let along_longest = ((n as f64).cbrt() / UNKNOWNS_PER_CELL)
            .round()
            .clamp(1.0, max_cells);
        let spacing = longest / along_longest;
        let cells: [usize; 3] =
            std::array::from_fn(|a| (extent[a] / spacing).ceil().clamp(1.0, max_cells) as usize);
        let cell_of = |p: &Vec3| {
            let mut index = 0;
            for a in (0..3).rev() {
                let u = if extent[a] > 0.0 {
                    (p[a] - lo[a]) / extent[a] * cells[a] as f64
                } else {
                    0.0
                };
                index = index * cells[a] + (u.max(0.0) as usize).min(cells[a] - 1);
            }
            index
        };
        let grid: Vec<usize> = points.iter().map(cell_of).collect();
        // Aggregates: the non-empty cells, in grid order.
        let mut count = vec![0u32; cells[0] * cells[1] * cells[2]];
        for &c in &grid {
            count[c] += 1;
        }
        let mut aggregate_of_cell = vec![u32::MAX; count.len()];
        let mut start = vec![0u32];
        for (c, &m) in count.iter().enumerate() {
            if m > 0 {
                aggregate_of_cell[c] = (start.len() - 1) as u32;
                start.push(start[start.len() - 1] + m);
            }
        }
        let mut fill: Vec<u32> = start[..start.len() - 1].to_vec();
        let mut unknowns = vec![0u32; n];
        let mut aggregate_of = vec![0u32; n];
        for (i, &c) in grid.iter().enumerate() {
            let a = aggregate_of_cell[c];
            unknowns[fill[a as usize] as usize] = i as u32;
            fill[a as usize] += 1;
            aggregate_of[i] = a;
        }
        Some(Self {
            start,
            unknowns,
            roots: Vec::new(),
            aggregate_of,
            inverse: Vec::new(),
        })
    }

    /// Number of unknowns.
    pub fn len(&self) -> usize {
        self.unknowns.len()
    }

    /// True without unknowns.
    pub fn is_empty(&self) -> bool {
        self.unknowns.is_empty()
    }

    /// Number of aggregates (columns of `P`).
    pub fn aggregate_count(&self) -> usize {
        self.start.len().saturating_sub(1)
    }

    /// Whether the coarse matrix is factored (the correction applies).
    pub fn is_factored(&self) -> bool {
        !self.inverse.is_empty()
    }

    /// Forms `P'AP` for the scalar matrix `a` (acting alike on x, y and z, over the same
    /// unknowns), factors it and keeps its inverse. Returns false, and applies no correction
    /// until a later call succeeds, where the sizes differ or `P'AP` is not numerically
    /// positive definite.
    pub fn set_matrix(&mut self, a: &SymmetricMatrix) -> bool {
        self.inverse.clear();
        let n = self.unknowns.len();
        let k = self.aggregate_count();
        if a.dim() != n || k == 0 {
            return false;
        }
        let mut dense = vec![0.0f64; k * k];
        for i in 0..n {
            let line = self.aggregate_of[i] as usize * k;
            let (cols, values) = a.row_entries(i);
            for (&j, &v) in cols.iter().zip(values) {
                dense[line + self.aggregate_of[j as usize] as usize] += v;
            }
        }
        let largest = (0..k).map(|c| dense[c * k + c]).fold(0.0f64, f64::max);
        if !(largest.is_finite() && largest > 0.0) {
            return false;
        }
        for c in 0..k {
            dense[c * k + c] += COARSE_REGULARIZATION * largest;
        }
        let mut factor = UpdatableCholesky::default();
        let ids: Vec<usize> = (0..k).collect();
        // `dense` is symmetric: column `c` is row `c`.
        if !factor.factor(&ids, |c, column| {
            column.copy_from_slice(&dense[c * k..(c + 1) * k]);
        }) {
            return false;
        }
        // The inverse, column by column (symmetric, so stored by rows alike).
        let mut inverse = vec![0.0f64; k * k];
        for (c, column) in inverse.chunks_mut(k).enumerate() {
            column[c] = 1.0;
            factor.solve_in_place(column);
        }
        self.roots.clear();
        self.roots.extend((0..n).map(|i| a.diagonal(i).sqrt()));
        self.inverse = inverse;
        true
    }

    /// `out += Z (P'AP)^-1 Z' r`, `Z = S^-1 P` with `S = diag(A)^-1/2` (MPRGP's Jacobi
    /// scaling, of the matrix last given to [`CoarseSpace::set_matrix`]), for `r` and `out` in
    /// the scaled variables. `coarse` is scratch. Does nothing where the coarse matrix is not
    /// factored or the lengths differ.
    ///
    /// The restriction sums aggregate by aggregate and the prolongation runs over chunks of
    /// unknowns, both in parallel from 4,096 unknowns; every sum has one
    /// order, so the result does not depend on the number of threads.
    pub fn add_correction(&self, r: &[Vec3], coarse: &mut Vec<Vec3>, out: &mut [Vec3]) {
        if !self.is_factored() {
            return;
        }
        let n = self.unknowns.len();
        if r.len() != n || out.len() != n {
            return;
        }
        let k = self.aggregate_count();
        coarse.clear();
        coarse.resize(2 * k, Vec3::zeros());
        let (sums, solution) = coarse.split_at_mut(k);
        let parallel = n >= PARALLEL_UNKNOWNS;
        let restrict = |(c, sum): (usize, &mut Vec3)| {
            let entries = self.start[c] as usize..self.start[c + 1] as usize;
            *sum = self.unknowns[entries]
                .iter()
                .fold(Vec3::zeros(), |acc, &i| {
                    acc + self.roots[i as usize] * r[i as usize]
                });
        };
        if parallel {
            sums.par_iter_mut().enumerate().for_each(restrict);
        } else {
            sums.iter_mut().enumerate().for_each(restrict);
        }
        let (inverse, sums) = (&self.inverse, &*sums);
        let product = |(row, x): (usize, &mut Vec3)| {
            *x = inverse[row * k..(row + 1) * k]
                .iter()
                .zip(sums)
                .fold(Vec3::zeros(), |acc, (&a, s)| acc + a * s);
        };
        if k >= PARALLEL_CELLS {
            solution.par_iter_mut().enumerate().for_each(product);
        } else {
            solution.iter_mut().enumerate().for_each(product);
        }
        let solution = &*solution;
        let prolong = |(chunk, out): (usize, &mut [Vec3])| {
            for (d, o) in out.iter_mut().enumerate() {
                let i = chunk * CHUNK + d;
                *o += self.roots[i] * solution[self.aggregate_of[i] as usize];
            }
        };
        if parallel {
            out.par_chunks_mut(CHUNK).enumerate().for_each(prolong);
        } else {
            out.chunks_mut(CHUNK).enumerate().for_each(prolong);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::TetMesh;

    /// A mass-plus-Laplacian matrix over a lattice's vertices (the shape of a PD matrix).
    fn lattice_matrix(mesh: &TetMesh) -> SymmetricMatrix {
        let mut pairs = Vec::new();
        for t in mesh.tets() {
            for a in 0..4 {
                for b in a + 1..4 {
                    pairs.push((t[a], t[b]));
                }
            }
        }
        let n = mesh.vertex_count();
        let mut m = SymmetricMatrix::from_pairs(n, pairs);
        for t in mesh.tets() {
            for a in 0..4 {
                for b in 0..4 {
                    let s = m
                        .slot(t[a] as usize, t[b] as usize)
                        .expect("in the pattern");
                    m.values_mut()[s] += if a == b { 3.0 } else { -1.0 };
                }
            }
        }
        for i in 0..n {
            let s = m.diag_slot(i);
            m.values_mut()[s] += 0.01 * (1.0 + (i % 7) as f64);
        }
        m
    }

    /// `P c`: aggregate values `c` at the unknowns.
    fn interpolate(space: &CoarseSpace, c: &[Vec3]) -> Vec<Vec3> {
        space.aggregate_of.iter().map(|&a| c[a as usize]).collect()
    }

    #[test]
    fn aggregates_partition_the_unknowns() {
        let mesh = TetMesh::try_cuboid(Vec3::new(0.6, 0.3, 0.45), 20).expect("valid");
        let space = CoarseSpace::aggregates(mesh.rest_positions()).expect("large enough");
        let n = mesh.vertex_count();
        let mut seen = vec![false; n];
        for (a, w) in space.start.windows(2).enumerate() {
            assert!(w[1] > w[0], "aggregate {a} is empty");
            for e in w[0] as usize..w[1] as usize {
                let i = space.unknowns[e] as usize;
                assert!(!seen[i], "unknown {i} in two aggregates");
                seen[i] = true;
                assert_eq!(space.aggregate_of[i] as usize, a);
            }
        }
        assert!(seen.iter().all(|&s| s));
        let k = space.aggregate_count();
        assert!(
            (2..=MAX_CELLS_PER_AXIS.pow(3)).contains(&k),
            "{k} aggregates"
        );
    }

    #[test]
    fn small_bodies_get_no_coarse_space() {
        let mesh = TetMesh::try_cuboid(Vec3::repeat(0.5), 9).expect("valid");
        assert!(CoarseSpace::aggregates(mesh.rest_positions()).is_none());
    }

    #[test]
    fn the_correction_solves_the_coarse_problem_exactly() {
        // For the scaled residual of a coarse function, `r = S A x` with `x = P c`, the
        // correction gives back that function's scaled variables `S^-1 P c`:
        // `Z (Z' A~ Z)^-1 Z' A~ Z c = Z c`.
        let mesh = TetMesh::try_cuboid(Vec3::new(0.5, 0.4, 0.3), 16).expect("valid");
        let a = lattice_matrix(&mesh);
        let mut space = CoarseSpace::aggregates(mesh.rest_positions()).expect("large enough");
        assert!(space.set_matrix(&a));
        let n = a.dim();
        let scale: Vec<Vec3> = (0..n)
            .map(|i| Vec3::repeat(1.0 / a.diagonal(i).sqrt()))
            .collect();
        let c: Vec<Vec3> = (0..space.aggregate_count())
            .map(|j| {
                Vec3::new(
                    (j as f64).sin(),
                    (0.3 * j as f64).cos(),
                    1.0 + (j % 5) as f64,
                )
            })
            .collect();
        let x = interpolate(&space, &c);
        let mut ax = vec![Vec3::zeros(); n];
        a.mul_vec3(&x, &mut ax);
        let r: Vec<Vec3> = ax
            .iter()
            .zip(&scale)
            .map(|(v, s)| v.component_mul(s))
            .collect();
        let mut out = vec![Vec3::zeros(); n];
        space.add_correction(&r, &mut Vec::new(), &mut out);
        let (mut worst, mut size) = (0.0f64, 0.0f64);
        for i in 0..n {
            let z = x[i].component_div(&scale[i]);
            worst = worst.max((out[i] - z).norm());
            size = size.max(z.norm());
        }
        assert!(worst <= 1e-8 * size, "error {worst} of {size}");
    }

    #[test]
    fn the_preconditioner_is_symmetric_positive_definite() {
        // r1' M r2 = r2' M r1 and r' M r > r' r for M = I + Z (P'AP)^-1 Z'.
        let mesh = TetMesh::try_cuboid(Vec3::repeat(0.5), 13).expect("valid");
        let a = lattice_matrix(&mesh);
        let mut space = CoarseSpace::aggregates(mesh.rest_positions()).expect("large enough");
        assert!(space.set_matrix(&a));
        let n = a.dim();
        let r1: Vec<Vec3> = (0..n)
            .map(|i| Vec3::new((i as f64 * 0.7).sin(), (i as f64 * 1.3).cos(), 0.1))
            .collect();
        let r2: Vec<Vec3> = (0..n)
            .map(|i| Vec3::new((i as f64 * 0.2).cos(), 1.0, (i as f64 * 0.9).sin()))
            .collect();
        let apply = |r: &[Vec3]| {
            let mut out = r.to_vec();
            space.add_correction(r, &mut Vec::new(), &mut out);
            out
        };
        let dot = |a: &[Vec3], b: &[Vec3]| a.iter().zip(b).map(|(x, y)| x.dot(y)).sum::<f64>();
        let (m1, m2) = (apply(&r1), apply(&r2));
        let (a12, a21) = (dot(&r2, &m1), dot(&r1, &m2));
        assert!(
            (a12 - a21).abs() <= 1e-10 * a12.abs().max(1.0),
            "{a12} vs {a21}"
        );
        assert!(dot(&r1, &m1) > dot(&r1, &r1));
    }
}
