//! [`ClothMesh`]: a checked triangle mesh at rest, with the hinges (interior edges and their two
//! opposite vertices) the bending model needs.

use std::collections::HashMap;

use thiserror::Error;

use crate::sim::math::Vec3;

/// Why a [`ClothMesh`] was refused (the item is named).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ClothMeshError {
    /// No triangle.
    #[error("the cloth has no triangle")]
    Empty,
    /// A vertex coordinate is NaN or infinite.
    #[error("vertex {vertex} has a non-finite coordinate")]
    NonFinite {
        /// The vertex.
        vertex: usize,
    },
    /// A triangle names a vertex that does not exist.
    #[error("triangle {triangle} names vertex {index}, of {vertices}")]
    IndexOutOfRange {
        /// The triangle.
        triangle: usize,
        /// The index it names.
        index: usize,
        /// The number of vertices.
        vertices: usize,
    },
    /// A triangle has a repeated vertex or no area.
    #[error("triangle {triangle} is degenerate (repeated vertex or zero area)")]
    Degenerate {
        /// The triangle.
        triangle: usize,
    },
    /// An edge is shared by more than two triangles.
    #[error("edge ({a}, {b}) is shared by more than two triangles")]
    NonManifoldEdge {
        /// One end of the edge.
        a: usize,
        /// The other end.
        b: usize,
    },
    /// Two vertices sit at the same position (a seam to weld before simulating).
    #[error("vertices {first} and {second} are at the same position")]
    DuplicateVertex {
        /// The first of the two.
        first: usize,
        /// The second.
        second: usize,
    },
    /// A vertex belongs to no triangle (it would have no mass).
    #[error("vertex {vertex} belongs to no triangle")]
    UnusedVertex {
        /// The vertex.
        vertex: usize,
    },
}

/// An interior edge `(v0, v1)` with the vertex opposite it in each of its two triangles,
/// `v2` in the first and `v3` in the second.
pub type Hinge = [u32; 4];

/// A cloth's triangle mesh at rest (m): positions, triangles and hinges, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ClothMesh {
    rest: Vec<Vec3>,
    triangles: Vec<[u32; 3]>,
    hinges: Vec<Hinge>,
}

impl ClothMesh {
    /// A cloth of `triangles` over `positions` (m), at rest as given.
    ///
    /// # Errors
    /// A [`ClothMeshError`] naming the first bad item: no triangle, a non-finite coordinate,
    /// an index out of range, a degenerate triangle, an edge of more than two triangles, two
    /// vertices at one position, or a vertex of no triangle.
    pub fn new(positions: Vec<Vec3>, triangles: &[[usize; 3]]) -> Result<Self, ClothMeshError> {
        if triangles.is_empty() {
            return Err(ClothMeshError::Empty);
        }
        if let Some(vertex) = positions
            .iter()
            .position(|p| !p.iter().all(|c| c.is_finite()))
        {
            return Err(ClothMeshError::NonFinite { vertex });
        }
        let vertices = positions.len();
        let mut used = vec![false; vertices];
        for (triangle, t) in triangles.iter().enumerate() {
            if let Some(&index) = t.iter().find(|&&i| i >= vertices) {
                return Err(ClothMeshError::IndexOutOfRange {
                    triangle,
                    index,
                    vertices,
                });
            }
            let [a, b, c] = t.map(|i| positions[i]);
            let scale = (b - a).norm_squared().max((c - a).norm_squared());
            let area2 = (b - a).cross(&(c - a)).norm();
            if t[0] == t[1] || t[1] == t[2] || t[0] == t[2] || !(area2 > 1e-12 * scale) {
                return Err(ClothMeshError::Degenerate { triangle });
            }
            t.iter().for_each(|&i| used[i] = true);
        }
        if let Some(vertex) = used.iter().position(|&u| !u) {
            return Err(ClothMeshError::UnusedVertex { vertex });
        }
        let mut seen: HashMap<[u64; 3], usize> = HashMap::with_capacity(vertices);
        for (v, p) in positions.iter().enumerate() {
            // +0.0 and -0.0 are one position.
            let key = [p.x, p.y, p.z].map(|c| (c + 0.0).to_bits());
            if let Some(&first) = seen.get(&key) {
                return Err(ClothMeshError::DuplicateVertex { first, second: v });
            }
            seen.insert(key, v);
        }
        let triangles: Vec<[u32; 3]> = triangles.iter().map(|t| t.map(|i| i as u32)).collect();
        let hinges = hinges(&triangles)?;
        Ok(Self {
            rest: positions,
            triangles,
            hinges,
        })
    }

    /// A rectangle of `width` x `depth` (m) in the plane `y = 0`, centred on the origin, with
    /// `columns` x `rows` cells (at least 1 each), each split into two triangles along
    /// alternating diagonals. Vertex `i + j (columns + 1)` is at column `i`, row `j`, from the
    /// corner at `(-width / 2, 0, -depth / 2)`.
    ///
    /// # Errors
    /// [`ClothMeshError::Degenerate`] for a non-positive or non-finite size, or no cell.
    pub fn rectangle(
        width: f64,
        depth: f64,
        columns: usize,
        rows: usize,
    ) -> Result<Self, ClothMeshError> {
        if !(width > 0.0 && depth > 0.0 && width.is_finite() && depth.is_finite())
            || columns == 0
            || rows == 0
        {
            return Err(ClothMeshError::Degenerate { triangle: 0 });
        }
        let at = |i: usize, j: usize| i + j * (columns + 1);
        let positions = (0..=rows)
            .flat_map(|j| {
                (0..=columns).map(move |i| {
                    Vec3::new(
                        width * (i as f64 / columns as f64 - 0.5),
                        0.0,
                        depth * (j as f64 / rows as f64 - 0.5),
                    )
                })
            })
            .collect();
        let mut triangles = Vec::with_capacity(2 * columns * rows);
        for j in 0..rows {
            for i in 0..columns {
                let (a, b, c, d) = (at(i, j), at(i + 1, j), at(i + 1, j + 1), at(i, j + 1));
                if (i + j) % 2 == 0 {
                    triangles.extend([[a, d, c], [a, c, b]]);
                } else {
                    triangles.extend([[a, d, b], [b, d, c]]);
                }
            }
        }
        Self::new(positions, &triangles)
    }

    /// The same triangles at rest positions `f(p)` of this mesh's (a rectangle stood upright as
    /// a flag, or rolled into a cape's fold).
    ///
    /// # Errors
    /// As [`ClothMesh::new`], where `f` makes a triangle degenerate, two vertices coincide or a
    /// coordinate non-finite.
    pub fn mapped(&self, f: impl Fn(Vec3) -> Vec3) -> Result<Self, ClothMeshError> {
        let triangles: Vec<[usize; 3]> = self
            .triangles
            .iter()
            .map(|t| t.map(|v| v as usize))
            .collect();
        Self::new(self.rest.iter().map(|&p| f(p)).collect(), &triangles)
    }

    /// Rest positions (m).
    pub fn rest_positions(&self) -> &[Vec3] {
        &self.rest
    }

    /// Triangles (vertex indices).
    pub fn triangles(&self) -> &[[u32; 3]] {
        &self.triangles
    }

    /// Interior edges with their opposite vertices (see [`Hinge`]).
    pub fn hinges(&self) -> &[Hinge] {
        &self.hinges
    }

    /// Number of vertices.
    pub fn vertex_count(&self) -> usize {
        self.rest.len()
    }
}

/// The interior edges of `triangles` with their opposite vertices, in the order their
/// second triangle is met; an error for an edge of more than two triangles.
fn hinges(triangles: &[[u32; 3]]) -> Result<Vec<Hinge>, ClothMeshError> {
    // Per edge (sorted ends): the opposite vertex of its first triangle, and how many it has.
    let mut edges: HashMap<(u32, u32), (u32, u32)> = HashMap::with_capacity(3 * triangles.len());
    let mut hinges = Vec::new();
    for t in triangles {
        for k in 0..3 {
            let (a, b, opposite) = (t[k], t[(k + 1) % 3], t[(k + 2) % 3]);
            let key = (a.min(b), a.max(b));
            let entry = edges.entry(key).or_insert((opposite, 0));
            entry.1 += 1;
            match entry.1 {
                1 => {}
                2 => hinges.push([key.0, key.1, entry.0, opposite]),
                _ => {
                    return Err(ClothMeshError::NonManifoldEdge {
                        a: key.0 as usize,
                        b: key.1 as usize,
                    });
                }
            }
        }
    }
    Ok(hinges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rectangle_has_its_cells_triangles_and_interior_edges() {
        let m = ClothMesh::rectangle(2.0, 1.0, 4, 3).unwrap();
        assert_eq!(m.vertex_count(), 5 * 4);
        assert_eq!(m.triangles().len(), 2 * 4 * 3);
        // Interior edges: all edges minus the boundary's. Edges = 3 T / 2 + boundary / 2.
        let boundary = 2 * (4 + 3);
        let edges = (3 * m.triangles().len() + boundary) / 2;
        assert_eq!(m.hinges().len(), edges - boundary);
        let area: f64 = m
            .triangles()
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|i| m.rest_positions()[i as usize]);
                0.5 * (b - a).cross(&(c - a)).norm()
            })
            .sum();
        assert!((area - 2.0).abs() < 1e-12);
    }

    #[test]
    fn bad_meshes_are_refused_naming_the_item() {
        let p = vec![
            Vec3::zeros(),
            Vec3::x(),
            Vec3::z(),
            Vec3::new(1.0, 0.0, 1.0),
        ];
        let quad = [[0, 2, 1], [1, 2, 3]];
        assert!(ClothMesh::new(p.clone(), &quad).is_ok());
        assert_eq!(ClothMesh::new(p.clone(), &[]), Err(ClothMeshError::Empty));
        let mut nan = p.clone();
        nan[3].y = f64::NAN;
        assert_eq!(
            ClothMesh::new(nan, &quad),
            Err(ClothMeshError::NonFinite { vertex: 3 })
        );
        assert_eq!(
            ClothMesh::new(p.clone(), &[[0, 2, 1], [1, 2, 4]]),
            Err(ClothMeshError::IndexOutOfRange {
                triangle: 1,
                index: 4,
                vertices: 4
            })
        );
        assert_eq!(
            ClothMesh::new(p.clone(), &[[0, 2, 1], [1, 1, 3]]),
            Err(ClothMeshError::Degenerate { triangle: 1 })
        );
        let mut flat = p.clone();
        flat[3] = Vec3::new(2.0, 0.0, 0.0);
        assert_eq!(
            ClothMesh::new(flat, &[[0, 2, 1], [0, 1, 3]]),
            Err(ClothMeshError::Degenerate { triangle: 1 })
        );
        let mut fan = p.clone();
        fan.push(Vec3::new(0.5, 1.0, 0.5));
        assert_eq!(
            ClothMesh::new(fan, &[[0, 2, 1], [1, 2, 3], [1, 2, 4]]),
            Err(ClothMeshError::NonManifoldEdge { a: 1, b: 2 })
        );
        let mut twin = p.clone();
        twin.push(Vec3::x());
        assert_eq!(
            ClothMesh::new(twin, &[[0, 2, 1], [4, 2, 3]]),
            Err(ClothMeshError::DuplicateVertex {
                first: 1,
                second: 4
            })
        );
        let mut spare = p;
        spare.push(Vec3::y());
        assert_eq!(
            ClothMesh::new(spare, &quad),
            Err(ClothMeshError::UnusedVertex { vertex: 4 })
        );
        assert!(ClothMesh::rectangle(0.0, 1.0, 2, 2).is_err());
        assert!(ClothMesh::rectangle(1.0, 1.0, 0, 2).is_err());
    }
}
