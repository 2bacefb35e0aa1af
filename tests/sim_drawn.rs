//! A detailed mesh in a coarse cage collides with obstacles by the surface it is drawn with
//! (`BodyDesc::with_drawn_surface`), not by its cage.

use std::f64::consts::FRAC_PI_4;
use std::sync::Arc;

use nalgebra::UnitQuaternion;

use bevy_deformable::sim::contact::closest_point_on_triangle;
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

/// The boundary of a lattice box of half extents `half` (m), `cells` cells along its longest
/// side, as a drawn mesh: its surface vertices (rest frame) and triangles over them.
fn drawn_box(half: Vec3, cells: usize) -> (Vec<Vec3>, Vec<[u32; 3]>) {
    let lattice = TetMesh::cuboid(half, cells);
    let surface = lattice.surface_vertices();
    let mut index = vec![u32::MAX; lattice.vertex_count()];
    for (i, &v) in surface.iter().enumerate() {
        index[v as usize] = i as u32;
    }
    let points = surface
        .iter()
        .map(|&v| lattice.rest_positions()[v as usize])
        .collect();
    let triangles = lattice
        .surface_triangles()
        .iter()
        .map(|t| t.map(|v| index[v as usize]))
        .collect();
    (points, triangles)
}

/// How two drawn bodies end ([`stacked_drawn_boxes`]).
struct DrawnStack {
    /// The closest the upper body's drawn points come to the lower body's drawn triangles (m).
    gap: f64,
    /// Pairs of drawn triangles of the two bodies that cross each other.
    crossings: usize,
    /// The lowest drawn point of the lower body (m above the floor).
    lowest: f64,
}

/// Two rubber boxes drawn 5 cm inside their cages (0.15 m drawn half-size in a 2-cell cage of
/// 0.2 m), the lower on the floor, the upper dropped onto it from 3 cm above its cage and moved
/// `shift` (m) along x; how they are after 2 s. With `mesh`, the drawn triangles are given
/// ([`SoftWorld::set_drawn_mesh`]); without, only the points ([`SoftWorld::set_drawn_surface`]).
fn stacked_drawn_boxes(mesh: bool, shift: f64) -> DrawnStack {
    let cage = Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 2));
    let (points, triangles) = drawn_box(Vec3::repeat(0.15), 6);
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let desc = |p: Vec3| {
        let d = BodyDesc::new(cage.clone(), MaterialParams::RUBBER).with_position(p);
        if mesh {
            d.with_drawn_mesh(points.clone(), triangles.clone())
        } else {
            d.with_drawn_surface(points.clone())
        }
    };
    let lower = world
        .add_body_from(&desc(Vec3::new(0.0, 0.15, 0.0)))
        .unwrap();
    let upper = world
        .add_body_from(&desc(Vec3::new(shift, 0.15 + 0.4 + 0.03, 0.0)))
        .unwrap();
    for _ in 0..120 {
        let report = world.step(1.0 / 60.0).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
    }
    let embedded = embed_points(&cage, &points);
    let drawn = |h| -> Vec<Vec3> {
        let x = world.positions(h).unwrap();
        embedded.iter().map(|p| p.position(x)).collect()
    };
    let (low, up) = (drawn(lower), drawn(upper));
    let corners = |x: &[Vec3], t: &[u32; 3]| t.map(|v| x[v as usize]);
    let mut gap = f64::INFINITY;
    for p in &up {
        for t in &triangles {
            let [a, b, c] = corners(&low, t);
            gap = gap.min((p - closest_point_on_triangle(p, &a, &b, &c).1).norm());
        }
    }
    let crossings = triangles
        .iter()
        .map(|t| {
            let t = corners(&up, t);
            triangles
                .iter()
                .filter(|u| common::triangles_intersect(&t, &corners(&low, u)))
                .count()
        })
        .sum();
    let lowest = low.iter().map(|p| p.y).fold(f64::INFINITY, f64::min);
    DrawnStack {
        gap,
        crossings,
        lowest,
    }
}

#[test]
fn two_drawn_boxes_rest_on_each_other_by_their_drawn_surfaces() {
    for shift in [0.0, 0.05] {
        let stack = stacked_drawn_boxes(true, shift);
        assert_eq!(stack.crossings, 0, "shift {shift}");
        assert!(
            stack.gap <= 2e-3,
            "shift {shift}: drawn surfaces {:.2} mm apart",
            stack.gap * 1e3
        );
        assert!(stack.lowest.abs() <= 1e-3, "lower box at {}", stack.lowest);
    }
}

/// A long box lying on one of its edges (turned 45 degrees about its long axis, z) dropped 2 cm
/// across the top of a cube, both rubber and drawn with one triangle pair per face in cages of
/// 3-4 cells, with edge-edge contacts on or off. The long box's ridge crosses the cube's top
/// edges between any two drawn points, so no point of either comes near a triangle of the
/// other: only edge rows hold the ridge up. Returns, over 60 steps (every 5th), the most pairs
/// of their drawn triangles that crossed and the lowest the ridge came (m, below the start of
/// the cube's top face: positive is through it).
fn ridge_across_a_drawn_cube(edge_contacts: bool) -> (usize, f64) {
    let settings = WorldSettings {
        edge_contacts,
        ..WorldSettings::default()
    };
    let mut world = SoftWorld::new(settings);
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let (cube_points, cube_triangles) = drawn_box(Vec3::repeat(0.15), 1);
    let (long_points, long_triangles) = drawn_box(Vec3::new(0.1, 0.1, 0.3), 1);
    let cube_cage = Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 3));
    let long_cage = Arc::new(TetMesh::cuboid(Vec3::new(0.14, 0.14, 0.34), 4));
    let cube = world
        .add_body_from(
            &BodyDesc::new(cube_cage.clone(), MaterialParams::RUBBER)
                .with_position(Vec3::new(0.0, 0.151, 0.0))
                .with_drawn_mesh(cube_points.clone(), cube_triangles.clone()),
        )
        .unwrap();
    // The ridge 2 cm above the cube's top face (at y = 0.301).
    let top = 0.301;
    let long = world
        .add_body_from(
            &BodyDesc::new(long_cage.clone(), MaterialParams::RUBBER)
                .with_position(Vec3::new(0.0, top + 0.02 + 0.1 * 2f64.sqrt(), 0.0))
                .with_rotation(UnitQuaternion::from_euler_angles(0.0, 0.0, FRAC_PI_4))
                .with_drawn_mesh(long_points.clone(), long_triangles.clone()),
        )
        .unwrap();
    let (cube_embedded, long_embedded) = (
        embed_points(&cube_cage, &cube_points),
        embed_points(&long_cage, &long_points),
    );
    let (mut most, mut lowest) = (0, f64::INFINITY);
    for step in 1..=60 {
        let report = world.step(1.0 / 60.0).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
        if step % 5 != 0 {
            continue;
        }
        let drawn = |h, embedded: &[EmbeddedPoint]| -> Vec<Vec3> {
            let x = world.positions(h).unwrap();
            embedded.iter().map(|p| p.position(x)).collect()
        };
        let (c, l) = (drawn(cube, &cube_embedded), drawn(long, &long_embedded));
        let corners = |x: &[Vec3], t: &[u32; 3]| t.map(|v| x[v as usize]);
        let crossing = long_triangles
            .iter()
            .map(|t| {
                cube_triangles
                    .iter()
                    .filter(|u| common::triangles_intersect(&corners(&l, t), &corners(&c, u)))
                    .count()
            })
            .sum();
        most = most.max(crossing);
        lowest = lowest.min(l.iter().map(|p| p.y).fold(f64::INFINITY, f64::min));
    }
    (most, top - lowest)
}

/// Drawn creases crossing between their points are held apart by edge-edge contacts between
/// the drawn meshes' edges. Without them the ridge falls through the cube to the floor
/// (measured: up to 28 crossing pairs, 0.30 m down); with them no pair crosses, and the ridge
/// ends 22 mm below where the top face started, the cube's give under the long box.
#[test]
fn a_drawn_ridge_dropped_across_a_drawn_cube_stays_on_top_of_it() {
    let (crossing, sunk) = ridge_across_a_drawn_cube(true);
    assert_eq!(crossing, 0, "{crossing} crossing pairs");
    assert!(sunk < 0.03, "the ridge {:.1} mm into the cube", sunk * 1e3);
    let (crossing, sunk) = ridge_across_a_drawn_cube(false);
    assert!(crossing > 0 && sunk > 0.2, "{crossing} pairs, {sunk} m");
}

/// Two bunnies in 5-cell cages touching by their drawn meshes, the upper dropped 5 cm onto the
/// lower and `shift` (m) to the side, `material` for both: asserts that at most 30 pairs of
/// their drawn triangles cross every 10 steps over the first 30 (the first touch is at step
/// 15).
fn bunnies_dropped_onto_each_other(shift: f64, material: MaterialParams) {
    let mut scene = common::bunny::stacked_bunnies(5, shift, material, true);
    for step in 1..=30 {
        let report = scene.world.step(1.0 / 60.0).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
        if step % 10 == 0 {
            let crossings = common::bunny::crossing_pairs(
                &scene.drawn(scene.lower),
                &scene.drawn(scene.upper),
                &scene.triangles,
            );
            assert!(
                crossings <= 30,
                "shift {shift}, step {step}: {crossings} crossing pairs"
            );
        }
    }
}

/// Dropped off-centre (`cargo bench --bench drawn`'s scene), two caged bunnies do not sink into
/// each other. They did, from the first touch: a vertex of the upper one beside a sharp ridge of
/// the lower's drawn mesh, up to 40 mm outside it, was behind one of the ridge's faces and was
/// taken to be inside (`src/sim/contact/soft.rs`): 563 crossing triangle pairs 20 steps in and
/// thousands later. Now the few that cross are edges through faces between the points
/// (measured: 0-14 pairs from step 15 to 60, with edge-edge contacts on the drawn edges as
/// without: the bunny's fine mesh has few creases for them to pair).
#[test]
fn two_caged_bunnies_dropped_onto_each_other_do_not_sink_into_each_other() {
    bunnies_dropped_onto_each_other(0.05, MaterialParams::JELLY);
}

/// Dropped squarely, the upper bunny crushes a cage tet of the lower one inside out (1 at step
/// 19, 4 at step 20), whose drawn surface then crosses itself (38 pairs), where inside and
/// outside are undefined, and it sinks in (60 crossing pairs at step 20, thousands by step 24).
/// With a compression limit it does not (0-10 pairs at every 15th step over 3 s, README,
/// caveats).
#[test]
fn with_a_compression_limit_a_caged_bunny_dropped_squarely_onto_another_does_not_sink_in() {
    bunnies_dropped_onto_each_other(
        0.0,
        common::bunny::compression_limited(MaterialParams::JELLY),
    );
}

#[test]
fn without_the_drawn_triangles_the_cages_hold_the_drawn_boxes_apart() {
    // What the drawn mesh fixes: the cages meet, 5 cm outside each drawn box.
    let stack = stacked_drawn_boxes(false, 0.0);
    assert!(
        stack.gap > 0.05,
        "drawn surfaces {:.2} mm apart",
        stack.gap * 1e3
    );
}

#[test]
fn a_bad_drawn_mesh_is_a_typed_error_and_the_body_is_unchanged() {
    let cage = Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 2));
    let (points, triangles) = drawn_box(Vec3::repeat(0.15), 2);
    let embedded = embed_points(&cage, &points);
    let mut world = SoftWorld::new(WorldSettings::default());
    let h = world
        .add_body(cage.clone(), MaterialParams::RUBBER, Vec3::zeros())
        .unwrap();
    let proxies = world.proxies(h).unwrap().to_vec();
    let with = |f: &dyn Fn(&mut Vec<[u32; 3]>)| {
        let mut t = triangles.clone();
        f(&mut t);
        t
    };
    let n = points.len() as u32;
    /// Triangles, and whether the error is the one they must give.
    type Case = (Vec<[u32; 3]>, fn(&WorldError) -> bool);
    let cases: [Case; 4] = [
        (with(&|t| t[5][1] = n), |e| {
            matches!(e, WorldError::DrawnTriangleOutOfRange { index: 5 })
        }),
        (with(&|t| t[3] = [0, 1, 0]), |e| {
            matches!(e, WorldError::DegenerateDrawnTriangle { index: 3 })
        }),
        (Vec::new(), |e| matches!(e, WorldError::EmptyDrawnSurface)),
        // Three points on one edge of the box: no area.
        (
            {
                let on_edge: Vec<u32> = (0..n)
                    .filter(|&i| {
                        let p = points[i as usize];
                        (p.x + 0.15).abs() < 1e-9 && (p.y + 0.15).abs() < 1e-9
                    })
                    .collect();
                with(&|t| t[7] = [on_edge[0], on_edge[1], on_edge[2]])
            },
            |e| matches!(e, WorldError::DegenerateDrawnTriangle { index: 7 }),
        ),
    ];
    for (i, (bad, expected)) in cases.into_iter().enumerate() {
        let e = world.set_drawn_mesh(h, embedded.clone(), bad).unwrap_err();
        assert!(expected(&e), "case {i}: {e:?}");
        assert_eq!(world.proxies(h).unwrap(), &proxies[..], "case {i}");
    }
    let mut nan = embedded.clone();
    nan[2].weights[0] = f64::NAN;
    assert!(matches!(
        world.set_drawn_mesh(h, nan, triangles.clone()),
        Err(WorldError::InvalidValue { .. })
    ));
    assert_eq!(world.proxies(h).unwrap(), &proxies[..]);
    // Triangles without points, through a description: refused, no body added.
    let before = world.bodies().count();
    let mut desc = BodyDesc::new(cage, MaterialParams::RUBBER);
    desc.drawn_triangles = triangles;
    assert!(matches!(
        world.add_body_from(&desc),
        Err(WorldError::EmptyDrawnSurface)
    ));
    assert_eq!(world.bodies().count(), before);
}

/// Self-collision on a drawn mesh skips each point's own triangles and their neighbours
/// (the drawn mesh's one-rings) and points behind the triangle at the step's start: a drawn
/// box dropped onto the floor with self-collision on finds no self contact on its convex
/// surface, and rests on its drawn bottom as with self-collision off.
#[test]
fn a_drawn_box_with_self_collision_finds_no_contact_with_itself() {
    let cage = Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 2));
    let (points, triangles) = drawn_box(Vec3::repeat(0.15), 6);
    let embedded = embed_points(&cage, &points);
    let mut world = SoftWorld::new(WorldSettings {
        self_collision: true,
        ..WorldSettings::default()
    });
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let h = world
        .add_body_from(
            &BodyDesc::new(cage, MaterialParams::JELLY)
                .with_position(Vec3::new(0.0, 0.2, 0.0))
                .with_drawn_mesh(points, triangles),
        )
        .unwrap();
    for step in 0..90 {
        let report = world.step(1.0 / 60.0).unwrap();
        assert_eq!(report.soft_contacts, 0, "step {step}");
    }
    let x = world.positions(h).unwrap();
    let lowest = embedded
        .iter()
        .map(|p| p.position(x).y)
        .fold(f64::INFINITY, f64::min);
    assert!(lowest.abs() <= 1e-3, "drawn bottom at {lowest}");
}
