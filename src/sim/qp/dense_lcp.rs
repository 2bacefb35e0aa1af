//! A small dense LCP: `w = S lambda + q >= 0`, `lambda >= 0`, `lambda' w = 0` for a symmetric
//! positive definite `S` (the minimiser of `1/2 lambda' S lambda + q' lambda` over
//! `lambda >= 0`): the dual of a contact QP in the contact subspace, where `S = J A^-1 J'` is
//! the Schur complement of the contact rows (see
//! [`crate::sim::inverse_columns::InverseColumns`]).
//!
//! Projected Gauss-Seidel sweeps find the active set; every few sweeps the candidate active set
//! `{lambda_j > 0}` is solved exactly (dense Cholesky of `S_AA`), and the result is accepted
//! where it is feasible and the inactive rows are open (`w >= 0`), which ends the solve at the
//! exact solution instead of PGS's linear convergence. Allocates nothing once its buffers have
//! grown to the largest problem.

/// What [`DenseLcp::solve`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DenseLcpStats {
    /// Gauss-Seidel sweeps.
    pub sweeps: usize,
    /// Exact solves of a candidate active set.
    pub refinements: usize,
    /// The natural-map residual `max_j |min(lambda_j S_jj, w_j)|` at the end (the units of
    /// `q`).
    pub residual: f64,
    /// Whether the residual reached the tolerance.
    pub converged: bool,
}

/// Reusable buffers of the solver.
#[derive(Debug, Clone, Default)]
pub struct DenseLcp {
    active: Vec<usize>,
    factor: Vec<f64>,
    candidate: Vec<f64>,
    w: Vec<f64>,
}

/// Sweeps between exact solves of the candidate active set.
const SWEEPS_PER_REFINEMENT: usize = 3;

/// Largest active set solved exactly (a dense factorization costs its cube over three).
pub const MAX_EXACT_ACTIVE: usize = 256;

impl DenseLcp {
    /// Solves the LCP of the row-major `m x m` matrix `s` and vector `q`, starting from
    /// `lambda` (clamped to `>= 0`) and writing the solution there. Stops where the
    /// natural-map residual is at most `tolerance` (the units of `q`) or after `max_sweeps`.
    pub fn solve(
        &mut self,
        s: &[f64],
        q: &[f64],
        lambda: &mut [f64],
        tolerance: f64,
        max_sweeps: usize,
    ) -> DenseLcpStats {
        let m = q.len();
        debug_assert_eq!(s.len(), m * m);
        debug_assert_eq!(lambda.len(), m);
        let mut stats = DenseLcpStats::default();
        lambda.iter_mut().for_each(|l| *l = l.max(0.0));
        self.w.resize(m, 0.0);
        loop {
            stats.residual = self.residual(s, q, lambda);
            if stats.residual <= tolerance {
                stats.converged = true;
                return stats;
            }
            if stats.sweeps >= max_sweeps {
                return stats;
            }
            for _ in 0..SWEEPS_PER_REFINEMENT {
                for j in 0..m {
                    let row = &s[j * m..(j + 1) * m];
                    let w: f64 = row
                        .iter()
                        .zip(lambda.iter())
                        .map(|(a, l)| a * l)
                        .sum::<f64>()
                        + q[j];
                    lambda[j] = (lambda[j] - w / row[j]).max(0.0);
                }
                stats.sweeps += 1;
            }
            if self.refine(s, q, lambda, tolerance) {
                stats.refinements += 1;
            }
        }
    }

    /// `max_j |min(lambda_j S_jj, w_j)|` with `w = S lambda + q` (kept in `self.w`).
    fn residual(&mut self, s: &[f64], q: &[f64], lambda: &[f64]) -> f64 {
        let m = q.len();
        let mut worst: f64 = 0.0;
        for j in 0..m {
            let row = &s[j * m..(j + 1) * m];
            let w: f64 = row.iter().zip(lambda).map(|(a, l)| a * l).sum::<f64>() + q[j];
            self.w[j] = w;
            let r = (lambda[j] * row[j]).min(w);
            if !r.is_finite() {
                return f64::INFINITY;
            }
            worst = worst.max(r.abs());
        }
        worst
    }

    /// Solves `S_AA lambda_A = -q_A` on the active set `A = {lambda_j > 0}` and takes it if it
    /// is feasible and leaves every other row open (within `tolerance`). Returns whether it
    /// was taken.
    fn refine(&mut self, s: &[f64], q: &[f64], lambda: &mut [f64], tolerance: f64) -> bool {
        let m = q.len();
        self.active.clear();
        self.active.extend((0..m).filter(|&j| lambda[j] > 0.0));
        let k = self.active.len();
        if k == 0 || k > MAX_EXACT_ACTIVE {
            return false;
        }
        self.factor.clear();
        for &a in &self.active {
            self.factor
                .extend(self.active.iter().map(|&b| s[a * m + b]));
        }
        if !cholesky_in_place(&mut self.factor, k) {
            return false;
        }
        self.candidate.clear();
        self.candidate.extend(self.active.iter().map(|&a| -q[a]));
        cholesky_solve(&self.factor, k, &mut self.candidate);
        if self.candidate.iter().any(|&l| !(l >= 0.0)) {
            return false;
        }
        for j in 0..m {
            if lambda[j] > 0.0 {
                continue;
            }
            let row = &s[j * m..(j + 1) * m];
            let w: f64 = self
                .active
                .iter()
                .zip(&self.candidate)
                .map(|(&a, l)| row[a] * l)
                .sum::<f64>()
                + q[j];
            if w < -tolerance {
                return false;
            }
        }
        for (&a, &l) in self.active.iter().zip(&self.candidate) {
            lambda[a] = l;
        }
        true
    }
}

/// Lower Cholesky factor of the row-major `k x k` SPD matrix `a`, in place (the upper part is
/// left as it was). Returns false if a pivot is not positive.
fn cholesky_in_place(a: &mut [f64], k: usize) -> bool {
    for j in 0..k {
        let mut d = a[j * k + j];
        for p in 0..j {
            d -= a[j * k + p] * a[j * k + p];
        }
        if !(d > 0.0) {
            return false;
        }
        let d = d.sqrt();
        a[j * k + j] = d;
        for i in j + 1..k {
            let mut v = a[i * k + j];
            for p in 0..j {
                v -= a[i * k + p] * a[j * k + p];
            }
            a[i * k + j] = v / d;
        }
    }
    true
}

/// Solves `L L' x = b` in place with the factor of [`cholesky_in_place`].
fn cholesky_solve(l: &[f64], k: usize, b: &mut [f64]) {
    for i in 0..k {
        let mut v = b[i];
        for p in 0..i {
            v -= l[i * k + p] * b[p];
        }
        b[i] = v / l[i * k + i];
    }
    for i in (0..k).rev() {
        let mut v = b[i];
        for p in i + 1..k {
            v -= l[p * k + i] * b[p];
        }
        b[i] = v / l[i * k + i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::test_rng::Rng;

    /// A random SPD matrix `B B' + 0.1 I` and vector `q`.
    fn random_lcp(rng: &mut Rng, m: usize) -> (Vec<f64>, Vec<f64>) {
        let b: Vec<f64> = (0..m * m).map(|_| rng.signed()).collect();
        let mut s = vec![0.0; m * m];
        for i in 0..m {
            for j in 0..m {
                s[i * m + j] = (0..m).map(|k| b[i * m + k] * b[j * m + k]).sum::<f64>()
                    + if i == j { 0.1 } else { 0.0 };
            }
        }
        let q = (0..m).map(|_| rng.signed()).collect();
        (s, q)
    }

    /// The exact solution by enumeration: the one active set whose solve is feasible and
    /// leaves the other rows open.
    fn enumerate(s: &[f64], q: &[f64]) -> Vec<f64> {
        let m = q.len();
        for mask in 0u32..1 << m {
            let active: Vec<usize> = (0..m).filter(|&j| mask >> j & 1 == 1).collect();
            let k = active.len();
            let mut a: Vec<f64> = active
                .iter()
                .flat_map(|&i| active.iter().map(move |&j| s[i * m + j]))
                .collect();
            let mut x: Vec<f64> = active.iter().map(|&i| -q[i]).collect();
            if k > 0 {
                assert!(cholesky_in_place(&mut a, k));
                cholesky_solve(&a, k, &mut x);
            }
            let mut lambda = vec![0.0; m];
            for (&i, &v) in active.iter().zip(&x) {
                lambda[i] = v;
            }
            let feasible = lambda.iter().all(|&l| l >= -1e-12);
            let open = (0..m).all(|j| {
                let w: f64 = (0..m).map(|k| s[j * m + k] * lambda[k]).sum::<f64>() + q[j];
                mask >> j & 1 == 1 || w >= -1e-12
            });
            if feasible && open {
                return lambda;
            }
        }
        panic!("an SPD LCP has a solution");
    }

    #[test]
    fn random_lcps_match_enumeration() {
        let mut rng = Rng(7);
        let mut solver = DenseLcp::default();
        for m in 1..=8 {
            for _ in 0..20 {
                let (s, q) = random_lcp(&mut rng, m);
                let exact = enumerate(&s, &q);
                let mut lambda = vec![0.0; m];
                let stats = solver.solve(&s, &q, &mut lambda, 1e-12, 10_000);
                assert!(stats.converged, "{m}: {stats:?}");
                for (a, b) in lambda.iter().zip(&exact) {
                    assert!((a - b).abs() < 1e-8, "{m}: {lambda:?} vs {exact:?}");
                }
            }
        }
    }

    /// A warm start at the solution needs no sweep; the exact refinement ends a solve long
    /// before PGS alone would converge.
    #[test]
    fn warm_starts_and_refinement_cut_the_sweeps() {
        let mut rng = Rng(11);
        let mut solver = DenseLcp::default();
        let (s, q) = random_lcp(&mut rng, 40);
        let mut lambda = vec![0.0; 40];
        let cold = solver.solve(&s, &q, &mut lambda, 1e-10, 100_000);
        assert!(cold.converged && cold.refinements > 0, "{cold:?}");
        let warm = solver.solve(&s, &q, &mut lambda, 1e-10, 100_000);
        assert_eq!(warm.sweeps, 0, "{warm:?}");
        let mut plain = vec![0.0; 40];
        let mut sweeps = 0;
        // PGS alone, for comparison.
        while sweeps < 100_000 {
            for j in 0..40 {
                let w: f64 = (0..40).map(|k| s[j * 40 + k] * plain[k]).sum::<f64>() + q[j];
                plain[j] = (plain[j] - w / s[j * 40 + j]).max(0.0);
            }
            sweeps += 1;
            if plain.iter().zip(&lambda).all(|(a, b)| (a - b).abs() < 1e-8) {
                break;
            }
        }
        assert!(
            cold.sweeps < sweeps,
            "{cold:?} against {sweeps} plain sweeps"
        );
    }
}
