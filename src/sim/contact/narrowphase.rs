//! Proxy points against obstacles.

use super::obstacle::ObstacleCollider;
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
/// is reported (decoupling picks one later). `slack` is each proxy's allowed penetration (m,
/// empty for none; see [`with_slack`]).
pub fn detect_contacts(
    proxies: &[EmbeddedPoint],
    x: &[Vec3],
    obstacles: &[ObstacleCollider],
    margin: f64,
    slack: &[f64],
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
            if let Some((olo, ohi)) = &obounds
                && (0..3).any(|k| q[k] + margin < olo[k] || q[k] - margin > ohi[k])
            {
                continue;
            }
            if let Some(c) = obstacle.query(*q, margin) {
                let contact = Contact {
                    proxy: pi as u32,
                    obstacle: oi as u32,
                    point: c.point,
                    normal: c.normal,
                    depth: c.depth,
                };
                if let Some(c) = with_slack(contact, slack, margin) {
                    out.push(c);
                }
            }
        }
    }
}

/// Speculative contacts for one step (proxies moving from `x_start` to the prediction `y`):
/// each proxy is tested at its *start* position, with the margin widened by how far it moves,
/// and keeps the contact when its predicted position comes within `margin` of the contact
/// plane (`depth` is then the predicted penetration of that plane). The constraint plane comes
/// from where the proxy was, not from where it would end, so a fast proxy cannot skip through a
/// thin obstacle or be pushed out of the wrong face of a box it predicted itself deep inside.
/// `slack` as in [`detect_contacts`].
#[allow(clippy::too_many_arguments)]
pub fn detect_contacts_swept(
    proxies: &[EmbeddedPoint],
    x_start: &[Vec3],
    y: &[Vec3],
    obstacles: &[ObstacleCollider],
    margin: f64,
    slack: &[f64],
    start: &mut Vec<Vec3>,
    end: &mut Vec<Vec3>,
    out: &mut Vec<Contact>,
) {
    start.clear();
    start.extend(proxies.iter().map(|p| p.position(x_start)));
    end.clear();
    end.extend(proxies.iter().map(|p| p.position(y)));
    let (lo0, hi0) = bounds(start);
    let (lo1, hi1) = bounds(end);
    let (lo, hi) = (lo0.inf(&lo1), hi0.sup(&hi1));
    for (oi, obstacle) in obstacles.iter().enumerate() {
        if !obstacle.may_touch(&lo, &hi, margin) {
            continue;
        }
        let obounds = obstacle.bounds();
        for (pi, (p0, p1)) in start.iter().zip(end.iter()).enumerate() {
            let reach = margin + (p1 - p0).norm();
            if let Some((olo, ohi)) = &obounds
                && (0..3).any(|k| {
                    p0[k].min(p1[k]) - margin > ohi[k] || p0[k].max(p1[k]) + margin < olo[k]
                })
            {
                continue;
            }
            let Some(c) = obstacle.query(*p0, reach) else {
                continue;
            };
            let predicted = c.normal.dot(&(p1 - c.point));
            if predicted >= margin {
                continue;
            }
            let contact = Contact {
                proxy: pi as u32,
                obstacle: oi as u32,
                point: c.point,
                normal: c.normal,
                depth: -predicted,
            };
            if let Some(c) = with_slack(contact, slack, margin) {
                out.push(c);
            }
        }
    }
}

/// A contact (found within `margin`, m) of a proxy allowed `slack[proxy]` metres into the
/// obstacle (none where `slack` is empty or zero): the contact plane moved that far into the
/// obstacle along the normal, and the contact kept only if the proxy is still within `margin`
/// of the moved plane. A cage vertex of a body that collides by its drawn surface has a slack
/// (the world's `drawn_collision_points`): it collides only once it is deeper than any drawn
/// point outside the obstacle could leave it.
pub fn with_slack(mut contact: Contact, slack: &[f64], margin: f64) -> Option<Contact> {
    let s = slack.get(contact.proxy as usize).copied().unwrap_or(0.0);
    if s > 0.0 {
        contact.point -= s * contact.normal;
        contact.depth -= s;
        return (contact.depth > -margin).then_some(contact);
    }
    Some(contact)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::contact::obstacle::ObstacleShape;

    #[test]
    fn a_point_with_slack_collides_only_deeper_than_its_slack() {
        let floor = [ObstacleCollider::halfspace(Vec3::y()).unwrap()];
        let proxies = [EmbeddedPoint::vertex(0), EmbeddedPoint::vertex(1)];
        // Both points 3 cm deep; the second may go 5 cm deep.
        let x = [Vec3::new(0.0, -0.03, 0.0), Vec3::new(1.0, -0.03, 0.0)];
        let slack = [0.0, 0.05];
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        detect_contacts(&proxies, &x, &floor, 0.01, &slack, &mut scratch, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].proxy, 0);
        // 5.5 cm deep: 5 mm past its slack, against the floor moved 5 cm down.
        let x = [Vec3::new(0.0, 0.5, 0.0), Vec3::new(1.0, -0.055, 0.0)];
        out.clear();
        detect_contacts(&proxies, &x, &floor, 0.01, &slack, &mut scratch, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].proxy, 1);
        assert!((out[0].depth - 0.005).abs() < 1e-12);
        assert!((out[0].point.y + 0.05).abs() < 1e-12);
        // Swept: the same rule on the predicted position.
        let start = [Vec3::new(0.0, 0.5, 0.0), Vec3::new(1.0, 0.02, 0.0)];
        let (mut a, mut b) = (Vec::new(), Vec::new());
        out.clear();
        detect_contacts_swept(
            &proxies, &start, &x, &floor, 0.01, &slack, &mut a, &mut b, &mut out,
        );
        assert_eq!(out.len(), 1);
        assert!((out[0].depth - 0.005).abs() < 1e-12);
    }

    #[test]
    fn a_fast_point_gets_the_face_it_comes_from() {
        // A thin slab (top at y = 0.05) and a point that would end below it in one step.
        let slab = ObstacleCollider::new(ObstacleShape::Cuboid {
            half_extents: Vec3::new(1.0, 0.05, 1.0),
        })
        .unwrap();
        let proxies = [EmbeddedPoint::vertex(0)];
        let (x0, y) = ([Vec3::new(0.1, 0.3, 0.0)], [Vec3::new(0.1, -0.2, 0.0)]);
        let (mut a, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
        // At the prediction alone the point is outside (below): no contact at all.
        detect_contacts(
            &proxies,
            &y,
            std::slice::from_ref(&slab),
            0.01,
            &[],
            &mut a,
            &mut out,
        );
        assert!(out.is_empty());
        detect_contacts_swept(
            &proxies,
            &x0,
            &y,
            std::slice::from_ref(&slab),
            0.01,
            &[],
            &mut a,
            &mut b,
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert!(
            (out[0].normal - Vec3::y()).norm() < 1e-6,
            "{:?}",
            out[0].normal
        );
        assert!((out[0].depth - 0.25).abs() < 1e-6);
        // A point moving away, or parallel above the margin, gets nothing.
        out.clear();
        let y_up = [Vec3::new(0.1, 0.6, 0.0)];
        detect_contacts_swept(
            &proxies,
            &x0,
            &y_up,
            std::slice::from_ref(&slab),
            0.01,
            &[],
            &mut a,
            &mut b,
            &mut out,
        );
        let y_side = [Vec3::new(0.6, 0.3, 0.0)];
        detect_contacts_swept(
            &proxies,
            &x0,
            &y_side,
            std::slice::from_ref(&slab),
            0.01,
            &[],
            &mut a,
            &mut b,
            &mut out,
        );
        assert!(out.is_empty());
    }
}
