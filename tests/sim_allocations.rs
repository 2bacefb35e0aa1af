//! A warmed-up step of the simulation core allocates (almost) nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bevy_deformable::sim::{
    MaterialParams, ObstacleCollider, SUGGESTED_ANDERSON_WINDOW, Sleeping, SoftWorld, TetMesh,
    Vec3, WorldSettings,
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

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn warm_steps_do_not_allocate() {
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
