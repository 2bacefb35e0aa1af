//! Skinning targets for the cage's vertices and the stiffness of the springs that pull them.

use super::{Affine, SkinError, SkinWeights, check_weights};
use crate::sim::math::Vec3;
use crate::sim::nearest::PointGrid;

/// How many of the nearest skinned vertices a cage vertex takes its skin weights from.
pub const NEIGHBOURS: usize = 8;

/// The animation's pull on a cage: every cage vertex's skin weights (interpolated from the
/// nearest skinned vertices) and its rest position in bind space, so that each pose of the
/// skeleton gives every cage vertex a linear-blend-skinning target.
#[derive(Debug, Clone)]
pub struct SkinDrive {
    rest: Vec<Vec3>,
    weights: Vec<SkinWeights>,
    joints: usize,
}

impl SkinDrive {
    /// The drive of a cage with rest positions `cage_rest` (bind space, m) embedded in a mesh
    /// whose vertices `skinned` carry the skin weights `skin` of a `joints`-joint skin.
    ///
    /// Each cage vertex's weights are the inverse-squared-distance mean of its [`NEIGHBOURS`]
    /// nearest skinned vertices' weights, the four largest joints kept and renormalised.
    ///
    /// # Errors
    /// [`SkinError`] for mismatched lengths, no skinned vertex, non-finite positions, or weights
    /// that are invalid or name joints past `joints`.
    pub fn new(
        cage_rest: &[Vec3],
        skinned: &[Vec3],
        skin: &[SkinWeights],
        joints: usize,
    ) -> Result<Self, SkinError> {
        if skin.len() != skinned.len() {
            return Err(SkinError::LengthMismatch {
                what: "the skin weights",
                got: skin.len(),
                vertices: skinned.len(),
            });
        }
        if skinned.is_empty() {
            return Err(SkinError::EmptyRegion { vertices: 0 });
        }
        if let Some(vertex) = skinned
            .iter()
            .position(|p| !p.iter().all(|c| c.is_finite()))
        {
            return Err(SkinError::NonFiniteVertex { vertex });
        }
        check_weights(skin, joints)?;
        let (lo, hi) = crate::sim::mesh::bounds(skinned);
        let spacing = (hi - lo).max() / (skinned.len() as f64).cbrt().max(1.0);
        let grid = PointGrid::new(skinned, spacing);
        let tiny = 1e-9 * (hi - lo).max().max(1e-9);
        let mut found = Vec::with_capacity(NEIGHBOURS * 8);
        let mut sums: Vec<(u16, f64)> = Vec::with_capacity(4 * NEIGHBOURS);
        let weights = cage_rest
            .iter()
            .map(|c| {
                grid.nearest(c, NEIGHBOURS, &mut found);
                sums.clear();
                for &(d, i) in &found {
                    let w = &skin[i as usize];
                    let share = 1.0 / (d * d + tiny * tiny) / w.total() as f64;
                    for k in 0..4 {
                        if w.weights[k] > 0.0 {
                            let amount = share * w.weights[k] as f64;
                            match sums.iter_mut().find(|(j, _)| *j == w.joints[k]) {
                                Some(entry) => entry.1 += amount,
                                None => sums.push((w.joints[k], amount)),
                            }
                        }
                    }
                }
                sums.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                sums.truncate(4);
                let total: f64 = sums.iter().map(|s| s.1).sum();
                let mut out = SkinWeights::default();
                for (k, &(j, w)) in sums.iter().enumerate() {
                    out.joints[k] = j;
                    out.weights[k] = (w / total) as f32;
                }
                out
            })
            .collect();
        Ok(Self {
            rest: cage_rest.to_vec(),
            weights,
            joints,
        })
    }

    /// The cage vertices' rest positions (bind space, m).
    pub fn rest(&self) -> &[Vec3] {
        &self.rest
    }

    /// The cage vertices' interpolated skin weights.
    pub fn weights(&self) -> &[SkinWeights] {
        &self.weights
    }

    /// The number of joints the skin has.
    pub fn joint_count(&self) -> usize {
        self.joints
    }

    /// Every cage vertex's skinned target (m) for the joints' skinning matrices into `out`.
    ///
    /// # Panics
    /// If `joints` has fewer than [`Self::joint_count`] matrices or `out` is not one entry per
    /// cage vertex (a programming error: both come from the drive's own skin).
    pub fn targets(&self, joints: &[Affine], out: &mut [Vec3]) {
        assert!(
            joints.len() >= self.joints && out.len() == self.rest.len(),
            "SkinDrive::targets: {} joint matrices for {} joints, {} outputs for {} cage vertices",
            joints.len(),
            self.joints,
            out.len(),
            self.rest.len()
        );
        for ((t, c), w) in out.iter_mut().zip(&self.rest).zip(&self.weights) {
            *t = w.blend(joints).transform_point(c);
        }
    }

    /// The scale from bind space to the world in a pose: the median over the cage vertices of
    /// the cube root of their blended matrix's determinant (1 for joints without scale).
    pub fn scale(&self, joints: &[Affine]) -> f64 {
        let mut s: Vec<f64> = self
            .weights
            .iter()
            .map(|w| w.blend(joints).linear.determinant().abs().cbrt())
            .filter(|s| s.is_finite() && *s > 0.0)
            .collect();
        if s.is_empty() {
            return 1.0;
        }
        let mid = s.len() / 2;
        *s.select_nth_unstable_by(mid, f64::total_cmp).1
    }

    /// Every cage vertex's distance (bind space, m) to the nearest bone segment `[a, b]`
    /// (a joint with no child is a segment of zero length); infinite with no bones.
    pub fn bone_distances(&self, bones: &[[Vec3; 2]]) -> Vec<f64> {
        self.rest
            .iter()
            .map(|p| {
                bones
                    .iter()
                    .map(|[a, b]| segment_distance(p, a, b))
                    .fold(f64::INFINITY, f64::min)
            })
            .collect()
    }
}

/// The distance from `p` to the segment `[a, b]`.
fn segment_distance(p: &Vec3, a: &Vec3, b: &Vec3) -> f64 {
    let ab = b - a;
    let len2 = ab.norm_squared();
    let t = if len2 > 0.0 {
        ((p - a).dot(&ab) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (p - (a + t * ab)).norm()
}

/// The stiffness (N/m) of each cage vertex's spring to its skinned target: `m (2 pi f)^2`, a
/// spring that alone would swing the vertex's mass `m` (kg) at `f` Hz. Vertices within
/// `bone_radius` of a bone get `bone_frequency`, those beyond twice that `surface_frequency`,
/// linearly in between (in `f^2`). Frequencies in Hz, >= 0; distances and radius in the same
/// units.
pub fn spring_stiffness(
    masses: &[f64],
    bone_distances: &[f64],
    bone_radius: f64,
    bone_frequency: f64,
    surface_frequency: f64,
    out: &mut Vec<f64>,
) {
    let omega2 = |f: f64| (std::f64::consts::TAU * f).powi(2);
    let (bone, surface) = (omega2(bone_frequency), omega2(surface_frequency));
    out.clear();
    out.extend(masses.iter().zip(bone_distances).map(|(&m, &d)| {
        let near = if bone_radius > 0.0 {
            (2.0 - d / bone_radius).clamp(0.0, 1.0)
        } else {
            0.0
        };
        m * (surface + near * (bone - surface))
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::math::Mat3;

    fn two_bone_strip() -> (Vec<Vec3>, Vec<SkinWeights>) {
        // Vertices along x in [0, 2]: joint 0 below x = 1, joint 1 above, blended in between.
        let mut p = Vec::new();
        let mut w = Vec::new();
        for i in 0..=20 {
            for (y, z) in [(-0.1, -0.1), (0.1, -0.1), (-0.1, 0.1), (0.1, 0.1)] {
                let x = i as f64 * 0.1;
                p.push(Vec3::new(x, y, z));
                let b = ((x - 0.8) / 0.4).clamp(0.0, 1.0) as f32;
                w.push(SkinWeights {
                    joints: [0, 1, 0, 0],
                    weights: [1.0 - b, b, 0.0, 0.0],
                });
            }
        }
        (p, w)
    }

    #[test]
    fn cage_vertices_at_skinned_vertices_take_their_weights() {
        let (p, w) = two_bone_strip();
        let drive = SkinDrive::new(&p, &p, &w, 2).unwrap();
        for (got, want) in drive.weights().iter().zip(&w) {
            let share = |s: &SkinWeights, j: u16| -> f32 {
                (0..4)
                    .filter(|&k| s.joints[k] == j)
                    .map(|k| s.weights[k])
                    .sum()
            };
            for j in 0..2 {
                assert!((share(got, j) - share(want, j)).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn targets_follow_a_rigid_skeleton_rigidly() {
        let (p, w) = two_bone_strip();
        let cage: Vec<Vec3> = p
            .iter()
            .map(|q| q * 1.1 + Vec3::new(0.0, 0.02, 0.0))
            .collect();
        let drive = SkinDrive::new(&cage, &p, &w, 2).unwrap();
        let (s, c) = 0.7f64.sin_cos();
        let turn = Affine {
            linear: Mat3::new(c, 0.0, s, 0.0, 1.0, 0.0, -s, 0.0, c) * 2.0,
            translation: Vec3::new(1.0, -2.0, 0.5),
        };
        let mut t = vec![Vec3::zeros(); cage.len()];
        drive.targets(&[turn, turn], &mut t);
        for (t, c) in t.iter().zip(&cage) {
            assert!((t - turn.transform_point(c)).norm() < 1e-12);
        }
        assert!((drive.scale(&[turn, turn]) - 2.0).abs() < 1e-12);
        // Bending only joint 1 leaves the cage vertices skinned to joint 0 alone in place.
        let bent = Affine {
            linear: Mat3::identity(),
            translation: Vec3::new(0.0, 0.3, 0.0),
        };
        drive.targets(&[Affine::identity(), bent], &mut t);
        for ((t, c), w) in t.iter().zip(&cage).zip(drive.weights()) {
            let b = w.weight_of(&[false, true]) as f64;
            assert!((t - (c + Vec3::new(0.0, 0.3 * b, 0.0))).norm() < 1e-6);
            if c.x < 0.5 {
                assert!(b < 1e-6, "{c:?} {b}");
            }
        }
    }

    #[test]
    fn bone_springs_are_stiff_near_bones_and_soft_away() {
        let (p, w) = two_bone_strip();
        let drive = SkinDrive::new(&p, &p, &w, 2).unwrap();
        let bones = [[Vec3::zeros(), Vec3::new(1.0, 0.0, 0.0)]];
        let d = drive.bone_distances(&bones);
        // A vertex above the bone at 0.14 m; one past its end at x = 2 is a metre away.
        assert!((d[0] - 0.02f64.sqrt()).abs() < 1e-12);
        assert!(d[p.len() - 1] > 1.0);
        let masses = vec![0.5; p.len()];
        let mut k = Vec::new();
        spring_stiffness(&masses, &d, 0.2, 10.0, 1.0, &mut k);
        let omega2 = |f: f64| (std::f64::consts::TAU * f).powi(2);
        assert!((k[0] - 0.5 * omega2(10.0)).abs() < 1e-9);
        assert!((k[p.len() - 1] - 0.5 * omega2(1.0)).abs() < 1e-9);
    }

    #[test]
    fn bad_skins_are_typed_errors() {
        let (p, w) = two_bone_strip();
        assert!(matches!(
            SkinDrive::new(&p, &p, &w[1..], 2),
            Err(SkinError::LengthMismatch { .. })
        ));
        assert!(matches!(
            SkinDrive::new(&p, &p, &w, 1),
            Err(SkinError::JointOutOfRange { .. })
        ));
        assert!(matches!(
            SkinDrive::new(&p, &[], &[], 1),
            Err(SkinError::EmptyRegion { .. })
        ));
    }
}
