//! Reductions over axes (`reduce_*`, and `dyn_reduce_*` whose axes are an
//! input read at run time) and `global_avg_pool`.
//!
//! f32 sums and means accumulate in f64 partial sums (`shapejit_kernels::reduce::sum_f32`),
//! products in f64; integer ones in i64 with
//! wrapping, cast back (so i32 wraps as i32 arithmetic would). Empty
//! reductions give the identity: sum 0, prod 1, max -inf / MIN, min +inf / MAX,
//! mean NaN (0/0) for f32 and 0 for integers.
//!
//! **Invariant:** `reduce_max`/`reduce_min` propagate NaN.

use super::util::{
    Ints, arity, expect_dtype, kernel_err, norm_axis, out_elems, out_view, read_ints, shape_err,
    view_of, with_dtype,
};
use super::{OpError, OutType};
use crate::tensor::{Dims, TensorMut, TensorRef};
use shapejit_ir::{DType, Element, Op, ReduceOp};
use shapejit_kernels::reduce::{reduce as kreduce, sum_f32};
use smallvec::SmallVec;

type Flags = SmallVec<[bool; 6]>;

/// Which dims are reduced (`axes` empty: all).
fn reduced_flags(op: &Op, axes: &[i64], rank: usize) -> Result<Flags, OpError> {
    let mut flags: Flags = SmallVec::from_elem(axes.is_empty(), rank);
    for &a in axes {
        let a = norm_axis(op, a, rank)?;
        if std::mem::replace(&mut flags[a], true) {
            return Err(shape_err(
                op,
                format!("axis {a} is listed twice in {axes:?}"),
            ));
        }
    }
    Ok(flags)
}

pub(crate) fn reduce_type(
    op: &Op,
    axes: &[i64],
    keepdims: bool,
    inputs: &[TensorRef],
) -> Result<OutType, OpError> {
    arity(op, inputs, 1, 1)?;
    let dtype = expect_dtype(op, inputs, 0, &[DType::F32, DType::I32, DType::I64])?;
    let shape = inputs[0].shape();
    let flags = reduced_flags(op, axes, shape.len())?;
    let out: Dims = shape
        .iter()
        .zip(&flags)
        .filter_map(|(&d, &red)| match (red, keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    Ok(OutType { dtype, shape: out })
}

/// The axes of a `dyn_reduce_*` (input 1); `None`: no reduction (empty axes
/// with `noop_with_empty_axes`).
fn dyn_axes(op: &Op, noop: bool, inputs: &[TensorRef]) -> Result<Option<Ints>, OpError> {
    arity(op, inputs, 2, 2)?;
    let axes = read_ints(op, inputs, 1)?;
    Ok((!(axes.is_empty() && noop)).then_some(axes))
}

pub(crate) fn dyn_reduce_type(
    op: &Op,
    keepdims: bool,
    noop: bool,
    inputs: &[TensorRef],
) -> Result<OutType, OpError> {
    match dyn_axes(op, noop, inputs)? {
        Some(axes) => reduce_type(op, &axes, keepdims, &inputs[..1]),
        None => Ok(OutType {
            dtype: expect_dtype(op, inputs, 0, &[DType::F32, DType::I32, DType::I64])?,
            shape: inputs[0].layout.shape.clone(),
        }),
    }
}

pub(crate) fn dyn_reduce(
    op: &Op,
    r: ReduceOp,
    noop: bool,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match dyn_axes(op, noop, inputs)? {
        Some(axes) => reduce(op, r, &axes, &inputs[..1], out),
        None => with_dtype!(inputs[0].dtype, T => {
            let src = view_of::<T>(op, inputs, 0)?;
            shapejit_kernels::elementwise::copy(&mut out_view::<T>(op, out)?, &src)
                .map_err(kernel_err(op))
        }),
    }
}

/// The running maximum `a` with the next element `b`: NaN propagates, and a tie of ±0
/// gives +0, so the result does not depend on the order (the JIT folds in lanes).
fn fmax(a: f32, b: f32) -> f32 {
    if b > a || b.is_nan() || (b == a && b.is_sign_positive()) {
        b
    } else {
        a
    }
}

fn fmin(a: f32, b: f32) -> f32 {
    if b < a || b.is_nan() { b } else { a }
}

fn reduce_f32(
    op: &Op,
    r: ReduceOp,
    inputs: &[TensorRef],
    flags: &[bool],
    out: &mut [f32],
) -> Result<(), OpError> {
    let x = view_of::<f32>(op, inputs, 0)?;
    let res = match r {
        ReduceOp::Sum => sum_f32(out, &x, flags, false),
        ReduceOp::Mean => sum_f32(out, &x, flags, true),
        ReduceOp::Prod => kreduce(out, &x, flags, 1f64, |a, v| a * v as f64, |a, _| a as f32),
        ReduceOp::Max => kreduce(out, &x, flags, f32::NEG_INFINITY, fmax, |a, _| a),
        ReduceOp::Min => kreduce(out, &x, flags, f32::INFINITY, fmin, |a, _| a),
    };
    res.map_err(kernel_err(op))
}

/// Integer element types (via i64 accumulation).
trait IntElem: Element + Ord + Into<i64> {
    const MIN: Self;
    const MAX: Self;
    fn from_i64_wrapping(v: i64) -> Self;
}

impl IntElem for i32 {
    const MIN: i32 = i32::MIN;
    const MAX: i32 = i32::MAX;
    fn from_i64_wrapping(v: i64) -> i32 {
        v as i32
    }
}

impl IntElem for i64 {
    const MIN: i64 = i64::MIN;
    const MAX: i64 = i64::MAX;
    fn from_i64_wrapping(v: i64) -> i64 {
        v
    }
}

fn reduce_int<T: IntElem>(
    op: &Op,
    r: ReduceOp,
    inputs: &[TensorRef],
    flags: &[bool],
    out: &mut [T],
) -> Result<(), OpError> {
    let x = view_of::<T>(op, inputs, 0)?;
    let wrap = |a: i64, _| T::from_i64_wrapping(a);
    let res = match r {
        ReduceOp::Sum => kreduce(out, &x, flags, 0i64, |a, v| a.wrapping_add(v.into()), wrap),
        ReduceOp::Mean => kreduce(
            out,
            &x,
            flags,
            0i64,
            |a, v| a.wrapping_add(v.into()),
            |a, n| T::from_i64_wrapping(if n == 0 { 0 } else { a.wrapping_div(n as i64) }),
        ),
        ReduceOp::Prod => kreduce(out, &x, flags, 1i64, |a, v| a.wrapping_mul(v.into()), wrap),
        ReduceOp::Max => kreduce(out, &x, flags, T::MIN, |a, v| a.max(v), |a, _| a),
        ReduceOp::Min => kreduce(out, &x, flags, T::MAX, |a, v| a.min(v), |a, _| a),
    };
    res.map_err(kernel_err(op))
}

pub(crate) fn reduce(
    op: &Op,
    r: ReduceOp,
    axes: &[i64],
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let flags = reduced_flags(op, axes, inputs[0].shape().len())?;
    match inputs[0].dtype {
        DType::F32 => reduce_f32(op, r, inputs, &flags, out_elems(op, out)?),
        DType::I32 => reduce_int::<i32>(op, r, inputs, &flags, out_elems(op, out)?),
        DType::I64 => reduce_int::<i64>(op, r, inputs, &flags, out_elems(op, out)?),
        other => Err(OpError::DType {
            op: op.name(),
            input: 0,
            expected: "f32, i32 or i64".into(),
            actual: other,
        }),
    }
}

pub(crate) fn global_avg_pool_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 1, 1)?;
    expect_dtype(op, inputs, 0, &[DType::F32])?;
    let s = inputs[0].shape();
    if s.len() < 3 {
        return Err(shape_err(
            op,
            format!("input must be [N, C, spatial...], got shape {s:?}"),
        ));
    }
    let shape = s
        .iter()
        .enumerate()
        .map(|(i, &d)| if i < 2 { d } else { 1 })
        .collect();
    Ok(OutType {
        dtype: DType::F32,
        shape,
    })
}

pub(crate) fn global_avg_pool(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let flags: Flags = (0..inputs[0].shape().len()).map(|i| i >= 2).collect();
    reduce_f32(op, ReduceOp::Mean, inputs, &flags, out_elems(op, out)?)
}
