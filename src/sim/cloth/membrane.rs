//! In-plane elasticity of a cloth triangle as PD constraints (Bouaziz et al. 2014's strain
//! constraint, in 2D): the triangle's deformation gradient `F` (3 x 2: its edges mapped from the
//! rest triangle's plane) is projected onto the matrices with orthonormal columns (`R = U V'`
//! of `F = U diag(s1, s2) V'`, as rigid as possible) and, for strain limiting, onto those with
//! singular values in `[min, max]` (`U diag(clamp(s)) V'`: no force inside the limits, a stiff
//! one beyond, the biphasic response of the seed notes' "Strain Limiting").
//!
//! The SVD of a 3 x 2 matrix comes from the 2 x 2 eigen-decomposition of `F'F` in closed form.

use crate::sim::math::Vec3;

/// A triangle at rest: the gradient rows `g_k` (1/m) with `F = sum_k x_k g_k'`, and its area
/// (m^2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RestTriangle {
    /// `g_k` for the three vertices (in the rest plane's 2D frame).
    pub grads: [[f64; 2]; 3],
    /// Rest area (m^2).
    pub area: f64,
}

impl RestTriangle {
    /// The rest triangle of `a`, `b`, `c` (m), not degenerate.
    pub fn new(a: Vec3, b: Vec3, c: Vec3) -> Self {
        let (e1, e2) = (b - a, c - a);
        let t1 = e1.normalize();
        let t2 = (e2 - e2.dot(&t1) * t1).normalize();
        // Dm = [[e1.t1, e2.t1], [0, e2.t2]]; F = [e1, e2] Dm^-1.
        let (d00, d01, d11) = (e1.dot(&t1), e2.dot(&t1), e2.dot(&t2));
        let inv = [[1.0 / d00, -d01 / (d00 * d11)], [0.0, 1.0 / d11]];
        let g1 = inv[0];
        let g2 = inv[1];
        Self {
            grads: [[-(g1[0] + g2[0]), -(g1[1] + g2[1])], g1, g2],
            area: 0.5 * e1.cross(&e2).norm(),
        }
    }

    /// `F` (its two columns) at positions `x` of the vertices `v`.
    pub fn gradient(&self, x: &[Vec3], v: [u32; 3]) -> [Vec3; 2] {
        let mut f = [Vec3::zeros(); 2];
        for k in 0..3 {
            let p = x[v[k] as usize];
            f[0] += p * self.grads[k][0];
            f[1] += p * self.grads[k][1];
        }
        f
    }
}

/// The singular value decomposition `F = u1 s1 v1' + u2 s2 v2'` of a 3 x 2 matrix (columns
/// `f`), `s1 >= s2 >= 0`; `u2` is some unit vector normal to `u1` where `s2` vanishes.
pub fn svd32(f: [Vec3; 2]) -> ([Vec3; 2], [f64; 2], [[f64; 2]; 2]) {
    let ([s1, s2], [v1, v2]) = right_singular(f);
    let apply = |v: [f64; 2]| f[0] * v[0] + f[1] * v[1];
    let u1 = if s1 > 1e-300 {
        apply(v1) / s1
    } else {
        Vec3::x()
    };
    let w = apply(v2);
    let u2 = if s2 > COLLAPSED * s1 {
        w / s2
    } else {
        // A collapsed triangle: the unit vector normal to u1 closest to what F v2 leaves.
        let axis = if u1.x.abs() < 0.9 {
            Vec3::x()
        } else {
            Vec3::y()
        };
        let side = w - w.dot(&u1) * u1;
        let side = if side.norm() > 1e-300 {
            side
        } else {
            axis - axis.dot(&u1) * u1
        };
        side.normalize()
    };
    ([u1, u2], [s1, s2], [v1, v2])
}

/// Below this share of the larger singular value, the smaller one counts as zero: the
/// triangle has collapsed onto a line, and `F v2 / s2` is no direction.
pub const COLLAPSED: f64 = 1e-12;

/// The singular values `s1 >= s2 >= 0` and right singular vectors `v1`, `v2` of a 3 x 2 matrix
/// (columns `f`), from the eigen-decomposition of `F'F` in closed form ([`svd32`]'s).
pub fn right_singular(f: [Vec3; 2]) -> ([f64; 2], [[f64; 2]; 2]) {
    let (c00, c01, c11) = (f[0].dot(&f[0]), f[0].dot(&f[1]), f[1].dot(&f[1]));
    let half = 0.5 * (c00 - c11);
    let disc = (half * half + c01 * c01).sqrt();
    let mean = 0.5 * (c00 + c11);
    let (l1, l2) = (mean + disc, (mean - disc).max(0.0));
    // The eigenvector of l1: (c01, l1 - c00) or (l1 - c11, c01), whichever is longer.
    let (p, q) = ([c01, l1 - c00], [l1 - c11, c01]);
    let pick = if p[0] * p[0] + p[1] * p[1] >= q[0] * q[0] + q[1] * q[1] {
        p
    } else {
        q
    };
    let n = (pick[0] * pick[0] + pick[1] * pick[1]).sqrt();
    let v1 = if n > 1e-300 && disc > 1e-14 * mean {
        [pick[0] / n, pick[1] / n]
    } else {
        // Equal singular values: any frame.
        [1.0, 0.0]
    };
    let v2 = [-v1[1], v1[0]];
    ([l1.sqrt(), l2.sqrt()], [v1, v2])
}

/// `F V diag(k) V'` (its two columns) for `F`'s right singular vectors `v`
/// ([`right_singular`]): with `k_i = d_i / s_i` this is `U diag(d) V'` of `F = U diag(s) V'`
/// ([`compose`]) without forming `U`, since `U = F V diag(s)^-1` where neither singular value
/// vanishes.
pub fn times_right(f: [Vec3; 2], k: [f64; 2], v: [[f64; 2]; 2]) -> [Vec3; 2] {
    let [v1, v2] = v;
    let m00 = k[0] * v1[0] * v1[0] + k[1] * v2[0] * v2[0];
    let m01 = k[0] * v1[0] * v1[1] + k[1] * v2[0] * v2[1];
    let m11 = k[0] * v1[1] * v1[1] + k[1] * v2[1] * v2[1];
    [f[0] * m00 + f[1] * m01, f[0] * m01 + f[1] * m11]
}

/// The closest singular values `(t1, t2)` to `s` with `t1 t2` in `[min, max]` (the area
/// limit's projection, the seed notes' "Triangle Area Limit" in PD form): `s` itself inside;
/// outside, the point of `t1 t2 = c` (`c` the nearer bound) found from the Lagrange conditions
/// `t - s = lambda (t2, t1)` by bisection on `lambda` in `(-1, 1)`.
pub fn area_limited(s: [f64; 2], min: f64, max: f64) -> [f64; 2] {
    let area = s[0] * s[1];
    if (min..=max).contains(&area) {
        return s;
    }
    let c = area.clamp(min, max);
    let at = |l: f64| {
        let d = 1.0 - l * l;
        [(s[0] + l * s[1]) / d, (s[1] + l * s[0]) / d]
    };
    // `t1 t2` grows with `lambda` from below `c` (shrinking) or toward it (growing).
    let (mut lo, mut hi) = if area < c { (0.0, 1.0) } else { (-1.0, 0.0) };
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        let t = at(mid);
        if t[0] * t[1] < c {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let t = at(0.5 * (lo + hi));
    if (t[0] * t[1] - c).abs() <= 1e-9 * c {
        t
    } else {
        // Squashed far past a near-isotropic limit, where the root leaves (-1, 1): scale
        // uniformly onto the bound instead.
        let k = (c / area).sqrt();
        [s[0] * k, s[1] * k]
    }
}

/// `U diag(d) V'` (its two columns) of an SVD from [`svd32`].
pub fn compose(u: [Vec3; 2], d: [f64; 2], v: [[f64; 2]; 2]) -> [Vec3; 2] {
    [
        u[0] * (d[0] * v[0][0]) + u[1] * (d[1] * v[1][0]),
        u[0] * (d[0] * v[0][1]) + u[1] * (d[1] * v[1][1]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    fn vec3(rng: &mut Rng) -> Vec3 {
        Vec3::new(rng.signed(), rng.signed(), rng.signed())
    }

    /// The as-rigid-as-possible energy `|F - R|^2 / 2` of the triangle at `x`.
    fn arap(t: &RestTriangle, x: &[Vec3]) -> f64 {
        let f = t.gradient(x, [0, 1, 2]);
        let (u, _, v) = svd32(f);
        let r = compose(u, [1.0, 1.0], v);
        0.5 * ((f[0] - r[0]).norm_squared() + (f[1] - r[1]).norm_squared())
    }

    #[test]
    fn the_svd_reproduces_f_and_its_factors_are_orthonormal() {
        let mut rng = Rng(7);
        for _ in 0..200 {
            let f = [vec3(&mut rng), vec3(&mut rng)];
            let (u, s, v) = svd32(f);
            let back = compose(u, s, v);
            let scale = f[0].norm() + f[1].norm();
            assert!((back[0] - f[0]).norm() + (back[1] - f[1]).norm() < 1e-12 * scale);
            assert!((u[0].norm() - 1.0).abs() < 1e-12 && (u[1].norm() - 1.0).abs() < 1e-12);
            assert!(u[0].dot(&u[1]).abs() < 1e-12);
            assert!(s[0] >= s[1] && s[1] >= 0.0);
        }
        // Rank one and zero.
        let (u, s, _) = svd32([Vec3::new(1.0, 2.0, 0.0), Vec3::new(2.0, 4.0, 0.0)]);
        assert!(s[1] < 1e-7 && u[0].dot(&u[1]).abs() < 1e-12 && (u[1].norm() - 1.0).abs() < 1e-12);
        let (u, s, _) = svd32([Vec3::zeros(), Vec3::zeros()]);
        assert!(s == [0.0, 0.0] && u[0].dot(&u[1]).abs() < 1e-12);
    }

    #[test]
    fn the_rest_triangle_maps_its_edges_and_a_rigid_motion_is_its_own_projection() {
        let (a, b, c) = (
            Vec3::new(0.1, 0.2, 0.0),
            Vec3::new(1.0, 0.3, 0.2),
            Vec3::new(0.4, 1.1, -0.3),
        );
        let t = RestTriangle::new(a, b, c);
        assert!((t.area - 0.5 * (b - a).cross(&(c - a)).norm()).abs() < 1e-14);
        // Rotated and moved: F has orthonormal columns, and R = F.
        let rot = nalgebra::Rotation3::from_euler_angles(0.3, -1.1, 2.0);
        let x: Vec<Vec3> = [a, b, c]
            .iter()
            .map(|p| rot * p + Vec3::new(5.0, -2.0, 1.0))
            .collect();
        let f = t.gradient(&x, [0, 1, 2]);
        assert!((f[0].norm() - 1.0).abs() < 1e-12 && f[0].dot(&f[1]).abs() < 1e-12);
        assert!(arap(&t, &x) < 1e-24);
    }

    /// PD's force on each vertex, `-(F - P(F)) g_k`, against central differences of the
    /// energy `|F - P(F)|^2 / 2` with the projection `P` recomputed at each point (the
    /// projection is a closest point, so the two agree).
    fn assert_force_is_gradient(
        t: &RestTriangle,
        x: &[Vec3],
        project: impl Fn([f64; 2]) -> [f64; 2],
    ) {
        let target = |f: [Vec3; 2]| {
            let (u, s, v) = svd32(f);
            compose(u, project(s), v)
        };
        let energy = |x: &[Vec3]| {
            let f = t.gradient(x, [0, 1, 2]);
            let p = target(f);
            0.5 * ((f[0] - p[0]).norm_squared() + (f[1] - p[1]).norm_squared())
        };
        let f = t.gradient(x, [0, 1, 2]);
        let p = target(f);
        for k in 0..3 {
            let analytic = (f[0] - p[0]) * t.grads[k][0] + (f[1] - p[1]) * t.grads[k][1];
            for c in 0..3 {
                let step = 1e-6;
                let (mut plus, mut minus) = (x.to_vec(), x.to_vec());
                plus[k][c] += step;
                minus[k][c] -= step;
                let numeric = (energy(&plus) - energy(&minus)) / (2.0 * step);
                assert!(
                    (numeric - analytic[c]).abs() < 1e-5 * (1.0 + analytic.norm()),
                    "vertex {k} axis {c}: {numeric} against {}",
                    analytic[c]
                );
            }
        }
    }

    #[test]
    fn the_area_limit_projects_onto_the_closest_point_of_its_bound() {
        // Inside: unchanged.
        assert_eq!(area_limited([1.02, 0.99], 0.9, 1.1), [1.02, 0.99]);
        let mut rng = Rng(11);
        for _ in 0..200 {
            let s1 = 0.3 + 1.5 * rng.unit();
            let s = [s1, s1 * (0.3 + 0.7 * rng.unit())];
            let t = area_limited(s, 0.9, 1.1);
            let area = s[0] * s[1];
            if (0.9..=1.1).contains(&area) {
                continue;
            }
            let c = area.clamp(0.9, 1.1);
            assert!((t[0] * t[1] - c).abs() < 1e-9 * c);
            // Brute force along the bound: (sqrt(c) e^u, sqrt(c) e^-u), the nearest to s.
            let distance = |u: f64| {
                let q = [c.sqrt() * u.exp(), c.sqrt() * (-u).exp()];
                (q[0] - s[0]).hypot(q[1] - s[1])
            };
            let best = (-4000..=4000)
                .map(|k| distance(k as f64 * 1e-3))
                .fold(f64::MAX, f64::min);
            let got = (t[0] - s[0]).hypot(t[1] - s[1]);
            assert!(got <= best + 1e-6, "{got} against {best} for {s:?}");
        }
    }

    #[test]
    fn the_arap_and_area_limit_forces_are_their_energies_gradients() {
        let mut rng = Rng(5);
        let rest = [vec3(&mut rng), vec3(&mut rng), vec3(&mut rng)];
        let t = RestTriangle::new(rest[0], rest[1], rest[2]);
        // Stretched well past a 1.05 area bound.
        let x: Vec<Vec3> = rest
            .iter()
            .map(|p| p * 1.4 + 0.1 * vec3(&mut rng))
            .collect();
        let (_, s, _) = svd32(t.gradient(&x, [0, 1, 2]));
        assert!(s[0] * s[1] > 1.05);
        assert_force_is_gradient(&t, &x, |_| [1.0, 1.0]);
        assert_force_is_gradient(&t, &x, |s| area_limited(s, 0.95, 1.05));
    }
}
