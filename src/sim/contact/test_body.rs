//! A body for the narrowphase tests: a mesh moving from one set of positions to another, with
//! its BVHs (vertex, triangle and edge trees) fitted over the motion.

use super::broadphase::BodyBvh;
use super::edge_edge::fit_edge_bvh;
use super::soft::{SoftSurface, fit_surface_bvh};
use super::surface_shape::SurfaceShape;
use crate::sim::math::Vec3;
use crate::sim::mesh::TetMesh;

/// A mesh moving from `start` to `end` (m), its trees fitted with a 1 cm margin.
pub(crate) struct MovingBody {
    pub mesh: TetMesh,
    pub start: Vec<Vec3>,
    pub end: Vec<Vec3>,
    pub bvh: BodyBvh,
}

impl MovingBody {
    /// The mesh's rest positions moved by `place`, then translated by `motion` (m).
    pub fn placed(mesh: TetMesh, place: impl Fn(&Vec3) -> Vec3, motion: Vec3) -> Self {
        let start: Vec<Vec3> = mesh.rest_positions().iter().map(place).collect();
        let end = start.iter().map(|p| p + motion).collect();
        Self::from_positions(mesh, start, end)
    }

    /// The mesh's rest positions shifted by `offset`, then translated by `motion` (m).
    pub fn new(mesh: TetMesh, offset: Vec3, motion: Vec3) -> Self {
        Self::placed(mesh, |p| p + offset, motion)
    }

    /// The mesh moving between the given positions (m).
    pub fn from_positions(mesh: TetMesh, start: Vec<Vec3>, end: Vec<Vec3>) -> Self {
        let mut body = Self {
            mesh,
            start,
            end,
            bvh: BodyBvh::default(),
        };
        let margin = 0.01;
        fit_surface_bvh(
            &mut body.bvh,
            SurfaceShape::Tet(&body.mesh),
            &body.start,
            &body.end,
            margin,
            &mut Vec::new(),
        );
        fit_edge_bvh(
            &mut body.bvh,
            SurfaceShape::Tet(&body.mesh),
            &body.start,
            &body.end,
            margin,
        );
        body
    }

    /// What the narrowphase reads, under body index `body`.
    pub fn surface(&self, body: u32) -> SoftSurface<'_> {
        SoftSurface {
            body,
            shape: SurfaceShape::Tet(&self.mesh),
            x_start: &self.start,
            x_end: &self.end,
            x_reference: &self.start,
            bvh: &self.bvh,
        }
    }
}
