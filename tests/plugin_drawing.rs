//! The Bevy plugin headless: what is drawn. Render meshes (the tet surface or the game's own
//! mesh embedded in the tets) and `Transform`s follow the bodies, blended between the last two
//! fixed steps.

mod common;

use bevy::mesh::{Mesh, Mesh3d, VertexAttributeValues};
use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_deformable::prelude::*;
use bevy_deformable::sim;
use common::app::*;

#[test]
fn a_body_falls_rests_on_an_obstacle_and_its_render_mesh_follows() {
    let mut app = app();
    let body = app
        .world_mut()
        .spawn((
            cube(),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 1.0, 0.0),
        ))
        .id();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    // Drawn at the last step (the default blends the last two: tested below).
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    for _ in 0..150 {
        app.update();
    }
    let x = positions(&app, body);
    assert!(lowest(&x) > -1e-3, "sank to {}", lowest(&x));
    let transform = *app.world().get::<Transform>(body).unwrap();
    assert!(
        (transform.translation.y - 0.2).abs() < 0.03,
        "{transform:?}"
    );
    // The generated render mesh holds the surface vertices relative to the Transform.
    let handle = app
        .world()
        .get::<Mesh3d>(body)
        .expect("render mesh inserted")
        .0
        .clone();
    let meshes = app.world().resource::<Assets<Mesh>>();
    let mesh = meshes.get(&handle).unwrap();
    let Some(VertexAttributeValues::Float32x3(rendered)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION)
    else {
        panic!("no positions");
    };
    let tet = TetMesh::cuboid(sim::Vec3::repeat(0.2), 3);
    assert_eq!(rendered.len(), tet.surface_vertices().len());
    for (r, &v) in rendered.iter().zip(tet.surface_vertices()) {
        let world_pos = transform.transform_point(Vec3::from_array(*r));
        let sim_pos = x[v as usize];
        assert!(
            (world_pos.as_dvec3() - bevy::math::DVec3::new(sim_pos.x, sim_pos.y, sim_pos.z))
                .length()
                < 1e-5
        );
    }
}

/// A pillar spawned leaning falls over: its `Transform` keeps the spawn rotation at first,
/// then turns with the body (so a child entity turns with it), and the render mesh, written
/// in that turned frame, is still drawn where the simulation has the surface.
#[test]
fn a_falling_pillar_turns_its_transform_with_it() {
    let mut app = app();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    let lean = Quat::from_rotation_z(0.35);
    let half = Vec3::new(0.05, 0.4, 0.05);
    let pillar = app
        .world_mut()
        .spawn((
            DeformableBody::cuboid(half, 8).unwrap(),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 0.45, 0.0).with_rotation(lean),
        ))
        .id();
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    for _ in 0..2 {
        app.update();
    }
    let start = app.world().get::<Transform>(pillar).unwrap().rotation;
    assert!(start.angle_between(lean) < 0.01, "{start:?}");
    for _ in 0..240 {
        app.update();
    }
    let transform = *app.world().get::<Transform>(pillar).unwrap();
    let axis = transform.rotation * Vec3::Y;
    assert!(
        axis.y.abs() < 0.2 && axis.x.abs() > 0.95,
        "the pillar's long axis ends at {axis:?}, not lying along x"
    );
    let x = positions(&app, pillar);
    let tet = TetMesh::cuboid(
        sim::Vec3::new(half.x as f64, half.y as f64, half.z as f64),
        8,
    );
    let worst = drawn(&app, pillar)
        .iter()
        .zip(tet.surface_vertices())
        .map(|(d, &v)| {
            let p = x[v as usize];
            (*d - Vec3::new(p.x as f32, p.y as f32, p.z as f32)).length()
        })
        .fold(0.0f32, f32::max);
    assert!(
        worst < 1e-4,
        "drawn up to {worst} m off the simulated surface"
    );
}

#[test]
fn an_embedded_render_mesh_follows_the_coarse_body() {
    let mut app = app();
    let detailed = Sphere::new(0.18).mesh().ico(3).unwrap();
    let rest: Vec<sim::Vec3> = match detailed.attribute(Mesh::ATTRIBUTE_POSITION) {
        Some(VertexAttributeValues::Float32x3(p)) => p
            .iter()
            .map(|a| sim::Vec3::new(a[0] as f64, a[1] as f64, a[2] as f64))
            .collect(),
        _ => panic!("sphere has positions"),
    };
    let handle = app.world_mut().resource_mut::<Assets<Mesh>>().add(detailed);
    let coarse = TetMesh::cuboid(sim::Vec3::repeat(0.2), 2);
    let embedding = sim::embed::embed_points(&coarse, &rest);
    let body = app
        .world_mut()
        .spawn((
            DeformableBody::from(coarse),
            SoftMaterial::JELLY,
            Mesh3d(handle.clone()),
            Transform::from_xyz(0.0, 0.5, 0.0),
        ))
        .id();
    app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    for _ in 0..40 {
        app.update();
    }
    let x = positions(&app, body);
    // The body deforms its own copy; the game's mesh asset is left as it was.
    let own = app.world().get::<Mesh3d>(body).unwrap().0.clone();
    assert_ne!(own, handle);
    let meshes = app.world().resource::<Assets<Mesh>>();
    let Some(VertexAttributeValues::Float32x3(original)) = meshes
        .get(&handle)
        .unwrap()
        .attribute(Mesh::ATTRIBUTE_POSITION)
    else {
        panic!("no positions");
    };
    for (a, p0) in original.iter().zip(&rest) {
        assert_eq!(*a, [p0.x as f32, p0.y as f32, p0.z as f32]);
    }
    let mut moved = 0.0f64;
    for ((got, e), p0) in drawn(&app, body).iter().zip(&embedding).zip(&rest) {
        let expected = e.position(&x);
        let got = sim::Vec3::new(got.x as f64, got.y as f64, got.z as f64);
        assert!((got - expected).norm() < 1e-5, "{got:?} vs {expected:?}");
        moved = moved.max((got - (p0 + sim::Vec3::new(0.0, 0.5, 0.0))).norm());
    }
    assert!(
        moved > 0.1,
        "the render mesh should have moved with the body: {moved}"
    );
}

/// A body drawn with its own mesh collides by that mesh ([`CollisionProxy::Drawn`], the
/// default): a sphere in a coarse cube rests with its drawn surface on the floor, the cube's
/// corners below it; with [`CollisionProxy::TetVertices`] the cube holds the sphere up.
#[test]
fn a_caged_sphere_rests_on_its_drawn_surface() {
    let lowest_drawn = |proxy: CollisionProxy| {
        let mut app = app();
        let detailed = Sphere::new(0.18).mesh().ico(3).unwrap();
        let handle = app.world_mut().resource_mut::<Assets<Mesh>>().add(detailed);
        let body = app
            .world_mut()
            .spawn((
                DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.2), 2)),
                SoftMaterial::RUBBER,
                proxy,
                Mesh3d(handle),
                Transform::from_xyz(0.0, 0.25, 0.0),
            ))
            .id();
        app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
        app.world_mut()
            .resource_mut::<DeformableConfig>()
            .interpolate = false;
        for _ in 0..90 {
            app.update();
        }
        let low = drawn(&app, body)
            .iter()
            .map(|p| p.y)
            .fold(f32::MAX, f32::min);
        (low, lowest(&positions(&app, body)))
    };
    let (drawn_low, cage_low) = lowest_drawn(CollisionProxy::default());
    assert!(drawn_low.abs() < 1e-3, "drawn sphere at {drawn_low} m");
    assert!(cage_low < -0.005, "cage at {cage_low} m");
    let (drawn_low, cage_low) = lowest_drawn(CollisionProxy::TetVertices);
    assert!(drawn_low > 0.01, "drawn sphere at {drawn_low} m");
    assert!(cage_low > -1e-3, "cage at {cage_low} m");
}

/// Vertex positions after every fixed step, recorded right after the plugin's write-back.
#[derive(Resource, Default)]
struct StepLog(Vec<Vec<sim::Vec3>>);

#[test]
fn rendering_blends_the_last_two_steps_by_the_overstep() {
    let mut app = app();
    // 1.5 fixed steps per frame: the overstep alternates between a half step and none.
    let fixed = app.world().resource::<Time<Fixed>>().timestep();
    app.insert_resource(TimeUpdateStrategy::ManualDuration(fixed.mul_f64(1.5)));
    app.init_resource::<StepLog>();
    let body = app
        .world_mut()
        .spawn((cube(), Transform::from_xyz(0.0, 1.0, 0.0)))
        .id();
    app.add_systems(
        FixedUpdate,
        (move |world: Res<DeformableWorld>, mut log: ResMut<StepLog>| {
            if let Some(x) = world.positions(body) {
                log.0.push(x.to_vec());
            }
        })
        .after(DeformableSystems::Writeback),
    );
    let tet = TetMesh::cuboid(sim::Vec3::repeat(0.2), 3);
    let mut blended_frames = 0;
    for _ in 0..12 {
        app.update();
        let log = &app.world().resource::<StepLog>().0;
        if log.len() < 2 {
            continue;
        }
        let alpha = app.world().resource::<Time<Fixed>>().overstep_fraction() as f64;
        if alpha > 0.25 {
            blended_frames += 1;
        }
        let (before, last) = (&log[log.len() - 2], &log[log.len() - 1]);
        for (got, &v) in drawn(&app, body).iter().zip(tet.surface_vertices()) {
            let v = v as usize;
            let expected = before[v] + alpha * (last[v] - before[v]);
            let got = sim::Vec3::new(got.x as f64, got.y as f64, got.z as f64);
            assert!(
                (got - expected).norm() < 1e-5,
                "alpha {alpha}: {got:?} vs {expected:?}"
            );
        }
    }
    assert!(
        blended_frames >= 4,
        "only {blended_frames} frames fell between steps"
    );
}

#[test]
fn bodies_sharing_a_mesh_handle_deform_their_own_copies() {
    let mut app = app();
    let handle = app
        .world_mut()
        .resource_mut::<Assets<Mesh>>()
        .add(Sphere::new(0.15).mesh().ico(2).unwrap());
    let spawn = |app: &mut App, x: f32| {
        app.world_mut()
            .spawn((
                DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.2), 2)),
                Mesh3d(handle.clone()),
                Transform::from_xyz(x, 0.5, 0.0),
            ))
            .id()
    };
    let (a, b) = (spawn(&mut app, -1.0), spawn(&mut app, 1.0));
    for _ in 0..10 {
        app.update();
    }
    let mesh_of = |e: Entity| app.world().get::<Mesh3d>(e).unwrap().0.clone();
    assert_ne!(mesh_of(a), mesh_of(b));
    assert_ne!(mesh_of(a), handle);
}

#[test]
fn an_enclosed_bunny_is_drawn_exactly_at_rest() {
    let mut app = app();
    app.world_mut().resource_mut::<DeformableConfig>().gravity = Vec3::ZERO;
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    let surface =
        TriangleSurface::from_obj(include_str!("../assets/meshes/bunny_10k.obj")).unwrap();
    let render = app
        .world_mut()
        .resource_mut::<Assets<Mesh>>()
        .add(mesh_from_surface(&surface));
    let at = Transform::from_xyz(0.5, 1.0, -0.2)
        .with_rotation(Quat::from_rotation_y(-0.6))
        .with_scale(Vec3::splat(0.5));
    let body = app
        .world_mut()
        .spawn((enclosing_body(&surface, 7).unwrap(), Mesh3d(render), at))
        .id();
    for _ in 0..2 {
        app.update();
    }
    let mut worst = 0.0f32;
    for (got, p) in drawn(&app, body).iter().zip(surface.positions()) {
        let expected = at.transform_point(Vec3::new(p.x as f32, p.y as f32, p.z as f32));
        worst = worst.max((*got - expected).length());
    }
    assert!(
        worst < 1e-3,
        "render vertices off their rest place by up to {worst} m"
    );
}

/// A body held by stiff springs on every vertex to a hook that turns about a tilted axis, with
/// no gravity: it turns rigidly, and its `Transform` carries exactly the hook's rotation (the
/// spawn rotation composed with the turn).
#[test]
fn the_transform_of_a_rigidly_turned_body_carries_its_rotation() {
    let mut app = app_with_plugin(
        concat!(env!("CARGO_MANIFEST_DIR"), "/assets"),
        DeformablePlugin::default().with_gravity(Vec3::ZERO),
    );
    app.world_mut()
        .resource_mut::<DeformableConfig>()
        .interpolate = false;
    let hook = app
        .world_mut()
        .spawn(Transform::from_xyz(0.0, 1.0, 0.0))
        .id();
    let spawn = Quat::from_rotation_x(0.3);
    let mesh = TetMesh::cuboid(sim::Vec3::new(0.2, 0.1, 0.05), 3);
    let all: Vec<u32> = (0..mesh.vertex_count() as u32).collect();
    let body = app
        .world_mut()
        .spawn((
            DeformableBody::from(mesh),
            SoftMaterial::RUBBER,
            Transform::from_xyz(0.0, 1.0, 0.0).with_rotation(spawn),
            Attachment::indices(hook, all, 1.0e7),
        ))
        .id();
    // Created (its attachment offsets taken) with the hook unturned.
    app.update();
    let axis = Vec3::new(0.3, 1.0, -0.2).normalize();
    for step in 1..=120 {
        let turn = Quat::from_axis_angle(axis, 0.02 * step as f32);
        app.world_mut().get_mut::<Transform>(hook).unwrap().rotation = turn;
        app.update();
    }
    let turn = Quat::from_axis_angle(axis, 0.02 * 120.0);
    let rotation = app.world().get::<Transform>(body).unwrap().rotation;
    let error = rotation.angle_between(turn * spawn);
    assert!(
        error < 2e-3,
        "turned {rotation:?}, expected {:?} ({error} rad off)",
        turn * spawn
    );
}

/// Two boxes drawn 5 cm inside their cages (a Bevy cuboid of 0.3 m in a 2-cell cage of 0.4 m),
/// the upper dropped onto the lower, their cages 3 cm apart: with [`CollisionProxy::DrawnMesh`] they rest on each
/// other by their drawn meshes (within 2 mm, none inside the other); with
/// [`CollisionProxy::Drawn`] (the default) by their cages, 5 cm outside each drawn box.
#[test]
fn drawn_mesh_bodies_rest_on_each_other_by_what_is_drawn() {
    let gap = |proxy: CollisionProxy| {
        let mut app = app();
        let drawn_box = Cuboid::new(0.3, 0.3, 0.3).mesh().build();
        let handle = app
            .world_mut()
            .resource_mut::<Assets<Mesh>>()
            .add(drawn_box);
        let mut spawn = |y: f32| {
            app.world_mut()
                .spawn((
                    DeformableBody::from(TetMesh::cuboid(sim::Vec3::repeat(0.2), 2)),
                    SoftMaterial::RUBBER,
                    proxy.clone(),
                    Mesh3d(handle.clone()),
                    Transform::from_xyz(0.0, y, 0.0),
                ))
                .id()
        };
        // The cages 3 cm apart.
        let (lower, upper) = (spawn(0.15), spawn(0.58));
        app.world_mut().spawn(Obstacle::halfspace(Vec3::Y));
        app.world_mut()
            .resource_mut::<DeformableConfig>()
            .interpolate = false;
        for _ in 0..120 {
            app.update();
        }
        let top = drawn(&app, lower)
            .iter()
            .map(|p| p.y)
            .fold(f32::MIN, f32::max);
        let bottom = drawn(&app, upper)
            .iter()
            .map(|p| p.y)
            .fold(f32::MAX, f32::min);
        bottom - top
    };
    let by_mesh = gap(CollisionProxy::DrawnMesh);
    assert!(
        (-1e-3..=2e-3).contains(&by_mesh),
        "drawn boxes {by_mesh} m apart"
    );
    let by_cage = gap(CollisionProxy::Drawn);
    assert!(by_cage > 0.04, "drawn boxes {by_cage} m apart");
}
