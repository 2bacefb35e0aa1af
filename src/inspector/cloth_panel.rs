//! The panel's cloth section: the wind, and per cloth its preset, iterations, contacts and
//! error. Edits are written back only where a value changed (an edited `DeformableCloth` is
//! rebuilt).

use bevy::ecs::entity::Entity;
use bevy::prelude::{Mut, Name};
use bevy_egui::egui::{self, RichText};

use crate::cloth::{ClothPreset, ClothState, ClothWind, DeformableCloth};

/// The cloth section, if the scene has any cloth.
pub(super) fn cloth_section<'a>(
    ui: &mut egui::Ui,
    wind: &mut Mut<ClothWind>,
    cloths: impl Iterator<
        Item = (
            Entity,
            Option<&'a Name>,
            Mut<'a, DeformableCloth>,
            &'a ClothState,
        ),
    >,
) {
    let mut rows: Vec<_> = cloths.collect();
    if rows.is_empty() {
        return;
    }
    rows.sort_by_key(|r| r.0);
    egui::CollapsingHeader::new(format!("Cloth ({})", rows.len())).show(ui, |ui| {
        let mut w = **wind;
        ui.add(egui::Slider::new(&mut w.velocity.x, -15.0..=15.0).text("wind x (m/s)"));
        ui.add(egui::Slider::new(&mut w.velocity.z, -15.0..=15.0).text("wind z (m/s)"));
        ui.add(egui::Slider::new(&mut w.gustiness, 0.0..=1.0).text("gustiness"));
        ui.add(egui::Slider::new(&mut w.gust_period, 0.5..=10.0).text("gust period (s)"));
        if w != **wind {
            **wind = w;
        }
        for (entity, name, mut cloth, state) in rows {
            ui.separator();
            let label = name.map_or_else(|| format!("{entity}"), |n| n.as_str().to_owned());
            ui.label(format!("{label}: {} contacts", state.contacts()));
            let mut edited = cloth.clone();
            egui::ComboBox::from_id_salt(("cloth preset", entity))
                .selected_text(edited.preset.name())
                .show_ui(ui, |ui| {
                    for preset in ClothPreset::ALL {
                        ui.selectable_value(&mut edited.preset, preset, preset.name());
                    }
                });
            ui.add(egui::Slider::new(&mut edited.iterations, 1..=40).text("iterations"));
            ui.add(
                egui::Slider::new(&mut edited.chebyshev_rho, 0.0..=0.99)
                    .text("Chebyshev rho (in the air)"),
            );
            ui.checkbox(&mut edited.self_collision, "self-collision");
            if edited != *cloth {
                *cloth = edited;
            }
            if let Some(error) = state.error() {
                ui.label(RichText::new(error.to_string()).color(egui::Color32::LIGHT_RED));
            }
        }
    });
}
