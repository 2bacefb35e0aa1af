//! Contacts to decoupled constraint rows (collision decoupling, section 5 of
//! Li et al. 2015).
//!
//! A contact is a linear inequality `sum_k a_k . x_k >= c` over a few vertices (eq. (8)): a proxy
//! against an obstacle plane (one vertex, or the four of the tet an embedded proxy sits in), or a
//! surface vertex against a triangle of a soft body (four vertices, two bodies). MPRGP needs the
//! rows *decoupled* — `J J'` block diagonal — so [`RowDecoupler`] admits rows one by one, deepest
//! first, under these rules:
//!
//! - a vertex may carry up to `MAX_ROWS_PER_VERTEX` (three) one-vertex rows against different
//!   obstacles whose normals are not (anti)parallel (a corner: floor and walls);
//! - a row over several vertices takes them exclusively;
//! - an obstacle row that would need a taken vertex is dropped for this iteration (the paper's
//!   rule, made deterministic by the depth order);
//! - a soft-soft row instead *holds* its taken vertices: their terms move to the right-hand side
//!   at their current positions, so the row constrains its remaining vertices against the
//!   others' present positions (a term may also ask to be held outright). Dense soft-soft
//!   contact (a face resting on a face, where every triangle shares its corners with six
//!   others) keeps a row for every vertex this way, where dropping would lose two of three.
//!   Rows are rebuilt from the current positions at every PD iteration, so a held vertex's row
//!   follows it.
//!
//! Where the QP is solved in the contact subspace (its dual, an LCP that takes any rows), the
//! rows need not be decoupled: reset with `coupled` set, an obstacle row over several vertices
//! (an embedded proxy's four) is admitted whatever other rows use its vertices, and claims none
//! of them, up to [`MAX_COUPLED_ROWS_PER_TET`] rows over the same vertices against the same
//! obstacle (the deepest, as rows come deepest first). Decoupled, the deepest embedded point
//! takes its tet's four vertices and its neighbours' rows are dropped: a drawn surface in a
//! coarse cage then never converges (the bunny of `tests/sim_drawn.rs` in a 7-cell cage: relative
//! residual 0.4-0.7 after every step's iterations, drawn points 1-2.5 mm below the floor;
//! coupled: 8e-4, none below). Against one obstacle face the rows of one tet constrain four
//! numbers (its vertices' heights over the face), so few of them bind, while a detailed drawn
//! surface puts dozens of points in each cage tet near a floor. Measured on that bunny (180
//! steps resting, release, every point in the margin given a row): one row per tet 1.7 s with
//! the residual stuck at 7e-2; two 2.0 s (6e-3); three 2.1 s (8e-4, as unlimited); four 2.6 s.
//! One-vertex rows and soft-soft rows of tet surfaces follow the rules above either way. A
//! soft-soft row over a drawn surface's embedded points ([`RowDecoupler::add_shared`]) shares
//! vertices like an embedded obstacle row where rows are coupled, at most
//! [`MAX_COUPLED_SOFT_ROWS_PER_TET`] per point tet and pair of bodies; decoupled, its caller
//! reduces it to two carrier vertices first.
//!
//! Pinned vertices are always terms of the right-hand side. A row whose free coefficients carry
//! less than a tenth of its squared norm (held or pinned vertices carry the rest) is dropped: it
//! would move its vertices by ten times its violation or more.

use crate::sim::math::Vec3;
use crate::sim::qp::groups::MAX_ROWS_PER_VERTEX;
use crate::sim::qp::{ConstraintRow, MAX_ROW_VERTICES};

/// Most coupled rows over one set of vertices against one obstacle (see the module docs).
pub const MAX_COUPLED_ROWS_PER_TET: u8 = 3;

/// Most coupled soft-soft rows of a drawn surface's points in one tet against one other body
/// (see the module docs). Measured with two caged bunnies dropped onto each other (`cargo
/// bench --bench drawn`): with 3, as for obstacles, the 7-cell cages' island exceeds the
/// contact subspace's rows and MPRGP's decoupled rows let them sink into each other (1.4 s
/// per step); with 1 they rest at 35 ms per step, but the 5-cell cages still sink (2 does
/// neither). Two drawn boxes rest alike with 1 or 3. Those runs predate the drawn surfaces'
/// inside test by pseudo-normal ([`crate::sim::contact::soft`]), the cause of the sinking:
/// with it and 1, neither the 5- nor the 7-cell bunnies sink (24 and 42 ms per step).
pub const MAX_COUPLED_SOFT_ROWS_PER_TET: u8 = 1;

/// Smallest `|free coefficients|^2 / |all coefficients|^2` of an admitted row.
const MIN_FREE_SHARE: f64 = 0.1;

/// Marks an unknown used by a multi-vertex row: no other row may touch it.
const EXCLUSIVE: u8 = u8::MAX;

/// One term `coeff . x` of a contact's row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowTerm {
    /// The unknown (free vertex) index, or `None` for a vertex that cannot move (pinned, or a
    /// frozen body's).
    pub unknown: Option<u32>,
    /// The coefficient 3-vector.
    pub coeff: Vec3,
    /// The vertex's current position (m), for terms moved to the right-hand side.
    pub x: Vec3,
    /// Whether the term is held at `x` even if its vertex is free (the caller applies the
    /// term's share of the row's force as a force instead).
    pub held: bool,
}

/// What a row is against, for the corner rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowSource {
    /// An obstacle (its index).
    Obstacle(u32),
    /// A vertex of one soft body against a triangle of another (or the same) body.
    Soft {
        /// The vertex's body.
        vertex_body: u32,
        /// The triangle's body.
        triangle_body: u32,
    },
    /// An edge of one soft body against an edge of another (or the same) body.
    Edge {
        /// The first edge's body.
        body_a: u32,
        /// The second edge's body.
        body_b: u32,
    },
}

/// What a row asks besides its terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowSpec {
    /// The right-hand side `c` of `sum terms >= c`.
    pub rhs: f64,
    /// The contact normal (for the corner rule).
    pub normal: Vec3,
    /// What the row is against (for the corner rule).
    pub source: RowSource,
    /// Hold taken vertices (the soft-soft rule) instead of dropping the row.
    pub hold: bool,
}

/// Whether a multi-vertex row may share its vertices where rows are coupled, and what counts
/// it against its cap ([`MAX_COUPLED_ROWS_PER_TET`] for all its unknowns,
/// [`MAX_COUPLED_SOFT_ROWS_PER_TET`] for its leading terms).
#[derive(Debug, Clone, Copy)]
enum Sharing {
    /// It may not (soft-soft and edge rows of tet surfaces).
    None,
    /// It may, counted by all its unknowns (an embedded point's obstacle row).
    AllTerms,
    /// It may, counted by the unknowns of its first terms (a drawn point's tet).
    LeadingTerms(usize),
}

/// Admits decoupled rows over the unknowns of a QP (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct RowDecoupler {
    /// Per unknown: how many one-vertex rows use it, or [`EXCLUSIVE`].
    uses: Vec<u8>,
    /// Per unknown: its one-vertex rows (first `uses` entries), as indices into `sources`.
    vertex_rows: Vec<[u32; MAX_ROWS_PER_VERTEX]>,
    /// Per admitted row: its source and normal.
    sources: Vec<(RowSource, Vec3)>,
    /// Whether multi-vertex obstacle rows may share vertices (see the module docs).
    coupled: bool,
    /// Coupled rows admitted per (sorted unknowns, source).
    per_tet: std::collections::HashMap<([u32; MAX_ROW_VERTICES], RowSource), u8>,
}

impl RowDecoupler {
    /// Clears for a QP with `unknowns` free vertices, its rows decoupled.
    pub fn reset(&mut self, unknowns: usize) {
        self.reset_with(unknowns, false);
    }

    /// Clears for a QP with `unknowns` free vertices; with `coupled`, multi-vertex obstacle
    /// rows may share vertices (see the module docs).
    pub fn reset_with(&mut self, unknowns: usize, coupled: bool) {
        self.coupled = coupled;
        self.per_tet.clear();
        self.uses.clear();
        self.uses.resize(unknowns, 0);
        self.vertex_rows.clear();
        self.vertex_rows.resize(unknowns, [0; MAX_ROWS_PER_VERTEX]);
        self.sources.clear();
    }

    /// The sources of the rows that use unknown `d`.
    pub fn sources_at(&self, d: u32) -> impl Iterator<Item = RowSource> + '_ {
        let d = d as usize;
        let count = match self.uses[d] {
            EXCLUSIVE => 1,
            used => used as usize,
        };
        self.vertex_rows[d][..count]
            .iter()
            .map(|&j| self.sources[j as usize].0)
    }

    /// Whether no row uses unknown `d` yet.
    pub fn is_free(&self, d: u32) -> bool {
        self.uses.get(d as usize) == Some(&0)
    }

    /// Whether a one-vertex row from `source` with `normal` may join unknown `d`.
    fn accepts_corner(&self, d: usize, normal: &Vec3, source: RowSource) -> bool {
        let used = self.uses[d];
        if used == EXCLUSIVE || used as usize >= MAX_ROWS_PER_VERTEX {
            return false;
        }
        self.vertex_rows[d][..used as usize].iter().all(|&r| {
            let (s, n) = &self.sources[r as usize];
            *s != source && n.dot(normal).abs() < 0.95
        })
    }

    /// Tries to admit the row `sum terms >= rhs` (see the module docs; `hold` selects the
    /// soft-soft rule for taken vertices). Appends it to `rows` and returns `true` if admitted;
    /// then `held` receives `(row, unknown, coefficient)` for each held term, whose share of the
    /// row's force the caller applies as a force (the row itself cannot: it no longer has that
    /// unknown). Terms with a negligible coefficient are ignored; terms of the same unknown are
    /// merged.
    pub fn add(
        &mut self,
        terms: &[RowTerm],
        spec: RowSpec,
        rows: &mut Vec<ConstraintRow>,
        held: &mut Vec<(u32, u32, Vec3)>,
    ) -> bool {
        let sharing = match spec.source {
            RowSource::Obstacle(_) => Sharing::AllTerms,
            _ => Sharing::None,
        };
        self.add_with(terms, spec, sharing, rows, held)
    }

    /// [`RowDecoupler::add`] for a soft-soft row over embedded points (a drawn surface's
    /// point against another body's drawn triangle): reset with `coupled`, it shares its
    /// vertices like an embedded obstacle row, up to [`MAX_COUPLED_ROWS_PER_TET`] whose first
    /// `key_terms` terms (the point's tet) have the same unknowns, from the same pair of
    /// bodies; otherwise it is admitted as [`RowDecoupler::add`] admits a soft row.
    pub fn add_shared(
        &mut self,
        terms: &[RowTerm],
        key_terms: usize,
        spec: RowSpec,
        rows: &mut Vec<ConstraintRow>,
        held: &mut Vec<(u32, u32, Vec3)>,
    ) -> bool {
        self.add_with(terms, spec, Sharing::LeadingTerms(key_terms), rows, held)
    }

    fn add_with(
        &mut self,
        terms: &[RowTerm],
        spec: RowSpec,
        sharing: Sharing,
        rows: &mut Vec<ConstraintRow>,
        held: &mut Vec<(u32, u32, Vec3)>,
    ) -> bool {
        let held_start = held.len();
        let admitted = self.admit(terms, spec, sharing, rows, held);
        if !admitted {
            held.truncate(held_start);
        }
        admitted
    }

    fn admit(
        &mut self,
        terms: &[RowTerm],
        spec: RowSpec,
        sharing: Sharing,
        rows: &mut Vec<ConstraintRow>,
        held: &mut Vec<(u32, u32, Vec3)>,
    ) -> bool {
        let RowSpec {
            rhs,
            normal,
            source,
            hold,
        } = spec;
        let mut row = ConstraintRow::single(0, Vec3::zeros(), rhs);
        row.len = 0;
        let full: f64 = terms.iter().map(|t| t.coeff.norm_squared()).sum();
        for t in terms {
            // Round-off leaves ~1e-17 weights on vertices off a proxy's face: they must not
            // claim a vertex under decoupling.
            if t.coeff.norm_squared() < 1e-24 {
                continue;
            }
            let Some(d) = t.unknown else {
                row.rhs -= t.coeff.dot(&t.x);
                continue;
            };
            if let Some(e) = (0..row.len as usize).find(|&e| row.vertices[e] == d) {
                row.coeffs[e] += t.coeff;
                continue;
            }
            if t.held || (hold && self.uses[d as usize] != 0) {
                row.rhs -= t.coeff.dot(&t.x);
                held.push((rows.len() as u32, d, t.coeff));
                continue;
            }
            if row.len as usize == row.vertices.len() {
                return false;
            }
            row.vertices[row.len as usize] = d;
            row.coeffs[row.len as usize] = t.coeff;
            row.len += 1;
        }
        // A row left with only small coefficients (the free corner of a triangle whose other
        // corners are held, at weight 0.01) would move its vertices by the violation divided by
        // that weight: no row rather than a wild one.
        if row.len == 0 || !(row.norm_squared() > MIN_FREE_SHARE * full) || !row.rhs.is_finite() {
            return false;
        }
        let j = self.sources.len() as u32;
        if row.len == 1 {
            let d = row.vertices[0] as usize;
            if !self.accepts_corner(d, &normal, source) {
                return false;
            }
            let u = self.uses[d] as usize;
            self.vertex_rows[d][u] = j;
            self.uses[d] += 1;
        } else if self.coupled && !matches!(sharing, Sharing::None) {
            // Admitted whatever uses its vertices (the dual takes rows that share them), up to
            // a few per tet and source.
            let mut key = [u32::MAX; MAX_ROW_VERTICES];
            let cap = match sharing {
                Sharing::LeadingTerms(n) => {
                    for (k, t) in key.iter_mut().zip(&terms[..n]) {
                        *k = t.unknown.unwrap_or(u32::MAX);
                    }
                    MAX_COUPLED_SOFT_ROWS_PER_TET
                }
                _ => {
                    key[..row.len as usize].copy_from_slice(&row.vertices[..row.len as usize]);
                    MAX_COUPLED_ROWS_PER_TET
                }
            };
            key.sort_unstable();
            let count = self.per_tet.entry((key, source)).or_insert(0);
            if *count >= cap {
                return false;
            }
            *count += 1;
        } else {
            if (0..row.len as usize).any(|e| self.uses[row.vertices[e] as usize] != 0) {
                return false;
            }
            for e in 0..row.len as usize {
                let d = row.vertices[e] as usize;
                self.uses[d] = EXCLUSIVE;
                self.vertex_rows[d][0] = j;
            }
        }
        self.sources.push((source, normal));
        rows.push(row);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(unknown: Option<u32>, coeff: Vec3) -> RowTerm {
        RowTerm {
            unknown,
            coeff,
            x: Vec3::new(0.0, -1.0, 0.0),
            held: false,
        }
    }

    #[test]
    fn embedded_rows_take_their_vertices_exclusively() {
        let mut d = RowDecoupler::default();
        d.reset(3);
        let mut rows = Vec::new();
        let mut held = Vec::new();
        let n = Vec3::y();
        // An embedded proxy over unknowns 0, 1, 2 and a pinned vertex.
        let embedded = [
            term(Some(0), 0.25 * n),
            term(Some(1), 0.25 * n),
            term(Some(2), 0.25 * n),
            term(None, 0.25 * n),
        ];
        assert!(d.add(
            &embedded,
            RowSpec {
                rhs: 0.0,
                normal: n,
                source: RowSource::Obstacle(0),
                hold: false
            },
            &mut rows,
            &mut held
        ));
        // The pinned vertex moved to the right-hand side: 0 - 0.25 * (-1).
        assert_eq!(rows[0].len, 3);
        assert!((rows[0].rhs - 0.25).abs() < 1e-15);
        // A later one-vertex obstacle row on a taken vertex is dropped.
        let spec = RowSpec {
            rhs: 0.0,
            normal: n,
            source: RowSource::Obstacle(1),
            hold: false,
        };
        assert!(!d.add(&[term(Some(0), n)], spec, &mut rows, &mut held));
        assert_eq!(rows.len(), 1);
    }

    #[test]
    fn coupled_embedded_rows_share_vertices_up_to_the_cap_per_tet() {
        let n = Vec3::y();
        let spec = |obstacle| RowSpec {
            rhs: 0.0,
            normal: n,
            source: RowSource::Obstacle(obstacle),
            hold: false,
        };
        // Points of one tet (unknowns 0-3) and of a neighbour sharing three of its vertices.
        let point = |tet: [u32; 4], w: [f64; 4]| -> [RowTerm; 4] {
            std::array::from_fn(|k| term(Some(tet[k]), w[k] * n))
        };
        let w = [0.4, 0.3, 0.2, 0.1];
        let rows_of = |coupled: bool| {
            let mut d = RowDecoupler::default();
            d.reset_with(5, coupled);
            let (mut rows, mut held) = (Vec::new(), Vec::new());
            let mut admitted = Vec::new();
            for tet in [[0, 1, 2, 3]; 5].into_iter().chain([[1, 2, 3, 4]; 2]) {
                admitted.push(d.add(&point(tet, w), spec(0), &mut rows, &mut held));
            }
            // Another obstacle has its own cap.
            admitted.push(d.add(&point([3, 2, 1, 0], w), spec(1), &mut rows, &mut held));
            assert!(held.is_empty());
            admitted
        };
        let coupled = rows_of(true);
        let cap = MAX_COUPLED_ROWS_PER_TET as usize;
        assert!(coupled[..cap].iter().all(|&a| a));
        assert!(coupled[cap..5].iter().all(|&a| !a));
        assert!(coupled[5..].iter().all(|&a| a));
        // Decoupled, the first row takes the tet's vertices and every other row is dropped.
        let decoupled = rows_of(false);
        assert!(decoupled[0] && decoupled[1..].iter().all(|&a| !a));
    }

    #[test]
    fn a_vertex_in_a_corner_keeps_one_row_per_obstacle() {
        let mut d = RowDecoupler::default();
        d.reset(1);
        let mut rows = Vec::new();
        let mut held = Vec::new();
        let mut add = |normal: Vec3, obstacle: u32| {
            let spec = RowSpec {
                rhs: 0.0,
                normal,
                source: RowSource::Obstacle(obstacle),
                hold: false,
            };
            d.add(&[term(Some(0), normal)], spec, &mut rows, &mut held)
        };
        assert!(add(Vec3::x(), 1));
        assert!(add(Vec3::y(), 0));
        // Same obstacle again, and a near-parallel normal: dropped.
        assert!(!add(Vec3::x(), 1));
        assert!(!add(Vec3::new(0.0, 0.999, 0.0447).normalize(), 2));
        assert!(add(Vec3::z(), 3));
        // Three rows: the vertex is full.
        assert!(!add(Vec3::new(1.0, 1.0, 1.0).normalize(), 4));
    }

    #[test]
    fn soft_rows_hold_taken_vertices_at_their_positions() {
        let mut d = RowDecoupler::default();
        d.reset(5);
        let mut rows = Vec::new();
        let mut held = Vec::new();
        let n = Vec3::y();
        // Vertex 0 against the triangle (1, 2, 3).
        let first = [
            term(Some(0), n),
            term(Some(1), -0.5 * n),
            term(Some(2), -0.25 * n),
            term(Some(3), -0.25 * n),
        ];
        assert!(d.add(
            &first,
            RowSpec {
                rhs: 0.0,
                normal: n,
                source: RowSource::Soft {
                    vertex_body: 0,
                    triangle_body: 1
                },
                hold: true
            },
            &mut rows,
            &mut held
        ));
        // Vertex 4 against the triangle (2, 3, 1): every triangle vertex is taken and held.
        let second = [
            term(Some(4), n),
            term(Some(2), -0.2 * n),
            term(Some(3), -0.3 * n),
            term(Some(1), -0.5 * n),
        ];
        assert!(d.add(
            &second,
            RowSpec {
                rhs: 0.0,
                normal: n,
                source: RowSource::Soft {
                    vertex_body: 0,
                    triangle_body: 1
                },
                hold: true
            },
            &mut rows,
            &mut held
        ));
        assert_eq!(rows[1].len, 1);
        assert_eq!(rows[1].vertices[0], 4);
        // Its three triangle terms are held, each reported with its coefficient.
        assert_eq!(held.len(), 3);
        assert!(held.iter().all(|h| h.0 == 1));
        // rhs = 0 + (0.2 + 0.3 + 0.5) * (n . x) = -1.
        assert!((rows[1].rhs + 1.0).abs() < 1e-15);
        // Held so far that only a 0.05 share of the triangle stays free: dropped.
        let third = [
            term(Some(0), n),
            term(Some(4), -0.05 * n),
            term(Some(2), -0.95 * n),
        ];
        assert!(!d.add(
            &third,
            RowSpec {
                rhs: 0.0,
                normal: n,
                source: RowSource::Soft {
                    vertex_body: 0,
                    triangle_body: 1
                },
                hold: true
            },
            &mut rows,
            &mut held
        ));
        // Without holding, the second row would be dropped.
        let mut d2 = RowDecoupler::default();
        d2.reset(5);
        let mut rows2 = Vec::new();
        assert!(d2.add(
            &first,
            RowSpec {
                rhs: 0.0,
                normal: n,
                source: RowSource::Soft {
                    vertex_body: 0,
                    triangle_body: 1
                },
                hold: false
            },
            &mut rows2,
            &mut held
        ));
        assert!(!d2.add(
            &second,
            RowSpec {
                rhs: 0.0,
                normal: n,
                source: RowSource::Soft {
                    vertex_body: 0,
                    triangle_body: 1
                },
                hold: false
            },
            &mut rows2,
            &mut held
        ));
    }
}
