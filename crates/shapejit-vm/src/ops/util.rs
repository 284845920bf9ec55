//! Helpers shared by the op implementations: typed kernel views of runtime
//! tensors, dtype dispatch, axis normalization, broadcasting, argument checks.
//!
//! **Invariant:** every check returns an [`OpError`] naming the op and the
//! expected vs actual value; nothing here panics on user input.

use super::OpError;
use crate::tensor::{Dims, TensorMut, TensorRef};
use shapejit_ir::{DType, Element, Op};
use shapejit_kernels::{KernelError, StridedShape, View, ViewMut};
use smallvec::SmallVec;

pub(crate) use shapejit_ir::with_dtype;

/// A kernel error for `op`; these mean the ops layer passed bad arguments (a bug).
pub(crate) fn kernel_err(op: &Op) -> impl Fn(KernelError) -> OpError + '_ {
    move |source| OpError::Kernel {
        op: op.name(),
        source,
    }
}

/// A shape error for `op`.
pub(crate) fn shape_err(op: &Op, message: String) -> OpError {
    OpError::Shape {
        op: op.name(),
        message,
    }
}

/// A bad-value error for `op` (contents of an input or an attribute).
pub(crate) fn value_err(op: &Op, message: String) -> OpError {
    OpError::Value {
        op: op.name(),
        message,
    }
}

/// Checks the input count is within `min..=max`.
pub(crate) fn arity(op: &Op, inputs: &[TensorRef], min: usize, max: usize) -> Result<(), OpError> {
    if inputs.len() < min || inputs.len() > max {
        let expected = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(OpError::Arity {
            op: op.name(),
            expected,
            actual: inputs.len(),
        });
    }
    Ok(())
}

/// Checks input `idx`'s dtype is one of `allowed`.
pub(crate) fn expect_dtype(
    op: &Op,
    inputs: &[TensorRef],
    idx: usize,
    allowed: &[DType],
) -> Result<DType, OpError> {
    let actual = inputs[idx].dtype;
    if allowed.contains(&actual) {
        Ok(actual)
    } else {
        let expected = allowed
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(" or ");
        Err(OpError::DType {
            op: op.name(),
            input: idx,
            expected,
            actual,
        })
    }
}

/// Checks inputs `a` and `b` have the same dtype.
pub(crate) fn same_dtype(
    op: &Op,
    inputs: &[TensorRef],
    a: usize,
    b: usize,
) -> Result<DType, OpError> {
    let (da, db) = (inputs[a].dtype, inputs[b].dtype);
    if da == db {
        Ok(da)
    } else {
        Err(OpError::DType {
            op: op.name(),
            input: b,
            expected: format!("{da} (as input {a})"),
            actual: db,
        })
    }
}

/// Checks input `idx` has rank `rank`.
pub(crate) fn expect_rank(
    op: &Op,
    inputs: &[TensorRef],
    idx: usize,
    rank: usize,
) -> Result<(), OpError> {
    let shape = inputs[idx].shape();
    if shape.len() == rank {
        Ok(())
    } else {
        Err(shape_err(
            op,
            format!("input {idx} must have rank {rank}, got shape {shape:?}"),
        ))
    }
}

/// Normalizes an axis of a rank-`rank` tensor (`-rank..rank`).
pub(crate) fn norm_axis(op: &Op, axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(shape_err(
            op,
            format!("axis {axis} is out of range for rank {rank}"),
        ));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// NumPy broadcast of several shapes.
pub fn broadcast_shapes(op: &Op, shapes: &[&[usize]]) -> Result<Dims, OpError> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out: Dims = SmallVec::from_elem(1, rank);
    for s in shapes {
        let lead = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[lead + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(shape_err(
                    op,
                    format!(
                        "shapes {shapes:?} do not broadcast (dim {} differs)",
                        lead + i
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Small-vector of i64 contents.
pub(crate) type Ints = SmallVec<[i64; 8]>;

/// Reads all elements of an i64/i32 input (a shape, repeats, indices...).
pub(crate) fn read_ints(op: &Op, inputs: &[TensorRef], idx: usize) -> Result<Ints, OpError> {
    let t = &inputs[idx];
    expect_dtype(op, inputs, idx, &[DType::I64, DType::I32])?;
    let n = t.layout.numel();
    let mut res = Ints::with_capacity(n);
    for i in 0..n {
        let v = match t.dtype {
            DType::I64 => t.get_flat::<i64>(i),
            _ => t.get_flat::<i32>(i).map(i64::from),
        };
        res.push(
            v.ok_or_else(|| value_err(op, format!("input {idx}: element {i} is unreadable")))?,
        );
    }
    Ok(res)
}

/// Reads a one-element input as `T` (scalars of `range`).
pub(crate) fn read_scalar<T: Element>(
    op: &Op,
    inputs: &[TensorRef],
    idx: usize,
) -> Result<T, OpError> {
    let t = &inputs[idx];
    if t.layout.numel() != 1 {
        return Err(shape_err(
            op,
            format!(
                "input {idx} must hold one element, got shape {:?}",
                t.shape()
            ),
        ));
    }
    t.get_flat::<T>(0).ok_or_else(|| OpError::DType {
        op: op.name(),
        input: idx,
        expected: T::DTYPE.name().to_string(),
        actual: t.dtype,
    })
}

/// Kernel geometry of an input.
pub(crate) fn geom_of(op: &Op, t: &TensorRef) -> Result<StridedShape, OpError> {
    StridedShape::new(&t.layout.shape, &t.layout.strides, t.layout.offset).map_err(kernel_err(op))
}

/// A typed kernel view of input `idx` (dtype checked).
pub(crate) fn view_of<'a, T: Element>(
    op: &Op,
    inputs: &[TensorRef<'a>],
    idx: usize,
) -> Result<View<'a, T>, OpError> {
    let t = &inputs[idx];
    let data = t.elems::<T>().ok_or_else(|| OpError::DType {
        op: op.name(),
        input: idx,
        expected: T::DTYPE.name().to_string(),
        actual: t.dtype,
    })?;
    View::new(data, geom_of(op, t)?).map_err(kernel_err(op))
}

/// A typed contiguous kernel view of an output.
pub(crate) fn out_view<'a, T: Element>(
    op: &Op,
    out: &'a mut TensorMut<'_>,
) -> Result<ViewMut<'a, T>, OpError> {
    let shape: &[usize] = out.shape;
    out_view_as(op, out, shape)
}

/// A typed contiguous kernel view of an output seen with another shape of the
/// same element count (e.g. with size-1 dims added).
pub(crate) fn out_view_as<'a, T: Element>(
    op: &Op,
    out: &'a mut TensorMut<'_>,
    shape: &[usize],
) -> Result<ViewMut<'a, T>, OpError> {
    let dtype = out.dtype;
    let data = out.elems_mut::<T>().ok_or_else(|| OpError::Output {
        op: op.name(),
        index: 0,
        message: format!(
            "buffer of dtype {dtype} is not a {} buffer or misaligned",
            T::DTYPE
        ),
    })?;
    ViewMut::contiguous(data, shape).map_err(kernel_err(op))
}

/// Scratch elements [`contiguous_f32`] needs for `v`: 0 when it is contiguous.
pub(crate) fn copy_len(v: &View<f32>) -> usize {
    if v.as_contiguous().is_some() {
        0
    } else {
        v.geom().numel()
    }
}

/// Output 0's buffer as `T` elements (an error, never a panic, when the buffer
/// has another dtype or alignment).
pub(crate) fn out_elems<'o, T: Element>(
    op: &Op,
    out: &'o mut TensorMut,
) -> Result<&'o mut [T], OpError> {
    out.elems_mut::<T>().ok_or_else(|| OpError::Output {
        op: op.name(),
        index: 0,
        message: format!("not a contiguous {} buffer", T::DTYPE),
    })
}

/// The view's elements in row-major order: in place when contiguous, else
/// copied into `buf` (scratch of at least `numel` elements when not contiguous).
pub(crate) fn contiguous_f32<'a>(
    op: &Op,
    v: &View<'a, f32>,
    buf: &'a mut [f32],
) -> Result<&'a [f32], OpError> {
    if let Some(s) = v.as_contiguous() {
        return Ok(s);
    }
    let mut dst = ViewMut::contiguous(buf, v.shape()).map_err(kernel_err(op))?;
    shapejit_kernels::elementwise::copy(&mut dst, v).map_err(kernel_err(op))?;
    Ok(buf)
}
