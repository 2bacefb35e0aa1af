//! Sleeping: bodies, and whole contact islands, that have been at rest are skipped by the step.
//!
//! A body whose vertices have stayed, in root mean square, within `speed * delay`
//! ([`super::Sleeping::speed`], [`super::Sleeping::delay`]; 15 mm at the defaults) of where
//! they were when its rest began, none of them more than twice that, for `delay` seconds, in
//! an island (the bodies it touches, [`super::island`]) whose every member has too and which is
//! supported (one of its bodies touches an obstacle, or has pins or attachments), falls asleep
//! with its island: its velocities are set to zero and the step leaves it out entirely — no
//! prediction, detection, local step, solve or response — until something wakes it. A body
//! that leaves those bounds starts its rest over from where it is then. This tests rest by how
//! far a body moves over the delay rather than how fast its vertices move at one step, as Jolt
//! tests a body's path (its test points within a sphere of radius `0.03 m/s * 0.5 s`; its soft
//! bodies also ask every vertex to stay under the speed at every step); Box2D and PhysX put
//! rigid bodies to sleep by speed.
//!
//! Deviation from a speed test (every vertex under `speed` at every step, the first rule
//! here): the vertices of a crowded pile jitter in place, 1-2 mm a step at 64 Hz, while
//! their bodies stay where they are, and the pile of `cargo bench --bench pile` never fell
//! asleep within 15 s (19 of 20 bodies awake, fastest vertex 0.14 m/s, centres drifting 0.5-1
//! cm a second). With every vertex within the radius the whole pile slept 5.1 s after its last
//! body landed (at half the radius, 7.5 mm, it never slept): a contact vertex or two of a body
//! flicking between rows by 15-30 mm, and a body still rocking, kept the island of 19 awake.
//! Asking the root mean square within the radius and each vertex within twice it
//! ([`FLICKER_SHARE`]), the pile sleeps 2.4 s after its last landing; with each vertex within
//! 1.5 radii 3.2 s; with at most 1, 3, 10 or 30 vertices of a body allowed past the radius (up
//! to twice it), 4.9-5.2 s (one run each; when the last of 19 bodies comes to rest is chaotic).
//! A body moving steadily sleeps below `speed`, as before; one accelerating from rest below
//! `2 * speed / delay`. A wobble that stays within the bounds sleeps too: a jelly cube (0.5 m,
//! 6 cells) dropped from 1 m sleeps at 1.89 s, its top 1.5 mm below where it is at 5 s with
//! sleeping off (1.85 s, 0.9 mm with every vertex within the radius).
//!
//! A sleeping body wakes, with zero velocity from the shape it slept in, when
//! - an awake body's bounds over its next step (its positions and its inertial prediction,
//!   padded by the contact margin) overlap the sleeping body's bounds (padded by the margin
//!   when it fell asleep); a woken body can wake its neighbours in turn, so a touched pile
//!   wakes as a whole;
//! - an obstacle moves (a non-zero velocity, or a pose changed since the last step) with its
//!   bounds, before or after, over the sleeping body's; a new obstacle's bounds overlap it; a
//!   half-space that moves, or any removed obstacle or body (what held it up may be gone),
//!   wakes every body;
//! - the game edits it: material, pins (and a pin or attachment target that changes),
//!   attachments, proxies, a grab, `positions_mut`, `velocities_mut`, a reset; or edits the
//!   settings.
//!
//! A body held by a grab spring or touching a moving obstacle never falls asleep, nor does a
//! body drifting slowly through the air (or in zero gravity) with nothing under it: as with
//! settling, its slow motion is its own. The decision
//! uses only per-body quantities, in body order, so it does not depend on the thread count.
//!
//! Not physical, as for settling ([`super::Settling`]): a body that starts from rest and
//! accelerates slower than `2 * speed / delay` (0.12 m/s^2 at the defaults: a block about 0.6
//! degrees past its friction angle at mu 0.5) falls asleep before it has moved the radius and
//! stays where it is; [`super::Sleeping::OFF`] turns sleeping off.

use nalgebra::UnitQuaternion;

use super::body::Bounds;
use super::body::SoftBody;
use super::island::Island;
use super::settings::WorldSettings;
use crate::sim::contact::ObstacleCollider;
use crate::sim::math::Vec3;
use crate::sim::mesh::bounds;

/// How far (as a multiple of the rest radius, `speed * delay`) one vertex may stray from where
/// its body's rest began while the body as a whole (its vertices' root mean square) stays
/// within the radius: a contact vertex flicking between rows does not keep a resting body
/// awake (see the module docs).
const FLICKER_SHARE: f64 = 2.0;

fn overlap(a: &Bounds, b: &Bounds) -> bool {
    (0..3).all(|k| a.0[k] <= b.1[k] && b.0[k] <= a.1[k])
}

fn padded(b: Bounds, pad: f64) -> Bounds {
    (b.0 - Vec3::repeat(pad), b.1 + Vec3::repeat(pad))
}

fn union(a: Bounds, b: Bounds) -> Bounds {
    (a.0.inf(&b.0), a.1.sup(&b.1))
}

/// An obstacle as the last wake pass saw it.
#[derive(Debug, Clone, Copy)]
struct SeenObstacle {
    position: Vec3,
    rotation: UnitQuaternion<f64>,
    bounds: Option<Bounds>,
}

/// What the wake pass keeps between steps (reused buffers: no allocation once warm).
#[derive(Debug, Default)]
pub(crate) struct SleepState {
    /// Per body: bounds over its coming step if it is awake and moves.
    swept: Vec<Option<Bounds>>,
    /// The obstacles at the last wake pass, in order.
    seen: Vec<SeenObstacle>,
}

clone_by_field!(SleepState { swept, seen });

impl SleepState {
    /// Forgets the obstacles seen (their indices changed).
    pub fn forget_obstacles(&mut self) {
        self.seen.clear();
    }
}

/// Wakes every sleeping body (the awake keep their rest clocks).
fn wake_all(bodies: &mut [SoftBody]) {
    bodies
        .iter_mut()
        .filter(|b| b.asleep)
        .for_each(SoftBody::wake);
}

/// Before a substep: wakes the sleeping bodies that something may touch in it (see the module
/// docs), or every body when sleeping is off.
pub(crate) fn wake_touched(
    bodies: &mut [SoftBody],
    obstacles: &[ObstacleCollider],
    settings: &WorldSettings,
    h: f64,
    st: &mut SleepState,
) {
    let margin = settings.contact_margin;
    let any_asleep = bodies.iter().any(|b| b.asleep);
    if any_asleep && !settings.sleeping.enabled() {
        wake_all(bodies);
    }
    // Obstacles that moved since the last pass.
    for (k, o) in obstacles.iter().enumerate() {
        let now = SeenObstacle {
            position: o.position(),
            rotation: o.rotation(),
            bounds: o.bounds(),
        };
        let before = st.seen.get(k).copied();
        let teleported =
            before.is_some_and(|b| b.position != now.position || b.rotation != now.rotation);
        if any_asleep && (o.is_moving() || teleported || before.is_none()) {
            let reach = o.linear_velocity().norm() * h
                + o.angular_velocity().norm()
                    * h
                    * now.bounds.map_or(0.0, |(lo, hi)| (hi - lo).norm());
            let region = match (now.bounds, before.and_then(|b| b.bounds)) {
                (Some(a), Some(b)) if teleported => Some(union(a, b)),
                (Some(_), None) if teleported => None,
                (a, _) => a,
            };
            match region {
                None => wake_all(bodies),
                Some(region) => {
                    let region = padded(region, margin + reach);
                    for b in bodies.iter_mut() {
                        if b.asleep && overlap(&region, &b.sleep_bounds) {
                            b.wake();
                        }
                    }
                }
            }
        }
        if k < st.seen.len() {
            st.seen[k] = now;
        } else {
            st.seen.push(now);
        }
    }
    st.seen.truncate(obstacles.len());
    if !bodies.iter().any(|b| b.asleep) {
        return;
    }
    // Awake bodies: their positions and predictions.
    st.swept.clear();
    st.swept.extend(bodies.iter().map(|b| {
        if b.asleep || b.frozen.is_some() {
            return None;
        }
        let hg = h * h * settings.gravity;
        let now = bounds(&b.x);
        let ahead = b.x.iter().zip(&b.v).fold(now, |(lo, hi), (p, v)| {
            let q = p + h * v + hg;
            (lo.inf(&q), hi.sup(&q))
        });
        Some(padded(ahead, margin))
    }));
    // Wake what they reach, and what the woken reach, until nothing changes.
    loop {
        let mut woke = false;
        for (j, body) in bodies.iter_mut().enumerate() {
            if !body.asleep {
                continue;
            }
            let sleeping = body.sleep_bounds;
            if st.swept.iter().flatten().any(|s| overlap(s, &sleeping)) {
                body.wake();
                st.swept[j] = Some(sleeping);
                woke = true;
            }
        }
        if !woke {
            break;
        }
    }
}

/// After a substep: each awake body's rest clock, then the islands whose every member has been
/// at rest for the delay fall asleep.
pub(crate) fn fall_asleep(
    bodies: &mut [SoftBody],
    islands: &[Island],
    obstacles: &[ObstacleCollider],
    settings: &WorldSettings,
    h: f64,
) {
    let sleeping = settings.sleeping;
    if !sleeping.enabled() {
        return;
    }
    let radius = sleeping.speed * sleeping.delay;
    for b in bodies.iter_mut() {
        if b.asleep || b.frozen.is_some() {
            continue;
        }
        let within = b.still_anchor.len() == b.x.len() && {
            let (sum, most) =
                b.x.iter()
                    .zip(&b.still_anchor)
                    .map(|(x, a)| (x - a).norm_squared())
                    .fold((0.0, 0.0f64), |(sum, most), d| (sum + d, most.max(d)));
            sum <= radius * radius * b.x.len() as f64 && most <= (FLICKER_SHARE * radius).powi(2)
        };
        // A body touching a moving obstacle, or a coupled rigid body (which its engine moves
        // whether or not it moves now), is carried and stays awake.
        let carried = b.ws.touching.iter().any(|&o| {
            obstacles
                .get(o as usize)
                .is_some_and(|o| o.is_moving() || o.coupling().is_some())
        });
        // Within the radius since the rest began, free and not carried: still at rest.
        if within && b.grab.is_none() && !carried {
            b.still_for += h;
        } else {
            b.still_for = 0.0;
            b.still_anchor.clear();
            b.still_anchor.extend_from_slice(&b.x);
        }
    }
    for island in islands {
        let rested = island.members.iter().all(|&m| {
            let b = &bodies[m as usize];
            b.frozen.is_none() && !b.asleep && b.still_for >= sleeping.delay
        });
        let supported = island.members.iter().any(|&m| {
            let b = &bodies[m as usize];
            !b.ws.touching.is_empty()
                || b.pinned.iter().any(|&p| p)
                || b.attach_k.iter().any(|&k| k > 0.0)
        });
        if rested && supported && !island.members.is_empty() {
            for &m in &island.members {
                bodies[m as usize].fall_asleep(settings.contact_margin);
            }
        }
    }
}
