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

/// Pairs of the drawn triangles `triangles` over points `a` and over points `b` (two bodies'
/// drawn surfaces) that cross, pruned by their boxes.
pub fn crossing_pairs(a: &[Vec3], b: &[Vec3], triangles: &[[u32; 3]]) -> usize {
    let corners = |x: &[Vec3], t: &[u32; 3]| t.map(|v| x[v as usize]);
    let boxed = |t: &[Vec3; 3]| (t[0].inf(&t[1]).inf(&t[2]), t[0].sup(&t[1]).sup(&t[2]));
    let first: Vec<([Vec3; 3], (Vec3, Vec3))> = triangles
        .iter()
        .map(|t| {
            let c = corners(a, t);
            (c, boxed(&c))
        })
        .collect();
    let mut crossings = 0;
    for t in triangles {
        let t = corners(b, t);
        let (lo, hi) = boxed(&t);
        for (u, (ulo, uhi)) in &first {
            let apart = (0..3).any(|k| lo[k] > uhi[k] || hi[k] < ulo[k]);
            if !apart && super::triangles_intersect(&t, u) {
                crossings += 1;
            }
        }
    }
    crossings
}
