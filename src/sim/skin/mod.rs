//! Soft flesh on a skinned character: a tet cage around a region of a skinned mesh, driven by the
//! animation through bone springs, and written back into the mesh so the GPU's own skinning
//! draws it.
//!
//! # The model
//! A skinned mesh is drawn by linear-blend skinning (LBS): vertex `v` with joints `j` and weights
//! `w_j` is drawn at `M_v v`, `M_v = sum_j w_j J_j`, where `J_j` is joint `j`'s skinning matrix
//! (its world transform times its inverse bind pose). A region of the mesh (a belly, a tail) is
//! made soft in four parts:
//!
//! 1. **The cage** ([`region_cage`]): a lattice tet mesh in the mesh's bind space that strictly
//!    bounds the region's vertices: the lattice of `sim::surface` on the intersection of the
//!    mesh's solid (when the mesh is closed) and a neighbourhood of the region's vertices,
//!    `depth` deep. The flesh under a belly is simulated, not the whole character.
//! 2. **The drive** ([`SkinDrive`]): every cage vertex gets skin weights interpolated from the
//!    nearest skinned vertices (inverse squared distance over [`NEIGHBOURS`] of them, the four
//!    largest joints kept), and so an LBS target `t_k = M_k c_k` for each animation pose. Cage
//!    vertices near a bone are tied to their targets by stiff zero-rest-length springs, the
//!    others weakly or not at all ([`spring_stiffness`]): the bone attachments of
//!    Wang et al. 2020 (section 5, "skeletal bones are attached to the
//!    simulation mesh by zero restlength springs"), here through the world's attachments. The
//!    flesh then follows the animation, lags, jiggles and squashes on contact. Deviation: the
//!    paper samples springs over the bones' surfaces; a glTF skeleton has joints, not bone
//!    geometry, so a cage vertex's spring is chosen by its distance to the segments between a
//!    joint and its parent, measured in cells.
//! 3. **Embedding**: the region's mesh vertices are embedded barycentrically in the cage at rest
//!    (the embedded-contact thesis, section 5.7: "directly compatible with
//!    ... linear-blend skinning").
//! 4. **Write-back** ([`SkinnedWriteback`]): each region vertex is drawn at its skinned position
//!    plus the cage's displacement from its targets there, `p = M_v v + s_v sum_k b_k (x_k -
//!    t_k)` (`b` its barycentric weights, `s_v` in [0, 1] its blend weight, falling to 0 at the
//!    region's edge so there is no seam). The mesh is written in *bind space*,
//!    `v' = v + s_v L_v^-1 d_v` (`L_v` the linear part of `M_v`), so the GPU's skinning of
//!    `v'` is exactly `p`; vertices outside the region are untouched and stay skinned by the
//!    engine. Normals turn with the deformation: each vertex's authored normal is rotated by the
//!    rotation taking its smooth rest normal to its smooth deformed normal (so hard edges and
//!    UV seams keep their authored shading).
//!
//! Deviation: the first design planned to write the simulated positions directly into a
//! mesh drawn without skinning. Writing bind-space positions keeps the engine's GPU skinning for
//! every vertex (outside the region nothing is computed on the CPU) and makes the seam a blend
//! weight instead of two meshes; and drawing the *displacement* on top of the vertex's own
//! skinning (rather than `sum_k b_k x_k`) makes a perfectly stiff flesh draw exactly the skinned
//! mesh: barycentric interpolation of skinned cage vertices is not the skinning of the vertex
//! (measured on the creature of `examples/character.rs` over its walk, 6-cell cages: up to
//! 5.6 mm apart on the belly and 8.5 mm on the tail; 4.9 / 4.4 mm at 10 cells). The collision
//! proxies still sit at `sum_k b_k x_k`, so contact holds the drawn surface to within that
//! difference.

mod drive;
mod region;
mod writeback;

pub use drive::{NEIGHBOURS, SkinDrive, spring_stiffness};
pub use region::{inside_mesh, region_cage, region_cell};
pub use writeback::SkinnedWriteback;

use thiserror::Error;

use super::math::{Mat3, Vec3};
use super::mesh::MeshError;

/// An affine map of 3-space, `p -> linear p + translation`: a joint's skinning matrix (its world
/// transform times its inverse bind pose), or a vertex's blend of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    /// The linear part.
    pub linear: Mat3,
    /// The translation (m).
    pub translation: Vec3,
}

impl Affine {
    /// The identity map.
    pub fn identity() -> Self {
        Self {
            linear: Mat3::identity(),
            translation: Vec3::zeros(),
        }
    }

    /// The image of point `p`.
    #[inline]
    pub fn transform_point(&self, p: &Vec3) -> Vec3 {
        self.linear * p + self.translation
    }

    /// Whether every entry is finite.
    pub fn is_finite(&self) -> bool {
        self.linear.iter().all(|v| v.is_finite()) && self.translation.iter().all(|v| v.is_finite())
    }
}

/// The joints and weights of one skinned vertex (glTF's `JOINTS_0` / `WEIGHTS_0`, Bevy's
/// `Mesh::ATTRIBUTE_JOINT_INDEX` / `ATTRIBUTE_JOINT_WEIGHT`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SkinWeights {
    /// Joint indices into the skin's joint list.
    pub joints: [u16; 4],
    /// Their weights (>= 0; the blend divides by their sum).
    pub weights: [f32; 4],
}

impl SkinWeights {
    /// The blended skinning matrix `sum_j w_j J_j / sum_j w_j`. Every index must be in range of
    /// `joints` (checked when a drive or write-back is built).
    #[inline]
    pub fn blend(&self, joints: &[Affine]) -> Affine {
        let mut m = Affine {
            linear: Mat3::zeros(),
            translation: Vec3::zeros(),
        };
        let mut total = 0.0;
        for k in 0..4 {
            let w = self.weights[k] as f64;
            if w != 0.0 {
                let j = &joints[self.joints[k] as usize];
                m.linear += w * j.linear;
                m.translation += w * j.translation;
                total += w;
            }
        }
        if total > 0.0 && total != 1.0 {
            m.linear /= total;
            m.translation /= total;
        }
        m
    }

    /// The summed weight of the joints marked in `chosen` (indexed by joint).
    pub fn weight_of(&self, chosen: &[bool]) -> f32 {
        (0..4)
            .filter(|&k| {
                chosen
                    .get(self.joints[k] as usize)
                    .copied()
                    .unwrap_or(false)
            })
            .map(|k| self.weights[k])
            .sum::<f32>()
            / self.total().max(f32::MIN_POSITIVE)
    }

    /// The sum of the weights.
    pub fn total(&self) -> f32 {
        self.weights.iter().sum()
    }
}

/// Why a skinned region cannot be simulated. Vertex and joint indices refer to the mesh and
/// skin as given.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SkinError {
    /// The mesh has no vertices or the region selects none.
    #[error("the region selects no vertex of the {vertices}-vertex mesh")]
    EmptyRegion {
        /// Vertices in the mesh.
        vertices: usize,
    },
    /// The per-vertex arrays disagree in length.
    #[error("{what} has {got} entries for {vertices} vertices")]
    LengthMismatch {
        /// Which array.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The number of mesh vertices.
        vertices: usize,
    },
    /// A vertex position is NaN or infinite.
    #[error("mesh vertex {vertex} has a non-finite position")]
    NonFiniteVertex {
        /// The vertex.
        vertex: usize,
    },
    /// A vertex names a joint the skin does not have.
    #[error("mesh vertex {vertex} uses joint {joint}, but the skin has {joints} joints")]
    JointOutOfRange {
        /// The vertex.
        vertex: usize,
        /// The joint index it names.
        joint: u16,
        /// Joints in the skin.
        joints: usize,
    },
    /// A vertex's weights are negative, non-finite or all zero.
    #[error("mesh vertex {vertex} has invalid skin weights {weights:?}")]
    InvalidWeights {
        /// The vertex.
        vertex: usize,
        /// Its weights.
        weights: [f32; 4],
    },
    /// A triangle names a vertex the mesh does not have.
    #[error("triangle {triangle} references vertex {index} of a {vertices}-vertex mesh")]
    TriangleOutOfRange {
        /// The triangle.
        triangle: usize,
        /// The index.
        index: u32,
        /// Vertices in the mesh.
        vertices: usize,
    },
    /// A setting is out of its range.
    #[error("{what} must be {range}, got {value}")]
    Setting {
        /// Which setting.
        what: &'static str,
        /// Its accepted range.
        range: &'static str,
        /// The value given.
        value: f64,
    },
    /// An infinite depth (the whole solid) needs a closed mesh.
    #[error("an infinite flesh depth needs a closed mesh (the mesh is open: {0})")]
    OpenMesh(String),
    /// The cage could not be built.
    #[error("the cage around the region: {0}")]
    Cage(#[from] MeshError),
}

/// Checks skin weights against the joint count; used by the drive and the write-back.
pub(crate) fn check_weights(weights: &[SkinWeights], joints: usize) -> Result<(), SkinError> {
    for (vertex, w) in weights.iter().enumerate() {
        let valid = w.weights.iter().all(|x| x.is_finite() && *x >= 0.0) && w.total() > 0.0;
        if !valid {
            return Err(SkinError::InvalidWeights {
                vertex,
                weights: w.weights,
            });
        }
        for k in 0..4 {
            if w.weights[k] > 0.0 && w.joints[k] as usize >= joints {
                return Err(SkinError::JointOutOfRange {
                    vertex,
                    joint: w.joints[k],
                    joints,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rotation_z(angle: f64) -> Mat3 {
        let (s, c) = angle.sin_cos();
        Mat3::new(c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0)
    }

    #[test]
    fn the_blend_is_the_weighted_mean_of_the_joints() {
        let joints = [
            Affine::identity(),
            Affine {
                linear: rotation_z(0.5),
                translation: Vec3::new(1.0, 2.0, 3.0),
            },
        ];
        let w = SkinWeights {
            joints: [0, 1, 0, 0],
            weights: [0.25, 0.75, 0.0, 0.0],
        };
        let p = Vec3::new(0.3, -0.2, 0.7);
        let expected = 0.25 * p + 0.75 * joints[1].transform_point(&p);
        assert!((w.blend(&joints).transform_point(&p) - expected).norm() < 1e-12);
        // Unnormalised weights blend as their normalised share.
        let doubled = SkinWeights {
            weights: [0.5, 1.5, 0.0, 0.0],
            ..w
        };
        assert!((doubled.blend(&joints).transform_point(&p) - expected).norm() < 1e-12);
        assert!((w.weight_of(&[false, true]) - 0.75).abs() < 1e-7);
    }

    #[test]
    fn bad_weights_are_typed_errors() {
        let ok = SkinWeights {
            joints: [0, 1, 0, 0],
            weights: [0.5, 0.5, 0.0, 0.0],
        };
        assert!(check_weights(&[ok], 2).is_ok());
        assert!(matches!(
            check_weights(&[ok], 1),
            Err(SkinError::JointOutOfRange { joint: 1, .. })
        ));
        for weights in [[0.0; 4], [f32::NAN, 1.0, 0.0, 0.0], [-0.5, 1.5, 0.0, 0.0]] {
            assert!(matches!(
                check_weights(&[SkinWeights { weights, ..ok }], 2),
                Err(SkinError::InvalidWeights { .. })
            ));
        }
    }
}
