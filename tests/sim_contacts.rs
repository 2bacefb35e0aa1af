//! Contact physics of the simulation core: friction thresholds on a slope, soft bodies resting
//! on each other, self-collision, restitution, determinism with coupled bodies.

use std::sync::Arc;

use bevy_deformable::sim::contact::FrictionModel;
use bevy_deformable::sim::{
    BodyHandle, CombineRule, MaterialParams, ObstacleCollider, SUGGESTED_ANDERSON_WINDOW, Settling,
    Sleeping, SoftWorld, TetMesh, Vec3, WorldSettings,
};
use nalgebra::UnitQuaternion;

mod common;
use common::{intersections, penetration, slope, triangles_intersect};

const DT: f64 = 1.0 / 60.0;

fn cube(half: f64, res: usize) -> Arc<TetMesh> {
    Arc::new(TetMesh::cuboid(Vec3::repeat(half), res))
}

fn centroid(x: &[Vec3]) -> Vec3 {
    x.iter().sum::<Vec3>() / x.len() as f64
}

fn top(world: &SoftWorld, b: BodyHandle) -> f64 {
    world
        .positions(b)
        .unwrap()
        .iter()
        .map(|p| p.y)
        .fold(f64::MIN, f64::max)
}

fn bottom(world: &SoftWorld, b: BodyHandle) -> f64 {
    world
        .positions(b)
        .unwrap()
        .iter()
        .map(|p| p.y)
        .fold(f64::MAX, f64::min)
}

#[test]
fn the_triangle_test_sees_crossings_and_misses_separated_triangles() {
    let t = [Vec3::zeros(), Vec3::x(), Vec3::y()];
    let crossing = [
        Vec3::new(0.2, 0.2, -1.0),
        Vec3::new(0.2, 0.2, 1.0),
        Vec3::new(0.3, 0.5, 0.0),
    ];
    let above = [
        Vec3::new(0.2, 0.2, 1e-4),
        Vec3::new(0.8, 0.1, 1e-4),
        Vec3::new(0.1, 0.8, 1e-4),
    ];
    assert!(triangles_intersect(&t, &crossing));
    assert!(!triangles_intersect(&t, &above));
}

/// A rubber block on a plane tilted by `degrees` with friction `mu` and friction model `model`:
/// how far (m) it slides from 0.5 s to 1.5 s ([`slope::slide_distance`]).
fn slide_distance(mu: f64, degrees: f64, model: FrictionModel) -> f64 {
    let mut settings = WorldSettings::default();
    settings.lcp.friction = model;
    slope::slide_distance(
        settings,
        MaterialParams::RUBBER.with_damping(5.0),
        mu,
        degrees,
    )
}

#[test]
fn a_block_stays_on_a_slope_iff_tan_angle_is_below_mu_for_cone_and_pyramid() {
    for model in [FrictionModel::Cone, FrictionModel::Pyramid] {
        for mu in [0.2f64, 0.5, 0.8] {
            let critical = mu.atan().to_degrees();
            let below = slide_distance(mu, critical - 1.0, model);
            let above = slide_distance(mu, critical + 1.0, model);
            // 1 degree past the threshold the block accelerates at g (sin - mu cos), at least
            // 0.17 m/s^2: 17 cm from 0.5 s to 1.5 s; 1 degree below, it holds within a millimetre.
            assert!(
                below.abs() < 1e-3,
                "{model:?} mu {mu}: slid {below} m at {:.2} degrees",
                critical - 1.0
            );
            assert!(
                above > 0.03,
                "{model:?} mu {mu}: only {above} m at {:.2} degrees",
                critical + 1.0
            );
        }
    }
}

/// A rubber block (mu 0.5, friction angle 26.57 degrees) rests for a second on a plane 3 degrees
/// below its friction angle, long enough to settle; the plane then tilts about the block at
/// 2 degrees per second to 1 degree past the angle and stops. Returns whether the block was
/// settling before the tilt, and how far (m) it then slid along the plane.
fn tilt_under_resting_block() -> (bool, f64) {
    // Settling alone: asleep, the block would not be settling (the moving plane wakes it).
    let mut world = SoftWorld::new(WorldSettings {
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    });
    let mu: f64 = 0.5;
    let critical = mu.atan().to_degrees();
    let turn =
        |degrees: f64| UnitQuaternion::from_axis_angle(&Vec3::z_axis(), degrees.to_radians());
    let start = turn(critical - 3.0);
    let material = MaterialParams::RUBBER.with_friction(mu).with_damping(5.0);
    let body = world
        .add_body_with_pose(
            cube(0.1, 2),
            material,
            start * Vec3::new(0.0, 0.1, 0.0),
            start,
        )
        .unwrap();
    let plane = world
        .add_obstacle(
            ObstacleCollider::halfspace(Vec3::y())
                .unwrap()
                .with_rotation(start)
                .with_friction(mu)
                .with_combine_rules(CombineRule::Average, CombineRule::Average),
        )
        .unwrap();
    let mut settled = false;
    for _ in 0..60 {
        settled = world.step(DT).unwrap().settling_bodies == 1;
    }
    let rest = centroid(world.positions(body).unwrap());
    let steps = 120;
    for step in 1..=steps + 60 {
        let angle = critical - 3.0 + 4.0 * step.min(steps) as f64 / steps as f64;
        world
            .obstacle_mut(plane)
            .unwrap()
            .move_to(Vec3::zeros(), turn(angle), DT)
            .unwrap();
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
    }
    let end = turn(critical + 1.0);
    // Where the block would be had it stuck to the plane, against where it is.
    let stuck = end * start.inverse() * rest;
    let down_slope = end * -Vec3::x();
    (
        settled,
        (centroid(world.positions(body).unwrap()) - stuck).dot(&down_slope),
    )
}

#[test]
fn a_settled_block_slides_once_its_plane_tilts_past_the_friction_angle() {
    let (settled, slid) = tilt_under_resting_block();
    assert!(settled, "the block was not settling before the tilt");
    // Past the angle for 0.5 s of tilting and 1 s held: at least 0.17 m/s^2 for the last
    // second alone, 8.5 cm (measured: 15.6 cm). Were a block on a moving plane damped like a
    // resting one, settling at 10 1/s would hold it to a crawl of 1.7 cm/s (measured: 2.3 cm).
    assert!(slid > 0.05, "slid only {slid} m");
}

#[test]
fn a_body_drifting_slowly_with_no_support_is_not_settled() {
    // Settling needs a support: in zero gravity, touching nothing, a slow drift goes on.
    let mut world = SoftWorld::new(WorldSettings {
        gravity: Vec3::zeros(),
        ..WorldSettings::default()
    });
    let body = world
        .add_body(cube(0.1, 2), MaterialParams::RUBBER, Vec3::zeros())
        .unwrap();
    let drift = Vec3::new(0.01, 0.0, 0.0);
    world
        .velocities_mut(body)
        .unwrap()
        .iter_mut()
        .for_each(|v| *v = drift);
    for _ in 0..60 {
        assert_eq!(world.step(DT).unwrap().settling_bodies, 0);
    }
    let v = centroid(world.velocities(body).unwrap());
    assert!((v - drift).norm() < 1e-9, "{v}");
}

/// A slippery block (mu 0.01) resting on a block that 27 stiff attachments carry sideways at
/// 2 cm/s for 3 s; returns how far (m) the top block fell behind the carried one.
fn lag_on_a_carried_block() -> f64 {
    let mut world = SoftWorld::new(WorldSettings::default());
    let slippery = MaterialParams::RUBBER.with_friction(0.01);
    let carrier = world
        .add_body(cube(0.1, 2), slippery, Vec3::zeros())
        .unwrap();
    let rider = world
        .add_body(cube(0.1, 2), slippery, Vec3::new(0.0, 0.2006, 0.0))
        .unwrap();
    let rest = world.positions(carrier).unwrap().to_vec();
    for (i, &p) in rest.iter().enumerate() {
        world.attach(carrier, i, 1.0e4, p).unwrap();
    }
    // Let the rider land and come to rest on the carrier (it settles) before the carrying.
    for _ in 0..60 {
        world.step(DT).unwrap();
    }
    let offset = |w: &SoftWorld| {
        centroid(w.positions(rider).unwrap()).x - centroid(w.positions(carrier).unwrap()).x
    };
    let before = offset(&world);
    for step in 1..=180 {
        let shift = Vec3::new(0.02 * step as f64 * DT, 0.0, 0.0);
        for (i, &p) in rest.iter().enumerate() {
            world.set_attachment_target(carrier, i, p + shift).unwrap();
        }
        world.step(DT).unwrap();
    }
    before - offset(&world)
}

#[test]
fn a_block_on_a_slowly_carried_block_is_carried_along() {
    // The carrier is held, so nothing in its island settles: the rider keeps up (measured:
    // 0.5 mm). Were the rider settling, its damping at 10 1/s (0.2 m/s^2 at 2 cm/s) would beat
    // its friction (0.1 m/s^2) and it would fall behind (measured with settling decided per
    // body: 6.9 mm).
    let lag = lag_on_a_carried_block();
    assert!(lag.abs() < 5e-3, "fell behind by {lag} m");
}

fn drop_stack(count: usize, settings: WorldSettings) -> (SoftWorld, Vec<BodyHandle>, f64) {
    let mut world = SoftWorld::new(settings);
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let size = 0.2;
    // Rubber of 1 MPa: at the preset's 200 kPa the stacks sag and drape more (see the ignored
    // tests' notes).
    let bodies: Vec<BodyHandle> = (0..count)
        .map(|i| {
            // Offsets keep the lattices from lining up exactly.
            let offset = Vec3::new(0.013 * i as f64, 0.11 + 0.23 * i as f64, -0.007 * i as f64);
            world
                .add_body(
                    cube(size / 2.0, 4),
                    MaterialParams::RUBBER.with_youngs_modulus(1.0e6),
                    offset,
                )
                .unwrap()
        })
        .collect();
    for step in 0..150 {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "step {step}: {:?}", report.frozen);
    }
    (world, bodies, size)
}

#[test]
fn two_dropped_cubes_rest_on_each_other_with_penetration_under_one_percent() {
    let (world, bodies, size) = drop_stack(2, WorldSettings::default());
    for (a, b) in [(bodies[1], bodies[0]), (bodies[0], bodies[1])] {
        let depth = penetration(&world, a, b);
        assert!(depth < 0.01 * size, "{depth} m deep");
    }
    // The upper cube rests on the lower one: neither fallen off nor floating.
    let gap = bottom(&world, bodies[1]) - top(&world, bodies[0]);
    assert!(gap.abs() < 0.01 * size, "gap {gap} m");
}

#[test]
fn two_dropped_cubes_rest_without_any_triangle_intersection() {
    let (world, bodies, _) = drop_stack(2, WorldSettings::default());
    assert_eq!(intersections(&world, bodies[0], bodies[1]), 0);
}

#[test]
fn a_stack_of_five_stands_without_intersections() {
    let (world, bodies, size) = drop_stack(5, WorldSettings::default());
    for pair in bodies.windows(2) {
        assert_eq!(intersections(&world, pair[0], pair[1]), 0);
        for (a, b) in [(pair[1], pair[0]), (pair[0], pair[1])] {
            let depth = penetration(&world, a, b);
            assert!(depth < 0.01 * size, "{depth} m deep");
        }
        // Still stacked: each centroid a cube's height above the one below (less the rubber's
        // compression under the cubes above), and shifted sideways by no more than the 1.5 cm
        // the cubes were dropped with.
        let (below, above) = (
            centroid(world.positions(pair[0]).unwrap()),
            centroid(world.positions(pair[1]).unwrap()),
        );
        let rise = above.y - below.y;
        assert!(
            (rise - size).abs() < 0.02 * size,
            "centroids {rise} m apart"
        );
        let aside = Vec3::new(above.x - below.x, 0.0, above.z - below.z).norm();
        assert!(aside < 0.1 * size, "{aside} m aside");
    }
    // The scene is a real test: without edge-edge contacts (on by default), the overhanging
    // bottom faces drape around the creases below them and cross them between their vertices.
    let vertex_rows_only = WorldSettings {
        edge_contacts: false,
        ..WorldSettings::default()
    };
    let (world, bodies, _) = drop_stack(5, vertex_rows_only);
    let crossings: usize = bodies
        .windows(2)
        .map(|pair| intersections(&world, pair[0], pair[1]))
        .sum();
    assert!(crossings > 0);
}

#[test]
fn a_stack_of_five_comes_to_rest() {
    // Settling alone: sleeping would skip the cubes it measures.
    let settings = WorldSettings {
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    };
    let (mut world, bodies, _) = drop_stack(5, settings);
    // Two and a half seconds more to settle (the cubes sway after landing: each rocks almost
    // rigidly on the one below, which settling damps once they are slow); then another second
    // moves nothing by more than a millimetre.
    let centroids = |w: &SoftWorld| -> Vec<Vec3> {
        bodies
            .iter()
            .map(|&b| centroid(w.positions(b).unwrap()))
            .collect()
    };
    for _ in 0..150 {
        world.step(DT).unwrap();
    }
    let before = centroids(&world);
    let mut settling = usize::MAX;
    for _ in 0..60 {
        settling = settling.min(world.step(DT).unwrap().settling_bodies);
    }
    let moved: Vec<f64> = centroids(&world)
        .iter()
        .zip(&before)
        .map(|(a, b)| (a - b).norm())
        .collect();
    assert!(moved.iter().all(|&m| m < 1e-3), "moved {moved:?} m");
    assert_eq!(settling, bodies.len(), "every cube settles");
}

#[test]
fn without_settling_the_stack_keeps_swaying() {
    // The test above is a real test: settling is what brings the stack to rest (README,
    // caveats). Without it the top cube still sways by millimetres five seconds in.
    let settings = WorldSettings {
        settling: Settling::OFF,
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    };
    let (mut world, bodies, _) = drop_stack(5, settings);
    let top = *bodies.last().unwrap();
    for _ in 0..150 {
        world.step(DT).unwrap();
    }
    let before = centroid(world.positions(top).unwrap());
    let mut most: f64 = 0.0;
    for _ in 0..60 {
        world.step(DT).unwrap();
        most = most.max((centroid(world.positions(top).unwrap()) - before).norm());
    }
    assert!(most > 2e-3, "the top moved only {most} m");
}

/// A soft bar lying on the floor whose left end is folded over onto its right half and pressed
/// into it; returns the number of intersecting pairs of triangles between the two layers (away
/// from the crease, where a coarse mesh folded flat crosses itself in any case).
fn fold_bar(self_collision: bool) -> usize {
    let mut world = SoftWorld::new(WorldSettings {
        self_collision,
        ..WorldSettings::default()
    });
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let mesh = Arc::new(TetMesh::cuboid(Vec3::new(0.4, 0.025, 0.05), 16));
    let lift = 0.0251;
    let bar = world
        .add_body(
            mesh.clone(),
            MaterialParams::JELLY,
            Vec3::new(0.0, lift, 0.0),
        )
        .unwrap();
    let rest = mesh.rest_positions();
    let left: Vec<usize> = (0..rest.len()).filter(|&i| rest[i].x < -0.39).collect();
    // The left end's centre follows a half ellipse over the bar to x = +0.3 while the end
    // turns with it, as a hand folding the bar would: its cross-section is rotated by the
    // angle `s` travelled, so that the face that was on top ends up facing down, held by
    // 400 N/m attachments 1.5 cm below the top of the lower layer (the end's centre at
    // 0.0251 + 2 * 0.0175 = 0.0601 m, its lower face at 0.0351 m; the lower layer's top is at
    // 0.0501 m).
    let steps = 150;
    for step in 0..=steps + 60 {
        let s = (step.min(steps) as f64 / steps as f64) * std::f64::consts::PI;
        for &i in &left {
            let r = rest[i];
            let centre = Vec3::new(
                -0.05 - 0.35 * s.cos(),
                lift + 0.25 * s.sin() + 0.0175 * (1.0 - s.cos()),
                r.z,
            );
            let turned = Vec3::new(r.y * s.sin(), r.y * s.cos(), 0.0);
            world.attach(bar, i, 400.0, centre + turned).unwrap();
        }
        world.step(DT).unwrap();
    }
    let x = world.positions(bar).unwrap();
    let triangles = mesh.surface_triangles();
    let rest_x = |t: &[u32; 3]| t.iter().map(|&v| rest[v as usize].x).sum::<f64>() / 3.0;
    let mut count = 0;
    for (i, t) in triangles.iter().enumerate() {
        for u in &triangles[i + 1..] {
            let layers = rest_x(t) < -0.1 && rest_x(u) > 0.1 || rest_x(t) > 0.1 && rest_x(u) < -0.1;
            if !layers {
                continue;
            }
            let (pt, pu) = (t.map(|v| x[v as usize]), u.map(|v| x[v as usize]));
            if triangles_intersect(&pt, &pu) {
                count += 1;
            }
        }
    }
    count
}

/// Self-collision holds most of the folded layer out of the lower one: it crosses at a fifth or
/// less of the triangle pairs that cross without it (4 against 41 when last measured).
#[test]
fn self_collision_keeps_most_of_a_folded_bar_from_passing_through_itself() {
    let with = fold_bar(true);
    let without = fold_bar(false);
    // The scene is a real test: without self-collision the bar passes through itself.
    assert!(
        without >= 20,
        "{without} crossing pairs without self-collision"
    );
    assert!(
        5 * with <= without,
        "{with} crossing pairs with self-collision, {without} without"
    );
}

/// The goal: no crossing at all. Not met: where the pressed layer's flat faces fold along
/// their diagonals, two such diagonals can pass each other with no vertex behind a face (no
/// row sees it), and whether that happens here depends on details: none in this scene when
/// last measured, but 34 crossing pairs with the folded end landing 1.25 or 2.5 cm further
/// left. See the README's caveats.
#[test]
#[ignore = "self-collision does not yet keep a layer pressed hard into another free of crossings"]
fn a_bar_folded_onto_itself_does_not_pass_through_itself() {
    assert_eq!(fold_bar(true), 0);
}

/// A rubber ball dropped 5 cm onto a 2 cm rubber slab pinned at its edges (a trampoline, which
/// sags about 17 cm under it) stays on top of it. It did not while soft-soft detection gave a
/// ball vertex resting on the slab's top face, where a re-detection (no margin) found that face
/// beyond the margin, a farther face whose plane the vertex is behind, such as the slab's
/// bottom face: contacts 10-33 mm deep with normals into the slab, which pushed the ball's
/// vertices down through it (26-41 of its 379 vertices inside the slab, 8.4 mm deep, and with
/// a finer ball, resolution 10, 164-182 vertices). Measured since the detection decides
/// inside or outside by the closest triangle of all (`src/sim/contact/soft.rs`): no vertex
/// inside at 2 s, and with the finer ball 0-3 vertices, at most 1.6 mm deep.
#[test]
fn a_ball_resting_on_a_pinned_soft_slab_stays_on_top_of_it() {
    let slab = ball_onto_pinned_slab(0.0);
    slab.assert_on_top();
}

/// The same ball thrown down at the slab at 10 m/s rides it down (about 0.54 m) and back
/// without passing into it: its centre stays above the slab's lowest point by more than its
/// radius less 2 cm (measured: 0.161 m, radius 0.15 m), and 2 s later no vertex is inside
/// (before the detection fix above: 5.3 mm inside) or through the slab, under its bottom face.
/// From about 20 m/s some of the ball's vertices pass through the slab, and at 60 m/s all of
/// them (README, caveats).
#[test]
fn a_ball_thrown_at_a_pinned_soft_slab_at_10_m_s_stays_on_top_of_it() {
    let slab = ball_onto_pinned_slab(10.0);
    slab.assert_on_top();
    assert!(
        slab.lowest_centre > 0.13,
        "the ball's centre came {} m above the slab's lowest point",
        slab.lowest_centre
    );
}

/// The same at 20 m/s: 2 s later 33 of the ball's 194 surface vertices are under the slab
/// (27-33 over this spawn and three moved sideways by up to 3 cm), and from 30 m/s more. At
/// the impact step most soft contacts get no row (165 of 270 in one such spawn): rows must not
/// share vertices, and the slab's few vertices under the ball are taken. Coupled rows for the
/// contacts left without one (a vertex against all three corners, solved in the contact
/// subspace) cut this to 4-13 vertices (tried, not kept: overlapping spawns were then launched
/// at 2.6 m/s). See the README's caveats.
#[test]
#[ignore = "from about 20 m/s parts of the ball pass through a thin pinned slab"]
fn a_ball_thrown_at_a_pinned_soft_slab_at_20_m_s_stays_on_top_of_it() {
    ball_onto_pinned_slab(20.0).assert_on_top();
}

/// Where a ball thrown at a pinned slab ended ([`ball_onto_pinned_slab`]).
struct BallOnSlab {
    /// How deep (m) the ball's deepest surface vertex is inside the slab after 2 s.
    depth: f64,
    /// How many of the ball's surface vertices are under the slab after 2 s: a vertical line
    /// up from the vertex crosses the slab's surface twice or more (an even number of times),
    /// so the vertex passed through the slab.
    through: usize,
    /// The lowest the ball's centre came above the slab's lowest point over the run (m).
    lowest_centre: f64,
}

impl BallOnSlab {
    /// No vertex of the ball is inside the slab by 1 mm or more, and none passed through it.
    fn assert_on_top(&self) {
        assert!(
            self.depth < 1e-3,
            "the ball is {} m into the slab",
            self.depth
        );
        assert_eq!(self.through, 0, "ball vertices under the slab");
    }
}

/// How many of `ball`'s surface vertices lie under `slab` (see [`BallOnSlab::through`]); the
/// slab must stay a height field over the ball's footprint (a sagging trampoline does).
fn vertices_under_slab(world: &SoftWorld, ball: BodyHandle, slab: BodyHandle) -> usize {
    let (xb, xs) = (
        world.positions(ball).unwrap(),
        world.positions(slab).unwrap(),
    );
    let triangles = world.mesh(slab).unwrap().surface_triangles();
    let crossings_above = |p: &Vec3| {
        triangles
            .iter()
            .filter(|t| {
                let [a, b, c] = t.map(|i| xs[i as usize]);
                // Barycentric coordinates of `p` projected along y onto the triangle.
                let det = (b.x - a.x) * (c.z - a.z) - (c.x - a.x) * (b.z - a.z);
                if det.abs() < 1e-15 {
                    return false;
                }
                let u = ((p.x - a.x) * (c.z - a.z) - (c.x - a.x) * (p.z - a.z)) / det;
                let w = ((b.x - a.x) * (p.z - a.z) - (p.x - a.x) * (b.z - a.z)) / det;
                u >= 0.0
                    && w >= 0.0
                    && u + w <= 1.0
                    && a.y + u * (b.y - a.y) + w * (c.y - a.y) > p.y
            })
            .count()
    };
    world
        .mesh(ball)
        .unwrap()
        .surface_vertices()
        .iter()
        .filter(|&&v| {
            let crossings = crossings_above(&xb[v as usize]);
            crossings >= 2 && crossings % 2 == 0
        })
        .count()
}

/// A 0.3 m rubber ball dropped 5 cm onto a 1 m x 2 cm rubber slab pinned at its edges, thrown
/// down at `speed` (m/s), stepped for 2 s.
fn ball_onto_pinned_slab(speed: f64) -> BallOnSlab {
    let mut world = SoftWorld::new(WorldSettings::default());
    let slab_mesh = Arc::new(TetMesh::try_cuboid(Vec3::new(0.5, 0.01, 0.5), 20).unwrap());
    let slab = world
        .add_body(slab_mesh.clone(), MaterialParams::RUBBER, Vec3::zeros())
        .unwrap();
    for (i, p) in slab_mesh.rest_positions().iter().enumerate() {
        if p.x.abs() > 0.499 || p.z.abs() > 0.499 {
            world.pin(slab, i, *p).unwrap();
        }
    }
    let ball = world
        .add_body(
            Arc::new(TetMesh::try_sphere(0.15, 6).unwrap()),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 0.2, 0.0),
        )
        .unwrap();
    for v in world.velocities_mut(ball).unwrap() {
        v.y = -speed;
    }
    let mut lowest_centre = f64::INFINITY;
    for _ in 0..120 {
        world.step(DT).unwrap();
        let centre = centroid(world.positions(ball).unwrap()).y;
        lowest_centre = lowest_centre.min(centre - bottom(&world, slab));
    }
    BallOnSlab {
        depth: penetration(&world, ball, slab),
        through: vertices_under_slab(&world, ball, slab),
        lowest_centre,
    }
}

#[test]
fn restitution_returns_the_approach_speed_share_without_adding_energy() {
    let bounce = |e: f64| {
        let mut world = SoftWorld::new(WorldSettings::default());
        let body = world
            .add_body(
                cube(0.1, 2),
                MaterialParams::STIFF_FOAM
                    .with_restitution(e)
                    .with_damping(20.0),
                Vec3::new(0.0, 0.6, 0.0),
            )
            .unwrap();
        world
            .add_obstacle(
                ObstacleCollider::halfspace(Vec3::y())
                    .unwrap()
                    .with_restitution(e),
            )
            .unwrap();
        let e0 = world.kinetic_energy(body).unwrap() + world.potential_energy(body).unwrap();
        let mut peak_after_bounce = f64::MIN;
        let mut bounced = false;
        let mut max_energy = f64::MIN;
        for _ in 0..90 {
            world.step(DT).unwrap();
            let v = centroid(world.velocities(body).unwrap()).y;
            bounced |= v > 0.0 && centroid(world.positions(body).unwrap()).y < 0.2;
            if bounced {
                peak_after_bounce =
                    peak_after_bounce.max(centroid(world.positions(body).unwrap()).y);
            }
            max_energy = max_energy
                .max(world.kinetic_energy(body).unwrap() + world.potential_energy(body).unwrap());
        }
        assert!(max_energy <= e0 + 1e-9, "energy grew: {max_energy} > {e0}");
        peak_after_bounce
    };
    let (elastic, dead) = (bounce(0.8), bounce(0.0));
    // Dropped from 0.5 m onto the floor: e = 0.8 brings the centroid back up near
    // 0.1 + 0.64 * 0.5 = 0.42 m; e = 0 leaves it resting.
    assert!(elastic > 0.3, "bounced only to {elastic} m");
    assert!(dead < 0.15, "an inelastic block rose to {dead} m");
}

#[test]
fn a_pile_poured_into_a_bucket_settles_without_freezing() {
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let wall = 0.3;
    for (normal, at) in [
        (Vec3::x(), Vec3::new(-wall, 0.0, 0.0)),
        (-Vec3::x(), Vec3::new(wall, 0.0, 0.0)),
        (Vec3::z(), Vec3::new(0.0, 0.0, -wall)),
        (-Vec3::z(), Vec3::new(0.0, 0.0, wall)),
    ] {
        world
            .add_obstacle(
                ObstacleCollider::halfspace(normal)
                    .unwrap()
                    .with_position(at),
            )
            .unwrap();
    }
    let bodies: Vec<BodyHandle> = (0..8)
        .map(|i| {
            let size = 0.08 + 0.02 * (i % 3) as f64;
            let mesh = if i % 2 == 0 {
                TetMesh::cuboid(Vec3::repeat(size), 3)
            } else {
                TetMesh::sphere(size, 4)
            };
            let at = Vec3::new(
                -0.12 + 0.24 * (i % 2) as f64,
                0.2 + 0.25 * (i / 2) as f64,
                -0.1 + 0.2 * ((i / 2) % 2) as f64,
            );
            world
                .add_body(Arc::new(mesh), MaterialParams::RUBBER, at)
                .unwrap()
        })
        .collect();
    let mut soft_contacts = 0;
    for step in 0..180 {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "step {step}: {:?}", report.frozen);
        soft_contacts = soft_contacts.max(report.soft_contacts);
        // After every step, every body is in the bucket and above the floor within a
        // millimetre, corners included (where a vertex pressed by a neighbour into a wall needs
        // its wall row ahead of its soft row).
        for &b in &bodies {
            for p in world.positions(b).unwrap() {
                let outside = (-p.y).max(p.x.abs() - wall).max(p.z.abs() - wall);
                assert!(
                    outside < 1e-3,
                    "step {step}: a vertex {outside} m outside at {p}"
                );
            }
        }
    }
    // The bodies landed on each other.
    assert!(soft_contacts > 0);
    // Settled: the kinetic energy of the pile is small against its potential energy.
    let kinetic: f64 = bodies
        .iter()
        .map(|&b| world.kinetic_energy(b).unwrap())
        .sum();
    let potential: f64 = bodies
        .iter()
        .map(|&b| world.potential_energy(b).unwrap())
        .sum();
    assert!(
        kinetic < 0.01 * potential,
        "{kinetic} J moving, {potential} J potential"
    );
}

#[test]
fn coupled_bodies_are_deterministic_and_independent_of_the_thread_count() {
    // With the default acceleration (Chebyshev) and with Anderson's, whose sums run over an
    // island's members in order.
    for anderson_window in [0, SUGGESTED_ANDERSON_WINDOW] {
        let run = || {
            let settings = WorldSettings {
                anderson_window,
                ..WorldSettings::default()
            };
            let (world, bodies, _) = drop_stack(3, settings);
            bodies
                .iter()
                .flat_map(|&b| world.positions(b).unwrap().to_vec())
                .collect::<Vec<Vec3>>()
        };
        let first = run();
        assert_eq!(first, run());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert_eq!(first, pool.install(run));
    }
}

/// A rubber block on a soft slab that rests on a 30-degree slope; returns how far (m) the block
/// slides along the slab from 0.5 s to 2 s.
fn slide_on_soft_slab(mu: f64) -> f64 {
    let mut world = SoftWorld::new(WorldSettings::default());
    let rotation = UnitQuaternion::from_axis_angle(&Vec3::z_axis(), 30f64.to_radians());
    let normal = rotation * Vec3::y();
    let slab = world
        .add_body_with_pose(
            Arc::new(TetMesh::cuboid(Vec3::new(0.5, 0.05, 0.3), 10)),
            MaterialParams::RUBBER.with_friction(mu),
            Vec3::zeros(),
            rotation,
        )
        .unwrap();
    // The slab itself cannot slide: its friction with the ground is high.
    world
        .add_obstacle(
            ObstacleCollider::halfspace(normal)
                .unwrap()
                .with_position(-normal * 0.05)
                .with_friction(10.0)
                .with_combine_rules(CombineRule::Max, CombineRule::Average),
        )
        .unwrap();
    let block = world
        .add_body_with_pose(
            cube(0.1, 3),
            MaterialParams::RUBBER.with_friction(mu),
            normal * 0.1506,
            rotation,
        )
        .unwrap();
    let down = rotation * -Vec3::x();
    let relative = |w: &SoftWorld| {
        (centroid(w.positions(block).unwrap()) - centroid(w.positions(slab).unwrap())).dot(&down)
    };
    let mut start = 0.0;
    for step in 0..120 {
        if step == 30 {
            start = relative(&world);
        }
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
    }
    relative(&world) - start
}

#[test]
fn a_block_slides_on_a_soft_slab_when_tan_angle_exceeds_mu() {
    // tan 30 degrees = 0.577; g (sin 30 - 0.3 cos 30) = 2.4 m/s^2: over a metre in 1.5 s.
    let slides = slide_on_soft_slab(0.3);
    assert!(slides > 0.2, "only {slides} m with mu 0.3");
}

#[test]
fn a_block_holds_on_a_soft_slab_when_tan_angle_is_below_mu() {
    let holds = slide_on_soft_slab(0.8);
    assert!(holds.abs() < 2e-3, "slid {holds} m with mu 0.8");
}

/// Two cubes dropped one above the other; with `groups`, the bottom of the upper one after 2 s.
fn upper_cube_bottom(groups: [Option<u64>; 2]) -> f64 {
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let material = MaterialParams::RUBBER.with_youngs_modulus(1.0e6);
    let lower = world
        .add_body(cube(0.1, 4), material, Vec3::new(0.0, 0.11, 0.0))
        .unwrap();
    let upper = world
        .add_body(cube(0.1, 4), material, Vec3::new(0.013, 0.34, -0.007))
        .unwrap();
    world.set_collision_group(lower, groups[0]).unwrap();
    world.set_collision_group(upper, groups[1]).unwrap();
    for _ in 0..120 {
        world.step(DT).unwrap();
    }
    bottom(&world, upper)
}

#[test]
fn bodies_of_one_collision_group_pass_through_each_other_and_others_do_not() {
    // Apart: the upper cube rests on the lower one (its bottom near 0.2 m).
    for groups in [[None, None], [Some(1), Some(2)], [Some(1), None]] {
        let b = upper_cube_bottom(groups);
        assert!((b - 0.2).abs() < 0.01, "{groups:?}: bottom at {b}");
    }
    // One group: it falls through the lower cube onto the floor.
    let b = upper_cube_bottom([Some(7), Some(7)]);
    assert!(b.abs() < 0.01, "bottom at {b}");
}

#[test]
fn listed_colliders_alone_meet_obstacles() {
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let mesh = cube(0.1, 4);
    let top_layer: Vec<u32> = (0..mesh.vertex_count() as u32)
        .filter(|&v| mesh.rest_positions()[v as usize].y > 0.1 - 1e-9)
        .collect();
    let b = world
        .add_body(
            mesh,
            MaterialParams::RUBBER.with_youngs_modulus(1.0e6),
            Vec3::new(0.0, 0.3, 0.0),
        )
        .unwrap();
    // No proxies and only the top layer: the cube sinks until its top meets the floor.
    world.set_colliders(b, Vec::new(), &top_layer).unwrap();
    for _ in 0..150 {
        world.step(DT).unwrap();
    }
    assert!(top(&world, b).abs() < 0.01, "top at {}", top(&world, b));
    assert!(bottom(&world, b) < -0.15, "bottom at {}", bottom(&world, b));
    assert!(world.set_colliders(b, Vec::new(), &[10_000]).is_err());
}

/// Every way to give an obstacle a non-finite pose or velocity is refused with a typed error:
/// at `add_obstacle`, by the setters, and by the step for one written through `obstacle_mut`;
/// the world is not advanced.
#[test]
fn a_non_finite_obstacle_is_refused_everywhere() {
    use bevy_deformable::sim::WorldError;
    let mut world = SoftWorld::new(WorldSettings::default());
    let ball = || ObstacleCollider::ball(0.5).unwrap();
    let nan = Vec3::new(0.0, f64::NAN, 0.0);
    let inf = Vec3::new(f64::INFINITY, 0.0, 0.0);
    let bad_rotation =
        UnitQuaternion::new_unchecked(nalgebra::Quaternion::new(f64::NAN, 0.0, 0.0, 0.0));
    for o in [
        ball().with_position(nan),
        ball().with_position(inf),
        ball().with_rotation(bad_rotation),
    ] {
        assert!(matches!(
            world.add_obstacle(o),
            Err(WorldError::Obstacle(_))
        ));
    }
    assert!(world.obstacles().is_empty());
    let h = world.add_obstacle(ball()).unwrap();
    let body = world
        .add_body(
            cube(0.1, 2),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 1.0, 0.0),
        )
        .unwrap();
    let o = world.obstacle_mut(h).unwrap();
    assert!(o.move_to(nan, UnitQuaternion::identity(), 0.1).is_err());
    assert!(o.move_to(Vec3::zeros(), bad_rotation, 0.1).is_err());
    assert!(
        o.set_state(
            Vec3::zeros(),
            UnitQuaternion::identity(),
            inf,
            Vec3::zeros()
        )
        .is_err()
    );
    assert_eq!(o.position(), Vec3::zeros());
    // Replaced through the mutable reference by one built with a NaN position: the step refuses.
    *world.obstacle_mut(h).unwrap() = ball().with_position(nan);
    let before = world.positions(body).unwrap().to_vec();
    assert!(matches!(
        world.step(1.0 / 60.0),
        Err(WorldError::InvalidObstacle { obstacle, .. }) if obstacle == h
    ));
    assert_eq!(world.positions(body).unwrap(), &before[..]);
    *world.obstacle_mut(h).unwrap() = ball();
    assert!(world.step(1.0 / 60.0).is_ok());
}
