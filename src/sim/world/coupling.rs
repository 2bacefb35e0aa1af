//! Two-way coupling with rigid bodies: a coupled obstacle
//! ([`crate::sim::ObstacleCollider::set_coupling`]) is a dynamic rigid body whose six end-pose unknowns
//! join the contact QP of every island it touches, so the soft bodies and the rigid body are
//! solved as one implicit step.
//!
//! The rigid body's engine (avian, say) integrates it; its state at the start of a substep is
//! the obstacle's. Over a substep of length `h` its free motion is `v_free = v + h a` (`a` its
//! acceleration from everything but the soft bodies, usually gravity) and `omega`, and the
//! step begins by placing the obstacle at the end of that motion ([`Coupling::begin`]): the
//! contacts are found against that pose. Its end pose is that pose displaced by
//! `d = (dx, dtheta)` (metres, radians about the centre of mass), and its part of the implicit
//! step's objective is `1/2 d' A_r d - d' h^2 f` with `A_r = diag(M, I) / h^2`, `f` the forces
//! applied to it (the reactions of the contacts' friction, iterated with the PD iterations
//! like the soft side's friction forces). A contact row of a soft point `p` against it, with
//! normal `n` and arm `r` (contact point minus centre of mass), becomes
//!
//! ```text
//! n . p - n . dx - (r x n) . dtheta >= c,
//! ```
//!
//! the first-order motion of the contact point. The rigid body's block is diagonal and exactly
//! invertible, so in the contact subspace (`island::dual`) it adds to the LCP's matrix
//! `S = J A^-1 J'` the term `h^2 (n_i . n_j / M + (r_i x n_i) . I^-1 (r_j x n_j))` between every
//! two rows on the body, to `q` the applied forces' displacement, and the multipliers give the
//! displacement `d = h^2 (f - sum_i lambda_i n_i) / M` (and likewise the rotation): the
//! coupled step of every PD iteration is exact, with no relaxation and no lag. Its rows share
//! the rigid body's unknowns, which MPRGP's bound projection cannot take (the rows must be
//! decoupled), so where an island's QP goes to MPRGP (more than `dual::MAX_DUAL_ROWS` rows, a
//! body whose columns do not fit, the Newton solver) the rigid body is *held* for that
//! iteration at a pose, and after it the pose moves towards the coupled solution by one
//! semi-implicit update with the soft side as springs of the stiffness the island matrix's
//! diagonal gives (`island::rigid`); the next substep starts from the last update. The body
//! ends at the held pose the soft bodies were solved against, so they never push it further
//! than they were pushed; where that pose still separates it from its contact patch faster
//! than the patch moves, the launch safeguard cuts the difference ([`Coupling::settle`]).
//! Measured: a 5 kg box landing on rubber under the Newton solver (two iterations per step)
//! rests within about 20 steps; pushed explicitly by the held pose's forces instead, it was
//! launched at 1.5 m/s in one step.
//!
//! Deviation: the rows are linear in `dtheta` (the contact point moves by `dtheta x r`), which
//! is exact to first order in the substep's rotation; the next substep finds the contacts
//! again at the rotated pose.
//!
//! After the iterations the obstacle is placed at its end pose with velocities
//! `v_free + dx / h`, `omega + dtheta / h` ([`Coupling::settle`]), so the velocity-level
//! contact LCP sees it moving. Its translation is one more vertex of that LCP, of its mass, in
//! each of its contacts (`step::respond`), so the LCP's impulses are shared by mass; their
//! torque is not applied (deviation, see there: explicitly applied, it spun a 3 g box). Its
//! contacts do not bounce (restitution 0: the rebound
//! pass treats obstacles as immovable, and its reaction would give a light body more than the
//! rebound). The change beyond the free motion is reported in
//! [`crate::sim::CouplingResponse`] for the rigid-body engine to add.
//!
//! Islands: bodies touching one coupled obstacle at the start of the step are one island
//! (their rows share its unknowns). A body that meets it only by re-detection during the step
//! solves in its own island; the body then takes the displacements of every island, summed.

use nalgebra::{Matrix3, UnitQuaternion};

use super::body::SoftBody;
use crate::sim::contact::{Contact, ObstacleCollider};
use crate::sim::math::Vec3;

/// No coupled body for this obstacle.
pub(crate) const NOT_COUPLED: u32 = u32::MAX;

/// What an island needs of a coupled rigid body in a substep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RigidState {
    /// `1 / M` (1/kg).
    pub inverse_mass: f64,
    /// Inverse inertia in the world frame at the substep's start (1/(kg m^2)).
    pub inverse_inertia: Matrix3<f64>,
    /// Centre of mass at the end of the free motion (m): the contacts' arms start here.
    pub center: Vec3,
}

/// What one island's last solve did to a coupled rigid body, from the island's rigid stage
/// (`island/rigid.rs`); [`Coupling::settle`] sums them over the islands.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RigidShare {
    /// The body's entry in the substep's [`Coupling`].
    pub entry: u32,
    /// Its end pose's displacement from the free end pose (m, rad).
    pub displacement: [Vec3; 2],
    /// Where the island's next held solve would hold it (m, rad).
    pub next: [Vec3; 2],
    /// The island's contact forces' angular impulse on it over the substep (N m s).
    pub angular_impulse: Vec3,
    /// The island's contacts with it.
    pub contacts: usize,
    /// Whether the island's last solve had it as an unknown.
    pub exact: bool,
}

/// One coupled rigid body in a substep.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// [`crate::sim::RigidCoupling::body`], or `None` for an obstacle that is a body alone.
    body: Option<u64>,
    mass: f64,
    state: RigidState,
    /// Free velocities over the substep: `v + h a`, `omega` (m/s, rad/s).
    free: [Vec3; 2],
    /// From the islands after the iterations (summed over them): the end pose's displacement
    /// from the free end pose (m, rad; the soft bodies' velocity change on it times `h`,
    /// whether solved or held), the contacts with it, and the contact forces' angular impulse
    /// over the substep (N m s).
    displacement: [Vec3; 2],
    contacts: usize,
    angular_impulse: Vec3,
    /// Whether every island touching it solved its last iteration with it as an unknown.
    exact: bool,
    /// The held pose an island that cannot solve it exactly starts from (m, rad): the last
    /// substep's next held pose, where it was touched.
    warm: [Vec3; 2],
    /// From the islands after the iterations: their next held poses, summed.
    next: [Vec3; 2],
    /// The velocity LCP's impulse on the body after the iterations (N s).
    impulse: Vec3,
    /// The linear velocity the launch safeguard takes back (m/s).
    cut: Vec3,
}

impl Entry {
    /// Centre of mass at the end of the substep (m).
    fn end_center(&self) -> Vec3 {
        self.state.center + self.displacement[0]
    }

    /// The velocities at the end of the substep (m/s, rad/s).
    fn velocities(&self, h: f64) -> (Vec3, Vec3) {
        (
            self.free[0] + self.displacement[0] / h + self.impulse / self.mass + self.cut,
            self.free[1] + self.displacement[1] / h,
        )
    }
}

/// The coupled rigid bodies of one substep.
#[derive(Debug, Default)]
pub(crate) struct Coupling {
    entries: Vec<Entry>,
    /// Per obstacle: its body's entry, or [`NOT_COUPLED`].
    entry_of: Vec<u32>,
    /// `(entry, obstacle, rotation at the substep's start)` of every coupled obstacle.
    members: Vec<(u32, u32, UnitQuaternion<f64>)>,
    /// Scratch of the launch safeguard: per entry, its contacts' summed normals, soft
    /// velocities and points, and their count.
    patches: Vec<(Vec3, Vec3, Vec3, usize)>,
}

clone_by_field!(Coupling {
    entries,
    entry_of,
    members,
    patches
});

impl Coupling {
    /// Whether any obstacle is coupled in this substep.
    pub fn any(&self) -> bool {
        !self.entries.is_empty()
    }

    /// The coupled body of obstacle `obstacle`, or [`NOT_COUPLED`].
    pub fn entry_of(&self, obstacle: u32) -> u32 {
        self.entry_of
            .get(obstacle as usize)
            .copied()
            .unwrap_or(NOT_COUPLED)
    }

    /// Number of coupled bodies.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The state of coupled body `entry` in this substep.
    pub fn state(&self, entry: u32) -> RigidState {
        self.entries[entry as usize].state
    }

    /// Where an island that cannot solve coupled body `entry` exactly holds it first (m, rad,
    /// world frame, from its free motion's end): the last substep's next held pose, or zero.
    pub fn warm(&self, entry: u32) -> [Vec3; 2] {
        self.entries[entry as usize].warm
    }

    /// Before a substep: every coupled body from its obstacles' state at the substep's start
    /// (obstacles sharing a [`crate::sim::RigidCoupling::body`] are one body; the first one's
    /// mass properties and state stand for it), its obstacles placed at the end of its free
    /// motion.
    pub fn begin(&mut self, obstacles: &mut [ObstacleCollider], h: f64) {
        self.entries.clear();
        self.members.clear();
        self.entry_of.clear();
        self.entry_of.resize(obstacles.len(), NOT_COUPLED);
        for (k, o) in obstacles.iter().enumerate() {
            let Some(c) = o.coupling().copied() else {
                continue;
            };
            let rotation = o.rotation();
            let shared = c
                .body
                .and_then(|id| self.entries.iter().position(|e| e.body == Some(id)));
            let entry = match shared {
                Some(entry) => entry as u32,
                None => {
                    let free = [
                        o.center_velocity() + h * c.acceleration,
                        o.angular_velocity(),
                    ];
                    self.entries.push(Entry {
                        body: c.body,
                        mass: c.mass,
                        state: RigidState {
                            inverse_mass: 1.0 / c.mass,
                            inverse_inertia: c.world_inverse_inertia(&rotation),
                            center: o.center_of_mass() + h * free[0],
                        },
                        free,
                        displacement: [Vec3::zeros(); 2],
                        contacts: 0,
                        angular_impulse: Vec3::zeros(),
                        exact: true,
                        warm: o.coupled.warm,
                        next: [Vec3::zeros(); 2],
                        impulse: Vec3::zeros(),
                        cut: Vec3::zeros(),
                    });
                    (self.entries.len() - 1) as u32
                }
            };
            self.entry_of[k] = entry;
            self.members.push((entry, k as u32, rotation));
        }
        self.place_all(obstacles, h);
    }

    /// Every coupled obstacle at its body's end pose (by the current displacement) and
    /// velocities.
    fn place_all(&self, obstacles: &mut [ObstacleCollider], h: f64) {
        for &(entry, k, start) in &self.members {
            let e = &self.entries[entry as usize];
            let turn = UnitQuaternion::from_scaled_axis(h * e.free[1] + e.displacement[1]);
            let (linear, angular) = e.velocities(h);
            obstacles[k as usize].place_coupled(e.end_center(), turn * start, linear, angular);
        }
    }

    /// After the PD iterations: each coupled body's displacement from the islands that
    /// touched it (`shares`, island by island), its obstacles placed at the end pose with the
    /// end velocities (for restitution and the velocity LCP, which see it moving). `contacts`
    /// are the islands' obstacle contacts `(body, contact)`, island by island, for the launch
    /// safeguard.
    pub fn settle<'a>(
        &mut self,
        obstacles: &mut [ObstacleCollider],
        shares: impl Iterator<Item = RigidShare>,
        contacts: impl Iterator<Item = (u32, &'a Contact)>,
        bodies: &[SoftBody],
        h: f64,
    ) {
        for e in &mut self.entries {
            e.displacement = [Vec3::zeros(); 2];
            e.angular_impulse = Vec3::zeros();
            e.next = [Vec3::zeros(); 2];
            e.contacts = 0;
            e.exact = true;
            e.impulse = Vec3::zeros();
            e.cut = Vec3::zeros();
        }
        for r in shares {
            let e = &mut self.entries[r.entry as usize];
            for k in 0..2 {
                e.displacement[k] += r.displacement[k];
                e.next[k] += r.next[k];
            }
            e.angular_impulse += r.angular_impulse;
            e.contacts += r.contacts;
            e.exact &= r.exact;
        }
        self.no_launch(contacts, bodies, h);
        self.place_all(obstacles, h);
    }

    /// A linear velocity change (m/s) of coupled body `entry` from the velocity LCP.
    pub fn add_velocity_change(&mut self, entry: u32, change: Vec3) {
        let e = &mut self.entries[entry as usize];
        e.impulse += e.mass * change;
    }

    /// The safeguard against launching a body held kinematic (where an island's last solve
    /// was not exact): its velocity away from its contact patch (the mean normal of its
    /// contacts) is cut to the patch's own (the touching points' mean velocity at the end of
    /// the iterations, before the velocity phases), so the soft bodies push it at most as a
    /// perfectly inelastic contact would. Its explicit push comes from the forces on the held
    /// pose, which the body's own motion would have relieved: a 5 kg box resting on rubber
    /// under the Newton solver took 1.5 m/s from one step's push without it (cut after the
    /// velocity LCP instead, it came too late: the LCP had already carried the patch along).
    /// What it cuts is dissipated. A body solved exactly never needs it.
    fn no_launch<'a>(
        &mut self,
        contacts: impl Iterator<Item = (u32, &'a Contact)>,
        bodies: &[SoftBody],
        h: f64,
    ) {
        let mut patch = std::mem::take(&mut self.patches);
        patch.clear();
        patch.resize(
            self.entries.len(),
            (Vec3::zeros(), Vec3::zeros(), Vec3::zeros(), 0),
        );
        for (body, contact) in contacts {
            let k = self.entry_of(contact.obstacle);
            if k == NOT_COUPLED {
                continue;
            }
            let b = &bodies[body as usize];
            let point = &b.colliders[contact.proxy as usize];
            let velocity: Vec3 = point
                .vertices
                .iter()
                .zip(&point.weights)
                .map(|(&v, &w)| w * b.velocity(v as usize))
                .sum();
            let p = &mut patch[k as usize];
            p.0 += contact.normal;
            p.1 += velocity;
            p.2 += contact.point;
            p.3 += 1;
        }
        for (e, &(normal, velocity, point, n)) in self.entries.iter_mut().zip(&patch) {
            if n == 0 || e.exact {
                continue;
            }
            let count = n as f64;
            // The normal out of the body into the soft bodies, averaged; where the contacts
            // face every way (a body squeezed from all sides) it says nothing.
            let normal = normal / count;
            if normal.norm() < 0.5 {
                continue;
            }
            let normal = normal.normalize();
            let (linear, angular) = e.velocities(h);
            let body_at_patch = linear + angular.cross(&(point / count - e.end_center()));
            // The body leaves along -normal at `away` relative to the patch; only what the
            // soft bodies added is cut, never its free motion.
            let away = -(body_at_patch - velocity / count).dot(&normal);
            let pushed = -(e.displacement[0] / h + e.impulse / e.mass).dot(&normal);
            let cut = away.min(pushed);
            if cut > 0.0 {
                e.cut = cut * normal;
            }
        }
        self.patches = patch;
    }

    /// After the velocity phases: every coupled obstacle at its end pose with its final
    /// velocities, and the soft bodies' effect on it in its response (accumulated over the
    /// step's substeps).
    pub fn finish(&mut self, obstacles: &mut [ObstacleCollider], h: f64) {
        if !self.any() {
            return;
        }
        self.place_all(obstacles, h);
        // Every member of a body carries the body's state and response.
        for &(entry, k, _) in &self.members {
            let e = &self.entries[entry as usize];
            obstacles[k as usize].coupled.warm = match e.contacts {
                0 => [Vec3::zeros(); 2],
                _ => e.next,
            };
            let r = &mut obstacles[k as usize].coupled.response;
            let linear = e.displacement[0] / h + e.impulse / e.mass + e.cut;
            let angular = e.displacement[1] / h;
            r.linear_velocity_change += linear;
            r.angular_velocity_change += angular;
            r.impulse += e.mass * linear;
            r.angular_impulse += e.angular_impulse;
            r.contacts = e.contacts;
            r.exact &= e.exact;
        }
    }
}
