//! Write-back of simulated positions into render meshes.
//!
//! Every body has a list of render points embedded in its tets (the embedded-contact
//! thesis, section 5.7): the surface vertices of the tet mesh when the game gave
//! no render mesh, or the vertices of the game's own `Mesh3d` (a detailed mesh embedded in a
//! coarse simulation mesh). After each fixed step the points are evaluated in world space and
//! kept with the previous step's, with their mean and the body's turn since it was created:
//! the rotation that best maps the first recorded points onto them (shape matching). Every
//! frame (in `PostUpdate`) the body's `Transform` moves to their mean, turned by that rotation
//! from the rotation it was spawned with (scale one), so children of the body turn with it; the
//! mesh positions are written in that frame, blended between the last two steps by the fixed
//! clock's overstep (positions linearly, the turn by slerp), with normals recomputed.
//! Write-back is one way: the mesh never feeds the simulation.

use bevy::asset::RenderAssetUsages;
use bevy::math::{Quat, Vec3};
use bevy::mesh::{Indices, Mesh, PrimitiveTopology, VertexAttributeValues};

use crate::convert::{quat_to_bevy, to_bevy, to_sim};
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
    let points = surface.iter().map(|&v| EmbeddedPoint::vertex(v)).collect();
    (triangle_mesh(positions, indices), points)
}

/// An indexed triangle-list mesh with area-weighted normals, kept in both worlds so the plugin
/// can rewrite its positions (see [`write_interpolated`] for why not angle-weighted normals).
pub(crate) fn triangle_mesh(positions: Vec<[f32; 3]>, indices: Vec<u32>) -> Mesh {
    let mut mesh = Mesh::new(
        PrimitiveTopology::TriangleList,
        RenderAssetUsages::default(),
    );
    mesh.insert_attribute(Mesh::ATTRIBUTE_POSITION, positions);
    mesh.insert_indices(Indices::U32(indices));
    mesh.compute_area_weighted_normals();
    mesh
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

/// The triangles of a triangle-list mesh (indexed, or consecutive vertex triples), those
/// whose corners at `rest` (m) span no area left out (a UV sphere's poles): they draw nothing,
/// and the world refuses a degenerate drawn triangle. `None` for another topology.
pub(crate) fn mesh_triangles(mesh: &Mesh, rest: &[sim::Vec3]) -> Option<Vec<[u32; 3]>> {
    if mesh.primitive_topology() != PrimitiveTopology::TriangleList {
        return None;
    }
    let corners: Vec<u32> = match mesh.indices() {
        Some(indices) => indices.iter().map(|i| i as u32).collect(),
        None => (0..rest.len() as u32).collect(),
    };
    let spans_area = |t: &[u32; 3]| {
        let [a, b, c] = t.map(|i| rest.get(i as usize).copied());
        let (Some(a), Some(b), Some(c)) = (a, b, c) else {
            // Out of range: kept, for the world to refuse by name.
            return true;
        };
        let longest = [b - a, c - b, a - c]
            .iter()
            .map(|e| e.norm_squared())
            .fold(0.0, f64::max);
        (b - a).cross(&(c - a)).norm() > 1e-8 * longest
    };
    Some(
        corners
            .chunks_exact(3)
            .map(|t| [t[0], t[1], t[2]])
            .filter(spans_area)
            .collect(),
    )
}

/// Evaluates the embedded points at `x` into `out` (m, world) and returns their mean.
pub(crate) fn record_points(
    points: &[EmbeddedPoint],
    x: &[sim::Vec3],
    out: &mut Vec<Vec3>,
) -> Vec3 {
    out.clear();
    out.extend(points.iter().map(|p| to_bevy(&p.position(x))));
    let sum: Vec3 = out.iter().copied().sum();
    sum / out.len().max(1) as f32
}

/// The rotation that best maps the `reference` offsets onto `points` about `centre` (shape
/// matching, Muller et al. 2005: the rotation of the polar decomposition of
/// `sum (p_i - c) q_i'`). Returns `fallback` where that matrix vanishes or is not finite (all
/// points on one spot).
pub(crate) fn matched_turn(
    reference: &[Vec3],
    points: &[Vec3],
    centre: Vec3,
    fallback: Quat,
) -> Quat {
    let mut a = sim::Mat3::zeros();
    for (q, p) in reference.iter().zip(points) {
        a += to_sim(*p - centre) * to_sim(*q).transpose();
    }
    let norm = a.norm();
    if !(norm > 0.0 && norm.is_finite()) {
        return fallback;
    }
    let r = sim::polar::polar_rotation(&(a / norm));
    let quat = quat_to_bevy(&nalgebra::UnitQuaternion::from_rotation_matrix(
        &nalgebra::Rotation3::from_matrix_unchecked(r),
    ));
    // The same turn as the last, not its antipode, so that the blend between steps is short.
    if quat.dot(fallback) < 0.0 {
        -quat
    } else {
        quat
    }
}

/// Writes `inverse (previous + alpha (current - previous) - origin)` into the mesh positions
/// (world points into the frame of a `Transform` at `origin` turned by `inverse`'s inverse)
/// and recomputes its normals. Does nothing if the vertex counts disagree (a game replaced
/// the mesh).
pub(crate) fn write_interpolated(
    mesh: &mut Mesh,
    previous: &[Vec3],
    current: &[Vec3],
    alpha: f32,
    origin: Vec3,
    inverse: Quat,
) {
    let Some(VertexAttributeValues::Float32x3(positions)) =
        mesh.attribute_mut(Mesh::ATTRIBUTE_POSITION)
    else {
        return;
    };
    if positions.len() != current.len() || previous.len() != current.len() {
        return;
    }
    for ((dst, a), b) in positions.iter_mut().zip(previous).zip(current) {
        *dst = (inverse * (a.lerp(*b, alpha) - origin)).to_array();
    }
    // Normals only for triangle lists (the compute_* helpers require them).
    if mesh.primitive_topology() != PrimitiveTopology::TriangleList {
        return;
    }
    if mesh.indices().is_some() {
        // Area-weighted: Bevy's angle-weighted `compute_smooth_normals` drops corners whose
        // squared edge lengths multiply to less than f32::EPSILON (edges under ~2 cm), which
        // leaves detailed meshes with zero normals in patches.
        mesh.compute_area_weighted_normals();
    } else {
        mesh.compute_flat_normals();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cloud turned and moved rigidly yields its turn, whatever the last turn it is given
    /// (up to the sign that keeps the blend short), and a collapsed cloud keeps the last one.
    #[test]
    fn matched_turn_recovers_a_rigid_rotation() {
        let reference: Vec<Vec3> = (0..20)
            .map(|i| {
                let t = i as f32;
                Vec3::new((t * 0.7).sin(), (t * 1.3).cos() * 0.5, t * 0.05 - 0.5)
            })
            .collect();
        let mean = reference.iter().copied().sum::<Vec3>() / reference.len() as f32;
        let reference: Vec<Vec3> = reference.iter().map(|q| *q - mean).collect();
        let turn = Quat::from_axis_angle(Vec3::new(0.3, 1.0, -0.2).normalize(), 2.5);
        let centre = Vec3::new(4.0, -1.0, 2.0);
        let points: Vec<Vec3> = reference.iter().map(|q| centre + turn * *q).collect();
        for fallback in [Quat::IDENTITY, -turn, turn] {
            let found = matched_turn(&reference, &points, centre, fallback);
            assert!(
                found.angle_between(turn) < 1e-4,
                "{found:?} against {turn:?}"
            );
            assert!(found.dot(fallback) >= 0.0);
        }
        let collapsed = vec![centre; reference.len()];
        assert_eq!(matched_turn(&reference, &collapsed, centre, turn), turn);
    }
}
