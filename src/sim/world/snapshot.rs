//! [`WorldSnapshot`]: the whole state of a [`SoftWorld`] at one moment, taken with
//! [`SoftWorld::snapshot`] and put back with [`SoftWorld::restore`], for rollback netcode and
//! replays (predict, roll back, re-simulate).
//!
//! A snapshot holds everything a later step reads: positions and velocities, the last good
//! state, materials, pins, attachments and their targets, grab springs, sleeping and settling
//! clocks, the obstacles' poses and velocities, the coupled rigid bodies' state, the contact
//! memory (the normal and friction forces the next step starts from), the warm starts (the
//! local step's rotations, the islands' last iterates and kept contact matrices, the cached
//! `A^-1` columns) and the Newton solver's state. So the step after a restore is the step
//! after the snapshot, bit for bit (`tests/sim_snapshot.rs`).
//!
//! What it leaves out is each body's PD system (its matrix and factor), a function of its
//! mesh, material, pins, attachments, grab spring and time step: a restore hands the live
//! body's system back where it is the factor the snapshot's body had (the cached columns'
//! generation identifies it), and otherwise the body builds it again before its next step.
//! A restore across such an edit (a material or pin changed after the snapshot) therefore
//! replays to the solver's tolerance rather than bit for bit: the rebuilt factor has no
//! cached columns yet.
//!
//! Cost: a snapshot is a clone of the world's state, scratch buffers included (the step's
//! per-body and per-island buffers are cloned with it rather than told apart from state). The
//! bodies are cloned field by field into the buffers a kept snapshot (or the restored world)
//! already has; the islands' buffers are allocated again; the cached `A^-1` columns are shared
//! with the world, not copied. `cargo bench --bench pile` measures it on the pile scene (20
//! bodies, 3,590 vertices): 1.5-2.0 ms to take, 1.5-1.8 ms to restore.

use thiserror::Error;

use super::SoftWorld;
use super::handles::BodyHandle;

/// A [`SoftWorld`]'s state at one moment (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct WorldSnapshot {
    /// The world, its bodies without their PD systems.
    world: SoftWorld,
}

/// Why [`SoftWorld::restore`] refused a snapshot (the world is left as it was).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SnapshotError {
    /// The world's bodies are not the snapshot's: one was added or removed since.
    #[error("the snapshot has bodies {snapshot:?}, the world {world:?}")]
    DifferentBodies {
        /// The snapshot's bodies, in stepping order.
        snapshot: Vec<BodyHandle>,
        /// The world's bodies, in stepping order.
        world: Vec<BodyHandle>,
    },
    /// A body's mesh differs in size from the snapshot's body of the same handle (the
    /// snapshot is of another world).
    #[error("body {body:?} has another mesh than in the snapshot")]
    DifferentMesh {
        /// The body.
        body: BodyHandle,
    },
    /// The world's obstacles are not the snapshot's: one was added or removed since.
    #[error("the snapshot has {snapshot} obstacles, the world {world}, or other ones")]
    DifferentObstacles {
        /// The snapshot's obstacle count.
        snapshot: usize,
        /// The world's obstacle count.
        world: usize,
    },
}

impl WorldSnapshot {
    /// The bodies of the snapshot, in stepping order.
    pub fn bodies(&self) -> impl Iterator<Item = BodyHandle> + '_ {
        self.world.bodies()
    }
}

impl SoftWorld {
    /// The world's state now (see [`WorldSnapshot`]).
    pub fn snapshot(&self) -> WorldSnapshot {
        WorldSnapshot {
            world: self.clone(),
        }
    }

    /// [`SoftWorld::snapshot`] into `snapshot`, reusing the bodies' buffers (the islands' are
    /// allocated again; see the module docs' cost).
    pub fn snapshot_into(&self, snapshot: &mut WorldSnapshot) {
        snapshot.world.clone_from(self);
    }

    /// Puts the world back in the state `snapshot` was taken in: the next step is the one that
    /// followed the snapshot (bit for bit, unless a body's PD system was rebuilt since; see
    /// [`WorldSnapshot`]). Settings are restored too.
    ///
    /// # Errors
    /// A [`SnapshotError`] where the snapshot is of other bodies or obstacles (one was added or
    /// removed since, or it is another world's); the world is then unchanged.
    pub fn restore(&mut self, snapshot: &WorldSnapshot) -> Result<(), SnapshotError> {
        let saved = &snapshot.world;
        if saved.body_ids.ids() != self.body_ids.ids() {
            return Err(SnapshotError::DifferentBodies {
                snapshot: saved.bodies().collect(),
                world: self.bodies().collect(),
            });
        }
        for ((&id, body), kept) in self
            .body_ids
            .ids()
            .iter()
            .zip(&self.bodies)
            .zip(&saved.bodies)
        {
            let same = body.mesh.vertex_count() == kept.mesh.vertex_count()
                && body.mesh.tet_count() == kept.mesh.tet_count();
            if !same {
                return Err(SnapshotError::DifferentMesh {
                    body: BodyHandle(id),
                });
            }
        }
        if saved.obstacle_ids.ids() != self.obstacle_ids.ids() {
            return Err(SnapshotError::DifferentObstacles {
                snapshot: saved.obstacles.len(),
                world: self.obstacles.len(),
            });
        }
        // Body by body (the checks above make the lists match), each live system handed back
        // where its factor is the snapshot's body's.
        for (body, kept) in self.bodies.iter_mut().zip(&saved.bodies) {
            let generation = body.ws.columns.generation();
            let system = body.pd.0.take();
            body.clone_from(kept);
            if system.is_some() && body.ws.columns.generation() == generation {
                body.pd.0 = system;
                // The grab spring's target lives in the system too (the right-hand side).
                if let (Some(pd), Some(grab)) = (body.pd.0.as_mut(), body.grab) {
                    pd.set_spring_target(grab.target);
                }
            }
        }
        let next_id = self.next_id.max(saved.next_id);
        self.clone_all_but_bodies_from(saved);
        self.next_id = next_id;
        Ok(())
    }
}
