//! Index-pattern ops composed from reshapes, transposes, comparisons and
//! selects: DepthToSpace, SpaceToDepth, Trilu, OneHot, EyeLike and
//! ReverseSequence (a `gather_elements` by computed time indices).
//!
//! DepthToSpace/SpaceToDepth need known C, H and W (the batch may be
//! symbolic); Trilu and EyeLike need the last two dims known (their masks are
//! constants); OneHot needs a constant `depth`.
//!
//! **Invariant:** each returns exactly the ONNX op's output, elements taken
//! from the input (or from `values`) without arithmetic.

use crate::node::{NodeCx, NodeResult};
use crate::tensor::{dtype_of, unsupported_dtype};
use shapejit_ir::{BinaryOp, DType, Op, Tensor, ValueId};

/// The known dims of `x`, or an unsupported error naming `what` needs them.
fn known_dims(cx: &NodeCx, x: ValueId, from: usize, what: &str) -> NodeResult<Vec<i64>> {
    let dims = cx.ty(x).shape.dims();
    dims[from.min(dims.len())..]
        .iter()
        .map(|d| d.as_known())
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| cx.unsupported(format!("{what} over symbolic dims {dims:?}")))
}

/// Reshape to `first`, transpose by `perm`, reshape to `last`.
fn shuffle(
    cx: &mut NodeCx,
    x: ValueId,
    first: Vec<i64>,
    perm: Vec<usize>,
    last: Vec<i64>,
) -> NodeResult<ValueId> {
    let t = cx.const_i64s(first);
    let r = cx.op(Op::Reshape { allowzero: false }, &[x, t])?;
    let p = cx.op(Op::Transpose { perm }, &[r])?;
    let t = cx.const_i64s(last);
    cx.op(Op::Reshape { allowzero: false }, &[p, t])
}

/// The `blocksize` attribute and the known `[C, H, W]` of a rank-4 input.
fn block_geometry(cx: &NodeCx, x: ValueId) -> NodeResult<(i64, [i64; 3])> {
    if cx.rank(x) != 4 {
        return Err(cx.bad(format!("input rank {} != 4", cx.rank(x))));
    }
    let b = cx
        .attr_int("blocksize")?
        .filter(|&b| b > 0)
        .ok_or_else(|| cx.bad("attribute 'blocksize' must be a positive integer"))?;
    let d = known_dims(cx, x, 1, "a block rearrangement")?;
    Ok((b, [d[0], d[1], d[2]]))
}

/// `DepthToSpace(blocksize, mode = DCR | CRD)`.
pub fn depth_to_space(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let (b, [c, h, w]) = block_geometry(cx, x)?;
    if c % (b * b) != 0 {
        return Err(cx.bad(format!(
            "channels {c} not divisible by blocksize² {}",
            b * b
        )));
    }
    let cb = c / (b * b);
    let last = vec![0, cb, h * b, w * b];
    let y = match cx.attr_string("mode")?.as_deref() {
        None | Some("DCR") => {
            shuffle(cx, x, vec![0, b, b, cb, h, w], vec![0, 3, 4, 1, 5, 2], last)?
        }
        Some("CRD") => shuffle(cx, x, vec![0, cb, b, b, h, w], vec![0, 1, 4, 2, 5, 3], last)?,
        Some(other) => return Err(cx.bad(format!("mode = '{other}', expected DCR or CRD"))),
    };
    Ok(vec![y])
}

/// `SpaceToDepth(blocksize, mode = DCR | CRD)` (`mode` from version 28),
/// the inverse of DepthToSpace in the same mode.
pub fn space_to_depth(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let (b, [c, h, w]) = block_geometry(cx, x)?;
    if h % b != 0 || w % b != 0 {
        return Err(cx.bad(format!(
            "spatial dims {h}x{w} not divisible by blocksize {b}"
        )));
    }
    let perm = match cx.attr_string("mode")?.as_deref() {
        None | Some("DCR") => vec![0, 3, 5, 1, 2, 4],
        Some("CRD") => vec![0, 1, 3, 5, 2, 4],
        Some(other) => return Err(cx.bad(format!("mode = '{other}', expected DCR or CRD"))),
    };
    let y = shuffle(
        cx,
        x,
        vec![0, c, h / b, b, w / b, b],
        perm,
        vec![0, c * b * b, h / b, w / b],
    )?;
    Ok(vec![y])
}

/// A constant `[m, n]` bool mask, `keep(i, j)` per element.
fn mask(cx: &mut NodeCx, m: i64, n: i64, keep: impl Fn(i64, i64) -> bool) -> NodeResult<ValueId> {
    let values: Vec<bool> = (0..m)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .map(|(i, j)| keep(i, j))
        .collect();
    let t =
        Tensor::from_vec(values, &[m as usize, n as usize]).map_err(|e| cx.bad(e.to_string()))?;
    Ok(cx.constant(t))
}

/// The optional constant scalar `k` input (default 0).
fn diagonal(cx: &NodeCx, input: usize) -> NodeResult<i64> {
    match cx.opt_input(input)? {
        None => Ok(0),
        Some(v) => match cx.const_ints(v, "k")?.as_slice() {
            [k] => Ok(*k),
            other => Err(cx.bad(format!("k must hold one value, got {other:?}"))),
        },
    }
}

/// `Trilu(x, k = 0; upper = 1)`: keeps `j − i ≥ k` (upper) or `j − i ≤ k`
/// (lower) of the last two dims, zeros elsewhere.
pub fn trilu(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let rank = cx.rank(x);
    if rank < 2 {
        return Err(cx.bad(format!("input rank {rank} < 2")));
    }
    let upper = cx.int_or("upper", 1)? != 0;
    let d = known_dims(cx, x, rank - 2, "Trilu")?;
    if let Some(k) = cx.opt_input(1)?
        && cx.known_ints(k).is_none()
    {
        // k computed at run time: compare the constant offsets j − i with it
        let offsets: Vec<i64> = (0..d[0])
            .flat_map(|i| (0..d[1]).map(move |j| j - i))
            .collect();
        let offsets = Tensor::from_vec(offsets, &[d[0] as usize, d[1] as usize])
            .map_err(|e| cx.bad(e.to_string()))?;
        let offsets = cx.constant(offsets);
        let k = if cx.ty(k).dtype == DType::I64 {
            k
        } else {
            cx.op(Op::Cast { to: DType::I64 }, &[k])?
        };
        let cmp = if upper { BinaryOp::Ge } else { BinaryOp::Le };
        let keep = cx.bin(cmp, offsets, k)?;
        let zero = cx.scalar_like(x, 0.0);
        return Ok(vec![cx.op(Op::Where, &[keep, x, zero])?]);
    }
    let k = diagonal(cx, 1)?;
    let keep = mask(
        cx,
        d[0],
        d[1],
        |i, j| {
            if upper { j - i >= k } else { j - i <= k }
        },
    )?;
    let zero = cx.scalar_like(x, 0.0);
    Ok(vec![cx.op(Op::Where, &[keep, x, zero])?])
}

/// `EyeLike(x; dtype, k = 0)`: ones on diagonal `k` of a 2-D shape.
pub fn eye_like(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    if cx.rank(x) != 2 {
        return Err(cx.bad(format!("input rank {} != 2", cx.rank(x))));
    }
    let to = match cx.attr_int("dtype")? {
        None => cx.ty(x).dtype,
        Some(code) => i32::try_from(code)
            .ok()
            .and_then(dtype_of)
            .ok_or_else(|| cx.unsupported(unsupported_dtype(code as i32)))?,
    };
    let k = cx.int_or("k", 0)?;
    let d = known_dims(cx, x, 0, "EyeLike")?;
    let eye = mask(cx, d[0], d[1], |i, j| j - i == k)?;
    Ok(vec![cx.op(Op::Cast { to }, &[eye])?])
}

/// `OneHot(indices, depth, values = [off, on]; axis = -1)`: negative indices
/// count from `depth`; an index outside `[-depth, depth)` gives all `off`.
pub fn one_hot(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (indices, depth_in, values) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let depth = match cx.const_tensor(depth_in).map(Tensor::to_f64_vec).as_deref() {
        Some([d]) if *d >= 1.0 && *d <= i64::MAX as f64 => Some(*d as i64),
        Some(other) => return Err(cx.bad(format!("depth must be one value ≥ 1, got {other:?}"))),
        // computed at run time: a range of that length
        None => None,
    };
    let rank = cx.rank(indices) + 1;
    let axis_attr = cx.int_or("axis", -1)?;
    let axis = cx.axis(axis_attr, rank, "axis")?;
    let idx = if cx.ty(indices).dtype == DType::I64 {
        indices
    } else {
        cx.op(Op::Cast { to: DType::I64 }, &[indices])?
    };
    let zero = cx.const_scalar(DType::I64, 0.0);
    let d = match depth {
        Some(depth) => cx.const_scalar(DType::I64, depth as f64),
        None => {
            let d = cx.op(Op::Cast { to: DType::I64 }, &[depth_in])?;
            let scalar = cx.const_i64s(Vec::new());
            cx.op(Op::Reshape { allowzero: false }, &[d, scalar])?
        }
    };
    let negative = cx.bin(BinaryOp::Lt, idx, zero)?;
    let wrapped = cx.bin(BinaryOp::Add, idx, d)?;
    let idx = cx.op(Op::Where, &[negative, wrapped, idx])?;
    let idx = cx.op(
        Op::Unsqueeze {
            axes: vec![axis as i64],
        },
        &[idx],
    )?;
    let range = match depth {
        Some(depth) => {
            let mut shape = vec![1usize; rank - axis];
            shape[0] = depth as usize;
            let range = Tensor::from_vec((0..depth).collect::<Vec<i64>>(), &shape)
                .map_err(|e| cx.bad(e.to_string()))?;
            cx.constant(range)
        }
        None => {
            let one = cx.const_scalar(DType::I64, 1.0);
            let range = cx.op(Op::Range, &[zero, d, one])?;
            let mut shape = vec![1i64; rank - axis];
            shape[0] = -1;
            let shape = cx.const_i64s(shape);
            cx.op(Op::Reshape { allowzero: false }, &[range, shape])?
        }
    };
    let hit = cx.bin(BinaryOp::Eq, idx, range)?;
    let pick = |cx: &mut NodeCx, i: i64| {
        let at = cx.constant(Tensor::scalar(i));
        cx.op(Op::Gather { axis: 0 }, &[values, at])
    };
    let (off, on) = (pick(cx, 0)?, pick(cx, 1)?);
    Ok(vec![cx.op(Op::Where, &[hit, on, off])?])
}

/// `ReverseSequence(x, sequence_lens; batch_axis = 1, time_axis = 0)`: along
/// the time axis, batch `b`'s first `lens[b]` steps reversed, the rest kept:
/// a `gather_elements` by `t < lens[b] ? lens[b] - 1 - t : t`.
pub fn reverse_sequence(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, lens) = (cx.input(0)?, cx.input(1)?);
    let rank = cx.rank(x);
    let batch = cx.int_or("batch_axis", 1)?;
    let time = cx.int_or("time_axis", 0)?;
    let (batch, time) = (
        cx.axis(batch, rank, "batch_axis")?,
        cx.axis(time, rank, "time_axis")?,
    );
    if batch == time || rank < 2 {
        return Err(cx.bad(format!(
            "batch_axis {batch} and time_axis {time} of a rank-{rank} input"
        )));
    }
    let along = |cx: &mut NodeCx, v: ValueId, axis: usize| -> NodeResult<ValueId> {
        let mut shape = vec![1i64; rank];
        shape[axis] = -1;
        let s = cx.const_i64s(shape);
        cx.op(Op::Reshape { allowzero: false }, &[v, s])
    };
    let lens = if cx.ty(lens).dtype == DType::I64 {
        lens
    } else {
        cx.op(Op::Cast { to: DType::I64 }, &[lens])?
    };
    let dims = cx.shape_of(x)?;
    let at = cx.const_scalar(DType::I64, time as f64);
    let t_len = cx.op(Op::Gather { axis: 0 }, &[dims, at])?;
    let zero = cx.const_scalar(DType::I64, 0.0);
    let one = cx.const_scalar(DType::I64, 1.0);
    let t = cx.op(Op::Range, &[zero, t_len, one])?;
    let (t, l) = (along(cx, t, time)?, along(cx, lens, batch)?);
    let inside = cx.bin(BinaryOp::Lt, t, l)?;
    let last = cx.bin(BinaryOp::Sub, l, one)?;
    let back = cx.bin(BinaryOp::Sub, last, t)?;
    let src = cx.op(Op::Where, &[inside, back, t])?;
    let src = cx.op(Op::Expand, &[src, dims])?;
    Ok(vec![
        cx.op(Op::GatherElements { axis: time as i64 }, &[x, src])?,
    ])
}
