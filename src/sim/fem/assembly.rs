//! The Newton matrix `w M + K` of a body over its free coordinates, with a pattern fixed per
//! mesh and pins: the symbolic work (pattern, scatter slots) is done once, and each assembly only
//! adds values (no allocation).
//!
//! Row `3 d + a` is coordinate `a` of free vertex `d`. Every pair of free vertices sharing a tet
//! has its whole 3x3 block in the pattern, so the columns of a block's row are consecutive in
//! the CSR storage, and each tet's blocks are scattered through one stored slot per block row.
//! Pinned vertices have no rows: their blocks are dropped (their positions do not change in the
//! Newton step).

use crate::sim::math::Mat3;
use crate::sim::pd::PINNED;
use crate::sim::sparse::SymmetricMatrix;

/// No slot: the block couples a pinned vertex.
const NO_SLOT: u32 = u32::MAX;

/// The Newton matrix's pattern and the slots each tet's blocks are added to.
#[derive(Debug, Clone)]
pub struct HessianPattern {
    matrix: SymmetricMatrix,
    /// Per tet, per block `(k, l)` and block row `a`: the slot of entry `(3 d_k + a, 3 d_l)`,
    /// or [`NO_SLOT`].
    slots: Vec<[[[u32; 3]; 4]; 4]>,
}

impl HessianPattern {
    /// The pattern of `tets` (vertex indices) with `dof` mapping each vertex to its free index
    /// or `u32::MAX` where pinned; `free_count` free vertices.
    pub fn new(tets: &[[u32; 4]], dof: &[u32], free_count: usize) -> Self {
        let mut pairs = Vec::with_capacity(tets.len() * 72);
        for t in tets {
            for k in 0..4 {
                for l in k..4 {
                    let (dk, dl) = (dof[t[k] as usize], dof[t[l] as usize]);
                    if dk == PINNED || dl == PINNED {
                        continue;
                    }
                    for a in 0..3 {
                        for b in 0..3 {
                            pairs.push((3 * dk + a, 3 * dl + b));
                        }
                    }
                }
            }
        }
        let matrix = SymmetricMatrix::from_pairs(3 * free_count, pairs);
        let slots = tets
            .iter()
            .map(|t| {
                std::array::from_fn(|k| {
                    std::array::from_fn(|l| {
                        std::array::from_fn(|a| {
                            let (dk, dl) = (dof[t[k] as usize], dof[t[l] as usize]);
                            if dk == PINNED || dl == PINNED {
                                return NO_SLOT;
                            }
                            let row = 3 * dk as usize + a;
                            matrix
                                .slot(row, 3 * dl as usize)
                                .map_or(NO_SLOT, |s| s as u32)
                        })
                    })
                })
            })
            .collect();
        Self { matrix, slots }
    }

    /// The assembled matrix.
    pub fn matrix(&self) -> &SymmetricMatrix {
        &self.matrix
    }

    /// The assembled matrix, for terms added after [`HessianPattern::assemble`] (within the
    /// pattern: [`SymmetricMatrix::slot`]).
    pub fn matrix_mut(&mut self) -> &mut SymmetricMatrix {
        &mut self.matrix
    }

    /// Sets the matrix to `diagonal[d]` on the three diagonal entries of free vertex `d` (e.g.
    /// `m_d / h^2`, N/m) plus the tets' Hessian blocks (N/m), added in tet order (the same sums
    /// whatever the thread count).
    ///
    /// # Panics
    /// If `blocks` has fewer entries than the pattern has tets, or `diagonal` fewer than free
    /// vertices.
    pub fn assemble(&mut self, blocks: &[[[Mat3; 4]; 4]], diagonal: &[f64]) {
        self.matrix.values_mut().iter_mut().for_each(|v| *v = 0.0);
        for d in 0..self.matrix.dim() {
            let slot = self.matrix.diag_slot(d);
            self.matrix.values_mut()[slot] = diagonal[d / 3];
        }
        let values = self.matrix.values_mut();
        for (slots, tet_blocks) in self.slots.iter().zip(blocks) {
            for k in 0..4 {
                for l in 0..4 {
                    let block = &tet_blocks[k][l];
                    for a in 0..3 {
                        let s = slots[k][l][a];
                        if s == NO_SLOT {
                            continue;
                        }
                        let s = s as usize;
                        for b in 0..3 {
                            values[s + b] += block[(a, b)];
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembly_matches_a_dense_sum_of_the_blocks() {
        // Two tets sharing a face; vertex 4 pinned.
        let tets = [[0u32, 1, 2, 3], [1, 2, 3, 4]];
        let dof = [0, 1, 2, 3, PINNED];
        let mut pattern = HessianPattern::new(&tets, &dof, 4);
        let blocks: Vec<[[Mat3; 4]; 4]> = (0..2)
            .map(|t| {
                std::array::from_fn(|k| {
                    std::array::from_fn(|l| {
                        Mat3::from_fn(|a, b| {
                            // Symmetric overall: block (k, l) is the transpose of (l, k).
                            let (i, j) = (3 * k + a, 3 * l + b);
                            let (i, j) = (i.min(j), i.max(j));
                            (t * 100 + i * 12 + j) as f64
                        })
                    })
                })
            })
            .collect();
        let diagonal = [1.0, 2.0, 3.0, 4.0];
        pattern.assemble(&blocks, &diagonal);
        let mut dense = nalgebra::DMatrix::<f64>::zeros(12, 12);
        for d in 0..12 {
            dense[(d, d)] = diagonal[d / 3];
        }
        for (t, tet) in tets.iter().enumerate() {
            for k in 0..4 {
                for l in 0..4 {
                    let (dk, dl) = (dof[tet[k] as usize], dof[tet[l] as usize]);
                    if dk == PINNED || dl == PINNED {
                        continue;
                    }
                    for a in 0..3 {
                        for b in 0..3 {
                            dense[(3 * dk as usize + a, 3 * dl as usize + b)] +=
                                blocks[t][k][l][(a, b)];
                        }
                    }
                }
            }
        }
        let m = pattern.matrix();
        for i in 0..12 {
            for j in 0..12 {
                assert_eq!(m.get(i, j), dense[(i, j)], "({i}, {j})");
            }
        }
        // The product through the CSR rows agrees with the dense one.
        let x: Vec<f64> = (0..12).map(|i| (i as f64 * 0.7).sin()).collect();
        let dense_x = &dense * nalgebra::DVector::from_column_slice(&x);
        for i in 0..12 {
            let row: f64 = m.row(i).map(|(j, v)| v * x[j]).sum();
            assert!((row - dense_x[i]).abs() < 1e-9);
        }
    }
}
