//! Running code at the CPU level [`crate::cpu::level`] chose.
//!
//! Two tools:
//! - [`dispatch`] runs a closure inside a `#[target_feature]` function of the
//!   level, so the same source is auto-vectorized once per level (elementwise
//!   maps, row kernels);
//! - the [`vector`] trait [`vector::Simd`] is an explicit SIMD vector with one
//!   implementation per level (`__m512`, `__m256`, `f32`); a kernel written once
//!   against it is the same algorithm at every level (the transcendentals of
//!   [`crate::vmath`]).
//!
//! **Invariant:** [`dispatch`] runs its closure at a level the CPU supports
//! (the level comes from [`crate::cpu::level`], which never exceeds the CPU's);
//! the closure's source is the same at every level and uses no `mul_add`, so
//! auto-vectorized results are bit-identical across levels (LLVM does not
//! contract `a*b + c` on its own).

pub mod transpose;
pub mod vector;

use crate::cpu::{self, Level};

/// Runs `f` compiled for `level`, lowered to what the CPU supports.
#[inline(always)]
pub(crate) fn dispatch_at<R>(level: Level, f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level: it has every
            // AVX-512 feature enabled above.
            Level::Avx512 => unsafe { avx512(f) },
            // SAFETY: as above, the CPU has AVX2 and FMA.
            Level::Avx2 => unsafe { avx2(f) },
            Level::Scalar => f(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = level;
        f()
    }
}

/// Runs `f` compiled for the level in use ([`cpu::level`]).
#[inline(always)]
pub(crate) fn dispatch<R>(f: impl FnOnce() -> R) -> R {
    dispatch_at(cpu::level(), f)
}
