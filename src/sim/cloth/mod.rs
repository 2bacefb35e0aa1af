//! Cloth: thin triangle-mesh bodies stepped by Projective Dynamics with a prefactored matrix,
//! the solids' method on a surface (Bouaziz et al. 2014; the seed notes on mass-spring, PBD and
//! PD cloth).
//!
//! | file | what |
//! | --- | --- |
//! | `mesh.rs` | [`ClothMesh`]: a checked triangle mesh at rest and its hinges; the rectangle builder |
//! | `membrane.rs` | in-plane elasticity: the triangles' 3 x 2 deformation gradients, their SVD (and its right half alone), and the as-rigid-as-possible, strain-limit and area-limit projections |
//! | `springs.rs` | the mass-spring in-plane model: a PD spring per edge |
//! | `bending.rs` | the quadratic bending model for flat rest shapes (a constant matrix per hinge) |
//! | `curvature.rs` | bending that keeps a curved rest shape: each interior vertex's mean curvature vector held at its rest length |
//! | `contact.rs` | the cloth against obstacles: speculative contact planes projected after every global solve, Coulomb friction |
//! | `self_contact.rs` | the cloth against itself: vertex-triangle and edge-edge pairs kept a thickness apart on the side each was first seen on, projected after every global solve, Coulomb friction |
//! | `patches.rs` | the self-collision broadphase: a tree of connected surface patches with boxes and normal cones over the step, flat patches not tested against themselves |
//! | `other_cloths.rs` | the cloth against other cloths: their vertices and triangles in its self-contact pairs and impact zones, standing still in its step |
//! | `impact_zones.rs` | the fail-safe: continuous collision detection over the step, and the vertices of pairs that would pass through each other moved as one |
//! | `system.rs` | [`ClothSystem`]: one cloth's implicit step: pins, gravity, wind and drag, damping |
//! | `system/pins.rs` | the pins' reactions: per pin from its elastic row, all together from the cloth's momentum balance |
//! | `system/neighbours.rs` | what the cloth's pairs put on other cloths: its momentum balance's share from them, shared among the pairs |
//! | `system/chebyshev.rs` | Chebyshev extrapolation of the iterations while the cloth touches nothing, and their stopping rule |
//!
//! A cloth touches obstacles ([`ClothSystem::step_among`], `contact.rs`), and soft bodies
//! through their surfaces as obstacles ([`crate::sim::SoftWorld::surface_obstacle`]); the
//! Bevy layer (`crate::cloth`) steps one per `DeformableCloth` entity among the world's
//! obstacles and the surfaces of the soft bodies near it, its pins following its entity or
//! riding on a soft body's tets (`DeformableCloth::pin_to_body`,
//! [`crate::sim::embed::embed_points_at`]). The bodies feel it one step late: each step
//! reports the impulses its contacts put on the obstacles
//! ([`ClothSystem::obstacle_impulses`]) and its pins on their holders
//! ([`ClothSystem::pin_impulses`] per pin, [`ClothSystem::pins_total_impulse`] all together
//! by momentum balance, `system/pins.rs`), which the Bevy layer applies to the bodies
//! ([`crate::sim::SoftWorld::apply_impulses_at`]) before their next step. With [`ClothSystem::self_collision`]
//! on (off by default), it also keeps off itself: pairs found after the first iteration
//! (again while the iterates move a vertex more than the thickness, three detections at most)
//! are projected after every global solve and the obstacles' planes, and the impact zones
//! undo what would pass through within the step, within 16 rounds, for a cloth that starts it
//! uncrossed (`tests/sim_cloth_self.rs`). Other cloths are two-sided moving obstacles to it
//! ([`ClothSystem::step_among_cloths`], `other_cloths.rs`): their vertices join these pairs
//! and zones as vertices that do not move in its step (`tests/sim_cloth_pair.rs`); what its
//! pairs put on them ([`ClothSystem::neighbour_impulses`]) goes to the ones that stepped
//! before it, for their next step (`system/neighbours.rs`). What it is not yet: part of a
//! [`crate::sim::SoftWorld`] (a cloth is stepped on its own: a soft body feels it a step
//! late, and another cloth only one way, `other_cloths.rs`). `cargo bench --bench cloth`
//! (`docs/PERFORMANCE.md`): a 32 x 32 flag about 2 ms a step on one thread, 64 x 64 about
//! 10. The local step runs its triangles in parallel, each triangle's targets formed from the
//! eigenvectors of `F'F` without the left singular vectors (`system.rs`, `projection_forces`);
//! after it, the solves through the factor (two triangular solves per iteration, on one
//! thread) are about 30 % of a one-thread profile and the local step's loop 57 %.
//!
//! The strain limits' stiffness is part of the prefactored matrix, so a stiffer limit holds
//! the stretch closer but converges slower at a fixed iteration count: at 10 iterations a
//! 1 m sheet hung by two corners with a 1e5 N/m limit was still creeping down (2-6 cm a
//! second) after 10 s, where 1e3 N/m let it hang within 2 s and 1e4 within about 4 s
//! ([`ClothMaterial::COTTON`] uses 2e3).
//!
//! The same slow convergence limits fine cloth: the PD matrix is a Laplacian that knows no
//! rotation, so a part of the cloth turning about a held line (a tablecloth's overhang folding
//! down at the table's edge) turns only a little per iteration where the in-plane stiffness is
//! far above the mass term `m / h^2`, and at 4 cm cells it is about a thousand times above.
//! Measured with cotton at 1/64 s and ten iterations (a scratch driver): a 20 cm flap beside a
//! pinned region dropped only about 17 degrees in 1.7 s; a 1.5 m tablecloth dropped onto a
//! table drapes over the edge at 16-20 cells across (7.5-9.4 cm), and at 24 or more its landing
//! overhang falls flat, stretches the row at the edge and springs back into folds on the table
//! (30 or 100 iterations end the same). With a bowl (a ball) on the table, the 36-cell cloth
//! gained energy where the bowl's and the table's planes push a rim vertex in turn, and its
//! triangles stretched past 10x within a second of landing; the 20-cell one rests (15 s
//! measured). Contact in the global solve (the `A`-norm projection the solids' QP makes),
//! Chebyshev or Anderson acceleration of the cloth's iterations, substeps, or a Newton step
//! are the changes that would lift it.

mod bending;
mod contact;
mod curvature;
mod impact_zones;
mod membrane;
mod mesh;
mod other_cloths;
mod patches;
mod self_contact;
mod springs;
mod system;

pub use bending::{bending_energy, hinge_weights};
pub use curvature::{CurvatureRow, curvature_energy, curvature_rows};
pub use membrane::{RestTriangle, area_limited, compose, svd32};
pub use mesh::{ClothMesh, ClothMeshError, Hinge};
pub use other_cloths::NeighbourCloth;
pub use springs::{RestEdge, rest_edges, spring_energy, spring_target};
pub use system::{
    BendingModel, ClothError, ClothMaterial, ClothSystem, DEFAULT_CLOTH_ITERATIONS,
    FLAG_CHEBYSHEV_RHO, FLAG_ITERATIONS, InPlaneModel,
};
