//! Physical facts of the simulation core, checked on small scenes.

use std::sync::Arc;

use bevy_deformable::sim::mesh::signed_volume;
use bevy_deformable::sim::{
    FreezeReason, MaterialParams, ObstacleCollider, Settling, Sleeping, SoftWorld, TetMesh, Vec3,
    WorldSettings,
};
use nalgebra::UnitQuaternion;

mod common;

const DT: f64 = 1.0 / 60.0;

fn cube(half: f64, res: usize) -> Arc<TetMesh> {
    Arc::new(TetMesh::cuboid(Vec3::repeat(half), res))
}

fn centroid(x: &[Vec3]) -> Vec3 {
    x.iter().sum::<Vec3>() / x.len() as f64
}

fn lowest(x: &[Vec3]) -> f64 {
    x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min)
}

#[test]
fn free_fall_follows_implicit_euler_and_half_g_t_squared() {
    let mut world = SoftWorld::new(WorldSettings::default());
    let body = world
        .add_body(
            cube(0.2, 3),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 10.0, 0.0),
        )
        .unwrap();
    let start = centroid(world.positions(body).unwrap());
    let steps = 30;
    for _ in 0..steps {
        world.step(DT).unwrap();
    }
    let drop = start.y - centroid(world.positions(body).unwrap()).y;
    let g = 9.81;
    let n = steps as f64;
    // Implicit Euler: x_n = x_0 - g h^2 n (n + 1) / 2 exactly (the body does not deform).
    let discrete = g * DT * DT * n * (n + 1.0) / 2.0;
    assert!((drop - discrete).abs() < 1e-9, "drop {drop} vs {discrete}");
    // And 1/2 g t^2 up to the method's first-order error g h t / 2.
    let t = n * DT;
    assert!((drop - 0.5 * g * t * t).abs() <= 0.5 * g * DT * t + 1e-9);
    // No deformation: every vertex moved by the same amount.
    let rest = world.mesh(body).unwrap().rest_positions().to_vec();
    for (p, r) in world.positions(body).unwrap().iter().zip(&rest) {
        assert!((p - (r + Vec3::new(0.0, 10.0 - discrete, 0.0))).norm() < 1e-9);
    }
}

/// Drops a 0.5 m rubber cube 0.35 m onto the floor and runs 3 s, checking every step that no
/// vertex sinks below the floor by more than 0.1 % of the edge and that the total mechanical
/// energy never exceeds the initial one (implicit Euler dissipates). Returns the kinetic energy
/// (J) after every step and the cube's mass (kg).
fn drop_cube_on_the_floor(settling: Settling) -> (Vec<f64>, f64) {
    let size = 0.5;
    // The solver's own decay: asleep, the cube would stop being stepped.
    let mut world = SoftWorld::new(WorldSettings {
        settling,
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    });
    let body = world
        .add_body(
            cube(size / 2.0, 4),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 0.6, 0.0),
        )
        .unwrap();
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let energy = |w: &SoftWorld| {
        w.kinetic_energy(body).unwrap()
            + w.potential_energy(body).unwrap()
            + w.elastic_energy(body).unwrap()
    };
    let e0 = energy(&world);
    let mut ke = Vec::new();
    for step in 0..180 {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "frozen: {:?}", report.frozen);
        let low = lowest(world.positions(body).unwrap());
        assert!(
            low > -1e-3 * size,
            "step {step}: vertex at {low} below the floor"
        );
        assert!(
            energy(&world) <= e0 + 1e-9 * e0.abs().max(1.0),
            "step {step}: energy grew"
        );
        ke.push(world.kinetic_energy(body).unwrap());
    }
    let c = centroid(world.positions(body).unwrap());
    assert!(
        (c.y - size / 2.0).abs() < 0.05 * size,
        "centroid at {}",
        c.y
    );
    (ke, size.powi(3) * MaterialParams::RUBBER.density)
}

/// The largest kinetic energy (J) of the 20 steps from `from`.
fn peak(ke: &[f64], from: usize) -> f64 {
    ke[from..from + 20].iter().copied().fold(0.0, f64::max)
}

#[test]
fn dropped_cube_rests_on_the_floor_without_sinking_and_loses_energy() {
    // Without settling, what decays at the end is the cube's own ringing in its bounce mode,
    // trading kinetic for elastic energy every few steps: so the peak kinetic energy of a
    // third of a second, not every sample.
    let (ke, _) = drop_cube_on_the_floor(Settling::OFF);
    let last = ke[ke.len() - 1];
    assert!(last < 1e-4, "still moving: {last} J");
    let (now, before) = (peak(&ke, ke.len() - 20), peak(&ke, ke.len() - 80));
    assert!(
        now < before,
        "kinetic energy peaks at {now} J after peaking at {before} J a second earlier"
    );
}

#[test]
fn a_dropped_cube_settles_to_under_a_millimetre_per_second() {
    // The cube lands at about step 40. With settling (the default) its rigid rebound is gone
    // within the second after; what is left is the solver's jitter at rest (measured: peaks of
    // 2e-6 to 3e-5 J, 0.2 to 0.6 mm/s RMS). Without settling the peak of steps 80-100 is
    // 2.8e-4 J, 2 mm/s.
    let (ke, mass) = drop_cube_on_the_floor(Settling::default());
    for from in (80..180).step_by(20) {
        let rms_speed = (2.0 * peak(&ke, from) / mass).sqrt();
        assert!(
            rms_speed < 1e-3,
            "steps {from}..: RMS speed {rms_speed} m/s"
        );
    }
}

#[test]
fn pinned_vertex_stays_exactly_put() {
    let mut world = SoftWorld::new(WorldSettings::default());
    let body = world
        .add_body(
            cube(0.25, 3),
            MaterialParams::JELLY,
            Vec3::new(0.0, 1.0, 0.0),
        )
        .unwrap();
    // Pin one top corner where it is.
    let (v, target) = world
        .positions(body)
        .unwrap()
        .iter()
        .enumerate()
        .max_by(|a, b| (a.1.y + a.1.x).total_cmp(&(b.1.y + b.1.x)))
        .map(|(i, p)| (i, *p))
        .unwrap();
    world.pin(body, v, target).unwrap();
    for _ in 0..90 {
        world.step(DT).unwrap();
        assert_eq!(world.positions(body).unwrap()[v], target);
    }
    // The rest of the body hangs below the pin.
    assert!(centroid(world.positions(body).unwrap()).y < target.y - 0.2);
}

#[test]
fn half_inverted_cube_recovers_positive_volumes() {
    let mut world = SoftWorld::new(WorldSettings {
        gravity: Vec3::zeros(),
        ..WorldSettings::default()
    });
    let mesh = cube(0.25, 4);
    let body = world
        .add_body(mesh.clone(), MaterialParams::RUBBER, Vec3::zeros())
        .unwrap();
    // Mirror the x > 0 half through x = 0: those tets turn inside out.
    for p in world.positions_mut(body).unwrap() {
        if p.x > 0.0 {
            p.x = -p.x;
        }
    }
    let volumes = |x: &[Vec3]| -> Vec<f64> {
        mesh.tets()
            .iter()
            .map(|t| {
                let [a, b, c, d] = t.map(|i| x[i as usize]);
                signed_volume(&a, &b, &c, &d)
            })
            .collect()
    };
    let inverted = volumes(world.positions(body).unwrap())
        .iter()
        .filter(|&&v| v < 0.0)
        .count();
    assert!(
        inverted as f64 >= 0.4 * mesh.tet_count() as f64,
        "{inverted}"
    );
    for _ in 0..60 {
        let r = world.step(DT).unwrap();
        assert!(r.frozen.is_empty());
    }
    let after = volumes(world.positions(body).unwrap());
    assert!(
        after.iter().all(|&v| v > 0.0),
        "{} tets still inverted",
        after.iter().filter(|&&v| v <= 0.0).count()
    );
}

#[test]
fn kinematic_paddle_pushes_a_resting_body_without_interpenetration() {
    let mut world = SoftWorld::new(WorldSettings::default());
    let body = world
        .add_body(
            cube(0.2, 4),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 0.2, 0.0),
        )
        .unwrap();
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    for _ in 0..60 {
        world.step(DT).unwrap();
    }
    let before = centroid(world.positions(body).unwrap());
    // The paddle skims 2 cm above the floor. (Flush with the floor, the paddle's closest face
    // for a vertex a hair above the floor is its bottom face: the closest-point normal points
    // down, against the floor's, and that contact is dropped; see the README's caveats.)
    let half = Vec3::new(0.05, 0.3, 0.5);
    let py = 0.32;
    let paddle_obstacle = ObstacleCollider::cuboid(half)
        .unwrap()
        .with_position(Vec3::new(-0.6, py, 0.0));
    let paddle = world.add_obstacle(paddle_obstacle).unwrap();
    let speed = 1.0;
    let mut px = -0.6;
    for step in 0..60 {
        px += speed * DT;
        world
            .obstacle_mut(paddle)
            .unwrap()
            .move_to(Vec3::new(px, py, 0.0), UnitQuaternion::identity(), DT)
            .unwrap();
        let r = world.step(DT).unwrap();
        assert!(r.frozen.is_empty());
        // No surface vertex inside the paddle (beyond a millimetre).
        for p in world.positions(body).unwrap() {
            let local = p - Vec3::new(px, py, 0.0);
            let inside = (0..3).all(|k| local[k].abs() < half[k] - 1e-3);
            assert!(
                !inside,
                "step {step}: vertex {p:?} inside the paddle at x = {px}"
            );
        }
        assert!(
            r.max_penetration < 2e-3,
            "step {step}: penetration {}",
            r.max_penetration
        );
    }
    let after = centroid(world.positions(body).unwrap());
    assert!(
        after.x > before.x + 0.2,
        "pushed from {} to {}",
        before.x,
        after.x
    );
}

#[test]
fn a_nan_freezes_only_its_body_and_leaves_the_other_bit_identical() {
    let run = |inject: bool| -> (Vec<Vec<Vec3>>, Option<FreezeReason>) {
        let mut world = SoftWorld::new(WorldSettings::default());
        let a = world
            .add_body(
                cube(0.2, 3),
                MaterialParams::RUBBER,
                Vec3::new(0.0, 0.5, 0.0),
            )
            .unwrap();
        let b = world
            .add_body(
                cube(0.2, 3),
                MaterialParams::JELLY,
                Vec3::new(1.0, 0.5, 0.0),
            )
            .unwrap();
        world
            .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
            .unwrap();
        let mut trajectory = Vec::new();
        let mut frozen = None;
        for step in 0..40 {
            if inject && step == 20 {
                world.positions_mut(b).unwrap()[3].y = f64::NAN;
            }
            let r = world.step(DT).unwrap();
            if let Some((h, reason)) = r.frozen.first() {
                assert_eq!(*h, b);
                frozen = Some(reason.clone());
            }
            trajectory.push(world.positions(a).unwrap().to_vec());
        }
        if inject {
            // B is restored to a finite state and stays frozen.
            assert!(
                world
                    .positions(b)
                    .unwrap()
                    .iter()
                    .all(|p| p.iter().all(|c| c.is_finite()))
            );
            assert!(world.frozen(b).unwrap().is_some());
            // Unfrozen, it goes on from its last good state.
            world.unfreeze(b).unwrap();
            for _ in 0..10 {
                assert!(world.step(DT).unwrap().frozen.is_empty());
            }
        }
        (trajectory, frozen)
    };
    let (clean, none) = run(false);
    let (dirty, reason) = run(true);
    assert!(none.is_none());
    assert_eq!(reason, Some(FreezeReason::NonFiniteInput));
    assert_eq!(clean, dirty, "body A changed because body B failed");
}

#[test]
fn invalid_input_gets_typed_errors() {
    let mut world = SoftWorld::new(WorldSettings::default());
    assert!(
        world
            .add_body(
                cube(0.2, 2),
                MaterialParams::RUBBER.with_youngs_modulus(-1.0),
                Vec3::zeros()
            )
            .is_err()
    );
    let b = world
        .add_body(cube(0.2, 2), MaterialParams::RUBBER, Vec3::zeros())
        .unwrap();
    assert!(world.pin(b, 10_000, Vec3::zeros()).is_err());
    assert!(world.pin(b, 0, Vec3::new(f64::NAN, 0.0, 0.0)).is_err());
    assert!(world.step(0.0).is_err());
    assert!(world.step(f64::NAN).is_err());
    assert!(world.remove_body(b));
    assert!(world.positions(b).is_err());
}

#[test]
fn same_scene_twice_is_bit_identical() {
    let run = || {
        let mut world = SoftWorld::new(WorldSettings::default());
        let a = world
            .add_body(
                Arc::new(TetMesh::sphere(0.2, 5)),
                MaterialParams::JELLY,
                Vec3::new(0.0, 0.6, 0.0),
            )
            .unwrap();
        world
            .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
            .unwrap();
        world
            .add_obstacle(
                ObstacleCollider::ball(0.3)
                    .unwrap()
                    .with_position(Vec3::new(0.1, 0.0, 0.0)),
            )
            .unwrap();
        for _ in 0..40 {
            world.step(DT).unwrap();
        }
        world.positions(a).unwrap().to_vec()
    };
    assert_eq!(run(), run());
}

#[test]
fn embedded_proxy_stops_an_obstacle_between_the_vertices() {
    // A one-cell cube (8 vertices) hangs from its four pinned top corners; a small ball rises
    // into the middle of its bottom face, between the vertices. Vertex proxies alone let the ball
    // pass through the face; a proxy embedded at the face centre makes the face give way.
    let radius = 0.1;
    let run = |with_proxy: bool| -> f64 {
        let mut world = SoftWorld::new(WorldSettings::default());
        let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.25), 1));
        let body = world
            .add_body(
                mesh.clone(),
                MaterialParams::RUBBER,
                Vec3::new(0.0, 1.0, 0.0),
            )
            .unwrap();
        let top: Vec<(usize, Vec3)> = world
            .positions(body)
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, p)| p.y > 1.2)
            .map(|(i, p)| (i, *p))
            .collect();
        for (i, p) in top {
            world.pin(body, i, p).unwrap();
        }
        let centre =
            bevy_deformable::sim::embed::embed_points(&mesh, &[Vec3::new(0.0, -0.25, 0.0)])[0];
        if with_proxy {
            let mut proxies = world.proxies(body).unwrap().to_vec();
            proxies.push(centre);
            world.set_proxies(body, proxies).unwrap();
        }
        let ball = world
            .add_obstacle(
                ObstacleCollider::ball(radius)
                    .unwrap()
                    .with_position(Vec3::new(0.0, 0.6, 0.0)),
            )
            .unwrap();
        let mut deepest: f64 = 0.0;
        let mut y = 0.6;
        for _ in 0..40 {
            y += 0.5 * DT;
            world
                .obstacle_mut(ball)
                .unwrap()
                .move_to(Vec3::new(0.0, y, 0.0), UnitQuaternion::identity(), DT)
                .unwrap();
            let r = world.step(DT).unwrap();
            assert!(r.frozen.is_empty());
            let p = centre.position(world.positions(body).unwrap());
            deepest = deepest.max(radius - (p - Vec3::new(0.0, y, 0.0)).norm());
        }
        deepest
    };
    let with = run(true);
    let without = run(false);
    assert!(
        with < 2e-3,
        "embedded proxy penetrated the ball by {with} m"
    );
    assert!(
        without > 0.05,
        "without the proxy the ball should pass the face: {without} m"
    );
}

#[test]
fn a_body_thrown_into_a_corner_stays_out_of_floor_and_wall() {
    let mut world = SoftWorld::new(WorldSettings::default());
    let body = world
        .add_body(
            cube(0.2, 4),
            MaterialParams::JELLY,
            Vec3::new(0.0, 0.21, 0.0),
        )
        .unwrap();
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    world
        .add_obstacle(
            ObstacleCollider::halfspace(Vec3::x())
                .unwrap()
                .with_position(Vec3::new(-0.3, 0.0, 0.0)),
        )
        .unwrap();
    for v in world.velocities_mut(body).unwrap() {
        *v = Vec3::new(-3.0, -1.0, 0.0);
    }
    let mut worst: f64 = 0.0;
    for _ in 0..90 {
        let r = world.step(DT).unwrap();
        assert!(r.frozen.is_empty());
        for p in world.positions(body).unwrap() {
            worst = worst.max(-p.y).max(-0.3 - p.x);
        }
    }
    assert!(
        worst < 1e-3,
        "a vertex went {worst} m into the floor or the wall"
    );
}

#[test]
fn attached_vertex_drags_the_body_after_its_moving_target() {
    let mut world = SoftWorld::new(WorldSettings {
        gravity: Vec3::zeros(),
        ..WorldSettings::default()
    });
    let body = world
        .add_body(cube(0.2, 3), MaterialParams::RUBBER, Vec3::zeros())
        .unwrap();
    let (v, start) = common::far_corner(world.positions(body).unwrap());
    world.attach(body, v, 2.0e4, start).unwrap();
    let c0 = centroid(world.positions(body).unwrap());
    for step in 1..=120 {
        let target = start + Vec3::new(0.5 * (step.min(60) as f64 / 60.0), 0.0, 0.0);
        world.set_attachment_target(body, v, target).unwrap();
        let r = world.step(DT).unwrap();
        assert!(r.frozen.is_empty());
    }
    let target = start + Vec3::new(0.5, 0.0, 0.0);
    let p = world.positions(body).unwrap()[v];
    assert!(
        (p - target).norm() < 0.02,
        "attached vertex at {p:?}, target {target:?}"
    );
    // The body trails behind the dragged corner: it moved along, and kept its shape.
    let c = centroid(world.positions(body).unwrap());
    assert!(c.x - c0.x > 0.3, "body moved by {}", c.x - c0.x);
    let rest = (start - c0).norm();
    assert!(
        ((p - c).norm() - rest).abs() < 0.1 * rest,
        "corner-centroid {} vs {rest}",
        (p - c).norm()
    );
    // Detaching (stiffness 0) is a numeric refactorization; the body then coasts freely.
    world.attach(body, v, 0.0, target).unwrap();
    world.step(DT).unwrap();
}

/// The x-extent of `world`'s body beyond its rest 0.2 m (m) after each step of a free
/// oscillation: a 0.2 m cube (E = 1e4 Pa, nu = 0, no velocity damping) stretched by 2 % along x
/// and released in zero gravity, stepped at `h` = 1/960 s to a tight tolerance for 0.6 s.
fn free_oscillation(strain_damping: f64) -> Vec<f64> {
    let h: f64 = 1.0 / 960.0;
    let mut world = SoftWorld::new(WorldSettings {
        gravity: Vec3::zeros(),
        pd_iterations: 200,
        pd_tolerance: 1e-9,
        settling: Settling::OFF,
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    });
    let material = MaterialParams::RUBBER
        .with_youngs_modulus(1e4)
        .with_poisson_ratio(0.0)
        .with_damping(0.0)
        .with_strain_damping(strain_damping);
    let body = world
        .add_body(cube(0.1, 3), material, Vec3::zeros())
        .unwrap();
    for p in world.positions_mut(body).unwrap() {
        p.x *= 1.02;
    }
    let extent = |w: &SoftWorld| {
        let x = w.positions(body).unwrap();
        let hi = x.iter().map(|p| p.x).fold(f64::NEG_INFINITY, f64::max);
        let lo = x.iter().map(|p| p.x).fold(f64::INFINITY, f64::min);
        hi - lo - 0.2
    };
    let mut out = vec![extent(&world)];
    for _ in 0..(0.6 / h).round() as usize {
        world.step(h).unwrap();
        out.push(extent(&world));
    }
    out
}

/// The maxima `(step, value)` of an oscillating series.
fn maxima(series: &[f64]) -> Vec<(usize, f64)> {
    (1..series.len() - 1)
        .filter(|&i| series[i] > 0.0 && series[i] > series[i - 1] && series[i] >= series[i + 1])
        .map(|i| (i, series[i]))
        .collect()
}

/// Kelvin-Voigt damping of time `beta` damps a mode of angular frequency `omega` with the ratio
/// `beta omega / 2`, so its logarithmic decrement per period grows by `pi beta omega` (small
/// ratios) over the undamped body's (whose decrement is implicit Euler's own damping). The
/// cube's axial mode, measured from its period (about 0.144 s, `omega` 43.7 rad/s): 0.081 per
/// period without the strain-rate damping, 0.369 with 0.002 s (0.288 more, predicted 0.275) and
/// 0.667 with 0.004 s (0.587, predicted 0.549).
#[test]
fn strain_damping_decays_a_free_oscillation_at_the_kelvin_voigt_rate() {
    let h = 1.0 / 960.0;
    let decrement = |beta: f64| {
        let peaks = maxima(&free_oscillation(beta));
        assert!(peaks.len() >= 4, "{beta}: {peaks:?}");
        let (first, last) = (peaks[0], peaks[3]);
        let period = (last.0 - first.0) as f64 * h / 3.0;
        (
            (first.1 / last.1).ln() / 3.0,
            2.0 * std::f64::consts::PI / period,
        )
    };
    let (undamped, omega) = decrement(0.0);
    for beta in [0.002, 0.004] {
        let (damped, _) = decrement(beta);
        let predicted = std::f64::consts::PI * beta * omega;
        let ratio = (damped - undamped) / predicted;
        assert!(
            (0.85..1.2).contains(&ratio),
            "beta {beta} s: decrement {damped} against {undamped} undamped, {ratio} of the predicted {predicted} (omega {omega} rad/s)"
        );
    }
}
