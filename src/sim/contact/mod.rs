//! Contact between soft bodies and obstacles.
//!
//! 1. [`obstacle`]: parry3d shapes with a pose and a velocity; closest point, normal and depth.
//! 2. [`narrowphase`]: every collision proxy of a body (surface vertices by default) against the
//!    obstacles whose bounds it may touch: speculatively from the start of the step along the
//!    predicted motion, then re-checked at the iterates.
//! 3. [`constraints`]: contacts become rows `n'(sum_k w_k x_k - p) >= 0` (eq. (8) of
//!    `mprgp-collision-qp.txt`); *collision decoupling* keeps rows vertex-disjoint, deepest
//!    first, so `J J'` is (block) diagonal (section 5 of that paper picks at random; we pick the
//!    deepest so the most dangerous penetration is always resolved, deterministically). Unlike
//!    the paper, a vertex may keep one row per obstacle, up to three (floor and wall of a room's
//!    corner): dropping one of them let a jelly thrown into a corner sink 3 cm into the wall.
//! 4. [`broadphase`]: per-body BVHs over proxies and boundary triangles, refitted each step,
//!    giving sorted (proxy, triangle) candidate pairs between bodies (and within one, for
//!    self-collision), and [`point_triangle`]: the point-triangle constraint of eq. (8) for such a
//!    pair; [`regions`]: constraints split into vertex-disjoint contact regions (union-find,
//!    deterministic ids) for the friction LCPs; [`lcp`]: one region's velocity-level problem
//!    with Coulomb friction (cone or pyramid) by projected Gauss-Seidel. None of these is wired
//!    into the step yet: coupled soft-soft rows are the next part.

pub mod broadphase;
pub mod constraints;
pub mod lcp;
pub mod narrowphase;
pub mod obstacle;
pub mod point_triangle;
pub mod regions;

pub use broadphase::{BodyBvh, candidate_pairs};
pub use constraints::{DecoupledRows, build_rows};
pub use lcp::{FrictionModel, PgsSettings, solve_region};
pub use narrowphase::{Contact, detect_contacts, detect_contacts_swept};
pub use obstacle::{Obstacle, ObstacleContact, ObstacleError, ObstacleShape};
pub use point_triangle::{PointTriangleContact, closest_point_on_triangle, point_triangle_contact};
pub use regions::ContactRegions;
