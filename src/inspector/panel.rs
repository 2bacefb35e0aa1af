//! The egui side panel. Every widget edits a copy and writes it back only when the value
//! changed, so change detection (and with it a body's refactorization) fires only on real edits.

use std::time::Instant;

use bevy::ecs::entity::Entity;
use bevy::ecs::message::MessageWriter;
use bevy::ecs::system::SystemParam;
use bevy::prelude::{Mut, Name, Query, Res, ResMut, Time};
use bevy::time::{Fixed, Virtual};
use bevy_egui::EguiContexts;
use bevy_egui::egui::{self, Color32, RichText};

use super::InspectorState;
use super::cloth_panel::cloth_section;
use super::plot::{Scale, Series, history_plot};
use crate::cloth::{ClothState, ClothWind, DeformableCloth};
use crate::components::{CombineRule, DeformableState, Pin, SoftMaterial, StrainLimits};
use crate::diagnostics::DeformableDiagnostics;
use crate::grab::GrabTool;
use crate::history::StepHistory;
use crate::messages::ResetScene;
use crate::plugin::{
    ContactSettings, DeformableConfig, DeformableWorld, ElasticModel, FrictionModel, RestSettings,
    SolverChoice, SolverSettings,
};
use crate::rigid_coupling::RigidBodyImpulse;
use crate::sim::MAX_ANDERSON_WINDOW;
use crate::skin::SkinFlesh;
use crate::state_file::{LoadState, SaveState, StateFile};
use crate::status::BodyStatus;
use crate::tuning::{LoadTuning, MaterialPreset, SaveTuning, TuningFile};

/// The frame budget line of the timing plot (ms).
const FRAME_BUDGET_MS: f32 = 1000.0 / 60.0;

/// What the panel reads and edits of a body.
type BodyRow = (
    Entity,
    Option<&'static Name>,
    &'static DeformableState,
    &'static mut SoftMaterial,
    Option<&'static mut Pin>,
    Option<&'static mut SkinFlesh>,
);

/// Everything the panel reads and edits.
#[derive(SystemParam)]
pub(super) struct Panel<'w, 's> {
    contexts: EguiContexts<'w, 's>,
    state: ResMut<'w, InspectorState>,
    config: ResMut<'w, DeformableConfig>,
    stats: Res<'w, DeformableDiagnostics>,
    history: Res<'w, StepHistory>,
    world: Res<'w, DeformableWorld>,
    grab: ResMut<'w, GrabTool>,
    fixed: ResMut<'w, Time<Fixed>>,
    virtual_time: ResMut<'w, Time<Virtual>>,
    tuning: Option<Res<'w, TuningFile>>,
    state_file: Option<Res<'w, StateFile>>,
    bodies: Query<'w, 's, BodyRow>,
    rigid: Query<'w, 's, (Entity, Option<&'static Name>, &'static RigidBodyImpulse)>,
    wind: ResMut<'w, ClothWind>,
    cloths: Query<
        'w,
        's,
        (
            Entity,
            Option<&'static Name>,
            &'static mut DeformableCloth,
            &'static ClothState,
        ),
    >,
    reset: MessageWriter<'w, ResetScene>,
    save: MessageWriter<'w, SaveTuning>,
    load: MessageWriter<'w, LoadTuning>,
    save_state: MessageWriter<'w, SaveState>,
    load_state: MessageWriter<'w, LoadState>,
}

/// Draws the panel (in `EguiPrimaryContextPass`) and records its own cost.
pub(super) fn draw_panel(mut p: Panel) -> bevy::ecs::error::Result {
    if !p.state.open {
        return Ok(());
    }
    let start = Instant::now();
    let ctx = p.contexts.ctx_mut()?.clone();
    let mut root = egui::Ui::new(
        ctx.clone(),
        "bevy_deformable_root".into(),
        egui::UiBuilder::new()
            .layer_id(egui::LayerId::background())
            .max_rect(ctx.viewport_rect()),
    );
    egui::Panel::right("bevy_deformable_inspector")
        .resizable(true)
        .default_size(350.0)
        .show(&mut root, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| {
                ui.heading("bevy_deformable");
                ui.label(
                    RichText::new("drag a body: grab · shift-click: pin · F1: hide")
                        .small()
                        .weak(),
                );
                controls(ui, &mut p);
                ui.separator();
                body_list(ui, &mut p);
                selected_body(ui, &mut p);
                rigid_bodies(ui, &p);
                cloth_section(ui, &mut p.wind.reborrow(), p.cloths.iter_mut());
                settings(ui, &mut p);
                statistics(ui, &p);
                debug_drawing(ui, &mut p.state.draw);
                tuning_file(ui, &mut p);
                state_file(ui, &mut p);
            });
        });
    let ms = start.elapsed().as_secs_f32() * 1e3;
    let state = &mut *p.state;
    state.panel_ms = if state.panel_ms == 0.0 {
        ms
    } else {
        0.95 * state.panel_ms + 0.05 * ms
    };
    Ok(())
}

/// Pause, single step, reset, time scale.
fn controls(ui: &mut egui::Ui, p: &mut Panel) {
    let mut c = p.config.clone();
    ui.horizontal(|ui| {
        if ui
            .button(if c.paused { "Resume" } else { "Pause" })
            .clicked()
        {
            c.paused = !c.paused;
        }
        if ui
            .add_enabled(c.paused, egui::Button::new("Step"))
            .on_hover_text("one fixed step while paused")
            .clicked()
        {
            c.single_step = true;
        }
        if ui
            .button("Reset")
            .on_hover_text("every body back where it started")
            .clicked()
        {
            p.reset.write(ResetScene);
        }
    });
    let mut speed = p.virtual_time.relative_speed();
    ui.add(egui::Slider::new(&mut speed, 0.0..=2.0).text("time scale"));
    if speed != p.virtual_time.relative_speed() {
        p.virtual_time.set_relative_speed(speed);
    }
    if c != *p.config {
        *p.config = c;
    }
}

fn body_label(entity: Entity, name: Option<&Name>) -> String {
    name.map_or_else(|| format!("body {entity}"), |n| n.as_str().to_owned())
}

/// The bodies; clicking one selects it.
fn body_list(ui: &mut egui::Ui, p: &mut Panel) {
    let mut rows: Vec<(Entity, String, bool)> = p
        .bodies
        .iter()
        .map(|(e, name, state, _, _, _)| (e, body_label(e, name), state.failed()))
        .collect();
    rows.sort_by_key(|r| r.0);
    egui::CollapsingHeader::new(format!("Bodies ({})", rows.len()))
        .default_open(true)
        .show(ui, |ui| {
            egui::ScrollArea::vertical()
                .id_salt("bodies")
                .max_height(140.0)
                .show(ui, |ui| {
                    for (entity, label, frozen) in rows {
                        let text = if frozen {
                            RichText::new(format!("{label} (frozen)")).color(Color32::LIGHT_RED)
                        } else {
                            RichText::new(label)
                        };
                        if ui
                            .selectable_label(p.state.selected == Some(entity), text)
                            .clicked()
                        {
                            p.state.selected = Some(entity);
                        }
                    }
                });
        });
}

/// The coupled rigid bodies' colliders ([`crate::rigid_coupling`]) and what the soft bodies
/// did to them in the last step; hidden where there are none.
fn rigid_bodies(ui: &mut egui::Ui, p: &Panel) {
    let mut rows: Vec<_> = p.rigid.iter().collect();
    if rows.is_empty() {
        return;
    }
    rows.sort_by_key(|r| r.0);
    egui::CollapsingHeader::new(format!("Rigid bodies ({})", rows.len())).show(ui, |ui| {
        ui.label(
            RichText::new("the soft bodies' push on each in the last step")
                .small()
                .weak(),
        );
        egui::Grid::new("rigid_bodies")
            .striped(true)
            .show(ui, |ui| {
                ui.label("collider");
                ui.label("contacts");
                ui.label("impulse (N s)");
                ui.label("dv (m/s)");
                ui.end_row();
                for (entity, name, impulse) in rows {
                    ui.label(name.map_or_else(|| format!("{entity}"), |n| n.as_str().to_owned()));
                    ui.label(impulse.contacts.to_string());
                    ui.label(format!("{:.3}", impulse.impulse.length()));
                    ui.label(format!("{:.3}", impulse.linear_velocity_change.length()));
                    ui.end_row();
                }
            });
    });
}

/// The selected body: material (with presets), pins, refactorization time, state.
fn selected_body(ui: &mut egui::Ui, p: &mut Panel) {
    let Some(entity) = p.state.selected else {
        return;
    };
    let Ok((_, name, state, mut material, pin, flesh)) = p.bodies.get_mut(entity) else {
        p.state.selected = None;
        return;
    };
    let title = format!("Selected: {}", body_label(entity, name));
    egui::CollapsingHeader::new(title)
        .id_salt("selected")
        .default_open(true)
        .show(ui, |ui| {
            ui.label(format!("{} vertices", state.vertex_count()));
            match state.status() {
                BodyStatus::Frozen(reason) => {
                    ui.colored_label(Color32::LIGHT_RED, format!("frozen: {reason}"));
                }
                BodyStatus::Rejected(error) => {
                    ui.colored_label(Color32::LIGHT_RED, format!("not created: {error}"));
                }
                _ => {}
            }
            let mut m = *material;
            material_editor(ui, &mut m);
            if m != *material {
                *material = m;
            }
            let height = p.world.positions(entity).map(|x| {
                let (lo, hi) = x.iter().fold((f64::MAX, f64::MIN), |(lo, hi), q| {
                    (lo.min(q.y), hi.max(q.y))
                });
                (hi - lo).max(0.0)
            });
            if height.is_some_and(|h| very_soft_for_its_size(&material, h, p.config.gravity)) {
                ui.colored_label(
                    Color32::YELLOW,
                    "very soft for its height: a hard landing can squash it to a tenth of its \
                     volume; a compression limit (strain limits, min stretch 0.5) keeps it whole",
                );
            }
            let refactor = p
                .world
                .body(entity)
                .and_then(|h| p.world.world().last_refactor(h).ok().flatten());
            if let Some(t) = refactor {
                ui.label(format!(
                    "last refactorization: {:.2} ms",
                    t.as_secs_f64() * 1e3
                ));
            }
            let pinned = p
                .world
                .body(entity)
                .and_then(|h| p.world.world().pinned(h).ok())
                .map_or(0, |flags| flags.iter().filter(|&&f| f).count());
            pins(ui, pin, pinned);
            if let Some(flesh) = flesh {
                flesh_springs(ui, flesh);
            }
        });
}

/// The spring frequencies of a skinned region's flesh (see `SkinFlesh`).
fn flesh_springs(ui: &mut egui::Ui, mut flesh: Mut<SkinFlesh>) {
    let (mut bone, mut surface) = (flesh.bone_frequency, flesh.surface_frequency);
    ui.label("skin springs (the animation's hold on the flesh)");
    ui.add(egui::Slider::new(&mut bone, 0.0..=40.0).text("near bones (Hz)"));
    ui.add(egui::Slider::new(&mut surface, 0.0..=20.0).text("elsewhere (Hz)"));
    if (bone, surface) != (flesh.bone_frequency, flesh.surface_frequency) {
        flesh.bone_frequency = bone;
        flesh.surface_frequency = surface;
    }
}

/// Material sliders and presets; edits `m` in place.
fn material_editor(ui: &mut egui::Ui, m: &mut SoftMaterial) {
    let current = MaterialPreset::matching(m).map_or("custom", MaterialPreset::name);
    egui::ComboBox::from_label("preset")
        .selected_text(current)
        .show_ui(ui, |ui| {
            for preset in MaterialPreset::ALL {
                if ui.selectable_label(false, preset.name()).clicked() {
                    *m = preset.material();
                }
            }
        });
    ui.add(
        egui::Slider::new(&mut m.youngs_modulus, 1.0e3..=1.0e8)
            .logarithmic(true)
            .text("Young's modulus (Pa)"),
    );
    ui.add(egui::Slider::new(&mut m.poisson_ratio, 0.0..=0.49).text("Poisson ratio"));
    ui.add(
        egui::Slider::new(&mut m.density, 10.0..=5000.0)
            .logarithmic(true)
            .text("density (kg/m³)"),
    );
    ui.add(egui::Slider::new(&mut m.damping, 0.0..=20.0).text("damping (1/s)"));
    ui.add(egui::Slider::new(&mut m.strain_damping, 0.0..=0.1).text("strain damping (s)"));
    ui.add(egui::Slider::new(&mut m.friction, 0.0..=2.0).text("friction"));
    ui.add(egui::Slider::new(&mut m.restitution, 0.0..=1.0).text("restitution"));
    combine_rule(ui, "friction combine", &mut m.friction_combine);
    combine_rule(ui, "restitution combine", &mut m.restitution_combine);
    let mut limited = m.strain_limits.is_some();
    ui.checkbox(&mut limited, "strain limits");
    if limited != m.strain_limits.is_some() {
        m.strain_limits = limited.then(StrainLimits::default);
    }
    if let Some(l) = &mut m.strain_limits {
        ui.add(egui::Slider::new(&mut l.min_stretch, 0.3..=1.0).text("min stretch"));
        ui.add(egui::Slider::new(&mut l.max_stretch, 1.0..=3.0).text("max stretch"));
        ui.add(
            egui::Slider::new(&mut l.stiffness_scale, 0.1..=100.0)
                .logarithmic(true)
                .text("limit stiffness ×"),
        );
    }
}

fn combine_rule(ui: &mut egui::Ui, label: &str, rule: &mut CombineRule) {
    egui::ComboBox::from_label(label)
        .selected_text(format!("{rule:?}"))
        .show_ui(ui, |ui| {
            for r in [
                CombineRule::Average,
                CombineRule::Min,
                CombineRule::Multiply,
                CombineRule::Max,
            ] {
                ui.selectable_value(rule, r, format!("{r:?}"));
            }
        });
}

/// How many vertices the simulation holds pinned, and a button that clears the body's `Pin`
/// (indices and selections), which frees them.
fn pins(ui: &mut egui::Ui, pin: Option<Mut<Pin>>, pinned: usize) {
    ui.horizontal(|ui| {
        ui.label(format!("{pinned} pinned vertices"));
        if let Some(mut pin) = pin
            && (!pin.vertices.is_empty() || !pin.select.is_empty())
            && ui.button("Unpin all").clicked()
        {
            pin.vertices.clear();
            pin.select.clear();
        }
    });
}

/// Global settings: gravity, fixed step, freeze guard and drawing, then one section per group
/// of [`DeformableConfig`] (solver, contacts, rest), and the grab stiffness.
fn settings(ui: &mut egui::Ui, p: &mut Panel) {
    egui::CollapsingHeader::new("Simulation settings").show(ui, |ui| {
        let mut c = p.config.clone();
        ui.horizontal(|ui| {
            ui.label("gravity (m/s²)");
            ui.add(egui::DragValue::new(&mut c.gravity.x).speed(0.05));
            ui.add(egui::DragValue::new(&mut c.gravity.y).speed(0.05));
            ui.add(egui::DragValue::new(&mut c.gravity.z).speed(0.05));
        });
        let hz = 1.0 / p.fixed.timestep().as_secs_f64();
        let mut new_hz = hz;
        ui.add(
            egui::Slider::new(&mut new_hz, 20.0..=240.0)
                .text("fixed rate (Hz)")
                .integer(),
        );
        if (new_hz - hz).abs() > 1e-9 {
            p.fixed.set_timestep_hz(new_hz);
        }
        ui.checkbox(&mut c.interpolate, "interpolate drawing");
        ui.add(
            egui::Slider::new(&mut c.max_speed, 1.0..=1000.0)
                .logarithmic(true)
                .text("freeze above (m/s)"),
        );
        egui::CollapsingHeader::new("Solver").show(ui, |ui| solver_settings(ui, &mut c.solver));
        egui::CollapsingHeader::new("Contacts").show(ui, |ui| contact_settings(ui, &mut c.contact));
        egui::CollapsingHeader::new("Rest").show(ui, |ui| rest_settings(ui, &mut c.rest));
        if c != *p.config {
            *p.config = c;
        }
        let mut stiffness = p.grab.stiffness;
        ui.add(
            egui::Slider::new(&mut stiffness, 10.0..=1.0e6)
                .logarithmic(true)
                .text("grab stiffness (N/m)"),
        );
        if stiffness != p.grab.stiffness {
            p.grab.stiffness = stiffness;
        }
    });
}

/// [`SolverSettings`]: solver, elastic model, iterations, tolerance, accelerations.
fn solver_settings(ui: &mut egui::Ui, c: &mut SolverSettings) {
    ui.add(egui::Slider::new(&mut c.substeps, 1..=8).text("substeps"));
    egui::ComboBox::from_label("solver")
        .selected_text(match c.method {
            SolverChoice::ProjectiveDynamics => "Projective Dynamics",
            SolverChoice::NewtonMprgp => "Newton-MPRGP",
        })
        .show_ui(ui, |ui| {
            ui.selectable_value(
                &mut c.method,
                SolverChoice::ProjectiveDynamics,
                "Projective Dynamics",
            );
            ui.selectable_value(&mut c.method, SolverChoice::NewtonMprgp, "Newton-MPRGP");
        });
    let newton = c.method == SolverChoice::NewtonMprgp;
    ui.add_enabled_ui(newton, |ui| {
        egui::ComboBox::from_label("elastic model (Newton)")
            .selected_text(format!("{:?}", c.fem_model))
            .show_ui(ui, |ui| {
                ui.selectable_value(
                    &mut c.fem_model,
                    ElasticModel::FixedCorotated,
                    "FixedCorotated",
                );
                ui.selectable_value(
                    &mut c.fem_model,
                    ElasticModel::StableNeoHookean,
                    "StableNeoHookean",
                );
            });
        ui.add(
            egui::Slider::new(&mut c.newton_iterations, 1..=20).text("Newton iterations (most)"),
        );
    });
    ui.add_enabled(
        !newton,
        egui::Slider::new(&mut c.pd_iterations, 1..=50).text("PD iterations (most)"),
    );
    ui.add(
        egui::Slider::new(&mut c.pd_tolerance, 0.0..=1e-1)
            .logarithmic(true)
            .smallest_positive(1e-6)
            .text("PD tolerance (0: all iterations)"),
    );
    ui.add(
        egui::Slider::new(&mut c.anderson_window, 0..=MAX_ANDERSON_WINDOW as u32)
            .text("Anderson window (0: off)"),
    );
    ui.add_enabled(
        c.anderson_window == 0,
        egui::Slider::new(&mut c.chebyshev_rho, 0.0..=0.95).text("Chebyshev rho (0: off)"),
    );
}

/// [`ContactSettings`]: friction model, contact kinds, QP and LCP limits, margin, restitution.
fn contact_settings(ui: &mut egui::Ui, c: &mut ContactSettings) {
    egui::ComboBox::from_label("friction model")
        .selected_text(format!("{:?}", c.friction_model))
        .show_ui(ui, |ui| {
            ui.selectable_value(&mut c.friction_model, FrictionModel::Cone, "Cone");
            ui.selectable_value(&mut c.friction_model, FrictionModel::Pyramid, "Pyramid");
        });
    ui.checkbox(&mut c.subspace, "contact QP in the contact subspace");
    ui.add(
        egui::Slider::new(&mut c.localized_min_vertices, 1024..=u32::MAX)
            .logarithmic(true)
            .text("localized contact from (vertices)"),
    );
    ui.checkbox(&mut c.separate_regions, "LCP by contact region");
    ui.checkbox(&mut c.soft_contacts, "soft-soft contacts");
    ui.checkbox(&mut c.self_collision, "self-collision");
    ui.checkbox(&mut c.edge_contacts, "edge-edge contacts");
    ui.add(
        egui::Slider::new(&mut c.mprgp_tolerance, 1e-9..=1e-2)
            .logarithmic(true)
            .text("MPRGP tolerance"),
    );
    ui.add(
        egui::Slider::new(&mut c.mprgp_max_iterations, 10..=5000)
            .logarithmic(true)
            .text("MPRGP max iterations"),
    );
    ui.add(
        egui::Slider::new(&mut c.lcp_max_sweeps, 10..=2000)
            .logarithmic(true)
            .text("LCP max sweeps"),
    );
    ui.add(egui::Slider::new(&mut c.margin, 0.0..=0.05).text("contact margin (m)"));
    ui.add(
        egui::Slider::new(&mut c.restitution_threshold, 0.0..=5.0)
            .text("restitution threshold (m/s)"),
    );
    ui.add(
        egui::Slider::new(&mut c.max_depenetration_speed, 0.0..=20.0)
            .text("max push-out speed (m/s)"),
    );
}

/// [`RestSettings`]: settling and sleeping.
fn rest_settings(ui: &mut egui::Ui, c: &mut RestSettings) {
    ui.add(egui::Slider::new(&mut c.settling_speed, 0.0..=0.2).text("settle below (m/s)"));
    ui.add(egui::Slider::new(&mut c.settling_delay, 0.0..=2.0).text("settle after (s)"));
    ui.add(egui::Slider::new(&mut c.settling_damping, 0.0..=50.0).text("settling damping (1/s)"));
    ui.add(egui::Slider::new(&mut c.sleep_speed, 0.0..=0.2).text("sleep below (m/s)"));
    ui.add(egui::Slider::new(&mut c.sleep_delay, 0.0..=3.0).text("sleep after (s)"));
}

/// Timings over the last seconds, iterations, and the counters of the last step.
fn statistics(ui: &mut egui::Ui, p: &Panel) {
    egui::CollapsingHeader::new("Statistics")
        .default_open(true)
        .show(ui, |ui| {
            ui.label("step time per phase (ms)");
            history_plot(
                ui,
                &p.history,
                &[
                    Series {
                        label: "step",
                        color: Color32::from_gray(235),
                        value: |s| s.step_ms,
                        decimals: 2,
                    },
                    Series {
                        label: "detect",
                        color: Color32::from_rgb(240, 170, 60),
                        value: |s| s.detect_ms,
                        decimals: 2,
                    },
                    Series {
                        label: "local",
                        color: Color32::from_rgb(110, 200, 110),
                        value: |s| s.local_ms,
                        decimals: 2,
                    },
                    Series {
                        label: "global/MPRGP",
                        color: Color32::from_rgb(90, 160, 240),
                        value: |s| s.global_ms,
                        decimals: 2,
                    },
                    Series {
                        label: "LCP",
                        color: Color32::from_rgb(220, 110, 220),
                        value: |s| s.lcp_ms,
                        decimals: 2,
                    },
                    Series {
                        label: "write-back",
                        color: Color32::from_rgb(150, 150, 150),
                        value: |s| s.writeback_ms,
                        decimals: 2,
                    },
                ],
                "ms",
                Scale::FromZero {
                    budget: Some((FRAME_BUDGET_MS, "1/60 s")),
                },
            );
            ui.label("iterations per step");
            history_plot(
                ui,
                &p.history,
                &[
                    Series {
                        label: "MPRGP",
                        color: Color32::from_rgb(90, 160, 240),
                        value: |s| s.mprgp_iterations as f32,
                        decimals: 0,
                    },
                    Series {
                        label: "LCP",
                        color: Color32::from_rgb(220, 110, 220),
                        value: |s| s.lcp_iterations as f32,
                        decimals: 0,
                    },
                ],
                "",
                Scale::FromZero { budget: None },
            );
            ui.label("residuals per step (log10)");
            history_plot(
                ui,
                &p.history,
                &[
                    Series {
                        label: "MPRGP KKT",
                        color: Color32::from_rgb(90, 160, 240),
                        value: |s| s.kkt_residual.max(1e-12).log10(),
                        decimals: 1,
                    },
                    Series {
                        label: "LCP (m/s)",
                        color: Color32::from_rgb(220, 110, 220),
                        value: |s| s.lcp_residual.max(1e-12).log10(),
                        decimals: 1,
                    },
                ],
                "",
                Scale::Fixed(-12.0, 0.0),
            );
            let s = &*p.stats;
            egui::Grid::new("deformable_stats")
                .num_columns(2)
                .striped(true)
                .show(ui, |ui| {
                    let mut row = |name: &str, value: String| {
                        ui.label(name);
                        ui.monospace(value);
                        ui.end_row();
                    };
                    row("bodies", format!("{}", s.bodies));
                    row("frozen bodies", format!("{}", s.frozen_bodies));
                    row("settling bodies", format!("{}", s.settling_bodies));
                    row("sleeping bodies", format!("{}", s.sleeping_bodies));
                    row("inverted tets", format!("{}", s.inverted_tets));
                    row(
                        "contacts (active)",
                        format!("{} ({})", s.constraints, s.active_constraints),
                    );
                    row("soft-soft contacts", format!("{}", s.soft_contacts));
                    row(
                        "islands (largest)",
                        format!("{} ({})", s.islands, s.largest_island),
                    );
                    row(
                        "LCP regions (largest)",
                        format!("{} ({})", s.contact_regions, s.largest_region),
                    );
                    row(
                        "PD its / residual",
                        format!("{} / {:.1e}", s.pd_iterations, s.pd_residual),
                    );
                    row(
                        "MPRGP its / KKT res.",
                        format!("{} / {:.1e}", s.mprgp_iterations, s.kkt_residual),
                    );
                    row("QPs in contact subspace", format!("{}", s.subspace_solves));
                    row(
                        "LCP its / residual",
                        format!("{} / {:.1e} m/s", s.lcp_iterations, s.lcp_residual),
                    );
                    row(
                        "max penetration",
                        format!("{:.2} mm", s.max_penetration * 1e3),
                    );
                    row("step", format!("{:.2} ms", s.step_ms));
                    row("cloth step", format!("{:.2} ms", s.cloth_ms));
                    row("refactor", format!("{:.2} ms", s.refactor_ms));
                    row("panel", format!("{:.3} ms", p.state.panel_ms));
                });
        });
}

fn debug_drawing(ui: &mut egui::Ui, draw: &mut super::DebugDraw) {
    egui::CollapsingHeader::new("Debug drawing").show(ui, |ui| {
        let mut d = *draw;
        ui.checkbox(&mut d.tets, "tet wireframe");
        ui.checkbox(&mut d.surface, "surface (sleeping: blue)");
        ui.checkbox(&mut d.proxies, "collision proxies");
        ui.checkbox(&mut d.contacts, "contacts by region, normals");
        ui.checkbox(&mut d.active_constraints, "active constraints");
        ui.checkbox(&mut d.pins, "pinned vertices");
        ui.checkbox(&mut d.bvh, "BVH boxes");
        ui.add(egui::Slider::new(&mut d.normal_length, 0.01..=0.5).text("normal length (m)"));
        if d != *draw {
            *draw = d;
        }
    });
}

fn tuning_file(ui: &mut egui::Ui, p: &mut Panel) {
    let Some(file) = p.tuning.as_ref() else {
        return;
    };
    let (save, load) = file_buttons(ui, "Tuning file", &file.path, &file.status);
    if save {
        p.save.write(SaveTuning);
    }
    if load {
        p.load.write(LoadTuning);
    }
}

/// A collapsible section with a file's path, Save and Load buttons and the last outcome;
/// returns which button was clicked.
fn file_buttons(
    ui: &mut egui::Ui,
    header: &str,
    path: &std::path::Path,
    status: &str,
) -> (bool, bool) {
    let (mut save, mut load) = (false, false);
    egui::CollapsingHeader::new(header)
        .default_open(true)
        .show(ui, |ui| {
            ui.label(RichText::new(path.display().to_string()).monospace());
            ui.horizontal(|ui| {
                save = ui.button("Save").clicked();
                load = ui.button("Load").clicked();
            });
            if !status.is_empty() {
                ui.label(RichText::new(status).small());
            }
        });
    (save, load)
}

/// Whether a body of `material`, `height` (m) tall under `gravity` (m/s^2), is past the
/// envelope where a hard landing squashes it far beyond its elastic range: its own weight's
/// stress `rho g h` over 0.4 of its Young's modulus, with no compression limit. The 10 kPa,
/// 0.5 m cube of `tests/sim_rest.rs` (0.49) kept 8.9 % of its volume landing from 1 m, and 27 %
/// with a limit; a 0.6 m jelly cube is at 0.29, `jelly_drop`'s 8 kPa slab (0.3 m) at 0.37.
fn very_soft_for_its_size(material: &SoftMaterial, height: f64, gravity: bevy::math::Vec3) -> bool {
    let limited = material.strain_limits.is_some_and(|l| l.min_stretch > 0.0);
    let stress = material.density as f64 * gravity.length() as f64 * height;
    !limited && stress > 0.4 * material.youngs_modulus as f64
}

/// The simulation state's file: save and load buttons, and the last outcome.
fn state_file(ui: &mut egui::Ui, p: &mut Panel) {
    let Some(file) = p.state_file.as_ref() else {
        return;
    };
    let (save, load) = file_buttons(ui, "Saved state", &file.path, &file.status);
    if save {
        p.save_state.write(SaveState);
    }
    if load {
        p.load_state.write(LoadState);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::StrainLimits;

    #[test]
    fn very_soft_tall_bodies_without_a_compression_limit_are_flagged() {
        let g = bevy::math::Vec3::new(0.0, -9.81, 0.0);
        let soft = SoftMaterial::JELLY.with_youngs_modulus(1e4);
        assert!(very_soft_for_its_size(&soft, 0.5, g));
        assert!(!very_soft_for_its_size(&soft, 0.3, g));
        assert!(!very_soft_for_its_size(&SoftMaterial::JELLY, 0.6, g));
        let limited = SoftMaterial {
            strain_limits: Some(StrainLimits {
                min_stretch: 0.5,
                max_stretch: 100.0,
                stiffness_scale: 10.0,
            }),
            ..soft
        };
        assert!(!very_soft_for_its_size(&limited, 0.5, g));
        assert!(!very_soft_for_its_size(&soft, 0.5, bevy::math::Vec3::ZERO));
    }
}
