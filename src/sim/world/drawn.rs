//! A body that collides with obstacles by the surface it is drawn with, not by its cage.
//!
//! A game's detailed mesh is carried by a coarse tet cage
//! ([`crate::sim::TetMesh::try_enclosing`]) whose vertices lie up to a cell outside the drawn
//! surface. If the cage vertices collided, the drawn surface would rest up to a cell above the
//! floor. [`SoftWorld::set_drawn_surface`] makes the drawn surface's points (embedded in the
//! cage's tets, barycentrically) the body's obstacle colliders, and keeps every cage vertex
//! that is not one of them only as a safety net, with a *slack*: it collides only once it is
//! deeper in an obstacle than `DRAWN_SLACK_FACTOR` times its distance to the nearest drawn
//! point at the call (see [`crate::sim::contact::narrowphase::with_slack`]).
//!
//! Why that slack never holds the drawn surface up: a point `p` at depth `d` in an obstacle is
//! at least `d` away from every point outside it (a path out must cross the obstacle's
//! boundary). So while every drawn point is outside, no cage vertex is deeper than its
//! distance to the nearest drawn point, whatever the obstacle's shape. The factor covers the
//! deformation since the call: the net could hold the surface up only where the cage between
//! a vertex and its nearest drawn point is stretched to more than 1.5 times its length then
//! (compression only brings them closer). Where the drawn points are
//! sparse against a thin obstacle (an edge that fits between them), the net bounds how far the
//! cage may cross it: a cage vertex reaches at most 1.5 times its distance to the drawn
//! surface into the obstacle, so the drawn surface cannot be carried through it and snag.
//! It also catches a body whose drawn surface was crushed through on a hard impact.
//!
//! With the drawn triangles ([`SoftWorld::set_drawn_mesh`]), soft-soft contact and
//! self-collision follow the drawn surface too: its points against the other bodies' surface
//! triangles, their surface points against its triangles
//! ([`crate::sim::contact::surface_shape`]). The cage's surface then touches no other body:
//! there is no safety net between bodies, whose drawn surfaces keep each other apart alone.
//! Without them (`set_drawn_surface`), soft-soft contact takes the cage's surface.

use std::sync::Arc;

use super::SoftWorld;
use super::body;
use super::error::{WorldError, check_embedded, check_vertex};
use super::handles::BodyHandle;
use crate::sim::contact::DrawnMesh;
use crate::sim::embed::EmbeddedPoint;
use crate::sim::math::Vec3;
use crate::sim::nearest::PointGrid;

/// Most a drawn point may lie outside the tet mesh, in units of the height of the tet it is
/// extrapolated from ([`EmbeddedPoint::outside_by`]): a smooth mesh drawn over a bumpy lattice
/// body pokes out of it by a fraction of a cell (the showcase's spheres), and its points follow
/// the body by linear extrapolation; a point further out is not on a surface the mesh carries.
pub const MAX_DRAWN_EXTRAPOLATION: f64 = 0.5;

/// A cage vertex's slack, as a share of its distance to the nearest drawn point (see the
/// module docs): 1.5 keeps the net slack under stretch of up to a half.
pub(crate) const DRAWN_SLACK_FACTOR: f64 = 1.5;

impl SoftWorld {
    /// Makes the body collide with obstacles by its drawn surface: `points` (embedded in its
    /// tets, e.g. by [`crate::sim::embed::embed_points`] from a detailed mesh's vertices)
    /// become its collision proxies (each once: repeated points, such as a render mesh's seam
    /// copies, are dropped), and every vertex that is not one of them collides only
    /// once it is deeper in an obstacle than 1.5 times its present distance to the nearest of
    /// the points (a safety net that never holds the drawn surface up; see the module docs of
    /// `drawn.rs`). Soft-soft contact stays on the tet mesh's surface: with the drawn
    /// triangles, [`SoftWorld::set_drawn_mesh`] moves it to the drawn surface too.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`]; [`WorldError::VertexOutOfRange`] or
    /// [`WorldError::InvalidValue`] for a point with a vertex out of range or a non-finite
    /// weight; [`WorldError::EmptyDrawnSurface`]. The body is unchanged.
    pub fn set_drawn_surface(
        &mut self,
        h: BodyHandle,
        points: Vec<EmbeddedPoint>,
    ) -> Result<(), WorldError> {
        let b = self.body_mut(h)?;
        let (points, _) = unique_points(b, points)?;
        let (colliders, slack) = drawn_collision_points(&b.x, &points);
        b.colliders = colliders;
        b.collider_slack = slack;
        b.proxies = points;
        b.drawn = None;
        Ok(())
    }

    /// Makes the body collide by the triangle mesh it is drawn with, everywhere: `points`
    /// (embedded in its tets) against obstacles as [`SoftWorld::set_drawn_surface`] says, and
    /// the mesh (`points` with `triangles`, indices into `points`, outward by the right-hand
    /// rule) against other bodies and itself: its points against their surface triangles,
    /// their surface points against its triangles, and (with
    /// [`crate::sim::WorldSettings::edge_contacts`]) its edges against theirs where creases
    /// cross between the points. Its tet mesh's surface then no longer touches other bodies.
    /// Repeated points (a render mesh's seam copies) are merged, and the triangles follow. Deep
    /// overlaps are resolved only between closed surfaces (every edge shared by two triangles;
    /// see [`crate::sim::contact::surface_shape`]).
    ///
    /// # Errors
    /// As [`SoftWorld::set_drawn_surface`], and [`WorldError::DrawnTriangleOutOfRange`] for a
    /// triangle with a corner past the points, [`WorldError::DegenerateDrawnTriangle`] for one
    /// with a repeated corner (after merging repeated points) or no area, and
    /// [`WorldError::EmptyDrawnSurface`] for no triangles. The body is unchanged.
    pub fn set_drawn_mesh(
        &mut self,
        h: BodyHandle,
        points: Vec<EmbeddedPoint>,
        triangles: Vec<[u32; 3]>,
    ) -> Result<(), WorldError> {
        let b = self.body_mut(h)?;
        let count = points.len();
        let (points, merged) = unique_points(b, points)?;
        if triangles.is_empty() {
            return Err(WorldError::EmptyDrawnSurface);
        }
        let at: Vec<Vec3> = points.iter().map(|p| p.position(&b.x)).collect();
        let mut kept = Vec::with_capacity(triangles.len());
        for (index, t) in triangles.iter().enumerate() {
            if t.iter().any(|&c| c as usize >= count) {
                return Err(WorldError::DrawnTriangleOutOfRange { index });
            }
            let t = t.map(|c| merged[c as usize]);
            let [p0, p1, p2] = t.map(|c| at[c as usize]);
            let longest = [(p1 - p0), (p2 - p1), (p0 - p2)]
                .iter()
                .map(|e| e.norm_squared())
                .fold(0.0, f64::max);
            let repeated = t[0] == t[1] || t[1] == t[2] || t[2] == t[0];
            if repeated || !((p1 - p0).cross(&(p2 - p0)).norm() > 1e-10 * longest) {
                return Err(WorldError::DegenerateDrawnTriangle { index });
            }
            kept.push(t);
        }
        let (colliders, slack) = drawn_collision_points(&b.x, &points);
        b.colliders = colliders;
        b.collider_slack = slack;
        b.drawn = Some(Arc::new(DrawnMesh::new(points.clone(), kept)));
        b.proxies = points;
        Ok(())
    }

    /// As [`SoftWorld::set_drawn_mesh`] (the drawn mesh meets other bodies and itself, its
    /// points meet obstacles), but besides the points exactly the listed cage `vertices` meet
    /// obstacles, fully, as [`SoftWorld::set_colliders`] lists them, instead of every other
    /// vertex with a slack: for a skinned region's flesh, whose cage vertices inside the skin
    /// are its safety net and whose outer ones stand up to a cell off the skin.
    ///
    /// # Errors
    /// As [`SoftWorld::set_drawn_mesh`], and [`WorldError::VertexOutOfRange`] for a listed
    /// vertex. The body is unchanged.
    pub fn set_drawn_mesh_with_colliders(
        &mut self,
        h: BodyHandle,
        points: Vec<EmbeddedPoint>,
        triangles: Vec<[u32; 3]>,
        vertices: &[u32],
    ) -> Result<(), WorldError> {
        let n = self.body(h)?.x.len();
        for &v in vertices {
            check_vertex(v as usize, n)?;
        }
        self.set_drawn_mesh(h, points, triangles)?;
        let b = self.body_mut(h)?;
        b.colliders = body::listed_collision_points(&b.proxies, vertices);
        b.collider_slack.clear();
        Ok(())
    }
}

/// `points` checked for body `b` and each kept once (a render mesh repeats a vertex along its
/// seams, one copy per normal or texture coordinate: one row is enough, and repeated rows only
/// make the contact subspace's matrix singular), with the index each given point now has.
fn unique_points(
    b: &super::body::SoftBody,
    points: Vec<EmbeddedPoint>,
) -> Result<(Vec<EmbeddedPoint>, Vec<u32>), WorldError> {
    if points.is_empty() {
        return Err(WorldError::EmptyDrawnSurface);
    }
    check_embedded("drawn surface weight", &points, b.x.len())?;
    let mut first = std::collections::HashMap::new();
    let mut kept = Vec::with_capacity(points.len());
    let merged = points
        .into_iter()
        .map(|p| {
            *first
                .entry((p.vertices, p.weights.map(f64::to_bits)))
                .or_insert_with(|| {
                    kept.push(p);
                    kept.len() as u32 - 1
                })
        })
        .collect();
    Ok((kept, merged))
}

/// The colliders of a body at positions `x` drawn by `points`: the points (no slack), then
/// every vertex that is not exactly one of them, with its slack (see the module docs).
pub(crate) fn drawn_collision_points(
    x: &[Vec3],
    points: &[EmbeddedPoint],
) -> (Vec<EmbeddedPoint>, Vec<f64>) {
    let colliders = body::collision_points(x.len(), points);
    if points.is_empty() {
        return (colliders, Vec::new());
    }
    let drawn: Vec<Vec3> = points.iter().map(|p| p.position(x)).collect();
    // Cells holding a few points each.
    let (lo, hi) = crate::sim::mesh::bounds(&drawn);
    let cell = (hi - lo).max() / (drawn.len() as f64).cbrt().max(1.0);
    let grid = PointGrid::new(&drawn, cell);
    let slack = colliders
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i < points.len() {
                0.0
            } else {
                DRAWN_SLACK_FACTOR * grid.distance(&c.position(x), f64::INFINITY)
            }
        })
        .collect();
    (colliders, slack)
}
