//! The Step set: the fixed step of the simulation world, its diagnostics and messages.

use bevy::diagnostic::Diagnostics;
use bevy::ecs::change_detection::DetectChangesMut;
use bevy::ecs::entity::Entity;
use bevy::log::warn;
use bevy::prelude::{MessageWriter, Query, Res, ResMut, Time};

use crate::components::DeformableState;
use crate::diagnostics::{self, DeformableDiagnostics};
use crate::history::{StepHistory, StepSample};
use crate::messages::{BodyFrozen, BodySlept, BodyWoke, ContactEnded, ContactStarted};

use super::{DeformableConfig, DeformableWorld};

#[allow(clippy::too_many_arguments)]
pub(super) fn step_world(
    mut config: ResMut<DeformableConfig>,
    time: Res<Time>,
    mut world: ResMut<DeformableWorld>,
    mut stats: ResMut<DeformableDiagnostics>,
    mut history: ResMut<StepHistory>,
    mut diagnostics: Diagnostics,
    mut bodies: Query<(Entity, &mut DeformableState)>,
    mut frozen_messages: MessageWriter<BodyFrozen>,
    (mut slept, mut woke): (MessageWriter<BodySlept>, MessageWriter<BodyWoke>),
    mut started: MessageWriter<ContactStarted>,
    mut ended: MessageWriter<ContactEnded>,
) {
    world.stepped = false;
    if config.paused {
        if !config.single_step {
            return;
        }
        // Not a settings edit: no need to push the settings again next step.
        config.bypass_change_detection().single_step = false;
    }
    let dt = time.delta_secs_f64();
    if !(dt > 0.0) {
        return;
    }
    let report = match world.world.step(dt) {
        Ok(r) => r,
        Err(e) => {
            warn!("deformable step skipped: {e}");
            return;
        }
    };
    world.stepped = true;
    stats.record(&report);
    stats.bodies = world.body_of.len();
    history.push(StepSample::from_diagnostics(&stats));
    diagnostics.add_measurement(&diagnostics::STEP_TIME, || report.wall.as_secs_f64() * 1e3);
    diagnostics.add_measurement(&diagnostics::MPRGP_ITERATIONS, || {
        report.mprgp_iterations as f64
    });
    diagnostics.add_measurement(&diagnostics::CONSTRAINTS, || report.constraints as f64);
    diagnostics.add_measurement(&diagnostics::KKT_RESIDUAL, || report.kkt_residual);
    diagnostics.add_measurement(&diagnostics::CONTACT_REGIONS, || report.lcp.regions as f64);
    diagnostics.add_measurement(&diagnostics::LCP_ITERATIONS, || {
        (report.lcp.cg_iterations + report.lcp.gs_sweeps) as f64
    });
    diagnostics.add_measurement(&diagnostics::LCP_RESIDUAL, || report.lcp.residual);
    let world = &mut *world;
    // The step's events, each to its body's entity by the handle map (a scan of the events per
    // body would cost bodies x events when many bodies freeze, wake or sleep at once).
    for (h, reason) in &report.frozen {
        let Some(entity) = world.entity_of(*h) else {
            continue;
        };
        if let Ok((_, mut state)) = bodies.get_mut(entity) {
            state.frozen = Some(reason.clone());
        }
        frozen_messages.write(BodyFrozen {
            entity,
            reason: reason.clone(),
        });
    }
    for &h in &report.woke {
        if let Some(entity) = world.entity_of(h) {
            woke.write(BodyWoke { entity });
        }
    }
    for &h in &report.slept {
        if let Some(entity) = world.entity_of(h) {
            slept.write(BodySlept { entity });
        }
    }
    for (entity, mut state) in &mut bodies {
        let Some(h) = state.handle else { continue };
        state.asleep = world.world.is_asleep(h).unwrap_or(false);
        // As the simulation has it: a restored snapshot or a loaded save may have unfrozen
        // the body since its freeze was reported.
        let frozen = world.world.frozen(h).ok().flatten();
        if state.frozen.as_ref() != frozen {
            state.frozen = frozen.cloned();
        }
        // Contact messages: compare this step's touching obstacles with the last step's.
        world.scratch.clear();
        let _ = world.world.touching_obstacles(h, &mut world.scratch);
        let now = &mut world.touching;
        now.clear();
        now.extend(
            world
                .scratch
                .iter()
                .filter_map(|o| world.entity_of_obstacle.get(o).copied()),
        );
        now.sort_unstable();
        let now = &world.touching;
        let before = world.contacts.entry(entity).or_default();
        for &o in now {
            if before.binary_search(&o).is_err() {
                started.write(ContactStarted {
                    body: entity,
                    obstacle: o,
                });
            }
        }
        for &o in before.iter() {
            if now.binary_search(&o).is_err() {
                ended.write(ContactEnded {
                    body: entity,
                    obstacle: o,
                });
            }
        }
        before.clear();
        before.extend_from_slice(now);
    }
    stats.frozen_bodies = bodies.iter().filter(|(_, s)| s.failed()).count();
}
