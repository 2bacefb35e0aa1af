//! A cloth on a soft body both ways (`ClothSystem::obstacle_impulses` applied with
//! `SoftWorld::apply_impulses_at`, one step late): the floor under a jelly cube carries the
//! cube's weight and the weight of a sheet lying on it (momentum balance, the independent
//! truth), without the coupling only the cube's; and a sleeping cube stays asleep under a
//! resting sheet.

use std::sync::Arc;

use bevy_deformable::sim::cloth::{ClothMaterial, ClothMesh, ClothSystem};
use bevy_deformable::sim::{
    BodyHandle, MaterialParams, ObstacleCollider, Sleeping, SoftWorld, TetMesh, Vec3, WorldSettings,
};

const DT: f64 = 1.0 / 60.0;
const GRAVITY: Vec3 = Vec3::new(0.0, -9.81, 0.0);
/// The cube's half size (m).
const HALF: f64 = 0.2;
/// A heavy sheet (2 kg/m^2: a thick rug), so that its weight is a good part of the cube's load.
const RUG: ClothMaterial = ClothMaterial {
    density: 2.0,
    ..ClothMaterial::COTTON
};

/// A jelly cube resting on a floor (sleeping as `sleeping` says), and a 0.3 m sheet 2 cm above
/// its top (it lies on the top face, which is 0.4 m across).
fn scene(sleeping: Sleeping) -> (SoftWorld, BodyHandle, ClothSystem) {
    let settings = WorldSettings {
        sleeping,
        ..WorldSettings::default()
    };
    let mut world = SoftWorld::new(settings);
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let cube = world
        .add_body(
            Arc::new(TetMesh::cuboid(Vec3::repeat(HALF), 4)),
            MaterialParams::JELLY,
            Vec3::new(0.0, HALF, 0.0),
        )
        .unwrap();
    let mesh = ClothMesh::rectangle(0.3, 0.3, 10, 10)
        .unwrap()
        .mapped(|p| p + Vec3::new(0.0, 2.0 * HALF + 0.02, 0.0))
        .unwrap();
    let cloth = ClothSystem::new(Arc::new(mesh), RUG, DT).unwrap();
    (world, cube, cloth)
}

/// One step of the world, then of the cloth among the floor and the cube's surface, and (if
/// `coupled`) the cloth's impulses on the cube's surface applied to the cube. Returns the
/// vertical impulse (N s) the floor's contacts put on the cube in the world's step.
fn step(world: &mut SoftWorld, cube: BodyHandle, cloth: &mut ClothSystem, coupled: bool) -> f64 {
    world.step(DT).unwrap();
    let floor: f64 = world.contact_points().iter().map(|c| c.impulse.y).sum();
    let mut obstacles = world.obstacles().to_vec();
    obstacles.push(world.surface_obstacle(cube).unwrap());
    cloth
        .step_among(GRAVITY, Vec3::zeros(), &obstacles)
        .unwrap();
    if coupled {
        let on_cube: Vec<(Vec3, Vec3)> = cloth
            .obstacle_impulses()
            .filter(|&(o, _, _)| o == obstacles.len() - 1)
            .map(|(_, at, impulse)| (at, impulse))
            .collect();
        world.apply_impulses_at(cube, &on_cube).unwrap();
    }
    floor
}

#[test]
fn the_floor_carries_the_cube_and_the_sheet_lying_on_it() {
    let cube_mass: f64 = TetMesh::cuboid(Vec3::repeat(HALF), 4)
        .lumped_masses(MaterialParams::JELLY.density)
        .iter()
        .sum();
    let sheet_mass: f64 = 0.3 * 0.3 * RUG.density;
    let g = -GRAVITY.y;
    for coupled in [true, false] {
        let (mut world, cube, mut cloth) = scene(Sleeping::OFF);
        for _ in 0..(2.0 / DT) as usize {
            step(&mut world, cube, &mut cloth, coupled);
        }
        // Over the next second, the floor's impulse is the weight it carries times 1 s.
        let steps = (1.0 / DT) as usize;
        let carried: f64 = (0..steps)
            .map(|_| step(&mut world, cube, &mut cloth, coupled))
            .sum::<f64>()
            / (steps as f64 * DT);
        let expected = if coupled {
            (cube_mass + sheet_mass) * g
        } else {
            cube_mass * g
        };
        assert!(
            (carried - expected).abs() < 0.02 * expected,
            "coupled {coupled}: the floor carries {carried} N, expected {expected} N (cube {} N, sheet {} N)",
            cube_mass * g,
            sheet_mass * g
        );
        // The sheet rests on the top.
        let top = world
            .positions(cube)
            .unwrap()
            .iter()
            .map(|p| p.y)
            .fold(f64::MIN, f64::max);
        let lowest = cloth
            .positions()
            .iter()
            .map(|p| p.y)
            .fold(f64::MAX, f64::min);
        assert!(
            lowest > top - 1e-3,
            "the sheet at {lowest} m, the top at {top} m"
        );
    }
}

#[test]
fn a_sleeping_cube_stays_asleep_under_a_resting_sheet() {
    let (mut world, cube, mut cloth) = scene(Sleeping::default());
    let mut slept_at = None;
    for i in 0..(6.0 / DT) as usize {
        step(&mut world, cube, &mut cloth, true);
        let asleep = world.is_asleep(cube).unwrap();
        match (asleep, slept_at) {
            (true, None) => slept_at = Some(i),
            (false, Some(at)) => panic!("asleep at step {at}, woken at step {i}"),
            _ => {}
        }
    }
    assert!(
        slept_at.is_some(),
        "the cube never fell asleep under the sheet"
    );
}
