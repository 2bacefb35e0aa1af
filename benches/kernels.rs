//! Micro-benchmarks of the kernels inside one PD step: signed SVD, the local step (scalar and
//! cold; vectorised and warm-started, also per tet per thread), the global
//! matrix-vector product and the prefactored Cholesky solve, for lattice cubes of several sizes;
//! the Cholesky factor under AMD and under nested dissection;
//! and the soft-soft broadphase (BVH refit and candidate pairs) against surface triangle count.
//!
//! `cargo bench --bench kernels` prints a table (medians over repeated runs).

use std::hint::black_box;
use std::time::Instant;

use bevy_deformable::sim::contact::{BodyBvh, candidate_pairs};
use bevy_deformable::sim::local_step::{StartStretches, WarmFrames};
use bevy_deformable::sim::pd::{PdSetup, PdSystem, volume_preserving_stretches};
use bevy_deformable::sim::polar::svd3;
use bevy_deformable::sim::qp::SpdOperator;
use bevy_deformable::sim::sparse::SparseCholesky;
use bevy_deformable::sim::{Mat3, SoftMaterial, TetMesh, Vec3};

fn median_ns(mut f: impl FnMut(), repeats: usize) -> f64 {
    let mut t: Vec<f64> = (0..repeats)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e9
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// The PD system of a free rubber body at 60 Hz.
fn rubber_system(mesh: &TetMesh) -> PdSystem {
    PdSystem::new(
        mesh,
        PdSetup {
            material: &SoftMaterial::RUBBER,
            dt: 1.0 / 60.0,
            pinned: &[],
            attach_stiffness: &[],
            spring: None,
        },
    )
    .expect("factorizable")
}

fn main() {
    // Signed SVD on near-rotations (typical PD input).
    let mats: Vec<Mat3> = (0..4096)
        .map(|i| {
            let a = i as f64 * 0.37;
            let r = nalgebra::Rotation3::from_euler_angles(a.sin(), a.cos(), 0.5 * a).into_inner();
            r * Mat3::from_diagonal(&Vec3::new(1.0 + 0.1 * a.sin(), 0.95, 1.02))
        })
        .collect();
    let svd_ns = median_ns(
        || {
            for m in &mats {
                black_box(svd3(black_box(m)));
            }
        },
        50,
    ) / mats.len() as f64;
    let nalgebra_ns = median_ns(
        || {
            for m in &mats {
                black_box(black_box(m).svd(true, true));
            }
        },
        50,
    ) / mats.len() as f64;
    let sigmas: Vec<Vec3> = mats.iter().map(|m| svd3(m).sigma).collect();
    let vol_ns = median_ns(
        || {
            for s in &sigmas {
                black_box(volume_preserving_stretches(black_box(*s)));
            }
        },
        50,
    ) / sigmas.len() as f64;
    println!(
        "\nsigned SVD 3x3: {svd_ns:.0} ns (nalgebra svd: {nalgebra_ns:.0} ns); volume projection: {vol_ns:.0} ns"
    );
    println!(
        "\n{:>8} {:>8} {:>13} {:>13} {:>16} {:>13} {:>12} {:>12} {:>14}",
        "verts",
        "tets",
        "local ms",
        "warm ms",
        "warm ns/tet/thr",
        "stretches ms",
        "matvec ms",
        "solve ms",
        "factor ms"
    );
    let threads = rayon::current_num_threads() as f64;
    for res in [9usize, 21, 33] {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.5), res);
        let t = Instant::now();
        let mut pd = rubber_system(&mesh);
        let build_ms = t.elapsed().as_secs_f64() * 1e3;
        let x: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| p + 0.01 * Vec3::new((p.y * 9.0).sin(), (p.z * 7.0).cos(), p.x))
            .collect();
        let mut contributions = vec![[Vec3::zeros(); 4]; mesh.tet_count()];
        let reps = if res > 25 { 5 } else { 20 };
        let mut frames = WarmFrames::default();
        frames.resize(mesh.tet_count());
        // The strain-rate damping's reference shapes (rubber has it), timed below.
        let mut start = StartStretches::default();
        pd.start_stretches(&x, &frames, &mut start);
        let local = median_ns(
            || pd.local_step(black_box(&x), &start, &mut contributions),
            reps,
        ) / 1e6;
        // Alternating between two nearby states, as consecutive PD iterations do, so that the
        // warm start has work left (on one state repeated it would be exact).
        let x_next: Vec<Vec3> = x
            .iter()
            .map(|p| p + 0.002 * Vec3::new((p.z * 5.0).cos(), p.x, (p.y * 3.0).sin()))
            .collect();
        let mut flip = false;
        let local_warm = median_ns(
            || {
                flip = !flip;
                let state = if flip { &x } else { &x_next };
                pd.local_step_warm(black_box(state), &start, &mut contributions, &mut frames)
            },
            reps,
        ) / 1e6;
        let ns_per_tet = local_warm * 1e6 * threads / mesh.tet_count() as f64;
        // Once per step, warm-started from the frames of the last local step as in a step.
        let stretches = median_ns(
            || pd.start_stretches(black_box(&x), &frames, &mut start),
            reps,
        ) / 1e6;
        let mut out = vec![Vec3::zeros(); x.len()];
        let matvec = median_ns(|| pd.apply(black_box(&x), &mut out), reps) / 1e6;
        let mut rhs = x.clone();
        let solve = median_ns(
            || {
                rhs.copy_from_slice(&x);
                pd.solve_in_place(&mut rhs);
            },
            reps,
        ) / 1e6;
        println!(
            "{:>8} {:>8} {:>13.3} {:>13.3} {:>16.0} {:>13.3} {:>12.3} {:>12.3} {:>14.1}",
            mesh.vertex_count(),
            mesh.tet_count(),
            local,
            local_warm,
            ns_per_tet,
            stretches,
            matvec,
            solve,
            build_ms
        );
    }
    ordering_table();
    broadphase_table();
}

/// The sparse Cholesky of the PD matrix under faer's AMD and under the geometric nested
/// dissection: factor entries, numeric factorization and a three-right-hand-side solve.
fn ordering_table() {
    println!(
        "\n{:>8} {:>14} {:>14} {:>12} {:>12} {:>12} {:>12}  kept",
        "verts", "AMD nnz(L)", "ND nnz(L)", "AMD fact ms", "ND fact ms", "AMD solve", "ND solve"
    );
    for res in [9usize, 21, 33] {
        let mesh = TetMesh::cuboid(Vec3::repeat(0.5), res);
        let pd = rubber_system(&mesh);
        let matrix = pd.matrix();
        let reps = if res > 25 { 3 } else { 10 };
        let measure = |mut chol: SparseCholesky| {
            let factor = median_ns(|| chol.factorize(matrix).expect("SPD"), reps) / 1e6;
            let x: Vec<Vec3> = mesh.rest_positions().to_vec();
            let mut rhs = x.clone();
            let solve = median_ns(
                || {
                    rhs.copy_from_slice(&x);
                    chol.solve_in_place(&mut rhs);
                },
                reps * 2,
            ) / 1e6;
            (chol.factor_nnz(), factor, solve, chol.ordering())
        };
        let amd = measure(SparseCholesky::analyse(matrix).expect("analysable"));
        let nd = measure(
            SparseCholesky::analyse_with_coordinates(matrix, mesh.rest_positions())
                .expect("analysable"),
        );
        println!(
            "{:>8} {:>14} {:>14} {:>12.1} {:>12.1} {:>12.3} {:>12.3}  {:?}",
            mesh.vertex_count(),
            amd.0,
            nd.0,
            amd.1,
            nd.1,
            amd.2,
            nd.2,
            nd.3
        );
    }
}

/// Two lattice spheres pressed into each other: refit both bodies' BVHs to the deformed
/// positions, then collect the (proxy, triangle) candidate pairs both ways.
fn broadphase_table() {
    println!(
        "\n{:>10} {:>10} {:>12} {:>12} {:>10}",
        "triangles", "proxies", "refit ms", "pairs ms", "pairs"
    );
    for res in [8usize, 16, 32] {
        let mesh = TetMesh::sphere(0.5, res);
        let surface = mesh.surface_vertices();
        let triangles = mesh.surface_triangles();
        let wobble =
            |p: &Vec3, phase: f64| p + 0.02 * Vec3::new((9.0 * p.y + phase).sin(), 0.0, 0.0);
        let a: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| wobble(p, 0.0))
            .collect();
        let b: Vec<Vec3> = mesh
            .rest_positions()
            .iter()
            .map(|p| wobble(p, 1.0) + Vec3::new(0.9, 0.0, 0.0))
            .collect();
        let proxies =
            |x: &[Vec3]| -> Vec<Vec3> { surface.iter().map(|&v| x[v as usize]).collect() };
        let (pa, pb) = (proxies(&a), proxies(&b));
        let (mut bvh_a, mut bvh_b) = (BodyBvh::default(), BodyBvh::default());
        bvh_a.update(&pa, &a, triangles, 0.01);
        bvh_b.update(&pb, &b, triangles, 0.01);
        let reps = 20;
        let refit = median_ns(
            || {
                bvh_a.update(black_box(&pa), &a, triangles, 0.01);
                bvh_b.update(black_box(&pb), &b, triangles, 0.01);
            },
            reps,
        ) / 1e6;
        let mut pairs = Vec::new();
        let mut count = 0;
        let find = median_ns(
            || {
                candidate_pairs(&bvh_a, &bvh_b, &mut pairs);
                count = pairs.len();
                candidate_pairs(&bvh_b, &bvh_a, &mut pairs);
                count += pairs.len();
            },
            reps,
        ) / 1e6;
        println!(
            "{:>10} {:>10} {:>12.3} {:>12.3} {:>10}",
            2 * triangles.len(),
            2 * surface.len(),
            refit,
            find,
            count
        );
    }
}
