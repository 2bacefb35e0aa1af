//! Eight `f64` lanes and their masks: the arithmetic of the vectorised local step
//! ([`crate::sim::local_step`]).
//!
//! Every operation is lane-wise IEEE arithmetic written as plain loops over `[f64; 8]` and
//! inlined into its caller, which LLVM turns into packed instructions (two 256-bit registers per
//! value where the caller is compiled with AVX2, four 128-bit ones on baseline x86-64). Masks are
//! all-ones or all-zero bit patterns per lane, so a select is exact (`and`/`andnot`/`or`) and
//! never rounds. No fused multiply-add is used: each lane computes exactly what the scalar code
//! with the same operations computes, on every instruction set.
//!
//! Why eight lanes where one AVX2 register holds four: the local step's SVD is a chain of
//! dependent operations (each Jacobi rotation needs the last one's result, and the square roots
//! and divisions have latencies of 13-20 cycles), so one block of four left the floating-point
//! units idle most of the time. Two registers per value give every instruction a twin that does
//! not depend on it. Measured on the warm-started local step of a 10,648-vertex cube, one thread
//! (`cargo bench --bench kernels`, and a profile of the same loop): 126 ns per tet with four
//! lanes, 88 with eight, 137 with sixteen (the registers run out and values spill); an AVX-512
//! copy of the eight-lane loop (one 512-bit register per value) was slower on this AMD EPYC,
//! 154 ns, and is not used.

// Index loops over the lanes read best and vectorise reliably.
#![allow(clippy::needless_range_loop)]

use std::ops::{Add, BitAnd, BitOr, Div, Mul, Neg, Not, Sub};

/// Number of lanes.
pub const LANES: usize = 8;

/// Eight `f64` values, one per lane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lanes(pub [f64; LANES]);

/// Per lane: true (all bits set) or false (all bits clear).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneMask(pub [u64; LANES]);

impl Lanes {
    /// The same value in every lane.
    #[inline(always)]
    pub fn splat(x: f64) -> Self {
        Self([x; LANES])
    }

    #[inline(always)]
    fn map(self, f: impl Fn(f64) -> f64) -> Self {
        let mut out = [0.0; LANES];
        for i in 0..LANES {
            out[i] = f(self.0[i]);
        }
        Self(out)
    }

    #[inline(always)]
    fn zip(self, o: Self, f: impl Fn(f64, f64) -> f64) -> Self {
        let mut out = [0.0; LANES];
        for i in 0..LANES {
            out[i] = f(self.0[i], o.0[i]);
        }
        Self(out)
    }

    #[inline(always)]
    fn compare(self, o: Self, f: impl Fn(f64, f64) -> bool) -> LaneMask {
        let mut out = [0; LANES];
        for i in 0..LANES {
            out[i] = if f(self.0[i], o.0[i]) { u64::MAX } else { 0 };
        }
        LaneMask(out)
    }

    /// Square root per lane.
    #[inline(always)]
    pub fn sqrt(self) -> Self {
        self.map(f64::sqrt)
    }

    /// Absolute value per lane.
    #[inline(always)]
    pub fn abs(self) -> Self {
        self.map(f64::abs)
    }

    /// `f64::max` per lane.
    #[inline(always)]
    pub fn max(self, o: Self) -> Self {
        self.zip(o, f64::max)
    }

    /// `f64::min` per lane.
    #[inline(always)]
    pub fn min(self, o: Self) -> Self {
        self.zip(o, f64::min)
    }

    /// `self < o` per lane.
    #[inline(always)]
    pub fn lt(self, o: Self) -> LaneMask {
        self.compare(o, |a, b| a < b)
    }

    /// `self > o` per lane.
    #[inline(always)]
    pub fn gt(self, o: Self) -> LaneMask {
        self.compare(o, |a, b| a > b)
    }

    /// `self >= o` per lane.
    #[inline(always)]
    pub fn ge(self, o: Self) -> LaneMask {
        self.compare(o, |a, b| a >= b)
    }

    /// Finite (neither infinite nor NaN) per lane.
    #[inline(always)]
    pub fn is_finite(self) -> LaneMask {
        self.abs().lt(Self::splat(f64::INFINITY))
    }
}

impl LaneMask {
    /// Per lane: `a` where the mask is set, else `b` (bit-exact).
    #[inline(always)]
    pub fn select(self, a: Lanes, b: Lanes) -> Lanes {
        let mut out = [0.0; LANES];
        for i in 0..LANES {
            let m = self.0[i];
            out[i] = f64::from_bits((a.0[i].to_bits() & m) | (b.0[i].to_bits() & !m));
        }
        Lanes(out)
    }

    /// Whether any lane is set.
    #[inline(always)]
    pub fn any(self) -> bool {
        self.0.iter().fold(0, |acc, &m| acc | m) != 0
    }

    /// Whether lane `i` is set.
    #[inline(always)]
    pub fn get(self, i: usize) -> bool {
        self.0[i] != 0
    }
}

impl Not for LaneMask {
    type Output = Self;
    #[inline(always)]
    fn not(self) -> Self {
        let mut out = self.0;
        for m in &mut out {
            *m = !*m;
        }
        Self(out)
    }
}

impl BitAnd for LaneMask {
    type Output = Self;
    #[inline(always)]
    fn bitand(self, o: Self) -> Self {
        let mut out = self.0;
        for i in 0..LANES {
            out[i] &= o.0[i];
        }
        Self(out)
    }
}

impl BitOr for LaneMask {
    type Output = Self;
    #[inline(always)]
    fn bitor(self, o: Self) -> Self {
        let mut out = self.0;
        for i in 0..LANES {
            out[i] |= o.0[i];
        }
        Self(out)
    }
}

macro_rules! lane_op {
    ($trait:ident, $method:ident, $op:tt) => {
        impl $trait for Lanes {
            type Output = Self;
            #[inline(always)]
            fn $method(self, o: Self) -> Self {
                self.zip(o, |a, b| a $op b)
            }
        }
        impl $trait<f64> for Lanes {
            type Output = Self;
            #[inline(always)]
            fn $method(self, o: f64) -> Self {
                self.map(|a| a $op o)
            }
        }
        impl $trait<Lanes> for f64 {
            type Output = Lanes;
            #[inline(always)]
            fn $method(self, o: Lanes) -> Lanes {
                o.map(|b| self $op b)
            }
        }
    };
}

lane_op!(Add, add, +);
lane_op!(Sub, sub, -);
lane_op!(Mul, mul, *);
lane_op!(Div, div, /);

impl Neg for Lanes {
    type Output = Self;
    #[inline(always)]
    fn neg(self) -> Self {
        self.map(|a| -a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four values repeated over the lanes.
    fn lanes(v: [f64; 4]) -> Lanes {
        Lanes(std::array::from_fn(|l| v[l % 4]))
    }

    fn mask(v: [bool; 4]) -> LaneMask {
        LaneMask(std::array::from_fn(|l| if v[l % 4] { u64::MAX } else { 0 }))
    }

    #[test]
    fn select_is_bit_exact_and_masks_combine() {
        let a = lanes([1.0, -0.0, f64::NAN, 3.5]);
        let b = lanes([2.0, 0.0, 4.0, f64::INFINITY]);
        let m = a.lt(b); // 1 < 2, -0 < 0 false, NaN < 4 false, 3.5 < inf
        assert_eq!(m, mask([true, false, false, true]));
        let s = m.select(a, b);
        for l in (0..LANES).step_by(4) {
            assert_eq!(s.0[l], 1.0);
            assert_eq!(s.0[l + 1].to_bits(), 0.0f64.to_bits());
            assert_eq!(s.0[l + 2], 4.0);
            assert_eq!(s.0[l + 3], 3.5);
        }
        assert!((!m & m) == LaneMask([0; LANES]));
        assert!((!m | m).0.iter().all(|&x| x == u64::MAX));
        assert!(m.any() && !(!m & m).any());
        assert_eq!(a.is_finite(), mask([true, true, false, true]));
        assert_eq!((a * 2.0 + 1.0).0[3], 8.0);
        assert_eq!((a * 2.0 + 1.0).0[LANES - 1], 8.0);
    }
}
