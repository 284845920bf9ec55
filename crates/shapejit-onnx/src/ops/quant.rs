//! Linear quantization: QuantizeLinear, DequantizeLinear and
//! DynamicQuantizeLinear, composed from casts and f32 arithmetic as the onnx
//! reference computes them.
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
