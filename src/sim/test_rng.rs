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

    /// A random symmetric positive definite `m x m` matrix, row-major: `B B' + 0.1 I` with `B`
    /// uniform in `[-1, 1)`.
    pub fn spd(&mut self, m: usize) -> Vec<f64> {
        let b: Vec<f64> = (0..m * m).map(|_| self.signed()).collect();
        let mut s = vec![0.0; m * m];
        for i in 0..m {
            for j in 0..m {
                s[i * m + j] = (0..m).map(|k| b[i * m + k] * b[j * m + k]).sum::<f64>()
                    + if i == j { 0.1 } else { 0.0 };
            }
        }
        s
    }
}
