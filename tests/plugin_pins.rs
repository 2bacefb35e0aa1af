//! The Bevy plugin headless: pins and attachments, by vertex index and by vertex selection
//! ([`VertexSelection`]), and their typed errors.

mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;
use common::app::*;

#[test]
fn pins_hold_and_attachments_follow_their_target() {
    let mut app = app();
    let mesh = TetMesh::cuboid(sim::Vec3::repeat(0.2), 2);
    // Vertex with the largest y + x: a top corner.
    let corner = (0..mesh.vertex_count())
        .max_by(|&a, &b| {
            let (p, q) = (mesh.rest_positions()[a], mesh.rest_positions()[b]);
            (p.x + p.y).total_cmp(&(q.x + q.y))
        })
        .unwrap() as u32;
    let pinned = app
        .world_mut()
        .spawn((
            DeformableBody::from(mesh.clone()),
            Pin::indices(vec![corner]),
            Transform::from_xyz(0.0, 2.0, 0.0),
        ))
        .id();
    let hand = app
        .world_mut()
        .spawn(Transform::from_xyz(2.0, 2.2, 0.0))
        .id();
    let held = app
        .world_mut()
        .spawn((
            DeformableBody::from(mesh),
            Attachment::indices(hand, vec![corner], 5.0e4),
            Transform::from_xyz(2.0, 2.0, 0.0),
        ))
        .id();
    app.update();
    let pin_at = positions(&app, pinned)[corner as usize];
    let start = positions(&app, held)[corner as usize];
    for step in 0..90 {
        // The hand moves 1 m along +z over the first 60 steps.
        let z = (step.min(60) as f32) / 60.0;
        app.world_mut()
            .get_mut::<Transform>(hand)
            .unwrap()
            .translation
            .z = z;
        app.update();
        assert_eq!(positions(&app, pinned)[corner as usize], pin_at);
    }
    let end = positions(&app, held)[corner as usize];
    assert!(
        (end.z - start.z - 1.0).abs() < 0.05,
        "attached corner moved {} along z",
        end.z - start.z
    );
    // The pinned body hangs below its pin.
    let hang = positions(&app, pinned).iter().map(|p| p.y).sum::<f64>() / 27.0;
    assert!(hang < pin_at.y - 0.15, "{hang} vs {}", pin_at.y);
}

/// The top face of the 0.4 m cube (`cube()`), as a box a millimetre deep.
fn top_face() -> VertexSelection {
    VertexSelection::in_box(Vec3::new(-1.0, 0.199, -1.0), Vec3::splat(1.0))
}

/// A cube pinned by a selection of its top face has exactly the pins of the same cube pinned by
/// the indices of those vertices, and they hold.
#[test]
fn a_pin_by_selection_holds_the_same_vertices_as_by_index() {
    let mut app = app();
    let mesh = TetMesh::cuboid(sim::Vec3::repeat(0.2), 3);
    let top: Vec<u32> = (0..mesh.vertex_count() as u32)
        .filter(|&v| mesh.rest_positions()[v as usize].y > 0.199)
        .collect();
    assert_eq!(top.len(), 16);
    let by_selection = app
        .world_mut()
        .spawn((
            cube(),
            Pin::selection(top_face()),
            Transform::from_xyz(-1.0, 2.0, 0.0),
        ))
        .id();
    let by_index = app
        .world_mut()
        .spawn((
            cube(),
            Pin::indices(top.clone()),
            Transform::from_xyz(1.0, 2.0, 0.0),
        ))
        .id();
    for _ in 0..30 {
        app.update();
    }
    let world = app.world().resource::<DeformableWorld>();
    let pinned = |e| {
        let p = world.world().pinned(world.body(e).unwrap()).unwrap();
        (0..p.len() as u32)
            .filter(|&v| p[v as usize])
            .collect::<Vec<_>>()
    };
    assert_eq!(pinned(by_selection), top);
    assert_eq!(pinned(by_index), top);
    // The pinned vertices stayed where they were created while the rest sagged.
    for e in [by_selection, by_index] {
        let p = positions(&app, e);
        for &v in &top {
            assert!((p[v as usize].y - 2.2).abs() < 1e-9, "{e} vertex {v}");
        }
    }
}

/// A selection that matches no vertex rejects the body with a typed error naming it; a pin
/// added at run time by a sphere pins exactly the vertices inside it.
#[test]
fn an_empty_selection_is_a_typed_error_and_run_time_pins_select() {
    let mut app = app();
    let nowhere = VertexSelection::in_sphere(Vec3::splat(5.0), 0.1);
    let bad = app
        .world_mut()
        .spawn((
            cube(),
            Pin::selection(nowhere.clone()),
            Transform::from_xyz(3.0, 1.0, 0.0),
        ))
        .id();
    let hook = app.world_mut().spawn(Transform::default()).id();
    let bad_attachment = app
        .world_mut()
        .spawn((
            cube(),
            Attachment::new(hook, nowhere.clone(), 1.0e3),
            Transform::from_xyz(-3.0, 1.0, 0.0),
        ))
        .id();
    let body = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 1.0, 0.0)))
        .id();
    app.update();
    let status = |e| app.world().get::<DeformableState>(e).unwrap().status();
    assert_eq!(
        status(bad),
        BodyStatus::Rejected(BodyError::EmptySelection {
            role: "pinned",
            selection: nowhere.clone(),
        })
    );
    assert_eq!(
        status(bad_attachment),
        BodyStatus::Rejected(BodyError::EmptySelection {
            role: "attached",
            selection: nowhere,
        })
    );
    // A corner and its three neighbours (0.133 m apart on the 3-cell lattice).
    app.world_mut()
        .entity_mut(body)
        .insert(Pin::in_sphere(Vec3::splat(0.2), 0.15));
    app.update();
    let world = app.world().resource::<DeformableWorld>();
    let pinned = world.world().pinned(world.body(body).unwrap()).unwrap();
    let mesh = TetMesh::cuboid(sim::Vec3::repeat(0.2), 3);
    let inside: Vec<bool> = mesh
        .rest_positions()
        .iter()
        .map(|p| (p - sim::Vec3::repeat(0.2)).norm() <= 0.15)
        .collect();
    assert_eq!(inside.iter().filter(|&&i| i).count(), 4);
    assert_eq!(pinned, &inside[..]);
}

/// An attachment by the vertices nearest a point holds those vertices near the target.
#[test]
fn an_attachment_by_nearest_vertices_follows_its_target() {
    let mut app = app();
    let hand = app
        .world_mut()
        .spawn(Transform::from_xyz(0.0, 2.2, 0.0))
        .id();
    let body = app
        .world_mut()
        .spawn((
            cube(),
            Attachment::new(
                hand,
                VertexSelection::nearest(Vec3::new(0.0, 0.2, 0.0), 4),
                5.0e4,
            ),
            Transform::from_xyz(0.0, 2.0, 0.0),
        ))
        .id();
    for _ in 0..60 {
        app.update();
    }
    let p = positions(&app, body);
    let top = p.iter().map(|v| v.y).fold(f64::NEG_INFINITY, f64::max);
    assert!(
        top > 2.1,
        "the body hangs from its top: highest vertex at {top}"
    );
    assert!(lowest(&p) > 1.5, "held up: lowest vertex at {}", lowest(&p));
}
