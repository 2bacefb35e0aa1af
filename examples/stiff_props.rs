//! Crates and pillars of stiff rubber (E = 1e7 Pa) knocked over by a heavy ball, simulated by
//! the Newton-MPRGP solver (Li et al. 2015): at this stiffness a few
//! Projective Dynamics iterations leave the props visibly softer than their material, while a
//! Newton step solves the finite-element energy itself.
//!
//! `cargo run --release --example stiff_props`: drag to orbit, scroll to zoom, `P` to pause,
//! `N` to switch between the Newton-MPRGP and Projective Dynamics solvers (the inspector's
//! settings show which one runs).

#[path = "common/mod.rs"]
mod common;

use bevy::prelude::*;
use bevy_deformable::prelude::*;

fn main() {
    let scene = common::ExampleScene {
        focus: Vec3::new(0.2, 0.5, 0.0),
        distance: 3.4,
        yaw: -0.7,
        pitch: 0.35,
    };
    common::example_app("stiff_props", scene)
        .add_systems(Startup, setup)
        .add_systems(Update, switch_solver)
        .run();
}

/// Stiff rubber: E = 1e7 Pa, nu = 0.45.
fn stiff_rubber() -> SoftMaterial {
    SoftMaterial {
        poisson_ratio: 0.45,
        ..SoftMaterial::RUBBER
            .with_youngs_modulus(1.0e7)
            .with_friction(0.6)
    }
}

fn setup(
    mut commands: Commands,
    mut config: ResMut<DeformableConfig>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut meshes: ResMut<Assets<Mesh>>,
) {
    config.solver.method = SolverChoice::NewtonMprgp;
    // A stack of three crates, 0.3 m each, on the floor.
    let crate_look = materials.add(common::soft_look(Color::srgb(0.78, 0.55, 0.3)));
    for level in 0..3 {
        commands.spawn((
            Name::new(format!("crate {level}")),
            DeformableBody::cuboid(Vec3::splat(0.15), 4).expect("valid size"),
            stiff_rubber(),
            MeshMaterial3d(crate_look.clone()),
            Transform::from_xyz(0.55, 0.151 + 0.305 * level as f32, 0.0)
                .with_rotation(Quat::from_rotation_y(0.15 * level as f32)),
        ));
    }
    // Two pillars, 0.9 m tall and 0.15 m across (lattice cells of 7.5 cm: two across).
    let pillar_look = materials.add(common::soft_look(Color::srgb(0.55, 0.6, 0.68)));
    for (k, z) in [-0.4f32, 0.15].into_iter().enumerate() {
        commands.spawn((
            Name::new(format!("pillar {k}")),
            DeformableBody::cuboid(Vec3::new(0.075, 0.45, 0.075), 12).expect("valid size"),
            stiff_rubber(),
            MeshMaterial3d(pillar_look.clone()),
            Transform::from_xyz(-0.05, 0.451, z),
        ));
    }
    // A dense ball thrown through the near pillar at the stack's middle crate.
    let ball_look = materials.add(common::soft_look(Color::srgb(0.7, 0.15, 0.15)));
    commands.spawn((
        Name::new("ball"),
        DeformableBody::sphere(0.14, 5).expect("valid size"),
        Mesh3d(meshes.add(Sphere::new(0.14).mesh().ico(3).expect("ico(3) is valid"))),
        SoftMaterial {
            density: 3000.0,
            ..stiff_rubber().with_restitution(0.2)
        },
        MeshMaterial3d(ball_look),
        Transform::from_xyz(-1.4, 0.6, 0.05),
        InitialVelocity(Vec3::new(7.0, 1.5, 0.0)),
    ));
}

/// `N` switches the solver live; the bodies keep their state.
fn switch_solver(keys: Res<ButtonInput<KeyCode>>, mut config: ResMut<DeformableConfig>) {
    if keys.just_pressed(KeyCode::KeyN) {
        config.solver.method = match config.solver.method {
            SolverChoice::NewtonMprgp => SolverChoice::ProjectiveDynamics,
            SolverChoice::ProjectiveDynamics => SolverChoice::NewtonMprgp,
        };
        info!("solver: {:?}", config.solver.method);
    }
}
