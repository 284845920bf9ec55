//! Normalizations composed from reductions, pools and elementwise ops: LRN,
//! LpNormalization, InstanceNormalization, GroupNormalization, MeanVarianceNormalization and
//! RMSNormalization.
//!
//! LRN's sum of squares over a window of channels is an average pool with
//! padding counted, over the channels seen as the height of a one-channel
//! image (`[N, C, ...]` → `[N, 1, C, rest]`), times the window size.
//!
//! **Invariant:** each computes its ONNX op's formula in f32 (`stash_type`
//! names f32 accumulation, which is what these compositions do).

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{BinaryOp, Op, ReduceOp, UnaryOp, ValueId, Window2d};

fn mean(cx: &mut NodeCx, x: ValueId, axes: &[i64]) -> NodeResult<ValueId> {
    cx.op(
        Op::Reduce {
            op: ReduceOp::Mean,
            axes: axes.to_vec(),
            keepdims: true,
        },
        &[x],
    )
}

/// `LRN(size, alpha = 1e-4, beta = 0.75, bias = 1)`:
/// `x / (bias + alpha/size · Σ x²)^beta`, the sum over channels
/// `c − ⌊(size−1)/2⌋ ..= c + ⌈(size−1)/2⌉` (those that exist).
pub fn lrn(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let size = cx
        .attr_int("size")?
        .and_then(|s| usize::try_from(s).ok())
        .filter(|&s| s > 0)
        .ok_or_else(|| cx.bad("attribute 'size' must be a positive integer"))?;
    let alpha = cx.float_or("alpha", 1e-4)?;
    let beta = cx.float_or("beta", 0.75)?;
    let bias = cx.float_or("bias", 1.0)?;
    if cx.rank(x) < 2 {
        return Err(cx.bad(format!("input rank {} < 2", cx.rank(x))));
    }
    let sq = cx.bin(BinaryOp::Mul, x, x)?;
    let lifted = cx.op(Op::Unsqueeze { axes: vec![1] }, &[sq])?;
    let target = cx.const_i64s(vec![0, 0, 0, -1]);
    let image = cx.op(Op::Reshape { allowzero: false }, &[lifted, target])?;
    let before = (size - 1) / 2;
    let window = Window2d {
        kernel: [size, 1],
        strides: [1, 1],
        pads: [before, 0, size - 1 - before, 0],
        dilations: [1, 1],
    };
    let avg = cx.op(
        Op::AvgPool2d {
            window,
            ceil_mode: false,
            count_include_pad: true,
        },
        &[image],
    )?;
    let shape = cx.shape_of(x)?;
    let avg = cx.op(Op::Reshape { allowzero: false }, &[avg, shape])?;
    let a = cx.scalar_like(x, alpha as f64);
    let scaled = cx.bin(BinaryOp::Mul, avg, a)?;
    let b = cx.scalar_like(x, bias as f64);
    let base = cx.bin(BinaryOp::Add, scaled, b)?;
    let e = cx.scalar_like(x, beta as f64);
    let den = cx.bin(BinaryOp::Pow, base, e)?;
    Ok(vec![cx.bin(BinaryOp::Div, x, den)?])
}

/// `LpNormalization(axis = -1, p = 2)`: `x / ‖x‖_p` along `axis`, 0 where
/// the norm is 0 (as onnxruntime and the onnx reference give).
pub fn lp_normalization(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let axis = cx.int_or("axis", -1)?;
    let p = cx.int_or("p", 2)?;
    let reduce = Op::Reduce {
        op: ReduceOp::Sum,
        axes: vec![axis],
        keepdims: true,
    };
    let norm = match p {
        1 => {
            let a = cx.un(UnaryOp::Abs, x)?;
            cx.op(reduce, &[a])?
        }
        2 => {
            let sq = cx.bin(BinaryOp::Mul, x, x)?;
            let s = cx.op(reduce, &[sq])?;
            cx.un(UnaryOp::Sqrt, s)?
        }
        other => return Err(cx.bad(format!("p = {other}, expected 1 or 2"))),
    };
    let q = cx.bin(BinaryOp::Div, x, norm)?;
    let zero = cx.scalar_like(x, 0.0);
    let empty = cx.bin(BinaryOp::Eq, norm, zero)?;
    Ok(vec![cx.op(Op::Where, &[empty, zero, q])?])
}

/// `(x − mean) / sqrt(var + epsilon)` over `axes` (biased variance).
fn standardize(cx: &mut NodeCx, x: ValueId, axes: &[i64], epsilon: f32) -> NodeResult<ValueId> {
    let m = mean(cx, x, axes)?;
    let d = cx.bin(BinaryOp::Sub, x, m)?;
    let sq = cx.bin(BinaryOp::Mul, d, d)?;
    let var = mean(cx, sq, axes)?;
    let eps = cx.scalar_like(x, epsilon as f64);
    let ve = cx.bin(BinaryOp::Add, var, eps)?;
    let std = cx.un(UnaryOp::Sqrt, ve)?;
    cx.bin(BinaryOp::Div, d, std)
}

/// `InstanceNormalization(epsilon = 1e-5)`: standardizes each `(n, c)` over
/// the spatial axes, then scales and shifts per channel.
pub fn instance_norm(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, scale, bias) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let epsilon = cx.float_or("epsilon", 1e-5)?;
    let rank = cx.rank(x);
    if rank < 3 {
        return Err(cx.bad(format!("input rank {rank} < 3")));
    }
    let axes: Vec<i64> = (2..rank as i64).collect();
    let normed = standardize(cx, x, &axes, epsilon)?;
    let (s, b) = per_channel(cx, scale, bias, rank)?;
    let scaled = cx.bin(BinaryOp::Mul, normed, s)?;
    Ok(vec![cx.bin(BinaryOp::Add, scaled, b)?])
}

/// `scale` and `bias` of shape `[C]` made to broadcast over `[N, C, ...]` of `rank`.
fn per_channel(
    cx: &mut NodeCx,
    scale: ValueId,
    bias: ValueId,
    rank: usize,
) -> NodeResult<(ValueId, ValueId)> {
    let axes: Vec<i64> = (1..rank as i64 - 1).collect();
    if axes.is_empty() {
        return Ok((scale, bias));
    }
    let s = cx.op(Op::Unsqueeze { axes: axes.clone() }, &[scale])?;
    let b = cx.op(Op::Unsqueeze { axes }, &[bias])?;
    Ok((s, b))
}

/// `GroupNormalization(num_groups, epsilon = 1e-5)`: standardizes each of
/// `num_groups` channel groups over its channels and spatial dims, then
/// scales and shifts per channel (version 21) or per group (version 18).
pub fn group_norm(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, scale, bias) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let epsilon = cx.float_or("epsilon", 1e-5)?;
    cx.attrs.ignore("stash_type");
    let groups = cx
        .attr_int("num_groups")?
        .filter(|&g| g > 0)
        .ok_or_else(|| cx.bad("attribute 'num_groups' must be a positive integer"))?;
    let rank = cx.rank(x);
    if rank < 2 {
        return Err(cx.bad(format!("input rank {rank} < 2")));
    }
    let target = cx.const_i64s(vec![0, groups, -1]);
    let grouped = cx.op(Op::Reshape { allowzero: false }, &[x, target])?;
    let normed = standardize(cx, grouped, &[2], epsilon)?;
    let shape = cx.shape_of(x)?;
    if cx.version < 21 {
        let s = cx.op(Op::Unsqueeze { axes: vec![1] }, &[scale])?;
        let b = cx.op(Op::Unsqueeze { axes: vec![1] }, &[bias])?;
        let scaled = cx.bin(BinaryOp::Mul, normed, s)?;
        let y = cx.bin(BinaryOp::Add, scaled, b)?;
        return Ok(vec![cx.op(Op::Reshape { allowzero: false }, &[y, shape])?]);
    }
    let back = cx.op(Op::Reshape { allowzero: false }, &[normed, shape])?;
    let (s, b) = per_channel(cx, scale, bias, rank)?;
    let scaled = cx.bin(BinaryOp::Mul, back, s)?;
    Ok(vec![cx.bin(BinaryOp::Add, scaled, b)?])
}

/// `MeanVarianceNormalization(axes = [0, 2, 3])`, as its ONNX function body:
/// `(x − E[x]) / (sqrt(E[x²] − E[x]²) + 1e-9)`.
pub fn mean_variance_norm(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let axes = cx.attr_ints("axes")?.unwrap_or(vec![0, 2, 3]);
    let ex = mean(cx, x, &axes)?;
    let sq = cx.bin(BinaryOp::Mul, x, x)?;
    let ex2 = mean(cx, sq, &axes)?;
    let ex_sq = cx.bin(BinaryOp::Mul, ex, ex)?;
    let var = cx.bin(BinaryOp::Sub, ex2, ex_sq)?;
    let std = cx.un(UnaryOp::Sqrt, var)?;
    let eps = cx.scalar_like(x, 1e-9);
    let den = cx.bin(BinaryOp::Add, std, eps)?;
    let d = cx.bin(BinaryOp::Sub, x, ex)?;
    Ok(vec![cx.bin(BinaryOp::Div, d, den)?])
}

/// `RMSNormalization(axis = -1, epsilon = 1e-5)`:
/// `x / sqrt(mean(x²) + epsilon) · scale` over the dims from `axis` on.
pub fn rms_norm(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, scale) = (cx.input(0)?, cx.input(1)?);
    let epsilon = cx.float_or("epsilon", 1e-5)?;
    cx.attrs.ignore("stash_type");
    let rank = cx.rank(x);
    let axis_attr = cx.int_or("axis", -1)?;
    let axis = cx.axis(axis_attr, rank, "axis")?;
    let axes: Vec<i64> = (axis as i64..rank as i64).collect();
    let sq = cx.bin(BinaryOp::Mul, x, x)?;
    let ms = mean(cx, sq, &axes)?;
    let eps = cx.scalar_like(x, epsilon as f64);
    let mse = cx.bin(BinaryOp::Add, ms, eps)?;
    let rms = cx.un(UnaryOp::Sqrt, mse)?;
    let normed = cx.bin(BinaryOp::Div, x, rms)?;
    Ok(vec![cx.bin(BinaryOp::Mul, normed, scale)?])
}
