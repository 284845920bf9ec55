//! The activations a kernel can apply to its output while it is in registers
//! (the convolution's epilogue), with the one scalar formula each: the
//! interpreter's standalone `relu`, `leaky_relu` and `clip` ops use the same
//! [`Activation::apply`], so a fused activation is bit-identical to the op.
//!
//! **Invariant:** [`Activation::apply_v`] computes, lane by lane, exactly
//! [`Activation::apply`] (compares and selects only, no rounding): NaN
//! propagates (`relu(NaN) = NaN`), and `relu(-0.0) = -0.0` as ONNX's
//! `max(x, 0)` written `if x < 0 { 0 } else { x }` gives.

use crate::simd::vector::Simd;

/// An elementwise activation (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// `if x < 0 { 0 } else { x }`
    Relu,
    /// `if x < 0 { alpha · x } else { x }`
    LeakyRelu(f32),
    /// `min(max(x, min), max)` as `y = if x < min { min } else { x }; if y > max { max } else { y }`
    Clip {
        /// lower bound
        min: f32,
        /// upper bound
        max: f32,
    },
}

impl Activation {
    /// The activation of one element.
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            Activation::LeakyRelu(alpha) => {
                if x < 0.0 {
                    alpha * x
                } else {
                    x
                }
            }
            Activation::Clip { min, max } => {
                let y = if x < min { min } else { x };
                if y > max { max } else { y }
            }
        }
    }

    /// [`Activation::apply`] on every lane of `x`.
    #[inline(always)]
    pub(crate) fn apply_v<S: Simd>(self, s: S, x: S::V) -> S::V {
        match self {
            Activation::Relu => {
                let zero = s.splat(0.0);
                s.select(s.lt(x, zero), zero, x)
            }
            Activation::LeakyRelu(alpha) => {
                let neg = s.lt(x, s.splat(0.0));
                s.select(neg, s.mul(s.splat(alpha), x), x)
            }
            Activation::Clip { min, max } => {
                let (lo, hi) = (s.splat(min), s.splat(max));
                let y = s.select(s.lt(x, lo), lo, x);
                s.select(s.lt(hi, y), hi, y)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Activation;
    use crate::simd::vector::{Scalar, Simd};

    const ALL: [Activation; 4] = [
        Activation::Relu,
        Activation::LeakyRelu(0.1),
        Activation::Clip { min: 0.0, max: 6.0 },
        Activation::Clip {
            min: -1.0,
            max: f32::INFINITY,
        },
    ];

    #[test]
    fn apply_is_the_documented_formula_nan_and_signed_zero_included() {
        let relu = Activation::Relu;
        assert!(relu.apply(f32::NAN).is_nan());
        assert_eq!(relu.apply(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(relu.apply(-3.0), 0.0);
        assert_eq!(Activation::LeakyRelu(0.5).apply(-3.0), -1.5);
        let relu6 = Activation::Clip { min: 0.0, max: 6.0 };
        assert_eq!((relu6.apply(7.0), relu6.apply(-1.0)), (6.0, 0.0));
        assert!(relu6.apply(f32::NAN).is_nan());
    }

    #[test]
    fn every_level_matches_the_scalar_formula_bit_for_bit() {
        let xs = [
            f32::NAN,
            -0.0,
            0.0,
            -1.5,
            2.5,
            7.0,
            -f32::INFINITY,
            f32::INFINITY,
            1e-40,
            -1e-40,
            6.0,
            -1.0,
            0.1,
            -7.5,
            3.0,
            f32::MAX,
        ];
        for act in ALL {
            let want: Vec<u32> = xs.iter().map(|&x| act.apply(x).to_bits()).collect();
            let scalar: Vec<u32> = xs
                .iter()
                .map(|&x| act.apply_v(Scalar, x).to_bits())
                .collect();
            assert_eq!(scalar, want, "{act:?}");
            #[cfg(target_arch = "x86_64")]
            {
                use crate::cpu::Level;
                use crate::simd::vector::{Avx2, Avx512};
                let level = crate::cpu::detected();
                let mut got = [0f32; 16];
                if level >= Level::Avx2 {
                    // SAFETY: the CPU has AVX2 and FMA; the loads and stores stay
                    // inside the 16-element arrays.
                    unsafe {
                        let s = Avx2::new();
                        for h in 0..2 {
                            let v = act.apply_v(s, s.load(xs.as_ptr().add(8 * h)));
                            s.store(got.as_mut_ptr().add(8 * h), v);
                        }
                    }
                    let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(bits, want, "avx2 {act:?}");
                }
                if level >= Level::Avx512 {
                    // SAFETY: the CPU has AVX-512; 16 lanes in 16-element arrays.
                    unsafe {
                        let s = Avx512::new();
                        s.store(got.as_mut_ptr(), act.apply_v(s, s.load(xs.as_ptr())));
                    }
                    let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(bits, want, "avx512 {act:?}");
                }
            }
        }
    }
}
