//! Impact zones: the fail-safe that keeps a cloth from ending a step crossed through itself
//! (Provot 1997, "Collision and self-collision handling in cloth model dedicated to design
//! garments"; Bridson et al. 2002, "Robust treatment of collisions, contact and friction for
//! cloth animation", section 7.4).
//!
//! After the iterations, every vertex-triangle and edge-edge pair of the cloth whose swept
//! boxes overlap, outside the patches flat over the step (`patches.rs`: a height field cannot
//! pass through itself), is tested for an impact along its straight path from the step's
//! start to its end ([`crate::sim::contact::ccd`]). The vertices of each pair that hits are
//! merged into a zone (union-find), and each zone moves as one: every member ends the step at
//! its start plus the zone's mass-weighted mean displacement (its pinned members' mean where
//! it has any; no displacement where a member rests on an obstacle or the move would take a
//! member into one, since where the zone started is clear of the obstacles). A zone keeps the
//! shape it had at the step's start, where nothing crossed, so its own pairs cannot hit; its
//! moves may make new hits with the cloth around it, so the pairs with a zone member (only
//! those: the tree's traversal skips the patches without one) are tested again on the new ends
//! until none hits. After [`MAX_ROUNDS`] rounds the step may end crossed.
//!
//! Deviation: the papers' zones move rigidly with the zone's linear and angular momentum; a
//! zone here only translates (it loses the spin of its members in that step), and a zone with
//! pinned members follows the pins' mean. Zones are the last resort after the proximity
//! contacts (`self_contact.rs`): in the heap and drape tests (`tests/sim_cloth_self.rs`) no
//! vertex is in a zone once the cloth lies still, but a flag flapping in the wind puts about
//! a tenth of its vertices in zones every step (`cargo bench --bench cloth`), each stopped in
//! its deformation for that step. A cloth that starts a step crossed has pairs that hit at
//! every step; their zones freeze that part of the cloth until they part (no untangling).

use super::patches::PatchTree;
use crate::sim::contact::ccd::{edge_edge_impact, point_triangle_impact};
use crate::sim::math::Vec3;

/// Rounds of detection and zone moves at most per step.
pub const MAX_ROUNDS: usize = 16;

/// What a zone's displacement is made of.
#[derive(Debug, Clone, Copy, Default)]
struct ZoneSum {
    /// The free members' mass-weighted displacements (kg m) and mass (kg).
    weighted: Vec3,
    mass: f64,
    /// The pinned members' displacements (m) and count.
    pinned: Vec3,
    pins: u32,
    /// Whether a member rests on an obstacle.
    supported: bool,
}

/// The impact zones of one cloth, and the buffers they reuse.
#[derive(Debug, Default)]
pub(super) struct ImpactZones {
    patches: PatchTree,
    candidates: Vec<(u32, u32)>,
    edge_candidates: Vec<(u32, u32)>,
    /// Union-find over the vertices: each vertex's parent.
    parent: Vec<u32>,
    /// Per vertex: whether it is in a zone this step.
    zoned: Vec<bool>,
    /// Per zone root: what its displacement is made of (scratch).
    sums: Vec<ZoneSum>,
    /// Vertices in zones in the last step.
    last_zoned: usize,
}

impl ImpactZones {
    /// The zones over the triangles and edges of `patches` (a cloth's own, or two cloths side
    /// by side: [`PatchTree::between_sides`]).
    pub fn on(patches: PatchTree) -> Self {
        Self {
            patches,
            ..Self::default()
        }
    }

    fn root(&mut self, mut v: u32) -> u32 {
        while self.parent[v as usize] != v {
            let up = self.parent[self.parent[v as usize] as usize];
            self.parent[v as usize] = up;
            v = up;
        }
        v
    }

    fn merge(&mut self, vertices: &[u32]) {
        for &v in vertices {
            self.zoned[v as usize] = true;
            let (a, b) = (self.root(vertices[0]), self.root(v));
            if a != b {
                // The smaller index roots the zone (the same zones on any run).
                self.parent[a.max(b) as usize] = a.min(b);
            }
        }
    }

    /// Whether `vertices` already share a zone (they move as one: no impact among them).
    fn together(&mut self, vertices: &[u32]) -> bool {
        if !vertices.iter().all(|&v| self.zoned[v as usize]) {
            return false;
        }
        let first = self.root(vertices[0]);
        vertices[1..].iter().all(|&v| self.root(v) == first)
    }

    /// Whether the pair of four vertices (a vertex and a triangle's corners, or two edges'
    /// ends) hits on its paths from `start` to `x` by `impact`, merging it into one zone if
    /// so. After the first round only pairs with a zone member have new paths; a pair already
    /// in one zone moves as one and cannot hit.
    fn hits(
        &mut self,
        pair: [u32; 4],
        round: usize,
        (start, x): (&[Vec3], &[Vec3]),
        impact: fn(&[Vec3; 4], &[Vec3; 4]) -> Option<f64>,
    ) -> bool {
        if (round > 0 && !pair.iter().any(|&v| self.zoned[v as usize])) || self.together(&pair) {
            return false;
        }
        let at = |q: &[Vec3]| pair.map(|i| q[i as usize]);
        let hit = impact(&at(start), &at(x)).is_some();
        if hit {
            self.merge(&pair);
        }
        hit
    }

    /// Moves `x` (the step's ends, m) so that no vertex-triangle or edge-edge pair of the
    /// cloth's `triangles` and `edges` passes through another between `start` and `x` (see
    /// the module docs); `inverse_mass` is 0 for pinned vertices, `supports` non-zero for
    /// vertices resting on an obstacle, and `clear` says whether a position is clear of the
    /// obstacles. Returns the number of vertices put in zones.
    pub fn resolve(
        &mut self,
        start: &[Vec3],
        x: &mut [Vec3],
        (inverse_mass, supports): (&[f64], &[Vec3]),
        clear: impl Fn(&Vec3) -> bool,
    ) -> usize {
        let n = x.len();
        self.parent.clear();
        self.parent.extend(0..n as u32);
        self.zoned.clear();
        self.zoned.resize(n, false);
        for round in 0..MAX_ROUNDS {
            self.patches.refit(start, x, 0.0);
            // After the first round only pairs with a zone member have new paths.
            self.patches
                .limit_to((round > 0).then_some(self.zoned.as_slice()));
            let mut hits = 0;
            let (mut candidates, mut edge_candidates) = (
                std::mem::take(&mut self.candidates),
                std::mem::take(&mut self.edge_candidates),
            );
            self.patches
                .candidates(&mut candidates, &mut edge_candidates);
            candidates.sort_unstable();
            edge_candidates.sort_unstable();
            for &(v, t) in &candidates {
                let [a, b, c] = self.patches.triangles()[t as usize];
                let pair = [v, a, b, c];
                hits += usize::from(self.hits(pair, round, (start, x), point_triangle_impact));
            }
            for &(i, j) in &edge_candidates {
                let edges = self.patches.edges();
                let (e, f) = (edges[i as usize], edges[j as usize]);
                let pair = [e[0], e[1], f[0], f[1]];
                hits += usize::from(self.hits(pair, round, (start, x), edge_edge_impact));
            }
            self.candidates = candidates;
            self.edge_candidates = edge_candidates;
            if hits == 0 {
                break;
            }
            self.move_zones(start, x, (inverse_mass, supports), &clear);
        }
        self.last_zoned = self.zoned.iter().filter(|&&z| z).count();
        self.last_zoned
    }

    /// Every zone's members to their start plus the zone's displacement: its pinned members'
    /// mean where it has any, none where a member rests on an obstacle (where it started is
    /// outside every obstacle; a move could take it in), its mass-weighted mean otherwise.
    fn move_zones(
        &mut self,
        start: &[Vec3],
        x: &mut [Vec3],
        (inverse_mass, supports): (&[f64], &[Vec3]),
        clear: impl Fn(&Vec3) -> bool,
    ) {
        let n = x.len();
        self.sums.clear();
        self.sums.resize(n, ZoneSum::default());
        for v in 0..n {
            if !self.zoned[v] {
                continue;
            }
            let r = self.root(v as u32) as usize;
            let moved = x[v] - start[v];
            let sum = &mut self.sums[r];
            if inverse_mass[v] > 0.0 {
                let m = 1.0 / inverse_mass[v];
                sum.weighted += moved * m;
                sum.mass += m;
            } else {
                sum.pinned += moved;
                sum.pins += 1;
            }
            sum.supported |= supports[v] != Vec3::zeros();
        }
        let displacement = |sum: &ZoneSum| {
            if sum.pins > 0 {
                sum.pinned / f64::from(sum.pins)
            } else if sum.supported {
                Vec3::zeros()
            } else {
                sum.weighted / sum.mass
            }
        };
        // A translated zone that would take a member into an obstacle stays where it started.
        for v in 0..n {
            if !self.zoned[v] || inverse_mass[v] == 0.0 {
                continue;
            }
            let r = self.root(v as u32) as usize;
            let sum = &self.sums[r];
            if sum.pins == 0 && !sum.supported && !clear(&(start[v] + displacement(sum))) {
                self.sums[r].supported = true;
            }
        }
        for v in 0..n {
            if !self.zoned[v] || inverse_mass[v] == 0.0 {
                continue;
            }
            let r = self.root(v as u32) as usize;
            x[v] = start[v] + displacement(&self.sums[r]);
        }
    }

    /// Vertices among the first `n` put in zones in the last step.
    pub fn zoned_among(&self, n: usize) -> usize {
        self.zoned.iter().take(n).filter(|&&z| z).count()
    }

    /// Vertices put in zones in the last step.
    pub fn zoned(&self) -> usize {
        self.last_zoned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two triangles, the second 10 cm above the first and offset, and their edges.
    fn two_triangles() -> (Vec<Vec3>, Vec<[u32; 3]>, Vec<[u32; 2]>) {
        let lower = [
            Vec3::new(0.0, 0.0, 0.0),
            Vec3::new(1.0, 0.0, 0.0),
            Vec3::new(0.0, 0.0, 1.0),
        ];
        let mut start = lower.to_vec();
        start.extend(lower.iter().map(|p| p + Vec3::new(0.1, 0.1, 0.1)));
        let triangles = vec![[0, 1, 2], [3, 4, 5]];
        let edges = vec![[0, 1], [1, 2], [0, 2], [3, 4], [4, 5], [3, 5]];
        (start, triangles, edges)
    }

    /// Whether any vertex-triangle or edge-edge pair of different triangles hits on the way.
    fn any_impact(start: &[Vec3], end: &[Vec3], t: &[[u32; 3]], e: &[[u32; 2]]) -> bool {
        let at = |q: &[Vec3], i: [u32; 4]| i.map(|v| q[v as usize]);
        let vertex_triangle = (0..start.len() as u32).any(|v| {
            t.iter().filter(|c| !c.contains(&v)).any(|c| {
                let i = [v, c[0], c[1], c[2]];
                point_triangle_impact(&at(start, i), &at(end, i)).is_some()
            })
        });
        let edge_edge = e.iter().any(|a| {
            e.iter()
                .filter(|b| !b.iter().any(|v| a.contains(v)))
                .any(|b| {
                    let i = [a[0], a[1], b[0], b[1]];
                    edge_edge_impact(&at(start, i), &at(end, i)).is_some()
                })
        });
        vertex_triangle || edge_edge
    }

    #[test]
    fn a_triangle_driven_through_another_moves_with_it_as_one_zone() {
        let (start, triangles, edges) = two_triangles();
        // The upper triangle to 10 cm below the lower in one step.
        let mut x = start.clone();
        x[3..].iter_mut().for_each(|p| p.y -= 0.2);
        assert!(any_impact(&start, &x, &triangles, &edges));
        let inverse_mass = vec![1.0; 6];
        let supports = vec![Vec3::zeros(); 6];
        let mut zones = ImpactZones::on(PatchTree::new(&start, &triangles, &edges));
        let zoned = zones.resolve(&start, &mut x, (&inverse_mass, &supports), |_| true);
        assert_eq!(zoned, 6);
        assert!(!any_impact(&start, &x, &triangles, &edges));
        // Equal masses: both move by the mean, 10 cm down, keeping their shapes.
        for (p, q) in x.iter().zip(&start) {
            assert!((p - q - Vec3::new(0.0, -0.1, 0.0)).norm() < 1e-12, "{p:?}");
        }
    }

    #[test]
    fn a_zone_with_a_pinned_or_supported_member_moves_as_its_pins_or_not_at_all() {
        let (start, triangles, edges) = two_triangles();
        let mut driven = start.clone();
        driven[3..].iter_mut().for_each(|p| p.y -= 0.2);
        // The lower triangle pinned (its pins carried 1 cm along x in the step).
        let mut x = driven.clone();
        x[..3].iter_mut().for_each(|p| p.x += 0.01);
        let inverse_mass = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let none = vec![Vec3::zeros(); 6];
        let mut zones = ImpactZones::on(PatchTree::new(&start, &triangles, &edges));
        zones.resolve(&start, &mut x, (&inverse_mass, &none), |_| true);
        assert!(!any_impact(&start, &x, &triangles, &edges));
        for v in 3..6 {
            assert!((x[v] - start[v] - Vec3::new(0.01, 0.0, 0.0)).norm() < 1e-12);
        }
        // Free, but the lower triangle rests on a floor: the zone stays where it started.
        let mut x = driven.clone();
        let inverse_mass = vec![1.0; 6];
        let mut supports = vec![Vec3::zeros(); 6];
        supports[0] = Vec3::y();
        zones.resolve(&start, &mut x, (&inverse_mass, &supports), |_| true);
        assert_eq!(x, start);
        // Free, and the mean move would take a member below the floor at y = -0.05.
        let mut x = driven;
        let none = vec![Vec3::zeros(); 6];
        zones.resolve(&start, &mut x, (&inverse_mass, &none), |p| p.y > -0.05);
        assert_eq!(x, start);
    }
}
