//! Contact between soft bodies and obstacles.
//!
//! 1. [`obstacle`]: parry3d shapes with a pose and a velocity; closest point, normal and depth.
//! 2. [`narrowphase`]: every collision proxy of a body (surface vertices by default) against the
//!    obstacles whose bounds it may touch: speculatively from the start of the step along the
//!    predicted motion, then re-checked at the iterates.
//! 3. [`broadphase`]: per-body parry3d BVHs over surface vertices, boundary triangles and edges,
//!    refitted each step over the step's motion, giving sorted (vertex, triangle) candidate pairs
//!    between bodies and within one; [`soft`]: those pairs as point-triangle contacts
//!    ([`point_triangle`], eq. (8)), speculative like the obstacle ones, with the one-ring skip
//!    for self-collision; [`edge_edge`]: boundary edges crossing each other between their
//!    vertices, from the same BVHs' edge trees; [`overlap`]: surface vertices deep inside
//!    another body (an overlapping spawn), flooded from the shallow ones and pushed out along
//!    the overlap's vector-area normal. [`ccd`]: continuous vertex-triangle and edge-edge
//!    tests over a step's linear motion (the cloth's impact zones).
//! 4. [`constraints`]: contacts become rows `J x >= c`; *collision decoupling* keeps rows
//!    vertex-disjoint, deepest first, so `J J'` is (block) diagonal (section 5 of
//!    Li et al. 2015 picks at random; we pick the deepest so the most dangerous
//!    penetration is always resolved, deterministically). Unlike the paper, a vertex may keep
//!    one row per obstacle, up to three (floor and wall of a room's corner): dropping one of them
//!    let a jelly thrown into a corner sink 3 cm into the wall; and a soft-soft row holds taken
//!    vertices at their current positions instead of being dropped.
//! 5. [`rigid`]: the mass properties of a dynamic rigid body behind a *coupled* obstacle, which
//!    the soft bodies' contact forces move within the step (two-way coupling with a rigid-body
//!    engine), and what they did to it.
//! 6. [`regions`]: contacts split into vertex-disjoint regions (union-find, deterministic ids);
//!    [`lcp`]: the velocity-level problem of each region, Signorini and Coulomb friction (cone
//!    or pyramid), projected CG then projected Gauss-Seidel, regions in parallel
//!    (Lazarevych et al.). Restitution is not part of it (deviation: the paper puts it in the
//!    problem's free velocity `b`, eq. (12)): the world applies the rebound before the LCP, as
//!    a force through each body's prefactored matrix (the island's restitution stage, after
//!    the position solve); the LCP then sees the rebound velocities as its free velocities,
//!    and a contact that bounces may not take back its position-level push
//!    ([`LcpContact::retractable`] stays 0).
//!
//! Every module here serves the world's step (`crate::sim::world`): obstacle contacts in its
//! predict phase, soft contacts in its detect phase, the rows in its islands' QPs during the PD
//! iterations, regions and the LCP in its respond phase.

pub mod broadphase;
pub mod ccd;
pub mod constraints;
mod convex_faces;
pub mod edge_edge;
pub mod lcp;
pub mod narrowphase;
pub mod obstacle;
mod obstacle_error;
pub mod overlap;
pub mod point_triangle;
pub mod regions;
pub mod rigid;
pub mod soft;
pub mod surface_shape;
#[cfg(test)]
mod test_body;

pub use broadphase::{BodyBvh, candidate_edge_pairs, candidate_pairs};
pub use constraints::{RowDecoupler, RowSource, RowSpec, RowTerm};
pub use edge_edge::{EdgeContact, detect_edge_contacts, edge_closest_parameters, fit_edge_bvh};
pub use lcp::{ContactLcp, FrictionModel, LcpContact, LcpSettings, LcpStats};
pub use narrowphase::{Contact, detect_contacts, detect_contacts_swept};
pub use obstacle::{ObstacleCollider, ObstacleContact, ObstacleError, ObstacleShape};
pub use overlap::{OverlapScratch, detect_deep_overlap};
pub use point_triangle::{PointTriangleContact, closest_point_on_triangle, point_triangle_contact};
pub use regions::ContactRegions;
pub use rigid::{CouplingResponse, RigidCoupling};
pub use soft::{SoftContact, SoftSurface, detect_soft_contacts, fit_surface_bvh};
pub use surface_shape::{DrawnMesh, SurfaceShape};
