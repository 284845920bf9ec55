//! One SIMD vector interface, three implementations: [`Scalar`] (`f32`),
//! [`Avx2`] (`__m256`) and [`Avx512`] (`__m512`, `__mmask16` masks and masked
//! tails). Kernels are written once, generic over [`Simd`].
//!
//! A level's token ([`Avx2`], [`Avx512`]) can only be made by `unsafe`
//! `new()`, whose contract is that the CPU has the level; every method is then
//! safe to call. Methods are `#[inline(always)]` so that, inlined into a
//! `#[target_feature]` entry point, the intrinsics compile to single
//! instructions.
//!
//! **Invariant:** every operation has the same lane-wise IEEE semantics at
//! every level, except [`Simd::mul_add`], which is fused on AVX2/AVX-512 and
//! two roundings on [`Scalar`]. [`Simd::min`]/[`Simd::max`] follow x86:
//! `min(a, b) = if a < b { a } else { b }` (the second operand wins ties and
//! NaN).

/// A SIMD vector of f32 lanes with its comparison mask.
pub trait Simd: Copy {
    /// The vector type.
    type V: Copy;
    /// A lane mask (result of a comparison).
    type M: Copy;
    /// f32 lanes per vector.
    const LANES: usize;

    /// Every lane `x`.
    fn splat(self, x: f32) -> Self::V;
    /// Loads `LANES` f32 from `p` (any alignment).
    ///
    /// # Safety
    /// `p..p + LANES` must be readable.
    unsafe fn load(self, p: *const f32) -> Self::V;
    /// Stores `LANES` f32 to `p` (any alignment).
    ///
    /// # Safety
    /// `p..p + LANES` must be writable.
    unsafe fn store(self, p: *mut f32, v: Self::V);
    /// Loads the first `n < LANES` lanes from `p`, the rest 0.
    ///
    /// # Safety
    /// `p..p + n` must be readable.
    unsafe fn load_tail(self, p: *const f32, n: usize) -> Self::V;
    /// Stores the first `n < LANES` lanes to `p`, touching nothing beyond.
    ///
    /// # Safety
    /// `p..p + n` must be writable.
    unsafe fn store_tail(self, p: *mut f32, n: usize, v: Self::V);
    /// Stores lanes `a..b` (`a ≤ b ≤ LANES`) to `p + a..p + b`, touching
    /// nothing else; `p` itself need not point into an allocation.
    ///
    /// # Safety
    /// `p + a..p + b` must be writable.
    unsafe fn store_range(self, p: *mut f32, a: usize, b: usize, v: Self::V);

    /// `a + b`
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a - b`
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a * b`
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a / b` (correctly rounded)
    fn div(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c` (fused on AVX2/AVX-512)
    fn mul_add(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `√a` (correctly rounded)
    fn sqrt(self, a: Self::V) -> Self::V;
    /// `if a < b { a } else { b }`
    fn min(self, a: Self::V, b: Self::V) -> Self::V;
    /// `if a > b { a } else { b }`
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    /// bits of `a` AND `bits` in every lane
    fn and_bits(self, a: Self::V, bits: u32) -> Self::V;
    /// bits of `a` XOR `bits` in every lane
    fn xor_bits(self, a: Self::V, bits: u32) -> Self::V;
    /// bits of `a` OR bits of `b`
    fn or(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a < b` (false on NaN)
    fn lt(self, a: Self::V, b: Self::V) -> Self::M;
    /// `a == b` (false on NaN)
    fn eq(self, a: Self::V, b: Self::V) -> Self::M;
    /// `a >= b` (false on NaN)
    fn ge(self, a: Self::V, b: Self::V) -> Self::M;
    /// Per lane `if m { a } else { b }`.
    fn select(self, m: Self::M, a: Self::V, b: Self::V) -> Self::V;
    /// Whether any lane of `m` is set.
    fn any(self, m: Self::M) -> bool;
    /// Per lane `table[i]`, `i` the low 4 bits of the lane's bit pattern (a
    /// piecewise polynomial's coefficients; exact, so equal at every level).
    fn lookup16(self, i: Self::V, table: &[f32; 16]) -> Self::V;
    /// Whether every lane's [`Simd::lookup16`] index is below 8, on a level
    /// where [`Simd::lookup8`] is cheaper than `lookup16` (AVX2: one permute
    /// instead of two and a blend); `false` on the others.
    #[inline(always)]
    fn indices_below_8(self, _i: Self::V) -> bool {
        false
    }
    /// [`Simd::lookup16`] for lanes whose index is below 8.
    #[inline(always)]
    fn lookup8(self, i: Self::V, table: &[f32; 16]) -> Self::V {
        self.lookup16(i, table)
    }
    /// The even- and odd-numbered elements of the `2·LANES` elements `a ++ b`.
    fn deinterleave(self, a: Self::V, b: Self::V) -> (Self::V, Self::V);
    /// `a0 b0 a1 b1 …` over `2·LANES` elements, as two vectors (the inverse of
    /// [`Simd::deinterleave`]).
    fn interleave(self, a: Self::V, b: Self::V) -> (Self::V, Self::V);
    /// `2^n` for lanes holding integers `n` in `-126..=127`.
    fn pow2i(self, n: Self::V) -> Self::V;
    /// The biased exponent field of `a` (`bits >> 23` as f32) for `a ≥ 0`.
    fn exponent_field(self, a: Self::V) -> Self::V;
    /// `2·√(2/π)·(x + 0.044715·x³)` evaluated in f64 per lane, rounded to an
    /// f32 pair `(hi, lo)` with `hi + lo` its value to ~2⁻⁴⁸ (GELU-tanh's argument).
    fn gelu_tanh_arg(self, x: Self::V) -> (Self::V, Self::V);
}

/// `-2·√(2/π)` in f64 (GELU-tanh's exponent scale).
const GELU_TANH_K2: f64 = -1.595_769_121_605_730_7;

/// The f64 argument [`Simd::gelu_tanh_arg`] computes, for one lane.
#[inline(always)]
fn gelu_tanh_arg_f64(x: f64) -> f64 {
    GELU_TANH_K2 * (x + 0.044_715 * x * x * x)
}

/// One f32 at a time: the portable level.
#[derive(Clone, Copy, Debug)]
pub struct Scalar;

impl Simd for Scalar {
    type V = f32;
    type M = bool;
    const LANES: usize = 1;

    #[inline(always)]
    fn splat(self, x: f32) -> f32 {
        x
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> f32 {
        // SAFETY: the caller guarantees `p` is readable.
        unsafe { p.read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: f32) {
        // SAFETY: the caller guarantees `p` is writable.
        unsafe { p.write_unaligned(v) }
    }
    #[inline(always)]
    unsafe fn load_tail(self, _p: *const f32, _n: usize) -> f32 {
        // n < LANES = 1: no lane is read
        0.0
    }
    #[inline(always)]
    unsafe fn store_tail(self, _p: *mut f32, _n: usize, _v: f32) {}
    #[inline(always)]
    unsafe fn store_range(self, p: *mut f32, a: usize, b: usize, v: f32) {
        if a < b {
            // SAFETY: lane 0 is in range, so the caller guarantees it writable.
            unsafe { p.write_unaligned(v) }
        }
    }
    #[inline(always)]
    fn add(self, a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    fn mul(self, a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    fn div(self, a: f32, b: f32) -> f32 {
        a / b
    }
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
    #[inline(always)]
    fn sqrt(self, a: f32) -> f32 {
        a.sqrt()
    }
    #[inline(always)]
    fn min(self, a: f32, b: f32) -> f32 {
        if a < b { a } else { b }
    }
    #[inline(always)]
    fn max(self, a: f32, b: f32) -> f32 {
        if a > b { a } else { b }
    }
    #[inline(always)]
    fn and_bits(self, a: f32, bits: u32) -> f32 {
        f32::from_bits(a.to_bits() & bits)
    }
    #[inline(always)]
    fn xor_bits(self, a: f32, bits: u32) -> f32 {
        f32::from_bits(a.to_bits() ^ bits)
    }
    #[inline(always)]
    fn or(self, a: f32, b: f32) -> f32 {
        f32::from_bits(a.to_bits() | b.to_bits())
    }
    #[inline(always)]
    fn lt(self, a: f32, b: f32) -> bool {
        a < b
    }
    #[inline(always)]
    fn eq(self, a: f32, b: f32) -> bool {
        a == b
    }
    #[inline(always)]
    fn ge(self, a: f32, b: f32) -> bool {
        a >= b
    }
    #[inline(always)]
    fn select(self, m: bool, a: f32, b: f32) -> f32 {
        if m { a } else { b }
    }
    #[inline(always)]
    fn any(self, m: bool) -> bool {
        m
    }
    #[inline(always)]
    fn lookup16(self, i: f32, table: &[f32; 16]) -> f32 {
        table[(i.to_bits() & 15) as usize]
    }
    #[inline(always)]
    fn deinterleave(self, a: f32, b: f32) -> (f32, f32) {
        (a, b)
    }
    #[inline(always)]
    fn interleave(self, a: f32, b: f32) -> (f32, f32) {
        (a, b)
    }
    #[inline(always)]
    fn pow2i(self, n: f32) -> f32 {
        f32::from_bits(((n as i32).wrapping_add(127) as u32).wrapping_shl(23))
    }
    #[inline(always)]
    fn exponent_field(self, a: f32) -> f32 {
        (a.to_bits() >> 23) as f32
    }
    #[inline(always)]
    fn gelu_tanh_arg(self, x: f32) -> (f32, f32) {
        let a = gelu_tanh_arg_f64(x as f64);
        let hi = a as f32;
        (hi, (a - hi as f64) as f32)
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2, Avx512};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{GELU_TANH_K2, Simd};
    use std::arch::x86_64::*;

    /// AVX2 + FMA: 8 lanes (`__m256`); only made where the CPU has both.
    #[derive(Clone, Copy, Debug)]
    pub struct Avx2(());

    impl Avx2 {
        /// The token.
        ///
        /// # Safety
        /// The CPU must support AVX2 and FMA.
        #[inline(always)]
        pub unsafe fn new() -> Avx2 {
            Avx2(())
        }
    }

    /// Lane mask of the first `n` of 8 lanes (all-ones words), for maskload.
    #[inline(always)]
    fn tail_mask8(n: usize) -> __m256i {
        const IDX: [i32; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
        // SAFETY: Avx2 tokens exist only where the CPU has AVX2; IDX is 8 i32.
        unsafe {
            let idx = _mm256_loadu_si256(IDX.as_ptr().cast());
            _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), idx)
        }
    }

    /// Stores the first `n ≤ 8` lanes of `v` to `p`: four, two and one lanes
    /// at a time. Not `vmaskmovps`: AMD's Zen cores run a masked store as a
    /// microcoded loop (a ReLU epilogue's masked stores took 15 % of a
    /// ShuffleNet run on a Zen 3).
    ///
    /// # Safety
    /// The CPU has AVX; `p..p + n` is writable.
    #[inline(always)]
    unsafe fn store_first8(p: *mut f32, n: usize, v: __m256) {
        // SAFETY: the caller's contract; each store writes below `p + n`.
        unsafe {
            if n >= 8 {
                return _mm256_storeu_ps(p, v);
            }
            let (mut p, mut n, mut x) = (p, n, _mm256_castps256_ps128(v));
            if n >= 4 {
                _mm_storeu_ps(p, x);
                x = _mm256_extractf128_ps::<1>(v);
                (p, n) = (p.add(4), n - 4);
            }
            if n >= 2 {
                _mm_storel_epi64(p.cast(), _mm_castps_si128(x));
                x = _mm_movehl_ps(x, x);
                (p, n) = (p.add(2), n - 2);
            }
            if n == 1 {
                _mm_store_ss(p, x);
            }
        }
    }

    /// `GELU_TANH_K2 · (x + 0.044715·x³)` on 4 f64 lanes (no fused ops, as the scalar).
    #[inline(always)]
    unsafe fn gelu_arg_pd(x: __m256d) -> __m256d {
        // SAFETY: called from Avx2/Avx512 methods only (AVX available).
        unsafe {
            let c = _mm256_set1_pd(0.044_715);
            let cube = _mm256_mul_pd(_mm256_mul_pd(_mm256_mul_pd(c, x), x), x);
            _mm256_mul_pd(_mm256_set1_pd(GELU_TANH_K2), _mm256_add_pd(x, cube))
        }
    }

    /// `(hi, lo)` f32 halves of 4 f64 lanes.
    #[inline(always)]
    unsafe fn split_pd(a: __m256d) -> (__m128, __m128) {
        // SAFETY: as above.
        unsafe {
            let hi = _mm256_cvtpd_ps(a);
            let lo = _mm256_cvtpd_ps(_mm256_sub_pd(a, _mm256_cvtps_pd(hi)));
            (hi, lo)
        }
    }

    // SAFETY (every `unsafe` block in this impl): an Avx2 token exists only
    // where the CPU has AVX2 and FMA; pointer contracts are the caller's.
    impl Simd for Avx2 {
        type V = __m256;
        type M = __m256;
        const LANES: usize = 8;

        #[inline(always)]
        fn splat(self, x: f32) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn load(self, p: *const f32) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32, v: __m256) {
            // SAFETY: see the impl.
            unsafe { _mm256_storeu_ps(p, v) }
        }
        #[inline(always)]
        unsafe fn load_tail(self, p: *const f32, n: usize) -> __m256 {
            // SAFETY: see the impl; maskload reads only the masked lanes.
            unsafe { _mm256_maskload_ps(p, tail_mask8(n)) }
        }
        #[inline(always)]
        unsafe fn store_tail(self, p: *mut f32, n: usize, v: __m256) {
            // SAFETY: see the impl; `store_first8` writes lanes below n only.
            unsafe { store_first8(p, n, v) }
        }
        #[inline(always)]
        unsafe fn store_range(self, p: *mut f32, a: usize, b: usize, v: __m256) {
            // SAFETY: see the impl. Lanes a..b moved down to 0..b - a (the
            // index wraps mod 8 above), then stored from p + a.
            unsafe {
                let idx = _mm256_add_epi32(
                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                    _mm256_set1_epi32(a as i32),
                );
                let down = _mm256_permutevar8x32_ps(v, idx);
                store_first8(p.wrapping_add(a), b - a, down)
            }
        }
        #[inline(always)]
        fn add(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_add_ps(a, b) }
        }
        #[inline(always)]
        fn sub(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_sub_ps(a, b) }
        }
        #[inline(always)]
        fn mul(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_mul_ps(a, b) }
        }
        #[inline(always)]
        fn div(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_div_ps(a, b) }
        }
        #[inline(always)]
        fn mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        fn sqrt(self, a: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_sqrt_ps(a) }
        }
        #[inline(always)]
        fn min(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_min_ps(a, b) }
        }
        #[inline(always)]
        fn max(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_max_ps(a, b) }
        }
        #[inline(always)]
        fn and_bits(self, a: __m256, bits: u32) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(bits as i32))) }
        }
        #[inline(always)]
        fn xor_bits(self, a: __m256, bits: u32) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_xor_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(bits as i32))) }
        }
        #[inline(always)]
        fn or(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_or_ps(a, b) }
        }
        #[inline(always)]
        fn lt(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_cmp_ps::<_CMP_LT_OQ>(a, b) }
        }
        #[inline(always)]
        fn eq(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_cmp_ps::<_CMP_EQ_OQ>(a, b) }
        }
        #[inline(always)]
        fn ge(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_cmp_ps::<_CMP_GE_OQ>(a, b) }
        }
        #[inline(always)]
        fn select(self, m: __m256, a: __m256, b: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_blendv_ps(b, a, m) }
        }
        #[inline(always)]
        fn any(self, m: __m256) -> bool {
            // SAFETY: see the impl.
            unsafe { _mm256_movemask_ps(m) != 0 }
        }
        #[inline(always)]
        fn lookup16(self, i: __m256, table: &[f32; 16]) -> __m256 {
            // SAFETY: see the impl; `table` holds two 8-lane halves.
            unsafe {
                let i = _mm256_castps_si256(i);
                let lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table.as_ptr()), i);
                let hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table.as_ptr().add(8)), i);
                // bit 3 of the index to the sign bit, which blendv reads
                _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32::<28>(i)))
            }
        }
        #[inline(always)]
        fn indices_below_8(self, i: __m256) -> bool {
            // SAFETY: see the impl. testz: no lane has bit 3 set
            unsafe { _mm256_testz_si256(_mm256_castps_si256(i), _mm256_set1_epi32(8)) != 0 }
        }
        #[inline(always)]
        fn lookup8(self, i: __m256, table: &[f32; 16]) -> __m256 {
            // SAFETY: see the impl; the permute reads the index's low 3 bits.
            unsafe {
                _mm256_permutevar8x32_ps(_mm256_loadu_ps(table.as_ptr()), _mm256_castps_si256(i))
            }
        }
        #[inline(always)]
        fn deinterleave(self, a: __m256, b: __m256) -> (__m256, __m256) {
            // SAFETY: see the impl. shuffle_ps picks within 128-bit halves
            // ([a0 a2 b0 b2 | a4 a6 b4 b6]); the 64-bit permute puts the halves
            // in order.
            unsafe {
                let even = _mm256_shuffle_ps::<0b10_00_10_00>(a, b);
                let odd = _mm256_shuffle_ps::<0b11_01_11_01>(a, b);
                let order = |v: __m256| {
                    _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v)))
                };
                (order(even), order(odd))
            }
        }
        #[inline(always)]
        fn interleave(self, a: __m256, b: __m256) -> (__m256, __m256) {
            // SAFETY: see the impl. unpack works within 128-bit halves
            // ([a0 b0 a1 b1 | a4 b4 a5 b5] and [a2 b2 a3 b3 | a6 b6 a7 b7]); the
            // lane permutes put the halves in order.
            unsafe {
                let lo = _mm256_unpacklo_ps(a, b);
                let hi = _mm256_unpackhi_ps(a, b);
                (
                    _mm256_permute2f128_ps::<0x20>(lo, hi),
                    _mm256_permute2f128_ps::<0x31>(lo, hi),
                )
            }
        }
        #[inline(always)]
        fn pow2i(self, n: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe {
                let e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
                _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e))
            }
        }
        #[inline(always)]
        fn exponent_field(self, a: __m256) -> __m256 {
            // SAFETY: see the impl.
            unsafe { _mm256_cvtepi32_ps(_mm256_srli_epi32::<23>(_mm256_castps_si256(a))) }
        }
        #[inline(always)]
        fn gelu_tanh_arg(self, x: __m256) -> (__m256, __m256) {
            // SAFETY: see the impl.
            unsafe {
                let (h0, l0) = split_pd(gelu_arg_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
                let (h1, l1) =
                    split_pd(gelu_arg_pd(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x))));
                (_mm256_set_m128(h1, h0), _mm256_set_m128(l1, l0))
            }
        }
    }

    /// AVX-512 F + BW + DQ + VL: 16 lanes (`__m512`, `__mmask16`); only made
    /// where the CPU has them (and AVX2 + FMA).
    #[derive(Clone, Copy, Debug)]
    pub struct Avx512(());

    impl Avx512 {
        /// The token.
        ///
        /// # Safety
        /// The CPU must support AVX-512 F, BW, DQ and VL, AVX2 and FMA.
        #[inline(always)]
        pub unsafe fn new() -> Avx512 {
            Avx512(())
        }
    }

    /// Mask of the first `n ≤ 16` lanes.
    #[inline(always)]
    fn tail_mask16(n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }

    /// Mask of lanes `a..b` of 16.
    #[inline(always)]
    fn range_mask16(a: usize, b: usize) -> __mmask16 {
        tail_mask16(b) & !tail_mask16(a)
    }

    // SAFETY (every `unsafe` block in this impl): an Avx512 token exists only
    // where the CPU has AVX-512 F/BW/DQ/VL, AVX2 and FMA; pointer contracts are
    // the caller's (masked loads and stores touch only the masked lanes).
    impl Simd for Avx512 {
        type V = __m512;
        type M = __mmask16;
        const LANES: usize = 16;

        #[inline(always)]
        fn splat(self, x: f32) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn load(self, p: *const f32) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32, v: __m512) {
            // SAFETY: see the impl.
            unsafe { _mm512_storeu_ps(p, v) }
        }
        #[inline(always)]
        unsafe fn load_tail(self, p: *const f32, n: usize) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_maskz_loadu_ps(tail_mask16(n), p) }
        }
        #[inline(always)]
        unsafe fn store_tail(self, p: *mut f32, n: usize, v: __m512) {
            // SAFETY: see the impl.
            unsafe { _mm512_mask_storeu_ps(p, tail_mask16(n), v) }
        }
        #[inline(always)]
        unsafe fn store_range(self, p: *mut f32, a: usize, b: usize, v: __m512) {
            // SAFETY: see the impl.
            unsafe { _mm512_mask_storeu_ps(p, range_mask16(a, b), v) }
        }
        #[inline(always)]
        fn add(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_add_ps(a, b) }
        }
        #[inline(always)]
        fn sub(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_sub_ps(a, b) }
        }
        #[inline(always)]
        fn mul(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_mul_ps(a, b) }
        }
        #[inline(always)]
        fn div(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_div_ps(a, b) }
        }
        #[inline(always)]
        fn mul_add(self, a: __m512, b: __m512, c: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        fn sqrt(self, a: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_sqrt_ps(a) }
        }
        #[inline(always)]
        fn min(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_min_ps(a, b) }
        }
        #[inline(always)]
        fn max(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_max_ps(a, b) }
        }
        #[inline(always)]
        fn and_bits(self, a: __m512, bits: u32) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_and_ps(a, _mm512_castsi512_ps(_mm512_set1_epi32(bits as i32))) }
        }
        #[inline(always)]
        fn xor_bits(self, a: __m512, bits: u32) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_xor_ps(a, _mm512_castsi512_ps(_mm512_set1_epi32(bits as i32))) }
        }
        #[inline(always)]
        fn or(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_or_ps(a, b) }
        }
        #[inline(always)]
        fn lt(self, a: __m512, b: __m512) -> __mmask16 {
            // SAFETY: see the impl.
            unsafe { _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b) }
        }
        #[inline(always)]
        fn eq(self, a: __m512, b: __m512) -> __mmask16 {
            // SAFETY: see the impl.
            unsafe { _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b) }
        }
        #[inline(always)]
        fn ge(self, a: __m512, b: __m512) -> __mmask16 {
            // SAFETY: see the impl.
            unsafe { _mm512_cmp_ps_mask::<_CMP_GE_OQ>(a, b) }
        }
        #[inline(always)]
        fn select(self, m: __mmask16, a: __m512, b: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_mask_blend_ps(m, b, a) }
        }
        #[inline(always)]
        fn any(self, m: __mmask16) -> bool {
            m != 0
        }
        #[inline(always)]
        fn lookup16(self, i: __m512, table: &[f32; 16]) -> __m512 {
            // SAFETY: see the impl.
            unsafe {
                _mm512_permutexvar_ps(_mm512_castps_si512(i), _mm512_loadu_ps(table.as_ptr()))
            }
        }
        #[inline(always)]
        fn deinterleave(self, a: __m512, b: __m512) -> (__m512, __m512) {
            const EVEN: [i32; 16] = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30];
            const ODD: [i32; 16] = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31];
            // SAFETY: see the impl; the index tables hold 16 i32.
            unsafe {
                let index = |t: &[i32; 16]| _mm512_loadu_si512(t.as_ptr().cast());
                (
                    _mm512_permutex2var_ps(a, index(&EVEN), b),
                    _mm512_permutex2var_ps(a, index(&ODD), b),
                )
            }
        }
        #[inline(always)]
        fn interleave(self, a: __m512, b: __m512) -> (__m512, __m512) {
            const LO: [i32; 16] = [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23];
            const HI: [i32; 16] = [8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31];
            // SAFETY: see the impl; the index tables hold 16 i32.
            unsafe {
                let index = |t: &[i32; 16]| _mm512_loadu_si512(t.as_ptr().cast());
                (
                    _mm512_permutex2var_ps(a, index(&LO), b),
                    _mm512_permutex2var_ps(a, index(&HI), b),
                )
            }
        }
        #[inline(always)]
        fn pow2i(self, n: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe {
                let e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
                _mm512_castsi512_ps(_mm512_slli_epi32::<23>(e))
            }
        }
        #[inline(always)]
        fn exponent_field(self, a: __m512) -> __m512 {
            // SAFETY: see the impl.
            unsafe { _mm512_cvtepi32_ps(_mm512_srli_epi32::<23>(_mm512_castps_si512(a))) }
        }
        #[inline(always)]
        fn gelu_tanh_arg(self, x: __m512) -> (__m512, __m512) {
            // SAFETY: see the impl.
            unsafe {
                let halves = [
                    _mm512_castps512_ps256(x),
                    _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x))),
                ];
                let mut out = [(_mm_setzero_ps(), _mm_setzero_ps()); 4];
                for (h, half) in halves.into_iter().enumerate() {
                    let lo4 = _mm256_castps256_ps128(half);
                    let hi4 = _mm256_extractf128_ps::<1>(half);
                    out[2 * h] = split_pd(gelu_arg_pd(_mm256_cvtps_pd(lo4)));
                    out[2 * h + 1] = split_pd(gelu_arg_pd(_mm256_cvtps_pd(hi4)));
                }
                let join = |a: __m128, b: __m128, c: __m128, d: __m128| {
                    let lo = _mm256_set_m128(b, a);
                    let hi = _mm256_set_m128(d, c);
                    _mm512_castpd_ps(_mm512_insertf64x4::<1>(
                        _mm512_castpd256_pd512(_mm256_castps_pd(lo)),
                        _mm256_castps_pd(hi),
                    ))
                };
                (
                    join(out[0].0, out[1].0, out[2].0, out[3].0),
                    join(out[0].1, out[1].1, out[2].1, out[3].1),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `store_tail` writes lanes `0..n` and `store_range` lanes `a..b`, at
    /// any offset from a vector boundary, and nothing around them.
    fn partial_stores_touch_only_their_lanes<S: Simd>(s: S) {
        let lanes = S::LANES;
        let src: Vec<f32> = (0..lanes).map(|i| i as f32 + 1.0).collect();
        // SAFETY: `src` holds LANES floats.
        let v = unsafe { s.load(src.as_ptr()) };
        for shift in 0..3 {
            for a in 0..=lanes {
                for b in a..=lanes {
                    let mut buf = vec![-7.0f32; lanes + 6];
                    let p = buf[shift + 1..].as_mut_ptr();
                    // SAFETY: lanes a..b of p lie in `buf`; `b < LANES` for store_tail.
                    unsafe {
                        if a == 0 && b < lanes {
                            s.store_tail(p, b, v)
                        } else {
                            s.store_range(p, a, b, v)
                        }
                    }
                    let want: Vec<f32> = (0..buf.len())
                        .map(|i| match i.checked_sub(shift + 1) {
                            Some(j) if (a..b).contains(&j) => src[j],
                            _ => -7.0,
                        })
                        .collect();
                    assert_eq!(buf, want, "{lanes} lanes, a {a}, b {b}, shift {shift}");
                }
            }
        }
    }

    /// `lookup16` picks `table[i]` per lane for every index `0..16`; where
    /// `indices_below_8` says so, `lookup8` picks the same, and it says so
    /// only when every index is below 8.
    fn lookups_pick_each_lanes_entry<S: Simd>(s: S) {
        let lanes = S::LANES;
        let table: [f32; 16] = std::array::from_fn(|i| 100.0 + i as f32);
        for first in 0..16 {
            for spread in [0, 1, 3, 7, 15] {
                // the piece index as `piecewise` computes it: an integer plus 1.5·2²³
                let index: Vec<usize> = (0..lanes).map(|l| (first + l * spread) % 16).collect();
                let bits: Vec<f32> = index.iter().map(|&i| 12_582_912.0 + i as f32).collect();
                // SAFETY: `bits` holds LANES floats.
                let i = unsafe { s.load(bits.as_ptr()) };
                let want: Vec<f32> = index.iter().map(|&i| table[i]).collect();
                let read = |v: S::V| {
                    let mut out = vec![0f32; lanes];
                    // SAFETY: `out` holds LANES floats.
                    unsafe { s.store(out.as_mut_ptr(), v) };
                    out
                };
                assert_eq!(read(s.lookup16(i, &table)), want, "indices {index:?}");
                if s.indices_below_8(i) {
                    assert!(index.iter().all(|&i| i < 8), "indices {index:?}");
                    assert_eq!(read(s.lookup8(i, &table)), want, "indices {index:?}");
                }
            }
        }
    }

    /// Runs `check` at every level the CPU has.
    macro_rules! at_every_level {
        ($check:ident) => {{
            $check(Scalar);
            #[cfg(target_arch = "x86_64")]
            {
                use crate::cpu::{Level, supported};
                if supported(Level::Avx2) {
                    // SAFETY: the CPU has AVX2 and FMA.
                    $check(unsafe { Avx2::new() });
                }
                if supported(Level::Avx512) {
                    // SAFETY: the CPU has AVX-512.
                    $check(unsafe { Avx512::new() });
                }
            }
        }};
    }

    #[test]
    fn partial_stores_at_every_level() {
        at_every_level!(partial_stores_touch_only_their_lanes);
    }

    #[test]
    fn lookups_at_every_level() {
        at_every_level!(lookups_pick_each_lanes_entry);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_takes_the_one_permute_lookup_when_it_can() {
        if !crate::cpu::supported(crate::cpu::Level::Avx2) {
            return;
        }
        // SAFETY: the CPU has AVX2 and FMA.
        let s = unsafe { Avx2::new() };
        let index = |hi: f32| {
            let bits: [f32; 8] =
                std::array::from_fn(|l| 12_582_912.0 + if l == 5 { hi } else { 3.0 });
            // SAFETY: `bits` holds 8 floats.
            unsafe { s.load(bits.as_ptr()) }
        };
        assert!(s.indices_below_8(index(7.0)));
        assert!(!s.indices_below_8(index(8.0)));
    }
}
