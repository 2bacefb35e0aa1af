//! Micro-benchmarks of the kernels inside one PD step: signed SVD, the local step (scalar and
//! cold; vectorised and warm-started, also per tet per thread), the global
//! matrix-vector product and the prefactored Cholesky solve (in f64, and the global step's
//! correction solve through the factor rounded to f32), for lattice cubes of several sizes;
//! the Cholesky factor under AMD and under nested dissection;
//! the soft-soft broadphase (BVH refit and candidate pairs) against surface triangle count;
//! and the skinned write-back of a soft region (per frame, per 1,000 written vertices).
//!
//! `cargo bench --bench kernels` prints a table (medians over repeated runs); `-- skin` prints
//! only the skinned write-back's.

use std::hint::black_box;
use std::time::Instant;

use bevy_deformable::sim::contact::{BodyBvh, candidate_pairs};
use bevy_deformable::sim::kernels::volume_preserving_stretches;
use bevy_deformable::sim::pd::{PdSetup, PdSystem, StartStretches, WarmFrames};
use bevy_deformable::sim::polar::svd3;
use bevy_deformable::sim::qp::SpdOperator;
use bevy_deformable::sim::skin::{Affine, SkinDrive, SkinWeights, SkinnedWriteback, region_cage};
use bevy_deformable::sim::sparse::SparseCholesky;
use bevy_deformable::sim::{Mat3, MaterialParams, TetMesh, Vec3};

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
            material: &MaterialParams::RUBBER,
            dt: 1.0 / 60.0,
            pinned: &[],
            attach_stiffness: &[],
            spring: None,
        },
    )
    .expect("factorizable")
}

fn main() {
    // `cargo bench --bench kernels -- skin` runs only the skinned write-back table.
    if std::env::args().skip(1).any(|a| a == "skin") {
        skinned_writeback_table();
        return;
    }
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
        "\n{:>8} {:>8} {:>13} {:>13} {:>16} {:>13} {:>12} {:>12} {:>14} {:>14}",
        "verts",
        "tets",
        "local ms",
        "warm ms",
        "warm ns/tet/thr",
        "stretches ms",
        "matvec ms",
        "solve ms",
        "f32 solve ms",
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
        // The global step's solve: through the factor rounded to f32, on two threads from
        // 4,096 vertices (split along the elimination tree).
        let correction = median_ns(
            || {
                rhs.copy_from_slice(&x);
                pd.solve_correction_in_place(&mut rhs);
            },
            reps * 2,
        ) / 1e6;
        println!(
            "{:>8} {:>8} {:>13.3} {:>13.3} {:>16.0} {:>13.3} {:>12.3} {:>12.3} {:>14.3} {:>14.1}",
            mesh.vertex_count(),
            mesh.tet_count(),
            local,
            local_warm,
            ns_per_tet,
            stretches,
            matvec,
            solve,
            correction,
            build_ms
        );
    }
    ordering_table();
    broadphase_table();
    skinned_writeback_table();
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

/// A closed UV sphere of radius 1, `rings` x `segments`, and its triangles.
fn uv_sphere(rings: usize, segments: usize) -> (Vec<Vec3>, Vec<[u32; 3]>) {
    let mut p = vec![Vec3::new(0.0, 1.0, 0.0)];
    for r in 1..rings {
        let theta = std::f64::consts::PI * r as f64 / rings as f64;
        for s in 0..segments {
            let phi = std::f64::consts::TAU * s as f64 / segments as f64;
            p.push(Vec3::new(
                theta.sin() * phi.cos(),
                theta.cos(),
                theta.sin() * phi.sin(),
            ));
        }
    }
    p.push(Vec3::new(0.0, -1.0, 0.0));
    let ring = |r: usize, s: usize| (1 + (r - 1) * segments + s % segments) as u32;
    let south = (p.len() - 1) as u32;
    let mut t = Vec::new();
    for s in 0..segments {
        t.push([0, ring(1, s + 1), ring(1, s)]);
        t.push([south, ring(rings - 1, s), ring(rings - 1, s + 1)]);
    }
    for r in 1..rings - 1 {
        for s in 0..segments {
            t.push([ring(r, s), ring(r, s + 1), ring(r + 1, s + 1)]);
            t.push([ring(r, s), ring(r + 1, s + 1), ring(r + 1, s)]);
        }
    }
    (p, t)
}

/// A sphere skinned to two joints (blended across the equator) whose lower half is a soft
/// region in a 6-cell cage: the per-step displacement pass and the per-frame write-back
/// (blended skinning matrix, its inverse, the bind-space position, the turned normal).
fn skinned_writeback_table() {
    println!(
        "\n{:>10} {:>10} {:>14} {:>16} {:>16} {:>14}",
        "vertices", "written", "write ms", "ms per 1000", "no normals ms", "displace ms"
    );
    for (rings, segments) in [(24, 48), (48, 96), (96, 192)] {
        let (p, t) = uv_sphere(rings, segments);
        let skin: Vec<SkinWeights> = p
            .iter()
            .map(|q| {
                let b = ((q.y + 0.3) / 0.6).clamp(0.0, 1.0) as f32;
                SkinWeights {
                    joints: [0, 1, 0, 0],
                    weights: [1.0 - b, b, 0.0, 0.0],
                }
            })
            .collect();
        let blend: Vec<f64> = p.iter().map(|q| (-q.y / 0.4).clamp(0.0, 1.0)).collect();
        let region: Vec<bool> = blend.iter().map(|&b| b > 0.0).collect();
        let normals: Vec<Vec3> = p.iter().map(|q| q.normalize()).collect();
        let cage = region_cage(&p, &t, &region, 6, 2.0).expect("a cage");
        let mut writeback =
            SkinnedWriteback::new(&p, Some(&normals), &t, &skin, 2, &blend, &cage).expect("valid");
        let drive = SkinDrive::new(cage.rest_positions(), &p, &skin, 2).expect("valid");
        let (s, c) = 0.3f64.sin_cos();
        let joints = [
            Affine {
                linear: Mat3::identity(),
                translation: Vec3::new(1.0, 0.5, 0.0),
            },
            Affine {
                linear: Mat3::new(c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0),
                translation: Vec3::new(1.0, 0.6, 0.1),
            },
        ];
        let mut targets = vec![Vec3::zeros(); cage.vertex_count()];
        drive.targets(&joints, &mut targets);
        let x: Vec<Vec3> = targets
            .iter()
            .map(|q| q + 0.01 * Vec3::new(q.y.sin(), q.z.cos(), q.x.sin()))
            .collect();
        let mut d = vec![Vec3::zeros(); writeback.len()];
        let displace = median_ns(
            || writeback.displacements(black_box(&x), &targets, &mut d),
            50,
        ) / 1e6;
        let mut positions: Vec<[f32; 3]> = p
            .iter()
            .map(|q| [q.x as f32, q.y as f32, q.z as f32])
            .collect();
        let mut mesh_normals = positions.clone();
        let write = median_ns(
            || {
                writeback.write(
                    black_box(&joints),
                    &d,
                    &mut positions,
                    Some(&mut mesh_normals),
                )
            },
            50,
        ) / 1e6;
        let positions_only = median_ns(
            || writeback.write(black_box(&joints), &d, &mut positions, None),
            50,
        ) / 1e6;
        println!(
            "{:>10} {:>10} {:>14.4} {:>16.4} {:>16.4} {:>14.4}",
            p.len(),
            writeback.len(),
            write,
            write * 1000.0 / writeback.len() as f64,
            positions_only,
            displace
        );
    }
}
