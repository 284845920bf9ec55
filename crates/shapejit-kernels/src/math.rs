//! Vectorizable f32 transcendentals: branch-free polynomials with no libm call,
//! so the elementwise engine's slice loops auto-vectorize around them.
//!
//! Each function states its maximum error against an f64 reference over the
//! stated range, measured once over every f32 there (release build) and
//! re-checked on a dense grid plus random points by `tests/math_accuracy.rs` (`ulp` = units in the last
//! place of the f32 result; `rel` = |f - ref| / |ref|).
//!
//! **Invariant:** only IEEE `+ - * /`, comparisons and bit operations are used
//! (no `mul_add`): results are bit-identical on every x86-64, with or without
//! the AVX2/FMA code paths.
//! **Invariant:** NaN in gives NaN out; ±inf give the limits.

// polynomial coefficients are kept digit for digit as published (Cephes, NR)
#![allow(clippy::excessive_precision)]

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// 1.5·2²³: adding it rounds an f32 of magnitude < 2²² to an integer.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// Clamps while letting NaN through (comparisons with NaN are false).
#[inline(always)]
fn clamp_keep_nan(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x > hi { hi } else { x };
    if y < lo { lo } else { y }
}

/// `2^n` for `n` in `-126..=127` from its exponent bits.
#[inline(always)]
fn pow2i(n: i32) -> f32 {
    f32::from_bits((n.wrapping_add(127) as u32).wrapping_shl(23))
}

/// `c[0]·x^(N-1) + … + c[N-1]` by Horner's rule.
#[inline(always)]
fn horner<const N: usize>(x: f32, c: [f32; N]) -> f32 {
    let mut acc = c[0];
    for &ci in &c[1..] {
        acc = acc * x + ci;
    }
    acc
}

/// `e^x`. Max error 0.99 ulp over normal results (every f32 with
/// `0.001 ≤ |x|`, `-87.3..88.7`); results
/// below `f32::MIN_POSITIVE` are denormal or 0, above `f32::MAX` are inf.
///
/// Cody–Waite reduction `x = n·ln2 + r`, `|r| ≤ ln2/2`, then Cephes' degree-7
/// polynomial for `e^r`; `2^n` is applied as two exact power-of-two factors so
/// the full range up to overflow and down into denormals is covered.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp_split(x, 0.0)
}

/// `e^(hi + lo)` for `|lo|` small next to `|hi|` (≲ 2): the reduction subtracts
/// `n·ln2` from `hi` alone, so `hi + lo` is never rounded to f32 — used where `hi`
/// is a large exact value (`-t²` of erfc). `exp(x)` is `exp_split(x, 0)`.
#[inline(always)]
fn exp_split(hi: f32, lo: f32) -> f32 {
    let hi = clamp_keep_nan(hi, -104.0, 89.0);
    let t = (hi + lo) * LOG2E + ROUND_MAGIC;
    let nf = t - ROUND_MAGIC;
    let n = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    // nf·0.693359375 is exact (9 + 8 significant bits), so is its difference with hi
    let r = (hi - nf * 0.693_359_4) - nf * -2.121_944_4e-4 + lo;
    let z = r * r;
    let p = horner(
        r,
        [
            1.987_569_1e-4,
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            5.000_000_1e-1,
        ],
    ) * z
        + r
        + 1.0;
    let half = n >> 1;
    p * pow2i(half) * pow2i(n.wrapping_sub(half))
}

/// `e^x - 1`, accurate near 0. Max error 1.7 ulp (every f32 with
/// `0.001 ≤ |x| < 20`).
///
/// Taylor polynomial to `x⁹/9!` for `|x| < 0.5`, [`exp`]`(x) - 1` beyond.
#[inline(always)]
pub fn expm1(x: f32) -> f32 {
    let c = [
        2.755_732e-6,
        2.480_158_7e-5,
        1.984_127e-4,
        1.388_888_9e-3,
        8.333_333e-3,
        4.166_666_8e-2,
        0.166_666_67,
        0.5,
    ];
    let p = horner(x, c) * x * x + x;
    let big = exp(x) - 1.0;
    if x.abs() < 0.5 { p } else { big }
}

/// `1 / (1 + e^-x)`. Max error 2.5 ulp (every f32 with `0.001 ≤ |x| < 100`).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// Hyperbolic tangent. Max error 1.3 ulp (every f32 with `0.001 ≤ |x| < 20`;
/// odd).
///
/// Cephes' odd polynomial for `|x| < 0.625`, `1 - 2/(e^{2|x|} + 1)` beyond.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let small = horner(
        z,
        [
            -5.704_988_7e-3,
            2.063_908_9e-2,
            -5.373_971_6e-2,
            1.333_144_2e-1,
            -3.333_328_2e-1,
        ],
    ) * z
        * x
        + x;
    let big = (1.0 - 2.0 / (exp(2.0 * a) + 1.0)).copysign(x);
    if a < 0.625 { small } else { big }
}

/// Clears the low 12 mantissa bits, so that `hi(x)²` is exact in f32.
#[inline(always)]
fn split_hi(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0xffff_f000)
}

/// `erfc(t)` for `t ≥ 0` given `-t²` as an exact-ish pair `(neg_sq_hi, neg_sq_lo)`.
///
/// Numerical Recipes' Chebyshev fit `u·exp(-t² + P(u))`, `u = 1/(1 + t/2)`
/// (fractional error < 1.2e-7), with `e^{-t² + P}` taken as
/// `exp_split(hi, lo + P)` so the large exponent is never rounded.
#[inline(always)]
fn erfc_core(t: f32, neg_sq_hi: f32, neg_sq_lo: f32) -> f32 {
    let u = 1.0 / (1.0 + 0.5 * t);
    let c = [
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
    let p = horner(u, c);
    u * exp_split(neg_sq_hi, neg_sq_lo + p)
}

/// `-t²` as `hi + lo` with `hi` exact (`t` clamped to 10: `erfc(10)` underflows f32).
#[inline(always)]
fn neg_square(t: f32) -> (f32, f32) {
    let t = clamp_keep_nan(t, 0.0, 10.0);
    let th = split_hi(t);
    (-(th * th), -((t - th) * (t + th)))
}

/// `erf(x)·(2/√π)⁻¹ / x` on `|x| < 0.5`: Taylor series to `x¹⁴`.
#[inline(always)]
fn erf_small(x: f32) -> f32 {
    let z = x * x;
    let c = [
        -1.492_565e-5,
        1.205_533_3e-4,
        -8.548_327e-4,
        5.223_977_6e-3,
        -2.686_617e-2,
        0.112_837_92,
        -0.376_126_4,
        std::f32::consts::FRAC_2_SQRT_PI,
    ];
    horner(z, c) * x
}

/// Error function. Max error 3.6 ulp (every f32 in `0..10` checked once;
/// odd, so the same for negative inputs).
///
/// Taylor series for `|x| < 0.5`, `1 - erfc(|x|)` beyond (see `erfc_core`).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let t = x.abs();
    let (hi, lo) = neg_square(t);
    let big = (1.0 - erfc_core(t, hi, lo)).copysign(x);
    if t < 0.5 { erf_small(x) } else { big }
}

/// GELU, erf form: `x/2 · (1 + erf(x/√2))`. Max error 7.9 ulp (≈ 5e-7
/// relative; every f32 in `-13..20` checked once: all results that are normal
/// f32), 2.2 ulp for `x ≥ -0.5`.
///
/// For `x < 0` it uses `x/2 · erfc(|x|/√2)`, with `x²/2` split exactly from `x`, so
/// the small negative tail keeps its relative accuracy.
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    let t = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let xc = clamp_keep_nan(x.abs(), 0.0, 14.0);
    let xh = split_hi(xc);
    // -x²/2 = -(xh² + (x-xh)(x+xh))/2: halving is exact.
    let (hi, lo) = (-(xh * xh) * 0.5, -((xc - xh) * (xc + xh)) * 0.5);
    let erfc = erfc_core(t, hi, lo);
    let one_plus_erf_small = 1.0 + erf_small(x * std::f32::consts::FRAC_1_SQRT_2);
    let one_plus_erf_big = if x < 0.0 { erfc } else { 2.0 - erfc };
    let one_plus_erf = if t < 0.5 {
        one_plus_erf_small
    } else {
        one_plus_erf_big
    };
    // below -14 the result is under 1e-42 (denormal): -0 also covers x = -inf
    if x < -14.0 {
        -0.0
    } else {
        0.5 * x * one_plus_erf
    }
}

/// GELU, tanh form: `x/2 · (1 + tanh(√(2/π)(x + 0.044715x³)))`, computed as
/// `x / (1 + e^{-2y})` (no cancellation for `x < 0`). Max error 3.9 ulp (every
/// f32 in `-9..20` checked once: all results that are normal f32).
///
/// The exponent `-2y` is formed in f64 and applied as `e^{hi}·(1 + lo)`, so
/// its rounding does not grow the error on the negative tail.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const K2: f64 = -1.595_769_121_605_730_7; // -2·√(2/π)
    let xd = x as f64;
    let a = K2 * (xd + 0.044_715 * xd * xd * xd);
    let hi = a as f32;
    let lo = (a - hi as f64) as f32;
    let e = exp(hi) * (1.0 + lo);
    // below -10 the result is under 1e-36: -0 also covers x = -inf
    if x < -10.0 { -0.0 } else { x / (1.0 + e) }
}
