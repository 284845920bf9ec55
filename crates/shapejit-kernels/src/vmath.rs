//! The [`crate::math`] functions (plus `√`, `1/x`, negation, `|x|` and ReLU) over
//! slices at full vector width, one entry point per function and CPU level.
//!
//! [`Unary::apply`] runs at [`cpu::level`]; [`Unary::apply_at`] at a chosen
//! level (lowered to what the CPU has). For generated code, [`Unary::entry`]
//! returns a plain `unsafe extern "C" fn(src, dst, len)` of the level: it reads
//! `len` f32 at `src` and writes `len` f32 at `dst`; `src == dst` (in place) is
//! allowed, other overlaps are not. Full vectors are loaded and stored
//! unaligned; the last `len % lanes` elements go through masked loads and
//! stores (AVX-512 `k` masks; AVX2 `vmaskmov` loads, and stores of 4, 2 and 1
//! lanes), so nothing outside the two
//! ranges is touched.
//!
//! **Invariant:** every entry point computes each element with the same
//! per-lane formula as the scalar function of [`crate::math`], so the error
//! bounds stated there hold at every level; AVX2 and AVX-512 results are
//! bit-identical.

use crate::cpu::{self, Level};
use crate::error::KernelError;
use crate::math;
use crate::simd::vector::{Scalar, Simd};

/// A level's slice kernel: `dst[i] = f(src[i])` for `i < len` (`src == dst` allowed).
pub type UnaryFn = unsafe extern "C" fn(src: *const f32, dst: *mut f32, len: usize);

/// A per-lane formula, one type per function: entry points call it statically,
/// so it (and the intrinsics inside) inline into their `#[target_feature]` body.
trait Formula {
    fn apply<S: Simd>(s: S, x: S::V) -> S::V;
}

/// `dst[i] = F(src[i])`, full vectors then one masked tail.
///
/// # Safety
/// `src..src+len` readable, `dst..dst+len` writable, equal or disjoint.
#[inline(always)]
unsafe fn map<S: Simd, F: Formula>(s: S, src: *const f32, dst: *mut f32, len: usize) {
    let mut i = 0;
    // SAFETY: every access is below `len` (the caller's ranges); a lane is read
    // before its store, so in place is fine.
    unsafe {
        // four vectors per step: their formulas' dependency chains interleave
        // (no closures here: they would not inline into the `#[target_feature]`
        // entry points)
        let l = S::LANES;
        while i + 4 * l <= len {
            let x0 = s.load(src.add(i));
            let x1 = s.load(src.add(i + l));
            let x2 = s.load(src.add(i + 2 * l));
            let x3 = s.load(src.add(i + 3 * l));
            let (y0, y1) = (F::apply(s, x0), F::apply(s, x1));
            let (y2, y3) = (F::apply(s, x2), F::apply(s, x3));
            s.store(dst.add(i), y0);
            s.store(dst.add(i + l), y1);
            s.store(dst.add(i + 2 * l), y2);
            s.store(dst.add(i + 3 * l), y3);
            i += 4 * l;
        }
        while i + S::LANES <= len {
            s.store(dst.add(i), F::apply(s, s.load(src.add(i))));
            i += S::LANES;
        }
        if i < len {
            let v = F::apply(s, s.load_tail(src.add(i), len - i));
            s.store_tail(dst.add(i), len - i, v);
        }
    }
}

#[inline(always)]
fn sqrt_v<S: Simd>(s: S, x: S::V) -> S::V {
    s.sqrt(x)
}

#[inline(always)]
fn reciprocal_v<S: Simd>(s: S, x: S::V) -> S::V {
    s.div(s.splat(1.0), x)
}

#[inline(always)]
fn neg_v<S: Simd>(s: S, x: S::V) -> S::V {
    s.xor_bits(x, 0x8000_0000)
}

#[inline(always)]
fn abs_v<S: Simd>(s: S, x: S::V) -> S::V {
    s.and_bits(x, 0x7fff_ffff)
}

/// `x < 0 ? 0 : x`: NaN and -0 pass through (ONNX's Relu as the interpreter has it).
#[inline(always)]
fn relu_v<S: Simd>(s: S, x: S::V) -> S::V {
    let zero = s.splat(0.0);
    s.select(s.lt(x, zero), zero, x)
}

fn relu(x: f32) -> f32 {
    if x < 0.0 { 0.0 } else { x }
}

/// Defines the `Unary` enum and one `extern "C"` entry point per function and level.
macro_rules! unary_kernels {
    ($($(#[$doc:meta])* $name:ident => $f:path, $scalar:expr;)*) => {
        /// A unary f32 function with a slice kernel per CPU level (`k as usize` is
        /// its index in [`Unary::ALL`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Unary {
            $($(#[$doc])* $name,)*
        }

        impl Unary {
            /// Every function.
            pub const ALL: &[Unary] = &[$(Unary::$name,)*];

            /// The one-element function (the scalar level's formula).
            pub fn scalar(self) -> fn(f32) -> f32 {
                match self {
                    $(Unary::$name => $scalar,)*
                }
            }

            /// The slice kernel at `level`, lowered to what the CPU supports.
            pub fn entry(self, level: Level) -> UnaryFn {
                match (level.capped(), self) {
                    $(
                        #[cfg(target_arch = "x86_64")]
                        (Level::Avx512, Unary::$name) => avx512::$name,
                        #[cfg(target_arch = "x86_64")]
                        (Level::Avx2, Unary::$name) => avx2::$name,
                    )*
                    $((_, Unary::$name) => scalar::$name,)*
                }
            }
        }

        #[allow(non_snake_case)]
        mod formula {
            use super::*;
            $(
                /// The formula of the variant of the same name.
                pub(super) struct $name;
                impl Formula for $name {
                    #[inline(always)]
                    fn apply<S: Simd>(s: S, x: S::V) -> S::V {
                        $f(s, x)
                    }
                }
            )*
        }

        #[allow(non_snake_case)]
        mod scalar {
            use super::*;
            $(
                /// Scalar slice kernel (see [`UnaryFn`]).
                pub(super) unsafe extern "C" fn $name(src: *const f32, dst: *mut f32, len: usize) {
                    // SAFETY: the caller upholds `UnaryFn`'s contract.
                    unsafe { map::<_, formula::$name>(Scalar, src, dst, len) }
                }
            )*
        }

        #[cfg(target_arch = "x86_64")]
        #[allow(non_snake_case)]
        mod avx2 {
            use super::*;
            use crate::simd::vector::Avx2;
            $(
                /// AVX2 + FMA slice kernel (see [`UnaryFn`]).
                #[target_feature(enable = "avx2,fma")]
                pub(super) unsafe extern "C" fn $name(src: *const f32, dst: *mut f32, len: usize) {
                    // SAFETY: only handed out by `Unary::entry` where the CPU has
                    // AVX2 + FMA; the caller upholds `UnaryFn`'s contract.
                    unsafe { map::<_, formula::$name>(Avx2::new(), src, dst, len) }
                }
            )*
        }

        #[cfg(target_arch = "x86_64")]
        #[allow(non_snake_case)]
        mod avx512 {
            use super::*;
            use crate::simd::vector::Avx512;
            $(
                /// AVX-512 slice kernel (see [`UnaryFn`]).
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                pub(super) unsafe extern "C" fn $name(src: *const f32, dst: *mut f32, len: usize) {
                    // SAFETY: only handed out by `Unary::entry` where the CPU has
                    // AVX-512 F/BW/DQ/VL; the caller upholds `UnaryFn`'s contract.
                    unsafe { map::<_, formula::$name>(Avx512::new(), src, dst, len) }
                }
            )*
        }
    };
}

unary_kernels! {
    /// [`math::exp`]
    Exp => math::exp_v, math::exp;
    /// [`math::expm1`]
    Expm1 => math::expm1_v, math::expm1;
    /// [`math::log`]
    Log => math::log_v, math::log;
    /// [`math::tanh`]
    Tanh => math::tanh_v, math::tanh;
    /// [`math::sigmoid`]
    Sigmoid => math::sigmoid_v, math::sigmoid;
    /// [`math::silu`]
    Silu => math::silu_v, math::silu;
    /// [`math::erf`]
    Erf => math::erf_v, math::erf;
    /// [`math::gelu_erf`]
    GeluErf => math::gelu_erf_v, math::gelu_erf;
    /// [`math::gelu_tanh`]
    GeluTanh => math::gelu_tanh_v, math::gelu_tanh;
    /// `√x`, correctly rounded
    Sqrt => sqrt_v, f32::sqrt;
    /// `1/x`, correctly rounded
    Reciprocal => reciprocal_v, |x| 1.0 / x;
    /// `-x` (the sign bit flipped, also of NaN and 0)
    Neg => neg_v, |x: f32| -x;
    /// `|x|` (the sign bit cleared)
    Abs => abs_v, f32::abs;
    /// `x < 0 ? 0 : x` (NaN and -0 pass through)
    Relu => relu_v, relu;
}

impl Unary {
    /// `dst[i] = f(src[i])` at [`cpu::level`].
    pub fn apply(self, src: &[f32], dst: &mut [f32]) -> Result<(), KernelError> {
        self.apply_at(cpu::level(), src, dst)
    }

    /// `dst[i] = f(src[i])` at `level` (lowered to what the CPU supports).
    pub fn apply_at(self, level: Level, src: &[f32], dst: &mut [f32]) -> Result<(), KernelError> {
        if src.len() != dst.len() {
            return Err(KernelError::ShapeMismatch {
                what: "unary kernel output",
                expected: vec![src.len()],
                actual: vec![dst.len()],
            });
        }
        // SAFETY: two valid slices of `len` elements (disjoint: `&mut`).
        unsafe { self.entry(level)(src.as_ptr(), dst.as_mut_ptr(), src.len()) };
        Ok(())
    }

    /// `buf[i] = f(buf[i])` at [`cpu::level`].
    pub fn apply_in_place(self, buf: &mut [f32]) {
        let p = buf.as_mut_ptr();
        // SAFETY: `src == dst` is allowed; `buf` holds `len` elements.
        unsafe { self.entry(cpu::level())(p, p, buf.len()) }
    }
}
