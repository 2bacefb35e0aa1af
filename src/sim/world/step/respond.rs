//! Phase 5 of a substep, after the position solve, on velocities only: restitution
//! ([`restitute`]: each island's rebound force from its restitution stage,
//! `island/restitution.rs`, through each body's prefactored matrix), then the velocity-level
//! contact LCP of every touching contact ([`respond`]), and the energy audit around both
//! ([`audit_velocity_phase`]). See the parent module's docs.

use super::super::body::SoftBody;
use super::super::island::{EDGE_SKIN_SHARE, IslandContact, Layout, NO_ISLAND, edge_point};
use super::super::settings::WorldSettings;
use super::state::StepState;
use crate::sim::contact::{LcpContact, LcpStats, ObstacleCollider};
use crate::sim::math::Vec3;
use crate::sim::pd::PINNED;
use crate::sim::world::audit::{gravitational, kinetic};
use crate::sim::world::coupling::NOT_COUPLED;
use crate::sim::world::report::ContactPoint;
use rayon::prelude::*;

/// A contact touches at the end of the step (and enters the velocity LCP) if its gap is below
/// this (m) or its QP force is positive.
const TOUCHING_GAP: f64 = 1e-5;

/// Restitution (part of phase 5): each island's rebound force
/// ([`Island::restitution_force`]) through each body's prefactored matrix, scaled so that the
/// bouncing contacts leave at `e` times their approach speed.
pub(super) fn restitute(
    bodies: &mut [SoftBody],
    obstacles: &[ObstacleCollider],
    h: f64,
    st: &mut StepState,
) {
    let count = st.island_count;
    let StepState {
        islands,
        island_of,
        offset_of,
        deficits,
        ..
    } = st;
    let layout = Layout {
        island_of,
        offset_of,
    };
    deficits.clear();
    {
        let shared = &*bodies;
        deficits.extend(
            islands[..count]
                .iter_mut()
                .enumerate()
                .map(|(id, island)| island.restitution_force(id as u32, shared, obstacles, layout)),
        );
    }
    if deficits.iter().all(Option::is_none) {
        return;
    }
    let islands = &islands[..count];
    let bouncing =
        |i: usize| island_of[i] != NO_ISLAND && deficits[island_of[i] as usize].is_some();
    // Each bouncing body's response A^-1 F / h, in its scratch.
    bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
        if !bouncing(i) {
            return;
        }
        let (id, o) = (island_of[i] as usize, offset_of[i] as usize);
        let SoftBody { pd, ws, .. } = b;
        let Some(pd) = pd.as_mut() else { return };
        let n = pd.free_vertices().len();
        ws.x_free[..n].copy_from_slice(&islands[id].force[o..o + n]);
        pd.solve_in_place(&mut ws.x_free[..n]);
        ws.x_free[..n].iter_mut().for_each(|d| *d /= h);
    });
    // The scale of each island's response, in place of its deficit.
    {
        let shared = &*bodies;
        for (id, island) in islands.iter().enumerate() {
            if let Some(deficit) = deficits[id] {
                deficits[id] = Some(island.restitution_scale(shared, layout, deficit));
            }
        }
    }
    bodies.par_iter_mut().enumerate().for_each(|(i, b)| {
        let Some(scale) = (island_of[i] != NO_ISLAND)
            .then(|| deficits[island_of[i] as usize])
            .flatten()
        else {
            return;
        };
        let SoftBody { pd, v, ws, .. } = b;
        let Some(pd) = pd.as_ref() else { return };
        for (d, &vi) in pd.free_vertices().iter().enumerate() {
            v[vi as usize] += scale * ws.x_free[d];
        }
    });
}

/// Phase 5: the velocity-level contact LCP of every touching contact, solved region by region;
/// its impulses change the velocities.
pub(super) fn respond(
    bodies: &mut [SoftBody],
    obstacles: &[ObstacleCollider],
    settings: &WorldSettings,
    h: f64,
    st: &mut StepState,
) -> LcpStats {
    st.vertex_offsets.clear();
    st.inv_mass.clear();
    for b in bodies.iter() {
        st.vertex_offsets.push(st.inv_mass.len() as u32);
        match (b.pd.as_ref(), b.is_static()) {
            (Some(pd), false) => {
                let dof = pd.dof_map();
                st.inv_mass
                    .extend(pd.masses().iter().zip(dof).map(|(&m, &d)| {
                        if d == PINNED || !(m > 0.0) {
                            0.0
                        } else {
                            1.0 / m
                        }
                    }));
            }
            _ => st.inv_mass.extend(std::iter::repeat_n(0.0, b.x.len())),
        }
    }
    st.vertex_offsets.push(st.inv_mass.len() as u32);
    // A coupled rigid body's translation is one more "vertex" of the LCP, of its mass, in
    // every contact with it (weight -1): the LCP then shares its impulses between the soft
    // side and the body by their masses, momentum conserved, where the body as an immovable
    // obstacle would take the whole impulse needed to stop the soft side (a 0.2 kg box
    // mirrored that way took metres per second from one landing step). Deviation: its
    // rotation is not in the LCP (the inverse masses must be isotropic per vertex), and the
    // impulses' torque is not applied to it afterwards either: applied explicitly, it spun a
    // 3 g box landing on a rubber cube up to 11 rad/s within half a second (without it, the
    // box rests). The LCP's angular impulse on the body is lost; the position-level coupled
    // step carries the contact torques.
    let rigid_base = st.inv_mass.len() as u32;
    for k in 0..st.coupling.len() {
        st.inv_mass.push(st.coupling.state(k as u32).inverse_mass);
    }
    st.lcp.clear();
    st.points.clear();
    let skin = settings.soft_contact_skin;
    for island in &st.islands[..st.island_count] {
        for (i, contact) in island.contacts.iter().enumerate() {
            let lambda = island.lambda[i];
            let friction = island.friction[i];
            let (terms, count) = contact.terms(bodies);
            let (mut gap, mut relative) = (0.0, Vec3::zeros());
            let mut c = LcpContact::new(contact.normal());
            for &(b, v, w) in &terms[..count] {
                let body = &bodies[b as usize];
                gap += w * c.normal().dot(&body.x[v as usize]);
                relative += w * body.velocity(v as usize);
                c.add_term(st.vertex_offsets[b as usize] + v, w);
            }
            let (position, touching) = match contact {
                IslandContact::Obstacle { body, contact } => {
                    gap -= contact.normal.dot(&contact.point);
                    relative -= obstacles[contact.obstacle as usize].velocity_at(&contact.point);
                    let entry = st.coupling.entry_of(contact.obstacle);
                    if entry != NOT_COUPLED {
                        c.add_term(rigid_base + entry, -1.0);
                    }
                    let b = &bodies[*body as usize];
                    (
                        b.colliders[contact.proxy as usize].position(&b.x),
                        Some((*body, contact.obstacle)),
                    )
                }
                IslandContact::Soft(s) => {
                    gap -= skin;
                    let a = &bodies[s.vertex_body as usize];
                    (a.surface_point(s.vertex, &a.x), None)
                }
                IslandContact::Edge(e) => {
                    // A pair that crossed anyway by more than the skin (it had no row in the
                    // last iterations) is stale: its frozen normal may now oppose the vertex
                    // contacts of the same crease, and two opposed contacts that both approach
                    // make the LCP infeasible (with such pairs in, a pile of twenty bodies blew
                    // up on landing).
                    if gap < -skin {
                        continue;
                    }
                    gap -= EDGE_SKIN_SHARE * skin;
                    let a = &bodies[e.body_a as usize];
                    (edge_point(e.edge_a, e.s, a, &a.x), None)
                }
            };
            if !(lambda > 0.0 || gap < TOUCHING_GAP) {
                continue;
            }
            c.free_velocity = c.frame * relative;
            c.friction = island.mu[i];
            c.normal_offset = lambda.max(0.0) * h;
            // Without a bounce, the step's total normal impulse, not the LCP's alone, is what
            // must stay non-negative: the LCP may take back the QP's push where it left the
            // contact separating (out of a penetration it started in).
            if island.restitution.coefficient[i] == 0.0 {
                c.retractable = c.normal_offset;
            }
            let applied = c.frame * (friction * h);
            c.tangent_offset = [applied.y, applied.z];
            st.lcp.push(c);
            st.points.push(ContactPoint {
                position,
                normal: c.normal(),
                region: 0,
                impulse: (c.normal() * lambda.max(0.0) + friction) * h,
                soft: touching.is_none(),
            });
            if let Some((b, o)) = touching {
                bodies[b as usize].ws.touching.push(o);
            }
        }
    }
    for b in bodies.iter_mut() {
        b.ws.touching.sort_unstable();
        b.ws.touching.dedup();
    }
    let inv_mass = &st.inv_mass;
    st.lcp
        .partition(inv_mass.len(), settings.separate_regions, |g| {
            inv_mass[g as usize]
        });
    let stats = st.lcp.solve(&settings.lcp, true);
    for (i, p) in st.points.iter_mut().enumerate() {
        p.region = st.lcp.region_of(i) as u32;
        p.impulse += st.lcp.impulse(i);
    }
    let locate = |offsets: &[u32], g: usize| {
        let body = offsets.partition_point(|&o| o as usize <= g) - 1;
        (body, g - offsets[body] as usize)
    };
    for (g, dv) in st.lcp.velocity_changes() {
        if g >= rigid_base as usize {
            st.coupling
                .add_velocity_change((g - rigid_base as usize) as u32, dv);
            continue;
        }
        let (body, v) = locate(&st.vertex_offsets, g);
        bodies[body].v[v] += dv;
    }
    stats
}

/// Where [`audit_velocity_phase`] is called in the step.
#[derive(Clone, Copy)]
pub(super) enum AuditMark {
    /// After the PD iterations, `v = (x - x_start) / h` set.
    Solved,
    /// After restitution.
    Restituted,
    /// After the velocity LCP.
    Responded,
}

/// The energy audit at the end of the solve and around the velocity phases of restitution and
/// the contact LCP (which change kinetic energy only).
pub(super) fn audit_velocity_phase(
    bodies: &mut [SoftBody],
    settings: &WorldSettings,
    mark: AuditMark,
) {
    bodies.par_iter_mut().for_each(|b| {
        let elastic = match mark {
            AuditMark::Solved => b.elastic_energy(&b.x),
            _ => 0.0,
        };
        let SoftBody {
            pd,
            x,
            v,
            frozen,
            last_step,
            ..
        } = b;
        let (Some(pd), None, Some(audit)) = (pd.as_ref(), frozen.as_ref(), &mut last_step.0.energy)
        else {
            return;
        };
        let ke = kinetic(pd.masses(), v);
        match mark {
            AuditMark::Solved => {
                let end = ke + gravitational(pd.masses(), x, &settings.gravity) + elastic;
                audit.solve = end - audit.start;
                audit.restitution = -ke;
            }
            AuditMark::Restituted => {
                audit.restitution += ke;
                audit.lcp = -ke;
            }
            AuditMark::Responded => audit.lcp += ke,
        }
    });
}
