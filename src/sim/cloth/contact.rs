//! A cloth against obstacles: speculative contact planes, their projection after every global
//! solve, and Coulomb friction on the step's tangential motion.
//!
//! **Detection, once per step.** Every free vertex is tested where it starts the step, with
//! the margin widened by how far its inertial prediction moves it
//! ([`crate::sim::contact::detect_contacts_swept`], the solids' speculative contacts): a contact
//! is kept where the prediction comes within the cloth's thickness of the plane through the
//! obstacle's closest point. The plane comes from where the vertex was, so a vertex falling at
//! 20 m/s onto a 2 mm plate meets the plate's top face, not the far side of it; against a
//! moving obstacle, from where the vertex was relative to it (its start carried by the
//! obstacle's velocity over the step), so a ball swung through a curtain meets the curtain on
//! its front. Within the
//! iterations a vertex with no contact that has come within the thickness of an obstacle gets
//! one from where it is (re-detection at the iterate, with the closest point's plane).
//!
//! **Projection, after every global solve.** Each contact asks `n' (x_v - p) >= thickness`,
//! of the iterate and of the vertex's inertial target `y_v` alike (a target inside would pull
//! the cloth resting on the plane into it at every solve, and the cloth around it with it).
//! A vertex on the wrong side of its plane is checked against the obstacle: where it is on the
//! plane's side of the surface, or got where it is without passing through the obstacle, the
//! plane moves to the surface's closest point (a vertex wrapping round a table's edge follows
//! the edge; a plane kept from the step's start would hold it under the edge), and where its
//! straight path from the step's start went through the obstacle, the speculative plane
//! stays. The vertex is then moved out along the normal, so every iterate, and the step's end,
//! has no vertex within the thickness of an obstacle's surface (up to a vertex between two
//! obstacles, whose planes are projected one after the other).
//!
//! **Friction, after the iterations** (position-based Coulomb friction, Macklin et al. 2014,
//! "Unified particle physics for real-time applications", section 6.1): a vertex the contact
//! pushed by `d` along the normal in this step may slide, relative to the obstacle's surface,
//! by no more than `mu d`: its tangential displacement is cut by `mu d` (to zero where it is
//! smaller: static friction). `d` is the push on its inertial target (the approach and the
//! weight the contact cancelled) plus the last iterate's push, so the bound is Coulomb's
//! `|f_t| <= mu f_n` with both forces times `h^2 / m`.
//!
//! Deviation from the solids' contact (a QP per global step, `crate::sim::qp`): the planes are
//! projected in the Euclidean metric after an unconstrained solve, as position-based dynamics
//! projects collisions, not solved with the global matrix. The cloth's matrix is too
//! ill-conditioned for an iterative QP at a game's budget (its stretch stiffness is thousands
//! of times its mass term at 1/60 s, so projected CG takes hundreds of iterations), and a
//! draped cloth has hundreds of contacts, too many for the solids' dense dual. The projected
//! iterate is what the next local step sees, so the cloth's elasticity carries the contact to
//! the vertices around it within the step's iterations. That fixed point is not the QP's: at
//! cells under about 7 cm a tablecloth's overhang folds up on the table instead of hanging
//! (measured in `mod.rs`). Only vertices collide: an edge or a triangle of a coarse cloth can
//! pass over a feature narrower than its cells (a thin pole); a fast turning obstacle is
//! carried by its velocities to first order.

use crate::sim::contact::{Contact, ObstacleCollider, detect_contacts_swept};
use crate::sim::embed::EmbeddedPoint;
use crate::sim::material::CombineRule;
use crate::sim::math::Vec3;

/// A vertex within this fraction of the thickness outside its plane touches the obstacle.
const SUPPORTED: f64 = 0.01;

/// One contact plane of a cloth vertex.
#[derive(Debug, Clone, Copy)]
struct Plane {
    vertex: u32,
    obstacle: u32,
    /// A point of the obstacle's surface (m) and its outward unit normal.
    point: Vec3,
    normal: Vec3,
    /// The last projection's push along the normal (m), 0 where it did not touch.
    push: f64,
    /// How far the step's inertial target was moved out along the normal (m): the approach
    /// and weight the contact took from the prediction.
    target_push: f64,
    /// Where the vertex started the step relative to the obstacle, in the obstacle's pose at
    /// its end (m; its start itself where the obstacle stands still).
    from: Vec3,
    /// The impulse (N s) the vertex put on the obstacle over the step (set by friction).
    impulse: Vec3,
}

/// Where `p` (m), at the step's start, is relative to `obstacle` in the obstacle's pose at the
/// step's end: `p` carried along by the obstacle's motion over the step `h` (s), so that a
/// fast obstacle's sweep counts as the vertex's motion through it.
fn carried(obstacle: &ObstacleCollider, p: Vec3, h: f64) -> Vec3 {
    if obstacle.is_moving() {
        p + h * obstacle.velocity_at(&p)
    } else {
        p
    }
}

/// A cloth's contacts with the obstacles in one step, and the buffers they reuse.
#[derive(Debug, Default)]
pub(super) struct ClothContacts {
    /// One proxy per vertex, for the speculative detection.
    proxies: Vec<EmbeddedPoint>,
    start: Vec<Vec3>,
    end: Vec<Vec3>,
    found: Vec<Contact>,
    planes: Vec<Plane>,
    /// Per vertex: whether a plane holds it.
    held: Vec<bool>,
    /// Per vertex: the normal of the obstacle it touches after the last projection (within a
    /// hundredth of the thickness of its plane), or zero.
    support: Vec<Vec3>,
    /// Per obstacle: its bounds padded by the thickness (scratch).
    bounds: Vec<Option<(Vec3, Vec3)>>,
    /// The vertices' starts carried by one obstacle's motion (scratch).
    carried: Vec<Vec3>,
}

impl ClothContacts {
    /// The step's speculative contact planes of the free vertices (`free[v]`) moving from
    /// `start` to the prediction `y` over the step `h` (s), within `thickness` (m).
    pub fn detect(
        &mut self,
        start: &[Vec3],
        y: &[Vec3],
        free: impl Fn(usize) -> bool,
        obstacles: &[ObstacleCollider],
        (thickness, h): (f64, f64),
    ) {
        let n = start.len();
        if self.proxies.len() != n {
            self.proxies = (0..n as u32).map(EmbeddedPoint::vertex).collect();
        }
        self.planes.clear();
        self.held.clear();
        self.held.resize(n, false);
        if obstacles.is_empty() {
            return;
        }
        // One obstacle at a time: a moving one is met where the vertices were relative to it.
        for (o, obstacle) in obstacles.iter().enumerate() {
            self.carried.clear();
            self.carried
                .extend(start.iter().map(|&p| carried(obstacle, p, h)));
            self.found.clear();
            detect_contacts_swept(
                &self.proxies,
                &self.carried,
                y,
                std::slice::from_ref(obstacle),
                thickness,
                &[],
                &mut self.start,
                &mut self.end,
                &mut self.found,
            );
            for c in &self.found {
                let v = c.proxy as usize;
                if free(v) {
                    self.held[v] = true;
                    self.planes.push(Plane {
                        vertex: c.proxy,
                        obstacle: o as u32,
                        point: c.point,
                        normal: c.normal,
                        push: 0.0,
                        target_push: 0.0,
                        from: self.carried[v],
                        impulse: Vec3::zeros(),
                    });
                }
            }
        }
    }

    /// Moves every vertex of `x` held by a plane out to the cloth's `thickness` (m) from the
    /// obstacle's surface, and its inertial target in `y` with it; first gives a plane to
    /// each free vertex that has come within the thickness of an obstacle without one.
    /// `start` holds the positions at the step's start.
    ///
    /// A vertex that is on the wrong side of its plane is checked against the obstacle itself:
    /// where it is within the thickness of the surface on the plane's side, or got there
    /// without its straight path from the step's start passing through the obstacle, the plane
    /// is moved to the surface's closest point (so a vertex wrapping round a table's edge
    /// follows the edge instead of the plane it had above it); where its path went through
    /// the obstacle (a fast vertex through a thin plate), the plane it had stays.
    pub fn project(
        &mut self,
        x: &mut [Vec3],
        y: &mut [Vec3],
        start: &[Vec3],
        free: impl Fn(usize) -> bool,
        obstacles: &[ObstacleCollider],
        (thickness, h): (f64, f64),
    ) {
        self.support.clear();
        self.support.resize(x.len(), Vec3::zeros());
        if obstacles.is_empty() {
            return;
        }
        self.bounds.clear();
        self.bounds.extend(obstacles.iter().map(|o| {
            o.bounds()
                .map(|(lo, hi)| (lo.add_scalar(-thickness), hi.add_scalar(thickness)))
        }));
        for (v, p) in x.iter().enumerate() {
            if self.held[v] || !free(v) {
                continue;
            }
            for (o, obstacle) in obstacles.iter().enumerate() {
                if let Some((lo, hi)) = &self.bounds[o]
                    && (0..3).any(|k| p[k] < lo[k] || p[k] > hi[k])
                {
                    continue;
                }
                if let Some(c) = obstacle.query(*p, thickness) {
                    self.held[v] = true;
                    self.planes.push(Plane {
                        vertex: v as u32,
                        obstacle: o as u32,
                        point: c.point,
                        normal: c.normal,
                        push: 0.0,
                        target_push: 0.0,
                        from: carried(obstacle, start[v], h),
                        impulse: Vec3::zeros(),
                    });
                    break;
                }
            }
        }
        for plane in &mut self.planes {
            let v = plane.vertex as usize;
            let p = &mut x[v];
            let gap = plane.normal.dot(&(*p - plane.point)) - thickness;
            plane.push = 0.0;
            if gap >= 0.0 {
                // Outside the plane: outside a convex obstacle by the thickness at least.
                if gap <= SUPPORTED * thickness {
                    self.support[v] = plane.normal;
                }
                continue;
            }
            let obstacle = &obstacles[plane.obstacle as usize];
            let through = || obstacle.segment_enters(plane.from, *p);
            match obstacle.query(*p, thickness) {
                Some(c) if c.normal.dot(&plane.normal) > 0.0 || !through() => {
                    plane.point = c.point;
                    plane.normal = c.normal;
                }
                // On the far side, having passed through: back to the plane's side.
                Some(_) => {}
                None if through() => {}
                // Round the obstacle, clear of it: nothing to push.
                None => continue,
            }
            let gap = plane.normal.dot(&(*p - plane.point)) - thickness;
            if gap < 0.0 {
                plane.push = -gap;
                *p -= gap * plane.normal;
            }
            if gap <= SUPPORTED * thickness {
                self.support[v] = plane.normal;
            }
            let gap = plane.normal.dot(&(y[v] - plane.point)) - thickness;
            if gap < 0.0 {
                plane.target_push -= gap;
                y[v] -= gap * plane.normal;
            }
        }
    }

    /// Coulomb friction on the step's motion from `start` to `x` (see the module docs), with
    /// the cloth's coefficient `friction` combined with each obstacle's; `h` the step (s).
    /// Records each contact's impulse on its obstacle with the vertices' masses `mass` (kg):
    /// the normal push and the friction's cut, each times `m / h`.
    pub fn apply_friction(
        &mut self,
        x: &mut [Vec3],
        start: &[Vec3],
        obstacles: &[ObstacleCollider],
        (friction, mass): (f64, &[f64]),
        h: f64,
    ) {
        for plane in &mut self.planes {
            plane.impulse = Vec3::zeros();
            let pushed = plane.push + plane.target_push;
            if pushed <= 0.0 {
                continue;
            }
            let obstacle = &obstacles[plane.obstacle as usize];
            let surface = obstacle.surface();
            let mu =
                CombineRule::Average.combine(friction, surface.friction_combine, surface.friction);
            let v = plane.vertex as usize;
            let n = plane.normal;
            let moved = x[v] - start[v] - h * obstacle.velocity_at(&plane.point);
            let tangential = moved - n * n.dot(&moved);
            let length = tangential.norm();
            let budget = mu * pushed;
            let cut = if length <= budget {
                tangential
            } else {
                tangential * (budget / length)
            };
            x[v] -= cut;
            // The cloth was pushed out along `n` and held back by `cut`; the obstacle takes
            // the opposite.
            plane.impulse = (mass[v] / h) * (cut - pushed * n);
        }
    }

    /// Per contact of the last step: its obstacle's index, a point of the obstacle's surface
    /// (m) and the impulse (N s) the cloth put on the obstacle there over the step (into it
    /// along the normal, and along the cloth's sliding by friction).
    pub fn impulses(&self) -> impl Iterator<Item = (usize, Vec3, Vec3)> + '_ {
        self.planes
            .iter()
            .filter(|p| p.impulse != Vec3::zeros())
            .map(|p| (p.obstacle as usize, p.point, p.impulse))
    }

    /// Per vertex: the outward normal of the obstacle the last projection left it touching
    /// (within a hundredth of the thickness), or zero.
    pub fn supports(&self) -> &[Vec3] {
        &self.support
    }

    /// Contact planes in this step.
    pub fn count(&self) -> usize {
        self.planes.len()
    }

    /// Per plane: its vertex, a point of the obstacle's surface (m) and the outward unit
    /// normal.
    pub fn planes(&self) -> impl Iterator<Item = (usize, Vec3, Vec3)> + '_ {
        self.planes
            .iter()
            .map(|p| (p.vertex as usize, p.point, p.normal))
    }
}
