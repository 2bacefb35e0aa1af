//! [`VertexSelection`]: vertices of a body chosen by where they lie in its rest shape, for
//! [`Pin`](crate::components::Pin), [`Attachment`](crate::components::Attachment) and a
//! [`DeformableCloth`](crate::cloth::DeformableCloth)'s pins, so that a game pins "the top
//! face", "the 8 vertices nearest the handle" or "the collar of a cape" without knowing the
//! mesh's vertex numbering. A cloth's selection is resolved against its rectangle in the
//! cloth entity's frame, when the cloth is built.
//!
//! A selection is resolved once, against the body's rest mesh in its local frame (the mesh as
//! built or loaded, before the spawn `Transform`'s scale), when the plugin creates the body
//! (and again when a [`Pin`](crate::components::Pin) is edited at run time). A selection that
//! matches no vertex is a typed error, [`crate::status::BodyError::EmptySelection`]: the body is
//! rejected like one with an invalid material, and its
//! [`DeformableState::status`](crate::components::DeformableState::status) says why.
//!
//! Named vertex groups are not offered: the tet mesh assets (`.node`/`.ele`, `.msh`) carry none.

use bevy::math::Vec3;
use bevy::prelude::Reflect;

use crate::sim;

/// Vertices of a body chosen by their rest position in the body's local frame (m, before the
/// spawn `Transform`'s scale, rotation and translation).
///
/// # Example
/// ```
/// use bevy::prelude::*;
/// use bevy_deformable::prelude::*;
/// // The top face of a 0.24 x 1.2 x 0.24 m bar: every vertex within 1 mm of y = 0.6 m.
/// let top = VertexSelection::in_box(Vec3::new(-1.0, 0.599, -1.0), Vec3::new(1.0, 1.0, 1.0));
/// let pin = Pin::selection(top);
/// ```
#[derive(Reflect, Debug, Clone, PartialEq)]
pub enum VertexSelection {
    /// Every vertex inside the axis-aligned box from `min` to `max` (m, bounds included).
    InBox {
        /// The box's lowest corner (m).
        min: Vec3,
        /// The box's highest corner (m).
        max: Vec3,
    },
    /// Every vertex inside the ball of `radius` (m) around `centre` (m, boundary included).
    InSphere {
        /// The ball's centre (m).
        centre: Vec3,
        /// The ball's radius (m).
        radius: f32,
    },
    /// The `count` vertices nearest to `point` (m); ties go to the lower vertex index, and a
    /// mesh with fewer vertices gives all of them.
    Nearest {
        /// The point (m).
        point: Vec3,
        /// How many vertices.
        count: usize,
    },
}

impl VertexSelection {
    /// Every vertex inside the axis-aligned box from `min` to `max` (m, bounds included).
    pub const fn in_box(min: Vec3, max: Vec3) -> Self {
        Self::InBox { min, max }
    }

    /// Every vertex inside the ball of `radius` (m) around `centre` (m).
    pub const fn in_sphere(centre: Vec3, radius: f32) -> Self {
        Self::InSphere { centre, radius }
    }

    /// The `count` vertices nearest to `point` (m).
    pub const fn nearest(point: Vec3, count: usize) -> Self {
        Self::Nearest { point, count }
    }

    /// The selected vertices among `rest` (m, the local rest frame), in ascending index order
    /// (empty if none match).
    pub(crate) fn resolve_in(&self, rest: &[sim::Vec3]) -> Vec<u32> {
        let local = |v: usize| {
            let p = rest[v];
            Vec3::new(p.x as f32, p.y as f32, p.z as f32)
        };
        match *self {
            Self::InBox { min, max } => (0..rest.len())
                .filter(|&v| {
                    let p = local(v);
                    p.cmpge(min).all() && p.cmple(max).all()
                })
                .map(|v| v as u32)
                .collect(),
            Self::InSphere { centre, radius } => (0..rest.len())
                .filter(|&v| local(v).distance_squared(centre) <= radius * radius)
                .map(|v| v as u32)
                .collect(),
            Self::Nearest { point, count } => {
                let mut order: Vec<usize> = (0..rest.len()).collect();
                order.sort_by(|&a, &b| {
                    let (da, db) = (
                        local(a).distance_squared(point),
                        local(b).distance_squared(point),
                    );
                    da.total_cmp(&db).then(a.cmp(&b))
                });
                order.truncate(count);
                order.sort_unstable();
                order.into_iter().map(|v| v as u32).collect()
            }
        }
    }
}

/// The vertices a `Pin` or `Attachment` names: its explicit indices as given (order and
/// repeats kept), then those its selections add, ascending, each once and not already listed.
///
/// # Errors
/// The first selection that matches no vertex.
pub(crate) fn resolve_vertices(
    explicit: &[u32],
    selections: &[VertexSelection],
    mesh: &sim::TetMesh,
) -> Result<Vec<u32>, VertexSelection> {
    resolve_vertices_in(explicit, selections, mesh.rest_positions())
}

/// As [`resolve_vertices`], among the rest positions `rest` (m) of any mesh (a cloth's).
///
/// # Errors
/// The first selection that matches no vertex.
pub(crate) fn resolve_vertices_in(
    explicit: &[u32],
    selections: &[VertexSelection],
    rest: &[sim::Vec3],
) -> Result<Vec<u32>, VertexSelection> {
    let mut vertices = explicit.to_vec();
    if selections.is_empty() {
        return Ok(vertices);
    }
    let mut added = Vec::new();
    for selection in selections {
        let selected = selection.resolve_in(rest);
        if selected.is_empty() {
            return Err(selection.clone());
        }
        added.extend(selected);
    }
    added.sort_unstable();
    added.dedup();
    added.retain(|v| !explicit.contains(v));
    vertices.extend(added);
    Ok(vertices)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1 m cube, 2 cells along each side: the 27 vertices of the lattice {-0.5, 0, 0.5}^3.
    fn cube() -> sim::TetMesh {
        sim::TetMesh::cuboid(sim::Vec3::repeat(0.5), 2)
    }

    /// The vertices whose rest position satisfies `keep`, ascending: the independent truth.
    fn where_(mesh: &sim::TetMesh, keep: impl Fn(&sim::Vec3) -> bool) -> Vec<u32> {
        (0..mesh.vertex_count() as u32)
            .filter(|&v| keep(&mesh.rest_positions()[v as usize]))
            .collect()
    }

    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn a_box_selects_the_vertices_inside_it() {
        let mesh = cube();
        assert_eq!(mesh.vertex_count(), 27);
        let top = VertexSelection::in_box(Vec3::new(-1.0, 0.499, -1.0), Vec3::splat(1.0));
        let selected = top.resolve_in(mesh.rest_positions());
        assert_eq!(selected.len(), 9);
        assert_eq!(selected, where_(&mesh, |p| near(p.y, 0.5)));
        // Bounds are included: a flat box through the middle layer.
        let middle = VertexSelection::in_box(Vec3::new(-0.5, 0.0, -0.5), Vec3::new(0.5, 0.0, 0.5));
        assert_eq!(
            middle.resolve_in(mesh.rest_positions()),
            where_(&mesh, |p| near(p.y, 0.0))
        );
    }

    #[test]
    fn a_sphere_selects_the_vertices_within_its_radius() {
        let mesh = cube();
        // The corner and its three lattice neighbours (0.5 m away); the next are 0.71 m away.
        let selection = VertexSelection::in_sphere(Vec3::splat(0.5), 0.6);
        let selected = selection.resolve_in(mesh.rest_positions());
        assert_eq!(selected.len(), 4);
        assert_eq!(
            selected,
            where_(&mesh, |p| {
                let on = [p.x, p.y, p.z].iter().filter(|&&c| near(c, 0.5)).count();
                let zero = [p.x, p.y, p.z].iter().filter(|&&c| near(c, 0.0)).count();
                on == 3 || (on == 2 && zero == 1)
            })
        );
    }

    #[test]
    fn nearest_selects_the_closest_vertices_and_at_most_all() {
        let mesh = cube();
        let corner =
            VertexSelection::nearest(Vec3::splat(0.5), 1).resolve_in(mesh.rest_positions());
        assert_eq!(
            corner,
            where_(&mesh, |p| near(p.x, 0.5)
                && near(p.y, 0.5)
                && near(p.z, 0.5))
        );
        // Four nearest: the same as the sphere's four.
        assert_eq!(
            VertexSelection::nearest(Vec3::splat(0.5), 4).resolve_in(mesh.rest_positions()),
            VertexSelection::in_sphere(Vec3::splat(0.5), 0.6).resolve_in(mesh.rest_positions())
        );
        // Ties go to the lower index: the cube's centre, then of the six face centres (all
        // 0.5 m from it) the two of lowest index.
        let ties = VertexSelection::nearest(Vec3::ZERO, 3).resolve_in(mesh.rest_positions());
        let centre = where_(&mesh, |p| p.norm() < 1e-12);
        let faces = where_(&mesh, |p| near(p.norm(), 0.5));
        assert_eq!(ties, {
            let mut v = vec![centre[0], faces[0], faces[1]];
            v.sort_unstable();
            v
        });
        assert_eq!(
            VertexSelection::nearest(Vec3::ZERO, 100).resolve_in(mesh.rest_positions()),
            (0..27).collect::<Vec<u32>>()
        );
    }

    #[test]
    fn explicit_indices_keep_their_order_and_selections_add_the_rest() {
        let mesh = cube();
        let top = VertexSelection::in_box(Vec3::new(-1.0, 0.499, -1.0), Vec3::splat(1.0));
        let top_vertices = top.resolve_in(mesh.rest_positions());
        let explicit = [top_vertices[3], 0];
        let resolved = resolve_vertices(&explicit, std::slice::from_ref(&top), &mesh).unwrap();
        let mut expected = explicit.to_vec();
        expected.extend(top_vertices.iter().filter(|v| !explicit.contains(v)));
        assert_eq!(resolved, expected);
        // No selection: the indices exactly as given, repeats included.
        assert_eq!(
            resolve_vertices(&[4, 4, 1], &[], &mesh).unwrap(),
            vec![4, 4, 1]
        );
    }

    #[test]
    fn a_selection_that_matches_nothing_is_an_error() {
        let mesh = cube();
        let outside = VertexSelection::in_box(Vec3::splat(2.0), Vec3::splat(3.0));
        assert!(outside.resolve_in(mesh.rest_positions()).is_empty());
        assert_eq!(
            resolve_vertices(&[], std::slice::from_ref(&outside), &mesh),
            Err(outside.clone())
        );
        let none = VertexSelection::nearest(Vec3::ZERO, 0);
        assert_eq!(
            resolve_vertices(&[1], std::slice::from_ref(&none), &mesh),
            Err(none)
        );
    }
}
