//! Detailed Stanford bunnies (5,002 render vertices each) embedded in coarse tet cages, dropped
//! onto a flight of steps.
//!
//! Each bunny simulates only its cage (a few hundred vertices, `TetMesh::try_enclosing`); its
//! render vertices follow with barycentric weights, and normals are recomputed every frame.
//! The bunnies stand on the steps by their drawn surface (`CollisionProxy::Drawn`, the
//! default), not by their cages, which reach a cell outside them.
//!
//! `cargo run --release --example bunny`

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;

use bevy::prelude::*;
use bevy_deformable::prelude::*;

/// The bunny (about 1 m tall in the file; drawn at half size), shipped in `assets/meshes`.
const BUNNY_OBJ: &str = include_str!("../assets/meshes/bunny_10k.obj");

fn main() {
    let scene = common::ExampleScene {
        focus: Vec3::new(0.0, 0.8, 0.0),
        distance: 5.0,
        yaw: 0.9,
        ..default()
    };
    common::example_app("bunny", scene)
        .add_systems(Startup, setup)
        .run();
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    // Three steps, each a box obstacle with its mesh.
    let step = Vec3::new(0.6, 0.2, 1.2);
    for i in 0..3 {
        let height = 0.2 * (3 - i) as f32;
        let half = Vec3::new(step.x, height, step.z);
        commands.spawn((
            Mesh3d(meshes.add(Cuboid::from_size(2.0 * half))),
            MeshMaterial3d(materials.add(Color::srgb(0.62, 0.58, 0.52))),
            Transform::from_xyz(-1.2 + 1.2 * i as f32, height, 0.0),
            Obstacle::cuboid(half).with_friction(0.6),
        ));
    }
    let surface = match TriangleSurface::from_obj(BUNNY_OBJ) {
        Ok(s) => s,
        Err(e) => {
            error!("bunny_10k.obj: {e}");
            return;
        }
    };
    let render = meshes.add(mesh_from_surface(&surface));
    // The jelly look, but opaque: a bunny overlaps itself (ears, head), and a blended mesh
    // draws its overlapping parts in no particular order.
    let opaque_jelly = |color| StandardMaterial {
        alpha_mode: AlphaMode::Opaque,
        ..common::jelly_look(color)
    };
    let bunnies = [
        (
            SoftMaterial::JELLY,
            opaque_jelly(Color::srgb(0.95, 0.75, 0.8)),
            -1.2,
            2.1,
        ),
        (
            SoftMaterial::RUBBER,
            common::rubber_look(Color::srgb(0.8, 0.8, 0.75)),
            0.0,
            1.8,
        ),
        (
            SoftMaterial::JELLY.with_youngs_modulus(1.5e4),
            opaque_jelly(Color::srgb(0.6, 0.8, 0.95)),
            1.2,
            1.5,
        ),
    ];
    // One cage, shared by the three bodies (each gets its own state and render mesh copy).
    let cage = match TetMesh::try_enclosing(&surface, 7) {
        Ok(cage) => Arc::new(cage),
        Err(e) => {
            error!("bunny cage: {e}");
            return;
        }
    };
    info!(
        "bunny cage: {} vertices, {} tets around {} render vertices",
        cage.vertex_count(),
        cage.tet_count(),
        surface.positions().len()
    );
    for (i, (material, look, x, y)) in bunnies.into_iter().enumerate() {
        commands.spawn((
            Name::new(format!("bunny {i}")),
            DeformableBody::from(cage.clone()),
            material,
            Mesh3d(render.clone()),
            MeshMaterial3d(materials.add(look)),
            Transform::from_xyz(x, y, 0.0)
                .with_rotation(Quat::from_rotation_y(-0.6))
                .with_scale(Vec3::splat(0.5)),
        ));
    }
}
