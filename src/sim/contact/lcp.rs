//! The velocity-level contact problem with Coulomb friction, split into independent contact
//! regions and solved by projected conjugate gradients followed by projected Gauss-Seidel
//! (Lazarevych et al., sections 3 and 4). Used in the respond phase of the world's step, after
//! the position solve and after restitution.
//!
//! Restitution is not in this problem (deviation: the paper's eq. (12) puts it in `b`): the
//! world applies the rebound first, through each body's prefactored matrix, and `b` holds the
//! velocities after it; a contact that bounces gets no [`LcpContact::retractable`] impulse.
//!
//! # The problem
//! Contact `c` acts on up to [`MAX_TERMS`] vertices with weights `w_cv` (positive on the side
//! the normal points into, negative on the other: `+1` for a proxy vertex, `-alpha, -beta,
//! -gamma` for the triangle of eq. (5)) through its orthonormal frame `F_c = (n, t1, t2)`. With
//! the impulse `lambda_c = (lambda_n, lambda_t1, lambda_t2)` (N s) in that frame, the lumped
//! inverse masses `m_v^-1` and the free relative velocity `b_c` (m/s, frame coordinates), the
//! relative velocity after the impulses is
//!
//! ```text
//! u = W lambda + b,   W = J M^-1 J',   W_cd = (sum_v w_cv w_dv / m_v) F_c F_d'
//! ```
//!
//! (eq. (10)-(12)). Every contact must satisfy Signorini, `0 <= lambda_n _|_ u_n >= 0`, and
//! Coulomb with a radius `r_c = mu_c (o_c + lambda_n)`: as a cone, `|lambda_t| <= r_c`, sticking
//! (`u_t = 0`) inside, sliding with `lambda_t = -r_c u_t / |u_t|` on the rim; as the 4-sided
//! pyramid, each of `lambda_t1`, `lambda_t2` separately in `[-r_c, r_c]` (eq. (6)-(7)). The
//! offset `o_c >= 0` (N s) is a normal impulse already applied elsewhere (the position-level
//! contact force of the step times `h`), which the friction may use too; likewise a tangential
//! offset is friction already applied, and the bound holds for it plus `lambda_t`. A contact may
//! also let the solver take back up to `p_c <= o_c` of its normal offset: Signorini then holds
//! for the total, `0 <= p_c + lambda_n _|_ u_n >= 0` (the variable shift `lambda_n + p_c` turns
//! it back into the plain problem).
//!
//! Because the frame is orthonormal and the masses lumped, the diagonal block is a multiple of the
//! identity, `W_cc = s_c I` with `s_c = sum_v w_cv^2 / m_v`, so one contact's Gauss-Seidel update
//! is exact: `lambda_n <- max(0, lambda_n - u_n / s_c)`, then
//! `lambda_t <- Proj_{r_c}(lambda_t - u_t / s_c)`. `W` is never formed: the solver keeps the
//! velocity change of every vertex, `dv = M^-1 J' lambda`, and reads `u_c = F_c sum_v w_cv dv_v
//! + b_c` from it, so one update costs `O(terms)` (the "reduced format" of section 3).
//!
//! # Regions
//! Contacts that share no vertex, directly or through a chain of contacts, are independent
//! ([`super::ContactRegions`], union-find). [`ContactLcp::partition`] stores the contacts region
//! by region, each region's vertices in a local numbering, so each region is solved on its own
//! slices — in parallel with rayon, with results independent of the thread count because no
//! region reads another's data. With `separate = false` the whole problem is one region: the
//! monolithic baseline of the paper's comparison.
//!
//! # The solver (section 4)
//! 1. Projected CG (Alg. 2): residual `r = -(W lambda + b)` projected onto the directions the
//!    constraints allow at `lambda`, Fletcher-Reeves directions, the step `lambda + alpha d`
//!    projected onto the feasible set; at most `2n` iterations (`n = 3 x contacts`).
//! 2. Projected Gauss-Seidel from the best CG iterate, at most `max_sweeps` sweeps.
//!
//! Both stop when the largest change of an impulse component falls below `impulse_tolerance`
//! (eq. (20)) or when the natural-map residual (below) falls below `velocity_tolerance` (eq.
//! (21)). Each phase keeps the iterate with the smallest residual seen and returns it if the last
//! one is worse. The residual of a contact is `s_c (lambda_c - Proj_K(lambda_c - u_c / s_c))`:
//! velocity units (m/s), zero exactly when the contact satisfies Signorini and Coulomb.

use super::regions::ContactRegions;
use crate::sim::math::{Mat3, Vec3};

/// Most vertices one contact may act on: a drawn point embedded in a tet (four) against a
/// drawn triangle whose three corners are embedded in tets (four each).
pub const MAX_TERMS: usize = 16;

/// How friction is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum FrictionModel {
    /// The isotropic Coulomb cone `|lambda_t| <= mu lambda_n`. Default.
    #[default]
    Cone,
    /// The 4-sided pyramid `|lambda_t1|, |lambda_t2| <= mu lambda_n` (eq. (6)).
    Pyramid,
}

/// Settings of the contact LCP solver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LcpSettings {
    /// Friction model. Default: cone.
    pub friction: FrictionModel,
    /// Stop when no impulse component changes by more than this in an iteration (N s), eq. (20).
    /// Default: 1e-9.
    pub impulse_tolerance: f64,
    /// Stop when the natural-map residual of every contact is below this (m/s), eq. (21).
    /// Default: 1e-6.
    pub velocity_tolerance: f64,
    /// Projected CG iterations before Gauss-Seidel, at most `2n` in any case. `0` skips the
    /// CG phase. Default: 50.
    pub max_cg_iterations: usize,
    /// Projected Gauss-Seidel sweeps at most. Default: 200.
    pub max_sweeps: usize,
}

impl Default for LcpSettings {
    fn default() -> Self {
        Self {
            friction: FrictionModel::Cone,
            impulse_tolerance: 1e-9,
            velocity_tolerance: 1e-6,
            max_cg_iterations: 50,
            max_sweeps: 200,
        }
    }
}

/// What a solve did (summed or maximised over regions).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LcpStats {
    /// Number of regions solved.
    pub regions: usize,
    /// Contacts in the largest region.
    pub largest_region: usize,
    /// Projected CG iterations, summed over regions.
    pub cg_iterations: usize,
    /// Projected Gauss-Seidel sweeps, summed over regions.
    pub gs_sweeps: usize,
    /// Largest final natural-map residual of any contact (m/s).
    pub residual: f64,
    /// Regions that stopped on the iteration caps rather than a tolerance.
    pub unconverged_regions: usize,
}

impl LcpStats {
    fn merge(self, other: Self) -> Self {
        Self {
            regions: self.regions + other.regions,
            largest_region: self.largest_region.max(other.largest_region),
            cg_iterations: self.cg_iterations + other.cg_iterations,
            gs_sweeps: self.gs_sweeps + other.gs_sweeps,
            residual: self.residual.max(other.residual),
            unconverged_regions: self.unconverged_regions + other.unconverged_regions,
        }
    }
}

/// One contact of the problem.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LcpContact {
    /// Rows `n, t1, t2`: the unit normal and two unit tangents, orthonormal.
    pub frame: Mat3,
    /// Vertex ids (global ids while adding; numbered within the region after
    /// [`ContactLcp::partition`]); the first `len` are used.
    pub vertices: [u32; MAX_TERMS],
    /// Weight of each vertex.
    pub weights: [f64; MAX_TERMS],
    /// Number of vertices used.
    pub len: u8,
    /// Free relative velocity `b_c` in frame coordinates (m/s).
    pub free_velocity: Vec3,
    /// Friction coefficient `mu_c >= 0`.
    pub friction: f64,
    /// Normal impulse already applied (N s) that bounds friction too, `>= 0`.
    pub normal_offset: f64,
    /// Friction impulse already applied (N s, along `t1`, `t2`): the Coulomb bound holds for
    /// it plus the solver's tangential impulse.
    pub tangent_offset: [f64; 2],
    /// The part of the normal offset the solver may take back (N s, from 0 to
    /// `normal_offset`): the normal impulse is bounded below by `-retractable` instead of 0,
    /// so Signorini holds for the total `retractable + lambda_n`. A position-level force that
    /// pushed a contact out of a penetration it started the step in leaves a separating
    /// velocity; taking back part of that force cancels the velocity, as split-impulse
    /// position correction does, instead of launching the body.
    pub retractable: f64,
}

impl LcpContact {
    /// A contact with normal `normal` (unit) and no vertices yet; the tangents are chosen
    /// deterministically from the normal.
    pub fn new(normal: Vec3) -> Self {
        let (t1, t2) = tangents(&normal);
        Self {
            frame: Mat3::from_rows(&[normal.transpose(), t1.transpose(), t2.transpose()]),
            vertices: [0; MAX_TERMS],
            weights: [0.0; MAX_TERMS],
            len: 0,
            free_velocity: Vec3::zeros(),
            friction: 0.0,
            normal_offset: 0.0,
            tangent_offset: [0.0; 2],
            retractable: 0.0,
        }
    }

    /// The lowest normal impulse the solver may apply (N s, `<= 0`).
    fn normal_floor(&self) -> f64 {
        -self.retractable.clamp(0.0, self.normal_offset.max(0.0))
    }

    /// Adds `weight` times vertex `vertex` (merged with an existing entry of the same vertex).
    /// Returns `false` if the contact already has [`MAX_TERMS`] vertices.
    pub fn add_term(&mut self, vertex: u32, weight: f64) -> bool {
        let len = self.len as usize;
        if let Some(e) = self.vertices[..len].iter().position(|&v| v == vertex) {
            self.weights[e] += weight;
            return true;
        }
        if len == MAX_TERMS {
            return false;
        }
        self.vertices[len] = vertex;
        self.weights[len] = weight;
        self.len += 1;
        true
    }

    /// The used `(vertex, weight)` terms.
    pub fn terms(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.vertices[..self.len as usize]
            .iter()
            .map(|&v| v as usize)
            .zip(self.weights[..self.len as usize].iter().copied())
    }

    /// The unit normal.
    pub fn normal(&self) -> Vec3 {
        self.frame.row(0).transpose()
    }
}

/// Two unit tangents completing `n` to a right-handed orthonormal frame.
pub fn tangents(n: &Vec3) -> (Vec3, Vec3) {
    // The axis least aligned with n gives a well-conditioned cross product.
    let axis = if n.x.abs() <= n.y.abs() && n.x.abs() <= n.z.abs() {
        Vec3::x()
    } else if n.y.abs() <= n.z.abs() {
        Vec3::y()
    } else {
        Vec3::z()
    };
    let t1 = n.cross(&axis).normalize();
    let t2 = n.cross(&t1);
    (t1, t2)
}

/// The whole velocity-level contact problem, stored region by region.
///
/// Add contacts with [`ContactLcp::push`], group them with [`ContactLcp::partition`], solve with
/// [`ContactLcp::solve`], then read the vertex velocity changes with
/// [`ContactLcp::velocity_changes`] and the impulses with [`ContactLcp::impulse`]. Buffers are
/// kept between steps: a warmed-up solve allocates nothing.
#[derive(Debug, Clone, Default)]
pub struct ContactLcp {
    /// Contacts as added (global vertex ids).
    input: Vec<LcpContact>,
    /// Contacts region by region (local vertex ids).
    contacts: Vec<LcpContact>,
    /// Input index of each stored contact.
    order: Vec<u32>,
    /// Stored position of each input contact.
    position: Vec<u32>,
    /// Region `r` is `contacts[region_starts[r]..region_starts[r + 1]]`.
    region_starts: Vec<u32>,
    /// Region `r`'s vertices are `vertex_starts[r]..vertex_starts[r + 1]` (local numbering).
    vertex_starts: Vec<u32>,
    /// Inverse mass (1/kg) of each local vertex.
    inv_mass: Vec<f64>,
    /// Global id of each local vertex.
    global: Vec<u32>,
    /// Impulses (N s, frame coordinates), stored order.
    lambda: Vec<Vec3>,
    /// Velocity change of each local vertex (m/s).
    dv: Vec<Vec3>,
    /// Per-contact scratch of the solver (stored order): CG residual, direction, best iterate.
    scratch: Vec<[Vec3; 4]>,
    /// Per-vertex scratch (local order): `M^-1 J' d` of the CG direction.
    dv_scratch: Vec<Vec3>,
    regions: ContactRegions,
    local: Vec<u32>,
}

impl ContactLcp {
    /// Removes every contact.
    pub fn clear(&mut self) {
        self.input.clear();
        self.contacts.clear();
        self.region_starts.clear();
        self.vertex_starts.clear();
        self.global.clear();
    }

    /// Adds a contact (vertex ids global, below the `vertex_count` given to `partition`);
    /// returns its index.
    pub fn push(&mut self, contact: LcpContact) -> usize {
        self.input.push(contact);
        self.input.len() - 1
    }

    /// Number of contacts.
    pub fn len(&self) -> usize {
        self.input.len()
    }

    /// Whether there is no contact.
    pub fn is_empty(&self) -> bool {
        self.input.is_empty()
    }

    /// Number of regions after [`ContactLcp::partition`].
    pub fn region_count(&self) -> usize {
        self.region_starts.len().saturating_sub(1)
    }

    /// Groups the contacts into independent regions (`separate`) or one monolithic region, and
    /// numbers each region's vertices locally. `inv_mass(v)` is the inverse mass (1/kg) of
    /// global vertex `v` (0 for a pinned vertex).
    ///
    /// # Panics
    /// If a contact's vertex is `>= vertex_count`.
    pub fn partition(
        &mut self,
        vertex_count: usize,
        separate: bool,
        inv_mass: impl Fn(u32) -> f64,
    ) {
        let n = self.input.len();
        self.order.clear();
        self.region_starts.clear();
        self.region_starts.push(0);
        if separate {
            let input = &self.input;
            self.regions.split(n, vertex_count, |c| {
                &input[c].vertices[..input[c].len as usize]
            });
            for r in 0..self.regions.len() {
                self.order.extend_from_slice(self.regions.region(r));
                self.region_starts.push(self.order.len() as u32);
            }
        } else {
            self.order.extend(0..n as u32);
            if n > 0 {
                self.region_starts.push(n as u32);
            }
        }
        self.position.clear();
        self.position.resize(n, 0);
        for (s, &i) in self.order.iter().enumerate() {
            self.position[i as usize] = s as u32;
        }
        // Local vertex numbering, region by region.
        self.local.clear();
        self.local.resize(vertex_count, u32::MAX);
        self.contacts.clear();
        self.global.clear();
        self.inv_mass.clear();
        self.vertex_starts.clear();
        self.vertex_starts.push(0);
        for r in 0..self.region_starts.len() - 1 {
            let (start, end) = (self.region_starts[r], self.region_starts[r + 1]);
            let first_vertex = self.global.len() as u32;
            for s in start..end {
                let mut c = self.input[self.order[s as usize] as usize];
                for e in 0..c.len as usize {
                    let g = c.vertices[e];
                    if self.local[g as usize] == u32::MAX {
                        self.local[g as usize] = self.global.len() as u32;
                        self.global.push(g);
                        self.inv_mass.push(inv_mass(g));
                    }
                    c.vertices[e] = self.local[g as usize] - first_vertex;
                }
                self.contacts.push(c);
            }
            self.vertex_starts.push(self.global.len() as u32);
        }
        for &g in &self.global {
            self.local[g as usize] = u32::MAX;
        }
        self.lambda.clear();
        self.lambda.resize(n, Vec3::zeros());
        self.dv.clear();
        self.dv.resize(self.global.len(), Vec3::zeros());
        self.dv_scratch.clear();
        self.dv_scratch.resize(self.global.len(), Vec3::zeros());
        self.scratch.clear();
        self.scratch.resize(n, [Vec3::zeros(); 4]);
    }

    /// [`ContactLcp::partition`] again with the inverse masses of the last partition (to
    /// compare the separated and the monolithic problem on the same contacts).
    pub fn repartition(&mut self, separate: bool) {
        let mut masses: Vec<(u32, f64)> = self
            .global
            .iter()
            .copied()
            .zip(self.inv_mass.iter().copied())
            .collect();
        masses.sort_unstable_by_key(|m| m.0);
        let count = masses.last().map_or(0, |m| m.0 as usize + 1);
        self.partition(count, separate, |g| {
            masses
                .binary_search_by_key(&g, |m| m.0)
                .map_or(0.0, |i| masses[i].1)
        });
    }

    /// Solves every region (in parallel with rayon when `parallel`), from zero impulses.
    pub fn solve(&mut self, settings: &LcpSettings, parallel: bool) -> LcpStats {
        let regions = self.region_count();
        if regions == 0 {
            return LcpStats::default();
        }
        self.lambda.iter_mut().for_each(|l| *l = Vec3::zeros());
        self.dv.iter_mut().for_each(|d| *d = Vec3::zeros());
        let view = RegionsView {
            region_starts: &self.region_starts,
            vertex_starts: &self.vertex_starts,
            contacts: &self.contacts,
            inv_mass: &self.inv_mass,
            lambda: &mut self.lambda,
            dv: &mut self.dv,
            scratch: &mut self.scratch,
            dv_scratch: &mut self.dv_scratch,
        };
        solve_regions(view, 0, regions, settings, parallel)
    }

    /// The impulse (N s) of input contact `c` as a world vector.
    pub fn impulse(&self, c: usize) -> Vec3 {
        let s = self.position[c] as usize;
        self.contacts[s].frame.transpose() * self.lambda[s]
    }

    /// The impulse (N s) of input contact `c` in its frame `(n, t1, t2)`.
    pub fn frame_impulse(&self, c: usize) -> Vec3 {
        self.lambda[self.position[c] as usize]
    }

    /// The region of input contact `c` (regions numbered in order of their first contact).
    pub fn region_of(&self, c: usize) -> usize {
        let s = self.position[c];
        self.region_starts.partition_point(|&start| start <= s) - 1
    }

    /// The contact as added.
    pub fn contact(&self, c: usize) -> &LcpContact {
        &self.input[c]
    }

    /// `(global vertex, velocity change (m/s))` for every vertex a contact acts on.
    pub fn velocity_changes(&self) -> impl Iterator<Item = (usize, Vec3)> + '_ {
        self.global
            .iter()
            .map(|&g| g as usize)
            .zip(self.dv.iter().copied())
    }
}

/// Mutable slices of a run of consecutive regions.
struct RegionsView<'a> {
    region_starts: &'a [u32],
    vertex_starts: &'a [u32],
    contacts: &'a [LcpContact],
    inv_mass: &'a [f64],
    lambda: &'a mut [Vec3],
    dv: &'a mut [Vec3],
    scratch: &'a mut [[Vec3; 4]],
    dv_scratch: &'a mut [Vec3],
}

/// Solves regions `first..last` of `view`, whose slices start at region `first`; splits the run
/// in two and recurses with `rayon::join` (no allocation).
fn solve_regions(
    view: RegionsView<'_>,
    first: usize,
    last: usize,
    settings: &LcpSettings,
    parallel: bool,
) -> LcpStats {
    let c0 = view.region_starts[first] as usize;
    let v0 = view.vertex_starts[first] as usize;
    if last - first == 1 || !parallel {
        let mut stats = LcpStats::default();
        let RegionsView {
            region_starts,
            vertex_starts,
            contacts,
            inv_mass,
            lambda,
            dv,
            scratch,
            dv_scratch,
        } = view;
        for r in first..last {
            let (cs, ce) = (
                region_starts[r] as usize - c0,
                region_starts[r + 1] as usize - c0,
            );
            let (vs, ve) = (
                vertex_starts[r] as usize - v0,
                vertex_starts[r + 1] as usize - v0,
            );
            let mut region = Region {
                contacts: &contacts[cs..ce],
                inv_mass: &inv_mass[vs..ve],
                lambda: &mut lambda[cs..ce],
                dv: &mut dv[vs..ve],
                scratch: &mut scratch[cs..ce],
                dv_scratch: &mut dv_scratch[vs..ve],
            };
            stats = stats.merge(region.solve(settings));
        }
        return stats;
    }
    let mid = (first + last) / 2;
    let cm = view.region_starts[mid] as usize - c0;
    let vm = view.vertex_starts[mid] as usize - v0;
    let (c_left, c_right) = view.contacts.split_at(cm);
    let (m_left, m_right) = view.inv_mass.split_at(vm);
    let (l_left, l_right) = view.lambda.split_at_mut(cm);
    let (d_left, d_right) = view.dv.split_at_mut(vm);
    let (s_left, s_right) = view.scratch.split_at_mut(cm);
    let (q_left, q_right) = view.dv_scratch.split_at_mut(vm);
    let left = RegionsView {
        region_starts: view.region_starts,
        vertex_starts: view.vertex_starts,
        contacts: c_left,
        inv_mass: m_left,
        lambda: l_left,
        dv: d_left,
        scratch: s_left,
        dv_scratch: q_left,
    };
    let right = RegionsView {
        region_starts: view.region_starts,
        vertex_starts: view.vertex_starts,
        contacts: c_right,
        inv_mass: m_right,
        lambda: l_right,
        dv: d_right,
        scratch: s_right,
        dv_scratch: q_right,
    };
    let (a, b) = rayon::join(
        || solve_regions(left, first, mid, settings, parallel),
        || solve_regions(right, mid, last, settings, parallel),
    );
    a.merge(b)
}

/// One region's slices (local vertex numbering).
struct Region<'a> {
    contacts: &'a [LcpContact],
    inv_mass: &'a [f64],
    lambda: &'a mut [Vec3],
    dv: &'a mut [Vec3],
    /// Per contact: `[r, d, best lambda, r_previous]` of the CG phase.
    scratch: &'a mut [[Vec3; 4]],
    dv_scratch: &'a mut [Vec3],
}

/// Projects an impulse onto the feasible set of its contact: `lambda_n` above its floor (0, or
/// minus the retractable offset), and the friction plus the tangential offset in the cone or
/// pyramid of radius `mu (normal offset + lambda_n)`.
fn project_impulse(l: Vec3, c: &LcpContact, model: FrictionModel) -> Vec3 {
    let n = l.x.max(c.normal_floor());
    let r = c.friction.max(0.0) * (c.normal_offset.max(0.0) + n).max(0.0);
    let [o1, o2] = c.tangent_offset;
    let (a, b) = (l.y + o1, l.z + o2);
    let (t1, t2) = match model {
        FrictionModel::Cone => {
            let norm = (a * a + b * b).sqrt();
            if norm > r && norm > 0.0 {
                (a * r / norm, b * r / norm)
            } else {
                (a, b)
            }
        }
        FrictionModel::Pyramid => (a.clamp(-r, r), b.clamp(-r, r)),
    };
    Vec3::new(n, t1 - o1, t2 - o2)
}

/// `s_c = sum_v w_cv^2 / m_v`: the diagonal of `W` at contact `c`.
fn diagonal(c: &LcpContact, inv_mass: &[f64]) -> f64 {
    c.terms().map(|(v, w)| w * w * inv_mass[v]).sum()
}

/// `F_c sum_v w_cv dv_v + b_c`: the relative velocity at contact `c` (frame coordinates).
fn velocity(c: &LcpContact, dv: &[Vec3], with_free: bool) -> Vec3 {
    let world: Vec3 = c.terms().map(|(v, w)| w * dv[v]).sum();
    let u = c.frame * world;
    if with_free { u + c.free_velocity } else { u }
}

/// Adds `M^-1 J_c' delta` to `dv`.
fn scatter(c: &LcpContact, delta: &Vec3, inv_mass: &[f64], dv: &mut [Vec3]) {
    let world = c.frame.transpose() * delta;
    for (v, w) in c.terms() {
        dv[v] += (w * inv_mass[v]) * world;
    }
}

impl Region<'_> {
    /// Recomputes `dv = M^-1 J' lambda` from the impulses.
    fn refresh_dv(&mut self) {
        self.dv.iter_mut().for_each(|d| *d = Vec3::zeros());
        for (c, l) in self.contacts.iter().zip(self.lambda.iter()) {
            scatter(c, l, self.inv_mass, self.dv);
        }
    }

    /// The largest natural-map residual (m/s) at the current impulses (`dv` up to date).
    fn residual(&self, model: FrictionModel) -> f64 {
        let mut worst = 0.0f64;
        for (c, l) in self.contacts.iter().zip(self.lambda.iter()) {
            let s = diagonal(c, self.inv_mass);
            if !(s > 0.0) {
                continue;
            }
            let u = velocity(c, self.dv, true);
            let r = s * (l - project_impulse(l - u / s, c, model));
            worst = worst.max(r.amax());
        }
        worst
    }

    fn solve(&mut self, settings: &LcpSettings) -> LcpStats {
        let model = settings.friction;
        let mut stats = LcpStats {
            regions: 1,
            largest_region: self.contacts.len(),
            ..Default::default()
        };
        // Contacts that cannot act (every vertex pinned) keep zero impulse.
        let n = 3 * self.contacts.len();
        let cg_cap = settings.max_cg_iterations.min(2 * n);
        let mut best = self.residual(model);
        let mut converged = best <= settings.velocity_tolerance;
        if !converged && cg_cap > 0 {
            let (its, res, done) = self.projected_cg(settings, cg_cap, best);
            stats.cg_iterations = its;
            best = res;
            converged = done;
        }
        if !converged {
            let (sweeps, res, done) = self.projected_gauss_seidel(settings, best);
            stats.gs_sweeps = sweeps;
            best = res;
            converged = done;
        }
        stats.residual = best;
        stats.unconverged_regions = usize::from(!converged);
        stats
    }

    /// Keeps the current impulses as the best iterate.
    fn store_best(&mut self) {
        for (s, l) in self.scratch.iter_mut().zip(self.lambda.iter()) {
            s[2] = *l;
        }
    }

    /// Returns to the best iterate.
    fn restore_best(&mut self) {
        for (s, l) in self.scratch.iter().zip(self.lambda.iter_mut()) {
            *l = s[2];
        }
        self.refresh_dv();
    }

    /// The projected residual `r = Proj(-(W lambda + b), W(lambda))` into `scratch[.][0]`;
    /// returns `r'r`.
    fn projected_descent(&mut self, model: FrictionModel) -> f64 {
        let mut rr = 0.0;
        for (k, c) in self.contacts.iter().enumerate() {
            let l = self.lambda[k];
            let mut r = -velocity(c, self.dv, true);
            if !(diagonal(c, self.inv_mass) > 0.0) {
                r = Vec3::zeros();
            }
            // Normal: at the bound, no descent below zero.
            let floor = c.normal_floor();
            if l.x <= floor && r.x < 0.0 {
                r.x = 0.0;
            }
            let radius = c.friction.max(0.0) * (c.normal_offset.max(0.0) + l.x.max(floor)).max(0.0);
            // The bound holds for the total friction, offset included.
            let (ty, tz) = (l.y + c.tangent_offset[0], l.z + c.tangent_offset[1]);
            match model {
                FrictionModel::Cone => {
                    let t = (ty * ty + tz * tz).sqrt();
                    if t > 0.0 && t >= radius * (1.0 - 1e-12) {
                        let (ey, ez) = (ty / t, tz / t);
                        let outward = r.y * ey + r.z * ez;
                        if outward > 0.0 {
                            r.y -= outward * ey;
                            r.z -= outward * ez;
                        }
                    }
                }
                FrictionModel::Pyramid => {
                    if ty.abs() >= radius * (1.0 - 1e-12) && r.y * ty > 0.0 {
                        r.y = 0.0;
                    }
                    if tz.abs() >= radius * (1.0 - 1e-12) && r.z * tz > 0.0 {
                        r.z = 0.0;
                    }
                }
            }
            self.scratch[k][0] = r;
            rr += r.norm_squared();
        }
        rr
    }

    /// Algorithm 2 (projected CG, Fletcher-Reeves). Returns (iterations, best residual, whether
    /// a tolerance was met); leaves the best iterate in `lambda` and `dv`.
    fn projected_cg(
        &mut self,
        settings: &LcpSettings,
        cap: usize,
        start_residual: f64,
    ) -> (usize, f64, bool) {
        let model = settings.friction;
        let mut best = start_residual;
        self.store_best();
        let mut rr = self.projected_descent(model);
        for s in self.scratch.iter_mut() {
            s[1] = s[0];
        }
        let mut its = 0;
        let mut done = false;
        while its < cap && rr > 0.0 {
            its += 1;
            // W d through the vertices: dv_scratch = M^-1 J' d, then (W d)_c = F_c sum w dv.
            self.dv_scratch.iter_mut().for_each(|d| *d = Vec3::zeros());
            for (c, s) in self.contacts.iter().zip(self.scratch.iter()) {
                scatter(c, &s[1], self.inv_mass, self.dv_scratch);
            }
            let dwd: f64 = self
                .contacts
                .iter()
                .zip(self.scratch.iter())
                .map(|(c, s)| s[1].dot(&velocity(c, self.dv_scratch, false)))
                .sum();
            if !(dwd > 0.0) {
                break;
            }
            let alpha = rr / dwd;
            let mut change = 0.0f64;
            for (k, c) in self.contacts.iter().enumerate() {
                let new = project_impulse(self.lambda[k] + alpha * self.scratch[k][1], c, model);
                change = change.max((new - self.lambda[k]).amax());
                self.lambda[k] = new;
            }
            self.refresh_dv();
            let residual = self.residual(model);
            if residual < best {
                best = residual;
                self.store_best();
            }
            if residual <= settings.velocity_tolerance || change <= settings.impulse_tolerance {
                done = residual <= best;
                break;
            }
            let rr_new = self.projected_descent(model);
            let beta = rr_new / rr;
            for s in self.scratch.iter_mut() {
                s[1] = s[0] + beta * s[1];
            }
            rr = rr_new;
        }
        self.restore_best();
        (its, best, done || best <= settings.velocity_tolerance)
    }

    /// Projected Gauss-Seidel sweeps from the current impulses. Returns (sweeps, best residual,
    /// whether a tolerance was met); leaves the best iterate in `lambda` and `dv`.
    fn projected_gauss_seidel(
        &mut self,
        settings: &LcpSettings,
        start_residual: f64,
    ) -> (usize, f64, bool) {
        let model = settings.friction;
        let mut best = start_residual;
        self.store_best();
        let mut sweeps = 0;
        let mut done = false;
        while sweeps < settings.max_sweeps {
            sweeps += 1;
            let mut change = 0.0f64;
            for (k, c) in self.contacts.iter().enumerate() {
                let s = diagonal(c, self.inv_mass);
                if !(s > 0.0) {
                    continue;
                }
                let old = self.lambda[k];
                let u = velocity(c, self.dv, true);
                // Normal first (exact, W_cc = s I); the tangential velocity does not depend on
                // the normal impulse of the same contact, so the friction update reuses u.
                let normal = (old.x - u.x / s).max(c.normal_floor());
                let trial = Vec3::new(normal, old.y - u.y / s, old.z - u.z / s);
                let new = project_impulse(trial, c, model);
                let delta = new - old;
                if delta != Vec3::zeros() {
                    scatter(c, &delta, self.inv_mass, self.dv);
                    self.lambda[k] = new;
                }
                change = change.max(delta.amax());
            }
            let residual = self.residual(model);
            if residual < best {
                best = residual;
                self.store_best();
            }
            if residual <= settings.velocity_tolerance || change <= settings.impulse_tolerance {
                done = true;
                break;
            }
        }
        self.restore_best();
        (sweeps, best, done || best <= settings.velocity_tolerance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{DMatrix, DVector};

    use crate::sim::test_rng::Rng;

    fn unit(rng: &mut Rng) -> Vec3 {
        loop {
            let v = Vec3::new(rng.signed(), rng.signed(), rng.signed());
            let n = v.norm();
            if n > 0.1 && n <= 1.0 {
                return v / n;
            }
        }
    }

    /// A random region: `m` contacts over a few particles (some shared), each a point against a
    /// triangle or a point against an obstacle, with free velocities mostly approaching.
    fn random_problem(rng: &mut Rng, m: usize, vertices: usize) -> (ContactLcp, Vec<f64>) {
        let inv_mass: Vec<f64> = (0..vertices)
            .map(|v| {
                if v == 0 {
                    0.0
                } else {
                    1.0 / (0.5 + rng.unit())
                }
            })
            .collect();
        let mut lcp = ContactLcp::default();
        for _ in 0..m {
            let mut c = LcpContact::new(unit(rng));
            let p = (rng.unit() * vertices as f64) as u32 % vertices as u32;
            c.add_term(p, 1.0);
            if rng.unit() < 0.6 {
                let (a, b) = (rng.unit(), rng.unit());
                let (a, b) = if a + b > 1.0 {
                    (1.0 - a, 1.0 - b)
                } else {
                    (a, b)
                };
                for w in [a, b, 1.0 - a - b] {
                    let v = (rng.unit() * vertices as f64) as u32 % vertices as u32;
                    c.add_term(v, -w);
                }
            }
            c.free_velocity = Vec3::new(rng.signed() - 0.5, rng.signed(), rng.signed());
            c.friction = 0.2 + 0.6 * rng.unit();
            c.normal_offset = if rng.unit() < 0.3 { rng.unit() } else { 0.0 };
            if rng.unit() < 0.5 {
                c.retractable = c.normal_offset * rng.unit();
            }
            if rng.unit() < 0.3 {
                let r = c.friction * c.normal_offset;
                c.tangent_offset = [0.6 * r * rng.signed(), 0.6 * r * rng.signed()];
            }
            lcp.push(c);
        }
        (lcp, inv_mass)
    }

    /// The dense `W = J M^-1 J'` and `b` of the contacts as added (independent of the solver's
    /// matrix-free products).
    fn dense(lcp: &ContactLcp, inv_mass: &[f64]) -> (DMatrix<f64>, DVector<f64>) {
        let m = lcp.len();
        let n = inv_mass.len();
        let mut j = DMatrix::<f64>::zeros(3 * m, 3 * n);
        for c in 0..m {
            let contact = lcp.contact(c);
            for (v, w) in contact.terms() {
                for r in 0..3 {
                    for k in 0..3 {
                        j[(3 * c + r, 3 * v + k)] += w * contact.frame[(r, k)];
                    }
                }
            }
        }
        let minv = DMatrix::from_fn(
            3 * n,
            3 * n,
            |r, c| {
                if r == c { inv_mass[r / 3] } else { 0.0 }
            },
        );
        let w = &j * minv * j.transpose();
        let b = DVector::from_fn(3 * m, |r, _| lcp.contact(r / 3).free_velocity[r % 3]);
        (w, b)
    }

    /// The frictionless LCP `0 <= x _|_ A x + q >= 0` by enumerating active sets (A positive
    /// semi-definite; a least-squares solve on each active set): a solution.
    fn lcp_by_enumeration(a: &DMatrix<f64>, q: &DVector<f64>) -> DVector<f64> {
        let m = q.len();
        for mask in 0u32..(1 << m) {
            let active: Vec<usize> = (0..m).filter(|&i| mask & (1 << i) != 0).collect();
            let mut x = DVector::zeros(m);
            if !active.is_empty() {
                let aa =
                    DMatrix::from_fn(active.len(), active.len(), |r, c| a[(active[r], active[c])]);
                let qa = DVector::from_fn(active.len(), |r, _| -q[active[r]]);
                let Ok(sol) = aa.clone().pseudo_inverse(1e-12).map(|p| p * &qa) else {
                    continue;
                };
                if (&aa * &sol - &qa).amax() > 1e-9 {
                    continue;
                }
                for (r, &i) in active.iter().enumerate() {
                    x[i] = sol[r];
                }
            }
            let y = a * &x + q;
            if x.iter().all(|&v| v >= -1e-12) && y.iter().all(|&v| v >= -1e-10) {
                return x;
            }
        }
        panic!("no solution found");
    }

    /// Solves a frictionless problem and compares it with enumeration. With `lambda_n >= -p`
    /// (`p` the retractable offsets), the problem in `lambda_n + p >= 0` is the plain LCP
    /// `0 <= y _|_ W y + (b - W p) >= 0`; the normal velocities are unique even where `W` is
    /// singular, so those are compared. Returns the normal impulses.
    fn solve_against_enumeration(mut lcp: ContactLcp, inv_mass: &[f64], m: usize) -> Vec<f64> {
        let settings = LcpSettings {
            velocity_tolerance: 1e-12,
            impulse_tolerance: 0.0,
            max_sweeps: 20_000,
            ..Default::default()
        };
        lcp.partition(inv_mass.len(), true, |v| inv_mass[v as usize]);
        let stats = lcp.solve(&settings, false);
        let (w, b) = dense(&lcp, inv_mass);
        // Contacts on pinned vertices only cannot act (zero impulse); the reference solves
        // the others.
        let acting: Vec<usize> = (0..m).filter(|&c| w[(3 * c, 3 * c)] > 0.0).collect();
        for c in (0..m).filter(|c| !acting.contains(c)) {
            assert_eq!(lcp.frame_impulse(c), Vec3::zeros());
        }
        let k = acting.len();
        let idx: Vec<usize> = acting.iter().map(|&c| 3 * c).collect();
        let wn = DMatrix::from_fn(k, k, |r, c| w[(idx[r], idx[c])]);
        let p = DVector::from_fn(k, |r, _| lcp.contact(acting[r]).retractable);
        let bn = DVector::from_fn(k, |r, _| b[idx[r]]) - &wn * &p;
        let reference = lcp_by_enumeration(&wn, &bn);
        let shifted = DVector::from_fn(k, |r, _| lcp.frame_impulse(acting[r]).x) + &p;
        assert!(shifted.iter().all(|&v| v >= -1e-12), "m {m}: {shifted}");
        let (u_ours, u_ref) = (&wn * &shifted + &bn, &wn * &reference + &bn);
        assert!(
            (u_ours - u_ref).amax() < 1e-6,
            "m {m}: {stats:?}\n{shifted}\n{reference}"
        );
        for c in 0..m {
            assert_eq!(lcp.frame_impulse(c).y, 0.0);
        }
        (0..m).map(|c| lcp.frame_impulse(c).x).collect()
    }

    #[test]
    fn frictionless_regions_match_the_dense_reference() {
        let mut rng = Rng(0xDEAD_BEEF_1234_5678);
        for m in 1..=7 {
            let (mut lcp, inv_mass) = random_problem(&mut rng, m, 6);
            for c in 0..m {
                lcp.input[c].friction = 0.0;
                lcp.input[c].normal_offset = 0.0;
                lcp.input[c].tangent_offset = [0.0; 2];
                lcp.input[c].retractable = 0.0;
            }
            solve_against_enumeration(lcp, &inv_mass, m);
        }
    }

    #[test]
    fn retractable_offsets_shift_the_normal_bound_as_the_dense_reference_says() {
        let mut rng = Rng(0x5EED_0F0F_F5E7);
        let mut pulled = false;
        for m in 1..=6 {
            let (mut lcp, inv_mass) = random_problem(&mut rng, m, 6);
            for c in 0..m {
                let contact = &mut lcp.input[c];
                contact.friction = 0.0;
                contact.tangent_offset = [0.0; 2];
                contact.normal_offset = rng.unit();
                contact.retractable = contact.normal_offset * rng.unit();
                // Separating contacts too, which the retractable part may pull back.
                contact.free_velocity.x = rng.signed();
            }
            let normal = solve_against_enumeration(lcp, &inv_mass, m);
            pulled |= normal.iter().any(|&l| l < -1e-9);
        }
        // The test exercises the bound below zero.
        assert!(pulled);
    }

    /// Signorini and Coulomb at a solution, with velocities from the dense `W`.
    fn check_conditions(
        lcp: &ContactLcp,
        inv_mass: &[f64],
        model: FrictionModel,
        counts: &mut (usize, usize),
    ) {
        let m = lcp.len();
        let (w, b) = dense(lcp, inv_mass);
        let lam = DVector::from_fn(3 * m, |r, _| lcp.frame_impulse(r / 3)[r % 3]);
        let u = &w * &lam + &b;
        for c in 0..m {
            let contact = lcp.contact(c);
            let l = lcp.frame_impulse(c);
            assert!(l.iter().all(|v| v.is_finite()));
            // Signorini for the total normal impulse, the retractable offset included.
            let total = l.x + contact.retractable;
            assert!(total >= 0.0);
            let s: f64 = contact.terms().map(|(v, wt)| wt * wt * inv_mass[v]).sum();
            if !(s > 0.0) {
                assert_eq!(l, Vec3::zeros());
                continue;
            }
            let scale = 1.0 + lam.amax();
            assert!(u[3 * c] >= -1e-6 * scale, "{model:?}: u_n {}", u[3 * c]);
            assert!((total * u[3 * c]).abs() < 1e-6 * scale * scale);
            let r = contact.friction * (contact.normal_offset + l.x);
            // The total friction: the solver's plus the offset already applied.
            let l = Vec3::new(
                l.x,
                l.y + contact.tangent_offset[0],
                l.z + contact.tangent_offset[1],
            );
            let tn = (l.y * l.y + l.z * l.z).sqrt();
            match model {
                FrictionModel::Cone => assert!(tn <= r + 1e-6, "{tn} > {r}"),
                FrictionModel::Pyramid => {
                    assert!(l.y.abs() <= r + 1e-6 && l.z.abs() <= r + 1e-6)
                }
            }
            let ut = [u[3 * c + 1], u[3 * c + 2]];
            let un = (ut[0] * ut[0] + ut[1] * ut[1]).sqrt();
            match model {
                FrictionModel::Cone => {
                    if tn < r - 1e-6 * scale {
                        assert!(un < 1e-5 * scale, "sticking contact slips: {un}");
                        counts.0 += usize::from(r > 1e-9);
                    } else if un > 1e-5 * scale && r > 1e-9 * scale {
                        let cos = -(l.y * ut[0] + l.z * ut[1]) / (tn * un);
                        assert!(cos > 1.0 - 1e-4, "friction not opposing the slip: {cos}");
                        counts.1 += 1;
                    }
                }
                FrictionModel::Pyramid => {
                    // Per component: inside the bounds the component's slip vanishes; at a
                    // bound it opposes the slip.
                    for (t, v) in [(l.y, ut[0]), (l.z, ut[1])] {
                        if t.abs() < r - 1e-6 * scale {
                            assert!(v.abs() < 1e-5 * scale, "sticking component slips: {v}");
                        } else if v.abs() > 1e-5 * scale {
                            assert!(t * v <= 0.0, "friction component along the slip");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn friction_satisfies_signorini_and_coulomb_for_cone_and_pyramid() {
        // Frictional contact is no QP (the bound depends on the normal impulse), and projected
        // iterations may cycle on a few problems: the paper reports 0-0.9 % of regions that do
        // not converge. Every solution must be feasible; nearly all must converge, and those
        // must satisfy Signorini and Coulomb.
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        let mut counts = (0, 0);
        for model in [FrictionModel::Cone, FrictionModel::Pyramid] {
            let (mut solved, mut total) = (0, 0);
            for _ in 0..10 {
                for (m, vertices) in [(1usize, 2usize), (3, 5), (8, 9), (20, 30)] {
                    let (mut lcp, inv_mass) = random_problem(&mut rng, m, vertices);
                    let settings = LcpSettings {
                        friction: model,
                        velocity_tolerance: 1e-10,
                        impulse_tolerance: 0.0,
                        max_sweeps: 20_000,
                        ..Default::default()
                    };
                    lcp.partition(inv_mass.len(), true, |v| inv_mass[v as usize]);
                    let stats = lcp.solve(&settings, true);
                    total += 1;
                    for c in 0..m {
                        let l = lcp.frame_impulse(c);
                        let contact = lcp.contact(c);
                        let r = contact.friction * (contact.normal_offset + l.x);
                        let (t1, t2) = (
                            l.y + contact.tangent_offset[0],
                            l.z + contact.tangent_offset[1],
                        );
                        assert!(
                            l.iter().all(|v| v.is_finite()) && l.x + contact.retractable >= 0.0
                        );
                        match model {
                            FrictionModel::Cone => {
                                assert!(t1.hypot(t2) <= r * (1.0 + 1e-9) + 1e-12)
                            }
                            FrictionModel::Pyramid => {
                                assert!(t1.abs().max(t2.abs()) <= r * (1.0 + 1e-9) + 1e-12)
                            }
                        }
                    }
                    if stats.residual <= 1e-8 {
                        solved += 1;
                        check_conditions(&lcp, &inv_mass, model, &mut counts);
                    }
                }
            }
            assert!(
                solved * 10 >= total * 9,
                "{model:?}: {solved} of {total} converged"
            );
        }
        // The random regions exercise both branches of the Coulomb law.
        assert!(counts.0 > 0 && counts.1 > 0, "{counts:?}");
    }

    #[test]
    fn separated_regions_match_the_monolithic_problem_for_any_thread_count() {
        let mut rng = Rng(0x5151_2020_7777_0001);
        let (mut lcp, inv_mass) = random_problem(&mut rng, 60, 240);
        let settings = LcpSettings {
            velocity_tolerance: 1e-11,
            impulse_tolerance: 0.0,
            max_sweeps: 20_000,
            ..Default::default()
        };
        lcp.partition(inv_mass.len(), true, |v| inv_mass[v as usize]);
        assert!(lcp.region_count() > 10, "{} regions", lcp.region_count());
        lcp.solve(&settings, true);
        let parallel: Vec<Vec3> = (0..lcp.len()).map(|c| lcp.impulse(c)).collect();
        lcp.solve(&settings, false);
        let serial: Vec<Vec3> = (0..lcp.len()).map(|c| lcp.impulse(c)).collect();
        // Bit-identical: no region reads another's data.
        assert_eq!(parallel, serial);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        pool.install(|| lcp.solve(&settings, true));
        let one_thread: Vec<Vec3> = (0..lcp.len()).map(|c| lcp.impulse(c)).collect();
        assert_eq!(parallel, one_thread);
        lcp.partition(inv_mass.len(), false, |v| inv_mass[v as usize]);
        assert_eq!(lcp.region_count(), 1);
        let stats = lcp.solve(&settings, false);
        assert!(stats.residual < 1e-9, "{stats:?}");
        let mut counts = (0, 0);
        check_conditions(&lcp, &inv_mass, FrictionModel::Cone, &mut counts);
        // Frictional solutions need not be unique, but these well-separated ones agree.
        let worst = (0..lcp.len())
            .map(|c| (lcp.impulse(c) - parallel[c]).amax())
            .fold(0.0, f64::max);
        assert!(worst < 1e-6, "separated and monolithic differ by {worst}");
    }

    #[test]
    fn the_cg_phase_reduces_the_residual_and_keeps_its_best_iterate() {
        let mut rng = Rng(0xABCD_0000_1111_2222);
        let (mut lcp, inv_mass) = random_problem(&mut rng, 12, 14);
        lcp.partition(inv_mass.len(), false, |v| inv_mass[v as usize]);
        let only_cg = LcpSettings {
            max_sweeps: 0,
            velocity_tolerance: 0.0,
            impulse_tolerance: 0.0,
            ..Default::default()
        };
        let start = {
            let none = LcpSettings {
                max_cg_iterations: 0,
                ..only_cg
            };
            lcp.solve(&none, false).residual
        };
        let stats = lcp.solve(&only_cg, false);
        assert!(stats.cg_iterations > 0);
        assert!(
            stats.residual < 0.5 * start,
            "{} -> {}",
            start,
            stats.residual
        );
        // The impulses returned are the best iterate: their residual is the one reported.
        let mut region = Region {
            contacts: &lcp.contacts,
            inv_mass: &lcp.inv_mass,
            lambda: &mut lcp.lambda.clone(),
            dv: &mut lcp.dv.clone(),
            scratch: &mut lcp.scratch.clone(),
            dv_scratch: &mut lcp.dv_scratch.clone(),
        };
        region.refresh_dv();
        assert!((region.residual(FrictionModel::Cone) - stats.residual).abs() < 1e-12);
    }

    #[test]
    fn pinned_contacts_and_empty_problems_are_safe() {
        let mut lcp = ContactLcp::default();
        assert_eq!(
            lcp.solve(&LcpSettings::default(), true),
            LcpStats::default()
        );
        // A contact whose only vertex is pinned cannot act; a free one stops its approach.
        let mut pinned = LcpContact::new(Vec3::y());
        pinned.add_term(0, 1.0);
        pinned.free_velocity = Vec3::new(-1.0, 0.0, 0.0);
        let mut free = LcpContact::new(Vec3::y());
        free.add_term(1, 1.0);
        free.free_velocity = Vec3::new(-2.0, 0.5, 0.0);
        free.friction = 0.1;
        lcp.push(pinned);
        lcp.push(free);
        lcp.partition(2, true, |v| if v == 0 { 0.0 } else { 0.5 });
        let stats = lcp.solve(&LcpSettings::default(), true);
        assert_eq!(stats.regions, 2);
        assert_eq!(lcp.impulse(0), Vec3::zeros());
        // m = 2 kg: stopping 2 m/s takes 4 N s; friction is then bounded by 0.4 N s.
        let l = lcp.frame_impulse(1);
        assert!((l.x - 4.0).abs() < 1e-9, "{l}");
        assert!((l.y.hypot(l.z) - 0.4).abs() < 1e-9, "{l}");
        let dv: Vec<(usize, Vec3)> = lcp.velocity_changes().collect();
        assert!(dv.iter().all(|(_, d)| d.iter().all(|c| c.is_finite())));
    }

    #[test]
    fn tangents_complete_an_orthonormal_frame() {
        let mut rng = Rng(7);
        for _ in 0..100 {
            let n = unit(&mut rng);
            let c = LcpContact::new(n);
            let f = c.frame;
            assert!((f * f.transpose() - Mat3::identity()).amax() < 1e-12);
            assert!((f.determinant() - 1.0).abs() < 1e-12);
        }
    }
}
