//! Re-detection after a PD iteration: contacts at the iterate's positions that no contact of
//! the island covers yet (a proxy pushed into a second obstacle, a vertex pushed through a
//! neighbour's surface), added for the next iteration.
//!
//! Obstacle contacts are found swept, from the step's start to the iterate, as the predict
//! phase finds them from the start to the prediction: the plane comes from where the proxy was
//! when the step began. Found at the iterate alone, a proxy that an iteration carried through
//! a whole thin wall got the back face's plane, which pushed it on (a rubber cube thrown at a
//! 2 mm wall at 30 and 60 m/s: 4 vertices 10-33 mm past it; swept, none, `tests/sim_rest.rs`).
//!
//! The members are searched in parallel, each as the vertex side of its contacts: its proxies
//! against the obstacles, then its surface vertices against every member's triangles. Each
//! member's findings go to its own buffers, which are appended in member order afterwards
//! (every member's obstacle contacts, then every member's soft ones), so the island's contact
//! list is the same for any number of threads. In a sim-only replica of the `pile` example
//! (one island of 20 bodies) the search is mostly BVH traversal; done serially it was 4.4 ms of
//! a 28 ms step, during which the second core had nothing to do, and 2.3 ms in parallel.

use std::time::Instant;

use rayon::prelude::*;

use super::contact::IslandContact;
use super::{Island, VIOLATION_TOLERANCE};
use crate::sim::contact::{
    Contact, ObstacleCollider, SoftContact, SoftSurface, detect_contacts_swept,
    detect_soft_contacts,
};
use crate::sim::math::Vec3;
use crate::sim::world::body::SoftBody;
use crate::sim::world::settings::WorldSettings;

/// One member's share of a re-detection: its scratch buffers and what it found.
#[derive(Debug, Default, Clone)]
pub(super) struct MemberSearch {
    positions: Vec<Vec3>,
    ends: Vec<Vec3>,
    found: Vec<Contact>,
    found_soft: Vec<SoftContact>,
    pairs: Vec<(u32, u32)>,
    /// New obstacle contacts of the member's proxies, in detection order.
    new_obstacle: Vec<IslandContact>,
    /// New soft contacts of the member's surface vertices, in detection order.
    new_soft: Vec<IslandContact>,
    /// Known obstacle contacts violated beyond what depenetration allows.
    violated: usize,
}

/// What the members know before a re-detection: the keys of the island's contacts, sorted.
struct Known<'a> {
    /// `(body, proxy, obstacle)` of the obstacle contacts.
    obstacle: &'a [(u32, u32, u32)],
    /// `(vertex_body, vertex, triangle_body)` of the soft contacts.
    soft: &'a [(u32, u32, u32)],
}

/// The scratch and findings of one island's re-detection ([`Island::redetect`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct Redetection {
    /// Per member, the scratch and findings of [`Island::redetect`].
    pub(super) searches: Vec<MemberSearch>,
    /// The keys of the contacts known before a re-detection, sorted (see
    /// [`Island::redetect`]): `(body, proxy, obstacle)` of obstacle contacts.
    pub(super) known_obstacle: Vec<(u32, u32, u32)>,
    /// The sorted `(vertex_body, vertex, triangle_body)` keys of the known soft contacts.
    pub(super) known_soft: Vec<(u32, u32, u32)>,
}

impl Island {
    /// After an iteration: contacts at the new positions that no contact of the island covers
    /// yet. Returns how many were added, plus how many known obstacle contacts are violated by
    /// more than [`VIOLATION_TOLERANCE`] beyond what depenetration allows (a proxy whose vertex
    /// a soft row took in the last iteration): either asks for another iteration. The members'
    /// BVHs must be fitted to their positions.
    pub fn redetect(
        &mut self,
        bodies: &[SoftBody],
        obstacles: &[ObstacleCollider],
        settings: &WorldSettings,
        h: f64,
    ) -> usize {
        let t = Instant::now();
        let before = self.contacts.len();
        // What is known already, by key: a binary search per contact found, where a scan of
        // the island's contacts per contact found grew with the square of their number (about
        // 600 in the `pile` example's island: 1 % of its profile).
        self.redetection.known_obstacle.clear();
        self.redetection.known_soft.clear();
        for k in &self.contacts {
            match k {
                IslandContact::Obstacle { body, contact } => {
                    self.redetection
                        .known_obstacle
                        .push((*body, contact.proxy, contact.obstacle));
                }
                IslandContact::Soft(s) => {
                    self.redetection
                        .known_soft
                        .push((s.vertex_body, s.vertex, s.triangle_body));
                }
                IslandContact::Edge(_) => {}
            }
        }
        self.redetection.known_obstacle.sort_unstable();
        self.redetection.known_soft.sort_unstable();
        let known = Known {
            obstacle: &self.redetection.known_obstacle,
            soft: &self.redetection.known_soft,
        };
        let members = &self.members;
        if self.redetection.searches.len() < members.len() {
            self.redetection
                .searches
                .resize_with(members.len(), MemberSearch::default);
        }
        let push_out = settings.max_depenetration_speed * h;
        self.redetection.searches[..members.len()]
            .par_iter_mut()
            .zip(members.par_iter())
            .for_each(|(search, &b)| {
                search.obstacle_contacts(b, bodies, obstacles, &known, push_out);
                search.new_soft.clear();
                if settings.soft_contacts {
                    for &other in members {
                        if other != b || settings.self_collision {
                            search.soft_contacts(b, other, bodies, settings, &known);
                        }
                    }
                }
            });
        let mut violated = 0;
        for search in &self.redetection.searches[..members.len()] {
            self.contacts.extend_from_slice(&search.new_obstacle);
            violated += search.violated;
        }
        for search in &self.redetection.searches[..members.len()] {
            self.contacts.extend_from_slice(&search.new_soft);
        }
        self.setup_contacts(before, bodies, obstacles, settings);
        self.stats.detect_time += t.elapsed();
        self.contacts.len() - before + violated
    }
}

impl MemberSearch {
    /// Body `b`'s proxies against the obstacles, swept from the step's start to its current
    /// positions: new contacts into `new_obstacle`, known ones deeper than allowed counted in
    /// `violated`.
    fn obstacle_contacts(
        &mut self,
        b: u32,
        bodies: &[SoftBody],
        obstacles: &[ObstacleCollider],
        known: &Known<'_>,
        push_out: f64,
    ) {
        self.new_obstacle.clear();
        self.violated = 0;
        let body = &bodies[b as usize];
        self.found.clear();
        detect_contacts_swept(
            &body.colliders,
            body.start_positions(),
            &body.x,
            obstacles,
            0.0,
            &body.collider_slack,
            &mut self.positions,
            &mut self.ends,
            &mut self.found,
        );
        for c in &self.found {
            let is_known = known
                .obstacle
                .binary_search(&(b, c.proxy, c.obstacle))
                .is_ok();
            // A contact that started the step deeper than `push_out` is allowed to stay in by
            // the rest (see `Island::build_rows`).
            let start_depth = || {
                let p0 = body.colliders[c.proxy as usize].position(body.start_positions());
                c.normal.dot(&(c.point - p0))
            };
            if c.depth > 1e-9 && !is_known {
                self.new_obstacle.push(IslandContact::Obstacle {
                    body: b,
                    contact: *c,
                });
            } else if is_known
                && c.depth > VIOLATION_TOLERANCE
                && c.depth > VIOLATION_TOLERANCE + start_depth() - push_out
            {
                self.violated += 1;
            }
        }
    }

    /// Body `a`'s surface vertices through body `b`'s triangles at their current positions:
    /// new contacts appended to `new_soft`.
    fn soft_contacts(
        &mut self,
        a: u32,
        b: u32,
        bodies: &[SoftBody],
        settings: &WorldSettings,
        known: &Known<'_>,
    ) {
        let (ba, bb) = (&bodies[a as usize], &bodies[b as usize]);
        self.found_soft.clear();
        detect_soft_contacts(
            &surface_at(a, ba),
            &surface_at(b, bb),
            0.0,
            settings.soft_depth_limit,
            &mut self.pairs,
            &mut self.found_soft,
        );
        for c in &self.found_soft {
            let is_known = known
                .soft
                .binary_search(&(c.vertex_body, c.vertex, c.triangle_body))
                .is_ok();
            if c.depth > 1e-9 && !is_known {
                self.new_soft.push(IslandContact::Soft(*c));
            }
        }
    }
}

/// A body's surface at its current positions (the step's start as the self-collision
/// reference; a drawn body's drawn points at the positions its BVH was fitted to); its BVH
/// must be fitted to them.
fn surface_at(index: u32, body: &SoftBody) -> SoftSurface<'_> {
    let (now, reference) = match &body.drawn {
        None => (&body.x, &body.ws.x_start),
        Some(_) => (&body.ws.drawn_now, &body.ws.drawn_start),
    };
    SoftSurface {
        body: index,
        shape: body.contact_shape(),
        x_start: now,
        x_end: now,
        x_reference: reference,
        bvh: &body.ws.bvh,
    }
}
