//! f32 transcendentals: branch-free range reductions and polynomials, written
//! once against the SIMD vector trait ([`crate::simd::vector::Simd`]) and
//! instantiated per CPU level. The public functions here are the one-lane
//! ([`Scalar`]) instantiation; [`crate::vmath`] runs the same formulas over
//! slices at AVX2 (8 lanes) and AVX-512 (16 lanes) width.
//!
//! Each public function states its maximum error against an f64 reference over
//! the stated range (`ulp` = units in the last place of the f32 result). The
//! bound holds at every level: `tests/math_accuracy.rs` checks it on a dense
//! grid plus random points through the scalar functions and through
//! [`crate::vmath`] at each level the CPU has.
//!
//! **Invariant:** only IEEE `+ - * / √`, fused multiply-adds (two roundings at
//! the scalar level), comparisons, selects and bit operations are used; the
//! AVX2 and AVX-512 instantiations run the same operations per lane, so their
//! results are bit-identical.
//! **Invariant:** NaN in gives NaN out; ±inf give the limits.

// polynomial coefficients are kept digit for digit as published (Cephes, NR)
#![allow(clippy::excessive_precision)]

use crate::simd::vector::{Scalar, Simd};

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// 1.5·2²³: adding it rounds an f32 of magnitude < 2²² to an integer.
const ROUND_MAGIC: f32 = 12_582_912.0;
/// ln 2 split for Cody–Waite reduction (Cephes): `LN2_HI·n` is exact.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const SIGN: u32 = 0x8000_0000;
const ABS: u32 = 0x7fff_ffff;

/// Clamps while letting NaN through (x86 `min`/`max` return the second operand on NaN).
#[inline(always)]
fn clamp_keep_nan<S: Simd>(s: S, x: S::V, lo: f32, hi: f32) -> S::V {
    s.max(s.splat(lo), s.min(s.splat(hi), x))
}

/// `c[0]·x^(N-1) + … + c[N-1]` by Horner's rule.
#[inline(always)]
fn horner<S: Simd, const N: usize>(s: S, x: S::V, c: [f32; N]) -> S::V {
    let mut acc = s.splat(c[0]);
    for &ci in &c[1..] {
        acc = s.mul_add(acc, x, s.splat(ci));
    }
    acc
}

#[inline(always)]
fn neg<S: Simd>(s: S, x: S::V) -> S::V {
    s.mul(x, s.splat(-1.0))
}

/// `|mag|` with the sign of `sign`.
#[inline(always)]
fn copysign<S: Simd>(s: S, mag: S::V, sign: S::V) -> S::V {
    s.or(s.and_bits(mag, ABS), s.and_bits(sign, SIGN))
}

/// Clears the low 12 mantissa bits, so that `hi(x)²` is exact in f32.
#[inline(always)]
fn split_hi<S: Simd>(s: S, x: S::V) -> S::V {
    s.and_bits(x, 0xffff_f000)
}

/// `e^(hi + lo)` for `|lo|` small next to `|hi|` (≲ 2): the reduction subtracts
/// `n·ln2` from `hi` alone, so `hi + lo` is never rounded to f32 — used where `hi`
/// is a large exact value (`-t²` of erfc). `exp(x)` is `exp_split(x, 0)`.
///
/// Cody–Waite reduction `x = n·ln2 + r`, `|r| ≤ ln2/2`, then Cephes' degree-7
/// polynomial for `e^r`; `2^n` is applied as `2^(n-n₁)` then `2^n₁` with
/// `n₁ = clamp(n, -126, 127)`: the first product is exact, so results down in
/// the denormals are rounded once.
#[inline(always)]
fn exp_split<S: Simd>(s: S, hi: S::V, lo: S::V) -> S::V {
    const POLY: [f32; 6] = [
        1.987_569_1e-4,
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        5.000_000_1e-1,
    ];
    let hi = clamp_keep_nan(s, hi, -104.0, 89.0);
    let t = s.mul_add(s.add(hi, lo), s.splat(LOG2E), s.splat(ROUND_MAGIC));
    let nf = s.sub(t, s.splat(ROUND_MAGIC));
    let r = s.mul_add(nf, s.splat(-LN2_HI), hi);
    let r = s.add(s.mul_add(nf, s.splat(-LN2_LO), r), lo);
    let z = s.mul(r, r);
    let p = s.add(s.mul_add(horner(s, r, POLY), z, r), s.splat(1.0));
    let n1 = clamp_keep_nan(s, nf, -126.0, 127.0);
    let n2 = s.sub(nf, n1);
    s.mul(s.mul(p, s.pow2i(n2)), s.pow2i(n1))
}

#[inline(always)]
pub(crate) fn exp_v<S: Simd>(s: S, x: S::V) -> S::V {
    exp_split(s, x, s.splat(0.0))
}

/// Taylor coefficients of `(e^x - 1 - x) / x²` to `x⁹/9!`, highest degree first: `expm1`
/// for `|x| < 0.5` (shared with the JIT's code generator, so both tiers use one formula).
pub const EXPM1_TAYLOR: [f32; 8] = [
    2.755_732e-6,
    2.480_158_7e-5,
    1.984_127e-4,
    1.388_888_9e-3,
    8.333_333e-3,
    4.166_666_8e-2,
    0.166_666_67,
    0.5,
];

#[inline(always)]
pub(crate) fn expm1_v<S: Simd>(s: S, x: S::V) -> S::V {
    let p = s.mul_add(s.mul(horner(s, x, EXPM1_TAYLOR), x), x, x);
    let big = s.sub(exp_v(s, x), s.splat(1.0));
    s.select(s.lt(s.and_bits(x, ABS), s.splat(0.5)), p, big)
}

#[inline(always)]
pub(crate) fn sigmoid_v<S: Simd>(s: S, x: S::V) -> S::V {
    // `e^-|x|` never overflows: for x < 0, `e / (1 + e)` keeps the denormal results
    // (x down to -103.9) that `1 / (1 + e^-x)` flushes to 0 once `e^-x` overflows
    // (x < -88.7). The JIT computes the same form.
    let one = s.splat(1.0);
    let e = exp_v(s, neg(s, s.and_bits(x, ABS)));
    let num = s.select(s.lt(x, s.splat(0.0)), e, one);
    s.div(num, s.add(one, e))
}

#[inline(always)]
pub(crate) fn tanh_v<S: Simd>(s: S, x: S::V) -> S::V {
    const C: [f32; 5] = [
        -5.704_988_7e-3,
        2.063_908_9e-2,
        -5.373_971_6e-2,
        1.333_144_2e-1,
        -3.333_328_2e-1,
    ];
    let a = s.and_bits(x, ABS);
    let z = s.mul(x, x);
    let small = s.mul_add(s.mul(horner(s, z, C), z), x, x);
    let one = s.splat(1.0);
    let e = exp_v(s, s.add(a, a));
    let big = copysign(s, s.sub(one, s.div(s.splat(2.0), s.add(e, one))), x);
    s.select(s.lt(a, s.splat(0.625)), small, big)
}

/// `erfc(t)` for `t ≥ 0` given `-t²` as an exact-ish pair `(neg_sq_hi, neg_sq_lo)`.
///
/// Numerical Recipes' Chebyshev fit `u·exp(-t² + P(u))`, `u = 1/(1 + t/2)`
/// (fractional error < 1.2e-7 for every `t ≥ 0`), with `e^{-t² + P}` taken as
/// `exp_split(hi, lo + P)` so the large exponent is never rounded.
#[inline(always)]
fn erfc_core<S: Simd>(s: S, t: S::V, neg_sq_hi: S::V, neg_sq_lo: S::V) -> S::V {
    const C: [f32; 10] = [
        0.170_872_77,
        -0.822_152_23,
        1.488_515_9,
        -1.135_204,
        0.278_868_07,
        -0.186_288_06,
        0.096_784_18,
        0.374_091_96,
        1.000_023_7,
        -1.265_512_2,
    ];
    let one = s.splat(1.0);
    let u = s.div(one, s.mul_add(t, s.splat(0.5), one));
    let p = horner(s, u, C);
    s.mul(u, exp_split(s, neg_sq_hi, s.add(neg_sq_lo, p)))
}

/// `-x²·scale` as `hi + lo` with `hi` exact, `x` clamped to `0..=max` first.
#[inline(always)]
fn neg_square<S: Simd>(s: S, x: S::V, max: f32, scale: f32) -> (S::V, S::V) {
    let x = clamp_keep_nan(s, x, 0.0, max);
    let xh = split_hi(s, x);
    let k = s.splat(-scale);
    (
        s.mul(s.mul(xh, xh), k),
        s.mul(s.mul(s.sub(x, xh), s.add(x, xh)), k),
    )
}

/// `erf(x)` on `|x| < 0.5`: Taylor series to `x¹⁵`.
#[inline(always)]
fn erf_small<S: Simd>(s: S, x: S::V) -> S::V {
    const C: [f32; 8] = [
        -1.492_565e-5,
        1.205_533_3e-4,
        -8.548_327e-4,
        5.223_977_6e-3,
        -2.686_617e-2,
        0.112_837_92,
        -0.376_126_4,
        std::f32::consts::FRAC_2_SQRT_PI,
    ];
    s.mul(horner(s, s.mul(x, x), C), x)
}

#[inline(always)]
pub(crate) fn erf_v<S: Simd>(s: S, x: S::V) -> S::V {
    let t = s.and_bits(x, ABS);
    // erfc(10) underflows f32
    let (hi, lo) = neg_square(s, t, 10.0, 1.0);
    let big = copysign(s, s.sub(s.splat(1.0), erfc_core(s, t, hi, lo)), x);
    s.select(s.lt(t, s.splat(0.5)), erf_small(s, x), big)
}

#[inline(always)]
pub(crate) fn gelu_erf_v<S: Simd>(s: S, x: S::V) -> S::V {
    let a = s.and_bits(x, ABS);
    let t = s.mul(a, s.splat(std::f32::consts::FRAC_1_SQRT_2));
    // -x²/2 = -(t²), split from x itself (halving is exact)
    let (hi, lo) = neg_square(s, a, 14.0, 0.5);
    let erfc = erfc_core(s, t, hi, lo);
    let zero = s.splat(0.0);
    let big = s.select(s.lt(x, zero), erfc, s.sub(s.splat(2.0), erfc));
    // near 0 the erfc fit's 1.2e-7 is up to 6 ulp of the result: the Taylor series is exact there
    let one = s.splat(1.0);
    let small = s.add(
        one,
        erf_small(s, s.mul(x, s.splat(std::f32::consts::FRAC_1_SQRT_2))),
    );
    let one_plus_erf = s.select(s.lt(t, s.splat(0.5)), small, big);
    let y = s.mul(s.mul(s.splat(0.5), x), one_plus_erf);
    // below -14 the result is under 1e-42 (denormal): -0 also covers x = -inf
    s.select(s.lt(x, s.splat(-14.0)), s.splat(-0.0), y)
}

#[inline(always)]
pub(crate) fn gelu_tanh_v<S: Simd>(s: S, x: S::V) -> S::V {
    // past 1e4 the exponent is far below -88 already; the clamp keeps inf out of it
    let (hi, lo) = s.gelu_tanh_arg(clamp_keep_nan(s, x, -10.0, 1e4));
    let one = s.splat(1.0);
    let e = s.mul(exp_v(s, hi), s.add(one, lo));
    let y = s.div(x, s.add(one, e));
    // below -10 the result is under 1e-36: -0 also covers x = -inf
    s.select(s.lt(x, s.splat(-10.0)), s.splat(-0.0), y)
}

#[inline(always)]
pub(crate) fn log_v<S: Simd>(s: S, x: S::V) -> S::V {
    const POLY: [f32; 9] = [
        7.037_683_6e-2,
        -1.151_461e-1,
        1.167_699_9e-1,
        -1.242_014_1e-1,
        1.424_932_3e-1,
        -1.666_805_8e-1,
        2.000_071_4e-1,
        -2.499_999_4e-1,
        3.333_333e-1,
    ];
    // denormals: scale into the normal range first
    let tiny = s.lt(x, s.splat(f32::MIN_POSITIVE));
    let xs = s.select(tiny, s.mul(x, s.splat(8_388_608.0)), x);
    let bias = s.select(tiny, s.splat(126.0 + 23.0), s.splat(126.0));
    let e = s.sub(s.exponent_field(xs), bias);
    // mantissa in [0.5, 1)
    let m = s.or(s.and_bits(xs, 0x807f_ffff), s.splat(0.5));
    let below = s.lt(m, s.splat(std::f32::consts::FRAC_1_SQRT_2));
    let one = s.splat(1.0);
    let e = s.select(below, s.sub(e, one), e);
    let m = s.select(below, s.sub(s.add(m, m), one), s.sub(m, one));
    let z = s.mul(m, m);
    let y = s.mul(s.mul(m, z), horner(s, m, POLY));
    let y = s.mul_add(e, s.splat(LN2_LO), y);
    let y = s.mul_add(z, s.splat(-0.5), y);
    let r = s.mul_add(e, s.splat(LN2_HI), s.add(m, y));
    let r = s.select(s.ge(x, s.splat(0.0)), r, s.splat(f32::NAN));
    let r = s.select(s.eq(x, s.splat(0.0)), s.splat(f32::NEG_INFINITY), r);
    s.select(s.eq(x, s.splat(f32::INFINITY)), x, r)
}

/// `e^x`. Max error 1 ulp over normal results (`-87.3..88.7`); results below
/// `f32::MIN_POSITIVE` are denormal or 0, above `f32::MAX` are inf.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp_v(Scalar, x)
}

/// `e^x - 1`, accurate near 0. Max error 1.8 ulp (`-20..20`).
///
/// Taylor polynomial to `x⁹/9!` for `|x| < 0.5`, [`exp`]`(x) - 1` beyond.
#[inline(always)]
pub fn expm1(x: f32) -> f32 {
    expm1_v(Scalar, x)
}

/// Natural logarithm. Max error 1 ulp (every binade, denormals included);
/// `log(0) = -inf`, `log(x < 0) = NaN`, `log(inf) = inf`.
///
/// Cephes' reduction to a mantissa in `[√½, √2)` and its degree-9 polynomial.
#[inline(always)]
pub fn log(x: f32) -> f32 {
    log_v(Scalar, x)
}

/// `1 / (1 + e^-x)`. Max error 2.5 ulp (`-100..100`); below -87.3 the results are
/// denormal and within a few units of their last place (`e^x / (1 + e^x)` for x < 0).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    sigmoid_v(Scalar, x)
}

/// Hyperbolic tangent. Max error 1.3 ulp (`-20..20`; odd).
///
/// Cephes' odd polynomial for `|x| < 0.625`, `1 - 2/(e^{2|x|} + 1)` beyond.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    tanh_v(Scalar, x)
}

/// Error function. Max error 3.6 ulp (`-10..10`; odd).
///
/// Taylor series for `|x| < 0.5`, `1 - erfc(|x|)` beyond (see `erfc_core`).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    erf_v(Scalar, x)
}

/// GELU, erf form: `x/2 · (1 + erf(x/√2))`. Max error 7.9 ulp (≈ 5e-7
/// relative) over all results that are normal f32 (`-13..20`), 2 ulp for
/// `x ≥ -0.5` (measured 1.96).
///
/// `1 + erf(x/√2)` is `erfc(|x|/√2)` for `x < 0` and `2 - erfc(x/√2)` for
/// `x ≥ 0`, with `x²/2` split exactly from `x`, so the small negative tail
/// keeps its relative accuracy; for `|x|/√2 < 0.5` it is `1 +` [`erf`]'s
/// Taylor series (both are evaluated per lane and one selected: the series is
/// 9 multiply-adds next to the erfc fit's division and exponential).
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    gelu_erf_v(Scalar, x)
}

/// GELU, tanh form: `x/2 · (1 + tanh(√(2/π)(x + 0.044715x³)))`, computed as
/// `x / (1 + e^{-2y})` (no cancellation for `x < 0`). Max error 3.9 ulp over
/// all results that are normal f32 (`-9..20`).
///
/// The exponent `-2y` is formed in f64 and applied as `e^{hi}·(1 + lo)`, so
/// its rounding does not grow the error on the negative tail.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    gelu_tanh_v(Scalar, x)
}
