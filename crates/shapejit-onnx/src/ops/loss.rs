//! Losses composed from IR ops: NegativeLogLikelihoodLoss and
//! SoftmaxCrossEntropyLoss (a log-softmax over the class axis, then the
//! negative log-likelihood).
//!
//! `loss[n, d…] = −x[n, t[n, d…], d…] · w[t[n, d…]]`, zero where `t` is
//! `ignore_index`; `reduction` is `none`, `sum`, or `mean` (the sum over
//! the sum of the weights taken, or over the count when there are no
//! weights and no ignored targets).
//!
//! **Invariant:** an ignored target is never used as an index (it reads class
//! 0, and its weight is 0).

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{BinaryOp, DType, Op, ReduceOp, UnaryOp, ValueId};

/// `NegativeLogLikelihoodLoss(input, target, weight?; reduction, ignore_index)`.
pub fn nll(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    Ok(vec![nll_of(cx, x)?])
}

/// `SoftmaxCrossEntropyLoss(scores, labels, weights?; reduction,
/// ignore_index)`, with the optional `log_prob` output.
pub fn softmax_cross_entropy(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let scores = cx.input(0)?;
    if cx.rank(scores) < 2 {
        return Err(cx.bad(format!("scores of rank {} < 2", cx.rank(scores))));
    }
    let log_prob = cx.op(Op::LogSoftmax { axis: 1 }, &[scores])?;
    let loss = nll_of(cx, log_prob)?;
    Ok(vec![loss, log_prob])
}

/// The loss of log-probabilities `x` (`[N, C, d…]`) for the node's target
/// (input 1) and weights (input 2).
fn nll_of(cx: &mut NodeCx, x: ValueId) -> NodeResult<ValueId> {
    let target = cx.input(1)?;
    let weight = cx.opt_input(2)?;
    let reduction = cx
        .attr_string("reduction")?
        .unwrap_or_else(|| "mean".into());
    if !matches!(reduction.as_str(), "none" | "sum" | "mean") {
        return Err(cx.bad(format!(
            "reduction must be none, sum or mean, got '{reduction}'"
        )));
    }
    let ignore = cx.attr_int("ignore_index")?;
    if cx.rank(x) < 2 || cx.rank(target) + 1 != cx.rank(x) {
        return Err(cx.bad(format!(
            "input of rank {} needs a target of rank {} (got {})",
            cx.rank(x),
            cx.rank(x).saturating_sub(1),
            cx.rank(target)
        )));
    }
    let target = if cx.ty(target).dtype == DType::I64 {
        target
    } else {
        cx.op(Op::Cast { to: DType::I64 }, &[target])?
    };
    let (target, valid) = match ignore {
        Some(ii) => {
            let ii = cx.const_scalar(DType::I64, ii as f64);
            let ignored = cx.bin(BinaryOp::Eq, target, ii)?;
            let zero = cx.const_scalar(DType::I64, 0.0);
            let safe = cx.op(Op::Where, &[ignored, zero, target])?;
            (safe, Some(cx.un(UnaryOp::Not, ignored)?))
        }
        None => (target, None),
    };
    let idx = cx.op(Op::Unsqueeze { axes: vec![1] }, &[target])?;
    let picked = cx.op(Op::GatherElements { axis: 1 }, &[x, idx])?;
    let picked = cx.op(Op::Squeeze { axes: vec![1] }, &[picked])?;
    let mut loss = cx.un(UnaryOp::Neg, picked)?;
    let taken = match weight {
        Some(w) => Some(cx.op(Op::Gather { axis: 0 }, &[w, target])?),
        None => None,
    };
    let dtype = cx.ty(x).dtype;
    let factor = match (taken, valid) {
        (Some(w), Some(valid)) => {
            let zero = cx.scalar_like(w, 0.0);
            Some(cx.op(Op::Where, &[valid, w, zero])?)
        }
        (Some(w), None) => Some(w),
        (None, Some(valid)) => Some(cx.op(Op::Cast { to: dtype }, &[valid])?),
        (None, None) => None,
    };
    if let Some(f) = factor {
        loss = cx.bin(BinaryOp::Mul, loss, f)?;
    }
    let all = |op| Op::Reduce {
        op,
        axes: Vec::new(),
        keepdims: false,
    };
    match (reduction.as_str(), factor) {
        ("none", _) => Ok(loss),
        ("sum", _) => cx.op(all(ReduceOp::Sum), &[loss]),
        (_, Some(f)) => {
            let total = cx.op(all(ReduceOp::Sum), &[loss])?;
            let weights = cx.op(all(ReduceOp::Sum), &[f])?;
            cx.bin(BinaryOp::Div, total, weights)
        }
        (_, None) => cx.op(all(ReduceOp::Mean), &[loss]),
    }
}
