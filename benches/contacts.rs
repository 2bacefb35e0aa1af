//! Contact benchmarks (Lazarevych et al., section 5):
//!
//! - the velocity-level contact LCP of a static pile (twenty soft bodies settled in a bucket)
//!   and of a dynamic scene (balls breaking a pyramid of soft skittles without gravity), solved
//!   region by region and as one monolithic problem, on the same contacts of the same steps;
//! - the speed-up of the separated solve from a second thread;
//! - the soft-soft broadphase and narrowphase per step against surface triangle count;
//! - with `--features avian`: the per-step cost of the avian coupling's own systems (mirroring
//!   100 dynamic avian colliders near 10 soft bodies as obstacles with their mass properties,
//!   and pushing the soft bodies' velocity changes back), beside the whole fixed step's.
//!
//! `cargo bench --bench contacts [--features avian]` prints tables and writes
//! `target/bench/contacts.json`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use bevy_deformable::sim::contact::{
    BodyBvh, ContactLcp, LcpSettings, SoftSurface, SurfaceShape, detect_edge_contacts,
    detect_soft_contacts, fit_edge_bvh, fit_surface_bvh,
};
use bevy_deformable::sim::{
    MaterialParams, ObstacleCollider, SoftWorld, TetMesh, Vec3, WorldSettings,
};

const DT: f64 = 1.0 / 60.0;

/// Mean solve time (ms) of `lcp` as it is partitioned, over `repeats` solves.
fn solve_ms(lcp: &mut ContactLcp, settings: &LcpSettings, parallel: bool, repeats: usize) -> f64 {
    let start = Instant::now();
    for _ in 0..repeats {
        std::hint::black_box(lcp.solve(settings, parallel));
    }
    start.elapsed().as_secs_f64() * 1e3 / repeats as f64
}

/// Separated and monolithic LCP times (ms per step) over the recorded problems.
struct LcpComparison {
    regions: f64,
    contacts: f64,
    separated: f64,
    monolithic: f64,
}

fn compare(problems: &mut [ContactLcp], settings: &LcpSettings) -> LcpComparison {
    let (mut regions, mut contacts, mut separated, mut monolithic) = (0.0, 0.0, 0.0, 0.0);
    for lcp in problems.iter_mut() {
        lcp.repartition(true);
        regions += lcp.region_count() as f64;
        contacts += lcp.len() as f64;
        separated += solve_ms(lcp, settings, false, 5);
        lcp.repartition(false);
        monolithic += solve_ms(lcp, settings, false, 5);
    }
    let n = problems.len().max(1) as f64;
    LcpComparison {
        regions: regions / n,
        contacts: contacts / n,
        separated: separated / n,
        monolithic: monolithic / n,
    }
}

/// Twenty bodies of mixed sizes poured into a bucket and left to settle; the LCPs of the last
/// steps.
fn static_pile() -> Vec<ContactLcp> {
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .expect("valid obstacle");
    let wall = 0.45;
    for (normal, offset) in [
        (Vec3::x(), Vec3::new(-wall, 0.0, 0.0)),
        (-Vec3::x(), Vec3::new(wall, 0.0, 0.0)),
        (Vec3::z(), Vec3::new(0.0, 0.0, -wall)),
        (-Vec3::z(), Vec3::new(0.0, 0.0, wall)),
    ] {
        world
            .add_obstacle(
                ObstacleCollider::halfspace(normal)
                    .unwrap()
                    .with_position(offset),
            )
            .expect("valid obstacle");
    }
    for i in 0..20 {
        let (col, layer) = (i % 4, i / 4);
        let size = 0.08 + 0.03 * ((i * 7) % 3) as f64;
        let mesh = if i % 2 == 0 {
            TetMesh::cuboid(Vec3::repeat(size), 3)
        } else {
            TetMesh::sphere(size, 4)
        };
        let at = Vec3::new(
            -0.25 + 0.17 * col as f64 + 0.01 * layer as f64,
            0.2 + 0.3 * layer as f64,
            -0.1 + 0.2 * ((i / 2) % 2) as f64,
        );
        world
            .add_body(Arc::new(mesh), MaterialParams::RUBBER, at)
            .unwrap();
    }
    let mut problems = Vec::new();
    for step in 0..300 {
        world.step(DT).unwrap();
        if step >= 280 {
            problems.push(world.contact_lcp().clone());
        }
    }
    problems
}

/// Balls thrown at a pyramid of ten soft skittles, no gravity; the LCPs of the steps with the
/// most contacts.
fn dynamic_skittles() -> Vec<ContactLcp> {
    let settings = WorldSettings {
        gravity: Vec3::zeros(),
        ..WorldSettings::default()
    };
    let mut world = SoftWorld::new(settings);
    let skittle = Arc::new(TetMesh::capsule(0.05, 0.08, 4));
    let mut row_start = 0.0;
    for row in 0..4 {
        for k in 0..=row {
            let at = Vec3::new(row_start, 0.0, (k as f64 - row as f64 / 2.0) * 0.105);
            world
                .add_body(skittle.clone(), MaterialParams::RUBBER, at)
                .unwrap();
        }
        row_start += 0.095;
    }
    let ball = Arc::new(TetMesh::sphere(0.07, 4));
    for (i, z) in [-0.06, 0.07].into_iter().enumerate() {
        let b = world
            .add_body(
                ball.clone(),
                MaterialParams::STIFF_FOAM.with_density(2000.0),
                Vec3::new(-0.5 - 0.2 * i as f64, 0.0, z),
            )
            .unwrap();
        for v in world.velocities_mut(b).unwrap() {
            *v = Vec3::new(4.0, 0.0, 0.0);
        }
    }
    let mut problems: Vec<ContactLcp> = Vec::new();
    for _ in 0..90 {
        world.step(DT).unwrap();
        if !world.contact_lcp().is_empty() {
            problems.push(world.contact_lcp().clone());
        }
    }
    problems.sort_by_key(|p| std::cmp::Reverse(p.len()));
    problems.truncate(20);
    problems
}

/// Broadphase plus narrowphase (ms) of two deformed spheres of `resolution` per step: the
/// vertex and triangle trees refitted, vertex-triangle contacts both ways, and with `edges_on` the
/// edge trees refitted and edge-edge contacts found too (`WorldSettings::edge_contacts`).
fn broadphase(resolution: usize, edges_on: bool) -> (usize, f64) {
    let mesh = TetMesh::sphere(0.3, resolution);
    let a: Vec<Vec3> = mesh
        .rest_positions()
        .iter()
        .map(|p| p + Vec3::new(0.02 * (7.0 * p.y).sin(), 0.0, 0.0))
        .collect();
    let b: Vec<Vec3> = mesh
        .rest_positions()
        .iter()
        .map(|p| p + Vec3::new(0.0, 0.59, 0.0))
        .collect();
    let moved_a: Vec<Vec3> = a.iter().map(|p| p + Vec3::new(0.0, 0.01, 0.0)).collect();
    let (mut bvh_a, mut bvh_b) = (BodyBvh::default(), BodyBvh::default());
    let (mut scratch, mut pairs, mut out, mut edges) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let shape = SurfaceShape::Tet(&mesh);
    let mut run = || {
        fit_surface_bvh(&mut bvh_a, shape, &a, &moved_a, 0.01, &mut scratch);
        fit_surface_bvh(&mut bvh_b, shape, &b, &b, 0.01, &mut scratch);
        if edges_on {
            fit_edge_bvh(&mut bvh_a, shape, &a, &moved_a, 0.01);
            fit_edge_bvh(&mut bvh_b, shape, &b, &b, 0.01);
        }
        out.clear();
        edges.clear();
        let sa = SoftSurface {
            body: 0,
            shape,
            x_start: &a,
            x_end: &moved_a,
            x_reference: &a,
            bvh: &bvh_a,
        };
        let sb = SoftSurface {
            body: 1,
            shape,
            x_start: &b,
            x_end: &b,
            x_reference: &b,
            bvh: &bvh_b,
        };
        detect_soft_contacts(&sa, &sb, 0.01, 0.05, &mut pairs, &mut out);
        detect_soft_contacts(&sb, &sa, 0.01, 0.05, &mut pairs, &mut out);
        if edges_on {
            detect_edge_contacts(&sa, &sb, 0.01, false, &mut pairs, &mut edges);
        }
    };
    run();
    let repeats = 50;
    let start = Instant::now();
    for _ in 0..repeats {
        run();
    }
    let ms = start.elapsed().as_secs_f64() * 1e3 / repeats as f64;
    (2 * mesh.surface_triangles().len(), ms)
}

fn main() {
    let settings = LcpSettings::default();
    let mut pile = static_pile();
    let mut skittles = dynamic_skittles();
    let s = compare(&mut pile, &settings);
    let d = compare(&mut skittles, &settings);

    // Thread speed-up of the separated solve on the pile's contacts.
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    let timed = |threads: usize, problems: &mut [ContactLcp]| {
        pool(threads).install(|| {
            problems
                .iter_mut()
                .map(|lcp| {
                    lcp.repartition(true);
                    solve_ms(lcp, &settings, true, 10)
                })
                .sum::<f64>()
        })
    };
    let one = timed(1, &mut pile);
    let two = timed(2, &mut pile);

    println!("contact LCP per step, separated regions vs one monolithic problem (ms, 1 thread)");
    println!("| scene | contacts | regions | separated | monolithic | speed-up |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (name, c) in [("static pile", &s), ("dynamic skittles", &d)] {
        println!(
            "| {name} | {:.0} | {:.0} | {:.3} | {:.3} | {:.1}x |",
            c.contacts,
            c.regions,
            c.separated,
            c.monolithic,
            c.monolithic / c.separated
        );
    }
    println!(
        "separated solve of the pile: 1 thread {one:.3} ms, 2 threads {two:.3} ms ({:.2}x)",
        one / two
    );

    println!("\nsoft-soft broadphase + narrowphase per step (two spheres, both directions)");
    println!("| surface triangles | ms (default: with edge-edge contacts) | ms without them |");
    println!("| ---: | ---: | ---: |");
    let mut rows = Vec::new();
    for res in [4, 8, 12, 16] {
        let (triangles, ms) = broadphase(res, true);
        let (_, ms_vertex_only) = broadphase(res, false);
        println!("| {triangles} | {ms:.3} | {ms_vertex_only:.3} |");
        rows.push((triangles, ms, ms_vertex_only));
    }

    #[cfg(feature = "avian")]
    let coupling = {
        let c = avian_coupling::measure();
        println!(
            "\navian coupling per fixed step ({} dynamic colliders, {} soft bodies, {} touching, {} steps)",
            c.colliders, c.soft_bodies, c.touching, c.steps
        );
        println!(
            "| mirror + couple (ms) | push back (ms) | coupling total (ms) | whole update (ms) |"
        );
        println!("| ---: | ---: | ---: | ---: |");
        println!(
            "| {:.4} | {:.4} | {:.4} | {:.2} |",
            c.mirror_ms,
            c.push_ms,
            c.mirror_ms + c.push_ms,
            c.update_ms
        );
        format!(
            ", \"avian_coupling\": {{\"colliders\": {}, \"soft_bodies\": {}, \"touching\": {}, \"ms_mirror\": {:.6}, \"ms_push_back\": {:.6}, \"ms_update\": {:.4}}}",
            c.colliders, c.soft_bodies, c.touching, c.mirror_ms, c.push_ms, c.update_ms
        )
    };
    #[cfg(not(feature = "avian"))]
    let coupling = String::new();

    let mut json = String::new();
    let scene = |c: &LcpComparison| {
        format!(
            "{{\"regions\": {:.2}, \"contacts\": {:.2}, \"ms_separated\": {:.6}, \"ms_monolithic\": {:.6}, \"speedup_region_vs_monolithic\": {:.4}}}",
            c.regions,
            c.contacts,
            c.separated,
            c.monolithic,
            c.monolithic / c.separated
        )
    };
    let _ = writeln!(
        json,
        "{{\"static_pile\": {}, \"dynamic_skittles\": {}, \"speedup_2_threads\": {:.4}, \"broadphase\": [{}]{coupling}}}",
        scene(&s),
        scene(&d),
        one / two,
        rows.iter()
            .map(|(t, ms, without)| format!(
                "{{\"triangles\": {t}, \"ms\": {ms:.6}, \"ms_without_edge_contacts\": {without:.6}}}"
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("contacts.json"), json).unwrap();
    println!("\nwrote {}", dir.join("contacts.json").display());
}

/// The avian coupling's cost in a headless app: avian and the deformable plugin, one fixed
/// step per update, the avian plugin's system sets timed by marker systems around them (the
/// fixed schedule single-threaded, so nothing else runs in between).
#[cfg(feature = "avian")]
mod avian_coupling {
    use std::time::{Duration, Instant};

    use avian3d::prelude::*;
    use bevy::asset::AssetPlugin;
    use bevy::ecs::schedule::SingleThreadedExecutor;
    use bevy::mesh::MeshPlugin;
    use bevy::prelude::*;
    use bevy::time::TimeUpdateStrategy;
    use bevy::transform::TransformPlugin;
    use bevy_deformable::prelude::*;
    use bevy_deformable::sim;

    /// What [`measure`] found (ms are means per fixed step).
    pub struct CouplingCost {
        pub colliders: usize,
        pub soft_bodies: usize,
        pub touching: usize,
        pub steps: usize,
        pub mirror_ms: f64,
        pub push_ms: f64,
        pub update_ms: f64,
    }

    #[derive(Resource, Default)]
    struct Clock {
        started: Option<Instant>,
        mirror: Duration,
        push: Duration,
    }

    fn start(mut clock: ResMut<Clock>) {
        clock.started = Some(Instant::now());
    }

    fn end_mirror(mut clock: ResMut<Clock>) {
        if let Some(t) = clock.started.take() {
            clock.mirror += t.elapsed();
        }
    }

    fn end_push(mut clock: ResMut<Clock>) {
        if let Some(t) = clock.started.take() {
            clock.push += t.elapsed();
        }
    }

    pub fn measure() -> CouplingCost {
        let mut app = App::new();
        app.add_plugins((
            MinimalPlugins,
            AssetPlugin::default(),
            MeshPlugin,
            TransformPlugin,
            PhysicsPlugins::default(),
            DeformablePlugin::default(),
            DeformableAvianPlugin::default(),
        ));
        app.insert_resource(TimeUpdateStrategy::FixedTimesteps(1));
        app.init_resource::<Clock>();
        app.edit_schedule(FixedUpdate, |s| {
            s.set_executor(SingleThreadedExecutor::new());
        });
        app.add_systems(
            FixedUpdate,
            (
                start.before(DeformableAvianSystems::Mirror),
                end_mirror
                    .after(DeformableAvianSystems::Mirror)
                    .before(DeformableSystems::Sync),
                start
                    .after(DeformableSystems::Writeback)
                    .before(DeformableAvianSystems::PushBack),
                end_push.after(DeformableAvianSystems::PushBack),
            ),
        );
        app.finish();
        app.cleanup();
        let world = app.world_mut();
        world.spawn((
            RigidBody::Static,
            Collider::half_space(Vec3::Y),
            Transform::default(),
        ));
        // Ten soft cubes in a row on the floor, a crate on each; ninety more crates on the
        // floor around them, within a metre.
        let soft_bodies = 10;
        for k in 0..soft_bodies {
            let x = -2.25 + 0.5 * k as f32;
            world.spawn((
                DeformableBody::from(sim::TetMesh::cuboid(sim::Vec3::repeat(0.1), 3)),
                SoftMaterial::RUBBER,
                Transform::from_xyz(x, 0.1, 0.0),
            ));
            world.spawn((
                RigidBody::Dynamic,
                Collider::cuboid(0.15, 0.15, 0.15),
                Transform::from_xyz(x, 0.28, 0.0),
            ));
        }
        let mut colliders = soft_bodies;
        for i in 0..90 {
            let (x, z) = (
                -2.4 + 0.26 * (i % 18) as f32,
                [-0.7, -0.45, 0.45, 0.7, 0.95][i / 18],
            );
            world.spawn((
                RigidBody::Dynamic,
                Collider::cuboid(0.15, 0.15, 0.15),
                Transform::from_xyz(x, 0.076, z),
            ));
            colliders += 1;
        }
        for _ in 0..60 {
            app.update();
        }
        *app.world_mut().resource_mut::<Clock>() = Clock::default();
        let steps = 180;
        let t = Instant::now();
        for _ in 0..steps {
            app.update();
        }
        let update_ms = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
        let touching = app
            .world_mut()
            .query::<&RigidBodyImpulse>()
            .iter(app.world())
            .filter(|i| i.contacts > 0)
            .count();
        let clock = app.world().resource::<Clock>();
        CouplingCost {
            colliders,
            soft_bodies,
            touching,
            steps,
            mirror_ms: clock.mirror.as_secs_f64() * 1e3 / steps as f64,
            push_ms: clock.push.as_secs_f64() * 1e3 / steps as f64,
            update_ms,
        }
    }
}
