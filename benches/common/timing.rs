//! Timing helpers shared by the benches: medians, milliseconds, and the time a capped solver
//! takes to reach a residual.

use std::time::Duration;

/// The median of `v` (sorted in place; 0 when empty).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Smallest cap (iterations or sweeps) whose result reaches `target`, by geometric search then
/// bisection, where `run(cap)` returns the residual reached and the time taken; returns the cap
/// and the median time (ms) of seven runs at it, or `None` if `max_cap` does not reach it.
pub fn time_to_residual(
    mut run: impl FnMut(usize) -> (f64, Duration),
    target: f64,
    max_cap: usize,
) -> Option<(usize, f64)> {
    let mut lo = 0usize;
    let mut hi = 1usize;
    loop {
        let (r, _) = run(hi);
        if r <= target {
            break;
        }
        lo = hi;
        if hi >= max_cap {
            return None;
        }
        hi = (hi * 3).div_ceil(2).max(hi + 1).min(max_cap);
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if run(mid).0 <= target {
            hi = mid
        } else {
            lo = mid
        }
    }
    let mut times: Vec<f64> = (0..7).map(|_| ms(run(hi).1)).collect();
    Some((hi, median(&mut times)))
}
