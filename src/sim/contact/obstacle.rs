//! Static and kinematic obstacles: parry3d shapes with a pose and a velocity.
//!
//! This module is the one place where the `f64` nalgebra vectors of the core meet parry3d's `f32`
//! glam types (parry3d >= 0.26 uses glam). Half-spaces, balls, boxes and capsules are evaluated
//! analytically in `f64`, and a convex hull by its triangles' planes in `f64`
//! (`convex_faces.rs`: parry's `f32` projection called points just outside a many-faced hull's
//! vertices inside, with inward normals); every other shape goes through parry3d's point
//! projection. The inside test follows the facts checked for parry 0.31: a triangle mesh is
//! built with the `ORIENTED` flag so its pseudo-normals decide inside/outside, and a height
//! field (whose `contains_point` is always false) is tested by a vertical ray.

use std::sync::Arc;

use super::convex_faces::ConvexFaces;
pub use super::obstacle_error::{MAX_OBSTACLE_EXTENT, MIN_OBSTACLE_SIZE, ObstacleError};
use super::rigid::{CouplingResponse, RigidCoupling};
use crate::sim::material::{CombineRule, SurfaceCoefficients};
use crate::sim::math::Vec3;
use nalgebra::UnitQuaternion;
use parry3d::math::{Pose, Vector};
use parry3d::query::{Ray, RayCast};
use parry3d::shape::{Shape, SharedShape, TriMeshFlags};
use parry3d::utils::Array2;

/// The geometry of an obstacle, in its local frame (metres).
#[derive(Debug, Clone, PartialEq)]
pub enum ObstacleShape {
    /// Everything below the plane through the origin with the given outward unit normal.
    HalfSpace {
        /// Outward unit normal.
        normal: Vec3,
    },
    /// A box with the given half extents.
    Cuboid {
        /// Half extents (m).
        half_extents: Vec3,
    },
    /// A ball.
    Ball {
        /// Radius (m).
        radius: f64,
    },
    /// A capsule along the local Y axis.
    Capsule {
        /// Half the length of the inner segment (m).
        half_height: f64,
        /// Radius (m).
        radius: f64,
    },
    /// The convex hull of a point cloud.
    ConvexHull {
        /// The points (m).
        points: Vec<Vec3>,
    },
    /// A triangle mesh, counter-clockwise seen from outside (inside is behind the triangles).
    TriMesh {
        /// Vertices (m).
        vertices: Vec<Vec3>,
        /// Triangles.
        indices: Vec<[u32; 3]>,
    },
    /// A height field over the local XZ plane, heights along +Y.
    HeightField {
        /// Heights (m), `rows x cols`, row-major: `heights[r * cols + c]`, rows along Z.
        heights: Vec<f64>,
        /// Number of rows (>= 2).
        rows: usize,
        /// Number of columns (>= 2).
        cols: usize,
        /// Size of the field: X and Z extents and a height multiplier (m).
        scale: Vec3,
    },
}

/// A contact candidate of a point against an obstacle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObstacleContact {
    /// Closest point on the obstacle's surface (m, world).
    pub point: Vec3,
    /// Unit normal pointing out of the obstacle (world).
    pub normal: Vec3,
    /// Penetration depth (m): positive inside, negative when outside within the margin.
    pub depth: f64,
}

/// A static or kinematic collider.
///
/// # Example
/// ```
/// use bevy_deformable::sim::{ObstacleCollider, Vec3};
/// let floor = ObstacleCollider::halfspace(Vec3::y()).unwrap();
/// let paddle = ObstacleCollider::cuboid(Vec3::new(1.0, 0.1, 0.3)).unwrap().with_position(Vec3::new(0.0, 0.5, 0.0));
/// assert!(floor.query(Vec3::new(0.0, -0.1, 0.0), 0.0).is_some());
/// assert!(paddle.query(Vec3::new(3.0, 0.5, 0.0), 0.0).is_none());
/// ```
pub struct ObstacleCollider {
    shape: ObstacleShape,
    parry: Option<SharedShape>,
    /// A convex hull's triangles in `f64`, which answer its point queries (`convex_faces.rs`).
    hull: Option<Arc<ConvexFaces>>,
    position: Vec3,
    rotation: UnitQuaternion<f64>,
    linear_velocity: Vec3,
    angular_velocity: Vec3,
    surface: SurfaceCoefficients,
    /// The rigid body behind the obstacle, for two-way coupling; `None` for a static or
    /// kinematic obstacle.
    coupling: Option<RigidCoupling>,
    /// The coupling's state carried across steps.
    pub(crate) coupled: CoupledState,
}

/// `clone_from` copies the shape only where it differs (a world snapshot taken into a kept
/// one, and a restore, copy a mesh or hull shape without allocating when it did not change).
impl Clone for ObstacleCollider {
    fn clone(&self) -> Self {
        Self {
            shape: self.shape.clone(),
            parry: self.parry.clone(),
            hull: self.hull.clone(),
            position: self.position,
            rotation: self.rotation,
            linear_velocity: self.linear_velocity,
            angular_velocity: self.angular_velocity,
            surface: self.surface,
            coupling: self.coupling,
            coupled: self.coupled,
        }
    }

    fn clone_from(&mut self, source: &Self) {
        let Self {
            shape,
            parry,
            hull,
            position,
            rotation,
            linear_velocity,
            angular_velocity,
            surface,
            coupling,
            coupled,
        } = source;
        if self.shape != *shape {
            self.shape.clone_from(shape);
        }
        self.parry.clone_from(parry);
        self.hull.clone_from(hull);
        self.position = *position;
        self.rotation = *rotation;
        self.linear_velocity = *linear_velocity;
        self.angular_velocity = *angular_velocity;
        self.surface = *surface;
        self.coupling = *coupling;
        self.coupled = *coupled;
    }
}

/// What a coupled obstacle carries out of a step.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct CoupledState {
    /// What the soft bodies did to it in the last step.
    pub response: CouplingResponse,
    /// Its last substep's displacement from its free motion (m, rad), where it was touched:
    /// where an island that cannot solve it exactly holds it first.
    pub warm: [Vec3; 2],
}

impl std::fmt::Debug for ObstacleCollider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObstacleCollider")
            .field("shape", &self.shape)
            .field("position", &self.position)
            .field("rotation", &self.rotation)
            .field("linear_velocity", &self.linear_velocity)
            .field("angular_velocity", &self.angular_velocity)
            .field("surface", &self.surface)
            .field("coupling", &self.coupling)
            .finish()
    }
}

fn finite(what: &'static str, value: f64) -> Result<(), ObstacleError> {
    if value.is_finite() && value.abs() <= MAX_OBSTACLE_EXTENT {
        Ok(())
    } else {
        Err(ObstacleError::InvalidValue {
            what,
            value,
            positive: false,
        })
    }
}

fn positive(what: &'static str, value: f64) -> Result<(), ObstacleError> {
    if value.is_finite() && (MIN_OBSTACLE_SIZE..=MAX_OBSTACLE_EXTENT).contains(&value) {
        Ok(())
    } else {
        Err(ObstacleError::InvalidValue {
            what,
            value,
            positive: true,
        })
    }
}

/// Checks a pose and velocities: finite, the position within [`MAX_OBSTACLE_EXTENT`], the
/// rotation a unit quaternion (to 1e-6).
fn check_state(
    position: &Vec3,
    rotation: &UnitQuaternion<f64>,
    linear_velocity: &Vec3,
    angular_velocity: &Vec3,
) -> Result<(), ObstacleError> {
    for c in position.iter() {
        finite("position", *c)?;
    }
    let q = rotation.quaternion();
    let norm = q.norm();
    if !(q.coords.iter().all(|c| c.is_finite()) && (norm - 1.0).abs() <= 1e-6) {
        return Err(ObstacleError::InvalidValue {
            what: "rotation quaternion length",
            value: norm,
            positive: true,
        });
    }
    for (what, v) in [
        ("linear velocity", linear_velocity),
        ("angular velocity", angular_velocity),
    ] {
        if !v.iter().all(|c| c.is_finite()) {
            return Err(ObstacleError::InvalidValue {
                what,
                value: v.norm(),
                positive: false,
            });
        }
    }
    Ok(())
}

/// The contact of a point `local` (in the box's frame) with a box of `half` extents, exact in
/// `f64`: inside, the nearest face; outside within `margin`, the closest point of the box.
fn cuboid_query(local: &Vec3, half: &Vec3, margin: f64) -> Option<ObstacleContact> {
    let clamped = Vec3::new(
        local.x.clamp(-half.x, half.x),
        local.y.clamp(-half.y, half.y),
        local.z.clamp(-half.z, half.z),
    );
    let offset = local - clamped;
    let dist = offset.norm();
    if dist > 0.0 {
        return (dist < margin).then(|| ObstacleContact {
            point: clamped,
            normal: offset / dist,
            depth: -dist,
        });
    }
    // Inside (or on the surface): the face with the least clearance.
    let mut axis = 0;
    let mut clearance = f64::INFINITY;
    for k in 0..3 {
        let c = half[k] - local[k].abs();
        if c < clearance {
            clearance = c;
            axis = k;
        }
    }
    let sign = if local[axis] >= 0.0 { 1.0 } else { -1.0 };
    let mut normal = Vec3::zeros();
    normal[axis] = sign;
    let mut point = *local;
    point[axis] = sign * half[axis];
    Some(ObstacleContact {
        point,
        normal,
        depth: clearance,
    })
}

/// The contact of a query point `q` with its closest surface point `p` (`offset = q - p`, world):
/// inside, the normal points from `q` to `p`; outside within `margin`, from `p` to `q`; a point
/// on the surface takes `fallback` as its normal.
fn contact_from_projection(
    p: Vec3,
    offset: Vec3,
    inside: bool,
    margin: f64,
    fallback: impl FnOnce() -> Vec3,
) -> Option<ObstacleContact> {
    let dist = offset.norm();
    if !inside && dist >= margin {
        return None;
    }
    let outward = if dist > 1e-9 {
        offset / dist
    } else {
        fallback()
    };
    Some(if inside {
        ObstacleContact {
            point: p,
            normal: if dist > 1e-9 { -outward } else { outward },
            depth: dist,
        }
    } else {
        ObstacleContact {
            point: p,
            normal: outward,
            depth: -dist,
        }
    })
}

#[inline]
fn to_parry(v: &Vec3) -> Vector {
    Vector::new(v.x as f32, v.y as f32, v.z as f32)
}

#[inline]
fn from_parry(v: Vector) -> Vec3 {
    Vec3::new(v.x as f64, v.y as f64, v.z as f64)
}

impl ObstacleCollider {
    /// An obstacle from a shape description, at the origin, at rest, friction 0.5, restitution 0.
    ///
    /// # Errors
    /// [`ObstacleError`] for non-finite or non-positive sizes and degenerate geometry.
    pub fn new(shape: ObstacleShape) -> Result<Self, ObstacleError> {
        let mut hull = None;
        let parry = match &shape {
            ObstacleShape::HalfSpace { normal } => {
                for c in normal.iter() {
                    finite("normal", *c)?;
                }
                let length = normal.norm();
                if (length - 1.0).abs() > 1e-9 {
                    return Err(ObstacleError::UnnormalizedNormal(length));
                }
                None
            }
            ObstacleShape::Ball { radius } => {
                positive("radius", *radius)?;
                None
            }
            ObstacleShape::Cuboid { half_extents } => {
                for c in half_extents.iter() {
                    positive("half extent", *c)?;
                }
                Some(SharedShape::cuboid(
                    half_extents.x as f32,
                    half_extents.y as f32,
                    half_extents.z as f32,
                ))
            }
            ObstacleShape::Capsule {
                half_height,
                radius,
            } => {
                positive("half height", *half_height)?;
                positive("radius", *radius)?;
                Some(SharedShape::capsule_y(*half_height as f32, *radius as f32))
            }
            ObstacleShape::ConvexHull { points } => {
                for p in points {
                    for c in p.iter() {
                        finite("hull point", *c)?;
                    }
                }
                let pts: Vec<Vector> = points.iter().map(to_parry).collect();
                hull = Some(Arc::new(
                    ConvexFaces::new(points).ok_or(ObstacleError::DegenerateHull(points.len()))?,
                ));
                Some(
                    SharedShape::convex_hull(&pts)
                        .ok_or(ObstacleError::DegenerateHull(points.len()))?,
                )
            }
            ObstacleShape::TriMesh { vertices, indices } => {
                for p in vertices {
                    for c in p.iter() {
                        finite("mesh vertex", *c)?;
                    }
                }
                if let Some(t) = indices
                    .iter()
                    .find(|t| t.iter().any(|&i| i as usize >= vertices.len()))
                {
                    return Err(ObstacleError::InvalidTriMesh(format!(
                        "triangle {t:?} indexes past {} vertices",
                        vertices.len()
                    )));
                }
                let verts: Vec<Vector> = vertices.iter().map(to_parry).collect();
                Some(
                    SharedShape::trimesh_with_flags(verts, indices.clone(), TriMeshFlags::ORIENTED)
                        .map_err(|e| ObstacleError::InvalidTriMesh(format!("{e:?}")))?,
                )
            }
            ObstacleShape::HeightField {
                heights,
                rows,
                cols,
                scale,
            } => {
                if *rows < 2 || *cols < 2 || heights.len() != rows * cols {
                    return Err(ObstacleError::InvalidHeightField {
                        rows: *rows,
                        cols: *cols,
                        len: heights.len(),
                    });
                }
                for h in heights {
                    finite("height", *h)?;
                }
                for c in scale.iter() {
                    positive("height field scale", *c)?;
                }
                // parry's Array2 is column-major over (rows along Z, cols along X).
                let mut data = vec![0.0f32; rows * cols];
                for r in 0..*rows {
                    for c in 0..*cols {
                        data[c * rows + r] = heights[r * cols + c] as f32;
                    }
                }
                Some(SharedShape::heightfield(
                    Array2::new(*rows, *cols, data),
                    to_parry(scale),
                ))
            }
        };
        Ok(Self {
            shape,
            parry,
            hull,
            position: Vec3::zeros(),
            rotation: UnitQuaternion::identity(),
            linear_velocity: Vec3::zeros(),
            angular_velocity: Vec3::zeros(),
            surface: SurfaceCoefficients::default(),
            coupling: None,
            coupled: CoupledState::default(),
        })
    }

    /// A half-space (floor, wall) below the plane through the origin with outward `normal`.
    ///
    /// # Errors
    /// [`ObstacleError::InvalidValue`] for a zero or non-finite normal.
    pub fn halfspace(normal: Vec3) -> Result<Self, ObstacleError> {
        let n = normal.norm();
        if !(n.is_finite() && n >= 1e-9) {
            return Err(ObstacleError::InvalidValue {
                what: "normal length",
                value: n,
                positive: true,
            });
        }
        Self::new(ObstacleShape::HalfSpace { normal: normal / n })
    }

    /// A box with `half_extents` (m).
    ///
    /// # Errors
    /// [`ObstacleError::InvalidValue`] for a non-positive or non-finite size.
    pub fn cuboid(half_extents: Vec3) -> Result<Self, ObstacleError> {
        Self::new(ObstacleShape::Cuboid { half_extents })
    }

    /// A ball of `radius` (m).
    ///
    /// # Errors
    /// [`ObstacleError::InvalidValue`] for a non-positive or non-finite radius.
    pub fn ball(radius: f64) -> Result<Self, ObstacleError> {
        Self::new(ObstacleShape::Ball { radius })
    }

    /// A capsule along local Y: `radius` (m) around a segment from `-half_height` to
    /// `+half_height` (m). The radius comes first, as in [`crate::sim::TetMesh::capsule`] and
    /// Bevy's `Capsule3d::new(radius, length)`.
    ///
    /// # Errors
    /// [`ObstacleError::InvalidValue`] for a non-positive or non-finite size.
    pub fn capsule(radius: f64, half_height: f64) -> Result<Self, ObstacleError> {
        Self::new(ObstacleShape::Capsule {
            half_height,
            radius,
        })
    }

    /// The convex hull of `points` (m).
    ///
    /// # Errors
    /// [`ObstacleError`] for non-finite or degenerate input.
    pub fn convex_hull(points: Vec<Vec3>) -> Result<Self, ObstacleError> {
        Self::new(ObstacleShape::ConvexHull { points })
    }

    /// A triangle mesh (counter-clockwise from outside).
    ///
    /// # Errors
    /// [`ObstacleError`] for non-finite vertices or invalid indices.
    pub fn trimesh(vertices: Vec<Vec3>, indices: Vec<[u32; 3]>) -> Result<Self, ObstacleError> {
        Self::new(ObstacleShape::TriMesh { vertices, indices })
    }

    /// A height field (see [`ObstacleShape::HeightField`]).
    ///
    /// # Errors
    /// [`ObstacleError`] for a grid smaller than 2x2, a size mismatch or non-finite values.
    pub fn heightfield(
        heights: Vec<f64>,
        rows: usize,
        cols: usize,
        scale: Vec3,
    ) -> Result<Self, ObstacleError> {
        Self::new(ObstacleShape::HeightField {
            heights,
            rows,
            cols,
            scale,
        })
    }

    /// Builder: place the obstacle at `position` (m). Not checked here:
    /// [`crate::sim::SoftWorld::add_obstacle`] refuses a non-finite position (and
    /// [`crate::sim::SoftWorld::step`] an obstacle given one after it was added).
    pub fn with_position(mut self, position: Vec3) -> Self {
        self.position = position;
        self
    }

    /// Builder: rotate the obstacle (checked like [`ObstacleCollider::with_position`]).
    pub fn with_rotation(mut self, rotation: UnitQuaternion<f64>) -> Self {
        self.rotation = rotation;
        self
    }

    /// Builder: Coulomb friction coefficient (combined with the body's by the combine rules).
    pub fn with_friction(mut self, friction: f64) -> Self {
        self.surface.friction = if friction.is_finite() {
            friction.max(0.0)
        } else {
            0.0
        };
        self
    }

    /// Builder: restitution coefficient, clamped to `[0, 1]`.
    pub fn with_restitution(mut self, restitution: f64) -> Self {
        self.surface.restitution = if restitution.is_finite() {
            restitution.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self
    }

    /// Builder: the rules combining friction and restitution with the body's.
    pub fn with_combine_rules(mut self, friction: CombineRule, restitution: CombineRule) -> Self {
        self.surface.friction_combine = friction;
        self.surface.restitution_combine = restitution;
        self
    }

    /// Builder: a dynamic rigid body behind the obstacle, coupled both ways with the soft
    /// bodies (see [`ObstacleCollider::set_coupling`]).
    ///
    /// # Errors
    /// As [`RigidCoupling::validate`].
    pub fn with_coupling(mut self, coupling: RigidCoupling) -> Result<Self, ObstacleError> {
        self.set_coupling(Some(coupling))?;
        Ok(self)
    }

    /// Makes the obstacle the collider of a dynamic rigid body (`Some`) or a static/kinematic
    /// one again (`None`). A coupled obstacle's pose and velocities are its body's at the
    /// *start* of a step (set them with [`ObstacleCollider::set_state`] before each step); the step
    /// moves it by its free motion and the soft bodies' contact forces together with the soft
    /// bodies, leaves it at the end of that motion, and reports the velocity change the soft
    /// bodies caused in [`ObstacleCollider::coupling_response`], for the rigid-body engine to add.
    ///
    /// # Errors
    /// As [`RigidCoupling::validate`]; the obstacle is left as it was.
    pub fn set_coupling(&mut self, coupling: Option<RigidCoupling>) -> Result<(), ObstacleError> {
        if let Some(c) = &coupling {
            c.validate()?;
        }
        if coupling.is_none() {
            self.coupled = CoupledState::default();
        }
        self.coupling = coupling;
        Ok(())
    }

    /// The rigid body behind a coupled obstacle.
    pub fn coupling(&self) -> Option<&RigidCoupling> {
        self.coupling.as_ref()
    }

    /// What the soft bodies did to a coupled obstacle in the last step (zero for others).
    pub fn coupling_response(&self) -> &CouplingResponse {
        &self.coupled.response
    }

    /// The centre of mass in the world (m): the coupled body's, else the position.
    pub fn center_of_mass(&self) -> Vec3 {
        match &self.coupling {
            Some(c) => self.position + self.rotation * c.local_center_of_mass,
            None => self.position,
        }
    }

    /// Sets the state of a coupled obstacle's body by its centre of mass (m, world), rotation,
    /// the centre of mass's linear velocity (m/s) and the angular velocity (rad/s), as a
    /// rigid-body engine holds them; for an obstacle without coupling the centre of mass is
    /// its position.
    ///
    /// # Errors
    /// As [`ObstacleCollider::set_state`]; the obstacle is left as it was.
    pub fn set_center_state(
        &mut self,
        center: Vec3,
        rotation: UnitQuaternion<f64>,
        linear: Vec3,
        angular: Vec3,
    ) -> Result<(), ObstacleError> {
        check_state(&center, &rotation, &linear, &angular)?;
        let before = (
            self.position,
            self.rotation,
            self.linear_velocity,
            self.angular_velocity,
        );
        self.place_coupled(center, rotation, linear, angular);
        if let Err(e) = check_state(
            &self.position,
            &self.rotation,
            &self.linear_velocity,
            &self.angular_velocity,
        ) {
            (
                self.position,
                self.rotation,
                self.linear_velocity,
                self.angular_velocity,
            ) = before;
            return Err(e);
        }
        Ok(())
    }

    /// Places a coupled obstacle by its centre of mass (m) and rotation, with velocities
    /// (m/s, rad/s; linear of the centre of mass), during a step.
    pub(crate) fn place_coupled(
        &mut self,
        center: Vec3,
        rotation: UnitQuaternion<f64>,
        linear: Vec3,
        angular: Vec3,
    ) {
        let local = self
            .coupling
            .as_ref()
            .map_or(Vec3::zeros(), |c| c.local_center_of_mass);
        self.position = center - rotation * local;
        self.rotation = rotation;
        // `velocity_at` takes the angular velocity about the position.
        self.linear_velocity = linear + angular.cross(&(self.position - center));
        self.angular_velocity = angular;
    }

    /// The linear velocity of the centre of mass (m/s).
    pub fn center_velocity(&self) -> Vec3 {
        self.velocity_at(&self.center_of_mass())
    }

    /// Sets pose and velocities directly (m, rad, m/s, rad/s).
    ///
    /// # Errors
    /// [`ObstacleError::InvalidValue`] for a non-finite or out-of-range value or a rotation
    /// that is not a unit quaternion; the obstacle is left as it was.
    pub fn set_state(
        &mut self,
        position: Vec3,
        rotation: UnitQuaternion<f64>,
        linear_velocity: Vec3,
        angular_velocity: Vec3,
    ) -> Result<(), ObstacleError> {
        check_state(&position, &rotation, &linear_velocity, &angular_velocity)?;
        self.position = position;
        self.rotation = rotation;
        self.linear_velocity = linear_velocity;
        self.angular_velocity = angular_velocity;
        Ok(())
    }

    /// Moves a kinematic obstacle to a new pose reached after `dt` seconds; its velocities are set
    /// from the pose difference so contacts see the motion (`dt = 0` teleports it and keeps
    /// them).
    ///
    /// # Errors
    /// As [`ObstacleCollider::set_state`], and for a negative or non-finite `dt`; the obstacle is left
    /// as it was.
    pub fn move_to(
        &mut self,
        position: Vec3,
        rotation: UnitQuaternion<f64>,
        dt: f64,
    ) -> Result<(), ObstacleError> {
        if !(dt.is_finite() && dt >= 0.0) {
            return Err(ObstacleError::InvalidValue {
                what: "time step",
                value: dt,
                positive: false,
            });
        }
        let (linear, angular) = if dt > 0.0 {
            let delta = rotation * self.rotation.inverse();
            ((position - self.position) / dt, delta.scaled_axis() / dt)
        } else {
            (self.linear_velocity, self.angular_velocity)
        };
        self.set_state(position, rotation, linear, angular)
    }

    /// Checks the pose and velocities given by the builders ([`ObstacleCollider::with_position`],
    /// [`ObstacleCollider::with_rotation`]); [`crate::sim::SoftWorld::add_obstacle`] calls it.
    ///
    /// # Errors
    /// As [`ObstacleCollider::set_state`].
    pub fn validate(&self) -> Result<(), ObstacleError> {
        check_state(
            &self.position,
            &self.rotation,
            &self.linear_velocity,
            &self.angular_velocity,
        )
    }

    /// The shape description.
    pub fn shape(&self) -> &ObstacleShape {
        &self.shape
    }

    /// Position (m).
    pub fn position(&self) -> Vec3 {
        self.position
    }

    /// Rotation.
    pub fn rotation(&self) -> UnitQuaternion<f64> {
        self.rotation
    }

    /// Linear velocity (m/s).
    pub fn linear_velocity(&self) -> Vec3 {
        self.linear_velocity
    }

    /// Angular velocity (rad/s), about the obstacle's position.
    pub fn angular_velocity(&self) -> Vec3 {
        self.angular_velocity
    }

    /// Whether the obstacle moves (a non-zero linear or angular velocity).
    pub fn is_moving(&self) -> bool {
        self.linear_velocity != Vec3::zeros() || self.angular_velocity != Vec3::zeros()
    }

    /// Friction coefficient.
    pub fn friction(&self) -> f64 {
        self.surface.friction
    }

    /// Friction, restitution and their combine rules.
    pub fn surface(&self) -> &SurfaceCoefficients {
        &self.surface
    }

    /// Velocity (m/s) of the obstacle's material point at world position `p`.
    pub fn velocity_at(&self, p: &Vec3) -> Vec3 {
        self.linear_velocity + self.angular_velocity.cross(&(p - self.position))
    }

    fn pose(&self) -> Pose {
        let q = self.rotation.quaternion();
        Pose::from_parts(
            to_parry(&self.position),
            parry3d::math::Rotation::from_xyzw(q.i as f32, q.j as f32, q.k as f32, q.w as f32),
        )
    }

    /// World-space bounds `(min, max)` (m); `None` for unbounded shapes (half-spaces).
    pub fn bounds(&self) -> Option<(Vec3, Vec3)> {
        match &self.shape {
            ObstacleShape::HalfSpace { .. } => None,
            ObstacleShape::Ball { radius } => Some((
                self.position - Vec3::repeat(*radius),
                self.position + Vec3::repeat(*radius),
            )),
            _ => {
                let shape = self.parry.as_ref()?;
                let aabb = shape.compute_aabb(&self.pose());
                let pad = Vec3::repeat(1e-4);
                Some((from_parry(aabb.mins) - pad, from_parry(aabb.maxs) + pad))
            }
        }
    }

    /// Does the box `(lo, hi)` inflated by `margin` possibly touch the obstacle?
    pub fn may_touch(&self, lo: &Vec3, hi: &Vec3, margin: f64) -> bool {
        match &self.shape {
            ObstacleShape::HalfSpace { normal } => {
                let n = self.rotation * normal;
                // Lowest corner of the box along n.
                let corner = Vec3::new(
                    if n.x > 0.0 { lo.x } else { hi.x },
                    if n.y > 0.0 { lo.y } else { hi.y },
                    if n.z > 0.0 { lo.z } else { hi.z },
                );
                n.dot(&(corner - self.position)) <= margin
            }
            _ => match self.bounds() {
                Some((olo, ohi)) => {
                    (0..3).all(|k| lo[k] - margin <= ohi[k] && hi[k] + margin >= olo[k])
                }
                None => true,
            },
        }
    }

    /// The contact of point `q` (m, world) with this obstacle if it is inside, or outside closer
    /// than `margin` (m).
    pub fn query(&self, q: Vec3, margin: f64) -> Option<ObstacleContact> {
        match &self.shape {
            ObstacleShape::HalfSpace { normal } => {
                let n = self.rotation * normal;
                let d = n.dot(&(q - self.position));
                (d < margin).then(|| ObstacleContact {
                    point: q - d * n,
                    normal: n,
                    depth: -d,
                })
            }
            ObstacleShape::Ball { radius } => {
                let r = q - self.position;
                let dist = r.norm();
                let d = dist - radius;
                if d >= margin {
                    return None;
                }
                let normal = if dist > 1e-12 { r / dist } else { Vec3::y() };
                Some(ObstacleContact {
                    point: self.position + *radius * normal,
                    normal,
                    depth: -d,
                })
            }
            ObstacleShape::Cuboid { half_extents } => {
                let local = self.rotation.inverse() * (q - self.position);
                let c = cuboid_query(&local, half_extents, margin)?;
                Some(self.to_world(c))
            }
            ObstacleShape::Capsule {
                half_height,
                radius,
            } => {
                let local = self.rotation.inverse() * (q - self.position);
                let axis = Vec3::new(0.0, local.y.clamp(-half_height, *half_height), 0.0);
                let r = local - axis;
                let dist = r.norm();
                let d = dist - radius;
                if d >= margin {
                    return None;
                }
                let normal = if dist > 1e-12 { r / dist } else { Vec3::x() };
                Some(self.to_world(ObstacleContact {
                    point: axis + *radius * normal,
                    normal,
                    depth: -d,
                }))
            }
            ObstacleShape::HeightField { .. } => self.query_heightfield(q, margin),
            ObstacleShape::ConvexHull { .. } => {
                let local = self.rotation.inverse() * (q - self.position);
                let c = self.hull.as_ref()?.query(&local, margin)?;
                Some(self.to_world(c))
            }
            _ => self.query_parry(q, margin),
        }
    }

    /// Whether the straight path from `a` to `b` (m, world) passes through the obstacle: an end
    /// inside it, or the segment crossing its surface (a fast point's path through a thin
    /// obstacle). Tested in `f32` against parry's ray casts (analytic shapes build a parry
    /// ball or capsule for it).
    pub fn segment_enters(&self, a: Vec3, b: Vec3) -> bool {
        let inside = |p: Vec3| self.query(p, 0.0).is_some_and(|c| c.depth > 0.0);
        if inside(a) || inside(b) {
            return true;
        }
        let local = |p: Vec3| self.rotation.inverse() * (p - self.position);
        let (la, lb) = (local(a), local(b));
        if (lb - la).norm_squared() == 0.0 {
            return false;
        }
        let ray = Ray::new(to_parry(&la), to_parry(&(lb - la)));
        match &self.shape {
            // Only ends can be inside a half-space: checked above.
            ObstacleShape::HalfSpace { .. } => false,
            ObstacleShape::Ball { radius } => parry3d::shape::Ball::new(*radius as f32)
                .cast_local_ray(&ray, 1.0, true)
                .is_some(),
            ObstacleShape::Capsule {
                half_height,
                radius,
            } => parry3d::shape::Capsule::new_y(*half_height as f32, *radius as f32)
                .cast_local_ray(&ray, 1.0, true)
                .is_some(),
            _ => self
                .parry
                .as_ref()
                .is_some_and(|shape| shape.cast_local_ray(&ray, 1.0, true).is_some()),
        }
    }

    /// A contact computed in the obstacle's frame, moved to world space.
    fn to_world(&self, c: ObstacleContact) -> ObstacleContact {
        ObstacleContact {
            point: self.rotation * c.point + self.position,
            normal: self.rotation * c.normal,
            depth: c.depth,
        }
    }

    fn query_parry(&self, q: Vec3, margin: f64) -> Option<ObstacleContact> {
        let shape = self.parry.as_ref()?;
        let pose = self.pose();
        let local = pose.inverse_transform_point(to_parry(&q));
        let (proj, feature) = shape.project_local_point_and_get_feature(local);
        let p = from_parry(pose.transform_point(proj.point));
        // In f32 the offset of a point within ~1e-4 m of the surface has no usable direction:
        // take the normal of the feature it projects onto instead.
        let offset = q - p;
        if offset.norm() < 1e-4
            && let Some(n) = shape.feature_normal_at_point(proj.subshape, feature, proj.point)
        {
            let n = from_parry(pose.rotation * n).normalize();
            let d = n.dot(&offset);
            return (proj.is_inside || d < margin).then_some(ObstacleContact {
                point: p,
                normal: n,
                depth: -d,
            });
        }
        contact_from_projection(p, offset, proj.is_inside, margin, || {
            self.fallback_normal(&q)
        })
    }

    fn query_heightfield(&self, q: Vec3, margin: f64) -> Option<ObstacleContact> {
        let shape: &Arc<dyn Shape> = &self.parry.as_ref()?.0;
        let local = self.rotation.inverse() * (q - self.position);
        let aabb = shape.compute_local_aabb();
        let top = aabb.maxs.y as f64 + 1.0;
        let ray = Ray::new(
            Vector::new(local.x as f32, top as f32, local.z as f32),
            Vector::new(0.0, -1.0, 0.0),
        );
        let below_surface = shape
            .cast_local_ray(&ray, f32::MAX, true)
            .map(|toi| local.y < top - toi as f64)
            .unwrap_or(false);
        let proj = shape.project_local_point(to_parry(&local), false);
        let p_local = from_parry(proj.point);
        let p = self.rotation * p_local + self.position;
        let up = self.rotation * Vec3::y();
        contact_from_projection(
            p,
            self.rotation * (local - p_local),
            below_surface,
            margin,
            || up,
        )
    }

    /// Normal for a point exactly on the surface: away from the obstacle's centre.
    fn fallback_normal(&self, q: &Vec3) -> Vec3 {
        let r = q - self.position;
        let n = r.norm();
        if n > 1e-12 {
            r / n
        } else {
            self.rotation * Vec3::y()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halfspace_ball_and_cuboid_queries_are_exact() {
        let floor = ObstacleCollider::halfspace(Vec3::new(0.0, 2.0, 0.0)).unwrap();
        let c = floor.query(Vec3::new(1.0, -0.25, 2.0), 0.0).unwrap();
        assert!((c.depth - 0.25).abs() < 1e-15);
        assert_eq!(c.normal, Vec3::y());
        assert_eq!(c.point, Vec3::new(1.0, 0.0, 2.0));
        assert!(floor.query(Vec3::new(0.0, 0.1, 0.0), 0.05).is_none());
        assert!(floor.query(Vec3::new(0.0, 0.01, 0.0), 0.05).unwrap().depth < 0.0);

        let ball = ObstacleCollider::ball(1.0)
            .unwrap()
            .with_position(Vec3::new(0.0, 1.0, 0.0));
        let c = ball.query(Vec3::new(0.0, 1.5, 0.0), 0.0).unwrap();
        assert!((c.depth - 0.5).abs() < 1e-12);
        assert!((c.normal - Vec3::y()).norm() < 1e-12);

        let rot = UnitQuaternion::from_axis_angle(&Vec3::z_axis(), std::f64::consts::FRAC_PI_2);
        let boxed = ObstacleCollider::cuboid(Vec3::new(2.0, 0.5, 1.0))
            .unwrap()
            .with_position(Vec3::new(0.0, 3.0, 0.0))
            .with_rotation(rot);
        // Rotated 90 degrees about Z: the box's long axis is now Y; its +x face is at x = 0.5.
        let c = boxed.query(Vec3::new(0.4, 3.0, 0.0), 0.0).unwrap();
        assert!((c.depth - 0.1).abs() < 1e-5, "{c:?}");
        assert!((c.normal - Vec3::x()).norm() < 1e-5);
        assert!(boxed.query(Vec3::new(0.6, 3.0, 0.0), 0.0).is_none());
    }

    #[test]
    fn capsule_hull_trimesh_and_heightfield_detect_penetration() {
        let cap = ObstacleCollider::capsule(0.5, 1.0).unwrap();
        let c = cap.query(Vec3::new(0.3, 0.5, 0.0), 0.0).unwrap();
        assert!((c.depth - 0.2).abs() < 1e-5);
        let cube: Vec<Vec3> = (0..8)
            .map(|i| Vec3::new((i & 1) as f64, ((i >> 1) & 1) as f64, ((i >> 2) & 1) as f64))
            .collect();
        let hull = ObstacleCollider::convex_hull(cube.clone()).unwrap();
        let c = hull.query(Vec3::new(0.5, 0.9, 0.5), 0.0).unwrap();
        assert!((c.depth - 0.1).abs() < 1e-5 && (c.normal - Vec3::y()).norm() < 1e-5);
        // Closed box as a triangle mesh.
        let idx = vec![
            [0, 2, 1],
            [1, 2, 3],
            [4, 5, 6],
            [5, 7, 6],
            [0, 1, 4],
            [1, 5, 4],
            [2, 6, 3],
            [3, 6, 7],
            [0, 4, 2],
            [2, 4, 6],
            [1, 3, 5],
            [3, 7, 5],
        ];
        let mesh = ObstacleCollider::trimesh(cube, idx).unwrap();
        let c = mesh.query(Vec3::new(0.5, 0.8, 0.5), 0.0).unwrap();
        assert!((c.depth - 0.2).abs() < 1e-5, "{c:?}");
        assert!(mesh.query(Vec3::new(0.5, 1.3, 0.5), 0.0).is_none());
        // A point within f32 reach of a face (where the normal is the face's, not the offset's
        // direction) gets the normal of the face it is on, whichever triangle of the mesh that
        // is, not the first triangle's (which faces -z here).
        for (q, n) in [
            (Vec3::new(1.0 + 3e-5, 0.4, 0.6), Vec3::x()),
            (Vec3::new(0.3, 1.0 + 3e-5, 0.7), Vec3::y()),
            (Vec3::new(0.6, 0.5, -3e-5), -Vec3::z()),
        ] {
            let c = mesh.query(q, 1e-3).unwrap();
            assert!((c.normal - n).norm() < 1e-5, "{q}: {c:?}");
        }
        // A flat height field at y = 0.5 spanning 4 m.
        let hf =
            ObstacleCollider::heightfield(vec![0.5; 9], 3, 3, Vec3::new(4.0, 1.0, 4.0)).unwrap();
        let c = hf.query(Vec3::new(0.3, 0.2, -0.4), 0.0).unwrap();
        assert!((c.depth - 0.3).abs() < 1e-5, "{c:?}");
        assert!((c.normal - Vec3::y()).norm() < 1e-5);
        assert!(hf.query(Vec3::new(0.3, 0.7, -0.4), 0.0).is_none());
    }

    #[test]
    fn bad_input_is_rejected() {
        assert!(ObstacleCollider::ball(-1.0).is_err());
        assert!(ObstacleCollider::halfspace(Vec3::zeros()).is_err());
        assert!(ObstacleCollider::cuboid(Vec3::new(1.0, f64::NAN, 1.0)).is_err());
        assert!(ObstacleCollider::convex_hull(vec![Vec3::zeros(); 3]).is_err());
        assert!(ObstacleCollider::trimesh(vec![Vec3::zeros()], vec![[0, 1, 2]]).is_err());
        assert!(ObstacleCollider::heightfield(vec![0.0; 3], 2, 2, Vec3::repeat(1.0)).is_err());
    }

    #[test]
    fn kinematic_velocity_from_motion() {
        let mut o = ObstacleCollider::cuboid(Vec3::repeat(0.5)).unwrap();
        o.move_to(Vec3::new(0.1, 0.0, 0.0), UnitQuaternion::identity(), 0.05)
            .unwrap();
        assert!((o.linear_velocity() - Vec3::new(2.0, 0.0, 0.0)).norm() < 1e-12);
        assert!(
            (o.velocity_at(&Vec3::new(5.0, 5.0, 5.0)) - Vec3::new(2.0, 0.0, 0.0)).norm() < 1e-12
        );
    }
}
