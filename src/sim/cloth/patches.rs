//! The cloth's self-collision broadphase: a hierarchy of connected surface patches with
//! bounding boxes and normal cones, so that the flat parts of a cloth are not tested against
//! themselves (Volino and Magnenat-Thalmann 1994, "Efficient self-collision detection on
//! smoothly discretized surface animations using geometrical shape regularity"; the normal
//! cone over a step as in Tang et al. 2009, "Interactive continuous collision detection
//! between deformable models using connectivity-based culling").
//!
//! **Why.** A tree over swept boxes (the solids' broadphase) reports every element near
//! another, and in a cloth that is mostly an element's neighbours on the same smooth sheet:
//! a flag flapping in the wind gave 14,600 vertex-triangle and 44,000 edge-edge candidates
//! per detection at 32 x 32 cells and about 80 per vertex at 64 x 64 (its swept boxes span
//! several cells), of which the exact tests kept a few per vertex. A patch of surface whose
//! normals all lie within less than 90 degrees of one direction is a height field over that
//! direction's plane (where its border does not overlap itself in that projection), and a
//! height field cannot touch itself: its elements are never tested against each other.
//!
//! **The tree**, built once from the rest shape: the triangles split at the median of their
//! centroids along the longest axis, down to [`LEAF`] triangles, each node knowing whether its
//! triangles are connected through shared edges. Every vertex and every edge is owned by one
//! of its triangles, so that each vertex-triangle and edge-edge pair comes out once.
//!
//! **Each query** ([`PatchTree::refit`], then [`PatchTree::candidates`]) fits, bottom up, the
//! boxes of the elements' paths between two position sets (the step's start and an iterate)
//! and each node's normal cone over the motion: a triangle's normal on straight-line paths is
//! `(1-t)^2 N0 + 2t(1-t) Nm + t^2 N1` with `Nm` the mixed product of the start's and end's
//! edges, a positive combination of three vectors, so a cone holding the three holds it
//! throughout. The traversal skips a connected node whose cone is narrower than [`FLAT`];
//! everything else is tested box against box down to the triangles, whose owned vertices and
//! edges give the candidates.
//!
//! Deviation from the papers: the border ("contour") test of Volino and Magnenat-Thalmann is
//! not made (a patch is assumed to be no spiral in projection, as Tang et al. and Provot also
//! assume); a patch counts as flat only under 60 degrees, not 90, since the candidates here
//! also serve the proximity contacts (a steep height field comes nearer itself than a flat
//! one); and two adjacent patches that are flat together are still tested against each other.
//! Skipping those too (the papers' adjacency rule) let a sheet draped over a ball in
//! `tests/sim_cloth_self.rs` cross itself at one triangle pair, and it culled pairs the
//! proximity contacts then missed: the 64 x 64 heap of `cargo bench --bench cloth` put 116
//! vertices a step in impact zones with it and 35 without. The unit tests below check the
//! candidates against every pair of folded and crumpled sheets.

use std::collections::HashMap;

use crate::sim::math::Vec3;

/// Triangles per leaf at most.
pub const LEAF: usize = 4;

/// The half-angle (radians) under which a connected patch counts as flat: 60 degrees.
pub const FLAT: f64 = std::f64::consts::FRAC_PI_3;

/// No child: a leaf.
const NONE: u32 = u32::MAX;

/// A box: its lowest and highest corners (m).
type Box3 = [Vec3; 2];

/// A cone of directions: a unit axis and a half-angle (radians); at or past [`FLAT`] only
/// "not flat" matters, and the half-angle is set to pi.
#[derive(Debug, Clone, Copy)]
struct Cone {
    axis: Vec3,
    half: f64,
}

impl Cone {
    const WIDE: Cone = Cone {
        axis: Vec3::new(0.0, 0.0, 1.0),
        half: std::f64::consts::PI,
    };

    fn flat(&self) -> bool {
        self.half < FLAT
    }

    /// The cone of the non-zero directions among `vectors` (wide if none or if they spread
    /// past [`FLAT`]).
    fn of(vectors: &[Vec3]) -> Cone {
        let mut sum = Vec3::zeros();
        for v in vectors {
            let n = v.norm();
            if n > 0.0 {
                sum += v / n;
            }
        }
        let length = sum.norm();
        if !(length > 0.0) {
            return Cone::WIDE;
        }
        let axis = sum / length;
        let mut half = 0.0f64;
        for v in vectors {
            let n = v.norm();
            if n > 0.0 {
                half = half.max(angle(&axis, &(v / n)));
            }
        }
        Cone { axis, half }.clamped()
    }

    fn clamped(self) -> Cone {
        if self.half < FLAT { self } else { Cone::WIDE }
    }

    /// The smallest cone holding `self` and `other` (wide past [`FLAT`]).
    fn merge(&self, other: &Cone) -> Cone {
        if !self.flat() || !other.flat() {
            return Cone::WIDE;
        }
        let between = angle(&self.axis, &other.axis);
        if between + other.half <= self.half {
            return *self;
        }
        if between + self.half <= other.half {
            return *other;
        }
        let half = 0.5 * (self.half + between + other.half);
        if half >= FLAT {
            return Cone::WIDE;
        }
        // The axis turned from `self`'s towards `other`'s by `half - self.half`.
        let towards = other.axis - self.axis * self.axis.dot(&other.axis);
        let length = towards.norm();
        if !(length > 0.0) {
            return Cone::WIDE;
        }
        let turn = half - self.half;
        let axis = self.axis * turn.cos() + towards * (turn.sin() / length);
        Cone {
            axis: axis.normalize(),
            half,
        }
    }
}

/// The angle (radians) between unit vectors `a` and `b`.
fn angle(a: &Vec3, b: &Vec3) -> f64 {
    a.cross(b).norm().atan2(a.dot(b))
}

fn union(a: &Box3, b: &Box3) -> Box3 {
    [a[0].inf(&b[0]), a[1].sup(&b[1])]
}

fn overlap(a: &Box3, b: &Box3) -> bool {
    (0..3).all(|k| a[0][k] <= b[1][k] && b[0][k] <= a[1][k])
}

/// The box of `points` grown by `margin` (m) on every side.
fn box_of(points: &[Vec3], margin: f64) -> Box3 {
    let mut lo = points[0];
    let mut hi = points[0];
    for p in &points[1..] {
        lo = lo.inf(p);
        hi = hi.sup(p);
    }
    let grow = Vec3::repeat(margin);
    [lo - grow, hi + grow]
}

/// A node of the tree: its triangles `order[first..first + count]`, its children, and whether
/// its triangles are connected through shared edges.
#[derive(Debug, Clone, Copy)]
struct Node {
    first: u32,
    count: u32,
    children: [u32; 2],
    connected: bool,
}

/// Where a traversal puts its candidates: vertex-triangle and edge-edge pairs.
struct Found<'a> {
    points: &'a mut Vec<(u32, u32)>,
    crossings: &'a mut Vec<(u32, u32)>,
}

/// The patch hierarchy of one cloth, and its boxes and cones for the last query.
#[derive(Debug, Default, Clone)]
pub(super) struct PatchTree {
    triangles: Vec<[u32; 3]>,
    edges: Vec<[u32; 2]>,
    nodes: Vec<Node>,
    order: Vec<u32>,
    /// Per triangle, the vertices and edges it owns (compressed rows).
    owned_vertex_start: Vec<u32>,
    owned_vertices: Vec<u32>,
    owned_edge_start: Vec<u32>,
    owned_edges: Vec<u32>,
    /// Per node, per triangle, per vertex and per edge: the box of the last query (m).
    node_boxes: Vec<Box3>,
    triangle_boxes: Vec<Box3>,
    vertex_boxes: Vec<Box3>,
    edge_boxes: Vec<Box3>,
    /// Per node and per triangle: the normal cone of the last query.
    node_cones: Vec<Cone>,
    triangle_cones: Vec<Cone>,
    /// Per node and per triangle: whether it has a vertex of the set the queries are limited
    /// to ([`PatchTree::limit_to`]; all while `limited` is false).
    node_marked: Vec<bool>,
    triangle_marked: Vec<bool>,
    limited: bool,
    /// Whether the root's two children are two cloths whose pairs with each other are the
    /// only ones wanted ([`PatchTree::between_sides`]).
    two_sides: bool,
}

impl PatchTree {
    /// The tree of a cloth's `triangles` over its vertices at `rest` (m), with its `edges`
    /// (each once; the candidates name them by their index here).
    pub fn new(rest: &[Vec3], triangles: &[[u32; 3]], edges: &[[u32; 2]]) -> Self {
        let (mut tree, centroids) = Self::owning(rest, triangles, edges);
        if !triangles.is_empty() {
            tree.split(&centroids, 0, triangles.len());
            tree.describe();
        }
        tree
    }

    /// The tree of two cloths side by side, `triangles[..split]` and `triangles[split..]`
    /// (no vertex shared), whose candidates are only the pairs of one with the other.
    pub fn between_sides(
        rest: &[Vec3],
        triangles: &[[u32; 3]],
        edges: &[[u32; 2]],
        split: usize,
    ) -> Self {
        let (mut tree, centroids) = Self::owning(rest, triangles, edges);
        tree.two_sides = true;
        if split == 0 || split >= triangles.len() {
            return tree;
        }
        tree.nodes.push(Node {
            first: 0,
            count: triangles.len() as u32,
            children: [NONE; 2],
            connected: false,
        });
        let one = tree.split(&centroids, 0, split);
        let other = tree.split(&centroids, split, triangles.len() - split);
        tree.nodes[0].children = [one, other];
        tree.describe();
        tree
    }

    /// A tree with no node yet over `triangles` and `edges` at `rest` (m), each vertex and
    /// edge given its owner, and the triangles' centroids.
    fn owning(rest: &[Vec3], triangles: &[[u32; 3]], edges: &[[u32; 2]]) -> (Self, Vec<Vec3>) {
        let mut tree = PatchTree {
            triangles: triangles.to_vec(),
            edges: edges.to_vec(),
            order: (0..triangles.len() as u32).collect(),
            ..PatchTree::default()
        };
        tree.own(rest.len());
        let centroids = triangles
            .iter()
            .map(|t| t.iter().map(|&v| rest[v as usize]).sum::<Vec3>() / 3.0)
            .collect();
        (tree, centroids)
    }

    /// The triangles the candidates name.
    pub fn triangles(&self) -> &[[u32; 3]] {
        &self.triangles
    }

    /// The edges the candidates name.
    pub fn edges(&self) -> &[[u32; 2]] {
        &self.edges
    }

    /// Gives each vertex and edge to the first triangle that has it.
    fn own(&mut self, vertex_count: usize) {
        let mut vertex_owner = vec![NONE; vertex_count];
        let index: HashMap<[u32; 2], u32> = self
            .edges
            .iter()
            .enumerate()
            .map(|(i, &[a, b])| ([a.min(b), a.max(b)], i as u32))
            .collect();
        let mut edge_owned = vec![false; self.edges.len()];
        self.owned_vertex_start.push(0);
        self.owned_edge_start.push(0);
        for (t, corners) in self.triangles.iter().enumerate() {
            for &v in corners {
                if vertex_owner[v as usize] == NONE {
                    vertex_owner[v as usize] = t as u32;
                    self.owned_vertices.push(v);
                }
            }
            for k in 0..3 {
                let (a, b) = (corners[k], corners[(k + 1) % 3]);
                if let Some(&e) = index.get(&[a.min(b), a.max(b)])
                    && !edge_owned[e as usize]
                {
                    edge_owned[e as usize] = true;
                    self.owned_edges.push(e);
                }
            }
            self.owned_vertex_start
                .push(self.owned_vertices.len() as u32);
            self.owned_edge_start.push(self.owned_edges.len() as u32);
        }
    }

    /// Builds the node over `order[first..first + count]` and its subtree; returns its index.
    fn split(&mut self, centroids: &[Vec3], first: usize, count: usize) -> u32 {
        let index = self.nodes.len() as u32;
        self.nodes.push(Node {
            first: first as u32,
            count: count as u32,
            children: [NONE; 2],
            connected: false,
        });
        if count <= LEAF {
            return index;
        }
        let span = &mut self.order[first..first + count];
        let points: Vec<Vec3> = span.iter().map(|&t| centroids[t as usize]).collect();
        let [lo, hi] = box_of(&points, 0.0);
        let extent = hi - lo;
        let axis = (0..3)
            .max_by(|&a, &b| extent[a].total_cmp(&extent[b]))
            .unwrap_or(0);
        let half = count / 2;
        span.select_nth_unstable_by(half, |&a, &b| {
            centroids[a as usize][axis]
                .total_cmp(&centroids[b as usize][axis])
                .then(a.cmp(&b))
        });
        let left = self.split(centroids, first, half);
        let right = self.split(centroids, first + half, count - half);
        self.nodes[index as usize].children = [left, right];
        index
    }

    /// Each node's connectedness through shared edges.
    fn describe(&mut self) {
        let mut by_edge: HashMap<[u32; 2], Vec<u32>> = HashMap::new();
        for (t, corners) in self.triangles.iter().enumerate() {
            for k in 0..3 {
                let (a, b) = (corners[k], corners[(k + 1) % 3]);
                by_edge
                    .entry([a.min(b), a.max(b)])
                    .or_default()
                    .push(t as u32);
            }
        }
        // Per triangle, its position in the node being described (NONE outside it).
        let mut local = vec![NONE; self.triangles.len()];
        let mut parent: Vec<u32> = Vec::new();
        for n in 0..self.nodes.len() {
            let node = self.nodes[n];
            let members = &self.order[node.first as usize..][..node.count as usize];
            for (i, &t) in members.iter().enumerate() {
                local[t as usize] = i as u32;
            }
            parent.clear();
            parent.extend(0..node.count);
            let root = |parent: &mut Vec<u32>, mut i: u32| {
                while parent[i as usize] != i {
                    let up = parent[parent[i as usize] as usize];
                    parent[i as usize] = up;
                    i = up;
                }
                i
            };
            let mut components = node.count;
            for &t in members {
                let corners = self.triangles[t as usize];
                for k in 0..3 {
                    let (a, b) = (corners[k], corners[(k + 1) % 3]);
                    for &u in &by_edge[&[a.min(b), a.max(b)]] {
                        if local[u as usize] == NONE {
                            continue;
                        }
                        let (x, y) = (
                            root(&mut parent, local[t as usize]),
                            root(&mut parent, local[u as usize]),
                        );
                        if x != y {
                            parent[x.max(y) as usize] = x.min(y);
                            components -= 1;
                        }
                    }
                }
            }
            for &t in members {
                local[t as usize] = NONE;
            }
            self.nodes[n].connected = components == 1;
        }
    }

    /// Fits the boxes and cones to the elements' paths from `start` to `end` (m), the boxes
    /// grown by half the `margin` (m) on every side, so that two elements' boxes overlap when
    /// they come within `margin` of each other along an axis.
    pub fn refit(&mut self, start: &[Vec3], end: &[Vec3], margin: f64) {
        let grow = 0.5 * margin;
        self.vertex_boxes.clear();
        self.vertex_boxes
            .extend(start.iter().zip(end).map(|(a, b)| box_of(&[*a, *b], grow)));
        self.edge_boxes.clear();
        self.edge_boxes.extend(self.edges.iter().map(|e| {
            let [a, b] = e.map(|v| v as usize);
            union(&self.vertex_boxes[a], &self.vertex_boxes[b])
        }));
        self.triangle_boxes.clear();
        self.triangle_cones.clear();
        for t in &self.triangles {
            let [a, b, c] = t.map(|v| v as usize);
            self.triangle_boxes.push(union(
                &union(&self.vertex_boxes[a], &self.vertex_boxes[b]),
                &self.vertex_boxes[c],
            ));
            if self.two_sides {
                // The cones serve only the flat patches' self-tests, which two sides skip.
                self.triangle_cones.push(Cone::WIDE);
                continue;
            }
            let (e0, f0) = (start[b] - start[a], start[c] - start[a]);
            let (e1, f1) = (end[b] - end[a], end[c] - end[a]);
            let mixed = (e0.cross(&f1) + e1.cross(&f0)) * 0.5;
            self.triangle_cones
                .push(Cone::of(&[e0.cross(&f0), mixed, e1.cross(&f1)]));
        }
        let n = self.nodes.len();
        self.node_boxes.clear();
        self.node_boxes.resize(n, [Vec3::zeros(); 2]);
        self.node_cones.clear();
        self.node_cones.resize(n, Cone::WIDE);
        // Children come after their parent: fitted from the last node up.
        for i in (0..n).rev() {
            let node = self.nodes[i];
            if node.children[0] == NONE {
                let members = &self.order[node.first as usize..][..node.count as usize];
                let first = members[0] as usize;
                let (mut bounds, mut cone) =
                    (self.triangle_boxes[first], self.triangle_cones[first]);
                for &t in &members[1..] {
                    bounds = union(&bounds, &self.triangle_boxes[t as usize]);
                    cone = cone.merge(&self.triangle_cones[t as usize]);
                }
                self.node_boxes[i] = bounds;
                self.node_cones[i] = cone;
            } else {
                let [l, r] = node.children.map(|c| c as usize);
                self.node_boxes[i] = union(&self.node_boxes[l], &self.node_boxes[r]);
                self.node_cones[i] = self.node_cones[l].merge(&self.node_cones[r]);
            }
        }
    }

    /// Limits the next [`PatchTree::candidates`] to the pairs with a vertex of the set
    /// `marked` (per vertex), or lifts the limit (`None`).
    pub fn limit_to(&mut self, marked: Option<&[bool]>) {
        let Some(marked) = marked else {
            self.limited = false;
            return;
        };
        self.limited = true;
        self.triangle_marked.clear();
        self.triangle_marked.extend(
            self.triangles
                .iter()
                .map(|t| t.iter().any(|&v| marked[v as usize])),
        );
        let n = self.nodes.len();
        self.node_marked.clear();
        self.node_marked.resize(n, false);
        for i in (0..n).rev() {
            let node = self.nodes[i];
            self.node_marked[i] = if node.children[0] == NONE {
                self.order[node.first as usize..][..node.count as usize]
                    .iter()
                    .any(|&t| self.triangle_marked[t as usize])
            } else {
                node.children.iter().any(|&c| self.node_marked[c as usize])
            };
        }
    }

    /// Whether node `n` may give pairs under the limit of [`PatchTree::limit_to`].
    fn marked(&self, n: u32) -> bool {
        !self.limited || self.node_marked[n as usize]
    }

    /// The vertex-triangle pairs `(vertex, triangle)` and edge-edge pairs `(edge, edge)`
    /// (indices into the edges given at construction, the smaller first) whose boxes from
    /// the last [`PatchTree::refit`] overlap, outside the flat patches, into `points` and
    /// `crossings` (cleared first). Pairs sharing a vertex are left out.
    pub fn candidates(&self, points: &mut Vec<(u32, u32)>, crossings: &mut Vec<(u32, u32)>) {
        points.clear();
        crossings.clear();
        if self.nodes.is_empty() {
            return;
        }
        let found = &mut Found { points, crossings };
        if self.two_sides {
            let [one, other] = self.nodes[0].children;
            self.between(one, other, found);
        } else {
            self.within(0, found);
        }
    }

    fn is_leaf(&self, n: u32) -> bool {
        self.nodes[n as usize].children[0] == NONE
    }

    fn members(&self, n: u32) -> &[u32] {
        let node = &self.nodes[n as usize];
        &self.order[node.first as usize..][..node.count as usize]
    }

    /// The pairs within node `n`.
    fn within(&self, n: u32, out: &mut Found<'_>) {
        let node = &self.nodes[n as usize];
        if !self.marked(n) || (node.connected && self.node_cones[n as usize].flat()) {
            return;
        }
        if self.is_leaf(n) {
            let members = self.members(n);
            for (i, &s) in members.iter().enumerate() {
                for &t in &members[i + 1..] {
                    self.triangle_pair(s, t, out);
                }
            }
            return;
        }
        let [l, r] = node.children;
        self.within(l, out);
        self.within(r, out);
        self.between(l, r, out);
    }

    /// The pairs between disjoint nodes `a` and `b`.
    fn between(&self, a: u32, b: u32, out: &mut Found<'_>) {
        if !(self.marked(a) || self.marked(b))
            || !overlap(&self.node_boxes[a as usize], &self.node_boxes[b as usize])
        {
            return;
        }
        let (na, nb) = (&self.nodes[a as usize], &self.nodes[b as usize]);
        match (self.is_leaf(a), self.is_leaf(b)) {
            (true, true) => {
                for &s in self.members(a) {
                    let bounds = &self.triangle_boxes[s as usize];
                    if !overlap(bounds, &self.node_boxes[b as usize]) {
                        continue;
                    }
                    for &t in self.members(b) {
                        self.triangle_pair(s, t, out);
                    }
                }
            }
            (false, true) => {
                for c in na.children {
                    self.between(c, b, out);
                }
            }
            (true, false) => {
                for c in nb.children {
                    self.between(a, c, out);
                }
            }
            (false, false) => {
                if na.count >= nb.count {
                    for c in na.children {
                        self.between(c, b, out);
                    }
                } else {
                    for c in nb.children {
                        self.between(a, c, out);
                    }
                }
            }
        }
    }

    /// The pairs of the vertices and edges owned by triangles `s` and `t` (distinct).
    fn triangle_pair(&self, s: u32, t: u32, found: &mut Found<'_>) {
        let (sb, tb) = (
            &self.triangle_boxes[s as usize],
            &self.triangle_boxes[t as usize],
        );
        if !overlap(sb, tb)
            || (self.limited
                && !self.triangle_marked[s as usize]
                && !self.triangle_marked[t as usize])
        {
            return;
        }
        let owned_vertices = |u: u32| {
            &self.owned_vertices[self.owned_vertex_start[u as usize] as usize
                ..self.owned_vertex_start[u as usize + 1] as usize]
        };
        let owned_edges = |u: u32| {
            &self.owned_edges[self.owned_edge_start[u as usize] as usize
                ..self.owned_edge_start[u as usize + 1] as usize]
        };
        for (of, other, other_box) in [(s, t, tb), (t, s, sb)] {
            let corners = self.triangles[other as usize];
            for &v in owned_vertices(of) {
                if !corners.contains(&v) && overlap(&self.vertex_boxes[v as usize], other_box) {
                    found.points.push((v, other));
                }
            }
        }
        for &e in owned_edges(s) {
            let ends = self.edges[e as usize];
            let eb = &self.edge_boxes[e as usize];
            if !overlap(eb, tb) {
                continue;
            }
            for &f in owned_edges(t) {
                let other = self.edges[f as usize];
                if ends.iter().any(|v| other.contains(v))
                    || !overlap(eb, &self.edge_boxes[f as usize])
                {
                    continue;
                }
                found.crossings.push((e.min(f), e.max(f)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sim::cloth::{ClothMesh, rest_edges};
    use crate::sim::contact::ccd::{edge_edge_impact, point_triangle_impact};
    use crate::sim::contact::closest_point_on_triangle;
    use crate::sim::test_rng::Rng;

    /// A sheet of `n` x `n` cells, 1 m square, its triangles and edges.
    fn sheet(n: usize) -> (Vec<Vec3>, Vec<[u32; 3]>, Vec<[u32; 2]>) {
        let mesh = ClothMesh::rectangle(1.0, 1.0, n, n).expect("a rectangle");
        let rest = mesh.rest_positions().to_vec();
        let edges = rest_edges(mesh.triangles(), &rest)
            .iter()
            .map(|e| e.ends)
            .collect();
        (rest, mesh.triangles().to_vec(), edges)
    }

    /// The distance (m) between segments `a` and `b`, from above (the nearest of their points
    /// at 64 steps along each), and whether the nearest points are inside both.
    fn sampled_segment_distance(a: [Vec3; 2], b: [Vec3; 2]) -> (f64, bool) {
        let at = |s: [Vec3; 2], u: f64| s[0] * (1.0 - u) + s[1] * u;
        let (mut nearest, mut inside) = (f64::INFINITY, false);
        for i in 0..=64 {
            for j in 0..=64 {
                let d = (at(a, i as f64 / 64.0) - at(b, j as f64 / 64.0)).norm();
                if d < nearest {
                    nearest = d;
                    inside = (1..64).contains(&i) && (1..64).contains(&j);
                }
            }
        }
        (nearest, inside)
    }

    /// Every vertex-triangle and edge-edge pair that passes through each other between
    /// `start` and `end`, and every one that comes within `margin` (m) at either with the
    /// vertex over the triangle (the edges' nearest points inside both), by brute force, is a
    /// candidate: the pairs the contacts and the zones act on. Returns how many there were.
    fn assert_candidates_hold_every_meeting(
        (start, end): (&[Vec3], &[Vec3]),
        triangles: &[[u32; 3]],
        edges: &[[u32; 2]],
        margin: f64,
    ) -> (usize, usize) {
        let tree = PatchTree::new(start, triangles, edges);
        assert_tree_holds_every_meeting(tree, (start, end), triangles, edges, margin, |_| true)
    }

    /// As [`assert_candidates_hold_every_meeting`] for `tree`, over the pairs of four vertices
    /// that `wanted` takes; no other pair is a candidate.
    fn assert_tree_holds_every_meeting(
        mut tree: PatchTree,
        (start, end): (&[Vec3], &[Vec3]),
        triangles: &[[u32; 3]],
        edges: &[[u32; 2]],
        margin: f64,
        wanted: impl Fn([u32; 4]) -> bool,
    ) -> (usize, usize) {
        tree.refit(start, end, margin);
        let (mut points, mut crossings) = (Vec::new(), Vec::new());
        tree.candidates(&mut points, &mut crossings);
        for &(v, t) in &points {
            let c = triangles[t as usize];
            assert!(wanted([v, c[0], c[1], c[2]]), "an unwanted pair {v} {t}");
        }
        for &(i, j) in &crossings {
            let (e, f) = (edges[i as usize], edges[j as usize]);
            assert!(wanted([e[0], e[1], f[0], f[1]]), "an unwanted pair {i} {j}");
        }
        let (mut met_points, mut met_edges) = (0, 0);
        for v in 0..start.len() as u32 {
            for (t, corners) in triangles.iter().enumerate() {
                if corners.contains(&v) || !wanted([v, corners[0], corners[1], corners[2]]) {
                    continue;
                }
                let near = |x: &[Vec3]| {
                    let [a, b, c] = corners.map(|i| x[i as usize]);
                    let p = x[v as usize];
                    let (w, q) = closest_point_on_triangle(&p, &a, &b, &c);
                    (p - q).norm() < margin && w.iter().all(|&w| w > 0.0)
                };
                let q = [v, corners[0], corners[1], corners[2]];
                let hit = point_triangle_impact(
                    &q.map(|i| start[i as usize]),
                    &q.map(|i| end[i as usize]),
                )
                .is_some();
                if near(start) || near(end) || hit {
                    met_points += 1;
                    assert!(
                        points.contains(&(v, t as u32)),
                        "vertex {v} and triangle {t} meet but are no candidate"
                    );
                }
            }
        }
        for (i, e) in edges.iter().enumerate() {
            for (j, f) in edges.iter().enumerate().skip(i + 1) {
                if e.iter().any(|v| f.contains(v)) || !wanted([e[0], e[1], f[0], f[1]]) {
                    continue;
                }
                let near = |x: &[Vec3]| {
                    let (d, inside) = sampled_segment_distance(
                        e.map(|v| x[v as usize]),
                        f.map(|v| x[v as usize]),
                    );
                    d < margin && inside
                };
                let q = [e[0], e[1], f[0], f[1]];
                let hit =
                    edge_edge_impact(&q.map(|v| start[v as usize]), &q.map(|v| end[v as usize]))
                        .is_some();
                if near(start) || near(end) || hit {
                    met_edges += 1;
                    assert!(
                        crossings.contains(&(i as u32, j as u32)),
                        "edges {i} and {j} meet but are no candidate"
                    );
                }
            }
        }
        (met_points, met_edges)
    }

    #[test]
    fn a_flat_sheet_moving_rigidly_has_no_candidates() {
        let (rest, triangles, edges) = sheet(16);
        // Turned 20 degrees about z and carried 5 cm: flat throughout.
        let (c, s) = (20f64.to_radians().cos(), 20f64.to_radians().sin());
        let end: Vec<Vec3> = rest
            .iter()
            .map(|p| {
                Vec3::new(c * p.x - s * p.y, s * p.x + c * p.y, p.z) + Vec3::new(0.05, 0.0, 0.0)
            })
            .collect();
        let mut tree = PatchTree::new(&rest, &triangles, &edges);
        tree.refit(&rest, &end, 0.01);
        let (mut points, mut crossings) = (Vec::new(), Vec::new());
        tree.candidates(&mut points, &mut crossings);
        assert!(points.is_empty() && crossings.is_empty());
        // Boxes alone would give thousands: the swept boxes of neighbours overlap.
        let overlapping = (0..rest.len() as u32)
            .flat_map(|v| (0..triangles.len()).map(move |t| (v, t)))
            .filter(|&(v, t)| {
                !triangles[t].contains(&v)
                    && overlap(&tree.vertex_boxes[v as usize], &tree.triangle_boxes[t])
            })
            .count();
        assert!(overlapping > 1000, "{overlapping}");
    }

    #[test]
    fn a_sheet_folded_onto_itself_gives_the_pairs_between_its_layers() {
        let (rest, triangles, edges) = sheet(12);
        // Rolled round a 1 cm radius at x = 0: the half beyond it 2 cm above the other.
        let r = 0.01;
        let fold = |p: &Vec3| {
            let x = p.x + 0.1;
            if x < 0.0 {
                Vec3::new(x, 0.0, p.z)
            } else if x < std::f64::consts::PI * r {
                Vec3::new(r * (x / r).sin(), r * (1.0 - (x / r).cos()), p.z)
            } else {
                Vec3::new(-(x - std::f64::consts::PI * r), 2.0 * r, p.z)
            }
        };
        let start: Vec<Vec3> = rest.iter().map(fold).collect();
        // Pressed together by 1.5 cm in the step: the upper layer passes through the lower.
        let end: Vec<Vec3> = start
            .iter()
            .map(|p| {
                if p.y > 1.5 * r {
                    p - Vec3::new(0.0, 0.03, 0.0)
                } else {
                    *p
                }
            })
            .collect();
        let (points, crossings) =
            assert_candidates_hold_every_meeting((&start, &end), &triangles, &edges, 0.025);
        assert!(points > 100 && crossings > 100, "{points} {crossings}");
    }

    #[test]
    fn candidates_hold_every_pair_of_crumpled_sheets_that_meets() {
        let (rest, triangles, edges) = sheet(10);
        let mut rng = Rng(0x5eed_c1a7);
        for _ in 0..3 {
            // Random smooth folds (up to 30 cm) and a random smooth motion with jitter.
            let mut field = |amplitude: f64| {
                let waves: Vec<(Vec3, Vec3, f64)> = (0..4)
                    .map(|_| {
                        let k = Vec3::new(rng.signed(), rng.signed(), rng.signed()) * 12.0;
                        let d = Vec3::new(rng.signed(), rng.signed(), rng.signed()) * amplitude;
                        (k, d, rng.unit() * 6.3)
                    })
                    .collect();
                move |p: &Vec3| {
                    waves
                        .iter()
                        .map(|(k, d, phase)| d * (k.dot(p) + phase).sin())
                        .sum::<Vec3>()
                }
            };
            let (crumple, motion) = (field(0.3), field(0.05));
            let start: Vec<Vec3> = rest.iter().map(|p| p + crumple(p)).collect();
            let end: Vec<Vec3> = start
                .iter()
                .zip(&rest)
                .map(|(p, q)| {
                    p + motion(q) + Vec3::new(rng.signed(), rng.signed(), rng.signed()) * 0.002
                })
                .collect();
            assert_candidates_hold_every_meeting((&start, &end), &triangles, &edges, 0.01);
        }
    }

    #[test]
    fn two_sides_give_every_pair_between_the_cloths_and_none_within() {
        // Two crumpled sheets, the second 2 cm above the first and driven 4 cm down through
        // it in the step.
        let (rest, mut triangles, mut edges) = sheet(8);
        let n = rest.len() as u32;
        let split = triangles.len();
        triangles.extend_from_within(..split);
        for t in &mut triangles[split..] {
            *t = t.map(|v| v + n);
        }
        let own_edges = edges.len();
        edges.extend_from_within(..own_edges);
        for e in &mut edges[own_edges..] {
            *e = e.map(|v| v + n);
        }
        let wave = |p: &Vec3| Vec3::new(0.0, 0.03 * (9.0 * p.x).sin() * (7.0 * p.z).cos(), 0.0);
        let mut start: Vec<Vec3> = rest.iter().map(|p| p + wave(p)).collect();
        start.extend(
            rest.iter()
                .map(|p| p + Vec3::new(0.011, 0.02, 0.017) - wave(p)),
        );
        let mut end = start.clone();
        end[n as usize..].iter_mut().for_each(|p| p.y -= 0.04);
        let tree = PatchTree::between_sides(&start, &triangles, &edges, split);
        let across = |q: [u32; 4]| {
            let sides = q.map(|v| v < n);
            sides.iter().any(|&s| s) && sides.iter().any(|&s| !s)
        };
        let (points, crossings) =
            assert_tree_holds_every_meeting(tree, (&start, &end), &triangles, &edges, 0.01, across);
        assert!(points > 50 && crossings > 50, "{points} {crossings}");
    }

    #[test]
    fn merged_cones_hold_both_and_no_more_than_needed() {
        let axis = |degrees: f64| {
            let a = degrees.to_radians();
            Vec3::new(a.sin(), 0.0, a.cos())
        };
        let (a, b) = (
            Cone {
                axis: axis(0.0),
                half: 5f64.to_radians(),
            },
            Cone {
                axis: axis(40.0),
                half: 5f64.to_radians(),
            },
        );
        let merged = a.merge(&b);
        assert!((merged.half - 25f64.to_radians()).abs() < 1e-12);
        assert!(angle(&merged.axis, &axis(20.0)) < 1e-12);
        // A cone inside another gives the other; past the flat limit the cone is wide.
        let wide = Cone {
            axis: axis(0.0),
            half: 30f64.to_radians(),
        };
        let inside = Cone {
            axis: axis(10.0),
            half: 5f64.to_radians(),
        };
        assert!((wide.merge(&inside).half - wide.half).abs() < 1e-15);
        let far = Cone {
            axis: axis(120.0),
            half: 10f64.to_radians(),
        };
        assert!(!a.merge(&far).flat());
        // Random directions: the cone of them holds each.
        let mut rng = Rng(7);
        for _ in 0..100 {
            let base = Vec3::new(rng.signed(), rng.signed(), 1.0).normalize();
            let vectors: Vec<Vec3> = (0..3)
                .map(|_| base + Vec3::new(rng.signed(), rng.signed(), rng.signed()) * 0.3)
                .collect();
            let cone = Cone::of(&vectors[..2]).merge(&Cone::of(&vectors[2..]));
            if cone.flat() {
                for v in &vectors {
                    assert!(angle(&cone.axis, &v.normalize()) <= cone.half + 1e-12);
                }
            }
        }
    }
}
