//! Three blocks on a plane that tilts slowly from flat to 45 degrees: with friction
//! coefficients 0.2, 0.5 and 0.8 they start to slide one after the other, at
//! `atan(mu)` = 11.3, 26.6 and 38.7 degrees (Coulomb friction from the contact LCP).
//!
//! `cargo run --release --example slope`: drag to orbit, scroll to zoom, `P` to pause.

#[path = "common/mod.rs"]
mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;

/// Tilt rate of the plane (radians per second): 45 degrees in 15 s.
const TILT_RATE: f32 = std::f32::consts::FRAC_PI_4 / 15.0;

/// Marks the tilting plane.
#[derive(Component)]
struct Tilting;

fn main() {
    let scene = common::ExampleScene {
        focus: Vec3::new(0.0, 1.0, 0.0),
        distance: 4.5,
        yaw: 0.2,
        pitch: 0.35,
    };
    common::example_app("slope", scene)
        .add_systems(Startup, setup)
        .add_systems(FixedUpdate, tilt.before(DeformableSystems::Sync))
        .run();
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    // The plane: a 3 m x 1.6 m board pivoting about the z axis 1 m above the floor. Its
    // friction combines by `Min` with a high value, so each block's own coefficient decides.
    let half = Vec3::new(1.5, 0.05, 0.8);
    commands.spawn((
        Mesh3d(meshes.add(Cuboid::from_size(2.0 * half))),
        MeshMaterial3d(materials.add(Color::srgb(0.55, 0.5, 0.45))),
        Transform::from_xyz(0.0, 1.0, 0.0),
        Obstacle {
            friction_combine: CombineRule::Min,
            ..Obstacle::cuboid(half).with_friction(10.0)
        },
        Tilting,
    ));
    for (k, (mu, color)) in [
        (0.2, Color::srgb(0.9, 0.3, 0.3)),
        (0.5, Color::srgb(0.3, 0.8, 0.3)),
        (0.8, Color::srgb(0.3, 0.4, 0.9)),
    ]
    .into_iter()
    .enumerate()
    {
        commands.spawn((
            Name::new(format!("block mu {mu}")),
            DeformableBody::cuboid(Vec3::new(0.16, 0.1, 0.16), 3).expect("valid size"),
            SoftMaterial::STIFF_FOAM.with_friction(mu),
            MeshMaterial3d(materials.add(common::soft_look(color))),
            Transform::from_xyz(0.3, 1.05 + 0.1 + 0.001, -0.5 + 0.5 * k as f32),
        ));
    }
}

/// Tilts the plane about its pivot, up to 45 degrees.
fn tilt(time: Res<Time>, mut planes: Query<&mut Transform, With<Tilting>>) {
    let angle = (time.elapsed_secs() * TILT_RATE).min(std::f32::consts::FRAC_PI_4);
    for mut transform in &mut planes {
        transform.rotation = Quat::from_rotation_z(angle);
    }
}
