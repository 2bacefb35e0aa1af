//! Soft flesh on a skinned character, headless: the creature of `examples/character.rs` built in
//! code (mesh, skeleton, skin, walk cycle), its belly and tail made soft with `SoftSkin`, and
//! the engine's skinning of the written mesh computed on the CPU (linear-blend skinning with the
//! joints' propagated `GlobalTransform`s, as Bevy's vertex shader does). A walk rolled back to a
//! snapshot replays bit for bit.

mod common;
#[path = "../examples/common/creature.rs"]
mod creature;

use bevy::ecs::hierarchy::ChildOf;
use bevy::mesh::skinning::{SkinnedMesh, SkinnedMeshInverseBindposes};
use bevy::mesh::{Mesh, Mesh3d, VertexAttributeValues};
use bevy::prelude::*;
use bevy_deformable::prelude::*;

/// The fixed step of these apps (s): Bevy's default 64 Hz.
const STEP: f32 = 1.0 / 64.0;

fn app(gravity: Vec3) -> App {
    let mut app =
        common::app::headless_app(None, DeformablePlugin::default().with_gravity(gravity));
    // Drawn at the last step, not blended with the one before.
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    app.update();
    app
}

struct Creature {
    mesh: Entity,
    joints: Vec<Entity>,
    rest: Vec<Vec3>,
    skin: Vec<([u16; 4], [f32; 4])>,
    inverse_bindposes: Vec<Mat4>,
}

fn spawn_creature(app: &mut App, skin: impl Bundle) -> Creature {
    let mesh = creature::mesh();
    let Some(VertexAttributeValues::Float32x3(rest)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION)
    else {
        unreachable!()
    };
    let rest: Vec<Vec3> = rest.iter().map(|p| Vec3::from_array(*p)).collect();
    let (Some(VertexAttributeValues::Uint16x4(j)), Some(VertexAttributeValues::Float32x4(w))) = (
        mesh.attribute(Mesh::ATTRIBUTE_JOINT_INDEX),
        mesh.attribute(Mesh::ATTRIBUTE_JOINT_WEIGHT),
    ) else {
        unreachable!()
    };
    let skin_weights = j.iter().copied().zip(w.iter().copied()).collect();
    let world = app.world_mut();
    let handle = world.resource_mut::<Assets<Mesh>>().add(mesh);
    let inverse_bindposes = creature::inverse_bindposes();
    let bindposes = world
        .resource_mut::<Assets<SkinnedMeshInverseBindposes>>()
        .add(SkinnedMeshInverseBindposes::from(inverse_bindposes.clone()));
    let pose = creature::pose(0.0);
    let mut joints: Vec<Entity> = Vec::new();
    for (j, def) in creature::joints().iter().enumerate() {
        let mut e = world.spawn((Name::new(def.name), pose[j]));
        if let Some(p) = def.parent {
            e.insert(ChildOf(joints[p]));
        }
        joints.push(e.id());
    }
    let mesh = world
        .spawn((
            Mesh3d(handle),
            SkinnedMesh {
                inverse_bindposes: bindposes,
                joints: joints.clone(),
            },
            Transform::default(),
            skin,
        ))
        .id();
    Creature {
        mesh,
        joints,
        rest,
        skin: skin_weights,
        inverse_bindposes,
    }
}

fn pose_at(app: &mut App, c: &Creature, t: f32) {
    for (e, local) in c.joints.iter().zip(creature::pose(t)) {
        *app.world_mut().get_mut::<Transform>(*e).unwrap() = local;
    }
}

/// Linear-blend skinning of `p` with the skin of vertex `v`, as the engine draws it.
fn skinned(app: &App, c: &Creature, v: usize, p: Vec3) -> Vec3 {
    let (joints, weights) = c.skin[v];
    let mut out = Vec3::ZERO;
    let total: f32 = weights.iter().sum();
    for k in 0..4 {
        if weights[k] > 0.0 {
            let j = joints[k] as usize;
            let global = app.world().get::<GlobalTransform>(c.joints[j]).unwrap();
            let m = global.to_matrix() * c.inverse_bindposes[j];
            out += weights[k] / total * m.transform_point3(p);
        }
    }
    out
}

/// The skinned entity's mesh positions as written (bind space).
fn written(app: &App, c: &Creature) -> Vec<Vec3> {
    let handle = &app.world().get::<Mesh3d>(c.mesh).unwrap().0;
    let mesh = app.world().resource::<Assets<Mesh>>().get(handle).unwrap();
    let Some(VertexAttributeValues::Float32x3(p)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION) else {
        panic!("no positions");
    };
    p.iter().map(|p| Vec3::from_array(*p)).collect()
}

/// The largest distance between where the engine draws the written mesh and where it draws the
/// rest mesh (the flesh's visible displacement, m).
fn largest_displacement(app: &App, c: &Creature) -> f32 {
    let w = written(app, c);
    (0..w.len())
        .map(|v| skinned(app, c, v, w[v]).distance(skinned(app, c, v, c.rest[v])))
        .fold(0.0, f32::max)
}

fn belly_and_tail() -> Vec<SkinRegion> {
    vec![
        SkinRegion::new("belly", ["belly"]).with_weights(0.3, 0.3),
        SkinRegion::new("tail", ["tail_1"]),
    ]
}

fn ready(app: &App, c: &Creature) -> Vec<Entity> {
    match app.world().get::<SoftSkinStatus>(c.mesh).unwrap() {
        SoftSkinStatus::Ready(flesh) => flesh.clone(),
        other => panic!("soft skin not ready: {other:?}"),
    }
}

#[test]
fn a_stiff_flesh_draws_exactly_the_skinned_mesh_over_the_walk() {
    let mut app = app(Vec3::new(0.0, -9.81, 0.0));
    let stiff: Vec<SkinRegion> = belly_and_tail()
        .into_iter()
        .map(|r| r.with_bone_frequency(1000.0).with_surface_frequency(1000.0))
        .collect();
    let c = spawn_creature(&mut app, SoftSkin::new(stiff));
    let mut worst: f32 = 0.0;
    for step in 0..128 {
        pose_at(&mut app, &c, step as f32 * STEP);
        app.update();
        if step >= 2 {
            worst = worst.max(largest_displacement(&app, &c));
        }
    }
    let flesh = ready(&app, &c);
    assert_eq!(flesh.len(), 2);
    assert_eq!(
        app.world().get::<Name>(flesh[0]).unwrap().as_str(),
        "belly flesh"
    );
    eprintln!("stiff flesh drawn at most {worst} m from the skinned mesh");
    assert!(worst < 1e-4, "drawn {worst} m from the skinned mesh");
}

/// Two seconds of the walk (hops, sway, a wagging tail) with no gravity and no contacts, then
/// five seconds holding the bind pose where the walk left the root (the flesh's rest shape is
/// the bind pose: in a bent pose its elasticity and the springs settle between the two): the
/// largest displacement while walking and at the end.
fn walk_and_hold(regions: Vec<SkinRegion>) -> (f32, f32) {
    let mut app = app(Vec3::ZERO);
    let c = spawn_creature(&mut app, SoftSkin::new(regions));
    let mut walking: f32 = 0.0;
    for step in 0..128 {
        pose_at(&mut app, &c, step as f32 * STEP);
        app.update();
        walking = walking.max(largest_displacement(&app, &c));
    }
    let mut hold = creature::bind_locals();
    hold[0] = creature::pose(128.0 * STEP)[0];
    for _ in 0..320 {
        for (e, local) in c.joints.iter().zip(&hold) {
            *app.world_mut().get_mut::<Transform>(*e).unwrap() = *local;
        }
        app.update();
    }
    (walking, largest_displacement(&app, &c))
}

#[test]
fn the_flesh_lags_less_on_stiffer_springs_and_settles_on_the_skinned_pose() {
    let (default, default_settled) = walk_and_hold(belly_and_tail());
    let stiffer: Vec<SkinRegion> = belly_and_tail()
        .into_iter()
        .map(|r| r.with_bone_frequency(20.0).with_surface_frequency(5.0))
        .collect();
    let (stiff, stiff_settled) = walk_and_hold(stiffer);
    eprintln!(
        "largest lag while walking: {default} m (defaults, 10 / 2 Hz), {stiff} m (20 / 5 Hz); \
         after 5 s held: {default_settled} m, {stiff_settled} m"
    );
    // The flesh follows the animation with a visible lag that stiffer springs shrink.
    assert!(stiff > 2e-3, "the flesh does not lag ({stiff} m)");
    assert!(
        stiff < 0.7 * default,
        "{stiff} m on stiffer springs, {default} m"
    );
    assert!(default < 0.05, "the flesh lags {default} m");
    // Held still in the bind pose, it comes back onto the skinned mesh.
    for settled in [default_settled, stiff_settled] {
        assert!(settled < 2e-3, "still {settled} m off after 5 s");
    }
}

#[test]
fn seams_and_region_edges_have_no_gap() {
    let mut app = app(Vec3::new(0.0, -9.81, 0.0));
    let c = spawn_creature(&mut app, SoftSkin::new(belly_and_tail()));
    // Vertices split along the UV seam (the same rest position twice).
    let mut twins = Vec::new();
    for a in 0..c.rest.len() {
        for b in a + 1..c.rest.len() {
            if c.rest[a] == c.rest[b] {
                twins.push((a, b));
            }
        }
    }
    assert!(twins.len() > 40, "{} seam pairs", twins.len());
    let mut moved = 0;
    for step in 0..96 {
        pose_at(&mut app, &c, step as f32 * STEP);
        app.update();
        let w = written(&app, &c);
        for &(a, b) in &twins {
            assert!(w[a].distance(w[b]) < 1e-6, "seam pair {a}/{b} opened");
        }
        moved = moved.max(twins.iter().filter(|(a, _)| w[*a] != c.rest[*a]).count());
    }
    assert!(moved > 0, "no seam vertex is in a region");
    // The head is in no region: never written.
    let w = written(&app, &c);
    for (v, p) in c.rest.iter().enumerate() {
        if p.x > 0.3 {
            assert_eq!(w[v], *p, "head vertex {v} written");
        }
    }
}

#[test]
fn the_belly_squashes_on_the_floor_instead_of_passing_through() {
    let mut app = app(Vec3::new(0.0, -9.81, 0.0));
    app.world_mut().spawn((
        Obstacle::halfspace(Vec3::Y),
        Transform::from_xyz(0.0, 0.07, 0.0),
    ));
    let c = spawn_creature(&mut app, SoftSkin::new(belly_and_tail()));
    // The creature stands still with its belly 3 cm into a floor at y = 0.07.
    for _ in 0..192 {
        pose_at(&mut app, &c, 0.0);
        app.update();
    }
    let w = written(&app, &c);
    let mut lowest_drawn = f32::INFINITY;
    let mut lowest_rest = f32::INFINITY;
    for (v, p) in w.iter().enumerate() {
        lowest_drawn = lowest_drawn.min(skinned(&app, &c, v, *p).y);
        lowest_rest = lowest_rest.min(skinned(&app, &c, v, c.rest[v]).y);
    }
    eprintln!("lowest skinned {lowest_rest} drawn {lowest_drawn}");
    assert!(
        lowest_rest < 0.045,
        "the rest pose does not reach into the floor"
    );
    assert!(
        lowest_drawn > 0.07 - 5e-3,
        "belly drawn at {lowest_drawn} under a floor at 0.07"
    );
}

#[test]
fn bad_skins_are_reported_as_typed_errors() {
    let mut app = app(Vec3::ZERO);
    let unknown = spawn_creature(
        &mut app,
        SoftSkin::new(vec![SkinRegion::new("wing", ["wing"])]),
    );
    let bad_setting = spawn_creature(
        &mut app,
        SoftSkin::new(vec![
            SkinRegion::new("belly", ["belly"]).with_weights(0.0, 0.3),
        ]),
    );
    let no_skin = app.world_mut().spawn(SoftSkin::whole("blob")).id();
    app.update();
    app.update();
    let status = |e: Entity| app.world().get::<SoftSkinStatus>(e).unwrap().clone();
    assert!(matches!(
        status(unknown.mesh),
        SoftSkinStatus::Failed(SoftSkinError::UnknownJoint { .. })
    ));
    assert!(matches!(
        status(bad_setting.mesh),
        SoftSkinStatus::Failed(SoftSkinError::Region { .. })
    ));
    assert!(matches!(
        status(no_skin),
        SoftSkinStatus::Failed(SoftSkinError::MissingComponent("Mesh3d"))
    ));
    // Fixed by an edit, the skin is built.
    app.world_mut()
        .get_mut::<SoftSkin>(unknown.mesh)
        .unwrap()
        .regions[0]
        .joints = vec!["tail_1".into()];
    app.update();
    app.update();
    assert!(matches!(
        app.world().get::<SoftSkinStatus>(unknown.mesh).unwrap(),
        SoftSkinStatus::Ready(_)
    ));
}

#[test]
fn removing_the_skin_despawns_its_flesh_and_restores_the_mesh() {
    let mut app = app(Vec3::ZERO);
    let c = spawn_creature(&mut app, SoftSkin::whole("blob"));
    let original = app.world().get::<Mesh3d>(c.mesh).unwrap().0.clone();
    for step in 0..8 {
        pose_at(&mut app, &c, step as f32 * STEP);
        app.update();
    }
    let flesh = ready(&app, &c);
    assert_eq!(flesh.len(), 1);
    assert!(
        app.world()
            .get::<DeformableState>(flesh[0])
            .unwrap()
            .is_simulated()
    );
    assert_ne!(app.world().get::<Mesh3d>(c.mesh).unwrap().0, original);
    app.world_mut().entity_mut(c.mesh).remove::<SoftSkin>();
    app.update();
    app.update();
    assert!(
        app.world().get_entity(flesh[0]).is_err(),
        "flesh left behind"
    );
    assert_eq!(app.world().get::<Mesh3d>(c.mesh).unwrap().0, original);
    // Despawning a skinned entity takes its flesh too.
    let d = spawn_creature(&mut app, SoftSkin::whole("blob"));
    app.update();
    app.update();
    let flesh = ready(&app, &d);
    app.world_mut().entity_mut(d.mesh).despawn();
    app.update();
    app.update();
    assert!(
        app.world().get_entity(flesh[0]).is_err(),
        "flesh left behind"
    );
}

#[test]
fn the_creature_s_cages_strictly_bound_their_regions() {
    use bevy::mesh::Indices;
    use bevy_deformable::sim::{self, embed::embed_points, skin};
    let mesh = creature::mesh();
    let Some(VertexAttributeValues::Float32x3(p)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION) else {
        unreachable!()
    };
    let p: Vec<sim::Vec3> = p
        .iter()
        .map(|q| sim::Vec3::new(q[0] as f64, q[1] as f64, q[2] as f64))
        .collect();
    let (Some(VertexAttributeValues::Uint16x4(j)), Some(VertexAttributeValues::Float32x4(w))) = (
        mesh.attribute(Mesh::ATTRIBUTE_JOINT_INDEX),
        mesh.attribute(Mesh::ATTRIBUTE_JOINT_WEIGHT),
    ) else {
        unreachable!()
    };
    let Some(Indices::U32(indices)) = mesh.indices() else {
        unreachable!()
    };
    let triangles: Vec<[u32; 3]> = indices.chunks(3).map(|t| [t[0], t[1], t[2]]).collect();
    // The belly joint (4) at weight 0.3, the tail joints (5-8) at 0.5, as the example has them.
    for (joints, min_weight) in [(vec![4usize], 0.3f32), (vec![5, 6, 7, 8], 0.5)] {
        let mut chosen = vec![false; 9];
        for &k in &joints {
            chosen[k] = true;
        }
        let region: Vec<bool> = j
            .iter()
            .zip(w)
            .map(|(&joints, &weights)| {
                skin::SkinWeights { joints, weights }.weight_of(&chosen) >= min_weight
            })
            .collect();
        let cage = skin::region_cage(&p, &triangles, &region, 6, 2.0).unwrap();
        let inside: Vec<sim::Vec3> = p
            .iter()
            .zip(&region)
            .filter(|(_, r)| **r)
            .map(|(q, _)| *q)
            .collect();
        assert!(inside.len() > 100, "{} region vertices", inside.len());
        let worst = embed_points(&cage, &inside)
            .iter()
            .flat_map(|e| e.weights)
            .fold(f64::INFINITY, f64::min);
        assert!(
            worst >= -1e-9,
            "a region vertex lies outside its cage ({worst})"
        );
    }
}

/// The largest displacement 3 steps after a `ResetScene` sent at step 64 of the walk (or
/// after no reset).
fn displacement_after_reset(reset: bool) -> f32 {
    let mut app = app(Vec3::new(0.0, -9.81, 0.0));
    let c = spawn_creature(&mut app, SoftSkin::new(belly_and_tail()));
    for step in 0..64 {
        pose_at(&mut app, &c, step as f32 * STEP);
        app.update();
    }
    if reset {
        app.world_mut().write_message(ResetScene);
    }
    for step in 64..67 {
        pose_at(&mut app, &c, step as f32 * STEP);
        app.update();
    }
    largest_displacement(&app, &c)
}

#[test]
fn a_scene_reset_puts_the_flesh_back_on_the_skeleton() {
    // A reset puts every body back where it was created: the flesh cages at the bind pose
    // about the origin, 1.8 m from the walking creature. They are placed on the skeleton
    // again, moving with it, and jiggle about as much as without the reset.
    let (with, without) = (
        displacement_after_reset(true),
        displacement_after_reset(false),
    );
    eprintln!("after a reset {with} m, without {without} m");
    assert!(
        with < without + 0.01,
        "the flesh is {with} m off the skeleton after a reset"
    );
}

#[test]
fn walking_flesh_rolled_back_replays_bit_for_bit() {
    let mut app = app(Vec3::new(0.0, -9.81, 0.0));
    let c = spawn_creature(&mut app, SoftSkin::new(belly_and_tail()));
    for step in 0..40 {
        pose_at(&mut app, &c, step as f32 * STEP);
        app.update();
    }
    let flesh = ready(&app, &c);
    let snapshot = app.world().resource::<DeformableWorld>().snapshot();
    // The flesh's simulated positions and the mesh written for the engine, per frame.
    let frame = |app: &App| -> (Vec<Vec<bevy_deformable::sim::Vec3>>, Vec<Vec3>) {
        let simulated = flesh
            .iter()
            .map(|&e| common::app::positions(app, e))
            .collect();
        (simulated, written(app, &c))
    };
    let mut first = Vec::new();
    for step in 40..80 {
        pose_at(&mut app, &c, step as f32 * STEP);
        app.update();
        first.push(frame(&app));
    }
    // The walk moved the flesh in the window.
    assert!(first[0].0 != first[39].0);
    app.world_mut()
        .resource_mut::<DeformableWorld>()
        .restore(&snapshot)
        .unwrap();
    for (k, expected) in first.iter().enumerate() {
        pose_at(&mut app, &c, (40 + k) as f32 * STEP);
        app.update();
        assert!(
            &frame(&app) == expected,
            "frame {k} after the rollback differs"
        );
    }
}

/// The shoulders collider of the `character` example's cape: the back from x = -0.04 to
/// 0.3 m over its top from 0.2 rad above the flanks, 12 mm out, in the chest joint's frame.
fn shoulders() -> Vec<Vec3> {
    creature::back_hull(-0.04, 0.3, -0.2, 0.012, creature::joints()[2].bind)
}

/// Dresses the creature as the `character` example does: the shoulders collider on the chest
/// joint, and a cotton cape on the same joint pinned at the collar. Returns the cape.
fn dress(app: &mut App, c: &Creature) -> Entity {
    let chest = creature::joints()[2].bind;
    app.world_mut().spawn((
        Obstacle::convex_hull(shoulders()).with_friction(0.6),
        Transform::default(),
        ChildOf(c.joints[2]),
    ));
    app.world_mut()
        .spawn((
            DeformableCloth::rectangle(Vec2::new(0.24, 0.8), UVec2::new(8, 24))
                .with_preset(ClothPreset::Cotton)
                .pin_selection(VertexSelection::in_sphere(Vec3::new(0.06, 0.0, 0.0), 0.05)),
            Transform::from_translation(Vec3::new(0.0, 0.67, 0.0) - chest),
            ChildOf(c.joints[2]),
        ))
        .id()
}

/// The creature with its soft belly and tail, under gravity on a floor, posed at the start of
/// its walk.
fn creature_on_a_floor() -> (App, Creature) {
    let mut app = app(Vec3::new(0.0, -9.81, 0.0));
    app.world_mut()
        .spawn((Obstacle::halfspace(Vec3::Y), Transform::default()));
    let c = spawn_creature(&mut app, SoftSkin::new(belly_and_tail()));
    pose_at(&mut app, &c, 0.0);
    app.update();
    (app, c)
}

/// A cape pinned to the chest joint of the walking, hopping creature (3 s: a 1.8 m circle at
/// 1.4 m/s, hops of 10 cm twice a second): its collar stays on the joint, it stays on the
/// shoulders (no vertex left behind or fallen off) and no vertex passes 1 mm into the
/// shoulders' collider (which parry's `f32` hull projection let it do by 7 mm).
#[test]
fn a_cape_pinned_to_a_joint_rides_on_the_walking_creature() {
    let (mut app, c) = creature_on_a_floor();
    let cape = dress(&mut app, &c);
    let collider = bevy_deformable::sim::ObstacleCollider::convex_hull(
        shoulders()
            .iter()
            .map(|p| bevy_deformable::sim::Vec3::new(p.x as f64, p.y as f64, p.z as f64))
            .collect(),
    )
    .expect("a valid hull");
    let mesh = bevy_deformable::sim::cloth::ClothMesh::rectangle(0.24, 0.8, 8, 24).unwrap();
    let offset = Vec3::new(0.0, 0.67, 0.0) - creature::joints()[2].bind;
    let collar = offset + Vec3::new(0.06, 0.0, 0.0);
    let (mut pin_drift, mut deepest, mut farthest, mut lowest_mean) =
        (0.0f32, 0.0f64, 0.0f32, f32::INFINITY);
    let mut pinned = 0;
    for step in 0..192 {
        pose_at(&mut app, &c, step as f32 * STEP);
        app.update();
        let chest = *app.world().get::<GlobalTransform>(c.joints[2]).unwrap();
        let to_chest = chest.affine().inverse();
        let state = app.world().get::<ClothState>(cape).unwrap();
        assert!(state.error().is_none(), "{:?}", state.error());
        let x = state.positions().expect("the cape is built");
        let local: Vec<Vec3> = x
            .iter()
            .map(|p| to_chest.transform_point3(Vec3::new(p.x as f32, p.y as f32, p.z as f32)))
            .collect();
        pinned = 0;
        for (v, rest) in mesh.rest_positions().iter().enumerate() {
            let rest = Vec3::new(rest.x as f32, rest.y as f32, rest.z as f32);
            if rest.distance(Vec3::new(0.06, 0.0, 0.0)) <= 0.05 {
                pin_drift = pin_drift.max(local[v].distance(rest + offset));
                pinned += 1;
            }
        }
        for p in &local {
            farthest = farthest.max(p.distance(collar));
            let q = bevy_deformable::sim::Vec3::new(p.x as f64, p.y as f64, p.z as f64);
            if let Some(contact) = collider.query(q, 0.0) {
                deepest = deepest.max(contact.depth);
            }
        }
        let mean_height = local.iter().map(|p| p.y).sum::<f32>() / local.len() as f32;
        if step >= 64 {
            lowest_mean = lowest_mean.min(mean_height);
        }
    }
    eprintln!(
        "{pinned} pins drift {pin_drift} m; deepest {deepest} m in the collider; farthest {farthest} m from the collar; lowest mean height {lowest_mean} m"
    );
    assert!(pinned >= 3, "{pinned} pins");
    assert!(
        pin_drift < 1e-3,
        "the collar drifted {pin_drift} m off the joint"
    );
    assert!(deepest < 1e-3, "a vertex {deepest} m inside the shoulders");
    // The rectangle's farthest point from the collar is 0.44 m away, 0.48 m at the strain
    // limit.
    assert!(farthest < 0.5, "a vertex {farthest} m from the collar");
    assert!(
        lowest_mean > 0.15,
        "the cape slid down to {lowest_mean} m above the chest"
    );
}

/// Body `h`'s vertices now, in the frame `to_frame` maps to.
fn body_points(
    app: &App,
    h: bevy_deformable::sim::BodyHandle,
    to_frame: &bevy::math::Affine3A,
) -> Vec<Vec3> {
    app.world()
        .resource::<DeformableWorld>()
        .world()
        .positions(h)
        .unwrap()
        .iter()
        .map(|p| to_frame.transform_point3(Vec3::new(p.x as f32, p.y as f32, p.z as f32)))
        .collect()
}

/// The skin as the engine draws it now, as a triangle-mesh collider in the frame `to_frame`
/// maps to (the creature's mesh, its cone tips' triangles of no area left out).
fn drawn_skin(
    app: &App,
    c: &Creature,
    to_frame: &bevy::math::Affine3A,
) -> bevy_deformable::sim::ObstacleCollider {
    let at: Vec<bevy_deformable::sim::Vec3> = written(app, c)
        .iter()
        .enumerate()
        .map(|(v, p)| {
            let p = to_frame.transform_point3(skinned(app, c, v, *p));
            bevy_deformable::sim::Vec3::new(p.x as f64, p.y as f64, p.z as f64)
        })
        .collect();
    let mesh = creature::mesh();
    let Some(bevy::mesh::Indices::U32(indices)) = mesh.indices() else {
        panic!("u32 indices");
    };
    let triangles: Vec<[u32; 3]> = indices
        .chunks(3)
        .map(|t| [t[0], t[1], t[2]])
        .filter(|t| {
            let [a, b, c] = t.map(|v| at[v as usize]);
            (b - a).cross(&(c - a)).norm() > 1e-12
        })
        .collect();
    bevy_deformable::sim::ObstacleCollider::trimesh(at, triangles).expect("a valid skin")
}

/// A small jelly cube dropped onto the standing creature's tail lands on the drawn skin, not
/// on the tail flesh's cage, whose top stands about 13 cm higher there: other bodies meet a
/// skinned region by its drawn skin. Nothing of the cube goes more than 3 mm into the skin,
/// and it stays on the tail (where the flesh met others by its cage, this cube fell through
/// the tail to the floor).
#[test]
fn a_body_dropped_on_the_tail_lands_on_the_drawn_skin_not_the_cage() {
    let (mut app, c) = creature_on_a_floor();
    app.update();
    let root = *app.world().get::<GlobalTransform>(c.joints[0]).unwrap();
    let to_creature = root.affine().inverse();
    // The drawn skin's top over x = -0.55 m (creature frame), and the tail cage's.
    let drawn_top = written(&app, &c)
        .iter()
        .enumerate()
        .map(|(v, p)| to_creature.transform_point3(skinned(&app, &c, v, *p)))
        .filter(|p| (p.x + 0.55).abs() < 0.03 && p.z.abs() < 0.03)
        .map(|p| p.y)
        .fold(f32::MIN, f32::max);
    let tail = ready(&app, &c)[1];
    let h = app.world().get::<DeformableHandle>(tail).unwrap().handle();
    let cage_top = body_points(&app, h, &to_creature)
        .into_iter()
        .filter(|p| (p.x + 0.55).abs() < 0.1 && p.z.abs() < 0.1)
        .map(|p| p.y)
        .fold(f32::MIN, f32::max);
    assert!(
        cage_top > drawn_top + 0.1,
        "cage top {cage_top}, skin {drawn_top}"
    );
    let cube = app
        .world_mut()
        .spawn((
            DeformableBody::cuboid(Vec3::splat(0.03), 3).expect("valid size"),
            SoftMaterial::JELLY,
            Transform::from_translation(root.transform_point(Vec3::new(
                -0.55,
                cage_top + 0.05,
                0.0,
            ))),
        ))
        .id();
    // Per step: the cube's lowest point, and the deepest of its vertices inside the drawn skin
    // now (the soft tail sags under it).
    let (mut lowest, mut clearance, mut centre_y) = (f32::MAX, f32::MAX, 0.0);
    for _ in 0..48 {
        pose_at(&mut app, &c, 0.0);
        app.update();
        let Some(h) = app
            .world()
            .get::<DeformableHandle>(cube)
            .map(|h| h.handle())
        else {
            continue;
        };
        let points = body_points(&app, h, &to_creature);
        let centre = points.iter().sum::<Vec3>() / points.len() as f32;
        let bottom = points.iter().map(|p| p.y).fold(f32::MAX, f32::min);
        centre_y = centre.y;
        let skin = drawn_skin(&app, &c, &to_creature);
        let deepest = points
            .iter()
            .filter_map(|p| {
                let q = bevy_deformable::sim::Vec3::new(p.x as f64, p.y as f64, p.z as f64);
                skin.query(q, 0.0).map(|c| c.depth as f32)
            })
            .fold(0.0f32, f32::max);
        lowest = lowest.min(bottom);
        clearance = clearance.min(-deepest);
    }
    eprintln!(
        "skin top {drawn_top} at rest, cage top {cage_top}; the cube's lowest {lowest}, its least clearance over the skin {clearance}"
    );
    assert!(
        lowest < cage_top - 0.1,
        "the cube stopped at {lowest}, on the cage (top {cage_top})"
    );
    assert!(
        clearance > -3e-3,
        "the cube went {clearance} m into the drawn skin"
    );
    // Still on the tail at the end (its centre 3 cm above its bottom), not through it.
    assert!(
        centre_y > drawn_top - 0.03,
        "the cube's centre ended at {centre_y}, under the tail's top ({drawn_top})"
    );
}
