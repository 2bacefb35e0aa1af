//! A cloth against itself (`ClothSystem::self_collision`): a sheet dropped onto a pinned sheet
//! rests a thickness above it; a tall strip falling onto the floor heaps up in folds with no
//! triangle passing through another, where without self-collision it crosses itself; a sheet
//! draped over a ball folds round it without crossing itself or entering the ball.

mod common;

use std::sync::Arc;

use bevy_deformable::sim::cloth::{ClothMaterial, ClothMesh, ClothSystem};
use bevy_deformable::sim::{ObstacleCollider, Vec3};

use common::self_crossings;

const DT: f64 = 1.0 / 60.0;
const GRAVITY: Vec3 = Vec3::new(0.0, -9.81, 0.0);

fn cloth(mesh: ClothMesh, self_collision: bool) -> ClothSystem {
    let mut cloth = ClothSystem::new(Arc::new(mesh), ClothMaterial::COTTON, DT).unwrap();
    cloth.self_collision = self_collision;
    cloth
}

#[test]
fn a_sheet_dropped_onto_a_pinned_sheet_rests_a_thickness_above_it() {
    // Two 0.5 m sheets in one cloth, the upper 3 cm above the lower and shifted off its
    // vertices; the lower pinned where it is.
    let sheet = ClothMesh::rectangle(0.5, 0.5, 8, 8).unwrap();
    let n = sheet.vertex_count();
    let mut positions = sheet.rest_positions().to_vec();
    positions.extend(
        sheet
            .rest_positions()
            .iter()
            .map(|p| p + Vec3::new(0.013, 0.03, 0.017)),
    );
    let mut triangles: Vec<[usize; 3]> = sheet
        .triangles()
        .iter()
        .map(|t| t.map(|v| v as usize))
        .collect();
    triangles.extend(sheet.triangles().iter().map(|t| t.map(|v| v as usize + n)));
    let mut cloth = cloth(ClothMesh::new(positions, &triangles).unwrap(), true);
    for v in 0..n {
        let at = cloth.positions()[v];
        cloth.pin(v, Some(at)).unwrap();
    }
    let thickness = ClothMaterial::COTTON.thickness;
    for _ in 0..120 {
        cloth.step(GRAVITY, Vec3::zeros()).unwrap();
        assert_eq!(
            self_crossings(cloth.positions(), cloth.mesh().triangles()),
            0
        );
    }
    let upper = &cloth.positions()[n..];
    let (lowest, highest) = upper.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
        (lo.min(p.y), hi.max(p.y))
    });
    // On the lower sheet, its vertices a thickness from the triangles below (a few per cent
    // less where a lower vertex meets an upper triangle between the upper's vertices).
    assert!(
        lowest > 0.9 * thickness && highest < 2.0 * thickness,
        "the upper sheet lies {lowest}..{highest} m above the lower"
    );
    let fastest = cloth.velocities()[n..]
        .iter()
        .map(|v| v.norm())
        .fold(0.0, f64::max);
    assert!(fastest < 0.01, "still moving at {fastest} m/s");
    let (points, edges) = cloth.self_contact_count();
    assert!(
        points > 0 && edges > 0,
        "{points} and {edges} self-contact pairs"
    );
}

/// A 0.5 x 2 m strip hung upright 5 cm above the floor, slightly wavy, let go: it buckles and
/// heaps onto the floor in folds. The most triangle pairs crossing at once over 4 s, the
/// fastest vertex at the end, and the lowest vertex over the whole fall.
fn strip_falls(self_collision: bool) -> (usize, f64, f64) {
    let mesh = ClothMesh::rectangle(0.5, 2.0, 8, 32)
        .unwrap()
        .mapped(|p| Vec3::new(p.x, p.z + 1.05, 0.01 * (7.0 * p.z).sin()))
        .unwrap();
    let mut cloth = cloth(mesh, self_collision);
    let floor = [ObstacleCollider::halfspace(Vec3::y()).unwrap()];
    let (mut worst, mut lowest) = (0, f64::INFINITY);
    for step in 0..240 {
        cloth.step_among(GRAVITY, Vec3::zeros(), &floor).unwrap();
        if step % 4 == 3 {
            worst = worst.max(self_crossings(cloth.positions(), cloth.mesh().triangles()));
        }
        lowest = cloth.positions().iter().map(|p| p.y).fold(lowest, f64::min);
    }
    let fastest = cloth
        .velocities()
        .iter()
        .map(|v| v.norm())
        .fold(0.0, f64::max);
    (worst, fastest, lowest)
}

#[test]
fn a_strip_heaped_onto_the_floor_does_not_cross_itself() {
    let thickness = ClothMaterial::COTTON.thickness;
    let (crossings, fastest, lowest) = strip_falls(true);
    assert_eq!(crossings, 0, "the heap crossed itself");
    assert!(lowest >= thickness - 1e-9, "a vertex at {lowest} m");
    assert!(fastest < 0.05, "the heap still moves at {fastest} m/s");
    // Without self-collision the same fall passes the strip through itself.
    let (crossings, _, _) = strip_falls(false);
    assert!(
        crossings > 10,
        "{crossings} crossings without self-collision"
    );
}

/// A 1 m cotton sheet of 24 x 24 cells dropped onto a 0.3 m ball over a floor: the most
/// triangle pairs crossing at once over 3 s, and the nearest vertex to the ball's centre.
fn sheet_drapes(self_collision: bool) -> (usize, f64) {
    let radius = 0.3;
    let obstacles = [
        ObstacleCollider::ball(radius).unwrap(),
        ObstacleCollider::halfspace(Vec3::y())
            .unwrap()
            .with_position(Vec3::new(0.0, -radius, 0.0)),
    ];
    let mesh = ClothMesh::rectangle(1.0, 1.0, 24, 24)
        .unwrap()
        .mapped(|p| p + Vec3::new(0.0, 0.4, 0.0))
        .unwrap();
    let mut cloth = cloth(mesh, self_collision);
    let (mut worst, mut nearest) = (0, f64::INFINITY);
    for step in 0..180 {
        cloth
            .step_among(GRAVITY, Vec3::zeros(), &obstacles)
            .unwrap();
        if step % 6 == 5 {
            worst = worst.max(self_crossings(cloth.positions(), cloth.mesh().triangles()));
        }
        nearest = cloth
            .positions()
            .iter()
            .map(|p| p.norm())
            .fold(nearest, f64::min);
    }
    (worst, nearest)
}

#[test]
fn a_sheet_draped_over_a_ball_folds_round_it_without_crossing_itself() {
    let (crossings, nearest) = sheet_drapes(true);
    assert_eq!(crossings, 0, "the drape crossed itself");
    assert!(
        nearest >= 0.3 + ClothMaterial::COTTON.thickness - 1e-9,
        "a vertex {nearest} m from the ball's centre"
    );
    // The sheet must shorten its hoops to wrap the ball: without self-collision its folds pass
    // through each other.
    let (crossings, _) = sheet_drapes(false);
    assert!(
        crossings > 100,
        "{crossings} crossings without self-collision"
    );
}
