//! The headless Bevy app of the plugin tests: `MinimalPlugins`, assets, meshes, transforms and
//! the plugins under test, with a manual fixed time step (each `app.update()` after the first
//! runs exactly one fixed step); and the helpers the plugin test files share.

use bevy::app::Plugins;
use bevy::asset::AssetPlugin;
use bevy::mesh::{Mesh, Mesh3d, MeshPlugin, VertexAttributeValues};
use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy::transform::TransformPlugin;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;

/// A headless app: `MinimalPlugins`, `AssetPlugin` (rooted at `asset_root`, else Bevy's default
/// `assets`), `MeshPlugin`, `TransformPlugin`, then `plugins`, and a clock that advances one
/// fixed step per update. Not updated yet.
pub fn headless_app<M>(asset_root: Option<&str>, plugins: impl Plugins<M>) -> App {
    let assets = match asset_root {
        Some(root) => AssetPlugin {
            file_path: root.to_string(),
            ..default()
        },
        None => AssetPlugin::default(),
    };
    let mut app = App::new();
    app.add_plugins((MinimalPlugins, assets, MeshPlugin, TransformPlugin, plugins));
    app.insert_resource(TimeUpdateStrategy::FixedTimesteps(1));
    app
}

/// The plugin tests' app with `plugin`, assets under `root`, the messages logged into
/// [`MessageLog`], updated once (the first update only starts the clock).
pub fn app_with_plugin(root: &str, plugin: DeformablePlugin) -> App {
    let mut app = headless_app(Some(root), plugin);
    app.init_resource::<MessageLog>();
    app.add_systems(Update, log_messages);
    // The first update only starts the clock.
    app.update();
    app
}

/// [`app_with_plugin`] with the default plugin.
pub fn app_with_assets(root: &str) -> App {
    app_with_plugin(root, DeformablePlugin::default())
}

/// [`app_with_assets`] rooted at the crate's `assets`.
pub fn app() -> App {
    app_with_assets(concat!(env!("CARGO_MANIFEST_DIR"), "/assets"))
}

/// The plugin's messages, as lines, in the order they were read.
#[derive(Resource, Default)]
pub struct MessageLog(pub Vec<String>);

fn log_messages(
    mut log: ResMut<MessageLog>,
    mut started: MessageReader<ContactStarted>,
    mut ended: MessageReader<ContactEnded>,
    mut frozen: MessageReader<BodyFrozen>,
    (mut slept, mut woke): (MessageReader<BodySlept>, MessageReader<BodyWoke>),
) {
    for m in started.read() {
        log.0.push(format!("started {} {}", m.body, m.obstacle));
    }
    for m in ended.read() {
        log.0.push(format!("ended {} {}", m.body, m.obstacle));
    }
    for m in frozen.read() {
        log.0.push(format!("frozen {}", m.entity));
    }
    for m in slept.read() {
        log.0.push(format!("slept {}", m.entity));
    }
    for m in woke.read() {
        log.0.push(format!("woke {}", m.entity));
    }
}

/// A 0.4 m cube, 3 cells along each side (64 vertices).
pub fn cube() -> DeformableBody {
    DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.2), 3))
}

/// A cube spawned just above a floor (both spawned into `app`); returns the cube.
pub fn resting_cube(app: &mut App) -> Entity {
    let body = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 0.21, 0.0)))
        .id();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    body
}

/// A rubber cube and a jelly cube dropped onto it, over a floor (all spawned into `app`);
/// returns the two cubes.
pub fn dropped_cubes(app: &mut App) -> [Entity; 2] {
    let a = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 0.6, 0.0)))
        .id();
    let b = app
        .world_mut()
        .spawn((
            cube(),
            SoftMaterial::JELLY,
            Transform::from_xyz(0.1, 1.3, 0.0),
        ))
        .id();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    [a, b]
}

/// A simulated body's vertex positions (m, world).
pub fn positions(app: &App, e: Entity) -> Vec<sim::Vec3> {
    app.world()
        .resource::<DeformableWorld>()
        .positions(e)
        .expect("body is simulated")
        .to_vec()
}

/// Where a body's render mesh is drawn (m, world): its positions in the body's `Transform`.
pub fn drawn(app: &App, body: Entity) -> Vec<Vec3> {
    let transform = *app.world().get::<Transform>(body).unwrap();
    let handle = &app.world().get::<Mesh3d>(body).unwrap().0;
    let mesh = app.world().resource::<Assets<Mesh>>().get(handle).unwrap();
    let Some(VertexAttributeValues::Float32x3(rendered)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION)
    else {
        panic!("no positions");
    };
    rendered
        .iter()
        .map(|r| transform.transform_point(Vec3::from_array(*r)))
        .collect()
}

/// The lowest height (m) of a set of points.
pub fn lowest(p: &[sim::Vec3]) -> f64 {
    p.iter().map(|v| v.y).fold(f64::INFINITY, f64::min)
}
