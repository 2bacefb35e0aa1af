//! A soft body's surface as an obstacle, for what is stepped after the world and should rest on
//! its bodies: a cloth draped over a jelly cube (`crate::sim::cloth`, and the Bevy layer's
//! cloths, which step after the soft bodies).
//!
//! The obstacle is a triangle mesh of the surface the body is drawn with at its present
//! positions (its drawn mesh where it has a closed one, else its tet mesh's boundary), moving
//! with the body's mean velocity, so a cloth's speculative contacts see the body where its
//! step ended. Within the cloth's step the body is a rigid shape of its current form (its own
//! step is over); what the cloth's contacts put on it
//! ([`crate::sim::cloth::ClothSystem::obstacle_impulses`]) reaches it as impulses
//! ([`SoftWorld::apply_impulses_at`]) for its next step: contact both ways, one step late. The
//! cloth's vertices in the soft bodies' contact QP would make it both ways within a step.

use super::{BodyHandle, SoftWorld, WorldError};
use crate::sim::contact::ObstacleCollider;
use crate::sim::math::Vec3;
use nalgebra::UnitQuaternion;

impl SoftWorld {
    /// Body `h`'s surface now as a triangle-mesh obstacle (see the module docs): in world
    /// coordinates (the obstacle at the origin), moving with the body's mean velocity (m/s),
    /// with the friction and combine rules of the body's material.
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`], or [`WorldError::Obstacle`] where the surface is not a
    /// valid triangle mesh (non-finite positions: a frozen body's last good ones are kept, so
    /// this means a body edited to NaN).
    pub fn surface_obstacle(&self, h: BodyHandle) -> Result<ObstacleCollider, WorldError> {
        let body = self.body(h)?;
        let (vertices, indices) = match body.drawn.as_deref().filter(|d| d.is_closed()) {
            Some(drawn) => {
                let mut points = Vec::new();
                drawn.positions_into(&body.x, &mut points);
                (points, drawn.triangles().to_vec())
            }
            None => {
                let surface = body.mesh.surface_vertices();
                let mut index_of = vec![u32::MAX; body.x.len()];
                for (k, &v) in surface.iter().enumerate() {
                    index_of[v as usize] = k as u32;
                }
                let points = surface.iter().map(|&v| body.x[v as usize]).collect();
                let triangles = body
                    .mesh
                    .surface_triangles()
                    .iter()
                    .map(|t| t.map(|v| index_of[v as usize]))
                    .collect();
                (points, triangles)
            }
        };
        let mean = body.v.iter().sum::<Vec3>() / body.v.len().max(1) as f64;
        let material = &body.material;
        let mut obstacle = ObstacleCollider::trimesh(vertices, indices)?
            .with_friction(material.friction)
            .with_combine_rules(material.friction_combine, material.restitution_combine);
        obstacle.set_state(
            Vec3::zeros(),
            UnitQuaternion::identity(),
            mean,
            Vec3::zeros(),
        )?;
        Ok(obstacle)
    }

    /// Body `h`'s bounding box now (smallest and largest coordinates of its vertices, m).
    ///
    /// # Errors
    /// [`WorldError::UnknownBody`].
    pub fn body_bounds(&self, h: BodyHandle) -> Result<(Vec3, Vec3), WorldError> {
        Ok(crate::sim::mesh::bounds(&self.body(h)?.x))
    }
}
