//! Row groups and the closed-form operators of the extended MPRGP on them.
//!
//! The MPRGP paper's generalised operators (Li et al. 2015, eq. 15-20) need solves with
//! `J J'` on the active rows. *Collision decoupling* (section 5) makes them cheap by keeping rows
//! vertex-disjoint. We keep that rule with one relaxation: up to [`MAX_ROWS_PER_VERTEX`]
//! single-vertex rows may share their vertex (a vertex in the corner between the floor and a
//! wall). Rows then fall into *groups* that share no vertex with each other:
//!
//! - a lone row (any number of vertices): every operator is the textbook closed form;
//! - several one-vertex rows on the same vertex: every operator is a tiny problem in `R^3` —
//!   projection onto at most three half-spaces, or onto the cone they span — solved exactly by
//!   enumerating the active subsets (at most 7).
//!
//! So `J J'` is block diagonal with blocks of size at most 3 and the operators stay exact.

use super::{ConstraintRow, MAX_ROW_VERTICES, QpError};
use crate::sim::math::Vec3;

/// Most one-vertex rows that may share a vertex.
pub const MAX_ROWS_PER_VERTEX: usize = 3;

/// Rows partitioned into vertex-disjoint groups.
#[derive(Debug, Clone, Default)]
pub struct RowGroups {
    /// Row indices, group after group.
    pub order: Vec<u32>,
    /// Group `g` is `order[starts[g]..starts[g + 1]]`.
    pub starts: Vec<u32>,
    /// Per vertex: the first row touching it, or `u32::MAX`. Scratch kept for reuse.
    marks: Vec<u32>,
    /// `(group key, row)` pairs. Scratch kept for reuse.
    members: Vec<(u32, u32)>,
}

impl RowGroups {
    /// Number of groups.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Row indices of group `g`.
    #[inline]
    pub fn group(&self, g: usize) -> &[u32] {
        &self.order[self.starts[g] as usize..self.starts[g + 1] as usize]
    }

    /// Groups the rows, checking that they are valid and decoupled as described in the module
    /// docs.
    ///
    /// # Errors
    /// [`QpError::InvalidRow`] for an empty row, a vertex out of range or a non-finite value;
    /// [`QpError::CoupledRows`] for rows that share a vertex otherwise.
    pub fn build(&mut self, rows: &[ConstraintRow], n: usize) -> Result<(), QpError> {
        self.marks.clear();
        self.marks.resize(n, u32::MAX);
        // First pass: validate, and give every vertex the first row that touches it.
        let mut first_row = std::mem::take(&mut self.marks);
        for (j, row) in rows.iter().enumerate() {
            let finite = row.rhs.is_finite()
                && row.coeffs[..(row.len as usize).min(MAX_ROW_VERTICES)]
                    .iter()
                    .all(|a| a.iter().all(|c| c.is_finite()));
            if row.len == 0
                || row.len as usize > MAX_ROW_VERTICES
                || !finite
                || !(row.norm_squared() > 0.0)
            {
                return Err(QpError::InvalidRow(j));
            }
            for (v, _) in row.entries() {
                if v >= n {
                    return Err(QpError::InvalidRow(j));
                }
                let first = first_row[v];
                if first == u32::MAX {
                    first_row[v] = j as u32;
                } else if first != j as u32 {
                    let other = &rows[first as usize];
                    if row.len != 1 || other.len != 1 {
                        return Err(QpError::CoupledRows {
                            first: first as usize,
                            second: j,
                            vertex: v,
                        });
                    }
                }
            }
        }
        // Second pass: rows in order of their group's first row; one-vertex rows join the group
        // of their vertex's first row.
        let mut members = std::mem::take(&mut self.members);
        members.clear();
        members.extend(rows.iter().enumerate().map(|(j, row)| {
            let key = if row.len == 1 {
                first_row[row.vertices[0] as usize]
            } else {
                j as u32
            };
            (key, j as u32)
        }));
        members.sort_unstable();
        self.order.clear();
        self.starts.clear();
        let mut last = u32::MAX;
        let mut count = 0;
        for (j, &(key, row)) in members.iter().enumerate() {
            if key != last {
                self.starts.push(j as u32);
                last = key;
                count = 0;
            }
            count += 1;
            if count > MAX_ROWS_PER_VERTEX {
                self.marks = first_row;
                return Err(QpError::CoupledRows {
                    first: key as usize,
                    second: row as usize,
                    vertex: rows[row as usize].vertices[0] as usize,
                });
            }
            self.order.push(row);
        }
        self.starts.push(self.order.len() as u32);
        self.marks = first_row;
        self.members = members;
        Ok(())
    }
}

/// `a . x - c` of a row.
#[inline]
pub fn gap(row: &ConstraintRow, x: &[Vec3]) -> f64 {
    row.dot(x) - row.rhs
}

/// Projects `x` onto `{J x >= c}` in place: the exact Euclidean projection, group by group.
pub fn project(rows: &[ConstraintRow], groups: &RowGroups, x: &mut [Vec3]) {
    for g in 0..groups.len() {
        let members = groups.group(g);
        if members.len() == 1 {
            let row = &rows[members[0] as usize];
            let d = gap(row, x);
            if d < 0.0 {
                row.add_scaled(-d / row.norm_squared(), x);
            }
        } else {
            let v = rows[members[0] as usize].vertices[0] as usize;
            let r = vertex_rows(rows, members, None);
            x[v] = project_onto_halfspaces(&r.a[..r.k], &r.c[..r.k], x[v]);
        }
    }
}

/// `phi = g` minus its components along the active rows of each group (eq. 15-16).
pub fn free_gradient(
    rows: &[ConstraintRow],
    groups: &RowGroups,
    active: &[bool],
    g: &[Vec3],
    phi: &mut [Vec3],
) {
    phi.copy_from_slice(g);
    remove_active_components(rows, groups, active, phi);
}

/// Removes from `p` its components along the active rows of each group.
pub fn remove_active_components(
    rows: &[ConstraintRow],
    groups: &RowGroups,
    active: &[bool],
    p: &mut [Vec3],
) {
    for g in 0..groups.len() {
        let members = groups.group(g);
        if members.len() == 1 {
            let j = members[0] as usize;
            if active[j] {
                let row = &rows[j];
                let t = row.dot(p) / row.norm_squared();
                row.add_scaled(-t, p);
            }
        } else {
            let v = rows[members[0] as usize].vertices[0] as usize;
            let (q, rank) = active_basis(rows, members, active);
            for qi in &q[..rank] {
                p[v] -= qi * qi.dot(&p[v]);
            }
        }
    }
}

/// The chopped gradient (eq. 17-18): per group, the projection of the active-span part of `g`
/// onto the cone `{beta : J_j beta <= 0, j active}`; zero on free variables. Overwrites `beta`.
pub fn chopped_gradient(
    rows: &[ConstraintRow],
    groups: &RowGroups,
    active: &[bool],
    g: &[Vec3],
    beta: &mut [Vec3],
) {
    beta.iter_mut().for_each(|b| *b = Vec3::zeros());
    chopped_gradient_at_rows(rows, groups, active, g, beta);
}

/// [`chopped_gradient`] written at the rows' vertices only, leaving `beta` elsewhere as it is
/// (for a caller that keeps it zero there).
pub fn chopped_gradient_at_rows(
    rows: &[ConstraintRow],
    groups: &RowGroups,
    active: &[bool],
    g: &[Vec3],
    beta: &mut [Vec3],
) {
    for row in rows {
        for (v, _) in row.entries() {
            beta[v] = Vec3::zeros();
        }
    }
    for gi in 0..groups.len() {
        let members = groups.group(gi);
        if members.len() == 1 {
            let j = members[0] as usize;
            if active[j] {
                let row = &rows[j];
                let t = row.dot(g) / row.norm_squared();
                if t < 0.0 {
                    row.add_scaled(t, beta);
                }
            }
        } else {
            let v = rows[members[0] as usize].vertices[0] as usize;
            let (q, rank) = active_basis(rows, members, active);
            if rank == 0 {
                continue;
            }
            let g_beta: Vec3 = q[..rank].iter().map(|qi| qi * qi.dot(&g[v])).sum();
            // Cone {b : a_j . b <= 0} written as half-spaces (-a_j) . b >= 0.
            let r = vertex_rows(rows, members, Some(active));
            let a = r.a.map(|a| -a);
            beta[v] =
                project_onto_halfspaces(&a[..r.k], &[0.0; MAX_ROWS_PER_VERTEX][..r.k], g_beta);
        }
    }
}

/// Puts `z` exactly back on the planes of its active rows (undoing round-off drift).
pub fn snap_to_active(rows: &[ConstraintRow], groups: &RowGroups, active: &[bool], z: &mut [Vec3]) {
    for g in 0..groups.len() {
        let members = groups.group(g);
        if members.len() == 1 {
            let j = members[0] as usize;
            if active[j] {
                let row = &rows[j];
                let d = gap(row, z);
                row.add_scaled(-d / row.norm_squared(), z);
            }
        } else {
            // Minimal correction onto the active planes: z += A'(AA')^-1 (c - A z), via the
            // orthonormal basis of the active normals (rank-aware).
            let v = rows[members[0] as usize].vertices[0] as usize;
            let r = vertex_rows(rows, members, Some(active));
            if let Some(dz) = min_norm_solution(&r.a[..r.k], &r.c[..r.k], z[v]) {
                z[v] += dz;
            }
        }
    }
}

/// Multipliers of the rows at `x` from the gradient `g = A x - b`: per group, the least-squares
/// `lambda` of `J_S' lambda = g` on the active rows `S`, clamped at zero; 0 for inactive rows.
pub fn multipliers_from_gradient(
    rows: &[ConstraintRow],
    groups: &RowGroups,
    active: &[bool],
    g: &[Vec3],
    out: &mut [f64],
) {
    out.iter_mut().for_each(|l| *l = 0.0);
    for gi in 0..groups.len() {
        let members = groups.group(gi);
        if members.len() == 1 {
            let j = members[0] as usize;
            if active[j] {
                out[j] = (rows[j].dot(g) / rows[j].norm_squared()).max(0.0);
            }
        } else {
            let v = rows[members[0] as usize].vertices[0] as usize;
            let r = vertex_rows(rows, members, Some(active));
            if let Some(l) = gram_solve(&r.a[..r.k], |i| r.a[i].dot(&g[v])) {
                for i in 0..r.k {
                    out[r.index[i]] = l[i].max(0.0);
                }
            }
        }
    }
}

/// The one-vertex rows of a group (all of them, or only the active ones).
struct VertexRows {
    /// Row indices.
    index: [usize; MAX_ROWS_PER_VERTEX],
    /// Coefficient vectors.
    a: [Vec3; MAX_ROWS_PER_VERTEX],
    /// Right-hand sides.
    c: [f64; MAX_ROWS_PER_VERTEX],
    /// How many.
    k: usize,
}

fn vertex_rows(rows: &[ConstraintRow], members: &[u32], active: Option<&[bool]>) -> VertexRows {
    let mut out = VertexRows {
        index: [0; MAX_ROWS_PER_VERTEX],
        a: [Vec3::zeros(); MAX_ROWS_PER_VERTEX],
        c: [0.0; MAX_ROWS_PER_VERTEX],
        k: 0,
    };
    for &j in members {
        let j = j as usize;
        if out.k == MAX_ROWS_PER_VERTEX || active.is_some_and(|act| !act[j]) {
            continue;
        }
        out.index[out.k] = j;
        out.a[out.k] = rows[j].coeffs[0];
        out.c[out.k] = rows[j].rhs;
        out.k += 1;
    }
    out
}

/// Orthonormal basis of the active rows' coefficient vectors of a one-vertex group
/// (Gram-Schmidt, dependent vectors dropped).
fn active_basis(rows: &[ConstraintRow], members: &[u32], active: &[bool]) -> ([Vec3; 3], usize) {
    let mut q = [Vec3::zeros(); 3];
    let mut rank = 0;
    for &j in members {
        if !active[j as usize] || rank == 3 {
            continue;
        }
        let a = rows[j as usize].coeffs[0];
        let mut r = a;
        for qi in &q[..rank] {
            r -= qi * qi.dot(&r);
        }
        let n = r.norm();
        if n > 1e-9 * a.norm() {
            q[rank] = r / n;
            rank += 1;
        }
    }
    (q, rank)
}

/// Solves `(A A') l = rhs` for `k <= 3` rows `A`; `None` if singular.
fn gram_solve(a: &[Vec3], rhs: impl Fn(usize) -> f64) -> Option<[f64; 3]> {
    let k = a.len();
    let mut out = [0.0; 3];
    match k {
        0 => Some(out),
        1 => {
            let d = a[0].norm_squared();
            (d > 0.0).then(|| {
                out[0] = rhs(0) / d;
                out
            })
        }
        _ => {
            let mut m = nalgebra::Matrix3::<f64>::identity();
            let mut b = nalgebra::Vector3::<f64>::zeros();
            for i in 0..k {
                for j in 0..k {
                    m[(i, j)] = a[i].dot(&a[j]);
                }
                b[i] = rhs(i);
            }
            let scale = (0..k).map(|i| m[(i, i)]).fold(0.0, f64::max);
            if !(m.determinant().abs() > 1e-12 * scale.powi(k as i32)) {
                return None;
            }
            let l = m.try_inverse()? * b;
            out[..k].copy_from_slice(&l.as_slice()[..k]);
            Some(out)
        }
    }
}

/// Minimum-norm `dz` with `a_i . (z + dz) = c_i` for all rows (rank-aware); `None` if the
/// planes are inconsistent.
fn min_norm_solution(a: &[Vec3], c: &[f64], z: Vec3) -> Option<Vec3> {
    let l = gram_solve(a, |i| c[i] - a[i].dot(&z))?;
    Some((0..a.len()).map(|i| l[i] * a[i]).sum())
}

/// Euclidean projection of `x` onto `{y : a_i . y >= c_i}` for at most three half-spaces in
/// `R^3`, by enumerating the active subsets and keeping the KKT point (exact for linearly
/// independent normals; dependent subsets are skipped). Falls back to cyclic projections if no
/// subset qualifies (degenerate input).
pub fn project_onto_halfspaces(a: &[Vec3], c: &[f64], x: Vec3) -> Vec3 {
    let k = a.len();
    let feasible = |y: &Vec3| (0..k).all(|i| a[i].dot(y) - c[i] >= -1e-12 * (1.0 + c[i].abs()));
    if feasible(&x) {
        return x;
    }
    let mut best: Option<(f64, Vec3)> = None;
    for mask in 1u32..(1 << k) {
        let mut sa = [Vec3::zeros(); 3];
        let mut sc = [0.0; 3];
        let mut m = 0;
        for i in 0..k {
            if mask & (1 << i) != 0 {
                sa[m] = a[i];
                sc[m] = c[i];
                m += 1;
            }
        }
        let Some(l) = gram_solve(&sa[..m], |i| sc[i] - sa[i].dot(&x)) else {
            continue;
        };
        if l[..m].iter().any(|&li| li < -1e-12) {
            continue;
        }
        let y = x + (0..m).map(|i| l[i] * sa[i]).sum::<Vec3>();
        if feasible(&y) {
            let d = (y - x).norm_squared();
            if best.is_none_or(|(bd, _)| d < bd) {
                best = Some((d, y));
            }
        }
    }
    if let Some((_, y)) = best {
        return y;
    }
    let mut y = x;
    for _ in 0..50 {
        for i in 0..k {
            let d = a[i].dot(&y) - c[i];
            if d < 0.0 {
                y -= a[i] * (d / a[i].norm_squared());
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corner_projection_matches_brute_force() {
        let a = [Vec3::y(), Vec3::x(), Vec3::new(0.0, 1.0, 1.0).normalize()];
        let c = [0.0, 0.0, -0.2];
        let mut seed = 1u64;
        let mut rnd = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        for _ in 0..500 {
            let x = Vec3::new(rnd(), rnd(), rnd());
            let y = project_onto_halfspaces(&a, &c, x);
            for i in 0..3 {
                assert!(a[i].dot(&y) - c[i] >= -1e-12);
            }
            // Brute force: no feasible sample is closer.
            let d = (y - x).norm();
            for _ in 0..200 {
                let s = y + 0.3 * Vec3::new(rnd(), rnd(), rnd());
                if (0..3).all(|i| a[i].dot(&s) >= c[i]) {
                    assert!((s - x).norm() >= d - 1e-12);
                }
            }
        }
    }

    #[test]
    fn groups_allow_corners_but_not_shared_embedded_rows() {
        let mut groups = RowGroups::default();
        let rows = [
            ConstraintRow::single(2, Vec3::y(), 0.0),
            ConstraintRow::single(0, Vec3::y(), 0.0),
            ConstraintRow::single(2, Vec3::x(), 0.0),
        ];
        groups.build(&rows, 3).unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups.group(0), &[0, 2]);
        assert_eq!(groups.group(1), &[1]);
        let mut embedded = ConstraintRow::single(2, Vec3::y(), 0.0);
        embedded.vertices[1] = 1;
        embedded.coeffs[1] = Vec3::y();
        embedded.len = 2;
        let rows = [rows[0], embedded];
        assert!(matches!(
            groups.build(&rows, 3),
            Err(QpError::CoupledRows { .. })
        ));
    }
}
