//! A warmed-up step of the simulation core allocates (almost) nothing, and a rollback loop's
//! snapshots and restores allocate nothing once their buffers are warm.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use bevy_deformable::sim::{
    MaterialParams, ObstacleCollider, SUGGESTED_ANDERSON_WINDOW, Sleeping, SoftWorld, TetMesh,
    Vec3, WorldSettings, WorldSnapshot,
};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

mod common;
use common::pushed::pushed_bodies;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The count is global: the tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn warm_steps_do_not_allocate() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // With the default acceleration and with Anderson's (its history is sized once).
    for anderson_window in [0, SUGGESTED_ANDERSON_WINDOW] {
        // Awake steps: with sleeping on, the resting cubes would soon be skipped.
        let mut world = SoftWorld::new(WorldSettings {
            sleeping: Sleeping::OFF,
            anderson_window,
            ..WorldSettings::default()
        });
        for i in 0..2 {
            world
                .add_body(
                    Arc::new(TetMesh::cuboid(Vec3::repeat(0.2), 3)),
                    MaterialParams::RUBBER,
                    Vec3::new(i as f64, 0.21, 0.0),
                )
                .unwrap();
        }
        world
            .add_obstacle(ObstacleCollider::halfspace(Vec3::y()).unwrap())
            .unwrap();
        // Warm up: factorizations, workspaces, contact buffers at their resting size.
        for _ in 0..60 {
            world.step(1.0 / 60.0).unwrap();
        }
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for _ in 0..30 {
            world.step(1.0 / 60.0).unwrap();
        }
        let per_step = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 30.0;
        println!("anderson window {anderson_window}: allocations per warm step: {per_step}");
        // Not one allocation per step (a rare buffer growth when a contact set peaks is fine).
        assert!(per_step < 0.5, "{per_step} allocations per warm step");
    }
}

/// Allocations made by `f`.
fn allocations_of(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    f();
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

#[test]
fn a_rollback_loop_takes_and_restores_snapshots_without_allocating() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    const DT: f64 = 1.0 / 60.0;
    // Rollback netcode's loop: each frame, go back `BACK` frames, re-simulate them taking each
    // frame's snapshot again, and step the new frame; snapshots kept in a ring.
    const BACK: usize = 2;
    // Four bodies landing on each other, one pinned and one attached; awake throughout.
    let settings = WorldSettings {
        sleeping: Sleeping::OFF,
        ..WorldSettings::default()
    };
    let (mut world, _, _) = pushed_bodies(settings, 4);
    let mut ring: Vec<WorldSnapshot> = (0..=BACK).map(|_| world.snapshot()).collect();
    let (warm_up, counted_frames) = (150, 50);
    let mut counted = 0;
    for frame in 0..warm_up + counted_frames {
        let mut during = 0;
        if frame >= BACK {
            during += allocations_of(|| world.restore(&ring[(frame - BACK) % (BACK + 1)]).unwrap());
            for again in frame - BACK..frame {
                world.step(DT).unwrap();
                let kept = &mut ring[(again + 1) % (BACK + 1)];
                during += allocations_of(|| world.snapshot_into(kept));
            }
        }
        world.step(DT).unwrap();
        let kept = &mut ring[(frame + 1) % (BACK + 1)];
        during += allocations_of(|| world.snapshot_into(kept));
        // The first frames size the buffers (the bodies land and their contacts grow).
        if frame >= warm_up {
            counted += during;
        }
    }
    let per_frame = counted as f64 / counted_frames as f64;
    println!("allocations per frame of snapshots and restores, once warm: {per_frame}");
    // Not one allocation per copy (four a frame): only a rare buffer growth when a contact set
    // peaks (the old snapshot, a clone, allocated hundreds a frame).
    assert!(per_frame < 0.5, "{per_frame} allocations per frame");
}
