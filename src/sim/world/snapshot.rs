//! [`WorldSnapshot`]: the whole state of a [`SoftWorld`] at one moment, taken with
//! [`SoftWorld::snapshot`] and put back with [`SoftWorld::restore`], for rollback netcode and
//! replays (predict, roll back, re-simulate).
//!
//! A snapshot holds everything a later step reads: positions and velocities, the last good
//! state, materials, pins, attachments and their targets, grab springs, sleeping and settling
//! clocks, the obstacles' poses and velocities, the coupled rigid bodies' state, the contact
//! memory (the normal and friction forces the next step starts from), the warm starts (the
//! local step's rotations, the cached `A^-1` columns, and what each island slot carries from
//! step to step: the contact subspace's kept matrix and factor and the MPRGP's norm-estimate
//! vector) and the Newton solver's state. So the step after a restore is the step after the
//! snapshot, bit for bit (`tests/sim_snapshot.rs`).
//!
//! What it leaves out is scratch (every buffer a step writes before it reads it: the
//! predictions, the local step's projections, the right-hand sides, the BVHs, the islands'
//! iterates and rows) and each body's PD system (its matrix and factor), a function of its
//! mesh, material, pins, attachments, grab spring and time step: a restore keeps the live
//! body's system where it is the factor the snapshot's body had (the cached columns'
//! generation identifies it, and a large body's collision-prone region, `crate::sim::prone`,
//! which the state keeps, must be the one its factor is ordered for), and otherwise the body
//! builds it again, localized to the kept region, before its next step.
//! A restore across such an edit (a material or pin changed after the snapshot) therefore
//! replays to the solver's tolerance rather than bit for bit: the rebuilt factor has no
//! cached columns yet.
//!
//! Cost: copies of the state into the buffers a kept snapshot (or the restored world) already
//! has, so a rollback loop allocates nothing once they are warm (`tests/sim_allocations.rs`);
//! the cached columns are shared with the world, not copied. The exceptions allocate: the
//! Newton solver's state (its factor is copied), and an obstacle's mesh or hull shape that
//! changed since. `cargo bench --bench pile` measures it on the pile scene (20 bodies, 3,590
//! vertices).

use thiserror::Error;

use super::SoftWorld;
use super::body::SoftBody;
use super::handles::BodyHandle;

/// A [`SoftWorld`]'s state at one moment (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct WorldSnapshot {
    /// The world's state: its bodies without their PD systems, and no scratch.
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
        let mut snapshot = WorldSnapshot::default();
        self.snapshot_into(&mut snapshot);
        snapshot
    }

    /// [`SoftWorld::snapshot`] into `snapshot`, reusing its buffers: no allocation where they
    /// already hold a state of the same bodies at least as large (see the module docs for the
    /// exceptions).
    pub fn snapshot_into(&self, snapshot: &mut WorldSnapshot) {
        let kept = &mut snapshot.world;
        if kept.body_ids.ids() != self.body_ids.ids() {
            kept.bodies = self.bodies.iter().map(SoftBody::empty_like).collect();
        }
        for (kept, body) in kept.bodies.iter_mut().zip(&self.bodies) {
            kept.copy_state_from(body);
        }
        kept.copy_all_but_bodies_from(self);
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
        // Body by body (the checks above make the lists match), each live system kept where
        // its factor is the snapshot's body's.
        for (body, kept) in self.bodies.iter_mut().zip(&saved.bodies) {
            let generation = body.ws.columns.generation();
            body.copy_state_from(kept);
            if body.ws.columns.generation() != generation || !body.localized_as_kept() {
                body.pd.0 = None;
            } else if let (Some(pd), Some(grab)) = (body.pd.0.as_mut(), body.grab) {
                // The grab spring's target lives in the system too (the right-hand side).
                pd.set_spring_target(grab.target);
            }
        }
        let next_id = self.next_id.max(saved.next_id);
        self.copy_all_but_bodies_from(saved);
        self.next_id = next_id;
        Ok(())
    }

    /// Everything of `source` but its bodies that a later step reads, into `self` (buffers
    /// reused): the second half of a snapshot's copy and of a restore.
    fn copy_all_but_bodies_from(&mut self, source: &Self) {
        let Self {
            settings,
            bodies: _,
            body_ids,
            obstacles,
            obstacle_ids,
            next_id,
            state,
        } = source;
        self.settings = *settings;
        self.body_ids.clone_from(body_ids);
        self.obstacles.clone_from(obstacles);
        self.obstacle_ids.clone_from(obstacle_ids);
        self.next_id = *next_id;
        self.state.copy_state_from(state);
    }
}
