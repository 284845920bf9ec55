//! Row-wise normalizations: softmax, log_softmax, layer_norm, batch_norm.
//!
//! softmax/layer_norm run on contiguous rows; a strided input is first copied
//! into [`Scratch`] (no allocation after warm-up). batch_norm folds its four
//! parameter vectors into a per-channel `a·x + b` and runs the elementwise
//! engine on `x` in place of any layout, applying its fused activation (if any)
//! to each result in the same pass.
//!
//! **Invariant:** results do not depend on the input layout.

use super::elementwise::{activation as kernel_activation, with_activation};
use super::util::{
    arity, contiguous_f32, copy_len, expect_dtype, kernel_err, norm_axis, out_elems, out_view,
    shape_err, view_of,
};
use super::{OpError, OutType, Scratch};
use crate::tensor::{TensorMut, TensorRef};
use shapejit_ir::{Activation, DType, Op};
use shapejit_kernels::elementwise as ew;
use shapejit_kernels::rows;
use shapejit_kernels::{StridedShape, View, ViewMut};
use smallvec::SmallVec;

pub(crate) fn softmax_type(op: &Op, axis: i64, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 1, 1)?;
    expect_dtype(op, inputs, 0, &[DType::F32])?;
    norm_axis(op, axis, inputs[0].shape().len())?;
    Ok(OutType {
        dtype: DType::F32,
        shape: inputs[0].layout.shape.clone(),
    })
}

pub(crate) fn softmax(
    op: &Op,
    axis: i64,
    log: bool,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut Scratch,
) -> Result<(), OpError> {
    let x = view_of::<f32>(op, inputs, 0)?;
    let shape = x.shape();
    let a = norm_axis(op, axis, shape.len())?;
    let (outer, n, inner) = (
        shape[..a].iter().product(),
        shape[a],
        shape[a + 1..].iter().product(),
    );
    let [buf] = scratch.f32_bufs(op, [copy_len(&x)])?;
    let src = contiguous_f32(op, &x, buf)?;
    rows::softmax(src, out_elems::<f32>(op, out)?, outer, n, inner, log).map_err(kernel_err(op))
}

/// `x.shape[axis..]` for layer_norm.
fn norm_axis_incl(op: &Op, axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(shape_err(
            op,
            format!("axis {axis} is out of range for rank {rank}"),
        ));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

pub(crate) fn layer_norm_type(
    op: &Op,
    axis: i64,
    inputs: &[TensorRef],
) -> Result<OutType, OpError> {
    arity(op, inputs, 2, 3)?;
    for i in 0..inputs.len() {
        expect_dtype(op, inputs, i, &[DType::F32])?;
    }
    let shape = inputs[0].shape();
    let a = norm_axis_incl(op, axis, shape.len())?;
    let normalized = &shape[a..];
    for (i, t) in inputs.iter().enumerate().skip(1) {
        let p = t.shape();
        let fits = p.len() <= normalized.len()
            && p.iter()
                .rev()
                .zip(normalized.iter().rev())
                .all(|(&pd, &nd)| pd == nd || pd == 1);
        if !fits {
            return Err(shape_err(
                op,
                format!(
                    "input {i} of shape {p:?} does not broadcast to the normalized dims {normalized:?}"
                ),
            ));
        }
    }
    Ok(OutType {
        dtype: DType::F32,
        shape: inputs[0].layout.shape.clone(),
    })
}

/// Copies input `idx` broadcast to `shape` into `buf` (row-major).
fn broadcast_into(
    op: &Op,
    inputs: &[TensorRef],
    idx: usize,
    shape: &[usize],
    buf: &mut [f32],
) -> Result<(), OpError> {
    let v = view_of::<f32>(op, inputs, idx)?;
    let v = v
        .with_geom(v.geom().broadcast_to(shape).map_err(kernel_err(op))?)
        .map_err(kernel_err(op))?;
    let mut dst = ViewMut::contiguous(buf, shape).map_err(kernel_err(op))?;
    ew::copy(&mut dst, &v).map_err(kernel_err(op))
}

pub(crate) fn layer_norm(
    op: &Op,
    axis: i64,
    epsilon: f32,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut Scratch,
) -> Result<(), OpError> {
    let x = view_of::<f32>(op, inputs, 0)?;
    let a = norm_axis_incl(op, axis, x.shape().len())?;
    let normalized: SmallVec<[usize; 6]> = SmallVec::from_slice(&x.shape()[a..]);
    let n: usize = normalized.iter().product();
    let has_bias = inputs.len() == 3;
    let [xbuf, sbuf, bbuf] =
        scratch.f32_bufs(op, [copy_len(&x), n, if has_bias { n } else { 0 }])?;
    broadcast_into(op, inputs, 1, &normalized, sbuf)?;
    if has_bias {
        broadcast_into(op, inputs, 2, &normalized, bbuf)?;
    }
    let src = contiguous_f32(op, &x, xbuf)?;
    let bias = if has_bias { Some(&*bbuf) } else { None };
    rows::layer_norm(src, out_elems::<f32>(op, out)?, n, sbuf, bias, epsilon)
        .map_err(kernel_err(op))
}

pub(crate) fn batch_norm_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 5, 5)?;
    for i in 0..5 {
        expect_dtype(op, inputs, i, &[DType::F32])?;
    }
    let shape = inputs[0].shape();
    if shape.len() < 2 {
        return Err(shape_err(
            op,
            format!("input must be [N, C, ...], got shape {shape:?}"),
        ));
    }
    let c = shape[1];
    for (i, name) in [(1, "scale"), (2, "bias"), (3, "mean"), (4, "var")] {
        if inputs[i].shape() != [c] {
            return Err(shape_err(
                op,
                format!(
                    "{name} (input {i}) must have shape [{c}], got {:?}",
                    inputs[i].shape()
                ),
            ));
        }
    }
    Ok(OutType {
        dtype: DType::F32,
        shape: inputs[0].layout.shape.clone(),
    })
}

pub(crate) fn batch_norm(
    op: &Op,
    epsilon: f32,
    activation: Option<Activation>,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut Scratch,
) -> Result<(), OpError> {
    let x = view_of::<f32>(op, inputs, 0)?;
    let c = x.shape()[1];
    let [mul, add, tmp] = scratch.f32_bufs(op, [c, c, c])?;
    // mul = scale / sqrt(var + eps); add = bias - mean * mul
    broadcast_into(op, inputs, 1, &[c], mul)?;
    broadcast_into(op, inputs, 4, &[c], tmp)?;
    for (m, &v) in mul.iter_mut().zip(tmp.iter()) {
        *m /= (v + epsilon).sqrt();
    }
    broadcast_into(op, inputs, 2, &[c], add)?;
    broadcast_into(op, inputs, 3, &[c], tmp)?;
    for ((a, &mean), &m) in add.iter_mut().zip(tmp.iter()).zip(mul.iter()) {
        *a -= mean * m;
    }
    // per-channel vectors as [C, 1, ...] broadcast to x's shape
    let rank = x.shape().len();
    let mut shape: SmallVec<[usize; 6]> = SmallVec::from_elem(1, rank - 1);
    shape[0] = c;
    let mut strides: SmallVec<[isize; 6]> = SmallVec::from_elem(0, rank - 1);
    strides[0] = 1;
    let chan = StridedShape::new(&shape, &strides, 0)
        .and_then(|g| g.broadcast_to(x.shape()))
        .map_err(kernel_err(op))?;
    let mul = View::new(&*mul, chan).map_err(kernel_err(op))?;
    let add = View::new(&*add, chan).map_err(kernel_err(op))?;
    let mut o = out_view::<f32>(op, out)?;
    match activation.map(kernel_activation) {
        None => ew::ternary(&mut o, &x, &mul, &add, |v, m, a| v * m + a),
        Some(act) => with_activation!(act, |f| {
            ew::ternary(&mut o, &x, &mul, &add, move |v, m, a| f(v * m + a))
        }),
    }
    .map_err(kernel_err(op))
}
