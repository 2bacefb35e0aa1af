//! A skinned glTF creature walks in a loop, hopping: its belly and tail are soft flesh on its
//! skeleton. They lag, jiggle, squash on the floor at every landing, and bump into a jelly cube,
//! a rubber ball, a hard pillar and a hard ball on the way. The rest of the creature (head,
//! back) stays skinned by Bevy. It wears a cotton cape: a cloth pinned at the collar to its
//! chest joint, draped over a collider shaped like its shoulders that rides on the same joint,
//! flapping as it hops.
//!
//! ```text
//! cargo run --release --example character
//! cargo run --release --example character -- path/to/model.glb
//! ```
//!
//! The creature is `assets/creature/creature.glb`, written by `cargo run --example
//! make_creature`. Any other skinned glTF works too: its first skinned mesh becomes soft as a
//! whole (bone springs hold the flesh near its bones) and its first animation plays.

#[path = "common/mod.rs"]
mod common;
#[path = "common/creature.rs"]
mod creature;

use bevy::camera::primitives::MeshAabb;
use bevy::mesh::skinning::{SkinnedMesh, SkinnedMeshInverseBindposes};
use bevy::prelude::*;
use bevy::transform::helper::TransformHelper;
use bevy::world_serialization::{WorldAssetRoot, WorldInstanceReady};
use bevy_deformable::prelude::*;

/// The bundled creature, relative to `assets/`.
const CREATURE: &str = "creature/creature.glb";
/// Radius of the creature's walk (m): see `examples/common/creature.rs`.
const PATH_RADIUS: f32 = 1.8;

/// The model given on the command line, if any.
#[derive(Resource)]
struct Model(Option<String>);

/// The animation to play once the character's scene has spawned.
#[derive(Component)]
struct Walk {
    graph: Handle<AnimationGraph>,
    index: AnimationNodeIndex,
}

fn main() {
    let model = std::env::args().nth(1);
    common::example_app(
        "character",
        common::ExampleScene {
            focus: Vec3::new(-0.6, 0.3, 0.4),
            distance: 4.2,
            yaw: -0.9,
            pitch: 0.45,
        },
    )
    .insert_resource(Model(model))
    .add_systems(Startup, setup)
    .add_systems(Update, (soften, dress))
    .run();
}

fn setup(
    mut commands: Commands,
    assets: Res<AssetServer>,
    model: Res<Model>,
    mut graphs: ResMut<Assets<AnimationGraph>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    let (scene, clip) = match &model.0 {
        None => (
            assets.load(GltfAssetLabel::Scene(0).from_asset(CREATURE)),
            assets.load(GltfAssetLabel::Animation(0).from_asset(CREATURE)),
        ),
        Some(path) => {
            // A file anywhere on disk: outside `assets/`, so the load is approved explicitly.
            let path = std::fs::canonicalize(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            (
                assets
                    .load_builder()
                    .override_unapproved()
                    .load(GltfAssetLabel::Scene(0).from_asset(path.clone())),
                assets
                    .load_builder()
                    .override_unapproved()
                    .load(GltfAssetLabel::Animation(0).from_asset(path)),
            )
        }
    };
    let (graph, index) = AnimationGraph::from_clip(clip);
    commands
        .spawn((
            Name::new("creature"),
            WorldAssetRoot(scene),
            Walk {
                graph: graphs.add(graph),
                index,
            },
        ))
        .observe(play_when_ready);

    // On the way round: a jelly cube and a rubber ball (soft), a pillar and a ball (hard).
    let on_path = |degrees: f32, off: f32, y: f32| {
        let a = degrees.to_radians();
        Vec3::new(
            (PATH_RADIUS + off) * a.cos(),
            y,
            (PATH_RADIUS + off) * a.sin(),
        )
    };
    commands.spawn((
        Name::new("jelly cube"),
        DeformableBody::cuboid(Vec3::splat(0.18), 5).expect("valid size"),
        SoftMaterial::JELLY,
        MeshMaterial3d(materials.add(common::jelly_look(Color::srgb(0.3, 0.8, 0.4)))),
        Transform::from_translation(on_path(100.0, 0.3, 0.19)),
    ));
    commands.spawn((
        Name::new("rubber ball"),
        DeformableBody::sphere(0.2, 6).expect("valid size"),
        Mesh3d(meshes.add(Sphere::new(0.2).mesh().ico(3).expect("ico(3) is valid"))),
        SoftMaterial::RUBBER,
        MeshMaterial3d(materials.add(common::rubber_look(Color::srgb(0.2, 0.5, 0.9)))),
        Transform::from_translation(on_path(215.0, -0.35, 0.21)),
    ));
    let stone = materials.add(Color::srgb(0.55, 0.5, 0.48));
    commands.spawn((
        Name::new("pillar"),
        Mesh3d(meshes.add(Capsule3d::new(0.12, 1.0))),
        MeshMaterial3d(stone.clone()),
        Transform::from_translation(on_path(-10.0, 0.55, 0.6)),
        Obstacle::capsule(0.12, 0.5),
    ));
    commands.spawn((
        Name::new("boulder"),
        Mesh3d(meshes.add(Sphere::new(0.3).mesh().ico(4).expect("ico(4) is valid"))),
        MeshMaterial3d(stone),
        Transform::from_translation(on_path(300.0, -0.55, 0.15)),
        Obstacle::ball(0.3),
    ));
}

/// Plays the walk on the scene's animation player once the scene has spawned; a model from the
/// command line is also scaled to about 1.2 m tall (glTF files come in any unit).
#[allow(clippy::too_many_arguments)]
fn play_when_ready(
    ready: On<WorldInstanceReady>,
    mut commands: Commands,
    model: Res<Model>,
    meshes: Res<Assets<Mesh>>,
    walks: Query<&Walk>,
    children: Query<&Children>,
    skinned: Query<(&Mesh3d, &SkinnedMesh)>,
    bindposes: Res<Assets<SkinnedMeshInverseBindposes>>,
    transforms: TransformHelper,
    mut players: Query<&mut AnimationPlayer>,
) {
    let Ok(walk) = walks.get(ready.entity) else {
        return;
    };
    for child in children.iter_descendants(ready.entity) {
        if let Ok(mut player) = players.get_mut(child) {
            player.play(walk.index).repeat();
            commands
                .entity(child)
                .insert(AnimationGraphHandle(walk.graph.clone()));
        }
    }
    if model.0.is_none() {
        return;
    }
    // The bind-space height of each skinned mesh, times the scale its skin draws it at.
    let height = children
        .iter_descendants(ready.entity)
        .filter_map(|e| {
            let (mesh, skin) = skinned.get(e).ok()?;
            let aabb = meshes.get(&mesh.0)?.compute_aabb()?;
            let joint = *skin.joints.first()?;
            let inverse = bindposes.get(&skin.inverse_bindposes)?.first().copied()?;
            let global = transforms.compute_global_transform(joint).ok()?;
            let scale = (global.to_matrix() * inverse).determinant().abs().cbrt();
            Some(2.0 * aabb.half_extents.y * scale)
        })
        .fold(0.0f32, f32::max);
    if height > 0.0 {
        commands
            .entity(ready.entity)
            .insert(Transform::from_scale(Vec3::splat(1.2 / height)));
    }
}

/// Makes each skinned mesh soft when it appears: the creature's belly and tail, or the whole of
/// a model given on the command line.
fn soften(mut commands: Commands, model: Res<Model>, skinned: Query<Entity, Added<SkinnedMesh>>) {
    for entity in &skinned {
        let skin = match model.0 {
            None => SoftSkin::new(vec![
                SkinRegion::new("belly", ["belly"]).with_weights(0.3, 0.3),
                SkinRegion::new("tail", ["tail_1"]),
            ]),
            Some(_) => SoftSkin::whole("body"),
        };
        commands.entity(entity).insert(skin);
    }
}

/// Gives the bundled creature its cape when its skeleton appears: a collider shaped like the
/// top of its shoulders on the chest joint (above its flanks, clear of the soft belly and tail,
/// which the cape meets as soft bodies), and, once the walk has moved the skeleton off its
/// bind pose, the cape on the chest joint, pinned at the collar (a cloth built at the bind pose
/// would be dragged across the scene by its pins at the first posed frame). The cape ends where
/// the tail's flesh begins: a cloth lies on a soft body's cage, which stands up to a cell
/// proud of the drawn skin. A model from the command line gets none (its shape is unknown).
fn dress(
    mut commands: Commands,
    model: Res<Model>,
    joints: Query<(Entity, &Name), Added<Name>>,
    transforms: TransformHelper,
    mut chest: Local<Option<(Entity, Vec3)>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    if model.0.is_some() {
        return;
    }
    for (entity, name) in &joints {
        if name.as_str() != "chest" {
            continue;
        }
        let Some(at) = creature::joints()
            .iter()
            .find(|j| j.name == "chest")
            .map(|j| j.bind)
        else {
            continue;
        };
        // The back from x = -0.04 to 0.3 m, over its top from 0.2 rad above the flanks, 12 mm
        // out so the cape clears the drawn skin.
        let hull = creature::back_hull(-0.04, 0.3, -0.2, 0.012, at);
        commands.entity(entity).with_child((
            Name::new("shoulders collider"),
            Obstacle::convex_hull(hull).with_friction(0.6),
            Transform::default(),
        ));
        *chest = Some((entity, at));
    }
    let Some((entity, at)) = *chest else {
        return;
    };
    let posed = transforms
        .compute_global_transform(entity)
        .is_ok_and(|t| t.translation().distance(at) > 0.01);
    if !posed {
        return;
    }
    *chest = None;
    // A 0.24 x 0.8 m cape over the shoulders from x = 0.12 to -0.12, pinned within 5 cm of
    // the collar at x = 0.06 (its rectangle's local x runs forward, z across).
    commands.entity(entity).with_child((
        Name::new("cape"),
        DeformableCloth::rectangle(Vec2::new(0.24, 0.8), UVec2::new(8, 24))
            .with_preset(ClothPreset::Cotton)
            .pin_selection(VertexSelection::in_sphere(Vec3::new(0.06, 0.0, 0.0), 0.05)),
        MeshMaterial3d(materials.add(StandardMaterial {
            base_color: Color::srgb(0.65, 0.1, 0.15),
            perceptual_roughness: 0.85,
            reflectance: 0.2,
            double_sided: true,
            cull_mode: None,
            ..default()
        })),
        Transform::from_translation(Vec3::new(0.0, 0.67, 0.0) - at),
    ));
}
