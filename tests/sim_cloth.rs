//! Cloth stepped on its own (`sim::cloth`): a sheet hanging from two corners comes to rest
//! within its strain limit (both in-plane models) with its pins in place, its weight on them
//! and its energy never growing at rest; area limits hold a soft sheet's triangles; a stiffer cloth bends less
//! under its weight; a pre-bent cloth keeps its rest shape with the rest-curvature model; wind
//! blows a flag downwind, the same on one thread and two, and with extrapolated iterations it
//! streams smooth where ten plain ones crumple it; bad input is refused.

use std::sync::Arc;

use bevy_deformable::sim::Vec3;
use bevy_deformable::sim::cloth::{
    BendingModel, ClothError, ClothMaterial, ClothMesh, ClothSystem, FLAG_CHEBYSHEV_RHO,
    FLAG_ITERATIONS, InPlaneModel,
};

const DT: f64 = 1.0 / 60.0;
const GRAVITY: Vec3 = Vec3::new(0.0, -9.81, 0.0);

/// The vertices of `mesh` at its rest position's extreme along `axis` (largest if `high`).
fn edge(mesh: &ClothMesh, axis: usize, high: bool) -> Vec<usize> {
    let p = mesh.rest_positions();
    let key = |v: &Vec3| if high { v[axis] } else { -v[axis] };
    let extreme = p.iter().map(key).fold(f64::NEG_INFINITY, f64::max);
    (0..p.len())
        .filter(|&v| (key(&p[v]) - extreme).abs() < 1e-12)
        .collect()
}

fn pin_all(cloth: &mut ClothSystem, vertices: &[usize]) {
    for &v in vertices {
        let at = cloth.positions()[v];
        cloth.pin(v, Some(at)).unwrap();
    }
}

/// Kinetic plus gravitational plus elastic energy (J).
fn energy(cloth: &ClothSystem) -> f64 {
    let kinetic: f64 = cloth
        .velocities()
        .iter()
        .zip(cloth.masses())
        .map(|(v, m)| 0.5 * m * v.norm_squared())
        .sum();
    let potential: f64 = cloth
        .positions()
        .iter()
        .zip(cloth.masses())
        .map(|(p, m)| -m * GRAVITY.dot(p))
        .sum();
    kinetic + potential + cloth.elastic_energy()
}

#[test]
fn a_sheet_hung_by_two_corners_comes_to_rest_within_its_strain_limit() {
    for in_plane in [InPlaneModel::AsRigidAsPossible, InPlaneModel::MassSpring] {
        hang_by_two_corners(ClothMaterial {
            in_plane,
            ..ClothMaterial::COTTON
        });
    }
}

fn hang_by_two_corners(material: ClothMaterial) {
    let mesh = Arc::new(ClothMesh::rectangle(1.0, 1.0, 12, 12).unwrap());
    let mut cloth = ClothSystem::new(mesh.clone(), material, DT).unwrap();
    // The two corners of the edge at the largest z.
    let corners: Vec<usize> = edge(&mesh, 2, true)
        .into_iter()
        .filter(|&v| mesh.rest_positions()[v].x.abs() > 0.49)
        .collect();
    assert_eq!(corners.len(), 2);
    pin_all(&mut cloth, &corners);
    let targets: Vec<Vec3> = corners.iter().map(|&v| cloth.positions()[v]).collect();
    let mut energies = Vec::new();
    for step in 0..600 {
        cloth.step(GRAVITY, Vec3::zeros()).unwrap();
        for (&v, t) in corners.iter().zip(&targets) {
            assert_eq!(cloth.positions()[v], *t, "pin {v} moved at step {step}");
        }
        if step >= 480 {
            energies.push(energy(&cloth));
        }
    }
    // It fell and hangs: its lowest point well below the pins.
    let lowest = cloth
        .positions()
        .iter()
        .map(|p| p.y)
        .fold(f64::MAX, f64::min);
    let model = material.in_plane;
    assert!(lowest < -0.6, "{model:?}: lowest point {lowest} m");
    let fastest = cloth
        .velocities()
        .iter()
        .map(|v| v.norm())
        .fold(0.0, f64::max);
    assert!(
        fastest < 5e-3,
        "{model:?}: still moving at {fastest} m/s after 10 s"
    );
    let (stretch, _) = cloth.stretch_range();
    assert!(
        stretch < 1.1 + 0.01,
        "{model:?}: stretched to {stretch} (limit 1.1)"
    );
    // Hanging at rest, it puts its weight on its pins (momentum balance: the pins' reactions
    // are worked out from the elastic forces at the pinned vertices, not from the weight).
    let weight: f64 = cloth.masses().iter().sum::<f64>() * GRAVITY.y * DT;
    let on_pins: Vec3 = cloth.pin_impulses().map(|(_, j)| j).sum();
    assert_eq!(cloth.pin_impulses().count(), 2);
    let total = cloth.pins_total_impulse();
    assert!(
        (total - Vec3::new(0.0, weight, 0.0)).norm() < 1e-3 * weight.abs(),
        "{model:?}: by momentum, the pins take {total} N s a step, the weight is {weight}"
    );
    assert!(
        (on_pins - Vec3::new(0.0, weight, 0.0)).norm() < 1e-3 * weight.abs(),
        "{model:?}: the pins take {on_pins} N s a step, the weight is {weight}"
    );
    // At rest the energy does not grow: second by second over the last two seconds, and from
    // step to step beyond what ten PD iterations leave of the implicit step, which is not
    // monotone to round-off (1e-6 of its size; measured 4.9e-7 at most). The mass-spring model
    // wanders more at ten iterations (1.2e-4 of its size above where the window starts, 2e-6
    // from step to step): its springs are checked for rest only.
    if model == InPlaneModel::MassSpring {
        return;
    }
    let seconds: Vec<f64> = energies.iter().step_by(60).copied().collect();
    assert!(seconds.windows(2).all(|s| s[1] <= s[0]), "{seconds:?}");
    for (k, pair) in energies.windows(2).enumerate() {
        assert!(
            pair[1] <= pair[0] + 1e-6 * pair[0].abs().max(1.0),
            "energy grew at step {}: {} -> {}",
            480 + k + 1,
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn area_limits_hold_a_soft_sheet_s_triangles_near_their_rest_area() {
    // Soft springs alone let the hanging sheet's triangles grow; the area limit holds them.
    let largest_area_ratio = |area_limits: Option<(f64, f64)>| {
        let mesh = Arc::new(ClothMesh::rectangle(1.0, 1.0, 10, 10).unwrap());
        let material = ClothMaterial {
            in_plane: InPlaneModel::MassSpring,
            stretch_stiffness: 3.0,
            strain_limits: None,
            area_limits,
            area_stiffness: 2.0e3,
            ..ClothMaterial::COTTON
        };
        let mut cloth = ClothSystem::new(mesh.clone(), material, DT).unwrap();
        pin_all(&mut cloth, &edge(&mesh, 2, true));
        for _ in 0..180 {
            cloth.step(GRAVITY, Vec3::zeros()).unwrap();
        }
        let area = |p: &[Vec3], t: &[u32; 3]| {
            let [a, b, c] = t.map(|v| p[v as usize]);
            0.5 * (b - a).cross(&(c - a)).norm()
        };
        mesh.triangles()
            .iter()
            .map(|t| area(cloth.positions(), t) / area(mesh.rest_positions(), t))
            .fold(0.0, f64::max)
    };
    let free = largest_area_ratio(None);
    let limited = largest_area_ratio(Some((0.95, 1.05)));
    assert!(free > 1.2, "the soft sheet's triangles grew only to {free}");
    assert!(limited < 1.05 + 0.03, "limited to 1.05, grew to {limited}");
}

#[test]
fn a_stiffer_cloth_bends_less_under_its_weight() {
    // A strip clamped along one short edge (two columns pinned): the free end droops.
    let droop = |bend_stiffness: f64| {
        let mesh = Arc::new(ClothMesh::rectangle(0.5, 0.1, 20, 4).unwrap());
        let material = ClothMaterial {
            bend_stiffness,
            ..ClothMaterial::COTTON
        };
        let mut cloth = ClothSystem::new(mesh.clone(), material, DT).unwrap();
        let step = 0.5 / 20.0;
        let clamped: Vec<usize> = (0..mesh.vertex_count())
            .filter(|&v| mesh.rest_positions()[v].x < -0.25 + 1.5 * step)
            .collect();
        pin_all(&mut cloth, &clamped);
        for _ in 0..300 {
            cloth.step(GRAVITY, Vec3::zeros()).unwrap();
        }
        let tip = edge(&mesh, 0, true);
        -tip.iter().map(|&v| cloth.positions()[v].y).sum::<f64>() / tip.len() as f64
    };
    let (soft, stiff) = (droop(1e-5), droop(1e-1));
    assert!(soft > 0.2, "the soft strip droops only {soft} m");
    assert!(stiff < 0.5 * soft, "stiff {stiff} m against soft {soft} m");
}

#[test]
fn a_pre_bent_cloth_keeps_its_rest_shape_with_the_rest_curvature_model() {
    // A strip rolled into a half cylinder (a cape's fold) at rest, no gravity: with the rest
    // curvature kept it stays put; the flat-rest hinge model straightens it.
    let radius = 1.0 / std::f64::consts::PI;
    let mesh = ClothMesh::rectangle(1.0, 0.3, 20, 6)
        .unwrap()
        .mapped(|p| {
            let a = p.x / radius;
            Vec3::new(radius * a.sin(), radius * (1.0 - a.cos()), p.z)
        })
        .unwrap();
    let curved = mesh.rest_positions().to_vec();
    let mesh = Arc::new(mesh);
    let moved = |bending: BendingModel| {
        let material = ClothMaterial {
            bending,
            bend_stiffness: 1e-2,
            ..ClothMaterial::COTTON
        };
        let mut cloth = ClothSystem::new(mesh.clone(), material, DT).unwrap();
        for _ in 0..60 {
            cloth.step(Vec3::zeros(), Vec3::zeros()).unwrap();
        }
        cloth
            .positions()
            .iter()
            .zip(&curved)
            .map(|(p, q)| (p - q).norm())
            .fold(0.0, f64::max)
    };
    let kept = moved(BendingModel::RestCurvature);
    let straightened = moved(BendingModel::FlatHinges);
    assert!(kept < 1e-9, "the pre-bent cloth moved {kept} m");
    assert!(
        straightened > 1e-2,
        "the hinges moved it only {straightened} m"
    );
}

#[test]
fn wind_blows_a_flag_downwind() {
    // A flag in the plane z = 0, pinned along its top edge; wind along +z.
    let mesh = Arc::new(
        ClothMesh::rectangle(0.6, 0.4, 12, 8)
            .unwrap()
            .mapped(|p| Vec3::new(p.x, -p.z, 0.0))
            .unwrap(),
    );
    let mean_z = |wind: Vec3| {
        let mut cloth = ClothSystem::new(mesh.clone(), ClothMaterial::COTTON, DT).unwrap();
        pin_all(&mut cloth, &edge(&mesh, 1, true));
        for _ in 0..120 {
            cloth.step(GRAVITY, wind).unwrap();
        }
        cloth.positions().iter().map(|p| p.z).sum::<f64>() / mesh.vertex_count() as f64
    };
    let calm = mean_z(Vec3::zeros());
    let windy = mean_z(Vec3::new(0.0, 0.0, 8.0));
    assert!(
        calm.abs() < 1e-9,
        "the calm flag moved off its plane: {calm} m"
    );
    assert!(windy > 0.05, "the wind moved the flag {windy} m");
}

/// The mean angle (degrees) between the normals of `cloth`'s triangles sharing an edge.
fn mean_hinge_angle(cloth: &ClothSystem) -> f64 {
    let x = cloth.positions();
    let normal = |t: [u32; 3]| {
        let [a, b, c] = t.map(|v| x[v as usize]);
        (b - a).cross(&(c - a)).normalize()
    };
    let triangles = cloth.mesh().triangles();
    let mut first_of_edge = std::collections::HashMap::new();
    let (mut sum, mut count) = (0.0, 0);
    for (i, t) in triangles.iter().enumerate() {
        for k in 0..3 {
            let (a, b) = (t[k], t[(k + 1) % 3]);
            match first_of_edge.insert((a.min(b), a.max(b)), i) {
                Some(j) => {
                    let cos = normal(triangles[j]).dot(&normal(*t)).clamp(-1.0, 1.0);
                    sum += cos.acos().to_degrees();
                    count += 1;
                }
                None => continue,
            }
        }
    }
    sum / f64::from(count)
}

#[test]
fn a_flag_in_the_wind_streams_smooth_with_extrapolated_iterations() {
    // A 1 m cotton flag of 32 x 32 cells pinned along one edge in a 3 m/s wind for 3 s: ten
    // plain iterations leave it crumpled at its cells' scale (measured 65 degrees between
    // neighbouring triangles), 25 extrapolated ones smooth (measured 17-20; 16 with 100
    // plain iterations, the implicit step's own answer).
    let fly = |iterations: usize, rho: f64| {
        let mesh = Arc::new(ClothMesh::rectangle(1.0, 1.0, 32, 32).unwrap());
        let mut cloth = ClothSystem::new(mesh.clone(), ClothMaterial::COTTON, DT).unwrap();
        cloth.iterations = iterations;
        cloth.chebyshev_rho = rho;
        pin_all(&mut cloth, &edge(&mesh, 2, true));
        for _ in 0..180 {
            cloth.step(GRAVITY, Vec3::new(3.0, 0.0, 0.0)).unwrap();
        }
        mean_hinge_angle(&cloth)
    };
    let (plain, extrapolated) = (fly(10, 0.0), fly(FLAG_ITERATIONS, FLAG_CHEBYSHEV_RHO));
    assert!(plain > 45.0, "ten plain iterations: {plain} degrees");
    assert!(
        extrapolated < 30.0,
        "{FLAG_ITERATIONS} extrapolated iterations: {extrapolated} degrees"
    );
}

#[test]
fn bad_input_is_refused_and_the_cloth_kept() {
    let mesh = Arc::new(ClothMesh::rectangle(1.0, 1.0, 2, 2).unwrap());
    let bad = |material: ClothMaterial| ClothSystem::new(mesh.clone(), material, DT).err();
    assert!(matches!(
        bad(ClothMaterial {
            density: 0.0,
            ..ClothMaterial::COTTON
        }),
        Some(ClothError::InvalidMaterial {
            what: "density",
            ..
        })
    ));
    assert!(matches!(
        bad(ClothMaterial {
            strain_limits: Some((1.2, 1.1)),
            ..ClothMaterial::COTTON
        }),
        Some(ClothError::InvalidMaterial { .. })
    ));
    assert!(matches!(
        bad(ClothMaterial {
            area_limits: Some((0.0, 1.1)),
            ..ClothMaterial::COTTON
        }),
        Some(ClothError::InvalidMaterial {
            what: "area_limits.min",
            ..
        })
    ));
    assert!(matches!(
        bad(ClothMaterial {
            bend_stiffness: f64::NAN,
            ..ClothMaterial::COTTON
        }),
        Some(ClothError::InvalidMaterial {
            what: "bend_stiffness",
            ..
        })
    ));
    assert_eq!(
        ClothSystem::new(mesh.clone(), ClothMaterial::COTTON, 0.0).err(),
        Some(ClothError::InvalidTimeStep(0.0))
    );
    let mut cloth = ClothSystem::new(mesh.clone(), ClothMaterial::COTTON, DT).unwrap();
    assert_eq!(
        cloth.pin(9, Some(Vec3::zeros())),
        Err(ClothError::PinOutOfRange {
            vertex: 9,
            vertices: 9
        })
    );
    assert_eq!(
        cloth.pin(0, Some(Vec3::new(f64::NAN, 0.0, 0.0))),
        Err(ClothError::NonFinite("pin target"))
    );
    for v in 0..8 {
        cloth.pin(v, Some(mesh.rest_positions()[v])).unwrap();
    }
    assert!(matches!(
        cloth.pin(8, Some(Vec3::zeros())),
        Err(ClothError::Factorization(_))
    ));
    assert_eq!(
        cloth.step(Vec3::new(0.0, f64::INFINITY, 0.0), Vec3::zeros()),
        Err(ClothError::NonFinite("gravity or wind"))
    );
    // Still a cloth with one free vertex that falls.
    cloth.step(GRAVITY, Vec3::zeros()).unwrap();
    assert!(cloth.positions()[8].y < 0.0);
    assert!(
        cloth.positions()[..8]
            .iter()
            .zip(mesh.rest_positions())
            .all(|(p, r)| p == r)
    );
}

#[test]
fn a_flag_steps_the_same_on_one_thread_and_on_two() {
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            // Enough triangles for the local step to split into several tasks.
            let mesh = Arc::new(ClothMesh::rectangle(1.0, 1.0, 24, 24).unwrap());
            // Every kind of term: springs, strain limits and curvature rows.
            let material = ClothMaterial {
                in_plane: InPlaneModel::MassSpring,
                bending: BendingModel::RestCurvature,
                bend_stiffness: 1e-3,
                ..ClothMaterial::COTTON
            };
            let mut cloth = ClothSystem::new(mesh.clone(), material, DT).unwrap();
            pin_all(&mut cloth, &edge(&mesh, 2, true));
            for _ in 0..20 {
                cloth.step(GRAVITY, Vec3::new(2.0, 0.0, 1.0)).unwrap();
            }
            cloth.positions().to_vec()
        })
    };
    assert!(run(1) == run(2), "the thread count changed the result");
}
