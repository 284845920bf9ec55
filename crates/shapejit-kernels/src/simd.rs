//! Run-time selection of an AVX2+FMA compiled copy of a hot loop.
//!
//! [`dispatch_simd!`] wraps a closure in a `#[target_feature(enable =
//! "avx2,fma")]` function and calls it when the CPU has both features, else
//! calls the closure as is: the same source, auto-vectorized twice.
//!
//! **Invariant:** the code is the same in both paths and uses no `mul_add`, so
//! results are bit-identical (LLVM does not contract `a*b + c` on its own).

/// True when the runtime CPU has AVX2 and FMA (cached by std).
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `dispatch_simd!(name, || body)`: runs `body` in an AVX2+FMA copy named `name`
/// when the CPU supports it.
macro_rules! dispatch_simd {
    ($name:ident, $body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2,fma")]
            unsafe fn $name<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            if $crate::simd::has_avx2_fma() {
                // SAFETY: the CPU supports avx2 and fma (checked just above).
                unsafe { $name($body) }
            } else {
                ($body)()
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            ($body)()
        }
    }};
}
pub(crate) use dispatch_simd;
