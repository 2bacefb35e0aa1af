//! Helpers shared by the integration tests: the headless Bevy app of the plugin tests
//! ([`app`]), the caged bunny of the drawn-surface tests and bench ([`bunny`]), surface crossings between bodies and of a cloth through itself, the cantilever of the beam-theory checks
//! ([`beam`]), the block on a slope of the friction checks ([`slope`]), the pushed bodies of
//! the snapshot and save-file tests ([`pushed`]), and the bin and bodies of the pile
//! ([`add_bin`], [`add_pile_bodies`]).

// Each test crate uses its own subset.
#![allow(dead_code)]

pub mod app;
pub mod beam;
pub mod bunny;
pub mod pushed;
pub mod slope;

use bevy_deformable::sim::contact::closest_point_on_triangle;
use bevy_deformable::sim::embed::barycentric;
use bevy_deformable::sim::{
    BodyHandle, MaterialParams, ObstacleCollider, SoftWorld, TetMesh, Vec3,
};
use nalgebra::UnitQuaternion;

/// `sign(det[b - a, c - a, d - a])`.
fn orient(a: &Vec3, b: &Vec3, c: &Vec3, d: &Vec3) -> f64 {
    (b - a).cross(&(c - a)).dot(&(d - a))
}

/// Whether segment `pq` crosses triangle `abc` (touching counts), by orientation tests alone.
fn segment_hits_triangle(p: &Vec3, q: &Vec3, a: &Vec3, b: &Vec3, c: &Vec3) -> bool {
    let (sp, sq) = (orient(a, b, c, p), orient(a, b, c, q));
    if (sp > 0.0 && sq > 0.0) || (sp < 0.0 && sq < 0.0) || (sp == 0.0 && sq == 0.0) {
        // Coplanar segments are reported by the other triangle's edges crossing this one, or
        // never happen here (soft surfaces keep a skin apart).
        return false;
    }
    let (s1, s2, s3) = (orient(p, q, a, b), orient(p, q, b, c), orient(p, q, c, a));
    (s1 >= 0.0 && s2 >= 0.0 && s3 >= 0.0) || (s1 <= 0.0 && s2 <= 0.0 && s3 <= 0.0)
}

/// Whether two triangles intersect: for non-coplanar triangles, exactly when an edge of one
/// crosses the other.
pub fn triangles_intersect(t: &[Vec3; 3], u: &[Vec3; 3]) -> bool {
    (0..3).any(|k| segment_hits_triangle(&t[k], &t[(k + 1) % 3], &u[0], &u[1], &u[2]))
        || (0..3).any(|k| segment_hits_triangle(&u[k], &u[(k + 1) % 3], &t[0], &t[1], &t[2]))
}

/// Whether segment `pq` passes strictly through triangle `abc`: its ends strictly on either
/// side of the triangle's plane and the crossing strictly inside it (touching does not count).
fn segment_passes_through(p: &Vec3, q: &Vec3, a: &Vec3, b: &Vec3, c: &Vec3) -> bool {
    if orient(a, b, c, p) * orient(a, b, c, q) >= 0.0 {
        return false;
    }
    let (s1, s2, s3) = (orient(p, q, a, b), orient(p, q, b, c), orient(p, q, c, a));
    (s1 > 0.0 && s2 > 0.0 && s3 > 0.0) || (s1 < 0.0 && s2 < 0.0 && s3 < 0.0)
}

/// Pairs of a triangle mesh's triangles (over positions `x`) that share no vertex and pass
/// through each other: an edge of one strictly through the other.
pub fn self_crossings(x: &[Vec3], triangles: &[[u32; 3]]) -> usize {
    let corners: Vec<[Vec3; 3]> = triangles.iter().map(|t| t.map(|v| x[v as usize])).collect();
    let boxes: Vec<(Vec3, Vec3)> = corners
        .iter()
        .map(|t| (t[0].inf(&t[1]).inf(&t[2]), t[0].sup(&t[1]).sup(&t[2])))
        .collect();
    let through = |t: &[Vec3; 3], u: &[Vec3; 3]| {
        (0..3).any(|k| segment_passes_through(&t[k], &t[(k + 1) % 3], &u[0], &u[1], &u[2]))
    };
    let mut crossings = 0;
    for i in 0..triangles.len() {
        for j in i + 1..triangles.len() {
            let ((lo, hi), (ulo, uhi)) = (boxes[i], boxes[j]);
            if triangles[i].iter().any(|v| triangles[j].contains(v))
                || (0..3).any(|k| lo[k] > uhi[k] || hi[k] < ulo[k])
            {
                continue;
            }
            if through(&corners[i], &corners[j]) || through(&corners[j], &corners[i]) {
                crossings += 1;
            }
        }
    }
    crossings
}

pub fn surface(world: &SoftWorld, body: BodyHandle) -> Vec<[Vec3; 3]> {
    let x = world.positions(body).unwrap();
    world
        .mesh(body)
        .unwrap()
        .surface_triangles()
        .iter()
        .map(|t| t.map(|v| x[v as usize]))
        .collect()
}

/// Pairs of intersecting surface triangles between two bodies.
pub fn intersections(world: &SoftWorld, a: BodyHandle, b: BodyHandle) -> usize {
    let (sa, sb) = (surface(world, a), surface(world, b));
    sa.iter()
        .map(|t| sb.iter().filter(|u| triangles_intersect(t, u)).count())
        .sum()
}

/// Deepest penetration (m) of a surface vertex of `a` into body `b`: for every vertex inside
/// one of `b`'s deformed tets, its distance to `b`'s surface.
pub fn penetration(world: &SoftWorld, a: BodyHandle, b: BodyHandle) -> f64 {
    let (xa, xb) = (world.positions(a).unwrap(), world.positions(b).unwrap());
    let mb = world.mesh(b).unwrap();
    let surface = surface(world, b);
    let mut deepest = 0.0f64;
    for &v in world.mesh(a).unwrap().surface_vertices() {
        let p = xa[v as usize];
        let inside = mb.tets().iter().any(|t| {
            let [q0, q1, q2, q3] = t.map(|i| xb[i as usize]);
            barycentric(&p, &q0, &q1, &q2, &q3).is_some_and(|w| w.iter().all(|&c| c > 0.0))
        });
        if inside {
            let depth = surface
                .iter()
                .map(|t| (p - closest_point_on_triangle(&p, &t[0], &t[1], &t[2]).1).norm())
                .fold(f64::INFINITY, f64::min);
            deepest = deepest.max(depth);
        }
    }
    deepest
}

/// The vertex farthest along `(1, 1, 1)` (a box's outer corner) and where it is.
pub fn far_corner(x: &[Vec3]) -> (usize, Vec3) {
    x.iter()
        .enumerate()
        .max_by(|a, b| (a.1.x + a.1.y + a.1.z).total_cmp(&(b.1.x + b.1.y + b.1.z)))
        .map(|(i, p)| (i, *p))
        .expect("a body has vertices")
}

/// The first `count` (at most 20) bodies of the `pile` example's pour, in layers of four from
/// 0.5 m up: rubber cubes and balls of 0.1-0.17 m half size, `E` 100-300 kPa (the `pile`
/// bench's scene, and the sleeping test's).
pub fn add_pile_bodies(world: &mut SoftWorld, count: usize) {
    for i in 0..count.min(20) {
        let (column, layer) = (i % 4, i / 4);
        let size = 0.1 + 0.035 * ((i * 7) % 3) as f64;
        let at = Vec3::new(
            -0.33 + 0.22 * column as f64 + 0.03 * layer as f64,
            0.5 + 0.4 * layer as f64,
            -0.2 + 0.4 * ((i / 2) % 2) as f64 - 0.05 * layer as f64,
        );
        let material = MaterialParams::RUBBER.with_youngs_modulus(1.0e5 + 1.0e5 * (i % 3) as f64);
        let mesh = if i % 2 == 0 {
            TetMesh::cuboid(Vec3::repeat(size), 4)
        } else {
            TetMesh::sphere(size, 5)
        };
        world
            .add_body(std::sync::Arc::new(mesh), material, at)
            .expect("valid body");
    }
}

/// A floor at `y = 0` and an open bin on it: four box walls `thickness` (m) thick and `height`
/// (m) tall around a square `2 inner` (m) across, with friction 0.3 (the `pile` and `pour`
/// benches' scenes).
pub fn add_bin(world: &mut SoftWorld, inner: f64, height: f64, thickness: f64) {
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).expect("unit normal"))
        .expect("valid floor");
    for k in 0..4 {
        let rotation = UnitQuaternion::from_axis_angle(
            &Vec3::y_axis(),
            k as f64 * std::f64::consts::FRAC_PI_2,
        );
        let half = Vec3::new(thickness, height / 2.0, inner + 2.0 * thickness);
        let wall = ObstacleCollider::cuboid(half)
            .expect("positive extents")
            .with_position(rotation * Vec3::new(inner + thickness, height / 2.0, 0.0))
            .with_rotation(rotation)
            .with_friction(0.3);
        world.add_obstacle(wall).expect("valid wall");
    }
}
