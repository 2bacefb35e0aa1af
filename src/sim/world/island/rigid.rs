//! Coupled rigid bodies in an island's QP (see `crate::sim::world::coupling`): their rows'
//! rigid terms, the displacement their applied forces give, the displacement the rows'
//! multipliers give after a solve in the contact subspace ([`super::dual`]), and around an
//! MPRGP solve, which holds them at a pose, that pose's semi-implicit update.

use nalgebra::{Matrix3, Matrix6, Vector6};

use super::Island;
use super::contact::IslandContact;
use crate::sim::math::Vec3;
use crate::sim::world::coupling::{Coupling, NOT_COUPLED, RigidShare, RigidState};

/// No rigid body in this row or contact.
pub(crate) const NO_RIGID: u32 = u32::MAX;

/// A coupled rigid body in an island's QP in this substep.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IslandRigid {
    /// Its entry in the substep's [`Coupling`].
    pub entry: u32,
    pub state: RigidState,
    /// `h^2 / M` (s^2/kg) and `h^2 I^-1` (s^2/(kg m^2)): its block of `A^-1`.
    inverse_mass_h2: f64,
    inverse_inertia_h2: Matrix3<f64>,
    /// The largest eigenvalue of `h^2 I^-1` (s^2/(kg m^2)).
    inverse_inertia_h2_max: f64,
    /// Its end pose's displacement from the free end pose (m, rad about the centre of mass):
    /// what the last solve found, or held it at.
    pub displacement: [Vec3; 2],
    /// Where the next held solve holds it (m, rad): after a held solve, the held pose moved
    /// towards the coupled solution by one semi-implicit update ([`Island::rigid_held`]).
    pub next: [Vec3; 2],
    /// The explicit displacement `A_r^-1 f` of the last solve's forces (m, rad), which a held
    /// body's update ([`Island::rigid_held`]) starts from.
    explicit: [Vec3; 2],
    /// The last solve's contact and friction forces on it times `h` (N s, N m s about the
    /// centre of mass).
    pub impulse: [Vec3; 2],
    /// The island's contacts with it.
    pub contacts: usize,
    /// Whether the last solve had it as an unknown.
    pub exact: bool,
    /// The displacement of the forces applied to it in the current solve (the reactions of
    /// the contacts' friction; m, rad), and those forces (N, N m).
    applied: [Vec3; 2],
    applied_force: [Vec3; 2],
}

impl IslandRigid {
    /// What the island's last solve did to the body, for [`Coupling::settle`].
    pub(crate) fn share(&self) -> RigidShare {
        RigidShare {
            entry: self.entry,
            displacement: self.displacement,
            next: self.next,
            angular_impulse: self.impulse[1],
            contacts: self.contacts,
            exact: self.exact,
        }
    }

    /// The displacement `A_r^-1 (force, torque)` (m, rad) of a force (N) and torque (N m).
    fn displacement_of(&self, force: Vec3, torque: Vec3) -> [Vec3; 2] {
        [
            self.inverse_mass_h2 * force,
            self.inverse_inertia_h2 * torque,
        ]
    }

    /// How far (m) a tangential force of 1 N at arm `arm` (m) from the centre of mass moves
    /// the point it acts at over the substep, at most: `h^2 (1/M + |arm|^2 max eig(I^-1))`.
    pub(super) fn sliding_compliance(&self, arm: &Vec3) -> f64 {
        self.inverse_mass_h2 + arm.norm_squared() * self.inverse_inertia_h2_max
    }

    /// `h^2 (a_n . b_n / M + a_arm . I^-1 b_arm)`: the body's term of `S` between two rows.
    pub(super) fn coupling_term(&self, a: &RowRigid, b: &RowRigid) -> f64 {
        self.inverse_mass_h2 * a.normal.dot(&b.normal)
            + a.arm.dot(&(self.inverse_inertia_h2 * b.arm))
    }
}

/// A row's rigid term: the body (`Island::rigid` index, or [`NO_RIGID`]), the
/// contact normal `n` (out of the body) and `r x n`, `r` the contact point's arm from the
/// centre of mass. The row's coefficients on the body's displacement are `-n` and `-(r x n)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct RowRigid {
    pub body: u32,
    pub normal: Vec3,
    pub arm: Vec3,
}

/// The coupled rigid bodies of one island in this substep ([`crate::sim::world::coupling`]):
/// the bodies, which contact and row is on which, and the scratch of their held update.
#[derive(Debug, Default, Clone)]
pub(crate) struct CoupledRigid {
    /// The coupled rigid bodies the island's contacts touch (`crate::sim::world::coupling`).
    pub(super) bodies: Vec<IslandRigid>,
    /// Per contact: its rigid body's index in `bodies`, or [`NO_RIGID`].
    pub(super) contact_rigid: Vec<u32>,
    /// Per row: its rigid term.
    pub(super) row_rigid: Vec<RowRigid>,
    /// `(rigid body, row)` of the rows on rigid bodies, sorted.
    pub(super) rigid_rows: Vec<(u32, u32)>,
    /// Scratch of the rigid displacement of the rows' forces: per rigid body, force and torque.
    pub(super) scratch: Vec<[Vec3; 2]>,
    /// Scratch of [`Island::rigid_held`]: the island matrix's diagonal.
    pub(super) diagonal: Vec<Vec3>,
    /// Scratch of [`Island::rigid_held`]: per rigid body, the stiffness of its rows.
    pub(super) stiffness: Vec<nalgebra::Matrix6<f64>>,
}

impl Island {
    /// What the island's last solve did to each coupled rigid body it has had in this step.
    pub(crate) fn rigid_shares(&self) -> impl Iterator<Item = RigidShare> + '_ {
        self.coupled.bodies.iter().map(IslandRigid::share)
    }

    /// Whether the island touches a coupled rigid body (its columns are then all computed
    /// at once: the body is an unknown only in the contact subspace).
    pub(crate) fn touches_rigid(&self) -> bool {
        !self.coupled.bodies.is_empty()
    }

    /// The index in [`Island::rigid`] of `entry`'s body, added if new.
    fn rigid_index(&mut self, entry: u32, coupling: &Coupling, h: f64) -> u32 {
        if let Some(k) = self.coupled.bodies.iter().position(|r| r.entry == entry) {
            return k as u32;
        }
        let state = coupling.state(entry);
        let warm = coupling.warm(entry);
        let inverse_inertia_h2 = h * h * state.inverse_inertia;
        let inverse_inertia_h2_max = inverse_inertia_h2
            .symmetric_eigen()
            .eigenvalues
            .max()
            .max(0.0);
        self.coupled.bodies.push(IslandRigid {
            entry,
            state,
            inverse_mass_h2: h * h * state.inverse_mass,
            inverse_inertia_h2,
            inverse_inertia_h2_max,
            displacement: warm,
            next: warm,
            explicit: [Vec3::zeros(); 2],
            impulse: [Vec3::zeros(); 2],
            contacts: 0,
            exact: true,
            applied: [Vec3::zeros(); 2],
            applied_force: [Vec3::zeros(); 2],
        });
        (self.coupled.bodies.len() - 1) as u32
    }

    /// At the start of the step: the coupled bodies the island's contacts touch.
    pub(super) fn begin_rigid(&mut self, coupling: &Coupling, h: f64) {
        self.coupled.bodies.clear();
        self.coupled.contact_rigid.clear();
        if !coupling.any() {
            return;
        }
        for i in 0..self.contacts.len() {
            if let IslandContact::Obstacle { contact, .. } = self.contacts[i] {
                let entry = coupling.entry_of(contact.obstacle);
                if entry != NOT_COUPLED {
                    self.rigid_index(entry, coupling, h);
                }
            }
        }
    }

    /// After the rows are built: each contact's and row's rigid term, the rows grouped by
    /// body, and each body's applied forces (the reactions of its contacts' friction of the
    /// last iteration) and their displacement.
    pub(super) fn prepare_rigid_rows(&mut self, coupling: &Coupling, h: f64) {
        self.coupled.row_rigid.clear();
        self.coupled.rigid_rows.clear();
        self.coupled.contact_rigid.clear();
        if !coupling.any() {
            return;
        }
        for r in &mut self.coupled.bodies {
            r.applied_force = [Vec3::zeros(); 2];
            r.contacts = 0;
        }
        for i in 0..self.contacts.len() {
            let k = match self.contacts[i] {
                IslandContact::Obstacle { contact, .. } => {
                    match coupling.entry_of(contact.obstacle) {
                        NOT_COUPLED => NO_RIGID,
                        entry => {
                            let k = self.rigid_index(entry, coupling, h);
                            let r = &mut self.coupled.bodies[k as usize];
                            let arm = contact.point - r.state.center;
                            let on_body = -self.friction[i];
                            r.applied_force[0] += on_body;
                            r.applied_force[1] += arm.cross(&on_body);
                            r.contacts += 1;
                            k
                        }
                    }
                }
                _ => NO_RIGID,
            };
            self.coupled.contact_rigid.push(k);
        }
        for r in &mut self.coupled.bodies {
            r.applied = r.displacement_of(r.applied_force[0], r.applied_force[1]);
        }
        for j in 0..self.rows.len() {
            let i = self.row_contact[j] as usize;
            let k = self.coupled.contact_rigid[i];
            let term = match (k, &self.contacts[i]) {
                (NO_RIGID, _) | (_, IslandContact::Soft(_) | IslandContact::Edge(_)) => RowRigid {
                    body: NO_RIGID,
                    normal: Vec3::zeros(),
                    arm: Vec3::zeros(),
                },
                (k, IslandContact::Obstacle { contact, .. }) => {
                    let center = self.coupled.bodies[k as usize].state.center;
                    RowRigid {
                        body: k,
                        normal: contact.normal,
                        arm: (contact.point - center).cross(&contact.normal),
                    }
                }
            };
            if term.body != NO_RIGID {
                self.coupled.rigid_rows.push((term.body, j as u32));
            }
            self.coupled.row_rigid.push(term);
        }
        self.coupled.rigid_rows.sort_unstable();
    }

    /// Row `j`'s term of `q` from its body's applied forces: `-(n . dx_a + (r x n) . dtheta_a)`.
    pub(super) fn rigid_q(&self, j: usize) -> f64 {
        let Some(t) = self.coupled.row_rigid.get(j).filter(|t| t.body != NO_RIGID) else {
            return 0.0;
        };
        let a = &self.coupled.bodies[t.body as usize].applied;
        -(t.normal.dot(&a[0]) + t.arm.dot(&a[1]))
    }

    /// The rows on the same body as row `j` from `j` on, if it has one.
    pub(super) fn rigid_rows_from(&self, j: usize) -> &[(u32, u32)] {
        let Some(t) = self.coupled.row_rigid.get(j).filter(|t| t.body != NO_RIGID) else {
            return &[];
        };
        let from = self
            .coupled
            .rigid_rows
            .partition_point(|&(b, r)| (b, r as usize) < (t.body, j));
        let to = self
            .coupled
            .rigid_rows
            .partition_point(|&(b, _)| b <= t.body);
        &self.coupled.rigid_rows[from..to]
    }

    /// `(force, torque)` (N, N m) of the rows' multipliers on each body, added to `out`
    /// (index by body).
    fn row_forces_on_rigid(&self, out: &mut [[Vec3; 2]]) {
        for (t, &l) in self.coupled.row_rigid.iter().zip(&self.row_lambda) {
            if t.body != NO_RIGID && l > 0.0 {
                let f = &mut out[t.body as usize];
                f[0] -= l * t.normal;
                f[1] -= l * t.arm;
            }
        }
    }

    /// After a solve with the bodies as unknowns (in the contact subspace): each body's
    /// displacement `A_r^-1 (f_applied + J_r' lambda)`.
    pub(super) fn rigid_solved(&mut self, h: f64) {
        self.rigid_after(h, true);
    }

    /// Before an MPRGP solve: the bodies held at their next held pose, which shifts their
    /// rows' right-hand sides by `n . dx + (r x n) . dtheta`.
    pub(super) fn hold_rigid(&mut self) {
        for r in &mut self.coupled.bodies {
            r.displacement = r.next;
        }
        for (row, t) in self.rows.iter_mut().zip(&self.coupled.row_rigid) {
            if t.body != NO_RIGID {
                let d = &self.coupled.bodies[t.body as usize].displacement;
                row.rhs += t.normal.dot(&d[0]) + t.arm.dot(&d[1]);
            }
        }
    }

    /// After an MPRGP solve that held them: each body's end pose stays the held
    /// pose the soft bodies were solved against (so they push it no more than they were
    /// pushed), and the next held pose moves towards the coupled solution by one semi-implicit
    /// update with the soft side as springs: `(A_r + K) dd = f - A_r d`, `K = sum k_j J_j' J_j`
    /// over its rows, with a force or not (counting only the pushing rows, a body held just
    /// clear of the soft side took the whole free fall back in the next update and rattled
    /// between the two at 8 cm/s), `k_j = 1 / sum_u |c_ju|^2 / A_uu` from the diagonal
    /// `diagonal` of the island's matrix (which overestimates each row's stiffness, so the
    /// update does not overshoot; the explicit update `A_r^-1 f` without `K` launched a 5 kg
    /// box resting on rubber under the Newton solver at 1.5 m/s in one step).
    pub(super) fn rigid_held(&mut self, h: f64, diagonal: &[Vec3]) {
        self.rigid_after(h, false);
        let mut stiffness = std::mem::take(&mut self.coupled.stiffness);
        stiffness.clear();
        stiffness.resize(self.coupled.bodies.len(), Matrix6::zeros());
        for (row, t) in self.rows.iter().zip(&self.coupled.row_rigid) {
            if t.body == NO_RIGID {
                continue;
            }
            let compliance: f64 = row
                .entries()
                .map(|(u, c)| {
                    let a = diagonal[u];
                    c.x * c.x / a.x + c.y * c.y / a.y + c.z * c.z / a.z
                })
                .sum();
            if !(compliance > 0.0) {
                continue;
            }
            let j = Vector6::new(
                -t.normal.x,
                -t.normal.y,
                -t.normal.z,
                -t.arm.x,
                -t.arm.y,
                -t.arm.z,
            );
            stiffness[t.body as usize] += (j * j.transpose()) / compliance;
        }
        for (r, k) in self.coupled.bodies.iter_mut().zip(&stiffness) {
            // `dd = (I + C K)^-1 (C f - d)`, `C = A_r^-1` (PSD; zero rows where rotation is
            // locked), the explicit update's step `C f - d` held back by the soft side's
            // stiffness.
            let mut c = Matrix6::zeros();
            c.fixed_view_mut::<3, 3>(0, 0)
                .copy_from(&(Matrix3::identity() * r.inverse_mass_h2));
            c.fixed_view_mut::<3, 3>(3, 3)
                .copy_from(&r.inverse_inertia_h2);
            let step = Vector6::new(
                r.explicit[0].x - r.displacement[0].x,
                r.explicit[0].y - r.displacement[0].y,
                r.explicit[0].z - r.displacement[0].z,
                r.explicit[1].x - r.displacement[1].x,
                r.explicit[1].y - r.displacement[1].y,
                r.explicit[1].z - r.displacement[1].z,
            );
            let dd = (Matrix6::identity() + c * k)
                .lu()
                .solve(&step)
                .unwrap_or(step);
            r.next = [
                r.displacement[0] + Vec3::new(dd[0], dd[1], dd[2]),
                r.displacement[1] + Vec3::new(dd[3], dd[4], dd[5]),
            ];
        }
        self.coupled.stiffness = stiffness;
    }

    /// After a QP without rows: nothing pushes the bodies.
    pub(super) fn rigid_untouched(&mut self) {
        for r in &mut self.coupled.bodies {
            r.displacement = [Vec3::zeros(); 2];
            r.next = [Vec3::zeros(); 2];
            r.explicit = [Vec3::zeros(); 2];
            r.impulse = [Vec3::zeros(); 2];
            r.contacts = 0;
            r.exact = true;
        }
    }

    fn rigid_after(&mut self, h: f64, exact: bool) {
        if self.coupled.bodies.is_empty() {
            return;
        }
        let mut forces = std::mem::take(&mut self.coupled.scratch);
        forces.clear();
        forces.extend(self.coupled.bodies.iter().map(|r| r.applied_force));
        self.row_forces_on_rigid(&mut forces);
        for (r, f) in self.coupled.bodies.iter_mut().zip(&forces) {
            let d = r.displacement_of(f[0], f[1]);
            r.impulse = [h * f[0], h * f[1]];
            r.exact = exact;
            // Held: the explicit displacement of the forces, for `rigid_held`'s update.
            r.explicit = d;
            if exact {
                r.displacement = d;
                r.next = d;
            }
        }
        self.coupled.scratch = forces;
    }

    /// How far contact `i`'s obstacle point moves beyond its obstacle's velocity over the
    /// step: its rigid body's displacement at the point (m; zero for others).
    pub(super) fn rigid_shift(&self, i: usize, point: &Vec3) -> Vec3 {
        match self.coupled.contact_rigid.get(i) {
            Some(&k) if k != NO_RIGID => {
                let r = &self.coupled.bodies[k as usize];
                r.displacement[0] + r.displacement[1].cross(&(point - r.state.center))
            }
            _ => Vec3::zeros(),
        }
    }
}
