//! Points embedded barycentrically in tets: collision proxies and render vertices.
//!
//! A detailed surface (a render mesh, a set of collision proxies) follows a coarse simulation
//! mesh if each of its points stores the tet it lies in and its barycentric weights there, computed
//! once at rest (the embedded-contact thesis, section 5.7; the collision proxies of Wang et al.
//! 2020, section 4). The deformed point is then `sum_k w_k x_k`: linear in the tet's vertices,
//! so a constraint on it is a row of eq. (8) of Li et al. 2015.

use super::math::{Mat3, Vec3};
use super::mesh::TetMesh;

/// A point attached to the four vertices of a tet with barycentric weights (summing to 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmbeddedPoint {
    /// The four vertices.
    pub vertices: [u32; 4],
    /// Their weights; negative weights extrapolate a point slightly outside its tet.
    pub weights: [f64; 4],
}

impl EmbeddedPoint {
    /// The point that is exactly mesh vertex `v`.
    pub fn vertex(v: u32) -> Self {
        Self {
            vertices: [v, v, v, v],
            weights: [1.0, 0.0, 0.0, 0.0],
        }
    }

    /// Its position for vertex positions `x` (m).
    #[inline]
    pub fn position(&self, x: &[Vec3]) -> Vec3 {
        let mut p = Vec3::zeros();
        for k in 0..4 {
            if self.weights[k] != 0.0 {
                p += self.weights[k] * x[self.vertices[k] as usize];
            }
        }
        p
    }

    /// How far the point lies outside its tet, in units of the tet's height over the face it
    /// is beyond: minus its most negative weight, 0 inside (or on) the tet. [`embed_points`]
    /// extrapolates a point outside every tet from the tet it is least outside of.
    pub fn outside_by(&self) -> f64 {
        self.weights.iter().fold(0.0f64, |a, &w| a.max(-w))
    }

    /// Its velocity for vertex velocities `v` (m/s).
    #[inline]
    pub fn velocity(&self, v: &[Vec3]) -> Vec3 {
        self.position(v)
    }
}

/// Barycentric weights of `p` in the tet `(a, b, c, d)`, or `None` for a flat tet.
pub fn barycentric(p: &Vec3, a: &Vec3, b: &Vec3, c: &Vec3, d: &Vec3) -> Option<[f64; 4]> {
    let m = Mat3::from_columns(&[b - a, c - a, d - a]);
    let l = m.try_inverse()? * (p - a);
    Some([1.0 - l.x - l.y - l.z, l.x, l.y, l.z])
}

/// Embeds every point in the rest mesh: in the tet that contains it, or — for a point outside
/// the mesh — in the tet whose barycentric weights are least negative (a linear extrapolation).
///
/// A uniform grid over tet bounds keeps this near-linear in the number of points.
pub fn embed_points(mesh: &TetMesh, points: &[Vec3]) -> Vec<EmbeddedPoint> {
    embed_in(mesh, mesh.rest_positions(), points)
}

/// [`embed_points`] in the mesh's tets at vertex positions `x` (m; a deformed body's current
/// positions): each point's weights reproduce it from `x`, and carry it with the tet as the
/// body moves on. A tet flat at `x` is never chosen; where every tet is, the point is carried
/// by vertex 0. `None` where `x` does not hold one position per mesh vertex.
pub fn embed_points_at(mesh: &TetMesh, x: &[Vec3], points: &[Vec3]) -> Option<Vec<EmbeddedPoint>> {
    (x.len() == mesh.vertex_count()).then(|| embed_in(mesh, x, points))
}

/// [`embed_points_at`] for `x` of the mesh's length.
fn embed_in(mesh: &TetMesh, x: &[Vec3], points: &[Vec3]) -> Vec<EmbeddedPoint> {
    let tets = mesh.tets();
    let (lo, hi) = super::mesh::bounds(x);
    let extent = hi - lo;
    let cells_per_axis = ((tets.len() as f64).cbrt().ceil() as usize).clamp(1, 64);
    let cell = extent.max() / cells_per_axis as f64 + 1e-12;
    let dims = extent.map(|e| ((e / cell).floor() as usize + 1).min(cells_per_axis + 1));
    let index = |p: &Vec3| -> [usize; 3] {
        let mut i = [0usize; 3];
        for k in 0..3 {
            let f = ((p[k] - lo[k]) / cell).floor();
            i[k] = (f.max(0.0) as usize).min(dims[k] - 1);
        }
        i
    };
    let flat = |i: [usize; 3]| (i[2] * dims[1] + i[1]) * dims[0] + i[0];
    let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); dims[0] * dims[1] * dims[2]];
    for (ti, t) in tets.iter().enumerate() {
        let ps = t.map(|v| x[v as usize]);
        let tlo = ps.iter().fold(Vec3::repeat(f64::INFINITY), |a, p| a.inf(p));
        let thi = ps
            .iter()
            .fold(Vec3::repeat(f64::NEG_INFINITY), |a, p| a.sup(p));
        let (i0, i1) = (index(&tlo), index(&thi));
        for k in i0[2]..=i1[2] {
            for j in i0[1]..=i1[1] {
                for i in i0[0]..=i1[0] {
                    buckets[flat([i, j, k])].push(ti as u32);
                }
            }
        }
    }
    let score = |p: &Vec3, ti: usize| -> Option<(f64, [f64; 4])> {
        let t = tets[ti];
        let w = barycentric(
            p,
            &x[t[0] as usize],
            &x[t[1] as usize],
            &x[t[2] as usize],
            &x[t[3] as usize],
        )?;
        Some((w.iter().copied().fold(f64::INFINITY, f64::min), w))
    };
    points
        .iter()
        .map(|p| {
            let consider = |best: &mut Option<(f64, usize, [f64; 4])>, ti: usize| {
                if let Some((s, w)) = score(p, ti)
                    && best.is_none_or(|(bs, _, _)| s > bs)
                {
                    *best = Some((s, ti, w));
                }
            };
            let mut best = None;
            for &ti in &buckets[flat(index(p))] {
                consider(&mut best, ti as usize);
            }
            let inside = best.is_some_and(|(s, _, _)| s >= -1e-9);
            if !inside {
                for ti in 0..tets.len() {
                    consider(&mut best, ti);
                }
            }
            match best {
                Some((_, ti, w)) => EmbeddedPoint {
                    vertices: tets[ti],
                    weights: w,
                },
                None => EmbeddedPoint::vertex(0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_points_reproduce_and_follow_affine_motion() {
        let mesh = TetMesh::sphere(0.5, 6);
        let pts: Vec<Vec3> = (0..200)
            .map(|i| {
                let t = i as f64 * 0.61;
                Vec3::new(t.sin(), (1.3 * t).cos(), (0.7 * t).sin()) * 0.45
            })
            .chain([Vec3::new(0.0, 0.55, 0.0)])
            .collect();
        let emb = embed_points(&mesh, &pts);
        for (e, p) in emb.iter().zip(&pts) {
            assert!((e.position(mesh.rest_positions()) - p).norm() < 1e-12);
            assert!((e.weights.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        // Positions that are not one per vertex are refused.
        assert!(embed_points_at(&mesh, &mesh.rest_positions()[1..], &pts).is_none());
        // An affine map of the mesh moves embedded points by the same map.
        let a = Mat3::new(1.1, 0.2, 0.0, -0.1, 0.9, 0.3, 0.0, 0.1, 1.2);
        let t = Vec3::new(0.3, -2.0, 1.0);
        let moved: Vec<Vec3> = mesh.rest_positions().iter().map(|p| a * p + t).collect();
        for (e, p) in emb.iter().zip(&pts) {
            assert!((e.position(&moved) - (a * p + t)).norm() < 1e-12);
        }
        // Embedded in the moved mesh, the moved points get the weights they had at rest, in
        // the same tets where a point lies inside one (on a shared face either tet will do).
        let moved_points: Vec<Vec3> = pts.iter().map(|p| a * p + t).collect();
        for ((e, at), p) in emb
            .iter()
            .zip(embed_points_at(&mesh, &moved, &moved_points).unwrap())
            .zip(&moved_points)
        {
            assert!((at.position(&moved) - p).norm() < 1e-12);
            let inside = e.weights.iter().all(|&w| w > 1e-9);
            if inside {
                assert_eq!(e.vertices, at.vertices);
                for (w, v) in e.weights.iter().zip(at.weights) {
                    assert!((w - v).abs() < 1e-9);
                }
            }
        }
    }
}
