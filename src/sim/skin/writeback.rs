//! The skinned write-back: a region's mesh vertices moved, in bind space, by the cage's
//! displacement from its skinned targets, so that the engine's own skinning draws the flesh.

use std::collections::HashMap;

use super::{Affine, SkinError, SkinWeights, check_weights};
use crate::sim::embed::{EmbeddedPoint, embed_points};
use crate::sim::math::Vec3;
use crate::sim::mesh::TetMesh;

/// Writes a simulated region back into its skinned mesh: each region vertex `v` becomes
/// `v + s_v L_v^-1 d_v` in bind space, where `d_v = sum_k b_k (x_k - t_k)` is the cage's
/// displacement from its skinned targets at the vertex and `L_v` the linear part of the vertex's
/// blended skinning matrix, so that the engine draws it at `M_v v + s_v d_v`. Normals are the
/// authored ones turned by the rotation from the smooth rest normal to the smooth deformed normal
/// (vertices sharing a position are welded for the smooth normals). No allocation per frame.
///
/// The per-frame part runs in `f32`, the precision of the mesh it writes: 0.029 ms per 1,000
/// written vertices with normals on this project's 2-core machine (`cargo bench --bench kernels
/// -- skin`; an `f64` version took 0.048-0.061).
#[derive(Debug, Clone)]
pub struct SkinnedWriteback {
    /// Mesh vertex index of each written vertex.
    vertices: Vec<u32>,
    embedded: Vec<EmbeddedPoint>,
    blend: Vec<f32>,
    /// Skin joints and weights (normalised to sum 1) of each written vertex.
    joints: Vec<[u16; 4]>,
    weights: Vec<[f32; 4]>,
    rest: Vec<V3>,
    normals: Vec<V3>,
    /// Welded group of each written vertex (index into the group arrays).
    group_of: Vec<u32>,
    /// Per group: a written vertex standing for it, or `u32::MAX` for groups that do not move.
    group_written: Vec<u32>,
    group_rest_normal: Vec<V3>,
    /// Triangles (in group indices) touching a moving group.
    triangles: Vec<[u32; 3]>,
    group_now: Vec<V3>,
    group_normal: Vec<V3>,
    /// The joints' linear parts this frame, row-major.
    linear: Vec<[f32; 9]>,
}

/// A 3-vector in the mesh's precision.
type V3 = [f32; 3];

fn v3(p: &Vec3) -> V3 {
    [p.x as f32, p.y as f32, p.z as f32]
}

fn sub(a: V3, b: V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn dot(a: V3, b: V3) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

impl SkinnedWriteback {
    /// The write-back of the mesh vertices with `blend[v] > 0` (blend weights in [0, 1]; 1
    /// fully simulated), embedded in `cage` (bind space, as the mesh). `normals` are the mesh's
    /// authored normals (bind space), if it has any.
    ///
    /// # Errors
    /// [`SkinError`] for mismatched lengths, no vertex with a positive blend, non-finite
    /// positions or blends, triangles out of range, or invalid skin weights.
    pub fn new(
        positions: &[Vec3],
        normals: Option<&[Vec3]>,
        triangles: &[[u32; 3]],
        skin: &[SkinWeights],
        joints: usize,
        blend: &[f64],
        cage: &TetMesh,
    ) -> Result<Self, SkinError> {
        let count = positions.len();
        for (what, got) in [
            ("the skin weights", skin.len()),
            ("the blend weights", blend.len()),
            ("the normals", normals.map_or(count, <[Vec3]>::len)),
        ] {
            if got != count {
                return Err(SkinError::LengthMismatch {
                    what,
                    got,
                    vertices: count,
                });
            }
        }
        if let Some(vertex) = positions
            .iter()
            .position(|p| !p.iter().all(|c| c.is_finite()))
        {
            return Err(SkinError::NonFiniteVertex { vertex });
        }
        if let Some(&value) = blend.iter().find(|b| !(0.0..=1.0).contains(*b)) {
            return Err(SkinError::Setting {
                what: "blend weight",
                range: "in [0, 1]",
                value,
            });
        }
        for (triangle, t) in triangles.iter().enumerate() {
            if let Some(&index) = t.iter().find(|&&i| i as usize >= count) {
                return Err(SkinError::TriangleOutOfRange {
                    triangle,
                    index,
                    vertices: count,
                });
            }
        }
        let vertices: Vec<u32> = (0..count as u32)
            .filter(|&v| blend[v as usize] > 0.0)
            .collect();
        if vertices.is_empty() {
            return Err(SkinError::EmptyRegion { vertices: count });
        }
        let skin: Vec<SkinWeights> = vertices.iter().map(|&v| skin[v as usize]).collect();
        check_weights(&skin, joints)?;
        let rest: Vec<Vec3> = vertices.iter().map(|&v| positions[v as usize]).collect();

        // Weld by position: every mesh vertex gets a group; keep the groups the normals need.
        let mut weld: HashMap<[u64; 3], u32> = HashMap::new();
        let mesh_group: Vec<u32> = positions
            .iter()
            .map(|p| {
                let key = [p.x.to_bits(), p.y.to_bits(), p.z.to_bits()];
                let next = weld.len() as u32;
                *weld.entry(key).or_insert(next)
            })
            .collect();
        let mut moving = vec![false; weld.len()];
        for &v in &vertices {
            moving[mesh_group[v as usize] as usize] = true;
        }
        let mut compact = vec![u32::MAX; weld.len()];
        let mut group_rest = Vec::new();
        let mut group_written = Vec::new();
        let mut compact_of = |mesh_vertex: u32, group_rest: &mut Vec<Vec3>| -> u32 {
            let g = mesh_group[mesh_vertex as usize] as usize;
            if compact[g] == u32::MAX {
                compact[g] = group_rest.len() as u32;
                group_rest.push(positions[mesh_vertex as usize]);
            }
            compact[g]
        };
        let mut group_triangles = Vec::new();
        for t in triangles {
            if t.iter().any(|&v| moving[mesh_group[v as usize] as usize]) {
                group_triangles.push(t.map(|v| compact_of(v, &mut group_rest)));
            }
        }
        let group_of: Vec<u32> = vertices
            .iter()
            .map(|&v| compact_of(v, &mut group_rest))
            .collect();
        group_written.resize(group_rest.len(), u32::MAX);
        for (i, &g) in group_of.iter().enumerate() {
            if group_written[g as usize] == u32::MAX {
                group_written[g as usize] = i as u32;
            }
        }
        let group_rest: Vec<V3> = group_rest.iter().map(v3).collect();
        let mut group_rest_normal = vec![[0.0; 3]; group_rest.len()];
        smooth_normals(&group_rest, &group_triangles, &mut group_rest_normal);

        Ok(Self {
            embedded: embed_points(cage, &rest),
            blend: vertices.iter().map(|&v| blend[v as usize] as f32).collect(),
            normals: match normals {
                Some(n) => vertices.iter().map(|&v| v3(&n[v as usize])).collect(),
                None => Vec::new(),
            },
            joints: skin.iter().map(|w| w.joints).collect(),
            weights: skin
                .iter()
                .map(|w| w.weights.map(|x| x / w.total()))
                .collect(),
            vertices,
            rest: rest.iter().map(v3).collect(),
            group_of,
            group_now: group_rest.clone(),
            group_normal: vec![[0.0; 3]; group_rest.len()],
            group_written,
            group_rest_normal,
            triangles: group_triangles,
            linear: Vec::with_capacity(joints),
        })
    }

    /// The mesh vertex index of each written vertex.
    pub fn vertices(&self) -> &[u32] {
        &self.vertices
    }

    /// The written vertices embedded in the cage (their collision proxies).
    pub fn embedded(&self) -> &[EmbeddedPoint] {
        &self.embedded
    }

    /// The number of written vertices.
    pub fn len(&self) -> usize {
        self.vertices.len()
    }

    /// Whether no vertex is written (never true of a built write-back).
    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }

    /// The cage's displacement from its targets at each written vertex (m, world space):
    /// `sum_k b_k (x_k - t_k)` for cage positions `x` and skinned targets `t`, into `out`.
    pub fn displacements(&self, x: &[Vec3], targets: &[Vec3], out: &mut [Vec3]) {
        for (d, e) in out.iter_mut().zip(&self.embedded) {
            *d = e.position(x) - e.position(targets);
        }
    }

    /// Writes the written vertices' bind-space positions (and, when the mesh has normals, their
    /// turned normals) for the joints' current skinning matrices (one per joint of the skin)
    /// and the displacements `d` (one per written vertex, world space). Other vertices of
    /// `positions` / `normals` are left as they are.
    pub fn write(
        &mut self,
        joints: &[Affine],
        displacement: &[Vec3],
        positions: &mut [[f32; 3]],
        normals: Option<&mut [[f32; 3]]>,
    ) {
        self.linear.clear();
        self.linear.extend(joints.iter().map(|j| {
            let m = &j.linear;
            [
                m[(0, 0)] as f32,
                m[(0, 1)] as f32,
                m[(0, 2)] as f32,
                m[(1, 0)] as f32,
                m[(1, 1)] as f32,
                m[(1, 2)] as f32,
                m[(2, 0)] as f32,
                m[(2, 1)] as f32,
                m[(2, 2)] as f32,
            ]
        }));
        for i in 0..self.vertices.len() {
            let d = displacement.get(i).map_or([0.0; 3], v3);
            let s = self.blend[i];
            let d = [s * d[0], s * d[1], s * d[2]];
            // The blended linear part's rows, then L^-1 d = (d_x c0 + d_y c1 + d_z c2) / det
            // with c0 = r1 x r2, c1 = r2 x r0, c2 = r0 x r1 (the adjugate's columns).
            let mut l = [0.0f32; 9];
            for k in 0..4 {
                let w = self.weights[i][k];
                if w != 0.0 {
                    let m = &self.linear[self.joints[i][k] as usize];
                    for (a, b) in l.iter_mut().zip(m) {
                        *a += w * b;
                    }
                }
            }
            let (r0, r1, r2) = ([l[0], l[1], l[2]], [l[3], l[4], l[5]], [l[6], l[7], l[8]]);
            let (c0, c1, c2) = (cross(r1, r2), cross(r2, r0), cross(r0, r1));
            let det = dot(r0, c0);
            let offset: V3 =
                std::array::from_fn(|a| (d[0] * c0[a] + d[1] * c1[a] + d[2] * c2[a]) / det);
            let valid = det.abs() > f32::MIN_POSITIVE && offset.iter().all(|c| c.is_finite());
            let r = self.rest[i];
            let p = if valid {
                [r[0] + offset[0], r[1] + offset[1], r[2] + offset[2]]
            } else {
                r
            };
            let g = self.group_of[i] as usize;
            if self.group_written[g] == i as u32 {
                self.group_now[g] = p;
            }
            positions[self.vertices[i] as usize] = p;
        }
        let Some(normals) = normals else { return };
        if self.normals.is_empty() {
            return;
        }
        smooth_normals(&self.group_now, &self.triangles, &mut self.group_normal);
        for i in 0..self.vertices.len() {
            let g = self.group_of[i] as usize;
            normals[self.vertices[i] as usize] = turn(
                self.group_rest_normal[g],
                self.group_normal[g],
                self.normals[i],
            );
        }
    }

    /// The number of welded groups the normals use, for tests.
    #[cfg(test)]
    fn group_count(&self) -> usize {
        self.group_now.len()
    }
}

/// Area-weighted vertex normals of `triangles` over `positions`, normalised (zero where a
/// vertex has no area around it).
fn smooth_normals(positions: &[V3], triangles: &[[u32; 3]], out: &mut [V3]) {
    out.fill([0.0; 3]);
    for t in triangles {
        let [a, b, c] = t.map(|v| positions[v as usize]);
        let n = cross(sub(b, a), sub(c, a));
        for &v in t {
            let o = &mut out[v as usize];
            for k in 0..3 {
                o[k] += n[k];
            }
        }
    }
    for n in out.iter_mut() {
        let len = dot(*n, *n).sqrt();
        if len > 0.0 {
            *n = n.map(|c| c / len);
        }
    }
}

/// `n` turned by the smallest rotation taking unit `from` to unit `to` (unchanged where either
/// is zero or they are opposite).
fn turn(from: V3, to: V3, n: V3) -> V3 {
    let c = dot(from, to);
    if dot(from, from) == 0.0 || dot(to, to) == 0.0 || c <= -1.0 + 1e-6 {
        return n;
    }
    // Rodrigues: R n = n + v x n + v x (v x n) / (1 + c), v = from x to.
    let v = cross(from, to);
    let vn = cross(v, n);
    let vvn = cross(v, vn);
    std::array::from_fn(|k| n[k] + vn[k] + vvn[k] / (1.0 + c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::math::Mat3;
    use crate::sim::skin::region::tests::uv_sphere;
    use crate::sim::skin::{SkinDrive, region_cage};

    fn joints_bent(angle: f64) -> [Affine; 2] {
        let (s, c) = angle.sin_cos();
        [
            Affine {
                linear: Mat3::identity() * 1.5,
                translation: Vec3::new(0.2, 0.0, 0.0),
            },
            Affine {
                linear: Mat3::new(c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0),
                translation: Vec3::new(0.0, 0.4, -0.1),
            },
        ]
    }

    /// A sphere skinned to joint 0 below the equator and joint 1 above, blended near it; the
    /// lower half simulated, blending out towards the equator.
    fn setup() -> (Vec<Vec3>, Vec<[u32; 3]>, Vec<SkinWeights>, Vec<f64>) {
        let (p, t) = uv_sphere(16, 24);
        let skin = p
            .iter()
            .map(|q| {
                let b = ((q.y + 0.3) / 0.6).clamp(0.0, 1.0) as f32;
                SkinWeights {
                    joints: [0, 1, 0, 0],
                    weights: [1.0 - b, b, 0.0, 0.0],
                }
            })
            .collect();
        let blend = p.iter().map(|q| ((-q.y) / 0.4).clamp(0.0, 1.0)).collect();
        (p, t, skin, blend)
    }

    #[test]
    fn the_engine_skins_the_written_mesh_to_its_skinning_plus_the_displacement() {
        let (p, t, skin, blend) = setup();
        let normals: Vec<Vec3> = p.iter().map(|q| q.normalize()).collect();
        let region: Vec<bool> = blend.iter().map(|&b| b > 0.0).collect();
        let cage = region_cage(&p, &t, &region, 6, 2.0).unwrap();
        let mut wb =
            SkinnedWriteback::new(&p, Some(&normals), &t, &skin, 2, &blend, &cage).unwrap();
        assert!(wb.group_count() < p.len());
        let joints = joints_bent(0.4);
        let drive = SkinDrive::new(cage.rest_positions(), &p, &skin, 2).unwrap();
        let mut targets = vec![Vec3::zeros(); cage.vertex_count()];
        drive.targets(&joints, &mut targets);

        // A stiff flesh (the cage on its targets) draws exactly the skinned mesh.
        let mut d = vec![Vec3::zeros(); wb.len()];
        wb.displacements(&targets, &targets, &mut d);
        assert!(d.iter().all(|d| d.norm() < 1e-12));
        let mut written: Vec<[f32; 3]> = p
            .iter()
            .map(|q| [q.x as f32, q.y as f32, q.z as f32])
            .collect();
        let mut written_normals: Vec<[f32; 3]> = normals
            .iter()
            .map(|q| [q.x as f32, q.y as f32, q.z as f32])
            .collect();
        wb.write(&joints, &d, &mut written, Some(&mut written_normals));
        for (i, q) in p.iter().enumerate() {
            let w = Vec3::new(
                written[i][0] as f64,
                written[i][1] as f64,
                written[i][2] as f64,
            );
            assert!((w - q).norm() < 1e-6);
            let n = &written_normals[i];
            let n = Vec3::new(n[0] as f64, n[1] as f64, n[2] as f64);
            assert!(
                (n - normals[i]).norm() < 1e-5,
                "{i}: {n:?} vs {:?}",
                normals[i]
            );
        }

        // A uniform push of the cage: the engine's skinning of the written vertex is its own
        // skinning plus the push times the blend weight.
        let push = Vec3::new(0.01, -0.03, 0.02);
        let x: Vec<Vec3> = targets.iter().map(|t| t + push).collect();
        wb.displacements(&x, &targets, &mut d);
        wb.write(&joints, &d, &mut written, Some(&mut written_normals));
        for (i, &v) in wb.vertices().iter().enumerate() {
            let v = v as usize;
            let m = skin[v].blend(&joints);
            let w = Vec3::new(
                written[v][0] as f64,
                written[v][1] as f64,
                written[v][2] as f64,
            );
            let drawn = m.transform_point(&w);
            let expected = m.transform_point(&p[v]) + blend[v] * push;
            assert!((drawn - expected).norm() < 1e-6, "vertex {v} ({i})");
        }
        // A rigid push does not bend the surface much: normals stay close.
        for &v in wb.vertices() {
            let n = &written_normals[v as usize];
            let n = Vec3::new(n[0] as f64, n[1] as f64, n[2] as f64);
            assert!((n.norm() - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn normals_turn_with_a_bent_surface() {
        // A flat strip of two triangles per quad on y = 0, normals +y; bending it about x
        // (z -> y) turns the normals of the bent part.
        let mut p = Vec::new();
        for i in 0..=4 {
            for j in 0..=4 {
                p.push(Vec3::new(i as f64 * 0.25, 0.0, j as f64 * 0.25));
            }
        }
        let at = |i: u32, j: u32| i * 5 + j;
        let mut t = Vec::new();
        for i in 0..4 {
            for j in 0..4 {
                t.push([at(i, j), at(i, j + 1), at(i + 1, j + 1)]);
                t.push([at(i, j), at(i + 1, j + 1), at(i + 1, j)]);
            }
        }
        let normals = vec![Vec3::new(0.0, 1.0, 0.0); p.len()];
        let skin = vec![
            SkinWeights {
                joints: [0; 4],
                weights: [1.0, 0.0, 0.0, 0.0]
            };
            p.len()
        ];
        let blend = vec![1.0; p.len()];
        let region = vec![true; p.len()];
        let cage = region_cage(&p, &t, &region, 4, 1.5).unwrap();
        let mut wb =
            SkinnedWriteback::new(&p, Some(&normals), &t, &skin, 1, &blend, &cage).unwrap();
        // Displace each vertex by a tilt: y += 0.5 z, so the surface's normal becomes
        // (0, 1, -0.5) normalised.
        let d: Vec<Vec3> = wb
            .vertices()
            .iter()
            .map(|&v| Vec3::new(0.0, 0.5 * p[v as usize].z, 0.0))
            .collect();
        let mut pos: Vec<[f32; 3]> = vec![[0.0; 3]; p.len()];
        let mut nor: Vec<[f32; 3]> = vec![[0.0; 3]; p.len()];
        wb.write(&[Affine::identity()], &d, &mut pos, Some(&mut nor));
        let expected = Vec3::new(0.0, 1.0, -0.5).normalize();
        for n in &nor {
            let n = Vec3::new(n[0] as f64, n[1] as f64, n[2] as f64);
            assert!((n - expected).norm() < 1e-5, "{n:?}");
        }
    }
}
