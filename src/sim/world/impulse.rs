//! Impulses on a body between steps: a hit, an explosion's push, or the reaction of something
//! stepped after the world (a cloth lying on the body, `crate::sim::cloth`).
//!
//! An impulse `J` (N s) at an embedded point with weights `w_k` on vertices `k` is the force
//! `w_k J` on each vertex over an instant (the point's position is `sum w_k x_k`, so by virtual
//! work its force spreads with the same weights), so vertex `k`'s velocity changes by
//! `w_k J / m_k` with `m_k` its lumped mass: the body's momentum changes by exactly `J`, and
//! the next implicit step spreads the kick through the body as its elasticity carries it.
//! Pinned vertices take no share (their pins hold them); a frozen body takes none.
//!
//! A sleeping body wakes only for an impulse that changes some vertex's velocity by more than
//! the sleeping speed ([`super::Sleeping::speed`]); a weaker one is dropped, since the body
//! would fall asleep again without having moved by the sleeping radius. This is what keeps a
//! body asleep under a resting cloth, whose weight it already carried when it fell asleep; a
//! game that pushes a sleeping body gently every step should wake it first
//! ([`SoftWorld::wake`]).

use super::SoftWorld;
use super::error::{WorldError, check_embedded, check_finite};
use super::handles::BodyHandle;
use crate::sim::embed::{EmbeddedPoint, embed_points_at};
use crate::sim::math::Vec3;

impl SoftWorld {
    /// Adds `impulse` (N s) at `point` of body `h` (see the module docs): returns whether it
    /// changed the body (`false` for a frozen body, or a sleeping one the impulse is too weak
    /// to wake).
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`]; [`WorldError::VertexOutOfRange`] for a point's vertex;
    /// [`WorldError::InvalidValue`] for non-finite weights or impulse. The body is unchanged
    /// on an error.
    pub fn apply_impulse(
        &mut self,
        h: BodyHandle,
        point: &EmbeddedPoint,
        impulse: Vec3,
    ) -> Result<bool, WorldError> {
        self.apply_impulses(h, std::slice::from_ref(&(*point, impulse)))
    }

    /// Adds every `(point, impulse)` of `impulses` (N s) to body `h` at once, as
    /// [`SoftWorld::apply_impulse`] does one: the sleeping rule looks at their sum on each
    /// vertex. Returns whether they changed the body.
    ///
    /// # Errors
    /// As [`SoftWorld::apply_impulse`], for any of them (then none is applied).
    pub fn apply_impulses(
        &mut self,
        h: BodyHandle,
        impulses: &[(EmbeddedPoint, Vec3)],
    ) -> Result<bool, WorldError> {
        let speed = self.settings.sleeping.speed;
        let body = self.body(h)?;
        let count = body.x.len();
        for (point, impulse) in impulses {
            check_embedded("impulse point weights", std::slice::from_ref(point), count)?;
            check_finite("impulse", impulse)?;
        }
        if body.frozen.is_some() || impulses.is_empty() {
            return Ok(false);
        }
        let computed;
        let masses = match body.pd.as_ref() {
            Some(pd) => pd.masses(),
            None => {
                computed = body.masses();
                &computed
            }
        };
        // Velocity changes per vertex, summed over the impulses in vertex order.
        let mut kicks: Vec<(u32, Vec3)> = Vec::with_capacity(4 * impulses.len());
        for (point, impulse) in impulses {
            for (&v, &w) in point.vertices.iter().zip(&point.weights) {
                if w != 0.0 && !body.pinned[v as usize] {
                    kicks.push((v, (w / masses[v as usize]) * impulse));
                }
            }
        }
        kicks.sort_by_key(|&(v, _)| v);
        kicks.dedup_by(|(v, dv), (u, sum)| {
            let same = v == u;
            if same {
                *sum += *dv;
            }
            same
        });
        let strongest = kicks.iter().map(|(_, dv)| dv.norm()).fold(0.0, f64::max);
        if kicks.is_empty() || (body.asleep && strongest <= speed) {
            return Ok(false);
        }
        // Woken if asleep; an awake body keeps its rest clock (a resting load does not restart
        // its rest: how far it moves decides).
        let body = self.body_mut_asleep(h)?;
        if body.asleep {
            body.wake();
        }
        for (v, dv) in kicks {
            body.v[v as usize] += dv;
        }
        Ok(true)
    }

    /// [`SoftWorld::apply_impulses`] with each impulse at a point given by its position (m):
    /// the point is embedded in the tet of body `h` that holds it now (or, outside the body,
    /// the nearest, extrapolating), so an impulse on the surface or inside acts where it is.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`]; [`WorldError::InvalidValue`] for a non-finite position or
    /// impulse (none is applied).
    pub fn apply_impulses_at(
        &mut self,
        h: BodyHandle,
        impulses: &[(Vec3, Vec3)],
    ) -> Result<bool, WorldError> {
        for (at, impulse) in impulses {
            check_finite("impulse point", at)?;
            check_finite("impulse", impulse)?;
        }
        let body = self.body(h)?;
        let positions: Vec<Vec3> = impulses.iter().map(|(at, _)| *at).collect();
        let Some(points) = embed_points_at(&body.mesh, &body.x, &positions) else {
            return Ok(false);
        };
        let embedded: Vec<(EmbeddedPoint, Vec3)> = points
            .into_iter()
            .zip(impulses)
            .map(|(p, (_, impulse))| (p, *impulse))
            .collect();
        self.apply_impulses(h, &embedded)
    }
}
