//! A detailed mesh in a coarse cage collides with obstacles by the surface it is drawn with
//! (`BodyDesc::with_drawn_surface`), not by its cage.

use std::sync::Arc;

use bevy_deformable::sim::embed::embed_points;
use bevy_deformable::sim::{
    BodyDesc, EmbeddedPoint, MaterialParams, ObstacleCollider, SoftWorld, TetMesh, Vec3,
    WorldError, WorldSettings,
};

mod common;
use common::bunny::{bunny, dropped_bunny};

/// The lowest drawn point (m) and the lowest cage vertex (m) after `steps` steps of 1/60 s.
fn lowest_after(world: &mut SoftWorld, drawn: &[EmbeddedPoint], steps: usize) -> (f64, f64) {
    for _ in 0..steps {
        world.step(1.0 / 60.0).unwrap();
    }
    let h = world.bodies().next().unwrap();
    let x = world.positions(h).unwrap();
    let low = |ys: &mut dyn Iterator<Item = f64>| ys.fold(f64::INFINITY, f64::min);
    (
        low(&mut drawn.iter().map(|p| p.position(x).y)),
        low(&mut x.iter().map(|p| p.y)),
    )
}

#[test]
fn a_caged_bunny_rests_on_its_drawn_surface_at_any_cage_resolution() {
    for cells in [5, 7, 12] {
        let (mut world, drawn) = dropped_bunny(cells, true);
        let (drawn_low, cage_low) = lowest_after(&mut world, &drawn, 120);
        assert!(
            drawn_low.abs() <= 1e-3,
            "{cells} cells: the drawn bunny's lowest point at {:.2} mm",
            drawn_low * 1e3
        );
        // The cage reaches below the floor, where nothing is drawn.
        assert!(cage_low < -0.01, "{cells} cells: cage at {cage_low}");
    }
}

#[test]
fn a_cage_that_collides_holds_the_drawn_bunny_above_the_floor() {
    // What the drawn surface fixes: the cage's vertices lie up to a cell outside the bunny.
    let (mut world, drawn) = dropped_bunny(7, false);
    let (drawn_low, cage_low) = lowest_after(&mut world, &drawn, 120);
    assert!(drawn_low > 0.01, "drawn bunny at {drawn_low}");
    assert!(cage_low > -1e-3, "cage at {cage_low}");
}

#[test]
fn a_bad_drawn_surface_is_a_typed_error_and_the_body_is_unchanged() {
    let (surface, cage) = bunny(5);
    let mut world = SoftWorld::new(WorldSettings::default());
    let h = world
        .add_body(cage.clone(), MaterialParams::JELLY, Vec3::zeros())
        .unwrap();
    let proxies = world.proxies(h).unwrap().to_vec();
    assert!(matches!(
        world.set_drawn_surface(h, Vec::new()),
        Err(WorldError::EmptyDrawnSurface)
    ));
    let mut bad = embed_points(&cage, &surface.positions()[..10]);
    bad[3].weights[2] = f64::NAN;
    assert!(matches!(
        world.set_drawn_surface(h, bad),
        Err(WorldError::InvalidValue { .. })
    ));
    let mut out_of_range = embed_points(&cage, &surface.positions()[..10]);
    out_of_range[0].vertices[1] = cage.vertex_count() as u32;
    assert!(matches!(
        world.set_drawn_surface(h, out_of_range),
        Err(WorldError::VertexOutOfRange { .. })
    ));
    assert_eq!(world.proxies(h).unwrap(), &proxies[..]);
    // Repeated points (a render mesh's seam copies) collide once.
    let once = embed_points(&cage, &surface.positions()[..10]);
    world.set_drawn_surface(h, once.clone()).unwrap();
    let count = world.proxies(h).unwrap().len();
    let twice: Vec<EmbeddedPoint> = once.iter().chain(&once).copied().collect();
    world.set_drawn_surface(h, twice).unwrap();
    assert_eq!(world.proxies(h).unwrap().len(), count);
    world.set_proxies(h, proxies.clone()).unwrap();
    // A drawn point outside every tet of the cage.
    let mut outside = surface.positions().to_vec();
    outside[7] = Vec3::new(0.0, 10.0, 0.0);
    let before = world.bodies().count();
    assert!(matches!(
        world
            .add_body_from(&BodyDesc::new(cage, MaterialParams::JELLY).with_drawn_surface(outside)),
        Err(WorldError::DrawnPointOutside { index: 7 })
    ));
    assert_eq!(world.bodies().count(), before);
}

/// Thin-feature safety: a sphere drawn in a coarse cube (2 cells, its vertices 0.2 m apart)
/// dropped onto a grill of two thin bars (1 cm radius) that fit between the cage's vertices.
/// The drawn sphere rests on the bars: no drawn point more than 1 mm inside a bar, the body
/// does not pass the grill, and no cage vertex is deeper in a bar than the slack it is allowed
/// (1.5 times its distance to the drawn surface).
#[test]
fn a_drawn_sphere_rests_on_bars_that_fit_between_its_cage_vertices() {
    let cage = Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 2));
    // 600 points on a sphere of radius 0.18 (a Fibonacci lattice).
    let golden = std::f64::consts::PI * (3.0 - 5f64.sqrt());
    let drawn: Vec<Vec3> = (0..600)
        .map(|i| {
            let y = 1.0 - 2.0 * (i as f64 + 0.5) / 600.0;
            let r = (1.0 - y * y).sqrt();
            let a = golden * i as f64;
            0.18 * Vec3::new(r * a.cos(), y, r * a.sin())
        })
        .collect();
    let mut world = SoftWorld::new(WorldSettings::default());
    let along_x =
        nalgebra::UnitQuaternion::from_axis_angle(&Vec3::z_axis(), std::f64::consts::FRAC_PI_2);
    let radius = 0.01;
    for z in [-0.1, 0.1] {
        world
            .add_obstacle(
                ObstacleCollider::capsule(radius, 1.0)
                    .unwrap()
                    .with_rotation(along_x)
                    .with_position(Vec3::new(0.0, 0.0, z)),
            )
            .unwrap();
    }
    let h = world
        .add_body_from(
            &BodyDesc::new(cage.clone(), MaterialParams::RUBBER)
                .with_position(Vec3::new(0.0, 0.3, 0.0))
                .with_drawn_surface(drawn.clone()),
        )
        .unwrap();
    let points = embed_points(&cage, &drawn);
    for _ in 0..120 {
        let report = world.step(1.0 / 60.0).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
    }
    let x = world.positions(h).unwrap();
    // Depth of a point in a bar (m, negative outside).
    let depth = |p: &Vec3| {
        [-0.1, 0.1]
            .map(|z: f64| radius - (p.y * p.y + (p.z - z) * (p.z - z)).sqrt())
            .into_iter()
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let deepest = points
        .iter()
        .map(|p| depth(&p.position(x)))
        .fold(f64::NEG_INFINITY, f64::max);
    assert!(deepest < 1e-3, "a drawn point {deepest} m inside a bar");
    let centre = x.iter().sum::<Vec3>() / x.len() as f64;
    assert!(
        centre.y > 0.1,
        "the sphere passed the grill: centre at {centre:?}"
    );
    // The cage's vertices: each at most 1.5 times its rest distance to the drawn points deep.
    let rest: Vec<Vec3> = cage.rest_positions().to_vec();
    for (v, p) in x.iter().enumerate() {
        let nearest = drawn
            .iter()
            .map(|d| (d - rest[v]).norm())
            .fold(f64::INFINITY, f64::min);
        assert!(
            depth(p) <= 1.5 * nearest + 1e-3,
            "cage vertex {v} {} m into a bar, slack {}",
            depth(p),
            1.5 * nearest
        );
    }
}
