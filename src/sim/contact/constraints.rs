//! Contacts to decoupled constraint rows.

use super::narrowphase::Contact;
use crate::sim::embed::EmbeddedPoint;
use crate::sim::math::Vec3;
use crate::sim::pd::PINNED;
use crate::sim::qp::ConstraintRow;

/// Rows over the free unknowns of one body and, per row, the contact it came from.
#[derive(Debug, Clone, Default)]
pub struct DecoupledRows {
    /// The rows `J x >= c` over unknown indices.
    pub rows: Vec<ConstraintRow>,
    /// For each row, its contact.
    pub contacts: Vec<Contact>,
    /// Per unknown: whether a row already uses it.
    used: Vec<bool>,
    /// Per proxy: whether a row already constrains it.
    proxy_used: Vec<bool>,
}

impl DecoupledRows {
    /// Clears for a body with `unknowns` free vertices and `proxies` proxy points.
    pub fn reset(&mut self, unknowns: usize, proxies: usize) {
        self.rows.clear();
        self.contacts.clear();
        self.used.clear();
        self.used.resize(unknowns, false);
        self.proxy_used.clear();
        self.proxy_used.resize(proxies, false);
    }

    /// Per proxy: whether it already has a row.
    pub fn constrained_proxies(&self) -> &[bool] {
        &self.proxy_used
    }
}

/// Adds rows for `contacts`, deepest first (ties by proxy then obstacle index), skipping any whose
/// free vertices are already used by a row: collision decoupling. Pinned vertices' terms move to
/// the right-hand side with their positions `x`. Returns the number of rows added.
pub fn build_rows(
    contacts: &mut [Contact],
    proxies: &[EmbeddedPoint],
    dof: &[u32],
    x: &[Vec3],
    out: &mut DecoupledRows,
) -> usize {
    contacts.sort_unstable_by(|a, b| {
        b.depth
            .total_cmp(&a.depth)
            .then(a.proxy.cmp(&b.proxy))
            .then(a.obstacle.cmp(&b.obstacle))
    });
    let mut added = 0;
    'contacts: for c in contacts.iter() {
        if out.proxy_used[c.proxy as usize] {
            continue;
        }
        let proxy = &proxies[c.proxy as usize];
        let mut row = ConstraintRow::single(0, Vec3::zeros(), c.normal.dot(&c.point));
        row.len = 0;
        for k in 0..4 {
            let w = proxy.weights[k];
            // Round-off leaves ~1e-17 weights on vertices off the proxy's face: they must not
            // claim a vertex under decoupling.
            if w.abs() < 1e-12 {
                continue;
            }
            let v = proxy.vertices[k] as usize;
            let d = dof[v];
            if d == PINNED {
                row.rhs -= w * c.normal.dot(&x[v]);
                continue;
            }
            if out.used[d as usize] {
                continue 'contacts;
            }
            if let Some(e) = (0..row.len as usize).find(|&e| row.vertices[e] == d) {
                row.coeffs[e] += w * c.normal;
            } else {
                row.vertices[row.len as usize] = d;
                row.coeffs[row.len as usize] = w * c.normal;
                row.len += 1;
            }
        }
        if row.len == 0 || !(row.norm_squared() > 1e-20) {
            continue;
        }
        for e in 0..row.len as usize {
            out.used[row.vertices[e] as usize] = true;
        }
        out.proxy_used[c.proxy as usize] = true;
        out.rows.push(row);
        out.contacts.push(*c);
        added += 1;
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoupling_keeps_the_deepest_contact_per_vertex() {
        let proxies = [
            EmbeddedPoint::vertex(0),
            EmbeddedPoint {
                vertices: [0, 1, 2, 3],
                weights: [0.25; 4],
            },
            EmbeddedPoint::vertex(2),
        ];
        let mk = |proxy, depth| Contact {
            proxy,
            obstacle: 0,
            point: Vec3::zeros(),
            normal: Vec3::y(),
            depth,
        };
        let mut contacts = vec![mk(0, 0.1), mk(1, 0.3), mk(2, 0.05)];
        let dof = [0, 1, 2, PINNED];
        let x = vec![Vec3::new(0.0, -1.0, 0.0); 4];
        let mut rows = DecoupledRows::default();
        rows.reset(3, 3);
        let added = build_rows(&mut contacts, &proxies, &dof, &x, &mut rows);
        // The embedded proxy is deepest and takes vertices 0, 1, 2: the others are dropped.
        assert_eq!(added, 1);
        assert_eq!(rows.contacts[0].proxy, 1);
        assert_eq!(rows.rows[0].len, 3);
        // The pinned vertex 3 moved to the right-hand side: 0 - 0.25 * (-1).
        assert!((rows.rows[0].rhs - 0.25).abs() < 1e-15);
    }
}
