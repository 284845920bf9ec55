//! `matmul` (NumPy semantics, broadcast batch dims), `matmul_bias` and `gemm`, on the
//! `gemm`-crate kernel with the operands' own strides: transposed, sliced and
//! broadcast views are read in place, never copied. A constant right operand the
//! interpreter packed ahead (`crate::weights`) runs `shapejit_kernels::packed`
//! instead where [`shapejit_kernels::packed::packed_pays`] says it is faster
//! (`matmul_bias` then adds its bias in the kernel's epilogue, which rounds as
//! the separate add does).
//!
//! **Invariant:** f32 only; integer matrix products are `Unsupported`.

use super::util::{
    arity, broadcast_shapes, expect_dtype, expect_rank, kernel_err, out_elems, out_view,
    out_view_as, shape_err, view_of,
};
use super::{OpError, OutType};
use crate::tensor::{Dims, TensorMut, TensorRef};
use shapejit_ir::{DType, Op};
use shapejit_kernels::elementwise as ew;
use shapejit_kernels::matmul::matmul as mm;
use shapejit_kernels::packed::{Bias, Epilogue, PackedB, matmul_packed_epilogue, packed_pays};
use shapejit_kernels::{MAX_RANK, StridedShape, View};
use smallvec::SmallVec;

/// `(batch dims, m, k, n)` with rank-1 promotion; errors name both shapes.
fn matmul_dims(op: &Op, a: &[usize], b: &[usize]) -> Result<(Dims, usize, usize, usize), OpError> {
    if a.is_empty() || b.is_empty() {
        return Err(shape_err(
            op,
            format!("operands must have rank >= 1, got {a:?} and {b:?}"),
        ));
    }
    let (m, ka) = if a.len() == 1 {
        (1, a[0])
    } else {
        (a[a.len() - 2], a[a.len() - 1])
    };
    let (kb, n) = if b.len() == 1 {
        (b[0], 1)
    } else {
        (b[b.len() - 2], b[b.len() - 1])
    };
    if ka != kb {
        return Err(shape_err(
            op,
            format!("inner dims differ: a {a:?} has k = {ka}, b {b:?} has k = {kb}"),
        ));
    }
    let batch_a = &a[..a.len().saturating_sub(2)];
    let batch_b = &b[..b.len().saturating_sub(2)];
    let batch = broadcast_shapes(op, &[batch_a, batch_b])?;
    Ok((batch, m, ka, n))
}

pub(crate) fn matmul_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 2, 2)?;
    expect_dtype(op, inputs, 0, &[DType::F32])?;
    expect_dtype(op, inputs, 1, &[DType::F32])?;
    let (a, b) = (inputs[0].shape(), inputs[1].shape());
    let (mut shape, m, _, n) = matmul_dims(op, a, b)?;
    if a.len() > 1 {
        shape.push(m);
    }
    if b.len() > 1 {
        shape.push(n);
    }
    Ok(OutType {
        dtype: DType::F32,
        shape,
    })
}

/// Operand geometry as `[batch…, rows, cols]`: rank-1 operands get a size-1 dim
/// (`a` in front, `b` behind), batch dims broadcast.
fn operand_geom(
    op: &Op,
    v: &View<f32>,
    is_lhs: bool,
    batch: &[usize],
) -> Result<StridedShape, OpError> {
    let g = v.geom();
    let (mut shape, mut strides) = (
        SmallVec::<[usize; MAX_RANK]>::new(),
        SmallVec::<[isize; MAX_RANK]>::new(),
    );
    if g.rank() == 1 {
        let (d, s) = (g.shape()[0], g.strides()[0]);
        if is_lhs {
            shape.extend([1, d]);
            strides.extend([0, s]);
        } else {
            shape.extend([d, 1]);
            strides.extend([s, 0]);
        }
    } else {
        shape.extend_from_slice(g.shape());
        strides.extend_from_slice(g.strides());
    }
    let mat = StridedShape::new(&shape, &strides, g.offset()).map_err(kernel_err(op))?;
    let mut full: SmallVec<[usize; MAX_RANK]> = SmallVec::from_slice(batch);
    full.extend_from_slice(&shape[shape.len() - 2..]);
    mat.broadcast_to(&full).map_err(kernel_err(op))
}

/// `a` (rank ≥ 2) seen as one `[rows, k]` matrix, when its leading dims fold into
/// the rows with one stride.
pub(crate) fn folded_rows<'a>(a: &View<'a, f32>) -> Option<View<'a, f32>> {
    let g = a.geom();
    let r = g.rank();
    if r < 2 {
        return None;
    }
    let (shape, strides) = (g.shape(), g.strides());
    // Innermost to outermost row dim: each dim of size > 1 must step over the
    // whole of the dims inside it.
    let (mut row_stride, mut expected) = (None, None);
    for d in (0..r - 1).rev() {
        if shape[d] == 1 {
            continue;
        }
        match expected {
            None => row_stride = Some(strides[d]),
            Some(e) if strides[d] != e => return None,
            Some(_) => {}
        }
        expected = Some(strides[d] * shape[d] as isize);
    }
    let rows: usize = shape[..r - 1].iter().product();
    let geom = StridedShape::new(
        &[rows, shape[r - 1]],
        &[row_stride.unwrap_or(0), strides[r - 1]],
        g.offset(),
    )
    .ok()?;
    a.with_geom(geom).ok()
}

/// `out = alpha · a @ packed + bias` when the packed path is faster for this
/// product and `a` folds into rows; `Ok(false)` leaves it to `gemm`.
fn try_packed(
    op: &Op,
    a: &View<f32>,
    packed: Option<&PackedB>,
    out: &mut TensorMut,
    alpha: f32,
    bias: Bias,
) -> Result<bool, OpError> {
    let Some(p) = packed else {
        return Ok(false);
    };
    let Some(a) = folded_rows(a) else {
        return Ok(false);
    };
    let (rows, k) = (a.shape()[0], a.shape()[1]);
    if k != p.k() || !packed_pays(rows, k, p.n()) {
        return Ok(false);
    }
    let dst = out_elems::<f32>(op, out)?;
    if dst.len() != rows * p.n() {
        return Ok(false);
    }
    let epilogue = Epilogue {
        bias,
        activation: None,
    };
    matmul_packed_epilogue(dst, &a, p.borrowed(), alpha, epilogue).map_err(kernel_err(op))?;
    Ok(true)
}

pub(crate) fn matmul(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    packed: Option<&PackedB>,
) -> Result<(), OpError> {
    product(op, inputs, out, packed, Bias::None).map(|_| ())
}

/// `out = a @ b` of inputs 0 and 1, plus `bias` when the packed kernel runs it
/// (then `Ok(true)`; `gemm` leaves the bias to the caller).
fn product(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    packed: Option<&PackedB>,
    bias: Bias,
) -> Result<bool, OpError> {
    let a = view_of::<f32>(op, inputs, 0)?;
    let b = view_of::<f32>(op, inputs, 1)?;
    let (batch, m, _, n) = matmul_dims(op, a.shape(), b.shape())?;
    let packs = b.shape().len() == 2 && a.shape().len() >= 2;
    if packs && try_packed(op, &a, packed, out, 1.0, bias)? {
        return Ok(true);
    }
    let a = a
        .with_geom(operand_geom(op, &a, true, &batch)?)
        .map_err(kernel_err(op))?;
    let b = b
        .with_geom(operand_geom(op, &b, false, &batch)?)
        .map_err(kernel_err(op))?;
    let mut full: Dims = batch;
    full.extend([m, n]);
    let mut o = out_view_as::<f32>(op, out, &full)?;
    mm(&mut o, &a, &b, 1.0, false).map_err(kernel_err(op))?;
    Ok(false)
}

/// `matmul_bias`: the `matmul` of inputs 0 and 1 (`b` of rank >= 2), input 2 a
/// `[n]` f32 bias for its last dim.
pub(crate) fn matmul_bias_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 3, 3)?;
    expect_dtype(op, inputs, 2, &[DType::F32])?;
    if inputs[1].shape().len() < 2 {
        return Err(shape_err(
            op,
            format!("b must have rank >= 2, got {:?}", inputs[1].shape()),
        ));
    }
    let product = matmul_type(op, &inputs[..2])?;
    let n = product.shape.last().copied();
    if inputs[2].shape().len() != 1 || inputs[2].shape().first().copied() != n {
        return Err(shape_err(
            op,
            format!(
                "bias of shape {:?} does not match the product's last dim (product {:?})",
                inputs[2].shape(),
                product.shape
            ),
        ));
    }
    Ok(product)
}

/// `out = a @ b + bias`: on the packed weights with the bias in the kernel's
/// epilogue, else the product then the bias added to each row (the same
/// rounding).
pub(crate) fn matmul_bias(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    packed: Option<&PackedB>,
) -> Result<(), OpError> {
    let bias = view_of::<f32>(op, inputs, 2)?;
    let contiguous = bias.as_contiguous();
    let in_kernel = contiguous.map_or(Bias::None, Bias::PerColumn);
    if product(op, inputs, out, packed, in_kernel)? && contiguous.is_some() {
        return Ok(());
    }
    let (data, at, stride) = (bias.data(), bias.geom().offset(), bias.geom().strides()[0]);
    let n = bias.shape()[0];
    let dst = out_elems::<f32>(op, out)?;
    for row in dst.chunks_exact_mut(n.max(1)) {
        for (j, o) in row.iter_mut().enumerate() {
            // Invariant: j < n, inside the bias view's checked extent.
            *o += data[(at as isize + j as isize * stride) as usize];
        }
    }
    Ok(())
}

pub(crate) fn gemm_type(
    op: &Op,
    inputs: &[TensorRef],
    trans_a: bool,
    trans_b: bool,
) -> Result<OutType, OpError> {
    arity(op, inputs, 2, 3)?;
    for i in 0..inputs.len() {
        expect_dtype(op, inputs, i, &[DType::F32])?;
    }
    expect_rank(op, inputs, 0, 2)?;
    expect_rank(op, inputs, 1, 2)?;
    let (a, b) = (inputs[0].shape(), inputs[1].shape());
    let (m, ka) = if trans_a { (a[1], a[0]) } else { (a[0], a[1]) };
    let (kb, n) = if trans_b { (b[1], b[0]) } else { (b[0], b[1]) };
    if ka != kb {
        return Err(shape_err(
            op,
            format!("inner dims differ: op(a) is [{m}, {ka}], op(b) is [{kb}, {n}]"),
        ));
    }
    if let Some(c) = inputs.get(2) {
        let c = c.shape();
        if broadcast_shapes(op, &[c, &[m, n]])?.as_slice() != [m, n] {
            return Err(shape_err(
                op,
                format!("c of shape {c:?} does not broadcast to [{m}, {n}]"),
            ));
        }
    }
    Ok(OutType {
        dtype: DType::F32,
        shape: SmallVec::from_slice(&[m, n]),
    })
}

/// The rank-2 view `v`, transposed when `yes` (a stride swap, no copy).
fn transposed_if<'a>(op: &Op, v: View<'a, f32>, yes: bool) -> Result<View<'a, f32>, OpError> {
    if !yes {
        return Ok(v);
    }
    v.with_geom(v.geom().permuted(&[1, 0]).map_err(kernel_err(op))?)
        .map_err(kernel_err(op))
}

/// The attributes of a `gemm`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmAttrs {
    pub alpha: f32,
    pub beta: f32,
    pub trans_a: bool,
    pub trans_b: bool,
}

pub(crate) fn gemm(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    packed: Option<&PackedB>,
    attrs: GemmAttrs,
) -> Result<(), OpError> {
    let GemmAttrs {
        alpha,
        beta,
        trans_a,
        trans_b,
    } = attrs;
    let a = transposed_if(op, view_of::<f32>(op, inputs, 0)?, trans_a)?;
    let b = transposed_if(op, view_of::<f32>(op, inputs, 1)?, trans_b)?;
    let no_bias = inputs.len() < 3 || beta == 0.0;
    if no_bias && try_packed(op, &a, packed, out, alpha, Bias::None)? {
        return Ok(());
    }
    let mut o = out_view::<f32>(op, out)?;
    let accumulate = match inputs.get(2) {
        Some(_) if beta != 0.0 => {
            let c = view_of::<f32>(op, inputs, 2)?;
            let c = c
                .with_geom(c.geom().broadcast_to(o.shape()).map_err(kernel_err(op))?)
                .map_err(kernel_err(op))?;
            ew::unary(&mut o, &c, |v| beta * v).map_err(kernel_err(op))?;
            true
        }
        _ => false,
    };
    mm(&mut o, &a, &b, alpha, accumulate).map_err(kernel_err(op))
}
