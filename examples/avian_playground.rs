//! Soft and rigid bodies together (`--features avian`): avian's crates, a ball and a ramp;
//! our jelly cubes, a rubber ball and a flesh cushion. The crates stand on the jelly, a heavy
//! crate squashes the cushion, the rubber ball rolls down the ramp into a stack of light
//! crates. Every avian collider is an obstacle for the soft bodies, and the soft bodies push
//! avian's dynamic bodies back (`DeformableAvianPlugin`); the inspector's "Rigid bodies"
//! section lists the pushes.
//!
//! `cargo run --release --features avian --example avian_playground`: right-click throws a
//! rigid ball from the camera, `J` a jelly ball; drag a soft body to pull it, drag elsewhere to
//! orbit, scroll to zoom, `P` to pause.

#[path = "common/mod.rs"]
mod common;

use avian3d::prelude::*;
use bevy::prelude::*;
use bevy_deformable::prelude::*;

fn main() {
    let scene = common::ExampleScene {
        focus: Vec3::new(0.0, 0.6, 0.0),
        distance: 6.5,
        yaw: 0.35,
        pitch: 0.4,
    };
    common::example_app("avian_playground", scene)
        .add_plugins((PhysicsPlugins::default(), DeformableAvianPlugin::default()))
        .add_systems(Startup, setup)
        .add_systems(PostStartup, floor_for_avian)
        .add_systems(Update, throw)
        .run();
}

/// A crate: an avian dynamic box with its mesh.
fn rigid_crate(
    commands: &mut Commands,
    meshes: &mut Assets<Mesh>,
    material: Handle<StandardMaterial>,
    size: Vec3,
    density: f32,
    at: Vec3,
    name: &str,
) {
    commands.spawn((
        Name::new(name.to_string()),
        RigidBody::Dynamic,
        Collider::cuboid(size.x, size.y, size.z),
        ColliderDensity(density),
        Mesh3d(meshes.add(Cuboid::from_size(size))),
        MeshMaterial3d(material),
        Transform::from_translation(at),
    ));
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    let wood = materials.add(Color::srgb(0.7, 0.52, 0.32));
    let dark = materials.add(Color::srgb(0.35, 0.3, 0.28));
    let stone = materials.add(Color::srgb(0.55, 0.55, 0.58));

    // A ramp (static avian box) down towards the stack of light crates.
    let ramp = Vec3::new(2.0, 0.1, 0.8);
    commands.spawn((
        Name::new("ramp"),
        RigidBody::Static,
        Collider::cuboid(ramp.x, ramp.y, ramp.z),
        Mesh3d(meshes.add(Cuboid::from_size(ramp))),
        MeshMaterial3d(stone),
        Transform::from_xyz(-2.2, 0.5, -0.9).with_rotation(Quat::from_rotation_z(-0.45)),
    ));
    // A rubber ball at the top of the ramp.
    commands.spawn((
        Name::new("rubber ball"),
        DeformableBody::sphere(0.18, 6).expect("valid size"),
        // Drawn as a smooth sphere embedded in the tets.
        Mesh3d(meshes.add(Sphere::new(0.18).mesh().ico(3).expect("ico(3) is valid"))),
        SoftMaterial::RUBBER,
        MeshMaterial3d(materials.add(common::soft_look(Color::srgb(0.9, 0.35, 0.25)))),
        Transform::from_xyz(-2.9, 1.2, -0.9),
    ));
    // A stack of light crates (20 kg/m^3: cardboard) where the ramp ends.
    for (k, y) in [0.15, 0.45, 0.75].into_iter().enumerate() {
        rigid_crate(
            &mut commands,
            &mut meshes,
            wood.clone(),
            Vec3::splat(0.3),
            20.0,
            Vec3::new(-0.6, y, -0.9),
            &format!("light crate {k}"),
        );
    }

    // Two jelly cubes with a crate standing on them.
    for (k, x) in [0.4, 1.1].into_iter().enumerate() {
        commands.spawn((
            Name::new(format!("jelly {k}")),
            DeformableBody::cuboid(Vec3::splat(0.25), 5).expect("valid size"),
            SoftMaterial::JELLY,
            MeshMaterial3d(materials.add(common::soft_look(Color::srgb(0.3, 0.8, 0.4)))),
            Transform::from_xyz(x, 0.26, -0.9),
        ));
    }
    rigid_crate(
        &mut commands,
        &mut meshes,
        wood.clone(),
        Vec3::new(1.3, 0.2, 0.5),
        300.0,
        Vec3::new(0.75, 0.9, -0.9),
        "plank on the jellies",
    );

    // A flesh cushion, and a heavy crate (800 kg/m^3, 51 kg) dropped onto it.
    commands.spawn((
        Name::new("cushion"),
        DeformableBody::cuboid(Vec3::new(0.5, 0.1, 0.5), 8).expect("valid size"),
        SoftMaterial::FLESH,
        MeshMaterial3d(materials.add(common::soft_look(Color::srgb(0.85, 0.55, 0.6)))),
        Transform::from_xyz(0.6, 0.11, 0.9),
    ));
    rigid_crate(
        &mut commands,
        &mut meshes,
        dark,
        Vec3::splat(0.4),
        800.0,
        Vec3::new(0.6, 1.2, 0.9),
        "heavy crate",
    );
}

/// The common stage's floor is an `Obstacle` for the soft bodies; avian gets it as a static
/// half-space too (the plugin leaves an entity's own obstacle alone).
fn floor_for_avian(mut commands: Commands, floors: Query<(Entity, &Obstacle), Without<RigidBody>>) {
    for (entity, obstacle) in &floors {
        if obstacle.is_halfspace() {
            commands
                .entity(entity)
                .insert((RigidBody::Static, Collider::half_space(Vec3::Y)));
        }
    }
}

/// Right click: a rigid ball from the camera towards the cursor; `J`: a jelly ball.
fn throw(
    mut commands: Commands,
    buttons: Res<ButtonInput<MouseButton>>,
    keys: Res<ButtonInput<KeyCode>>,
    windows: Query<&Window>,
    cameras: Query<(&Camera, &GlobalTransform)>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    let rigid = buttons.just_pressed(MouseButton::Right);
    let soft = keys.just_pressed(KeyCode::KeyJ);
    if !(rigid || soft) {
        return;
    }
    let (Ok(window), Ok((camera, eye))) = (windows.single(), cameras.single()) else {
        return;
    };
    let Some(ray) = window
        .cursor_position()
        .and_then(|c| camera.viewport_to_world(eye, c).ok())
    else {
        return;
    };
    let start = ray.origin + 0.5 * *ray.direction;
    let velocity = 8.0 * *ray.direction;
    if rigid {
        commands.spawn((
            Name::new("thrown rigid ball"),
            RigidBody::Dynamic,
            Collider::sphere(0.15),
            ColliderDensity(600.0),
            LinearVelocity(velocity),
            Mesh3d(meshes.add(Sphere::new(0.15))),
            MeshMaterial3d(materials.add(Color::srgb(0.3, 0.3, 0.35))),
            Transform::from_translation(start),
        ));
    } else {
        commands.spawn((
            Name::new("thrown jelly ball"),
            DeformableBody::sphere(0.15, 5).expect("valid size"),
            Mesh3d(meshes.add(Sphere::new(0.15).mesh().ico(3).expect("ico(3) is valid"))),
            SoftMaterial::JELLY,
            InitialVelocity(velocity),
            MeshMaterial3d(materials.add(common::soft_look(Color::srgb(0.35, 0.55, 0.95)))),
            Transform::from_translation(start),
        ));
    }
}
