//! Data-movement and constant-producing ops: concat, split, gather, tile, pad,
//! shape, size, constant_of_shape, range; the running sums and products
//! (`cum_sum`, `cum_prod`) and `top_k`.
//!
//! All are strided copies on the kernels' engine: concat writes each input into
//! a narrowed region of the output, split reads narrowed regions, tile writes
//! through a `[r0, d0, r1, d1, …]` view of the output, pad fills then copies
//! the overlap.
//!
//! **Invariant:** any dtype works for the movement ops; the output of `shape`,
//! `size` is i64.

use super::util::{
    Ints, arity, expect_dtype, kernel_err, norm_axis, out_elems, out_view, read_ints, read_scalar,
    same_dtype, shape_err, value_err, view_of, with_dtype,
};
use super::{OpError, OutType, OutTypes};
use crate::tensor::{Dims, TensorMut, TensorRef};
use shapejit_ir::{DType, Element, Num, Op, Scalar, Tensor};
use shapejit_kernels::elementwise::{copy, fill};
use shapejit_kernels::gather::gather as kgather;
use shapejit_kernels::{MAX_RANK, StridedShape};
use smallvec::SmallVec;

fn bug(op: &Op, message: &str) -> OpError {
    OpError::Output {
        op: op.name(),
        index: 0,
        message: message.into(),
    }
}

pub(crate) fn concat_type(op: &Op, axis: i64, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    if inputs.is_empty() {
        return Err(OpError::Arity {
            op: op.name(),
            expected: "at least 1".into(),
            actual: 0,
        });
    }
    let first = inputs[0].shape();
    let a = norm_axis(op, axis, first.len())?;
    let mut shape: Dims = first.into();
    for (i, t) in inputs.iter().enumerate().skip(1) {
        same_dtype(op, inputs, 0, i)?;
        let s = t.shape();
        if s.len() != first.len()
            || s.iter()
                .zip(first)
                .enumerate()
                .any(|(d, (x, y))| d != a && x != y)
        {
            return Err(shape_err(
                op,
                format!(
                    "input {i} of shape {s:?} does not match input 0 {first:?} outside axis {a}"
                ),
            ));
        }
        shape[a] += s[a];
    }
    Ok(OutType {
        dtype: inputs[0].dtype,
        shape,
    })
}

pub(crate) fn concat(
    op: &Op,
    axis: i64,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let a = norm_axis(op, axis, inputs[0].shape().len())?;
    with_dtype!(inputs[0].dtype, T => {
        let mut o = out_view::<T>(op, out)?;
        let full = *o.geom();
        let mut at = 0;
        for i in 0..inputs.len() {
            let src = view_of::<T>(op, inputs, i)?;
            let len = src.shape()[a];
            let region = full.narrowed(a, at, len).map_err(kernel_err(op))?;
            copy(&mut o.reborrow(region).map_err(kernel_err(op))?, &src).map_err(kernel_err(op))?;
            at += len;
        }
        Ok(())
    })
}

pub(crate) fn split_types(
    op: &Op,
    axis: i64,
    sizes: &[i64],
    inputs: &[TensorRef],
) -> Result<OutTypes, OpError> {
    arity(op, inputs, 1, 1)?;
    let s = inputs[0].shape();
    let a = norm_axis(op, axis, s.len())?;
    if sizes.is_empty() || sizes.iter().any(|&n| n < 0) || sizes.iter().sum::<i64>() != s[a] as i64
    {
        return Err(value_err(
            op,
            format!("sizes {sizes:?} must be >= 0 and sum to dim {a} of {s:?}"),
        ));
    }
    Ok(sizes
        .iter()
        .map(|&n| {
            let mut shape: Dims = s.into();
            shape[a] = n as usize;
            OutType {
                dtype: inputs[0].dtype,
                shape,
            }
        })
        .collect())
}

pub(crate) fn split(
    op: &Op,
    axis: i64,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let a = norm_axis(op, axis, inputs[0].shape().len())?;
    with_dtype!(inputs[0].dtype, T => {
        let src = view_of::<T>(op, inputs, 0)?;
        let mut at = 0;
        for out in outputs.iter_mut() {
            let len = out.shape[a];
            let part = src.with_geom(src.geom().narrowed(a, at, len).map_err(kernel_err(op))?).map_err(kernel_err(op))?;
            copy(&mut out_view::<T>(op, out)?, &part).map_err(kernel_err(op))?;
            at += len;
        }
        Ok(())
    })
}

pub(crate) fn gather_type(op: &Op, axis: i64, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 2, 2)?;
    expect_dtype(op, inputs, 1, &[DType::I64, DType::I32])?;
    let (d, idx) = (inputs[0].shape(), inputs[1].shape());
    let a = norm_axis(op, axis, d.len())?;
    let shape = d[..a]
        .iter()
        .chain(idx)
        .chain(&d[a + 1..])
        .copied()
        .collect();
    Ok(OutType {
        dtype: inputs[0].dtype,
        shape,
    })
}

fn gather_with<T: Element, I: Element + Into<i64>>(
    op: &Op,
    a: usize,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let data = view_of::<T>(op, inputs, 0)?;
    let idx = view_of::<I>(op, inputs, 1)?;
    let dst = out
        .elems_mut::<T>()
        .ok_or_else(|| bug(op, "buffer dtype or alignment"))?;
    kgather(dst, &data, a, &idx).map_err(|e| match e {
        shapejit_kernels::KernelError::IndexOutOfRange { index, size } => value_err(
            op,
            format!("index {index} is out of range for axis {a} of size {size}"),
        ),
        other => kernel_err(op)(other),
    })
}

pub(crate) fn gather(
    op: &Op,
    axis: i64,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let a = norm_axis(op, axis, inputs[0].shape().len())?;
    with_dtype!(inputs[0].dtype, T => match inputs[1].dtype {
        DType::I32 => gather_with::<T, i32>(op, a, inputs, out),
        _ => gather_with::<T, i64>(op, a, inputs, out),
    })
}

/// Reads non-negative ints, one per dim of input 0.
fn per_dim_counts(op: &Op, inputs: &[TensorRef], idx: usize, what: &str) -> Result<Ints, OpError> {
    let v = read_ints(op, inputs, idx)?;
    let r = inputs[0].shape().len();
    if v.len() != r || v.iter().any(|&x| x < 0) {
        return Err(value_err(
            op,
            format!("{what} {v:?} must be {r} non-negative values"),
        ));
    }
    Ok(v)
}

pub(crate) fn tile_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 2, 2)?;
    let reps = per_dim_counts(op, inputs, 1, "repeats")?;
    let mut shape = Dims::new();
    for (&d, &r) in inputs[0].shape().iter().zip(&reps) {
        shape.push(
            d.checked_mul(r as usize)
                .ok_or_else(|| value_err(op, format!("repeats {reps:?} overflow")))?,
        );
    }
    Ok(OutType {
        dtype: inputs[0].dtype,
        shape,
    })
}

pub(crate) fn tile(op: &Op, inputs: &[TensorRef], out: &mut TensorMut) -> Result<(), OpError> {
    let reps = per_dim_counts(op, inputs, 1, "repeats")?;
    let r = reps.len();
    if 2 * r > MAX_RANK {
        return Err(OpError::Unsupported {
            op: op.name(),
            message: format!("rank {r} exceeds {}", MAX_RANK / 2),
        });
    }
    with_dtype!(inputs[0].dtype, T => {
        let src = view_of::<T>(op, inputs, 0)?;
        let mut o = out_view::<T>(op, out)?;
        let og = *o.geom();
        // output as [r0, d0, r1, d1, …]; source as the same with stride 0 on the r's
        let (mut shape, mut ostr, mut sstr) = ([0usize; MAX_RANK], [0isize; MAX_RANK], [0isize; MAX_RANK]);
        for i in 0..r {
            let d = src.shape()[i];
            shape[2 * i] = reps[i] as usize;
            shape[2 * i + 1] = d;
            ostr[2 * i] = og.strides()[i] * d as isize;
            ostr[2 * i + 1] = og.strides()[i];
            sstr[2 * i + 1] = src.geom().strides()[i];
        }
        let n = 2 * r;
        let dst_geom = StridedShape::new(&shape[..n], &ostr[..n], 0).map_err(kernel_err(op))?;
        let src_geom = StridedShape::new(&shape[..n], &sstr[..n], src.geom().offset()).map_err(kernel_err(op))?;
        let src = src.with_geom(src_geom).map_err(kernel_err(op))?;
        copy(&mut o.reborrow(dst_geom).map_err(kernel_err(op))?, &src).map_err(kernel_err(op))
    })
}

pub(crate) fn pad_type(op: &Op, pads: &[i64], inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 1, 1)?;
    let s = inputs[0].shape();
    let r = s.len();
    if pads.len() != 2 * r {
        return Err(shape_err(
            op,
            format!("pads {pads:?} must have {} entries for shape {s:?}", 2 * r),
        ));
    }
    let mut shape = Dims::new();
    for (i, &d) in s.iter().enumerate() {
        let n = d as i128 + pads[i] as i128 + pads[r + i] as i128;
        if n < 0 {
            return Err(value_err(
                op,
                format!("pads {pads:?} make dim {i} of {s:?} negative"),
            ));
        }
        shape.push(
            usize::try_from(n).map_err(|_| value_err(op, format!("pads {pads:?} overflow")))?,
        );
    }
    Ok(OutType {
        dtype: inputs[0].dtype,
        shape,
    })
}

pub(crate) fn pad(
    op: &Op,
    pads: &[i64],
    value: f32,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    with_dtype!(inputs[0].dtype, T => {
        let src = view_of::<T>(op, inputs, 0)?;
        let mut o = out_view::<T>(op, out)?;
        fill(&mut o, T::from_num(Num::Float(f64::from(value))));
        let r = src.shape().len();
        let (mut sg, mut dg) = (*src.geom(), *o.geom());
        for i in 0..r {
            let d = src.shape()[i] as i64;
            let (b, e) = (pads[i], pads[r + i]);
            let (skip_src, skip_dst) = ((-b).max(0), b.max(0));
            let len = (d - skip_src - (-e).max(0)).max(0);
            sg = sg.narrowed(i, skip_src.min(d) as usize, len as usize).map_err(kernel_err(op))?;
            dg = dg.narrowed(i, skip_dst as usize, len as usize).map_err(kernel_err(op))?;
        }
        let src = src.with_geom(sg).map_err(kernel_err(op))?;
        copy(&mut o.reborrow(dg).map_err(kernel_err(op))?, &src).map_err(kernel_err(op))
    })
}

/// ONNX `Shape` bounds, clamped to `0..=rank`.
fn shape_range(start: i64, end: Option<i64>, rank: usize) -> (usize, usize) {
    let r = rank as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let (s, e) = (clamp(start), clamp(end.unwrap_or(r)));
    (s, e.max(s))
}

pub(crate) fn shape_type(
    op: &Op,
    start: i64,
    end: Option<i64>,
    inputs: &[TensorRef],
) -> Result<OutType, OpError> {
    arity(op, inputs, 1, 1)?;
    let (s, e) = shape_range(start, end, inputs[0].shape().len());
    Ok(OutType {
        dtype: DType::I64,
        shape: SmallVec::from_slice(&[e - s]),
    })
}

pub(crate) fn shape(
    op: &Op,
    start: i64,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let dims = inputs[0].shape();
    let (s, _) = shape_range(start, None, dims.len());
    let dst = out
        .elems_mut::<i64>()
        .ok_or_else(|| bug(op, "buffer dtype or alignment"))?;
    for (d, &v) in dst.iter_mut().zip(&dims[s..]) {
        *d = v as i64;
    }
    Ok(())
}

pub(crate) fn size(op: &Op, inputs: &[TensorRef], out: &mut TensorMut) -> Result<(), OpError> {
    let dst = out
        .elems_mut::<i64>()
        .ok_or_else(|| bug(op, "buffer dtype or alignment"))?;
    dst[0] = inputs[0].layout.numel() as i64;
    Ok(())
}

pub(crate) fn constant_of_shape_type(
    op: &Op,
    value: &Tensor,
    inputs: &[TensorRef],
) -> Result<OutType, OpError> {
    arity(op, inputs, 1, 1)?;
    if value.numel() != 1 {
        return Err(value_err(
            op,
            format!("value must hold one element, got shape {:?}", value.shape()),
        ));
    }
    let dims = read_ints(op, inputs, 0)?;
    if inputs[0].shape().len() != 1 {
        return Err(shape_err(
            op,
            format!(
                "the shape input must be rank 1, got shape {:?}",
                inputs[0].shape()
            ),
        ));
    }
    if dims.iter().any(|&d| d < 0) {
        return Err(value_err(op, format!("shape {dims:?} has a negative dim")));
    }
    Ok(OutType {
        dtype: value.dtype(),
        shape: dims.iter().map(|&d| d as usize).collect(),
    })
}

pub(crate) fn constant_of_shape(
    op: &Op,
    value: &Tensor,
    out: &mut TensorMut,
) -> Result<(), OpError> {
    with_dtype!(value.dtype(), T => {
        let v = value.as_slice::<T>().ok().and_then(|s| s.first().copied()).ok_or_else(|| bug(op, "value unreadable"))?;
        fill(&mut out_view::<T>(op, out)?, v);
        Ok(())
    })
}

/// Number of elements of a range; `None` when `delta` is 0.
fn range_len(start: f64, limit: f64, delta: f64) -> Option<f64> {
    if delta == 0.0 {
        return None;
    }
    Some(((limit - start) / delta).ceil().max(0.0))
}

/// The largest `range` output accepted (elements).
const MAX_RANGE: f64 = (1u64 << 40) as f64;

pub(crate) fn range_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 3, 3)?;
    let dtype = expect_dtype(op, inputs, 0, &[DType::F32, DType::I32, DType::I64])?;
    same_dtype(op, inputs, 0, 1)?;
    same_dtype(op, inputs, 0, 2)?;
    let n = match dtype {
        DType::F32 => {
            let [s, l, d] = [0, 1, 2].map(|i| read_scalar::<f32>(op, inputs, i));
            range_len(s? as f64, l? as f64, d? as f64)
        }
        _ => {
            let [s, l, d] = [0, 1, 2].map(|i| read_int_scalar(op, inputs, i));
            let (s, l, d) = (s? as i128, l? as i128, d? as i128);
            (d != 0).then(|| {
                let span = l - s;
                let n = if d > 0 {
                    (span + d - 1).div_euclid(d)
                } else {
                    (-span + (-d) - 1).div_euclid(-d)
                };
                n.max(0) as f64
            })
        }
    };
    let n = n.ok_or_else(|| value_err(op, "delta is 0".into()))?;
    if n.is_nan() || n > MAX_RANGE {
        return Err(value_err(op, format!("range of {n} elements is too large")));
    }
    Ok(OutType {
        dtype,
        shape: SmallVec::from_slice(&[n as usize]),
    })
}

fn read_int_scalar(op: &Op, inputs: &[TensorRef], idx: usize) -> Result<i64, OpError> {
    match inputs[idx].dtype {
        DType::I32 => read_scalar::<i32>(op, inputs, idx).map(i64::from),
        _ => read_scalar::<i64>(op, inputs, idx),
    }
}

pub(crate) fn range(op: &Op, inputs: &[TensorRef], out: &mut TensorMut) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F32 => {
            let (s, d) = (
                read_scalar::<f32>(op, inputs, 0)?,
                read_scalar::<f32>(op, inputs, 2)?,
            );
            let dst = out
                .elems_mut::<f32>()
                .ok_or_else(|| bug(op, "buffer dtype or alignment"))?;
            for (i, v) in dst.iter_mut().enumerate() {
                *v = s + i as f32 * d;
            }
        }
        DType::I32 => {
            let (s, d) = (
                read_scalar::<i32>(op, inputs, 0)?,
                read_scalar::<i32>(op, inputs, 2)?,
            );
            let dst = out
                .elems_mut::<i32>()
                .ok_or_else(|| bug(op, "buffer dtype or alignment"))?;
            for (i, v) in dst.iter_mut().enumerate() {
                *v = s.wrapping_add((i as i32).wrapping_mul(d));
            }
        }
        _ => {
            let (s, d) = (
                read_scalar::<i64>(op, inputs, 0)?,
                read_scalar::<i64>(op, inputs, 2)?,
            );
            let dst = out
                .elems_mut::<i64>()
                .ok_or_else(|| bug(op, "buffer dtype or alignment"))?;
            for (i, v) in dst.iter_mut().enumerate() {
                *v = s.wrapping_add((i as i64).wrapping_mul(d));
            }
        }
    }
    Ok(())
}

/// The attributes of `cum_sum` / `cum_prod`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CumFlags {
    pub product: bool,
    pub exclusive: bool,
    pub reverse: bool,
}

/// Element types with the running combinations (floats in their own type,
/// integers wrapping).
trait Accumulate: Element {
    const ZERO: Self;
    const ONE: Self;
    fn plus(self, o: Self) -> Self;
    fn times(self, o: Self) -> Self;
}

macro_rules! accumulate {
    ($t:ty, $zero:expr, $one:expr, $plus:expr, $times:expr) => {
        impl Accumulate for $t {
            const ZERO: $t = $zero;
            const ONE: $t = $one;
            fn plus(self, o: $t) -> $t {
                $plus(self, o)
            }
            fn times(self, o: $t) -> $t {
                $times(self, o)
            }
        }
    };
}
accumulate!(f32, 0.0, 1.0, |a: f32, b| a + b, |a: f32, b| a * b);
accumulate!(f64, 0.0, 1.0, |a: f64, b| a + b, |a: f64, b| a * b);
accumulate!(i32, 0, 1, i32::wrapping_add, i32::wrapping_mul);
accumulate!(i64, 0, 1, i64::wrapping_add, i64::wrapping_mul);

/// The normalized axis of a `cum_*` (input 1, one element).
fn cum_axis(op: &Op, inputs: &[TensorRef]) -> Result<usize, OpError> {
    arity(op, inputs, 2, 2)?;
    match read_ints(op, inputs, 1)?.as_slice() {
        [axis] => norm_axis(op, *axis, inputs[0].shape().len()),
        other => Err(value_err(
            op,
            format!("axis must be one value, got {other:?}"),
        )),
    }
}

pub(crate) fn cumulative_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    cum_axis(op, inputs)?;
    let dtype = expect_dtype(
        op,
        inputs,
        0,
        &[DType::F32, DType::F64, DType::I32, DType::I64],
    )?;
    Ok(OutType {
        dtype,
        shape: inputs[0].layout.shape.clone(),
    })
}

fn cumulative_of<T: Accumulate>(
    op: &Op,
    axis: usize,
    flags: CumFlags,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let x = &inputs[0];
    let shape = x.shape();
    let (n, inner) = (shape[axis], shape[axis + 1..].iter().product::<usize>());
    let outer: usize = shape[..axis].iter().product();
    let dst = out_elems::<T>(op, out)?;
    let (identity, combine): (T, fn(T, T) -> T) = if flags.product {
        (T::ONE, T::times)
    } else {
        (T::ZERO, T::plus)
    };
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = identity;
            for step in 0..n {
                let k = if flags.reverse { n - 1 - step } else { step };
                let at = (o * n + k) * inner + i;
                let v = x
                    .get_flat::<T>(at)
                    .ok_or_else(|| value_err(op, format!("element {at} is unreadable")))?;
                if flags.exclusive {
                    dst[at] = acc;
                    acc = combine(acc, v);
                } else {
                    acc = combine(acc, v);
                    dst[at] = acc;
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn cumulative(
    op: &Op,
    flags: CumFlags,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let axis = cum_axis(op, inputs)?;
    match inputs[0].dtype {
        DType::F32 => cumulative_of::<f32>(op, axis, flags, inputs, out),
        DType::F64 => cumulative_of::<f64>(op, axis, flags, inputs, out),
        DType::I32 => cumulative_of::<i32>(op, axis, flags, inputs, out),
        DType::I64 => cumulative_of::<i64>(op, axis, flags, inputs, out),
        other => Err(OpError::DType {
            op: op.name(),
            input: 0,
            expected: "f32, f64, i32 or i64".into(),
            actual: other,
        }),
    }
}

/// The normalized axis and `k` of a `top_k`, checked against the input.
fn top_k_args(op: &Op, axis: i64, inputs: &[TensorRef]) -> Result<(usize, usize), OpError> {
    arity(op, inputs, 2, 2)?;
    let shape = inputs[0].shape();
    let axis = norm_axis(op, axis, shape.len())?;
    match read_ints(op, inputs, 1)?.as_slice() {
        [k] if *k >= 0 && (*k as u64) <= shape[axis] as u64 => Ok((axis, *k as usize)),
        other => Err(value_err(
            op,
            format!("k must be one value in 0..={}, got {other:?}", shape[axis]),
        )),
    }
}

pub(crate) fn top_k_types(op: &Op, axis: i64, inputs: &[TensorRef]) -> Result<OutTypes, OpError> {
    let (axis, k) = top_k_args(op, axis, inputs)?;
    let dtype = expect_dtype(
        op,
        inputs,
        0,
        &[DType::F32, DType::F64, DType::I32, DType::I64],
    )?;
    let mut shape = inputs[0].layout.shape.clone();
    shape[axis] = k;
    Ok(smallvec::smallvec![
        OutType {
            dtype,
            shape: shape.clone()
        },
        OutType {
            dtype: DType::I64,
            shape
        },
    ])
}

fn top_k_of<T: Element>(
    op: &Op,
    (axis, k, largest): (usize, usize, bool),
    x: &TensorRef,
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let shape = x.shape();
    let (n, inner) = (shape[axis], shape[axis + 1..].iter().product::<usize>());
    let outer: usize = shape[..axis].iter().product();
    let bug = |index: usize| OpError::Output {
        op: op.name(),
        index,
        message: "not a contiguous buffer of its dtype".into(),
    };
    let [values, indices] = outputs else {
        return Err(bug(1));
    };
    let values = values.elems_mut::<T>().ok_or_else(|| bug(0))?;
    let indices = indices.elems_mut::<i64>().ok_or_else(|| bug(1))?;
    let mut line: Vec<(T, usize)> = Vec::with_capacity(n);
    for o in 0..outer {
        for i in 0..inner {
            line.clear();
            for j in 0..n {
                let at = (o * n + j) * inner + i;
                let v = x
                    .get_flat::<T>(at)
                    .ok_or_else(|| value_err(op, format!("element {at} is unreadable")))?;
                line.push((v, j));
            }
            // stable: equal values keep the smaller index first
            line.sort_by(|a, b| {
                let ord = a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal);
                if largest { ord.reverse() } else { ord }
            });
            for (r, &(v, j)) in line.iter().take(k).enumerate() {
                let at = (o * k + r) * inner + i;
                values[at] = v;
                indices[at] = j as i64;
            }
        }
    }
    Ok(())
}

pub(crate) fn top_k(
    op: &Op,
    axis: i64,
    largest: bool,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (axis, k) = top_k_args(op, axis, inputs)?;
    let args = (axis, k, largest);
    match inputs[0].dtype {
        DType::F32 => top_k_of::<f32>(op, args, &inputs[0], outputs),
        DType::F64 => top_k_of::<f64>(op, args, &inputs[0], outputs),
        DType::I32 => top_k_of::<i32>(op, args, &inputs[0], outputs),
        DType::I64 => top_k_of::<i64>(op, args, &inputs[0], outputs),
        other => Err(OpError::DType {
            op: op.name(),
            input: 0,
            expected: "f32, f64, i32 or i64".into(),
            actual: other,
        }),
    }
}
