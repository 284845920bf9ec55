//! Shape and data-movement ops: Reshape, Transpose, Squeeze/Unsqueeze (axes
//! attribute before opset 13, input from 13), Flatten, Concat, Split (`split`
//! attribute before 13, input from 13, `num_outputs` from 18), Slice
//! (attributes before 10, inputs from 10), Gather, Expand, Tile, Pad
//! (attributes before 11, inputs from 11, `axes` from 18), Shape
//! (`start`/`end` from 15), Size, Constant, ConstantOfShape, Range, Identity
//! and Dropout (inference: identity).
//!
//! **Invariant:** every input the IR takes as an attribute (axes, sizes,
//! pads, slice bounds) is read from a constant or from known contents, never
//! guessed; anything else is an unsupported error naming the input.

use crate::node::{NodeCx, NodeResult};
use crate::tensor::tensor_from_proto;
use shapejit_ir::{BinaryOp, DType, Op, ReduceOp, Tensor, ValueId};

/// `Reshape(data, shape)`, `allowzero` from opset 14.
pub fn reshape(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, shape) = (cx.input(0)?, cx.input(1)?);
    let allowzero = cx.int_or("allowzero", 0)? != 0;
    Ok(vec![cx.op(Op::Reshape { allowzero }, &[x, shape])?])
}

/// `Transpose(perm)`; no `perm` reverses the dims.
pub fn transpose(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let rank = cx.rank(x);
    let perm = match cx.attr_ints("perm")? {
        Some(p) => p
            .iter()
            .map(|&a| usize::try_from(a).ok().filter(|&a| a < rank))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| cx.bad(format!("perm {p:?} is not a permutation of rank {rank}")))?,
        None => (0..rank).rev().collect(),
    };
    Ok(vec![cx.op(Op::Transpose { perm }, &[x])?])
}

/// Axes given as an attribute before `input_from`, else as optional input 1.
fn axes_arg(cx: &NodeCx, input_from: i64) -> NodeResult<Option<Vec<i64>>> {
    if cx.opset() < input_from {
        return cx.attr_ints("axes");
    }
    match cx.opt_input(1)? {
        Some(v) => Ok(Some(cx.const_ints(v, "axes")?)),
        None => Ok(None),
    }
}

/// `Squeeze`: no axes removes every size-1 dim.
pub fn squeeze(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let axes = axes_arg(cx, 13)?.unwrap_or_default();
    Ok(vec![cx.op(Op::Squeeze { axes }, &[x])?])
}

/// `Unsqueeze`: axes are required; axes computed at run time (a vector of
/// known length) become a reshape to a shape computed from them.
pub fn unsqueeze(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    if cx.opset() >= 13
        && let Some(v) = cx.opt_input(1)?
        && cx.known_ints(v).is_none()
    {
        return Ok(vec![unsqueeze_at_run_time(cx, x, v)?]);
    }
    let axes = axes_arg(cx, 13)?.ok_or_else(|| cx.bad("axes are required"))?;
    Ok(vec![cx.op(Op::Unsqueeze { axes }, &[x])?])
}

/// `x` reshaped to rank `R = rank + n` (`n` axes): with `a` the axes made
/// non-negative and `hit[k]` whether `k` is one of them, output dim `k` is 1
/// where `hit[k]`, else input dim `k − (axes before k)`, the running count of
/// `hit` (`cum_sum`).
fn unsqueeze_at_run_time(cx: &mut NodeCx, x: ValueId, axes: ValueId) -> NodeResult<ValueId> {
    let n = cx
        .ty(axes)
        .shape
        .dims()
        .first()
        .and_then(|d| d.as_known())
        .filter(|_| cx.rank(axes) == 1)
        .ok_or_else(|| {
            cx.unsupported("axes computed at run time must be a vector of known length")
        })?;
    let rank = cx.rank(x) as i64;
    let big = rank + n;
    let i64s = |cx: &mut NodeCx, v: Vec<i64>, shape: &[usize]| {
        Tensor::from_vec(v, shape)
            .map(|t| cx.constant(t))
            .map_err(|e| cx.bad(e.to_string()))
    };
    let axes = if cx.ty(axes).dtype == DType::I64 {
        axes
    } else {
        cx.op(Op::Cast { to: DType::I64 }, &[axes])?
    };
    let zero = cx.const_scalar(DType::I64, 0.0);
    let r = cx.const_scalar(DType::I64, big as f64);
    let negative = cx.bin(BinaryOp::Lt, axes, zero)?;
    let shifted = cx.bin(BinaryOp::Add, axes, r)?;
    let a = cx.op(Op::Where, &[negative, shifted, axes])?;
    let a = cx.op(Op::Unsqueeze { axes: vec![1] }, &[a])?;
    let ks = i64s(cx, (0..big).collect(), &[1, big as usize])?;
    let eq = cx.bin(BinaryOp::Eq, a, ks)?;
    let eq = cx.op(Op::Cast { to: DType::I64 }, &[eq])?;
    let hit = cx.op(
        Op::Reduce {
            op: ReduceOp::Max,
            axes: vec![0],
            keepdims: false,
        },
        &[eq],
    )?;
    let axis0 = cx.const_scalar(DType::I64, 0.0);
    let before = cx.op(
        Op::Cumulative {
            product: false,
            exclusive: false,
            reverse: false,
        },
        &[hit, axis0],
    )?;
    let ks = i64s(cx, (0..big).collect(), &[big as usize])?;
    let src = cx.bin(BinaryOp::Sub, ks, before)?;
    let last = cx.const_scalar(DType::I64, (rank - 1).max(0) as f64);
    let src = cx.bin(BinaryOp::Min, src, last)?;
    let src = cx.bin(BinaryOp::Max, src, zero)?;
    let dims = if rank == 0 {
        // a scalar: every output dim is 1
        i64s(cx, vec![1], &[1])?
    } else {
        cx.shape_of(x)?
    };
    let picked = cx.op(Op::Gather { axis: 0 }, &[dims, src])?;
    let one = cx.const_scalar(DType::I64, 1.0);
    let is_axis = cx.op(Op::Cast { to: DType::Bool }, &[hit])?;
    let shape = cx.op(Op::Where, &[is_axis, one, picked])?;
    cx.op(Op::Reshape { allowzero: false }, &[x, shape])
}

/// `Flatten(axis = 1)`.
pub fn flatten(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let axis = cx.int_or("axis", 1)?;
    Ok(vec![cx.op(Op::Flatten { axis }, &[x])?])
}

/// `Concat(axis)`.
pub fn concat(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let inputs = cx.inputs()?;
    let axis = cx
        .attr_int("axis")?
        .ok_or_else(|| cx.bad("required attribute 'axis' is missing"))?;
    Ok(vec![cx.op(Op::Concat { axis }, &inputs)?])
}

/// `Split`: explicit sizes, or equal parts (the last one smaller with
/// `num_outputs` from opset 18) of a dim that must be known.
pub fn split(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let axis_attr = cx.int_or("axis", 0)?;
    let axis = cx.axis(axis_attr, cx.rank(x), "axis")?;
    let explicit = if cx.opset() < 13 {
        cx.attr_ints("split")?
    } else {
        match cx.opt_input(1)? {
            Some(v) => match cx.known_ints(v) {
                Some(sizes) => Some(sizes),
                None => return split_at_run_time(cx, x, axis_attr, v),
            },
            None => None,
        }
    };
    let num_outputs = cx.attr_int("num_outputs")?;
    let sizes = match explicit {
        Some(sizes) => sizes,
        None => {
            let parts = num_outputs.unwrap_or(cx.node.output.len() as i64);
            let dim = cx.ty(x).shape.dims()[axis].as_known().ok_or_else(|| {
                cx.unsupported(format!(
                    "equal split of the symbolic dim {}",
                    cx.ty(x).shape.dims()[axis]
                ))
            })?;
            if parts <= 0 || parts != cx.node.output.len() as i64 {
                return Err(cx.bad(format!(
                    "cannot split into {parts} parts for {} outputs",
                    cx.node.output.len()
                )));
            }
            let rounded_up = num_outputs.is_some() && dim % parts != 0;
            let chunk = dim / parts + i64::from(rounded_up);
            if num_outputs.is_none() && dim % parts != 0 {
                return Err(cx.bad(format!("dim {dim} does not split into {parts} equal parts")));
            }
            (0..parts)
                .map(|i| {
                    chunk
                        .min(dim.saturating_sub(i.saturating_mul(chunk)))
                        .max(0)
                })
                .collect()
        }
    };
    cx.ops(
        Op::Split {
            axis: axis_attr,
            sizes,
        },
        &[x],
    )
}

/// `Split` by sizes computed at run time: output `i` is the `dyn_slice` from
/// the sum of the sizes before it, `sizes[i]` long. The number of outputs is
/// the node's; like the sizes themselves, their sum is not checked against
/// the dim (a shorter sum leaves the tail out, a longer one clamps).
fn split_at_run_time(
    cx: &mut NodeCx,
    x: ValueId,
    axis: i64,
    sizes: ValueId,
) -> NodeResult<Vec<ValueId>> {
    let n = cx.node.output.len();
    let sizes = if cx.ty(sizes).dtype == DType::I64 {
        sizes
    } else {
        cx.op(Op::Cast { to: DType::I64 }, &[sizes])?
    };
    let count = cx.ty(sizes).shape.dims().first().and_then(|d| d.as_known());
    if cx.rank(sizes) != 1 || count.is_some_and(|c| c != n as i64) {
        return Err(cx.bad(format!(
            "split sizes of shape {:?} for {n} outputs",
            cx.ty(sizes).shape.dims()
        )));
    }
    let zero = cx.const_scalar(DType::I64, 0.0);
    let starts = cx.op(
        Op::Cumulative {
            product: false,
            exclusive: true,
            reverse: false,
        },
        &[sizes, zero],
    )?;
    let ends = cx.bin(BinaryOp::Add, starts, sizes)?;
    let axes = cx.const_i64s(vec![axis]);
    (0..n as i64)
        .map(|i| {
            let one = |cx: &mut NodeCx, v| {
                cx.op(
                    Op::Slice {
                        starts: vec![i],
                        ends: vec![i + 1],
                        axes: vec![0],
                        steps: vec![1],
                    },
                    &[v],
                )
            };
            let (s, e) = (one(cx, starts)?, one(cx, ends)?);
            cx.op(Op::DynSlice, &[x, s, e, axes])
        })
        .collect()
}

/// `Slice`: attributes before opset 10, inputs from 10. Bounds whose values
/// are known at load (constants, or shape arithmetic over known dims) make a
/// static `slice`; bounds computed at run time (ends from `Shape` of a dynamic
/// input) make a `dyn_slice`.
pub fn slice(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let (starts, ends, axes, steps) = if cx.opset() < 10 {
        let req = |name: &str| {
            cx.attr_ints(name)?
                .ok_or_else(|| cx.bad(format!("required attribute '{name}' is missing")))
        };
        (req("starts")?, req("ends")?, cx.attr_ints("axes")?, None)
    } else {
        let bounds = [1, 2, 3, 4]
            .map(|i| cx.opt_input(i))
            .into_iter()
            .collect::<NodeResult<Vec<Option<ValueId>>>>()?;
        let known: Vec<Option<Vec<i64>>> = bounds
            .iter()
            .map(|b| b.and_then(|v| cx.known_ints(v)))
            .collect();
        if bounds
            .iter()
            .zip(&known)
            .any(|(b, k)| b.is_some() && k.is_none())
        {
            return dyn_slice(cx, x, &bounds);
        }
        let mut known = known.into_iter();
        let mut next = || known.next().flatten();
        let starts = next().ok_or_else(|| cx.bad("input 'starts' is required"))?;
        let ends = next().ok_or_else(|| cx.bad("input 'ends' is required"))?;
        (starts, ends, next(), next())
    };
    let n = starts.len();
    let axes = axes.unwrap_or_else(|| (0..n as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Err(cx.bad(format!(
            "starts, ends, axes and steps differ in length ({n}, {}, {}, {})",
            ends.len(),
            axes.len(),
            steps.len()
        )));
    }
    Ok(vec![cx.op(
        Op::Slice {
            starts,
            ends,
            axes,
            steps,
        },
        &[x],
    )?])
}

/// A `Slice` whose bounds are computed at run time: `dyn_slice` over
/// `starts`, `ends` and, when given, `axes` (`0..n` when only `steps` is) and `steps`.
fn dyn_slice(cx: &mut NodeCx, x: ValueId, bounds: &[Option<ValueId>]) -> NodeResult<Vec<ValueId>> {
    let (Some(starts), Some(ends)) = (bounds[0], bounds[1]) else {
        return Err(cx.bad("inputs 'starts' and 'ends' are required"));
    };
    let mut inputs = vec![x, starts, ends];
    match (bounds[2], bounds[3]) {
        (None, None) => {}
        (Some(axes), None) => inputs.push(axes),
        (axes, Some(steps)) => {
            let axes = match axes {
                Some(a) => a,
                None => {
                    let n = cx
                        .ty(starts)
                        .shape
                        .dims()
                        .first()
                        .and_then(|d| d.as_known());
                    let n = n.ok_or_else(|| cx.bad("'starts' must be a vector of known length"))?;
                    cx.const_i64s((0..n).collect())
                }
            };
            inputs.extend([axes, steps]);
        }
    }
    Ok(vec![cx.op(Op::DynSlice, &inputs)?])
}

/// `Gather(axis = 0)`.
pub fn gather(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, idx) = (cx.input(0)?, cx.input(1)?);
    let axis = cx.int_or("axis", 0)?;
    Ok(vec![cx.op(Op::Gather { axis }, &[x, idx])?])
}

/// An op taking `(x, i64 tensor)` inputs: Expand, Tile.
pub fn with_shape_input(cx: &mut NodeCx, op: Op) -> NodeResult<Vec<ValueId>> {
    let (x, s) = (cx.input(0)?, cx.input(1)?);
    Ok(vec![cx.op(op, &[x, s])?])
}

/// `Pad`: `constant`, `reflect`, `edge` and `wrap` modes. Pads known at load
/// map to `pad` (or border copies); pads computed at run time, and `wrap`,
/// gather each axis by computed indices ([`pad_by_gather`]).
pub fn pad(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let rank = cx.rank(x);
    let mode = cx.attr_string("mode")?.unwrap_or_else(|| "constant".into());
    if !matches!(mode.as_str(), "constant" | "reflect" | "edge" | "wrap") {
        return Err(cx.bad(format!("mode = '{mode}'")));
    }
    if cx.opset() >= 11 {
        let pads = cx.input(1)?;
        if mode == "wrap" || cx.known_ints(pads).is_none() {
            let fill = match cx.opt_input(2)? {
                Some(v) if mode == "constant" => Some(v),
                _ if mode == "constant" => Some(cx.scalar_like(x, 0.0)),
                _ => None,
            };
            let axes = cx.opt_input(3)?;
            return pad_by_gather(cx, x, pads, axes, fill, &mode).map(|y| vec![y]);
        }
    }
    // a constant value computed at run time
    let mut computed = None;
    let (pads, value) = if cx.opset() < 11 {
        let pads = cx
            .attr_ints("pads")?
            .ok_or_else(|| cx.bad("required attribute 'pads' is missing"))?;
        (pads, cx.float_or("value", 0.0)?)
    } else {
        let pads = cx.const_ints(cx.input(1)?, "pads")?;
        let value = match cx.opt_input(2)? {
            Some(v) if cx.const_tensor(v).is_none() && mode == "constant" => {
                computed = Some(v);
                0.0
            }
            Some(v) => cx.const_f32(v, "constant_value")?,
            None => 0.0,
        };
        let pads = match cx.opt_input(3)? {
            None => pads,
            Some(v) => {
                let axes = cx.const_ints(v, "axes")?;
                if pads.len() != 2 * axes.len() {
                    return Err(cx.bad(format!("{} pads for {} axes", pads.len(), axes.len())));
                }
                let mut full = vec![0; 2 * rank];
                for (j, &a) in axes.iter().enumerate() {
                    let a = cx.axis(a, rank, "axis")?;
                    full[a] = pads[j];
                    full[a + rank] = pads[j + axes.len()];
                }
                full
            }
        };
        (pads, value)
    };
    if pads.len() != 2 * rank {
        return Err(cx.bad(format!(
            "{} pads for rank {rank} (expected {})",
            pads.len(),
            2 * rank
        )));
    }
    if let Some(value) = computed {
        // the input padded with 0 where a mask of its extent (padded with
        // false) holds, the value elsewhere
        let shape = cx.shape_of(x)?;
        let inside = cx.op(
            Op::ConstantOfShape {
                value: Tensor::scalar(true),
            },
            &[shape],
        )?;
        let zero_pad = Op::Pad {
            pads: pads.clone(),
            value: 0.0,
        };
        let mask = cx.op(zero_pad.clone(), &[inside])?;
        let padded = cx.op(zero_pad, &[x])?;
        return Ok(vec![cx.op(Op::Where, &[mask, padded, value])?]);
    }
    if mode == "constant" {
        return Ok(vec![cx.op(Op::Pad { pads, value }, &[x])?]);
    }
    if pads.iter().any(|&p| p < 0) {
        return Err(cx.unsupported(format!("negative pads {pads:?} with mode = '{mode}'")));
    }
    let mut y = x;
    for axis in 0..rank {
        y = border_pad(
            cx,
            y,
            axis,
            pads[axis],
            pads[axis + rank],
            mode == "reflect",
        )?;
    }
    Ok(vec![y])
}

/// `Pad` (opset 11 on) by indices: along each padded axis of size `n`, the
/// output reads input index `i` for `i` in `-begin..n + end` (a `range` of
/// run-time bounds; negative pads crop), mapped into `0..n` by the mode:
/// clamped (`edge`), mirrored with period `2(n - 1)` (`reflect`), modulo `n`
/// (`wrap`), or clamped and replaced by the value outside (`constant`).
/// `axes` computed at run time spread the pads over every axis first
/// ([`pads_of_every_axis`]). `fill` is the value outside (`constant` only).
fn pad_by_gather(
    cx: &mut NodeCx,
    x: ValueId,
    pads: ValueId,
    axes: Option<ValueId>,
    fill: Option<ValueId>,
    mode: &str,
) -> NodeResult<ValueId> {
    let rank = cx.rank(x);
    let (axes, pads): (Vec<usize>, ValueId) = match axes {
        Some(v) => match cx.known_ints(v) {
            Some(axes) => (
                axes.iter()
                    .map(|&a| cx.axis(a, rank, "axis"))
                    .collect::<NodeResult<_>>()?,
                pads,
            ),
            None => ((0..rank).collect(), pads_of_every_axis(cx, pads, v, rank)?),
        },
        None => ((0..rank).collect(), pads),
    };
    let k = axes.len();
    if cx.rank(pads) != 1
        || cx.ty(pads).shape.dims()[0]
            .as_known()
            .is_some_and(|n| n != 2 * k as i64)
    {
        return Err(cx.bad(format!(
            "pads of shape {:?} for {k} axes",
            cx.ty(pads).shape.dims()
        )));
    }
    let pads = if cx.ty(pads).dtype == DType::I64 {
        pads
    } else {
        cx.op(Op::Cast { to: DType::I64 }, &[pads])?
    };
    let scalar = |cx: &mut NodeCx, v: ValueId, i: i64| -> NodeResult<ValueId> {
        let one = cx.op(
            Op::Slice {
                starts: vec![i],
                ends: vec![i + 1],
                axes: vec![0],
                steps: vec![1],
            },
            &[v],
        )?;
        cx.op(Op::Squeeze { axes: vec![0] }, &[one])
    };
    let c = |cx: &mut NodeCx, v: f64| cx.const_scalar(DType::I64, v);
    let mut y = x;
    for (j, &axis) in axes.iter().enumerate() {
        let begin = scalar(cx, pads, j as i64)?;
        let end = scalar(cx, pads, (j + k) as i64)?;
        let dims = cx.shape_of(y)?;
        let n = scalar(cx, dims, axis as i64)?;
        let zero = c(cx, 0.0);
        let start = cx.bin(BinaryOp::Sub, zero, begin)?;
        let limit = cx.bin(BinaryOp::Add, n, end)?;
        let one = c(cx, 1.0);
        let idx = cx.op(Op::Range, &[start, limit, one])?;
        let last = cx.bin(BinaryOp::Sub, n, one)?;
        let clamped = cx.bin(BinaryOp::Max, idx, zero)?;
        let clamped = cx.bin(BinaryOp::Min, clamped, last)?;
        // `i mod p` for p > 0, in 0..p
        let modulo = |cx: &mut NodeCx, i: ValueId, p: ValueId| -> NodeResult<ValueId> {
            let q = cx.bin(BinaryOp::Div, i, p)?;
            let qp = cx.bin(BinaryOp::Mul, q, p)?;
            let r = cx.bin(BinaryOp::Sub, i, qp)?;
            let neg = cx.bin(BinaryOp::Lt, r, zero)?;
            let up = cx.bin(BinaryOp::Add, r, p)?;
            cx.op(Op::Where, &[neg, up, r])
        };
        let source = match mode {
            "reflect" => {
                // period 2(n - 1), at least 1 (n = 1 reflects onto index 0)
                let two = c(cx, 2.0);
                let period = cx.bin(BinaryOp::Mul, last, two)?;
                let period = cx.bin(BinaryOp::Max, period, one)?;
                let m = modulo(cx, idx, period)?;
                let back = cx.bin(BinaryOp::Sub, period, m)?;
                let first_half = cx.bin(BinaryOp::Lt, m, n)?;
                cx.op(Op::Where, &[first_half, m, back])?
            }
            "wrap" => modulo(cx, idx, n)?,
            _ => clamped,
        };
        let g = cx.op(Op::Gather { axis: axis as i64 }, &[y, source])?;
        y = match fill {
            Some(value) => {
                let ge = cx.bin(BinaryOp::Ge, idx, zero)?;
                let lt = cx.bin(BinaryOp::Lt, idx, n)?;
                let inside = cx.bin(BinaryOp::And, ge, lt)?;
                let mut shape = vec![-1i64];
                shape.extend(std::iter::repeat_n(1, rank - axis - 1));
                let shape = cx.const_i64s(shape);
                let inside = cx.op(Op::Reshape { allowzero: false }, &[inside, shape])?;
                cx.op(Op::Where, &[inside, g, value])?
            }
            None => g,
        };
    }
    Ok(y)
}

/// `CenterCropPad(x, shape; axes)`: each listed axis cropped or zero-padded
/// to `shape` around its center (an odd difference puts the extra element at
/// the end): a `Pad` by `⌊diff / 2⌋` (toward zero) at the start and the rest
/// at the end, `diff = shape - dim`, computed at run time.
pub fn center_crop_pad(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, target) = (cx.input(0)?, cx.input(1)?);
    let rank = cx.rank(x);
    let axes: Vec<usize> = match cx.attr_ints("axes")? {
        Some(a) => a
            .iter()
            .map(|&a| cx.axis(a, rank, "axes"))
            .collect::<NodeResult<_>>()?,
        None => (0..rank).collect(),
    };
    let target = if cx.ty(target).dtype == DType::I64 {
        target
    } else {
        cx.op(Op::Cast { to: DType::I64 }, &[target])?
    };
    let shape = cx.shape_of(x)?;
    let picks = cx.const_i64s(axes.iter().map(|&a| a as i64).collect());
    let dims = cx.op(Op::Gather { axis: 0 }, &[shape, picks])?;
    let diff = cx.bin(BinaryOp::Sub, target, dims)?;
    let two = cx.const_scalar(DType::I64, 2.0);
    let begin = cx.bin(BinaryOp::Div, diff, two)?;
    let end = cx.bin(BinaryOp::Sub, diff, begin)?;
    let pads = cx.op(Op::Concat { axis: 0 }, &[begin, end])?;
    let axes = cx.const_i64s(axes.iter().map(|&a| a as i64).collect());
    let zero = cx.scalar_like(x, 0.0);
    pad_by_gather(cx, x, pads, Some(axes), Some(zero), "constant").map(|y| vec![y])
}

/// The `[2 · rank]` pads of every axis from pads `[2k]` for run-time `axes`
/// `[k]`: axis `a` begins with `Σ_j (axes[j] ≡ a) · pads[j]` (negative axes
/// count from the end), and likewise ends.
fn pads_of_every_axis(
    cx: &mut NodeCx,
    pads: ValueId,
    axes: ValueId,
    rank: usize,
) -> NodeResult<ValueId> {
    let to_i64 = |cx: &mut NodeCx, v: ValueId| {
        if cx.ty(v).dtype == DType::I64 {
            Ok(v)
        } else {
            cx.op(Op::Cast { to: DType::I64 }, &[v])
        }
    };
    let (pads, axes) = (to_i64(cx, pads)?, to_i64(cx, axes)?);
    let zero = cx.const_scalar(DType::I64, 0.0);
    let r = cx.const_scalar(DType::I64, rank as f64);
    let neg = cx.bin(BinaryOp::Lt, axes, zero)?;
    let wrapped = cx.bin(BinaryOp::Add, axes, r)?;
    let axes = cx.op(Op::Where, &[neg, wrapped, axes])?;
    // [k] halves of the pads, then [rank, 1] == [k] one-hot rows
    let half = |cx: &mut NodeCx, first: bool| -> NodeResult<ValueId> {
        let kk = cx.op(
            Op::Shape {
                start: 0,
                end: None,
            },
            &[axes],
        )?;
        let (starts, ends) = if first {
            (cx.const_i64s(vec![0]), kk)
        } else {
            let two = cx.const_scalar(DType::I64, 2.0);
            let end = cx.bin(BinaryOp::Mul, kk, two)?;
            (kk, end)
        };
        cx.op(Op::DynSlice, &[pads, starts, ends])
    };
    let (begins, ends) = (half(cx, true)?, half(cx, false)?);
    let rows = Tensor::from_vec((0..rank as i64).collect(), &[rank, 1])
        .map_err(|e| cx.bad(e.to_string()))?;
    let rows = cx.constant(rows);
    let hit = cx.bin(BinaryOp::Eq, rows, axes)?;
    let hit = cx.op(Op::Cast { to: DType::I64 }, &[hit])?;
    let spread = |cx: &mut NodeCx, half: ValueId| -> NodeResult<ValueId> {
        let m = cx.bin(BinaryOp::Mul, hit, half)?;
        cx.op(
            Op::Reduce {
                op: ReduceOp::Sum,
                axes: vec![1],
                keepdims: false,
            },
            &[m],
        )
    };
    let (b, e) = (spread(cx, begins)?, spread(cx, ends)?);
    cx.op(Op::Concat { axis: 0 }, &[b, e])
}

/// Pads one axis by mirroring (`reflect`: without repeating the edge, which
/// needs a known dim larger than the pads) or by repeating the edge value
/// (`edge`: the tiled edge row, any dim), concatenated around the input.
fn border_pad(
    cx: &mut NodeCx,
    x: ValueId,
    axis: usize,
    begin: i64,
    end: i64,
    reflect: bool,
) -> NodeResult<ValueId> {
    if begin == 0 && end == 0 {
        return Ok(x);
    }
    let rank = cx.rank(x);
    if reflect {
        let dim = cx.ty(x).shape.dims()[axis].clone();
        match dim.as_known() {
            Some(n) if begin < n && end < n => {}
            Some(n) => {
                return Err(cx.bad(format!(
                    "reflect pads {begin}, {end} need a dim larger than them, got {n}"
                )));
            }
            None => {
                return Err(cx.unsupported(format!("reflect padding of the symbolic dim {dim}")));
            }
        }
    }
    let axes = vec![axis as i64];
    let slice = |cx: &mut NodeCx, start: i64, stop: i64, step: i64| {
        let op = Op::Slice {
            starts: vec![start],
            ends: vec![stop],
            axes: axes.clone(),
            steps: vec![step],
        };
        cx.op(op, &[x])
    };
    // The edge row by index (0 or -1), not by a slice: a gather of one index has one
    // row whatever the dim, where a slice window of a symbolic dim has a fresh size;
    // on an empty dim it is a clear run-time error (there is no edge to repeat).
    let edge = |cx: &mut NodeCx, index: i64, count: i64| {
        let index = cx.const_i64s(vec![index]);
        let edge = cx.op(Op::Gather { axis: axis as i64 }, &[x, index])?;
        let mut repeats = vec![1; rank];
        repeats[axis] = count;
        let repeats = cx.const_i64s(repeats);
        cx.op(Op::Tile, &[edge, repeats])
    };
    let mut parts = Vec::new();
    if begin > 0 {
        parts.push(if reflect {
            slice(cx, begin, 0, -1)?
        } else {
            edge(cx, 0, begin)?
        });
    }
    parts.push(x);
    if end > 0 {
        parts.push(if reflect {
            slice(cx, -2, -2 - end, -1)?
        } else {
            edge(cx, -1, end)?
        });
    }
    cx.op(Op::Concat { axis: axis as i64 }, &parts)
}

/// `Shape(start = 0, end)`.
pub fn shape(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let start = cx.int_or("start", 0)?;
    let end = cx.attr_int("end")?;
    Ok(vec![cx.op(Op::Shape { start, end }, &[x])?])
}

/// An op with one input and no attributes.
pub fn simple(cx: &mut NodeCx, op: Op) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    Ok(vec![cx.op(op, &[x])?])
}

/// `Constant`: `value` (tensor), or from opset 12 `value_float(s)` / `value_int(s)`.
pub fn constant(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    for unsupported in ["sparse_value", "value_string", "value_strings"] {
        if cx.attrs.has(unsupported) {
            return Err(cx.unsupported(format!("attribute '{unsupported}'")));
        }
    }
    let ir = |cx: &NodeCx, e: shapejit_ir::tensor::TensorError| cx.bad(e.to_string());
    let value = if let Some(tp) = cx.attr_tensor("value")? {
        tensor_from_proto(tp, cx.g.external)?
    } else if let Some(f) = cx.attr_float("value_float")? {
        Tensor::scalar(f)
    } else if let Some(fs) = cx.attr_floats("value_floats")? {
        let n = fs.len();
        Tensor::from_vec(fs, &[n]).map_err(|e| ir(cx, e))?
    } else if let Some(i) = cx.attr_int("value_int")? {
        Tensor::scalar(i)
    } else if let Some(is) = cx.attr_ints("value_ints")? {
        let n = is.len();
        Tensor::from_vec(is, &[n]).map_err(|e| ir(cx, e))?
    } else {
        return Err(cx.bad("no value attribute"));
    };
    Ok(vec![cx.constant(value)])
}

/// `ConstantOfShape(shape)`, `value` defaults to a float 0. A shape known at
/// load becomes a constant (as onnxruntime folds it), so a weight that an
/// exporter wrote as a fill is filled once, not at every run, and the rewrites
/// that need constant operands (`shapejit_ir::fuse`) see it; fills above
/// [`FOLD_LIMIT`] bytes stay a run-time op.
pub fn constant_of_shape(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let shape = cx.input(0)?;
    let value = match cx.attr_tensor("value")? {
        Some(tp) => tensor_from_proto(tp, cx.g.external)?,
        None => Tensor::scalar(0f32),
    };
    if let Some(filled) = cx.known_ints(shape).and_then(|dims| filled(&value, &dims)) {
        return Ok(vec![cx.constant(filled)]);
    }
    Ok(vec![cx.op(Op::ConstantOfShape { value }, &[shape])?])
}

/// Largest fill [`constant_of_shape`] folds, in bytes (a folded constant lives as
/// long as the module).
const FOLD_LIMIT: usize = 1 << 30;

/// `value` (one element) repeated over `dims`, when the dims are valid and the
/// result is at most [`FOLD_LIMIT`] bytes; `None` leaves the op to the run (which
/// reports invalid dims).
fn filled(value: &Tensor, dims: &[i64]) -> Option<Tensor> {
    if value.numel() != 1 {
        return None;
    }
    let dims: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .collect::<Option<_>>()?;
    let elem = value.bytes();
    let numel = shapejit_ir::tensor::checked_numel(&dims)?;
    if numel.checked_mul(elem.len())? > FOLD_LIMIT {
        return None;
    }
    if elem.iter().all(|&b| b == 0) {
        return Tensor::zeros(value.dtype(), &dims).ok();
    }
    let bytes = bytes::Bytes::from(elem.repeat(numel));
    Tensor::from_bytes_or_copy(value.dtype(), &dims, bytes).ok()
}

/// `Range(start, limit, delta)`; `stash_type` (version 27) only changes how
/// float16/bfloat16 ranges accumulate, dtypes the importer does not map.
pub fn range(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    cx.attrs.ignore("stash_type");
    let (a, b, c) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    Ok(vec![cx.op(Op::Range, &[a, b, c])?])
}

/// `Identity`: the output is the input value itself.
pub fn identity(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    Ok(vec![cx.input(0)?])
}

/// `Dropout` at inference: identity; the mask output (if wanted) is all true.
/// Training mode (a constant `true` `training_mode` input) is unsupported.
pub fn dropout(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    cx.attrs.ignore("ratio");
    cx.attrs.ignore("seed");
    if cx.int_or("is_test", 1)? == 0 {
        return Err(cx.unsupported("is_test = 0 (training)"));
    }
    if let Some(mode) = cx.opt_input(2)? {
        let on = cx
            .const_tensor(mode)
            .map(|t| t.to_f64_vec().iter().any(|&v| v != 0.0));
        if on != Some(false) {
            return Err(cx.unsupported("training_mode that is not a constant false"));
        }
    }
    if !cx.wants_output(1) {
        return Ok(vec![x]);
    }
    let shape = cx.shape_of(x)?;
    let mask = cx.op(
        Op::ConstantOfShape {
            value: Tensor::scalar(true),
        },
        &[shape],
    )?;
    Ok(vec![x, mask])
}

/// `CumSum` / `CumProd(x, axis; exclusive, reverse)`: `cum_sum` / `cum_prod`
/// with the axis read at run time.
pub fn cumulative(cx: &mut NodeCx, product: bool) -> NodeResult<Vec<ValueId>> {
    let (x, axis) = (cx.input(0)?, cx.input(1)?);
    let exclusive = cx.int_or("exclusive", 0)? != 0;
    let reverse = cx.int_or("reverse", 0)? != 0;
    Ok(vec![cx.op(
        Op::Cumulative {
            product,
            exclusive,
            reverse,
        },
        &[x, axis],
    )?])
}

/// `TopK(x, k; axis = -1, largest = 1, sorted = 1)` (`k` an attribute before
/// version 10); the output is always sorted.
pub fn top_k(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let axis = cx.int_or("axis", -1)?;
    let largest = cx.int_or("largest", 1)? != 0;
    cx.attrs.ignore("sorted");
    let k = if cx.version < 10 {
        let k = cx
            .attr_int("k")?
            .ok_or_else(|| cx.bad("required attribute 'k' is missing"))?;
        cx.const_i64s(vec![k])
    } else {
        let k = cx.input(1)?;
        if cx.ty(k).dtype == DType::I64 {
            k
        } else {
            cx.op(Op::Cast { to: DType::I64 }, &[k])?
        }
    };
    cx.ops(Op::TopK { axis, largest }, &[x, k])
}
