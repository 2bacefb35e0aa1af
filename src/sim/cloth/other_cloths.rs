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
//! second stands, and the second to its side of the first's whole path. Only the cloth that
//! steps moves; what its pairs put on the other cloths over the step is the reaction to what
//! they put on it (`system/neighbours.rs`), which the game hands to the cloths that stepped
//! before it, for their next step: a napkin resting on a hanging tablecloth weighs it down,
//! one step late.
//!
//! Deviation (a partitioned step instead of one solve for both cloths): the reactions go one
//! way, from the cloth that stepped later to the one that stepped before it. The earlier
//! cloth's pairs act against where the later one stood, not where it goes; handing their
//! reactions over as well made a 6 x 6 denim sheet resting on a cotton hammock chatter, its
//! vertices at 0.14-3.3 m/s where one way they stay under 0.05 m/s (given after the later
//! cloth's step), or pass through the hammock (given before it; `tests/sim_cloth_pair.rs`).
//! What the earlier cloth's pushes against the later one take is then not given back: the
//! hammock's pins carried 1.08 times both cloths' weight (the sheet's reaction on the hammock
//! matched its weight within 1 %). So the cloth underneath must step first: stepped the other
//! way round, the hammock's pins carried its own weight alone (the Bevy layer steps first the
//! cloths reaching lowest along gravity). An earlier cloth swung into a later one standing
//! still is stopped by it without pushing it.

use super::impact_zones::ImpactZones;
use super::patches::PatchTree;
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
    /// Per neighbour of this step: its id and where its vertices start in the combined mesh.
    offsets: Vec<(u64, usize)>,
    /// The pairs the last projection pushed: their four vertices, coefficients and push over
    /// weight (kg m; `ClothSelfContacts::apply_friction`).
    touching: Vec<([usize; 4], [f64; 4], f64)>,
    /// Per vertex of the combined mesh: the impulse (N s) the cloth's pairs put on it over the
    /// step (set by [`OtherCloths::share_out`] on the neighbours' vertices).
    impulses: Vec<Vec3>,
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
        self.offsets.clear();
        for c in cloths {
            self.offsets.push((c.id, self.start.len()));
            self.start.extend_from_slice(c.start);
            self.x.extend_from_slice(c.end);
        }
        self.touching.clear();
        self.impulses.clear();
        self.impulses.resize(self.start.len(), Vec3::zeros());
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
        let patches = PatchTree::between_sides(&rest, &self.triangles, &all_edges, split);
        self.zones = ImpactZones::on(patches.clone());
        self.contacts = ClothSelfContacts::on(patches);
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

    /// Coulomb friction with coefficient `friction` over the pairs the last projection pushed,
    /// which are kept as the pairs touching in this step (see [`OtherCloths::share_out`]).
    pub fn apply_friction(&mut self, x: &mut [Vec3], friction: f64) {
        if !self.active {
            return;
        }
        let n = self.own;
        self.x[..n].copy_from_slice(x);
        let touching = &mut self.touching;
        self.contacts.apply_friction(
            &mut self.x,
            &self.start,
            &self.triangles,
            &self.inverse_mass,
            friction,
            |vertices, coefficients, size| touching.push((vertices, coefficients, size)),
        );
        x.copy_from_slice(&self.x[..n]);
    }

    /// Whether a pair with another cloth touched the cloth in this step.
    pub fn touching(&self) -> bool {
        self.active && !self.touching.is_empty()
    }

    /// Shares `on_cloth` (N s: what the pairs put on the cloth over the step, all together)
    /// out to the neighbours' vertices, reversed: among the pairs that touched in proportion
    /// to their pushes over their weights, and each pair's among its neighbour vertices in
    /// proportion to their coefficients (the triangle's barycentric weights, the edge's
    /// parameter). The neighbours take the opposite of what the cloth took.
    pub fn share_out(&mut self, on_cloth: Vec3) {
        let total: f64 = self.touching.iter().map(|t| t.2).sum();
        if !self.active || !(total > 0.0) {
            return;
        }
        let n = self.own;
        for (vertices, coefficients, size) in &self.touching {
            let on_pair = on_cloth * (size / total);
            let across: f64 = vertices
                .iter()
                .zip(coefficients)
                .filter(|(v, _)| **v >= n)
                .map(|(_, c)| c.abs())
                .sum();
            if across <= 0.0 {
                continue;
            }
            for (&v, c) in vertices.iter().zip(coefficients) {
                if v >= n {
                    self.impulses[v] -= on_pair * (c.abs() / across);
                }
            }
        }
    }

    /// Per neighbour vertex given an impulse by [`OtherCloths::share_out`]: the neighbour's
    /// id, the vertex (its index in the neighbour) and the impulse (N s).
    pub fn impulses(&self) -> impl Iterator<Item = (u64, usize, Vec3)> + '_ {
        let neighbours = if self.active { self.offsets.len() } else { 0 };
        (0..neighbours).flat_map(move |k| {
            let (id, from) = self.offsets[k];
            let to = self.offsets.get(k + 1).map_or(self.impulses.len(), |o| o.1);
            self.impulses[from..to]
                .iter()
                .enumerate()
                .filter(|(_, j)| **j != Vec3::zeros())
                .map(move |(v, &j)| (id, v, j))
        })
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
