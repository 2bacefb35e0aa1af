//! A small deterministic random generator (xorshift64) for the unit tests' random scenes.

/// Xorshift64: reproducible sequences from a seed, no dependency.
pub(crate) struct Rng(pub u64);

impl Rng {
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[-1, 1)`.
    pub fn signed(&mut self) -> f64 {
        2.0 * self.unit() - 1.0
    }
}
