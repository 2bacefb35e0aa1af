//! The Projective Dynamics local step, vectorised: tets in blocks of [`LANES`], structure of
//! arrays.
//!
//! For every tet the local step (Bouaziz et al. 2014 section 3; `crate::sim::pd`) needs the
//! signed SVD `F = U diag(sigma) V'` of its deformation gradient and writes the tet's
//! right-hand-side contributions `w P g_k`, `P = U diag(d) V'` with
//! `d = w_c + w_v s(sigma) [+ w_l clamp(sigma)]`. Here [`LANES`] tets (eight) go through that
//! together:
//!
//! 1. gather the four vertices of each lane, `F = sum_k x_k g_k'` (lanes of `f64`);
//! 2. warm start: the SVD of `F V_prev`, `V_prev` the tet's right singular vectors of the last
//!    call, whose `F'F` is then nearly diagonal, so Jacobi converges in few sweeps, mostly of
//!    cheap small-angle rotations ([`crate::sim::polar_lanes`], bit-identical per lane to the
//!    scalar [`crate::sim::polar::svd3`]); `V = V_prev W`, re-orthonormalised and kept;
//! 3. the volume term's stretches `s(sigma)`, the closest point of `sigma` with
//!    `s1 s2 s3 = 1`, by Newton on the multiplier alone ([`volume_stretches_lanes`]); the
//!    lanes it does not settle take the general Newton
//!    ([`volume_stretches_newton`], in [`crate::sim::volume_stretches`]);
//! 4. `P g_k` for the four vertices, scattered back per tet; with the strain-rate damping on,
//!    `P` also holds its target `w_d U V' S_n`, `S_n` the tet's stretch at the step's start
//!    ([`StartStretches`], computed once per step by [`start_stretches`] with the same
//!    warm-started SVD).
//!
//! The lanes are plain `[f64; 8]` arithmetic ([`crate::sim::lanes`]); on x86-64 the blocks run
//! in a copy of the loop compiled for AVX2 when the processor has it (checked once per call),
//! else in the baseline copy. Both compute the same IEEE operations, so the result does not
//! depend on the instruction set or on the number of threads (each tet's result depends only
//! on its own inputs).
//!
//! Deviation from the scalar path (`PdSystem::local_step`): the warm-started SVD is of
//! `F V_prev`, so `U` and `V` differ from the cold SVD by round-off (the contributions agree
//! within 1e-8 relative in the test, inverted tets included), and the volume stretches come
//! from the multiplier Newton, which satisfies the Lagrange conditions to round-off where the
//! general Newton stops at a residual of 1e-11.

// Index loops read best for the fixed-size kernels below.
#![allow(clippy::needless_range_loop)]

use rayon::prelude::*;

use super::lanes::{LANES, Lanes};
use super::material::StrainLimitParams;
use super::math::{Mat3, Vec3};
use super::polar_lanes::{Mat3Lanes, identity_lanes, svd3_lanes};
use super::volume_stretches::{volume_stretches_lanes, volume_stretches_newton};

/// Blocks per parallel task (256 tets).
const BLOCKS_PER_TASK: usize = 256 / LANES;

/// The tets of one body in blocks of [`LANES`]: vertex indices, gradient rows `g_k` (1/m) and
/// weights (J), lane-major. The last block is padded with copies of the last tet (weight 0);
/// their results are dropped.
#[derive(Debug, Clone, Default)]
pub struct TetBlocks {
    verts: Vec<[[u32; LANES]; 4]>,
    /// `grads[b][k][c]`: coordinate `c` of `g_k`, per lane.
    grads: Vec<[[Lanes; 3]; 4]>,
    /// Corotated, volume, strain-limit and strain-rate damping weights per lane.
    weights: Vec<[Lanes; 4]>,
    tets: usize,
}

impl TetBlocks {
    /// Blocks of `tets` with their gradient rows and weights (all three of equal length).
    pub fn new(tets: &[[u32; 4]], grads: &[[Vec3; 4]], weights: &[[f64; 4]]) -> Self {
        let count = tets.len().div_ceil(LANES);
        let lane_tet = |b: usize, l: usize| (b * LANES + l).min(tets.len().saturating_sub(1));
        let verts = (0..count)
            .map(|b| std::array::from_fn(|k| std::array::from_fn(|l| tets[lane_tet(b, l)][k])))
            .collect();
        let grads = (0..count)
            .map(|b| {
                std::array::from_fn(|k| {
                    std::array::from_fn(|c| {
                        Lanes(std::array::from_fn(|l| grads[lane_tet(b, l)][k][c]))
                    })
                })
            })
            .collect();
        let mut blocks = Self {
            verts,
            grads,
            weights: Vec::new(),
            tets: tets.len(),
        };
        blocks.set_weights(weights);
        blocks
    }

    /// Replaces the weights (a material change).
    pub fn set_weights(&mut self, weights: &[[f64; 4]]) {
        let tets = self.tets;
        self.weights = (0..self.verts.len())
            .map(|b| {
                std::array::from_fn(|c| {
                    Lanes(std::array::from_fn(|l| {
                        let t = b * LANES + l;
                        if t < tets { weights[t][c] } else { 0.0 }
                    }))
                })
            })
            .collect();
    }

    /// Number of tets.
    pub fn tet_count(&self) -> usize {
        self.tets
    }

    /// Number of blocks.
    pub fn block_count(&self) -> usize {
        self.verts.len()
    }
}

/// Per tet: the right singular vectors `V` of its last local step, which warm-start the next
/// (identity at first), in blocks of eight tets (the local step's `TetBlocks`).
#[derive(Debug, Default)]
pub struct WarmFrames {
    blocks: Vec<Mat3Lanes>,
}

clone_by_field!(WarmFrames { blocks });

impl WarmFrames {
    /// Sizes the frames for `tets` tets; new ones start at the identity.
    pub fn resize(&mut self, tets: usize) {
        self.blocks.resize(tets.div_ceil(LANES), identity_lanes());
    }

    /// Every frame back to the identity (the next local step starts cold).
    pub fn reset(&mut self) {
        self.blocks.iter_mut().for_each(|b| *b = identity_lanes());
    }

    /// The frame of tet `tet`.
    pub fn frame(&self, tet: usize) -> Mat3 {
        let b = &self.blocks[tet / LANES];
        Mat3::from_fn(|i, j| b[i][j].0[tet % LANES])
    }

    /// Whether the frames are sized for `tets` tets.
    pub fn covers(&self, tets: usize) -> bool {
        self.blocks.len() == tets.div_ceil(LANES)
    }

    /// The frames of the first `tets` tets, row-major (a saved world's).
    pub fn rows(&self, tets: usize) -> impl Iterator<Item = [f64; 9]> + '_ {
        (0..tets).map(|t| {
            let b = &self.blocks[t / LANES];
            std::array::from_fn(|k| b[k / 3][k % 3].0[t % LANES])
        })
    }

    /// Sets every tet's frame from `rows` (row-major, one per tet); a padded last block's
    /// spare lanes take the last tet's, as the local step leaves them.
    pub fn set_rows(&mut self, rows: &[[f64; 9]]) {
        self.blocks.clear();
        self.resize(rows.len());
        for (b, block) in self.blocks.iter_mut().enumerate() {
            for l in 0..LANES {
                let row = &rows[(b * LANES + l).min(rows.len() - 1)];
                for k in 0..9 {
                    block[k / 3][k % 3].0[l] = row[k];
                }
            }
        }
    }
}

/// Per tet: the symmetric stretch `S_n = R_n' F_n` of the polar decomposition `F_n = R_n S_n`
/// of its deformation gradient at the start of the step, in blocks of eight tets (the local step's `TetBlocks`)
/// (`xx, yy, zz, xy, xz, yz` per lane). The strain-rate damping pulls each tet toward
/// `R S_n`, its start-of-step shape turned by its current rotation `R` ([`crate::sim::pd`]).
#[derive(Debug, Clone, Default)]
pub struct StartStretches {
    blocks: Vec<[Lanes; 6]>,
}

impl StartStretches {
    /// Forgets the stretches (the strain-rate damping is off).
    pub fn clear(&mut self) {
        self.blocks.clear();
    }

    /// Whether the stretches are sized for `tets` tets.
    pub fn covers(&self, tets: usize) -> bool {
        self.blocks.len() == tets.div_ceil(LANES)
    }

    /// The stretch of tet `tet`.
    pub fn stretch(&self, tet: usize) -> Mat3 {
        let s = &self.blocks[tet / LANES];
        let l = tet % LANES;
        let (xx, yy, zz) = (s[0].0[l], s[1].0[l], s[2].0[l]);
        let (xy, xz, yz) = (s[3].0[l], s[4].0[l], s[5].0[l]);
        Mat3::new(xx, xy, xz, xy, yy, yz, xz, yz, zz)
    }
}

/// The stretches `S = V diag(sigma) V'` of every tet at positions `x` (m) into `out` (resized),
/// the SVD warm-started from `frames` as in [`local_step`] (the frames are read, not updated).
pub fn start_stretches(
    blocks: &TetBlocks,
    x: &[Vec3],
    frames: &WarmFrames,
    out: &mut StartStretches,
) {
    assert_eq!(
        frames.blocks.len(),
        blocks.block_count(),
        "one frame per tet"
    );
    out.blocks
        .resize(blocks.block_count(), [Lanes::splat(0.0); 6]);
    let avx2 = avx2_available();
    out.blocks
        .par_chunks_mut(BLOCKS_PER_TASK)
        .zip(frames.blocks.par_chunks(BLOCKS_PER_TASK))
        .enumerate()
        .for_each(|(task, (out, frames))| {
            let first = task * BLOCKS_PER_TASK;
            if avx2 {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `avx2_available` checked that this processor has AVX2.
                unsafe {
                    stretches_avx2(blocks, x, first, frames, out)
                }
            } else {
                stretches_portable(blocks, x, first, frames, out);
            }
        });
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn stretches_avx2(
    blocks: &TetBlocks,
    x: &[Vec3],
    first: usize,
    frames: &[Mat3Lanes],
    out: &mut [[Lanes; 6]],
) {
    stretches_portable(blocks, x, first, frames, out);
}

#[inline(always)]
fn stretches_portable(
    blocks: &TetBlocks,
    x: &[Vec3],
    first: usize,
    frames: &[Mat3Lanes],
    out: &mut [[Lanes; 6]],
) {
    for (i, (out, frame)) in out.iter_mut().zip(frames).enumerate() {
        let b = first + i;
        let f = gradient_lanes(x, &blocks.verts[b], &blocks.grads[b]);
        let svd = svd3_lanes(&mul(&f, frame));
        let v = orthonormalized(&mul(frame, &svd.v));
        // S = V diag(sigma) V'.
        let entry = |i: usize, j: usize| {
            v[i][0] * svd.sigma[0] * v[j][0]
                + v[i][1] * svd.sigma[1] * v[j][1]
                + v[i][2] * svd.sigma[2] * v[j][2]
        };
        *out = [
            entry(0, 0),
            entry(1, 1),
            entry(2, 2),
            entry(0, 1),
            entry(0, 2),
            entry(1, 2),
        ];
    }
}

/// The local step over all blocks: `contributions[t][k] = P_t g_k` (the tets' right-hand-side
/// contributions before the pinned-vertex terms), warm-started from and updating `frames`.
/// With `start` (the strain-rate damping on), `P_t` also holds the damping target
/// `w_d R S_n` (`R = U V'`, `S_n` the tet's start-of-step stretch).
pub fn local_step(
    blocks: &TetBlocks,
    x: &[Vec3],
    limits: Option<StrainLimitParams>,
    start: Option<&StartStretches>,
    contributions: &mut [[Vec3; 4]],
    frames: &mut WarmFrames,
) {
    assert_eq!(contributions.len(), blocks.tets, "one contribution per tet");
    assert_eq!(
        frames.blocks.len(),
        blocks.block_count(),
        "one frame per tet"
    );
    if let Some(start) = start {
        assert!(
            start.covers(blocks.tet_count()),
            "one start stretch per tet"
        );
    }
    let avx2 = avx2_available();
    contributions
        .par_chunks_mut(LANES * BLOCKS_PER_TASK)
        .zip(frames.blocks.par_chunks_mut(BLOCKS_PER_TASK))
        .enumerate()
        .for_each(|(task, (out, frames))| {
            let first = task * BLOCKS_PER_TASK;
            let task = Task {
                blocks,
                first,
                x,
                limits,
                start,
            };
            if avx2 {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `avx2_available` checked that this processor has AVX2.
                unsafe {
                    run_avx2(&task, out, frames)
                }
            } else {
                run_portable(&task, out, frames);
            }
        });
}

/// What one parallel task reads.
struct Task<'a> {
    blocks: &'a TetBlocks,
    first: usize,
    x: &'a [Vec3],
    limits: Option<StrainLimitParams>,
    start: Option<&'a StartStretches>,
}

fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn run_avx2(task: &Task<'_>, out: &mut [[Vec3; 4]], frames: &mut [Mat3Lanes]) {
    run_portable(task, out, frames);
}

#[inline(always)]
fn run_portable(task: &Task<'_>, out: &mut [[Vec3; 4]], frames: &mut [Mat3Lanes]) {
    for (i, (out, frame)) in out.chunks_mut(LANES).zip(frames).enumerate() {
        block(task, task.first + i, frame, out);
    }
}

/// `a b` per lane.
#[inline(always)]
fn mul(a: &Mat3Lanes, b: &Mat3Lanes) -> Mat3Lanes {
    // Plain loops rather than `std::array::from_fn`, whose closures LLVM may leave out of line
    // (compiled without AVX2) in the AVX2 copy of the loop.
    let mut m = [[Lanes::splat(0.0); 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            m[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
        }
    }
    m
}

/// Gram-Schmidt on the columns of a rotation that accumulated round-off (`c2 = c0 x c1`); the
/// identity in lanes where it degenerates or is not finite.
///
/// The frames are products of rotations, so their columns have unit length to a few ulps:
/// there one Newton step for `1/sqrt(q)` from 1, `(3 - q) / 2`, normalises a column to
/// rounding (for `|q - 1| = d` the new squared length is `1 - 3 d^2 / 4`) without the square
/// roots and divisions, which cost a tenth of the local step in the profile. Lanes further
/// from unit length, degenerate or not finite take the exact Gram-Schmidt, lane by lane.
#[inline(always)]
fn orthonormalized(v: &Mat3Lanes) -> Mat3Lanes {
    let col = |j: usize| [v[0][j], v[1][j], v[2][j]];
    let dot = |a: &[Lanes; 3], b: &[Lanes; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let near_unit = |q: Lanes| (q - 1.0).abs().lt(Lanes::splat(1e-8));
    let (c0, c1) = (col(0), col(1));
    let q0 = dot(&c0, &c0);
    let f0 = (3.0 - q0) * 0.5;
    let c0 = [c0[0] * f0, c0[1] * f0, c0[2] * f0];
    let along = dot(&c0, &c1);
    let c1 = [
        c1[0] - c0[0] * along,
        c1[1] - c0[1] * along,
        c1[2] - c0[2] * along,
    ];
    let q1 = dot(&c1, &c1);
    let fast = near_unit(q0) & near_unit(q1);
    let f1 = (3.0 - q1) * 0.5;
    let c1 = [c1[0] * f1, c1[1] * f1, c1[2] * f1];
    let mut m = with_cross(c0, c1);
    if !(!fast).any() {
        return m;
    }
    let exact = gram_schmidt(v);
    for i in 0..3 {
        for j in 0..3 {
            m[i][j] = fast.select(m[i][j], exact[i][j]);
        }
    }
    m
}

/// The rotation with columns `c0`, `c1`, `c0 x c1`.
#[inline(always)]
fn with_cross(c0: [Lanes; 3], c1: [Lanes; 3]) -> Mat3Lanes {
    let c2 = [
        c0[1] * c1[2] - c0[2] * c1[1],
        c0[2] * c1[0] - c0[0] * c1[2],
        c0[0] * c1[1] - c0[1] * c1[0],
    ];
    let mut m = identity_lanes();
    for i in 0..3 {
        m[i] = [c0[i], c1[i], c2[i]];
    }
    m
}

/// [`orthonormalized`] with exact normalisation: the identity in lanes where it degenerates or
/// is not finite.
#[inline(never)]
fn gram_schmidt(v: &Mat3Lanes) -> Mat3Lanes {
    let col = |j: usize| [v[0][j], v[1][j], v[2][j]];
    let dot = |a: &[Lanes; 3], b: &[Lanes; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let (c0, c1) = (col(0), col(1));
    let n0 = dot(&c0, &c0).sqrt();
    let c0 = c0.map(|c| c / n0);
    let along = dot(&c0, &c1);
    let c1 = [
        c1[0] - c0[0] * along,
        c1[1] - c0[1] * along,
        c1[2] - c0[2] * along,
    ];
    let n1 = dot(&c1, &c1).sqrt();
    let ok = n1.gt(Lanes::splat(1e-12)) & c0[0].is_finite() & c0[1].is_finite() & c0[2].is_finite();
    let c1 = c1.map(|c| c / n1);
    let rotation = with_cross(c0, c1);
    let mut m = identity_lanes();
    for i in 0..3 {
        for j in 0..3 {
            m[i][j] = ok.select(rotation[i][j], m[i][j]);
        }
    }
    m
}

/// `F = sum_k x_k g_k'` per lane.
#[inline(always)]
fn gradient_lanes(x: &[Vec3], verts: &[[u32; LANES]; 4], g: &[[Lanes; 3]; 4]) -> Mat3Lanes {
    let mut f = [[Lanes::splat(0.0); 3]; 3];
    for k in 0..4 {
        let p = verts[k].map(|v| x[v as usize]);
        for i in 0..3 {
            let mut xi = Lanes::splat(0.0);
            for l in 0..LANES {
                xi.0[l] = p[l][i];
            }
            for j in 0..3 {
                f[i][j] = f[i][j] + xi * g[k][j];
            }
        }
    }
    f
}

/// One block: `F`, the warm-started SVD, the projection and the contributions of its tets
/// (`out` holds fewer than [`LANES`] entries in a padded last block).
#[inline(always)]
fn block(task: &Task<'_>, b: usize, frame: &mut Mat3Lanes, out: &mut [[Vec3; 4]]) {
    let blocks = task.blocks;
    let (verts, g, w) = (&blocks.verts[b], &blocks.grads[b], &blocks.weights[b]);
    let f = gradient_lanes(task.x, verts, g);
    // F V_prev = U S W'  =>  F = U S (V_prev W)'.
    let svd = svd3_lanes(&mul(&f, frame));
    let v = orthonormalized(&mul(frame, &svd.v));
    *frame = v;

    // Per lane: d = w_c + w_v s(sigma) [+ w_l clamp(sigma)].
    let mut d = [w[0]; 3];
    if w[1].gt(Lanes::splat(0.0)).any() {
        let (mut s, converged) = volume_stretches_lanes(svd.sigma);
        for l in 0..out.len() {
            if !converged.get(l) {
                let general = volume_stretches_newton(Vec3::new(
                    svd.sigma[0].0[l],
                    svd.sigma[1].0[l],
                    svd.sigma[2].0[l],
                ));
                for c in 0..3 {
                    s[c].0[l] = general[c];
                }
            }
        }
        for c in 0..3 {
            d[c] = d[c] + w[1] * s[c];
        }
    }
    if let Some(limits) = task.limits {
        for c in 0..3 {
            let mut clamped = svd.sigma[c];
            for x in &mut clamped.0 {
                *x = x.clamp(limits.min_stretch, limits.max_stretch);
            }
            d[c] = d[c] + w[2] * clamped;
        }
    }
    // P = U diag(d) V'.
    let mut p = [[Lanes::splat(0.0); 3]; 3];
    for i in 0..3 {
        let ud = [svd.u[i][0] * d[0], svd.u[i][1] * d[1], svd.u[i][2] * d[2]];
        for j in 0..3 {
            p[i][j] = ud[0] * v[j][0] + ud[1] * v[j][1] + ud[2] * v[j][2];
        }
    }
    if let Some(start) = task.start {
        // P += w_d R S_n, R = U V'.
        let s = &start.blocks[b];
        let sn = [[s[0], s[3], s[4]], [s[3], s[1], s[5]], [s[4], s[5], s[2]]];
        let mut r = [[Lanes::splat(0.0); 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                r[i][j] = svd.u[i][0] * v[j][0] + svd.u[i][1] * v[j][1] + svd.u[i][2] * v[j][2];
            }
        }
        let rs = mul(&r, &sn);
        for i in 0..3 {
            for j in 0..3 {
                p[i][j] = p[i][j] + w[3] * rs[i][j];
            }
        }
    }
    for k in 0..4 {
        let mut pg = [Lanes::splat(0.0); 3];
        for i in 0..3 {
            pg[i] = p[i][0] * g[k][0] + p[i][1] * g[k][1] + p[i][2] * g[k][2];
        }
        for (l, tet) in out.iter_mut().enumerate() {
            tet[k] = Vec3::new(pg[0].0[l], pg[1].0[l], pg[2].0[l]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    #[test]
    fn multiplier_newton_matches_the_general_newton() {
        let mut rng = Rng(0xb10c_5eed);
        // Per scale: lanes the multiplier Newton settled.
        let mut taken = [0; 4];
        for it in 0..4000 {
            // Strong compression, mild compression, near rest, expansion.
            let scale = [0.3, 0.9, 1.0, 1.5][it % 4];
            let sigma: [Vec3; LANES] = std::array::from_fn(|_| {
                Vec3::new(
                    scale * (1.0 + 0.4 * rng.signed()),
                    scale * (1.0 + 0.4 * rng.signed()),
                    scale * (1.0 + 0.4 * rng.signed()),
                )
            });
            let lanes = std::array::from_fn(|c| Lanes(sigma.map(|s| s[c])));
            let (s, converged) = volume_stretches_lanes(lanes);
            for l in 0..LANES {
                let general = volume_stretches_newton(sigma[l]);
                if !converged.get(l) {
                    continue;
                }
                taken[it % 4] += 1;
                let fast = Vec3::new(s[0].0[l], s[1].0[l], s[2].0[l]);
                assert!(
                    (fast - general).norm() < 1e-9,
                    "{} -> {fast} vs {general}",
                    sigma[l]
                );
                assert!((fast.x * fast.y * fast.z - 1.0).abs() < 1e-13);
            }
        }
        // Within 40 % of rest (the usual strains) it settles every lane; strongly compressed
        // lanes (a stretch below 0.25) and strong expansions whose branch never reaches
        // `prod s = 1` go to the general Newton.
        let all = 1000 * LANES;
        assert_eq!([taken[1], taken[2]], [all, all], "{taken:?}");
        assert!(taken[0] > all / 4 && taken[3] > all / 8, "{taken:?}");
    }

    #[test]
    fn frames_set_from_rows_read_back_and_fill_the_padded_lanes() {
        let mut rng = Rng(0x5a7e_f4a3);
        // 11 tets: a full block and a padded one.
        let rows: Vec<[f64; 9]> = (0..11)
            .map(|_| std::array::from_fn(|_| rng.signed()))
            .collect();
        let mut frames = WarmFrames::default();
        frames.resize(3);
        frames.set_rows(&rows);
        assert!(frames.covers(11));
        assert_eq!(frames.rows(11).collect::<Vec<_>>(), rows);
        // The spare lanes hold the last tet's frame, as the local step leaves them.
        let last = &frames.blocks[1];
        for l in 3..LANES {
            for k in 0..9 {
                assert_eq!(last[k / 3][k % 3].0[l], rows[10][k]);
            }
        }
    }

    #[test]
    fn frames_are_orthonormalised_lane_by_lane() {
        let mut rng = Rng(0x0f7a_3e55);
        let rotation = |rng: &mut Rng| {
            let axis = Vec3::new(rng.signed(), rng.signed(), rng.signed());
            *nalgebra::Rotation3::from_scaled_axis(axis * 3.0).matrix()
        };
        // Rotations with round-off-sized drift (the fast path), one with a column 1 % long,
        // one degenerate and one not finite (the exact path), side by side.
        let mut inputs: Vec<Mat3> = (0..LANES - 3)
            .map(|_| rotation(&mut rng) + Mat3::from_fn(|_, _| 1e-13 * rng.signed()))
            .collect();
        let long = rotation(&mut rng) * Mat3::from_diagonal(&Vec3::new(1.01, 1.0, 1.0));
        inputs.extend([long, Mat3::zeros(), Mat3::from_element(f64::NAN)]);
        let lanes_of = |ms: &[Mat3]| -> Mat3Lanes {
            std::array::from_fn(|i| {
                std::array::from_fn(|j| Lanes(std::array::from_fn(|l| ms[l][(i, j)])))
            })
        };
        let got = orthonormalized(&lanes_of(&inputs));
        let lane = |m: &Mat3Lanes, l: usize| Mat3::from_fn(|i, j| m[i][j].0[l]);
        for (l, input) in inputs.iter().enumerate() {
            let r = lane(&got, l);
            if input.iter().all(|x| x.is_finite()) && input.norm() > 0.0 {
                assert!(
                    (r.transpose() * r - Mat3::identity()).norm() < 4e-16,
                    "lane {l}: {r}"
                );
                assert!((r.determinant() - 1.0).abs() < 4e-16);
                // The first column keeps its direction.
                let c0 = input.column(0).normalize();
                assert!((r.column(0) - c0).norm() < 1e-15, "lane {l}");
            } else {
                assert_eq!(r, Mat3::identity(), "lane {l}");
            }
        }
        // A lane's frame does not depend on its neighbours.
        let alone: Vec<Mat3> = (0..LANES).map(|_| inputs[0]).collect();
        let got_alone = orthonormalized(&lanes_of(&alone));
        assert_eq!(lane(&got_alone, 0), lane(&got, 0));
    }

    #[test]
    fn strongly_compressed_and_inverted_lanes_are_left_to_the_general_newton() {
        // Lanes 4.. repeat lanes 0..4.
        let lane = |values: [f64; 4]| Lanes(std::array::from_fn(|l| values[l % 4]));
        let lanes = [
            lane([1.0, 0.2, 1.1, 1.0]),
            lane([1.0, 1.0, 1.0, 0.9]),
            lane([1.0, 1.0, -0.5, 0.8]),
        ];
        let (s, converged) = volume_stretches_lanes(lanes);
        let expected = [true, false, false, true];
        for l in 0..LANES {
            assert_eq!(converged.get(l), expected[l % 4], "lane {l}");
        }
        // At rest the stretches are returned unchanged.
        assert_eq!([s[0].0[0], s[1].0[0], s[2].0[0]], [1.0, 1.0, 1.0]);
    }
}
