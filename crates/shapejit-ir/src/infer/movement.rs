//! Inference for data-movement and shape ops: reshape, transpose, squeeze,
//! unsqueeze, flatten, concat, split, slice, gather, expand, tile, pad, shape,
//! constant, constant_of_shape and range.
//!
//! **Invariant:** `known` contents flow through these ops exactly as the data
//! would (a `gather` of a `shape` picks the same dims a kernel would pick).

use super::elementwise::broadcast;
use super::{
    INTEGER, InferCtx, Inferred, MAX_KNOWN_ELEMS, MAX_RANK, arity, check_nonnegative, expect_dtype,
    expect_rank, expect_same_dtype, known_ints, norm_axes, norm_axis, numel, shape_operand,
};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::graph::ValueInfo;
use crate::shape::Shape;
use crate::tensor::Tensor;

/// Reshape to the contents of the shape input (ONNX `0` / `-1` semantics).
pub(super) fn reshape(
    allowzero: bool,
    inputs: &[&ValueInfo],
    ctx: &mut InferCtx,
) -> Result<Inferred, String> {
    arity(inputs, 2, 2)?;
    let data = &inputs[0].ty;
    let (len, known) = shape_operand(inputs, 1)?;
    let Some(target) = known else {
        let shape = Shape((0..len).map(|_| ctx.fresh_dim()).collect());
        return Ok(Inferred::new(data.dtype, shape));
    };
    let mut dims = Vec::with_capacity(len);
    let mut infer_at = None;
    for (i, d) in target.iter().enumerate() {
        match d.as_known() {
            Some(-1) if infer_at.is_some() => {
                return Err(format!("target {target:?} has more than one -1"));
            }
            Some(-1) => {
                infer_at = Some(i);
                dims.push(Dim::known(1));
            }
            Some(0) if !allowzero => {
                let copied = data.shape.dims().get(i).ok_or_else(|| {
                    format!(
                        "target {target:?} has 0 at position {i}, but the input {} has rank {}",
                        data.shape,
                        data.shape.rank()
                    )
                })?;
                dims.push(copied.clone());
            }
            Some(n) if n < 0 => {
                return Err(format!("target {target:?} has {n}, expected dims >= -1"));
            }
            _ => dims.push(d.clone()),
        }
    }
    let total = numel(&data.shape)?;
    if let Some(i) = infer_at {
        let rest = numel(&Shape(dims.clone()))?;
        dims[i] = match (total.div_dim(&rest), total.as_known(), rest.as_known()) {
            (Some(q), _, _) => q,
            (None, Some(_), Some(_)) => {
                return Err(format!(
                    "cannot reshape {} ({total} elements) to {target:?}: not divisible",
                    data.shape
                ));
            }
            (None, _, _) => ctx.fresh_dim(),
        };
    }
    let out = Shape(dims);
    if let (Some(a), Some(b)) = (total.as_known(), numel(&out)?.as_known())
        && a != b
    {
        return Err(format!(
            "cannot reshape {} ({a} elements) to {out} ({b} elements)",
            data.shape
        ));
    }
    let known = if out.rank() <= 1 {
        inputs[0].known.clone()
    } else {
        None
    };
    Ok(Inferred::with_known(data.dtype, out, known))
}

/// Transpose by a permutation of `0..rank`.
pub(super) fn transpose(perm: &[usize], inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    let shape = &inputs[0].ty.shape;
    let mut seen = vec![false; shape.rank()];
    let valid = perm.len() == shape.rank()
        && perm
            .iter()
            .all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
    if !valid {
        return Err(format!(
            "perm {perm:?} is not a permutation of 0..{} for input {shape}",
            shape.rank()
        ));
    }
    let dims = perm.iter().map(|&p| shape.dims()[p].clone()).collect();
    Ok(Inferred::new(inputs[0].ty.dtype, Shape(dims)))
}

/// Squeeze the listed size-1 axes (empty: every known-1 dim).
pub(super) fn squeeze(
    axes: &[i64],
    inputs: &[&ValueInfo],
    ctx: &InferCtx,
) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    let shape = &inputs[0].ty.shape;
    let one = Dim::known(1);
    let axes = if axes.is_empty() {
        // the run drops every dim that is 1 then: only known dims say which
        if let Some(d) = shape.dims().iter().find(|d| !d.is_known()) {
            return Err(format!(
                "squeeze without axes of {shape}: whether {d} is 1 is known only at run time; give the axes"
            ));
        }
        (0..shape.rank())
            .filter(|&i| shape.dims()[i] == one)
            .collect()
    } else {
        norm_axes(axes, shape.rank())?
    };
    // a dim inference left unknown may be 1: the run checks it
    if let Some(&bad) = axes
        .iter()
        .find(|&&a| shape.dims()[a] != one && !ctx.is_fresh(&shape.dims()[a]))
    {
        return Err(format!(
            "axis {bad} of {shape} has dim {}, expected 1",
            shape.dims()[bad]
        ));
    }
    let dims: Vec<Dim> = shape
        .dims()
        .iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, d)| d.clone())
        .collect();
    Ok(Inferred::with_known(
        inputs[0].ty.dtype,
        Shape(dims),
        inputs[0].known.clone(),
    ))
}

/// Unsqueeze: insert size-1 dims at output positions `axes`.
pub(super) fn unsqueeze(axes: &[i64], inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    let shape = &inputs[0].ty.shape;
    let rank = shape.rank() + axes.len();
    if rank > super::MAX_RANK {
        return Err(format!(
            "output rank {rank} exceeds the limit {}",
            super::MAX_RANK
        ));
    }
    let axes = norm_axes(axes, rank)?;
    let mut rest = shape.dims().iter();
    let dims = (0..rank)
        .map(|i| {
            if axes.contains(&i) {
                Some(Dim::known(1))
            } else {
                rest.next().cloned()
            }
        })
        .collect::<Option<Vec<Dim>>>()
        .ok_or_else(|| format!("unsqueeze of {shape} at {axes:?} is inconsistent"))?;
    Ok(Inferred::with_known(
        inputs[0].ty.dtype,
        Shape(dims),
        inputs[0].known.clone(),
    ))
}

/// Flatten to `[prod(dims[..axis]), prod(dims[axis..])]`, `axis` in `-rank..=rank`.
pub(super) fn flatten(axis: i64, inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    let shape = &inputs[0].ty.shape;
    // axis in -r..=r; a negative one counts from the end of the input (not of
    // rank + 1, as an unsqueeze position would)
    let r = shape.rank() as i64;
    if axis < -r || axis > r {
        return Err(format!(
            "axis {axis} is out of range for {shape}, expected {} to {r}",
            -r
        ));
    }
    let axis = if axis < 0 { axis + r } else { axis } as usize;
    let head = numel(&Shape(shape.dims()[..axis].to_vec()))?;
    let tail = numel(&Shape(shape.dims()[axis..].to_vec()))?;
    Ok(Inferred::new(inputs[0].ty.dtype, Shape(vec![head, tail])))
}

/// Concat along an axis: other dims equal, the axis dims summed.
pub(super) fn concat(axis: i64, inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, usize::MAX)?;
    let first = &inputs[0].ty.shape;
    let rank = first.rank();
    let axis = norm_axis(axis, rank)?;
    let mut dims = first.dims().to_vec();
    for (idx, info) in inputs.iter().enumerate().skip(1) {
        expect_same_dtype(inputs, idx)?;
        let s = &info.ty.shape;
        let mismatch =
            s.rank() != rank || (0..rank).any(|i| i != axis && s.dims()[i] != first.dims()[i]);
        if mismatch {
            return Err(format!(
                "input {idx} has shape {s}, expected {first} except along axis {axis}"
            ));
        }
        dims[axis] = dims[axis].clone() + s.dims()[axis].clone();
    }
    let known = if rank == 1 {
        let parts: Option<Vec<&Vec<Dim>>> = inputs.iter().map(|i| i.known.as_ref()).collect();
        parts.map(|p| p.into_iter().flatten().cloned().collect())
    } else {
        None
    };
    Ok(Inferred::with_known(inputs[0].ty.dtype, Shape(dims), known))
}

/// Split along an axis into pieces of the given sizes.
pub(super) fn split(
    axis: i64,
    sizes: &[i64],
    inputs: &[&ValueInfo],
) -> Result<Vec<Inferred>, String> {
    arity(inputs, 1, 1)?;
    let shape = &inputs[0].ty.shape;
    let axis = norm_axis(axis, shape.rank())?;
    if sizes.is_empty() || sizes.iter().any(|&s| s < 0) {
        return Err(format!("sizes {sizes:?} must be non-empty and >= 0"));
    }
    let total = sizes
        .iter()
        .try_fold(0i64, |a, &s| a.checked_add(s))
        .ok_or("split sizes overflow")?;
    let dim = &shape.dims()[axis];
    if dim.as_known().is_some_and(|n| n != total) {
        return Err(format!(
            "sizes {sizes:?} sum to {total}, expected {dim} (axis {axis} of {shape})"
        ));
    }
    let out = sizes
        .iter()
        .map(|&s| {
            let mut dims = shape.dims().to_vec();
            dims[axis] = Dim::known(s);
            Inferred::new(inputs[0].ty.dtype, Shape(dims))
        })
        .collect();
    Ok(out)
}

/// ONNX slice length on a known dim, with clamping (`i128` so no overflow).
fn slice_len(dim: i64, start: i64, end: i64, step: i64) -> (i64, i64) {
    if dim <= 0 {
        return (0, 0);
    }
    let (d, step) = (dim as i128, step as i128);
    let wrap = |v: i64| if v < 0 { v as i128 + d } else { v as i128 };
    let (mut s, mut e) = (wrap(start), wrap(end));
    let len = if step > 0 {
        s = s.clamp(0, d);
        e = e.clamp(0, d);
        (e - s + step - 1).div_euclid(step).max(0)
    } else {
        s = s.clamp(0, d - 1);
        e = e.clamp(-1, d - 1);
        (s - e - step - 1).div_euclid(-step).max(0)
    };
    // The clamped start is in 0..=dim, the length in 0..=dim: both fit in i64.
    (s as i64, len as i64)
}

/// Slice length on a symbolic dim: the whole dim (a full forward or reversed
/// range) keeps it; every other window is a fresh dim. A window's length
/// depends on how the dim compares with its bounds (`x[:3]` has `min(n, 3)`
/// rows, `x[2:]` has `max(n - 2, 0)`), which a polynomial cannot state, and
/// symbols may bind to any size, zero included.
fn slice_symbolic(dim: &Dim, start: i64, end: i64, step: i64, ctx: &mut InferCtx) -> Dim {
    let big = i64::MAX / 2;
    match step {
        1 if start == 0 && end >= big => dim.clone(),
        -1 if start >= big && end <= -big => dim.clone(),
        _ => ctx.fresh_dim(),
    }
}

/// Strided slice with ONNX semantics (negative indices, clamping, negative steps).
pub(super) fn slice(
    starts: &[i64],
    ends: &[i64],
    axes: &[i64],
    steps: &[i64],
    inputs: &[&ValueInfo],
    ctx: &mut InferCtx,
) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    let shape = &inputs[0].ty.shape;
    let n = starts.len();
    if ends.len() != n
        || (!axes.is_empty() && axes.len() != n)
        || (!steps.is_empty() && steps.len() != n)
    {
        return Err(format!(
            "starts, ends, axes, steps have lengths {}, {}, {}, {}; expected equal (axes, steps may be empty)",
            n,
            ends.len(),
            axes.len(),
            steps.len()
        ));
    }
    let axes = if axes.is_empty() {
        norm_axes(&(0..n as i64).collect::<Vec<_>>(), shape.rank())?
    } else {
        norm_axes(axes, shape.rank())?
    };
    let step_of = |i: usize| steps.get(i).copied().unwrap_or(1);
    if let Some(i) = (0..n).find(|&i| step_of(i) == 0) {
        return Err(format!("step {i} is 0, expected a non-zero step"));
    }
    let mut dims = shape.dims().to_vec();
    let mut known = inputs[0].known.clone();
    for (i, &axis) in axes.iter().enumerate() {
        let (start, end, step) = (starts[i], ends[i], step_of(i));
        dims[axis] = match dims[axis].as_known() {
            Some(d) => Dim::known(slice_len(d, start, end, step).1),
            None => slice_symbolic(&dims[axis], start, end, step, ctx),
        };
        if let Some(k) = known.take() {
            let (first, len) = slice_len(k.len() as i64, start, end, step);
            let picked = (0..len).map(|j| {
                k.get((first as i128 + j as i128 * step as i128) as usize)
                    .cloned()
            });
            known = picked.collect();
        }
    }
    Ok(Inferred::with_known(inputs[0].ty.dtype, Shape(dims), known))
}

/// The length and known contents of a rank-1 integer operand of `dyn_slice`.
fn bounds_operand(inputs: &[&ValueInfo], idx: usize) -> Result<(usize, Option<Vec<Dim>>), String> {
    expect_dtype(inputs, idx, &INTEGER)?;
    expect_rank(inputs, idx, 1)?;
    let len_dim = &inputs[idx].ty.shape.dims()[0];
    let len = len_dim
        .as_known()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= MAX_RANK)
        .ok_or_else(|| {
            format!("input {idx} has length {len_dim}, expected a known length up to {MAX_RANK}")
        })?;
    let known = inputs[idx].known.clone().filter(|k| k.len() == len);
    Ok((len, known))
}

/// `dyn_slice`: with bounds whose contents are all known integers, exactly
/// [`slice`]; otherwise each sliced axis keeps its dim when the window provably
/// covers it (start 0, step 1, end the dim itself or beyond any size) and gets a
/// fresh dim else (its length depends on values only the run sees). Unknown axes
/// make every dim fresh.
pub(super) fn dyn_slice(inputs: &[&ValueInfo], ctx: &mut InferCtx) -> Result<Inferred, String> {
    arity(inputs, 3, 5)?;
    let mut operands = Vec::with_capacity(4);
    for idx in 1..inputs.len() {
        operands.push(bounds_operand(inputs, idx)?);
    }
    let n = operands[0].0;
    if let Some((i, (len, _))) = operands.iter().enumerate().find(|(_, (len, _))| *len != n) {
        return Err(format!(
            "input {} has {len} elements, expected {n} (as starts)",
            i + 1
        ));
    }
    let ints = |i: usize| -> Option<Vec<i64>> {
        operands.get(i).map_or(Some(Vec::new()), |(_, known)| {
            known.as_ref()?.iter().map(Dim::as_known).collect()
        })
    };
    if let (Some(starts), Some(ends), Some(axes), Some(steps)) =
        (ints(0), ints(1), ints(2), ints(3))
    {
        return slice(&starts, &ends, &axes, &steps, &inputs[..1], ctx);
    }
    let shape = &inputs[0].ty.shape;
    let Some(axes) = ints(2) else {
        let dims = (0..shape.rank()).map(|_| ctx.fresh_dim()).collect();
        return Ok(Inferred::new(inputs[0].ty.dtype, Shape(dims)));
    };
    let axes = if axes.is_empty() {
        norm_axes(&(0..n as i64).collect::<Vec<_>>(), shape.rank())?
    } else {
        norm_axes(&axes, shape.rank())?
    };
    let element = |i: usize, j: usize| {
        operands
            .get(i)
            .and_then(|(_, k)| k.as_ref())
            .map(|k| k[j].clone())
    };
    let mut dims = shape.dims().to_vec();
    for (j, &axis) in axes.iter().enumerate() {
        let step = if operands.len() > 3 {
            element(3, j)
        } else {
            Some(Dim::known(1))
        };
        let big = i64::MAX / 2;
        let whole = step == Some(Dim::known(1))
            && element(0, j) == Some(Dim::known(0))
            && element(1, j)
                .is_some_and(|end| end == dims[axis] || end.as_known().is_some_and(|e| e >= big));
        if !whole {
            dims[axis] = ctx.fresh_dim();
        }
    }
    Ok(Inferred::new(inputs[0].ty.dtype, Shape(dims)))
}

/// Gather along an axis: `data[..axis] + indices.shape + data[axis+1..]`.
pub(super) fn gather(axis: i64, inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 2, 2)?;
    expect_dtype(inputs, 1, &INTEGER)?;
    let data = &inputs[0].ty.shape;
    let indices = &inputs[1].ty.shape;
    let axis = norm_axis(axis, data.rank())?;
    let mut dims = data.dims()[..axis].to_vec();
    dims.extend(indices.dims().iter().cloned());
    dims.extend(data.dims()[axis + 1..].iter().cloned());
    if dims.len() > MAX_RANK {
        return Err(format!(
            "output rank {} exceeds the limit {MAX_RANK}",
            dims.len()
        ));
    }
    let mut known = None;
    if let (Some(k), Some(idx)) = (inputs[0].known.as_ref(), known_ints(inputs[1])) {
        let len = k.len() as i64;
        let mut picked = Vec::with_capacity(idx.len());
        for i in idx {
            let j = if i < 0 { i.wrapping_add(len) } else { i };
            if !(0..len).contains(&j) {
                return Err(format!(
                    "index {i} is out of range for axis 0 of size {len}"
                ));
            }
            picked.push(k[j as usize].clone());
        }
        known = Some(picked);
    }
    Ok(Inferred::with_known(inputs[0].ty.dtype, Shape(dims), known))
}

/// Expand: bidirectional broadcast of the input with the target shape.
pub(super) fn expand(inputs: &[&ValueInfo], ctx: &mut InferCtx) -> Result<Inferred, String> {
    arity(inputs, 2, 2)?;
    let x = &inputs[0].ty.shape;
    let (len, known) = shape_operand(inputs, 1)?;
    let shape = match known {
        Some(target) => broadcast(x, &Shape(target))?,
        None => {
            let rank = len.max(x.rank());
            let one = Dim::known(1);
            let dims = (0..rank)
                .map(
                    |i| match (i + x.rank()).checked_sub(rank).map(|j| &x.dims()[j]) {
                        Some(d) if *d != one => d.clone(),
                        _ => ctx.fresh_dim(),
                    },
                )
                .collect();
            Shape(dims)
        }
    };
    Ok(Inferred::new(inputs[0].ty.dtype, shape))
}

/// Tile: each dim times its repeat count.
pub(super) fn tile(inputs: &[&ValueInfo], ctx: &mut InferCtx) -> Result<Inferred, String> {
    arity(inputs, 2, 2)?;
    let x = &inputs[0].ty.shape;
    let (len, known) = shape_operand(inputs, 1)?;
    if len != x.rank() {
        return Err(format!(
            "repeats have length {len}, expected the input rank {} of {x}",
            x.rank()
        ));
    }
    let dims = match known {
        Some(reps) => {
            if let Some(r) = reps.iter().find(|r| r.as_known().is_some_and(|n| n < 0)) {
                return Err(format!("repeat {r} is negative, expected >= 0"));
            }
            x.dims()
                .iter()
                .zip(reps)
                .map(|(d, r)| {
                    d.checked_mul(&r)
                        .ok_or_else(|| format!("dim {d} x repeat {r} is too large"))
                })
                .collect::<Result<Vec<Dim>, String>>()?
        }
        None => (0..len).map(|_| ctx.fresh_dim()).collect(),
    };
    Ok(Inferred::new(inputs[0].ty.dtype, Shape(dims)))
}

/// Constant padding: `dim + begin + end` per axis.
pub(super) fn pad(pads: &[i64], inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    let x = &inputs[0].ty.shape;
    let rank = x.rank();
    if pads.len() != 2 * rank {
        return Err(format!(
            "pads have length {}, expected {} (2 x rank of {x})",
            pads.len(),
            2 * rank
        ));
    }
    let dims = (0..rank)
        .map(|i| x.dims()[i].clone() + Dim::known(pads[i]) + Dim::known(pads[rank + i]))
        .collect();
    let out = Shape(dims);
    check_nonnegative(&out, "padded output")?;
    Ok(Inferred::new(inputs[0].ty.dtype, out))
}

/// `shape`: dims `start..end` (clamped) as an i64 vector whose contents are known.
pub(super) fn shape_of(
    start: i64,
    end: Option<i64>,
    inputs: &[&ValueInfo],
) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    let dims = inputs[0].ty.shape.dims();
    let r = dims.len() as i64;
    let clamp = |v: i64| (if v < 0 { v.saturating_add(r) } else { v }).clamp(0, r) as usize;
    let (s, e) = (clamp(start), clamp(end.unwrap_or(r)));
    let picked: Vec<Dim> = if s < e {
        dims[s..e].to_vec()
    } else {
        Vec::new()
    };
    Ok(Inferred::with_known(
        DType::I64,
        Shape(vec![Dim::from(picked.len())]),
        Some(picked),
    ))
}

/// `constant`: the tensor's type; small integer vectors are known.
pub(super) fn constant(value: &Tensor) -> Inferred {
    let shape = Shape::known(value.shape());
    let known = match value.dtype() {
        _ if value.shape().len() > 1 || value.numel() > MAX_KNOWN_ELEMS => None,
        DType::I64 => value
            .as_slice::<i64>()
            .ok()
            .map(|s| s.iter().map(|&v| Dim::known(v)).collect()),
        DType::I32 => value
            .as_slice::<i32>()
            .ok()
            .map(|s| s.iter().map(|&v| Dim::known(v as i64)).collect()),
        _ => None,
    };
    Inferred::with_known(value.dtype(), shape, known)
}

/// `constant_of_shape`: the fill value's dtype, the shape input's contents.
pub(super) fn constant_of_shape(
    value: &Tensor,
    inputs: &[&ValueInfo],
    ctx: &mut InferCtx,
) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    if value.numel() != 1 {
        return Err(format!(
            "fill value has {} elements, expected 1",
            value.numel()
        ));
    }
    let (len, known) = shape_operand(inputs, 0)?;
    let shape = Shape(known.unwrap_or_else(|| (0..len).map(|_| ctx.fresh_dim()).collect()));
    check_nonnegative(&shape, "output")?;
    Ok(Inferred::new(value.dtype(), shape))
}

/// `range(start, limit, delta)`: length `max(0, ceil((limit - start) / delta))`.
/// With known integer bounds the length is known; with symbolic ones it is
/// proven when `(limit - start) / delta` is a polynomial that cannot be negative
/// (`range(0, seq, 1)` has length `seq`, `range(seq - 1, -1, -1)` too); otherwise
/// it is a fresh dim.
pub(super) fn range(inputs: &[&ValueInfo], ctx: &mut InferCtx) -> Result<Inferred, String> {
    arity(inputs, 3, 3)?;
    let dtype = expect_dtype(inputs, 0, &super::NUMERIC)?;
    for idx in 0..3 {
        expect_same_dtype(inputs, idx)?;
        expect_rank(inputs, idx, 0)?;
    }
    let scalar = |i: usize| {
        let known = inputs[i].known.as_ref()?;
        (known.len() == 1).then(|| known[0].clone())
    };
    let len = match (scalar(0), scalar(1), scalar(2).and_then(|d| d.as_known())) {
        (_, _, Some(0)) => return Err("delta is 0, expected a non-zero delta".into()),
        (Some(start), Some(limit), Some(delta)) => match (start.as_known(), limit.as_known()) {
            (Some(s), Some(l)) => {
                // ceil(x / d) with d made positive: (x + d - 1) floor-divided by d.
                let (x, d) = (
                    (l as i128 - s as i128) * (delta as i128).signum(),
                    (delta as i128).abs(),
                );
                let n = (x + d - 1).div_euclid(d).max(0);
                Dim::known(i64::try_from(n).map_err(|_| "range length overflows")?)
            }
            _ => {
                let span = if delta > 0 {
                    limit - start
                } else {
                    start - limit
                };
                span.div_exact(delta.unsigned_abs().try_into().unwrap_or(i64::MAX))
                    .filter(Dim::is_nonnegative)
                    .unwrap_or_else(|| ctx.fresh_dim())
            }
        },
        _ => ctx.fresh_dim(),
    };
    Ok(Inferred::new(dtype, Shape(vec![len])))
}
