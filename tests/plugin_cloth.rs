//! The Bevy plugin headless: cloth. A `DeformableCloth` pinned along an edge hangs from it and
//! its pins follow the entity, and its parent when it has one; a tablecloth drops onto an
//! `Obstacle` and stays above it, and another onto a soft body, over which it drapes; its mesh
//! is written in the entity's frame, at the last step or blended with the one before; a pin
//! out of range is a typed error; an edit of the preset keeps the cloth where it is, and a
//! scene reset starts it over; a cloth pinned to a soft cube rides on it as it falls and lands;
//! the floor under a soft cube carries the weight of a cloth lying on it or hanging from it
//! (contact and pins both ways, one step late); a cloth dropped onto a hammock of cloth lies
//! on it and weighs it down; a coupled rigid body under a cloth takes its weight.

mod common;

use bevy::mesh::{Mesh, Mesh3d, VertexAttributeValues};
use bevy::prelude::*;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;
use common::app::*;

fn cloth_positions(app: &App, e: Entity) -> Vec<sim::Vec3> {
    app.world()
        .get::<ClothState>(e)
        .and_then(ClothState::positions)
        .expect("cloth built")
        .to_vec()
}

#[test]
fn a_cloth_hangs_from_its_pinned_edge_and_the_pins_follow_the_entity() {
    let mut app = app();
    let cloth =
        DeformableCloth::rectangle(Vec2::new(0.6, 0.4), UVec2::new(6, 4)).pin_edge(ClothEdge::MinZ);
    let pinned = cloth.pinned.clone();
    assert_eq!(pinned.len(), 7);
    let e = app
        .world_mut()
        .spawn((cloth, Transform::from_xyz(0.0, 2.0, 0.0)))
        .id();
    for _ in 0..120 {
        app.update();
    }
    let x = cloth_positions(&app, e);
    // The pinned edge is where the rectangle put it (z = -0.2 at y = 2); the far edge hangs.
    for &v in &pinned {
        assert!((x[v as usize].y - 2.0).abs() < 1e-6 && (x[v as usize].z + 0.2).abs() < 1e-6);
    }
    let lowest = x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min);
    assert!(lowest < 1.7, "the free edge is at {lowest}");
    // Moving the entity moves the pins.
    app.world_mut()
        .get_mut::<Transform>(e)
        .unwrap()
        .translation
        .x = 0.5;
    for _ in 0..30 {
        app.update();
    }
    let x = cloth_positions(&app, e);
    for &v in &pinned {
        assert!((x[v as usize].x - (0.5 + (v as f64 / 6.0 - 0.5) * 0.6)).abs() < 1e-6);
    }
    // Drawn at the last step, the mesh holds the positions in the entity's frame.
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    app.update();
    assert_drawn(&app, e, &cloth_positions(&app, e));
    // Blended (the default), each update here runs exactly one fixed step with no overstep:
    // the mesh shows the step before.
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = true;
    let before = cloth_positions(&app, e);
    app.update();
    assert_ne!(before, cloth_positions(&app, e));
    assert_drawn(&app, e, &before);
}

/// The cloth's mesh, in the entity's frame, shows `x` (m, world).
fn assert_drawn(app: &App, e: Entity, x: &[sim::Vec3]) {
    let transform = *app.world().get::<GlobalTransform>(e).unwrap();
    let handle = app
        .world()
        .get::<Mesh3d>(e)
        .expect("mesh inserted")
        .0
        .clone();
    let meshes = app.world().resource::<Assets<Mesh>>();
    let Some(VertexAttributeValues::Float32x3(drawn)) = meshes
        .get(&handle)
        .unwrap()
        .attribute(Mesh::ATTRIBUTE_POSITION)
    else {
        panic!("no positions");
    };
    assert_eq!(drawn.len(), x.len());
    for (d, p) in drawn.iter().zip(x) {
        let world = transform.transform_point(Vec3::from_array(*d));
        let error = (world.as_dvec3() - bevy::math::DVec3::new(p.x, p.y, p.z)).length();
        assert!(error < 1e-4, "drawn {error} m off");
    }
}

#[test]
fn a_tablecloth_drops_onto_a_table_and_stays_above_it() {
    let mut app = app();
    app.world_mut().spawn((
        Obstacle::cuboid(Vec3::new(0.4, 0.02, 0.4)),
        Transform::from_xyz(0.0, 0.8, 0.0),
    ));
    let e = app
        .world_mut()
        .spawn((
            DeformableCloth::rectangle(Vec2::splat(1.2), UVec2::splat(16))
                .with_preset(ClothPreset::Denim),
            Transform::from_xyz(0.0, 1.0, 0.0),
        ))
        .id();
    for _ in 0..180 {
        app.update();
        let x = cloth_positions(&app, e);
        // No vertex closer to the table's slab than the cloth's thickness (less rounding).
        let thickness = sim::cloth::ClothMaterial::DENIM.thickness - 1e-6;
        for p in &x {
            let outside =
                sim::Vec3::new(p.x.abs() - 0.4, (p.y - 0.8).abs() - 0.02, p.z.abs() - 0.4);
            let distance = outside.map(|c| c.max(0.0)).norm();
            assert!(
                distance >= thickness,
                "a vertex at {p:?} is {distance} m from the table"
            );
        }
    }
    let state = app.world().get::<ClothState>(e).unwrap();
    assert!(state.error().is_none());
    assert!(state.contacts() > 100, "{} contacts", state.contacts());
    // The overhang falls below the table top (not straight down: at 16 cells the corners
    // cannot fold, and the skirt's stiffness holds them out).
    let lowest = cloth_positions(&app, e)
        .iter()
        .map(|p| p.y)
        .fold(f64::INFINITY, f64::min);
    assert!(lowest < 0.76, "{lowest}");
}

#[test]
fn a_cloth_dropped_onto_a_hammock_of_cloth_lies_on_it() {
    let mut app = app();
    let hammock = app.world_mut().spawn(hammock_cloth()).id();
    let sheet = app
        .world_mut()
        .spawn((
            DeformableCloth::rectangle(Vec2::splat(0.4), UVec2::splat(6))
                .with_preset(ClothPreset::Denim),
            Transform::from_xyz(0.013, 1.06, 0.017),
        ))
        .id();
    for _ in 0..150 {
        app.update();
    }
    let (lower, upper) = (cloth_positions(&app, hammock), cloth_positions(&app, sheet));
    let triangles = app
        .world()
        .get::<ClothState>(hammock)
        .and_then(ClothState::system)
        .expect("a hammock")
        .mesh()
        .triangles()
        .to_vec();
    // Every vertex of the sheet above the hammock's surface, by about the mean thickness.
    let gap = 0.5
        * (sim::cloth::ClothMaterial::COTTON.thickness
            + sim::cloth::ClothMaterial::DENIM.thickness);
    for p in &upper {
        let (distance, above) = triangles
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|v| lower[v as usize]);
                let q = sim::contact::closest_point_on_triangle(p, &a, &b, &c).1;
                ((p - q).norm(), p.y >= q.y)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap();
        assert!(
            above && distance > 0.9 * gap,
            "a vertex at {p:?}, {distance} m from the hammock"
        );
    }
    // The sheet rests in the hammock, below its pins, and weighs it down: the hammock sags
    // lower than the same hammock alone (measured 0.863 m against 0.966 m).
    let lowest = upper.iter().map(|p| p.y).fold(f64::INFINITY, f64::min);
    assert!(lowest < 0.98, "the sheet rests at {lowest} m");
    let mut alone = self::app();
    let empty = alone.world_mut().spawn(hammock_cloth()).id();
    for _ in 0..150 {
        alone.update();
    }
    let bottom = |x: &[sim::Vec3]| x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min);
    let (loaded, empty) = (bottom(&lower), bottom(&cloth_positions(&alone, empty)));
    assert!(
        loaded < empty - 0.03,
        "the hammock's lowest point with the sheet at {loaded} m, alone at {empty} m"
    );
}

/// A 0.8 m cotton hammock of 12 x 12 cells hung by two opposite edges 1 m up.
fn hammock_cloth() -> (DeformableCloth, Transform) {
    (
        DeformableCloth::rectangle(Vec2::splat(0.8), UVec2::splat(12))
            .pin_edge(ClothEdge::MinX)
            .pin_edge(ClothEdge::MaxX),
        Transform::from_xyz(0.0, 1.0, 0.0),
    )
}

#[test]
fn a_rigid_body_under_a_cloth_takes_its_weight() {
    let mut app = app();
    // A coupled rigid slab that nothing moves (no gravity on it, no integrator: held where it
    // is), and a cotton sheet dropped onto it, all of it over the slab.
    let half = Vec3::new(0.3, 0.05, 0.3);
    let slab = app
        .world_mut()
        .spawn((
            Obstacle::cuboid(half),
            RigidBodyCoupling::solid_cuboid(4.0, half, Vec3::ZERO),
            Transform::from_xyz(0.0, 1.0, 0.0),
        ))
        .id();
    let sheet = app
        .world_mut()
        .spawn((
            DeformableCloth::rectangle(Vec2::splat(0.4), UVec2::splat(8)),
            Transform::from_xyz(0.0, 1.08, 0.0),
        ))
        .id();
    for _ in 0..150 {
        app.update();
    }
    let mass: f64 = app
        .world()
        .get::<ClothState>(sheet)
        .and_then(ClothState::system)
        .expect("a sheet")
        .masses()
        .iter()
        .sum();
    let h = app
        .world()
        .resource::<Time<Fixed>>()
        .timestep()
        .as_secs_f64();
    let weight = (mass * 9.81 * h) as f32;
    let impulse = *app.world().get::<RigidBodyImpulse>(slab).unwrap();
    // The sheet lies on the slab: it pushes down by its weight each step, the slab's velocity
    // change is that over its mass, and it pushes evenly (no turn about the centre).
    assert!(
        (impulse.impulse.y + weight).abs() < 0.01 * weight,
        "{:?} against a weight of {weight} N s a step",
        impulse.impulse
    );
    assert!((impulse.linear_velocity_change.y - impulse.impulse.y / 4.0).abs() < 1e-6);
    assert!(
        impulse.angular_impulse.length() < 0.05 * weight * 0.2,
        "{:?}",
        impulse.angular_impulse
    );
}

/// A 0.4 m rubber cube (4 cells) centred `height` (m) above the origin.
fn spawn_rubber_cube(app: &mut App, height: f32) -> Entity {
    app.world_mut()
        .spawn((
            DeformableBody::cuboid(Vec3::splat(0.2), 4).unwrap(),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, height, 0.0),
        ))
        .id()
}

/// A cloth dropped over a soft cube on the floor lies on the cube (its surface an obstacle of
/// the cloth's step, one way) and hangs down its sides: its middle rests at the cube's top,
/// and no vertex is inside the cube's bounds by more than the cloth's thickness.
#[test]
fn a_cloth_dropped_over_a_soft_cube_lies_on_it() {
    let mut app = app();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    let cube = spawn_rubber_cube(&mut app, 0.2);
    for _ in 0..30 {
        app.update();
    }
    let e = app
        .world_mut()
        .spawn((
            DeformableCloth::rectangle(Vec2::splat(0.8), UVec2::splat(16)),
            Transform::from_xyz(0.0, 0.5, 0.0),
        ))
        .id();
    for _ in 0..150 {
        app.update();
        let (lo, hi) = sim::mesh::bounds(&positions(&app, cube));
        let inside = cloth_positions(&app, e)
            .into_iter()
            .filter(|p| (0..3).all(|d| p[d] > lo[d] + 0.02 && p[d] < hi[d] - 0.02));
        assert_eq!(inside.count(), 0, "cloth vertices deep inside the cube");
    }
    let hi = sim::mesh::bounds(&positions(&app, cube)).1;
    let x = cloth_positions(&app, e);
    let top = x.iter().map(|p| p.y).fold(f64::NEG_INFINITY, f64::max);
    assert!(
        (top - hi.y).abs() < 0.02,
        "the middle at {top} m, the top at {} m",
        hi.y
    );
    let lowest = x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min);
    assert!(lowest < hi.y - 0.1, "the sides hang down ({lowest} m)");
}

#[test]
fn a_pin_out_of_range_is_a_typed_error_and_an_edited_preset_keeps_the_shape() {
    let mut app = app();
    let bad = app
        .world_mut()
        .spawn(DeformableCloth::rectangle(Vec2::ONE, UVec2::new(2, 2)).pin_vertices([9]))
        .id();
    let good = app
        .world_mut()
        .spawn((
            DeformableCloth::rectangle(Vec2::ONE, UVec2::new(4, 4)).pin_corners(ClothEdge::MinX),
            Transform::from_xyz(0.0, 3.0, 0.0),
        ))
        .id();
    for _ in 0..30 {
        app.update();
    }
    let state = app.world().get::<ClothState>(bad).unwrap();
    assert!(
        matches!(
            state.error(),
            Some(sim::cloth::ClothError::PinOutOfRange {
                vertex: 9,
                vertices: 9
            })
        ),
        "{:?}",
        state.error()
    );
    assert!(state.positions().is_none());
    let before = cloth_positions(&app, good);
    app.world_mut()
        .get_mut::<DeformableCloth>(good)
        .unwrap()
        .preset = ClothPreset::Leather;
    app.update();
    let after = cloth_positions(&app, good);
    let moved = before
        .iter()
        .zip(&after)
        .map(|(a, b)| (a - b).norm())
        .fold(0.0, f64::max);
    // One step's motion, not a restart 3 m up at the flat rectangle.
    assert!(moved < 0.1, "moved {moved} m");
    // A scene reset starts it over, flat at its entity's pose (after one step's fall).
    app.world_mut().write_message(ResetScene);
    app.update();
    let lowest = cloth_positions(&app, good)
        .iter()
        .map(|p| p.y)
        .fold(f64::INFINITY, f64::min);
    assert!(lowest > 2.99, "{lowest}");
}

/// A cloth parented to a moving entity (a hand, a bone, a rail) carries its pins with the
/// parent: parenting is how a cloth hangs from something that moves.
#[test]
fn a_cloth_parented_to_a_moving_entity_carries_its_pins_with_it() {
    let mut app = app();
    let parent = app
        .world_mut()
        .spawn(Transform::from_xyz(1.0, 2.0, 0.0))
        .id();
    let cloth = DeformableCloth::rectangle(Vec2::new(0.4, 0.4), UVec2::new(4, 4))
        .pin_corners(ClothEdge::MinZ);
    let pinned = cloth.pinned.clone();
    let e = app
        .world_mut()
        .spawn((cloth, Transform::from_xyz(0.0, 0.5, 0.0), ChildOf(parent)))
        .id();
    for _ in 0..10 {
        app.update();
    }
    let x = cloth_positions(&app, e);
    // Corner (0, 0) of the rectangle is at (-0.2, 0, -0.2) in the cloth's frame.
    let corner = x[pinned[0] as usize];
    assert!(
        (corner - sim::Vec3::new(0.8, 2.5, -0.2)).norm() < 1e-6,
        "{corner:?}"
    );
    app.world_mut()
        .get_mut::<Transform>(parent)
        .unwrap()
        .translation
        .z = 0.7;
    app.update();
    let corner = cloth_positions(&app, e)[pinned[0] as usize];
    assert!(
        (corner - sim::Vec3::new(0.8, 2.5, 0.5)).norm() < 1e-6,
        "{corner:?}"
    );
}

/// Pins chosen by where they lie on the rectangle (a cape's collar, a banner's top corners):
/// exactly the vertices the selection holds stay put, the rest fall; a selection that matches
/// no vertex refuses the cloth with a typed error naming it.
#[test]
fn pins_selected_on_the_rectangle_hold_exactly_those_vertices() {
    let mut app = app();
    // A 1 m square of 4 x 4 cells (0.25 m), held within 0.3 m of the middle of its z = -0.5
    // edge: the three middle vertices of that edge (the corners are 0.5 m away, the next row's
    // middle vertex 0.25 m away: four in all).
    let cloth = DeformableCloth::rectangle(Vec2::ONE, UVec2::new(4, 4))
        .pin_selection(VertexSelection::in_sphere(Vec3::new(0.0, 0.0, -0.5), 0.3));
    let held: Vec<u32> = vec![
        cloth.vertex(1, 0),
        cloth.vertex(2, 0),
        cloth.vertex(3, 0),
        cloth.vertex(2, 1),
    ];
    let e = app
        .world_mut()
        .spawn((cloth.clone(), Transform::from_xyz(0.0, 2.0, 0.0)))
        .id();
    let empty = app
        .world_mut()
        .spawn(
            cloth
                .clone()
                .pin_selection(VertexSelection::in_box(Vec3::splat(2.0), Vec3::splat(3.0))),
        )
        .id();
    for _ in 0..60 {
        app.update();
    }
    let x = cloth_positions(&app, e);
    let rest = sim::cloth::ClothMesh::rectangle(1.0, 1.0, 4, 4).unwrap();
    for (v, p) in x.iter().enumerate() {
        let at = rest.rest_positions()[v] + sim::Vec3::new(0.0, 2.0, 0.0);
        let still = (p - at).norm() < 1e-9;
        assert_eq!(still, held.contains(&(v as u32)), "vertex {v} at {p:?}");
    }
    let state = app.world().get::<ClothState>(empty).unwrap();
    assert!(
        matches!(
            state.error(),
            Some(sim::cloth::ClothError::EmptyPinSelection { index: 1 })
        ),
        "{:?}",
        state.error()
    );
    assert!(state.positions().is_none());
}

/// A cloth pinned along its edge to a soft cube rides on the cube: dropped with it from 0.8 m
/// above the floor, the pinned vertices move down with the cube, land at its top face and stay
/// there, carried by its tets, while the rest hangs down its side; pinned to an entity that is
/// no soft body (the floor) it is refused by name.
#[test]
fn a_cloth_pinned_to_a_soft_body_rides_on_it() {
    let mut app = app();
    let floor = app.world_mut().spawn(Obstacle::halfspace(Vec3::Y)).id();
    let cube = spawn_rubber_cube(&mut app, 1.0);
    // The pinned edge (local z = -0.3) lies across the middle of the cube's top face (y =
    // 1.2, z = 0); the rest sticks out over the +z side.
    let cloth = DeformableCloth::rectangle(Vec2::new(0.3, 0.6), UVec2::new(3, 6))
        .pin_edge(ClothEdge::MinZ)
        .pin_to_body(cube);
    let pinned = cloth.pinned.clone();
    let e = app
        .world_mut()
        .spawn((cloth.clone(), Transform::from_xyz(0.0, 1.2, 0.3)))
        .id();
    let refused = app
        .world_mut()
        .spawn((cloth.pin_to_body(floor), Transform::from_xyz(0.0, 1.2, 0.3)))
        .id();
    let centre = |app: &App| {
        let x = positions(app, cube);
        x.iter().sum::<sim::Vec3>() / x.len() as f64
    };
    app.update();
    let (start, start_centre) = (cloth_positions(&app, e), centre(&app));
    for &v in &pinned {
        let p = start[v as usize];
        assert!(
            (p.y - 1.2).abs() < 1e-6 && p.z.abs() < 1e-6,
            "pin {v} at {p:?}"
        );
    }
    for _ in 0..150 {
        app.update();
    }
    // Landed: the cube fell about 0.8 m, and the pins with it, by the same amount to within
    // the cube's squash.
    let (x, drop) = (cloth_positions(&app, e), start_centre - centre(&app));
    assert!(drop.y > 0.75, "the cube fell {} m", drop.y);
    let top = sim::mesh::bounds(&positions(&app, cube)).1.y;
    for &v in &pinned {
        let moved = start[v as usize] - x[v as usize];
        assert!(
            (moved - drop).norm() < 0.02,
            "pin {v} moved {moved:?}, the cube {drop:?}"
        );
        assert!(
            (x[v as usize].y - top).abs() < 0.01,
            "pin {v} at {}, the top at {top}",
            x[v as usize].y
        );
    }
    let lowest = x.iter().map(|p| p.y).fold(f64::INFINITY, f64::min);
    assert!(
        lowest < top - 0.15,
        "the free part hangs to {lowest} m, the top at {top} m"
    );
    let state = app.world().get::<ClothState>(refused).unwrap();
    assert!(
        matches!(
            state.error(),
            Some(sim::cloth::ClothError::PinnedToMissingBody)
        ),
        "{:?}",
        state.error()
    );
    assert!(state.positions().is_none());
}

/// What the floor under a light foam cube (0.4 m, 10 kg/m^3) carries, on average over a second
/// after two (N), with a leather sheet of `size` (m) spawned at `transform`, made by `sheet`
/// from the cube's entity; and the weights of the cube and the sheet (N).
fn floor_load(
    size: f32,
    transform: Transform,
    sheet: impl FnOnce(DeformableCloth, Entity) -> DeformableCloth,
) -> (f64, f64, f64) {
    let mut app = app();
    // Sleeping off: a sleeping cube has no floor contacts to sum.
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .rest
        .sleep_speed = 0.0;
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    let foam = SoftMaterial {
        density: 10.0,
        ..SoftMaterial::JELLY
    };
    let cube = app
        .world_mut()
        .spawn((
            DeformableBody::cuboid(Vec3::splat(0.2), 4).unwrap(),
            foam,
            Transform::from_xyz(0.0, 0.2, 0.0),
        ))
        .id();
    let mut cloth = DeformableCloth::rectangle(Vec2::splat(size), UVec2::splat(10));
    cloth.preset = ClothPreset::Leather;
    app.world_mut().spawn((sheet(cloth, cube), transform));
    for _ in 0..128 {
        app.update();
    }
    let steps = 64;
    let mut impulse = 0.0;
    for _ in 0..steps {
        app.update();
        let world = app.world().resource::<DeformableWorld>().world();
        impulse += world
            .contact_points()
            .iter()
            .map(|c| c.impulse.y)
            .sum::<f64>();
    }
    let dt = app
        .world()
        .resource::<Time<Fixed>>()
        .timestep()
        .as_secs_f64();
    let g = 9.81;
    let cube_mass: f64 = sim::TetMesh::cuboid(sim::Vec3::repeat(0.2), 4)
        .lumped_masses(f64::from(foam.density))
        .iter()
        .sum();
    let sheet_mass = f64::from(size * size) * sim::cloth::ClothMaterial::LEATHER.density;
    (impulse / (steps as f64 * dt), cube_mass * g, sheet_mass * g)
}

/// A cloth lying on a soft body weighs on it (contact both ways, one step late): the floor
/// under a light foam cube with a leather sheet on its top carries the cube's weight and the
/// sheet's (momentum balance over a second, within 0.5 %; measured 6e-6; without the sheet's
/// impulses on the cube it carried 11 % less).
#[test]
fn the_floor_carries_a_soft_cube_and_the_cloth_lying_on_it() {
    let (carried, cube, sheet) = floor_load(0.3, Transform::from_xyz(0.0, 0.42, 0.0), |c, _| c);
    let expected = cube + sheet;
    assert!(
        (carried - expected).abs() < 0.005 * expected,
        "the floor carries {carried} N, expected {expected} N (the sheet {sheet} N of it)"
    );
}

/// A cloth pinned to a soft body pulls on it (the pins' reactions, one step late): the floor
/// under a foam cube with a leather sheet hanging from its top edge down its side (clear of
/// the floor) carries the cube's weight and the sheet's, within 0.5 % (the sheet is 5 % of
/// it).
#[test]
fn the_floor_carries_a_soft_cube_and_the_cloth_hanging_from_it() {
    // The pinned edge (local z = -0.1) along the cube's top edge at z = 0.2; the rest sticks
    // out over the +z side, falls and hangs down the side face.
    let (carried, cube, sheet) = floor_load(0.2, Transform::from_xyz(0.0, 0.4, 0.3), |c, body| {
        c.pin_edge(ClothEdge::MinZ).pin_to_body(body)
    });
    let expected = cube + sheet;
    assert!(
        (carried - expected).abs() < 0.005 * expected,
        "the floor carries {carried} N, expected {expected} N (the sheet {sheet} N of it)"
    );
}
