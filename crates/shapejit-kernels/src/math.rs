//! f32 transcendentals: range reductions and polynomials, branch-free per lane
//! (a vector skips a slow path only when none of its lanes takes it), written
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
//! the scalar level), comparisons, selects, bit operations and table lookups
//! (exact: a coefficient picked by an index held in a lane) are used; the
//! AVX2 and AVX-512 instantiations run the same operations per lane, so their
//! results are bit-identical.
//! **Invariant:** NaN in gives NaN out; ±inf give the limits.

// polynomial coefficients are kept digit for digit as published (Cephes, NR) or fitted
// (`tools/fit_piecewise.py`, `tools/fit_rational.py`)
#![allow(clippy::excessive_precision)]

use crate::simd::vector::{Scalar, Simd};

mod tables;
use tables::*;

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

/// A piecewise polynomial of `a ≥ 0` with 16 pieces, chosen by `u ≥ 0` (a
/// monotone function of `a`): `u·inv_d` rounded to the nearest integer `i` (at
/// most 15) picks `mid[i]` and column `i` of `table` (coefficients highest degree
/// first; the constant one is the pair `table[N-1][i] + lo[i]`), evaluated at
/// `t = a - mid[i]`.
///
/// The piece's index is read from the low bits of `u·inv_d + 1.5·2²³` by
/// [`Simd::lookup16`], so finding it costs one multiply-add; `t` is exact
/// (`a` is within a factor 2 of `mid[i]`, or `mid[0] = 0`), so a rounded `u`
/// only moves `a` to a neighbouring piece, which is fitted with a margin. The
/// constant term is added last, with its low part folded into the product
/// before: the result is rounded about once more than the fit's own error.
#[inline(always)]
fn piecewise<S: Simd, const N: usize>(
    s: S,
    (u, inv_d): (S::V, f32),
    a: S::V,
    mid: &[f32; 16],
    table: &[[f32; 16]; N],
    lo: &[f32; 16],
) -> S::V {
    let i = s.mul_add(u, s.splat(inv_d), s.splat(ROUND_MAGIC));
    if s.indices_below_8(i) {
        evaluate_piece::<S, N, true>(s, i, a, mid, table, lo)
    } else {
        evaluate_piece::<S, N, false>(s, i, a, mid, table, lo)
    }
}

/// [`piecewise`]'s polynomial for the piece index in `i`, its coefficients
/// read by [`Simd::lookup8`] when `LOW` (every index below 8: the same values,
/// fewer instructions on some levels) and by [`Simd::lookup16`] otherwise.
#[inline(always)]
fn evaluate_piece<S: Simd, const N: usize, const LOW: bool>(
    s: S,
    i: S::V,
    a: S::V,
    mid: &[f32; 16],
    table: &[[f32; 16]; N],
    lo: &[f32; 16],
) -> S::V {
    let t = s.sub(a, look::<S, LOW>(s, i, mid));
    let mut acc = look::<S, LOW>(s, i, &table[0]);
    for row in &table[1..N - 1] {
        acc = s.mul_add(acc, t, look::<S, LOW>(s, i, row));
    }
    let low = s.mul_add(acc, t, look::<S, LOW>(s, i, lo));
    s.add(low, look::<S, LOW>(s, i, &table[N - 1]))
}

/// `row[i]` per lane (a function, not a closure, so that it inlines into the
/// `#[target_feature]` loops).
#[inline(always)]
fn look<S: Simd, const LOW: bool>(s: S, i: S::V, row: &[f32; 16]) -> S::V {
    if LOW {
        s.lookup8(i, row)
    } else {
        s.lookup16(i, row)
    }
}

/// From here on `erf` rounds to ±1.
const ERF_ONE: f32 = 3.85;

#[inline(always)]
pub(crate) fn erf_v<S: Simd>(s: S, x: S::V) -> S::V {
    // `min` with the constant first keeps NaN
    let a = s.min(s.splat(ERF_MAX), s.and_bits(x, ABS));
    let y = piecewise(s, (a, ERF_INV_D), a, &ERF_MID, &ERF, &ERF_LO);
    let y = s.select(s.ge(a, s.splat(ERF_ONE)), s.splat(1.0), y);
    s.or(y, s.and_bits(x, SIGN))
}

/// `tanh(x) ≈ x·P(x²)/Q(x²)` on `|x| ≤ TANH_CLAMP` (`tools/fit_rational.py`), highest
/// degree first.
const TANH_P: [f32; 5] = [1.3318123e-08, 2.058279e-05, 0.0034939928, 0.13379683, 1.0];
const TANH_Q: [f32; 5] = [7.761628e-07, 0.0003283024, 0.025870916, 0.46712998, 1.0];
const TANH_CLAMP: f32 = 9.02;

#[inline(always)]
pub(crate) fn tanh_v<S: Simd>(s: S, x: S::V) -> S::V {
    // the rational is within a few ulp of 1 at the clamp: the result is clamped to ±1
    let x = clamp_keep_nan(s, x, -TANH_CLAMP, TANH_CLAMP);
    let z = s.mul(x, x);
    let y = s.div(s.mul(x, horner(s, z, TANH_P)), horner(s, z, TANH_Q));
    clamp_keep_nan(s, y, -1.0, 1.0)
}

/// Sigmoid for `x < -SIGMOID_NEAR` (down to the denormals).
#[inline(always)]
fn sigmoid_far<S: Simd>(s: S, x: S::V) -> S::V {
    // `e^-|x|` never overflows: for x < 0, `e / (1 + e)` keeps the denormal results
    // (x down to -103.9) that `1 / (1 + e^-x)` flushes to 0 once `e^-x` overflows
    // (x < -88.7). The JIT computes the same form.
    let one = s.splat(1.0);
    let e = exp_v(s, neg(s, s.and_bits(x, ABS)));
    let num = s.select(s.lt(x, s.splat(0.0)), e, one);
    s.div(num, s.add(one, e))
}

/// `e^-r ≈ 1 + r·K(r)` for `|r| ≤ ln2/2` (`tools/fit_rational.py`), highest degree
/// first.
const EXP_NEG_K: [f32; 6] = [
    0.0013888872,
    -0.00836914,
    0.041667137,
    -0.16666506,
    0.49999997,
    -1.0,
];
/// Below `-SIGMOID_NEAR` sigmoid takes `sigmoid_far` (above, `e^-x` is finite and `2^n` normal).
const SIGMOID_NEAR: f32 = 88.0;

#[inline(always)]
pub(crate) fn sigmoid_v<S: Simd>(s: S, x: S::V) -> S::V {
    // `min` with the constant first keeps NaN; `1 + e^-88` rounds to 1
    let xc = s.min(s.splat(SIGMOID_NEAR), x);
    let t = s.mul_add(xc, s.splat(-LOG2E), s.splat(ROUND_MAGIC));
    let n = s.sub(t, s.splat(ROUND_MAGIC));
    let r = s.mul_add(n, s.splat(LN2_HI), xc);
    let r = s.mul_add(n, s.splat(LN2_LO), r);
    let p = s.mul_add(horner(s, r, EXP_NEG_K), r, s.splat(1.0));
    let e = s.mul(p, s.pow2i(n));
    let one = s.splat(1.0);
    let y = s.div(one, s.add(one, e));
    match lanes_below(s, x, SIGMOID_NEAR) {
        Some(m) => s.select(m, sigmoid_far(s, x), y),
        None => y,
    }
}

/// `x · sigmoid(x)`: the product of `x` and [`sigmoid_v`], rounded once more.
#[inline(always)]
pub(crate) fn silu_v<S: Simd>(s: S, x: S::V) -> S::V {
    s.mul(x, sigmoid_v(s, x))
}

/// GELU for `x < -GELU_TAIL_MAX` (down to the denormals): `x/2 · erfc(|x|/√2)` with
/// the Numerical Recipes fit (`erfc_core`); `-0` below -14.
#[inline(always)]
fn gelu_erf_far<S: Simd>(s: S, x: S::V) -> S::V {
    let a = s.and_bits(x, ABS);
    let t = s.mul(a, s.splat(std::f32::consts::FRAC_1_SQRT_2));
    // -x²/2 = -(t²), split from x itself (halving is exact)
    let (hi, lo) = neg_square(s, a, 14.0, 0.5);
    let y = s.mul(s.mul(s.splat(0.5), x), erfc_core(s, t, hi, lo));
    // below -14 the result is under 1e-42 (denormal): -0 also covers x = -inf
    s.select(s.lt(x, s.splat(-14.0)), s.splat(-0.0), y)
}

/// `x < 0 ? E : 1 - E` for `E = table(|x|)`, a lower tail `F(-|x|)` of a
/// symmetric distribution (`F(x) = 1 - F(-x)`) fitted for relative error up to
/// `max`, where `1 - F(-max)` rounds to 1; `|x|` is clamped there. The piece
/// selector is `|x|·(|x| + shift)`.
#[inline(always)]
fn two_sided<S: Simd, const N: usize>(
    s: S,
    x: S::V,
    max: f32,
    shift: f32,
    inv_d: f32,
    (mid, table, lo): (&[f32; 16], &[[f32; 16]; N], &[f32; 16]),
) -> S::V {
    // `min` with the constant first keeps NaN
    let a = s.min(s.splat(max), s.and_bits(x, ABS));
    let u = s.mul(a, s.add(a, s.splat(shift)));
    let e = piecewise(s, (u, inv_d), a, mid, table, lo);
    s.select(s.lt(x, s.splat(0.0)), e, s.sub(s.splat(1.0), e))
}

/// The lanes of `x` below `-max`, when there are any: the callers then evaluate
/// their far-tail formula and select it there. (A branch at the call site, not a
/// closure taken here: a closure is compiled without the kernels' target
/// features, every intrinsic in it an outlined call.)
#[inline(always)]
fn lanes_below<S: Simd>(s: S, x: S::V, max: f32) -> Option<S::M> {
    let m = s.lt(x, s.splat(-max));
    s.any(m).then_some(m)
}

#[inline(always)]
pub(crate) fn gelu_erf_v<S: Simd>(s: S, x: S::V) -> S::V {
    let phi = two_sided(
        s,
        x,
        GELU_TAIL_MAX,
        GELU_TAIL_SHIFT,
        GELU_TAIL_INV_D,
        (&GELU_TAIL_MID, &GELU_TAIL, &GELU_TAIL_LO),
    );
    let y = s.mul(x, phi);
    match lanes_below(s, x, GELU_TAIL_MAX) {
        Some(m) => s.select(m, gelu_erf_far(s, x), y),
        None => y,
    }
}

/// GELU-tanh for `x < -GELU_TANH_TAIL_MAX` (down to the denormals).
#[inline(always)]
fn gelu_tanh_far<S: Simd>(s: S, x: S::V) -> S::V {
    // past 1e4 the exponent is far below -88 already; the clamp keeps inf out of it
    let (hi, lo) = s.gelu_tanh_arg(clamp_keep_nan(s, x, -10.0, 1e4));
    let one = s.splat(1.0);
    let e = s.mul(exp_v(s, hi), s.add(one, lo));
    let y = s.div(x, s.add(one, e));
    // below -10 the result is under 1e-36: -0 also covers x = -inf
    s.select(s.lt(x, s.splat(-10.0)), s.splat(-0.0), y)
}

#[inline(always)]
pub(crate) fn gelu_tanh_v<S: Simd>(s: S, x: S::V) -> S::V {
    let phi = two_sided(
        s,
        x,
        GELU_TANH_TAIL_MAX,
        GELU_TANH_TAIL_SHIFT,
        GELU_TANH_TAIL_INV_D,
        (&GELU_TANH_TAIL_MID, &GELU_TANH_TAIL, &GELU_TANH_TAIL_LO),
    );
    let y = s.mul(x, phi);
    match lanes_below(s, x, GELU_TANH_TAIL_MAX) {
        Some(m) => s.select(m, gelu_tanh_far(s, x), y),
        None => y,
    }
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

/// `1 / (1 + e^-x)`. Max error 2.4 ulp (`-100..100`; 2.3 with fused
/// multiply-adds); below -87.3 the results are denormal and within a few units
/// of their last place.
///
/// `1 / (1 + e^-x)` with `e^-x` reduced as in [`exp`] (`x` clamped to 88 above,
/// where `e^-x` is below the normals and the sum rounds to 1) and a degree-6
/// polynomial for `e^-r`, `|r| ≤ ln2/2`, fitted for relative error. Below -88
/// it is `e^x / (1 + e^x)` with [`exp`]'s two-step scaling, which keeps the
/// denormal results (evaluated only for vectors that have such a lane).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    sigmoid_v(Scalar, x)
}

/// SiLU (swish): `x · sigmoid(x)`, bit for bit `x` times [`sigmoid`]'s result
/// (what an unfused `Sigmoid` then `Mul` gives). Max error 2.6 ulp (`-87..100`; 2.4
/// with fused multiply-adds); below -87.3 `sigmoid` is denormal, and so are the
/// results below -91.7.
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    silu_v(Scalar, x)
}

/// Hyperbolic tangent. Max error 5.6 ulp (`-20..20`; 4.4 with fused
/// multiply-adds, as at AVX2/AVX-512; odd).
///
/// A rational minimax approximation `x·P(x²)/Q(x²)` (degree 4 over 4 in `x²`,
/// fitted for relative error) with `x` clamped to ±9.02, where `tanh` rounds to
/// ±1, and the result clamped to ±1; one true division, no table.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    tanh_v(Scalar, x)
}

/// Error function. Max error 2.2 ulp (`-10..10`; odd).
///
/// A piecewise polynomial of `|x|` (16 pieces of degree 6, picked by a table
/// lookup; see `piecewise`) up to 3.85, ±1 beyond.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    erf_v(Scalar, x)
}

/// GELU, erf form: `x·Φ(x)` (`Φ(x) = (1 + erf(x/√2))/2`). Max error 2.4 ulp
/// for `x ≥ -5.5` (1.8 ulp for `x ≥ -0.5`) and 6.4 ulp (≈ 4e-7 relative) below,
/// over all results that are normal f32 (`-13..-5.5`).
///
/// `Φ(-|x|)` is a piecewise polynomial of `|x|` fitted for relative error (16
/// pieces of degree 7, picked by a table lookup; see `piecewise`), and `Φ(x)`
/// is `1 - Φ(-x)` for `x ≥ 0`; `|x|` is clamped to 5.5, where `1 - Φ(-5.5)`
/// rounds to 1. Below -5.5 it is `x/2 · erfc(|x|/√2)` with `x²/2` split
/// exactly from `x` (a division and an exponential, evaluated only for
/// vectors that have such a lane).
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    gelu_erf_v(Scalar, x)
}

/// GELU, tanh form: `x/2 · (1 + tanh(y))`, `y = √(2/π)(x + 0.044715x³)`. Max
/// error 2.6 ulp for `x ≥ -5.2` and 3.1 ulp below, over all results that are
/// normal f32 (`-9..-5.2`).
///
/// As [`gelu_erf`]: `(1 + tanh(y))/2` at `-|x|` is a piecewise polynomial of
/// `|x|` fitted for relative error (16 pieces of degree 7), `|x|` clamped to
/// 5.2; below -5.2 it is `x / (1 + e^{-2y})` with the exponent `-2y` formed in
/// f64 and applied as `e^{hi}·(1 + lo)`, so its rounding does not grow the
/// error (evaluated only for vectors that have such a lane).
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    gelu_tanh_v(Scalar, x)
}
