//! Phase 2 of a substep, soft contact detection: every pair of bodies whose BVHs overlap (and
//! each body with itself when self-collision is on), vertex-triangle both ways with deep
//! overlaps ([`crate::sim::contact::soft`], [`crate::sim::contact::overlap`]) and edge-edge
//! once per unordered pair ([`crate::sim::contact::edge_edge`]). The pairs of each first body
//! are found in parallel, their lists joined in body order.

use rayon::prelude::*;

use crate::sim::contact::{
    EdgeContact, OverlapScratch, SoftContact, SoftSurface, detect_deep_overlap,
    detect_edge_contacts, detect_soft_contacts,
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

/// Phase 2: soft contacts between every pair of bodies (and within each, for self-collision):
/// vertex-triangle both ways (deep overlaps included: `contact::overlap`), and edge-edge once
/// per unordered pair.
pub(super) fn detect_soft(
    bodies: &[SoftBody],
    settings: &WorldSettings,
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
        .for_each(|(a, found)| detect_pairs_of(bodies, a, settings, found));
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
    found: &mut PairDetection,
) {
    found.soft.clear();
    found.edges.clear();
    let ba = &bodies[a];
    for (b, bb) in bodies.iter().enumerate() {
        // Nothing awake reaches a sleeping body (the wake pass saw to it).
        let (fa, fb) = (ba.is_static(), bb.is_static());
        let same_group =
            a != b && ba.collision_group.is_some() && ba.collision_group == bb.collision_group;
        if (fa && fb)
            || ba.asleep
            || bb.asleep
            || (a == b && !settings.self_collision)
            || same_group
        {
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
        if settings.edge_contacts && a <= b {
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
