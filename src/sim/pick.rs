//! Ray casts against a deformed body's boundary triangles: what the mouse points at.
//!
//! Each boundary triangle is intersected with the ray by the Möller-Trumbore test (barycentric
//! coordinates from two cross products, no plane equation). Triangles are tested from both
//! sides, so a ray from inside a body finds its boundary too. A brute-force loop is enough here:
//! a pick happens once per click, and a 5,000-triangle body takes a few microseconds.

use super::embed::EmbeddedPoint;
use super::math::Vec3;
use super::mesh::TetMesh;

/// Where a ray meets a body's surface.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SurfaceHit {
    /// Distance along the (unit) ray direction (m).
    pub distance: f64,
    /// The boundary triangle hit (vertex indices of the tet mesh).
    pub triangle: [u32; 3],
    /// Barycentric coordinates of the hit in the triangle (non-negative, sum 1).
    pub barycentric: [f64; 3],
}

impl SurfaceHit {
    /// The hit point as an embedded point of the body: it follows the surface as the body
    /// deforms (the triangle is a face of one tet, so the point is embedded in that tet).
    pub fn embedded_point(&self) -> EmbeddedPoint {
        let [a, b, c] = self.triangle;
        let [u, v, w] = self.barycentric;
        EmbeddedPoint {
            vertices: [a, b, c, a],
            weights: [u, v, w, 0.0],
        }
    }

    /// The hit point (m) on the surface at positions `x`.
    pub fn point(&self, x: &[Vec3]) -> Vec3 {
        self.embedded_point().position(x)
    }
}

/// The nearest boundary triangle of `mesh` at positions `x` hit by the ray `origin + t dir`,
/// `0 <= t <= max_distance` (`dir` need not be unit length; distances are in units of `|dir|`
/// normalised to metres). `None` when nothing is hit or the ray is degenerate.
pub fn ray_cast_surface(
    mesh: &TetMesh,
    x: &[Vec3],
    origin: Vec3,
    dir: Vec3,
    max_distance: f64,
) -> Option<SurfaceHit> {
    let len = dir.norm();
    if !(len > 0.0 && len.is_finite() && origin.iter().all(|c| c.is_finite())) {
        return None;
    }
    let d = dir / len;
    let mut best: Option<SurfaceHit> = None;
    for tri in mesh.surface_triangles() {
        let [a, b, c] = tri.map(|v| x[v as usize]);
        let Some((t, u, v)) = ray_triangle(&origin, &d, &a, &b, &c) else {
            continue;
        };
        if t > max_distance || best.is_some_and(|h| h.distance <= t) {
            continue;
        }
        best = Some(SurfaceHit {
            distance: t,
            triangle: *tri,
            barycentric: [1.0 - u - v, u, v],
        });
    }
    best
}

/// Möller-Trumbore: `(t, u, v)` with the hit `origin + t d = (1-u-v) a + u b + v c`, `t >= 0`,
/// or `None` (parallel, or outside the triangle).
fn ray_triangle(origin: &Vec3, d: &Vec3, a: &Vec3, b: &Vec3, c: &Vec3) -> Option<(f64, f64, f64)> {
    let e1 = b - a;
    let e2 = c - a;
    let p = d.cross(&e2);
    let det = e1.dot(&p);
    // Relative to the triangle's size, so tiny and huge triangles are treated alike.
    if det.abs() <= 1e-12 * e1.norm() * e2.norm() {
        return None;
    }
    let inv = 1.0 / det;
    let s = origin - a;
    let u = s.dot(&p) * inv;
    if !(0.0..=1.0).contains(&u) {
        return None;
    }
    let q = s.cross(&e1);
    let v = d.dot(&q) * inv;
    if v < 0.0 || u + v > 1.0 {
        return None;
    }
    let t = e2.dot(&q) * inv;
    (t >= 0.0).then_some((t, u, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    /// A ray at a cube from outside hits the face the analytic slab test predicts, at the
    /// analytic distance, and the barycentric point is that point.
    #[test]
    fn hits_a_cube_where_the_slab_test_says() {
        let half = Vec3::new(0.4, 0.3, 0.2);
        let mesh = TetMesh::cuboid(half, 3);
        let x = mesh.rest_positions().to_vec();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut hits = 0;
        for _ in 0..200 {
            let origin = Vec3::new(2.0 * rng.signed(), 2.0 * rng.signed(), 1.5);
            let target = Vec3::new(0.6 * rng.signed(), 0.5 * rng.signed(), 0.0);
            let dir = target - origin;
            let expected = slab(&origin, &dir.normalize(), &half);
            let hit = ray_cast_surface(&mesh, &x, origin, dir, 100.0);
            match (expected, hit) {
                (None, None) => {}
                (Some(t), Some(h)) => {
                    hits += 1;
                    assert!((h.distance - t).abs() < 1e-9, "{} vs {t}", h.distance);
                    let p = origin + t * dir.normalize();
                    assert!((h.point(&x) - p).norm() < 1e-9);
                    assert!(h.barycentric.iter().all(|&w| w >= -1e-12));
                }
                (e, h) => {
                    // Grazing an edge within rounding may go either way.
                    let grazing = e.is_some_and(|t| {
                        let p = origin + t * dir.normalize();
                        (p.abs() - half).amax().abs() < 1e-9
                            && (p.abs() - half).iter().filter(|c| c.abs() < 1e-9).count() > 1
                    });
                    assert!(grazing, "slab {e:?} vs cast {h:?}");
                }
            }
        }
        assert!(hits > 50, "too few rays hit: {hits}");
    }

    #[test]
    fn nearest_of_two_faces_and_limits() {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.5), 2);
        let x = mesh.rest_positions().to_vec();
        let origin = Vec3::new(0.1, 0.2, -3.0);
        let hit = ray_cast_surface(&mesh, &x, origin, Vec3::z() * 4.0, 10.0).unwrap();
        assert!((hit.distance - 2.5).abs() < 1e-12);
        // From inside, the boundary ahead.
        let inside = ray_cast_surface(&mesh, &x, Vec3::zeros(), Vec3::z(), 10.0).unwrap();
        assert!((inside.distance - 0.5).abs() < 1e-12);
        // Too short, away, degenerate or non-finite: nothing.
        assert!(ray_cast_surface(&mesh, &x, origin, Vec3::z(), 2.0).is_none());
        assert!(ray_cast_surface(&mesh, &x, origin, -Vec3::z(), 10.0).is_none());
        assert!(ray_cast_surface(&mesh, &x, origin, Vec3::zeros(), 10.0).is_none());
        let nan = Vec3::new(f64::NAN, 0.0, 0.0);
        assert!(ray_cast_surface(&mesh, &x, nan, Vec3::z(), 10.0).is_none());
    }

    /// Entry distance of a ray into the box `|p| <= half`, if it enters.
    fn slab(o: &Vec3, d: &Vec3, half: &Vec3) -> Option<f64> {
        let (mut lo, mut hi) = (0.0f64, f64::INFINITY);
        for k in 0..3 {
            if d[k].abs() < 1e-15 {
                if o[k].abs() > half[k] {
                    return None;
                }
                continue;
            }
            let (a, b) = ((-half[k] - o[k]) / d[k], (half[k] - o[k]) / d[k]);
            lo = lo.max(a.min(b));
            hi = hi.min(a.max(b));
        }
        (lo <= hi).then_some(lo)
    }
}
