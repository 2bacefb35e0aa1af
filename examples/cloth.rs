//! Cloth beside the soft bodies: a silk flag flutters on a pole in gusty wind, a cotton
//! tablecloth drops over a table and the bowl on it, a denim napkin falling onto it, a leather
//! mat over a jelly cube on the floor, a leather apron pinned to a wobbling jelly pillar, and
//! a denim curtain hangs from a rail while a wrecking ball swings into it.
//!
//! `DeformableCloth` is a rectangle on an entity: its pinned vertices follow the entity's
//! transform, or ride on a soft body (`pin_to_body`), the rest falls, flutters in the
//! `ClothWind` resource and drapes over the `Obstacle`s, the soft bodies (which feel its
//! weight one step late) and the other cloths (the napkin lies on the tablecloth). The
//! inspector's "Cloth" section changes the wind and each cloth's preset.
//!
//! `cargo run --release --example cloth`

#[path = "common/mod.rs"]
mod common;

use std::f32::consts::{FRAC_PI_2, TAU};

use bevy::prelude::*;
use bevy_deformable::prelude::*;

/// The wrecking ball: radius (m), rope length (m), pivot (m), swing amplitude (rad) and
/// period (s).
const BALL: f32 = 0.25;
const ROPE: f32 = 1.6;
const PIVOT: Vec3 = Vec3::new(1.6, 2.6, 0.0);
const SWING: f32 = 0.7;
const SWING_PERIOD: f32 = 4.0;

#[derive(Component)]
struct WreckingBall;

fn main() {
    let scene = common::ExampleScene {
        focus: Vec3::new(0.9, 1.1, 0.0),
        distance: 7.5,
        yaw: 0.35,
        pitch: 0.3,
    };
    common::example_app("cloth", scene)
        .insert_resource(ClothWind {
            velocity: Vec3::new(6.0, 0.0, 1.0),
            gustiness: 0.6,
            gust_period: 2.5,
        })
        .add_systems(Startup, setup)
        .add_systems(FixedUpdate, swing_ball.before(DeformableSystems::Sync))
        .run();
}

/// A double-sided cloth look: both faces lit, a little sheen.
fn cloth_look(color: Color) -> StandardMaterial {
    StandardMaterial {
        base_color: color,
        perceptual_roughness: 0.85,
        reflectance: 0.2,
        double_sided: true,
        cull_mode: None,
        ..default()
    }
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    let metal = materials.add(StandardMaterial {
        base_color: Color::srgb(0.35, 0.36, 0.4),
        metallic: 0.8,
        perceptual_roughness: 0.35,
        ..default()
    });
    let wood = materials.add(Color::srgb(0.45, 0.3, 0.18));

    // The flag: a pole, and a silk rectangle stood upright with its pinned edge along the
    // pole, streaming in the wind along +x.
    let pole = Vec3::new(-2.0, 0.0, -0.6);
    commands.spawn((
        Name::new("flag pole"),
        Mesh3d(meshes.add(Cylinder::new(0.03, 3.0))),
        MeshMaterial3d(metal.clone()),
        Transform::from_translation(pole + Vec3::Y * 1.5),
    ));
    commands.spawn((
        Name::new("flag"),
        DeformableCloth::rectangle(Vec2::new(0.8, 1.2), UVec2::new(12, 18))
            .with_preset(ClothPreset::Silk)
            .pin_edge(ClothEdge::MinZ)
            .in_the_wind(),
        MeshMaterial3d(materials.add(cloth_look(Color::srgb(0.85, 0.15, 0.2)))),
        // Local x along the pole (down), local z along the wind (+x): the pinned edge
        // (z = -0.6) lies on the pole's surface.
        Transform::from_translation(pole + Vec3::new(0.63, 2.55, 0.0))
            .with_rotation(Quat::from_rotation_y(FRAC_PI_2) * Quat::from_rotation_z(-FRAC_PI_2)),
    ));

    // The table (a slab obstacle on drawn legs), a bowl on it, and the tablecloth above.
    let table = Vec3::new(0.0, 0.9, 0.0);
    let top = Vec3::new(0.55, 0.03, 0.4);
    commands.spawn((
        Name::new("table top"),
        Mesh3d(meshes.add(Cuboid::from_size(2.0 * top))),
        MeshMaterial3d(wood.clone()),
        Transform::from_translation(table),
        Obstacle::cuboid(top).with_friction(0.6),
    ));
    for (x, z) in [(-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0), (1.0, 1.0)] {
        let leg = table + Vec3::new(x * (top.x - 0.05), -0.45, z * (top.z - 0.05));
        commands.spawn((
            Mesh3d(meshes.add(Cuboid::new(0.06, 0.87, 0.06))),
            MeshMaterial3d(wood.clone()),
            Transform::from_translation(leg),
            Obstacle::cuboid(Vec3::new(0.03, 0.435, 0.03)),
        ));
    }
    let bowl = 0.16;
    commands.spawn((
        Name::new("bowl"),
        Mesh3d(meshes.add(Sphere::new(bowl).mesh().ico(4).expect("ico(4) is valid"))),
        MeshMaterial3d(materials.add(Color::srgb(0.9, 0.85, 0.75))),
        Transform::from_translation(table + Vec3::new(0.1, 0.03, 0.0)),
        Obstacle::ball(bowl),
    ));
    commands.spawn((
        Name::new("tablecloth"),
        DeformableCloth::rectangle(Vec2::new(1.5, 1.3), UVec2::new(20, 18)),
        MeshMaterial3d(materials.add(cloth_look(Color::srgb(0.95, 0.93, 0.85)))),
        Transform::from_translation(table + Vec3::new(0.0, 0.45, 0.0)),
    ));
    // A napkin dropped beside the bowl: it lands on the tablecloth, not through it. Of denim:
    // one of cotton slides off the table in the gusts (9.6 m/s at their strongest).
    commands.spawn((
        Name::new("napkin"),
        DeformableCloth::rectangle(Vec2::splat(0.4), UVec2::splat(8))
            .with_preset(ClothPreset::Denim),
        MeshMaterial3d(materials.add(cloth_look(Color::srgb(0.75, 0.15, 0.15)))),
        Transform::from_translation(table + Vec3::new(-0.3, 0.75, 0.12))
            .with_rotation(Quat::from_rotation_y(0.4)),
    ));

    // The curtain: denim hung from a rail by its top edge (local z down), and the wrecking
    // ball that swings into it.
    let rail = Vec3::new(1.6, 2.2, 0.0);
    commands.spawn((
        Name::new("curtain rail"),
        Mesh3d(meshes.add(Cylinder::new(0.02, 1.6))),
        MeshMaterial3d(metal.clone()),
        Transform::from_translation(rail).with_rotation(Quat::from_rotation_z(FRAC_PI_2)),
    ));
    commands.spawn((
        Name::new("curtain"),
        DeformableCloth::rectangle(Vec2::new(1.4, 1.8), UVec2::new(16, 20))
            .with_preset(ClothPreset::Denim)
            .pin_edge(ClothEdge::MinZ),
        MeshMaterial3d(materials.add(cloth_look(Color::srgb(0.2, 0.3, 0.6)))),
        Transform::from_translation(rail - Vec3::Y * 0.9)
            .with_rotation(Quat::from_rotation_x(FRAC_PI_2)),
    ));
    commands.spawn((
        Name::new("wrecking ball"),
        WreckingBall,
        Mesh3d(meshes.add(Sphere::new(BALL).mesh().ico(4).expect("ico(4) is valid"))),
        MeshMaterial3d(metal),
        Transform::from_translation(ball_at(0.0)),
        Obstacle::ball(BALL).with_friction(0.3),
    ));

    // A jelly cube on the floor and a leather mat dropped over it: the cloth lies on the soft
    // body's surface, and the jelly feels its weight (one step late). The mat
    // does not reach the floor: caught between the floor and the cube's bottom edge, a cloth's
    // edge can be pushed into the cube.
    let jelly = Vec3::new(-1.0, 0.12, 0.9);
    commands.spawn((
        Name::new("jelly"),
        DeformableBody::cuboid(Vec3::splat(0.12), 5).expect("valid size"),
        SoftMaterial::JELLY,
        MeshMaterial3d(materials.add(common::jelly_look(Color::srgb(0.3, 0.8, 0.4)))),
        Transform::from_translation(jelly),
    ));
    commands.spawn((
        Name::new("leather mat"),
        DeformableCloth::rectangle(Vec2::splat(0.44), UVec2::splat(11))
            .with_preset(ClothPreset::Leather),
        MeshMaterial3d(materials.add(cloth_look(Color::srgb(0.45, 0.25, 0.12)))),
        Transform::from_translation(jelly + Vec3::new(0.0, 0.16, 0.0))
            .with_rotation(Quat::from_rotation_y(0.4)),
    ));

    // A firm jelly pillar set down 6 cm above the floor with an apron pinned along the top of
    // one face: the pins are embedded in the pillar's tets where the cloth is built and ride on
    // it as it lands and wobbles, while the rest hangs down the face and lifts in the wind; the
    // pillar feels the apron's pull. (Dropped from half a metre instead, the jelly's rebound
    // flipped the apron up over its top.) Firm: of plain jelly (20 kPa) a 0.24 m square column
    // buckles under its own weight above about 0.43 m (Greenhill's height, 1.99 (E I / (rho g
    // A))^(1/3)), and this 0.6 m one, upright only while nothing pulled it sideways, toppled
    // under the apron's 0.6 N; at 100 kPa that height is 0.73 m.
    let pillar = Vec3::new(0.1, 0.36, 1.4);
    let half = Vec3::new(0.12, 0.3, 0.12);
    let body = commands
        .spawn((
            Name::new("jelly pillar"),
            DeformableBody::cuboid(half, 4).expect("valid size"),
            SoftMaterial {
                youngs_modulus: 1.0e5,
                ..SoftMaterial::JELLY
            },
            MeshMaterial3d(materials.add(common::jelly_look(Color::srgb(0.85, 0.45, 0.2)))),
            Transform::from_translation(pillar),
        ))
        .id();
    // Stood 1 cm off the pillar's +x face (the rectangle's normal along +x, local z down): the
    // pinned edge (local z = -0.17) runs across the face 1 cm below its top edge.
    let apron = Vec2::new(0.2, 0.34);
    commands.spawn((
        Name::new("apron"),
        DeformableCloth::rectangle(apron, UVec2::new(5, 9))
            .with_preset(ClothPreset::Leather)
            .pin_edge(ClothEdge::MinZ)
            .pin_to_body(body),
        MeshMaterial3d(materials.add(cloth_look(Color::srgb(0.95, 0.8, 0.2)))),
        Transform::from_translation(
            pillar + Vec3::new(half.x + 0.01, half.y - 0.01 - 0.5 * apron.y, 0.0),
        )
        .with_rotation(Quat::from_rotation_y(FRAC_PI_2) * Quat::from_rotation_x(FRAC_PI_2)),
    ));
}

/// Where the wrecking ball is at time `t` (s): a pendulum swinging along z through the
/// curtain's plane, from its far end at `t = 0`.
fn ball_at(t: f32) -> Vec3 {
    let angle = SWING * (TAU * t / SWING_PERIOD).cos();
    PIVOT + ROPE * Vec3::new(0.0, -angle.cos(), angle.sin())
}

/// The ball swings on the fixed clock; the plugin derives its velocity from the motion.
fn swing_ball(time: Res<Time<Fixed>>, mut balls: Query<&mut Transform, With<WreckingBall>>) {
    for mut transform in &mut balls {
        transform.translation = ball_at(time.elapsed_secs());
    }
}
