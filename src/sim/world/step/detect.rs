//! Phase 2 of a substep, soft contact detection: every pair of bodies whose BVHs overlap (and
//! each body with itself when self-collision is on), vertex-triangle both ways with deep
//! overlaps ([`crate::sim::contact::soft`], [`crate::sim::contact::overlap`]) and edge-edge
//! once per unordered pair ([`crate::sim::contact::edge_edge`]), the edge trees fitted first
//! for the bodies whose surfaces come near another's. The pairs of each first body are found
//! in parallel, their lists joined in body order.

use std::time::Instant;

use rayon::prelude::*;

use crate::sim::contact::{
    EdgeContact, OverlapScratch, SoftContact, SoftSurface, detect_deep_overlap,
    detect_edge_contacts, detect_soft_contacts, fit_edge_bvh,
};
use crate::sim::world::body::SoftBody;
use crate::sim::world::settings::WorldSettings;

/// What [`detect_soft`] finds for the pairs of one first body, with its scratch.
#[derive(Debug, Default, Clone)]
pub(super) struct PairDetection {
    pub(super) soft: Vec<SoftContact>,
    pub(super) edges: Vec<EdgeContact>,
    pub(super) pairs: Vec<(u32, u32)>,
    pub(super) overlap: OverlapScratch,
}

/// The surface of body `i` over this step's motion (a frozen body does not move): its surface
/// points' positions where the motion starts and ends (a drawn body's drawn points, fitted
/// by the predict phase).
fn swept_surface(i: usize, body: &SoftBody) -> SoftSurface<'_> {
    let frozen = body.frozen.is_some();
    let (start, end) = match (&body.drawn, frozen) {
        (None, true) => (&body.x, &body.x),
        (None, false) => (&body.ws.x_start, &body.ws.y),
        (Some(_), true) => (&body.ws.drawn_start, &body.ws.drawn_start),
        (Some(_), false) => (&body.ws.drawn_start, &body.ws.drawn_end),
    };
    SoftSurface {
        body: i as u32,
        shape: body.contact_shape(),
        x_start: start,
        x_end: end,
        x_reference: start,
        bvh: &body.ws.bvh,
    }
}

/// Whether detection skips the pair of bodies `a` and `b` (the same for self-collision): both
/// static, either asleep (nothing awake reaches a sleeping body: the wake pass saw to it),
/// self-collision off, or one collision group.
fn skipped(bodies: &[SoftBody], a: usize, b: usize, settings: &WorldSettings) -> bool {
    let (ba, bb) = (&bodies[a], &bodies[b]);
    let same_group =
        a != b && ba.collision_group.is_some() && ba.collision_group == bb.collision_group;
    (ba.is_static() && bb.is_static())
        || ba.asleep
        || bb.asleep
        || (a == b && !settings.self_collision)
        || same_group
}

/// Fits the edge trees of the bodies whose edges detection examines this substep: those of a
/// pair that detection does not skip whose surfaces come within the margin
/// ([`crate::sim::contact::BodyBvh::edges_may_meet`]), over the same motion as their other
/// trees. A body alone (a detailed drawn mesh of 15,000 edges resting on the floor) pays
/// nothing for them. `fitted` receives, per body, whether its tree was fitted; detection pairs
/// edges only between fitted trees, which is every pair whose edges may meet.
pub(super) fn fit_edge_trees(
    bodies: &mut [SoftBody],
    settings: &WorldSettings,
    fitted: &mut Vec<bool>,
) {
    fitted.clear();
    fitted.resize(bodies.len(), false);
    if !settings.edge_contacts {
        return;
    }
    let margin = settings.contact_margin;
    for a in 0..bodies.len() {
        for b in a..bodies.len() {
            if !skipped(bodies, a, b, settings)
                && bodies[a].ws.bvh.edges_may_meet(&bodies[b].ws.bvh, margin)
            {
                fitted[a] = true;
                fitted[b] = true;
            }
        }
    }
    bodies
        .par_iter_mut()
        .enumerate()
        .zip(fitted.par_iter())
        .filter(|(_, fit)| **fit)
        .for_each(|((i, body), _)| {
            let t = Instant::now();
            // The tree is taken out while the body lends its motion (`swept_surface`).
            let mut bvh = std::mem::take(&mut body.ws.bvh);
            let swept = swept_surface(i, body);
            fit_edge_bvh(&mut bvh, swept.shape, swept.x_start, swept.x_end, margin);
            body.ws.bvh = bvh;
            body.last_step.0.timings.detect += t.elapsed();
        });
}

/// Phase 2: soft contacts between every pair of bodies (and within each, for self-collision):
/// vertex-triangle both ways (deep overlaps included: `contact::overlap`), and edge-edge once
/// per unordered pair whose edge trees were fitted (`edges_fitted`, [`fit_edge_trees`]).
pub(super) fn detect_soft(
    bodies: &[SoftBody],
    settings: &WorldSettings,
    edges_fitted: &[bool],
    detection: &mut Vec<PairDetection>,
    soft_contacts: &mut Vec<SoftContact>,
    edge_contacts: &mut Vec<EdgeContact>,
) {
    // Pairs grouped by their first body, in parallel; each group's contacts then appended in
    // body order, so the lists (and all that follows from their order) are those of one
    // thread.
    detection.resize_with(bodies.len(), PairDetection::default);
    detection
        .par_iter_mut()
        .enumerate()
        .for_each(|(a, found)| detect_pairs_of(bodies, a, settings, edges_fitted, found));
    soft_contacts.clear();
    edge_contacts.clear();
    for found in &detection[..bodies.len()] {
        soft_contacts.extend_from_slice(&found.soft);
        edge_contacts.extend_from_slice(&found.edges);
    }
}

/// Soft contacts of body `a`'s vertices (and edges) against every body `b` (itself with
/// self-collision on) into `found`.
fn detect_pairs_of(
    bodies: &[SoftBody],
    a: usize,
    settings: &WorldSettings,
    edges_fitted: &[bool],
    found: &mut PairDetection,
) {
    found.soft.clear();
    found.edges.clear();
    let ba = &bodies[a];
    for (b, bb) in bodies.iter().enumerate() {
        if skipped(bodies, a, b, settings) {
            continue;
        }
        let first = found.soft.len();
        detect_soft_contacts(
            &swept_surface(a, ba),
            &swept_surface(b, bb),
            settings.contact_margin,
            settings.soft_depth_limit,
            &mut found.pairs,
            &mut found.soft,
        );
        detect_deep_overlap(
            &swept_surface(a, ba),
            &swept_surface(b, bb),
            first,
            &mut found.overlap,
            &mut found.soft,
        );
        if settings.edge_contacts && a <= b && edges_fitted[a] && edges_fitted[b] {
            detect_edge_contacts(
                &swept_surface(a, ba),
                &swept_surface(b, bb),
                settings.contact_margin,
                a == b,
                &mut found.pairs,
                &mut found.edges,
            );
        }
    }
}
