//! Rollback netcode with soft bodies: every frame the scene goes back ten frames, re-simulates
//! them with the inputs known now, and predicts the new frame.
//!
//! A "remote player" steers the paddle; its inputs arrive [`DELAY`] frames late, so the frames
//! since the last one known are predicted by repeating its last known input. Each frame the
//! world is restored from the snapshot taken [`WINDOW`] frames ago
//! (`DeformableWorld::restore`) and stepped again up to the present, taking a snapshot before
//! every step (`DeformableWorld::snapshot_into`, into kept buffers). Frames whose inputs were
//! already known the last time they were simulated must come out bit for bit the same: the
//! example checks every one and shows the count of mismatches (always 0), and a headless run
//! (`DEFORMABLE_FRAMES=N`) exits with an error if any frame differed.
//!
//! The plugin steps in a schedule of its own, [`SimTick`], which the rollback system runs as
//! many times as it needs inside each fixed step (so with the fixed step's time).
//!
//! `cargo run --release --example rollback`: drag to orbit, scroll to zoom.

#[path = "common/mod.rs"]
mod common;

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::time::Instant;

use bevy::ecs::schedule::ScheduleLabel;
use bevy::prelude::*;
use bevy_deformable::DeformableSnapshot;
use bevy_deformable::prelude::*;
use bevy_egui::{EguiContexts, EguiPrimaryContextPass, egui};

/// Frames rolled back and simulated again every frame.
const WINDOW: u64 = 10;
/// Frames the remote player's input takes to arrive (at most [`WINDOW`]).
const DELAY: u64 = 6;
/// Half extents of the paddle (m).
const PADDLE: Vec3 = Vec3::new(0.08, 0.3, 0.9);
/// The paddle's speed (m/s) and how far it may go from the middle along x (m).
const SPEED: f32 = 1.0;
const REACH: f32 = 1.2;
/// The fixed step (s).
const DT: f32 = 1.0 / 60.0;

/// The schedule the soft-body step runs in, run by [`rollback_tick`].
#[derive(ScheduleLabel, Debug, Clone, PartialEq, Eq, Hash)]
struct SimTick;

#[derive(Component)]
struct Paddle;

/// The rollback state: snapshots before each of the last frames, and the checks.
#[derive(Resource)]
struct Rollback {
    /// The next frame to simulate.
    frame: u64,
    /// Per frame `f` in the window (slot `f % slots`): the world before `f` is stepped, and the
    /// paddle's x there (m).
    before: Vec<Option<(u64, DeformableSnapshot, f32)>>,
    /// Per frame (same slots): the hash of the bodies' positions after it, and whether every
    /// input up to it was known when it was simulated.
    after: Vec<Option<(u64, u64, bool)>>,
    /// Frames simulated again whose inputs were all known both times: checked, and differing.
    checked: u64,
    mismatches: u64,
    /// Remote inputs that differed from their prediction (each one a visible correction).
    corrections: u64,
    /// Wall time of the last frame's rollback and re-simulation (ms).
    last_ms: f64,
    /// The paddle's x before frame [`Self::frame`] (m).
    paddle_x: f32,
}

impl Default for Rollback {
    fn default() -> Self {
        Self {
            frame: 0,
            before: Vec::new(),
            after: Vec::new(),
            checked: 0,
            mismatches: 0,
            corrections: 0,
            last_ms: 0.0,
            paddle_x: -REACH,
        }
    }
}

/// The remote player's input at frame `f`: move left, stay or move right (-1, 0, 1), changing
/// every 40 frames in a fixed pattern (a stand-in for what the network delivers).
fn remote_input(frame: u64) -> f32 {
    const PATTERN: [f32; 7] = [1.0, 1.0, 0.0, -1.0, -1.0, 1.0, -1.0];
    PATTERN[(frame / 40) as usize % PATTERN.len()]
}

fn main() {
    let scene = common::ExampleScene {
        focus: Vec3::new(0.4, 0.3, 0.0),
        distance: 4.0,
        yaw: 0.25,
        pitch: 0.5,
    };
    let mut app = common::example_app_with("rollback", scene, DeformablePlugin::new(SimTick));
    app.init_schedule(SimTick)
        .init_resource::<Rollback>()
        .add_systems(Startup, setup)
        .add_systems(FixedUpdate, rollback_tick)
        .add_systems(EguiPrimaryContextPass, show_readout)
        .run();
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    commands.spawn((
        Paddle,
        Mesh3d(meshes.add(Cuboid::from_size(2.0 * PADDLE))),
        MeshMaterial3d(materials.add(Color::srgb(0.25, 0.25, 0.3))),
        Transform::from_xyz(-REACH, PADDLE.y + 0.02, 0.0),
        Obstacle::cuboid(PADDLE).with_friction(0.3),
    ));
    let palette = [
        Color::srgb(0.9, 0.3, 0.3),
        Color::srgb(0.95, 0.7, 0.2),
        Color::srgb(0.3, 0.8, 0.4),
        Color::srgb(0.25, 0.55, 0.95),
    ];
    for (i, color) in palette.into_iter().enumerate() {
        let z = -0.6 + 0.4 * i as f32;
        let x = if i % 2 == 0 { -0.4 } else { 0.1 };
        let (body, render, material, look) = if i % 2 == 0 {
            (
                DeformableBody::cuboid(Vec3::splat(0.15), 5).expect("valid size"),
                None,
                SoftMaterial::JELLY,
                common::jelly_look(color),
            )
        } else {
            (
                DeformableBody::from(TetMesh::sphere(0.17, 6)),
                Some(Sphere::new(0.17).mesh().ico(3).expect("ico(3) is valid")),
                SoftMaterial::RUBBER,
                common::rubber_look(color),
            )
        };
        let mut entity = commands.spawn((
            Name::new(format!("body {i}")),
            body,
            material,
            MeshMaterial3d(materials.add(look)),
            Transform::from_xyz(x, 0.6 + 0.3 * i as f32, z),
        ));
        if let Some(render) = render {
            entity.insert(Mesh3d(meshes.add(render)));
        }
    }
}

/// One fixed step of the game: roll back [`WINDOW`] frames, simulate them again with the
/// inputs known now, then predict this frame.
fn rollback_tick(world: &mut World) {
    let started = Instant::now();
    let slots = (WINDOW + 1) as usize;
    let mut rollback = world
        .remove_resource::<Rollback>()
        .expect("inserted at start-up");
    if rollback.before.is_empty() {
        rollback.before.resize_with(slots, || None);
        rollback.after.resize_with(slots, || None);
    }
    let now = rollback.frame;
    // The remote inputs known now: those of frames up to `now - DELAY`. Later frames repeat
    // the last one known (no input yet: stand still).
    let known = now.checked_sub(DELAY);
    let input = |f: u64| match known {
        Some(k) if f <= k => remote_input(f),
        Some(k) => remote_input(k),
        None => 0.0,
    };
    if let Some(k) = known
        && k > 0
        && remote_input(k) != remote_input(k - 1)
    {
        rollback.corrections += 1;
    }
    // Back to the oldest frame of the window with a snapshot. A snapshot from before the
    // bodies were made (the first frame makes them) or before a spawn is refused: then the
    // window starts again from now.
    let mut first = (now.saturating_sub(WINDOW)..now)
        .find(|&f| matches!(&rollback.before[f as usize % slots], Some((frame, ..)) if *frame == f))
        .unwrap_or(now);
    let mut paddle_x = rollback.paddle_x;
    if first < now {
        let (_, snapshot, x) = rollback.before[first as usize % slots]
            .as_ref()
            .expect("found above");
        match world.resource_mut::<DeformableWorld>().restore(snapshot) {
            Ok(()) => paddle_x = *x,
            Err(e) => {
                info!("rollback window restarted at frame {now}: {e}");
                for (frame, ..) in rollback.before.iter_mut().flatten() {
                    *frame = u64::MAX;
                }
                first = now;
            }
        }
    }
    for f in first..=now {
        // The world before frame `f`, kept for the frames that roll back to it.
        let slot = &mut rollback.before[f as usize % slots];
        let deformable = world.resource::<DeformableWorld>();
        match slot {
            Some((frame, snapshot, x)) => {
                deformable.snapshot_into(snapshot);
                (*frame, *x) = (f, paddle_x);
            }
            None => *slot = Some((f, deformable.snapshot(), paddle_x)),
        }
        paddle_x = (paddle_x + input(f) * SPEED * DT).clamp(-REACH, REACH);
        let mut paddles = world.query_filtered::<&mut Transform, With<Paddle>>();
        for mut transform in paddles.iter_mut(world) {
            transform.translation.x = paddle_x;
        }
        world.run_schedule(SimTick);
        // The same inputs as the last time this frame was simulated: the same state, bit for
        // bit.
        let hash = positions_hash(world.resource::<DeformableWorld>());
        let all_known = known.is_some_and(|k| f <= k);
        let record = &mut rollback.after[f as usize % slots];
        if let Some((frame, previous, was_known)) = *record
            && frame == f
            && was_known
            && all_known
        {
            rollback.checked += 1;
            if previous != hash {
                rollback.mismatches += 1;
                error!("frame {f} re-simulated with the same inputs differs");
            }
        }
        *record = Some((f, hash, all_known));
    }
    rollback.paddle_x = paddle_x;
    rollback.frame += 1;
    rollback.last_ms = started.elapsed().as_secs_f64() * 1e3;
    // A headless run (CI, screenshots) fails on a mismatch.
    if rollback.mismatches > 0 && std::env::var_os("DEFORMABLE_FRAMES").is_some() {
        world.write_message(AppExit::error());
    }
    world.insert_resource(rollback);
}

/// A hash of every body's positions, bit for bit.
fn positions_hash(world: &DeformableWorld) -> u64 {
    let sim = world.world();
    let mut hasher = DefaultHasher::new();
    for h in sim.bodies() {
        for p in sim.positions(h).expect("a body of the world") {
            for c in p.iter() {
                hasher.write_u64(c.to_bits());
            }
        }
    }
    hasher.finish()
}

/// The rollback's figures in a small window at the top left.
fn show_readout(rollback: Res<Rollback>, mut contexts: EguiContexts) -> Result {
    let ctx = contexts.ctx_mut()?;
    egui::Window::new("rollback")
        .anchor(egui::Align2::LEFT_TOP, [10.0, 10.0])
        .resizable(false)
        .show(ctx, |ui| {
            ui.label(format!(
                "frame {}: the last {WINDOW} frames rolled back and simulated again, {:.1} ms",
                rollback.frame, rollback.last_ms
            ));
            ui.label(format!(
                "remote input {DELAY} frames late: {} corrections",
                rollback.corrections
            ));
            ui.label(format!(
                "re-simulated frames checked bit for bit: {}, differing: {}",
                rollback.checked, rollback.mismatches
            ));
        });
    Ok(())
}
