//! [`IslandMatrix`]: an island's `A` as an operator, each member's matrix on its block of
//! unknowns (the PD matrix, or with the Newton solver the Newton matrix), for the MPRGP solve
//! ([`super::Island::solve`]), its warm start and the Newton line search. A leaf of the island.

use super::layout::Layout;
use crate::sim::math::Vec3;
use crate::sim::qp::SpdOperator;
use crate::sim::world::body::SoftBody;

/// The island's `A`: each member's matrix on its block of unknowns, the PD matrix or, with
/// the Newton solver, the Newton matrix of the current iteration.
pub(super) struct IslandMatrix<'a> {
    pub(super) bodies: &'a [SoftBody],
    pub(super) members: &'a [u32],
    pub(super) layout: Layout<'a>,
    pub(super) unknowns: usize,
}

/// One member's block of an [`IslandMatrix`].
enum MemberMatrix<'a> {
    /// The PD system (its matrix acts alike on x, y and z).
    Pd(&'a crate::sim::pd::PdSystem),
    /// The Newton matrix over the member's 3-vectors.
    Newton(crate::sim::fem::constrained::NewtonOperator<'a>),
}

/// Unknowns of an island's product below which its members' blocks are multiplied on one
/// thread: a product of a few thousand unknowns costs less than handing it to another.
const PARALLEL_UNKNOWNS: usize = 8192;

impl IslandMatrix<'_> {
    /// Each member's matrix, its first unknown and its number of unknowns.
    fn blocks(&self) -> impl Iterator<Item = (MemberMatrix<'_>, usize, usize)> + '_ {
        self.blocks_of(self.members)
    }

    /// As [`IslandMatrix::blocks`], for some of the members.
    fn blocks_of<'s>(
        &'s self,
        members: &'s [u32],
    ) -> impl Iterator<Item = (MemberMatrix<'s>, usize, usize)> + 's {
        members.iter().filter_map(|&b| self.block(b))
    }

    /// Member `b`'s matrix, first unknown and number of unknowns (`None` without a system).
    fn block(&self, b: u32) -> Option<(MemberMatrix<'_>, usize, usize)> {
        let body = &self.bodies[b as usize];
        let pd = body.pd.as_ref()?;
        let matrix = match &body.newton {
            Some(state) => MemberMatrix::Newton(state.system.operator()),
            None => MemberMatrix::Pd(pd),
        };
        let o = self.layout.offset_of[b as usize] as usize;
        Some((matrix, o, pd.free_vertices().len()))
    }

    /// Runs `f(matrix, first unknown, unknowns, out block, tmp block)` for every member of
    /// `members`, whose blocks are `out` and `tmp` (starting at unknown `base`), in parallel
    /// halves of the members where the blocks are large (each member's arithmetic is the same
    /// either way, so the product does not depend on the thread count; no allocation).
    fn for_each_block<F>(
        &self,
        members: &[u32],
        base: usize,
        out: &mut [Vec3],
        tmp: &mut [Vec3],
        f: &F,
    ) where
        F: Fn(MemberMatrix<'_>, usize, usize, &mut [Vec3], &mut [Vec3]) + Sync,
    {
        if members.len() > 1 && out.len() >= PARALLEL_UNKNOWNS {
            let mid = members.len() / 2;
            let split = self.layout.offset_of[members[mid] as usize] as usize - base;
            let (out_lo, out_hi) = out.split_at_mut(split);
            let (tmp_lo, tmp_hi) = tmp.split_at_mut(split.min(tmp.len()));
            rayon::join(
                || self.for_each_block(&members[..mid], base, out_lo, tmp_lo, f),
                || self.for_each_block(&members[mid..], base + split, out_hi, tmp_hi, f),
            );
            return;
        }
        for (matrix, o, n) in self.blocks_of(members) {
            let r = o - base..o - base + n;
            let t = if tmp.is_empty() { 0..0 } else { r.clone() };
            f(matrix, o, n, &mut out[r], &mut tmp[t]);
        }
    }
}

impl SpdOperator for IslandMatrix<'_> {
    fn len(&self) -> usize {
        self.unknowns
    }
    fn apply(&self, x: &[Vec3], out: &mut [Vec3]) {
        let f = |matrix: MemberMatrix<'_>, o: usize, n: usize, out: &mut [Vec3], _: &mut [Vec3]| {
            let x = &x[o..o + n];
            match matrix {
                MemberMatrix::Pd(pd) => pd.matrix().mul_vec3(x, out),
                MemberMatrix::Newton(m) => m.apply(x, out),
            }
        };
        self.for_each_block(self.members, 0, &mut out[..self.unknowns], &mut [], &f);
    }
    fn diagonal(&self, out: &mut [Vec3]) {
        for (matrix, o, n) in self.blocks() {
            let out = &mut out[o..o + n];
            match matrix {
                MemberMatrix::Pd(pd) => SpdOperator::diagonal(pd.matrix(), out),
                MemberMatrix::Newton(m) => m.diagonal(out),
            }
        }
    }
    fn jacobi_scale(&self, out: &mut [Vec3]) {
        for (matrix, o, n) in self.blocks() {
            let out = &mut out[o..o + n];
            match matrix {
                MemberMatrix::Pd(pd) => pd.jacobi_scale_into(out),
                MemberMatrix::Newton(m) => m.jacobi_scale(out),
            }
        }
    }
    fn product_row(&self, x: &[Vec3], v: usize) -> Option<Vec3> {
        // The members' blocks follow each other in order: the last member starting at or
        // before `v` holds it (one without a system has no unknowns).
        let offsets = &self.layout.offset_of;
        let k = self
            .members
            .partition_point(|&b| offsets[b as usize] as usize <= v);
        let (matrix, o, n) = self.block(*self.members.get(k.checked_sub(1)?)?)?;
        if v >= o + n {
            return None;
        }
        let x = &x[o..o + n];
        match matrix {
            MemberMatrix::Pd(pd) => Some(pd.matrix().mul_row(x, v - o)),
            MemberMatrix::Newton(m) => m.product_row(x, v - o),
        }
    }
    fn has_coarse_space(&self) -> bool {
        self.blocks()
            .any(|(m, _, _)| matches!(m, MemberMatrix::Pd(pd) if pd.coarse_space().is_some()))
    }
    fn add_coarse_correction(&self, r: &[Vec3], coarse: &mut Vec<Vec3>, out: &mut [Vec3]) {
        // `A` is block diagonal over the members, and so is the coarse space: each member's
        // own grid on its own block.
        for (matrix, o, n) in self.blocks() {
            if let MemberMatrix::Pd(pd) = matrix {
                pd.add_coarse_correction(&r[o..o + n], coarse, &mut out[o..o + n]);
            }
        }
    }
    fn apply_scaled(&self, scale: &[Vec3], x: &[Vec3], tmp: &mut [Vec3], out: &mut [Vec3]) {
        let f =
            |matrix: MemberMatrix<'_>, o: usize, n: usize, out: &mut [Vec3], tmp: &mut [Vec3]| {
                let x = &x[o..o + n];
                match matrix {
                    MemberMatrix::Pd(pd) => pd.apply_jacobi_scaled(x, out),
                    MemberMatrix::Newton(m) => m.apply_scaled(&scale[o..o + n], x, tmp, out),
                }
            };
        let n = self.unknowns;
        self.for_each_block(self.members, 0, &mut out[..n], &mut tmp[..n], &f);
    }
}
