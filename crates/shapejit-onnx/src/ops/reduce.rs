//! Reductions: the Reduce* ops (axes as an attribute before version 13 for
//! ReduceSum and before 18 for the others, an optional input after, with
//! `noop_with_empty_axes`), the composed ReduceL1, ReduceL2, ReduceSumSquare,
//! ReduceLogSum and ReduceLogSumExp (max-shifted, as the onnx reference
//! computes it), and ArgMax, ArgMin and Hardmax.
//!
//! ArgMax/ArgMin compare each element with the reduced extreme and take the
//! smallest (largest, for `select_last_index`) index that matches, with NaN
//! matching NaN: the index NumPy's `argmax` gives. They need the size of the
//! reduced axis to be known (the index vector is a constant).
//!
//! Axes computed at run time map to `dyn_reduce_*`.
//!
//! **Invariant:** the reduced axes and `keepdims` are those of the ONNX node;
//! `noop_with_empty_axes` with no axes applies the op's elementwise parts only.

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{BinaryOp, DType, Op, ReduceOp, Tensor, UnaryOp, ValueId};

/// A node's reduced axes.
enum Axes {
    /// known at load (empty: every axis)
    Known(Vec<i64>),
    /// an i64 vector computed at run time (`dyn_reduce_*`)
    Dynamic(ValueId),
    /// no reduction: no axes and `noop_with_empty_axes`
    Noop,
}

/// A node's reduction: its axes, `keepdims` and `noop_with_empty_axes`.
/// `input_from` is the version axes became an input.
struct Args {
    axes: Axes,
    keepdims: bool,
    noop: bool,
}

fn reduce_args(cx: &NodeCx, input_from: i64) -> NodeResult<Args> {
    let keepdims = cx.int_or("keepdims", 1)? != 0;
    if cx.version < input_from {
        let axes = Axes::Known(cx.attr_ints("axes")?.unwrap_or_default());
        return Ok(Args {
            axes,
            keepdims,
            noop: false,
        });
    }
    let noop = cx.int_or("noop_with_empty_axes", 0)? != 0;
    let axes = match cx.opt_input(1)? {
        Some(v) => match cx.known_ints(v) {
            Some(axes) => axes,
            None => {
                return Ok(Args {
                    axes: Axes::Dynamic(v),
                    keepdims,
                    noop,
                });
            }
        },
        None => Vec::new(),
    };
    let axes = if axes.is_empty() && noop {
        Axes::Noop
    } else {
        Axes::Known(axes)
    };
    Ok(Args {
        axes,
        keepdims,
        noop,
    })
}

/// Emits the reduction `op` of `x` over `args`' axes, keeping the reduced
/// axes as 1 when `keepdims`.
fn reduce_over(
    cx: &mut NodeCx,
    op: ReduceOp,
    args: &Args,
    keepdims: bool,
    x: ValueId,
) -> NodeResult<ValueId> {
    match &args.axes {
        Axes::Known(axes) => cx.op(
            Op::Reduce {
                op,
                axes: axes.clone(),
                keepdims,
            },
            &[x],
        ),
        Axes::Dynamic(axes) => cx.op(
            Op::DynReduce {
                op,
                keepdims,
                noop_with_empty_axes: args.noop,
            },
            &[x, *axes],
        ),
        Axes::Noop => Ok(x),
    }
}

/// `Reduce*` mapped to one IR reduction.
pub fn reduce(cx: &mut NodeCx, op: ReduceOp, input_from: i64) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    Ok(vec![reduce_with(cx, op, input_from, x)?])
}

fn reduce_with(cx: &mut NodeCx, op: ReduceOp, input_from: i64, x: ValueId) -> NodeResult<ValueId> {
    let args = reduce_args(cx, input_from)?;
    reduce_over(cx, op, &args, args.keepdims, x)
}

/// The reductions composed from a sum.
#[derive(Clone, Copy)]
pub enum Composed {
    /// `sum |x|`
    L1,
    /// `sqrt(sum x²)`
    L2,
    /// `sum x²`
    SumSquare,
    /// `log(sum x)`
    LogSum,
}

/// `ReduceL1`, `ReduceL2`, `ReduceSumSquare`, `ReduceLogSum` (axes as an
/// input from version 18).
pub fn composed(cx: &mut NodeCx, kind: Composed) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let pre = match kind {
        Composed::L1 => cx.un(UnaryOp::Abs, x)?,
        Composed::L2 | Composed::SumSquare => cx.bin(BinaryOp::Mul, x, x)?,
        Composed::LogSum => x,
    };
    let sum = reduce_with(cx, ReduceOp::Sum, 18, pre)?;
    Ok(vec![match kind {
        Composed::L2 => cx.un(UnaryOp::Sqrt, sum)?,
        Composed::LogSum => cx.un(UnaryOp::Log, sum)?,
        Composed::L1 | Composed::SumSquare => sum,
    }])
}

/// `ReduceLogSumExp` = `log(sum exp(x − m)) + m`, `m` the max over the axes
/// (0 where it is infinite, so all-infinite rows give the unshifted result).
pub fn log_sum_exp(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let args = reduce_args(cx, 18)?;
    if let Axes::Noop = args.axes {
        let e = cx.un(UnaryOp::Exp, x)?;
        return Ok(vec![cx.un(UnaryOp::Log, e)?]);
    }
    let m = reduce_over(cx, ReduceOp::Max, &args, true, x)?;
    let abs = cx.un(UnaryOp::Abs, m)?;
    let inf = cx.scalar_like(x, f64::INFINITY);
    let infinite = cx.bin(BinaryOp::Eq, abs, inf)?;
    let zero = cx.scalar_like(x, 0.0);
    let shift = cx.op(Op::Where, &[infinite, zero, m])?;
    let d = cx.bin(BinaryOp::Sub, x, shift)?;
    let e = cx.un(UnaryOp::Exp, d)?;
    let s = reduce_over(cx, ReduceOp::Sum, &args, args.keepdims, e)?;
    let l = cx.un(UnaryOp::Log, s)?;
    // the shift without the kept axes: a max over axes of size 1
    let shift = if args.keepdims {
        shift
    } else {
        reduce_over(cx, ReduceOp::Max, &args, false, shift)?
    };
    Ok(vec![cx.bin(BinaryOp::Add, l, shift)?])
}

/// The indices `0..n` of `axis` as an i64 constant shaped to broadcast
/// along it (`[n, 1, ...]`), and `n`, which must be known and non-zero.
fn axis_index(cx: &mut NodeCx, x: ValueId, axis: usize) -> NodeResult<(ValueId, i64)> {
    let dim = cx.ty(x).shape.dims()[axis].clone();
    let n = dim
        .as_known()
        .ok_or_else(|| cx.unsupported(format!("the reduced axis has the symbolic size {dim}")))?;
    if n == 0 {
        return Err(cx.bad("the reduced axis is empty"));
    }
    let mut shape = vec![1usize; cx.rank(x) - axis];
    shape[0] = n as usize;
    let idx = Tensor::from_vec((0..n).collect::<Vec<i64>>(), &shape)
        .map_err(|e| cx.bad(e.to_string()))?;
    Ok((cx.constant(idx), n))
}

/// The index (i64, keepdims) of the first (or last) extreme along `axis`.
fn arg_extreme(
    cx: &mut NodeCx,
    x: ValueId,
    axis: usize,
    (idx, n): (ValueId, i64),
    max: bool,
    last: bool,
) -> NodeResult<ValueId> {
    let reduce = |op| Op::Reduce {
        op,
        axes: vec![axis as i64],
        keepdims: true,
    };
    let m = cx.op(
        reduce(if max { ReduceOp::Max } else { ReduceOp::Min }),
        &[x],
    )?;
    let mut hit = cx.bin(BinaryOp::Eq, x, m)?;
    if cx.ty(x).dtype == DType::F32 {
        let not_nan = cx.bin(BinaryOp::Eq, x, x)?;
        let nan = cx.un(UnaryOp::Not, not_nan)?;
        hit = cx.bin(BinaryOp::Or, hit, nan)?;
    }
    let miss = cx.const_scalar(DType::I64, if last { -1.0 } else { n as f64 });
    let masked = cx.op(Op::Where, &[hit, idx, miss])?;
    cx.op(
        reduce(if last { ReduceOp::Max } else { ReduceOp::Min }),
        &[masked],
    )
}

/// `ArgMax` / `ArgMin(axis = 0, keepdims = 1, select_last_index = 0)`.
pub fn arg(cx: &mut NodeCx, max: bool) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let rank = cx.rank(x);
    let axis_attr = cx.int_or("axis", 0)?;
    let axis = cx.axis(axis_attr, rank, "axis")?;
    let keepdims = cx.int_or("keepdims", 1)? != 0;
    let last = cx.int_or("select_last_index", 0)? != 0;
    let index = axis_index(cx, x, axis)?;
    let r = arg_extreme(cx, x, axis, index, max, last)?;
    if keepdims {
        return Ok(vec![r]);
    }
    Ok(vec![cx.op(
        Op::Squeeze {
            axes: vec![axis as i64],
        },
        &[r],
    )?])
}

/// `Hardmax`: 1 at the first maximum along `axis` (default -1 from version
/// 13), 0 elsewhere. Before 13 the input is seen as 2-D split at `axis`
/// (default 1).
pub fn hardmax(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let rank = cx.rank(x);
    let dtype = cx.ty(x).dtype;
    let one_hot = |cx: &mut NodeCx, v: ValueId, axis: usize| {
        let index = axis_index(cx, v, axis)?;
        let first = arg_extreme(cx, v, axis, index, true, false)?;
        let eq = cx.bin(BinaryOp::Eq, index.0, first)?;
        cx.op(Op::Cast { to: dtype }, &[eq])
    };
    if cx.version >= 13 {
        let axis_attr = cx.int_or("axis", -1)?;
        let axis = cx.axis(axis_attr, rank, "axis")?;
        return Ok(vec![one_hot(cx, x, axis)?]);
    }
    let axis_attr = cx.int_or("axis", 1)?;
    let axis = cx.axis(axis_attr, rank, "axis")?;
    if axis + 1 == rank {
        return Ok(vec![one_hot(cx, x, axis)?]);
    }
    let shape = cx.shape_of(x)?;
    let flat = cx.op(Op::Flatten { axis: axis as i64 }, &[x])?;
    let h = one_hot(cx, flat, 1)?;
    Ok(vec![cx.op(Op::Reshape { allowzero: false }, &[h, shape])?])
}
