//! Broadphase for contact between soft bodies: which proxy points may touch which surface
//! triangles.
//!
//! Each body keeps two parry3d BVHs ([`BodyBvh`]): one over its collision proxies (each a box of
//! half-width `margin` around the point) and one over its boundary triangles (each the box of its
//! three vertices). They are built once and afterwards *refitted* each step: leaf boxes are
//! rewritten in place and the inner boxes recomputed bottom-up, without changing the tree's
//! topology, which is what a deforming body needs (its triangles keep their neighbours). A
//! simultaneous traversal of one body's proxy tree and another's (or its own) triangle tree
//! yields every (proxy, triangle) pair whose boxes overlap; [`candidate_pairs`] returns them
//! sorted, so the narrowphase sees them in an order independent of the tree layout.
//!
//! Exactness: the pairs are exactly the pairs of overlapping leaf boxes (checked against brute
//! force on random scenes). Boxes are built in `f32` with mins rounded down and maxs rounded up,
//! so a pair whose `f64` boxes overlap is never missed.

use parry3d::bounding_volume::Aabb;
use parry3d::math::Vector;
use parry3d::partitioning::{Bvh, BvhBuildStrategy, BvhWorkspace};

use crate::sim::math::Vec3;

/// The BVHs of one body: proxies, boundary triangles and boundary edges.
#[derive(Default, Clone)]
pub struct BodyBvh {
    proxies: Bvh,
    triangles: Bvh,
    edges: Bvh,
    workspace: BvhWorkspace,
    /// The leaf boxes, by proxy, by triangle and by edge.
    proxy_boxes: Vec<Aabb>,
    triangle_boxes: Vec<Aabb>,
    edge_boxes: Vec<Aabb>,
    proxy_count: usize,
    triangle_count: usize,
    edge_count: usize,
}

impl std::fmt::Debug for BodyBvh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyBvh")
            .field("proxies", &self.proxy_count)
            .field("triangles", &self.triangle_count)
            .field("edges", &self.edge_count)
            .finish()
    }
}

/// The `f32` box around `f64` points, grown by `margin` (m) and rounded outwards.
fn aabb_of<const N: usize>(points: [Vec3; N], margin: f64) -> Aabb {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for p in &points {
        for k in 0..3 {
            lo[k] = lo[k].min(p[k]);
            hi[k] = hi[k].max(p[k]);
        }
    }
    // Moved out by `|v| 2^-23 + 1e-30` before rounding to nearest, which moves it by at most
    // half that: below (above) `v` without a branch per coordinate (the exact one-ulp rounding
    // branched on every coordinate and cost 5-7 % of the `pile` replica's profile). The box
    // may be up to about two and a half `f32` ulps wider than the tightest.
    let slack = |v: f64| v.abs() * f64::from(f32::EPSILON) + 1e-30;
    let down = |v: f64| (v - slack(v)) as f32;
    let up = |v: f64| (v + slack(v)) as f32;
    Aabb::new(
        Vector::new(
            down(lo[0] - margin),
            down(lo[1] - margin),
            down(lo[2] - margin),
        ),
        Vector::new(up(hi[0] + margin), up(hi[1] + margin), up(hi[2] + margin)),
    )
}

impl BodyBvh {
    /// Fits the trees to proxy positions `points` (m) and the `triangles` over vertex positions
    /// `x` (m); `margin` (m) grows every proxy's box. The first call, and any call where the
    /// number of proxies or triangles changed, builds the trees; later calls refit them.
    pub fn update(&mut self, points: &[Vec3], x: &[Vec3], triangles: &[[u32; 3]], margin: f64) {
        self.proxy_boxes.clear();
        self.proxy_boxes
            .extend(points.iter().map(|p| aabb_of([*p], margin)));
        self.triangle_boxes.clear();
        self.triangle_boxes.extend(
            triangles
                .iter()
                .map(|t| aabb_of(t.map(|v| x[v as usize]), 0.0)),
        );
        self.fit_trees(points.len(), triangles.len());
    }

    /// [`BodyBvh::update`] for motion over a step: each proxy's box spans its positions in
    /// `points_start` and `points_end`, each triangle's box its vertices in `x_start` and `x_end`,
    /// so every pair that may meet during the step is a candidate.
    pub fn update_swept(
        &mut self,
        points_start: &[Vec3],
        points_end: &[Vec3],
        x_start: &[Vec3],
        x_end: &[Vec3],
        triangles: &[[u32; 3]],
        margin: f64,
    ) {
        self.proxy_boxes.clear();
        self.proxy_boxes.extend(
            points_start
                .iter()
                .zip(points_end)
                .map(|(a, b)| aabb_of([*a, *b], margin)),
        );
        self.triangle_boxes.clear();
        self.triangle_boxes.extend(triangles.iter().map(|t| {
            let [a, b, c] = t.map(|v| v as usize);
            aabb_of(
                [
                    x_start[a], x_start[b], x_start[c], x_end[a], x_end[b], x_end[c],
                ],
                0.0,
            )
        }));
        self.fit_trees(points_start.len(), triangles.len());
    }

    /// Builds the proxy and triangle trees on the leaf boxes just computed, or refits them
    /// where the counts are unchanged.
    fn fit_trees(&mut self, proxies: usize, triangles: usize) {
        if proxies != self.proxy_count || triangles != self.triangle_count {
            self.proxies = Bvh::from_leaves(BvhBuildStrategy::default(), &self.proxy_boxes);
            self.triangles = Bvh::from_leaves(BvhBuildStrategy::default(), &self.triangle_boxes);
            // Once in depth-first order (parry's `refit` lays the nodes out so), later refits
            // keep the layout, which the topology never changes.
            self.proxies.refit(&mut self.workspace);
            self.triangles.refit(&mut self.workspace);
            self.proxy_count = proxies;
            self.triangle_count = triangles;
            return;
        }
        for (i, b) in self.proxy_boxes.iter().enumerate() {
            self.proxies.insert_or_update_partially(*b, i as u32, 0.0);
        }
        for (i, b) in self.triangle_boxes.iter().enumerate() {
            self.triangles.insert_or_update_partially(*b, i as u32, 0.0);
        }
        self.proxies.refit_without_opt();
        self.triangles.refit_without_opt();
    }

    /// Fits the edge tree to a body's motion: each edge's box spans its two vertices in
    /// `x_start` and `x_end`, grown by `margin / 2` (m), so two edges whose swept boxes come
    /// within `margin` of each other are a candidate pair. Builds on the first call or when the
    /// number of edges changed; refits otherwise.
    pub fn update_edges(
        &mut self,
        x_start: &[Vec3],
        x_end: &[Vec3],
        edges: &[[u32; 2]],
        margin: f64,
    ) {
        self.edge_boxes.clear();
        self.edge_boxes.extend(edges.iter().map(|e| {
            let [a, b] = e.map(|v| v as usize);
            aabb_of([x_start[a], x_start[b], x_end[a], x_end[b]], 0.5 * margin)
        }));
        if edges.len() != self.edge_count {
            self.edges = Bvh::from_leaves(BvhBuildStrategy::default(), &self.edge_boxes);
            self.edges.refit(&mut self.workspace);
            self.edge_count = edges.len();
            return;
        }
        for (i, b) in self.edge_boxes.iter().enumerate() {
            self.edges.insert_or_update_partially(*b, i as u32, 0.0);
        }
        self.edges.refit_without_opt();
    }

    /// Whether the root boxes of `self`'s proxies and `other`'s triangles overlap (a cheap
    /// body-level test before [`candidate_pairs`]).
    pub fn may_touch(&self, other: &BodyBvh) -> bool {
        if self.proxy_count == 0 || other.triangle_count == 0 {
            return false;
        }
        overlap(&self.proxies.root_aabb(), &other.triangles.root_aabb())
    }

    /// Whether any edge of `self` may come within `margin` (m) of an edge of `other` over the
    /// motion their triangle trees were fitted to: the triangles' root boxes overlap once
    /// apart by up to `margin` (with a relative 1e-6 for their `f32` rounding). Every edge is a
    /// side of a triangle, and its box is its triangle's grown by half the margin
    /// ([`BodyBvh::update_edges`]), so where this is false no pair of edges is a candidate and
    /// the edge trees need no fitting.
    pub fn edges_may_meet(&self, other: &BodyBvh, margin: f64) -> bool {
        if self.triangle_count == 0 || other.triangle_count == 0 {
            return false;
        }
        let (a, b) = (self.triangles.root_aabb(), other.triangles.root_aabb());
        (0..3).all(|k| {
            let [alo, ahi, blo, bhi] = [a.mins[k], a.maxs[k], b.mins[k], b.maxs[k]].map(f64::from);
            let pad =
                margin + 1e-6 * (1.0 + alo.abs().max(ahi.abs()).max(blo.abs()).max(bhi.abs()));
            alo <= bhi + pad && blo <= ahi + pad
        })
    }

    /// Every boundary triangle whose box the ray `origin + t dir` (`t >= 0`, m) passes through,
    /// appended to `out` (cleared first) in the tree's order. The boxes are widened by a
    /// relative 1e-6 for the test, in `f64`, so a ray grazing a box's `f32` face is not missed.
    pub fn triangles_along_ray(&self, origin: &Vec3, dir: &Vec3, out: &mut Vec<u32>) {
        out.clear();
        if self.triangle_count == 0 {
            return;
        }
        let hits = |node: &parry3d::partitioning::BvhNode| {
            let (lo, hi) = (node.mins(), node.maxs());
            let (mut enter, mut exit) = (0.0f64, f64::INFINITY);
            for a in 0..3 {
                let (l, h) = (lo[a] as f64, hi[a] as f64);
                let pad = 1e-6 * (1.0 + l.abs().max(h.abs()));
                let (l, h) = (l - pad, h + pad);
                if dir[a] == 0.0 {
                    if origin[a] < l || origin[a] > h {
                        return false;
                    }
                    continue;
                }
                let (t0, t1) = ((l - origin[a]) / dir[a], (h - origin[a]) / dir[a]);
                enter = enter.max(t0.min(t1));
                exit = exit.min(t0.max(t1));
            }
            enter <= exit
        };
        out.extend(self.triangles.leaves(hits));
    }

    /// Every boundary triangle whose box comes within `radius` (m) of `point` on every axis
    /// (a superset of the triangles within `radius` of it), in the tree's order. The boxes are
    /// widened by a relative 1e-6 for the test, in `f64`, as in
    /// [`BodyBvh::triangles_along_ray`].
    pub fn triangles_near(&self, point: Vec3, radius: f64) -> impl Iterator<Item = u32> + '_ {
        let near = move |node: &parry3d::partitioning::BvhNode| {
            let (lo, hi) = (node.mins(), node.maxs());
            (0..3).all(|a| {
                let (l, h) = (lo[a] as f64, hi[a] as f64);
                let pad = 1e-6 * (1.0 + l.abs().max(h.abs())) + radius;
                point[a] >= l - pad && point[a] <= h + pad
            })
        };
        (self.triangle_count > 0)
            .then(|| self.triangles.leaves(near))
            .into_iter()
            .flatten()
    }

    /// The boxes (min, max corners, m) of the triangle tree's inner nodes, root first, for debug
    /// drawing; appended to `out`. Empty before the first fit.
    pub fn triangle_node_boxes(&self, out: &mut Vec<[Vec3; 2]>) {
        if self.triangle_count == 0 {
            return;
        }
        let v = |p: Vector| Vec3::new(p.x as f64, p.y as f64, p.z as f64);
        self.triangles.traverse(|node| {
            if node.is_leaf() {
                return parry3d::partitioning::TraversalAction::Prune;
            }
            out.push([v(node.mins()), v(node.maxs())]);
            parry3d::partitioning::TraversalAction::Continue
        });
    }
}

/// Whether two closed boxes overlap (on every axis).
fn overlap(a: &Aabb, b: &Aabb) -> bool {
    a.mins.cmple(b.maxs).all() && a.maxs.cmpge(b.mins).all()
}

/// Every (proxy of `a`, triangle of `b`) pair whose boxes overlap, sorted, appended to `out`
/// (cleared first). Pass the same body twice for self-collision candidates (a proxy's own
/// triangles are among them: the narrowphase skips its one-ring).
pub fn candidate_pairs(a: &BodyBvh, b: &BodyBvh, out: &mut Vec<(u32, u32)>) {
    out.clear();
    if a.proxy_count == 0 || b.triangle_count == 0 {
        return;
    }
    // The traversal prunes by inner boxes; the leaf pairs directly under the roots come out
    // unchecked, so every pair is tested on its leaf boxes here.
    out.extend(
        a.proxies
            .leaf_pairs(&b.triangles, |n1, n2| n1.intersects(n2))
            .filter(|&(p, t)| overlap(&a.proxy_boxes[p as usize], &b.triangle_boxes[t as usize])),
    );
    out.sort_unstable();
    out.dedup();
}

/// Every (edge of `a`, edge of `b`) pair whose boxes overlap, sorted, appended to `out`
/// (cleared first). For the same body twice (self-collision) each unordered pair of distinct
/// edges comes once, as `(i, j)` with `i < j`.
pub fn candidate_edge_pairs(a: &BodyBvh, b: &BodyBvh, out: &mut Vec<(u32, u32)>) {
    out.clear();
    if a.edge_count == 0 || b.edge_count == 0 {
        return;
    }
    if !overlap(&a.edges.root_aabb(), &b.edges.root_aabb()) {
        return;
    }
    let same = std::ptr::eq(a, b);
    out.extend(
        a.edges
            .leaf_pairs(&b.edges, |n1, n2| n1.intersects(n2))
            .filter(|&(i, j)| !same || i < j)
            .filter(|&(i, j)| overlap(&a.edge_boxes[i as usize], &b.edge_boxes[j as usize])),
    );
    out.sort_unstable();
    out.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sim::test_rng::Rng;

    fn point(rng: &mut Rng, scale: f64) -> Vec3 {
        Vec3::new(rng.unit(), rng.unit(), rng.unit()) * scale
    }

    #[test]
    fn rounded_boxes_hold_their_points_and_margins() {
        let mut rng = Rng(0xaabb_0f32);
        for i in 0..20_000 {
            // Coordinates from 1e-9 to 1e6 m, either sign, zero, and exact f32 values.
            let scale = 10f64.powi(i % 16 - 9);
            let mut p = [point(&mut rng, scale), point(&mut rng, scale)];
            if i % 5 == 0 {
                p[0] = p[0].map(|c| f64::from(c as f32));
            }
            if i % 7 == 0 {
                p[1].x = 0.0;
            }
            let margin = if i % 2 == 0 { 0.0 } else { 1e-3 };
            let b = aabb_of(p, margin);
            for k in 0..3 {
                let lo = p[0][k].min(p[1][k]) - margin;
                let hi = p[0][k].max(p[1][k]) + margin;
                let (mins, maxs) = (f64::from(b.mins[k]), f64::from(b.maxs[k]));
                assert!(mins <= lo && maxs >= hi, "{p:?} {b:?}");
                // At most a few f32 ulps looser than needed.
                let ulp = |v: f64| f64::from(f32::EPSILON) * v.abs() + 1e-29;
                assert!(
                    lo - mins <= 4.0 * ulp(lo) && maxs - hi <= 4.0 * ulp(hi),
                    "{p:?} {b:?}"
                );
            }
        }
    }

    fn brute_force(
        points: &[Vec3],
        x: &[Vec3],
        triangles: &[[u32; 3]],
        margin: f64,
    ) -> Vec<(u32, u32)> {
        let mut pairs = Vec::new();
        for (i, p) in points.iter().enumerate() {
            let pb = aabb_of([*p], margin);
            for (j, t) in triangles.iter().enumerate() {
                let tb = aabb_of(t.map(|v| x[v as usize]), 0.0);
                if overlap(&pb, &tb) {
                    pairs.push((i as u32, j as u32));
                }
            }
        }
        pairs
    }

    #[test]
    fn pairs_match_brute_force_after_builds_and_refits() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for scene in 0..12 {
            let n = 40 + 20 * scene;
            let x: Vec<Vec3> = (0..n).map(|_| point(&mut rng, 2.0)).collect();
            let triangles: Vec<[u32; 3]> = (0..n)
                .map(|_| {
                    let a = (rng.unit() * n as f64) as u32 % n as u32;
                    let near = |r: &mut Rng| (a + 1 + (r.unit() * 5.0) as u32) % n as u32;
                    [a, near(&mut rng), near(&mut rng)]
                })
                .collect();
            let points: Vec<Vec3> = (0..n / 2).map(|_| point(&mut rng, 2.0)).collect();
            let margin = 0.05;
            let (mut a, mut b) = (BodyBvh::default(), BodyBvh::default());
            a.update(&points, &x, &[], margin);
            b.update(&[], &x, &triangles, margin);
            let mut pairs = Vec::new();
            candidate_pairs(&a, &b, &mut pairs);
            assert_eq!(pairs, brute_force(&points, &x, &triangles, margin));
            // Deform both and refit: still exact, still sorted.
            for step in 0..3 {
                let moved: Vec<Vec3> = x
                    .iter()
                    .map(|p| p + point(&mut rng, 0.3) * (step + 1) as f64)
                    .collect();
                let moved_points: Vec<Vec3> =
                    points.iter().map(|p| p + point(&mut rng, 0.3)).collect();
                a.update(&moved_points, &moved, &[], margin);
                b.update(&[], &moved, &triangles, margin);
                candidate_pairs(&a, &b, &mut pairs);
                let expected = brute_force(&moved_points, &moved, &triangles, margin);
                assert_eq!(pairs, expected, "scene {scene}, step {step}");
            }
        }
    }

    #[test]
    fn self_pairs_and_empty_bodies() {
        let x = vec![
            Vec3::zeros(),
            Vec3::x(),
            Vec3::y(),
            Vec3::new(5.0, 5.0, 5.0),
        ];
        let triangles = [[0, 1, 2]];
        let mut body = BodyBvh::default();
        body.update(&x, &x, &triangles, 0.01);
        let mut pairs = Vec::new();
        candidate_pairs(&body, &body, &mut pairs);
        assert_eq!(pairs, vec![(0, 0), (1, 0), (2, 0)]);
        let empty = BodyBvh::default();
        candidate_pairs(&empty, &body, &mut pairs);
        assert!(pairs.is_empty());
        candidate_pairs(&body, &empty, &mut pairs);
        assert!(pairs.is_empty());
    }

    #[test]
    fn bodies_whose_edges_pair_are_those_whose_triangle_roots_say_they_may_meet() {
        // Two lattice cubes, the second moving past the first at offsets whose gaps run from
        // overlap to well beyond the margin (near it in most scenes): wherever the edge trees
        // give a candidate pair, the triangle trees' roots say the edges may meet.
        let cube = crate::sim::mesh::TetMesh::cuboid(Vec3::repeat(0.5), 2);
        let (x, triangles, edges) = (
            cube.rest_positions(),
            cube.surface_triangles(),
            cube.surface_edges(),
        );
        let margin = 0.01;
        let mut rng = Rng(0x51de_ed9e);
        let (mut paired, mut apart) = (0, 0);
        for _ in 0..400 {
            let mut offset = point(&mut rng, 0.02);
            offset.x += 1.0 + 0.01 * rng.unit() - 0.01;
            let motion = point(&mut rng, 0.01);
            let start: Vec<Vec3> = x.iter().map(|p| p + offset).collect();
            let end: Vec<Vec3> = start.iter().map(|p| p + motion).collect();
            let (mut a, mut b) = (BodyBvh::default(), BodyBvh::default());
            a.update_swept(x, x, x, x, triangles, margin);
            a.update_edges(x, x, edges, margin);
            b.update_swept(&start, &end, &start, &end, triangles, margin);
            b.update_edges(&start, &end, edges, margin);
            let mut pairs = Vec::new();
            candidate_edge_pairs(&a, &b, &mut pairs);
            let may = a.edges_may_meet(&b, margin);
            assert_eq!(may, b.edges_may_meet(&a, margin));
            assert!(pairs.is_empty() || may, "offset {offset:?}");
            paired += usize::from(!pairs.is_empty());
            apart += usize::from(!may);
        }
        assert!(paired > 40 && apart > 40, "{paired} paired, {apart} apart");
        assert!(!BodyBvh::default().edges_may_meet(&BodyBvh::default(), margin));
    }

    #[test]
    fn edge_pairs_match_brute_force_across_and_within_bodies() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for scene in 0..8 {
            let n = 30 + 15 * scene;
            let start: Vec<Vec3> = (0..n).map(|_| point(&mut rng, 2.0)).collect();
            let end: Vec<Vec3> = start.iter().map(|p| p + point(&mut rng, 0.2)).collect();
            let edges: Vec<[u32; 2]> = (0..n as u32)
                .map(|a| [a, (a + 1 + (rng.unit() * 4.0) as u32) % n as u32])
                .collect();
            let mut other: Vec<Vec3> = start.iter().map(|p| p + point(&mut rng, 0.5)).collect();
            let margin = 0.04;
            let (mut a, mut b) = (BodyBvh::default(), BodyBvh::default());
            for step in 0..2 {
                a.update_edges(&start, &end, &edges, margin);
                b.update_edges(&other, &other, &edges, margin);
                let boxes = |x0: &[Vec3], x1: &[Vec3]| -> Vec<Aabb> {
                    edges
                        .iter()
                        .map(|e| {
                            let [a, b] = e.map(|v| v as usize);
                            aabb_of([x0[a], x1[a], x0[b], x1[b]], 0.5 * margin)
                        })
                        .collect()
                };
                let (ba, bb) = (boxes(&start, &end), boxes(&other, &other));
                let mut pairs = Vec::new();
                candidate_edge_pairs(&a, &b, &mut pairs);
                let mut expected = Vec::new();
                let mut within = Vec::new();
                for i in 0..n {
                    for j in 0..n {
                        if overlap(&ba[i], &bb[j]) {
                            expected.push((i as u32, j as u32));
                        }
                        if i < j && overlap(&ba[i], &ba[j]) {
                            within.push((i as u32, j as u32));
                        }
                    }
                }
                assert_eq!(pairs, expected, "scene {scene}, step {step}");
                candidate_edge_pairs(&a, &a, &mut pairs);
                assert_eq!(pairs, within, "scene {scene}, step {step} (self)");
                // Deform the other body: the next pass refits its tree.
                other.iter_mut().for_each(|p| *p += point(&mut rng, 0.3));
            }
        }
    }
}
