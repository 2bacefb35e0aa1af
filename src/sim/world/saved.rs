//! [`SavedWorld`]: what a saved game needs of a [`SoftWorld`], as plain data, and its compact
//! versioned binary form ([`SavedWorld::to_bytes`], [`SavedWorld::from_bytes`]).
//!
//! A saved world holds, per body in stepping order, its vertices' positions (m), velocities
//! (m/s), pins, attachment stiffnesses (N/m), the pins' and attachments' targets (m), its
//! sleeping state (with where its present rest began) and the rotations its local step
//! starts from; per obstacle its pose and velocities; and the contact and friction forces
//! the next step starts from. That is the state a game cannot rebuild from its own assets;
//! the meshes, materials, settings, colliders and collision groups are the game's, and the
//! world that loads a file must have the same bodies (vertex and tet counts, in the same
//! order) and the same number of obstacles.
//!
//! Loading ([`SoftWorld::load`]) puts all of it back exactly; the islands' kept contact
//! systems start empty. Every body is unfrozen and released from a grab. A loaded world then
//! replays the saved run bit for bit in `tests/sim_saved.rs` (soft-soft contact, a pin, an
//! attachment and a moving obstacle), so a file can also hand a lockstep game's state to a
//! player who joins late. The exception is what an island's solve carries from step to step
//! and the file does not hold (the contact subspace's kept matrix and its factor, keyed by
//! factors of this process, and the MPRGP's norm-estimate vector; a [`super::WorldSnapshot`]
//! holds them): where a later step would have reused them (contacts that come back unchanged,
//! as under a body resting on the floor, or a rigid body coupled two ways), the replay agrees
//! to round-off (2e-10 m and 2.5e-9 rad over 30 steps of a rigid crate landing on a slab). The Newton solver's state (the factor of an earlier Newton matrix its solves correct
//! against) is not in the file either: a load starts it afresh, so that a file replays the
//! same in any world, and the first step agrees with the saved run's to the solver's tolerance
//! (1.6e-6 m where bodies were being pushed; a chaotic scene then diverges). A large body's
//! collision-prone region (`crate::sim::prone`) is not in the file either: a loaded body orders
//! its factor as a new one does until its contacts build a region again, so its replay differs
//! from the saved run by round-off, not bit for bit. Without the rotations
//! (72 bytes per tet, more than the rest of a body together) the replay drifts from round-off:
//! 0.1 mm after 40 steps where a pusher met the bodies, measured when they were left out.
//!
//! The binary form: the magic `BDSAVE`, a format version ([`SAVED_WORLD_VERSION`]), the
//! payload's length and its FNV-1a checksum, then the payload, every number little-endian:
//! per body its vertex and tet counts, sleep flag, rest and slow times, positions,
//! velocities, targets (3 `f64` per vertex each), pins (one bit per vertex), attachment
//! stiffnesses, friction forces, rotations (9 `f64` per tet) and the rest anchor (3 `f64`
//! per vertex, or none); per obstacle its position, rotation (quaternion `i, j, k, w`),
//! linear and angular velocity and coupling warm start; then the contact forces.
//! Decoding never trusts a count: a length that the remaining bytes cannot hold is
//! [`SavedWorldError::Truncated`], so corrupt or hostile bytes give a typed error, never a
//! panic or a large allocation. `SavedWorld` also implements serde's `Serialize` and
//! `Deserialize`, for a game that keeps its saves in a format of its own; what any decoder
//! produces is checked again by [`SoftWorld::load`].

use nalgebra::{Quaternion, UnitQuaternion};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::SoftWorld;
use super::body::Rebuild;
use crate::sim::math::Vec3;

/// The version [`SavedWorld::to_bytes`] writes and the only one [`SavedWorld::from_bytes`]
/// reads.
pub const SAVED_WORLD_VERSION: u32 = 2;

/// The first bytes of the binary form.
const MAGIC: &[u8; 8] = b"BDSAVE\0\0";

/// Bytes before the payload: magic, version, payload length, checksum.
const HEADER_BYTES: usize = 8 + 4 + 8 + 8;

/// What a saved game needs of a world (see the module docs).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SavedWorld {
    /// The bodies, in stepping order.
    pub bodies: Vec<SavedBody>,
    /// The obstacles, in order.
    pub obstacles: Vec<SavedObstacle>,
    /// The contact forces the next step starts from.
    pub contacts: SavedContacts,
}

/// The contact forces a [`SavedWorld`]'s next step starts from (the friction it carries over,
/// and the normal forces its contact QPs start from), keyed by the bodies' and vertices'
/// indices.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SavedContacts {
    /// Per friction group (a body and what it touches): its key and total force (N).
    pub groups: Vec<([u32; 2], [f64; 3])>,
    /// Per contact that carried friction: its key, its own part of the friction (N) and its
    /// normal.
    pub friction: Vec<([u32; 4], [f64; 3], [f64; 3])>,
    /// Per contact that pushed: its key, its normal force (N) and its normal.
    pub normal_forces: Vec<([u32; 4], f64, [f64; 3])>,
}

/// One body's state in a [`SavedWorld`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SavedBody {
    /// The body's tet count (checked on load).
    pub tets: u32,
    /// Vertex positions (m, world).
    pub positions: Vec<[f64; 3]>,
    /// Vertex velocities (m/s).
    pub velocities: Vec<[f64; 3]>,
    /// Per vertex: where its pin or attachment pulls it (m; meaningless for free vertices).
    pub targets: Vec<[f64; 3]>,
    /// Per vertex: whether it is pinned.
    pub pinned: Vec<bool>,
    /// Per vertex: its attachment spring's stiffness (N/m; 0 for none).
    pub attachment_stiffness: Vec<f64>,
    /// Whether it was asleep (it sleeps again where it is after the load).
    pub asleep: bool,
    /// How long it has been at rest, for sleeping (s).
    pub still_for: f64,
    /// Where its vertices were when that rest began (m), which sleeping measures their
    /// movement from; empty if none began (or it sleeps). Missing in a serde form written
    /// before it existed: empty, and the rest starts over at the load.
    #[serde(default)]
    pub still_anchor: Vec<[f64; 3]>,
    /// How long it has been slow, for settling (s).
    pub slow_for: f64,
    /// Per free (unpinned) vertex: the friction force it carries into the next step (N); empty
    /// if none.
    pub friction: Vec<[f64; 3]>,
    /// Per tet: the right singular vectors of its last local step, row-major, which start the
    /// next one; empty if the body has not stepped yet.
    pub rotations: Vec<[f64; 9]>,
}

/// One obstacle's state in a [`SavedWorld`].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SavedObstacle {
    /// Position (m).
    pub position: [f64; 3],
    /// Rotation as a unit quaternion `[i, j, k, w]`.
    pub rotation: [f64; 4],
    /// Linear velocity (m/s).
    pub linear_velocity: [f64; 3],
    /// Angular velocity (rad/s).
    pub angular_velocity: [f64; 3],
    /// A rigid body coupled two ways: its last substep's displacement from its free motion (m,
    /// rad) where it was touched, which its next coupled solve starts from (zero otherwise).
    pub coupling_warm_start: [[f64; 3]; 2],
}

/// Why a saved world could not be decoded or loaded (the world is left as it was).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SavedWorldError {
    /// The bytes do not start with the saved-world magic: not a saved world.
    #[error("not a saved world (wrong magic bytes)")]
    NotASavedWorld,
    /// A saved world of another format version.
    #[error("saved world format version {found}; this build reads version {supported}")]
    UnsupportedVersion {
        /// The file's version.
        found: u32,
        /// [`SAVED_WORLD_VERSION`].
        supported: u32,
    },
    /// The bytes end before the data they announce.
    #[error("the saved world is truncated")]
    Truncated,
    /// The payload does not match its checksum, or bytes follow it.
    #[error("the saved world is corrupt ({0})")]
    Corrupt(&'static str),
    /// The save has another number of bodies than the world.
    #[error("the save has {saved} bodies, the world {world}")]
    DifferentBodies {
        /// The save's body count.
        saved: usize,
        /// The world's body count.
        world: usize,
    },
    /// A saved body's vertex or tet count differs from the world's body at its place in the
    /// stepping order (a save of another scene, or bodies made in another order).
    #[error(
        "saved body {body} has {saved_vertices} vertices and {saved_tets} tets, the world's {vertices} and {tets}"
    )]
    DifferentMesh {
        /// The body's index in stepping order.
        body: usize,
        /// The saved body's vertex count.
        saved_vertices: usize,
        /// The saved body's tet count.
        saved_tets: usize,
        /// The world's body's vertex count.
        vertices: usize,
        /// The world's body's tet count.
        tets: usize,
    },
    /// The save has another number of obstacles than the world.
    #[error("the save has {saved} obstacles, the world {world}")]
    DifferentObstacles {
        /// The save's obstacle count.
        saved: usize,
        /// The world's obstacle count.
        world: usize,
    },
    /// A saved body's list does not have one entry per vertex, free vertex or tet.
    #[error("saved body {body}: {what} has {found} entries, not {expected}")]
    WrongLength {
        /// The body's index in stepping order.
        body: usize,
        /// Which list.
        what: &'static str,
        /// Its length.
        found: usize,
        /// The body's count of vertices, free vertices or tets.
        expected: usize,
    },
    /// A saved value is not finite, or out of range (a negative stiffness, a zero rotation).
    #[error("saved {what} of {item} is not valid")]
    InvalidValue {
        /// Which value.
        what: &'static str,
        /// `"body i"`, `"obstacle i"` or `"the contact forces"`.
        item: String,
    },
}

impl SavedWorld {
    /// The compact binary form (see the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(self.encoded_len());
        put_u32(&mut payload, self.bodies.len() as u32);
        for body in &self.bodies {
            put_u32(&mut payload, body.positions.len() as u32);
            put_u32(&mut payload, body.tets);
            put_u32(&mut payload, u32::from(body.asleep));
            put_f64(&mut payload, body.still_for);
            put_f64(&mut payload, body.slow_for);
            for list in [&body.positions, &body.velocities, &body.targets] {
                // Written at the vertex count: `load` refuses a body whose lists differ.
                for i in 0..body.positions.len() {
                    let p = list.get(i).copied().unwrap_or([f64::NAN; 3]);
                    p.iter().for_each(|&c| put_f64(&mut payload, c));
                }
            }
            let mut bits = vec![0u8; body.positions.len().div_ceil(8)];
            for (i, _) in body.pinned.iter().enumerate().filter(|(_, p)| **p) {
                if let Some(byte) = bits.get_mut(i / 8) {
                    *byte |= 1 << (i % 8);
                }
            }
            payload.extend_from_slice(&bits);
            for i in 0..body.positions.len() {
                let k = body.attachment_stiffness.get(i).copied();
                put_f64(&mut payload, k.unwrap_or(f64::NAN));
            }
            put_u32(&mut payload, body.friction.len() as u32);
            body.friction
                .iter()
                .flatten()
                .for_each(|&c| put_f64(&mut payload, c));
            put_u32(&mut payload, body.rotations.len() as u32);
            body.rotations
                .iter()
                .flatten()
                .for_each(|&c| put_f64(&mut payload, c));
            put_u32(&mut payload, body.still_anchor.len() as u32);
            body.still_anchor
                .iter()
                .flatten()
                .for_each(|&c| put_f64(&mut payload, c));
        }
        put_u32(&mut payload, self.obstacles.len() as u32);
        for o in &self.obstacles {
            let values = o
                .position
                .iter()
                .chain(&o.rotation)
                .chain(&o.linear_velocity)
                .chain(&o.angular_velocity)
                .chain(o.coupling_warm_start.iter().flatten());
            values.for_each(|&c| put_f64(&mut payload, c));
        }
        let c = &self.contacts;
        put_u32(&mut payload, c.groups.len() as u32);
        for (key, force) in &c.groups {
            key.iter().for_each(|&k| put_u32(&mut payload, k));
            force.iter().for_each(|&f| put_f64(&mut payload, f));
        }
        put_u32(&mut payload, c.friction.len() as u32);
        for (key, local, normal) in &c.friction {
            key.iter().for_each(|&k| put_u32(&mut payload, k));
            local
                .iter()
                .chain(normal)
                .for_each(|&f| put_f64(&mut payload, f));
        }
        put_u32(&mut payload, c.normal_forces.len() as u32);
        for (key, lambda, normal) in &c.normal_forces {
            key.iter().for_each(|&k| put_u32(&mut payload, k));
            put_f64(&mut payload, *lambda);
            normal.iter().for_each(|&f| put_f64(&mut payload, f));
        }
        let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, SAVED_WORLD_VERSION);
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&fnv1a(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// The payload's length in bytes.
    fn encoded_len(&self) -> usize {
        let bodies: usize = self
            .bodies
            .iter()
            .map(|b| {
                40 + b.positions.len() * (9 * 8 + 8)
                    + b.positions.len().div_ceil(8)
                    + b.friction.len() * 24
                    + b.rotations.len() * 72
                    + b.still_anchor.len() * 24
            })
            .sum();
        let c = &self.contacts;
        let contacts =
            12 + c.groups.len() * 32 + c.friction.len() * 64 + c.normal_forces.len() * 48;
        4 + bodies + 4 + self.obstacles.len() * 19 * 8 + contacts
    }

    /// Decodes [`SavedWorld::to_bytes`]' form.
    ///
    /// # Errors
    /// [`SavedWorldError::NotASavedWorld`], [`SavedWorldError::UnsupportedVersion`],
    /// [`SavedWorldError::Truncated`] or [`SavedWorldError::Corrupt`]; never a panic, whatever
    /// the bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SavedWorldError> {
        let mut header = Reader(bytes);
        if header.take(8)? != MAGIC {
            return Err(SavedWorldError::NotASavedWorld);
        }
        let version = header.u32()?;
        if version != SAVED_WORLD_VERSION {
            return Err(SavedWorldError::UnsupportedVersion {
                found: version,
                supported: SAVED_WORLD_VERSION,
            });
        }
        let len = header.u64()?;
        let checksum = header.u64()?;
        let rest = header.0;
        if (rest.len() as u64) < len {
            return Err(SavedWorldError::Truncated);
        }
        if rest.len() as u64 > len {
            return Err(SavedWorldError::Corrupt("bytes after the payload"));
        }
        if fnv1a(rest) != checksum {
            return Err(SavedWorldError::Corrupt("checksum mismatch"));
        }
        let mut r = Reader(rest);
        let body_count = r.count(36)?;
        let mut bodies = Vec::with_capacity(body_count);
        for _ in 0..body_count {
            let n = r.u32()? as usize;
            let tets = r.u32()?;
            let asleep = match r.u32()? {
                0 => false,
                1 => true,
                _ => {
                    return Err(SavedWorldError::Corrupt(
                        "a sleep flag that is neither 0 nor 1",
                    ));
                }
            };
            let (still_for, slow_for) = (r.f64()?, r.f64()?);
            // 9 f64 and one stiffness per vertex, and the pin bits.
            if (r.0.len() as u64) < n as u64 * 80 + n.div_ceil(8) as u64 {
                return Err(SavedWorldError::Truncated);
            }
            let mut vectors = || -> Result<Vec<[f64; 3]>, SavedWorldError> {
                (0..n).map(|_| Ok([r.f64()?, r.f64()?, r.f64()?])).collect()
            };
            let positions = vectors()?;
            let velocities = vectors()?;
            let targets = vectors()?;
            let bits = r.take(n.div_ceil(8))?;
            let pinned = (0..n).map(|i| bits[i / 8] & (1 << (i % 8)) != 0).collect();
            let attachment_stiffness = (0..n).map(|_| r.f64()).collect::<Result<_, _>>()?;
            let friction = (0..r.count(24)?)
                .map(|_| Ok([r.f64()?, r.f64()?, r.f64()?]))
                .collect::<Result<_, SavedWorldError>>()?;
            let rotations = (0..r.count(72)?)
                .map(|_| {
                    let mut m = [0.0; 9];
                    for c in &mut m {
                        *c = r.f64()?;
                    }
                    Ok(m)
                })
                .collect::<Result<_, SavedWorldError>>()?;
            let still_anchor = (0..r.count(24)?)
                .map(|_| Ok([r.f64()?, r.f64()?, r.f64()?]))
                .collect::<Result<_, SavedWorldError>>()?;
            bodies.push(SavedBody {
                tets,
                positions,
                velocities,
                targets,
                pinned,
                attachment_stiffness,
                asleep,
                still_for,
                still_anchor,
                slow_for,
                friction,
                rotations,
            });
        }
        let obstacle_count = r.count(19 * 8)?;
        let mut obstacles = Vec::with_capacity(obstacle_count);
        for _ in 0..obstacle_count {
            let mut v = [0.0; 19];
            for c in &mut v {
                *c = r.f64()?;
            }
            obstacles.push(SavedObstacle {
                position: [v[0], v[1], v[2]],
                rotation: [v[3], v[4], v[5], v[6]],
                linear_velocity: [v[7], v[8], v[9]],
                angular_velocity: [v[10], v[11], v[12]],
                coupling_warm_start: [[v[13], v[14], v[15]], [v[16], v[17], v[18]]],
            });
        }
        let mut contacts = SavedContacts::default();
        for _ in 0..r.count(32)? {
            let key = [r.u32()?, r.u32()?];
            contacts.groups.push((key, [r.f64()?, r.f64()?, r.f64()?]));
        }
        for _ in 0..r.count(64)? {
            let key = [r.u32()?, r.u32()?, r.u32()?, r.u32()?];
            let local = [r.f64()?, r.f64()?, r.f64()?];
            contacts
                .friction
                .push((key, local, [r.f64()?, r.f64()?, r.f64()?]));
        }
        for _ in 0..r.count(48)? {
            let key = [r.u32()?, r.u32()?, r.u32()?, r.u32()?];
            let lambda = r.f64()?;
            contacts
                .normal_forces
                .push((key, lambda, [r.f64()?, r.f64()?, r.f64()?]));
        }
        if !r.0.is_empty() {
            return Err(SavedWorldError::Corrupt("bytes after the contact forces"));
        }
        Ok(Self {
            bodies,
            obstacles,
            contacts,
        })
    }
}

impl SoftWorld {
    /// What a saved game needs of the world now (see [`SavedWorld`]).
    pub fn save(&self) -> SavedWorld {
        SavedWorld {
            bodies: self
                .bodies
                .iter()
                .map(|b| SavedBody {
                    tets: b.mesh.tet_count() as u32,
                    positions: b.x.iter().map(array).collect(),
                    velocities: b.v.iter().map(array).collect(),
                    targets: b.targets.iter().map(array).collect(),
                    pinned: b.pinned.clone(),
                    attachment_stiffness: b.attach_k.clone(),
                    asleep: b.asleep,
                    still_for: b.still_for,
                    still_anchor: b.still_anchor.iter().map(array).collect(),
                    slow_for: b.slow_for,
                    friction: b.ws.friction.iter().map(array).collect(),
                    rotations: match b.ws.frames.covers(b.mesh.tet_count()) {
                        true => b.ws.frames.rows(b.mesh.tet_count()).collect(),
                        false => Vec::new(),
                    },
                })
                .collect(),
            obstacles: self
                .obstacles
                .iter()
                .map(|o| {
                    let q = o.rotation().into_inner();
                    SavedObstacle {
                        position: array(&o.position()),
                        rotation: [q.i, q.j, q.k, q.w],
                        linear_velocity: array(&o.linear_velocity()),
                        angular_velocity: array(&o.angular_velocity()),
                        coupling_warm_start: o.coupled.warm.map(|w| array(&w)),
                    }
                })
                .collect(),
            contacts: {
                let (groups, friction, normal_forces) = self.state.contact_memory().parts();
                SavedContacts {
                    groups: groups.iter().map(|(k, f)| ([k.0, k.1], array(f))).collect(),
                    friction: friction
                        .iter()
                        .map(|(k, l, n)| (*k, array(l), array(n)))
                        .collect(),
                    normal_forces: normal_forces
                        .iter()
                        .map(|(k, f, n)| (*k, *f, array(n)))
                        .collect(),
                }
            },
        }
    }

    /// Puts a saved world's state into this world (see [`SavedWorld`] for what is restored
    /// exactly and what starts cold). Every value is checked before anything changes.
    ///
    /// # Errors
    /// [`SavedWorldError::DifferentBodies`], [`SavedWorldError::DifferentMesh`] and
    /// [`SavedWorldError::DifferentObstacles`] for a save of another world,
    /// [`SavedWorldError::WrongLength`] and
    /// [`SavedWorldError::InvalidValue`]; the world is then unchanged.
    pub fn load(&mut self, saved: &SavedWorld) -> Result<(), SavedWorldError> {
        self.check_saved(saved)?;
        let margin = self.settings.contact_margin;
        for (b, s) in self.bodies.iter_mut().zip(&saved.bodies) {
            b.wake();
            b.frozen = None;
            if b.grab.take().is_some() {
                b.rebuild = b.rebuild.max_with(Rebuild::Numeric);
            }
            if b.pinned != s.pinned {
                b.pinned.clone_from(&s.pinned);
                b.rebuild = Rebuild::Full;
            }
            if b.attach_k != s.attachment_stiffness {
                b.attach_k.clone_from(&s.attachment_stiffness);
                b.rebuild = b.rebuild.max_with(Rebuild::Numeric);
            }
            for (dst, src) in [(&mut b.x, &s.positions), (&mut b.targets, &s.targets)] {
                dst.iter_mut().zip(src).for_each(|(d, p)| *d = vector(p));
            }
            b.v.iter_mut()
                .zip(&s.velocities)
                .for_each(|(d, p)| *d = vector(p));
            b.good_x.clone_from(&b.x);
            b.good_v.clone_from(&b.v);
            match s.rotations.is_empty() {
                true => b.ws.frames.reset(),
                false => b.ws.frames.set_rows(&s.rotations),
            }
            b.ws.friction.clear();
            b.ws.friction.extend(s.friction.iter().map(vector));
            // The Newton solver's state (a factor of an earlier Newton matrix) is not in the
            // file: it starts afresh, as in a world built again, so that a load replays the
            // same whichever world it goes into.
            b.newton = None;
            if s.asleep {
                b.fall_asleep(margin);
            }
            b.still_for = s.still_for;
            b.still_anchor.clear();
            b.still_anchor.extend(s.still_anchor.iter().map(vector));
            b.slow_for = s.slow_for;
        }
        for (o, s) in self.obstacles.iter_mut().zip(&saved.obstacles) {
            let rotation = UnitQuaternion::new_normalize(quaternion(&s.rotation));
            o.set_state(
                vector(&s.position),
                rotation,
                vector(&s.linear_velocity),
                vector(&s.angular_velocity),
            )
            .expect("checked by check_saved");
            o.coupled = Default::default();
            o.coupled.warm = s.coupling_warm_start.map(|w| vector(&w));
        }
        // The islands' kept systems and the wake pass's record belong to the state before the
        // load.
        self.state = Default::default();
        let c = &saved.contacts;
        self.state.contact_memory_mut().set_parts(
            c.groups.iter().map(|(k, f)| ((k[0], k[1]), vector(f))),
            c.friction
                .iter()
                .map(|(k, l, n)| (*k, vector(l), vector(n))),
            c.normal_forces.iter().map(|(k, f, n)| (*k, *f, vector(n))),
        );
        Ok(())
    }

    /// Checks `saved` against this world (see [`SoftWorld::load`]).
    fn check_saved(&self, saved: &SavedWorld) -> Result<(), SavedWorldError> {
        if saved.bodies.len() != self.bodies.len() {
            return Err(SavedWorldError::DifferentBodies {
                saved: saved.bodies.len(),
                world: self.bodies.len(),
            });
        }
        for ((i, b), s) in self.bodies.iter().enumerate().zip(&saved.bodies) {
            let n = b.x.len();
            if s.positions.len() != n || s.tets as usize != b.mesh.tet_count() {
                return Err(SavedWorldError::DifferentMesh {
                    body: i,
                    saved_vertices: s.positions.len(),
                    saved_tets: s.tets as usize,
                    vertices: n,
                    tets: b.mesh.tet_count(),
                });
            }
            let lengths = [
                ("velocities", s.velocities.len()),
                ("targets", s.targets.len()),
                ("pinned", s.pinned.len()),
                ("attachment_stiffness", s.attachment_stiffness.len()),
            ];
            for (what, found) in lengths {
                if found != n {
                    return Err(SavedWorldError::WrongLength {
                        body: i,
                        what,
                        found,
                        expected: n,
                    });
                }
            }
            let invalid = |what| SavedWorldError::InvalidValue {
                what,
                item: format!("body {i}"),
            };
            let finite = |list: &[[f64; 3]]| list.iter().flatten().all(|c| c.is_finite());
            for (what, list) in [
                ("positions", &s.positions),
                ("velocities", &s.velocities),
                ("targets", &s.targets),
            ] {
                if !finite(list) {
                    return Err(invalid(what));
                }
            }
            if !s
                .attachment_stiffness
                .iter()
                .all(|k| k.is_finite() && *k >= 0.0)
            {
                return Err(invalid("attachment stiffness"));
            }
            if !(s.still_for.is_finite() && s.still_for >= 0.0) {
                return Err(invalid("rest time"));
            }
            if !(s.slow_for.is_finite() && s.slow_for >= 0.0) {
                return Err(invalid("slow time"));
            }
            if !s.still_anchor.is_empty() && s.still_anchor.len() != s.positions.len() {
                return Err(SavedWorldError::WrongLength {
                    body: i,
                    what: "rest anchor (one per vertex)",
                    found: s.still_anchor.len(),
                    expected: s.positions.len(),
                });
            }
            if !finite(&s.still_anchor) {
                return Err(invalid("rest anchor"));
            }
            let free = s.pinned.iter().filter(|p| !**p).count();
            if !s.friction.is_empty() && s.friction.len() != free {
                return Err(SavedWorldError::WrongLength {
                    body: i,
                    what: "friction (one per free vertex)",
                    found: s.friction.len(),
                    expected: free,
                });
            }
            if !finite(&s.friction) {
                return Err(invalid("friction"));
            }
            let tets = b.mesh.tet_count();
            if !s.rotations.is_empty() && s.rotations.len() != tets {
                return Err(SavedWorldError::WrongLength {
                    body: i,
                    what: "rotations (one per tet)",
                    found: s.rotations.len(),
                    expected: tets,
                });
            }
            if !s.rotations.iter().all(is_rotation) {
                return Err(invalid("rotations"));
            }
        }
        if saved.obstacles.len() != self.obstacles.len() {
            return Err(SavedWorldError::DifferentObstacles {
                saved: saved.obstacles.len(),
                world: self.obstacles.len(),
            });
        }
        for (i, (o, s)) in self.obstacles.iter().zip(&saved.obstacles).enumerate() {
            let invalid = |what| SavedWorldError::InvalidValue {
                what,
                item: format!("obstacle {i}"),
            };
            let q = quaternion(&s.rotation);
            let norm = q.norm();
            if !(norm.is_finite() && norm > 1e-6) {
                return Err(invalid("rotation"));
            }
            let mut check = o.clone();
            check
                .set_state(
                    vector(&s.position),
                    UnitQuaternion::new_normalize(q),
                    vector(&s.linear_velocity),
                    vector(&s.angular_velocity),
                )
                .map_err(|_| invalid("pose or velocity"))?;
            if !s
                .coupling_warm_start
                .iter()
                .flatten()
                .all(|c| c.is_finite())
            {
                return Err(invalid("coupling warm start"));
            }
        }
        let c = &saved.contacts;
        let invalid = |what| SavedWorldError::InvalidValue {
            what,
            item: "the contact forces".to_string(),
        };
        let finite = |v: &[f64; 3]| v.iter().all(|c| c.is_finite());
        if !c.groups.iter().all(|(_, f)| finite(f))
            || !c.friction.iter().all(|(_, l, n)| finite(l) && finite(n))
            || !c
                .normal_forces
                .iter()
                .all(|(_, f, n)| f.is_finite() && *f >= 0.0 && finite(n))
        {
            return Err(invalid("force"));
        }
        Ok(())
    }
}

/// `[x, y, z]` of a vector.
fn array(p: &Vec3) -> [f64; 3] {
    [p.x, p.y, p.z]
}

/// The vector of `[x, y, z]`.
fn vector(p: &[f64; 3]) -> Vec3 {
    Vec3::new(p[0], p[1], p[2])
}

/// The quaternion of `[i, j, k, w]`.
fn quaternion(q: &[f64; 4]) -> Quaternion<f64> {
    Quaternion::new(q[3], q[0], q[1], q[2])
}

/// Whether a row-major 3x3 matrix is a rotation to within 1e-6 (finite, `R'R = I`, det +1).
fn is_rotation(m: &[f64; 9]) -> bool {
    let r = nalgebra::Matrix3::from_row_slice(m);
    m.iter().all(|c| c.is_finite())
        && (r.transpose() * r - nalgebra::Matrix3::identity()).amax() < 1e-6
        && r.determinant() > 0.0
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_f64(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// 64-bit FNV-1a of `bytes`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The unread rest of the bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SavedWorldError> {
        if self.0.len() < n {
            return Err(SavedWorldError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, SavedWorldError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, SavedWorldError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn f64(&mut self) -> Result<f64, SavedWorldError> {
        Ok(f64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// A count of items of at least `min_bytes` each, no more than the rest can hold.
    fn count(&mut self, min_bytes: usize) -> Result<usize, SavedWorldError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_bytes) > self.0.len() {
            return Err(SavedWorldError::Truncated);
        }
        Ok(n)
    }
}
