//! The components a game puts on its entities.
//!
//! | component | what |
//! | --- | --- |
//! | [`DeformableBody`] | a tet mesh that becomes a soft body; brings [`SoftMaterial`] and [`Transform`] |
//! | [`SoftMaterial`] | Young's modulus, Poisson ratio, density, damping, strain damping, friction, restitution; editable at run time |
//! | [`ObstacleStatus`] | whether the simulation took an obstacle and its last move, and why not |
//! | [`CollisionProxy`] | what collides: the drawn mesh with obstacles (default) or everything, the tet vertices, or those and extra points |
//! | [`Obstacle`] | a static or moving collider following the entity's `GlobalTransform` |
//! | [`InitialVelocity`] | the velocity a body starts with |
//! | [`Pin`] | vertices held in place where they are when the body is created, by index or [`VertexSelection`] |
//! | [`Attachment`] | vertices tied by zero-rest-length springs to another entity's transform |
//! | [`DeformableState`] | read-only: the body's state in the simulation (owned by the plugin) |

use std::sync::Arc;

use bevy::asset::Handle;
use bevy::ecs::entity::Entity;
use bevy::math::{Quat, Vec3};
use bevy::prelude::{Component, Reflect, ReflectComponent, ReflectDefault, Transform};
use serde::{Deserialize, Serialize};

use crate::assets::TetMeshAsset;
use crate::selection::VertexSelection;
use crate::sim;
pub use crate::sim::CombineRule;
use crate::status::{BodyError, BodyStatus};

/// Where a body's tet mesh comes from.
#[derive(Debug, Clone)]
pub enum TetMeshSource {
    /// A mesh built in code.
    Mesh(Arc<sim::TetMesh>),
    /// A loaded `.node`/`.ele` or `.msh` asset; the body is created once it has loaded.
    Asset(Handle<TetMeshAsset>),
}

/// A volumetric soft body. Spawn it with a [`Transform`] that places its rest shape (translation,
/// rotation and scale are baked into the initial positions); from then on the plugin owns the
/// entity's `Transform` and its render mesh: the `Transform` follows the body's centroid and
/// turns with the body (the best-fit rotation of its render points since it was created, from
/// the spawn rotation; scale one), so child entities (a hat, a light) move and turn with it.
///
/// # Example
/// ```
/// use bevy::prelude::*;
/// use bevy_deformable::prelude::*;
/// fn spawn(mut commands: Commands) {
///     commands.spawn((
///         DeformableBody::cuboid(Vec3::splat(0.25), 6).expect("valid size"),
///         SoftMaterial::JELLY,
///         Transform::from_xyz(0.0, 2.0, 0.0),
///     ));
/// }
/// ```
#[derive(Component, Reflect, Debug, Clone)]
#[reflect(Component, Clone)]
#[require(SoftMaterial, Transform, CollisionProxy, DeformableState)]
pub struct DeformableBody {
    /// The tet mesh (not reflected: a reflected copy holds an unloaded asset handle).
    #[reflect(ignore, default = "unloaded_mesh")]
    pub mesh: TetMeshSource,
}

/// The mesh source a reflected [`DeformableBody`] is rebuilt with: an asset never loaded.
fn unloaded_mesh() -> TetMeshSource {
    TetMeshSource::Asset(Handle::default())
}

impl From<sim::TetMesh> for DeformableBody {
    fn from(mesh: sim::TetMesh) -> Self {
        Self {
            mesh: TetMeshSource::Mesh(Arc::new(mesh)),
        }
    }
}

impl From<Arc<sim::TetMesh>> for DeformableBody {
    fn from(mesh: Arc<sim::TetMesh>) -> Self {
        Self {
            mesh: TetMeshSource::Mesh(mesh),
        }
    }
}

impl From<Handle<TetMeshAsset>> for DeformableBody {
    fn from(handle: Handle<TetMeshAsset>) -> Self {
        Self {
            mesh: TetMeshSource::Asset(handle),
        }
    }
}

/// The material of a soft body (see [`sim::MaterialParams`] for the model). Changing it at run time
/// refactors that body's system on the next step. Serializable (the inspector saves tuned
/// materials to RON files).
#[derive(Component, Reflect, Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[reflect(Component, Default)]
#[serde(default)]
pub struct SoftMaterial {
    /// Young's modulus (Pa), > 0. Default: 2.0e5.
    pub youngs_modulus: f32,
    /// Poisson ratio, in (-1, 0.5). Default: 0.4.
    pub poisson_ratio: f32,
    /// Density (kg/m^3), > 0. Default: 1100.
    pub density: f32,
    /// Deformation damping rate (1/s), >= 0. Default: 1.
    pub damping: f32,
    /// Strain-rate (Kelvin-Voigt) damping time (s), >= 0: the viscous stress of a strain rate
    /// is this many seconds times the elastic stress of the same strain; damps a body's
    /// bouncing on its own elasticity (see [`sim::MaterialParams::strain_damping`]; ignored by
    /// the Newton-MPRGP solver). Default: 0.02.
    pub strain_damping: f32,
    /// Coulomb friction coefficient, >= 0, combined with the other side's by the combine rules
    /// (against obstacles and other bodies). Default: 0.8.
    pub friction: f32,
    /// Restitution coefficient in [0, 1]: the share of an impact's approach speed given back
    /// (above [`crate::plugin::ContactSettings::restitution_threshold`]); the body's own elastic rebound
    /// comes on top. Default: 0.
    pub restitution: f32,
    /// How friction combines with the other side's. Default: average.
    pub friction_combine: CombineRule,
    /// How restitution combines with the other side's. Default: average.
    pub restitution_combine: CombineRule,
    /// Optional limits on the principal stretches (a biphasic material: soft until the limit,
    /// then stiff, like flesh over a tougher layer). Default: none.
    pub strain_limits: Option<StrainLimits>,
}

/// Limits on a tet's principal stretches (see [`sim::StrainLimitParams`]).
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[reflect(Default)]
pub struct StrainLimits {
    /// Smallest allowed principal stretch (dimensionless, in (0, 1]). Default: 0.8.
    pub min_stretch: f32,
    /// Largest allowed principal stretch (dimensionless, >= 1). Default: 1.2.
    pub max_stretch: f32,
    /// Stiffness of the limit as a multiple of the corotated stiffness (dimensionless, > 0).
    /// Default: 10.
    pub stiffness_scale: f32,
}

impl Default for StrainLimits {
    fn default() -> Self {
        Self::from_sim(sim::StrainLimitParams {
            min_stretch: 0.8,
            max_stretch: 1.2,
            stiffness_scale: 10.0,
        })
    }
}

impl StrainLimits {
    const fn from_sim(l: sim::StrainLimitParams) -> Self {
        Self {
            min_stretch: l.min_stretch as f32,
            max_stretch: l.max_stretch as f32,
            stiffness_scale: l.stiffness_scale as f32,
        }
    }

    /// The core's limits.
    pub(crate) const fn to_sim(self) -> sim::StrainLimitParams {
        sim::StrainLimitParams {
            min_stretch: self.min_stretch as f64,
            max_stretch: self.max_stretch as f64,
            stiffness_scale: self.stiffness_scale as f64,
        }
    }
}

impl Default for SoftMaterial {
    fn default() -> Self {
        Self::RUBBER
    }
}

impl SoftMaterial {
    const fn from_sim(m: sim::MaterialParams) -> Self {
        Self {
            youngs_modulus: m.youngs_modulus as f32,
            poisson_ratio: m.poisson_ratio as f32,
            density: m.density as f32,
            damping: m.damping as f32,
            strain_damping: m.strain_damping as f32,
            friction: m.friction as f32,
            restitution: m.restitution as f32,
            friction_combine: m.friction_combine,
            restitution_combine: m.restitution_combine,
            strain_limits: match m.strain_limits {
                Some(l) => Some(StrainLimits::from_sim(l)),
                None => None,
            },
        }
    }

    /// Soft jelly: 20 kPa, nu 0.45, 1000 kg/m^3.
    pub const JELLY: Self = Self::from_sim(sim::MaterialParams::JELLY);
    /// Rubber: 200 kPa, nu 0.4, 1100 kg/m^3.
    pub const RUBBER: Self = Self::from_sim(sim::MaterialParams::RUBBER);
    /// Flesh: 50 kPa, nu 0.45, 1050 kg/m^3, stretch limited (biphasic).
    pub const FLESH: Self = Self::from_sim(sim::MaterialParams::FLESH);
    /// Stiff foam: 1 MPa, nu 0.2, 200 kg/m^3.
    pub const STIFF_FOAM: Self = Self::from_sim(sim::MaterialParams::STIFF_FOAM);

    /// The core's material.
    pub(crate) fn to_sim(self) -> sim::MaterialParams {
        sim::MaterialParams {
            youngs_modulus: self.youngs_modulus as f64,
            poisson_ratio: self.poisson_ratio as f64,
            density: self.density as f64,
            damping: self.damping as f64,
            strain_damping: self.strain_damping as f64,
            friction: self.friction as f64,
            restitution: self.restitution as f64,
            friction_combine: self.friction_combine,
            restitution_combine: self.restitution_combine,
            strain_limits: self.strain_limits.map(StrainLimits::to_sim),
        }
    }

    /// Builder: strain-rate damping time (s).
    pub const fn with_strain_damping(mut self, seconds: f32) -> Self {
        self.strain_damping = seconds;
        self
    }

    /// Builder: friction coefficient.
    pub const fn with_friction(mut self, friction: f32) -> Self {
        self.friction = friction;
        self
    }

    /// Builder: Young's modulus (Pa).
    pub const fn with_youngs_modulus(mut self, pascals: f32) -> Self {
        self.youngs_modulus = pascals;
        self
    }

    /// Builder: restitution coefficient in [0, 1].
    pub const fn with_restitution(mut self, restitution: f32) -> Self {
        self.restitution = restitution;
        self
    }
}

/// What of a body collides.
///
/// By default what the player sees meets obstacles: a body drawn with its own `Mesh3d` (a
/// detailed mesh embedded in a coarse cage, such as [`DeformableBody::from_mesh`]) collides
/// with obstacles by that mesh's vertices, and its tet mesh's vertices only as a safety net,
/// once one is deeper in an obstacle than 1.5 times its distance to the drawn surface, so the
/// drawn mesh rests on the floor instead of a cell above it. Other soft bodies it meets by its
/// tet mesh's surface (its vertices against their surface triangles, and surface edges, see
/// [`ContactSettings::edge_contacts`](crate::plugin::ContactSettings::edge_contacts)): two
/// caged bodies touch by their cages, unless they are [`CollisionProxy::DrawnMesh`].
///
/// A body drawn as its tet mesh's surface collides by every tet vertex with obstacles (the
/// interior ones too, so that a body crushed on impact cannot pass its inside through the
/// floor).
#[derive(Component, Reflect, Debug, Clone, Default)]
#[reflect(Component, Default, Clone)]
pub enum CollisionProxy {
    /// What is drawn collides with obstacles (see the type's docs). Default. A drawn mesh with
    /// a vertex further outside the tet mesh than half a tet collides by the tet vertices
    /// instead (with a warning).
    #[default]
    Drawn,
    /// What is drawn collides with obstacles (as [`CollisionProxy::Drawn`]) and with other soft
    /// bodies and itself: the `Mesh3d`'s vertices against their surface triangles, their
    /// surface vertices against its triangles. Two such bodies rest on each other by what is
    /// drawn instead of by their cages, and where drawn creases cross between the points, their
    /// edges hold them apart. Limits: a deep overlap (an overlapping spawn) is pushed apart only
    /// where both surfaces are closed; it holds where the island's contact rows fit the exact
    /// contact solve (up to 1,024 rows: two detailed bunnies of 5,000 drawn vertices in 5-cell
    /// cages need about 100); and a coarse cage crushed inside out lets what it carries through
    /// (such a bunny dropped squarely onto another sinks in, unless
    /// [`SoftMaterial::strain_limits`] sets a compression limit). A mesh that is not a triangle list, or whose triangles the world
    /// refuses, meets other bodies by the tet mesh's surface (with a warning).
    DrawnMesh,
    /// Every tet vertex collides, whatever is drawn: a cage collides, not the detailed mesh it
    /// carries.
    TetVertices,
    /// Every tet vertex collides, and these points too (m, in the body's rest frame, before its
    /// spawn `Transform`), embedded in the tets, so that an obstacle's corner or edge cannot poke
    /// into a coarse tet between its vertices.
    TetVerticesAndPoints(Vec<Vec3>),
}

/// A static or kinematic collider: a shape that follows the entity's global transform
/// (translation and rotation, computed from its `Transform` and parents each fixed step; scale is
/// ignored). Moving the entity moves the obstacle, and its
/// velocity from one fixed step to the next enters the contacts (a moving paddle pushes bodies).
#[derive(Component, Reflect, Debug, Clone)]
#[reflect(Component, Clone)]
#[require(Transform, ObstacleStatus)]
pub struct Obstacle {
    /// The shape, in the entity's frame (not reflected: a reflected copy is a floor).
    #[reflect(ignore, default = "reflected_shape")]
    pub shape: sim::ObstacleShape,
    /// Coulomb friction coefficient, combined with the body's by the combine rules. Default 0.5.
    pub friction: f32,
    /// Restitution coefficient in [0, 1]. Default 0.
    pub restitution: f32,
    /// How friction combines with the body's. Default: average.
    pub friction_combine: CombineRule,
    /// How restitution combines with the body's. Default: average.
    pub restitution_combine: CombineRule,
}

/// The shape a reflected [`Obstacle`] is rebuilt with: the half-space below `y = 0`.
fn reflected_shape() -> sim::ObstacleShape {
    sim::ObstacleShape::HalfSpace {
        normal: sim::Vec3::y(),
    }
}

impl Obstacle {
    /// An obstacle of any shape.
    pub fn new(shape: sim::ObstacleShape) -> Self {
        Self {
            shape,
            friction: 0.5,
            restitution: 0.0,
            friction_combine: CombineRule::Average,
            restitution_combine: CombineRule::Average,
        }
    }

    /// Everything below the plane through the entity's origin with outward `normal`.
    pub fn halfspace(normal: Vec3) -> Self {
        Self::new(sim::ObstacleShape::HalfSpace {
            normal: crate::convert::to_sim(normal.normalize_or(Vec3::Y)),
        })
    }

    /// A box with `half_extents` (m).
    pub fn cuboid(half_extents: Vec3) -> Self {
        Self::new(sim::ObstacleShape::Cuboid {
            half_extents: crate::convert::to_sim(half_extents),
        })
    }

    /// A ball of `radius` (m).
    pub fn ball(radius: f32) -> Self {
        Self::new(sim::ObstacleShape::Ball {
            radius: radius as f64,
        })
    }

    /// A capsule along local Y: a cylinder of `radius` (m) from `-half_height` to `half_height`
    /// (m) with hemispherical caps (radius first, as Bevy's `Capsule3d::new` and
    /// [`DeformableBody::capsule`]).
    pub fn capsule(radius: f32, half_height: f32) -> Self {
        Self::new(sim::ObstacleShape::Capsule {
            half_height: half_height as f64,
            radius: radius as f64,
        })
    }

    /// The convex hull of `points` (m, the entity's frame): a collider that follows a shape
    /// closely (a character's back under its cape, a rock). Fewer than four points in general
    /// position are refused ([`ObstacleStatus::rejected`] says why).
    pub fn convex_hull(points: impl IntoIterator<Item = Vec3>) -> Self {
        Self::new(sim::ObstacleShape::ConvexHull {
            points: points.into_iter().map(crate::convert::to_sim).collect(),
        })
    }

    /// Builder: friction coefficient.
    pub fn with_friction(mut self, friction: f32) -> Self {
        self.friction = friction;
        self
    }

    /// Builder: restitution coefficient in [0, 1].
    pub fn with_restitution(mut self, restitution: f32) -> Self {
        self.restitution = restitution;
        self
    }

    /// Whether the obstacle is a half-space (a floor, a wall).
    pub fn is_halfspace(&self) -> bool {
        matches!(self.shape, sim::ObstacleShape::HalfSpace { .. })
    }

    /// The core's obstacle for this component at a pose.
    pub(crate) fn to_sim(
        &self,
        position: sim::Vec3,
        rotation: nalgebra::UnitQuaternion<f64>,
    ) -> Result<sim::ObstacleCollider, sim::contact::ObstacleError> {
        Ok(sim::ObstacleCollider::new(self.shape.clone())?
            .with_position(position)
            .with_rotation(rotation)
            .with_friction(self.friction as f64)
            .with_restitution(self.restitution as f64)
            .with_combine_rules(self.friction_combine, self.restitution_combine))
    }
}

/// The velocity (m/s) every vertex of a body starts with when the body is created (a thrown
/// ball). Later edits have no effect.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq)]
#[reflect(Component, Default)]
pub struct InitialVelocity(pub Vec3);

/// Vertices of the body held exactly where they are when the body is created: the explicit
/// indices in `vertices` and those the `select` list chooses by their rest position (see
/// [`VertexSelection`]). Editing it at run time pins the vertices it gained, where they are
/// then, and frees the ones it lost; removing it frees them all.
///
/// # Example
/// ```
/// use bevy::prelude::*;
/// use bevy_deformable::prelude::*;
/// fn spawn(mut commands: Commands) {
///     // A 1.2 m bar hung by its top face (every vertex within 1 mm of its top, y = 0.6 m).
///     commands.spawn((
///         DeformableBody::cuboid(Vec3::new(0.12, 0.6, 0.12), 10).expect("valid size"),
///         Pin::in_box(Vec3::new(-1.0, 0.599, -1.0), Vec3::splat(1.0)),
///         Transform::from_xyz(0.0, 2.0, 0.0),
///     ));
/// }
/// ```
///
/// # Errors
/// A body whose pin names a vertex its mesh does not have
/// ([`BodyError::VertexOutOfRange`]) or whose selection matches no vertex
/// ([`BodyError::EmptySelection`]) is not created; its [`DeformableState::status`] says why.
#[derive(Component, Reflect, Debug, Clone, Default)]
#[reflect(Component, Default, Clone)]
pub struct Pin {
    /// Vertex indices of the body's tet mesh. Default: none.
    pub vertices: Vec<u32>,
    /// Selections of further vertices by their rest position, pinned besides `vertices`.
    /// Default: none.
    pub select: Vec<VertexSelection>,
}

impl Pin {
    /// Pins these vertex indices of the body's tet mesh.
    pub fn indices(vertices: impl Into<Vec<u32>>) -> Self {
        Self {
            vertices: vertices.into(),
            select: Vec::new(),
        }
    }

    /// Pins the vertices a selection chooses.
    pub fn selection(selection: VertexSelection) -> Self {
        Self {
            vertices: Vec::new(),
            select: vec![selection],
        }
    }

    /// Pins every vertex inside the box from `min` to `max` (m, the body's local rest frame).
    pub fn in_box(min: Vec3, max: Vec3) -> Self {
        Self::selection(VertexSelection::in_box(min, max))
    }

    /// Pins every vertex inside the ball of `radius` (m) around `centre` (m, local rest frame).
    pub fn in_sphere(centre: Vec3, radius: f32) -> Self {
        Self::selection(VertexSelection::in_sphere(centre, radius))
    }

    /// Pins the `count` vertices nearest to `point` (m, local rest frame).
    pub fn nearest(point: Vec3, count: usize) -> Self {
        Self::selection(VertexSelection::nearest(point, count))
    }

    /// Builder: pins the vertices of another selection as well.
    pub fn and(mut self, selection: VertexSelection) -> Self {
        self.select.push(selection);
        self
    }
}

/// Vertices tied to another entity by zero-rest-length springs: each vertex keeps the offset
/// it had from `target` when the body was created and follows the target's `GlobalTransform`
/// (a hand, a bone, a moving platform). The vertices are the explicit indices in `vertices`
/// and those the `select` list chooses (see [`VertexSelection`]), resolved when the body is
/// created; later edits of the vertices have no effect.
///
/// # Example
/// ```
/// use bevy::prelude::*;
/// use bevy_deformable::prelude::*;
/// fn spawn(mut commands: Commands) {
///     let hook = commands.spawn(Transform::from_xyz(0.0, 2.6, 0.0)).id();
///     // A jelly block hung from the hook by the 9 vertices nearest the middle of its top.
///     commands.spawn((
///         DeformableBody::cuboid(Vec3::new(0.25, 0.3, 0.25), 7).expect("valid size"),
///         Attachment::new(hook, VertexSelection::nearest(Vec3::new(0.0, 0.3, 0.0), 9), 2.0e3),
///         Transform::from_xyz(0.0, 2.3, 0.0),
///     ));
/// }
/// ```
///
/// # Errors
/// As [`Pin`]'s.
#[derive(Component, Reflect, Debug, Clone)]
#[reflect(Component, Clone)]
pub struct Attachment {
    /// The entity to follow.
    pub target: Entity,
    /// Vertex indices of the body's tet mesh.
    pub vertices: Vec<u32>,
    /// Selections of further vertices by their rest position, attached besides `vertices`.
    pub select: Vec<VertexSelection>,
    /// Spring stiffness (N/m) per vertex.
    pub stiffness: f32,
}

impl Attachment {
    /// Ties the vertices `selection` chooses to `target` by springs of `stiffness` (N/m) each.
    pub fn new(target: Entity, selection: VertexSelection, stiffness: f32) -> Self {
        Self {
            target,
            vertices: Vec::new(),
            select: vec![selection],
            stiffness,
        }
    }

    /// Ties these vertex indices of the body's tet mesh to `target` by springs of `stiffness`
    /// (N/m) each.
    pub fn indices(target: Entity, vertices: impl Into<Vec<u32>>, stiffness: f32) -> Self {
        Self {
            target,
            vertices: vertices.into(),
            select: Vec::new(),
            stiffness,
        }
    }
}

/// Marks a body entity the plugin has created in the simulation, with its handle there (use it
/// with [`crate::DeformableWorld::world`] for the core's per-body queries). Inserted by the
/// plugin once the body exists; the plugin's creation pass skips entities that have it.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeformableHandle(pub(crate) sim::BodyHandle);

impl DeformableHandle {
    /// The body's handle in the simulation world.
    pub fn handle(&self) -> sim::BodyHandle {
        self.0
    }
}

/// What became of an [`Obstacle`], kept by the plugin (added with the obstacle). Read-only for
/// games: an obstacle the simulation refused is reported here as well as in the log.
#[derive(Component, Debug, Clone, Default, PartialEq)]
pub struct ObstacleStatus {
    /// Why the obstacle is not in the simulation (its shape, or its pose when it was added: a
    /// non-finite or out-of-range transform); `None` while it is. Editing the [`Obstacle`]
    /// tries again.
    pub rejected: Option<sim::WorldError>,
    /// Why the last move to the entity's transform was refused (a non-finite or out-of-range
    /// pose): the obstacle stayed where it was. `None` once a move is accepted.
    pub move_refused: Option<sim::ObstacleError>,
}

/// The body's state in the simulation, kept by the plugin. Read-only for games.
#[derive(Component, Debug, Clone, Default)]
pub struct DeformableState {
    pub(crate) handle: Option<sim::BodyHandle>,
    /// Why the simulation froze the body, if it did.
    pub(crate) frozen: Option<sim::FreezeReason>,
    /// Why the body could not be created, if it could not.
    pub(crate) rejected: Option<BodyError>,
    pub(crate) vertex_count: usize,
    /// The body's mesh before the spawn scale: what pin selections are resolved against.
    pub(crate) rest_mesh: Option<Arc<sim::TetMesh>>,
    /// The attached vertices, resolved at creation, and their offsets from the target.
    pub(crate) attached: Vec<u32>,
    pub(crate) attachment_offsets: Vec<Vec3>,
    pub(crate) render_points: Vec<sim::EmbeddedPoint>,
    /// The render points (m, world) after the second-to-last and the last fixed step.
    pub(crate) render_previous: Vec<Vec3>,
    pub(crate) render_current: Vec<Vec3>,
    /// Means of those point sets (m, world): the `Transform` the mesh is drawn relative to.
    pub(crate) centre_previous: Vec3,
    pub(crate) centre_current: Vec3,
    /// The rotation of the `Transform` the body was spawned with; the drawn `Transform` turns
    /// it by the body's own turn.
    pub(crate) spawn_rotation: Quat,
    /// The render points' offsets from their mean when first recorded (m, world axes): the
    /// reference shape the body's turn is matched against.
    pub(crate) reference: Vec<Vec3>,
    /// The body's turn since then (best-fit rotation of the render points onto the reference,
    /// shape matching) after the second-to-last and the last fixed step.
    pub(crate) turn_previous: Quat,
    pub(crate) turn_current: Quat,
    /// Fixed steps recorded since the body was created.
    pub(crate) steps_recorded: u64,
    /// The world did not step (paused): the previous points were set to the current ones.
    pub(crate) holding: bool,
    /// The (step, blend factor) last written to the render mesh; nothing is rewritten while
    /// neither changes (a paused game uploads no meshes).
    pub(crate) drawn: Option<(u64, f32)>,
    /// The body slept through the last step.
    pub(crate) asleep: bool,
}

impl DeformableState {
    /// Whether the body sleeps: at rest with everything it touches, skipped by the step until
    /// something wakes it ([`crate::messages::BodySlept`], [`crate::messages::BodyWoke`]).
    pub fn is_asleep(&self) -> bool {
        self.asleep
    }

    /// Whether the body exists in the simulation (an asset-backed body waits for its mesh).
    pub fn is_simulated(&self) -> bool {
        self.handle.is_some()
    }

    /// What the body is in the simulation: waiting for its mesh, simulated, asleep, frozen
    /// after a numerical failure, or rejected at creation (invalid material, pin out of
    /// range, ...), with the typed reason.
    pub fn status(&self) -> BodyStatus {
        if let Some(error) = &self.rejected {
            BodyStatus::Rejected(error.clone())
        } else if let Some(reason) = &self.frozen {
            BodyStatus::Frozen(reason.clone())
        } else if self.handle.is_none() {
            BodyStatus::Waiting
        } else if self.asleep {
            BodyStatus::Sleeping
        } else {
            BodyStatus::Simulated
        }
    }

    /// Whether the body is frozen or was rejected (see [`DeformableState::status`]).
    pub fn failed(&self) -> bool {
        self.frozen.is_some() || self.rejected.is_some()
    }

    /// Number of simulation vertices.
    pub fn vertex_count(&self) -> usize {
        self.vertex_count
    }
}
