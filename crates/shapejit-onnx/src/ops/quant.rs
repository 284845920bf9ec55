//! Linear quantization: QuantizeLinear, DequantizeLinear and
//! DynamicQuantizeLinear, composed from casts and f32 arithmetic as the onnx
//! reference computes them; MatMulInteger and QLinearMatMul on an exact
//! integer product (f32 matmuls over chunks short enough to be exact, summed
//! in i64).
//!
//! - Quantize to an integer type: `clip(round_even(x / scale) + zp, lo, hi)`;
//!   to a float8 type: `x / scale` cast (saturating unless `saturate = 0`; the
//!   zero point is ignored, it must be 0); to float4: `x / scale + zp` cast.
//! - Dequantize: `(x - zp) · scale` (float8 and float4 ignore the zero point),
//!   in the scale's dtype or `output_dtype`.
//!
//! `scale` and `zp` are a scalar (or one element), a vector along `axis`, or,
//! with `block_size`, `x`'s shape with `axis` divided into blocks (each
//! element repeated `block_size` times, the last block cut to fit; needs the
//! dims of `axis` known). The arithmetic runs in f32 whatever the input's
//! float type (f16 and bf16 are exact in it; f64 rounds once to f32 first).
//!
//! **Invariant:** every output has the dtype ONNX gives it: the zero point's,
//! else `output_dtype`, else u8 for QuantizeLinear; the scale's, else
//! `output_dtype`, for DequantizeLinear.

use super::elementwise::cast_to;
use crate::node::{NodeCx, NodeResult};
use crate::tensor::{dtype_of, unsupported_dtype};
use shapejit_ir::{BinaryOp, DType, MathFn, Op, ReduceOp, UnaryOp, ValueId};

/// `v` cast to f32 (kept when it already is).
fn f32_of(cx: &mut NodeCx, v: ValueId) -> NodeResult<ValueId> {
    if cx.ty(v).dtype == DType::F32 {
        return Ok(v);
    }
    cx.op(Op::Cast { to: DType::F32 }, &[v])
}

/// A scale or zero point shaped to broadcast against `x` (see the module docs).
fn along_axis(
    cx: &mut NodeCx,
    p: ValueId,
    x: ValueId,
    axis: i64,
    block: i64,
) -> NodeResult<ValueId> {
    let p_dims = cx.ty(p).shape.dims().to_vec();
    if p_dims.is_empty() {
        return Ok(p);
    }
    if p_dims.iter().all(|d| d.as_known() == Some(1)) {
        // one element is a scalar, whatever its shape
        let s = cx.const_i64s(vec![]);
        return cx.op(Op::Reshape { allowzero: false }, &[p, s]);
    }
    let rank = cx.rank(x);
    let axis = cx.axis(axis, rank, "axis")?;
    if block == 0 {
        if p_dims.len() != 1 {
            return Err(cx.bad(format!(
                "a per-axis scale or zero point must be a vector, got shape {p_dims:?}"
            )));
        }
        let mut shape = vec![1i64; rank];
        shape[axis] = -1;
        let s = cx.const_i64s(shape);
        return cx.op(Op::Reshape { allowzero: false }, &[p, s]);
    }
    if block < 0 || p_dims.len() != rank {
        return Err(cx.bad(format!(
            "block_size {block} needs a scale of x's rank {rank}, got shape {p_dims:?}"
        )));
    }
    let known = |cx: &NodeCx, v: ValueId| -> NodeResult<Vec<i64>> {
        cx.ty(v)
            .shape
            .dims()
            .iter()
            .map(|d| d.as_known())
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| cx.unsupported("blocked quantization over symbolic dims"))
    };
    let (pd, xd) = (known(cx, p)?, known(cx, x)?);
    let u = cx.op(
        Op::Unsqueeze {
            axes: vec![axis as i64 + 1],
        },
        &[p],
    )?;
    let mut reps = vec![1i64; rank + 1];
    reps[axis + 1] = block;
    let reps = cx.const_i64s(reps);
    let e = cx.op(Op::Expand, &[u, reps])?;
    let mut merged = pd.clone();
    merged[axis] *= block;
    let s = cx.const_i64s(merged.clone());
    let r = cx.op(Op::Reshape { allowzero: false }, &[e, s])?;
    if merged[axis] < xd[axis]
        || pd
            .iter()
            .zip(&xd)
            .enumerate()
            .any(|(i, (p, x))| i != axis && p != x)
    {
        return Err(cx.bad(format!(
            "a blocked scale of shape {pd:?} does not cover x of shape {xd:?} with blocks of {block}"
        )));
    }
    if merged[axis] == xd[axis] {
        return Ok(r);
    }
    cx.op(
        Op::Slice {
            starts: vec![0],
            ends: vec![xd[axis]],
            axes: vec![axis as i64],
            steps: vec![1],
        },
        &[r],
    )
}

/// The integer range of a quantized integer dtype.
fn int_range(dtype: DType) -> Option<(f64, f64)> {
    Some(match dtype {
        DType::U8 => (0.0, 255.0),
        DType::I8 => (-128.0, 127.0),
        DType::U16 => (0.0, 65535.0),
        DType::I16 => (-32768.0, 32767.0),
        DType::U4 => (0.0, 15.0),
        DType::I4 => (-8.0, 7.0),
        DType::U2 => (0.0, 3.0),
        DType::I2 => (-2.0, 1.0),
        _ => return None,
    })
}

/// `clip(v, lo, hi)` cast to `to` (`v` integral f32).
fn clip_cast(cx: &mut NodeCx, v: ValueId, (lo, hi): (f64, f64), to: DType) -> NodeResult<ValueId> {
    let l = cx.const_scalar(DType::F32, lo);
    let h = cx.const_scalar(DType::F32, hi);
    let v = cx.bin(BinaryOp::Max, v, l)?;
    let v = cx.bin(BinaryOp::Min, v, h)?;
    cx.op(Op::Cast { to }, &[v])
}

fn round_even(cx: &mut NodeCx, v: ValueId) -> NodeResult<ValueId> {
    cx.un(UnaryOp::Math(MathFn::Round), v)
}

/// The dtype an `output_dtype` attribute names (0 or absent: none).
fn output_dtype(cx: &NodeCx) -> NodeResult<Option<DType>> {
    match cx.int_or("output_dtype", 0)? {
        0 => Ok(None),
        code => i32::try_from(code)
            .ok()
            .and_then(dtype_of)
            .map(Some)
            .ok_or_else(|| cx.unsupported(unsupported_dtype(code as i32))),
    }
}

/// `QuantizeLinear(x, y_scale, y_zero_point?)`.
pub fn quantize_linear(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, scale) = (cx.input(0)?, cx.input(1)?);
    let zp = cx.opt_input(2)?;
    let axis = cx.int_or("axis", 1)?;
    let block = cx.int_or("block_size", 0)?;
    if let Some(p) = cx.attr_int("precision")?
        && i32::try_from(p).ok().and_then(dtype_of) != Some(DType::F32)
    {
        return Err(cx.unsupported(format!("precision {p} (quantization runs in f32)")));
    }
    // `saturate` matters for float8 targets only (`cast_to` reads it there)
    cx.attrs.ignore("saturate");
    let declared = output_dtype(cx)?;
    let to = match (zp.map(|z| cx.ty(z).dtype), declared) {
        (Some(z), Some(d)) if z != d => {
            return Err(cx.bad(format!(
                "output_dtype {d} differs from the zero point's {z}"
            )));
        }
        (Some(z), _) => z,
        (None, Some(d)) => d,
        (None, None) => DType::U8,
    };
    let xf = f32_of(cx, x)?;
    let s = f32_of(cx, scale)?;
    let s = along_axis(cx, s, x, axis, block)?;
    let q = cx.bin(BinaryOp::Div, xf, s)?;
    let zpf = match zp {
        Some(z) => {
            let z = f32_of(cx, z)?;
            Some(along_axis(cx, z, x, axis, block)?)
        }
        None => None,
    };
    let y = if let Some(range) = int_range(to) {
        let r = round_even(cx, q)?;
        let r = match zpf {
            Some(z) => cx.bin(BinaryOp::Add, r, z)?,
            None => r,
        };
        clip_cast(cx, r, range, to)?
    } else {
        match to {
            DType::F8E4M3Fn | DType::F8E4M3Fnuz | DType::F8E5M2 | DType::F8E5M2Fnuz => {
                cast_to(cx, q, to)?
            }
            DType::F4E2M1 => {
                let q = match zpf {
                    Some(z) => cx.bin(BinaryOp::Add, q, z)?,
                    None => q,
                };
                cx.op(Op::Cast { to }, &[q])?
            }
            other => return Err(cx.unsupported(format!("quantizing to {other}"))),
        }
    };
    Ok(vec![y])
}

/// `DequantizeLinear(x, x_scale, x_zero_point?)`.
pub fn dequantize_linear(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, scale) = (cx.input(0)?, cx.input(1)?);
    let zp = cx.opt_input(2)?;
    let axis = cx.int_or("axis", 1)?;
    let block = cx.int_or("block_size", 0)?;
    let to = output_dtype(cx)?.unwrap_or(cx.ty(scale).dtype);
    let x_dtype = cx.ty(x).dtype;
    let mut dx = f32_of(cx, x)?;
    // float8 and float4 values carry no zero point (the reference ignores it)
    if let Some(z) = zp
        && !x_dtype.is_float()
    {
        let z = f32_of(cx, z)?;
        let z = along_axis(cx, z, x, axis, block)?;
        dx = cx.bin(BinaryOp::Sub, dx, z)?;
    }
    let s = f32_of(cx, scale)?;
    let s = along_axis(cx, s, x, axis, block)?;
    let y = cx.bin(BinaryOp::Mul, dx, s)?;
    if to == DType::F32 {
        return Ok(vec![y]);
    }
    Ok(vec![cx.op(Op::Cast { to }, &[y])?])
}

/// `DynamicQuantizeLinear(x)` → `y` (u8), `y_scale`, `y_zero_point`: the
/// range of `x` and 0 mapped onto 0..=255.
pub fn dynamic_quantize_linear(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let x_dtype = cx.ty(x).dtype;
    let xf = f32_of(cx, x)?;
    let reduce = |cx: &mut NodeCx, op| {
        cx.op(
            Op::Reduce {
                op,
                axes: vec![],
                keepdims: false,
            },
            &[xf],
        )
    };
    let (hi, lo) = (reduce(cx, ReduceOp::Max)?, reduce(cx, ReduceOp::Min)?);
    let zero = cx.const_scalar(DType::F32, 0.0);
    let maxx = cx.bin(BinaryOp::Max, hi, zero)?;
    let minx = cx.bin(BinaryOp::Min, lo, zero)?;
    let span = cx.bin(BinaryOp::Sub, maxx, minx)?;
    let same = cx.bin(BinaryOp::Eq, maxx, minx)?;
    let one = cx.const_scalar(DType::F32, 1.0);
    let span = cx.op(Op::Where, &[same, one, span])?;
    let qspan = cx.const_scalar(DType::F32, 255.0);
    let scale = cx.bin(BinaryOp::Div, span, qspan)?;
    let shift = cx.bin(BinaryOp::Div, minx, scale)?;
    let initial = cx.bin(BinaryOp::Sub, zero, shift)?;
    let l = cx.const_scalar(DType::F32, 0.0);
    let h = cx.const_scalar(DType::F32, 255.0);
    let zp = cx.bin(BinaryOp::Min, initial, h)?;
    let zp = cx.bin(BinaryOp::Max, zp, l)?;
    let zp = round_even(cx, zp)?;
    let q = cx.bin(BinaryOp::Div, xf, scale)?;
    let q = round_even(cx, q)?;
    let q = cx.bin(BinaryOp::Add, q, zp)?;
    let y = clip_cast(cx, q, (0.0, 255.0), DType::U8)?;
    let scale = if x_dtype == DType::F32 {
        scale
    } else {
        cx.op(Op::Cast { to: x_dtype }, &[scale])?
    };
    let zp = cx.op(Op::Cast { to: DType::U8 }, &[zp])?;
    Ok(vec![y, scale, zp])
}

/// `(a - a_zp) @ (b - b_zp)` of 8-bit integers, exactly, as i64: the products
/// run on the f32 matmul over chunks of at most 256 along the shared dim (a
/// chunk's sum of products of magnitude below 2^16 stays below 2^24, exact in
/// f32), the chunks summed in i64. `a_zp` is a scalar or one per row of `a`,
/// `b_zp` a scalar or one per column of `b`.
fn exact_int_matmul(
    cx: &mut NodeCx,
    a: ValueId,
    b: ValueId,
    a_zp: Option<ValueId>,
    b_zp: Option<ValueId>,
) -> NodeResult<ValueId> {
    for v in [Some(a), Some(b), a_zp, b_zp].into_iter().flatten() {
        let dtype = cx.ty(v).dtype;
        if !matches!(dtype, DType::I8 | DType::U8) {
            return Err(cx.bad(format!("integer matmul of {dtype}, expected int8 or uint8")));
        }
    }
    let centered = |cx: &mut NodeCx, v: ValueId, zp: Option<ValueId>, row: bool| {
        let f = f32_of(cx, v)?;
        let Some(z) = zp else {
            return Ok(f);
        };
        let z = f32_of(cx, z)?;
        // one zero point per row of `a` lines up along its last-but-one dim
        let z = if row && cx.rank(z) == 1 {
            let s = cx.const_i64s(vec![-1, 1]);
            cx.op(Op::Reshape { allowzero: false }, &[z, s])?
        } else {
            z
        };
        cx.bin(BinaryOp::Sub, f, z)
    };
    let (af, bf) = (centered(cx, a, a_zp, true)?, centered(cx, b, b_zp, false)?);
    let rank_a = cx.rank(af);
    if rank_a == 0 || cx.rank(bf) < 2 {
        return Err(cx.bad("integer matmul needs a of rank >= 1 and b of rank >= 2"));
    }
    let k = cx.ty(af).shape.dims()[rank_a - 1]
        .as_known()
        .ok_or_else(|| cx.unsupported("integer matmul over a symbolic shared dim"))?;
    const CHUNK: i64 = 256;
    let mut sum = None;
    for start in (0..k.max(1)).step_by(CHUNK as usize) {
        let end = (start + CHUNK).min(k);
        let (ac, bc) = if k <= CHUNK {
            (af, bf)
        } else {
            let slice = |cx: &mut NodeCx, v: ValueId, axis: i64| {
                cx.op(
                    Op::Slice {
                        starts: vec![start],
                        ends: vec![end],
                        axes: vec![axis],
                        steps: vec![1],
                    },
                    &[v],
                )
            };
            (slice(cx, af, -1)?, slice(cx, bf, -2)?)
        };
        let p = cx.op(Op::MatMul, &[ac, bc])?;
        let p = cx.op(Op::Cast { to: DType::I64 }, &[p])?;
        sum = Some(match sum {
            Some(s) => cx.bin(BinaryOp::Add, s, p)?,
            None => p,
        });
    }
    sum.ok_or_else(|| cx.bad("an empty integer matmul"))
}

/// `MatMulInteger(A, B, a_zero_point?, b_zero_point?)` → i32, exact.
pub fn matmul_integer(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let (a_zp, b_zp) = (cx.opt_input(2)?, cx.opt_input(3)?);
    let c = exact_int_matmul(cx, a, b, a_zp, b_zp)?;
    Ok(vec![cx.op(Op::Cast { to: DType::I32 }, &[c])?])
}

/// `⌊v⌉` of f64 values, ties to even (no f64 rounding kernel: truncation,
/// corrected below a negative value, then up past the half or at an odd half).
fn round_even_f64(cx: &mut NodeCx, v: ValueId) -> NodeResult<ValueId> {
    let t = cx.op(Op::Cast { to: DType::I64 }, &[v])?;
    let tf = cx.op(Op::Cast { to: DType::F64 }, &[t])?;
    let one = cx.const_scalar(DType::F64, 1.0);
    let above = cx.bin(BinaryOp::Gt, tf, v)?;
    let less = cx.bin(BinaryOp::Sub, tf, one)?;
    let fl = cx.op(Op::Where, &[above, less, tf])?;
    let frac = cx.bin(BinaryOp::Sub, v, fl)?;
    let half = cx.const_scalar(DType::F64, 0.5);
    let over = cx.bin(BinaryOp::Gt, frac, half)?;
    let tie = cx.bin(BinaryOp::Eq, frac, half)?;
    let fi = cx.op(Op::Cast { to: DType::I64 }, &[fl])?;
    let two = cx.const_scalar(DType::I64, 2.0);
    let halved = cx.bin(BinaryOp::Div, fi, two)?;
    let even = cx.bin(BinaryOp::Mul, halved, two)?;
    let odd = cx.bin(BinaryOp::Eq, fi, even)?;
    let odd = cx.un(UnaryOp::Not, odd)?;
    let odd_tie = cx.bin(BinaryOp::And, tie, odd)?;
    let up = cx.bin(BinaryOp::Or, over, odd_tie)?;
    let next = cx.bin(BinaryOp::Add, fl, one)?;
    cx.op(Op::Where, &[up, next, fl])
}

/// `QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)`: the
/// exact integer product times `a_scale · b_scale / y_scale` (computed in the
/// scales' dtype, rounding each step as the reference does), plus `y_zp`,
/// rounded to even in f64 and clipped to `y_zp`'s type. Scales are per tensor.
pub fn qlinear_matmul(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (a, a_scale, a_zp) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let (b, b_scale, b_zp) = (cx.input(3)?, cx.input(4)?, cx.input(5)?);
    let (y_scale, y_zp) = (cx.input(6)?, cx.input(7)?);
    let to = cx.ty(y_zp).dtype;
    let range = int_range(to).ok_or_else(|| cx.bad(format!("y_zero_point of {to}")))?;
    let c = exact_int_matmul(cx, a, b, Some(a_zp), Some(b_zp))?;
    // a_scale · b_scale / y_scale in the scales' dtype: f32 arithmetic holds
    // the product of two f16 or bf16 values exactly; each step rounds back
    let scale_dtype = cx.ty(a_scale).dtype;
    let narrow = |cx: &mut NodeCx, v: ValueId| -> NodeResult<ValueId> {
        if scale_dtype == DType::F32 {
            return Ok(v);
        }
        let n = cx.op(Op::Cast { to: scale_dtype }, &[v])?;
        f32_of(cx, n)
    };
    let (sa, sb, sy) = (
        f32_of(cx, a_scale)?,
        f32_of(cx, b_scale)?,
        f32_of(cx, y_scale)?,
    );
    let ab = cx.bin(BinaryOp::Mul, sa, sb)?;
    let ab = narrow(cx, ab)?;
    let m = cx.bin(BinaryOp::Div, ab, sy)?;
    let m = narrow(cx, m)?;
    let m = cx.op(Op::Cast { to: DType::F64 }, &[m])?;
    let cf = cx.op(Op::Cast { to: DType::F64 }, &[c])?;
    let d = cx.bin(BinaryOp::Mul, cf, m)?;
    let zp = cx.op(Op::Cast { to: DType::F64 }, &[y_zp])?;
    let d = cx.bin(BinaryOp::Add, d, zp)?;
    let r = round_even_f64(cx, d)?;
    let (lo, hi) = (
        cx.const_scalar(DType::F64, range.0),
        cx.const_scalar(DType::F64, range.1),
    );
    let r = cx.bin(BinaryOp::Max, r, lo)?;
    let r = cx.bin(BinaryOp::Min, r, hi)?;
    Ok(vec![cx.op(Op::Cast { to }, &[r])?])
}
