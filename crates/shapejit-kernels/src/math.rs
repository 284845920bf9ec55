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
// (`tools/fit_piecewise.py`)
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

/// A piecewise polynomial of `a ≥ 0` with 16 pieces, chosen by `u ≥ 0` (a
/// monotone function of `a`): `u·inv_d` rounded to the nearest integer `i` (at
/// most 15) picks `mid[i]` and row `i` of `table` (coefficients highest degree
/// first), evaluated at `t = a - mid[i]`.
///
/// The piece's index is read from the low bits of `u·inv_d + 1.5·2²³` by
/// [`Simd::lookup16`], so finding it costs one multiply-add; `t` is exact
/// (`a` is within a factor 2 of `mid[i]`, or `mid[0] = 0`), so a rounded `u`
/// only moves `a` to a neighbouring piece, which is fitted with a margin.
#[inline(always)]
fn piecewise<S: Simd, const N: usize>(
    s: S,
    u: S::V,
    inv_d: f32,
    a: S::V,
    mid: &[f32; 16],
    table: &[[f32; 16]; N],
) -> S::V {
    let i = s.mul_add(u, s.splat(inv_d), s.splat(ROUND_MAGIC));
    let t = s.sub(a, s.lookup16(i, mid));
    let mut acc = s.lookup16(i, &table[0]);
    for row in &table[1..] {
        acc = s.mul_add(acc, t, s.lookup16(i, row));
    }
    acc
}

/// `erf(a)` for `0 ≤ a ≤ ERF_MAX`: 16 pieces of degree 6, uniform in `a`, the
/// one at 0 without a constant term (fitted for least relative error, at most
/// 0.01 ulp before rounding; `tools/fit_piecewise.py erf`).
const ERF_MAX: f32 = 3.9;
/// From here on `erf` rounds to ±1.
const ERF_ONE: f32 = 3.85;
const ERF_INV_D: f32 = 3.9102564;
#[rustfmt::skip]
const ERF_MID: [f32; 16] = [0.0, 0.2557377, 0.5114754, 0.7672131, 1.0229508, 1.2786885, 1.5344262, 1.790164, 2.0459015, 2.3016393, 2.557377, 2.813115, 3.0688524, 3.3245902, 3.580328, 3.8040984];
// piece 0's slope is 2/√π, as fitted
#[allow(clippy::approx_constant)]
#[rustfmt::skip]
const ERF: [[f32; 16]; 7] = [
    [-0.01031067, -0.040253803, -0.049283873, -0.02470727, 0.0067224638, 0.021687793, 0.018045047, 0.0073382067, -0.0004737664, -0.0030447084, -0.0025548546, -0.0013877234, -0.0005719581, -0.00018909623, -5.1524723e-05, -1.412155e-05],
    [0.114328764, 0.07818612, 0.004080171, -0.055348154, -0.06796209, -0.043388862, -0.0111548025, 0.008410523, 0.012991163, 0.009718706, 0.005212602, 0.0021984675, 0.00075763353, 0.00021769633, 5.2795825e-05, 1.32259465e-05],
    [-9.954057e-05, 0.12923884, 0.18339898, 0.1459912, 0.061291993, -0.012658816, -0.046820495, -0.046569154, -0.031438094, -0.01645092, -0.007001895, -0.0024818466, -0.0007426102, -0.00018920098, -4.12878e-05, -9.633095e-06],
    [-0.37612337, -0.30622643, -0.13805358, 0.03699881, 0.14435376, 0.1664502, 0.1324512, 0.08254876, 0.042175528, 0.018058872, 0.006562056, 0.0020394942, 0.000545051, 0.00012572194, 2.5098301e-05, 5.454717e-06],
    [-3.323027e-08, -0.27029997, -0.44428873, -0.48054984, -0.40537018, -0.28127366, -0.16438812, -0.08195396, -0.03511621, -0.01299566, -0.004167607, -0.0011609222, -0.00028139015, -5.9426562e-05, -1.0946317e-05, -2.228232e-06],
    [1.1283792, 1.0569427, 0.86864144, 0.6263577, 0.39627534, 0.21997042, 0.107133284, 0.045780137, 0.017164174, 0.0056462632, 0.0016296415, 0.00041268236, 9.16924e-05, 1.7874883e-05, 3.0573585e-06, 5.857457e-07],
    [0.0, 0.28239965, 0.53052616, 0.72207975, 0.85201085, 0.9294462, 0.96999365, 0.98864806, 0.99618834, 0.99886614, 0.9997016, 0.9999306, 0.99998575, 0.99999744, 0.9999996, 0.99999994],
];

#[inline(always)]
pub(crate) fn erf_v<S: Simd>(s: S, x: S::V) -> S::V {
    // `min` with the constant first keeps NaN
    let a = s.min(s.splat(ERF_MAX), s.and_bits(x, ABS));
    let y = piecewise(s, a, ERF_INV_D, a, &ERF_MID, &ERF);
    let y = s.select(s.ge(a, s.splat(ERF_ONE)), s.splat(1.0), y);
    s.or(y, s.and_bits(x, SIGN))
}

/// `Φ(-a) = erfc(a/√2)/2` for `0 ≤ a ≤ GELU_MAX`: 16 pieces of degree 7, uniform
/// in `a(a + 3)` (so the pieces far out, where `Φ` falls fastest, are narrow;
/// fitted for least relative error, at most 0.06 ulp before rounding;
/// `tools/fit_piecewise.py gelu`).
const GELU_MAX: f32 = 5.5;
const GELU_SHIFT: f32 = 3.0;
const GELU_TAIL_INV_D: f32 = 0.3262032;
#[rustfmt::skip]
const GELU_TAIL_MID: [f32; 16] = [0.0, 0.780938, 1.3827887, 1.8756744, 2.30417, 2.6886024, 3.040369, 3.3666434, 3.672295, 3.960812, 4.2347956, 4.496247, 4.746746, 4.9875655, 5.219749, 5.4169];
#[rustfmt::skip]
const GELU_TAIL: [[f32; 16]; 8] = [
    [0.0009688519, -0.00041659686, -0.00068790163, -1.1218894e-05, 0.000271805, 0.00020129181, 6.925089e-05, -6.965157e-06, -2.9426881e-05, -2.6494197e-05, -1.7364984e-05, -9.664371e-06, -4.8360766e-06, -2.2402335e-06, -9.776073e-07, -4.5631103e-07],
    [0.0002144897, 0.0028943364, -0.00011745171, -0.0013805316, -0.00088789215, -0.00020516731, 0.00013031227, 0.00019338138, 0.00014867929, 8.983658e-05, 4.7236335e-05, 2.2591183e-05, 1.0069312e-05, 4.2468587e-06, 1.7125152e-06, 7.462519e-07],
    [-0.010066668, 0.00070651254, 0.0061536115, 0.0032805859, 0.00015613671, -0.0010637647, -0.0010783044, -0.0007294672, -0.00040753392, -0.0002020331, -9.2050024e-05, -3.93423e-05, -1.5984175e-05, -6.2304225e-06, -2.3456369e-06, -9.718366e-07],
    [2.1353473e-05, -0.022867586, -0.009613308, 0.0027814747, 0.006220055, 0.005090485, 0.0031031873, 0.00161272, 0.0007548196, 0.00032753826, 0.00013411534, 5.242986e-05, 1.9730884e-05, 7.1915683e-06, 2.5504785e-06, 1.0078498e-06],
    [0.06648777, 0.019122297, -0.023312785, -0.02883257, -0.020150112, -0.011155302, -0.005390307, -0.0023759105, -0.0009789935, -0.0003829212, -0.000143647, -5.2062755e-05, -1.8329913e-05, -6.2951062e-06, -2.1157873e-06, -8.0074074e-07],
    [1.5619855e-07, 0.11483279, 0.10602975, 0.0644288, 0.03232337, 0.014445739, 0.0059639113, 0.00232203, 0.0008638214, 0.00030977855, 0.00010777149, 3.6545214e-05, 1.2122767e-05, 3.945075e-06, 1.2623622e-06, 4.5911477e-07],
    [-0.3989423, -0.29408965, -0.15335639, -0.06869934, -0.028056415, -0.01074591, -0.00392315, -0.0013794333, -0.00047045315, -0.00015642174, -5.0898085e-05, -1.6255874e-05, -5.1078214e-06, -1.581964e-06, -4.8368685e-07, -1.6951199e-07],
    [0.5, 0.21741948, 0.08336484, 0.030350003, 0.010606554, 0.0035875908, 0.0011814422, 0.000380445, 0.00012019094, 3.7347647e-05, 1.1437985e-05, 3.4581724e-06, 1.033576e-06, 3.0572443e-07, 8.9582905e-08, 3.032059e-08],
];

/// GELU for `x < -GELU_MAX` (down to the denormals): `x/2 · erfc(|x|/√2)` with
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

#[inline(always)]
pub(crate) fn gelu_erf_v<S: Simd>(s: S, x: S::V) -> S::V {
    // `min` with the constant first keeps NaN
    let a = s.min(s.splat(GELU_MAX), s.and_bits(x, ABS));
    let u = s.mul(a, s.add(a, s.splat(GELU_SHIFT)));
    let e = piecewise(s, u, GELU_TAIL_INV_D, a, &GELU_TAIL_MID, &GELU_TAIL);
    // Φ(x) = 1 - Φ(-x); past GELU_MAX, Φ(-x) < 2⁻²⁵ and the difference rounds to 1
    let neg = s.lt(x, s.splat(0.0));
    let y = s.mul(x, s.select(neg, e, s.sub(s.splat(1.0), e)));
    let far = s.lt(x, s.splat(-GELU_MAX));
    if s.any(far) {
        s.select(far, gelu_erf_far(s, x), y)
    } else {
        y
    }
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

/// Error function. Max error 2.2 ulp (`-10..10`; odd).
///
/// A piecewise polynomial of `|x|` (16 pieces of degree 6, picked by a table
/// lookup; see `piecewise`) up to 3.85, ±1 beyond.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    erf_v(Scalar, x)
}

/// GELU, erf form: `x·Φ(x)` (`Φ(x) = (1 + erf(x/√2))/2`). Max error 3.1 ulp
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
