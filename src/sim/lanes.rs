//! Four `f64` lanes and their masks: the arithmetic of the vectorised local step
//! ([`crate::sim::local_step`]).
//!
//! Every operation is lane-wise IEEE arithmetic written as plain loops over `[f64; 4]` and
//! inlined into its caller, which LLVM turns into packed instructions (one 256-bit register per
//! value where the caller is compiled with AVX2, two 128-bit ones on baseline x86-64). Masks are
//! all-ones or all-zero bit patterns per lane, so a select is exact (`and`/`andnot`/`or`) and
//! never rounds. No fused multiply-add is used: each lane computes exactly what the scalar code
//! with the same operations computes, on every instruction set.

use std::ops::{Add, BitAnd, BitOr, Div, Mul, Neg, Not, Sub};

/// Number of lanes.
pub const LANES: usize = 4;

/// Four `f64` values, one per lane.
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
        Self(std::array::from_fn(|i| f(self.0[i])))
    }

    #[inline(always)]
    fn zip(self, o: Self, f: impl Fn(f64, f64) -> f64) -> Self {
        Self(std::array::from_fn(|i| f(self.0[i], o.0[i])))
    }

    #[inline(always)]
    fn compare(self, o: Self, f: impl Fn(f64, f64) -> bool) -> LaneMask {
        LaneMask(std::array::from_fn(|i| {
            if f(self.0[i], o.0[i]) { u64::MAX } else { 0 }
        }))
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
        Lanes(std::array::from_fn(|i| {
            f64::from_bits((a.0[i].to_bits() & self.0[i]) | (b.0[i].to_bits() & !self.0[i]))
        }))
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
        Self(self.0.map(|m| !m))
    }
}

impl BitAnd for LaneMask {
    type Output = Self;
    #[inline(always)]
    fn bitand(self, o: Self) -> Self {
        Self(std::array::from_fn(|i| self.0[i] & o.0[i]))
    }
}

impl BitOr for LaneMask {
    type Output = Self;
    #[inline(always)]
    fn bitor(self, o: Self) -> Self {
        Self(std::array::from_fn(|i| self.0[i] | o.0[i]))
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

    #[test]
    fn select_is_bit_exact_and_masks_combine() {
        let a = Lanes([1.0, -0.0, f64::NAN, 3.5]);
        let b = Lanes([2.0, 0.0, 4.0, f64::INFINITY]);
        let m = a.lt(b); // 1 < 2, -0 < 0 false, NaN < 4 false, 3.5 < inf
        assert_eq!(m, LaneMask([u64::MAX, 0, 0, u64::MAX]));
        let s = m.select(a, b);
        assert_eq!(s.0[0], 1.0);
        assert_eq!(s.0[1].to_bits(), 0.0f64.to_bits());
        assert_eq!(s.0[2], 4.0);
        assert_eq!(s.0[3], 3.5);
        assert!((!m & m) == LaneMask([0; LANES]));
        assert!((!m | m).0.iter().all(|&x| x == u64::MAX));
        assert!(m.any() && !(!m & m).any());
        assert_eq!(a.is_finite(), LaneMask([u64::MAX, u64::MAX, 0, u64::MAX]));
        assert_eq!((a * 2.0 + 1.0).0[3], 8.0);
    }
}
