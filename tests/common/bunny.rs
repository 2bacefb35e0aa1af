//! The Stanford bunny in a coarse cage dropped onto a floor: the scene of the drawn-surface
//! tests (`tests/sim_drawn.rs`) and of `cargo bench --bench drawn`.

use std::sync::Arc;

use bevy_deformable::sim::embed::{EmbeddedPoint, embed_points};
use bevy_deformable::sim::{
    BodyDesc, MaterialParams, ObstacleCollider, SoftWorld, TetMesh, TriangleSurface, Vec3,
    WorldSettings,
};

pub const BUNNY_OBJ: &str = include_str!("../../assets/meshes/bunny_10k.obj");

/// The bunny at half its file's size (about 0.8 m long), and its cage of `cells` cells across.
pub fn bunny(cells: usize) -> (TriangleSurface, Arc<TetMesh>) {
    let surface = TriangleSurface::from_obj(BUNNY_OBJ)
        .unwrap()
        .transformed(0.5, Vec3::zeros());
    let cage = TetMesh::try_enclosing(&surface, cells).unwrap();
    (surface, Arc::new(cage))
}

/// A world with a floor at y = 0 and the bunny in a cage of `cells` cells, its drawn surface
/// 5 cm above the floor, colliding by its drawn surface or by its cage.
pub fn dropped_bunny(cells: usize, drawn: bool) -> (SoftWorld, Vec<EmbeddedPoint>) {
    let (surface, cage) = bunny(cells);
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let lowest = surface
        .positions()
        .iter()
        .map(|p| p.y)
        .fold(f64::INFINITY, f64::min);
    let mut desc = BodyDesc::new(cage.clone(), MaterialParams::JELLY).with_position(Vec3::new(
        0.0,
        0.05 - lowest,
        0.0,
    ));
    if drawn {
        desc = desc.with_drawn_surface(surface.positions().to_vec());
    }
    world.add_body_from(&desc).unwrap();
    (world, embed_points(&cage, surface.positions()))
}
