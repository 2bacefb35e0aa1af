//! A small skinned creature built in code: a hopping blob with a round belly and a long tail,
//! its skeleton, skin weights and walk cycle. `examples/make_creature.rs` writes it to
//! `assets/creature/creature.glb` (the `character` example loads that with Bevy's glTF loader),
//! and the skin tests build the same creature directly in a headless app.
//!
//! Frame: metres, +y up, the creature faces +x and stands on y = 0 at the skeleton root.
//! Licence: made for this project, CC0 like the rest of `assets/` that the project made.

#![allow(dead_code)]

use std::f32::consts::{PI, TAU};

use bevy::asset::RenderAssetUsages;
use bevy::math::{Mat4, Quat, Vec3};
use bevy::mesh::{Indices, Mesh, PrimitiveTopology, VertexAttributeValues};
use bevy::prelude::Transform;

/// Seconds of one loop of the walk cycle (one lap of its circle).
pub const PERIOD: f32 = 8.0;
/// Seconds of one hop.
pub const HOP: f32 = 0.5;
/// Radius of the walked circle (m).
pub const PATH_RADIUS: f32 = 1.8;
/// How high a hop lifts the creature (m).
pub const HOP_HEIGHT: f32 = 0.1;
/// Cross-section segments and rings of the body surface.
const SEGMENTS: usize = 24;
const RINGS: usize = 56;
/// The body's extent along x (m): the tail tip and the nose.
const TAIL_TIP: f32 = -1.12;
const NOSE: f32 = 0.6;

/// One joint of the skeleton.
pub struct Joint {
    /// Its node name.
    pub name: &'static str,
    /// Its parent joint, if any.
    pub parent: Option<usize>,
    /// Its position in the bind pose (m, creature frame).
    pub bind: Vec3,
}

/// The skeleton: a root on the ground, hips, chest and head along the spine, a belly joint for
/// the belly's weights (not animated: the simulation moves it), and four tail joints.
pub fn joints() -> Vec<Joint> {
    let spine = |x: f32| Vec3::new(x, centre_height(x), 0.0);
    vec![
        Joint {
            name: "root",
            parent: None,
            bind: Vec3::ZERO,
        },
        Joint {
            name: "hips",
            parent: Some(0),
            bind: spine(-0.22),
        },
        Joint {
            name: "chest",
            parent: Some(1),
            bind: spine(0.17),
        },
        Joint {
            name: "head",
            parent: Some(2),
            bind: spine(0.36) + Vec3::Y * 0.03,
        },
        Joint {
            name: "belly",
            parent: Some(1),
            bind: Vec3::new(-0.08, 0.2, 0.0),
        },
        Joint {
            name: "tail_1",
            parent: Some(1),
            bind: spine(-0.45),
        },
        Joint {
            name: "tail_2",
            parent: Some(5),
            bind: spine(-0.65),
        },
        Joint {
            name: "tail_3",
            parent: Some(6),
            bind: spine(-0.85),
        },
        Joint {
            name: "tail_4",
            parent: Some(7),
            bind: spine(-1.02),
        },
    ]
}

/// The joints' local bind transforms (translation from the parent's bind position).
pub fn bind_locals() -> Vec<Transform> {
    let j = joints();
    j.iter()
        .map(|joint| {
            let parent = joint.parent.map_or(Vec3::ZERO, |p| j[p].bind);
            Transform::from_translation(joint.bind - parent)
        })
        .collect()
}

/// The inverse bind matrices (the joints are only translated in the bind pose).
pub fn inverse_bindposes() -> Vec<Mat4> {
    joints()
        .iter()
        .map(|j| Mat4::from_translation(-j.bind))
        .collect()
}

/// The spine's height at `x` (m): level along the body, the tail rising a little.
fn centre_height(x: f32) -> f32 {
    let t = ((-0.4 - x) / 0.7).clamp(0.0, 1.0);
    0.38 + 0.12 * t * t
}

/// The body's cross-section at `x`: half width, half height above and below the spine (m).
fn profile(x: f32) -> [f32; 3] {
    const KNOTS: [[f32; 4]; 13] = [
        [TAIL_TIP, 0.0, 0.0, 0.0],
        [-1.08, 0.03, 0.03, 0.03],
        [-1.0, 0.05, 0.05, 0.05],
        [-0.8, 0.08, 0.08, 0.08],
        [-0.6, 0.12, 0.12, 0.13],
        [-0.42, 0.19, 0.19, 0.22],
        [-0.3, 0.27, 0.25, 0.3],
        [-0.1, 0.3, 0.27, 0.34],
        [0.1, 0.27, 0.25, 0.28],
        [0.22, 0.19, 0.19, 0.17],
        [0.34, 0.2, 0.21, 0.16],
        [0.5, 0.15, 0.16, 0.11],
        [NOSE, 0.0, 0.0, 0.0],
    ];
    let i = KNOTS
        .windows(2)
        .position(|w| x <= w[1][0])
        .unwrap_or(KNOTS.len() - 2);
    let (a, b) = (KNOTS[i], KNOTS[i + 1]);
    let u = ((x - a[0]) / (b[0] - a[0])).clamp(0.0, 1.0);
    // Round ends: a quarter ellipse from the tail tip and into the nose.
    if i == 0 {
        let w = (1.0 - (1.0 - u) * (1.0 - u)).sqrt();
        return [b[1] * w, b[2] * w, b[3] * w];
    }
    if i == KNOTS.len() - 2 {
        let w = (1.0 - u * u).sqrt();
        return [a[1] * w, a[2] * w, a[3] * w];
    }
    // Cubic Hermite with finite-difference slopes: smooth through the knots (a smoothstep per
    // segment would flatten the profile at every knot into rings).
    let slope = |j: usize, k: usize| {
        let (l, r) = (
            KNOTS[j.saturating_sub(1)],
            KNOTS[(j + 1).min(KNOTS.len() - 1)],
        );
        (r[k] - l[k]) / (r[0] - l[0])
    };
    let dx = b[0] - a[0];
    let (h00, h10) = (
        2.0 * u.powi(3) - 3.0 * u * u + 1.0,
        u.powi(3) - 2.0 * u * u + u,
    );
    let (h01, h11) = (-2.0 * u.powi(3) + 3.0 * u * u, u.powi(3) - u * u);
    [1, 2, 3].map(|k| h00 * a[k] + h10 * dx * slope(i, k) + h01 * b[k] + h11 * dx * slope(i + 1, k))
}

/// A point of the surface: at `x` along the body, at angle `theta` around it (0 is +z, pi/2 up).
fn surface_point(x: f32, theta: f32) -> Vec3 {
    let [half_width, up, down] = profile(x);
    let (s, c) = theta.sin_cos();
    let h = if s >= 0.0 { up } else { down };
    Vec3::new(x, centre_height(x) + h * s, half_width * c)
}

/// Points whose convex hull is the creature's upper body between `from` and `to` along x
/// (m), from `below` radians under its flanks (negative: above them) over the back, pushed
/// `out` (m) from the spine, its two ends chamfered:
/// a collider for what lies on its back (a cape), in the frame of the joint bound at
/// `joint` (the joints are only translated in the bind pose).
pub fn back_hull(from: f32, to: f32, below: f32, out: f32, joint: Vec3) -> Vec<Vec3> {
    const ALONG: usize = 8;
    const AROUND: usize = 12;
    let mut points = Vec::with_capacity((ALONG + 1) * (AROUND + 1));
    for i in 0..=ALONG {
        let x = from + (to - from) * i as f32 / ALONG as f32;
        let spine = Vec3::new(x, centre_height(x), 0.0);
        // The end rings drawn a third of the way in: chamfered ends, over which a cloth slides
        // instead of catching on a right-angled edge.
        let end = if i == 0 || i == ALONG { 2.0 / 3.0 } else { 1.0 };
        for k in 0..=AROUND {
            let theta = -below + (PI + 2.0 * below) * k as f32 / AROUND as f32;
            let p = surface_point(x, theta);
            let radial = (p - spine).normalize_or_zero();
            points.push(spine + end * (p - spine + out * radial) - joint);
        }
    }
    points
}

/// Skin weights of a surface point: the two spine joints around it along x, and the belly joint
/// under the torso.
fn skin_weights(x: f32, theta: f32) -> ([u16; 4], [f32; 4]) {
    // Spine joints ordered by x: tail_4 .. tail_1, hips, chest, head.
    const CHAIN: [(u16, f32); 7] = [
        (8, -1.02),
        (7, -0.85),
        (6, -0.65),
        (5, -0.45),
        (1, -0.22),
        (2, 0.17),
        (3, 0.36),
    ];
    let (mut j0, mut j1, mut u) = (CHAIN[0].0, CHAIN[0].0, 0.0);
    if x >= CHAIN[CHAIN.len() - 1].1 {
        j0 = CHAIN[CHAIN.len() - 1].0;
        j1 = j0;
    } else if x > CHAIN[0].1 {
        let i = CHAIN.windows(2).position(|w| x <= w[1].1).unwrap_or(0);
        j0 = CHAIN[i].0;
        j1 = CHAIN[i + 1].0;
        u = (x - CHAIN[i].1) / (CHAIN[i + 1].1 - CHAIN[i].1);
    }
    let r = (x + 0.08).abs() / 0.34;
    let bump = if r < 1.0 { (1.0 - r * r).powi(2) } else { 0.0 };
    let below = (0.1 - 1.3 * theta.sin()).clamp(0.0, 1.0);
    let belly = bump * below;
    let rest = 1.0 - belly;
    if j0 == j1 {
        ([j0, 4, 0, 0], [rest, belly, 0.0, 0.0])
    } else {
        ([j0, j1, 4, 0], [rest * (1.0 - u), rest * u, belly, 0.0])
    }
}

/// The creature's mesh in its bind pose: positions, smooth normals, UVs (the column at
/// `theta = 0` is split along the UV seam, as game meshes are), joint indices and weights.
pub fn mesh() -> Mesh {
    // Rings 1..RINGS between the two poles; each ring SEGMENTS points.
    let xs: Vec<f32> = (1..RINGS)
        .map(|r| TAIL_TIP + (NOSE - TAIL_TIP) * r as f32 / RINGS as f32)
        .collect();
    let theta = |s: usize| TAU * s as f32 / SEGMENTS as f32;
    // Welded grid first (for the normals): tail pole, rings, nose pole.
    let mut grid = vec![surface_point(TAIL_TIP, 0.0)];
    for &x in &xs {
        grid.extend((0..SEGMENTS).map(|s| surface_point(x, theta(s))));
    }
    grid.push(surface_point(NOSE, 0.0));
    let nose = grid.len() - 1;
    let at = |ring: usize, s: usize| 1 + ring * SEGMENTS + s % SEGMENTS;
    let mut welded_triangles = Vec::new();
    for s in 0..SEGMENTS {
        welded_triangles.push([0, at(0, s), at(0, s + 1)]);
        welded_triangles.push([nose, at(xs.len() - 1, s + 1), at(xs.len() - 1, s)]);
    }
    for r in 0..xs.len() - 1 {
        for s in 0..SEGMENTS {
            welded_triangles.push([at(r, s), at(r + 1, s), at(r + 1, s + 1)]);
            welded_triangles.push([at(r, s), at(r + 1, s + 1), at(r, s + 1)]);
        }
    }
    let mut normals = vec![Vec3::ZERO; grid.len()];
    for t in &welded_triangles {
        let n = (grid[t[1]] - grid[t[0]]).cross(grid[t[2]] - grid[t[0]]);
        for &v in t {
            normals[v] += n;
        }
    }
    // Outwards: the winding above makes the normals point out (checked by the tests).
    let normals: Vec<Vec3> = normals.iter().map(|n| n.normalize_or_zero()).collect();

    // Split the seam: each ring gets SEGMENTS + 1 points, the last a copy of the first.
    let mut positions = Vec::new();
    let mut out_normals = Vec::new();
    let mut uvs = Vec::new();
    let mut joints = Vec::new();
    let mut weights = Vec::new();
    let mut push = |welded: usize, x: f32, th: f32, u: f32, v: f32| {
        positions.push(grid[welded].to_array());
        out_normals.push(normals[welded].to_array());
        uvs.push([u, v]);
        let (j, w) = skin_weights(x, th);
        joints.push(j);
        weights.push(w);
    };
    push(0, TAIL_TIP, 0.0, 0.5, 1.0);
    for (r, &x) in xs.iter().enumerate() {
        for s in 0..=SEGMENTS {
            let v = 1.0 - (r + 1) as f32 / RINGS as f32;
            push(at(r, s), x, theta(s), s as f32 / SEGMENTS as f32, v);
        }
    }
    push(nose, NOSE, 0.0, 0.5, 0.0);
    let split_nose = (positions.len() - 1) as u32;
    let split = |ring: usize, s: usize| (1 + ring * (SEGMENTS + 1) + s) as u32;
    let mut indices = Vec::new();
    for s in 0..SEGMENTS {
        indices.extend([0, split(0, s), split(0, s + 1)]);
        indices.extend([
            split_nose,
            split(xs.len() - 1, s + 1),
            split(xs.len() - 1, s),
        ]);
    }
    for r in 0..xs.len() - 1 {
        for s in 0..SEGMENTS {
            indices.extend([split(r, s), split(r + 1, s), split(r + 1, s + 1)]);
            indices.extend([split(r, s), split(r + 1, s + 1), split(r, s + 1)]);
        }
    }
    Mesh::new(
        PrimitiveTopology::TriangleList,
        RenderAssetUsages::default(),
    )
    .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, positions)
    .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, out_normals)
    .with_inserted_attribute(Mesh::ATTRIBUTE_UV_0, uvs)
    .with_inserted_attribute(
        Mesh::ATTRIBUTE_JOINT_INDEX,
        VertexAttributeValues::Uint16x4(joints),
    )
    .with_inserted_attribute(Mesh::ATTRIBUTE_JOINT_WEIGHT, weights)
    .with_inserted_indices(Indices::U32(indices))
}

/// The eyes' centres in the bind pose (m, creature frame); they hang from the head joint.
pub fn eyes() -> [Vec3; 2] {
    let y = centre_height(0.46) + 0.1;
    [Vec3::new(0.46, y, 0.115), Vec3::new(0.46, y, -0.115)]
}

/// An eye: a sphere of radius 0.055 m about the origin (positions, normals, indices).
pub fn eye_mesh() -> (Vec<[f32; 3]>, Vec<[f32; 3]>, Vec<u32>) {
    let (rings, segments) = (8, 12);
    let mut positions = Vec::new();
    let mut normals = Vec::new();
    for r in 0..=rings {
        let theta = PI * r as f32 / rings as f32;
        for s in 0..=segments {
            let phi = TAU * s as f32 / segments as f32;
            let n = Vec3::new(
                theta.sin() * phi.cos(),
                theta.cos(),
                theta.sin() * phi.sin(),
            );
            positions.push((0.055 * n).to_array());
            normals.push(n.to_array());
        }
    }
    let at = |r: usize, s: usize| (r * (segments + 1) + s) as u32;
    let mut indices = Vec::new();
    for r in 0..rings {
        for s in 0..segments {
            indices.extend([at(r, s), at(r, s + 1), at(r + 1, s + 1)]);
            indices.extend([at(r, s), at(r + 1, s + 1), at(r + 1, s)]);
        }
    }
    (positions, normals, indices)
}

/// The walk cycle at time `t` (s): every joint's local transform. The root walks a circle of
/// [`PATH_RADIUS`] once per [`PERIOD`], hopping every [`HOP`] seconds; the spine sways, the head
/// nods and the tail wags in a travelling wave. Loops seamlessly.
pub fn pose(t: f32) -> Vec<Transform> {
    let mut local = bind_locals();
    let phi = TAU * t / PERIOD;
    let hop = HOP_HEIGHT * (PI * t / HOP).sin().abs();
    local[0].translation = Vec3::new(PATH_RADIUS * phi.cos(), hop, PATH_RADIUS * phi.sin());
    local[0].rotation = Quat::from_rotation_y(-phi - PI / 2.0);
    let sway = (TAU * t).sin();
    local[1].rotation = Quat::from_rotation_y(0.12 * sway);
    local[2].rotation = Quat::from_rotation_y(-0.1 * sway);
    local[3].rotation = Quat::from_rotation_z(0.08 * (TAU * t / HOP).sin());
    for k in 0..4 {
        let phase = TAU * t - 0.7 * (k + 1) as f32;
        local[5 + k].rotation = Quat::from_rotation_y(0.3 * phase.sin())
            * Quat::from_rotation_z(0.1 * (TAU * t / HOP - 0.5 * k as f32).sin());
    }
    local
}
