//! Jelly, rubber and flesh falling onto a floor, a ramp and a ball.
//!
//! `cargo run --release --example jelly_drop`: drag to orbit, scroll to zoom, `P` to pause.

#[path = "common/mod.rs"]
mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;

fn main() {
    common::example_app("jelly_drop", common::ExampleScene::default())
        .add_systems(Startup, setup)
        .run();
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    // A ramp and a ball: each an obstacle with a mesh of the same shape.
    let ramp_half = Vec3::new(1.2, 0.1, 0.8);
    commands.spawn((
        Mesh3d(meshes.add(Cuboid::from_size(2.0 * ramp_half))),
        MeshMaterial3d(materials.add(Color::srgb(0.6, 0.55, 0.5))),
        Transform::from_xyz(-1.6, 0.6, 0.0).with_rotation(Quat::from_rotation_z(-0.35)),
        Obstacle::cuboid(ramp_half).with_friction(0.3),
    ));
    commands.spawn((
        Mesh3d(meshes.add(Sphere::new(0.5).mesh().ico(4).expect("ico(4) is valid"))),
        MeshMaterial3d(materials.add(Color::srgb(0.5, 0.5, 0.6))),
        Transform::from_xyz(1.4, 0.3, 0.2),
        Obstacle::ball(0.5),
    ));
    // Soft bodies: body (its tets), the mesh drawn for it, material, look, where. Curved
    // bodies draw a smooth Bevy primitive embedded in their (coarser) tets; boxes draw their tet
    // surface.
    let bodies = [
        (
            "jelly cube",
            DeformableBody::cuboid(Vec3::splat(0.3), 6),
            None,
            SoftMaterial::JELLY,
            common::jelly_look(Color::srgb(0.9, 0.2, 0.3)),
            Vec3::new(-1.8, 2.2, 0.0),
        ),
        (
            "rubber ball",
            DeformableBody::sphere(0.35, 8),
            Some(Sphere::new(0.35).mesh().ico(4).expect("ico(4) is valid")),
            SoftMaterial::RUBBER,
            common::rubber_look(Color::srgb(0.2, 0.6, 0.9)),
            Vec3::new(1.3, 2.4, 0.1),
        ),
        (
            "flesh capsule",
            DeformableBody::capsule(0.2, 0.35, 6),
            Some(
                Capsule3d::new(0.2, 0.7)
                    .mesh()
                    .rings(8)
                    .latitudes(16)
                    .build(),
            ),
            SoftMaterial::FLESH,
            common::flesh_look(Color::srgb(0.95, 0.65, 0.45)),
            Vec3::new(0.3, 1.8, -1.2),
        ),
        (
            "soft slab",
            DeformableBody::cuboid(Vec3::new(0.5, 0.15, 0.25), 8),
            None,
            SoftMaterial::JELLY.with_youngs_modulus(8.0e3),
            common::jelly_look(Color::srgb(0.3, 0.85, 0.35)),
            Vec3::new(0.0, 3.2, 1.3),
        ),
    ];
    for (name, mesh, render, material, look, at) in bodies {
        let mut body = commands.spawn((
            Name::new(name),
            mesh.expect("valid size"),
            material,
            MeshMaterial3d(materials.add(look)),
            Transform::from_translation(at).with_rotation(Quat::from_rotation_y(0.4)),
        ));
        if let Some(render) = render {
            body.insert(Mesh3d(meshes.add(render)));
        }
    }
}
