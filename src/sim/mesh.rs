//! Tetrahedral meshes: rest geometry, validation and boundary surface.
//!
//! A [`TetMesh`] is the shared, immutable description of a soft body's rest shape: vertex rest
//! positions (m), tetrahedra as four vertex indices, and everything the solvers precompute from it
//! once — per-tet rest shape matrices `D_m = [X1-X0, X2-X0, X3-X0]` and their inverses (so the
//! deformation gradient is `F = D_s D_m^-1`, see [`crate::sim::pd`]), rest volumes
//! `V = det(D_m) / 6`, and the outward-oriented boundary triangles used for rendering and contact.
//!
//! # Validation
//! [`TetMesh::new`] never trusts its input. In order it rejects: an empty mesh, more vertices than
//! fit a `u32`, non-finite coordinates, indices out of range, a tet that repeats a vertex,
//! duplicate tets (the same four vertices twice), and degenerate tets — zero volume or slivers
//! whose quality `q = 6 sqrt(2) |V| / l_rms^3` (1 for a regular tet, 0 for a flat one, `l_rms` the
//! root-mean-square edge length) falls below [`MeshValidation::min_quality`]. Inverted tets
//! (negative signed volume) are reoriented by swapping two vertices and reported in
//! [`MeshFixes::reoriented_tets`], or rejected with [`InvertedTets::Reject`]. Vertices that no tet
//! references are dropped and reported in [`MeshFixes::dropped_vertices`].

use thiserror::Error;

use super::lattice::{LatticeTets, capsule_lattice, cuboid_lattice, sphere_lattice};
use super::math::{Mat3, Vec3};
use super::mesh_io::{MeshIoError, RawTetMesh, read_gmsh, read_tetgen};

/// What to do with tets whose signed volume is negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InvertedTets {
    /// Swap two vertices so the tet is positively oriented, and report it. Default.
    #[default]
    Reorient,
    /// Reject the mesh with [`MeshError::InvertedTet`].
    Reject,
}

/// Options of [`TetMesh::with_validation`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeshValidation {
    /// Smallest accepted tet quality `6 sqrt(2) |V| / l_rms^3` (dimensionless, regular tet = 1).
    /// Default: 1e-3.
    pub min_quality: f64,
    /// Policy for inverted tets. Default: [`InvertedTets::Reorient`].
    pub inverted: InvertedTets,
}

impl Default for MeshValidation {
    fn default() -> Self {
        Self {
            min_quality: 1e-3,
            inverted: InvertedTets::Reorient,
        }
    }
}

/// Why a tet mesh was rejected. Indices refer to the input as given.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MeshError {
    /// The mesh has no vertices or no tets.
    #[error("the mesh is empty ({vertices} vertices, {tets} tets)")]
    Empty {
        /// Number of vertices given.
        vertices: usize,
        /// Number of tets given.
        tets: usize,
    },
    /// A builder's lattice would have more cells than [`MAX_LATTICE_CELLS`].
    #[error(
        "the lattice would have {cells:.3e} cells; at most {max} are allowed (lower the resolution)"
    )]
    TooManyCells {
        /// Cells the sizes and resolution ask for.
        cells: f64,
        /// The limit.
        max: usize,
    },
    /// More vertices than a `u32` index can address.
    #[error("the mesh has {0} vertices; at most u32::MAX are supported")]
    TooManyVertices(usize),
    /// A vertex coordinate is NaN or infinite.
    #[error("vertex {vertex} has a non-finite coordinate {position:?}")]
    NonFiniteVertex {
        /// Index of the vertex.
        vertex: usize,
        /// Its coordinates.
        position: [f64; 3],
    },
    /// A tet names a vertex that does not exist.
    #[error("tet {tet} references vertex {index}, but the mesh has {vertex_count} vertices")]
    IndexOutOfRange {
        /// Index of the tet.
        tet: usize,
        /// The offending vertex index.
        index: usize,
        /// Number of vertices in the mesh.
        vertex_count: usize,
    },
    /// A tet uses the same vertex twice.
    #[error("tet {tet} repeats a vertex: {vertices:?}")]
    RepeatedVertex {
        /// Index of the tet.
        tet: usize,
        /// Its vertex indices.
        vertices: [usize; 4],
    },
    /// Two tets have the same four vertices.
    #[error("tet {tet} duplicates tet {duplicate_of}")]
    DuplicateTet {
        /// Index of the later tet.
        tet: usize,
        /// Index of the earlier tet with the same vertices.
        duplicate_of: usize,
    },
    /// A tet has (near) zero volume: its quality is below the threshold.
    #[error(
        "tet {tet} is degenerate: volume {volume:e} m^3, quality {quality:e} below {min_quality:e}"
    )]
    DegenerateTet {
        /// Index of the tet.
        tet: usize,
        /// Its signed volume (m^3).
        volume: f64,
        /// Its quality `6 sqrt(2) |V| / l_rms^3`.
        quality: f64,
        /// The threshold in force.
        min_quality: f64,
    },
    /// A tet is inverted and the policy was [`InvertedTets::Reject`].
    #[error("tet {tet} is inverted (signed volume {volume:e} m^3)")]
    InvertedTet {
        /// Index of the tet.
        tet: usize,
        /// Its signed volume (m^3).
        volume: f64,
    },
    /// A builder got a size that is not finite and positive.
    #[error("{what} must be finite and > 0, got {value}")]
    InvalidSize {
        /// Which parameter.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// A mesh file could not be parsed.
    #[error("mesh file: {0}")]
    Io(#[from] MeshIoError),
    /// The surface to enclose ([`TetMesh::try_enclosing`]) is invalid.
    #[error("surface: {0}")]
    Surface(#[from] super::surface_error::SurfaceError),
}

/// Repairs made while validating a mesh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeshFixes {
    /// Tets (input indices) that were inverted and reoriented.
    pub reoriented_tets: Vec<usize>,
    /// Vertices (input indices) that no tet referenced and were dropped.
    pub dropped_vertices: Vec<usize>,
}

impl MeshFixes {
    /// True if nothing was repaired.
    pub fn is_empty(&self) -> bool {
        self.reoriented_tets.is_empty() && self.dropped_vertices.is_empty()
    }
}

/// A validated tetrahedral mesh in its rest configuration.
///
/// # Example
/// ```
/// use bevy_deformable::sim::{TetMesh, Vec3};
/// let cube = TetMesh::try_cuboid(Vec3::new(0.5, 0.5, 0.5), 4).unwrap();
/// assert!((cube.total_volume() - 1.0).abs() < 1e-12);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TetMesh {
    rest_positions: Vec<Vec3>,
    tets: Vec<[u32; 4]>,
    surface: Vec<[u32; 3]>,
    surface_vertices: Vec<u32>,
    /// Per vertex, the start of its surface neighbours in `ring` (`n + 1` entries).
    ring_starts: Vec<u32>,
    /// Surface neighbours (vertices sharing a boundary edge), sorted per vertex.
    ring: Vec<u32>,
    /// Boundary edges `[a, b]` with `a < b`, sorted.
    surface_edges: Vec<[u32; 2]>,
    /// Per boundary edge: two boundary triangles that share it (indices into `surface`).
    edge_triangles: Vec<[u32; 2]>,
    inv_rest_shape: Vec<Mat3>,
    rest_volumes: Vec<f64>,
    fixes: MeshFixes,
}

/// Signed volume (m^3) of the tet `(a, b, c, d)`.
#[inline]
pub fn signed_volume(a: &Vec3, b: &Vec3, c: &Vec3, d: &Vec3) -> f64 {
    (b - a).cross(&(c - a)).dot(&(d - a)) / 6.0
}

/// Quality `6 sqrt(2) |V| / l_rms^3` of the tet: 1 for a regular tet, 0 for a flat one.
pub fn tet_quality(a: &Vec3, b: &Vec3, c: &Vec3, d: &Vec3) -> f64 {
    let e2 = (b - a).norm_squared()
        + (c - a).norm_squared()
        + (d - a).norm_squared()
        + (c - b).norm_squared()
        + (d - b).norm_squared()
        + (d - c).norm_squared();
    let l_rms = (e2 / 6.0).sqrt();
    if l_rms == 0.0 {
        return 0.0;
    }
    6.0 * std::f64::consts::SQRT_2 * signed_volume(a, b, c, d).abs() / (l_rms * l_rms * l_rms)
}

impl TetMesh {
    /// Validates and builds a mesh with the default [`MeshValidation`].
    ///
    /// # Errors
    /// A [`MeshError`] naming the first offending vertex or tet (see the module docs).
    pub fn new(positions: Vec<Vec3>, tets: Vec<[usize; 4]>) -> Result<Self, MeshError> {
        Self::with_validation(positions, tets, MeshValidation::default())
    }

    /// Validates and builds a mesh with explicit validation options.
    ///
    /// # Errors
    /// A [`MeshError`] naming the first offending vertex or tet (see the module docs).
    pub fn with_validation(
        positions: Vec<Vec3>,
        mut tets: Vec<[usize; 4]>,
        options: MeshValidation,
    ) -> Result<Self, MeshError> {
        if positions.is_empty() || tets.is_empty() {
            return Err(MeshError::Empty {
                vertices: positions.len(),
                tets: tets.len(),
            });
        }
        if positions.len() > u32::MAX as usize {
            return Err(MeshError::TooManyVertices(positions.len()));
        }
        for (vertex, p) in positions.iter().enumerate() {
            if !(p.x.is_finite() && p.y.is_finite() && p.z.is_finite()) {
                return Err(MeshError::NonFiniteVertex {
                    vertex,
                    position: [p.x, p.y, p.z],
                });
            }
        }
        let n = positions.len();
        for (tet, t) in tets.iter().enumerate() {
            if let Some(&index) = t.iter().find(|&&i| i >= n) {
                return Err(MeshError::IndexOutOfRange {
                    tet,
                    index,
                    vertex_count: n,
                });
            }
            if t[0] == t[1]
                || t[0] == t[2]
                || t[0] == t[3]
                || t[1] == t[2]
                || t[1] == t[3]
                || t[2] == t[3]
            {
                return Err(MeshError::RepeatedVertex { tet, vertices: *t });
            }
        }
        // Duplicates: sort the tets by their sorted vertex sets.
        let mut keyed: Vec<([usize; 4], usize)> = tets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut k = *t;
                k.sort_unstable();
                (k, i)
            })
            .collect();
        keyed.sort_unstable();
        for w in keyed.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(MeshError::DuplicateTet {
                    tet: w[1].1,
                    duplicate_of: w[0].1,
                });
            }
        }
        drop(keyed);
        // Degenerate and inverted tets.
        let mut fixes = MeshFixes::default();
        for (tet, t) in tets.iter_mut().enumerate() {
            let [a, b, c, d] = t.map(|i| positions[i]);
            let volume = signed_volume(&a, &b, &c, &d);
            let quality = tet_quality(&a, &b, &c, &d);
            if !(quality >= options.min_quality) {
                return Err(MeshError::DegenerateTet {
                    tet,
                    volume,
                    quality,
                    min_quality: options.min_quality,
                });
            }
            if volume < 0.0 {
                match options.inverted {
                    InvertedTets::Reject => return Err(MeshError::InvertedTet { tet, volume }),
                    InvertedTets::Reorient => {
                        t.swap(2, 3);
                        fixes.reoriented_tets.push(tet);
                    }
                }
            }
        }
        // Drop unreferenced vertices.
        let mut used = vec![false; n];
        for t in &tets {
            for &i in t {
                used[i] = true;
            }
        }
        let mut remap = vec![u32::MAX; n];
        let mut rest_positions = Vec::with_capacity(n);
        for (i, p) in positions.iter().enumerate() {
            if used[i] {
                remap[i] = rest_positions.len() as u32;
                rest_positions.push(*p);
            } else {
                fixes.dropped_vertices.push(i);
            }
        }
        let tets: Vec<[u32; 4]> = tets.iter().map(|t| t.map(|i| remap[i])).collect();
        Ok(Self::from_validated(rest_positions, tets, fixes))
    }

    fn from_validated(rest_positions: Vec<Vec3>, tets: Vec<[u32; 4]>, fixes: MeshFixes) -> Self {
        let mut inv_rest_shape = Vec::with_capacity(tets.len());
        let mut rest_volumes = Vec::with_capacity(tets.len());
        for t in &tets {
            let [a, b, c, d] = t.map(|i| rest_positions[i as usize]);
            let dm = Mat3::from_columns(&[b - a, c - a, d - a]);
            // Validation guarantees a positive volume, so D_m is invertible.
            inv_rest_shape.push(dm.try_inverse().unwrap_or_else(Mat3::identity));
            rest_volumes.push(dm.determinant() / 6.0);
        }
        let surface = boundary_faces(&tets);
        let mut surface_vertices: Vec<u32> = surface.iter().flatten().copied().collect();
        surface_vertices.sort_unstable();
        surface_vertices.dedup();
        let (ring_starts, ring) = surface_rings(rest_positions.len(), &surface);
        let (surface_edges, edge_triangles) = edge_adjacency(&surface);
        Self {
            rest_positions,
            tets,
            surface,
            surface_vertices,
            ring_starts,
            ring,
            surface_edges,
            edge_triangles,
            inv_rest_shape,
            rest_volumes,
            fixes,
        }
    }

    fn from_lattice(lattice: LatticeTets) -> Result<Self, MeshError> {
        let positions = lattice.positions.iter().map(|p| Vec3::from(*p)).collect();
        Self::new(positions, lattice.tets)
    }

    /// A box centred at the origin with `half_extents` (m), `resolution` lattice cells along its
    /// longest side (at least 1).
    ///
    /// # Errors
    /// [`MeshError::InvalidSize`] if a half extent is not finite and positive,
    /// [`MeshError::TooManyCells`] past [`MAX_LATTICE_CELLS`].
    pub fn try_cuboid(half_extents: Vec3, resolution: usize) -> Result<Self, MeshError> {
        for (what, value) in [
            ("half extent x", half_extents.x),
            ("half extent y", half_extents.y),
            ("half extent z", half_extents.z),
        ] {
            check_size(what, value)?;
        }
        let r = resolution.max(1) as f64;
        check_lattice([r, r, r])?;
        Self::from_lattice(cuboid_lattice(
            [half_extents.x, half_extents.y, half_extents.z],
            resolution,
        ))
    }

    /// Infallible [`TetMesh::try_cuboid`] for sizes known to be valid.
    ///
    /// # Panics
    /// If a half extent is not finite and positive.
    pub fn cuboid(half_extents: Vec3, resolution: usize) -> Self {
        match Self::try_cuboid(half_extents, resolution) {
            Ok(m) => m,
            Err(e) => panic!("TetMesh::cuboid: {e}"),
        }
    }

    /// A ball of `radius` (m) centred at the origin, `resolution` lattice cells across its
    /// diameter (at least 2); boundary vertices are snapped onto the sphere.
    ///
    /// # Errors
    /// [`MeshError::InvalidSize`] if the radius is not finite and positive,
    /// [`MeshError::TooManyCells`] past [`MAX_LATTICE_CELLS`].
    pub fn try_sphere(radius: f64, resolution: usize) -> Result<Self, MeshError> {
        check_size("radius", radius)?;
        let r = resolution.max(2) as f64;
        check_lattice([r, r, r])?;
        Self::from_lattice(sphere_lattice(radius, resolution))
    }

    /// Infallible [`TetMesh::try_sphere`].
    ///
    /// # Panics
    /// If the radius is not finite and positive.
    pub fn sphere(radius: f64, resolution: usize) -> Self {
        match Self::try_sphere(radius, resolution) {
            Ok(m) => m,
            Err(e) => panic!("TetMesh::sphere: {e}"),
        }
    }

    /// A capsule along +Y: a cylinder of `radius` (m) between `y = -half_height` and
    /// `y = half_height` with hemispherical caps; `resolution` cells across the diameter.
    ///
    /// # Errors
    /// [`MeshError::InvalidSize`] if a size is not finite and positive,
    /// [`MeshError::TooManyCells`] past [`MAX_LATTICE_CELLS`] (a long, thin capsule at a high
    /// resolution).
    pub fn try_capsule(
        radius: f64,
        half_height: f64,
        resolution: usize,
    ) -> Result<Self, MeshError> {
        check_size("radius", radius)?;
        check_size("half height", half_height)?;
        let r = resolution.max(2) as f64;
        let cell = 2.0 * radius / r;
        check_lattice([r, r, ((2.0 * (half_height + radius)) / cell).ceil() + 1.0])?;
        Self::from_lattice(capsule_lattice(radius, half_height, resolution))
    }

    /// Infallible [`TetMesh::try_capsule`].
    ///
    /// # Panics
    /// If a size is not finite and positive.
    pub fn capsule(radius: f64, half_height: f64, resolution: usize) -> Self {
        match Self::try_capsule(radius, half_height, resolution) {
            Ok(m) => m,
            Err(e) => panic!("TetMesh::capsule: {e}"),
        }
    }

    /// Reads a TetGen `.node` / `.ele` pair (file contents) and validates the mesh.
    ///
    /// # Errors
    /// [`MeshError::Io`] with the line of a malformed file, or a validation error.
    pub fn from_tetgen(node_text: &str, ele_text: &str) -> Result<Self, MeshError> {
        Self::from_raw(read_tetgen(node_text, ele_text)?)
    }

    /// Reads a Gmsh ASCII `.msh` file (version 2.2 or 4.1, tetrahedra only) and validates it.
    ///
    /// # Errors
    /// [`MeshError::Io`] with the line of a malformed file, or a validation error.
    pub fn from_gmsh(msh_text: &str) -> Result<Self, MeshError> {
        Self::from_raw(read_gmsh(msh_text)?)
    }

    /// Validates a mesh as read by [`crate::sim::mesh_io`].
    ///
    /// # Errors
    /// A validation [`MeshError`].
    pub fn from_raw(raw: RawTetMesh) -> Result<Self, MeshError> {
        let positions = raw.positions.iter().map(|p| Vec3::from(*p)).collect();
        Self::new(positions, raw.tets)
    }

    /// Rest positions of the vertices (m).
    pub fn rest_positions(&self) -> &[Vec3] {
        &self.rest_positions
    }

    /// Tets as four vertex indices, positively oriented.
    pub fn tets(&self) -> &[[u32; 4]] {
        &self.tets
    }

    /// Boundary triangles, counter-clockwise seen from outside (normals point out).
    pub fn surface_triangles(&self) -> &[[u32; 3]] {
        &self.surface
    }

    /// Sorted indices of the vertices on the boundary.
    pub fn surface_vertices(&self) -> &[u32] {
        &self.surface_vertices
    }

    /// The one-ring of vertex `v` on the boundary: the vertices sharing a boundary edge with it,
    /// sorted (empty for an interior vertex).
    pub fn surface_ring(&self, v: u32) -> &[u32] {
        let v = v as usize;
        &self.ring[self.ring_starts[v] as usize..self.ring_starts[v + 1] as usize]
    }

    /// The boundary edges `[a, b]` (`a < b`, sorted): each edge of [`TetMesh::surface_triangles`]
    /// once.
    pub fn surface_edges(&self) -> &[[u32; 2]] {
        &self.surface_edges
    }

    /// Per boundary edge (same order as [`TetMesh::surface_edges`]): two boundary triangles
    /// sharing it (the same one twice where only one does, on a non-manifold surface).
    pub fn edge_triangles(&self) -> &[[u32; 2]] {
        &self.edge_triangles
    }

    /// Whether two boundary edges are neighbours for a self-collision test: they share a vertex
    /// or a boundary edge joins one's vertex to the other's.
    pub fn are_near_edges(&self, e: &[u32; 2], f: &[u32; 2]) -> bool {
        e.iter().any(|&v| {
            let ring = self.surface_ring(v);
            f.iter().any(|&c| c == v || ring.binary_search(&c).is_ok())
        })
    }

    /// Whether a self-collision test of vertex `v` against boundary triangle `t` is meaningless
    /// because they are neighbours: `v` is a corner of `t` or shares a boundary edge with one.
    pub fn is_near_triangle(&self, v: u32, t: &[u32; 3]) -> bool {
        let ring = self.surface_ring(v);
        t.iter().any(|&c| c == v || ring.binary_search(&c).is_ok())
    }

    /// Inverse rest shape matrix `D_m^-1` of each tet (1/m).
    pub fn inv_rest_shapes(&self) -> &[Mat3] {
        &self.inv_rest_shape
    }

    /// Rest volume of each tet (m^3), all positive.
    pub fn rest_volumes(&self) -> &[f64] {
        &self.rest_volumes
    }

    /// Sum of the rest volumes (m^3).
    pub fn total_volume(&self) -> f64 {
        self.rest_volumes.iter().sum()
    }

    /// The mesh's volume (m^3) at vertex positions `x`: the sum of its tets' signed volumes
    /// (an inverted tet subtracts). `None` where `x` does not have one position per vertex.
    pub fn volume_at(&self, x: &[Vec3]) -> Option<f64> {
        (x.len() == self.vertex_count()).then(|| {
            self.tets
                .iter()
                .map(|t| {
                    let [a, b, c, d] = t.map(|v| x[v as usize]);
                    signed_volume(&a, &b, &c, &d)
                })
                .sum()
        })
    }

    /// Number of vertices.
    pub fn vertex_count(&self) -> usize {
        self.rest_positions.len()
    }

    /// Number of tets.
    pub fn tet_count(&self) -> usize {
        self.tets.len()
    }

    /// Repairs made during validation.
    pub fn fixes(&self) -> &MeshFixes {
        &self.fixes
    }

    /// Lumped vertex masses (kg) for a density (kg/m^3): each tet gives a quarter of its mass to
    /// each of its vertices.
    pub fn lumped_masses(&self, density: f64) -> Vec<f64> {
        let mut m = vec![0.0; self.rest_positions.len()];
        for (t, v) in self.tets.iter().zip(&self.rest_volumes) {
            for &i in t {
                m[i as usize] += 0.25 * density * v;
            }
        }
        m
    }

    /// Axis-aligned bounds `(min, max)` of the rest positions (m).
    pub fn rest_bounds(&self) -> (Vec3, Vec3) {
        bounds(&self.rest_positions)
    }

    /// This mesh scaled by `scale` per axis (a spawn `Transform`'s scale, non-uniform allowed):
    /// the same topology, surface and repairs, without validating it again; the rest shapes and
    /// volumes follow exactly (`D_m' = S D_m`, `V' = det(S) V`).
    ///
    /// # Errors
    /// [`MeshError::InvalidSize`] for a scale component that is not finite and positive, and
    /// [`MeshError::NonFiniteVertex`] or [`MeshError::DegenerateTet`] where the scaled
    /// coordinates or volumes overflow or underflow `f64`.
    pub fn scaled(&self, scale: Vec3) -> Result<Self, MeshError> {
        for value in scale.iter() {
            if !(value.is_finite() && *value > 0.0) {
                return Err(MeshError::InvalidSize {
                    what: "mesh scale",
                    value: *value,
                });
            }
        }
        let mut out = self.clone();
        for (vertex, p) in out.rest_positions.iter_mut().enumerate() {
            *p = p.component_mul(&scale);
            if !p.iter().all(|c| c.is_finite()) {
                return Err(MeshError::NonFiniteVertex {
                    vertex,
                    position: [p.x, p.y, p.z],
                });
            }
        }
        let inverse_scale = Mat3::from_diagonal(&scale.map(|s| 1.0 / s));
        let det = scale.x * scale.y * scale.z;
        for (tet, (inv, volume)) in out
            .inv_rest_shape
            .iter_mut()
            .zip(out.rest_volumes.iter_mut())
            .enumerate()
        {
            *inv *= inverse_scale;
            *volume *= det;
            if !(volume.is_finite() && *volume > 0.0 && inv.iter().all(|c| c.is_finite())) {
                let [a, b, c, d] = out.tets[tet].map(|i| out.rest_positions[i as usize]);
                return Err(MeshError::DegenerateTet {
                    tet,
                    volume: *volume,
                    quality: tet_quality(&a, &b, &c, &d),
                    min_quality: MeshValidation::default().min_quality,
                });
            }
        }
        Ok(out)
    }
}

/// Per-vertex sorted neighbours along boundary edges, as `(starts, list)`.
pub(crate) fn surface_rings(n: usize, surface: &[[u32; 3]]) -> (Vec<u32>, Vec<u32>) {
    let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(6 * surface.len());
    for t in surface {
        for k in 0..3 {
            let (a, b) = (t[k], t[(k + 1) % 3]);
            pairs.push((a, b));
            pairs.push((b, a));
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    let mut starts = vec![0u32; n + 1];
    for &(a, _) in &pairs {
        starts[a as usize + 1] += 1;
    }
    for i in 0..n {
        starts[i + 1] += starts[i];
    }
    (starts, pairs.into_iter().map(|(_, b)| b).collect())
}

/// The boundary edges `[a, b]` (`a < b`, sorted) and, per edge, two triangles sharing it (the
/// same one twice where only one has it).
pub(crate) fn edge_adjacency(surface: &[[u32; 3]]) -> (Vec<[u32; 2]>, Vec<[u32; 2]>) {
    let mut sides: Vec<([u32; 2], u32)> = surface
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            (0..3).map(move |k| {
                let (a, b) = (t[k], t[(k + 1) % 3]);
                ([a.min(b), a.max(b)], i as u32)
            })
        })
        .collect();
    sides.sort_unstable();
    let mut edges: Vec<[u32; 2]> = Vec::with_capacity(sides.len() / 2);
    let mut triangles: Vec<[u32; 2]> = Vec::with_capacity(sides.len() / 2);
    for (e, t) in sides {
        if edges.last() == Some(&e) {
            let last = triangles.len() - 1;
            if triangles[last][0] == triangles[last][1] {
                triangles[last][1] = t;
            }
        } else {
            edges.push(e);
            triangles.push([t, t]);
        }
    }
    (edges, triangles)
}

/// Axis-aligned bounds `(min, max)` of points; `(+inf, -inf)` for none.
pub fn bounds(points: &[Vec3]) -> (Vec3, Vec3) {
    let mut lo = Vec3::repeat(f64::INFINITY);
    let mut hi = Vec3::repeat(f64::NEG_INFINITY);
    for p in points {
        lo = lo.inf(p);
        hi = hi.sup(p);
    }
    (lo, hi)
}

/// The most lattice cells a builder ([`TetMesh::try_cuboid`], [`TetMesh::try_sphere`],
/// [`TetMesh::try_capsule`], [`TetMesh::try_enclosing`]) may create: about six million tets,
/// a few gigabytes with the solver's data, far past what can be simulated interactively.
pub const MAX_LATTICE_CELLS: usize = 1_000_000;

/// Checks, before anything is allocated, that a lattice of `cells` cells per axis stays within
/// [`MAX_LATTICE_CELLS`].
pub(crate) fn check_lattice(cells: [f64; 3]) -> Result<(), MeshError> {
    let total = cells[0] * cells[1] * cells[2];
    if total.is_finite() && total <= MAX_LATTICE_CELLS as f64 {
        Ok(())
    } else {
        Err(MeshError::TooManyCells {
            cells: total,
            max: MAX_LATTICE_CELLS,
        })
    }
}

fn check_size(what: &'static str, value: f64) -> Result<(), MeshError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(MeshError::InvalidSize { what, value })
    }
}

/// The faces of positively oriented tets that belong to exactly one tet, oriented outward, in the
/// order of their tets (deterministic).
///
/// For a tet `(a, b, c, d)` with positive volume the outward faces are `(b, c, d)`, `(a, d, c)`,
/// `(a, b, d)` and `(a, c, b)` (opposite `a`, `b`, `c`, `d`).
fn boundary_faces(tets: &[[u32; 4]]) -> Vec<[u32; 3]> {
    let mut faces: Vec<([u32; 3], u32, u8)> = Vec::with_capacity(tets.len() * 4);
    for (ti, t) in tets.iter().enumerate() {
        for (fi, f) in local_faces(t).iter().enumerate() {
            let mut k = *f;
            k.sort_unstable();
            faces.push((k, ti as u32, fi as u8));
        }
    }
    faces.sort_unstable();
    let mut boundary: Vec<(u32, u8)> = Vec::new();
    let mut i = 0;
    while i < faces.len() {
        let mut j = i + 1;
        while j < faces.len() && faces[j].0 == faces[i].0 {
            j += 1;
        }
        if j - i == 1 {
            boundary.push((faces[i].1, faces[i].2));
        }
        i = j;
    }
    boundary.sort_unstable();
    boundary
        .into_iter()
        .map(|(t, f)| local_faces(&tets[t as usize])[f as usize])
        .collect()
}

#[inline]
fn local_faces(t: &[u32; 4]) -> [[u32; 3]; 4] {
    let [a, b, c, d] = *t;
    [[b, c, d], [a, d, c], [a, b, d], [a, c, b]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaled_mesh_is_the_mesh_of_the_scaled_positions() {
        let mesh = TetMesh::sphere(0.3, 5);
        let scale = Vec3::new(2.0, 0.5, 1.25);
        let scaled = mesh.scaled(scale).unwrap();
        let rebuilt = TetMesh::new(
            mesh.rest_positions()
                .iter()
                .map(|p| p.component_mul(&scale))
                .collect(),
            mesh.tets().iter().map(|t| t.map(|v| v as usize)).collect(),
        )
        .unwrap();
        assert_eq!(scaled.rest_positions(), rebuilt.rest_positions());
        assert_eq!(scaled.tets(), rebuilt.tets());
        assert_eq!(scaled.surface_triangles(), rebuilt.surface_triangles());
        assert_eq!(scaled.surface_edges(), rebuilt.surface_edges());
        for (a, b) in scaled.rest_volumes().iter().zip(rebuilt.rest_volumes()) {
            assert!((a - b).abs() <= 1e-12 * b.abs());
        }
        for (a, b) in scaled
            .inv_rest_shapes()
            .iter()
            .zip(rebuilt.inv_rest_shapes())
        {
            assert!((a - b).norm() <= 1e-9 * b.norm());
        }
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                mesh.scaled(Vec3::new(1.0, bad, 1.0)),
                Err(MeshError::InvalidSize { .. })
            ));
        }
        assert!(matches!(
            TetMesh::cuboid(Vec3::repeat(1e10), 1).scaled(Vec3::repeat(1e300)),
            Err(MeshError::NonFiniteVertex { .. })
        ));
        assert!(matches!(
            mesh.scaled(Vec3::repeat(1e300)),
            Err(MeshError::DegenerateTet { .. })
        ));
        assert!(matches!(
            mesh.scaled(Vec3::repeat(1e-120)),
            Err(MeshError::DegenerateTet { .. })
        ));
    }

    fn unit_tet() -> (Vec<Vec3>, Vec<[usize; 4]>) {
        (
            vec![Vec3::zeros(), Vec3::x(), Vec3::y(), Vec3::z()],
            vec![[0, 1, 2, 3]],
        )
    }

    #[test]
    fn single_tet_volume_surface_and_masses() {
        let (p, t) = unit_tet();
        let m = TetMesh::new(p, t).unwrap();
        assert!((m.total_volume() - 1.0 / 6.0).abs() < 1e-15);
        assert_eq!(m.surface_triangles().len(), 4);
        let masses = m.lumped_masses(600.0);
        assert!(masses.iter().all(|&x| (x - 25.0).abs() < 1e-12));
        // Outward normals: each face normal points away from the opposite vertex.
        let centroid = Vec3::repeat(0.25);
        for f in m.surface_triangles() {
            let [a, b, c] = f.map(|i| m.rest_positions()[i as usize]);
            let n = (b - a).cross(&(c - a));
            assert!(n.dot(&(a - centroid)) > 0.0);
        }
        // D_m^-1 of the unit tet is the identity.
        assert!((m.inv_rest_shapes()[0] - Mat3::identity()).norm() < 1e-15);
    }

    #[test]
    fn surface_rings_are_the_boundary_edge_neighbours() {
        let (p, t) = unit_tet();
        let m = TetMesh::new(p, t).unwrap();
        assert_eq!(m.surface_ring(0), &[1, 2, 3]);
        assert!(m.is_near_triangle(0, &[1, 2, 3]));
        // A 2x2x2 lattice cube: the centre vertex is interior, a face centre has a ring on its
        // face only, and a corner is far from the opposite face's triangles.
        let cube = TetMesh::cuboid(Vec3::repeat(1.0), 2);
        let x = cube.rest_positions();
        let find = |q: Vec3| (0..x.len()).find(|&i| (x[i] - q).norm() < 1e-9).unwrap() as u32;
        assert!(cube.surface_ring(find(Vec3::zeros())).is_empty());
        let face_centre = find(Vec3::new(0.0, 0.0, 1.0));
        let ring = cube.surface_ring(face_centre);
        assert!(!ring.is_empty() && ring.iter().all(|&v| (x[v as usize].z - 1.0).abs() < 1e-9));
        let corner = find(Vec3::new(-1.0, -1.0, -1.0));
        for tri in cube.surface_triangles() {
            let far = tri.iter().all(|&v| x[v as usize].x > 0.5);
            if far {
                assert!(!cube.is_near_triangle(corner, tri));
            }
        }
    }

    #[test]
    fn surface_edges_are_the_triangles_edges_once_each() {
        let cube = TetMesh::cuboid(Vec3::repeat(1.0), 3);
        let mut expected: Vec<[u32; 2]> = cube
            .surface_triangles()
            .iter()
            .flat_map(|t| (0..3).map(move |k| [t[k].min(t[(k + 1) % 3]), t[k].max(t[(k + 1) % 3])]))
            .collect();
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(cube.surface_edges(), &expected[..]);
        // A closed surface: E = 3F / 2, each edge between two distinct triangles that have it.
        assert_eq!(2 * expected.len(), 3 * cube.surface_triangles().len());
        for (e, pair) in cube.surface_edges().iter().zip(cube.edge_triangles()) {
            assert_ne!(pair[0], pair[1]);
            for &t in pair {
                assert!(
                    e.iter()
                        .all(|v| cube.surface_triangles()[t as usize].contains(v))
                );
            }
        }
        let [e, f] = [cube.surface_edges()[0], cube.surface_edges()[1]];
        assert_eq!(e[0], f[0]);
        assert!(cube.are_near_edges(&e, &f));
        let far = cube
            .surface_edges()
            .iter()
            .find(|g| {
                g.iter().all(|&v| {
                    (cube.rest_positions()[v as usize] - cube.rest_positions()[e[0] as usize])
                        .norm()
                        > 1.5
                })
            })
            .unwrap();
        assert!(!cube.are_near_edges(&e, far));
    }

    #[test]
    fn the_volume_at_positions_sums_signed_tet_volumes() {
        let mesh = TetMesh::cuboid(Vec3::new(0.5, 0.25, 1.0), 2);
        // A 1 x 0.5 x 2 m box, and the same box moved and stretched twice along x.
        let rest = mesh.volume_at(mesh.rest_positions()).unwrap();
        assert!((rest - 1.0).abs() < 1e-12, "{rest}");
        assert!((rest - mesh.total_volume()).abs() < 1e-12);
        let stretched: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| Vec3::new(2.0 * p.x + 3.0, p.y, p.z))
            .collect();
        assert!((mesh.volume_at(&stretched).unwrap() - 2.0).abs() < 1e-12);
        // Mirrored, every tet inverts and the volume changes sign.
        let mirrored: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| Vec3::new(-p.x, p.y, p.z))
            .collect();
        assert!((mesh.volume_at(&mirrored).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(mesh.volume_at(&stretched[1..]), None);
    }

    #[test]
    fn every_error_variant_is_reported() {
        let (p, t) = unit_tet();
        assert_eq!(
            TetMesh::new(vec![], vec![]),
            Err(MeshError::Empty {
                vertices: 0,
                tets: 0
            })
        );
        assert_eq!(
            TetMesh::new(p.clone(), vec![]),
            Err(MeshError::Empty {
                vertices: 4,
                tets: 0
            })
        );
        let mut nan = p.clone();
        nan[2].y = f64::NAN;
        assert!(matches!(
            TetMesh::new(nan, t.clone()),
            Err(MeshError::NonFiniteVertex { vertex: 2, .. })
        ));
        let mut inf = p.clone();
        inf[1].z = f64::INFINITY;
        assert!(matches!(
            TetMesh::new(inf, t.clone()),
            Err(MeshError::NonFiniteVertex { vertex: 1, .. })
        ));
        assert_eq!(
            TetMesh::new(p.clone(), vec![[0, 1, 2, 7]]),
            Err(MeshError::IndexOutOfRange {
                tet: 0,
                index: 7,
                vertex_count: 4
            })
        );
        assert!(matches!(
            TetMesh::new(p.clone(), vec![[0, 1, 1, 3]]),
            Err(MeshError::RepeatedVertex { tet: 0, .. })
        ));
        assert_eq!(
            TetMesh::new(p.clone(), vec![[0, 1, 2, 3], [3, 2, 1, 0]]),
            Err(MeshError::DuplicateTet {
                tet: 1,
                duplicate_of: 0
            })
        );
        let mut flat = p.clone();
        flat[3] = Vec3::new(0.3, 0.3, 0.0);
        assert!(matches!(
            TetMesh::new(flat, t.clone()),
            Err(MeshError::DegenerateTet { tet: 0, .. })
        ));
        let mut sliver = p.clone();
        sliver[3] = Vec3::new(0.3, 0.3, 1e-5);
        assert!(matches!(
            TetMesh::new(sliver, t.clone()),
            Err(MeshError::DegenerateTet { tet: 0, .. })
        ));
        let strict = MeshValidation {
            inverted: InvertedTets::Reject,
            ..MeshValidation::default()
        };
        assert!(matches!(
            TetMesh::with_validation(p.clone(), vec![[0, 2, 1, 3]], strict),
            Err(MeshError::InvertedTet { tet: 0, .. })
        ));
        assert!(matches!(
            TetMesh::try_cuboid(Vec3::new(1.0, -1.0, 1.0), 4),
            Err(MeshError::InvalidSize { .. })
        ));
        assert!(matches!(
            TetMesh::try_sphere(f64::NAN, 4),
            Err(MeshError::InvalidSize { .. })
        ));
        assert!(matches!(
            TetMesh::from_tetgen("", ""),
            Err(MeshError::Io(_))
        ));
    }

    #[test]
    fn inverted_tets_are_reoriented_and_unused_vertices_dropped() {
        let mut p = unit_tet().0;
        p.insert(0, Vec3::new(5.0, 5.0, 5.0)); // unreferenced
        let m = TetMesh::new(p, vec![[1, 3, 2, 4]]).unwrap();
        assert_eq!(m.fixes().reoriented_tets, vec![0]);
        assert_eq!(m.fixes().dropped_vertices, vec![0]);
        assert_eq!(m.vertex_count(), 4);
        assert!(m.rest_volumes()[0] > 0.0);
    }

    #[test]
    fn cuboid_surface_is_closed_and_outward() {
        let m = TetMesh::cuboid(Vec3::new(0.5, 0.25, 0.5), 4);
        assert!((m.total_volume() - 0.5).abs() < 1e-12);
        // Divergence theorem: sum over outward faces of (centroid . n) * area / 3 = volume.
        let mut vol = 0.0;
        for f in m.surface_triangles() {
            let [a, b, c] = f.map(|i| m.rest_positions()[i as usize]);
            vol += a.dot(&b.cross(&c)) / 6.0;
        }
        assert!((vol - 0.5).abs() < 1e-12, "{vol}");
        // Every boundary edge is shared by exactly two boundary faces.
        let mut edges: Vec<(u32, u32)> = m
            .surface_triangles()
            .iter()
            .flat_map(|f| [(f[0], f[1]), (f[1], f[2]), (f[2], f[0])])
            .map(|(a, b)| (a.min(b), a.max(b)))
            .collect();
        edges.sort_unstable();
        let mut i = 0;
        while i < edges.len() {
            let mut j = i;
            while j < edges.len() && edges[j] == edges[i] {
                j += 1;
            }
            assert_eq!(j - i, 2);
            i = j;
        }
    }

    #[test]
    fn armadillo_validates() {
        let node = include_str!("../../assets/meshes/armadillo_4k.node");
        let ele = include_str!("../../assets/meshes/armadillo_4k.ele");
        let m = TetMesh::from_tetgen(node, ele).unwrap();
        assert_eq!(m.tet_count(), 3717);
        assert!(m.vertex_count() <= 1180);
        assert!(m.rest_volumes().iter().all(|&v| v > 0.0));
        assert!(!m.surface_triangles().is_empty());
    }
}
