//! Soft bodies beside avian (Cargo feature `avian`): [`DeformableAvianPlugin`] makes every avian
//! `Collider` an [`Obstacle`] of the same shape, so a scene's colliders are declared once.
//!
//! Each fixed step, before [`DeformableSystems::Sync`] in the deformable plugin's schedule
//! (`FixedUpdate` by default; avian steps in `FixedPostUpdate`), new or changed colliders get
//! an [`Obstacle`] of their shape (the parts of a compound get one child entity each) and
//! removed ones lose it; the plugin's obstacle sync then moves each with its entity's
//! `GlobalTransform`, with the velocity of that motion. Static, kinematic and dynamic bodies'
//! colliders alike are obstacles the soft bodies cannot enter and that push them (moving ones
//! with their velocity).
//!
//! Two-way coupling: the obstacles of *dynamic* bodies also get a [`RigidBodyCoupling`] from
//! the body's `ComputedMass`, `ComputedAngularInertia`, `ComputedCenterOfMass`, velocities and
//! gravity (`Gravity` times `GravityScale`, times `(n + 1) / 2n` for avian's `n` substeps of
//! semi-implicit Euler, which move a body by `h v + h^2 g (n + 1) / 2n` over a step), so the step solves the body's contact with the
//! soft bodies together with their implicit step (`sim::world::coupling`). After
//! [`DeformableSystems::Writeback`] the velocity change the soft bodies caused
//! ([`RigidBodyImpulse`]) is added to the body's `LinearVelocity` and `AngularVelocity`, once
//! per body. Order within one fixed tick: our step (in `FixedUpdate`) predicts the body's free
//! motion over the tick, `v + h g`, and solves the soft contacts against it; avian's step (in
//! `FixedPostUpdate`) then integrates the body from `v + dv`, with gravity, and resolves its
//! contacts with other rigid bodies. The soft bodies see the body's other contacts one tick
//! late (a crate pressed by a jelly onto the floor is predicted to fall into the floor by
//! `h^2 g` before avian stops it), and both steps must use the same fixed time step.
//!
//! Shapes: balls, cuboids, capsules (along any segment), half-spaces, convex hulls, triangle
//! meshes, height fields and compounds keep their geometry; cylinders and cones become hulls
//! of 32 points per rim, a rounded cuboid its inner cuboid grown by the border radius, other
//! rounded shapes the hull of their inner shape's points grown by it (cylinders, cones) or
//! not (convex polyhedra). Segments, triangles, polylines and voxels have no inside and are
//! skipped with a warning, as are sensors and colliders whose `CollisionLayers` do not
//! interact with [`DeformableAvianPlugin::layers`]. An entity that has an [`Obstacle`] of the
//! game's own keeps it.

use std::collections::HashSet;

use avian3d::parry::shape::{SharedShape, TypedShape};
use avian3d::prelude::{
    AngularVelocity, Collider, ColliderOf, CollisionLayers, ComputedAngularInertia,
    ComputedCenterOfMass, ComputedMass, Friction, Gravity, GravityScale, LinearVelocity, Position,
    Restitution, RigidBody, Rotation, Sensor, SleepThreshold, Sleeping, SubstepCount,
};
use bevy::app::{App, Plugin};
use bevy::ecs::change_detection::{DetectChanges, DetectChangesMut};
use bevy::ecs::component::Component;
use bevy::ecs::entity::Entity;
use bevy::ecs::lifecycle::RemovedComponents;
use bevy::ecs::query::{Has, With};
use bevy::ecs::schedule::IntoScheduleConfigs;
use bevy::ecs::system::{Commands, Local, Query, Res};
use bevy::log::warn;
use bevy::math::{Mat3, Quat, Vec3};
use bevy::prelude::{ChildOf, Children, Ref, Time, Transform};
use bevy::transform::helper::TransformHelper;

use crate::components::Obstacle;
use crate::plugin::{DeformableSystems, StepSchedule};
use crate::rigid_coupling::{RigidBodyCoupling, RigidBodyImpulse};
use crate::sim::{self, ObstacleShape};

/// Mirrors avian's colliders as [`Obstacle`]s. Add it after `PhysicsPlugins` and
/// [`crate::DeformablePlugin`].
///
/// # Example
/// ```no_run
/// use avian3d::prelude::*;
/// use bevy::prelude::*;
/// use bevy_deformable::prelude::*;
///
/// App::new()
///     .add_plugins((
///         DefaultPlugins,
///         PhysicsPlugins::default(),
///         DeformablePlugin::default(),
///         DeformableAvianPlugin::default(),
///     ))
///     .run();
/// ```
#[derive(Debug, Clone, Copy)]
pub struct DeformableAvianPlugin {
    /// The collision layers soft bodies are on: a collider is mirrored only if its
    /// `CollisionLayers` interact with these (colliders without layers always are).
    /// Default: every layer.
    pub layers: CollisionLayers,
}

impl Default for DeformableAvianPlugin {
    fn default() -> Self {
        Self {
            layers: CollisionLayers::ALL,
        }
    }
}

/// The layers of [`DeformableAvianPlugin::layers`], as a resource.
#[derive(bevy::ecs::resource::Resource, Debug, Clone, Copy)]
struct SoftLayers(CollisionLayers);

/// Marks what the avian plugin made for a collider, so that it is rebuilt and removed with
/// it: the [`Obstacle`] on the collider entity, or for a compound each part's child entity
/// with its [`Obstacle`] (and the collider entity itself, without one).
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirroredCollider {
    /// The collider entity.
    pub(crate) collider: Entity,
}

impl MirroredCollider {
    /// The collider entity this was made for.
    pub fn collider(&self) -> Entity {
        self.collider
    }
}

/// The avian plugin's systems in the deformable plugin's schedule, for ordering a game's own
/// systems (and for timing them).
#[derive(bevy::ecs::schedule::SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeformableAvianSystems {
    /// Before [`DeformableSystems::Sync`]: colliders mirrored as obstacles, dynamic bodies'
    /// mass properties and state copied into their [`RigidBodyCoupling`].
    Mirror,
    /// After [`DeformableSystems::Writeback`]: the soft bodies' velocity changes added to the
    /// dynamic bodies.
    PushBack,
}

impl Plugin for DeformableAvianPlugin {
    fn build(&self, app: &mut App) {
        let schedule = app
            .world()
            .get_resource::<StepSchedule>()
            .map(|s| s.label)
            .expect("add DeformablePlugin before DeformableAvianPlugin");
        app.insert_resource(SoftLayers(self.layers))
            .configure_sets(
                schedule,
                (
                    DeformableAvianSystems::Mirror.before(DeformableSystems::Sync),
                    DeformableAvianSystems::PushBack.after(DeformableSystems::Writeback),
                ),
            )
            .add_systems(
                schedule,
                (
                    (mirror_colliders, couple_bodies)
                        .chain()
                        .in_set(DeformableAvianSystems::Mirror),
                    push_back_bodies.in_set(DeformableAvianSystems::PushBack),
                ),
            );
    }
}

/// An obstacle shape and its pose in the collider's frame.
type Part = (ObstacleShape, Vec3, Quat);

/// New, changed and removed colliders: their obstacles.
#[allow(clippy::type_complexity)]
fn mirror_colliders(
    mut commands: Commands,
    layers: Res<SoftLayers>,
    colliders: Query<(
        Entity,
        Ref<Collider>,
        Option<&Friction>,
        Option<&Restitution>,
        Option<&CollisionLayers>,
        Has<Sensor>,
        Has<Obstacle>,
    )>,
    children: Query<&Children>,
    mirrored: Query<&MirroredCollider>,
    mut removed: RemovedComponents<Collider>,
    mut warned: Local<HashSet<Entity>>,
) {
    for entity in removed.read() {
        warned.remove(&entity);
        drop_mirror(&mut commands, entity, &children, &mirrored);
    }
    for (entity, collider, friction, restitution, collider_layers, sensor, has_obstacle) in
        &colliders
    {
        let owned = mirrored.get(entity).is_ok();
        if has_obstacle && !owned {
            // The game's own obstacle on this entity wins.
            continue;
        }
        if !collider.is_changed() && (owned || has_obstacle || warned.contains(&entity)) {
            continue;
        }
        drop_mirror(&mut commands, entity, &children, &mirrored);
        let wanted = !sensor && collider_layers.is_none_or(|l| l.interacts_with(layers.0));
        if !wanted {
            warned.insert(entity);
            continue;
        }
        let mut parts = Vec::new();
        // avian approximates a scaled ball by a polyhedron, also at a scale of 1 off by
        // rounding (from a turned `GlobalTransform`): the unscaled shape where the scale is 1.
        let shape = if (collider.scale() - Vec3::ONE).abs().max_element() < 1e-4 {
            collider.shape()
        } else {
            collider.shape_scaled()
        };
        if let Err(kind) = shape_parts(shape, Vec3::ZERO, Quat::IDENTITY, &mut parts) {
            if warned.insert(entity) {
                warn!("collider {entity}: a {kind} has no inside; soft bodies pass through it");
            }
            continue;
        }
        warned.remove(&entity);
        let surface = |shape: ObstacleShape| {
            let mut o = Obstacle::new(shape);
            if let Some(f) = friction {
                o.friction = f.dynamic_coefficient;
            }
            if let Some(r) = restitution {
                o.restitution = r.coefficient;
            }
            o
        };
        let mirror = MirroredCollider { collider: entity };
        match parts.as_slice() {
            [(shape, offset, turn)] if *offset == Vec3::ZERO && *turn == Quat::IDENTITY => {
                commands
                    .entity(entity)
                    .insert((surface(shape.clone()), mirror));
            }
            _ => {
                // The collider entity is marked too (without an obstacle), so that it is not
                // mirrored again every step.
                commands.entity(entity).insert(mirror);
                for (shape, offset, turn) in parts {
                    commands.spawn((
                        surface(shape),
                        mirror,
                        Transform::from_translation(offset).with_rotation(turn),
                        ChildOf(entity),
                    ));
                }
            }
        }
    }
}

/// Removes the obstacle mirrored from `collider`: its own components, or its part entities.
fn drop_mirror(
    commands: &mut Commands,
    collider: Entity,
    children: &Query<&Children>,
    mirrored: &Query<&MirroredCollider>,
) {
    if mirrored.get(collider).is_ok_and(|m| m.collider == collider)
        && let Ok(mut e) = commands.get_entity(collider)
    {
        e.remove::<(
            Obstacle,
            MirroredCollider,
            RigidBodyCoupling,
            RigidBodyImpulse,
        )>();
    }
    for child in children.get(collider).into_iter().flatten() {
        if mirrored.get(*child).is_ok_and(|m| m.collider == collider) {
            commands.entity(*child).despawn();
        }
    }
}

/// Splits a parry shape (of avian's parry version) into obstacle shapes with their poses in
/// the collider's frame; `Err` names a shape without an inside.
fn shape_parts(
    shape: &SharedShape,
    offset: Vec3,
    turn: Quat,
    out: &mut Vec<Part>,
) -> Result<(), &'static str> {
    let v = |p: Vec3| sim::Vec3::new(p.x as f64, p.y as f64, p.z as f64);
    let hull = |points: Vec<Vec3>| ObstacleShape::ConvexHull {
        points: points.into_iter().map(v).collect(),
    };
    let part = match shape.as_typed_shape() {
        TypedShape::Ball(b) => ObstacleShape::Ball {
            radius: b.radius as f64,
        },
        TypedShape::Cuboid(c) => ObstacleShape::Cuboid {
            half_extents: v(c.half_extents),
        },
        TypedShape::RoundCuboid(c) => ObstacleShape::Cuboid {
            half_extents: v(c.inner_shape.half_extents + Vec3::splat(c.border_radius)),
        },
        TypedShape::Capsule(c) => {
            let (a, b) = (c.segment.a, c.segment.b);
            let axis = b - a;
            let half_height = 0.5 * axis.length();
            let center = 0.5 * (a + b);
            // Our capsule lies along its local Y: turn Y onto the segment.
            let along = if half_height > 0.0 {
                Quat::from_rotation_arc(Vec3::Y, axis / (2.0 * half_height))
            } else {
                Quat::IDENTITY
            };
            out.push((
                if half_height > 0.0 {
                    ObstacleShape::Capsule {
                        half_height: half_height as f64,
                        radius: c.radius as f64,
                    }
                } else {
                    ObstacleShape::Ball {
                        radius: c.radius as f64,
                    }
                },
                offset + turn * center,
                turn * along,
            ));
            return Ok(());
        }
        TypedShape::HalfSpace(h) => ObstacleShape::HalfSpace {
            normal: v(h.normal).normalize(),
        },
        TypedShape::ConvexPolyhedron(p) => hull(p.points().to_vec()),
        TypedShape::RoundConvexPolyhedron(p) => hull(p.inner_shape.points().to_vec()),
        TypedShape::Cylinder(c) => hull(rims(c.radius, c.half_height, c.radius)),
        TypedShape::RoundCylinder(c) => {
            let (r, h, b) = (
                c.inner_shape.radius,
                c.inner_shape.half_height,
                c.border_radius,
            );
            hull(rims(r + b, h + b, r + b))
        }
        TypedShape::Cone(c) => hull(rims(c.radius, c.half_height, 0.0)),
        TypedShape::RoundCone(c) => {
            let (r, h, b) = (
                c.inner_shape.radius,
                c.inner_shape.half_height,
                c.border_radius,
            );
            hull(rims(r + b, h + b, 0.0))
        }
        TypedShape::TriMesh(t) => ObstacleShape::TriMesh {
            vertices: t.vertices().iter().map(|p| v(*p)).collect(),
            indices: t.indices().to_vec(),
        },
        TypedShape::HeightField(h) => {
            let heights = h.heights();
            let (rows, cols) = (heights.nrows(), heights.ncols());
            let mut values = Vec::with_capacity(rows * cols);
            for r in 0..rows {
                for c in 0..cols {
                    values.push(heights[(r, c)] as f64);
                }
            }
            ObstacleShape::HeightField {
                heights: values,
                rows,
                cols,
                scale: v(h.scale()),
            }
        }
        TypedShape::Compound(c) => {
            for (pose, child) in c.shapes() {
                let (t, q) = (pose.translation, pose.rotation);
                shape_parts(child, offset + turn * t, turn * q, out)?;
            }
            return Ok(());
        }
        TypedShape::Segment(_) => return Err("segment"),
        TypedShape::Triangle(_) | TypedShape::RoundTriangle(_) => return Err("triangle"),
        TypedShape::Polyline(_) => return Err("polyline"),
        _ => return Err("shape of this kind"),
    };
    out.push((part, offset, turn));
    Ok(())
}

/// Points on a bottom rim of `bottom` m radius at `-half_height` and a top rim of `top` m
/// radius at `+half_height` (a single apex point where `top` is 0), 32 per rim, along Y.
fn rims(bottom: f32, half_height: f32, top: f32) -> Vec<Vec3> {
    const SEGMENTS: usize = 32;
    let mut points = Vec::with_capacity(2 * SEGMENTS);
    for k in 0..SEGMENTS {
        let a = std::f32::consts::TAU * k as f32 / SEGMENTS as f32;
        let (s, c) = a.sin_cos();
        points.push(Vec3::new(bottom * c, -half_height, bottom * s));
        if top > 0.0 {
            points.push(Vec3::new(top * c, half_height, top * s));
        }
    }
    if top <= 0.0 {
        points.push(Vec3::new(0.0, half_height, 0.0));
    }
    points
}

/// The mirrored obstacles of dynamic bodies: their [`RigidBodyCoupling`] from the body's mass
/// properties and state at the start of the step (updated in place, inserted where new);
/// others lose it (kinematic and static bodies move their obstacles by their poses).
#[allow(clippy::type_complexity)]
fn couple_bodies(
    mut commands: Commands,
    gravity: Option<Res<Gravity>>,
    substeps: Option<Res<SubstepCount>>,
    mut mirrored: Query<
        (Entity, &MirroredCollider, Option<&mut RigidBodyCoupling>),
        With<Obstacle>,
    >,
    colliders: Query<&ColliderOf>,
    bodies: Query<(
        &RigidBody,
        &Position,
        &Rotation,
        &LinearVelocity,
        &AngularVelocity,
        &ComputedMass,
        &ComputedAngularInertia,
        &ComputedCenterOfMass,
        Option<&GravityScale>,
    )>,
    transforms: TransformHelper,
) {
    // Avian integrates gravity in `n` substeps of semi-implicit Euler: over a step of `h` the
    // body moves by `h v + h^2 g (n + 1) / (2 n)`, which our prediction of its free motion must
    // match (with the plain `h^2 g` a 5 kg box resting on a slab read 6.4 cm/s in avian
    // while it stood still).
    let substeps = substeps.map_or(1, |s| s.0.max(1)) as f32;
    let gravity = gravity.map_or(Vec3::ZERO, |g| g.0) * ((substeps + 1.0) / (2.0 * substeps));
    for (entity, mirror, coupled) in &mut mirrored {
        let body = colliders.get(mirror.collider).ok().map(|c| c.body);
        let state = body.and_then(|b| bodies.get(b).ok().map(|s| (b, s)));
        let dynamic = state.as_ref().is_some_and(|(_, s)| {
            *s.0 == RigidBody::Dynamic && s.5.is_finite() && s.5.value() > 0.0
        });
        let (Some((body, (_, position, rotation, v, w, mass, inertia, com, scale))), true) =
            (state, dynamic)
        else {
            if coupled.is_some() {
                commands
                    .entity(entity)
                    .remove::<(RigidBodyCoupling, RigidBodyImpulse)>();
            }
            continue;
        };
        let Ok(frame) = transforms.compute_global_transform(entity) else {
            continue;
        };
        let (_, frame_turn, frame_origin) = frame.to_scale_rotation_translation();
        let body_center = position.0 + rotation.0 * com.0;
        // The body's inverse inertia is in its own frame; ours in the obstacle's.
        let to_frame = Mat3::from_quat(frame_turn.inverse() * rotation.0);
        let inverse = to_frame * inertia.inverse_tensor().to_mat3() * to_frame.transpose();
        let coupling = RigidBodyCoupling {
            mass: mass.value(),
            center_of_mass: frame_turn.inverse() * (body_center - frame_origin),
            inverse_inertia: inverse,
            linear_velocity: v.0,
            angular_velocity: w.0,
            acceleration: gravity * scale.map_or(1.0, |s| s.0),
            body: Some(body),
        };
        match coupled {
            Some(mut c) => {
                c.set_if_neq(coupling);
            }
            None => {
                commands.entity(entity).insert(coupling);
            }
        }
    }
}

/// After the soft bodies' step: each coupled body's velocity change, once per body (its
/// colliders all carry the same response). A body avian has put to sleep is left asleep
/// where the soft bodies only hold it (its end velocity, free motion plus change, under its
/// `SleepThreshold`), and woken by the change where they move it: adding the change to a
/// sleeping body (whose velocity avian keeps at zero) woke it every half second with a kick of
/// 1 cm/s, and its first sleep threw a resting box sideways at 25 cm/s.
#[allow(clippy::type_complexity)]
fn push_back_bodies(
    time: Res<Time>,
    coupled: Query<(&RigidBodyCoupling, &RigidBodyImpulse), With<MirroredCollider>>,
    mut bodies: Query<(
        &mut LinearVelocity,
        &mut AngularVelocity,
        Has<Sleeping>,
        Option<&SleepThreshold>,
    )>,
    mut done: Local<HashSet<Entity>>,
) {
    let dt = time.delta_secs();
    done.clear();
    for (coupling, impulse) in &coupled {
        let Some(body) = coupling.body else { continue };
        if impulse.contacts == 0 && impulse.linear_velocity_change == Vec3::ZERO {
            continue;
        }
        if !done.insert(body) {
            continue;
        }
        let Ok((mut v, mut w, sleeping, threshold)) = bodies.get_mut(body) else {
            continue;
        };
        if sleeping {
            let threshold = threshold.copied().unwrap_or_default();
            let linear = v.0 + coupling.acceleration * dt + impulse.linear_velocity_change;
            let angular = w.0 + impulse.angular_velocity_change;
            if linear.length() <= threshold.linear && angular.length() <= threshold.angular {
                continue;
            }
        }
        v.0 += impulse.linear_velocity_change;
        w.0 += impulse.angular_velocity_change;
    }
}
