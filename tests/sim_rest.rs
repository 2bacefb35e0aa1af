//! "Rest means rest": no energy from nowhere, no launches, no sinking, no silent acceptance of
//! invalid input. Each scene here failed before the fixes it names.

use std::sync::Arc;

use bevy_deformable::sim::embed::barycentric;
use bevy_deformable::sim::mesh::{MAX_LATTICE_CELLS, MeshError};
use bevy_deformable::sim::{
    EnergyAudit, MaterialParams, ObstacleCollider, ObstacleError, Settling, Sleeping, SoftWorld,
    StrainLimitParams, TetMesh, Vec3, WorldError, WorldSettings,
};
use nalgebra::{Quaternion, UnitQuaternion};

const DT: f64 = 1.0 / 60.0;

fn centroid(x: &[Vec3]) -> Vec3 {
    x.iter().sum::<Vec3>() / x.len() as f64
}

fn lowest(x: &[Vec3]) -> f64 {
    x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min)
}

fn max_speed(v: &[Vec3]) -> f64 {
    v.iter().map(|v| v.norm()).fold(0.0, f64::max)
}

fn floor() -> ObstacleCollider {
    ObstacleCollider::halfspace(Vec3::y()).unwrap()
}

/// Drops `mesh` of `material` with its centre at `height` onto the floor with the energy
/// audit on, and returns the audit of every step and the world.
fn drop_audited(
    mesh: TetMesh,
    material: MaterialParams,
    height: f64,
    seconds: f64,
    settling: Settling,
) -> (Vec<EnergyAudit>, SoftWorld) {
    // The solver's own behaviour at rest: a sleeping body would not be stepped (nor audited).
    let mut world = SoftWorld::new(WorldSettings {
        energy_audit: true,
        settling,
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    });
    world
        .add_body(Arc::new(mesh), material, Vec3::new(0.0, height, 0.0))
        .unwrap();
    world.add_obstacle(floor()).unwrap();
    let mut audits = Vec::new();
    for _ in 0..(seconds / DT).round() as usize {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
        audits.push(report.energy.expect("the audit is on"));
    }
    (audits, world)
}

/// The most the total energy rose over any window of `window` steps from step `from` on (J).
fn largest_rise(audits: &[EnergyAudit], from: usize, window: usize) -> f64 {
    audits[from..]
        .windows(window)
        .map(|w| w.last().map_or(0.0, EnergyAudit::end) - w[0].start)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// The README's core example: a jelly sphere dropped from 1.5 m. Before, the friction update
/// stepped the group force with the whole body's mass, overshot on this soft body every
/// iteration, and its lagged force pumped 30-60 J per second into a rocking motion: the sphere
/// wandered metres with 18-33 J of kinetic energy.
#[test]
fn a_dropped_jelly_sphere_never_gains_energy_and_comes_to_rest() {
    for settling in [Settling::default(), Settling::OFF] {
        let mesh = TetMesh::try_sphere(0.3, 8).unwrap();
        let (audits, world) = drop_audited(mesh, MaterialParams::JELLY, 1.5, 8.0, settling);
        // From 1.5 s on (landed), the total never rises over any half second by more than
        // 10 mJ of its 253 J. Measured: 1.4 mJ with or without settling (3.8 and 2.4 mJ
        // before the strain-rate damping) over the half second in which it comes to rest.
        // There it stops on the PD tolerance after one iteration per step, so each step's
        // friction is the last step's, and the lagged friction locks a few mJ into the elastic
        // energy of the contact patch (0.4 mJ at ten fixed iterations).
        let rise = largest_rise(&audits, 90, 30);
        assert!(rise <= 1e-2, "{settling:?}: rose {rise} J over 0.5 s");
        // Friction never put in more than a trace. Measured from 1.5 s on: -190 mJ without
        // strain-rate damping (the sphere still rocks and slides); with the default damping
        // it stops rocking by 2 s, and the lagged friction of the steps that stop after one
        // iteration (above) does +4.3 mJ net (+4.8 mJ without settling) while the total
        // energy falls by 1.9 J.
        let friction: f64 = audits[90..].iter().map(|a| a.friction_work).sum();
        assert!(
            friction <= 1e-2,
            "{settling:?}: friction did {friction} J of work"
        );
        let body = world.bodies().next().unwrap();
        let ke = world.kinetic_energy(body).unwrap();
        assert!(ke < 1.0, "{settling:?}: {ke} J of kinetic energy after 8 s");
    }
}

/// A body dropped straight down lands straight: no sideways push from the mesh. Before the
/// lattice split was mirrored cell by cell (`sim::lattice`), every cell's main diagonal ran
/// along (1,1,1), and in the stability grid's scene this sphere (E = 1e5 Pa, nu = 0) rolled
/// 14 cm along (-1,0,-1) and still rocked at 0.11 m/s after 5 s, and this cube (E = 1e4 Pa,
/// nu = 0.3) leaned 22 cm along (1,0,1) as it sagged.
#[test]
fn a_body_dropped_straight_down_lands_where_it_fell() {
    let sphere = (
        TetMesh::try_sphere(0.25, 6).unwrap(),
        MaterialParams::RUBBER
            .with_youngs_modulus(1e5)
            .with_poisson_ratio(0.0),
    );
    let cube = (
        TetMesh::try_cuboid(Vec3::repeat(0.25), 4).unwrap(),
        MaterialParams::RUBBER
            .with_youngs_modulus(1e4)
            .with_poisson_ratio(0.3),
    );
    for (mesh, material) in [sphere, cube] {
        let (_, world) = drop_audited(mesh, material, 0.5, 5.0, Settling::OFF);
        let body = world.bodies().next().unwrap();
        let c = centroid(world.positions(body).unwrap());
        assert!(c.x.hypot(c.z) < 1e-3, "drifted to {:?}", (c.x, c.z));
        let speed = max_speed(world.velocities(body).unwrap());
        assert!(speed < 0.05, "{speed} m/s after 5 s");
    }
}

/// Before: a 0.5 m cube at E = 1e5 Pa, nu = 0.3 dropped 0.5 m travelled metres over 10 s and
/// kept 500 J of its 674 J impact energy after 3 s.
#[test]
fn a_soft_cube_dropped_on_the_floor_comes_to_rest_where_it_lands() {
    let material = MaterialParams::RUBBER
        .with_youngs_modulus(1e5)
        .with_poisson_ratio(0.3);
    for settling in [Settling::default(), Settling::OFF] {
        let mesh = TetMesh::try_cuboid(Vec3::repeat(0.25), 6).unwrap();
        let (audits, world) = drop_audited(mesh, material, 0.75, 5.0, settling);
        assert!(largest_rise(&audits, 60, 30) <= 1e-3, "{settling:?}");
        let body = world.bodies().next().unwrap();
        let x = world.positions(body).unwrap();
        let c = centroid(x);
        assert!(
            c.x.hypot(c.z) < 0.01,
            "{settling:?}: drifted to {:?}",
            (c.x, c.z)
        );
        assert!(lowest(x) > -1e-3, "{settling:?}: {} below", lowest(x));
        let speed = max_speed(world.velocities(body).unwrap());
        assert!(speed < 0.05, "{settling:?}: {speed} m/s after 5 s");
    }
}

/// A 0.5 m cube at E = 1e4 Pa sags to half its height under its own weight and sways for
/// seconds. Before, the local parts of its floor contacts' friction restarted from zero every
/// step while the step's first constrained solve still applied the last step's: friction did
/// +1 to +3 J of work per half second from 2.5 s on, the total energy rose, and the cube walked
/// 17 cm along its diagonal. With the local parts carried from step to step the energy falls.
#[test]
fn a_sagging_cube_gets_no_energy_from_friction() {
    let material = MaterialParams::RUBBER
        .with_youngs_modulus(1e4)
        .with_poisson_ratio(0.3);
    for settling in [Settling::default(), Settling::OFF] {
        let mesh = TetMesh::try_cuboid(Vec3::repeat(0.25), 6).unwrap();
        let (audits, _) = drop_audited(mesh, material, 0.5, 6.0, settling);
        // From 1.5 s on (landed), the total never rises over any half second.
        let rise = largest_rise(&audits, 90, 30);
        assert!(rise <= 1e-3, "{settling:?}: rose {rise} J over 0.5 s");
        // Friction does no more than a trace of positive work over any half second: +1 to +3 J
        // before the fix. Measured since: at most +32 mJ, in the half seconds where the cube
        // still bounces on its bottom face and the iterated friction sticks and slips with it,
        // while the step dissipates 4-17 J over the same half seconds.
        for (k, window) in audits[90..].chunks(30).enumerate() {
            let work: f64 = window.iter().map(|a| a.friction_work).sum();
            assert!(
                work <= 5e-2,
                "{settling:?}: friction did {work} J of work over the half second from {} s",
                1.5 + 0.5 * k as f64
            );
        }
    }
}

/// Before: the armadillo of `assets/meshes` at file scale (3 m tall, E = 1e5 Pa, nu = 0.4,
/// 1000 kg/m^3, friction 0.5), dropped from half its height, slumped as it should but kept
/// vertices moving at 2-3.5 m/s for 15 s and more. Measured now, without settling: under
/// 0.08 m/s from 9 s, 4 mm/s at 15 s.
#[test]
fn the_armadillo_at_file_scale_slumps_and_comes_to_rest() {
    let file = TetMesh::from_tetgen(
        include_str!("../assets/meshes/armadillo_4k.node"),
        include_str!("../assets/meshes/armadillo_4k.ele"),
    )
    .unwrap();
    let (lo, hi) = file.rest_bounds();
    let scale = 3.0 / (hi.y - lo.y);
    let mesh = TetMesh::new(
        file.rest_positions()
            .iter()
            .map(|p| (p - lo) * scale)
            .collect(),
        file.tets().iter().map(|t| t.map(|i| i as usize)).collect(),
    )
    .unwrap();
    let mut material = MaterialParams::RUBBER
        .with_youngs_modulus(1e5)
        .with_poisson_ratio(0.4);
    material.density = 1000.0;
    material.friction = 0.5;
    let (_, world) = drop_audited(mesh, material, 1.5, 15.0, Settling::OFF);
    let body = world.bodies().next().unwrap();
    let speed = max_speed(world.velocities(body).unwrap());
    assert!(speed < 0.05, "{speed} m/s after 15 s");
    let x = world.positions(body).unwrap();
    assert!(lowest(x) > -1e-3, "{} m below the floor", -lowest(x));
}

/// Interior vertices collide with obstacles: a very soft cube rests on the floor instead of
/// its inside flowing through it (before: E = 1e4 cubes ended 18-23 cm below the floor).
#[test]
fn a_very_soft_cube_does_not_sink_into_the_floor() {
    let material = MaterialParams::JELLY.with_youngs_modulus(1e3);
    let mesh = TetMesh::try_cuboid(Vec3::repeat(0.2), 4).unwrap();
    let (_, world) = drop_audited(mesh, material, 0.3, 3.0, Settling::default());
    let body = world.bodies().next().unwrap();
    let x = world.positions(body).unwrap();
    assert!(lowest(x) > -1e-3, "{} m below the floor", -lowest(x));
    // The report's deepest penetration measures every vertex.
    let stats = world.last_step_stats(body).unwrap();
    assert!(stats.max_penetration < 1e-3, "{}", stats.max_penetration);
}

/// A very soft cube (E = 10 kPa, 0.5 m, 5 cells, from 1 m at 240 Hz, settling and sleeping
/// off) landing: the smallest volume over 6 s (a share of the rest volume), the fastest vertex
/// from 5 s on (m/s), and the inverted tets at the end.
fn soft_cube_landing(limits: Option<StrainLimitParams>) -> (f64, f64, usize) {
    let h = 1.0 / 240.0;
    let mut world = SoftWorld::new(WorldSettings {
        sleeping: Sleeping::OFF,
        settling: Settling::OFF,
        ..WorldSettings::default()
    });
    world.add_obstacle(floor()).unwrap();
    let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.25), 5));
    let mut material = MaterialParams::RUBBER
        .with_youngs_modulus(1e4)
        .with_poisson_ratio(0.3);
    if let Some(limits) = limits {
        material = material.with_strain_limits(limits);
    }
    let body = world
        .add_body(mesh.clone(), material, Vec3::new(0.0, 1.25, 0.0))
        .unwrap();
    let volume = |x: &[Vec3]| mesh.volume_at(x).unwrap();
    let rest = mesh.total_volume();
    let (mut smallest, mut fastest_after_5_s) = (f64::INFINITY, 0.0f64);
    for k in 0..(6.0 / h) as usize {
        let report = world.step(h).unwrap();
        assert!(report.frozen.is_empty());
        smallest = smallest.min(volume(world.positions(body).unwrap()) / rest);
        if (k + 1) as f64 * h >= 5.0 {
            fastest_after_5_s = fastest_after_5_s.max(max_speed(world.velocities(body).unwrap()));
        }
    }
    let inverted = world.last_step_stats(body).unwrap().inverted_tets;
    (smallest, fastest_after_5_s, inverted)
}

/// The very soft cube landing fast: without a compression limit the impact squashes it far
/// beyond its elastic share (the README's caveat); with one (`min_stretch` 0.5) it keeps over
/// a quarter of its volume, no tet stays inverted, and it is under 5 cm/s from 5 s on
/// (measured: 27 % against 8.9 % of its volume; 3.0 cm/s at most after 5 s).
#[test]
fn a_very_soft_cube_landing_fast_keeps_its_volume_with_a_compression_limit_and_rests() {
    let limits = StrainLimitParams {
        min_stretch: 0.5,
        max_stretch: 100.0,
        stiffness_scale: 10.0,
    };
    let (limited, fastest, inverted) = soft_cube_landing(Some(limits));
    let (free, _, _) = soft_cube_landing(None);
    assert!(limited > 0.25, "squashed to {limited} of its volume");
    assert!(
        free < 0.5 * limited,
        "without the limit: {free} of its volume"
    );
    assert!(fastest < 0.05, "{fastest} m/s after 5 s");
    assert_eq!(inverted, 0);
}

/// A cube spawned 90 % below the floor comes out at the depenetration speed, not launched
/// (before: ejected at 21 m/s to 5.5 m).
#[test]
fn a_cube_spawned_inside_the_floor_comes_out_without_being_launched() {
    let settings = WorldSettings::default();
    let mut world = SoftWorld::new(settings);
    let half = 0.25;
    let body = world
        .add_body(
            Arc::new(TetMesh::try_cuboid(Vec3::repeat(half), 4).unwrap()),
            MaterialParams::RUBBER,
            Vec3::new(0.0, -0.8 * half, 0.0),
        )
        .unwrap();
    world.add_obstacle(floor()).unwrap();
    let mut fastest = 0.0f64;
    let mut highest = f64::NEG_INFINITY;
    for _ in 0..120 {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty());
        fastest = fastest.max(max_speed(world.velocities(body).unwrap()));
        highest = highest.max(lowest(world.positions(body).unwrap()));
    }
    // The push-out speed, plus what gravity and the body's own spring add within a step.
    assert!(
        fastest < 2.0 * settings.max_depenetration_speed,
        "{fastest} m/s"
    );
    assert!(highest < 0.05, "thrown up to {highest} m");
    let x = world.positions(body).unwrap();
    assert!(lowest(x) > -1e-3, "still {} m inside after 2 s", -lowest(x));
}

/// Vertices of `x` strictly inside a tet of the body at `y` with tets `tets`.
fn vertices_inside(x: &[Vec3], y: &[Vec3], tets: &[[u32; 4]]) -> usize {
    x.iter()
        .filter(|p| {
            tets.iter().any(|t| {
                let [a, b, c, d] = t.map(|i| y[i as usize]);
                barycentric(p, &a, &b, &c, &d).is_some_and(|w| w.iter().all(|&w| w > 1e-9))
            })
        })
        .count()
}

/// Before: two rubber cubes spawned overlapping by half never separated (their surface vertices
/// inside each other were deeper than `soft_depth_limit` and had no contact). Now the overlap is
/// found by flooding from its rim and pushed apart along the shortest way out, at the
/// depenetration speed: measured, apart after 0.3 s, at most 1.8 m/s. The bound below holds for
/// this spawn but is not robust to round-off: moving the left cube by multiples of 1.37 um, ten
/// variants reached 0.82-1.17 m/s in nine and 3.58 m/s in one (rubber, when faces that stayed
/// crossed snap apart; README, caveats). The stiffer cubes
/// (1 MPa) end apart with no vertex inside the other, but where they push out a cube turns a
/// little, and its extent may still reach into the other's: over 36 spawns moved by multiples
/// of 1.37 nm, from 6 cm apart to 2.4 mm overlapping, and to 10.6 mm after the dense LCP began
/// updating its factor (round-off only: 4 of the 36 overlapping against 2), hence the 1.5 cm
/// allowed below as for rubber. The rubber ones (200 kPa) end
/// touching, every vertex out of the other body but one or two on a crossed edge (below),
/// with their faces still crossed along
/// edges (36-46 pairs of surface triangles cross at 1-2 s; their extents overlap by 0.8 and
/// 1.15 cm under two round-off variants of the same step): the edge rows are not built between
/// edges that crossed at the spawn. Jelly cubes (E = 2e4 Pa) do the same and snap free at
/// 2.9 m/s after 0.8 s (README, caveats).
#[test]
fn cubes_spawned_half_into_each_other_separate_without_being_launched() {
    let foam = MaterialParams::RUBBER.with_youngs_modulus(1e6);
    for (material, overlap) in [(MaterialParams::RUBBER, 0.015), (foam, 0.015)] {
        let settings = WorldSettings::default();
        let mut world = SoftWorld::new(settings);
        let mesh = Arc::new(TetMesh::try_cuboid(Vec3::repeat(0.25), 4).unwrap());
        let left = world
            .add_body(mesh.clone(), material, Vec3::new(-0.125, 0.25, 0.0))
            .unwrap();
        let right = world
            .add_body(mesh.clone(), material, Vec3::new(0.125, 0.25, 0.0))
            .unwrap();
        world.add_obstacle(floor()).unwrap();
        let mut fastest = 0.0f64;
        for _ in 0..120 {
            let report = world.step(DT).unwrap();
            assert!(report.frozen.is_empty(), "{:?}", report.frozen);
            for b in [left, right] {
                fastest = fastest.max(max_speed(world.velocities(b).unwrap()));
            }
        }
        // Out at the push-out speed, plus what the bodies' own springs add.
        assert!(
            fastest < 2.0 * settings.max_depenetration_speed,
            "{fastest} m/s"
        );
        // Apart after 2 s: no vertex inside the other body, the centres at least a cube's
        // width apart (to 1 cm), the extents overlapping by at most `overlap`, and both near
        // where they were spawned along z. The spawn is mirror-symmetric in z, but the cubes'
        // side faces are coplanar: which of the vertices lying on the other's face planes count
        // as behind them (and are pushed out sideways while the overlap is shallow) is decided
        // by round-off. Over 32 spawns moved by multiples of 1.37 nm along x the drift was up to
        // 1.4 cm (foam) while each cube travelled about 7-20 cm; the bound is a tenth of the
        // 25 cm overlap.
        let xl = world.positions(left).unwrap();
        let xr = world.positions(right).unwrap();
        let inside = [
            vertices_inside(xl, xr, mesh.tets()),
            vertices_inside(xr, xl, mesh.tets()),
        ];
        // Rubber keeps faces crossed along edges (above), and with the default strain-rate
        // damping a corner vertex on such an edge may stay inside the other cube: measured over
        // four spawns moved by multiples of 1.37 um, 1 or 2 vertices in two of them (this spawn:
        // 1), none in the others; none in all four without the damping or at 0.01 s.
        let allowed = if material == MaterialParams::RUBBER {
            2
        } else {
            0
        };
        assert!(
            inside[0] + inside[1] <= allowed,
            "{material:?}: vertices inside the other: {inside:?}"
        );
        let gap = centroid(xr).x - centroid(xl).x;
        assert!(gap > 0.49, "{material:?}: centres {gap} m apart");
        let left_edge = xl.iter().map(|p| p.x).fold(f64::NEG_INFINITY, f64::max);
        let right_edge = xr.iter().map(|p| p.x).fold(f64::INFINITY, f64::min);
        assert!(
            left_edge < right_edge + overlap,
            "{material:?}: still {} m into each other",
            left_edge - right_edge
        );
        for x in [xl, xr] {
            assert!(
                centroid(x).z.abs() < 0.025,
                "pushed sideways: {:?}",
                centroid(x)
            );
            assert!(lowest(x) > -1e-3);
        }
    }
}

#[test]
fn invalid_obstacles_are_typed_errors() {
    let nan = f64::NAN;
    assert!(matches!(
        ObstacleCollider::halfspace(Vec3::new(0.0, 1e-12, 0.0)),
        Err(ObstacleError::InvalidValue { .. })
    ));
    assert!(matches!(
        ObstacleCollider::new(bevy_deformable::sim::ObstacleShape::HalfSpace {
            normal: Vec3::new(0.0, 2.0, 0.0)
        }),
        Err(ObstacleError::UnnormalizedNormal(_))
    ));
    assert!(ObstacleCollider::cuboid(Vec3::new(1e-9, 1.0, 1.0)).is_err());
    assert!(ObstacleCollider::cuboid(Vec3::new(1e40, 1.0, 1.0)).is_err());
    assert!(ObstacleCollider::ball(1e300).is_err());
    let mut world = SoftWorld::new(WorldSettings::default());
    let placed = ObstacleCollider::ball(1.0)
        .unwrap()
        .with_position(Vec3::new(nan, 0.0, 0.0));
    assert!(matches!(
        world.add_obstacle(placed),
        Err(WorldError::Obstacle(_))
    ));
    let bad = UnitQuaternion::new_unchecked(Quaternion::new(nan, 0.0, 0.0, 0.0));
    assert!(
        world
            .add_obstacle(ObstacleCollider::ball(1.0).unwrap().with_rotation(bad))
            .is_err()
    );
    let h = world
        .add_obstacle(ObstacleCollider::ball(1.0).unwrap())
        .unwrap();
    let o = world.obstacle_mut(h).unwrap();
    assert!(
        o.move_to(
            Vec3::new(f64::INFINITY, 0.0, 0.0),
            UnitQuaternion::identity(),
            DT
        )
        .is_err()
    );
    assert!(
        o.move_to(Vec3::zeros(), UnitQuaternion::identity(), nan)
            .is_err()
    );
    // A refused move leaves the obstacle where it was.
    assert_eq!(o.position(), Vec3::zeros());
}

#[test]
fn builders_refuse_huge_lattices_before_allocating() {
    // Before: this aborted the process with a 3 GB allocation.
    assert!(matches!(
        TetMesh::try_capsule(1e-3, 10.0, 8),
        Err(MeshError::TooManyCells { max, .. }) if max == MAX_LATTICE_CELLS
    ));
    assert!(matches!(
        TetMesh::try_cuboid(Vec3::repeat(1.0), 200),
        Err(MeshError::TooManyCells { .. })
    ));
    assert!(matches!(
        TetMesh::try_sphere(1.0, 1 << 40),
        Err(MeshError::TooManyCells { .. })
    ));
}

#[test]
fn invalid_settings_are_refused_with_the_field_named() {
    type Edit = fn(&mut WorldSettings);
    let cases: [(&str, Edit); 6] = [
        ("substeps", |s| s.substeps = 0),
        ("substeps", |s| s.substeps = 1_000_000),
        ("max_speed", |s| s.max_speed = f64::NAN),
        ("mprgp.max_iterations", |s| s.mprgp.max_iterations = 0),
        ("pd_iterations", |s| s.pd_iterations = 0),
        ("max_depenetration_speed", |s| {
            s.max_depenetration_speed = -1.0
        }),
    ];
    for (field, edit) in cases {
        let mut world = SoftWorld::new(WorldSettings::default());
        let body = world
            .add_body(
                Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 2)),
                MaterialParams::RUBBER,
                Vec3::new(0.0, 1.0, 0.0),
            )
            .unwrap();
        edit(world.settings_mut());
        let before = world.positions(body).unwrap().to_vec();
        match world.step(DT) {
            Err(WorldError::InvalidSetting { what, .. }) => assert_eq!(what, field),
            other => panic!("{field}: {other:?}"),
        }
        assert_eq!(world.positions(body).unwrap(), &before[..]);
    }
}

/// FNV-1a over the bit patterns of every coordinate: stable across Rust releases and platforms
/// with IEEE-754 doubles.
fn hash_positions(world: &SoftWorld) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for body in world.bodies() {
        for p in world.positions(body).unwrap() {
            for c in p.iter() {
                for byte in c.to_bits().to_le_bytes() {
                    hash ^= u64::from(byte);
                    hash = hash.wrapping_mul(0x0100_0000_01b3);
                }
            }
        }
    }
    hash
}

/// The state of a three-body scene after 300 steps. Pinned: any change of the physics, on
/// purpose or not, changes it.
const PINNED_HASH: u64 = 0x929d_ab89_960e_e3c5;

#[test]
fn a_three_body_scene_reaches_its_pinned_state() {
    let mut world = SoftWorld::new(WorldSettings::default());
    world.add_obstacle(floor()).unwrap();
    world
        .add_obstacle(
            ObstacleCollider::ball(0.2)
                .unwrap()
                .with_position(Vec3::new(0.6, 0.2, 0.0)),
        )
        .unwrap();
    let bodies = [
        (
            TetMesh::cuboid(Vec3::repeat(0.15), 3),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 0.3, 0.0),
        ),
        (
            TetMesh::sphere(0.15, 4),
            MaterialParams::JELLY,
            Vec3::new(0.05, 0.8, 0.02),
        ),
        (
            TetMesh::capsule(0.1, 0.15, 4),
            MaterialParams::FLESH,
            Vec3::new(0.6, 0.9, 0.0),
        ),
    ];
    for (mesh, material, at) in bodies {
        world.add_body(Arc::new(mesh), material, at).unwrap();
    }
    for _ in 0..300 {
        assert!(world.step(DT).unwrap().frozen.is_empty());
    }
    let hash = hash_positions(&world);
    assert_eq!(
        hash, PINNED_HASH,
        "the three-body scene's state changed: if the physics changed on purpose, set \
         PINNED_HASH in tests/sim_rest.rs to {hash:#x}; if not, a change broke determinism"
    );
}

/// Before: a cube at nu = 0.4999999 was thrown 13 m up; now the volume term is built for at
/// most nu = 0.49 (`MAX_EFFECTIVE_POISSON_RATIO`).
#[test]
fn a_nearly_incompressible_cube_lands_without_being_thrown() {
    let material = MaterialParams::RUBBER.with_poisson_ratio(0.499_999_9);
    let mesh = TetMesh::try_cuboid(Vec3::repeat(0.25), 4).unwrap();
    let (audits, world) = drop_audited(mesh, material, 0.5, 3.0, Settling::default());
    // Measured: at most 4.8 mJ over half a second (of 400 J of potential energy), from the
    // 10 PD iterations' error on the stiff volume term.
    let rise = largest_rise(&audits, 30, 30);
    assert!(rise <= 1e-2, "rose {rise} J");
    let body = world.bodies().next().unwrap();
    let x = world.positions(body).unwrap();
    assert!(centroid(x).y < 0.3, "centre at {}", centroid(x).y);
    assert!(max_speed(world.velocities(body).unwrap()) < 0.05);
}

/// Before: a stiff, nearly incompressible cube at h = 1/30 s rested for 6 s, then jumped to
/// 1.28 m/s at 9.93 s (and on this test's scene still did until the contact QPs were solved
/// about the inertial prediction: their tolerance had been relative to `||b||`, which the
/// inertia term dominates, and they stopped early). The PD iterations themselves still end far from the
/// implicit step's solution at this stiffness (relative residual 0.2-0.8 at 10 iterations; see
/// the README's caveats), and that error gives short bursts whose size depends on round-off:
/// measured at most 0.08 m/s with the scalar local step, 0.12 m/s with the vectorised one
/// (0.065 and 0.098 m/s at 15 and 20 iterations), each over within four steps. The bounds below
/// sit between those bursts and the 1.28 m/s jump this test was written for, and the cube must
/// not wander.
#[test]
fn a_stiff_cube_at_a_large_step_stays_at_rest() {
    let material = MaterialParams::RUBBER
        .with_youngs_modulus(1e8)
        .with_poisson_ratio(0.49);
    let mut world = SoftWorld::new(WorldSettings::default());
    let body = world
        .add_body(
            Arc::new(TetMesh::try_cuboid(Vec3::repeat(0.25), 4).unwrap()),
            material,
            Vec3::new(0.0, 0.26, 0.0),
        )
        .unwrap();
    world.add_obstacle(floor()).unwrap();
    let dt = 1.0 / 30.0;
    let mut rested_at = Vec3::zeros();
    for step in 0..360 {
        assert!(world.step(dt).unwrap().frozen.is_empty());
        if step == 60 {
            rested_at = centroid(world.positions(body).unwrap());
        }
        if step >= 60 {
            let speed = max_speed(world.velocities(body).unwrap());
            assert!(speed < 0.2, "step {step}: {speed} m/s");
        }
    }
    let drift = (centroid(world.positions(body).unwrap()) - rested_at).norm();
    assert!(drift < 0.01, "the cube wandered {drift} m");
}

/// Before: a jelly cube thrown at a 2 cm wall pushed its interior vertices 13-65 cm through
/// it (only its surface collided, and its surface layer inverted on impact).
#[test]
fn a_jelly_cube_thrown_at_a_thin_wall_keeps_every_vertex_in_front() {
    for speed in [5.0, 10.0] {
        let deepest = thrown_at_wall(MaterialParams::JELLY, speed, 0.01);
        assert!(
            deepest < 2e-3,
            "{speed} m/s: a vertex {deepest} m past the wall's face"
        );
    }
}

/// Jelly and rubber cubes thrown at a 2 mm wall at 20, 30 and 60 m/s (a third, a half and all
/// of the cube's length in one step): no vertex gets past the wall's face. Before re-detection
/// at the iterate was swept from the step's start, the rubber cube put 4 vertices 10-33 mm
/// past it at 30 and 60 m/s: within the iterations they crossed the whole wall, and the
/// contact found where they ended was the back face's, which pushed them on.
#[test]
fn cubes_thrown_at_a_2_mm_wall_at_up_to_60_m_s_stay_in_front_of_it() {
    for material in [MaterialParams::JELLY, MaterialParams::RUBBER] {
        for speed in [20.0, 30.0, 60.0] {
            let deepest = thrown_at_wall(material, speed, 0.001);
            assert!(
                deepest < 1e-3,
                "{speed} m/s: a vertex {deepest} m past the wall's face"
            );
        }
    }
}

/// A 0.4 m cube of `material` thrown at `speed` (m/s), without gravity, at a wall of
/// half-thickness `half` (m) whose face is 0.29 m ahead of it; the farthest any vertex got
/// past the face over 1 s (m).
fn thrown_at_wall(material: MaterialParams, speed: f64, half: f64) -> f64 {
    let mut world = SoftWorld::new(WorldSettings {
        gravity: Vec3::zeros(),
        ..WorldSettings::default()
    });
    let wall = ObstacleCollider::cuboid(Vec3::new(half, 1.0, 1.0))
        .unwrap()
        .with_position(Vec3::new(0.49 + half, 0.0, 0.0));
    world.add_obstacle(wall).unwrap();
    let body = world
        .add_body(
            Arc::new(TetMesh::try_cuboid(Vec3::repeat(0.2), 4).unwrap()),
            material,
            Vec3::zeros(),
        )
        .unwrap();
    for v in world.velocities_mut(body).unwrap() {
        *v = Vec3::new(speed, 0.0, 0.0);
    }
    let mut deepest = f64::NEG_INFINITY;
    for _ in 0..60 {
        assert!(world.step(DT).unwrap().frozen.is_empty());
        let front = world
            .positions(body)
            .unwrap()
            .iter()
            .map(|p| p.x)
            .fold(f64::NEG_INFINITY, f64::max);
        deepest = deepest.max(front - 0.49);
    }
    deepest
}

/// The audit adds up: the energy it reports at the end of each step is the body's energy
/// measured independently after the step, and each step starts where the last one ended, up
/// to the step the body falls asleep in.
#[test]
fn the_energy_audit_adds_up_to_the_measured_energy() {
    let mut world = SoftWorld::new(WorldSettings {
        energy_audit: true,
        ..WorldSettings::default()
    });
    let body = world
        .add_body(
            Arc::new(TetMesh::try_cuboid(Vec3::repeat(0.2), 3).unwrap()),
            MaterialParams::JELLY,
            Vec3::new(0.0, 0.4, 0.0),
        )
        .unwrap();
    world.add_obstacle(floor()).unwrap();
    let mut last_end: Option<f64> = None;
    let mut slept = false;
    for step in 0..120 {
        let Some(audit) = world.step(DT).unwrap().energy else {
            // A sleeping body is not stepped, so not audited: the audit of the step it fell
            // asleep in took its kinetic energy out (`EnergyAudit::sleep`), checked above.
            assert!(world.is_asleep(body).unwrap(), "step {step}: no audit");
            slept = true;
            break;
        };
        let measured = world.kinetic_energy(body).unwrap()
            + world.potential_energy(body).unwrap()
            + world.elastic_energy(body).unwrap();
        let scale = measured.abs().max(1.0);
        assert!(
            (audit.end() - measured).abs() < 1e-9 * scale,
            "step {step}: audit {} J, measured {measured} J",
            audit.end()
        );
        if let Some(end) = last_end {
            assert!((audit.start - end).abs() < 1e-9 * scale, "step {step}");
        }
        last_end = Some(audit.end());
    }
    // Measured: asleep after 88 steps (1.47 s).
    assert!(slept, "the cube falls asleep within 2 s");
}

/// The armadillo (the file's irregular mesh, 1 m tall, rubber at E = 1e5 Pa, nu = 0.4),
/// dropped half its height: with a compression limit on its material (`min_stretch` 0.5,
/// `max_stretch` 100, the default stiffness) no tet is inverted at rest. Measured (release,
/// sleeping off): without the limit 3-6 tets stay inverted from 3 s to 10 s (12 at 3 m tall);
/// with it none from 3 s on (none at 3 m either), at the same cost per step (2.85 against
/// 2.96 s for 10 s at 3 m, one thread).
#[test]
fn an_armadillo_with_a_compression_limit_rests_with_no_inverted_tet() {
    let file = TetMesh::from_tetgen(
        include_str!("../assets/meshes/armadillo_4k.node"),
        include_str!("../assets/meshes/armadillo_4k.ele"),
    )
    .unwrap();
    let (lo, hi) = file.rest_bounds();
    let mesh = file.scaled(Vec3::repeat(1.0 / (hi - lo).max())).unwrap();
    let (lo, hi) = mesh.rest_bounds();
    let mut material = MaterialParams::RUBBER
        .with_youngs_modulus(1e5)
        .with_poisson_ratio(0.4);
    material.strain_limits = Some(bevy_deformable::sim::StrainLimitParams {
        min_stretch: 0.5,
        max_stretch: 100.0,
        ..Default::default()
    });
    let mut world = SoftWorld::new(WorldSettings {
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    });
    world.add_obstacle(floor()).unwrap();
    let h = world
        .add_body(
            Arc::new(mesh),
            material,
            Vec3::new(0.0, -lo.y + 0.5 * (hi - lo).y, 0.0),
        )
        .unwrap();
    for _ in 0..(4.0 / DT) as usize {
        let report = world.step(DT).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
    }
    let report = world.step(DT).unwrap();
    assert_eq!(report.inverted_tets, 0);
    let fastest = max_speed(world.velocities(h).unwrap());
    assert!(fastest < 0.05, "still moving at {fastest} m/s after 4 s");
}
