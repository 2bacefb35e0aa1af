//! A small line plot of the step history drawn with egui's painter (no plotting dependency).

use bevy_egui::egui::{self, Align2, Color32, FontId, Pos2, Sense, Stroke, Vec2};

use crate::history::{StepHistory, StepSample};

/// One plotted quantity.
pub(super) struct Series {
    /// Legend text.
    pub label: &'static str,
    /// Line colour.
    pub color: Color32,
    /// The value of a sample.
    pub value: fn(&StepSample) -> f32,
    /// Decimals shown in the legend.
    pub decimals: usize,
}

/// The vertical axis of a plot.
pub(super) enum Scale<'a> {
    /// From 0 to the largest value, and to `budget` (drawn as a labelled dashed line) if given.
    FromZero {
        /// A reference value and its label.
        budget: Option<(f32, &'a str)>,
    },
    /// A fixed range `(bottom, top)`.
    Fixed(f32, f32),
}

/// Plots `series` over the history, oldest at the left.
pub(super) fn history_plot(
    ui: &mut egui::Ui,
    history: &StepHistory,
    series: &[Series],
    unit: &str,
    scale: Scale<'_>,
) {
    let width = ui.available_width().max(120.0);
    let (rect, _) = ui.allocate_exact_size(Vec2::new(width, 110.0), Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 3.0, Color32::from_gray(24));
    let (budget, bottom, top) = match scale {
        Scale::FromZero { budget } => {
            let top = series
                .iter()
                .map(|s| history.max_of(s.value))
                .fold(budget.map_or(0.0, |b| b.0 * 1.15), f32::max)
                .max(1e-6);
            (budget, 0.0, top)
        }
        Scale::Fixed(bottom, top) => (None, bottom, top.max(bottom + 1e-6)),
    };
    let capacity = history.capacity().max(2) as f32 - 1.0;
    let offset = history.capacity() - history.samples().len();
    let to_screen = |i: usize, v: f32| {
        Pos2::new(
            rect.left() + rect.width() * (offset + i) as f32 / capacity,
            rect.bottom() - rect.height() * ((v - bottom) / (top - bottom)).clamp(0.0, 1.0),
        )
    };
    if let Some((value, label)) = budget {
        let y = to_screen(0, value).y;
        painter.extend(egui::Shape::dashed_line(
            &[Pos2::new(rect.left(), y), Pos2::new(rect.right(), y)],
            Stroke::new(1.0, Color32::from_rgb(230, 80, 70)),
            6.0,
            4.0,
        ));
        painter.text(
            Pos2::new(rect.right() - 4.0, y - 2.0),
            Align2::RIGHT_BOTTOM,
            label,
            FontId::monospace(10.0),
            Color32::from_rgb(230, 80, 70),
        );
    }
    for s in series {
        let points: Vec<Pos2> = history
            .samples()
            .enumerate()
            .map(|(i, sample)| to_screen(i, (s.value)(sample)))
            .collect();
        if points.len() > 1 {
            painter.add(egui::Shape::line(points, Stroke::new(1.5, s.color)));
        }
    }
    painter.text(
        rect.left_top() + Vec2::new(4.0, 2.0),
        Align2::LEFT_TOP,
        format!("{top:.1} {unit}"),
        FontId::monospace(10.0),
        Color32::from_gray(180),
    );
    if bottom != 0.0 {
        painter.text(
            rect.left_bottom() + Vec2::new(4.0, -2.0),
            Align2::LEFT_BOTTOM,
            format!("{bottom:.1} {unit}"),
            FontId::monospace(10.0),
            Color32::from_gray(180),
        );
    }
    ui.horizontal_wrapped(|ui| {
        for s in series {
            let latest = history.latest().map_or(0.0, s.value);
            ui.colored_label(s.color, format!("{} {:.*}", s.label, s.decimals, latest));
        }
    });
}
