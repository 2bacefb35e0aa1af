//! Twenty rubber bodies of mixed sizes and stiffness poured into a bucket: soft-soft contact, stacking and
//! friction between bodies, the contact regions of Lazarevych et al.'s static
//! scene.
//!
//! `cargo run --release --example pile`: drag to orbit, scroll to zoom, `P` to pause.

#[path = "common/mod.rs"]
mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;

fn main() {
    let scene = common::ExampleScene {
        focus: Vec3::new(0.0, 0.6, 0.0),
        distance: 4.2,
        yaw: 0.6,
        pitch: 0.55,
    };
    common::example_app("pile", scene)
        .add_systems(Startup, setup)
        .run();
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    // The bucket: four walls around a 1.2 m square, each an obstacle drawn as a box.
    let (inner, height, thickness) = (0.6f32, 1.1f32, 0.05f32);
    let wall_look = materials.add(StandardMaterial {
        base_color: Color::srgba(0.75, 0.78, 0.82, 0.35),
        alpha_mode: AlphaMode::Blend,
        ..default()
    });
    for k in 0..4 {
        let angle = k as f32 * std::f32::consts::FRAC_PI_2;
        let half = Vec3::new(thickness, height / 2.0, inner + 2.0 * thickness);
        let rotation = Quat::from_rotation_y(angle);
        commands.spawn((
            Mesh3d(meshes.add(Cuboid::from_size(2.0 * half))),
            MeshMaterial3d(wall_look.clone()),
            Transform::from_translation(rotation * Vec3::new(inner + thickness, height / 2.0, 0.0))
                .with_rotation(rotation),
            Obstacle::cuboid(half).with_friction(0.3),
        ));
    }
    // Twenty bodies in five layers above the bucket: cubes drawn from their tet surface,
    // spheres drawn as smooth meshes embedded in their tets.
    for i in 0..20 {
        let (column, layer) = (i % 4, i / 4);
        let size = 0.1 + 0.035 * ((i * 7) % 3) as f32;
        let hue = (i as f32 * 47.0) % 360.0;
        let color = Color::hsl(hue, 0.7, 0.55);
        let at = Vec3::new(
            -0.33 + 0.22 * column as f32 + 0.03 * layer as f32,
            0.5 + 0.4 * layer as f32,
            -0.2 + 0.4 * ((i / 2) % 2) as f32 - 0.05 * layer as f32,
        );
        let material = SoftMaterial::RUBBER.with_youngs_modulus(1.0e5 + 1.0e5 * (i % 3) as f32);
        let look = MeshMaterial3d(materials.add(common::rubber_look(color)));
        let transform =
            Transform::from_translation(at).with_rotation(Quat::from_rotation_y(0.3 * i as f32));
        if i % 2 == 0 {
            commands.spawn((
                Name::new(format!("cube {i}")),
                DeformableBody::cuboid(Vec3::splat(size), 4).expect("valid size"),
                material,
                look,
                transform,
            ));
        } else {
            commands.spawn((
                Name::new(format!("ball {i}")),
                DeformableBody::sphere(size, 5).expect("valid size"),
                Mesh3d(meshes.add(Sphere::new(size).mesh().ico(3).expect("ico(3) is valid"))),
                material,
                look,
                transform,
            ));
        }
    }
}
