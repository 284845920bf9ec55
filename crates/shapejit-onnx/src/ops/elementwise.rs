//! Elementwise ops: unary activations, binary arithmetic/comparison/logic
//! (with the pre-opset-7 `broadcast`/`axis` form), variadic Sum/Mean/Max/Min,
//! Clip (attributes before opset 11, inputs from 11: `max`/`min` ops when
//! they are computed at run time), Where, Cast, and the small compositions
//! PRelu, Selu, Softplus, Mod and BitShift (`x · 2^s` or `x / 2^s` in the
//! compute dtype, which wrap and truncate as the shifts do), and the spectral
//! windows (Hann, Hamming, Blackman) over a `range` of run-time length.
//!
//! **Invariant:** the IR ops emitted compute the ONNX op's result for every
//! input the ONNX op accepts at the model's opset (compositions included).

use crate::node::{NodeCx, NodeResult};
use crate::tensor::{dtype_of, unsupported_dtype};
use shapejit_ir::{BinaryOp, DType, MathFn, Op, UnaryOp, ValueId};

/// A unary op on input 0.
pub fn unary(cx: &mut NodeCx, op: UnaryOp) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    Ok(vec![cx.op(Op::Unary(op), &[x])?])
}

/// `LeakyRelu` (alpha 0.01), `Elu` (alpha 1.0).
pub fn alpha_unary(
    cx: &mut NodeCx,
    make: fn(f32) -> UnaryOp,
    default: f32,
) -> NodeResult<Vec<ValueId>> {
    let alpha = cx.float_or("alpha", default)?;
    unary(cx, make(alpha))
}

/// `Gelu` (opset 20): `approximate` = `none` | `tanh`.
pub fn gelu(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let tanh_approx = match cx.attr_string("approximate")?.as_deref() {
        None | Some("none") => false,
        Some("tanh") => true,
        Some(other) => return Err(cx.unsupported(format!("approximate = '{other}'"))),
    };
    unary(cx, UnaryOp::Gelu { tanh_approx })
}

/// A binary op. Before opset 7, `broadcast = 1` with `axis` aligns `b` at
/// `axis` of `a`; that is NumPy broadcasting after appending size-1 dims to `b`.
pub fn binary(cx: &mut NodeCx, op: BinaryOp) -> NodeResult<Vec<ValueId>> {
    let a = cx.input(0)?;
    let mut b = cx.input(1)?;
    if cx.opset() < 7 {
        let broadcast = cx.int_or("broadcast", 0)?;
        if let Some(axis) = cx.attr_int("axis")?
            && broadcast != 0
        {
            let (rank_a, rank_b) = (cx.rank(a), cx.rank(b));
            let axis = cx.axis(axis, rank_a, "axis")?;
            let trailing = rank_a.checked_sub(axis + rank_b).ok_or_else(|| {
                cx.bad(format!(
                    "broadcast axis {axis} with a rank-{rank_b} operand exceeds rank {rank_a}"
                ))
            })?;
            if trailing > 0 {
                let axes = (rank_b..rank_b + trailing).map(|a| a as i64).collect();
                b = cx.op(Op::Unsqueeze { axes }, &[b])?;
            }
        }
    }
    if op == BinaryOp::Pow && cx.ty(b).dtype != cx.ty(a).dtype {
        let to = cx.ty(a).dtype;
        b = cx.op(Op::Cast { to }, &[b])?;
    }
    Ok(vec![cx.op(Op::Binary(op), &[a, b])?])
}

/// Variadic `Sum`, `Max`, `Min`: a left fold of the binary op.
pub fn variadic(cx: &mut NodeCx, op: BinaryOp) -> NodeResult<Vec<ValueId>> {
    Ok(vec![fold(cx, op)?])
}

fn fold(cx: &mut NodeCx, op: BinaryOp) -> NodeResult<ValueId> {
    let inputs = cx.inputs()?;
    let (&first, rest) = inputs
        .split_first()
        .ok_or_else(|| cx.bad("needs at least one input"))?;
    let mut acc = first;
    for &next in rest {
        acc = cx.op(Op::Binary(op), &[acc, next])?;
    }
    Ok(acc)
}

/// `Mean`: the sum divided by the input count.
pub fn mean(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let n = cx.inputs()?.len();
    let sum = fold(cx, BinaryOp::Add)?;
    if n == 1 {
        return Ok(vec![sum]);
    }
    let count = cx.const_scalar(cx.ty(sum).dtype, n as f64);
    Ok(vec![cx.op(Op::Binary(BinaryOp::Div), &[sum, count])?])
}

/// `Clip`: `min`/`max` attributes before opset 11, optional constant inputs from 11.
pub fn clip(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let (min, max) = if cx.opset() < 11 {
        (
            cx.float_or("min", f32::NEG_INFINITY)?,
            cx.float_or("max", f32::INFINITY)?,
        )
    } else {
        let (lo, hi) = (cx.opt_input(1)?, cx.opt_input(2)?);
        let computed = |v: Option<ValueId>| v.is_some_and(|v| cx.const_tensor(v).is_none());
        if computed(lo) || computed(hi) {
            // bounds computed at run time: max(x, lo), then min(·, hi), which
            // propagate NaN as clip does
            let mut y = x;
            if let Some(lo) = lo {
                y = cx.bin(BinaryOp::Max, y, lo)?;
            }
            if let Some(hi) = hi {
                y = cx.bin(BinaryOp::Min, y, hi)?;
            }
            return Ok(vec![y]);
        }
        let bound = |cx: &NodeCx, v: Option<ValueId>, what: &str, default: f32| match v {
            Some(v) => cx.const_f32(v, what),
            None => Ok(default),
        };
        (
            bound(cx, lo, "min", f32::NEG_INFINITY)?,
            bound(cx, hi, "max", f32::INFINITY)?,
        )
    };
    Ok(vec![cx.op(Op::Unary(UnaryOp::Clip { min, max }), &[x])?])
}

/// `Where(cond, x, y)`.
pub fn where_(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (c, x, y) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    Ok(vec![cx.op(Op::Where, &[c, x, y])?])
}

/// `Cast(to)` ([`cast_to`]).
pub fn cast(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let code = cx
        .attr_int("to")?
        .ok_or_else(|| cx.bad("required attribute 'to' is missing"))?;
    let to = i32::try_from(code)
        .ok()
        .and_then(dtype_of)
        .ok_or_else(|| cx.unsupported(unsupported_dtype(code as i32)))?;
    Ok(vec![cast_to(cx, x, to)?])
}

/// A cast with Cast's `saturate` (version 19, default 1) and `round_mode`
/// (version 24, default "up"): the conversion rule of [`shapejit_ir::dtype`],
/// except that a saturating cast to one of the four float8 formats clips to
/// its largest finite value first (in f32, or f64 for f64; NaN stays NaN), as
/// the onnx reference does. `f8e8m0` converts as its rule says (round up,
/// saturating); other settings for it are unsupported.
pub fn cast_to(cx: &mut NodeCx, x: ValueId, to: DType) -> NodeResult<ValueId> {
    let saturate = cx.int_or("saturate", 1)? != 0;
    let round_mode = cx.attr_string("round_mode")?;
    if to == DType::F8E8M0 && (!saturate || round_mode.as_deref().is_some_and(|m| m != "up")) {
        return Err(cx.unsupported(format!(
            "a cast to f8e8m0 with saturate = {} and round_mode = {}",
            u8::from(saturate),
            round_mode.as_deref().unwrap_or("up")
        )));
    }
    let max = match to {
        DType::F8E4M3Fn => shapejit_ir::dtype::F8E4M3Fn::max_finite(),
        DType::F8E4M3Fnuz => shapejit_ir::dtype::F8E4M3Fnuz::max_finite(),
        DType::F8E5M2 => shapejit_ir::dtype::F8E5M2::max_finite(),
        DType::F8E5M2Fnuz => shapejit_ir::dtype::F8E5M2Fnuz::max_finite(),
        _ => return cx.op(Op::Cast { to }, &[x]),
    };
    let from = cx.ty(x).dtype;
    if !saturate || from == DType::Bool {
        return cx.op(Op::Cast { to }, &[x]);
    }
    // f32 holds every f16, bf16 and narrow value; f64 clips in itself
    let wide = match from {
        DType::F32 | DType::F64 => x,
        _ => cx.op(Op::Cast { to: DType::F32 }, &[x])?,
    };
    let hi = cx.scalar_like(wide, max);
    let lo = cx.scalar_like(wide, -max);
    let clipped = cx.bin(BinaryOp::Min, wide, hi)?;
    let clipped = cx.bin(BinaryOp::Max, clipped, lo)?;
    cx.op(Op::Cast { to }, &[clipped])
}

/// `PRelu(x, slope)` = `x < 0 ? slope * x : x`. Before opset 7 a 1-D slope
/// of the channel count is per channel (axis 1), as PyTorch exported it.
pub fn prelu(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, mut slope) = (cx.input(0)?, cx.input(1)?);
    let rank = cx.rank(x);
    if cx.opset() < 7
        && rank > 2
        && cx.rank(slope) == 1
        && cx.ty(slope).shape.dims()[0] == cx.ty(x).shape.dims()[1]
    {
        let axes = (1..rank as i64 - 1).collect();
        slope = cx.op(Op::Unsqueeze { axes }, &[slope])?;
    }
    let zero = cx.const_scalar(cx.ty(x).dtype, 0.0);
    let neg = cx.op(Op::Binary(BinaryOp::Lt), &[x, zero])?;
    let scaled = cx.op(Op::Binary(BinaryOp::Mul), &[x, slope])?;
    Ok(vec![cx.op(Op::Where, &[neg, scaled, x])?])
}

/// `Selu` = `gamma * elu_alpha(x)`.
pub fn selu(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let alpha = cx.float_or("alpha", 1.673_263_2)?;
    let gamma = cx.float_or("gamma", 1.050_701)?;
    let elu = cx.op(Op::Unary(UnaryOp::Elu { alpha }), &[x])?;
    let g = cx.const_scalar(DType::F32, gamma as f64);
    Ok(vec![cx.op(Op::Binary(BinaryOp::Mul), &[elu, g])?])
}

/// `Softplus` = `log(exp(x) + 1)`, in the stable form
/// `relu(x) + log(1 + exp(-|x|))`: the exponent is never positive, so large
/// inputs give `x` (onnxruntime's value) instead of `inf`; NaN propagates.
pub fn softplus(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    Ok(vec![softplus_of(cx, x)?])
}

/// `log(exp(x) + 1)` of a value in the stable form (also Mish's inner function).
pub fn softplus_of(cx: &mut NodeCx, x: ValueId) -> NodeResult<ValueId> {
    let a = cx.op(Op::Unary(UnaryOp::Abs), &[x])?;
    let n = cx.op(Op::Unary(UnaryOp::Neg), &[a])?;
    let e = cx.op(Op::Unary(UnaryOp::Exp), &[n])?;
    let one = cx.const_scalar(cx.ty(x).dtype, 1.0);
    let s = cx.op(Op::Binary(BinaryOp::Add), &[e, one])?;
    let l = cx.op(Op::Unary(UnaryOp::Log), &[s])?;
    let r = cx.op(Op::Unary(UnaryOp::Relu), &[x])?;
    cx.op(Op::Binary(BinaryOp::Add), &[r, l])
}

/// `Mod(a, b; fmod = 0)`. `fmod = 1`: `a − b·trunc(a/b)`, the sign of `a`
/// (C `fmod`). `fmod = 0` (integers here): the sign of `b` (Python `%`), the
/// truncated remainder plus `b` when the two signs differ.
pub fn modulo(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let fmod = cx.int_or("fmod", 0)? != 0;
    let float = cx.ty(a).dtype == DType::F32;
    let q = cx.bin(BinaryOp::Div, a, b)?;
    let q = if float {
        let zero = cx.scalar_like(q, 0.0);
        let neg = cx.bin(BinaryOp::Lt, q, zero)?;
        let up = cx.un(UnaryOp::Math(MathFn::Ceil), q)?;
        let down = cx.un(UnaryOp::Math(MathFn::Floor), q)?;
        cx.op(Op::Where, &[neg, up, down])?
    } else {
        q
    };
    let bq = cx.bin(BinaryOp::Mul, b, q)?;
    let r = cx.bin(BinaryOp::Sub, a, bq)?;
    let r = if float {
        // a finite `a` over an infinite `b` is `a` (a − ∞·0 would be NaN)
        let inf = cx.scalar_like(a, f64::INFINITY);
        let b_abs = cx.un(UnaryOp::Abs, b)?;
        let b_inf = cx.bin(BinaryOp::Eq, b_abs, inf)?;
        let a_abs = cx.un(UnaryOp::Abs, a)?;
        let a_finite = cx.bin(BinaryOp::Lt, a_abs, inf)?;
        let keep = cx.bin(BinaryOp::And, b_inf, a_finite)?;
        cx.op(Op::Where, &[keep, a, r])?
    } else {
        r
    };
    if fmod {
        return Ok(vec![r]);
    }
    let zero = cx.scalar_like(r, 0.0);
    let r_neg = cx.bin(BinaryOp::Lt, r, zero)?;
    let b_neg = cx.bin(BinaryOp::Lt, b, zero)?;
    let same = cx.bin(BinaryOp::Eq, r_neg, b_neg)?;
    let differ = cx.un(UnaryOp::Not, same)?;
    let nonzero = {
        let z = cx.bin(BinaryOp::Eq, r, zero)?;
        cx.un(UnaryOp::Not, z)?
    };
    let fix = cx.bin(BinaryOp::And, differ, nonzero)?;
    let shifted = cx.bin(BinaryOp::Add, r, b)?;
    Ok(vec![cx.op(Op::Where, &[fix, shifted, r])?])
}

/// `BitShift(x, s; direction)`: `x · 2^s` (LEFT) or `⌊x / 2^s⌋` (RIGHT, an
/// arithmetic shift for signed types), wrapping, in i64 (the compute dtype of
/// every integer type but u64, see [`DType::compute`]), cast back to the
/// input's dtype. A shift outside `0..width` of the input's type gives 0, or
/// -1 for a negative signed `x` shifted right (the onnx reference).
pub fn bit_shift(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, s) = (cx.input(0)?, cx.input(1)?);
    let left = match cx.attr_string("direction")?.as_deref() {
        Some("LEFT") => true,
        Some("RIGHT") => false,
        other => {
            return Err(cx.bad(format!("direction must be LEFT or RIGHT, got {other:?}")));
        }
    };
    let dtype = cx.ty(x).dtype;
    if !dtype.is_int() || cx.ty(s).dtype != dtype {
        return Err(cx.bad(format!(
            "BitShift of {dtype} by {}: both must be the same integer type",
            cx.ty(s).dtype
        )));
    }
    let wide = |cx: &mut NodeCx, v: ValueId| -> NodeResult<ValueId> {
        if cx.ty(v).dtype == DType::I64 {
            Ok(v)
        } else {
            cx.op(Op::Cast { to: DType::I64 }, &[v])
        }
    };
    let (xw, sw) = (wide(cx, x)?, wide(cx, s)?);
    let zero = cx.const_scalar(DType::I64, 0.0);
    let width = cx.const_scalar(DType::I64, dtype.bits() as f64);
    let ge0 = cx.bin(BinaryOp::Ge, sw, zero)?;
    let below = cx.bin(BinaryOp::Lt, sw, width)?;
    let in_range = cx.bin(BinaryOp::And, ge0, below)?;
    let sw = cx.op(Op::Where, &[in_range, sw, zero])?;
    let two = cx.const_scalar(DType::I64, 2.0);
    let p = cx.bin(BinaryOp::Pow, two, sw)?;
    let (y, out_of_range) = if left {
        (cx.bin(BinaryOp::Mul, xw, p)?, zero)
    } else {
        // floor division: the truncated quotient, less one where the
        // remainder is negative (p > 0)
        let q = cx.bin(BinaryOp::Div, xw, p)?;
        let qp = cx.bin(BinaryOp::Mul, q, p)?;
        let r = cx.bin(BinaryOp::Sub, xw, qp)?;
        let neg = cx.bin(BinaryOp::Lt, r, zero)?;
        let one = cx.const_scalar(DType::I64, 1.0);
        let q1 = cx.bin(BinaryOp::Sub, q, one)?;
        let y = cx.op(Op::Where, &[neg, q1, q])?;
        let signed = matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
        let fill = if signed {
            let minus = cx.const_scalar(DType::I64, -1.0);
            let neg_x = cx.bin(BinaryOp::Lt, xw, zero)?;
            cx.op(Op::Where, &[neg_x, minus, zero])?
        } else {
            zero
        };
        (y, fill)
    };
    let y = cx.op(Op::Where, &[in_range, y, out_of_range])?;
    if dtype == DType::I64 {
        return Ok(vec![y]);
    }
    Ok(vec![cx.op(Op::Cast { to: dtype }, &[y])?])
}

/// `BitwiseNot(x)`: `x xor −1` in the compute dtype, cast back (which keeps
/// the low bits: `255 − x` for u8).
pub fn bitwise_not(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let ones = cx.scalar_like(x, -1.0);
    Ok(vec![cx.bin(BinaryOp::BitXor, x, ones)?])
}

/// The spectral windows `HannWindow`, `HammingWindow`, `BlackmanWindow`.
#[derive(Clone, Copy)]
pub enum Window {
    /// `sin²(π n / N)`
    Hann,
    /// `25/46 - 21/46 · cos(2π n / N)`
    Hamming,
    /// `0.42 - 0.5 cos(2π n / N) + 0.08 cos(4π n / N)`
    Blackman,
}

/// A window of `size` points (a run-time scalar), `N = size` (`periodic`,
/// the default) or `size - 1`, computed in f32 as the reference computes it
/// and cast to `output_datatype` (default f32).
pub fn window(cx: &mut NodeCx, kind: Window) -> NodeResult<Vec<ValueId>> {
    let size = cx.input(0)?;
    let periodic = cx.int_or("periodic", 1)? != 0;
    let code = cx.int_or("output_datatype", 1)?;
    let to = i32::try_from(code)
        .ok()
        .and_then(dtype_of)
        .ok_or_else(|| cx.unsupported(unsupported_dtype(code as i32)))?;
    let size = if cx.ty(size).dtype == DType::I64 {
        size
    } else {
        cx.op(Op::Cast { to: DType::I64 }, &[size])?
    };
    let size = if cx.rank(size) == 1 {
        cx.op(Op::Squeeze { axes: vec![0] }, &[size])?
    } else {
        size
    };
    let zero = cx.const_scalar(DType::I64, 0.0);
    let one = cx.const_scalar(DType::I64, 1.0);
    let n = cx.op(Op::Range, &[zero, size, one])?;
    let n = cx.op(Op::Cast { to: DType::F32 }, &[n])?;
    let big_n = if periodic {
        size
    } else {
        cx.bin(BinaryOp::Sub, size, one)?
    };
    let big_n = cx.op(Op::Cast { to: DType::F32 }, &[big_n])?;
    // cos or sin of (n · k·π) / N
    let angle = |cx: &mut NodeCx, k: f64, f: MathFn| -> NodeResult<ValueId> {
        let c = cx.const_scalar(DType::F32, k * std::f64::consts::PI);
        let t = cx.bin(BinaryOp::Mul, n, c)?;
        let t = cx.bin(BinaryOp::Div, t, big_n)?;
        cx.un(UnaryOp::Math(f), t)
    };
    let affine = |cx: &mut NodeCx, v: ValueId, mul: f64, add: f64| -> NodeResult<ValueId> {
        let m = cx.const_scalar(DType::F32, mul);
        let a = cx.const_scalar(DType::F32, add);
        let v = cx.bin(BinaryOp::Mul, v, m)?;
        cx.bin(BinaryOp::Add, v, a)
    };
    let y = match kind {
        Window::Hann => {
            let s = angle(cx, 1.0, MathFn::Sin)?;
            cx.bin(BinaryOp::Mul, s, s)?
        }
        Window::Hamming => {
            let c = angle(cx, 2.0, MathFn::Cos)?;
            affine(cx, c, -(1.0 - 25.0 / 46.0), 25.0 / 46.0)?
        }
        Window::Blackman => {
            let c2 = angle(cx, 2.0, MathFn::Cos)?;
            let c4 = angle(cx, 4.0, MathFn::Cos)?;
            let a = affine(cx, c2, -0.5, 0.0)?;
            let b = affine(cx, c4, 0.08, 0.0)?;
            let s = cx.bin(BinaryOp::Add, a, b)?;
            affine(cx, s, 1.0, 0.42)?
        }
    };
    if to == DType::F32 {
        return Ok(vec![y]);
    }
    Ok(vec![cx.op(Op::Cast { to }, &[y])?])
}

/// `BitCast(x; to)`: the bits of each element read as `to`, of the same size
/// (a different size, which reshapes the last dim, is unsupported).
pub fn bit_cast(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let code = cx
        .attr_int("to")?
        .ok_or_else(|| cx.bad("required attribute 'to' is missing"))?;
    let to = i32::try_from(code)
        .ok()
        .and_then(dtype_of)
        .ok_or_else(|| cx.unsupported(unsupported_dtype(code as i32)))?;
    cx.ty(x)
        .dtype
        .bitcast_to(to)
        .map_err(|e| cx.unsupported(e))?;
    Ok(vec![cx.op(Op::BitCast { to }, &[x])?])
}
