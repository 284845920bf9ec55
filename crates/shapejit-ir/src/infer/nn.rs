//! Inference for the neural-network ops: matmul, gemm, reductions, softmax,
//! normalizations, convolution and pooling.
//!
//! **Invariant:** contraction dims (matmul's K, conv's channels) must be the
//! same dim; they never broadcast.

use super::elementwise::broadcast;
use super::{
    InferCtx, Inferred, NUMERIC, arity, check_nonnegative, expect_dtype, expect_rank,
    expect_same_dtype, norm_axes, norm_axis,
};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::graph::ValueInfo;
use crate::op::Window2d;
use crate::shape::Shape;

/// NumPy matmul: rank-1 promotion, broadcast batch dims, equal inner dims.
pub(super) fn matmul(inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 2, 2)?;
    let dtype = expect_dtype(inputs, 0, &NUMERIC)?;
    expect_same_dtype(inputs, 1)?;
    let (a, b) = (&inputs[0].ty.shape, &inputs[1].ty.shape);
    if a.rank() == 0 || b.rank() == 0 {
        return Err(format!("matmul needs rank >= 1 operands, got {a} and {b}"));
    }
    let one = Dim::known(1);
    let mut pa = a.dims().to_vec();
    let mut pb = b.dims().to_vec();
    if a.rank() == 1 {
        pa.insert(0, one.clone());
    }
    if b.rank() == 1 {
        pb.push(one);
    }
    let (m, ka) = (&pa[pa.len() - 2], &pa[pa.len() - 1]);
    let (kb, n) = (&pb[pb.len() - 2], &pb[pb.len() - 1]);
    if ka != kb {
        return Err(format!(
            "inner dims differ: expected {ka} == {kb}, got a {a} and b {b}"
        ));
    }
    let batch_a = Shape(pa[..pa.len() - 2].to_vec());
    let batch_b = Shape(pb[..pb.len() - 2].to_vec());
    let mut out = broadcast(&batch_a, &batch_b)
        .map_err(|e| format!("batch dims: {e}"))?
        .0;
    if a.rank() > 1 {
        out.push(m.clone());
    }
    if b.rank() > 1 {
        out.push(n.clone());
    }
    Ok(Inferred::new(dtype, Shape(out)))
}

/// [`matmul`] of inputs 0 and 1 (`b` of rank >= 2), plus input 2, a `[n]` bias.
pub(super) fn matmul_bias(inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 3, 3)?;
    if inputs[1].ty.shape.rank() < 2 {
        return Err(format!(
            "matmul_bias needs b of rank >= 2, got {}",
            inputs[1].ty.shape
        ));
    }
    let product = matmul(&inputs[..2])?;
    expect_same_dtype(inputs, 2)?;
    let n = product.ty.shape.dims().last().cloned();
    let bias = &inputs[2].ty.shape;
    if bias.rank() != 1 || bias.dims().first() != n.as_ref() {
        return Err(format!(
            "input 2 (bias) has shape {bias}, expected [{}] (the product is {})",
            n.map_or("n".to_string(), |d| d.to_string()),
            product.ty.shape
        ));
    }
    Ok(product)
}

/// Gemm on rank-2 `a`, `b` (optionally transposed); `c` broadcasts to `[M, N]`.
pub(super) fn gemm(
    trans_a: bool,
    trans_b: bool,
    inputs: &[&ValueInfo],
) -> Result<Inferred, String> {
    arity(inputs, 2, 3)?;
    let dtype = expect_dtype(inputs, 0, &NUMERIC)?;
    expect_rank(inputs, 0, 2)?;
    expect_rank(inputs, 1, 2)?;
    expect_same_dtype(inputs, 1)?;
    let (a, b) = (inputs[0].ty.shape.dims(), inputs[1].ty.shape.dims());
    let (m, ka) = if trans_a {
        (&a[1], &a[0])
    } else {
        (&a[0], &a[1])
    };
    let (kb, n) = if trans_b {
        (&b[1], &b[0])
    } else {
        (&b[0], &b[1])
    };
    if ka != kb {
        return Err(format!(
            "inner dims differ: expected {ka} == {kb}, got a {} and b {} (trans_a={trans_a}, trans_b={trans_b})",
            inputs[0].ty.shape, inputs[1].ty.shape
        ));
    }
    let out = Shape(vec![m.clone(), n.clone()]);
    if let Some(c) = inputs.get(2) {
        expect_same_dtype(inputs, 2)?;
        let joint = broadcast(&c.ty.shape, &out).map_err(|e| format!("input 2 (c): {e}"))?;
        if joint != out {
            return Err(format!(
                "input 2 (c) has shape {}, expected one that broadcasts to {out}",
                c.ty.shape
            ));
        }
    }
    Ok(Inferred::new(dtype, out))
}

/// Reduction over `axes` (empty = all), optionally keeping them as 1.
pub(super) fn reduce(
    axes: &[i64],
    keepdims: bool,
    inputs: &[&ValueInfo],
) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    let dtype = expect_dtype(inputs, 0, &NUMERIC)?;
    let shape = &inputs[0].ty.shape;
    let axes = if axes.is_empty() {
        (0..shape.rank()).collect()
    } else {
        norm_axes(axes, shape.rank())?
    };
    let mut out = Vec::new();
    for (i, d) in shape.dims().iter().enumerate() {
        if !axes.contains(&i) {
            out.push(d.clone());
        } else if keepdims {
            out.push(Dim::known(1));
        }
    }
    Ok(Inferred::new(dtype, Shape(out)))
}

/// Reduction over run-time `axes` (input 1, an i64 vector of known length):
/// as [`reduce`] when shape inference knows the axes; otherwise the rank is
/// known (kept, or less by the number of axes) and the dims are fresh, except
/// that dims of size 1 stay 1 with `keepdims`.
pub(super) fn dyn_reduce(
    keepdims: bool,
    noop_with_empty_axes: bool,
    inputs: &[&ValueInfo],
    ctx: &mut InferCtx,
) -> Result<Inferred, String> {
    arity(inputs, 2, 2)?;
    let (n, known) = super::shape_operand(inputs, 1)?;
    let axes: Option<Vec<i64>> = if n == 0 {
        Some(Vec::new())
    } else {
        known.and_then(|k| k.iter().map(Dim::as_known).collect())
    };
    if let Some(axes) = axes {
        if axes.is_empty() && noop_with_empty_axes {
            let dtype = expect_dtype(inputs, 0, &NUMERIC)?;
            return Ok(Inferred::new(dtype, inputs[0].ty.shape.clone()));
        }
        return reduce(&axes, keepdims, &inputs[..1]);
    }
    let dtype = expect_dtype(inputs, 0, &NUMERIC)?;
    let shape = &inputs[0].ty.shape;
    if n > shape.rank() {
        return Err(format!(
            "{n} axes for an input of rank {} ({shape})",
            shape.rank()
        ));
    }
    let one = Dim::known(1);
    let dims = if keepdims {
        shape
            .dims()
            .iter()
            .map(|d| {
                if *d == one {
                    one.clone()
                } else {
                    ctx.fresh_dim()
                }
            })
            .collect()
    } else {
        (0..shape.rank() - n).map(|_| ctx.fresh_dim()).collect()
    };
    Ok(Inferred::new(dtype, Shape(dims)))
}

/// Softmax / log-softmax: float input, valid axis, same type out.
pub(super) fn softmax(axis: i64, inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    expect_dtype(inputs, 0, &[DType::F32])?;
    norm_axis(axis, inputs[0].ty.shape.rank())?;
    Ok(Inferred::new(DType::F32, inputs[0].ty.shape.clone()))
}

/// Layer norm: `scale` (and `bias`) broadcast to the normalized dims `x[axis..]`.
pub(super) fn layer_norm(axis: i64, inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 2, 3)?;
    expect_dtype(inputs, 0, &[DType::F32])?;
    let x = &inputs[0].ty.shape;
    let axis = norm_axis(axis, x.rank())?;
    let normalized = Shape(x.dims()[axis..].to_vec());
    for (idx, param) in inputs.iter().enumerate().skip(1) {
        expect_same_dtype(inputs, idx)?;
        let p = &param.ty.shape;
        if broadcast(p, &normalized).ok().as_ref() != Some(&normalized) {
            return Err(format!(
                "input {idx} has shape {p}, expected one that broadcasts to {normalized}"
            ));
        }
    }
    Ok(Inferred::new(DType::F32, x.clone()))
}

/// Inference batch norm: `scale`, `bias`, `mean`, `var` are `[C]` for `x[N, C, ...]`.
pub(super) fn batch_norm(inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 5, 5)?;
    expect_dtype(inputs, 0, &[DType::F32])?;
    let x = &inputs[0].ty.shape;
    if x.rank() < 2 {
        return Err(format!(
            "input 0 has shape {x}, expected rank >= 2 (N, C, ...)"
        ));
    }
    let c = Shape(vec![x.dims()[1].clone()]);
    for (idx, param) in inputs.iter().enumerate().skip(1) {
        expect_same_dtype(inputs, idx)?;
        if param.ty.shape != c {
            return Err(format!(
                "input {idx} has shape {}, expected {c}",
                param.ty.shape
            ));
        }
    }
    Ok(Inferred::new(DType::F32, x.clone()))
}

/// Checks a window's strides and dilations are positive.
fn check_window(window: &Window2d) -> Result<(), String> {
    if window.strides.contains(&0) || window.dilations.contains(&0) {
        return Err(format!(
            "strides {:?} and dilations {:?} must be >= 1",
            window.strides, window.dilations
        ));
    }
    Ok(())
}

/// The output size of one spatial axis of a window op.
///
/// `out = (size + pads - dilation*(kernel-1) - 1) / stride + 1` (rounded down,
/// or up with `ceil_mode`, where a last window starting inside the end padding
/// is dropped, as onnxruntime does). A symbolic size gives an exact symbolic
/// result when the division is exact, else a fresh dim.
fn window_out(
    size: &Dim,
    axis: usize,
    window: &Window2d,
    ceil_mode: bool,
    ctx: &mut InferCtx,
) -> Result<Dim, String> {
    let pad_begin = window.pads[axis] as i128;
    let pads = pad_begin + window.pads[axis + 2] as i128;
    let span = window.dilations[axis] as i128 * (window.kernel[axis] as i128 - 1) + 1;
    let stride = window.strides[axis] as i128;
    match size.as_known() {
        Some(n) => {
            let room = n as i128 + pads - span;
            if room < 0 {
                return Err(format!(
                    "spatial axis {axis}: size {n} with pads {pads} is smaller than the window extent {span}"
                ));
            }
            let mut out = if ceil_mode {
                (room + stride - 1) / stride + 1
            } else {
                room / stride + 1
            };
            if ceil_mode && (out - 1) * stride >= n as i128 + pad_begin {
                out -= 1;
            }
            i64::try_from(out)
                .map(Dim::known)
                .map_err(|_| format!("spatial axis {axis}: output size overflows"))
        }
        None => {
            let room = size.clone() + Dim::known((pads - span) as i64);
            Ok(match room.div_exact(stride as i64) {
                Some(q) => q + Dim::known(1),
                None => ctx.fresh_dim(),
            })
        }
    }
}

/// 2-D convolution: `x [N, C, H, W]`, `w [M, C/groups, kH, kW]`, optional `b [M]`.
/// The `x` and `w` dims of a conv's operands (`x`, `w`, optional bias; f32,
/// 4-D), after checking the window, the groups and that `w`'s spatial dims are
/// the kernel.
fn conv_operands<'a>(
    window: &Window2d,
    groups: usize,
    inputs: &[&'a ValueInfo],
) -> Result<(&'a [Dim], &'a [Dim]), String> {
    arity(inputs, 2, 3)?;
    expect_dtype(inputs, 0, &[DType::F32])?;
    expect_rank(inputs, 0, 4)?;
    expect_rank(inputs, 1, 4)?;
    expect_same_dtype(inputs, 1)?;
    check_window(window)?;
    if groups == 0 {
        return Err("groups must be >= 1, got 0".into());
    }
    let x = inputs[0].ty.shape.dims();
    let w = inputs[1].ty.shape.dims();
    let kernel = [Dim::from(window.kernel[0]), Dim::from(window.kernel[1])];
    if w[2..] != kernel {
        return Err(format!(
            "weight spatial dims [{}, {}] differ from the kernel attribute {:?}",
            w[2], w[3], window.kernel
        ));
    }
    Ok((x, w))
}

/// A conv's optional bias (input 2) must be `[c_out]` of the input's dtype.
fn check_bias(inputs: &[&ValueInfo], c_out: &Dim) -> Result<(), String> {
    if let Some(b) = inputs.get(2) {
        expect_same_dtype(inputs, 2)?;
        let want = Shape(vec![c_out.clone()]);
        if b.ty.shape != want {
            return Err(format!(
                "input 2 (bias) has shape {}, expected {want}",
                b.ty.shape
            ));
        }
    }
    Ok(())
}

pub(super) fn conv2d(
    window: &Window2d,
    groups: usize,
    inputs: &[&ValueInfo],
    ctx: &mut InferCtx,
) -> Result<Inferred, String> {
    let (x, w) = conv_operands(window, groups, inputs)?;
    let channels = w[1].clone() * Dim::from(groups);
    if x[1] != channels {
        return Err(format!(
            "input channels differ: expected {} == {channels} (weight dim 1 {} x groups {groups})",
            x[1], w[1]
        ));
    }
    if let Some(m) = w[0].as_known()
        && m % groups as i64 != 0
    {
        return Err(format!(
            "output channels {m} are not divisible by groups {groups}"
        ));
    }
    check_bias(inputs, &w[0])?;
    let h = window_out(&x[2], 0, window, false, ctx)?;
    let wd = window_out(&x[3], 1, window, false, ctx)?;
    let out = Shape(vec![x[0].clone(), w[0].clone(), h, wd]);
    check_nonnegative(&out, "output")?;
    Ok(Inferred::new(DType::F32, out))
}

/// 2-D transposed convolution: `x [N, C_in, H, W]`, `w [C_in, C_out/groups, kH, kW]`.
pub(super) fn conv_transpose2d(
    window: &Window2d,
    groups: usize,
    output_padding: [usize; 2],
    inputs: &[&ValueInfo],
) -> Result<Inferred, String> {
    let (x, w) = conv_operands(window, groups, inputs)?;
    for axis in 0..2 {
        let limit = window.strides[axis].max(window.dilations[axis]);
        if output_padding[axis] >= limit {
            return Err(format!(
                "output_padding {output_padding:?} must be smaller than the stride or the dilation of its axis"
            ));
        }
    }
    if x[1] != w[0] {
        return Err(format!(
            "input channels differ: {} vs weight dim 0 {}",
            x[1], w[0]
        ));
    }
    if let Some(c) = w[0].as_known()
        && c % groups as i64 != 0
    {
        return Err(format!(
            "input channels {c} are not divisible by groups {groups}"
        ));
    }
    let c_out = w[1].clone() * Dim::from(groups);
    check_bias(inputs, &c_out)?;
    let spatial = |axis: usize| -> Result<Dim, String> {
        // stride·(in − 1) + output_padding + dil·(k − 1) + 1 − pads: a polynomial
        let span = window.dilations[axis] as i128 * (window.kernel[axis] as i128 - 1) + 1;
        let pads = window.pads[axis] as i128 + window.pads[axis + 2] as i128;
        let extra = output_padding[axis] as i128 + span - pads - window.strides[axis] as i128;
        let overflow = || format!("spatial axis {axis}: the window attributes overflow");
        let stride = i64::try_from(window.strides[axis]).map_err(|_| overflow())?;
        let extra = i64::try_from(extra).map_err(|_| overflow())?;
        match x[axis + 2].as_known() {
            // a known size is computed exactly, so an absurd window fails here
            Some(n) => (n as i128 * stride as i128 + extra as i128)
                .try_into()
                .map(Dim::known)
                .map_err(|_| overflow()),
            None => Ok(x[axis + 2].clone() * Dim::known(stride) + Dim::known(extra)),
        }
    };
    let out = Shape(vec![x[0].clone(), c_out, spatial(0)?, spatial(1)?]);
    check_nonnegative(&out, "output")?;
    Ok(Inferred::new(DType::F32, out))
}

/// 2-D max / average pooling over `x [N, C, H, W]`.
pub(super) fn pool2d(
    window: &Window2d,
    ceil_mode: bool,
    inputs: &[&ValueInfo],
    ctx: &mut InferCtx,
) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    expect_dtype(inputs, 0, &[DType::F32])?;
    expect_rank(inputs, 0, 4)?;
    check_window(window)?;
    if window.kernel.contains(&0) {
        return Err(format!("kernel {:?} must be >= 1", window.kernel));
    }
    window.check_pool_pads()?;
    let x = inputs[0].ty.shape.dims();
    let h = window_out(&x[2], 0, window, ceil_mode, ctx)?;
    let w = window_out(&x[3], 1, window, ceil_mode, ctx)?;
    Ok(Inferred::new(
        DType::F32,
        Shape(vec![x[0].clone(), x[1].clone(), h, w]),
    ))
}

/// Global average pooling: `[N, C, spatial...]` → `[N, C, 1, ...]`.
pub(super) fn global_avg_pool(inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    expect_dtype(inputs, 0, &[DType::F32])?;
    let x = &inputs[0].ty.shape;
    if x.rank() < 3 {
        return Err(format!(
            "input 0 has shape {x}, expected rank >= 3 (N, C, spatial...)"
        ));
    }
    let mut out = x.dims()[..2].to_vec();
    out.extend((2..x.rank()).map(|_| Dim::known(1)));
    Ok(Inferred::new(DType::F32, Shape(out)))
}
