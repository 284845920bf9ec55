//! Neural-network ops: MatMul, Gemm, Softmax/LogSoftmax (the flatten-to-2-D
//! form before opset 13, one axis from 13), LayerNormalization,
//! BatchNormalization (inference), Conv, MaxPool,
//! AveragePool (`auto_pad`, `ceil_mode`,
//! `count_include_pad`, dilations) and global pools.
//!
//! 1-D convolutions and pools (`[N, C, W]`) run as 2-D ones over a size-1 H
//! axis (unsqueeze, op, squeeze); 3-D ones are unsupported.
//!
//! **Invariant:** window geometry (kernel, strides, dilations, pads) is
//! validated here: positive sizes, one value per spatial dim, no overflow.

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{BinaryOp, Op, ReduceOp, UnaryOp, ValueId, Window2d};

/// `MatMul`.
pub fn matmul(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    Ok(vec![cx.op(Op::MatMul, &[a, b])?])
}

/// `Gemm(alpha, beta, transA, transB)`, `C` optional (required before opset 11
/// by the spec, accepted absent here).
pub fn gemm(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    cx.attrs.ignore("broadcast");
    let op = Op::Gemm {
        alpha: cx.float_or("alpha", 1.0)?,
        beta: cx.float_or("beta", 1.0)?,
        trans_a: cx.int_or("transA", 0)? != 0,
        trans_b: cx.int_or("transB", 0)? != 0,
    };
    let inputs = match cx.opt_input(2)? {
        Some(c) => vec![a, b, c],
        None => vec![a, b],
    };
    Ok(vec![cx.op(op, &inputs)?])
}

/// `Softmax` / `LogSoftmax`. From opset 13 one axis (default -1); before, the
/// input is seen as 2-D split at `axis` (default 1) — the same as one axis
/// when `axis` is the last dim, otherwise flatten, normalize, reshape back.
pub fn softmax(cx: &mut NodeCx, log: bool) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let make = |axis| {
        if log {
            Op::LogSoftmax { axis }
        } else {
            Op::Softmax { axis }
        }
    };
    if cx.opset() >= 13 {
        let axis = cx.int_or("axis", -1)?;
        return Ok(vec![cx.op(make(axis), &[x])?]);
    }
    let rank = cx.rank(x);
    let axis_attr = cx.int_or("axis", 1)?;
    let axis = if rank == 0 {
        0
    } else {
        cx.axis(axis_attr, rank, "axis")?
    };
    if rank == 0 || axis + 1 == rank {
        return Ok(vec![cx.op(make(-1), &[x])?]);
    }
    let shape = cx.shape_of(x)?;
    let flat = cx.op(Op::Flatten { axis: axis as i64 }, &[x])?;
    let norm = cx.op(make(-1), &[flat])?;
    Ok(vec![
        cx.op(Op::Reshape { allowzero: false }, &[norm, shape])?,
    ])
}

/// `LayerNormalization(axis = -1, epsilon = 1e-5)`; the optional mean and
/// inverse-std-dev outputs are not produced.
pub fn layer_norm(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, scale) = (cx.input(0)?, cx.input(1)?);
    let axis = cx.int_or("axis", -1)?;
    let epsilon = cx.float_or("epsilon", 1e-5)?;
    cx.attrs.ignore("stash_type");
    let mut inputs = vec![x, scale];
    inputs.extend(cx.opt_input(2)?);
    let y = cx.op(Op::LayerNorm { axis, epsilon }, &inputs)?;
    if !cx.wants_output(1) && !cx.wants_output(2) {
        return Ok(vec![y]);
    }
    // Mean and InvStdDev, over the normalized axes, kept as 1
    let rank = cx.rank(x);
    let first = cx.axis(axis, rank, "axis")?;
    let mean_over = |axes: &[usize]| Op::Reduce {
        op: ReduceOp::Mean,
        axes: axes.iter().map(|&a| a as i64).collect(),
        keepdims: true,
    };
    let axes: Vec<usize> = (first..rank).collect();
    let mean = cx.op(mean_over(&axes), &[x])?;
    let d = cx.bin(BinaryOp::Sub, x, mean)?;
    let sq = cx.bin(BinaryOp::Mul, d, d)?;
    let var = cx.op(mean_over(&axes), &[sq])?;
    let eps = cx.scalar_like(x, f64::from(epsilon));
    let v = cx.bin(BinaryOp::Add, var, eps)?;
    let sd = cx.un(UnaryOp::Sqrt, v)?;
    let inv = cx.un(UnaryOp::Reciprocal, sd)?;
    Ok(vec![y, mean, inv])
}

/// `BatchNormalization` in inference mode.
pub fn batch_norm(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let inputs = (0..5)
        .map(|i| cx.input(i))
        .collect::<NodeResult<Vec<_>>>()?;
    let epsilon = cx.float_or("epsilon", 1e-5)?;
    cx.attrs.ignore("momentum");
    if cx.int_or("is_test", 1)? == 0 && (1..5).any(|i| cx.wants_output(i)) {
        return Err(cx.unsupported("is_test = 0 with training outputs"));
    }
    if cx.int_or("spatial", 1)? == 0 {
        return Err(cx.unsupported("spatial = 0"));
    }
    if cx.int_or("training_mode", 0)? != 0 {
        return Err(cx.unsupported("training_mode = 1"));
    }
    let op = Op::BatchNorm {
        epsilon,
        activation: None,
    };
    Ok(vec![cx.op(op, &inputs)?])
}

/// Spatial geometry read from the attributes, for 1, 2 or 3 spatial dims.
struct Geometry {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    /// begins then ends
    pads: Vec<usize>,
}

fn positive(cx: &NodeCx, name: &str, values: Vec<i64>, n: usize) -> NodeResult<Vec<usize>> {
    if values.len() != n {
        return Err(cx.bad(format!(
            "attribute '{name}' has {} values for {n} spatial dims",
            values.len()
        )));
    }
    values
        .iter()
        .map(|&v| {
            usize::try_from(v)
                .ok()
                .filter(|&v| v > 0 || name == "pads" || name == "output_padding")
        })
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| {
            cx.bad(format!(
                "attribute '{name}' = {values:?} has an invalid value"
            ))
        })
}

/// The output size `auto_pad = SAME_*` keeps: `ceil(in / stride)` for a conv or
/// pool, `in · stride` for a transposed conv (given its `output_padding`).
#[derive(Clone, Copy)]
enum Same<'a> {
    Window,
    Transposed(&'a [usize]),
}

/// Reads `kernel_shape` (or `kernel` from the weight), `strides`, `dilations`,
/// `pads` and `auto_pad` for an input with `n` spatial dims.
fn geometry(
    cx: &NodeCx,
    x: ValueId,
    n: usize,
    kernel: Option<Vec<i64>>,
    same: Same,
) -> NodeResult<Geometry> {
    let kernel_attr = cx.attr_ints("kernel_shape")?;
    let kernel = kernel_attr
        .or(kernel)
        .ok_or_else(|| cx.bad("kernel_shape is required"))?;
    let kernel = positive(cx, "kernel_shape", kernel, n)?;
    let strides = positive(
        cx,
        "strides",
        cx.attr_ints("strides")?.unwrap_or(vec![1; n]),
        n,
    )?;
    let dilations = positive(
        cx,
        "dilations",
        cx.attr_ints("dilations")?.unwrap_or(vec![1; n]),
        n,
    )?;
    let explicit = cx.attr_ints("pads")?;
    let pads = match cx.attr_string("auto_pad")?.as_deref() {
        None | Some("NOTSET") => positive(cx, "pads", explicit.unwrap_or(vec![0; 2 * n]), 2 * n)?,
        Some("VALID") => vec![0; 2 * n],
        Some(mode @ ("SAME_UPPER" | "SAME_LOWER")) => {
            let dims = cx.ty(x).shape.dims();
            let mut pads = vec![0; 2 * n];
            for i in 0..n {
                let d = &dims[dims.len() - n + i];
                let size = d.as_known().ok_or_else(|| {
                    cx.unsupported(format!(
                        "auto_pad = {mode} over the symbolic spatial dim {d}"
                    ))
                })?;
                let size =
                    usize::try_from(size).map_err(|_| cx.bad(format!("spatial dim {size}")))?;
                let span = (kernel[i] - 1)
                    .checked_mul(dilations[i])
                    .and_then(|s| s.checked_add(1));
                let (covered, out) = match same {
                    // the windows of `out` outputs cover (out-1)·stride + span inputs
                    Same::Window => {
                        let out = size.div_ceil(strides[i]);
                        let covered = span.and_then(|s| {
                            out.saturating_sub(1)
                                .checked_mul(strides[i])?
                                .checked_add(s)
                        });
                        (covered, size)
                    }
                    // the full transposed output has stride·(in-1) + output_padding + span
                    Same::Transposed(output_padding) => {
                        let full = span.and_then(|s| {
                            size.saturating_sub(1)
                                .checked_mul(strides[i])?
                                .checked_add(output_padding[i])?
                                .checked_add(s)
                        });
                        (full, size.saturating_mul(strides[i]))
                    }
                };
                let total = covered
                    .ok_or_else(|| cx.bad("kernel, stride and dilation overflow"))?
                    .saturating_sub(out);
                let small = total / 2;
                let (begin, end) = if mode == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                pads[i] = begin;
                pads[i + n] = end;
            }
            pads
        }
        Some(other) => return Err(cx.unsupported(format!("auto_pad = '{other}'"))),
    };
    Ok(Geometry {
        kernel,
        strides,
        dilations,
        pads,
    })
}

impl Geometry {
    /// As a 2-D window; 1-D geometry gets a unit H axis, 3-D geometry gives
    /// its H and W part (see [`fold_depth`]).
    fn window(&self) -> Window2d {
        if self.kernel.len() == 3 {
            return Window2d {
                kernel: [self.kernel[1], self.kernel[2]],
                strides: [self.strides[1], self.strides[2]],
                pads: [self.pads[1], self.pads[2], self.pads[4], self.pads[5]],
                dilations: [self.dilations[1], self.dilations[2]],
            };
        }
        if self.kernel.len() == 1 {
            return Window2d {
                kernel: [1, self.kernel[0]],
                strides: [1, self.strides[0]],
                pads: [0, self.pads[0], 0, self.pads[1]],
                dilations: [1, self.dilations[0]],
            };
        }
        Window2d {
            kernel: [self.kernel[0], self.kernel[1]],
            strides: [self.strides[0], self.strides[1]],
            pads: [self.pads[0], self.pads[1], self.pads[2], self.pads[3]],
            dilations: [self.dilations[0], self.dilations[1]],
        }
    }
}

/// The number of spatial dims of an NC... input (1, 2 or 3), else unsupported.
fn spatial_dims(cx: &NodeCx, x: ValueId) -> NodeResult<usize> {
    match cx.rank(x) {
        3 => Ok(1),
        4 => Ok(2),
        5 => Ok(3),
        r => Err(cx.unsupported(format!(
            "input of rank {r} (only 1-D, 2-D and 3-D spatial inputs are supported)"
        ))),
    }
}

/// How [`fold_depth`] combines the 2-D results of the depth taps.
#[derive(Clone, Copy)]
enum Taps {
    /// sum them (convolution)
    Sum,
    /// their maximum (max pool)
    Max,
    /// their mean (average pool)
    Mean,
}

/// A 3-D conv or pool as 2-D ones: the input is padded along depth, and for
/// each depth tap `kd` the slab of depths `kd·dil + od·stride` (one per
/// output depth `od`) is folded into the batch (`[N·OD, C, H, W]`), run
/// through `tap(kd)` (the 2-D op over H and W), and the taps are combined;
/// the result is unfolded to `[N, C_out, OD, OH, OW]`. Needs the depth, the
/// channels, H and W known at load.
fn fold_depth(
    cx: &mut NodeCx,
    x: ValueId,
    geo: &Geometry,
    (pad_value, combine): (f32, Taps),
    mut tap: impl FnMut(&mut NodeCx, ValueId, usize) -> NodeResult<ValueId>,
) -> NodeResult<ValueId> {
    let dims: Vec<i64> = cx
        .ty(x)
        .shape
        .dims()
        .iter()
        .skip(1)
        .map(|d| d.as_known())
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| {
            cx.unsupported("a 3-D input whose channels and spatial dims are not known")
        })?;
    let (c, d, h, w) = (dims[0], dims[1], dims[2], dims[3]);
    let (pd0, pd1) = (geo.pads[0] as i64, geo.pads[3] as i64);
    let x = if pd0 + pd1 > 0 {
        let pads = vec![0, 0, pd0, 0, 0, 0, 0, pd1, 0, 0];
        cx.op(
            Op::Pad {
                pads,
                value: pad_value,
            },
            &[x],
        )?
    } else {
        x
    };
    let (kd, sd, dd) = (
        geo.kernel[0] as i64,
        geo.strides[0] as i64,
        geo.dilations[0] as i64,
    );
    let span = (kd - 1) * dd + 1;
    let padded = d + pd0 + pd1;
    if padded < span {
        return Err(cx.bad(format!("depth {d} is smaller than the window {span}")));
    }
    let od = (padded - span) / sd + 1;
    let out_size = |size: i64, i: usize| {
        let (k, s, dl) = (
            geo.kernel[i] as i64,
            geo.strides[i] as i64,
            geo.dilations[i] as i64,
        );
        let p = geo.pads[i] as i64 + geo.pads[i + 3] as i64;
        (size + p - ((k - 1) * dl + 1)) / s + 1
    };
    let (oh, ow) = (out_size(h, 1), out_size(w, 2));
    let fold = cx.const_i64s(vec![-1, c, h, w]);
    let mut acc: Option<ValueId> = None;
    for k in 0..kd {
        let start = k * dd;
        let slab = cx.op(
            Op::Slice {
                starts: vec![start],
                ends: vec![start + (od - 1) * sd + 1],
                axes: vec![2],
                steps: vec![sd],
            },
            &[x],
        )?;
        let t = cx.op(
            Op::Transpose {
                perm: vec![0, 2, 1, 3, 4],
            },
            &[slab],
        )?;
        let folded = cx.op(Op::Reshape { allowzero: false }, &[t, fold])?;
        let y = tap(cx, folded, k as usize)?;
        acc = Some(match acc {
            None => y,
            Some(a) => {
                let op = match combine {
                    Taps::Max => BinaryOp::Max,
                    Taps::Sum | Taps::Mean => BinaryOp::Add,
                };
                cx.bin(op, a, y)?
            }
        });
    }
    let mut y = acc.ok_or_else(|| cx.bad("empty depth kernel"))?;
    if let Taps::Mean = combine {
        let n = cx.scalar_like(y, kd as f64);
        y = cx.bin(BinaryOp::Div, y, n)?;
    }
    let c_out = cx
        .ty(y)
        .shape
        .dims()
        .get(1)
        .and_then(|d| d.as_known())
        .ok_or_else(|| cx.unsupported("a 3-D op whose output channels are not known"))?;
    let unfold = cx.const_i64s(vec![-1, od, c_out, oh, ow]);
    let y = cx.op(Op::Reshape { allowzero: false }, &[y, unfold])?;
    cx.op(
        Op::Transpose {
            perm: vec![0, 2, 1, 3, 4],
        },
        &[y],
    )
}

/// Depth tap `kd` of a 3-D conv weight: `w[:, :, kd]`.
fn weight_tap(cx: &mut NodeCx, w: ValueId, kd: usize) -> NodeResult<ValueId> {
    let k = kd as i64;
    let s = cx.op(
        Op::Slice {
            starts: vec![k],
            ends: vec![k + 1],
            axes: vec![2],
            steps: vec![1],
        },
        &[w],
    )?;
    cx.op(Op::Squeeze { axes: vec![2] }, &[s])
}

/// Runs a 2-D op on 1-D inputs by adding and then removing a unit H axis.
fn with_unit_h(
    cx: &mut NodeCx,
    n: usize,
    inputs: Vec<ValueId>,
    lift: usize,
    op: Op,
) -> NodeResult<Vec<ValueId>> {
    if n == 2 {
        return Ok(vec![cx.op(op, &inputs)?]);
    }
    if n == 3 {
        return Err(cx.unsupported(format!("{} over 3 spatial dims", op.name())));
    }
    let mut lifted = Vec::with_capacity(inputs.len());
    for (i, v) in inputs.into_iter().enumerate() {
        lifted.push(if i < lift {
            cx.op(Op::Unsqueeze { axes: vec![2] }, &[v])?
        } else {
            v
        });
    }
    let y = cx.op(op, &lifted)?;
    Ok(vec![cx.op(Op::Squeeze { axes: vec![2] }, &[y])?])
}

/// A conv weight's spatial dims (`w[2..]`), when all known.
fn weight_kernel(cx: &NodeCx, w: ValueId) -> Option<Vec<i64>> {
    let dims = cx.ty(w).shape.dims();
    dims.get(2..)?.iter().map(|d| d.as_known()).collect()
}

/// The `group` attribute (default 1), which must be positive.
fn group(cx: &NodeCx) -> NodeResult<usize> {
    usize::try_from(cx.int_or("group", 1)?)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| cx.bad("group must be positive"))
}

/// `Conv` (1-D or 2-D, groups, optional bias).
pub fn conv(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, w) = (cx.input(0)?, cx.input(1)?);
    let n = spatial_dims(cx, x)?;
    let kernel = weight_kernel(cx, w);
    let geo = geometry(cx, x, n, kernel, Same::Window)?;
    let groups = group(cx)?;
    let bias = cx.opt_input(2)?;
    let op = Op::Conv2d {
        window: geo.window(),
        groups,
        activation: None,
    };
    if n == 3 {
        // the bias joins the first depth tap only
        let y = fold_depth(cx, x, &geo, (0.0, Taps::Sum), |cx, slab, kd| {
            let wk = weight_tap(cx, w, kd)?;
            let mut inputs = vec![slab, wk];
            inputs.extend(bias.filter(|_| kd == 0));
            cx.op(op.clone(), &inputs)
        })?;
        return Ok(vec![y]);
    }
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    with_unit_h(cx, n, inputs, 2, op)
}

/// `ConvTranspose` (1-D or 2-D, groups, optional bias, `output_padding`;
/// `output_shape` when the spatial dims are known).
pub fn conv_transpose(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, w) = (cx.input(0)?, cx.input(1)?);
    let n = spatial_dims(cx, x)?;
    let kernel = weight_kernel(cx, w);
    let output_padding = match cx.attr_ints("output_padding")? {
        Some(v) => positive(cx, "output_padding", v, n)?,
        None => vec![0; n],
    };
    let mut geo = geometry(cx, x, n, kernel, Same::Transposed(&output_padding))?;
    if let Some(shape) = cx.attr_ints("output_shape")? {
        geo.pads = pads_for_output_shape(cx, x, &geo, &output_padding, &shape)?;
    }
    let groups = group(cx)?;
    let output_padding = if n == 1 {
        [0, output_padding[0]]
    } else {
        [output_padding[0], output_padding[1]]
    };
    let mut inputs = vec![x, w];
    inputs.extend(cx.opt_input(2)?);
    with_unit_h(
        cx,
        n,
        inputs,
        2,
        Op::ConvTranspose2d {
            window: geo.window(),
            groups,
            output_padding,
        },
    )
}

/// The pads that make a transposed conv's output `output_shape` (its last `n`
/// values are the spatial sizes): the full output minus the target, split as
/// ONNX says (the larger half at the end for `SAME_UPPER`, else at the start).
fn pads_for_output_shape(
    cx: &NodeCx,
    x: ValueId,
    geo: &Geometry,
    output_padding: &[usize],
    shape: &[i64],
) -> NodeResult<Vec<usize>> {
    let n = geo.kernel.len();
    if shape.len() < n {
        return Err(cx.bad(format!("output_shape {shape:?} has fewer than {n} dims")));
    }
    let target = &shape[shape.len() - n..];
    let upper = cx.attr_string("auto_pad")?.as_deref() == Some("SAME_UPPER");
    let dims = cx.ty(x).shape.dims().to_vec();
    let mut pads = vec![0; 2 * n];
    for i in 0..n {
        let d = &dims[dims.len() - n + i];
        let size = d
            .as_known()
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| {
                cx.unsupported(format!("output_shape over the symbolic spatial dim {d}"))
            })?;
        let full = (geo.kernel[i] - 1)
            .checked_mul(geo.dilations[i])
            .and_then(|s| {
                size.saturating_sub(1)
                    .checked_mul(geo.strides[i])?
                    .checked_add(output_padding[i])?
                    .checked_add(s)?
                    .checked_add(1)
            })
            .ok_or_else(|| cx.bad("kernel, stride and dilation overflow"))?;
        let total = usize::try_from(target[i])
            .ok()
            .and_then(|t| full.checked_sub(t))
            .ok_or_else(|| {
                cx.unsupported(format!(
                    "output_shape {shape:?}: spatial size {} beyond the full output {full}",
                    target[i]
                ))
            })?;
        let small = total / 2;
        (pads[i], pads[i + n]) = if upper {
            (small, total - small)
        } else {
            (total - small, small)
        };
    }
    Ok(pads)
}

/// `MaxPool` (the indices output is not produced).
pub fn max_pool(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let n = spatial_dims(cx, x)?;
    let geo = geometry(cx, x, n, None, Same::Window)?;
    let ceil_mode = cx.int_or("ceil_mode", 0)? != 0;
    cx.attrs.ignore("storage_order");
    if cx.wants_output(1) {
        return Err(cx.unsupported("the indices output"));
    }
    if n == 3 {
        if ceil_mode {
            return Err(cx.unsupported("ceil_mode over 3 spatial dims"));
        }
        let op = Op::MaxPool2d {
            window: geo.window(),
            ceil_mode,
        };
        let pool = (f32::NEG_INFINITY, Taps::Max);
        let y = fold_depth(cx, x, &geo, pool, |cx, slab, _| cx.op(op.clone(), &[slab]))?;
        return Ok(vec![y]);
    }
    with_unit_h(
        cx,
        n,
        vec![x],
        1,
        Op::MaxPool2d {
            window: geo.window(),
            ceil_mode,
        },
    )
}

/// `AveragePool` (`count_include_pad` from opset 7: before, padding is excluded).
pub fn avg_pool(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let count_include_pad = cx.int_or("count_include_pad", 0)? != 0;
    avg_pool_of(cx, x, count_include_pad).map(|y| vec![y])
}

/// `LpPool(x; p)` = `(Σ_window |x|^p)^(1/p)`: the average pool of `|x|^p`
/// counting padding (which adds 0) times the window size, to the `1/p`.
pub fn lp_pool(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let p = cx.int_or("p", 2)?;
    if p <= 0 {
        return Err(cx.bad(format!("p = {p}, expected a positive integer")));
    }
    let kernel = cx
        .attr_ints("kernel_shape")?
        .ok_or_else(|| cx.bad("required attribute 'kernel_shape' is missing"))?;
    let window: i64 = kernel.iter().product();
    let a = cx.un(UnaryOp::Abs, x)?;
    let pc = cx.scalar_like(x, p as f64);
    let powered = cx.bin(BinaryOp::Pow, a, pc)?;
    let mean = avg_pool_of(cx, powered, true)?;
    let k = cx.scalar_like(x, window as f64);
    let sum = cx.bin(BinaryOp::Mul, mean, k)?;
    let inv = cx.scalar_like(x, 1.0 / p as f64);
    Ok(vec![cx.bin(BinaryOp::Pow, sum, inv)?])
}

/// An average pool of `x` with the node's window attributes.
fn avg_pool_of(cx: &mut NodeCx, x: ValueId, count_include_pad: bool) -> NodeResult<ValueId> {
    let n = spatial_dims(cx, x)?;
    let geo = geometry(cx, x, n, None, Same::Window)?;
    let ceil_mode = cx.int_or("ceil_mode", 0)? != 0;
    if n == 3 {
        // the mean of the taps' plane means: every tap has the same H·W count,
        // and padded depths count only with count_include_pad
        if ceil_mode || (!count_include_pad && geo.pads[0] + geo.pads[3] > 0) {
            return Err(cx.unsupported(
                "ceil_mode, or depth padding without count_include_pad, over 3 spatial dims",
            ));
        }
        let op = Op::AvgPool2d {
            window: geo.window(),
            ceil_mode,
            count_include_pad,
        };
        let pool = (0.0, Taps::Mean);
        return fold_depth(cx, x, &geo, pool, |cx, slab, _| cx.op(op.clone(), &[slab]));
    }
    let y = with_unit_h(
        cx,
        n,
        vec![x],
        1,
        Op::AvgPool2d {
            window: geo.window(),
            ceil_mode,
            count_include_pad,
        },
    )?;
    y.into_iter()
        .next()
        .ok_or_else(|| cx.bad("an average pool without an output"))
}

/// `GlobalAveragePool`.
pub fn global_avg_pool(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let n = spatial_dims(cx, x)?;
    with_unit_h(cx, n, vec![x], 1, Op::GlobalAvgPool)
}

/// `GlobalMaxPool`: a max over the spatial axes, kept as size 1.
pub fn global_max_pool(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let axes = (2..cx.rank(x) as i64).collect();
    Ok(vec![cx.op(
        Op::Reduce {
            op: ReduceOp::Max,
            axes,
            keepdims: true,
        },
        &[x],
    )?])
}
