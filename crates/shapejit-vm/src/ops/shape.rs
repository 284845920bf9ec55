//! Shape-only ops that can be views of their input: reshape, flatten,
//! transpose, squeeze, unsqueeze, slice, expand, identity.
//!
//! [`view_layout`] computes the output layout over input 0's buffer;
//! [`materialize`] copies that view (or, for reshape/flatten of a strided
//! input, the input in row-major order) into a contiguous output.
//!
//! **Invariant:** a view layout addresses only elements input 0's layout
//! addresses, so it fits the same buffer.

use super::OpError;
use super::util::{
    Ints, arity, broadcast_shapes, kernel_err, norm_axis, read_ints, shape_err, value_err,
    with_dtype,
};
use crate::tensor::{Dims, Layout, Strides, TensorMut, TensorRef};
use shapejit_ir::Op;
use shapejit_kernels::elementwise::copy;
use shapejit_kernels::{StridedShape, View, ViewMut};
use smallvec::SmallVec;

/// True for the ops handled here.
pub(crate) fn is_view_op(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Squeeze { .. }
            | Op::Unsqueeze { .. }
            | Op::Flatten { .. }
            | Op::Slice { .. }
            | Op::DynSlice
            | Op::Expand
            | Op::Identity
    )
}

/// The output shape of a view op.
pub(crate) fn view_op_shape(op: &Op, inputs: &[TensorRef]) -> Result<Dims, OpError> {
    match op {
        Op::Reshape { allowzero } => reshape_shape(op, inputs, *allowzero),
        Op::Flatten { axis } => flatten_shape(op, inputs, *axis),
        _ => Ok(view_layout(op, inputs)?
            .map(|l| l.shape)
            .unwrap_or_default()),
    }
}

/// The output layout over input 0's buffer; `Ok(None)` for reshape/flatten of a
/// non-contiguous input (those need a copy).
pub(crate) fn view_layout(op: &Op, inputs: &[TensorRef]) -> Result<Option<Layout>, OpError> {
    let (min, max) = match op {
        Op::Reshape { .. } | Op::Expand => (2, 2),
        Op::DynSlice => (3, 5),
        _ => (1, 1),
    };
    arity(op, inputs, min, max)?;
    let l = inputs[0].layout;
    let res = match op {
        Op::Reshape { allowzero } => reshaped(l, reshape_shape(op, inputs, *allowzero)?),
        Op::Flatten { axis } => reshaped(l, flatten_shape(op, inputs, *axis)?),
        Op::Identity => Some(l.clone()),
        Op::Transpose { perm } => Some(transposed(op, l, perm)?),
        Op::Squeeze { axes } => Some(squeezed(op, l, axes)?),
        Op::Unsqueeze { axes } => Some(unsqueezed(op, l, axes)?),
        Op::Slice {
            starts,
            ends,
            axes,
            steps,
        } => Some(sliced(op, l, starts, ends, axes, steps)?),
        Op::DynSlice => {
            let operand = |i: usize| {
                if i < inputs.len() {
                    read_ints(op, inputs, i)
                } else {
                    Ok(Ints::new())
                }
            };
            let (starts, ends) = (operand(1)?, operand(2)?);
            Some(sliced(op, l, &starts, &ends, &operand(3)?, &operand(4)?)?)
        }
        Op::Expand => Some(expanded(op, l, &read_ints(op, inputs, 1)?)?),
        _ => return Err(shape_err(op, "not a view op (internal bug)".into())),
    };
    Ok(res)
}

/// Copies the op's result into a contiguous output.
pub(crate) fn materialize(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let src = &inputs[0];
    // a reshape/flatten that is no view: the row-major order of the input is the output
    let layout = view_layout(op, inputs)?;
    let geom = match &layout {
        Some(l) => StridedShape::new(&l.shape, &l.strides, l.offset),
        None => StridedShape::new(&src.layout.shape, &src.layout.strides, src.layout.offset),
    }
    .map_err(kernel_err(op))?;
    with_dtype!(src.dtype, T => {
        let data = src.elems::<T>().ok_or_else(|| shape_err(op, "input buffer dtype mismatch (internal bug)".into()))?;
        let view = View::new(data, geom).map_err(kernel_err(op))?;
        let shape = view.shape();
        let dst = out.elems_mut::<T>().ok_or_else(|| OpError::Output { op: op.name(), index: 0, message: "misaligned buffer".into() })?;
        let mut dst = ViewMut::contiguous(dst, shape).map_err(kernel_err(op))?;
        copy(&mut dst, &view).map_err(kernel_err(op))
    })
}

/// `Some(contiguous layout of shape)` if `l` is contiguous (and has the same numel).
fn reshaped(l: &Layout, shape: Dims) -> Option<Layout> {
    if !l.is_contiguous() {
        return None;
    }
    let mut res = Layout::contiguous(&shape);
    res.offset = l.offset;
    Some(res)
}

fn reshape_shape(op: &Op, inputs: &[TensorRef], allowzero: bool) -> Result<Dims, OpError> {
    arity(op, inputs, 2, 2)?;
    let in_shape = inputs[0].shape();
    let target = read_ints(op, inputs, 1)?;
    if inputs[1].shape().len() != 1 {
        return Err(shape_err(
            op,
            format!(
                "the shape input must be rank 1, got shape {:?}",
                inputs[1].shape()
            ),
        ));
    }
    let mut out: Dims = SmallVec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &t) in target.iter().enumerate() {
        let d = match t {
            0 if !allowzero => *in_shape.get(i).ok_or_else(|| {
                value_err(
                    op,
                    format!("target dim {i} is 0 (copy) but the input {in_shape:?} has no dim {i}"),
                )
            })?,
            -1 if infer_at.is_none() => {
                infer_at = Some(i);
                1
            }
            t if t >= 0 => t as usize,
            _ => return Err(value_err(op, format!("invalid target shape {target:?}"))),
        };
        out.push(d);
    }
    let numel: usize = in_shape.iter().product();
    let known = out.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if let Some(i) = infer_at {
        match known {
            Some(k) if k != 0 && numel.is_multiple_of(k) => out[i] = numel / k,
            _ => {
                return Err(value_err(
                    op,
                    format!("cannot infer the -1 in {target:?} for input shape {in_shape:?}"),
                ));
            }
        }
    } else if known != Some(numel) {
        return Err(value_err(
            op,
            format!("target shape {target:?} does not hold the {numel} elements of {in_shape:?}"),
        ));
    }
    Ok(out)
}

fn flatten_shape(op: &Op, inputs: &[TensorRef], axis: i64) -> Result<Dims, OpError> {
    arity(op, inputs, 1, 1)?;
    let s = inputs[0].shape();
    let r = s.len() as i64;
    if axis < -r || axis > r {
        return Err(shape_err(
            op,
            format!("axis {axis} is out of range for rank {r}"),
        ));
    }
    let a = if axis < 0 { axis + r } else { axis } as usize;
    Ok(SmallVec::from_slice(&[
        s[..a].iter().product(),
        s[a..].iter().product(),
    ]))
}

fn transposed(op: &Op, l: &Layout, perm: &[usize]) -> Result<Layout, OpError> {
    let r = l.rank();
    let reversed: SmallVec<[usize; 6]>;
    let perm = if perm.is_empty() && r > 0 {
        reversed = (0..r).rev().collect();
        &reversed[..]
    } else {
        perm
    };
    let mut seen: SmallVec<[bool; 6]> = SmallVec::from_elem(false, r);
    if perm.len() != r
        || perm
            .iter()
            .any(|&p| p >= r || std::mem::replace(&mut seen[p], true))
    {
        return Err(shape_err(
            op,
            format!(
                "perm {perm:?} is not a permutation of the {r} dims of {:?}",
                l.shape
            ),
        ));
    }
    Ok(Layout {
        shape: perm.iter().map(|&p| l.shape[p]).collect(),
        strides: perm.iter().map(|&p| l.strides[p]).collect(),
        offset: l.offset,
    })
}

fn squeezed(op: &Op, l: &Layout, axes: &[i64]) -> Result<Layout, OpError> {
    let r = l.rank();
    let mut drop: SmallVec<[bool; 6]> = SmallVec::from_elem(false, r);
    if axes.is_empty() {
        for (d, &n) in drop.iter_mut().zip(&l.shape) {
            *d = n == 1;
        }
    }
    for &a in axes {
        let a = norm_axis(op, a, r)?;
        if l.shape[a] != 1 {
            return Err(shape_err(
                op,
                format!(
                    "axis {a} of shape {:?} has size {}, expected 1",
                    l.shape, l.shape[a]
                ),
            ));
        }
        if std::mem::replace(&mut drop[a], true) {
            return Err(shape_err(
                op,
                format!("axis {a} is listed twice in {axes:?}"),
            ));
        }
    }
    let keep = |i: &usize| !drop[*i];
    Ok(Layout {
        shape: (0..r).filter(keep).map(|i| l.shape[i]).collect(),
        strides: (0..r).filter(keep).map(|i| l.strides[i]).collect(),
        offset: l.offset,
    })
}

fn unsqueezed(op: &Op, l: &Layout, axes: &[i64]) -> Result<Layout, OpError> {
    let out_rank = l.rank() + axes.len();
    let mut new: SmallVec<[bool; 6]> = SmallVec::from_elem(false, out_rank);
    for &a in axes {
        let a = norm_axis(op, a, out_rank)?;
        if std::mem::replace(&mut new[a], true) {
            return Err(shape_err(
                op,
                format!("axis {a} is listed twice in {axes:?}"),
            ));
        }
    }
    let (mut shape, mut strides): (Dims, Strides) = (SmallVec::new(), SmallVec::new());
    let mut src = 0;
    for is_new in new {
        if is_new {
            shape.push(1);
            strides.push(0);
        } else {
            shape.push(l.shape[src]);
            strides.push(l.strides[src]);
            src += 1;
        }
    }
    Ok(Layout {
        shape,
        strides,
        offset: l.offset,
    })
}

/// ONNX slice bounds of one axis: `(first index, count)`.
fn slice_bounds(dim: usize, start: i64, end: i64, step: i64) -> (i64, i64) {
    if dim == 0 {
        return (0, 0);
    }
    let (d, step) = (dim as i128, step as i128);
    let norm = |v: i64| if v < 0 { v as i128 + d } else { v as i128 };
    let (s, e) = (norm(start), norm(end));
    if step > 0 {
        let (s, e) = (s.clamp(0, d), e.clamp(0, d));
        (
            s as i64,
            ((e - s).max(0) + step - 1).checked_div(step).unwrap_or(0) as i64,
        )
    } else {
        let (s, e) = (s.clamp(0, d - 1), e.clamp(-1, d - 1));
        (
            s.max(0) as i64,
            ((s - e).max(0) + (-step) - 1)
                .checked_div(-step)
                .unwrap_or(0) as i64,
        )
    }
}

fn sliced(
    op: &Op,
    l: &Layout,
    starts: &[i64],
    ends: &[i64],
    axes: &[i64],
    steps: &[i64],
) -> Result<Layout, OpError> {
    let r = l.rank();
    let n = starts.len();
    if ends.len() != n
        || (!axes.is_empty() && axes.len() != n)
        || (!steps.is_empty() && steps.len() != n)
    {
        return Err(shape_err(
            op,
            format!(
                "starts {starts:?}, ends {ends:?}, axes {axes:?}, steps {steps:?} differ in length"
            ),
        ));
    }
    let mut res = l.clone();
    let mut seen: SmallVec<[bool; 6]> = SmallVec::from_elem(false, r);
    let mut offset = l.offset as isize;
    for i in 0..n {
        let axis = if axes.is_empty() { i as i64 } else { axes[i] };
        let a = norm_axis(op, axis, r)?;
        if std::mem::replace(&mut seen[a], true) {
            return Err(shape_err(op, format!("axis {a} is sliced twice")));
        }
        let step = steps.get(i).copied().unwrap_or(1);
        if step == 0 {
            return Err(value_err(op, format!("step of axis {a} is 0")));
        }
        let (first, count) = slice_bounds(l.shape[a], starts[i], ends[i], step);
        res.shape[a] = count as usize;
        if count > 0 {
            offset += first as isize * l.strides[a];
        }
        // with two or more elements, stride·step is a distance inside the buffer
        res.strides[a] = if count <= 1 {
            l.strides[a]
        } else {
            l.strides[a] * step as isize
        };
    }
    // offset stays at an addressed element (or unchanged for an empty result)
    res.offset = if res.shape.contains(&0) {
        l.offset
    } else {
        offset as usize
    };
    Ok(res)
}

fn expanded(op: &Op, l: &Layout, target: &Ints) -> Result<Layout, OpError> {
    let mut tshape: Dims = SmallVec::new();
    for &t in target {
        if t < 0 {
            return Err(value_err(
                op,
                format!("target shape {target:?} has a negative dim"),
            ));
        }
        tshape.push(t as usize);
    }
    let shape = broadcast_shapes(op, &[&l.shape, &tshape])?;
    let lead = shape.len() - l.rank();
    let strides = (0..shape.len())
        .map(|i| {
            if i < lead || l.shape[i - lead] != shape[i] {
                0
            } else {
                l.strides[i - lead]
            }
        })
        .collect();
    Ok(Layout {
        shape,
        strides,
        offset: l.offset,
    })
}
