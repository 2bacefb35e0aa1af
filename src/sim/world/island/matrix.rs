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

impl IslandMatrix<'_> {
    /// Each member's matrix, its first unknown and its number of unknowns.
    fn blocks(&self) -> impl Iterator<Item = (MemberMatrix<'_>, usize, usize)> + '_ {
        self.members.iter().filter_map(|&b| {
            let body = &self.bodies[b as usize];
            let pd = body.pd.as_ref()?;
            let matrix = match &body.newton {
                Some(state) => MemberMatrix::Newton(state.system.operator()),
                None => MemberMatrix::Pd(pd),
            };
            let o = self.layout.offset_of[b as usize] as usize;
            Some((matrix, o, pd.free_vertices().len()))
        })
    }
}

impl SpdOperator for IslandMatrix<'_> {
    fn len(&self) -> usize {
        self.unknowns
    }
    fn apply(&self, x: &[Vec3], out: &mut [Vec3]) {
        for (matrix, o, n) in self.blocks() {
            let (x, out) = (&x[o..o + n], &mut out[o..o + n]);
            match matrix {
                MemberMatrix::Pd(pd) => pd.matrix().mul_vec3(x, out),
                MemberMatrix::Newton(m) => m.apply(x, out),
            }
        }
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
        let (matrix, o, n) = self.blocks().find(|&(_, o, n)| (o..o + n).contains(&v))?;
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
        for (matrix, o, n) in self.blocks() {
            let (x, out) = (&x[o..o + n], &mut out[o..o + n]);
            match matrix {
                MemberMatrix::Pd(pd) => pd.apply_jacobi_scaled(x, out),
                MemberMatrix::Newton(m) => {
                    m.apply_scaled(&scale[o..o + n], x, &mut tmp[o..o + n], out)
                }
            }
        }
    }
}
