//! Soft bodies hanging: one pinned in place, one attached to a hook that circles above the
//! floor, swinging and stretching as it is dragged.
//!
//! `Pin` holds vertices exactly where they were created; `Attachment` ties vertices to another
//! entity's transform with zero-rest-length springs (a hand, a bone, a moving platform).
//!
//! `cargo run --release --example hanging`

#[path = "common/mod.rs"]
mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;

#[derive(Component)]
struct Hook;

/// Radius (m) and period (s) of the hook's circle.
const CIRCLE: f32 = 0.8;
const PERIOD: f32 = 5.0;

fn main() {
    let scene = common::ExampleScene {
        focus: Vec3::new(0.0, 1.5, 0.0),
        distance: 6.0,
        pitch: 0.3,
        ..default()
    };
    common::example_app("hanging", scene)
        .add_systems(Startup, setup)
        .add_systems(FixedUpdate, move_hook.before(DeformableSystems::Sync))
        .run();
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    // A bar pinned at its top face: it sags under gravity and stays there.
    let bar = Vec3::new(0.12, 0.6, 0.12);
    commands.spawn((
        Name::new("pinned bar"),
        DeformableBody::cuboid(bar, 10).expect("valid size"),
        SoftMaterial::RUBBER.with_youngs_modulus(5.0e4),
        Pin::selection(common::top_face(bar)),
        MeshMaterial3d(materials.add(common::rubber_look(Color::srgb(0.95, 0.6, 0.2)))),
        Transform::from_xyz(-1.5, 2.0, 0.0),
    ));
    // A hook that moves, drawn as a small sphere, and a jelly block hanging from it.
    let hook = commands
        .spawn((
            Hook,
            Mesh3d(meshes.add(Sphere::new(0.06))),
            MeshMaterial3d(materials.add(Color::srgb(0.2, 0.2, 0.25))),
            Transform::from_xyz(CIRCLE, 2.6, 0.0),
        ))
        .id();
    let block = Vec3::new(0.25, 0.3, 0.25);
    commands.spawn((
        Name::new("attached jelly"),
        DeformableBody::cuboid(block, 7).expect("valid size"),
        SoftMaterial::JELLY,
        Attachment::new(hook, common::top_face(block), 2.0e3),
        MeshMaterial3d(materials.add(common::jelly_look(Color::srgb(0.3, 0.75, 0.9)))),
        Transform::from_xyz(CIRCLE, 2.3, 0.0),
    ));
}

/// The hook circles in a horizontal plane, driven by the fixed clock.
fn move_hook(time: Res<Time<Fixed>>, mut hooks: Query<&mut Transform, With<Hook>>) {
    let phase = std::f32::consts::TAU * time.elapsed_secs() / PERIOD;
    for mut transform in &mut hooks {
        transform.translation.x = CIRCLE * phase.cos();
        transform.translation.z = CIRCLE * phase.sin();
    }
}
