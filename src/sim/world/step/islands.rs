//! Phase 3 of a substep, forming islands: union-find over the bodies linked by soft contacts
//! (and by a coupled rigid body they touch), islands numbered by their first body, each
//! island's unknowns laid out member after member ([`Layout`]) and its contacts handed to
//! [`Island::begin`].

use crate::sim::contact::ObstacleCollider;
use crate::sim::world::body::SoftBody;
use crate::sim::world::coupling::NOT_COUPLED;
use crate::sim::world::island::{Island, Layout, NO_ISLAND};
use crate::sim::world::settings::WorldSettings;

use super::state::StepState;

fn find(parent: &mut [u32], mut i: u32) -> u32 {
    while parent[i as usize] != i {
        parent[i as usize] = parent[parent[i as usize] as usize];
        i = parent[i as usize];
    }
    i
}

/// Phase 3: union-find over bodies linked by soft contacts; islands numbered by first body.
pub(super) fn form_islands(
    bodies: &[SoftBody],
    obstacles: &[ObstacleCollider],
    settings: &WorldSettings,
    h: f64,
    st: &mut StepState,
) {
    let n = bodies.len();
    st.parent.clear();
    st.parent.extend(0..n as u32);
    // Bodies touching one coupled rigid body share its unknowns: one island.
    st.coupled_first.clear();
    st.coupled_first.resize(st.coupling.len(), NO_ISLAND);
    st.coupled_links.clear();
    if st.coupling.any() {
        for (i, b) in bodies.iter().enumerate() {
            if b.is_static() {
                continue;
            }
            for c in &b.ws.contacts {
                let entry = st.coupling.entry_of(c.obstacle);
                if entry == NOT_COUPLED {
                    continue;
                }
                match st.coupled_first[entry as usize] {
                    NO_ISLAND => st.coupled_first[entry as usize] = i as u32,
                    first => st.coupled_links.push((first, i as u32)),
                }
            }
        }
    }
    let links = st
        .soft_contacts
        .iter()
        .map(|c| (c.vertex_body, c.triangle_body));
    let edge_links = st.edge_contacts.iter().map(|c| (c.body_a, c.body_b));
    for (a, b) in links
        .chain(edge_links)
        .chain(st.coupled_links.iter().copied())
    {
        if !bodies[a as usize].is_static() && !bodies[b as usize].is_static() {
            let (ra, rb) = (find(&mut st.parent, a), find(&mut st.parent, b));
            if ra != rb {
                st.parent[ra.max(rb) as usize] = ra.min(rb);
            }
        }
    }
    st.island_of.clear();
    st.island_of.resize(n, NO_ISLAND);
    st.offset_of.clear();
    st.offset_of.resize(n, 0);
    st.island_size.clear();
    let mut count = 0usize;
    for i in 0..n {
        if bodies[i].is_static() {
            continue;
        }
        let root = find(&mut st.parent, i as u32) as usize;
        // The root is the smallest index of its set, so it is numbered before its members.
        let id = if root == i {
            if st.islands.len() <= count {
                st.islands.push(Island::default());
            }
            st.islands[count].members.clear();
            st.island_size.push(0);
            count += 1;
            (count - 1) as u32
        } else {
            st.island_of[root]
        };
        st.island_of[i] = id;
        let island = &mut st.islands[id as usize];
        st.offset_of[i] = island.members.last().map_or(0, |&m| {
            st.offset_of[m as usize] + bodies[m as usize].free_count() as u32
        });
        island.members.push(i as u32);
        st.island_size[id as usize] += 1;
    }
    st.island_count = count;
    st.failures.clear();
    st.failures.resize(count, None);
    for id in 0..count {
        let island_of = &st.island_of;
        let owned = |a: u32, b: u32| {
            let owner = match island_of[a as usize] {
                NO_ISLAND => island_of[b as usize],
                i => i,
            };
            owner == id as u32
        };
        let soft = st
            .soft_contacts
            .iter()
            .copied()
            .filter(|c| owned(c.vertex_body, c.triangle_body));
        let edges = st
            .edge_contacts
            .iter()
            .copied()
            .filter(|c| owned(c.body_a, c.body_b));
        st.islands[id].begin(
            bodies,
            obstacles,
            soft,
            edges,
            &st.contact_memory,
            Layout {
                island_of: &st.island_of,
                offset_of: &st.offset_of,
            },
            id as u32,
            settings,
            &st.coupling,
            h,
        );
    }
}
