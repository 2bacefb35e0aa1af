//! Proxy points against obstacles.

use super::obstacle::Obstacle;
use crate::sim::embed::EmbeddedPoint;
use crate::sim::math::Vec3;
use crate::sim::mesh::bounds;

/// One proxy point touching (or within the margin of) one obstacle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contact {
    /// Index of the proxy point in the body's proxy list.
    pub proxy: u32,
    /// Index of the obstacle.
    pub obstacle: u32,
    /// Closest point on the obstacle surface (m).
    pub point: Vec3,
    /// Unit normal out of the obstacle.
    pub normal: Vec3,
    /// Penetration depth (m), negative when separated but within the margin.
    pub depth: f64,
}

/// Appends to `out` the contacts of the proxies at vertex positions `x` with the obstacles, for
/// proxies inside an obstacle or closer than `margin` (m) to it. Only obstacles whose bounds
/// overlap the proxies' bounds are tested. Where a proxy touches several obstacles, every contact
/// is reported (decoupling picks one later). `skip` marks proxies to leave out (may be empty).
pub fn detect_contacts(
    proxies: &[EmbeddedPoint],
    x: &[Vec3],
    obstacles: &[Obstacle],
    margin: f64,
    skip: &[bool],
    scratch: &mut Vec<Vec3>,
    out: &mut Vec<Contact>,
) {
    scratch.clear();
    scratch.extend(proxies.iter().map(|p| p.position(x)));
    let (lo, hi) = bounds(scratch);
    for (oi, obstacle) in obstacles.iter().enumerate() {
        if !obstacle.may_touch(&lo, &hi, margin) {
            continue;
        }
        let obounds = obstacle.bounds();
        for (pi, q) in scratch.iter().enumerate() {
            if skip.get(pi).copied().unwrap_or(false) {
                continue;
            }
            if let Some((olo, ohi)) = &obounds
                && (0..3).any(|k| q[k] + margin < olo[k] || q[k] - margin > ohi[k])
            {
                continue;
            }
            if let Some(c) = obstacle.query(*q, margin) {
                out.push(Contact {
                    proxy: pi as u32,
                    obstacle: oi as u32,
                    point: c.point,
                    normal: c.normal,
                    depth: c.depth,
                });
            }
        }
    }
}
