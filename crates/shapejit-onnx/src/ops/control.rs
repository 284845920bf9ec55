//! Control flow: `If` and `Loop` with sub-graphs.
//!
//! ONNX sub-graphs read outer values by name. The IR's sub-graphs take them
//! as explicit inputs (captures) after their own inputs; the parent node
//! passes them in the same order. Outer constants are copied in instead.
//!
//! **Invariant:** both `If` branches take the same captured inputs in the
//! same order, and a `Loop` body's inputs are iteration, condition, carried
//! values, then captures — the order the IR's `If`/`Loop` document.

use crate::import::{SubgraphInputs, free_names, import_subgraph};
use crate::node::{NodeCx, NodeResult};
use crate::proto::GraphProto;
use shapejit_ir::{DType, Dim, Graph, Op, Shape, Tensor, ValueId, ValueType};

/// The outer values the sub-graphs read: constants to copy in, and the
/// captured (non-constant) values, bound in this order.
struct Captures {
    consts: Vec<(String, Tensor)>,
    inputs: Vec<(String, ValueType)>,
    values: Vec<ValueId>,
}

fn captures(cx: &NodeCx, graphs: &[&GraphProto]) -> NodeResult<Captures> {
    let mut names: Vec<String> = Vec::new();
    for g in graphs {
        for name in free_names(g) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let mut res = Captures {
        consts: Vec::new(),
        inputs: Vec::new(),
        values: Vec::new(),
    };
    for name in names {
        let v = *cx.g.names.get(&name).ok_or_else(|| {
            cx.bad(format!(
                "a sub-graph reads '{name}', which is not defined in an enclosing graph"
            ))
        })?;
        match cx.const_tensor(v) {
            Some(t) => res.consts.push((name, t.clone())),
            None => {
                res.inputs.push((name, cx.ty(v).clone()));
                res.values.push(v);
            }
        }
    }
    Ok(res)
}

fn sub_error(cx: &NodeCx, which: &str, e: crate::error::OnnxError) -> crate::error::OnnxError {
    cx.bad(format!("in {which}: {e}"))
}

/// `If(cond)` with `then_branch` / `else_branch`.
pub fn if_(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let cond = cx.input(0)?;
    let then_g = cx.attr_graph("then_branch")?;
    let else_g = cx.attr_graph("else_branch")?;
    let caps = captures(cx, &[then_g, else_g])?;
    let spec = SubgraphInputs {
        inputs: caps.inputs,
        consts: caps.consts,
    };
    let then_branch = import_subgraph(then_g, cx.opset(), cx.g.external, &spec)
        .map_err(|e| sub_error(cx, "then_branch", e))?;
    let else_branch = import_subgraph(else_g, cx.opset(), cx.g.external, &spec)
        .map_err(|e| sub_error(cx, "else_branch", e))?;
    let mut inputs = vec![cond];
    inputs.extend(caps.values);
    cx.ops(
        Op::If {
            then_branch: Box::new(then_branch),
            else_branch: Box::new(else_branch),
        },
        &inputs,
    )
}

/// `Loop(M, cond, v_initial...)` with `body`. An absent `M` is `i64::MAX`
/// iterations, an absent `cond` is `true`.
///
/// The body is imported with the carried values' initial types; when the
/// body changes a carried dim (a growing tensor), it is imported again with
/// that dim as a fresh symbol, so nothing inside assumes the first shape.
pub fn loop_(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let body = cx.attr_graph("body")?;
    let max_trip = match cx.opt_input(0)? {
        Some(m) => m,
        None => cx.constant(Tensor::scalar(i64::MAX)),
    };
    let cond = match cx.opt_input(1)? {
        Some(c) => c,
        None => cx.constant(Tensor::scalar(true)),
    };
    let carried = (2..cx.n_inputs())
        .map(|i| cx.input(i))
        .collect::<NodeResult<Vec<_>>>()?;
    if body.input.len() != carried.len() + 2 {
        return Err(cx.bad(format!(
            "the body has {} inputs, expected 2 + {} carried values",
            body.input.len(),
            carried.len()
        )));
    }
    let caps = captures(cx, &[body])?;
    let names: Vec<String> = body.input.iter().map(|v| v.name.clone()).collect();
    let mut carried_types: Vec<ValueType> = carried.iter().map(|&v| cx.ty(v).clone()).collect();
    let head = vec![
        (
            names[0].clone(),
            ValueType {
                dtype: DType::I64,
                shape: Shape::scalar(),
            },
        ),
        (names[1].clone(), cx.ty(cond).clone()),
    ];
    let import = |cx: &NodeCx, head: &[(String, ValueType)], carried_types: &[ValueType]| {
        let mut inputs = head.to_vec();
        inputs.extend(
            names[2..]
                .iter()
                .cloned()
                .zip(carried_types.iter().cloned()),
        );
        inputs.extend(caps.inputs.iter().cloned());
        let spec = SubgraphInputs {
            inputs,
            consts: caps.consts.clone(),
        };
        import_subgraph(body, cx.opset(), cx.g.external, &spec)
            .map_err(|e| sub_error(cx, "body", e))
    };
    let mut body_graph = import(cx, &head, &carried_types)?;
    let generalized = generalize(cx, &body_graph, &carried_types);
    if generalized != carried_types {
        carried_types = generalized;
        body_graph = import(cx, &head, &carried_types)?;
    }
    let mut node_inputs = vec![max_trip, cond];
    node_inputs.extend(&carried);
    node_inputs.extend(caps.values);
    cx.ops(
        Op::Loop {
            body: Box::new(body_graph),
            n_carried: carried.len(),
        },
        &node_inputs,
    )
}

/// The carried types with every dim the body changes replaced by a fresh
/// symbol `NODE_cI_AXIS` (dtype or rank changes are left for inference to report).
fn generalize(cx: &NodeCx, body: &Graph, carried: &[ValueType]) -> Vec<ValueType> {
    let base: String = cx
        .at
        .node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    carried
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            let Some(out) = body
                .outputs
                .get(i + 1)
                .and_then(|&o| body.values.get(o.index()))
            else {
                return ty.clone();
            };
            if out.ty.shape.rank() != ty.shape.rank() {
                return ty.clone();
            }
            let dims = ty
                .shape
                .dims()
                .iter()
                .zip(out.ty.shape.dims())
                .enumerate()
                .map(|(axis, (a, b))| {
                    if a == b {
                        a.clone()
                    } else {
                        Dim::sym(&format!("_{base}_c{i}_{axis}"))
                    }
                })
                .collect();
            ValueType {
                dtype: ty.dtype,
                shape: Shape(dims),
            }
        })
        .collect()
}
