//! Write-back of simulated positions into render meshes.
//!
//! Every body has a list of render points embedded in its tets (`thesis-corotational-fem-
//! embedded-contact.txt`, section 5.7): the surface vertices of the tet mesh when the game gave
//! no render mesh, or the vertices of the game's own `Mesh3d` (a detailed mesh embedded in a
//! coarse simulation mesh). After each fixed step the body's `Transform` moves to the centroid
//! of its vertices (rotation identity, scale one) and the mesh positions are written relative to
//! it, with normals recomputed. Write-back is one way: the mesh never feeds the simulation.

use bevy::asset::RenderAssetUsages;
use bevy::math::Vec3;
use bevy::mesh::{Indices, Mesh, PrimitiveTopology, VertexAttributeValues};

use crate::convert::to_bevy;
use crate::sim::{self, EmbeddedPoint};

/// A render mesh of the tet mesh's boundary: one render vertex per surface vertex (smooth
/// normals), and the embedding that drives it.
pub(crate) fn surface_mesh(mesh: &sim::TetMesh) -> (Mesh, Vec<EmbeddedPoint>) {
    let surface = mesh.surface_vertices();
    let mut index_of = vec![u32::MAX; mesh.vertex_count()];
    for (i, &v) in surface.iter().enumerate() {
        index_of[v as usize] = i as u32;
    }
    let indices: Vec<u32> = mesh
        .surface_triangles()
        .iter()
        .flat_map(|t| t.map(|v| index_of[v as usize]))
        .collect();
    let positions: Vec<[f32; 3]> = surface
        .iter()
        .map(|&v| to_bevy(&mesh.rest_positions()[v as usize]).to_array())
        .collect();
    let mut render = Mesh::new(
        PrimitiveTopology::TriangleList,
        RenderAssetUsages::default(),
    );
    render.insert_attribute(Mesh::ATTRIBUTE_POSITION, positions);
    render.insert_indices(Indices::U32(indices));
    render.compute_normals();
    let points = surface.iter().map(|&v| EmbeddedPoint::vertex(v)).collect();
    (render, points)
}

/// The positions of a render mesh (m, in its own frame), if it has any.
pub(crate) fn mesh_positions(mesh: &Mesh) -> Option<Vec<sim::Vec3>> {
    match mesh.attribute(Mesh::ATTRIBUTE_POSITION)? {
        VertexAttributeValues::Float32x3(p) => Some(
            p.iter()
                .map(|a| sim::Vec3::new(a[0] as f64, a[1] as f64, a[2] as f64))
                .collect(),
        ),
        _ => None,
    }
}

/// Writes the embedded points at `x` into the mesh, relative to `origin`, and recomputes normals.
pub(crate) fn write_positions(
    mesh: &mut Mesh,
    points: &[EmbeddedPoint],
    x: &[sim::Vec3],
    origin: Vec3,
) {
    let Some(VertexAttributeValues::Float32x3(positions)) =
        mesh.attribute_mut(Mesh::ATTRIBUTE_POSITION)
    else {
        return;
    };
    if positions.len() != points.len() {
        return;
    }
    for (dst, p) in positions.iter_mut().zip(points) {
        *dst = (to_bevy(&p.position(x)) - origin).to_array();
    }
    // Normals only for triangle lists (the compute_* helpers require them).
    if mesh.primitive_topology() != PrimitiveTopology::TriangleList {
        return;
    }
    if mesh.indices().is_some() {
        mesh.compute_smooth_normals();
    } else {
        mesh.compute_flat_normals();
    }
}
