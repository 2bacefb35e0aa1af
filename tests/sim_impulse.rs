//! Impulses on soft bodies (`SoftWorld::apply_impulse`): against rigid-body impulse mechanics
//! (the momentum changes by the impulse, the angular momentum by `(p - c) x J`), a pinned
//! vertex stays put, a sleeping body ignores a push too weak to move it and wakes for a
//! strong one, and bad input is refused with the body unchanged.

use std::sync::Arc;

use bevy_deformable::sim::{
    BodyHandle, EmbeddedPoint, MaterialParams, ObstacleCollider, SoftWorld, TetMesh, Vec3,
    WorldError, WorldSettings,
};

/// A rubber cube (0.2 m half size) floating in a world without gravity.
fn floating_cube() -> (SoftWorld, BodyHandle, Vec<f64>) {
    let settings = WorldSettings {
        gravity: Vec3::zeros(),
        ..WorldSettings::default()
    };
    let mut world = SoftWorld::new(settings);
    let mesh = Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 3));
    let masses = mesh.lumped_masses(MaterialParams::RUBBER.density);
    let body = world
        .add_body(mesh, MaterialParams::RUBBER, Vec3::new(0.0, 1.0, 0.0))
        .unwrap();
    (world, body, masses)
}

/// Linear and angular momentum (about the centre of mass) of a body.
fn momenta(world: &SoftWorld, body: BodyHandle, masses: &[f64]) -> (Vec3, Vec3) {
    let x = world.positions(body).unwrap();
    let v = world.velocities(body).unwrap();
    let total: f64 = masses.iter().sum();
    let c = x.iter().zip(masses).map(|(p, &m)| m * p).sum::<Vec3>() / total;
    let p = v.iter().zip(masses).map(|(u, &m)| m * u).sum();
    let l = x
        .iter()
        .zip(v)
        .zip(masses)
        .map(|((p, u), &m)| m * (p - c).cross(u))
        .sum();
    (p, l)
}

/// Whether every vertex of the body has zero velocity.
fn still(world: &SoftWorld, body: BodyHandle) -> bool {
    world
        .velocities(body)
        .unwrap()
        .iter()
        .all(|v| *v == Vec3::zeros())
}

#[test]
fn an_impulse_changes_momentum_and_angular_momentum_as_on_a_rigid_body() {
    let (mut world, body, masses) = floating_cube();
    let x = world.positions(body).unwrap().to_vec();
    let total: f64 = masses.iter().sum();
    let c = x.iter().zip(&masses).map(|(p, &m)| m * p).sum::<Vec3>() / total;
    // A point on the top face, off centre, pushed sideways and down.
    let at = Vec3::new(0.07, 1.2, -0.05);
    let impulse = Vec3::new(2.0, -1.0, 0.5);
    assert!(world.apply_impulses_at(body, &[(at, impulse)]).unwrap());
    let (p, l) = momenta(&world, body, &masses);
    assert!((p - impulse).norm() < 1e-12, "momentum {p}");
    let expected = (at - c).cross(&impulse);
    assert!(
        (l - expected).norm() < 1e-12,
        "angular momentum {l} vs {expected}"
    );
    // The steps conserve it (no gravity, nothing touched: only the solver's round-off).
    for _ in 0..30 {
        world.step(1.0 / 60.0).unwrap();
    }
    let (p1, _) = momenta(&world, body, &masses);
    assert!((p1 - impulse).norm() < 1e-6 * impulse.norm(), "after: {p1}");
}

#[test]
fn a_pinned_vertex_takes_no_share_of_an_impulse() {
    let (mut world, body, _) = floating_cube();
    let pinned = 0;
    let at = world.positions(body).unwrap()[pinned];
    world.pin(body, pinned, at).unwrap();
    let point = EmbeddedPoint::vertex(pinned as u32);
    assert!(
        !world
            .apply_impulse(body, &point, Vec3::new(0.0, 5.0, 0.0))
            .unwrap()
    );
    assert_eq!(world.velocities(body).unwrap()[pinned], Vec3::zeros());
    for _ in 0..30 {
        world.step(1.0 / 60.0).unwrap();
    }
    assert_eq!(world.positions(body).unwrap()[pinned], at);
}

#[test]
fn a_sleeping_body_ignores_a_weak_push_and_wakes_for_a_strong_one() {
    let mut world = SoftWorld::new(WorldSettings::default());
    world
        .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
        .unwrap();
    let body = world
        .add_body(
            Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 3)),
            MaterialParams::RUBBER,
            Vec3::new(0.0, 0.201, 0.0),
        )
        .unwrap();
    for _ in 0..300 {
        world.step(1.0 / 60.0).unwrap();
        if world.is_asleep(body).unwrap() {
            break;
        }
    }
    assert!(world.is_asleep(body).unwrap(), "the cube never slept");
    let top = Vec3::new(0.0, 0.4, 0.0);
    // 1 mN s on a cube of about 50 kg: far under the sleeping speed at any vertex.
    let weak = Vec3::new(1e-3, 0.0, 0.0);
    assert!(!world.apply_impulses_at(body, &[(top, weak)]).unwrap());
    assert!(world.is_asleep(body).unwrap());
    assert!(still(&world, body));
    let strong = Vec3::new(50.0, 0.0, 0.0);
    assert!(world.apply_impulses_at(body, &[(top, strong)]).unwrap());
    assert!(!world.is_asleep(body).unwrap());
    let start: Vec<Vec3> = world.positions(body).unwrap().to_vec();
    let mut moved: f64 = 0.0;
    for _ in 0..30 {
        world.step(1.0 / 60.0).unwrap();
        let x = world.positions(body).unwrap();
        moved = x
            .iter()
            .zip(&start)
            .map(|(p, q)| (p - q).norm())
            .fold(moved, f64::max);
    }
    assert!(moved > 0.01, "the pushed cube moved {moved} m at most");
}

#[test]
fn bad_impulses_are_refused_and_change_nothing() {
    let (mut world, body, _) = floating_cube();
    let count = world.positions(body).unwrap().len();
    let out = EmbeddedPoint::vertex(count as u32);
    assert!(matches!(
        world.apply_impulse(body, &out, Vec3::x()),
        Err(WorldError::VertexOutOfRange { .. })
    ));
    let nan = Vec3::new(f64::NAN, 0.0, 0.0);
    // One good and one bad impulse: neither is applied.
    let good = (Vec3::new(0.0, 1.2, 0.0), Vec3::x());
    assert!(matches!(
        world.apply_impulses_at(body, &[good, (Vec3::new(0.0, 1.2, 0.0), nan)]),
        Err(WorldError::InvalidValue { .. })
    ));
    assert!(matches!(
        world.apply_impulses_at(body, &[(nan, Vec3::x())]),
        Err(WorldError::InvalidValue { .. })
    ));
    let mut bad_weights = EmbeddedPoint::vertex(0);
    bad_weights.weights[0] = f64::INFINITY;
    assert!(matches!(
        world.apply_impulse(body, &bad_weights, Vec3::x()),
        Err(WorldError::InvalidValue { .. })
    ));
    assert!(still(&world, body));
    let mut other = SoftWorld::new(WorldSettings::default());
    let stranger = other
        .add_body(
            Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 1)),
            MaterialParams::RUBBER,
            Vec3::zeros(),
        )
        .unwrap();
    other.remove_body(stranger);
    assert!(matches!(
        other.apply_impulse(stranger, &EmbeddedPoint::vertex(0), Vec3::x()),
        Err(WorldError::UnknownBody(_))
    ));
}
