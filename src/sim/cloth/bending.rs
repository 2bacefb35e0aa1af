//! The quadratic bending model (Bergou et al. 2006, "A quadratic bending model for
//! inextensible surfaces"; the seed notes' "Quadratic Bending Model"): per hinge, the energy
//! `E = 3 |sum_i q_i x_i|^2 / (2 (A0 + A1))` with weights `q` from the cotangents of the rest
//! triangles, so that the bending matrix `Q = 3 q q' / (A0 + A1)` (times the stiffness) is
//! constant and goes into the prefactored PD matrix like the mass: no local step, no
//! refactorization.
//!
//! The weights: with `alpha_k`, `beta_k` the rest angles at `v0`, `v1` of the hinge's triangle
//! `k` (opposite vertex `v2` for `k = 0`, `v3` for `k = 1`), the sum
//! `(cot a0 + cot b0) x2 + (cot a1 + cot b1) x3 - (cot b0 + cot b1) x0 - (cot a0 + cot a1) x1`
//! is the edge length times the sum of the two triangles' unit heights onto the edge, zero for
//! any flat placement (the cotangent weights reproduce affine maps) and of length about the
//! fold angle times the edge length for a small fold. The model is exact for bending that keeps
//! the rest lengths and a flat rest shape; a pre-bent rest shape (a cape's folds) needs the
//! dihedral-angle model, which this module does not have.

use crate::sim::math::Vec3;

use super::mesh::Hinge;

/// One hinge's weights `q` (see the module docs) and `3 / (A0 + A1)` (1/m^2), from rest
/// positions `rest` (m).
pub fn hinge_weights(rest: &[Vec3], hinge: Hinge) -> ([f64; 4], f64) {
    let [x0, x1, x2, x3] = hinge.map(|v| rest[v as usize]);
    // Cotangent of the angle at `at` between the edges to `a` and `b`.
    let cot = |at: Vec3, a: Vec3, b: Vec3| {
        let (u, w) = (a - at, b - at);
        u.dot(&w) / u.cross(&w).norm()
    };
    let (a0, b0) = (cot(x0, x1, x2), cot(x1, x0, x2));
    let (a1, b1) = (cot(x0, x1, x3), cot(x1, x0, x3));
    let area0 = 0.5 * (x1 - x0).cross(&(x2 - x0)).norm();
    let area1 = 0.5 * (x1 - x0).cross(&(x3 - x0)).norm();
    (
        [-(b0 + b1), -(a0 + a1), a0 + b0, a1 + b1],
        3.0 / (area0 + area1),
    )
}

/// The bending energy (J) of positions `x` (m) with stiffness `k` (N m) over the hinges and
/// their weights.
pub fn bending_energy(x: &[Vec3], hinges: &[Hinge], weights: &[([f64; 4], f64)], k: f64) -> f64 {
    hinges
        .iter()
        .zip(weights)
        .map(|(h, (q, scale))| {
            let s: Vec3 = (0..4).map(|i| q[i] * x[h[i] as usize]).sum();
            0.5 * k * scale * s.norm_squared()
        })
        .sum()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sim::cloth::ClothMesh;
    use crate::sim::math::Mat3;

    /// `mesh`'s rest positions rolled onto a cylinder of `radius` (m) about the z axis, arc
    /// lengths kept.
    pub(crate) fn roll(mesh: &ClothMesh, radius: f64) -> Vec<Vec3> {
        mesh.mapped(|p| {
            let a = p.x / radius;
            Vec3::new(radius * a.sin(), radius * (1.0 - a.cos()), p.z)
        })
        .unwrap()
        .rest_positions()
        .to_vec()
    }

    fn weights(mesh: &ClothMesh) -> Vec<([f64; 4], f64)> {
        mesh.hinges()
            .iter()
            .map(|&h| hinge_weights(mesh.rest_positions(), h))
            .collect()
    }

    #[test]
    fn flat_placements_cost_nothing_and_a_fold_costs_its_angle_squared() {
        let mesh = ClothMesh::rectangle(1.0, 0.6, 5, 3).unwrap();
        let w = weights(&mesh);
        // Any affine map of the flat rest shape: no bending.
        let map = Mat3::new(0.9, 0.3, -0.2, 0.1, 1.2, 0.4, -0.3, 0.2, 0.8);
        let shift = Vec3::new(0.3, -1.0, 2.0);
        let moved: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| map * p + shift)
            .collect();
        assert!(bending_energy(&moved, mesh.hinges(), &w, 1.0) < 1e-24);
        // One hinge folded by a small angle about its edge: E = 3 |e|^2 theta^2 / (2 (A0 + A1))
        // to second order.
        let p = vec![
            Vec3::zeros(),
            Vec3::x(),
            Vec3::new(0.3, 0.0, 0.8),
            Vec3::new(0.6, 0.0, -0.7),
        ];
        let mesh = ClothMesh::new(p, &[[0, 1, 2], [1, 0, 3]]).unwrap();
        let w = weights(&mesh);
        let theta: f64 = 1e-3;
        let mut folded = mesh.rest_positions().to_vec();
        let z = folded[3].z;
        folded[3] = Vec3::new(folded[3].x, -z * theta.sin(), z * theta.cos());
        let areas = 0.5 * 0.8 + 0.5 * 0.7;
        let expected = 3.0 * theta * theta / (2.0 * areas);
        let got = bending_energy(&folded, mesh.hinges(), &w, 1.0);
        assert!(
            (got / expected - 1.0).abs() < 1e-3,
            "{got} against {expected}"
        );
    }

    #[test]
    fn a_strip_rolled_onto_a_cylinder_costs_its_curvature_squared_times_its_area() {
        // Rolled around the z axis without stretching, the rectangle's cells stay flat (their
        // corners are coplanar): the curvature sits on the interior edges along the axis, each
        // folded by theta = a / r (a the cell width) between two triangles of area a b / 2, so
        // the energy is (columns - 1) rows 3 b^2 theta^2 / (2 a b) = 3 A / (2 r^2) times
        // (columns - 1) / columns, to second order in theta: the area over the radius squared.
        let (columns, rows, depth) = (60, 8, 0.4);
        for (width, radius) in [(1.0, 0.5), (1.0, 1.0), (2.0, 1.0)] {
            let mesh = ClothMesh::rectangle(width, depth, columns, rows).unwrap();
            let w = weights(&mesh);
            let rolled = roll(&mesh, radius);
            let e = bending_energy(&rolled, mesh.hinges(), &w, 1.0);
            let expected = 3.0 * width * depth / (2.0 * radius * radius) * (columns - 1) as f64
                / columns as f64;
            assert!(
                (e / expected - 1.0).abs() < 1e-3,
                "width {width}, radius {radius}: {e} against {expected}"
            );
        }
    }
}
