//! Contacts to decoupled constraint rows.

use super::narrowphase::Contact;
use crate::sim::embed::EmbeddedPoint;
use crate::sim::math::Vec3;
use crate::sim::pd::PINNED;
use crate::sim::qp::ConstraintRow;
use crate::sim::qp::groups::MAX_ROWS_PER_VERTEX;

/// Marks an unknown used by a multi-vertex (embedded proxy) row: no other row may touch it.
const EXCLUSIVE: u8 = u8::MAX;

/// Rows over the free unknowns of one body and, per row, the contact it came from.
#[derive(Debug, Clone, Default)]
pub struct DecoupledRows {
    /// The rows `J x >= c` over unknown indices.
    pub rows: Vec<ConstraintRow>,
    /// For each row, its contact.
    pub contacts: Vec<Contact>,
    /// Per unknown: how many one-vertex rows use it, or [`EXCLUSIVE`].
    uses: Vec<u8>,
    /// Per unknown: its one-vertex rows (first `uses` entries).
    vertex_rows: Vec<[u32; MAX_ROWS_PER_VERTEX]>,
}

impl DecoupledRows {
    /// Clears for a body with `unknowns` free vertices.
    pub fn reset(&mut self, unknowns: usize) {
        self.rows.clear();
        self.contacts.clear();
        self.uses.clear();
        self.uses.resize(unknowns, 0);
        self.vertex_rows.clear();
        self.vertex_rows.resize(unknowns, [0; MAX_ROWS_PER_VERTEX]);
    }

    /// Whether a one-vertex row with this normal against this obstacle may join unknown `d`:
    /// not claimed by an embedded row, fewer than [`MAX_ROWS_PER_VERTEX`] rows, no row against
    /// the same obstacle, and a normal not (anti)parallel to an existing one's (which would make
    /// the corner's `J J'` block singular).
    fn accepts_corner(&self, d: usize, normal: &Vec3, obstacle: u32) -> bool {
        let used = self.uses[d];
        if used == EXCLUSIVE || used as usize >= MAX_ROWS_PER_VERTEX {
            return false;
        }
        self.vertex_rows[d][..used as usize].iter().all(|&r| {
            let c = &self.contacts[r as usize];
            c.obstacle != obstacle && c.normal.dot(normal).abs() < 0.95
        })
    }
}

/// Adds rows for `contacts`, deepest first (ties by proxy then obstacle index): collision
/// decoupling. A proxy that is a single vertex may collect up to [`MAX_ROWS_PER_VERTEX`] rows
/// against different obstacles (a corner); a proxy embedded in a tet takes its free vertices
/// exclusively, so it is skipped if any of them is already used. Pinned vertices' terms move to
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
    for c in contacts.iter() {
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
        let j = out.rows.len() as u32;
        if row.len == 1 {
            let d = row.vertices[0] as usize;
            if !out.accepts_corner(d, &c.normal, c.obstacle) {
                continue;
            }
            let u = out.uses[d] as usize;
            out.vertex_rows[d][u] = j;
            out.uses[d] += 1;
        } else {
            if (0..row.len as usize).any(|e| out.uses[row.vertices[e] as usize] != 0) {
                continue;
            }
            for e in 0..row.len as usize {
                out.uses[row.vertices[e] as usize] = EXCLUSIVE;
            }
        }
        out.rows.push(row);
        out.contacts.push(*c);
        added += 1;
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contact(proxy: u32, obstacle: u32, normal: Vec3, depth: f64) -> Contact {
        Contact {
            proxy,
            obstacle,
            point: Vec3::zeros(),
            normal,
            depth,
        }
    }

    #[test]
    fn embedded_proxies_take_their_vertices_exclusively() {
        let proxies = [
            EmbeddedPoint::vertex(0),
            EmbeddedPoint {
                vertices: [0, 1, 2, 3],
                weights: [0.25; 4],
            },
            EmbeddedPoint::vertex(2),
        ];
        let mut contacts = vec![
            contact(0, 0, Vec3::y(), 0.1),
            contact(1, 0, Vec3::y(), 0.3),
            contact(2, 0, Vec3::y(), 0.05),
        ];
        let dof = [0, 1, 2, PINNED];
        let x = vec![Vec3::new(0.0, -1.0, 0.0); 4];
        let mut rows = DecoupledRows::default();
        rows.reset(3);
        let added = build_rows(&mut contacts, &proxies, &dof, &x, &mut rows);
        // The embedded proxy is deepest and takes vertices 0, 1, 2: the others are dropped.
        assert_eq!(added, 1);
        assert_eq!(rows.contacts[0].proxy, 1);
        assert_eq!(rows.rows[0].len, 3);
        // The pinned vertex 3 moved to the right-hand side: 0 - 0.25 * (-1).
        assert!((rows.rows[0].rhs - 0.25).abs() < 1e-15);
    }

    #[test]
    fn a_vertex_in_a_corner_keeps_one_row_per_obstacle() {
        let proxies = [EmbeddedPoint::vertex(0)];
        let mut contacts = vec![
            contact(0, 0, Vec3::y(), 0.01),
            contact(0, 1, Vec3::x(), 0.02),
            contact(0, 1, Vec3::x(), 0.005),
            contact(0, 2, Vec3::new(0.0, 0.999, 0.0447).normalize(), 0.001),
        ];
        let mut rows = DecoupledRows::default();
        rows.reset(1);
        let added = build_rows(&mut contacts, &proxies, &[0], &[Vec3::zeros()], &mut rows);
        // Floor and wall kept; the second wall contact (same obstacle) and the near-parallel
        // third normal are dropped.
        assert_eq!(added, 2);
        assert_eq!(rows.contacts[0].obstacle, 1);
        assert_eq!(rows.contacts[1].obstacle, 0);
    }
}
