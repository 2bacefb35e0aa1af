//! The mass-spring in-plane model as PD constraints (the seed notes' "Projective Dynamics"
//! section): per mesh edge `(i, j)` of rest length `L`, the energy
//! `k / 2 |(x_i - x_j) - p|^2` with `p` the edge at its rest length along its current
//! direction, which is `k / 2 (|x_i - x_j| - L)^2`: a spring of stiffness `k` (N/m). Its
//! matrix terms are constant, like the triangles'. At ten PD iterations a sheet of springs
//! hung by two corners comes to rest (under 5 mm/s after 10 s) but its energy there wanders
//! by about 1e-4 of its size, where the as-rigid-as-possible triangles' stays within 5e-7 a
//! step (`tests/sim_cloth.rs`).

use std::collections::BTreeSet;

use crate::sim::math::Vec3;

/// A mesh edge and its rest length (m).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RestEdge {
    /// The two vertices, the smaller first.
    pub ends: [u32; 2],
    /// Rest length (m).
    pub length: f64,
}

/// Every edge of `triangles` once, in increasing order of its ends, at rest positions `rest`.
pub fn rest_edges(triangles: &[[u32; 3]], rest: &[Vec3]) -> Vec<RestEdge> {
    let ends: BTreeSet<[u32; 2]> = triangles
        .iter()
        .flat_map(|t| [[t[0], t[1]], [t[1], t[2]], [t[2], t[0]]])
        .map(|[a, b]| [a.min(b), a.max(b)])
        .collect();
    ends.into_iter()
        .map(|ends| RestEdge {
            ends,
            length: (rest[ends[1] as usize] - rest[ends[0] as usize]).norm(),
        })
        .collect()
}

/// The projection `p` of edge `e` at positions `x` (m): `x_i - x_j` scaled to the rest length
/// (along the first axis where the edge has collapsed to a point).
pub fn spring_target(e: &RestEdge, x: &[Vec3]) -> Vec3 {
    let d = x[e.ends[0] as usize] - x[e.ends[1] as usize];
    let n = d.norm();
    if n > 1e-300 {
        d * (e.length / n)
    } else {
        Vec3::new(e.length, 0.0, 0.0)
    }
}

/// The springs' energy (J) at positions `x` (m), stiffness `k` (N/m).
pub fn spring_energy(edges: &[RestEdge], x: &[Vec3], k: f64) -> f64 {
    edges
        .iter()
        .map(|e| {
            let stretch = (x[e.ends[0] as usize] - x[e.ends[1] as usize]).norm() - e.length;
            0.5 * k * stretch * stretch
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::cloth::ClothMesh;

    #[test]
    fn a_rectangle_has_each_edge_once_and_the_pd_force_is_the_spring_force() {
        let mesh = ClothMesh::rectangle(1.0, 0.5, 3, 2).unwrap();
        let edges = rest_edges(mesh.triangles(), mesh.rest_positions());
        // Grid edges plus one diagonal per cell.
        assert_eq!(edges.len(), 4 * 2 + 3 * 3 + 3 * 2);
        // PD's force on end i, -k (d - p), against central differences of the energy.
        let x: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| Vec3::new(1.2 * p.x + 0.1 * p.z, 0.3 * p.x * p.z, 0.9 * p.z))
            .collect();
        let k = 40.0;
        for e in &edges {
            let [i, j] = e.ends.map(|v| v as usize);
            let force = -k * ((x[i] - x[j]) - spring_target(e, &x));
            for c in 0..3 {
                let step = 1e-7;
                let (mut plus, mut minus) = (x.clone(), x.clone());
                plus[i][c] += step;
                minus[i][c] -= step;
                let one = [*e];
                let numeric = -(spring_energy(&one, &plus, k) - spring_energy(&one, &minus, k))
                    / (2.0 * step);
                assert!(
                    (numeric - force[c]).abs() < 1e-6,
                    "{numeric} against {}",
                    force[c]
                );
            }
        }
    }
}
