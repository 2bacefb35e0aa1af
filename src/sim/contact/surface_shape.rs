//! The surface a body touches other bodies with: its tet mesh's boundary, or the triangle mesh
//! it is drawn with, embedded in its tets ([`DrawnMesh`]).
//!
//! Soft-soft detection ([`super::soft`], [`super::overlap`]) reads a body's surface through
//! [`SurfaceShape`]: a list of *surface points* (the tet mesh's boundary vertices, or every
//! drawn point), triangles over them, and each point's one-ring for self-collision. Positions
//! handed to the detection are per point: the vertex positions themselves for a tet surface,
//! the drawn points' positions (`sum_k w_k x_k` over their tet, [`EmbeddedPoint::position`])
//! for a drawn one. A contact's point indices are therefore mesh vertices on a tet surface and
//! drawn points on a drawn one; the island expands a drawn point into its tet's vertices.
//!
//! Edge-edge contacts ([`super::edge_edge`]) read the surface's edges the same way: a tet
//! surface's boundary edges between mesh vertices, or a drawn mesh's edges between drawn points,
//! each with the two triangles that share it.

use crate::sim::embed::EmbeddedPoint;
use crate::sim::math::Vec3;
use crate::sim::mesh::{TetMesh, edge_adjacency, surface_rings};

/// A triangle mesh a body is drawn with, its points embedded in the body's tets: what the
/// body touches other bodies with once [`crate::sim::SoftWorld::set_drawn_mesh`] gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct DrawnMesh {
    points: Vec<EmbeddedPoint>,
    triangles: Vec<[u32; 3]>,
    /// `0..points.len()`: every point is a surface point.
    vertices: Vec<u32>,
    ring_starts: Vec<u32>,
    ring: Vec<u32>,
    /// The edges `[a, b]` (`a < b`, sorted), and per edge two triangles sharing it (the same
    /// one twice on an open border).
    edges: Vec<[u32; 2]>,
    edge_triangles: Vec<[u32; 2]>,
    closed: bool,
}

impl DrawnMesh {
    /// The mesh of `points` and `triangles` (indices into `points`), both checked by the
    /// caller: every index in range, no triangle with a repeated corner.
    pub(crate) fn new(points: Vec<EmbeddedPoint>, triangles: Vec<[u32; 3]>) -> Self {
        let n = points.len();
        let (ring_starts, ring) = surface_rings(n, &triangles);
        let closed = is_closed(&triangles);
        let (edges, edge_triangles) = edge_adjacency(&triangles);
        Self {
            vertices: (0..n as u32).collect(),
            points,
            triangles,
            ring_starts,
            ring,
            edges,
            edge_triangles,
            closed,
        }
    }

    /// The drawn points, embedded in the body's tets.
    pub fn points(&self) -> &[EmbeddedPoint] {
        &self.points
    }

    /// The triangles, indices into [`DrawnMesh::points`].
    pub fn triangles(&self) -> &[[u32; 3]] {
        &self.triangles
    }

    /// Whether every edge is shared by exactly two triangles (a closed surface, whose inside a
    /// ray's crossings tell).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The points' positions (m) for the body's vertex positions `x` (m), into `out`.
    pub fn positions_into(&self, x: &[Vec3], out: &mut Vec<Vec3>) {
        out.clear();
        out.extend(self.points.iter().map(|p| p.position(x)));
    }

    fn ring(&self, v: u32) -> &[u32] {
        let v = v as usize;
        &self.ring[self.ring_starts[v] as usize..self.ring_starts[v + 1] as usize]
    }
}

/// Whether every undirected edge of `triangles` belongs to exactly two of them.
fn is_closed(triangles: &[[u32; 3]]) -> bool {
    let mut edges: Vec<[u32; 2]> = triangles
        .iter()
        .flat_map(|t| {
            (0..3).map(move |k| {
                let (a, b) = (t[k], t[(k + 1) % 3]);
                [a.min(b), a.max(b)]
            })
        })
        .collect();
    edges.sort_unstable();
    !edges.is_empty() && edges.chunk_by(|a, b| a == b).all(|same| same.len() == 2)
}

/// What soft-soft detection reads of a body's surface (see the module docs).
#[derive(Debug, Clone, Copy)]
pub enum SurfaceShape<'a> {
    /// The tet mesh's boundary: surface points are mesh vertices.
    Tet(&'a TetMesh),
    /// A drawn triangle mesh: surface points are its points.
    Drawn(&'a DrawnMesh),
}

impl<'a> SurfaceShape<'a> {
    /// The surface points (indices into the positions the detection is given).
    pub fn vertices(&self) -> &'a [u32] {
        match self {
            SurfaceShape::Tet(m) => m.surface_vertices(),
            SurfaceShape::Drawn(d) => &d.vertices,
        }
    }

    /// The triangles over the surface points, outward by the right-hand rule.
    pub fn triangles(&self) -> &'a [[u32; 3]] {
        match self {
            SurfaceShape::Tet(m) => m.surface_triangles(),
            SurfaceShape::Drawn(d) => &d.triangles,
        }
    }

    /// Point `v`'s neighbours along the surface's edges, sorted.
    pub fn ring(&self, v: u32) -> &'a [u32] {
        match self {
            SurfaceShape::Tet(m) => m.surface_ring(v),
            SurfaceShape::Drawn(d) => d.ring(v),
        }
    }

    /// Whether a self-collision test of point `v` against triangle `t` is meaningless: `v` is
    /// a corner of `t` or shares an edge with one.
    pub fn is_near_triangle(&self, v: u32, t: &[u32; 3]) -> bool {
        self.is_near(v, t)
    }

    /// Whether point `v` is one of `points` or shares an edge with one.
    fn is_near(&self, v: u32, points: &[u32]) -> bool {
        let ring = self.ring(v);
        points
            .iter()
            .any(|&c| c == v || ring.binary_search(&c).is_ok())
    }

    /// The surface's edges `[a, b]` between surface points (`a < b`, sorted).
    pub fn edges(&self) -> &'a [[u32; 2]] {
        match self {
            SurfaceShape::Tet(m) => m.surface_edges(),
            SurfaceShape::Drawn(d) => &d.edges,
        }
    }

    /// Per edge (same order as [`SurfaceShape::edges`]): two triangles sharing it, indices into
    /// [`SurfaceShape::triangles`] (the same one twice where only one does).
    pub fn edge_triangles(&self) -> &'a [[u32; 2]] {
        match self {
            SurfaceShape::Tet(m) => m.edge_triangles(),
            SurfaceShape::Drawn(d) => &d.edge_triangles,
        }
    }

    /// Whether two edges are neighbours for a self-collision test: they share a point or an
    /// edge joins one's point to the other's.
    pub fn are_near_edges(&self, e: &[u32; 2], f: &[u32; 2]) -> bool {
        e.iter().any(|&v| self.is_near(v, f))
    }

    /// The tet mesh, for a tet surface.
    pub fn tet(&self) -> Option<&'a TetMesh> {
        match self {
            SurfaceShape::Tet(m) => Some(m),
            SurfaceShape::Drawn(_) => None,
        }
    }

    /// Whether the surface is closed, so that a ray's crossings tell its inside (a tet mesh's
    /// boundary always is).
    pub fn is_closed(&self) -> bool {
        match self {
            SurfaceShape::Tet(_) => true,
            SurfaceShape::Drawn(d) => d.closed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drawn_tetrahedron_is_closed_and_its_rings_are_its_edges() {
        let points = vec![EmbeddedPoint::vertex(0); 4];
        let closed = DrawnMesh::new(points, vec![[0, 2, 1], [0, 1, 3], [1, 2, 3], [0, 3, 2]]);
        assert!(closed.is_closed());
        let shape = SurfaceShape::Drawn(&closed);
        assert_eq!(shape.ring(0), &[1, 2, 3]);
        assert!(shape.is_near_triangle(0, &[1, 2, 3]));
        assert_eq!(shape.vertices(), &[0, 1, 2, 3]);
    }

    #[test]
    fn an_open_strip_is_not_closed_and_its_ends_are_not_neighbours() {
        let strip = DrawnMesh::new(
            vec![EmbeddedPoint::vertex(0); 6],
            vec![[0, 1, 2], [1, 3, 2], [2, 3, 4], [3, 5, 4]],
        );
        assert!(!strip.is_closed());
        let shape = SurfaceShape::Drawn(&strip);
        assert_eq!(shape.ring(0), &[1, 2]);
        assert!(shape.is_near_triangle(0, &[1, 3, 2]));
        assert!(!shape.is_near_triangle(0, &[3, 5, 4]));
    }
}
