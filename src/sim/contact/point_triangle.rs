//! The point-triangle contact between a proxy of one body and a boundary triangle of another
//! (or of the same body, for self-collision).
//!
//! The constraint is eq. (8) of Li et al. 2015: with the closest point of the triangle
//! `q = w_a a + w_b b + w_c c` and the triangle's outward unit normal `n`, both frozen at
//! detection time, the proxy `p` must stay on the outer side,
//!
//! `n' (p - w_a a - w_b b - w_c c) >= 0`,
//!
//! which is linear in every vertex involved (the proxy's own tet vertices and the triangle's),
//! so it is one row of the QP that couples the two bodies.
//!
//! The closest point is found by the Voronoi-region walk over the triangle's vertices, edges and
//! face (Ericson, *Real-Time Collision Detection*, section 5.1.5), in `f64`.

use crate::sim::math::Vec3;

/// A proxy near (or behind) a triangle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointTriangleContact {
    /// Barycentric weights of the closest point on the triangle (non-negative, summing to 1).
    pub weights: [f64; 3],
    /// The closest point on the triangle (m).
    pub closest: Vec3,
    /// Outward unit normal of the triangle (counter-clockwise winding seen from outside).
    pub normal: Vec3,
    /// Signed distance of the point from the triangle's plane side, `n' (p - closest)` (m):
    /// negative behind the face.
    pub gap: f64,
}

/// Barycentric weights and position of the point of triangle `(a, b, c)` closest to `p`.
pub fn closest_point_on_triangle(p: &Vec3, a: &Vec3, b: &Vec3, c: &Vec3) -> ([f64; 3], Vec3) {
    let ab = b - a;
    let ac = c - a;
    let ap = p - a;
    let d1 = ab.dot(&ap);
    let d2 = ac.dot(&ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return ([1.0, 0.0, 0.0], *a);
    }
    let bp = p - b;
    let d3 = ab.dot(&bp);
    let d4 = ac.dot(&bp);
    if d3 >= 0.0 && d4 <= d3 {
        return ([0.0, 1.0, 0.0], *b);
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        let v = d1 / (d1 - d3);
        return ([1.0 - v, v, 0.0], a + v * ab);
    }
    let cp = p - c;
    let d5 = ab.dot(&cp);
    let d6 = ac.dot(&cp);
    if d6 >= 0.0 && d5 <= d6 {
        return ([0.0, 0.0, 1.0], *c);
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        let w = d2 / (d2 - d6);
        return ([1.0 - w, 0.0, w], a + w * ac);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return ([0.0, 1.0 - w, w], b + w * (c - b));
    }
    let denom = va + vb + vc;
    if !(denom.abs() > 0.0) {
        // A degenerate (zero-area) triangle: fall back to its nearest vertex.
        let corners = [
            (*a, [1.0, 0.0, 0.0]),
            (*b, [0.0, 1.0, 0.0]),
            (*c, [0.0, 0.0, 1.0]),
        ];
        let (q, w) = corners
            .into_iter()
            .min_by(|x, y| {
                (p - x.0)
                    .norm_squared()
                    .total_cmp(&(p - y.0).norm_squared())
            })
            .unwrap_or((*a, [1.0, 0.0, 0.0]));
        return (w, q);
    }
    let v = vb / denom;
    let w = vc / denom;
    ([1.0 - v - w, v, w], a + v * ab + w * ac)
}

/// The contact of point `p` with triangle `(a, b, c)` if the point is within `margin` (m) of it
/// on the outer side, or behind its face no deeper than `depth_limit` (m) and closer to it than
/// that. `None` for a degenerate triangle.
pub fn point_triangle_contact(
    p: &Vec3,
    a: &Vec3,
    b: &Vec3,
    c: &Vec3,
    margin: f64,
    depth_limit: f64,
) -> Option<PointTriangleContact> {
    let normal = (b - a).cross(&(c - a)).try_normalize(1e-300)?;
    let (weights, closest) = closest_point_on_triangle(p, a, b, c);
    let offset = p - closest;
    let gap = normal.dot(&offset);
    let distance = offset.norm();
    let touching = if gap >= 0.0 {
        distance < margin
    } else {
        distance <= depth_limit
    };
    touching.then_some(PointTriangleContact {
        weights,
        closest,
        normal,
        gap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sim::test_rng::Rng;

    fn point(rng: &mut Rng) -> Vec3 {
        Vec3::new(rng.signed(), rng.signed(), rng.signed())
    }

    /// The closest point found by dense sampling of the triangle's barycentric domain.
    fn sampled_distance(p: &Vec3, a: &Vec3, b: &Vec3, c: &Vec3) -> f64 {
        let n = 200;
        let mut best = f64::INFINITY;
        for i in 0..=n {
            for j in 0..=(n - i) {
                let (u, v) = (i as f64 / n as f64, j as f64 / n as f64);
                let q = a + u * (b - a) + v * (c - a);
                best = best.min((p - q).norm());
            }
        }
        best
    }

    #[test]
    fn the_closest_point_matches_dense_sampling_in_every_region() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for _ in 0..300 {
            let (a, b, c) = (point(&mut rng), point(&mut rng), point(&mut rng));
            let p = point(&mut rng) * 1.5;
            let (w, q) = closest_point_on_triangle(&p, &a, &b, &c);
            assert!(w.iter().all(|&x| x >= -1e-12), "{w:?}");
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!((w[0] * a + w[1] * b + w[2] * c - q).norm() < 1e-12);
            let sampled = sampled_distance(&p, &a, &b, &c);
            let exact = (p - q).norm();
            // Never farther than a sample; the grid spacing bounds how much closer it can be.
            assert!(exact <= sampled + 1e-12, "{exact} vs {sampled}");
            let spacing = [(b - a).norm(), (c - a).norm()]
                .into_iter()
                .fold(0.0, f64::max)
                / 200.0;
            assert!(sampled - exact <= 2.0 * spacing, "{exact} vs {sampled}");
        }
    }

    #[test]
    fn contacts_on_both_sides_of_the_face() {
        let (a, b, c) = (Vec3::zeros(), Vec3::x(), Vec3::y());
        // Above the face within the margin: a contact with the +z normal and a positive gap.
        let above = point_triangle_contact(&Vec3::new(0.2, 0.2, 0.004), &a, &b, &c, 0.01, 0.05)
            .expect("within the margin");
        assert!((above.normal - Vec3::z()).norm() < 1e-15);
        assert!((above.gap - 0.004).abs() < 1e-15);
        assert!((above.weights[1] - 0.2).abs() < 1e-12 && (above.weights[2] - 0.2).abs() < 1e-12);
        // Too far above, or too deep behind: none.
        assert!(
            point_triangle_contact(&Vec3::new(0.2, 0.2, 0.02), &a, &b, &c, 0.01, 0.05).is_none()
        );
        assert!(
            point_triangle_contact(&Vec3::new(0.2, 0.2, -0.2), &a, &b, &c, 0.01, 0.05).is_none()
        );
        // Behind the face within the depth limit: a negative gap.
        let behind = point_triangle_contact(&Vec3::new(0.2, 0.2, -0.03), &a, &b, &c, 0.01, 0.05)
            .expect("within the depth limit");
        assert!((behind.gap + 0.03).abs() < 1e-15);
        // Degenerate triangles give nothing.
        assert!(point_triangle_contact(&Vec3::zeros(), &a, &b, &(2.0 * b), 0.01, 0.05).is_none());
    }
}
