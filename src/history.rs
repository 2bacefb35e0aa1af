//! The last few seconds of solver statistics, one sample per fixed step, for live plots.

use std::collections::VecDeque;

use bevy::prelude::Resource;

use crate::diagnostics::DeformableDiagnostics;

/// One fixed step's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepSample {
    /// Wall time of the whole step (ms).
    pub step_ms: f32,
    /// Contact detection: obstacles, soft-soft, re-detection (ms, summed over bodies).
    pub detect_ms: f32,
    /// PD local steps (ms, summed over bodies).
    pub local_ms: f32,
    /// PD global steps and MPRGP (ms, summed over bodies).
    pub global_ms: f32,
    /// The velocity-level contact LCP (ms).
    pub lcp_ms: f32,
    /// Write-back of the render points and meshes (ms, of the frame before this step).
    pub writeback_ms: f32,
    /// MPRGP iterations.
    pub mprgp_iterations: u32,
    /// Largest relative KKT residual of the contact QPs.
    pub kkt_residual: f32,
    /// LCP iterations (projected CG plus Gauss-Seidel sweeps).
    pub lcp_iterations: u32,
    /// Largest natural-map residual of the LCP (m/s).
    pub lcp_residual: f32,
    /// Active contact constraints.
    pub active_contacts: u32,
    /// Contact regions.
    pub regions: u32,
}

impl StepSample {
    /// The sample of the step `d` describes.
    pub fn from_diagnostics(d: &DeformableDiagnostics) -> Self {
        Self {
            step_ms: d.step_ms as f32,
            detect_ms: d.detect_ms as f32,
            local_ms: d.local_ms as f32,
            global_ms: d.global_ms as f32,
            lcp_ms: d.lcp_ms as f32,
            writeback_ms: d.writeback_ms as f32,
            mprgp_iterations: d.mprgp_iterations as u32,
            kkt_residual: d.kkt_residual as f32,
            lcp_iterations: d.lcp_iterations as u32,
            lcp_residual: d.lcp_residual as f32,
            active_contacts: d.active_constraints as u32,
            regions: d.contact_regions as u32,
        }
    }
}

/// The samples of the last [`StepHistory::capacity`] fixed steps, oldest first.
#[derive(Resource, Debug, Clone)]
pub struct StepHistory {
    samples: VecDeque<StepSample>,
    capacity: usize,
}

impl Default for StepHistory {
    /// Five seconds at the default 64 Hz fixed step.
    fn default() -> Self {
        Self::with_capacity(320)
    }
}

impl StepHistory {
    /// Keeps the last `capacity` samples (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            samples: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// How many samples are kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Appends a sample, dropping the oldest when full (no allocation once full).
    pub fn push(&mut self, sample: StepSample) {
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> impl ExactSizeIterator<Item = &StepSample> + '_ {
        self.samples.iter()
    }

    /// The newest sample.
    pub fn latest(&self) -> Option<&StepSample> {
        self.samples.back()
    }

    /// Largest value of `f` over the kept samples (0 when empty).
    pub fn max_of(&self, f: impl Fn(&StepSample) -> f32) -> f32 {
        self.samples.iter().map(f).fold(0.0, f32::max)
    }

    /// Forgets every sample.
    pub fn clear(&mut self) {
        self.samples.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_samples_in_order() {
        let mut h = StepHistory::with_capacity(3);
        for i in 0..5 {
            h.push(StepSample {
                step_ms: i as f32,
                ..Default::default()
            });
        }
        let kept: Vec<f32> = h.samples().map(|s| s.step_ms).collect();
        assert_eq!(kept, [2.0, 3.0, 4.0]);
        assert_eq!(h.latest().unwrap().step_ms, 4.0);
        assert_eq!(h.max_of(|s| s.step_ms), 4.0);
        h.clear();
        assert!(h.latest().is_none());
    }
}
