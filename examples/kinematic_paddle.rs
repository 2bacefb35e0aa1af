//! A kinematic paddle sweeps back and forth through soft bodies resting on the floor.
//!
//! The paddle is an `Obstacle` whose `Transform` a system moves every fixed step; the plugin
//! derives its velocity from the motion, so it pushes the bodies instead of teleporting through
//! them.
//!
//! `cargo run --release --example kinematic_paddle`

#[path = "common/mod.rs"]
mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;

/// Half extents of the paddle (m).
const PADDLE: Vec3 = Vec3::new(0.08, 0.35, 1.0);
/// Amplitude (m) and period (s) of its sweep along x.
const SWEEP: f32 = 1.5;
const PERIOD: f32 = 10.0;

#[derive(Component)]
struct Paddle;

fn main() {
    let scene = common::ExampleScene {
        distance: 4.5,
        yaw: 0.2,
        pitch: 0.5,
        ..default()
    };
    common::example_app("kinematic_paddle", scene)
        .add_systems(Startup, setup)
        .add_systems(FixedUpdate, move_paddle.before(DeformableSystems::Sync))
        .run();
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    commands.spawn((
        Paddle,
        Mesh3d(meshes.add(Cuboid::from_size(2.0 * PADDLE))),
        MeshMaterial3d(materials.add(Color::srgb(0.25, 0.25, 0.3))),
        Transform::from_xyz(-SWEEP, PADDLE.y + 0.02, 0.0),
        Obstacle::cuboid(PADDLE).with_friction(0.2),
    ));
    // A row of bodies of different stiffness, resting where the paddle passes.
    let palette = [
        Color::srgb(0.9, 0.3, 0.3),
        Color::srgb(0.95, 0.7, 0.2),
        Color::srgb(0.3, 0.8, 0.4),
        Color::srgb(0.25, 0.55, 0.95),
        Color::srgb(0.7, 0.4, 0.9),
    ];
    for (i, color) in palette.into_iter().enumerate() {
        let z = -0.8 + 0.4 * i as f32;
        let x = if i % 2 == 0 { -0.6 } else { 0.6 };
        // Curved bodies draw a smooth primitive embedded in their tets.
        let (body, render, material) = match i % 3 {
            0 => (
                DeformableBody::cuboid(Vec3::splat(0.15), 5).expect("valid size"),
                None,
                SoftMaterial::JELLY,
            ),
            1 => (
                DeformableBody::from(TetMesh::sphere(0.17, 7)),
                Some(Sphere::new(0.17).mesh().ico(3).expect("ico(3) is valid")),
                SoftMaterial::RUBBER,
            ),
            _ => (
                DeformableBody::from(TetMesh::capsule(0.12, 0.15, 5)),
                Some(
                    Capsule3d::new(0.12, 0.3)
                        .mesh()
                        .rings(6)
                        .latitudes(12)
                        .build(),
                ),
                SoftMaterial::FLESH,
            ),
        };
        let mut body = commands.spawn((
            Name::new(format!("body {i}")),
            body,
            material,
            MeshMaterial3d(materials.add(common::soft_look(color))),
            Transform::from_xyz(x, 0.25, z),
        ));
        if let Some(render) = render {
            body.insert(Mesh3d(meshes.add(render)));
        }
    }
}

/// A smooth back-and-forth sweep along x, driven by the fixed clock.
fn move_paddle(time: Res<Time<Fixed>>, mut paddles: Query<&mut Transform, With<Paddle>>) {
    let phase = std::f32::consts::TAU * time.elapsed_secs() / PERIOD;
    for mut transform in &mut paddles {
        transform.translation.x = -SWEEP * phase.cos();
    }
}
