//! Chebyshev semi-iterative acceleration of the cloth's local/global iterations (Wang 2015, "A
//! Chebyshev semi-iterative approach for accelerating projective and position-based
//! dynamics", section 4), and the iterations' stopping rule.
//!
//! After each global solve the plain iterate `x^` is extrapolated from the two iterates before
//! it, `x_(k+1) = omega_(k+1) (x^ - x_(k-1)) + x_(k-1)`, with `omega_1 = 1`,
//! `omega_2 = 2 / (2 - rho^2)`, `omega_(k+1) = 4 / (4 - rho^2 omega_k)` for an estimate `rho`
//! of the iterations' spectral radius. The sequence restarts (`omega = 1`) where a global solve
//! moved the cloth much further than the one before ([`RESTART_GROWTH`]: the iterations
//! diverging, or contacts found again), as the solids' right-hand-side extrapolation restarts
//! where their residual grows (`crate::sim::world::step`). The iterations stop once a global
//! solve moves no vertex by more than the tolerance.
//!
//! Why: ten plain iterations leave a cotton flag of 32 x 32 cells in a 3 m/s wind far from the
//! implicit step's solution, and the error crumples it at the cells' scale (mean angle between
//! neighbouring triangles 65-68 degrees after 3-4 s, against 16 degrees after 100 plain
//! iterations or with four substeps of ten); 25 iterations accelerated with `rho = 0.97` give
//! 20 degrees (`benches/cloth.rs` has the cost, `docs/PERFORMANCE.md` the other counts).
//!
//! The cloth's step extrapolates only while the cloth touches nothing, itself and other
//! cloths included, and never its last iterate: with the extrapolation on in contact, the
//! extrapolated iterates overshot the contact planes and pairs (measured: a sheet passed
//! through a pinned sheet and another through a drum, vertices ended inside a ball and a jelly
//! cube, a heap of cloth still moved at 5 m/s after seconds, `tests/sim_cloth*.rs`).
//! Deviation from Wang: no start delay and no under-relaxation; the restart rule instead,
//! measured on the same flag.

use crate::sim::math::Vec3;

/// The sequence restarts where a global solve moved the cloth more than this many times as far
/// as the one before. Measured on the flag of the module docs, 25 iterations, mean angles at
/// 4 s: restarting on any growth (the solids' rule) 25 degrees; on twice, 21; on four times,
/// 17, as never restarting (18).
const RESTART_GROWTH: f64 = 4.0;

/// The iterates the extrapolation needs, and where its sequence stands.
#[derive(Debug, Default)]
pub(super) struct Chebyshev {
    /// The iterate before the last global solve, and the one before that (m).
    now: Vec<Vec3>,
    before: Vec<Vec3>,
    /// The current weight and the plain iterations since the sequence restarted.
    omega: f64,
    run: usize,
    /// How far the last global solve moved the cloth (m, the largest vertex move).
    moved: f64,
}

impl Chebyshev {
    /// Starts a step's iterations from `x`.
    pub fn begin(&mut self, x: &[Vec3]) {
        self.now.clear();
        self.now.extend_from_slice(x);
        self.before.clear();
        self.before.extend_from_slice(x);
        self.omega = 1.0;
        self.run = 0;
        self.moved = f64::INFINITY;
    }

    /// After a global solve took the iterate `now` (kept since the last call) to `x`: extrapolates
    /// `x` with `rho` (in `[0, 1)`, else none), keeps it as the iterate the next solve starts
    /// from, and returns the largest distance (m) the solve moved a vertex.
    pub fn extrapolate(&mut self, x: &mut [Vec3], rho: f64) -> f64 {
        let moved = x
            .iter()
            .zip(&self.now)
            .map(|(a, b)| (a - b).norm_squared())
            .fold(0.0, f64::max)
            .sqrt();
        let rho = if (0.0..1.0).contains(&rho) { rho } else { 0.0 };
        // The first solve of a step is a plain one (`moved` not yet known).
        self.run = if rho == 0.0 || !self.moved.is_finite() || moved > RESTART_GROWTH * self.moved {
            0
        } else {
            self.run + 1
        };
        self.moved = moved;
        let r2 = rho * rho;
        self.omega = match self.run {
            0 => 1.0,
            1 => 2.0 / (2.0 - r2),
            _ => 4.0 / (4.0 - r2 * self.omega),
        };
        if self.omega != 1.0 {
            for (p, b) in x.iter_mut().zip(&self.before) {
                *p = (*p - b) * self.omega + b;
            }
        }
        std::mem::swap(&mut self.now, &mut self.before);
        moved
    }

    /// The iterate the next global solve starts from is `x` (after the contacts moved it).
    pub fn starts_from(&mut self, x: &[Vec3]) {
        self.now.copy_from_slice(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `iterations` steps of the linear iteration `x <- b x + c` per vertex (`b` in `[0, 0.95]`,
    /// a stand-in for the PD iterations' slowest modes) from zero, extrapolated with `rho`;
    /// returns the largest distance from its fixed point `c / (1 - b)`.
    fn error_after(iterations: usize, rho: f64) -> f64 {
        let b: Vec<f64> = (0..20).map(|i| 0.95 * i as f64 / 19.0).collect();
        let c: Vec<Vec3> = (0..20)
            .map(|i| Vec3::new(1.0, -0.5, 0.25 * i as f64))
            .collect();
        let mut x = vec![Vec3::zeros(); 20];
        let mut chebyshev = Chebyshev::default();
        chebyshev.begin(&x);
        for _ in 0..iterations {
            for ((x, b), c) in x.iter_mut().zip(&b).zip(&c) {
                *x = *x * *b + c;
            }
            chebyshev.extrapolate(&mut x, rho);
            chebyshev.starts_from(&x);
        }
        x.iter()
            .zip(&b)
            .zip(&c)
            .map(|((x, b), c)| (x - c / (1.0 - b)).norm())
            .fold(0.0, f64::max)
    }

    #[test]
    fn the_extrapolation_converges_to_the_plain_iterations_fixed_point_much_faster() {
        // From zero the error starts at the fixed point's size (up to about 98). Plain, the
        // slowest mode keeps 0.95^25 = 0.28 of it; Chebyshev's bound is 1 / T_25(1 / 0.95),
        // about 6e-4 of it.
        let (start, plain, extrapolated) = (
            error_after(0, 0.0),
            error_after(25, 0.0),
            error_after(25, 0.95),
        );
        assert!(plain > 0.2 * start, "plain {plain} of {start}");
        assert!(
            extrapolated < 1e-3 * start,
            "extrapolated {extrapolated} of {start} (plain {plain})"
        );
        // And it still converges from there.
        let later = error_after(60, 0.95);
        assert!(later < 1e-6 * start, "{later} of {start}");
    }

    #[test]
    fn without_rho_the_iterates_are_left_as_solved_and_moves_are_measured() {
        let mut chebyshev = Chebyshev::default();
        let start = vec![Vec3::zeros(); 3];
        chebyshev.begin(&start);
        let mut x = vec![Vec3::new(0.0, 3.0, 4.0), Vec3::x(), Vec3::zeros()];
        let solved = x.clone();
        assert_eq!(chebyshev.extrapolate(&mut x, 0.0), 5.0);
        assert_eq!(x, solved);
        chebyshev.starts_from(&x);
        // A first solve is never extrapolated, whatever rho.
        chebyshev.begin(&start);
        assert_eq!(chebyshev.extrapolate(&mut x, 0.9), 5.0);
        assert_eq!(x, solved);
    }
}
