//! The Stanford bunny in a coarse cage dropped onto a floor, or onto another: the scenes of the
//! drawn-surface tests (`tests/sim_drawn.rs`) and of `cargo bench --bench drawn`.

use std::sync::Arc;

use bevy_deformable::sim::embed::{EmbeddedPoint, embed_points};
use bevy_deformable::sim::{
    BodyDesc, BodyHandle, MaterialParams, ObstacleCollider, SoftWorld, StrainLimitParams, TetMesh,
    TriangleSurface, Vec3, WorldSettings,
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

/// `material` with the compression limit that keeps a coarse cage from being crushed inside
/// out (`min_stretch` 0.5, `max_stretch` 100, stiffness scale 10).
pub fn compression_limited(mut material: MaterialParams) -> MaterialParams {
    material.strain_limits = Some(StrainLimitParams {
        min_stretch: 0.5,
        max_stretch: 100.0,
        stiffness_scale: 10.0,
    });
    material
}

/// Two caged bunnies on a floor, the upper dropped onto the lower ([`stacked_bunnies`]).
pub struct StackedBunnies {
    pub world: SoftWorld,
    pub lower: BodyHandle,
    pub upper: BodyHandle,
    /// The drawn triangles, over [`StackedBunnies::drawn`]'s points.
    pub triangles: Vec<[u32; 3]>,
    /// The drawn points in the cage.
    pub points: Vec<EmbeddedPoint>,
}

impl StackedBunnies {
    /// Body `h`'s drawn points where its cage is now (m).
    pub fn drawn(&self, h: BodyHandle) -> Vec<Vec3> {
        let x = self.world.positions(h).unwrap();
        self.points.iter().map(|p| p.position(x)).collect()
    }
}

/// Two bunnies of `material` in cages of `cells` cells on a floor at y = 0: the lower's drawn
/// surface 1 mm above it, the upper's 5 cm above the lower's top and `shift` (m) to the side.
/// They touch by their drawn meshes (`drawn_mesh`) or by their cages (their drawn points then
/// meet the floor only).
pub fn stacked_bunnies(
    cells: usize,
    shift: f64,
    material: MaterialParams,
    drawn_mesh: bool,
) -> StackedBunnies {
    let (surface, cage) = bunny(cells);
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let ys = surface.positions().iter().map(|p| p.y);
    let (low, high) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), y| {
        (l.min(y), h.max(y))
    });
    let desc = |at: Vec3| {
        let d = BodyDesc::new(cage.clone(), material).with_position(at);
        if drawn_mesh {
            d.with_drawn_mesh(surface.positions().to_vec(), surface.triangles().to_vec())
        } else {
            d.with_drawn_surface(surface.positions().to_vec())
        }
    };
    let lower = world
        .add_body_from(&desc(Vec3::new(0.0, 0.001 - low, 0.0)))
        .unwrap();
    let upper = world
        .add_body_from(&desc(Vec3::new(shift, high - 2.0 * low + 0.05, 0.0)))
        .unwrap();
    StackedBunnies {
        world,
        lower,
        upper,
        triangles: surface.triangles().to_vec(),
        points: embed_points(&cage, surface.positions()),
    }
}
