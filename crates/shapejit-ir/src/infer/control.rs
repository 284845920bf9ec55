//! Inference for control flow: `if` and `loop` read their sub-graphs' recorded
//! input and output types (the sub-graphs are verified on their own).
//!
//! **Invariant:** where two types meet (the two branches, a loop-carried value
//! before and after the body) dtype and rank must agree; a dim that differs
//! becomes a fresh symbol.

use super::{InferCtx, Inferred, arity, expect_dtype, is_one_element, known_ints};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::graph::{Graph, ValueId, ValueInfo, ValueType};
use crate::shape::Shape;

/// The types of a sub-graph's inputs or outputs (ids checked, no panic).
fn types<'g>(graph: &'g Graph, ids: &[ValueId], what: &str) -> Result<Vec<&'g ValueType>, String> {
    ids.iter()
        .map(|id| {
            graph.values.get(id.index()).map(|v| &v.ty).ok_or_else(|| {
                format!(
                    "sub-graph '{}' {what} {id:?} is out of range ({} values)",
                    graph.name,
                    graph.values.len()
                )
            })
        })
        .collect()
}

/// Merges two types that must agree on dtype and rank; differing dims go fresh.
fn merge(
    a: &ValueType,
    b: &ValueType,
    what: &str,
    ctx: &mut InferCtx,
) -> Result<ValueType, String> {
    if a.dtype != b.dtype || a.shape.rank() != b.shape.rank() {
        return Err(format!(
            "{what}: {a} vs {b}, expected the same dtype and rank"
        ));
    }
    let dims = a
        .shape
        .dims()
        .iter()
        .zip(b.shape.dims())
        .map(|(x, y)| if x == y { x.clone() } else { ctx.fresh_dim() });
    Ok(ValueType {
        dtype: a.dtype,
        shape: Shape(dims.collect()),
    })
}

/// Checks a parent value can bind a sub-graph input (same dtype and rank).
fn check_binds(parent: &ValueType, sub: &ValueType, what: &str) -> Result<(), String> {
    if parent.dtype != sub.dtype || parent.shape.rank() != sub.shape.rank() {
        return Err(format!(
            "{what} is {parent}, but the sub-graph input is {sub}: expected the same dtype and rank"
        ));
    }
    Ok(())
}

/// Checks a value is a bool with exactly one element.
fn check_bool_scalar(info: &ValueInfo, idx: usize) -> Result<(), String> {
    let one = is_one_element(&info.ty.shape);
    if info.ty.dtype != DType::Bool || !one {
        return Err(format!(
            "input {idx} is {}, expected bool with one element",
            info.ty
        ));
    }
    Ok(())
}

/// `if cond, captured...`: both branches take the captured values and agree on outputs.
pub(super) fn if_(
    then_branch: &Graph,
    else_branch: &Graph,
    inputs: &[&ValueInfo],
    ctx: &mut InferCtx,
) -> Result<Vec<Inferred>, String> {
    arity(inputs, 1, usize::MAX)?;
    check_bool_scalar(inputs[0], 0)?;
    let captured = &inputs[1..];
    for (label, branch) in [("then", then_branch), ("else", else_branch)] {
        let sub_inputs = types(branch, &branch.inputs, "input")?;
        if sub_inputs.len() != captured.len() {
            return Err(format!(
                "{label} branch takes {} inputs, expected {} (the captured values)",
                sub_inputs.len(),
                captured.len()
            ));
        }
        for (i, (parent, sub)) in captured.iter().zip(sub_inputs).enumerate() {
            check_binds(&parent.ty, sub, &format!("captured input {}", i + 1))?;
        }
    }
    let then_out = types(then_branch, &then_branch.outputs, "output")?;
    let else_out = types(else_branch, &else_branch.outputs, "output")?;
    if then_out.len() != else_out.len() {
        return Err(format!(
            "then branch has {} outputs, else branch {}: expected equal",
            then_out.len(),
            else_out.len()
        ));
    }
    then_out
        .iter()
        .zip(&else_out)
        .enumerate()
        .map(|(i, (t, e))| {
            let ty = merge(t, e, &format!("branch output {i}"), ctx)?;
            Ok(Inferred { ty, known: None })
        })
        .collect()
}

/// `loop max_trip, cond, carried..., captured...` with body
/// `(iter, cond, carried..., captured...) -> (cond, carried..., scans...)`.
pub(super) fn loop_(
    body: &Graph,
    n_carried: usize,
    inputs: &[&ValueInfo],
    ctx: &mut InferCtx,
) -> Result<Vec<Inferred>, String> {
    arity(inputs, n_carried.saturating_add(2), usize::MAX)?;
    expect_dtype(inputs, 0, &[DType::I64])?;
    if !is_one_element(&inputs[0].ty.shape) {
        return Err(format!(
            "input 0 (max_trip) is {}, expected one element",
            inputs[0].ty
        ));
    }
    check_bool_scalar(inputs[1], 1)?;
    let body_in = types(body, &body.inputs, "input")?;
    if body_in.len() != inputs.len() {
        return Err(format!(
            "body takes {} inputs, expected {} (iter, cond, {n_carried} carried, {} captured)",
            body_in.len(),
            inputs.len(),
            inputs.len() - 2 - n_carried
        ));
    }
    let iter_ty = ValueType {
        dtype: DType::I64,
        shape: Shape::scalar(),
    };
    check_binds(&iter_ty, body_in[0], "the iteration count")?;
    check_binds(&inputs[1].ty, body_in[1], "the loop condition")?;
    for i in 2..inputs.len() {
        check_binds(&inputs[i].ty, body_in[i], &format!("loop input {i}"))?;
    }
    let body_out = types(body, &body.outputs, "output")?;
    if body_out.len() < 1 + n_carried {
        return Err(format!(
            "body has {} outputs, expected at least {} (cond, carried)",
            body_out.len(),
            1 + n_carried
        ));
    }
    if body_out[0].dtype != DType::Bool || !is_one_element(&body_out[0].shape) {
        return Err(format!(
            "body output 0 (cond) is {}, expected bool with one element",
            body_out[0]
        ));
    }
    let mut out = Vec::with_capacity(body_out.len() - 1);
    for i in 0..n_carried {
        let ty = merge(
            &inputs[2 + i].ty,
            body_out[1 + i],
            &format!("carried value {i}"),
            ctx,
        )?;
        out.push(Inferred { ty, known: None });
    }
    let trips = known_ints(inputs[0])
        .and_then(|k| k.first().copied())
        .filter(|&n| n >= 0);
    for scan in &body_out[1 + n_carried..] {
        let lead = trips.map_or_else(|| ctx.fresh_dim(), Dim::known);
        let mut dims = vec![lead];
        dims.extend(scan.shape.dims().iter().cloned());
        out.push(Inferred::new(scan.dtype, Shape(dims)));
    }
    Ok(out)
}
