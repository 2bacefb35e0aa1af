//! [`BodyDesc`]: everything a body is created from, in one value, and
//! [`SoftWorld::add_body_from`], which creates it atomically.

use std::sync::Arc;

use nalgebra::UnitQuaternion;

use super::SoftWorld;
use super::error::{WorldError, check_finite, check_vertex};
use super::handles::BodyHandle;
use crate::sim::embed::embed_points;
use crate::sim::material::MaterialParams;
use crate::sim::math::Vec3;
use crate::sim::mesh::TetMesh;

/// A body to create: its mesh, material, pose and scale, pinned and attached vertices, extra
/// collision proxies and initial velocity. [`SoftWorld::add_body_from`] checks all of it first
/// and creates the body only if every part is valid, so a rejected description leaves the world
/// as it was. The Bevy plugin builds one from a body entity's components.
///
/// ```
/// use std::sync::Arc;
/// use bevy_deformable::sim::{BodyDesc, MaterialParams, SoftWorld, TetMesh, Vec3, WorldSettings};
///
/// let mut world = SoftWorld::new(WorldSettings::default());
/// let bar = Arc::new(TetMesh::try_cuboid(Vec3::new(0.5, 0.05, 0.05), 10).unwrap());
/// let top: Vec<u32> = (0..bar.vertex_count() as u32)
///     .filter(|&v| bar.rest_positions()[v as usize].x < -0.5 + 1e-9)
///     .collect();
/// let body = world
///     .add_body_from(
///         &BodyDesc::new(bar, MaterialParams::RUBBER)
///             .with_position(Vec3::new(0.0, 1.0, 0.0))
///             .with_scale(Vec3::new(2.0, 1.0, 1.0))
///             .with_pins(top),
///     )
///     .unwrap();
/// assert!(world.pinned(body).unwrap().iter().any(|&p| p));
/// ```
#[derive(Debug, Clone)]
pub struct BodyDesc {
    /// The tet mesh: its rest shape (m), before scale and pose.
    pub mesh: Arc<TetMesh>,
    /// The material.
    pub material: MaterialParams,
    /// Where the rest shape's origin goes (m).
    pub position: Vec3,
    /// How the scaled rest shape is turned.
    pub rotation: UnitQuaternion<f64>,
    /// Per-axis scale of the rest shape, each finite and > 0, applied before the rotation (it
    /// changes the rest shape, not only the pose). Default: 1.
    pub scale: Vec3,
    /// Vertices held exactly where they start.
    pub pins: Vec<u32>,
    /// Vertices tied by zero-rest-length springs to where they start, with each spring's
    /// stiffness (N/m, finite and >= 0); move the targets with
    /// [`SoftWorld::set_attachment_target`].
    pub attachments: Vec<(u32, f64)>,
    /// Points (m, in the rest frame before scale and pose) embedded in the tets that collide
    /// besides the surface vertices.
    pub proxies: Vec<Vec3>,
    /// The points of the surface the body is drawn with (m, in the rest frame before scale and
    /// pose; the vertices of a detailed mesh its tet mesh encloses), each inside the tet mesh or
    /// within [`super::MAX_DRAWN_EXTRAPOLATION`] of a tet's height outside it.
    /// If any, they are what collides with obstacles, and the tet mesh's vertices only as a
    /// safety net ([`SoftWorld::set_drawn_surface`]); `proxies` are then ignored. Empty
    /// (default): the tet mesh collides.
    pub drawn_surface: Vec<Vec3>,
    /// The drawn surface's triangles (indices into [`BodyDesc::drawn_surface`], outward by the
    /// right-hand rule). If any, the drawn surface also touches other bodies and itself, in
    /// place of the tet mesh's surface ([`SoftWorld::set_drawn_mesh`]). Empty (default): only
    /// obstacle contact follows the drawn surface.
    pub drawn_triangles: Vec<[u32; 3]>,
    /// The velocity every vertex starts with (m/s).
    pub velocity: Vec3,
}

impl BodyDesc {
    /// A body of `mesh` and `material` at the origin, unscaled, at rest, with nothing pinned
    /// or attached.
    pub fn new(mesh: Arc<TetMesh>, material: MaterialParams) -> Self {
        Self {
            mesh,
            material,
            position: Vec3::zeros(),
            rotation: UnitQuaternion::identity(),
            scale: Vec3::repeat(1.0),
            pins: Vec::new(),
            attachments: Vec::new(),
            proxies: Vec::new(),
            drawn_surface: Vec::new(),
            drawn_triangles: Vec::new(),
            velocity: Vec3::zeros(),
        }
    }

    /// Builder: the position (m).
    pub fn with_position(mut self, position: Vec3) -> Self {
        self.position = position;
        self
    }

    /// Builder: the rotation.
    pub fn with_rotation(mut self, rotation: UnitQuaternion<f64>) -> Self {
        self.rotation = rotation;
        self
    }

    /// Builder: the per-axis scale.
    pub fn with_scale(mut self, scale: Vec3) -> Self {
        self.scale = scale;
        self
    }

    /// Builder: the pinned vertices.
    pub fn with_pins(mut self, pins: Vec<u32>) -> Self {
        self.pins = pins;
        self
    }

    /// Builder: the attached vertices and their stiffness (N/m).
    pub fn with_attachments(mut self, attachments: Vec<(u32, f64)>) -> Self {
        self.attachments = attachments;
        self
    }

    /// Builder: extra collision proxies (rest frame, m).
    pub fn with_proxies(mut self, proxies: Vec<Vec3>) -> Self {
        self.proxies = proxies;
        self
    }

    /// Builder: the points of the surface the body is drawn with (rest frame, m), which then
    /// collide with obstacles instead of the tet mesh (see [`BodyDesc::drawn_surface`]).
    pub fn with_drawn_surface(mut self, points: Vec<Vec3>) -> Self {
        self.drawn_surface = points;
        self
    }

    /// Builder: the mesh the body is drawn with (rest frame, m; triangles index `points`),
    /// which then collides with obstacles and other bodies instead of the tet mesh (see
    /// [`BodyDesc::drawn_surface`] and [`BodyDesc::drawn_triangles`]).
    pub fn with_drawn_mesh(mut self, points: Vec<Vec3>, triangles: Vec<[u32; 3]>) -> Self {
        self.drawn_surface = points;
        self.drawn_triangles = triangles;
        self
    }

    /// Builder: the initial velocity (m/s).
    pub fn with_velocity(mut self, velocity: Vec3) -> Self {
        self.velocity = velocity;
        self
    }
}

impl SoftWorld {
    /// Creates the body `desc` describes, or nothing at all: the material, the scaled mesh,
    /// the pose, every pinned and attached vertex, every stiffness, proxy and the velocity are
    /// checked before the body is added. An unscaled body shares `desc.mesh`.
    ///
    /// # Errors
    /// [`WorldError::Material`], [`WorldError::Mesh`] (a scale that is not finite and positive,
    /// or that overflows), [`WorldError::VertexOutOfRange`] for a pin or attachment,
    /// [`WorldError::InvalidValue`] for a non-finite position, rotation, velocity or proxy, or
    /// a negative or non-finite stiffness, [`WorldError::DrawnPointOutside`].
    pub fn add_body_from(&mut self, desc: &BodyDesc) -> Result<BodyHandle, WorldError> {
        desc.material.validate()?;
        check_finite("position", &desc.position)?;
        check_finite("velocity", &desc.velocity)?;
        if !desc.rotation.coords.iter().all(|c| c.is_finite()) {
            return Err(WorldError::InvalidValue {
                what: "rotation",
                positive: false,
            });
        }
        let mesh = if desc.scale == Vec3::repeat(1.0) {
            desc.mesh.clone()
        } else {
            Arc::new(desc.mesh.scaled(desc.scale)?)
        };
        let count = mesh.vertex_count();
        for &v in desc
            .pins
            .iter()
            .chain(desc.attachments.iter().map(|(v, _)| v))
        {
            check_vertex(v as usize, count)?;
        }
        if desc
            .attachments
            .iter()
            .any(|(_, k)| !(k.is_finite() && *k >= 0.0))
        {
            return Err(WorldError::InvalidValue {
                what: "attachment stiffness",
                positive: false,
            });
        }
        for p in &desc.proxies {
            check_finite("collision proxy", p)?;
        }
        let drawn = drawn_points(&mesh, &desc.drawn_surface, &desc.scale)?;
        if drawn.is_empty() && !desc.drawn_triangles.is_empty() {
            return Err(WorldError::EmptyDrawnSurface);
        }
        let h =
            self.add_body_with_pose(mesh.clone(), desc.material, desc.position, desc.rotation)?;
        let result = (|| -> Result<(), WorldError> {
            let start = self.positions(h)?.to_vec();
            for &v in &desc.pins {
                self.pin(h, v as usize, start[v as usize])?;
            }
            for &(v, k) in &desc.attachments {
                self.attach(h, v as usize, k, start[v as usize])?;
            }
            if !drawn.is_empty() && !desc.drawn_triangles.is_empty() {
                // A mirroring scale turns the triangles inside out.
                let mirrored = desc.scale.x * desc.scale.y * desc.scale.z < 0.0;
                let triangles = desc
                    .drawn_triangles
                    .iter()
                    .map(|&[a, b, c]| if mirrored { [a, c, b] } else { [a, b, c] })
                    .collect();
                self.set_drawn_mesh(h, drawn, triangles)?;
            } else if !drawn.is_empty() {
                self.set_drawn_surface(h, drawn)?;
            } else if !desc.proxies.is_empty() {
                let rest: Vec<Vec3> = desc
                    .proxies
                    .iter()
                    .map(|p| p.component_mul(&desc.scale))
                    .collect();
                let mut proxies = self.proxies(h)?.to_vec();
                proxies.extend(embed_points(&mesh, &rest));
                self.set_proxies(h, proxies)?;
            }
            if desc.velocity != Vec3::zeros() {
                self.velocities_mut(h)?.fill(desc.velocity);
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok(h),
            Err(e) => {
                self.remove_body(h);
                Err(e)
            }
        }
    }
}

/// The drawn surface's points (rest frame, before `scale`) embedded in the scaled `mesh`.
///
/// # Errors
/// [`WorldError::InvalidValue`] for a non-finite point, [`WorldError::DrawnPointOutside`] for
/// one further outside the mesh than [`super::MAX_DRAWN_EXTRAPOLATION`].
fn drawn_points(
    mesh: &TetMesh,
    points: &[Vec3],
    scale: &Vec3,
) -> Result<Vec<crate::sim::embed::EmbeddedPoint>, WorldError> {
    for p in points {
        check_finite("drawn surface point", p)?;
    }
    let rest: Vec<Vec3> = points.iter().map(|p| p.component_mul(scale)).collect();
    let embedded = embed_points(mesh, &rest);
    if let Some(index) = embedded
        .iter()
        .position(|e| e.outside_by() > super::drawn::MAX_DRAWN_EXTRAPOLATION)
    {
        return Err(WorldError::DrawnPointOutside { index });
    }
    Ok(embedded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::WorldSettings;

    fn desc() -> BodyDesc {
        BodyDesc::new(
            Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 2)),
            MaterialParams::RUBBER,
        )
    }

    #[test]
    fn a_description_creates_the_body_it_describes() {
        let mut world = SoftWorld::new(WorldSettings::default());
        let rotation = UnitQuaternion::from_euler_angles(0.0, 0.5, 0.0);
        let d = desc()
            .with_position(Vec3::new(1.0, 2.0, 3.0))
            .with_rotation(rotation)
            .with_scale(Vec3::new(2.0, 1.0, 0.5))
            .with_pins(vec![0])
            .with_attachments(vec![(1, 50.0)])
            .with_proxies(vec![Vec3::zeros()])
            .with_velocity(Vec3::new(0.0, -1.0, 0.0));
        let h = world.add_body_from(&d).unwrap();
        let x = world.positions(h).unwrap();
        for (p, r) in x.iter().zip(d.mesh.rest_positions()) {
            let expected = rotation * r.component_mul(&d.scale) + d.position;
            assert!((p - expected).norm() < 1e-12);
        }
        assert!(world.pinned(h).unwrap()[0]);
        let n = world.proxies(h).unwrap().len();
        assert_eq!(n, d.mesh.surface_vertices().len() + 1);
        // The embedded proxy is the cube's centre, wherever the body is.
        let centre = world.proxies(h).unwrap()[n - 1].position(x);
        assert!((centre - d.position).norm() < 1e-12);
        assert!(world.velocities(h).unwrap()[5] == d.velocity);
        assert!((world.mesh(h).unwrap().total_volume() - 0.008).abs() < 1e-12);
    }

    #[test]
    fn an_invalid_description_leaves_the_world_as_it_was() {
        let mut world = SoftWorld::new(WorldSettings::default());
        let bad = [
            desc().with_scale(Vec3::new(1.0, 0.0, 1.0)),
            desc().with_pins(vec![1000]),
            desc().with_attachments(vec![(0, -1.0)]),
            desc().with_attachments(vec![(1000, 1.0)]),
            desc().with_proxies(vec![Vec3::new(f64::NAN, 0.0, 0.0)]),
            desc().with_velocity(Vec3::new(f64::INFINITY, 0.0, 0.0)),
            desc().with_position(Vec3::new(0.0, f64::NAN, 0.0)),
            desc().with_drawn_surface(vec![Vec3::new(f64::NAN, 0.0, 0.0)]),
            desc().with_drawn_surface(vec![Vec3::new(0.0, 0.5, 0.0)]),
            BodyDesc::new(
                desc().mesh,
                MaterialParams::RUBBER.with_youngs_modulus(-1.0),
            ),
        ];
        for d in &bad {
            assert!(world.add_body_from(d).is_err(), "{d:?}");
            assert_eq!(world.bodies().count(), 0);
        }
        assert!(matches!(
            world.add_body_from(&bad[0]),
            Err(WorldError::Mesh(_))
        ));
        assert!(matches!(
            world.add_body_from(&bad[1]),
            Err(WorldError::VertexOutOfRange { vertex: 1000, .. })
        ));
    }
}
