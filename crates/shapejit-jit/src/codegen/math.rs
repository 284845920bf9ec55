//! Transcendental functions emitted inline as Cranelift IR (range reduction +
//! polynomial), at scalar or f32x4 width. No libm call per element.
//!
//! Measured maximum errors against f64, in ulp of the correctly rounded result
//! (`tests/math_error.rs` measures them through compiled kernels and asserts the
//! bounds in brackets): exp 0.98 on [-87.3, 88.7] [1.5]; log 0.81 on every binade
//! including subnormals [1.5]; tanh 1.30 on [-20, 20] [2]; sigmoid 2.23 on [-80, 80] [3];
//! erf 1.03 on [-6, 6] [1.5]; gelu_erf 3.71 on [-5, 10] [4] (absolute ≤ 1e-9 below);
//! gelu_tanh 2.27 for x ≥ 0 [4], 10.4 on [-2, 0] [12] and 46 (2.9e-6 relative) on
//! [-5, -2] [48]: its inner argument is rounded in f32 and `sigmoid(2u)` amplifies that
//! rounding by |2u|, as any f32 evaluation of the formula does.
//!
//! **Invariant:** every function maps NaN to NaN and handles ±inf like libm
//! (`exp(-inf) = 0`, `exp(inf) = inf`, `log(0) = -inf`, `log(x<0) = NaN`).

// Polynomial coefficients are written as published (Cephes) or as printed by the fit;
// the compiler rounds them to the nearest f32, which is what the error bounds measure.
#![allow(clippy::excessive_precision)]

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, Value};

use super::lanes::Lanes;

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `1.5·2^23`: adding it rounds a float in (-2^22, 2^22) to an integer kept in the
/// low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;
/// ln 2 split for Cody–Waite reduction (Cephes): `LN2_HI` has few mantissa bits.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Cephes expf polynomial for `(e^r - 1 - r) / r²`, highest degree first.
const EXP_POLY: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    5.000_000_1e-1,
];
/// Cephes logf polynomial, highest degree first.
const LOG_POLY: [f32; 9] = [
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
/// Cephes tanhf polynomial in x² for |x| < 0.625, highest degree first.
const TANH_POLY: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_908_9e-2,
    -5.373_971_6e-2,
    1.333_144_2e-1,
    -3.333_328_2e-1,
];
const TANH_SMALL: f32 = 0.625;
/// Below this |x|, `erf(x) = x + x·P(x²)` (fitted in f64, weighted least squares
/// iterated toward minimax, coefficients rounded to f32).
const ERF_SMALL: f32 = 0.875;
const ERF_SMALL_POLY: [f32; 7] = [
    8.675_383e-5,
    -8.211_102e-4,
    5.206_747_4e-3,
    -2.686_158_4e-2,
    1.128_373_3e-1,
    -3.761_263_5e-1,
    1.283_791_7e-1,
];
/// Above `ERF_SMALL`, `erfc(x) = e^(-x²)·G(u)` with `u = (x - ERF_MID)/ERF_HALF` for
/// x in [0.875, 4] (x clamped to 4: erf(4) rounds to 1 in f32).
const ERF_CLAMP: f32 = 4.0;
const ERF_MID: f32 = 2.4375;
const ERF_HALF: f32 = 1.5625;
const ERFC_POLY: [f32; 13] = [
    2.665_636_7e-5,
    -7.286_455_4e-5,
    1.012_255_7e-4,
    -2.368_420_4e-4,
    6.635_070_3e-4,
    -1.557_808_7e-3,
    3.471_567e-3,
    -7.609_234e-3,
    1.614_779e-2,
    -3.299_054e-2,
    6.469_229_6e-2,
    -1.211_887_7e-1,
    2.155_524_8e-1,
];
const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// √(2/π)
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// `2^n` for integer lanes `n` in [-126, 127].
fn pow2i(l: &mut Lanes, n: Value) -> Value {
    let bias = l.i(127);
    let biased = l.b.ins().iadd(n, bias);
    let shift = l.b.ins().iconst(cranelift_codegen::ir::types::I32, 23);
    let bits = l.b.ins().ishl(biased, shift);
    l.float_of(bits)
}

/// `e^x`.
pub(crate) fn exp(l: &mut Lanes, x: Value) -> Value {
    // Clamp so n stays in [-150, 128]. `min(hi, x)` is `hi < x ? hi : x` (one
    // `minps`, likewise `maxps`), so NaN passes: both compares are false for it.
    let hi = l.f(88.8);
    let lo = l.f(-104.0);
    let x = l.min(hi, x);
    let x = l.max(lo, x);
    // n = round(x·log2 e), as float and as integer, via the magic-number trick.
    let log2e = l.f(LOG2E);
    let magic = l.f(ROUND_MAGIC);
    let t = l.fma(x, log2e, magic);
    let n_float = l.sub(t, magic);
    let t_bits = l.bits_of(t);
    let magic_bits = l.i(ROUND_MAGIC.to_bits() as i32);
    let n = l.b.ins().isub(t_bits, magic_bits);
    // r = x − n·ln2 in two steps.
    let minus_hi = l.f(-LN2_HI);
    let r = l.fma(n_float, minus_hi, x);
    let minus_lo = l.f(-LN2_LO);
    let r = l.fma(n_float, minus_lo, r);
    // e^r = 1 + r + r²·P(r)
    let p = l.horner(r, &EXP_POLY);
    let r2 = l.mul(r, r);
    let y = l.fma(p, r2, r);
    let y = l.add_c(y, 1.0);
    // Scale by 2^n as 2^(n/2)·2^(n−n/2) so subnormal and overflowing results round once.
    let one = l.b.ins().iconst(cranelift_codegen::ir::types::I32, 1);
    let n1 = l.b.ins().sshr(n, one);
    let n2 = l.b.ins().isub(n, n1);
    let s1 = pow2i(l, n1);
    let s2 = pow2i(l, n2);
    let y = l.mul(y, s1);
    l.mul(y, s2)
}

/// `e^x - 1`, accurate near 0 (as the interpreter's): the Taylor polynomial for
/// `|x| < 0.5`, so tiny and subnormal `x` give `x` itself; [`exp`]`(x) - 1` beyond.
pub(crate) fn expm1(l: &mut Lanes, x: Value) -> Value {
    let p = l.horner(x, &shapejit_kernels::math::EXPM1_TAYLOR);
    // (p·x)·x + x, rounded as the interpreter's
    let px = l.mul(p, x);
    let small = l.fma(px, x, x);
    let e = exp(l, x);
    let big = l.add_c(e, -1.0);
    let ax = l.abs(x);
    let is_small = l.cmp_c(FloatCC::LessThan, ax, 0.5);
    l.select(is_small, small, big)
}

/// Natural logarithm.
pub(crate) fn log(l: &mut Lanes, x: Value) -> Value {
    // Subnormal inputs: scale by 2^23 and correct the exponent.
    let is_sub = l.cmp_c(FloatCC::LessThan, x, f32::MIN_POSITIVE);
    let scaled = l.mul_c(x, 8_388_608.0);
    let xs = l.select(is_sub, scaled, x);
    let zero = l.f(0.0);
    let minus23 = l.f(-23.0);
    let e_adjust = l.select(is_sub, minus23, zero);
    // x = m·2^e with m in [0.5, 1).
    let bits = l.bits_of(xs);
    let shift = l.b.ins().iconst(cranelift_codegen::ir::types::I32, 23);
    let biased = l.b.ins().ushr(bits, shift);
    let bias = l.i(126);
    let e_int = l.b.ins().isub(biased, bias);
    let e = l.int_to_float(e_int);
    let e = l.add(e, e_adjust);
    let mant_mask = l.i(0x007F_FFFF);
    let half_bits = l.i(0x3F00_0000);
    let mant = l.b.ins().band(bits, mant_mask);
    let mant = l.b.ins().bor(mant, half_bits);
    let m = l.float_of(mant);
    // If m < √½: e -= 1, m = 2m − 1; else m = m − 1.
    let small = l.cmp_c(FloatCC::LessThan, m, std::f32::consts::FRAC_1_SQRT_2);
    let one = l.f(1.0);
    let e_minus = l.sub(e, one);
    let e = l.select(small, e_minus, e);
    let m_extra = l.select(small, m, zero);
    let m = l.sub(m, one);
    let m = l.add(m, m_extra);
    let z = l.mul(m, m);
    let p = l.horner(m, &LOG_POLY);
    let mz = l.mul(m, z);
    let y = l.mul(p, mz);
    let c_lo = l.f(LN2_LO);
    let y = l.fma(e, c_lo, y);
    let minus_half = l.f(-0.5);
    let y = l.fma(z, minus_half, y);
    let res = l.add(m, y);
    let c_hi = l.f(LN2_HI);
    let res = l.fma(e, c_hi, res);
    // Special values.
    let inf = l.f(f32::INFINITY);
    let is_inf = l.cmp(FloatCC::Equal, x, inf);
    let res = l.select(is_inf, inf, res);
    let is_zero = l.cmp(FloatCC::Equal, x, zero);
    let neg_inf = l.f(f32::NEG_INFINITY);
    let res = l.select(is_zero, neg_inf, res);
    let is_neg = l.cmp(FloatCC::LessThan, x, zero);
    let is_nan = l.cmp(FloatCC::Unordered, x, x);
    let bad = l.mask_or(is_neg, is_nan);
    let nan = l.f(f32::NAN);
    l.select(bad, nan, res)
}

/// Hyperbolic tangent.
pub(crate) fn tanh(l: &mut Lanes, x: Value) -> Value {
    let ax = l.abs(x);
    // |x| < 0.625: x + x·z·P(z), z = x².
    let z = l.mul(x, x);
    let p = l.horner(z, &TANH_POLY);
    let xz = l.mul(x, z);
    let small = l.fma(xz, p, x);
    // Otherwise ±(1 − 2/(e^(2|x|) + 1)).
    let two_ax = l.add(ax, ax);
    let e = exp(l, two_ax);
    let e1 = l.add_c(e, 1.0);
    let two = l.f(2.0);
    let q = l.div(two, e1);
    let one = l.f(1.0);
    let big = l.sub(one, q);
    let neg_big = l.neg(big);
    let zero = l.f(0.0);
    let is_neg = l.cmp(FloatCC::LessThan, x, zero);
    let big = l.select(is_neg, neg_big, big);
    let is_small = l.cmp_c(FloatCC::LessThan, ax, TANH_SMALL);
    let res = l.select(is_small, small, big);
    // `x + x·z·P` is +0 at x = -0: tanh keeps the zero's sign (as the interpreter's kernel)
    let is_zero = l.cmp_c(FloatCC::Equal, ax, 0.0);
    l.select(is_zero, x, res)
}

/// `1/(1+e^-x)`, as `e/(1+e)` for x < 0 so small results keep their precision.
pub(crate) fn sigmoid(l: &mut Lanes, x: Value) -> Value {
    let ax = l.abs(x);
    let minus_ax = l.neg(ax);
    let e = exp(l, minus_ax);
    let one = l.f(1.0);
    let denom = l.add(one, e);
    let zero = l.f(0.0);
    let is_neg = l.cmp(FloatCC::LessThan, x, zero);
    let num = l.select(is_neg, e, one);
    l.div(num, denom)
}

/// The pieces erf and gelu are built from, for the argument `z = v·scale` and `a = |z|`:
/// `small = z + z·P(z²)` (erf for a < 0.875), `erfc_a = erfc(a)` (accurate for
/// a ≥ 0.875), and the mask `a < 0.875`.
struct ErfParts {
    z: Value,
    small: Value,
    erfc_a: Value,
    is_small: Value,
}

/// `square_scale` is `scale²` exactly, a power of two: `z²` is then computed exactly
/// from `v` as `(hi + lo)·scale²` (`v² = hi + lo` by FMA), so the rounding of `v·scale`
/// is not amplified by `e^(-z²)`.
fn erf_parts(l: &mut Lanes, v: Value, scale: f32, square_scale: f32) -> ErfParts {
    let z = if scale == 1.0 { v } else { l.mul_c(v, scale) };
    let z2 = l.mul(z, z);
    let p = l.horner(z2, &ERF_SMALL_POLY);
    let small = l.fma(z, p, z);
    let a = l.abs(z);
    let is_small = l.cmp_c(FloatCC::LessThan, a, ERF_SMALL);
    // erfc(a) = e^(-a²)·G(u), u from a clamped to ERF_CLAMP.
    let clamp = l.f(ERF_CLAMP);
    let over = l.cmp(FloatCC::GreaterThan, a, clamp);
    let ac = l.select(over, clamp, a);
    let inv_half = l.f(1.0 / ERF_HALF);
    let minus_mid = l.f(-ERF_MID / ERF_HALF);
    let u = l.fma(ac, inv_half, minus_mid);
    let g = l.horner(u, &ERFC_POLY);
    // e^(-100) is already 0 in f32; the clamp keeps `lo` finite for infinite inputs.
    let av = l.abs(v);
    let limit = l.f(10.0 / scale);
    let far = l.cmp(FloatCC::GreaterThan, av, limit);
    let av = l.select(far, limit, av);
    let hi = l.mul(av, av);
    let minus_hi = l.neg(hi);
    let lo = l.fma(av, av, minus_hi);
    let minus_hi = l.mul_c(minus_hi, square_scale);
    let lo = l.mul_c(lo, square_scale);
    let e = exp(l, minus_hi);
    // e^(-hi-lo) ≈ e^(-hi)·(1 − lo)
    let e_lo = l.mul(e, lo);
    let e = l.sub(e, e_lo);
    let erfc_a = l.mul(e, g);
    ErfParts {
        z,
        small,
        erfc_a,
        is_small,
    }
}

/// Error function.
pub(crate) fn erf(l: &mut Lanes, x: Value) -> Value {
    let parts = erf_parts(l, x, 1.0, 1.0);
    let one = l.f(1.0);
    let big = l.sub(one, parts.erfc_a);
    let neg_big = l.neg(big);
    let zero = l.f(0.0);
    let is_neg = l.cmp(FloatCC::LessThan, x, zero);
    let big = l.select(is_neg, neg_big, big);
    l.select(parts.is_small, parts.small, big)
}

/// `0.5·x·(1 + erf(x/√2))`; `1 + erf(z)` is taken as `erfc(|z|)` for z ≤ −0.875 so the
/// negative tail does not cancel.
pub(crate) fn gelu_erf(l: &mut Lanes, x: Value) -> Value {
    let parts = erf_parts(l, x, FRAC_1_SQRT_2, 0.5);
    let one = l.f(1.0);
    let small = l.add(one, parts.small);
    let two = l.f(2.0);
    let pos = l.sub(two, parts.erfc_a);
    let zero = l.f(0.0);
    let is_neg = l.cmp(FloatCC::LessThan, parts.z, zero);
    let big = l.select(is_neg, parts.erfc_a, pos);
    let one_plus_erf = l.select(parts.is_small, small, big);
    let half_x = l.mul_c(x, 0.5);
    let y = l.mul(half_x, one_plus_erf);
    // As the interpreter: −0 below −14 (the result is under 1e-42), which also gives
    // gelu(−inf) = −0 instead of −inf·0.
    negative_tail(l, x, -14.0, y)
}

/// `x < limit ? −0 : y`.
fn negative_tail(l: &mut Lanes, x: Value, limit: f32, y: Value) -> Value {
    let tail = l.cmp_c(FloatCC::LessThan, x, limit);
    let minus_zero = l.f(-0.0);
    l.select(tail, minus_zero, y)
}

/// `0.5·x·(1 + tanh(u))` with `u = √(2/π)(x + 0.044715x³)`, computed as
/// `x·sigmoid(2u)` (the same function without the cancellation for negative x).
pub(crate) fn gelu_tanh(l: &mut Lanes, x: Value) -> Value {
    let x2 = l.mul(x, x);
    let c = l.f(0.044_715);
    let one = l.f(1.0);
    let inner = l.fma(x2, c, one);
    let u = l.mul(x, inner);
    let two_u = l.mul_c(u, 2.0 * SQRT_2_OVER_PI);
    let s = sigmoid(l, two_u);
    let y = l.mul(x, s);
    // As the interpreter: −0 below −10 (under 1e-36), so gelu(−inf) is not −inf·0.
    negative_tail(l, x, -10.0, y)
}
