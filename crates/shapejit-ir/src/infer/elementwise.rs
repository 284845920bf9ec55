//! Inference for elementwise ops: unary, binary (NumPy broadcasting), where, cast.
//!
//! **Invariant:** a broadcast output dim is the common dim of its inputs; a dim
//! only stretches when it is the known dim 1. In elementwise ops two dims that
//! cannot be proven equal (`seq` vs `_d0`, `batch` vs `3`) are not a load error:
//! the output keeps the more specific one (a known dim, then a named symbol, then
//! a fresh `_dN`, then the first), and the run checks that the other one equals
//! it or is 1 ([`broadcast_checks`], lowered to `shape_check`), so the inferred
//! type holds whenever the run succeeds.

use super::{ARITH, InferCtx, Inferred, arity, expect_dtype, expect_same_dtype};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::graph::ValueInfo;
use crate::op::{BinaryOp, UnaryOp};
use crate::shape::Shape;

/// NumPy broadcasting of two shapes (right-aligned; a dim stretches only from 1;
/// symbolic dims must be equal).
pub(crate) fn broadcast(a: &Shape, b: &Shape) -> Result<Shape, String> {
    broadcast_with(a, b, None)
}

/// [`broadcast`]; with `fresh`, two dims that cannot be proven equal meet as the
/// more specific one (see the module invariant; `fresh` tells fresh dims apart).
fn broadcast_with(
    a: &Shape,
    b: &Shape,
    fresh: Option<&dyn Fn(&Dim) -> bool>,
) -> Result<Shape, String> {
    let rank = a.rank().max(b.rank());
    let one = Dim::known(1);
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let da = (i + a.rank())
            .checked_sub(rank)
            .map_or(&one, |j| &a.dims()[j]);
        let db = (i + b.rank())
            .checked_sub(rank)
            .map_or(&one, |j| &b.dims()[j]);
        let d = if da == db || *db == one {
            da.clone()
        } else if *da == one {
            db.clone()
        } else {
            match fresh {
                Some(fresh) if !(da.is_known() && db.is_known()) => {
                    let specificity = |d: &Dim| match d {
                        _ if d.is_known() => 0,
                        _ if fresh(d) => 2,
                        _ => 1,
                    };
                    if specificity(db) < specificity(da) {
                        db.clone()
                    } else {
                        da.clone()
                    }
                }
                _ => return Err(format!("cannot broadcast {a} with {b}: dim {da} vs {db}")),
            }
        };
        out.push(d);
    }
    Ok(Shape(out))
}

/// One equality the run must check after an elementwise broadcast that shape
/// inference could not prove: dim `axis` of input `input` must equal dim
/// `kept_axis` of input `kept` (the dim the output type keeps) or be 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BroadcastCheck {
    /// the input whose dim the output keeps
    pub kept: usize,
    /// that dim's axis in `kept`
    pub kept_axis: usize,
    /// the input whose dim is checked
    pub input: usize,
    /// that dim's axis in `input`
    pub axis: usize,
}

/// The run-time checks an elementwise node with these input shapes and this
/// (inferred) output shape needs: for each output dim, every input dim that is
/// neither the same polynomial nor the known 1 is checked against the input
/// dim the output kept.
pub fn broadcast_checks(inputs: &[&Shape], out: &Shape) -> Vec<BroadcastCheck> {
    let rank = out.rank();
    let one = Dim::known(1);
    fn dim_at(s: &Shape, i: usize, rank: usize) -> Option<(usize, &Dim)> {
        (i + s.rank()).checked_sub(rank).map(|j| (j, &s.dims()[j]))
    }
    let mut checks = Vec::new();
    for (i, o) in out.dims().iter().enumerate() {
        let Some((kept, kept_axis)) = inputs.iter().enumerate().find_map(|(k, s)| {
            dim_at(s, i, rank)
                .filter(|(_, d)| *d == o)
                .map(|(j, _)| (k, j))
        }) else {
            continue;
        };
        for (input, s) in inputs.iter().enumerate() {
            if let Some((axis, d)) = dim_at(s, i, rank)
                && d != o
                && *d != one
            {
                checks.push(BroadcastCheck {
                    kept,
                    kept_axis,
                    input,
                    axis,
                });
            }
        }
    }
    checks
}

/// Elementwise unary op: float-only transcendentals, bool-only `not`.
pub(super) fn unary(op: UnaryOp, inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    let dtype = match op {
        UnaryOp::Not => expect_dtype(inputs, 0, &[DType::Bool])?,
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Clip { .. } => {
            expect_dtype(inputs, 0, &ARITH)?
        }
        _ => expect_dtype(inputs, 0, &[DType::F32])?,
    };
    let known = match op {
        UnaryOp::Neg => inputs[0]
            .known
            .as_ref()
            .map(|k| k.iter().map(|d| Dim::known(0) - d.clone()).collect()),
        _ => None,
    };
    Ok(Inferred::with_known(
        dtype,
        inputs[0].ty.shape.clone(),
        known,
    ))
}

/// Elementwise binary op with broadcasting.
pub(super) fn binary(
    op: BinaryOp,
    inputs: &[&ValueInfo],
    ctx: &InferCtx,
) -> Result<Inferred, String> {
    arity(inputs, 2, 2)?;
    let dtype = if op.is_logical() {
        expect_dtype(inputs, 0, &[DType::Bool])?;
        expect_dtype(inputs, 1, &[DType::Bool])?
    } else if op.is_bitwise() {
        expect_same_dtype(inputs, 1)?;
        expect_dtype(inputs, 0, &[DType::I32, DType::I64])?
    } else if op.is_comparison() {
        // comparisons run on every dtype (no compute-dtype rounding)
        expect_same_dtype(inputs, 1)?;
        inputs[0].ty.dtype
    } else {
        expect_dtype(inputs, 0, &ARITH)?;
        expect_same_dtype(inputs, 1)?;
        inputs[0].ty.dtype
    };
    let fresh = |d: &Dim| ctx.is_fresh(d);
    let shape = broadcast_with(&inputs[0].ty.shape, &inputs[1].ty.shape, Some(&fresh))?;
    if op.is_comparison() {
        return Ok(Inferred::new(DType::Bool, shape));
    }
    let known = binary_known(op, inputs[0], inputs[1]);
    Ok(Inferred::with_known(dtype, shape, known))
}

/// Arithmetic on known contents (`add`/`sub`/`mul`, and `div` when exact).
fn binary_known(op: BinaryOp, a: &ValueInfo, b: &ValueInfo) -> Option<Vec<Dim>> {
    let (ka, kb) = (a.known.as_ref()?, b.known.as_ref()?);
    let n = ka.len().max(kb.len());
    if !(ka.len() == n || ka.len() == 1) || !(kb.len() == n || kb.len() == 1) {
        return None;
    }
    let pick = |k: &Vec<Dim>, i: usize| {
        if k.len() == 1 {
            k[0].clone()
        } else {
            k[i].clone()
        }
    };
    (0..n)
        .map(|i| {
            let (x, y) = (pick(ka, i), pick(kb, i));
            match op {
                BinaryOp::Add => Some(x + y),
                BinaryOp::Sub => Some(x - y),
                BinaryOp::Mul => x.checked_mul(&y),
                BinaryOp::Div => x.div_dim(&y),
                _ => None,
            }
        })
        .collect()
}

/// `where(cond, x, y)`: three-way broadcast; `x` and `y` share a dtype.
pub(super) fn where_(inputs: &[&ValueInfo], ctx: &InferCtx) -> Result<Inferred, String> {
    arity(inputs, 3, 3)?;
    expect_dtype(inputs, 0, &[DType::Bool])?;
    let dtype = inputs[1].ty.dtype;
    if inputs[2].ty.dtype != dtype {
        return Err(format!(
            "input 2 has dtype {}, expected {dtype} (the dtype of input 1)",
            inputs[2].ty.dtype
        ));
    }
    let fresh = |d: &Dim| ctx.is_fresh(d);
    let xy = broadcast_with(&inputs[1].ty.shape, &inputs[2].ty.shape, Some(&fresh))?;
    let shape = broadcast_with(&inputs[0].ty.shape, &xy, Some(&fresh))?;
    Ok(Inferred::new(dtype, shape))
}

/// `bitcast`: same shape, a dtype of the same size ([`DType::bitcast_to`]).
pub(super) fn bitcast(to: DType, inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    inputs[0].ty.dtype.bitcast_to(to)?;
    Ok(Inferred::new(to, inputs[0].ty.shape.clone()))
}

/// `cast`: same shape; integer contents stay known across integer casts.
pub(super) fn cast(to: DType, inputs: &[&ValueInfo]) -> Result<Inferred, String> {
    arity(inputs, 1, 1)?;
    Ok(Inferred::with_known(
        to,
        inputs[0].ty.shape.clone(),
        inputs[0].known.clone(),
    ))
}
