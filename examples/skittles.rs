//! Two heavy balls breaking a pyramid of ten soft skittles, without gravity: the dynamic scene
//! of Lazarevych et al. (every impact is a short-lived contact region).
//!
//! `cargo run --release --example skittles`: drag to orbit, scroll to zoom, `P` to pause.

#[path = "common/mod.rs"]
mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;

fn main() {
    let scene = common::ExampleScene {
        focus: Vec3::new(0.3, 1.2, 0.0),
        distance: 3.6,
        yaw: -0.9,
        pitch: 0.3,
    };
    common::example_app("skittles", scene)
        .add_systems(Startup, setup)
        .run();
}

fn setup(
    mut commands: Commands,
    mut config: ResMut<DeformableConfig>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    config.gravity = Vec3::ZERO;
    // Ten upright skittles in a triangle (rows of 1, 2, 3, 4), floating at 1.2 m.
    let (radius, half_height) = (0.07f32, 0.12f32);
    let skittle_mesh = meshes.add(
        Capsule3d::new(radius, 2.0 * half_height)
            .mesh()
            .rings(6)
            .latitudes(12)
            .build(),
    );
    let skittle_look = materials.add(common::soft_look(Color::srgb(0.95, 0.93, 0.88)));
    for row in 0..4 {
        for k in 0..=row {
            let at = Vec3::new(0.17 * row as f32, 1.2, (k as f32 - row as f32 / 2.0) * 0.16);
            commands.spawn((
                Name::new(format!("skittle {row}.{k}")),
                DeformableBody::from(TetMesh::capsule(radius as f64, half_height as f64, 4)),
                Mesh3d(skittle_mesh.clone()),
                SoftMaterial::RUBBER.with_friction(0.4),
                MeshMaterial3d(skittle_look.clone()),
                Transform::from_translation(at),
            ));
        }
    }
    // Two dense foam balls thrown at the pyramid.
    let ball_look = materials.add(common::soft_look(Color::srgb(0.15, 0.2, 0.6)));
    for (i, (z, speed)) in [(-0.05f32, 5.0f32), (0.1, 4.0)].into_iter().enumerate() {
        commands.spawn((
            Name::new(format!("ball {i}")),
            DeformableBody::from(TetMesh::sphere(0.11, 5)),
            Mesh3d(meshes.add(Sphere::new(0.11).mesh().ico(3).expect("ico(3) is valid"))),
            SoftMaterial {
                density: 1500.0,
                ..SoftMaterial::STIFF_FOAM
                    .with_friction(0.4)
                    .with_restitution(0.3)
            },
            MeshMaterial3d(ball_look.clone()),
            Transform::from_xyz(-0.9 - 0.5 * i as f32, 1.2 + 0.02 * i as f32, z),
            InitialVelocity(Vec3::new(speed, 0.0, 0.0)),
        ));
    }
}
