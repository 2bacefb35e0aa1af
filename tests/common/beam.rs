//! The cantilever of the Newton solver's beam-theory checks (`tests/sim_newton.rs`, `cargo bench
//! --bench newton`): 1 m long, 0.1 m across, density 1000 kg/m^3, clamped at `x = -0.5 m` (its
//! end vertices pinned), sagging under its own weight.

use bevy_deformable::sim::fem::{
    FemModel, Lame, NewtonSettings, NewtonSetup, NewtonStats, NewtonSystem, Potential,
};
use std::sync::Arc;

use bevy_deformable::sim::{MaterialParams, SoftWorld, TetMesh, Vec3, WorldSettings};

/// Beam length (m).
pub const LENGTH: f64 = 1.0;
/// Side of the square section (m).
pub const SIDE: f64 = 0.1;
/// Density (kg/m^3).
pub const DENSITY: f64 = 1000.0;
/// Gravity (m/s^2).
pub const GRAVITY: f64 = 9.81;

/// The Euler-Bernoulli tip deflection `q L^4 / (8 E I)` (m) at Young's modulus `e` (Pa), with
/// `q = rho g b^2` (N/m) and `I = b^4 / 12` (m^4).
pub fn beam_theory(e: f64) -> f64 {
    let q = DENSITY * GRAVITY * SIDE * SIDE;
    let inertia = SIDE.powi(4) / 12.0;
    q * LENGTH.powi(4) / (8.0 * e * inertia)
}

/// The beam's lattice with `resolution` cells along it.
pub fn beam(resolution: usize) -> TetMesh {
    TetMesh::cuboid(Vec3::new(LENGTH / 2.0, SIDE / 2.0, SIDE / 2.0), resolution)
}

/// Per vertex: on the clamped end.
pub fn clamped(mesh: &TetMesh) -> Vec<bool> {
    mesh.rest_positions()
        .iter()
        .map(|p| p.x < -LENGTH / 2.0 + 1e-9)
        .collect()
}

/// The mean downward displacement (m) of the free end's vertices.
pub fn mean_tip(x: &[Vec3], rest: &[Vec3]) -> f64 {
    let tip: Vec<f64> = x
        .iter()
        .zip(rest)
        .filter(|(_, r)| r.x > LENGTH / 2.0 - 1e-9)
        .map(|(p, r)| r.y - p.y)
        .collect();
    tip.iter().sum::<f64>() / tip.len() as f64
}

/// The static solve at `resolution` cells along the beam, nu = 0, Young's modulus `e` (Pa):
/// the mean tip deflection (m, positive downwards) and what the Newton iterations did.
pub fn static_tip(model: FemModel, e: f64, resolution: usize) -> (f64, NewtonStats) {
    let mesh = beam(resolution);
    let clamped = clamped(&mesh);
    let material = MaterialParams::RUBBER
        .with_youngs_modulus(e)
        .with_poisson_ratio(0.0)
        .with_density(DENSITY);
    let mut system = NewtonSystem::new(
        &mesh,
        NewtonSetup {
            model,
            lame: Lame::of(&material),
            density: DENSITY,
            pinned: &clamped,
        },
    )
    .unwrap();
    let force = system.gravity_forces(Vec3::new(0.0, -GRAVITY, 0.0));
    let rest = mesh.rest_positions().to_vec();
    let mut x = rest.clone();
    let stats = system
        .solve(
            &mut x,
            &Potential {
                inertia: 0.0,
                target: &rest,
                force: &force,
            },
            NewtonSettings {
                max_iterations: 40,
                tolerance: 1e-6,
            },
        )
        .unwrap();
    (mean_tip(&x, &rest), stats)
}

/// The beam at `resolution` cells, nu = 0, Young's modulus `e` (Pa), pinned in a world with
/// `settings` (gravity set to [`GRAVITY`]) and stepped at 60 Hz until it hangs still (every
/// vertex slower than 1e-6 m/s, at most 1,200 steps): the mean tip deflection (m, positive
/// downwards) and the fastest vertex speed at the end (m/s). Asserts on the way that no step
/// freezes the beam and that the pinned vertices never move.
pub fn hang_in_world(settings: WorldSettings, e: f64, resolution: usize) -> (f64, f64) {
    let mesh = Arc::new(beam(resolution));
    let mut world = SoftWorld::new(WorldSettings {
        gravity: Vec3::new(0.0, -GRAVITY, 0.0),
        ..settings
    });
    let material = MaterialParams::RUBBER
        .with_youngs_modulus(e)
        .with_poisson_ratio(0.0)
        .with_density(DENSITY);
    let body = world
        .add_body(mesh.clone(), material, Vec3::zeros())
        .unwrap();
    let pins = clamped(&mesh);
    for (i, &pin) in pins.iter().enumerate() {
        if pin {
            world.pin(body, i, mesh.rest_positions()[i]).unwrap();
        }
    }
    let mut speed = f64::INFINITY;
    for _ in 0..1200 {
        let report = world.step(1.0 / 60.0).unwrap();
        assert!(report.frozen.is_empty(), "{:?}", report.frozen);
        let x = world.positions(body).unwrap();
        for (i, &pin) in pins.iter().enumerate() {
            if pin {
                assert_eq!(x[i], mesh.rest_positions()[i], "pinned vertex {i} moved");
            }
        }
        speed = world
            .velocities(body)
            .unwrap()
            .iter()
            .map(|v| v.norm())
            .fold(0.0, f64::max);
        if speed < 1e-6 {
            break;
        }
    }
    (
        mean_tip(world.positions(body).unwrap(), mesh.rest_positions()),
        speed,
    )
}
