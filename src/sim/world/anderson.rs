//! Anderson acceleration of the PD iterations (Peng et al. 2018, "Anderson acceleration for
//! geometry optimization and physics simulation", section 3; Walker and Ni 2011), on the
//! right-hand sides.
//!
//! One PD iteration is a fixed-point map on the right-hand side `u` the global step solves
//! with: `G(u) = b(x(u))`, the local step's right-hand side at the constrained solution `x(u)`.
//! Its residual `f(u) = G(u) - u` is, up to what an inexact QP leaves, the implicit step's
//! optimality residual that the iterations stop on (`step::residual`). Anderson acceleration
//! keeps the last `m` differences `dG_i = G(u_(i+1)) - G(u_i)` and `dF_i = f_(i+1) - f_i` and
//! takes
//!
//! `u_(k+1) = G(u_k) - dG theta`, `theta = argmin ||f_k - dF theta||`,
//!
//! the combination of the last `m + 1` images whose linearised residual is smallest (type II).
//! Without contacts `x = A^-1 u`, so this is Anderson acceleration of the iterates themselves;
//! with contacts the constrained step then projects the combined right-hand side, so every
//! iterate stays feasible (as for the Chebyshev weights these replace).
//!
//! The small least-squares problem is solved by its normal equations, `(dF' dF + eps I) theta =
//! dF' f`, summed over an island's bodies in member order (the result does not depend on the
//! thread count), with `eps` a relative `1e-10` of the diagonal's mean against near-dependent
//! columns.
//!
//! Deviation from Peng et al.: their safeguard evaluates the PD energy at the accelerated
//! iterate and falls back to the plain one where it rose. Here the history is dropped instead
//! (the next iteration is plain) wherever the residual grew or re-detection changed the
//! contacts, the restart rule of the Chebyshev weights: the residual comes with the local step
//! the next iteration runs anyway, where the energy would cost an extra pass, and a
//! changed contact set makes the old differences describe another map.

use crate::sim::math::Vec3;

/// The largest history accepted ([`crate::sim::world::WorldSettings::anderson_window`]).
pub const MAX_ANDERSON_WINDOW: usize = 8;

/// One body's share of the history: its coordinates of the stored differences, and the last
/// image and residual.
#[derive(Debug, Default, Clone)]
pub(crate) struct AndersonHistory {
    /// `dG_i` (N), one vector per slot.
    dg: Vec<Vec<Vec3>>,
    /// `dF_i` (N), one vector per slot.
    df: Vec<Vec<Vec3>>,
    /// `G(u)` of the last iteration (N).
    g_last: Vec<Vec3>,
    /// `f(u)` of the last iteration (N).
    f_last: Vec<Vec3>,
    /// `f(u)` of this iteration (N), scratch.
    f_now: Vec<Vec3>,
    /// This body's terms of `dF' dF` (the slots in use).
    pub gram: [[f64; MAX_ANDERSON_WINDOW]; MAX_ANDERSON_WINDOW],
    /// This body's terms of `dF' f`.
    pub rhs: [f64; MAX_ANDERSON_WINDOW],
}

impl AndersonHistory {
    fn ensure(&mut self, n: usize, window: usize) {
        for slots in [&mut self.dg, &mut self.df] {
            slots.resize_with(window, Vec::new);
            for s in slots.iter_mut() {
                s.resize(n, Vec3::zeros());
            }
        }
        for v in [&mut self.g_last, &mut self.f_last, &mut self.f_now] {
            v.resize(n, Vec3::zeros());
        }
    }
}

/// An island's side of the history: which slots hold differences, and the combination.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AndersonState {
    /// Slots in use (at most the window): slots `0..count`, filled in order after a start or
    /// restart and overwritten oldest first once all are in use.
    pub count: usize,
    /// The slot the next difference goes to.
    next: usize,
    /// This iteration writes a difference into slot `slot`.
    push: Option<usize>,
    /// Whether the bodies hold a last image and residual to difference against.
    has_last: bool,
    /// Whether this is the step's first iteration (`u` is the first image itself).
    first: bool,
    /// The combination's coefficients, one per slot in use.
    pub theta: [f64; MAX_ANDERSON_WINDOW],
}

impl AndersonState {
    /// Before an iteration's per-body pass: starts the history on the step's first iteration
    /// (`first`), drops it where `restart`, and picks the slot this iteration's difference
    /// goes to.
    pub fn begin(&mut self, first: bool, restart: bool, window: usize) {
        self.first = first;
        self.push = None;
        if first {
            self.count = 0;
            self.next = 0;
            self.has_last = false;
            return;
        }
        if restart {
            // Slots `0..count` are the ones in use: refill from the first.
            self.count = 0;
            self.next = 0;
        }
        if self.has_last && !restart {
            self.push = Some(self.next);
            self.next = (self.next + 1) % window;
            self.count = (self.count + 1).min(window);
        }
        self.has_last = true;
    }

    /// The coefficients from the island's summed normal equations (`gram`, `rhs` over
    /// [`AndersonState::count`] slots); all zero (a plain iteration) if they are singular or
    /// not finite.
    pub fn solve(&mut self, gram: &[[f64; MAX_ANDERSON_WINDOW]; MAX_ANDERSON_WINDOW], rhs: &[f64]) {
        let m = self.count;
        self.theta = [0.0; MAX_ANDERSON_WINDOW];
        if m == 0 {
            return;
        }
        let mut a = [[0.0; MAX_ANDERSON_WINDOW + 1]; MAX_ANDERSON_WINDOW];
        let trace: f64 = (0..m).map(|i| gram[i][i]).sum();
        let eps = 1e-10 * trace / m as f64;
        for i in 0..m {
            for j in 0..m {
                a[i][j] = gram[i][j];
            }
            a[i][i] += eps;
            a[i][m] = rhs[i];
        }
        if let Some(theta) = solve_dense(&mut a, m) {
            self.theta[..m].copy_from_slice(&theta[..m]);
        }
    }
}

/// Gaussian elimination with partial pivoting on the augmented `m x (m + 1)` system; `None`
/// where a pivot vanishes or the solution is not finite.
fn solve_dense(
    a: &mut [[f64; MAX_ANDERSON_WINDOW + 1]; MAX_ANDERSON_WINDOW],
    m: usize,
) -> Option<[f64; MAX_ANDERSON_WINDOW]> {
    for col in 0..m {
        let pivot = (col..m).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if !(a[pivot][col].abs() > 0.0) {
            return None;
        }
        a.swap(col, pivot);
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for row in &mut lower[..m - col - 1] {
            let factor = row[col] / pivot_row[col];
            for (x, p) in row[col..=m].iter_mut().zip(&pivot_row[col..=m]) {
                *x -= factor * p;
            }
        }
    }
    let mut x = [0.0; MAX_ANDERSON_WINDOW];
    for row in (0..m).rev() {
        let tail: f64 = (row + 1..m).map(|k| a[row][k] * x[k]).sum();
        x[row] = (a[row][m] - tail) / a[row][row];
    }
    x[..m].iter().all(|v| v.is_finite()).then_some(x)
}

/// One body's first pass of an iteration, after its local step put `G(u)` into `b`
/// (`u_prev` is the right-hand side of the last solve): records the difference the island
/// chose ([`AndersonState::begin`]) and this body's terms of the normal equations. On the
/// step's first iteration `u_prev` becomes `b`.
pub(crate) fn record(
    history: &mut AndersonHistory,
    state: &AndersonState,
    window: usize,
    b: &[Vec3],
    u_prev: &mut [Vec3],
) {
    let n = b.len();
    history.ensure(n, window);
    if state.first {
        u_prev.copy_from_slice(b);
        return;
    }
    let h = history;
    for ((f, g), u) in h.f_now.iter_mut().zip(b).zip(u_prev.iter()) {
        *f = g - u;
    }
    if let Some(slot) = state.push {
        for (d, (g, last)) in h.dg[slot].iter_mut().zip(b.iter().zip(&h.g_last)) {
            *d = g - last;
        }
        for (d, (f, last)) in h.df[slot].iter_mut().zip(h.f_now.iter().zip(&h.f_last)) {
            *d = f - last;
        }
    }
    h.g_last.copy_from_slice(b);
    std::mem::swap(&mut h.f_last, &mut h.f_now);
    let m = state.count;
    // Only the new slot's row and column of `dF' dF` changed; the others were computed when
    // the later of their two slots was written, and neither has changed since.
    if let Some(slot) = state.push {
        for j in 0..m {
            let value = dot(&h.df[slot], &h.df[j]);
            h.gram[slot][j] = value;
            h.gram[j][slot] = value;
        }
    }
    for i in 0..m {
        h.rhs[i] = dot(&h.df[i], &h.f_last);
    }
}

/// One body's second pass: `b = G(u) - dG theta` (unchanged where the history is empty), which
/// the iteration solves with, and `u_prev = b`.
pub(crate) fn apply(
    history: &AndersonHistory,
    state: &AndersonState,
    b: &mut [Vec3],
    u_prev: &mut [Vec3],
) {
    if !state.first {
        for i in 0..state.count {
            let theta = state.theta[i];
            if theta != 0.0 {
                for (b, d) in b.iter_mut().zip(&history.dg[i]) {
                    *b -= theta * d;
                }
            }
        }
        u_prev.copy_from_slice(b);
    }
}

fn dot(a: &[Vec3], b: &[Vec3]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a.dot(b)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A linear fixed-point map `G(u) = M u + c` with a contraction `M`: Anderson with a
    /// window of the dimension finds the fixed point in about `n + 1` steps, where the plain
    /// iteration still has a large residual (the property of Anderson type II on linear maps:
    /// with the whole history it is equivalent to GMRES; Walker and Ni 2011).
    #[test]
    fn on_a_linear_map_it_reaches_the_fixed_point_far_ahead_of_the_plain_iteration() {
        let n = 3;
        // A non-symmetric contraction acting on Vec3 entries coordinate by coordinate.
        let m = [[0.9, 0.05, 0.0], [0.0, 0.8, 0.1], [0.02, 0.0, 0.95]];
        let c = [
            Vec3::new(1.0, -2.0, 0.5),
            Vec3::new(0.3, 0.1, -1.0),
            Vec3::new(-0.7, 2.0, 1.0),
        ];
        let map = |u: &[Vec3]| -> Vec<Vec3> {
            (0..n)
                .map(|i| (0..n).map(|j| m[i][j] * u[j]).sum::<Vec3>() + c[i])
                .collect()
        };
        // The fixed point, by many plain iterations.
        let mut exact = vec![Vec3::zeros(); n];
        for _ in 0..5000 {
            exact = map(&exact);
        }
        let error = |u: &[Vec3]| -> f64 {
            u.iter()
                .zip(&exact)
                .map(|(a, b)| (a - b).norm_squared())
                .sum::<f64>()
                .sqrt()
        };
        let window = 4;
        let mut history = AndersonHistory::default();
        let mut state = AndersonState::default();
        let mut u = vec![Vec3::zeros(); n];
        let mut plain = vec![Vec3::zeros(); n];
        let mut u_prev = vec![Vec3::zeros(); n];
        for k in 0..8 {
            let mut b = map(&u);
            state.begin(k == 0, false, window);
            record(&mut history, &state, window, &b, &mut u_prev);
            state.solve(&history.gram, &history.rhs);
            apply(&history, &state, &mut b, &mut u_prev);
            u = b;
            plain = map(&plain);
        }
        assert!(error(&u) < 1e-10, "accelerated error {}", error(&u));
        assert!(error(&plain) > 1.0, "plain error {}", error(&plain));
    }

    #[test]
    fn a_restart_drops_the_history_and_a_singular_system_gives_a_plain_step() {
        let mut state = AndersonState::default();
        state.begin(true, false, 3);
        assert_eq!(state.count, 0);
        state.begin(false, false, 3); // first difference needs a last image: none yet
        assert_eq!(state.count, 0);
        state.begin(false, false, 3);
        state.begin(false, false, 3);
        assert_eq!(state.count, 2);
        state.begin(false, true, 3);
        assert_eq!(state.count, 0);
        // After a restart the differences go to the slots in use, from the first: with the
        // history wrapped before it, the next one would otherwise land past them.
        for _ in 0..4 {
            state.begin(false, false, 3);
        }
        assert_eq!((state.count, state.push), (3, Some(0)));
        state.begin(false, true, 3);
        state.begin(false, false, 3);
        assert_eq!((state.count, state.push), (1, Some(0)));
        let mut state = AndersonState {
            count: 2,
            ..AndersonState::default()
        };
        state.solve(
            &[[0.0; MAX_ANDERSON_WINDOW]; MAX_ANDERSON_WINDOW],
            &[1.0; 8],
        );
        assert_eq!(state.theta, [0.0; MAX_ANDERSON_WINDOW]);
        let mut gram = [[0.0; MAX_ANDERSON_WINDOW]; MAX_ANDERSON_WINDOW];
        gram[0][0] = f64::NAN;
        state.solve(&gram, &[1.0; 8]);
        assert_eq!(state.theta, [0.0; MAX_ANDERSON_WINDOW]);
    }
}
