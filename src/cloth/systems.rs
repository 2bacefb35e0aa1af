//! The cloth's systems: [`step_cloths`] after the soft bodies' step (each cloth built or
//! rebuilt from its component, its pins moved with its entity, stepped among the world's
//! obstacles, the surfaces of the soft bodies and the other cloths near it, in the wind, and
//! its contacts' impulses on those surfaces and cloths given to them for their next step), and
//! [`draw_cloths`] before the frame is drawn (the positions into the entity's mesh, in its
//! frame, with normals).

use std::sync::Arc;
use std::time::Instant;

use bevy::asset::Assets;
use bevy::ecs::entity::Entity;
use bevy::ecs::message::MessageReader;
use bevy::ecs::query::Has;
use bevy::log::warn;
use bevy::mesh::{Mesh, Mesh3d, VertexAttributeValues};
use bevy::prelude::{Commands, GlobalTransform, Query, Res, ResMut, Time, With};
use bevy::time::Fixed;
use bevy::transform::helper::TransformHelper;

use super::components::{ClothState, ClothWind, DeformableCloth};
use crate::components::{DeformableBody, DeformableHandle};
use crate::convert::{to_bevy, to_sim};
use crate::diagnostics::DeformableDiagnostics;
use crate::messages::ResetScene;
use crate::plugin::{DeformableConfig, DeformableWorld, StepSchedule};
use crate::render;
use crate::selection::resolve_vertices_in;
use crate::sim::cloth::{ClothError, ClothMesh, ClothSystem, NeighbourCloth};
use crate::sim::embed::{EmbeddedPoint, embed_points_at};
use crate::sim::{BodyHandle, ObstacleCollider, ObstacleHandle, SoftWorld, Vec3 as SimVec3};
use crate::skin::SkinFlesh;

/// Steps every cloth once per step of the soft bodies (paused with them), building it where
/// its component is new or edited (see [`DeformableCloth`]; a cloth whose pins ride on a
/// body not yet in the world waits for it); a [`ResetScene`] starts every cloth over at its
/// entity's pose. What the cloths' contacts put on the soft bodies' surfaces (their weight,
/// their impacts, friction) and what their pins riding on soft bodies pull is applied to the
/// bodies as impulses ([`crate::sim::SoftWorld::apply_impulses_at`]), which their next step
/// takes: both ways, one step late (not to skinned flesh). What they put on a rigid body's
/// collider ([`crate::RigidBodyCoupling`]) is added to its [`crate::RigidBodyImpulse`] after
/// this step, for its engine to take before its own step. Each cloth steps among the other
/// cloths near it, those stepped before it along their paths over their step and the rest
/// where they stand: two cloths do not pass through each other. What its pairs put on those
/// stepped before it is given to them for their next step
/// ([`crate::sim::cloth::ClothSystem::neighbour_impulses`]): a cloth lying on another weighs it
/// down.
#[allow(clippy::too_many_arguments)]
pub(crate) fn step_cloths(
    config: Res<DeformableConfig>,
    mut world: ResMut<DeformableWorld>,
    (wind, time): (Res<ClothWind>, Res<Time>),
    mut stats: ResMut<DeformableDiagnostics>,
    mut resets: MessageReader<ResetScene>,
    transforms: TransformHelper,
    mut cloths: Query<(Entity, &DeformableCloth, &mut ClothState)>,
    handles: Query<(Option<&DeformableHandle>, Has<DeformableBody>)>,
    flesh: Query<(), With<SkinFlesh>>,
) {
    if resets.read().count() > 0 {
        for (_, _, mut state) in &mut cloths {
            state.system = None;
            state.built = None;
        }
    }
    if !world.stepped() {
        for (_, _, mut state) in &mut cloths {
            state.record(false);
        }
        return;
    }
    let started = Instant::now();
    let mut on_rigid = std::mem::take(&mut world.cloth_on_rigid);
    on_rigid.clear();
    let dt = time.delta_secs_f64();
    let gravity = to_sim(config.gravity);
    let wind = to_sim(wind.at(time.elapsed_secs()));
    let obstacles = world.world().obstacles();
    // Made when the first cloth steps (a game without cloth pays nothing).
    let mut bodies: Option<SurfaceObstacles> = None;
    let mut touched: Vec<ObstacleCollider> = Vec::new();
    // The body behind each of `touched` past the world's obstacles.
    let mut touched_bodies: Vec<BodyHandle> = Vec::new();
    // `(body, point, impulse)`: what the cloths' contacts put on the bodies' surfaces, and
    // what their pins riding on bodies pull.
    let mut reactions: Vec<(BodyHandle, SimVec3, SimVec3)> = Vec::new();
    let mut pulls: Vec<(BodyHandle, EmbeddedPoint, SimVec3)> = Vec::new();
    // `(cloth, vertex, impulse)`: what each cloth's pairs put on the cloths that stepped
    // before it, for their next step.
    let mut on_cloths: Vec<(u64, usize, SimVec3)> = Vec::new();
    // Every cloth as the others see it: where it stands, then its path over its step.
    let mut layers: Vec<ClothLayer> = cloths
        .iter()
        .filter_map(|(entity, _, state)| ClothLayer::of(entity, state.system.as_ref()?))
        .collect();
    let mut before: Vec<SimVec3> = Vec::new();
    // The world's obstacle handles, listed the first time a cloth touches a rigid body.
    let mut obstacle_handles: Option<Vec<ObstacleHandle>> = None;
    // The cloths reaching lowest along gravity step first: a cloth's pairs hand their
    // reactions to the cloths stepped before it (see `other_cloths.rs`), so that one lying on
    // another (a sheet in a hammock, a napkin on a tablecloth hanging over a table's edges)
    // weighs it down. (A cloth not built yet is built in its turn.)
    let mut order: Vec<(f64, Entity)> = cloths
        .iter()
        .map(|(entity, _, state)| {
            let lowest = state.system.as_ref().map_or(0.0, |s| {
                s.positions()
                    .iter()
                    .map(|p| p.dot(&gravity))
                    .fold(f64::NEG_INFINITY, f64::max)
            });
            (lowest, entity)
        })
        .collect();
    order.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, entity) in order {
        let Ok((entity, cloth, mut state)) = cloths.get_mut(entity) else {
            continue;
        };
        let state = &mut *state;
        // Where the entity is now (its `GlobalTransform` is last frame's until propagation).
        let Ok(transform) = transforms.compute_global_transform(entity) else {
            continue;
        };
        let transform = &transform;
        if state.built.as_ref() != Some(cloth) || state.dt != dt {
            let body = match cloth.pinned_to_body.map(|b| handles.get(b)) {
                None => Ok(None),
                Some(Ok((Some(h), _))) => Ok(Some((h.handle(), world.world()))),
                // Spawned, not in the world yet: built once it is.
                Some(Ok((None, true))) => continue,
                Some(_) => Err(ClothError::PinnedToMissingBody),
            };
            if let Err(e) = body.and_then(|body| build(cloth, transform, state, dt, body)) {
                warn!("cloth {entity}: {e}");
                state.error = Some(e);
            }
            state.built = Some(cloth.clone());
            state.dt = dt;
        }
        let Some(system) = state.system.as_mut() else {
            continue;
        };
        if let Some((h, pins)) = &state.pins_body {
            match world.world().positions(*h) {
                Ok(x) => {
                    for (v, point) in pins {
                        if let Err(e) = system.set_pin_target(*v as usize, point.position(x)) {
                            state.error = Some(e);
                        }
                    }
                }
                // The body left the world: the pins stay where it last held them.
                Err(_) => state.error = Some(ClothError::PinnedToMissingBody),
            }
        } else {
            for &(v, local) in &state.pins_local {
                let target = to_sim(transform.transform_point(local));
                // In range (checked when the pins were set); refused only if not finite.
                if let Err(e) = system.set_pin_target(v as usize, target) {
                    state.error = Some(e);
                }
            }
        }
        // The soft bodies near it, as their surfaces now (`SoftWorld::surface_obstacle`).
        touched.clear();
        touched.extend_from_slice(obstacles);
        touched_bodies.clear();
        bodies
            .get_or_insert_with(|| SurfaceObstacles::of(world.world()))
            .near(
                system.positions(),
                BODY_REACH,
                (&mut touched, &mut touched_bodies),
            );
        let neighbours = ClothLayer::near(&layers, entity, system.positions(), CLOTH_REACH);
        before.clear();
        before.extend_from_slice(system.positions());
        let stepped = system.step_among_cloths(gravity, wind, &touched, &neighbours);
        drop(neighbours);
        if stepped.is_ok()
            && let Some(layer) = layers.iter_mut().find(|l| l.entity == entity)
        {
            layer.moved(&before, system.positions());
        }
        match stepped {
            Ok(()) => {
                on_cloths.extend(system.neighbour_impulses().filter(|(id, _, _)| {
                    layers
                        .iter()
                        .any(|l| l.entity.to_bits() == *id && l.entity != entity && l.stepped)
                }));
                // The body the pins ride on takes the whole cloth's momentum balance through
                // its pins (its weight, drag and inertia, less what other things carried),
                // shared equally among them, and nothing through its surface: the cloth
                // resting against its holder pushes and pulls it by equal amounts, and the
                // push estimates handed back would only add a couple to the pull, both one step
                // late. The pinned rows' own stiffness is left out:
                // `ClothSystem::pins_total_impulse`.
                let holder = state.pins_body.as_ref().map(|(h, _)| *h);
                let mut on_holder = SimVec3::zeros();
                for (o, at, impulse) in system.obstacle_impulses() {
                    // A rigid body's collider: its engine takes the impulse after this step.
                    if obstacles.get(o).is_some_and(|c| c.coupling().is_some()) {
                        let handles = obstacle_handles
                            .get_or_insert_with(|| world.world().obstacle_handles().collect());
                        on_rigid.push((handles[o], at, impulse));
                        continue;
                    }
                    let Some(&body) = o
                        .checked_sub(obstacles.len())
                        .and_then(|k| touched_bodies.get(k))
                    else {
                        continue;
                    };
                    if Some(body) == holder {
                        on_holder += impulse;
                    } else {
                        reactions.push((body, at, impulse));
                    }
                }
                if let Some((h, pins)) = state.pins_body.as_ref().filter(|(_, p)| !p.is_empty()) {
                    let share = (system.pins_total_impulse() + on_holder) / pins.len() as f64;
                    pulls.extend(pins.iter().map(|(_, point)| (*h, *point, share)));
                }
            }
            Err(e) => {
                if state.error.is_none() {
                    warn!("cloth {entity}: {e}");
                }
                state.error = Some(e);
            }
        }
        state.record(true);
    }
    drop(bodies);
    give_to_cloths(&mut on_cloths, &mut cloths);
    world.cloth_on_rigid = on_rigid;
    // Skinned flesh is driven to its bones every step; a cloth on it is not passed on (see
    // `DeformableCloth`'s docs).
    let driven = |h: &BodyHandle| world.entity_of(*h).is_some_and(|e| flesh.contains(e));
    reactions.retain(|(h, _, _)| !driven(h));
    pulls.retain(|(h, _, _)| !driven(h));
    apply_reactions(world.world_mut(), &mut reactions, &mut pulls);
    stats.cloth_ms = started.elapsed().as_secs_f64() * 1e3;
}

/// Applies the cloths' contact `reactions` (at points given by position) and their pins'
/// `pulls` (at embedded points) to their bodies, each body's at once, in body order.
fn apply_reactions(
    world: &mut SoftWorld,
    reactions: &mut [(BodyHandle, SimVec3, SimVec3)],
    pulls: &mut [(BodyHandle, EmbeddedPoint, SimVec3)],
) {
    // The points and impulses are finite (the cloths' steps succeeded) and the bodies were in
    // the world this step; a pin's point was embedded in its body's mesh: nothing to refuse.
    per_body(reactions, |body, at| {
        if let Err(e) = world.apply_impulses_at(body, at) {
            warn!("cloth contact on body {body:?}: {e}");
        }
    });
    per_body(pulls, |body, at| {
        if let Err(e) = world.apply_impulses(body, at) {
            warn!("cloth pins on body {body:?}: {e}");
        }
    });
}

/// Gives each cloth what the pairs of the cloths stepped after it put on its vertices
/// (`(cloth, vertex, impulse)`, the cloth named by its entity's bits), for its next step.
fn give_to_cloths(
    on_cloths: &mut [(u64, usize, SimVec3)],
    cloths: &mut Query<(Entity, &DeformableCloth, &mut ClothState)>,
) {
    if on_cloths.is_empty() {
        return;
    }
    on_cloths.sort_by_key(|&(id, _, _)| id);
    for (entity, _, mut state) in cloths.iter_mut() {
        let id = entity.to_bits();
        let from = on_cloths.partition_point(|&(of, _, _)| of < id);
        let to = on_cloths.partition_point(|&(of, _, _)| of <= id);
        if from == to {
            continue;
        }
        let Some(system) = state.system.as_mut() else {
            continue;
        };
        for &(_, v, impulse) in &on_cloths[from..to] {
            // In range and finite: the cloth's own pairs named its vertices this step.
            if let Err(e) = system.apply_impulse(v, impulse) {
                warn!("cloth {entity}: {e}");
            }
        }
    }
}

/// Calls `apply` once per body of `items` with that body's `(point, impulse)` pairs, in body
/// order (each body's in the order they came).
fn per_body<P: Copy>(
    items: &mut [(BodyHandle, P, SimVec3)],
    mut apply: impl FnMut(BodyHandle, &[(P, SimVec3)]),
) {
    items.sort_by_key(|&(body, _, _)| body);
    let mut group = Vec::new();
    for run in items.chunk_by(|a, b| a.0 == b.0) {
        group.clear();
        group.extend(run.iter().map(|&(_, p, impulse)| (p, impulse)));
        apply(run[0].0, &group);
    }
}

/// How far (m) around a cloth's vertices another cloth's bounds must come for the two to be
/// tested against each other in a step (more than two cloths close in a step in a game).
const CLOTH_REACH: f64 = 0.25;

/// A cloth as the other cloths' steps see it: its triangles, where it stood when this step of
/// the cloths began and where it stands now (the same until it steps), and its bounds over
/// both (m, world).
struct ClothLayer {
    entity: Entity,
    /// Whether it stepped in this step of the cloths.
    stepped: bool,
    mesh: Arc<ClothMesh>,
    start: Vec<SimVec3>,
    end: Vec<SimVec3>,
    thickness: f64,
    bounds: (SimVec3, SimVec3),
}

impl ClothLayer {
    fn of(entity: Entity, system: &ClothSystem) -> Option<Self> {
        let x = system.positions();
        Some(Self {
            entity,
            stepped: false,
            mesh: system.shared_mesh().clone(),
            start: x.to_vec(),
            end: x.to_vec(),
            thickness: system.material().thickness,
            bounds: crate::sim::mesh::bounds(x),
        })
    }

    /// Its step went from `start` to `end`.
    fn moved(&mut self, start: &[SimVec3], end: &[SimVec3]) {
        if start.len() != self.start.len() || end.len() != self.end.len() {
            return;
        }
        self.start.copy_from_slice(start);
        self.end.copy_from_slice(end);
        self.stepped = true;
        let ((a, b), (c, d)) = (
            crate::sim::mesh::bounds(start),
            crate::sim::mesh::bounds(end),
        );
        self.bounds = (a.inf(&c), b.sup(&d));
    }

    /// The cloths of `layers` other than `entity`'s whose bounds come within `reach` (m) of
    /// `points`' bounds.
    fn near<'a>(
        layers: &'a [ClothLayer],
        entity: Entity,
        points: &[SimVec3],
        reach: f64,
    ) -> Vec<NeighbourCloth<'a>> {
        let (lo, hi) = crate::sim::mesh::bounds(points);
        let (lo, hi) = (lo.add_scalar(-reach), hi.add_scalar(reach));
        layers
            .iter()
            .filter(|l| {
                let (blo, bhi) = l.bounds;
                l.entity != entity && (0..3).all(|d| bhi[d] >= lo[d] && blo[d] <= hi[d])
            })
            .map(|l| NeighbourCloth {
                id: l.entity.to_bits(),
                triangles: l.mesh.triangles(),
                start: &l.start,
                end: &l.end,
                thickness: l.thickness,
            })
            .collect()
    }
}

/// How far (m) around a cloth's vertices a soft body's bounds must come for its surface to be
/// one of the cloth's obstacles in a step (more than a cloth moves in a step in a game).
const BODY_REACH: f64 = 0.25;

/// The soft bodies' bounds, and their surfaces as obstacles, made the first time a cloth comes
/// near each in this step.
struct SurfaceObstacles<'w> {
    world: &'w SoftWorld,
    bodies: Vec<(BodyHandle, (SimVec3, SimVec3))>,
    /// Per body: its surface, once made (`None` inside where it could not be).
    surfaces: Vec<Option<Option<ObstacleCollider>>>,
}

impl<'w> SurfaceObstacles<'w> {
    fn of(world: &'w SoftWorld) -> Self {
        let bodies: Vec<_> = world
            .bodies()
            .filter_map(|h| Some((h, world.body_bounds(h).ok()?)))
            .collect();
        let surfaces = vec![None; bodies.len()];
        Self {
            world,
            bodies,
            surfaces,
        }
    }

    /// Appends to `out` the surface of every body whose bounds come within `reach` (m) of
    /// `points`' bounds, and to `handles` its body.
    fn near(
        &mut self,
        points: &[SimVec3],
        reach: f64,
        (out, handles): (&mut Vec<ObstacleCollider>, &mut Vec<BodyHandle>),
    ) {
        let (lo, hi) = crate::sim::mesh::bounds(points);
        let (lo, hi) = (lo.add_scalar(-reach), hi.add_scalar(reach));
        for (k, (h, (blo, bhi))) in self.bodies.iter().enumerate() {
            if (0..3).any(|d| bhi[d] < lo[d] || blo[d] > hi[d]) {
                continue;
            }
            let world = self.world;
            let surface = self.surfaces[k].get_or_insert_with(|| world.surface_obstacle(*h).ok());
            if let Some(surface) = surface {
                out.push(surface.clone());
                handles.push(*h);
            }
        }
    }
}

/// The cloth of `cloth` at `transform`, stepped by `dt` (s), into `state`: a new size or cell
/// count (or none before) starts it at the entity's pose, anything else keeps the old
/// positions and velocities. With `body` (the body the pins ride on, in its world) each pin
/// is embedded in the body's tets where it is now. `state` keeps its old cloth on an error.
fn build(
    cloth: &DeformableCloth,
    transform: &GlobalTransform,
    state: &mut ClothState,
    dt: f64,
    body: Option<(BodyHandle, &SoftWorld)>,
) -> Result<(), ClothError> {
    let (size, cells) = (cloth.size.as_dvec2(), cloth.cells);
    let local = ClothMesh::rectangle(size.x, size.y, cells.x as usize, cells.y as usize)?;
    let mesh = local.mapped(|p| to_sim(transform.transform_point(to_bevy(&p))))?;
    let triangles: Arc<[u32]> = mesh.triangles().iter().flatten().copied().collect();
    let mut system = ClothSystem::new(Arc::new(mesh), cloth.preset.material(), dt)?;
    system.iterations = cloth.iterations.max(1) as usize;
    system.chebyshev_rho = f64::from(cloth.chebyshev_rho);
    system.self_collision = cloth.self_collision;
    let same_shape = state
        .built
        .as_ref()
        .is_some_and(|b| b.size == cloth.size && b.cells == cloth.cells);
    if let Some(old) = state.system.as_ref().filter(|_| same_shape) {
        system.positions_mut().copy_from_slice(old.positions());
        system.velocities_mut().copy_from_slice(old.velocities());
    }
    let pinned = resolve_vertices_in(&cloth.pinned, &cloth.pin_select, local.rest_positions())
        .map_err(|empty| ClothError::EmptyPinSelection {
            index: cloth
                .pin_select
                .iter()
                .position(|s| *s == empty)
                .unwrap_or_default(),
        })?;
    let mut pins_local = Vec::with_capacity(pinned.len());
    for &v in &pinned {
        let at = local.rest_positions().get(v as usize).map(to_bevy).ok_or(
            ClothError::PinOutOfRange {
                vertex: v as usize,
                vertices: local.vertex_count(),
            },
        )?;
        system.pin(v as usize, Some(to_sim(transform.transform_point(at))))?;
        pins_local.push((v, at));
    }
    let pins_body = match body {
        Some((h, world)) => {
            let at: Vec<SimVec3> = pinned
                .iter()
                .map(|&v| system.positions()[v as usize])
                .collect();
            let embedded = match (world.mesh(h), world.positions(h)) {
                (Ok(mesh), Ok(x)) => embed_points_at(mesh, x, &at),
                _ => None,
            }
            .ok_or(ClothError::PinnedToMissingBody)?;
            Some((h, pinned.iter().copied().zip(embedded).collect()))
        }
        None => None,
    };
    state.system = Some(system);
    state.pins_local = pins_local;
    state.pins_body = pins_body;
    state.triangles = triangles;
    state.error = None;
    Ok(())
}

/// Writes every cloth's positions, blended between the last two steps by the fixed clock's
/// overstep as the bodies are (`DeformableConfig::interpolate`), into its entity's mesh (in
/// the entity's frame as it is drawn this frame) with
/// area-weighted normals, giving the entity a mesh (with UVs over the rectangle) where it has
/// none of the cloth's vertex count.
pub(crate) fn draw_cloths(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    (config, schedule, time): (Res<DeformableConfig>, Res<StepSchedule>, Res<Time<Fixed>>),
    transforms: TransformHelper,
    cloths: Query<(Entity, &DeformableCloth, &ClothState, Option<&Mesh3d>)>,
) {
    let alpha = if config.interpolate && schedule.fixed {
        time.overstep_fraction().clamp(0.0, 1.0)
    } else {
        1.0
    };
    for (entity, cloth, state, mesh3d) in &cloths {
        if state.system.is_none() || state.current.len() != state.previous.len() {
            continue;
        }
        let n = state.current.len();
        // The transform this frame draws with (propagation runs after this system).
        let Ok(transform) = transforms.compute_global_transform(entity) else {
            continue;
        };
        let inverse = transform.affine().inverse();
        let blended = state
            .previous
            .iter()
            .zip(&state.current)
            .map(|(a, b)| inverse.transform_point3(a.lerp(*b, alpha)).to_array());
        if let Some(mut mesh) = mesh3d.and_then(|m| meshes.get_mut(&m.0)) {
            let written = match mesh.attribute_mut(Mesh::ATTRIBUTE_POSITION) {
                Some(VertexAttributeValues::Float32x3(positions)) if positions.len() == n => {
                    for (dst, p) in positions.iter_mut().zip(blended.clone()) {
                        *dst = p;
                    }
                    true
                }
                _ => false,
            };
            if written {
                mesh.compute_area_weighted_normals();
                continue;
            }
        }
        let positions = blended.collect();
        let mut mesh = render::triangle_mesh(positions, state.triangles.to_vec());
        let (cx, cz) = (cloth.cells.x.max(1), cloth.cells.y.max(1));
        let uvs: Vec<[f32; 2]> = (0..=cz)
            .flat_map(|j| (0..=cx).map(move |i| [i as f32 / cx as f32, j as f32 / cz as f32]))
            .collect();
        mesh.insert_attribute(Mesh::ATTRIBUTE_UV_0, uvs);
        commands.entity(entity).insert(Mesh3d(meshes.add(mesh)));
    }
}
