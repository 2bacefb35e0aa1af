//! A fill-reducing ordering by geometric nested dissection, for the sparse Cholesky factor of
//! the PD matrix.
//!
//! The matrix couples vertices that share a tet, so its graph is the mesh itself and the mesh's
//! rest positions say where a small separator lies. The vertex set is split at the median of its
//! widest coordinate; the vertices on one side of the cut with a neighbour on the other form the
//! separator (of the two such sides, the smaller), which is ordered after both halves; the halves
//! are ordered the same way, recursively, down to leaves of [`LEAF_VERTICES`]. Eliminating a
//! half never creates fill in the other, so the factor's fill is that of the separators'
//! dense blocks: `O(n^(4/3))` entries for a 3D mesh of `n` vertices (George 1973; Lipton, Rose
//! and Tarjan 1979), where a minimum-degree ordering has no such bound.
//!
//! [`crate::sim::sparse::SparseCholesky::analyse_with_coordinates`] analyses both this ordering
//! and faer's AMD and keeps the one whose factor has fewer entries, so it is never worse than
//! AMD. Measured with `cargo bench --bench kernels` (the table's "ordering" columns).

use super::matrix::SymmetricMatrix;
use crate::sim::math::Vec3;

/// Sets of at most this many vertices are not split further (their order is kept): below it,
/// a separator saves less than the bookkeeping costs.
pub const LEAF_VERTICES: usize = 16;

/// The nested-dissection order of the rows of `matrix`: `order[k]` is the row eliminated
/// k-th. `coordinates[i]` is where row `i`'s vertex lies (m, rest shape).
///
/// # Panics
/// If `coordinates` is shorter than the matrix.
pub fn nested_dissection(matrix: &SymmetricMatrix, coordinates: &[Vec3]) -> Vec<usize> {
    let n = matrix.dim();
    assert!(coordinates.len() >= n, "a coordinate per row");
    let mut order = Vec::with_capacity(n);
    // Which part a vertex is in while its set is split (a fresh label per split, so that the
    // array is never cleared).
    let mut label = vec![0u32; n];
    let mut next_label = 1u32;
    // Sets still to split, each with the number of separator vertices to append after both of
    // its halves are ordered; processed depth-first so that the output order is
    // [left, right, separator] at every level.
    let mut stack: Vec<Task> = vec![Task::Split((0..n as u32).collect())];
    while let Some(task) = stack.pop() {
        match task {
            Task::Emit(vertices) => order.extend(vertices.iter().map(|&v| v as usize)),
            Task::Split(mut vertices) => {
                if vertices.len() <= LEAF_VERTICES {
                    order.extend(vertices.iter().map(|&v| v as usize));
                    continue;
                }
                let (left_label, right_label) = (next_label, next_label + 1);
                next_label += 2;
                let axis = widest_axis(&vertices, coordinates);
                let half = vertices.len() / 2;
                vertices.select_nth_unstable_by(half, |&a, &b| {
                    coordinates[a as usize][axis].total_cmp(&coordinates[b as usize][axis])
                });
                let (left, right) = vertices.split_at(half);
                for &v in left {
                    label[v as usize] = left_label;
                }
                for &v in right {
                    label[v as usize] = right_label;
                }
                let touches = |v: u32, other: u32| {
                    matrix
                        .neighbours(v as usize)
                        .iter()
                        .any(|&u| label[u as usize] == other)
                };
                let left_border = left.iter().filter(|&&v| touches(v, right_label)).count();
                let right_border = right.iter().filter(|&&v| touches(v, left_label)).count();
                let (cut_side, cut_label, other_label) = if left_border <= right_border {
                    (left, left_label, right_label)
                } else {
                    (right, right_label, left_label)
                };
                let separator: Vec<u32> = cut_side
                    .iter()
                    .copied()
                    .filter(|&v| touches(v, other_label))
                    .collect();
                // The separator leaves its side's part, so that the recursion does not see it.
                for &v in &separator {
                    label[v as usize] = 0;
                }
                let rest = |side: &[u32], side_label: u32| -> Vec<u32> {
                    side.iter()
                        .copied()
                        .filter(|&v| side_label != cut_label || label[v as usize] == cut_label)
                        .collect()
                };
                let left_rest = rest(left, left_label);
                let right_rest = rest(right, right_label);
                stack.push(Task::Emit(separator));
                stack.push(Task::Split(right_rest));
                stack.push(Task::Split(left_rest));
            }
        }
    }
    order
}

/// Work left for [`nested_dissection`].
enum Task {
    /// Order this set by splitting it.
    Split(Vec<u32>),
    /// Append these vertices (a separator) as they are.
    Emit(Vec<u32>),
}

/// The axis (0, 1, 2) along which `vertices` spread the most.
fn widest_axis(vertices: &[u32], coordinates: &[Vec3]) -> usize {
    let mut lo = Vec3::repeat(f64::INFINITY);
    let mut hi = Vec3::repeat(f64::NEG_INFINITY);
    for &v in vertices {
        let p = coordinates[v as usize];
        lo = lo.inf(&p);
        hi = hi.sup(&p);
    }
    (hi - lo).imax()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::TetMesh;

    fn mesh_matrix(mesh: &TetMesh) -> SymmetricMatrix {
        let pairs = mesh
            .tets()
            .iter()
            .flat_map(|t| (0..4).flat_map(move |a| (a + 1..4).map(move |b| (t[a], t[b]))));
        SymmetricMatrix::from_pairs(mesh.vertex_count(), pairs)
    }

    #[test]
    fn the_order_is_a_permutation() {
        let mesh = TetMesh::cuboid(Vec3::new(0.5, 0.2, 0.3), 9);
        let order = nested_dissection(&mesh_matrix(&mesh), mesh.rest_positions());
        let mut seen = vec![false; mesh.vertex_count()];
        for &v in &order {
            assert!(!seen[v], "vertex {v} twice");
            seen[v] = true;
        }
        assert_eq!(order.len(), mesh.vertex_count());
    }

    #[test]
    fn each_separator_comes_after_the_halves_it_separates() {
        // Independent check of the defining property: once the separators of the first split
        // (the last vertices ordered) are removed, no edge joins a vertex ordered in the first
        // half to one in the second.
        let mesh = TetMesh::cuboid(Vec3::repeat(0.5), 11);
        let matrix = mesh_matrix(&mesh);
        let order = nested_dissection(&matrix, mesh.rest_positions());
        let mut position = vec![0usize; order.len()];
        for (k, &v) in order.iter().enumerate() {
            position[v] = k;
        }
        // The top separator of a 12^3 lattice cut across its widest axis: one layer of 144.
        let top = 144;
        let body = order.len() - top;
        let first_half_end = order[..body]
            .iter()
            .position(|&v| mesh.rest_positions()[v].x > 0.0)
            .expect("a second half");
        for (k, &v) in order[..body].iter().enumerate() {
            for &u in matrix.neighbours(v) {
                let pu = position[u as usize];
                if pu < body {
                    assert_eq!(
                        k < first_half_end,
                        pu < first_half_end,
                        "edge {v}-{u} joins the halves"
                    );
                }
            }
        }
    }
}
