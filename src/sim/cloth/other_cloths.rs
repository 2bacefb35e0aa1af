//! A cloth against other cloths: each is an obstacle with no inside to the others, two-sided,
//! kept a thickness apart on the side each pair was first seen on.
//!
//! A step sees the other cloths as moving surfaces: each [`NeighbourCloth`] gives its
//! triangles and its vertices' straight paths over the step (from where a cloth that already
//! stepped started to where it ended, or standing still where it has not stepped yet). Its
//! vertices join the self-contact machinery (`self_contact.rs`, `impact_zones.rs`) as vertices
//! that do not move: this cloth's vertices against their triangles, their vertices against
//! this cloth's triangles, and edges against edges, found on the patch tree's two sides only
//! (`patches.rs`, [`PatchTree::between_sides`](super::patches::PatchTree::between_sides)),
//! projected after every global solve with the cloth's own pairs, with Coulomb friction, and
//! impact zones at the end of the step in which the other cloth's vertices count as pinned (a
//! zone with them moves as they do). The pair distance is the mean of the two cloths'
//! thicknesses (each keeps half its thickness on either side of its surface).
//!
//! Stepped one after the other in this way, two cloths keep from passing through each other
//! (within the impact zones' 16 rounds a step): the first keeps to its side of where the
//! second stands, and the second to its side of the first's whole path. Only the cloth that steps moves: neither feels the other's weight or push
//! except by its own pairs (a napkin lying on a tablecloth is held up by it, and the
//! tablecloth, held by the table, is not pushed down).

use super::impact_zones::ImpactZones;
use super::self_contact::ClothSelfContacts;
use super::springs::rest_edges;
use crate::sim::math::Vec3;

/// Another cloth as a cloth's step sees it ([`super::ClothSystem::step_among_cloths`]).
#[derive(Debug, Clone, Copy)]
pub struct NeighbourCloth<'a> {
    /// Names the cloth from step to step (the Bevy layer gives its entity): the pairs are
    /// rebuilt when the set of neighbours changes.
    pub id: u64,
    /// Its triangles, indices into `start` and `end`.
    pub triangles: &'a [[u32; 3]],
    /// Its vertices where the step starts (m).
    pub start: &'a [Vec3],
    /// Its vertices where the step ends (m): the same as `start` for a cloth that stands.
    pub end: &'a [Vec3],
    /// Its thickness (m, [`super::ClothMaterial::thickness`]).
    pub thickness: f64,
}

impl NeighbourCloth<'_> {
    /// What is wrong with it, if anything: vertices in `start` and `end` differ in count or
    /// are not finite, a triangle names a vertex out of range, or the thickness is not
    /// positive and finite.
    pub fn fault(&self) -> Option<&'static str> {
        let n = self.start.len();
        if self.end.len() != n {
            return Some("start and end differ in length");
        }
        if !self
            .start
            .iter()
            .chain(self.end)
            .all(|p| p.iter().all(|c| c.is_finite()))
        {
            return Some("a position is not finite");
        }
        if self.triangles.iter().flatten().any(|&v| v as usize >= n) {
            return Some("a triangle names a vertex out of range");
        }
        if !(self.thickness > 0.0 && self.thickness.is_finite()) {
            return Some("thickness is not positive and finite");
        }
        None
    }
}

/// A cloth's contacts with other cloths in one step, and the buffers they reuse: the cloth's
/// own vertices first, then each neighbour's.
#[derive(Debug, Default)]
pub(super) struct OtherCloths {
    /// Per neighbour the pairs were built for: its id, vertex count and triangle count.
    built_for: Vec<(u64, usize, usize)>,
    /// The cloth's own vertex count.
    own: usize,
    contacts: ClothSelfContacts,
    zones: ImpactZones,
    triangles: Vec<[u32; 3]>,
    start: Vec<Vec3>,
    x: Vec<Vec3>,
    inverse_mass: Vec<f64>,
    supports: Vec<Vec3>,
    /// The pairs' distance (m).
    thickness: f64,
    /// Whether this step has neighbours.
    active: bool,
}

impl OtherCloths {
    /// Sets up a step of the cloth of `triangles` and `edges` from `start` (its inverse masses
    /// `inverse_mass`, 0 where pinned; `thickness` in m) among `cloths` (checked by the
    /// caller); with none, the step has no pairs.
    pub fn begin(
        &mut self,
        (triangles, edges): (&[[u32; 3]], &[[u32; 2]]),
        (start, inverse_mass): (&[Vec3], &[f64]),
        thickness: f64,
        cloths: &[NeighbourCloth],
    ) {
        self.active = !cloths.is_empty();
        if !self.active {
            return;
        }
        let n = start.len();
        let key: Vec<(u64, usize, usize)> = cloths
            .iter()
            .map(|c| (c.id, c.start.len(), c.triangles.len()))
            .collect();
        if key != self.built_for || self.own != n {
            self.rebuild((triangles, edges), start, cloths);
            self.built_for = key;
            self.own = n;
        }
        self.start.clear();
        self.start.extend_from_slice(start);
        self.x.clear();
        self.x.extend_from_slice(start);
        for c in cloths {
            self.start.extend_from_slice(c.start);
            self.x.extend_from_slice(c.end);
        }
        self.inverse_mass.clear();
        self.inverse_mass.extend_from_slice(inverse_mass);
        self.inverse_mass.resize(self.start.len(), 0.0);
        self.supports.clear();
        self.supports.resize(self.start.len(), Vec3::zeros());
        let thickest = cloths.iter().map(|c| c.thickness).fold(0.0, f64::max);
        self.thickness = 0.5 * (thickness + thickest);
    }

    /// The combined mesh (the cloth's triangles, then each neighbour's, numbered after the
    /// vertices before it) and its pairs' trees.
    fn rebuild(
        &mut self,
        (triangles, edges): (&[[u32; 3]], &[[u32; 2]]),
        start: &[Vec3],
        cloths: &[NeighbourCloth],
    ) {
        self.triangles.clear();
        self.triangles.extend_from_slice(triangles);
        let mut all_edges = edges.to_vec();
        let mut rest = start.to_vec();
        for c in cloths {
            let offset = rest.len() as u32;
            self.triangles
                .extend(c.triangles.iter().map(|t| t.map(|v| v + offset)));
            all_edges.extend(
                rest_edges(c.triangles, c.start)
                    .iter()
                    .map(|e| e.ends.map(|v| v + offset)),
            );
            rest.extend_from_slice(c.start);
        }
        let split = triangles.len();
        self.zones = ImpactZones::between_sides(&rest, &self.triangles, &all_edges, split);
        self.contacts = ClothSelfContacts::between_sides(&rest, &self.triangles, &all_edges, split);
    }

    /// Whether this step has neighbours.
    pub fn active(&self) -> bool {
        self.active
    }

    /// The pairs of the motion from the step's start to the cloth's iterate `x` (m).
    pub fn detect(&mut self, x: &[Vec3]) {
        if !self.active {
            return;
        }
        self.x[..self.own].copy_from_slice(x);
        self.contacts.detect(
            &self.start,
            &self.x,
            &self.triangles,
            &self.inverse_mass,
            self.thickness,
        );
    }

    /// Whether a vertex of the cloth's iterate `x` moved more than the pairs' distance from
    /// where they were found: detection runs again.
    pub fn moved_beyond(&self, x: &[Vec3]) -> bool {
        self.active && self.contacts.moved_beyond(x, self.thickness)
    }

    /// Up to `sweeps` sweeps of the pairs over the cloth's iterate `x` (m), fewer once a sweep
    /// pushes nothing by more than a hundredth of the distance; `supports` per vertex as in
    /// `self_contact.rs` (a vertex on an obstacle is not pushed into it).
    pub fn project(&mut self, x: &mut [Vec3], supports: &[Vec3], sweeps: usize) {
        if !self.active {
            return;
        }
        let n = self.own;
        self.x[..n].copy_from_slice(x);
        self.supports[..n].copy_from_slice(supports);
        self.contacts.clear_pushes();
        for _ in 0..sweeps {
            let pushed = self.contacts.project(
                (&self.start, &mut self.x),
                &self.triangles,
                (&self.inverse_mass, &self.supports),
                self.thickness,
            );
            if pushed <= 0.01 * self.thickness {
                break;
            }
        }
        x.copy_from_slice(&self.x[..n]);
    }

    /// Coulomb friction with coefficient `friction` over the pairs the last projection pushed.
    pub fn apply_friction(&mut self, x: &mut [Vec3], friction: f64) {
        if !self.active {
            return;
        }
        let n = self.own;
        self.x[..n].copy_from_slice(x);
        self.contacts.apply_friction(
            &mut self.x,
            &self.start,
            &self.triangles,
            &self.inverse_mass,
            friction,
        );
        x.copy_from_slice(&self.x[..n]);
    }

    /// The impact zones over the cloth's step to `x` (m) against the neighbours' paths;
    /// `supports` and `clear` as for the cloth's own zones. Returns the cloth's vertices put
    /// in zones.
    pub fn resolve_zones(
        &mut self,
        x: &mut [Vec3],
        supports: &[Vec3],
        clear: impl Fn(&Vec3) -> bool,
    ) -> usize {
        if !self.active {
            return 0;
        }
        let n = self.own;
        self.x[..n].copy_from_slice(x);
        self.supports[..n].copy_from_slice(supports);
        self.zones.resolve(
            &self.start,
            &mut self.x,
            (&self.inverse_mass, &self.supports),
            clear,
        );
        x.copy_from_slice(&self.x[..n]);
        self.zones.zoned_among(n)
    }

    /// Vertex-triangle and edge-edge pairs with the neighbours in this step.
    pub fn count(&self) -> (usize, usize) {
        if self.active {
            self.contacts.count()
        } else {
            (0, 0)
        }
    }
}
