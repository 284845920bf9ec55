//! conv2d (direct on phase planes, or GEMM for 1×1 windows; planes and patches
//! in [`Scratch`]), conv_transpose2d (GEMM + col2im),
//! max/avg pooling (NCHW).
//!
//! Output size per spatial dim: `(in + pad_begin + pad_end - dil·(k-1) - 1) / stride + 1`,
//! rounded up instead of down with `ceil_mode` (a last window that would start
//! in the end padding is dropped, as in ONNX/PyTorch); for the transposed conv
//! `stride·(in - 1) + output_padding + dil·(k-1) + 1 - pad_begin - pad_end`.
//!
//! **Invariant:** padding never wins a max pool; the avg-pool divisor counts
//! padded cells only with `count_include_pad` (and never cells past the end padding).

use super::util::{
    arity, contiguous_f32, copy_len, expect_dtype, expect_rank, kernel_err, out_elems, shape_err,
    value_err, view_of,
};
use super::{OpError, OutType, Scratch};
use crate::tensor::{TensorMut, TensorRef};
use shapejit_ir::{Activation, DType, Op, Window2d};
use shapejit_kernels::conv::{
    ConvParams, PackedChannels, PackedConvWeights, Pool, Window,
    conv_transpose2d as kconv_transpose, conv_transpose2d_scratch_len, conv2d as kconv,
    conv2d_scratch_len, pool2d, pool2d_scratch_len,
};
use shapejit_kernels::view::View;
use smallvec::SmallVec;

/// Kernel, stride and dilation of one spatial dim must be positive.
fn positive_window(op: &Op, k: usize, stride: usize, dil: usize) -> Result<(), OpError> {
    if k == 0 || stride == 0 || dil == 0 {
        return Err(value_err(
            op,
            format!("kernel {k}, stride {stride} and dilation {dil} must be positive"),
        ));
    }
    Ok(())
}

/// The `x` and `w` shapes of a conv's operands (`x`, `w`, optional bias: all f32,
/// `x` and `w` 4-D), after checking the bias has `c_out(w)` elements.
fn conv_operands<'a>(
    op: &Op,
    inputs: &'a [TensorRef],
    c_out: impl Fn(&[usize]) -> Result<usize, OpError>,
) -> Result<(&'a [usize], &'a [usize], usize), OpError> {
    arity(op, inputs, 2, 3)?;
    for i in 0..inputs.len() {
        expect_dtype(op, inputs, i, &[DType::F32])?;
    }
    expect_rank(op, inputs, 0, 4)?;
    expect_rank(op, inputs, 1, 4)?;
    let (x, w) = (inputs[0].shape(), inputs[1].shape());
    let c_out = c_out(w)?;
    if let Some(b) = inputs.get(2)
        && b.shape() != [c_out]
    {
        return Err(shape_err(
            op,
            format!("bias must have shape [{c_out}], got {:?}", b.shape()),
        ));
    }
    Ok((x, w, c_out))
}

/// Output length of one spatial dim.
fn out_len(
    op: &Op,
    input: usize,
    k: usize,
    stride: usize,
    pad: (usize, usize),
    dil: usize,
    ceil: bool,
) -> Result<usize, OpError> {
    positive_window(op, k, stride, dil)?;
    let padded = input + pad.0 + pad.1;
    let span = dil * (k - 1) + 1;
    if padded < span {
        return Err(shape_err(
            op,
            format!("window of span {span} does not fit the padded input size {padded}"),
        ));
    }
    let room = padded - span;
    let mut n = if ceil {
        room.div_ceil(stride)
    } else {
        room / stride
    } + 1;
    if ceil && (n - 1) * stride >= input + pad.0 {
        n -= 1;
    }
    Ok(n)
}

fn spatial_out(
    op: &Op,
    w: &Window2d,
    kernel: [usize; 2],
    h: usize,
    wd: usize,
    ceil: bool,
) -> Result<[usize; 2], OpError> {
    Ok([
        out_len(
            op,
            h,
            kernel[0],
            w.strides[0],
            (w.pads[0], w.pads[2]),
            w.dilations[0],
            ceil,
        )?,
        out_len(
            op,
            wd,
            kernel[1],
            w.strides[1],
            (w.pads[1], w.pads[3]),
            w.dilations[1],
            ceil,
        )?,
    ])
}

pub(crate) fn conv_type(
    op: &Op,
    window: &Window2d,
    groups: usize,
    inputs: &[TensorRef],
) -> Result<OutType, OpError> {
    let (x, w, _) = conv_operands(op, inputs, |w| Ok(w[0]))?;
    if groups == 0 || x[1] % groups != 0 || w[0] % groups != 0 || w[1] * groups != x[1] {
        return Err(shape_err(
            op,
            format!(
                "groups {groups}: input channels {} and weight {w:?} must be [C_out, C_in/groups, kH, kW] with both divisible",
                x[1]
            ),
        ));
    }
    let [oh, ow] = spatial_out(op, window, [w[2], w[3]], x[2], x[3], false)?;
    Ok(OutType {
        dtype: DType::F32,
        shape: SmallVec::from_slice(&[x[0], w[0], oh, ow]),
    })
}

/// Output length of one spatial dim of a transposed conv.
fn transposed_out_len(
    op: &Op,
    input: usize,
    k: usize,
    stride: usize,
    pad: (usize, usize),
    dil: usize,
    output_padding: usize,
) -> Result<usize, OpError> {
    positive_window(op, k, stride, dil)?;
    let full = (input.max(1) - 1)
        .checked_mul(stride)
        .and_then(|v| v.checked_add(dil.checked_mul(k - 1)?.checked_add(1)?))
        .and_then(|v| v.checked_add(output_padding))
        .ok_or_else(|| value_err(op, "the output size overflows".into()))?;
    // an empty input still has an empty output, whatever the window
    let full = if input == 0 { 0 } else { full };
    full.checked_sub(pad.0 + pad.1).ok_or_else(|| {
        shape_err(
            op,
            format!(
                "pads {} + {} exceed the full output size {full}",
                pad.0, pad.1
            ),
        )
    })
}

pub(crate) fn conv_transpose_type(
    op: &Op,
    window: &Window2d,
    groups: usize,
    output_padding: [usize; 2],
    inputs: &[TensorRef],
) -> Result<OutType, OpError> {
    let (x, w, c_out) = conv_operands(op, inputs, |w| {
        w[1].checked_mul(groups)
            .ok_or_else(|| value_err(op, "the output channel count overflows".into()))
    })?;
    if groups == 0 || w[0] != x[1] || x[1] % groups != 0 {
        return Err(shape_err(
            op,
            format!(
                "groups {groups}: input channels {} and weight {w:?} must be [C_in, C_out/groups, kH, kW] with C_in divisible",
                x[1]
            ),
        ));
    }
    let mut out = [0; 2];
    for (axis, o) in out.iter_mut().enumerate() {
        *o = transposed_out_len(
            op,
            x[axis + 2],
            w[axis + 2],
            window.strides[axis],
            (window.pads[axis], window.pads[axis + 2]),
            window.dilations[axis],
            output_padding[axis],
        )?;
    }
    Ok(OutType {
        dtype: DType::F32,
        shape: SmallVec::from_slice(&[x[0], c_out, out[0], out[1]]),
    })
}

pub(crate) fn pool_type(
    op: &Op,
    window: &Window2d,
    ceil_mode: bool,
    inputs: &[TensorRef],
) -> Result<OutType, OpError> {
    arity(op, inputs, 1, 1)?;
    expect_dtype(op, inputs, 0, &[DType::F32])?;
    expect_rank(op, inputs, 0, 4)?;
    window.check_pool_pads().map_err(|message| OpError::Shape {
        op: op.name(),
        message,
    })?;
    let x = inputs[0].shape();
    let [oh, ow] = spatial_out(op, window, window.kernel, x[2], x[3], ceil_mode)?;
    Ok(OutType {
        dtype: DType::F32,
        shape: SmallVec::from_slice(&[x[0], x[1], oh, ow]),
    })
}

/// The kernel window of an op with output size `out`.
pub(crate) fn kernel_window(window: &Window2d, kernel: [usize; 2], out: [usize; 2]) -> Window {
    Window {
        kernel,
        strides: window.strides,
        pads: window.pads,
        dilations: window.dilations,
        out,
    }
}

#[allow(clippy::too_many_arguments)] // the op's three attributes, its packed weights, the usual four
pub(crate) fn conv2d(
    op: &Op,
    window: &Window2d,
    groups: usize,
    activation: Option<Activation>,
    packed: Option<&PackedConvWeights>,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut Scratch,
) -> Result<(), OpError> {
    let x = view_of::<f32>(op, inputs, 0)?;
    let w = view_of::<f32>(op, inputs, 1)?;
    let ws = w.shape();
    let (kernel, c_in_g) = ([ws[2], ws[3]], ws[1]);
    let os = out.shape;
    let win = kernel_window(window, kernel, [os[2], os[3]]);
    let b_len = inputs.get(2).map_or(0, |b| b.layout.numel());
    let c_out_g = ws[0] / groups.max(1);
    let [col, wbuf, bbuf] = scratch.f32_bufs(
        op,
        [
            conv2d_scratch_len(c_in_g, c_out_g, &win, [x.shape()[2], x.shape()[3]]),
            copy_len(&w),
            b_len,
        ],
    )?;
    let w_elems = contiguous_f32(op, &w, wbuf)?;
    let bias = match inputs.get(2) {
        Some(_) => Some(contiguous_f32(op, &view_of::<f32>(op, inputs, 2)?, bbuf)?),
        None => None,
    };
    let dst = out_elems::<f32>(op, out)?;
    let conv = ConvParams {
        w: w_elems,
        bias,
        groups,
        activation: activation.map(super::elementwise::activation),
        packed: packed_channels(packed, &w, c_in_g * kernel[0] * kernel[1]),
    };
    kconv(dst, &x, &conv, &win, col).map_err(kernel_err(op))
}

/// The packed whole weights as this call's `w` (`k` elements per output channel)
/// reads them: from the channel its view starts at (a piece of a split op reads
/// a range of the channels).
fn packed_channels<'a>(
    weights: Option<&'a PackedConvWeights>,
    w: &View<f32>,
    k: usize,
) -> Option<PackedChannels<'a>> {
    let offset = w.geom().offset();
    let weights = weights.filter(|_| k > 0 && offset % k == 0)?;
    Some(PackedChannels {
        weights,
        first: offset / k,
    })
}

pub(crate) fn conv_transpose2d(
    op: &Op,
    window: &Window2d,
    groups: usize,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut Scratch,
) -> Result<(), OpError> {
    let x = view_of::<f32>(op, inputs, 0)?;
    let w = view_of::<f32>(op, inputs, 1)?;
    let (xs, ws) = (x.shape(), w.shape());
    let (kernel, c_out_g) = ([ws[2], ws[3]], ws[1]);
    let os = out.shape;
    let win = kernel_window(window, kernel, [os[2], os[3]]);
    let b_len = inputs.get(2).map_or(0, |b| b.layout.numel());
    let [col, xbuf, wbuf, bbuf] = scratch.f32_bufs(
        op,
        [
            conv_transpose2d_scratch_len(c_out_g, kernel, [xs[2], xs[3]]),
            copy_len(&x),
            copy_len(&w),
            b_len,
        ],
    )?;
    let x_elems = contiguous_f32(op, &x, xbuf)?;
    let x_dense = View::contiguous(x_elems, xs).map_err(kernel_err(op))?;
    let w_elems = contiguous_f32(op, &w, wbuf)?;
    let bias = match inputs.get(2) {
        Some(_) => Some(contiguous_f32(op, &view_of::<f32>(op, inputs, 2)?, bbuf)?),
        None => None,
    };
    let dst = out_elems::<f32>(op, out)?;
    kconv_transpose(dst, &x_dense, w_elems, bias, groups, &win, col).map_err(kernel_err(op))
}

fn pool(
    op: &Op,
    window: &Window2d,
    p: Pool,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut Scratch,
) -> Result<(), OpError> {
    let x = view_of::<f32>(op, inputs, 0)?;
    let win = kernel_window(window, window.kernel, [out.shape[2], out.shape[3]]);
    let input = [x.shape()[2], x.shape()[3]];
    let [planes] = scratch.f32_bufs(op, [pool2d_scratch_len(&win, input)])?;
    pool2d(out_elems::<f32>(op, out)?, &x, &win, p, planes).map_err(kernel_err(op))
}

pub(crate) fn max_pool(
    op: &Op,
    window: &Window2d,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut Scratch,
) -> Result<(), OpError> {
    pool(op, window, Pool::Max, inputs, out, scratch)
}

pub(crate) fn avg_pool(
    op: &Op,
    window: &Window2d,
    count_include_pad: bool,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut Scratch,
) -> Result<(), OpError> {
    pool(
        op,
        window,
        Pool::Avg { count_include_pad },
        inputs,
        out,
        scratch,
    )
}
