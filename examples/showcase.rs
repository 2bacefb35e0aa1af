//! Everything at once, with the inspector open: blocks with friction 0.2, 0.5 and 0.8 on a 25°
//! ramp (only the first slides: atan 0.5 = 26.6°), a pyramid of soft skittles knocked over by a
//! thrown ball, a jelly bar hanging from pins, a jelly cube landing on a ball, and a paddle
//! sweeping a flesh capsule across the floor.
//!
//! `cargo run --release --example showcase`: drag a body to pull it, drag elsewhere to orbit,
//! scroll to zoom, shift-click to pin a vertex, tune everything in the panel (`F1` hides it).

#[path = "common/mod.rs"]
mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;

/// Slope of the ramp (radians): 25 degrees.
const RAMP_ANGLE: f32 = 25.0 * std::f32::consts::PI / 180.0;
/// Half extents of the paddle (m), its sweep amplitude (m) and period (s).
const PADDLE: Vec3 = Vec3::new(0.06, 0.2, 0.45);
const SWEEP: f32 = 0.9;
/// Centre of the paddle's sweep along x (m).
const SWEEP_CENTRE: f32 = 1.6;
const PERIOD: f32 = 8.0;

#[derive(Component)]
struct Paddle;

fn main() {
    let scene = common::ExampleScene {
        // Right of the scene's centre, so the scene sits left of the panel.
        focus: Vec3::new(1.2, 0.8, 0.1),
        distance: 3.9,
        yaw: 0.4,
        pitch: 0.3,
    };
    common::example_app("showcase", scene)
        .add_systems(Startup, setup)
        .add_systems(FixedUpdate, move_paddle.before(DeformableSystems::Sync))
        .run();
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    let grey = |v: f32| Color::srgb(v, v, v + 0.03);
    // The ramp: a board tilted about z. Its friction combines by `Min` with a high value, so
    // each block's own coefficient decides.
    let ramp_half = Vec3::new(0.9, 0.05, 0.55);
    let ramp_rotation = Quat::from_rotation_z(RAMP_ANGLE);
    let ramp_centre = Vec3::new(-2.0, 0.75, 0.0);
    commands.spawn((
        Mesh3d(meshes.add(Cuboid::from_size(2.0 * ramp_half))),
        MeshMaterial3d(materials.add(Color::srgb(0.6, 0.46, 0.32))),
        Transform::from_translation(ramp_centre).with_rotation(ramp_rotation),
        Obstacle {
            friction_combine: CombineRule::Min,
            ..Obstacle::cuboid(ramp_half).with_friction(10.0)
        },
    ));
    for (k, (mu, color)) in [
        (0.2, Color::srgb(0.9, 0.3, 0.3)),
        (0.5, Color::srgb(0.3, 0.8, 0.3)),
        (0.8, Color::srgb(0.3, 0.4, 0.9)),
    ]
    .into_iter()
    .enumerate()
    {
        let half = Vec3::new(0.12, 0.08, 0.12);
        let on_ramp = Vec3::new(0.35, ramp_half.y + half.y + 0.002, -0.35 + 0.35 * k as f32);
        commands.spawn((
            Name::new(format!("block mu {mu}")),
            DeformableBody::cuboid(half, 3).expect("valid size"),
            SoftMaterial::STIFF_FOAM.with_friction(mu),
            MeshMaterial3d(materials.add(common::rubber_look(color))),
            Transform::from_translation(ramp_centre + ramp_rotation * on_ramp)
                .with_rotation(ramp_rotation),
        ));
    }
    // Skittles: a small pyramid of rubber blocks and a foam ball thrown at it.
    let skittle = Vec3::new(0.08, 0.12, 0.08);
    let skittle_look = materials.add(common::rubber_look(Color::srgb(0.95, 0.85, 0.3)));
    for (i, at) in [
        Vec3::new(-0.1, skittle.y, 1.2),
        Vec3::new(0.1, skittle.y, 1.2),
        Vec3::new(0.0, 3.0 * skittle.y + 0.004, 1.2),
    ]
    .into_iter()
    .enumerate()
    {
        commands.spawn((
            Name::new(format!("skittle {i}")),
            DeformableBody::cuboid(skittle, 3).expect("valid size"),
            SoftMaterial::RUBBER.with_youngs_modulus(4.0e5),
            MeshMaterial3d(skittle_look.clone()),
            Transform::from_translation(at),
        ));
    }
    commands.spawn((
        Name::new("thrown ball"),
        DeformableBody::from(TetMesh::sphere(0.1, 4)),
        Mesh3d(meshes.add(Sphere::new(0.1).mesh().ico(3).expect("ico(3) is valid"))),
        SoftMaterial {
            density: 1500.0,
            ..SoftMaterial::STIFF_FOAM
                .with_friction(0.4)
                .with_restitution(0.3)
        },
        MeshMaterial3d(materials.add(common::rubber_look(Color::srgb(0.15, 0.25, 0.8)))),
        Transform::from_xyz(-1.3, 0.35, 1.2),
        InitialVelocity(Vec3::new(4.0, 1.5, 0.0)),
    ));
    // A jelly bar hanging from pins on a post.
    commands.spawn((
        Mesh3d(meshes.add(Cuboid::new(0.5, 0.06, 0.06))),
        MeshMaterial3d(materials.add(grey(0.3))),
        Transform::from_xyz(1.9, 1.93, -0.9),
    ));
    let bar = Vec3::new(0.09, 0.4, 0.09);
    commands.spawn((
        Name::new("hanging jelly"),
        DeformableBody::cuboid(bar, 6).expect("valid size"),
        SoftMaterial::JELLY.with_youngs_modulus(3.0e4),
        Pin::selection(common::top_face(bar)),
        MeshMaterial3d(materials.add(common::jelly_look(Color::srgb(1.0, 0.55, 0.1)))),
        Transform::from_xyz(1.9, 1.5, -0.9),
    ));
    // A jelly cube dropped onto a ball.
    commands.spawn((
        Mesh3d(meshes.add(Sphere::new(0.3).mesh().ico(4).expect("ico(4) is valid"))),
        MeshMaterial3d(materials.add(grey(0.5))),
        Transform::from_xyz(0.4, 0.15, -1.0),
        Obstacle::ball(0.3),
    ));
    commands.spawn((
        Name::new("jelly cube"),
        DeformableBody::cuboid(Vec3::splat(0.2), 5).expect("valid size"),
        SoftMaterial::JELLY,
        MeshMaterial3d(materials.add(common::jelly_look(Color::srgb(0.9, 0.15, 0.45)))),
        Transform::from_xyz(0.45, 1.4, -1.0).with_rotation(Quat::from_rotation_y(0.5)),
    ));
    // A paddle sweeping a flesh capsule across the floor.
    commands.spawn((
        Paddle,
        Mesh3d(meshes.add(Cuboid::from_size(2.0 * PADDLE))),
        MeshMaterial3d(materials.add(grey(0.25))),
        Transform::from_xyz(SWEEP_CENTRE - SWEEP, PADDLE.y + 0.01, 1.0),
        Obstacle::cuboid(PADDLE).with_friction(0.2),
    ));
    commands.spawn((
        Name::new("flesh capsule"),
        DeformableBody::from(TetMesh::capsule(0.1, 0.14, 4)),
        Mesh3d(
            meshes.add(
                Capsule3d::new(0.1, 0.28)
                    .mesh()
                    .rings(6)
                    .latitudes(12)
                    .build(),
            ),
        ),
        SoftMaterial::FLESH,
        MeshMaterial3d(materials.add(common::flesh_look(Color::srgb(0.93, 0.62, 0.5)))),
        Transform::from_xyz(SWEEP_CENTRE, 0.12, 1.0)
            .with_rotation(Quat::from_rotation_x(std::f32::consts::FRAC_PI_2)),
    ));
}

/// The paddle sweeps back and forth along x, driven by the fixed clock.
fn move_paddle(time: Res<Time<Fixed>>, mut paddles: Query<&mut Transform, With<Paddle>>) {
    let phase = std::f32::consts::TAU * time.elapsed_secs() / PERIOD;
    for mut transform in &mut paddles {
        transform.translation.x = SWEEP_CENTRE - SWEEP * phase.cos();
    }
}
