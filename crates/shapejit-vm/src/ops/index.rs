//! Element-indexed ops: gather_elements, scatter_elements, gather_nd and
//! scatter_nd, on any dtype (the scatter reductions on f32, i32 and i64).
//!
//! Elements are read one by one through the input layouts
//! ([`TensorRef::get_flat`]): these are the reference implementations, simple
//! rather than fast. Indices are checked (negative ones wrap once); an index
//! out of range is an [`OpError::Value`] naming it.
//!
//! **Invariant:** no allocation: coordinates live in fixed arrays of
//! [`MAX_RANK`], larger ranks are an unsupported error.

use super::util::{
    arity, expect_dtype, norm_axis, out_elems, same_dtype, shape_err, value_err, with_dtype,
};
use super::{OpError, OutType};
use crate::tensor::{Dims, TensorMut, TensorRef};
use shapejit_ir::{DType, Element, Op, ScatterReduction};
use shapejit_kernels::MAX_RANK;

fn check_rank(op: &Op, shape: &[usize]) -> Result<(), OpError> {
    if shape.len() > MAX_RANK {
        return Err(OpError::Unsupported {
            op: op.name(),
            message: format!("rank {} exceeds {MAX_RANK}", shape.len()),
        });
    }
    Ok(())
}

fn same_rank(op: &Op, inputs: &[TensorRef], a: usize, b: usize) -> Result<(), OpError> {
    let (ra, rb) = (inputs[a].shape().len(), inputs[b].shape().len());
    if ra != rb {
        return Err(shape_err(
            op,
            format!("input {b} has rank {rb}, expected the rank {ra} of input {a}"),
        ));
    }
    check_rank(op, inputs[a].shape())
}

/// Row-major strides of `shape`, in a fixed array.
fn strides(shape: &[usize]) -> [usize; MAX_RANK] {
    let mut s = [0usize; MAX_RANK];
    let mut acc = 1usize;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc = acc.saturating_mul(shape[d]);
    }
    s
}

/// Index element `i` of input `idx` (i64 or i32), wrapped into `0..size`.
fn index_at(op: &Op, t: &TensorRef, i: usize, size: usize) -> Result<usize, OpError> {
    let v = match t.dtype {
        DType::I32 => t.get_flat::<i32>(i).map(i64::from),
        _ => t.get_flat::<i64>(i),
    }
    .ok_or_else(|| value_err(op, format!("index element {i} is unreadable")))?;
    let n = size as i64;
    let j = if v < 0 { v + n } else { v };
    if !(0..n).contains(&j) {
        return Err(value_err(
            op,
            format!("index {v} is out of range for a dim of size {size}"),
        ));
    }
    Ok(j as usize)
}

fn read<T: Element>(op: &Op, t: &TensorRef, i: usize) -> Result<T, OpError> {
    t.get_flat::<T>(i)
        .ok_or_else(|| value_err(op, format!("element {i} is unreadable")))
}

/// For position `p` (flat, row-major over `shape`) of the indices: the flat
/// position in `data` (of row-major `data_strides`) with coordinate `axis`
/// replaced by `index`.
fn element_target(
    p: usize,
    shape: &[usize],
    axis: usize,
    index: usize,
    data_strides: &[usize; MAX_RANK],
) -> usize {
    let (mut rest, mut pos) = (p, 0usize);
    for d in (0..shape.len()).rev() {
        let c = rest % shape[d];
        rest /= shape[d];
        pos += if d == axis { index } else { c } * data_strides[d];
    }
    pos
}

/// Checks every non-axis dim of `idx_shape` fits in `data_shape`.
fn check_within(op: &Op, data: &[usize], idx_shape: &[usize], axis: usize) -> Result<(), OpError> {
    if data
        .iter()
        .zip(idx_shape)
        .enumerate()
        .any(|(d, (&n, &m))| d != axis && m > n)
    {
        return Err(shape_err(
            op,
            format!("indices {idx_shape:?} exceed data {data:?} outside axis {axis}"),
        ));
    }
    Ok(())
}

pub(crate) fn gather_elements_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 2, 2)?;
    expect_dtype(op, inputs, 1, &[DType::I64, DType::I32])?;
    same_rank(op, inputs, 0, 1)?;
    Ok(OutType {
        dtype: inputs[0].dtype,
        shape: Dims::from_slice(inputs[1].shape()),
    })
}

pub(crate) fn gather_elements(
    op: &Op,
    axis: i64,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let (data, idx) = (&inputs[0], &inputs[1]);
    let a = norm_axis(op, axis, data.shape().len())?;
    check_within(op, data.shape(), idx.shape(), a)?;
    let ds = strides(data.shape());
    with_dtype!(data.dtype, T => {
        let dst = out_elems::<T>(op, out)?;
        for (p, o) in dst.iter_mut().enumerate() {
            let j = index_at(op, idx, p, data.shape()[a])?;
            *o = read::<T>(op, data, element_target(p, idx.shape(), a, j, &ds))?;
        }
        Ok(())
    })
}

pub(crate) fn scatter_elements_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 3, 3)?;
    expect_dtype(op, inputs, 1, &[DType::I64, DType::I32])?;
    same_rank(op, inputs, 0, 1)?;
    same_dtype(op, inputs, 0, 2)?;
    if inputs[1].shape() != inputs[2].shape() {
        return Err(shape_err(
            op,
            format!(
                "updates {:?} must have the shape of indices {:?}",
                inputs[2].shape(),
                inputs[1].shape()
            ),
        ));
    }
    Ok(OutType {
        dtype: inputs[0].dtype,
        shape: Dims::from_slice(inputs[0].shape()),
    })
}

/// Copies `data` into the output.
fn copy_data<T: Element>(op: &Op, data: &TensorRef, dst: &mut [T]) -> Result<(), OpError> {
    for (i, o) in dst.iter_mut().enumerate() {
        *o = read::<T>(op, data, i)?;
    }
    Ok(())
}

/// The combining function of a reduction on `T` (`None`: replace).
trait Combine: Element {
    fn combine(r: ScatterReduction, old: Self, new: Self) -> Self;
}

impl Combine for f32 {
    fn combine(r: ScatterReduction, old: f32, new: f32) -> f32 {
        match r {
            ScatterReduction::None => new,
            ScatterReduction::Add => old + new,
            ScatterReduction::Mul => old * new,
            ScatterReduction::Max if old.is_nan() || new.is_nan() => f32::NAN,
            ScatterReduction::Max => old.max(new),
            ScatterReduction::Min if old.is_nan() || new.is_nan() => f32::NAN,
            ScatterReduction::Min => old.min(new),
        }
    }
}

macro_rules! impl_combine_int {
    ($t:ty) => {
        impl Combine for $t {
            fn combine(r: ScatterReduction, old: $t, new: $t) -> $t {
                match r {
                    ScatterReduction::None => new,
                    ScatterReduction::Add => old.wrapping_add(new),
                    ScatterReduction::Mul => old.wrapping_mul(new),
                    ScatterReduction::Max => old.max(new),
                    ScatterReduction::Min => old.min(new),
                }
            }
        }
    };
}
impl_combine_int!(i32);
impl_combine_int!(i64);

/// Runs `body` with the dtype's combining function: every dtype replaces,
/// f32/i32/i64 also reduce.
macro_rules! with_combine {
    ($op:expr, $dtype:expr, $r:expr, $T:ident, $f:ident => $body:expr) => {
        match ($dtype, $r) {
            (DType::F32, _) => {
                type $T = f32;
                let $f = |o: f32, n: f32| f32::combine($r, o, n);
                $body
            }
            (DType::I32, _) => {
                type $T = i32;
                let $f = |o: i32, n: i32| i32::combine($r, o, n);
                $body
            }
            (DType::I64, _) => {
                type $T = i64;
                let $f = |o: i64, n: i64| i64::combine($r, o, n);
                $body
            }
            (other, ScatterReduction::None) => with_dtype!(other, $T => {
                let $f = |_: $T, n: $T| n;
                $body
            }),
            (other, r) => Err(OpError::Unsupported {
                op: $op.name(),
                message: format!("reduction '{}' on {other}", r.name()),
            }),
        }
    };
}

pub(crate) fn scatter_elements(
    op: &Op,
    axis: i64,
    reduction: ScatterReduction,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let (data, idx, upd) = (&inputs[0], &inputs[1], &inputs[2]);
    let a = norm_axis(op, axis, data.shape().len())?;
    check_within(op, data.shape(), idx.shape(), a)?;
    let ds = strides(data.shape());
    let n = idx.layout.numel();
    with_combine!(op, data.dtype, reduction, T, f => {
        let dst = out_elems::<T>(op, out)?;
        copy_data(op, data, dst)?;
        for p in 0..n {
            let j = index_at(op, idx, p, data.shape()[a])?;
            let at = element_target(p, idx.shape(), a, j, &ds);
            let v = read::<T>(op, upd, p)?;
            dst[at] = f(dst[at], v);
        }
        Ok(())
    })
}

/// Geometry of an index-tuple op: tuple length `k`, tuple count, elements
/// per slice, and tuples per batch.
struct Tuples {
    k: usize,
    count: usize,
    slice: usize,
    per_batch: usize,
}

fn tuples(op: &Op, inputs: &[TensorRef], batch_dims: usize) -> Result<Tuples, OpError> {
    expect_dtype(op, inputs, 1, &[DType::I64])?;
    let (data, idx) = (inputs[0].shape(), inputs[1].shape());
    check_rank(op, data)?;
    let k = *idx
        .last()
        .ok_or_else(|| shape_err(op, "indices must have rank >= 1".into()))?;
    if batch_dims >= idx.len()
        || batch_dims.saturating_add(k) > data.len()
        || data[..batch_dims] != idx[..batch_dims]
    {
        return Err(shape_err(
            op,
            format!(
                "batch_dims {batch_dims} and index tuples of length {k} do not fit data {data:?} and indices {idx:?}"
            ),
        ));
    }
    let count = idx[..idx.len() - 1].iter().product();
    let per_batch = idx[batch_dims..idx.len() - 1].iter().product();
    let slice = data[batch_dims + k..].iter().product();
    Ok(Tuples {
        k,
        count,
        slice,
        per_batch,
    })
}

/// The flat offset in data of tuple `t`'s slice.
fn tuple_offset(
    op: &Op,
    inputs: &[TensorRef],
    g: &Tuples,
    batch_dims: usize,
    t: usize,
) -> Result<usize, OpError> {
    let (data, idx) = (inputs[0].shape(), &inputs[1]);
    let ds = strides(data);
    let batch = t.checked_div(g.per_batch).unwrap_or(0);
    let mut pos = if batch_dims == 0 {
        0
    } else {
        batch * ds[batch_dims - 1]
    };
    for j in 0..g.k {
        let d = batch_dims + j;
        pos += index_at(op, idx, t * g.k + j, data[d])? * ds[d];
    }
    Ok(pos)
}

pub(crate) fn gather_nd_type(
    op: &Op,
    batch_dims: usize,
    inputs: &[TensorRef],
) -> Result<OutType, OpError> {
    arity(op, inputs, 2, 2)?;
    let g = tuples(op, inputs, batch_dims)?;
    let (data, idx) = (inputs[0].shape(), inputs[1].shape());
    let shape: Dims = idx[..idx.len() - 1]
        .iter()
        .chain(&data[batch_dims + g.k..])
        .copied()
        .collect();
    Ok(OutType {
        dtype: inputs[0].dtype,
        shape,
    })
}

pub(crate) fn gather_nd(
    op: &Op,
    batch_dims: usize,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let g = tuples(op, inputs, batch_dims)?;
    with_dtype!(inputs[0].dtype, T => {
        let dst = out_elems::<T>(op, out)?;
        for t in 0..g.count {
            let base = tuple_offset(op, inputs, &g, batch_dims, t)?;
            for s in 0..g.slice {
                dst[t * g.slice + s] = read::<T>(op, &inputs[0], base + s)?;
            }
        }
        Ok(())
    })
}

pub(crate) fn scatter_nd_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 3, 3)?;
    let g = tuples(op, inputs, 0)?;
    same_dtype(op, inputs, 0, 2)?;
    let (data, idx) = (inputs[0].shape(), inputs[1].shape());
    let want: Dims = idx[..idx.len() - 1]
        .iter()
        .chain(&data[g.k..])
        .copied()
        .collect();
    if inputs[2].shape() != want.as_slice() {
        return Err(shape_err(
            op,
            format!("updates {:?} must have shape {want:?}", inputs[2].shape()),
        ));
    }
    Ok(OutType {
        dtype: inputs[0].dtype,
        shape: Dims::from_slice(data),
    })
}

pub(crate) fn scatter_nd(
    op: &Op,
    reduction: ScatterReduction,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let g = tuples(op, inputs, 0)?;
    with_combine!(op, inputs[0].dtype, reduction, T, f => {
        let dst = out_elems::<T>(op, out)?;
        copy_data(op, &inputs[0], dst)?;
        for t in 0..g.count {
            let base = tuple_offset(op, inputs, &g, 0, t)?;
            for s in 0..g.slice {
                let v = read::<T>(op, &inputs[2], t * g.slice + s)?;
                dst[base + s] = f(dst[base + s], v);
            }
        }
        Ok(())
    })
}
