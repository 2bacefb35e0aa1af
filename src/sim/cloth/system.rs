//! [`ClothSystem`]: one cloth stepped by Projective Dynamics (Bouaziz et al. 2014) with a
//! constant, prefactored matrix: implicit Euler, a local step over the triangles (the
//! as-rigid-as-possible and strain-limit projections, `membrane.rs`), the edge springs
//! (`springs.rs`, with [`InPlaneModel::MassSpring`]) and the curvature rows (`curvature.rs`,
//! with [`BendingModel::RestCurvature`]), and a global solve through the Cholesky factor of
//! `M / h^2` plus every constraint's constant `w G' G` and the hinges' bending matrix
//! (`bending.rs`, with [`BendingModel::FlatHinges`]) over the free vertices. Pinned vertices
//! are not unknowns: they sit at their targets, and their terms move to the right-hand side.
//!
//! Per step: the velocity damping and the external forces (gravity, and aerodynamic drag on
//! each triangle from its velocity relative to the wind, stronger along its normal than in its
//! plane) give the inertial
//! prediction `y = x + h v + h^2 M^-1 f`; a fixed number of local/global iterations from `y`;
//! then `v = (x_new - x) / h`. With obstacles ([`ClothSystem::step_among`]) the vertices are
//! kept outside them by contact planes projected after every global solve, with friction
//! after the iterations (`contact.rs`).

use std::sync::Arc;

use rayon::prelude::*;
use thiserror::Error;

use super::bending::{bending_energy, hinge_weights};
use super::contact::ClothContacts;
use super::curvature::{CurvatureRow, curvature_energy, curvature_rows};
use super::impact_zones::ImpactZones;
use super::membrane::{
    COLLAPSED, RestTriangle, area_limited, compose, right_singular, svd32, times_right,
};
use super::mesh::{ClothMesh, ClothMeshError};
use super::other_cloths::{NeighbourCloth, OtherCloths};
use super::patches::PatchTree;
use super::self_contact::ClothSelfContacts;
use super::springs::{RestEdge, rest_edges, spring_energy, spring_target};
use crate::sim::contact::ObstacleCollider;
use crate::sim::math::Vec3;
use crate::sim::sparse::{FactorError, SparseCholesky, SymmetricMatrix};
use chebyshev::Chebyshev;

mod chebyshev;
mod neighbours;
mod pins;

/// How a cloth resists stretching in its plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InPlaneModel {
    /// Each triangle pulled toward a rotation of its rest shape (`membrane.rs`).
    #[default]
    AsRigidAsPossible,
    /// A spring along each mesh edge ([`super::spring_target`]).
    MassSpring,
}

/// How a cloth resists bending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BendingModel {
    /// The quadratic hinge model for a flat rest shape (`bending.rs`).
    #[default]
    FlatHinges,
    /// The rest curvature kept at every interior vertex, for curved or pre-bent rest shapes
    /// ([`super::CurvatureRow`]).
    RestCurvature,
}

/// What a cloth is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClothMaterial {
    /// Mass per area (kg/m^2).
    pub density: f64,
    /// The in-plane model.
    pub in_plane: InPlaneModel,
    /// In-plane stiffness (N/m): the as-rigid-as-possible weight per rest area, or each edge
    /// spring's constant ([`InPlaneModel::MassSpring`]).
    pub stretch_stiffness: f64,
    /// The bending model.
    pub bending: BendingModel,
    /// Bending stiffness (N m).
    pub bend_stiffness: f64,
    /// Strain limits `(min, max)`: each triangle's principal stretches are held within them by
    /// [`ClothMaterial::limit_stiffness`] (no force inside); `None` for no limit.
    pub strain_limits: Option<(f64, f64)>,
    /// Stiffness of the strain limits (N/m), acting beyond them.
    pub limit_stiffness: f64,
    /// Area limits `(min, max)`: each triangle's area over its rest area is held within them
    /// by [`ClothMaterial::area_stiffness`] (no force inside); `None` for no limit.
    pub area_limits: Option<(f64, f64)>,
    /// Stiffness of the area limits (N/m), acting beyond them.
    pub area_stiffness: f64,
    /// Velocity damping (1/s): velocities decay as `1 / (1 + damping h)` per step besides the
    /// forces.
    pub damping: f64,
    /// Aerodynamic drag (kg/(m^2 s)): per area, the force along the normal per m/s of normal
    /// velocity relative to the wind.
    pub drag: f64,
    /// Aerodynamic drag along the surface (kg/(m^2 s)): per area, the force in the plane per
    /// m/s of in-plane velocity relative to the wind (the skin friction that streams a flag
    /// out along a wind in its plane).
    pub tangential_drag: f64,
    /// How far (m) the cloth's vertices keep from an obstacle's surface, `> 0`.
    pub thickness: f64,
    /// Coulomb friction coefficient against obstacles (dimensionless, `>= 0`), averaged with
    /// the obstacle's by its combine rule.
    pub friction: f64,
}

impl ClothMaterial {
    /// Silk: 0.05 kg/m^2, light and flowing: 500 N/m in plane with 1,000 N/m more beyond 8 %
    /// stretch or compression, very soft to bend, much drag for its weight (along its plane
    /// too: a silk flag streams out in a 5 m/s wind), slippery.
    pub const SILK: Self = Self {
        density: 0.05,
        in_plane: InPlaneModel::AsRigidAsPossible,
        stretch_stiffness: 5.0e2,
        bending: BendingModel::FlatHinges,
        bend_stiffness: 2.0e-6,
        strain_limits: Some((0.92, 1.08)),
        limit_stiffness: 1.0e3,
        area_limits: None,
        area_stiffness: 1.0e3,
        damping: 0.1,
        drag: 0.8,
        tangential_drag: 0.2,
        thickness: 0.003,
        friction: 0.25,
    };

    /// Cotton: 0.15 kg/m^2, 1,000 N/m in plane with 2,000 N/m more beyond 10 % stretch or
    /// compression, soft to bend.
    pub const COTTON: Self = Self {
        density: 0.15,
        in_plane: InPlaneModel::AsRigidAsPossible,
        stretch_stiffness: 1.0e3,
        bending: BendingModel::FlatHinges,
        bend_stiffness: 1.0e-5,
        strain_limits: Some((0.9, 1.1)),
        limit_stiffness: 2.0e3,
        area_limits: None,
        area_stiffness: 2.0e3,
        damping: 0.2,
        drag: 0.5,
        tangential_drag: 0.05,
        thickness: 0.005,
        friction: 0.5,
    };

    /// Denim: 0.4 kg/m^2, 3,000 N/m in plane with 3,000 N/m more beyond 6 % stretch or
    /// compression, stiffer to bend than cotton.
    pub const DENIM: Self = Self {
        density: 0.4,
        in_plane: InPlaneModel::AsRigidAsPossible,
        stretch_stiffness: 3.0e3,
        bending: BendingModel::FlatHinges,
        bend_stiffness: 1.0e-4,
        strain_limits: Some((0.94, 1.06)),
        limit_stiffness: 3.0e3,
        area_limits: None,
        area_stiffness: 3.0e3,
        damping: 0.3,
        drag: 0.4,
        tangential_drag: 0.04,
        thickness: 0.006,
        friction: 0.6,
    };

    /// Leather: 0.9 kg/m^2, 5,000 N/m in plane with 5,000 N/m more beyond 5 % stretch or
    /// compression, stiff to bend (it folds in broad curves), grippy.
    pub const LEATHER: Self = Self {
        density: 0.9,
        in_plane: InPlaneModel::AsRigidAsPossible,
        stretch_stiffness: 5.0e3,
        bending: BendingModel::FlatHinges,
        bend_stiffness: 1.0e-3,
        strain_limits: Some((0.95, 1.05)),
        limit_stiffness: 5.0e3,
        area_limits: None,
        area_stiffness: 5.0e3,
        damping: 0.5,
        drag: 0.3,
        tangential_drag: 0.03,
        thickness: 0.008,
        friction: 0.7,
    };

    /// A rubber sheet: 0.8 kg/m^2, stretchy (600 N/m in plane, no strain limit, its area held
    /// within 70-150 % of its rest area), soft to bend, grippy.
    pub const RUBBER_SHEET: Self = Self {
        density: 0.8,
        in_plane: InPlaneModel::AsRigidAsPossible,
        stretch_stiffness: 6.0e2,
        bending: BendingModel::FlatHinges,
        bend_stiffness: 5.0e-4,
        strain_limits: None,
        limit_stiffness: 0.0,
        area_limits: Some((0.7, 1.5)),
        area_stiffness: 2.0e3,
        damping: 0.3,
        drag: 0.3,
        tangential_drag: 0.03,
        thickness: 0.005,
        friction: 0.9,
    };

    /// Every preset with its name, lightest first.
    pub const PRESETS: [(&'static str, Self); 5] = [
        ("silk", Self::SILK),
        ("cotton", Self::COTTON),
        ("denim", Self::DENIM),
        ("leather", Self::LEATHER),
        ("rubber sheet", Self::RUBBER_SHEET),
    ];

    /// Checks every value (see [`ClothError::InvalidMaterial`]).
    fn check(&self) -> Result<(), ClothError> {
        let bad = |what: &'static str, value: f64| Err(ClothError::InvalidMaterial { what, value });
        if !(self.density > 0.0 && self.density.is_finite()) {
            return bad("density", self.density);
        }
        if !(self.stretch_stiffness > 0.0 && self.stretch_stiffness.is_finite()) {
            return bad("stretch_stiffness", self.stretch_stiffness);
        }
        for (what, value) in [
            ("bend_stiffness", self.bend_stiffness),
            ("limit_stiffness", self.limit_stiffness),
            ("area_stiffness", self.area_stiffness),
            ("damping", self.damping),
            ("drag", self.drag),
            ("tangential_drag", self.tangential_drag),
            ("friction", self.friction),
        ] {
            if !(value >= 0.0 && value.is_finite()) {
                return bad(what, value);
            }
        }
        if !(self.thickness > 0.0 && self.thickness.is_finite()) {
            return bad("thickness", self.thickness);
        }
        if let Some((min, max)) = self.strain_limits {
            if !(0.0..=1.0).contains(&min) {
                return bad("strain_limits.min", min);
            }
            if !(max >= 1.0 && max.is_finite()) {
                return bad("strain_limits.max", max);
            }
        }
        if let Some((min, max)) = self.area_limits {
            if !(min > 0.0 && min <= 1.0) {
                return bad("area_limits.min", min);
            }
            if !(max >= 1.0 && max.is_finite()) {
                return bad("area_limits.max", max);
            }
        }
        Ok(())
    }
}

/// Why a [`ClothSystem`] refused an input, or a step.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ClothError {
    /// The mesh is refused.
    #[error(transparent)]
    Mesh(#[from] ClothMeshError),
    /// A material value is out of range (NaN included).
    #[error("cloth material: {what} = {value} is out of range")]
    InvalidMaterial {
        /// The field.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// The time step is not positive and finite.
    #[error("time step {0} s is not positive and finite")]
    InvalidTimeStep(f64),
    /// A pin names a vertex that does not exist.
    #[error("pin on vertex {vertex}, of {vertices}")]
    PinOutOfRange {
        /// The vertex.
        vertex: usize,
        /// The number of vertices.
        vertices: usize,
    },
    /// An impulse ([`ClothSystem::apply_impulse`]) names a vertex that does not exist.
    #[error("impulse on vertex {vertex}, of {vertices}")]
    VertexOutOfRange {
        /// The vertex.
        vertex: usize,
        /// The number of vertices.
        vertices: usize,
    },
    /// A selection of vertices to pin by their rest position (the Bevy layer's
    /// `DeformableCloth::pin_select`) matched no vertex.
    #[error("pin selection {index} matches no vertex of the cloth")]
    EmptyPinSelection {
        /// The selection's index in the cloth's list.
        index: usize,
    },
    /// The soft body the pins ride on (the Bevy layer's `DeformableCloth::pinned_to_body`) is
    /// not in the world: the entity was despawned, or is not a `DeformableBody`.
    #[error("the body the cloth's pins ride on is not a soft body in the world")]
    PinnedToMissingBody,
    /// A position or force given is NaN or infinite.
    #[error("{0} is not finite")]
    NonFinite(&'static str),
    /// A neighbour cloth ([`ClothSystem::step_among_cloths`]) is refused: `what` says why.
    #[error("neighbour cloth {id}: {what}")]
    BadNeighbour {
        /// The neighbour's id.
        id: u64,
        /// What is wrong with it.
        what: &'static str,
    },
    /// Every vertex is pinned, or the matrix did not factor.
    #[error("cloth matrix: {0}")]
    Factorization(String),
    /// The step produced non-finite positions; the cloth was put back where it was.
    #[error("the step went unstable; the cloth is back at its last state")]
    Unstable,
}

impl From<FactorError> for ClothError {
    fn from(e: FactorError) -> Self {
        Self::Factorization(e.to_string())
    }
}

/// Not an unknown (a pinned vertex).
const PINNED: u32 = u32::MAX;

/// A zone's move is refused where it would take a member within this fraction of the
/// thickness of an obstacle (`impact_zones.rs`).
const ZONE_CLEARANCE: f64 = 1.0 - 1e-8;

/// Self-contact detections per step at most (`self_contact.rs`): after the first
/// iteration, and again while the iterates move a vertex more than the thickness from where
/// the last one looked. Pairs missed after the last are the impact zones' work.
const MAX_SELF_DETECTIONS: usize = 3;

/// Sweeps of the self-contact projection after the last iteration (at most).
const FINAL_SELF_SWEEPS: usize = 4;

/// Triangles per parallel task of the local step.
const TRIANGLES_PER_TASK: usize = 256;

/// Per vertex, the entries `(vertex, payload)` of a list that name it, their payloads in list
/// order (compressed rows: the local step's terms gathered per vertex in a fixed order).
#[derive(Debug, Default)]
struct Incidence<T> {
    start: Vec<u32>,
    payloads: Vec<T>,
}

impl<T: Copy> Incidence<T> {
    fn new(vertices: usize, list: &[(u32, T)]) -> Self {
        let mut start = vec![0u32; vertices + 1];
        for &(v, _) in list {
            start[v as usize + 1] += 1;
        }
        for v in 0..vertices {
            start[v + 1] += start[v];
        }
        let mut next = start.clone();
        let mut slots: Vec<Option<T>> = vec![None; list.len()];
        for &(v, payload) in list {
            slots[next[v as usize] as usize] = Some(payload);
            next[v as usize] += 1;
        }
        Self {
            start,
            payloads: slots.into_iter().flatten().collect(),
        }
    }

    fn of(&self, v: usize) -> &[T] {
        &self.payloads[self.start[v] as usize..self.start[v + 1] as usize]
    }
}

/// Every corner of `items` (`N` vertices each) as `(vertex, N item + position)`.
fn corners<const N: usize>(items: &[[u32; N]]) -> Vec<(u32, u32)> {
    items
        .iter()
        .enumerate()
        .flat_map(|(k, t)| {
            t.iter()
                .enumerate()
                .map(move |(c, &v)| (v, (N * k + c) as u32))
        })
        .collect()
}

/// A triangle's right-hand-side terms on its three corners (N): `area P g_k`, `P` the
/// stiffness-weighted as-rigid-as-possible and strain-limit targets of its deformation
/// gradient at `x`.
fn projection_forces(rest: &RestTriangle, x: &[Vec3], t: [u32; 3], m: &ClothMaterial) -> [Vec3; 3] {
    let f = rest.gradient(x, t);
    let (s, v) = right_singular(f);
    let p = if s[1] > COLLAPSED * s[0] {
        // Every target is `U diag(d) V'`, so their weighted sum is `F V diag(k) V'` with
        // `k_i = sum (weight d_i) / s_i` (`times_right`): no left singular vectors and no
        // composed targets (a 32 x 32 flag measured 10 % faster per step this way).
        let mut k = [0.0; 2];
        let mut add = |weight: f64, d: [f64; 2]| {
            k[0] += weight * d[0] / s[0];
            k[1] += weight * d[1] / s[1];
        };
        if m.in_plane == InPlaneModel::AsRigidAsPossible {
            add(m.stretch_stiffness, [1.0, 1.0]);
        }
        if let Some((min, max)) = m.strain_limits {
            add(m.limit_stiffness, s.map(|s| s.clamp(min, max)));
        }
        if let Some((min, max)) = m.area_limits {
            add(m.area_stiffness, area_limited(s, min, max));
        }
        times_right(f, k, v)
    } else {
        projection_targets(f, m)
    };
    rest.grads.map(|g| (p[0] * g[0] + p[1] * g[1]) * rest.area)
}

/// The stiffness-weighted sum of a triangle's projection targets (its two columns) for
/// deformation gradient `f`, from its full SVD: as-rigid-as-possible `U V'`, the strain
/// limit's `U clamp(S) V'`, the area limit's. [`projection_forces`] forms the same without `U`
/// where the triangle has not collapsed.
fn projection_targets(f: [Vec3; 2], m: &ClothMaterial) -> [Vec3; 2] {
    let (u, s, v) = svd32(f);
    let mut p = [Vec3::zeros(); 2];
    if m.in_plane == InPlaneModel::AsRigidAsPossible {
        let r = compose(u, [1.0, 1.0], v);
        p = [r[0] * m.stretch_stiffness, r[1] * m.stretch_stiffness];
    }
    if let Some((min, max)) = m.strain_limits {
        let limited = compose(u, s.map(|s| s.clamp(min, max)), v);
        p[0] += limited[0] * m.limit_stiffness;
        p[1] += limited[1] * m.limit_stiffness;
    }
    if let Some((min, max)) = m.area_limits {
        let limited = compose(u, area_limited(s, min, max), v);
        p[0] += limited[0] * m.area_stiffness;
        p[1] += limited[1] * m.area_stiffness;
    }
    p
}

/// The default [`ClothSystem::iterations`]: 10 plain ones. A cloth streaming in the wind
/// needs more to stay smooth: [`FLAG_ITERATIONS`] with [`FLAG_CHEBYSHEV_RHO`] (`chebyshev.rs`).
pub const DEFAULT_CLOTH_ITERATIONS: usize = 10;

/// [`ClothSystem::iterations`] for a cloth in the wind (a flag, a banner): 25, extrapolated
/// with [`FLAG_CHEBYSHEV_RHO`] (measured in `chebyshev.rs`).
pub const FLAG_ITERATIONS: usize = 25;

/// [`ClothSystem::chebyshev_rho`] for a cloth in the wind: 0.97, measured on the flag of
/// `chebyshev.rs` (0.95 and 0.98 within a few degrees of it at 25-30 iterations; 0.99 at ten
/// iterations crumpled it worse than none). The default is 0 (plain iterations).
pub const FLAG_CHEBYSHEV_RHO: f64 = 0.97;

/// One cloth and its prefactored PD system (see the module docs).
#[derive(Debug)]
pub struct ClothSystem {
    mesh: Arc<ClothMesh>,
    material: ClothMaterial,
    h: f64,
    /// Local/global iterations per step at most (at least 1).
    pub iterations: usize,
    /// The iterations stop once a global solve moves no vertex further than this (m; 0: all
    /// [`ClothSystem::iterations`] run).
    pub tolerance: f64,
    /// The Chebyshev extrapolation's estimate of the iterations' spectral radius, in `[0, 1)`
    /// (`chebyshev.rs`; 0: plain iterations).
    pub chebyshev_rho: f64,
    chebyshev: Chebyshev,
    rest: Vec<RestTriangle>,
    hinge_weights: Vec<([f64; 4], f64)>,
    /// Mass per vertex (kg).
    mass: Vec<f64>,
    /// Per vertex: whether it is pinned (as asked; the factor follows at the next step).
    pinned: Vec<bool>,
    /// Whether the pins changed since the matrix was factored.
    rebuild: bool,
    /// Per vertex: its unknown, or [`PINNED`] (as factored).
    unknown_of: Vec<u32>,
    /// Per unknown: its vertex.
    free: Vec<u32>,
    /// `(unknown, pinned vertex, coefficient)`: the matrix terms coupling an unknown to a pin.
    pinned_terms: Vec<(u32, u32, f64)>,
    /// `(pinned vertex, vertex, coefficient)`: the pinned vertices' rows of the elastic part of
    /// the matrix (without the mass term), for the pins' reactions (`pins.rs`).
    pin_rows: Vec<(u32, u32, f64)>,
    /// Per pinned vertex: the impulse (N s) the cloth put on what holds it over the last step.
    pin_impulses: Vec<(u32, Vec3)>,
    /// Their sum from the whole cloth's momentum balance (N s; `pins.rs`).
    pins_total: Vec3,
    targets: Vec<Vec3>,
    factor: SparseCholesky,
    x: Vec<Vec3>,
    v: Vec<Vec3>,
    /// Scratch: the inertial prediction (all vertices) and the right-hand side (unknowns).
    y: Vec<Vec3>,
    rhs: Vec<Vec3>,
    force: Vec<Vec3>,
    /// Scratch: the positions at the step's start (m).
    start: Vec<Vec3>,
    /// Scratch: per triangle, its projection forces on its corners (the local step's output).
    contributions: Vec<[Vec3; 3]>,
    corners: Incidence<u32>,
    /// The edge springs ([`InPlaneModel::MassSpring`]; empty otherwise), their scratch (each
    /// spring's `k p`) and where each vertex is an end of one.
    edges: Vec<RestEdge>,
    spring_terms: Vec<Vec3>,
    edge_corners: Incidence<u32>,
    /// Whether the triangles have terms of their own (as rigid as possible, or strain limits).
    triangle_terms: bool,
    /// The curvature rows ([`BendingModel::RestCurvature`]; empty otherwise), their scratch
    /// (each row's `k A p`) and where each vertex is in one.
    curvature: Vec<CurvatureRow>,
    curvature_terms: Vec<Vec3>,
    curvature_incidence: Incidence<(u32, f64)>,
    /// The step's contacts with obstacles (`contact.rs`).
    contacts: ClothContacts,
    /// Whether the cloth collides with itself: vertex-triangle and edge-edge pairs kept the
    /// thickness apart (`self_contact.rs`), and impact zones against passing through itself
    /// within a step (`impact_zones.rs`). Default: off (it costs 3-60 times the rest of the step,
    /// `docs/PERFORMANCE.md`).
    pub self_collision: bool,
    /// The step's contacts with itself.
    self_contacts: ClothSelfContacts,
    /// The fail-safe against crossing itself within a step (`impact_zones.rs`).
    impact_zones: ImpactZones,
    /// The step's contacts with other cloths (`other_cloths.rs`).
    other_cloths: OtherCloths,
    /// Per vertex: `1 / mass` (1/kg), 0 where pinned (as factored).
    inverse_mass: Vec<f64>,
}

impl ClothSystem {
    /// A cloth of `mesh`, at rest where the mesh is, stepped by `h` (s), nothing pinned.
    ///
    /// # Errors
    /// [`ClothError::InvalidMaterial`], [`ClothError::InvalidTimeStep`], or
    /// [`ClothError::Factorization`].
    pub fn new(mesh: Arc<ClothMesh>, material: ClothMaterial, h: f64) -> Result<Self, ClothError> {
        material.check()?;
        if !(h > 0.0 && h.is_finite()) {
            return Err(ClothError::InvalidTimeStep(h));
        }
        let p = mesh.rest_positions();
        let rest: Vec<RestTriangle> = mesh
            .triangles()
            .iter()
            .map(|t| RestTriangle::new(p[t[0] as usize], p[t[1] as usize], p[t[2] as usize]))
            .collect();
        let mut mass = vec![0.0; p.len()];
        for (t, r) in mesh.triangles().iter().zip(&rest) {
            t.iter()
                .for_each(|&v| mass[v as usize] += material.density * r.area / 3.0);
        }
        let hinge_weights: Vec<([f64; 4], f64)> =
            mesh.hinges().iter().map(|&h| hinge_weights(p, h)).collect();
        let n = p.len();
        let edges = match material.in_plane {
            InPlaneModel::MassSpring => rest_edges(mesh.triangles(), p),
            InPlaneModel::AsRigidAsPossible => Vec::new(),
        };
        let curvature = match material.bending {
            BendingModel::RestCurvature => curvature_rows(mesh.triangles(), p),
            BendingModel::FlatHinges => Vec::new(),
        };
        let assembled = assemble(
            &mesh,
            &rest,
            &edges,
            &curvature,
            &hinge_weights,
            &mass,
            &material,
            h,
            &vec![false; n],
        )?;
        let edge_ends: Vec<[u32; 2]> = rest_edges(mesh.triangles(), p)
            .iter()
            .map(|e| e.ends)
            .collect();
        let patches = PatchTree::new(p, mesh.triangles(), &edge_ends);
        let mut system = Self {
            material,
            h,
            iterations: DEFAULT_CLOTH_ITERATIONS,
            tolerance: 0.0,
            chebyshev_rho: 0.0,
            chebyshev: Chebyshev::default(),
            rest,
            hinge_weights,
            mass,
            pinned: vec![false; n],
            rebuild: false,
            unknown_of: assembled.unknown_of,
            free: assembled.free,
            pinned_terms: assembled.pinned_terms,
            pin_rows: assembled.pin_rows,
            pin_impulses: Vec::new(),
            pins_total: Vec3::zeros(),
            targets: vec![Vec3::zeros(); n],
            factor: assembled.factor,
            x: p.to_vec(),
            v: vec![Vec3::zeros(); n],
            y: vec![Vec3::zeros(); n],
            rhs: vec![Vec3::zeros(); n],
            force: vec![Vec3::zeros(); n],
            start: vec![Vec3::zeros(); n],
            contributions: vec![[Vec3::zeros(); 3]; mesh.triangles().len()],
            corners: Incidence::new(n, &corners(mesh.triangles())),
            spring_terms: vec![Vec3::zeros(); edges.len()],
            edge_corners: Incidence::new(
                n,
                &corners(&edges.iter().map(|e| e.ends).collect::<Vec<_>>()),
            ),
            edges,
            triangle_terms: material.in_plane == InPlaneModel::AsRigidAsPossible
                || material.strain_limits.is_some()
                || material.area_limits.is_some(),
            curvature_terms: vec![Vec3::zeros(); curvature.len()],
            curvature_incidence: Incidence::new(
                n,
                &curvature
                    .iter()
                    .enumerate()
                    .flat_map(|(k, r)| r.stencil.iter().map(move |&(v, c)| (v, (k as u32, c))))
                    .collect::<Vec<_>>(),
            ),
            curvature,
            contacts: ClothContacts::default(),
            self_collision: false,
            self_contacts: ClothSelfContacts::on(patches.clone()),
            inverse_mass: Vec::new(),
            impact_zones: ImpactZones::on(patches),
            other_cloths: OtherCloths::default(),
            mesh,
        };
        system.inverse_mass = system.inverse_masses();
        Ok(system)
    }

    /// Per vertex: `1 / mass` (1/kg), 0 where pinned in the factored matrix.
    fn inverse_masses(&self) -> Vec<f64> {
        self.mass
            .iter()
            .zip(&self.unknown_of)
            .map(|(&m, &u)| if u == PINNED { 0.0 } else { 1.0 / m })
            .collect()
    }

    /// Pins `vertex` at `target` (m), or frees it (`None`); the matrix is factored again
    /// before the next step (once for any number of pins in between).
    ///
    /// # Errors
    /// [`ClothError::PinOutOfRange`], [`ClothError::NonFinite`] for a target, or
    /// [`ClothError::Factorization`] where it would pin every vertex; the system is then
    /// unchanged.
    pub fn pin(&mut self, vertex: usize, target: Option<Vec3>) -> Result<(), ClothError> {
        let vertices = self.x.len();
        if vertex >= vertices {
            return Err(ClothError::PinOutOfRange { vertex, vertices });
        }
        if target.is_some_and(|t| !t.iter().all(|c| c.is_finite())) {
            return Err(ClothError::NonFinite("pin target"));
        }
        // The last free vertex cannot be pinned: nothing would be left to solve for.
        let last_free = !self.pinned[vertex] && self.pinned.iter().filter(|&&p| !p).count() == 1;
        if target.is_some() && last_free {
            return Err(ClothError::Factorization("every vertex is pinned".into()));
        }
        if self.pinned[vertex] != target.is_some() {
            self.pinned[vertex] = target.is_some();
            self.rebuild = true;
        }
        if let Some(t) = target {
            self.targets[vertex] = t;
            self.x[vertex] = t;
            self.v[vertex] = Vec3::zeros();
        }
        Ok(())
    }

    /// Moves a pinned vertex's target (m); a free vertex's is kept for when it is pinned.
    ///
    /// # Errors
    /// [`ClothError::PinOutOfRange`] or [`ClothError::NonFinite`].
    pub fn set_pin_target(&mut self, vertex: usize, target: Vec3) -> Result<(), ClothError> {
        let vertices = self.x.len();
        if vertex >= vertices {
            return Err(ClothError::PinOutOfRange { vertex, vertices });
        }
        if !target.iter().all(|c| c.is_finite()) {
            return Err(ClothError::NonFinite("pin target"));
        }
        self.targets[vertex] = target;
        Ok(())
    }

    /// The matrix and its factor for the pins `pinned`; `self` unchanged on an error.
    fn build(&mut self, pinned: &[bool]) -> Result<(), ClothError> {
        let assembled = assemble(
            &self.mesh,
            &self.rest,
            &self.edges,
            &self.curvature,
            &self.hinge_weights,
            &self.mass,
            &self.material,
            self.h,
            pinned,
        )?;
        self.rhs.resize(assembled.free.len(), Vec3::zeros());
        self.unknown_of = assembled.unknown_of;
        self.free = assembled.free;
        self.pinned_terms = assembled.pinned_terms;
        self.pin_rows = assembled.pin_rows;
        self.factor = assembled.factor;
        self.inverse_mass = self.inverse_masses();
        Ok(())
    }

    /// Advances the cloth by one step under `gravity` (m/s^2) in the `wind` (m/s), touching
    /// nothing.
    ///
    /// # Errors
    /// As [`ClothSystem::step_among`].
    pub fn step(&mut self, gravity: Vec3, wind: Vec3) -> Result<(), ClothError> {
        self.step_among(gravity, wind, &[])
    }

    /// Advances the cloth by one step under `gravity` (m/s^2) in the `wind` (m/s), its
    /// vertices kept [`ClothMaterial::thickness`] outside the `obstacles` with friction
    /// (`contact.rs`).
    ///
    /// # Errors
    /// [`ClothError::NonFinite`] for gravity or wind (nothing moves), or
    /// [`ClothError::Unstable`] where the step produced non-finite positions (the cloth is
    /// put back where it was, at rest).
    pub fn step_among(
        &mut self,
        gravity: Vec3,
        wind: Vec3,
        obstacles: &[ObstacleCollider],
    ) -> Result<(), ClothError> {
        self.step_among_cloths(gravity, wind, obstacles, &[])
    }

    /// [`ClothSystem::step_among`], and kept the mean of the two thicknesses from each of the
    /// other `cloths` on the side of it where each pair was first seen, with friction, never
    /// passing through one along its path over the step (`other_cloths.rs`). The other cloths
    /// do not move in this step; what the pairs put on them is
    /// [`ClothSystem::neighbour_impulses`], for their next.
    ///
    /// # Errors
    /// As [`ClothSystem::step_among`], and [`ClothError::BadNeighbour`] for a neighbour with
    /// mismatched or non-finite positions, a triangle out of range or a bad thickness
    /// (nothing moves).
    pub fn step_among_cloths(
        &mut self,
        gravity: Vec3,
        wind: Vec3,
        obstacles: &[ObstacleCollider],
        cloths: &[NeighbourCloth],
    ) -> Result<(), ClothError> {
        if !gravity.iter().chain(wind.iter()).all(|c| c.is_finite()) {
            return Err(ClothError::NonFinite("gravity or wind"));
        }
        if let Some((c, what)) = cloths.iter().find_map(|c| Some((c, c.fault()?))) {
            return Err(ClothError::BadNeighbour { id: c.id, what });
        }
        if self.rebuild {
            let pinned = std::mem::take(&mut self.pinned);
            let built = self.build(&pinned);
            self.pinned = pinned;
            built?;
            self.rebuild = false;
        }
        let h = self.h;
        let damping = 1.0 / (1.0 + self.material.damping * h);
        self.v.iter_mut().for_each(|v| *v *= damping);
        self.external_forces(gravity, wind);
        self.start.copy_from_slice(&self.x);
        for (v, (&u, y)) in self.unknown_of.iter().zip(self.y.iter_mut()).enumerate() {
            *y = if u == PINNED {
                self.targets[v]
            } else {
                self.x[v] + h * self.v[v] + (h * h / self.mass[v]) * self.force[v]
            };
        }
        let unknown_of = &self.unknown_of;
        let free = |v: usize| unknown_of[v] != PINNED;
        let thickness = self.material.thickness;
        self.contacts
            .detect(&self.start, &self.y, free, obstacles, (thickness, h));
        self.x.copy_from_slice(&self.y);
        self.other_cloths.begin(
            (self.mesh.triangles(), self.self_contacts.edges()),
            (&self.start, &self.inverse_mass),
            thickness,
            cloths,
        );
        self.project_contacts(obstacles, 0);
        let iterations = self.iterations.max(1);
        let (mut detections, mut neighbour_detections) = (0, 0);
        // Off by default: then no iterate is kept or measured.
        let accelerated = self.chebyshev_rho > 0.0 || self.tolerance > 0.0;
        if accelerated {
            self.chebyshev.begin(&self.x);
        }
        let in_contact = self.contacts.count() > 0 || self.other_cloths.active();
        for i in 0..iterations {
            self.iterate();
            let final_count = i + 1 == iterations;
            // Extrapolated only in the air, touching nothing, itself included (see
            // `chebyshev.rs`), and never the last iterate (the `||` below skips it), so that it
            // is a plain solve of its own local step (the pins' reactions are worked out from
            // that local step).
            let touching_itself = self.self_collision && self.self_contacts.count() != (0, 0);
            let rho = if in_contact || touching_itself {
                0.0
            } else {
                self.chebyshev_rho
            };
            let last = final_count
                || (accelerated && self.chebyshev.extrapolate(&mut self.x, rho) <= self.tolerance);
            if self.other_cloths.active()
                && (i == 0
                    || (neighbour_detections < MAX_SELF_DETECTIONS
                        && self.other_cloths.moved_beyond(&self.x)))
            {
                neighbour_detections += 1;
                self.other_cloths.detect(&self.x);
            }
            if self.self_collision
                && (i == 0
                    || (detections < MAX_SELF_DETECTIONS
                        && self.self_contacts.moved_beyond(&self.x, thickness)))
            {
                detections += 1;
                // The pairs of the motion to the first iterate (the inertial prediction and
                // the elastic forces' answer to it), and again for the motion to a later
                // iterate that moved a vertex more than the thickness from the one they were
                // found for: the iterations of a cloth the elastic forces fling move it far
                // more than its prediction.
                self.self_contacts.detect(
                    &self.start,
                    &self.x,
                    self.mesh.triangles(),
                    &self.inverse_mass,
                    thickness,
                );
            }
            let sweeps = if last { FINAL_SELF_SWEEPS } else { 1 };
            self.project_contacts(obstacles, sweeps);
            if last {
                break;
            }
            if accelerated {
                self.chebyshev.starts_from(&self.x);
            }
        }
        if self.self_collision {
            self.self_contacts.apply_friction(
                &mut self.x,
                &self.start,
                self.mesh.triangles(),
                &self.inverse_mass,
                self.material.friction,
                |_, _, _| {},
            );
        }
        self.other_cloths
            .apply_friction(&mut self.x, self.material.friction);
        self.contacts.apply_friction(
            &mut self.x,
            &self.start,
            obstacles,
            (self.material.friction, &self.mass),
            h,
        );
        if self.self_collision || self.other_cloths.active() {
            // Friction moved vertices along the surfaces: the pairs it brought nearer than
            // the thickness (or through) are moved apart again. The sweeps may push a vertex
            // into an obstacle: out again, then the zones, which keep clear of the obstacles.
            self.project_contacts(obstacles, FINAL_SELF_SWEEPS);
            self.project_obstacles(obstacles);
            let thickness = self.material.thickness;
            let clear = |p: &Vec3| {
                obstacles
                    .iter()
                    .all(|o| o.query(*p, ZONE_CLEARANCE * thickness).is_none())
            };
            if self.self_collision {
                self.impact_zones.resolve(
                    &self.start,
                    &mut self.x,
                    (&self.inverse_mass, self.contacts.supports()),
                    clear,
                );
            }
            self.other_cloths
                .resolve_zones(&mut self.x, self.contacts.supports(), clear);
        }
        if !self.x.iter().all(|p| p.iter().all(|c| c.is_finite())) {
            self.x.copy_from_slice(&self.start);
            self.v.iter_mut().for_each(|v| *v = Vec3::zeros());
            self.pin_impulses.clear();
            self.pins_total = Vec3::zeros();
            return Err(ClothError::Unstable);
        }
        self.record_neighbour_impulses();
        self.record_pin_impulses();
        for ((v, x), x0) in self.v.iter_mut().zip(&self.x).zip(&self.start) {
            *v = (x - x0) / h;
        }
        Ok(())
    }

    /// The iterate and the inertial targets moved out of the obstacles (`contact.rs`), then
    /// the iterate moved apart where it touches other cloths (`other_cloths.rs`) and itself
    /// (`self_contact.rs`): up to `self_sweeps` sweeps of each, fewer once a sweep pushes
    /// nothing by more than a hundredth of the thickness, vertices resting on an obstacle not
    /// moved into it.
    fn project_contacts(&mut self, obstacles: &[ObstacleCollider], self_sweeps: usize) {
        self.project_obstacles(obstacles);
        self.other_cloths
            .project(&mut self.x, self.contacts.supports(), self_sweeps);
        if !self.self_collision {
            return;
        }
        let thickness = self.material.thickness;
        self.self_contacts.clear_pushes();
        for _ in 0..self_sweeps {
            let pushed = self.self_contacts.project(
                (&self.start, &mut self.x),
                self.mesh.triangles(),
                (&self.inverse_mass, self.contacts.supports()),
                thickness,
            );
            if pushed <= 0.01 * thickness {
                break;
            }
        }
    }

    /// The iterate and the inertial targets moved out of the obstacles (`contact.rs`).
    fn project_obstacles(&mut self, obstacles: &[ObstacleCollider]) {
        let unknown_of = &self.unknown_of;
        let free = |v: usize| unknown_of[v] != PINNED;
        self.contacts.project(
            &mut self.x,
            &mut self.y,
            &self.start,
            free,
            obstacles,
            (self.material.thickness, self.h),
        );
    }

    /// Gravity and drag per vertex (N), into `force`.
    fn external_forces(&mut self, gravity: Vec3, wind: Vec3) {
        for (f, &m) in self.force.iter_mut().zip(&self.mass) {
            *f = m * gravity;
        }
        if self.material.drag == 0.0 && self.material.tangential_drag == 0.0 {
            return;
        }
        for t in self.mesh.triangles() {
            let [a, b, c] = t.map(|v| v as usize);
            let normal2 = (self.x[b] - self.x[a]).cross(&(self.x[c] - self.x[a]));
            let area2 = normal2.norm();
            if area2 <= 0.0 {
                continue;
            }
            let n = normal2 / area2;
            let velocity = (self.v[a] + self.v[b] + self.v[c]) / 3.0;
            let relative = wind - velocity;
            let normal = n * relative.dot(&n);
            let f = (normal * self.material.drag
                + (relative - normal) * self.material.tangential_drag)
                * (0.5 * area2 / 3.0);
            for v in [a, b, c] {
                self.force[v] += f;
            }
        }
    }

    /// One local/global iteration from `x`.
    fn iterate(&mut self) {
        // The local step, triangles in parallel, then each unknown's right-hand side summed
        // over its triangles in mesh order (the same sums on any number of threads).
        let (x, material) = (&self.x, &self.material);
        if self.triangle_terms {
            self.contributions
                .par_chunks_mut(TRIANGLES_PER_TASK)
                .zip(self.rest.par_chunks(TRIANGLES_PER_TASK))
                .zip(self.mesh.triangles().par_chunks(TRIANGLES_PER_TASK))
                .for_each(|((out, rest), triangles)| {
                    for ((o, r), t) in out.iter_mut().zip(rest).zip(triangles) {
                        *o = projection_forces(r, x, *t, material);
                    }
                });
        }
        let k = material.stretch_stiffness;
        self.spring_terms
            .par_iter_mut()
            .zip(self.edges.par_iter())
            .with_min_len(TRIANGLES_PER_TASK)
            .for_each(|(term, e)| *term = k * spring_target(e, x));
        let (kb, rest) = (material.bend_stiffness, self.mesh.rest_positions());
        self.curvature_terms
            .par_iter_mut()
            .zip(self.curvature.par_iter())
            .with_min_len(TRIANGLES_PER_TASK)
            .for_each(|(term, row)| *term = row.target(x, rest) * (kb * row.area));
        let h2 = self.h * self.h;
        // Taken out while the terms borrow the rest (put back below: no allocation).
        let mut rhs = std::mem::take(&mut self.rhs);
        let (y, mass, terms) = (&self.y, &self.mass, self.local_terms());
        rhs.par_iter_mut()
            .zip(self.free.par_iter())
            .with_min_len(TRIANGLES_PER_TASK)
            .for_each(|(r, &v)| {
                let v = v as usize;
                *r = terms.added_at(v, y[v] * (mass[v] / h2));
            });
        self.rhs = rhs;
        for &(u, v, c) in &self.pinned_terms {
            self.rhs[u as usize] -= self.targets[v as usize] * c;
        }
        self.factor.solve_in_place(&mut self.rhs);
        for (r, &v) in self.rhs.iter().zip(&self.free) {
            self.x[v as usize] = *r;
        }
    }

    /// Per contact with an obstacle in the last step: the obstacle's index in the slice given
    /// to [`ClothSystem::step_among`], a point of its surface (m), and the impulse (N s) the
    /// cloth put on it there over the step: the reaction to the contact's push and friction
    /// (`contact.rs`), each estimated from how far the contact moved the vertex, times
    /// `m / h`. A cloth resting on an obstacle puts its weight on it (times `h`); a game
    /// applies these to what the obstacles stand for (a soft body's surface:
    /// [`crate::sim::SoftWorld::apply_impulses_at`]) for contact both ways, one step late.
    pub fn obstacle_impulses(&self) -> impl Iterator<Item = (usize, Vec3, Vec3)> + '_ {
        self.contacts.impulses()
    }

    /// Adds `impulse` (N s) to `vertex`'s momentum for the next step: its velocity changes by
    /// `impulse / m`. On a pinned vertex it passes to the pin's holder
    /// ([`ClothSystem::pin_impulses`], [`ClothSystem::pins_total_impulse`]).
    ///
    /// # Errors
    /// [`ClothError::VertexOutOfRange`] or [`ClothError::NonFinite`] (nothing changes).
    pub fn apply_impulse(&mut self, vertex: usize, impulse: Vec3) -> Result<(), ClothError> {
        let vertices = self.x.len();
        if vertex >= vertices {
            return Err(ClothError::VertexOutOfRange { vertex, vertices });
        }
        if !impulse.iter().all(|c| c.is_finite()) {
            return Err(ClothError::NonFinite("impulse"));
        }
        self.v[vertex] += impulse / self.mass[vertex];
        Ok(())
    }

    /// Positions (m).
    #[inline]
    pub fn positions(&self) -> &[Vec3] {
        &self.x
    }

    /// Velocities (m/s).
    pub fn velocities(&self) -> &[Vec3] {
        &self.v
    }

    /// Positions (m), to set (a teleport, or the state of a cloth rebuilt with another
    /// material); a pinned vertex is put back at its target by the next step.
    pub fn positions_mut(&mut self) -> &mut [Vec3] {
        &mut self.x
    }

    /// Velocities (m/s), to set (a throw, a gust); a pinned vertex's is ignored (zero at the
    /// next step).
    pub fn velocities_mut(&mut self) -> &mut [Vec3] {
        &mut self.v
    }

    /// The material it was built with.
    pub fn material(&self) -> &ClothMaterial {
        &self.material
    }

    /// The mesh.
    pub fn mesh(&self) -> &ClothMesh {
        &self.mesh
    }

    /// The mesh, shared.
    pub fn shared_mesh(&self) -> &Arc<ClothMesh> {
        &self.mesh
    }

    /// The contact planes of the last step (obstacle contacts of its vertices).
    pub fn contact_count(&self) -> usize {
        self.contacts.count()
    }

    /// The last step's self-contact pairs: vertex-triangle and edge-edge (0 with
    /// [`ClothSystem::self_collision`] off).
    pub fn self_contact_count(&self) -> (usize, usize) {
        if self.self_collision {
            self.self_contacts.count()
        } else {
            (0, 0)
        }
    }

    /// Vertex-triangle and edge-edge pairs with other cloths in the last step
    /// ([`ClothSystem::step_among_cloths`]).
    pub fn neighbour_contact_count(&self) -> (usize, usize) {
        self.other_cloths.count()
    }

    /// Vertices the last step put in impact zones (`impact_zones.rs`): those whose paths
    /// through the step would have crossed the cloth, moved instead with their zone.
    pub fn impact_zone_vertices(&self) -> usize {
        if self.self_collision {
            self.impact_zones.zoned()
        } else {
            0
        }
    }

    /// The contact planes of the last step: per plane, the cloth vertex, the point of the
    /// obstacle's surface it was held against (m) and the surface's outward unit normal.
    pub fn contact_planes(&self) -> impl Iterator<Item = (usize, Vec3, Vec3)> + '_ {
        self.contacts.planes()
    }

    /// Per vertex: whether it is pinned.
    pub fn pinned(&self) -> &[bool] {
        &self.pinned
    }

    /// Mass per vertex (kg).
    pub fn masses(&self) -> &[f64] {
        &self.mass
    }

    /// The elastic energy (J) at the current positions: the in-plane terms at their
    /// projections, the strain limits' beyond them, and the bending energy.
    pub fn elastic_energy(&self) -> f64 {
        let m = &self.material;
        let mut e = 0.0;
        for (t, rest) in self.mesh.triangles().iter().zip(&self.rest) {
            let f = rest.gradient(&self.x, *t);
            let (u, s, v) = svd32(f);
            let dist2 = |p: [Vec3; 2]| (f[0] - p[0]).norm_squared() + (f[1] - p[1]).norm_squared();
            if m.in_plane == InPlaneModel::AsRigidAsPossible {
                e += 0.5 * m.stretch_stiffness * rest.area * dist2(compose(u, [1.0, 1.0], v));
            }
            if let Some((min, max)) = m.strain_limits {
                let limited = compose(u, s.map(|s| s.clamp(min, max)), v);
                e += 0.5 * m.limit_stiffness * rest.area * dist2(limited);
            }
            if let Some((min, max)) = m.area_limits {
                let limited = compose(u, area_limited(s, min, max), v);
                e += 0.5 * m.area_stiffness * rest.area * dist2(limited);
            }
        }
        let bending = match m.bending {
            BendingModel::FlatHinges => bending_energy(
                &self.x,
                self.mesh.hinges(),
                &self.hinge_weights,
                m.bend_stiffness,
            ),
            BendingModel::RestCurvature => curvature_energy(
                &self.curvature,
                &self.x,
                self.mesh.rest_positions(),
                m.bend_stiffness,
            ),
        };
        e + spring_energy(&self.edges, &self.x, m.stretch_stiffness) + bending
    }

    /// The largest and smallest principal stretch of any triangle now.
    pub fn stretch_range(&self) -> (f64, f64) {
        self.mesh
            .triangles()
            .iter()
            .zip(&self.rest)
            .map(|(t, rest)| svd32(rest.gradient(&self.x, *t)).1)
            .fold((0.0f64, f64::INFINITY), |(hi, lo), s| {
                (hi.max(s[0]), lo.min(s[1]))
            })
    }
}

impl ClothSystem {
    /// The last local step's output, per vertex ([`LocalTerms`]).
    fn local_terms(&self) -> LocalTerms<'_> {
        LocalTerms {
            triangle_terms: self.triangle_terms,
            corners: &self.corners,
            contributions: &self.contributions,
            edge_corners: &self.edge_corners,
            spring_terms: &self.spring_terms,
            incidence: &self.curvature_incidence,
            curvature_terms: &self.curvature_terms,
        }
    }
}

/// The local step's output as each vertex's share of the right-hand side `J p` (N): the
/// triangles' projection forces, the springs' and the curvature rows'.
struct LocalTerms<'a> {
    triangle_terms: bool,
    corners: &'a Incidence<u32>,
    contributions: &'a [[Vec3; 3]],
    edge_corners: &'a Incidence<u32>,
    spring_terms: &'a [Vec3],
    incidence: &'a Incidence<(u32, f64)>,
    curvature_terms: &'a [Vec3],
}

impl LocalTerms<'_> {
    /// `sum` plus vertex `v`'s terms, added in a fixed order.
    fn added_at(&self, v: usize, mut sum: Vec3) -> Vec3 {
        if self.triangle_terms {
            for &c in self.corners.of(v) {
                sum += self.contributions[c as usize / 3][c as usize % 3];
            }
        }
        // The first end of a spring is pushed by `k p`, the second by `-k p`.
        for &c in self.edge_corners.of(v) {
            let term = self.spring_terms[c as usize / 2];
            sum += if c % 2 == 0 { term } else { -term };
        }
        for &(row, c) in self.incidence.of(v) {
            sum += self.curvature_terms[row as usize] * c;
        }
        sum
    }
}

/// The unknowns and the factored matrix of a cloth with the pins `pinned`.
struct Assembled {
    unknown_of: Vec<u32>,
    free: Vec<u32>,
    pinned_terms: Vec<(u32, u32, f64)>,
    pin_rows: Vec<(u32, u32, f64)>,
    factor: SparseCholesky,
}

/// `M / h^2 + sum_t w_t G_t' G_t + k_b Q` over the free vertices of `pinned`, factored, the
/// terms that couple them to the pins, and the pinned vertices' rows of the elastic part.
#[allow(clippy::too_many_arguments)]
fn assemble(
    mesh: &ClothMesh,
    rest: &[RestTriangle],
    edges: &[RestEdge],
    curvature: &[CurvatureRow],
    hinge_weights: &[([f64; 4], f64)],
    mass: &[f64],
    material: &ClothMaterial,
    h: f64,
    pinned: &[bool],
) -> Result<Assembled, ClothError> {
    let mut unknown_of = vec![PINNED; pinned.len()];
    let mut free = Vec::new();
    for (v, &p) in pinned.iter().enumerate() {
        if !p {
            unknown_of[v] = free.len() as u32;
            free.push(v as u32);
        }
    }
    if free.is_empty() {
        return Err(ClothError::Factorization("every vertex is pinned".into()));
    }
    let tris = mesh.triangles();
    let hinges = mesh.hinges();
    let pairs = tris
        .iter()
        .flat_map(|t| [(t[0], t[1]), (t[1], t[2]), (t[0], t[2])])
        .chain(hinges.iter().flat_map(|h| {
            [
                (h[0], h[1]),
                (h[0], h[2]),
                (h[0], h[3]),
                (h[1], h[2]),
                (h[1], h[3]),
                (h[2], h[3]),
            ]
        }))
        .chain(curvature.iter().flat_map(|r| {
            r.stencil
                .iter()
                .flat_map(|&(a, _)| r.stencil.iter().map(move |&(b, _)| (a, b)))
        }))
        .filter_map(|(a, b)| {
            let (ua, ub) = (unknown_of[a as usize], unknown_of[b as usize]);
            (ua != PINNED && ub != PINNED).then_some((ua, ub))
        });
    let mut matrix = SymmetricMatrix::from_pairs(free.len(), pairs);
    let mut pinned_terms = Vec::new();
    let mut pin_rows = Vec::new();
    let h2 = h * h;
    for (u, &v) in free.iter().enumerate() {
        let slot = matrix.diag_slot(u);
        matrix.values_mut()[slot] += mass[v as usize] / h2;
    }
    let mut add = |a: u32, b: u32, c: f64, matrix: &mut SymmetricMatrix| {
        let (ua, ub) = (unknown_of[a as usize], unknown_of[b as usize]);
        match (ua != PINNED, ub != PINNED) {
            (true, true) => {
                let slot = matrix
                    .slot(ua as usize, ub as usize)
                    .expect("in the pattern");
                matrix.values_mut()[slot] += c;
            }
            (true, false) => pinned_terms.push((ua, b, c)),
            (false, _) => pin_rows.push((a, b, c)),
        }
    };
    let arap = match material.in_plane {
        InPlaneModel::AsRigidAsPossible => material.stretch_stiffness,
        InPlaneModel::MassSpring => 0.0,
    };
    let w_area = arap
        + material
            .strain_limits
            .map_or(0.0, |_| material.limit_stiffness)
        + material
            .area_limits
            .map_or(0.0, |_| material.area_stiffness);
    let k = material.stretch_stiffness;
    for e in edges {
        let [a, b] = e.ends;
        add(a, a, k, &mut matrix);
        add(b, b, k, &mut matrix);
        add(a, b, -k, &mut matrix);
        add(b, a, -k, &mut matrix);
    }
    for (t, r) in tris.iter().zip(rest) {
        let w = w_area * r.area;
        for a in 0..3 {
            for b in 0..3 {
                let g = r.grads[a][0] * r.grads[b][0] + r.grads[a][1] * r.grads[b][1];
                add(t[a], t[b], w * g, &mut matrix);
            }
        }
    }
    let k = material.bend_stiffness;
    for r in curvature {
        for &(a, ca) in &r.stencil {
            for &(b, cb) in &r.stencil {
                add(a, b, k * r.area * ca * cb, &mut matrix);
            }
        }
    }
    if k > 0.0 && material.bending == BendingModel::FlatHinges {
        for (hinge, (q, scale)) in hinges.iter().zip(hinge_weights) {
            for a in 0..4 {
                for b in 0..4 {
                    add(hinge[a], hinge[b], k * scale * q[a] * q[b], &mut matrix);
                }
            }
        }
    }
    let mut factor = SparseCholesky::analyse(&matrix)?;
    factor.factorize(&matrix)?;
    // Each pinned vertex's row together (in the order the terms came within it).
    pin_rows.sort_by_key(|&(a, _, _)| a);
    Ok(Assembled {
        unknown_of,
        free,
        pinned_terms,
        pin_rows,
        factor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    #[test]
    fn projection_forces_without_left_singular_vectors_match_the_full_svd() {
        // A unit right triangle, its corners moved at random (stretched, sheared, turned and
        // collapsed to nearly a line), with every in-plane term on and limits that bind.
        let rest = RestTriangle::new(Vec3::zeros(), Vec3::x(), Vec3::y());
        let material = ClothMaterial {
            strain_limits: Some((0.9, 1.1)),
            limit_stiffness: 3.0e3,
            area_limits: Some((0.8, 1.2)),
            area_stiffness: 2.0e3,
            ..ClothMaterial::COTTON
        };
        let mut rng = Rng(0xc107_5eed);
        for case in 0..400 {
            let corner = |rng: &mut Rng| Vec3::new(rng.signed(), rng.signed(), rng.signed());
            let mut x = [corner(&mut rng), corner(&mut rng), corner(&mut rng)];
            if case % 4 == 0 {
                // Nearly collapsed: the third corner close to the line of the first two.
                x[2] = x[0] + 0.7 * (x[1] - x[0]) + 1e-7 * corner(&mut rng);
            }
            let f = rest.gradient(&x, [0, 1, 2]);
            let p = projection_targets(f, &material);
            let expected = rest.grads.map(|g| (p[0] * g[0] + p[1] * g[1]) * rest.area);
            let got = projection_forces(&rest, &x, [0, 1, 2], &material);
            // Both lose the digits that the singular values' ratio amplifies (the eigenvectors
            // of `F'F` are only that accurate).
            let ([s1, s2], _) = right_singular(f);
            let scale = expected.iter().map(|e| e.norm()).fold(1.0, f64::max);
            let tolerance = 1e-13 * scale * (s1 / s2).max(1.0);
            for (g, e) in got.iter().zip(&expected) {
                assert!((g - e).norm() <= tolerance, "case {case}: {g:?} vs {e:?}");
            }
        }
    }
}
