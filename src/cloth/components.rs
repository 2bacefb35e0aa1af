//! The cloth's components and resources: [`DeformableCloth`] (what a game spawns),
//! [`ClothPreset`], [`ClothEdge`], the [`ClothWind`] resource and the plugin's
//! [`ClothState`].

use std::sync::Arc;

use bevy::ecs::component::Component;
use bevy::ecs::entity::Entity;
use bevy::ecs::resource::Resource;
use bevy::math::{UVec2, Vec2, Vec3};
use bevy::prelude::{ReflectComponent, ReflectDefault, ReflectResource, Transform};
use bevy::reflect::Reflect;

use crate::selection::VertexSelection;
use crate::sim::BodyHandle;
use crate::sim::cloth::{ClothError, ClothMaterial, ClothSystem};
use crate::sim::embed::EmbeddedPoint;

/// A rectangle of cloth simulated by the plugin: `size` (m) along its entity's local x and z
/// axes, centred on the entity, `cells` cells along each. Pinned vertices are held where they
/// are on the rectangle, following the entity's transform (move the entity to move the pole,
/// rail or shoulders the cloth hangs from), or riding on a soft body
/// ([`DeformableCloth::pin_to_body`]); the rest falls, flutters in the [`ClothWind`] and
/// drapes over the [`crate::components::Obstacle`]s and the soft bodies. The soft bodies feel
/// it one step late: its contacts' impulses on their surfaces and its pins' pull are applied to
/// them before their next step (not to skinned flesh, [`crate::skin::SkinFlesh`], which its
/// bones drive: there a cloth stays one way). A rigid body's collider
/// ([`crate::RigidBodyCoupling`], every dynamic avian body with `DeformableAvianPlugin`) takes
/// its contacts' impulses in its [`crate::RigidBodyImpulse`] after the step. Other cloths keep
/// apart from it. The plugin gives the entity a `Mesh3d`
/// (positions in the entity's frame, area-weighted normals, UVs over the rectangle) unless it
/// has one of the same vertex count; give it a double-sided material
/// (`StandardMaterial { double_sided: true, cull_mode: None, .. }`) so both faces are lit.
///
/// Editing the component rebuilds the cloth: a new size or cell count starts it over at the
/// entity's pose, a new preset, pin list or iteration count keeps its shape and motion.
///
/// ```
/// use bevy::prelude::*;
/// use bevy_deformable::prelude::*;
///
/// fn spawn_flag(mut commands: Commands) {
///     commands.spawn((
///         DeformableCloth::rectangle(Vec2::new(1.2, 0.8), UVec2::new(24, 16))
///             .with_preset(ClothPreset::Silk)
///             .pin_edge(ClothEdge::MinX),
///         // The rectangle stood upright, its pinned edge along the pole.
///         Transform::from_xyz(0.0, 2.0, 0.0)
///             .with_rotation(Quat::from_rotation_x(std::f32::consts::FRAC_PI_2)),
///     ));
/// }
/// ```
#[derive(Component, Reflect, Debug, Clone, PartialEq)]
#[reflect(Component, Clone)]
#[require(Transform, ClothState)]
pub struct DeformableCloth {
    /// Width along local x and depth along local z (m), each `> 0`.
    pub size: Vec2,
    /// Cells along x and z (each at least 1).
    pub cells: UVec2,
    /// The material.
    pub preset: ClothPreset,
    /// Vertices held in place (vertex `i + j (cells.x + 1)` is at column `i` along x, row `j`
    /// along z, from the corner at `-size / 2`).
    pub pinned: Vec<u32>,
    /// Further vertices held in place, chosen by where they lie on the rectangle (m, the
    /// entity's frame: the rectangle spans `-size / 2..size / 2` in x and z at `y = 0`).
    /// A selection that matches no vertex refuses the cloth
    /// ([`ClothError::EmptyPinSelection`](crate::sim::cloth::ClothError::EmptyPinSelection)).
    pub pin_select: Vec<VertexSelection>,
    /// The soft body (an entity with a
    /// [`DeformableBody`](crate::components::DeformableBody)) the pinned vertices ride on,
    /// instead of this entity's transform: where the cloth is built, each pinned vertex is
    /// embedded in the body's tet it lies in (or the nearest), and from then on it is carried
    /// by that tet as the body moves and deforms (a flag stitched to a jelly, a cape on a soft
    /// creature). The body feels the pins' pull one step late (the cloth's weight, drag and
    /// inertia, shared equally among the pins). A body not yet in the world is
    /// waited for; an entity that is no soft body refuses the cloth
    /// ([`ClothError::PinnedToMissingBody`](crate::sim::cloth::ClothError::PinnedToMissingBody)).
    /// Default: `None`.
    pub pinned_to_body: Option<Entity>,
    /// Local/global iterations per step (at least 1). Default: 10.
    pub iterations: u32,
    /// The Chebyshev extrapolation of the iterations (an estimate of their spectral radius in
    /// `[0, 1)`; 0: plain iterations), used while the cloth touches nothing
    /// ([`ClothSystem::chebyshev_rho`](crate::sim::cloth::ClothSystem::chebyshev_rho)): a
    /// cloth streaming in the wind needs it, or many iterations, not to crumple
    /// ([`DeformableCloth::in_the_wind`]). Default: 0.
    pub chebyshev_rho: f32,
    /// Whether the cloth collides with itself (folds, a flag wrapped round its pole, a
    /// tablecloth heaped on the floor): its vertices and edges kept its thickness apart, and
    /// impact zones as the fail-safe against passing through itself within a step
    /// ([`ClothSystem::self_collision`](crate::sim::cloth::ClothSystem::self_collision)).
    /// Default: `false` (it costs 3-60 times the rest of the cloth's step,
    /// `docs/PERFORMANCE.md`).
    pub self_collision: bool,
}

impl DeformableCloth {
    /// A rectangle of `size` (m) and `cells`, cotton, nothing pinned.
    pub fn rectangle(size: Vec2, cells: UVec2) -> Self {
        Self {
            size,
            cells,
            preset: ClothPreset::Cotton,
            pinned: Vec::new(),
            pin_select: Vec::new(),
            pinned_to_body: None,
            iterations: 10,
            chebyshev_rho: 0.0,
            self_collision: false,
        }
    }

    /// Builder: iterations for a cloth streaming in the wind (a flag, a banner):
    /// [`FLAG_ITERATIONS`](crate::sim::cloth::FLAG_ITERATIONS) extrapolated with
    /// [`FLAG_CHEBYSHEV_RHO`](crate::sim::cloth::FLAG_CHEBYSHEV_RHO). Ten plain iterations
    /// crumple a fine flag at its cells' scale; these keep it smooth at 2.5 times the cost.
    pub fn in_the_wind(mut self) -> Self {
        self.iterations = crate::sim::cloth::FLAG_ITERATIONS as u32;
        self.chebyshev_rho = crate::sim::cloth::FLAG_CHEBYSHEV_RHO as f32;
        self
    }

    /// Builder: the cloth collides with itself (see [`DeformableCloth::self_collision`]).
    pub fn with_self_collision(mut self) -> Self {
        self.self_collision = true;
        self
    }

    /// Builder: the pinned vertices ride on the soft body `body` (see
    /// [`DeformableCloth::pinned_to_body`]); place the entity so that they lie on or in it.
    pub fn pin_to_body(mut self, body: Entity) -> Self {
        self.pinned_to_body = Some(body);
        self
    }

    /// Builder: the material.
    pub fn with_preset(mut self, preset: ClothPreset) -> Self {
        self.preset = preset;
        self
    }

    /// The vertex at column `i` (along x) and row `j` (along z).
    pub fn vertex(&self, i: u32, j: u32) -> u32 {
        i + j * (self.cells.x + 1)
    }

    /// Builder: pins every vertex of one edge of the rectangle.
    pub fn pin_edge(self, edge: ClothEdge) -> Self {
        let (cx, cz) = (self.cells.x, self.cells.y);
        let vertices: Vec<u32> = match edge {
            ClothEdge::MinX => (0..=cz).map(|j| self.vertex(0, j)).collect(),
            ClothEdge::MaxX => (0..=cz).map(|j| self.vertex(cx, j)).collect(),
            ClothEdge::MinZ => (0..=cx).map(|i| self.vertex(i, 0)).collect(),
            ClothEdge::MaxZ => (0..=cx).map(|i| self.vertex(i, cz)).collect(),
        };
        self.pin_vertices(vertices)
    }

    /// Builder: pins the two corners of one edge (a curtain on two hooks, a sheet on a line).
    pub fn pin_corners(self, edge: ClothEdge) -> Self {
        let (cx, cz) = (self.cells.x, self.cells.y);
        let corners = match edge {
            ClothEdge::MinX => [self.vertex(0, 0), self.vertex(0, cz)],
            ClothEdge::MaxX => [self.vertex(cx, 0), self.vertex(cx, cz)],
            ClothEdge::MinZ => [self.vertex(0, 0), self.vertex(cx, 0)],
            ClothEdge::MaxZ => [self.vertex(0, cz), self.vertex(cx, cz)],
        };
        self.pin_vertices(corners)
    }

    /// Builder: pins the vertices `selection` chooses on the rectangle (m, the entity's
    /// frame, `y = 0`): `VertexSelection::in_sphere(Vec3::new(0.0, 0.0, -0.3), 0.12)` holds
    /// the vertices within 12 cm of the middle of the edge at `z = -0.3`, a cape's collar.
    pub fn pin_selection(mut self, selection: VertexSelection) -> Self {
        self.pin_select.push(selection);
        self
    }

    /// Builder: pins `vertices` (those already pinned stay pinned).
    pub fn pin_vertices(mut self, vertices: impl IntoIterator<Item = u32>) -> Self {
        for v in vertices {
            if !self.pinned.contains(&v) {
                self.pinned.push(v);
            }
        }
        self
    }
}

/// An edge of a [`DeformableCloth`]'s rectangle, by the local axis it lies at the end of.
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClothEdge {
    /// The edge at `x = -size.x / 2` (along z).
    MinX,
    /// The edge at `x = +size.x / 2` (along z).
    MaxX,
    /// The edge at `z = -size.y / 2` (along x).
    MinZ,
    /// The edge at `z = +size.y / 2` (along x).
    MaxZ,
}

/// The cloth materials: [`ClothMaterial::PRESETS`], in its order.
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[reflect(Default)]
pub enum ClothPreset {
    /// [`ClothMaterial::SILK`].
    Silk,
    /// [`ClothMaterial::COTTON`].
    #[default]
    Cotton,
    /// [`ClothMaterial::DENIM`].
    Denim,
    /// [`ClothMaterial::LEATHER`].
    Leather,
    /// [`ClothMaterial::RUBBER_SHEET`].
    RubberSheet,
}

impl ClothPreset {
    /// Every preset, lightest first.
    pub const ALL: [Self; 5] = [
        Self::Silk,
        Self::Cotton,
        Self::Denim,
        Self::Leather,
        Self::RubberSheet,
    ];

    /// The preset's material.
    pub fn material(self) -> ClothMaterial {
        ClothMaterial::PRESETS[self as usize].1
    }

    /// The preset's name.
    pub fn name(self) -> &'static str {
        ClothMaterial::PRESETS[self as usize].0
    }
}

/// The wind every cloth flutters in: a mean `velocity` (m/s) made gusty by two slow waves,
/// `velocity (1 + gustiness (0.6 sin(2 pi t / period) + 0.4 sin(5.4 pi t / period + 1.3)))`.
#[derive(Resource, Reflect, Debug, Clone, Copy, PartialEq)]
#[reflect(Resource, Default)]
pub struct ClothWind {
    /// Mean wind velocity (m/s). Default: zero (still air).
    pub velocity: Vec3,
    /// How strongly it gusts, `0..=1` (0: steady). Default: 0.5.
    pub gustiness: f32,
    /// Period of the slower gust wave (s), `> 0`. Default: 3.
    pub gust_period: f32,
}

impl Default for ClothWind {
    fn default() -> Self {
        Self {
            velocity: Vec3::ZERO,
            gustiness: 0.5,
            gust_period: 3.0,
        }
    }
}

impl ClothWind {
    /// The wind (m/s) at time `t` (s).
    pub fn at(&self, t: f32) -> Vec3 {
        let period = if self.gust_period > 0.0 {
            self.gust_period
        } else {
            1.0
        };
        let phase = std::f32::consts::TAU * t / period;
        let gust = 0.6 * phase.sin() + 0.4 * (2.7 * phase + 1.3).sin();
        self.velocity * (1.0 + self.gustiness.clamp(0.0, 1.0) * gust)
    }
}

/// A cloth's state in the simulation, kept by the plugin. Read-only for games.
#[derive(Component, Debug, Default)]
pub struct ClothState {
    pub(crate) system: Option<ClothSystem>,
    /// The component as last built.
    pub(crate) built: Option<DeformableCloth>,
    /// Per pinned vertex: its position on the rectangle (m, the entity's frame).
    pub(crate) pins_local: Vec<(u32, Vec3)>,
    /// Where the pins ride on a soft body (`DeformableCloth::pinned_to_body`): the body and,
    /// per pinned vertex, its point embedded in the body's tets.
    pub(crate) pins_body: Option<(BodyHandle, Vec<(u32, EmbeddedPoint)>)>,
    pub(crate) error: Option<ClothError>,
    pub(crate) triangles: Arc<[u32]>,
    /// The step (s) the cloth was built for.
    pub(crate) dt: f64,
    /// The positions after the last two steps (m, world), drawn blended by the fixed clock's
    /// overstep (`DeformableConfig::interpolate`).
    pub(crate) previous: Vec<Vec3>,
    pub(crate) current: Vec<Vec3>,
}

impl ClothState {
    /// After a step (or none, `stepped` false): the last step's positions become the
    /// previous ones, and the cloth's now the current ones (the same where it did not step,
    /// so the blend holds still).
    pub(crate) fn record(&mut self, stepped: bool) {
        let Some(system) = &self.system else {
            return;
        };
        let n = system.positions().len();
        if stepped && self.current.len() == n {
            std::mem::swap(&mut self.previous, &mut self.current);
        }
        self.current.clear();
        self.current.extend(
            system
                .positions()
                .iter()
                .map(|p| Vec3::new(p.x as f32, p.y as f32, p.z as f32)),
        );
        if self.previous.len() != n || !stepped {
            self.previous.clone_from(&self.current);
        }
    }

    /// The simulated cloth (its mesh, velocities, contact counts), once built.
    pub fn system(&self) -> Option<&ClothSystem> {
        self.system.as_ref()
    }

    /// The simulated positions (m, world), once the cloth is built.
    pub fn positions(&self) -> Option<&[crate::sim::Vec3]> {
        self.system.as_ref().map(ClothSystem::positions)
    }

    /// Why the cloth was refused or stopped (a bad size or pin, an unstable step), if it was.
    pub fn error(&self) -> Option<&ClothError> {
        self.error.as_ref()
    }

    /// The obstacle contacts of its last step.
    pub fn contacts(&self) -> usize {
        self.system.as_ref().map_or(0, ClothSystem::contact_count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each preset reads its own entry of `ClothMaterial::PRESETS` (the enum's order is the
    /// table's).
    #[test]
    fn each_preset_is_its_named_material() {
        let named = [
            ClothMaterial::SILK,
            ClothMaterial::COTTON,
            ClothMaterial::DENIM,
            ClothMaterial::LEATHER,
            ClothMaterial::RUBBER_SHEET,
        ];
        for (preset, material) in ClothPreset::ALL.into_iter().zip(named) {
            assert_eq!(preset.material(), material, "{}", preset.name());
        }
        assert_eq!(ClothPreset::RubberSheet.name(), "rubber sheet");
    }
}
