//! A convex hull's triangles in `f64`, for exact point queries against a
//! [`super::ObstacleShape::ConvexHull`] obstacle.
//!
//! parry3d builds the hull (its `transformation::convex_hull`); the queries are answered here,
//! not by parry's point projection on a `ConvexPolyhedron`, which is a GJK in `f32`. Measured on
//! the `character` example's shoulder collider (117 points on nine rings, chamfered ends): a
//! point 0.02 mm outside six of its vertices came back inside with a normal pointing into the
//! hull (one of them 8 cm "deep"), and a cloth resting on the hull took such a normal as its
//! contact plane and sank up to 7 mm into it.
//!
//! **The query.** Every triangle `t` of the hull has an outward unit normal `n_t` and offset
//! `d_t = n_t . a_t` (computed in `f64` from its corners). A point `q` is inside where
//! `s = max_t (n_t . q - d_t) <= 0`; its depth is then `-s` (the distance to the nearest face
//! plane is the distance to the boundary from inside a convex polytope), the normal that face's,
//! the surface point `q - s n_t`. Outside, `s` is a lower bound of the distance (a point `s` or
//! more away is dismissed without further work), and the closest point lies on a face that sees
//! `q` (`n_t . q - d_t >= 0`): the closest point of those triangles is the answer, the normal
//! from it toward `q`. A point outside any one plane by the margin is dismissed at that plane.

use super::obstacle::ObstacleContact;
use super::point_triangle::closest_point_on_triangle;
use crate::sim::math::Vec3;

/// Triangles below this area (m^2, twice over: `|cross|`) carry no plane (a sliver parry's hull
/// may keep where points are nearly coplanar).
const MIN_DOUBLE_AREA: f64 = 1e-14;

/// A convex hull's triangles with their outward planes (m, the obstacle's frame).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConvexFaces {
    vertices: Vec<Vec3>,
    triangles: Vec<[u32; 3]>,
    /// Per triangle: its outward unit normal and offset `n . a` (m).
    planes: Vec<(Vec3, f64)>,
}

impl ConvexFaces {
    /// The hull of `points` (m), or `None` where there is no solid hull (fewer than four
    /// points in general position, or any point not finite).
    pub fn new(points: &[Vec3]) -> Option<Self> {
        let single: Vec<parry3d::math::Vector> = points
            .iter()
            .map(|p| parry3d::math::Vector::new(p.x as f32, p.y as f32, p.z as f32))
            .collect();
        let (hull_points, triangles) = parry3d::transformation::try_convex_hull(&single).ok()?;
        if triangles.len() < 4 {
            return None;
        }
        // The hull's vertices are some of the points: take them back in `f64` (the first point
        // with the same `f32` coordinates).
        let vertices: Vec<Vec3> = hull_points
            .iter()
            .map(|h| {
                single
                    .iter()
                    .position(|s| s == h)
                    .map_or(Vec3::new(h.x as f64, h.y as f64, h.z as f64), |i| points[i])
            })
            .collect();
        let centre = vertices.iter().sum::<Vec3>() / vertices.len() as f64;
        let mut kept = Vec::with_capacity(triangles.len());
        let mut planes = Vec::with_capacity(triangles.len());
        for t in triangles {
            let [a, b, c] = t.map(|i| vertices[i as usize]);
            let cross = (b - a).cross(&(c - a));
            let length = cross.norm();
            if length < MIN_DOUBLE_AREA {
                continue;
            }
            let mut n = cross / length;
            let mut t = t;
            // Outward: away from the centre, which is inside.
            if n.dot(&(a - centre)) < 0.0 {
                n = -n;
                t.swap(1, 2);
            }
            planes.push((n, n.dot(&a)));
            kept.push(t);
        }
        // A flat cloud's hull is two-sided and encloses nothing.
        let volume: f64 = kept
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|i| vertices[i as usize]);
                (a - centre).dot(&(b - a).cross(&(c - a))) / 6.0
            })
            .sum();
        let extent = vertices
            .iter()
            .map(|v| (v - centre).norm())
            .fold(0.0, f64::max);
        (kept.len() >= 4 && volume > 1e-9 * extent.powi(3)).then_some(Self {
            vertices,
            triangles: kept,
            planes,
        })
    }

    /// The contact of `q` (m, the hull's frame) if it is inside, or outside closer than
    /// `margin` (m).
    pub fn query(&self, q: &Vec3, margin: f64) -> Option<ObstacleContact> {
        let (mut s, mut face) = (f64::NEG_INFINITY, 0);
        for (t, (n, d)) in self.planes.iter().enumerate() {
            let above = n.dot(q) - d;
            // Outside this plane by the margin: outside the hull by more (the common case of a
            // point in the hull's bounds but not near it, answered without the other planes).
            if above > 0.0 && above >= margin {
                return None;
            }
            if above > s {
                s = above;
                face = t;
            }
        }
        let n = self.planes[face].0;
        if s <= 0.0 {
            return Some(ObstacleContact {
                point: q - s * n,
                normal: n,
                depth: -s,
            });
        }
        if s >= margin {
            return None;
        }
        let mut best: Option<(f64, Vec3)> = None;
        for (t, (normal, d)) in self.triangles.iter().zip(&self.planes) {
            if normal.dot(q) - d < 0.0 {
                continue;
            }
            let [a, b, c] = t.map(|i| self.vertices[i as usize]);
            let (_, p) = closest_point_on_triangle(q, &a, &b, &c);
            let distance2 = (q - p).norm_squared();
            if best.is_none_or(|(b, _)| distance2 < b) {
                best = Some((distance2, p));
            }
        }
        let (distance2, point) = best?;
        let distance = distance2.sqrt();
        if distance >= margin {
            return None;
        }
        let normal = if distance > 1e-12 {
            (q - point) / distance
        } else {
            n
        };
        Some(ObstacleContact {
            point,
            normal,
            depth: -distance,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    /// Points on a sphere of radius 0.3 m, squashed to an ellipsoid: a smooth hull of many
    /// nearly coplanar faces, like a collider fitted to a character.
    fn ellipsoid(count: usize, rng: &mut Rng) -> Vec<Vec3> {
        (0..count)
            .map(|_| {
                // Directions from the cube: uneven, which is all a hull test needs.
                let d = loop {
                    let d = Vec3::new(rng.signed(), rng.signed(), rng.signed());
                    if (0.1..1.0).contains(&d.norm()) {
                        break d.normalize();
                    }
                };
                Vec3::new(0.3 * d.x, 0.2 * d.y, 0.25 * d.z)
            })
            .collect()
    }

    /// The independent truth for a point outside: the closest point over every triangle of
    /// the hull, not only those that see it.
    fn brute_distance(hull: &ConvexFaces, q: &Vec3) -> f64 {
        hull.triangles
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|i| hull.vertices[i as usize]);
                (q - closest_point_on_triangle(q, &a, &b, &c).1).norm()
            })
            .fold(f64::INFINITY, f64::min)
    }

    #[test]
    fn a_cube_hull_answers_as_the_box_does() {
        let mut corners = Vec::new();
        for x in [-0.5, 0.5] {
            for y in [-0.5, 0.5] {
                for z in [-0.5, 0.5] {
                    corners.push(Vec3::new(x, y, z));
                }
            }
        }
        let hull = ConvexFaces::new(&corners).expect("a cube");
        // Inside, nearest the top face.
        let c = hull.query(&Vec3::new(0.1, 0.45, 0.0), 0.0).expect("inside");
        assert!((c.depth - 0.05).abs() < 1e-12 && (c.normal - Vec3::y()).norm() < 1e-12);
        assert!((c.point - Vec3::new(0.1, 0.5, 0.0)).norm() < 1e-12);
        // Outside a face, an edge and a corner, within the margin.
        let face = hull.query(&Vec3::new(0.1, 0.52, 0.0), 0.05).expect("near");
        assert!((face.depth + 0.02).abs() < 1e-12 && (face.normal - Vec3::y()).norm() < 1e-12);
        let edge = hull.query(&Vec3::new(0.53, 0.54, 0.0), 0.1).expect("near");
        assert!((edge.depth + 0.05).abs() < 1e-12);
        assert!((edge.normal - Vec3::new(0.6, 0.8, 0.0)).norm() < 1e-12);
        let corner = hull.query(&Vec3::new(0.51, 0.51, 0.51), 0.1).expect("near");
        assert!((corner.point - Vec3::repeat(0.5)).norm() < 1e-12);
        // Farther than the margin: nothing.
        assert!(hull.query(&Vec3::new(0.1, 0.56, 0.0), 0.05).is_none());
        assert!(hull.query(&Vec3::new(0.54, 0.54, 0.0), 0.05).is_none());
    }

    #[test]
    fn points_near_a_smooth_hull_match_the_brute_force_distance() {
        let mut rng = Rng(7);
        let hull = ConvexFaces::new(&ellipsoid(200, &mut rng)).expect("a hull");
        for _ in 0..2000 {
            let q = Vec3::new(0.35 * rng.signed(), 0.25 * rng.signed(), 0.3 * rng.signed());
            let inside = hull.planes.iter().all(|(n, d)| n.dot(&q) - d <= 0.0);
            match hull.query(&q, 0.05) {
                Some(c) if c.depth >= 0.0 => {
                    assert!(inside, "{q:?} reported inside");
                    let nearest = hull
                        .planes
                        .iter()
                        .map(|(n, d)| d - n.dot(&q))
                        .fold(f64::INFINITY, f64::min);
                    assert!((c.depth - nearest).abs() < 1e-12);
                }
                Some(c) => {
                    assert!(!inside);
                    let truth = brute_distance(&hull, &q);
                    assert!((-c.depth - truth).abs() < 1e-12, "{} vs {truth}", -c.depth);
                    assert!((c.point + (-c.depth) * c.normal - q).norm() < 1e-9);
                }
                None => assert!(!inside && brute_distance(&hull, &q) >= 0.05 - 1e-12),
            }
        }
    }

    /// The case parry's `f32` projection got wrong: points a few micrometres outside the
    /// hull's vertices are outside, with a normal pointing out.
    #[test]
    fn points_just_outside_the_vertices_are_outside() {
        let mut rng = Rng(11);
        let points = ellipsoid(150, &mut rng);
        let hull = ConvexFaces::new(&points).expect("a hull");
        for v in &hull.vertices {
            let out = v.normalize();
            let c = hull
                .query(&(v + 2e-5 * out), 0.01)
                .expect("within the margin");
            assert!(c.depth < 0.0, "{v:?}: depth {}", c.depth);
            assert!(c.normal.dot(&out) > 0.0, "{v:?}: normal {:?}", c.normal);
        }
    }

    #[test]
    fn fewer_than_four_points_in_general_position_make_no_hull_and_no_panic() {
        let flat = [
            Vec3::zeros(),
            Vec3::x(),
            Vec3::y(),
            Vec3::new(1.0, 1.0, 0.0),
        ];
        assert!(ConvexFaces::new(&flat).is_none());
        assert!(ConvexFaces::new(&flat[..3]).is_none());
        assert!(ConvexFaces::new(&flat[..2]).is_none());
        assert!(ConvexFaces::new(&[Vec3::zeros(); 5]).is_none());
    }
}
