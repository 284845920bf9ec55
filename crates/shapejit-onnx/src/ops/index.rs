//! Element-indexed ops: GatherElements, ScatterElements (and the deprecated
//! Scatter, its version-9 name), GatherND and ScatterND, each one IR op.
//!
//! **Invariant:** attributes map one to one (`axis`, `batch_dims`,
//! `reduction` = none | add | mul | max | min).

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{Op, ScatterReduction, ValueId};

fn reduction(cx: &NodeCx) -> NodeResult<ScatterReduction> {
    let name = cx.attr_string("reduction")?;
    let name = name.as_deref().unwrap_or("none");
    ScatterReduction::ALL
        .into_iter()
        .find(|r| r.name() == name)
        .ok_or_else(|| cx.bad(format!("reduction = '{name}'")))
}

/// `GatherElements(data, indices; axis = 0)`.
pub fn gather_elements(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, idx) = (cx.input(0)?, cx.input(1)?);
    let axis = cx.int_or("axis", 0)?;
    Ok(vec![cx.op(Op::GatherElements { axis }, &[x, idx])?])
}

/// `ScatterElements(data, indices, updates; axis = 0, reduction = none)`.
pub fn scatter_elements(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, idx, upd) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let axis = cx.int_or("axis", 0)?;
    let reduction = reduction(cx)?;
    Ok(vec![cx.op(
        Op::ScatterElements { axis, reduction },
        &[x, idx, upd],
    )?])
}

/// `GatherND(data, indices; batch_dims = 0)`.
pub fn gather_nd(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, idx) = (cx.input(0)?, cx.input(1)?);
    let batch_dims = usize::try_from(cx.int_or("batch_dims", 0)?)
        .map_err(|_| cx.bad("batch_dims must be non-negative"))?;
    Ok(vec![cx.op(Op::GatherNd { batch_dims }, &[x, idx])?])
}

/// `ScatterND(data, indices, updates; reduction = none)`.
pub fn scatter_nd(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, idx, upd) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let reduction = reduction(cx)?;
    Ok(vec![cx.op(Op::ScatterNd { reduction }, &[x, idx, upd])?])
}
