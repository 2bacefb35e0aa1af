//! [`IslandContact`]: a contact an island's QP constrains (against an obstacle, vertex-triangle,
//! edge-edge), its vertex terms, identity across steps and coefficients. A leaf of the island:
//! every stage reads contacts, none is imported here.

use crate::sim::contact::{Contact, DrawnMesh, EdgeContact, ObstacleCollider, SoftContact};
use crate::sim::math::Vec3;
use crate::sim::world::body::SoftBody;

/// A contact an island's QP constrains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum IslandContact {
    /// A proxy of body `body` (world index) against an obstacle.
    Obstacle {
        /// The body.
        body: u32,
        /// The contact (proxy index, obstacle index, plane).
        contact: Contact,
    },
    /// A surface vertex against a triangle (world body indices inside).
    Soft(SoftContact),
    /// A boundary edge against a boundary edge (world body indices inside).
    Edge(EdgeContact),
}

/// The gap (m) an edge-edge row keeps, as a share of the vertex-triangle skin: smaller, so
/// that where faces rest on faces (every edge pair within the skin) the vertex rows come first
/// in the decoupler's deepest-first order and the edge rows only bind where edges cross.
pub(crate) const EDGE_SKIN_SHARE: f64 = 0.5;

/// Identity of a contact across steps: `[0, body, collider, obstacle]` for an obstacle contact,
/// `[1, vertex body, vertex, triangle body]` for a vertex-triangle contact (which keeps one
/// contact per vertex and pair of bodies, whatever triangle it slides to).
pub(crate) type ContactKey = [u32; 4];

/// Most vertex terms of a contact: a drawn point's four against a drawn triangle's three
/// corners of four each.
pub(crate) const MAX_CONTACT_TERMS: usize = 16;

/// `(body, vertex, weight)` terms of a contact: `sum weight * x` is the relative position it
/// constrains (positive on the side the normal points to).
pub(crate) type Terms = ([(u32, u32, f64); MAX_CONTACT_TERMS], usize);

impl IslandContact {
    /// The contact's vertex terms (weights below 1e-12 left out; terms of one vertex merged).
    pub fn terms(&self, bodies: &[SoftBody]) -> Terms {
        let mut out = ([(0, 0, 0.0); MAX_CONTACT_TERMS], 0);
        let mut push = |b: u32, v: u32, w: f64| {
            if w.abs() >= 1e-12 {
                // A drawn triangle's corners may share tet vertices with each other.
                match out.0[..out.1]
                    .iter_mut()
                    .find(|(tb, tv, _)| *tb == b && *tv == v)
                {
                    Some(term) => term.2 += w,
                    None => {
                        out.0[out.1] = (b, v, w);
                        out.1 += 1;
                    }
                }
            }
        };
        match self {
            IslandContact::Obstacle { body, contact } => {
                let proxy = &bodies[*body as usize].colliders[contact.proxy as usize];
                for k in 0..4 {
                    push(*body, proxy.vertices[k], proxy.weights[k]);
                }
            }
            IslandContact::Soft(c) => {
                let (a, t) = (
                    &bodies[c.vertex_body as usize],
                    &bodies[c.triangle_body as usize],
                );
                let (point, count) = a.surface_point_terms(c.vertex);
                for &(v, w) in &point[..count] {
                    push(c.vertex_body, v, w);
                }
                for k in 0..3 {
                    let (corner, count) = t.surface_point_terms(c.triangle_vertices[k]);
                    for &(v, w) in &corner[..count] {
                        push(c.triangle_body, v, -c.weights[k] * w);
                    }
                }
            }
            IslandContact::Edge(c) => {
                // Each end a surface point: a vertex, or a drawn point's tet vertices.
                for (b, p, weight) in c.terms() {
                    let (end, count) = bodies[b as usize].surface_point_terms(p);
                    for &(v, w) in &end[..count] {
                        push(b, v, weight * w);
                    }
                }
            }
        }
        out
    }

    /// The vertices of body `body` the contact touches (with `colliders` that body's
    /// collision points and `drawn` its drawn mesh; a proxy's vertices of weight below 1e-12
    /// left out), in no order, possibly repeated.
    pub fn vertices_of(
        &self,
        body: u32,
        colliders: &[crate::sim::embed::EmbeddedPoint],
        drawn: Option<&DrawnMesh>,
    ) -> impl Iterator<Item = u32> {
        // Up to sixteen vertices: a proxy's, or the two sides' of a soft or edge contact, of
        // which one, both (a self-contact) or neither may be on `body`; a drawn surface point
        // stands for its tet's four.
        let mut out = ([0u32; MAX_CONTACT_TERMS], 0);
        let push = |out: &mut ([u32; MAX_CONTACT_TERMS], usize), v: u32| {
            out.0[out.1] = v;
            out.1 += 1;
        };
        let push_point = |out: &mut ([u32; MAX_CONTACT_TERMS], usize), p: u32| match drawn {
            Some(d) => {
                let e = &d.points()[p as usize];
                for (&v, &w) in e.vertices.iter().zip(&e.weights) {
                    if w != 0.0 {
                        push(out, v);
                    }
                }
            }
            None => push(out, p),
        };
        match self {
            IslandContact::Obstacle { body: b, contact } if *b == body => {
                let proxy = &colliders[contact.proxy as usize];
                for (&v, &w) in proxy.vertices.iter().zip(&proxy.weights) {
                    if w.abs() >= 1e-12 {
                        push(&mut out, v);
                    }
                }
            }
            IslandContact::Obstacle { .. } => {}
            IslandContact::Soft(c) => {
                if c.vertex_body == body {
                    push_point(&mut out, c.vertex);
                }
                if c.triangle_body == body {
                    for &v in &c.triangle_vertices {
                        push_point(&mut out, v);
                    }
                }
            }
            IslandContact::Edge(c) => {
                if c.body_a == body {
                    c.edge_a.iter().for_each(|&p| push_point(&mut out, p));
                }
                if c.body_b == body {
                    c.edge_b.iter().for_each(|&p| push_point(&mut out, p));
                }
            }
        }
        let (list, count) = out;
        list.into_iter().take(count)
    }

    /// The contact's identity across steps, or `None` for an edge-edge contact (frictionless,
    /// so it has no friction to carry).
    pub fn key(&self) -> Option<ContactKey> {
        match self {
            IslandContact::Obstacle { body, contact } => {
                Some([0, *body, contact.proxy, contact.obstacle])
            }
            IslandContact::Soft(c) => Some([1, c.vertex_body, c.vertex, c.triangle_body]),
            IslandContact::Edge(_) => None,
        }
    }

    /// The two bodies of a soft contact (the positive side's first), or `None` for an obstacle
    /// contact.
    pub fn soft_bodies(&self) -> Option<(u32, u32)> {
        match self {
            IslandContact::Obstacle { .. } => None,
            IslandContact::Soft(c) => Some((c.vertex_body, c.triangle_body)),
            IslandContact::Edge(c) => Some((c.body_a, c.body_b)),
        }
    }

    /// The contact normal (unit).
    pub fn normal(&self) -> Vec3 {
        match self {
            IslandContact::Obstacle { contact, .. } => contact.normal,
            IslandContact::Soft(c) => c.normal,
            IslandContact::Edge(c) => c.normal,
        }
    }

    /// Friction and restitution of the contact (combined).
    pub(super) fn coefficients(
        &self,
        bodies: &[SoftBody],
        obstacles: &[ObstacleCollider],
    ) -> (f64, f64) {
        match self {
            IslandContact::Obstacle { body, contact } => bodies[*body as usize]
                .material
                .surface()
                .combine(obstacles[contact.obstacle as usize].surface()),
            IslandContact::Soft(c) => bodies[c.vertex_body as usize]
                .material
                .surface()
                .combine(&bodies[c.triangle_body as usize].material.surface()),
            // Edge rows are frictionless: they meet where two creases cross, between vertices
            // whose own contacts carry the friction (with friction on edge rows too, a stack of
            // cubes drifted sideways by centimetres).
            IslandContact::Edge(c) => {
                let (_, e) = bodies[c.body_a as usize]
                    .material
                    .surface()
                    .combine(&bodies[c.body_b as usize].material.surface());
                (0.0, e)
            }
        }
    }
}

/// The signed gap `n' (p - sum_k w_k q_k)` (m) of soft contact `c` at vertex positions `xa`
/// of its vertex's body `a` and `xt` of its triangle's body `t` (either's surface points drawn
/// or vertices, [`SoftBody::surface_point`]).
pub(crate) fn soft_gap(
    c: &SoftContact,
    a: &SoftBody,
    xa: &[Vec3],
    t: &SoftBody,
    xt: &[Vec3],
) -> f64 {
    let q: Vec3 = (0..3)
        .map(|k| c.weights[k] * t.surface_point(c.triangle_vertices[k], xt))
        .sum();
    c.normal.dot(&(a.surface_point(c.vertex, xa) - q))
}

/// The closest point (m) of an edge contact's edge `edge` at parameter `s` on body `body` at
/// vertex positions `x` (its ends drawn points or vertices, [`SoftBody::surface_point`]).
pub(crate) fn edge_point(edge: [u32; 2], s: f64, body: &SoftBody, x: &[Vec3]) -> Vec3 {
    (1.0 - s) * body.surface_point(edge[0], x) + s * body.surface_point(edge[1], x)
}

/// The signed gap `n' (p - q)` (m) of edge contact `c` at vertex positions `xa` of its first
/// edge's body `a` and `xb` of its second edge's body `b`.
pub(crate) fn edge_gap(
    c: &EdgeContact,
    a: &SoftBody,
    xa: &[Vec3],
    b: &SoftBody,
    xb: &[Vec3],
) -> f64 {
    c.normal
        .dot(&(edge_point(c.edge_a, c.s, a, xa) - edge_point(c.edge_b, c.t, b, xb)))
}
