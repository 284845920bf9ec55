//! The graph verifier: checks the invariants listed in [`crate::graph`].
//!
//! Rules, in the order they are checked (each error names the rule and the
//! node or value at fault):
//! 1. every id (graph inputs and outputs, node inputs and outputs) is in range;
//! 2. value names are non-empty and unique;
//! 3. every value is defined exactly once, as a graph input or a node output;
//! 4. nodes are in topological order (inputs defined before use);
//! 5. sub-graphs are valid (recursively, at most [`MAX_NESTING`] deep) and their
//!    input and output counts match the parent node's contract;
//! 6. each node's recorded output types are what shape inference gives from its
//!    recorded input types (a dim inference leaves unknown, a fresh symbol,
//!    accepts any recorded dim), and recorded `known` contents match.
//!
//! **Invariant:** `verify` never panics, whatever the graph holds.

use crate::error::IrError;
use crate::graph::{Graph, Node, ValueId, ValueInfo};
use crate::infer::{InferCtx, infer, type_matches};
use crate::op::Op;

/// Deepest nesting of sub-graphs (`if` inside `loop` inside ...) accepted.
pub const MAX_NESTING: usize = 32;

/// Checks a graph's structural invariants.
pub fn verify(graph: &Graph) -> Result<(), IrError> {
    verify_nested(graph, &graph.name, 0)
}

/// Verifies `graph`, whose path from the top graph is `path` (for messages).
fn verify_nested(graph: &Graph, path: &str, depth: usize) -> Result<(), IrError> {
    let fail = |message: String| IrError::Verify {
        graph: path.to_string(),
        message,
    };
    if depth > MAX_NESTING {
        return Err(fail(format!(
            "sub-graphs nest deeper than {MAX_NESTING} levels"
        )));
    }
    check_ids(graph).map_err(fail)?;
    check_names(graph).map_err(fail)?;
    check_definitions(graph).map_err(fail)?;
    let mut ctx = InferCtx::default();
    for node in &graph.nodes {
        for (label, sub) in subgraph_labels(&node.op) {
            check_contract(node, label, sub).map_err(|m| fail(node_msg(node, &m)))?;
            verify_nested(sub, &format!("{path}/{}.{label}", node.name), depth + 1)?;
        }
        check_types(graph, node, &mut ctx).map_err(|m| fail(node_msg(node, &m)))?;
    }
    Ok(())
}

fn node_msg(node: &Node, message: &str) -> String {
    format!("node '{}' ({}): {message}", node.name, node.op.name())
}

/// The sub-graphs of an op with their role names.
fn subgraph_labels(op: &Op) -> Vec<(&'static str, &Graph)> {
    match op {
        Op::If {
            then_branch,
            else_branch,
        } => vec![("then", then_branch), ("else", else_branch)],
        Op::Loop { body, .. } => vec![("body", body)],
        _ => Vec::new(),
    }
}

/// Rule 1: ids in range.
fn check_ids(graph: &Graph) -> Result<(), String> {
    let n = graph.values.len();
    let bad = |id: &ValueId| id.index() >= n;
    if let Some(id) = graph.inputs.iter().find(|i| bad(i)) {
        return Err(format!("graph input {id:?} is out of range ({n} values)"));
    }
    if let Some(id) = graph.outputs.iter().find(|i| bad(i)) {
        return Err(format!("graph output {id:?} is out of range ({n} values)"));
    }
    for node in &graph.nodes {
        if let Some(id) = node.inputs.iter().chain(&node.outputs).find(|i| bad(i)) {
            return Err(node_msg(
                node,
                &format!("value {id:?} is out of range ({n} values)"),
            ));
        }
    }
    Ok(())
}

/// Rule 2: value names non-empty and unique.
fn check_names(graph: &Graph) -> Result<(), String> {
    let mut seen = std::collections::HashMap::new();
    for (i, v) in graph.values.iter().enumerate() {
        if v.name.is_empty() {
            return Err(format!("value v{i} has an empty name"));
        }
        if let Some(first) = seen.insert(v.name.as_str(), i) {
            return Err(format!(
                "value name '{}' is used by v{first} and v{i}, expected unique names",
                v.name
            ));
        }
    }
    Ok(())
}

/// Rules 3 and 4: defined exactly once, before use.
fn check_definitions(graph: &Graph) -> Result<(), String> {
    let name = |id: ValueId| &graph.values[id.index()].name;
    let mut defined = vec![false; graph.values.len()];
    let mut define = |id: ValueId, by: &str| {
        if std::mem::replace(&mut defined[id.index()], true) {
            Err(format!(
                "value '{}' is defined twice (again {by}), expected one definition",
                name(id)
            ))
        } else {
            Ok(())
        }
    };
    for &i in &graph.inputs {
        define(i, "as a graph input")?;
    }
    // Which values some node defines, to tell "used before defined" from "never defined".
    let mut node_defined = vec![false; graph.values.len()];
    for node in &graph.nodes {
        for &o in &node.outputs {
            node_defined[o.index()] = true;
        }
    }
    let mut defined_now = vec![false; graph.values.len()];
    for &i in &graph.inputs {
        defined_now[i.index()] = true;
    }
    for node in &graph.nodes {
        for &i in &node.inputs {
            if !defined_now[i.index()] {
                let why = if node_defined[i.index()] {
                    "is used before it is defined"
                } else {
                    "is never defined"
                };
                return Err(node_msg(node, &format!("input '{}' {why}", name(i))));
            }
        }
        for &o in &node.outputs {
            define(o, &format!("by node '{}'", node.name))?;
            defined_now[o.index()] = true;
        }
    }
    if let Some(&o) = graph.outputs.iter().find(|o| !defined_now[o.index()]) {
        return Err(format!("graph output '{}' is never defined", name(o)));
    }
    if let Some(i) = defined_now.iter().position(|d| !d) {
        return Err(format!("value '{}' is never defined", graph.values[i].name));
    }
    Ok(())
}

/// Rule 5: a sub-graph's signature matches what the parent node passes it.
fn check_contract(node: &Node, label: &str, sub: &Graph) -> Result<(), String> {
    let (want_in, min_out) = match &node.op {
        Op::If { .. } => (node.inputs.len().saturating_sub(1), 0),
        Op::Loop { n_carried, .. } => (node.inputs.len(), n_carried.saturating_add(1)),
        _ => return Ok(()),
    };
    if sub.inputs.len() != want_in {
        return Err(format!(
            "{label} sub-graph '{}' takes {} inputs, expected {want_in} from the node's inputs",
            sub.name,
            sub.inputs.len()
        ));
    }
    if sub.outputs.len() < min_out {
        return Err(format!(
            "{label} sub-graph '{}' has {} outputs, expected at least {min_out}",
            sub.name,
            sub.outputs.len()
        ));
    }
    Ok(())
}

/// Rule 6: recorded output types are the inferred ones.
fn check_types(graph: &Graph, node: &Node, ctx: &mut InferCtx) -> Result<(), String> {
    let inputs: Vec<&ValueInfo> = node.inputs.iter().map(|&i| graph.value(i)).collect();
    let inferred =
        infer(&node.op, &inputs, ctx).map_err(|e| format!("shape inference fails: {e}"))?;
    if inferred.len() != node.outputs.len() {
        return Err(format!(
            "has {} outputs, expected {} (from shape inference)",
            node.outputs.len(),
            inferred.len()
        ));
    }
    for (i, (&o, inf)) in node.outputs.iter().zip(&inferred).enumerate() {
        let recorded = graph.value(o);
        if !type_matches(&recorded.ty, &inf.ty, ctx) {
            return Err(format!(
                "output {i} '{}' is recorded as {}, but shape inference gives {}",
                recorded.name, recorded.ty, inf.ty
            ));
        }
        if recorded.known.is_some() && recorded.known != inf.known {
            return Err(format!(
                "output {i} '{}' records known contents {:?}, but shape inference gives {:?}",
                recorded.name, recorded.known, inf.known
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::graph::ValueType;
    use crate::op::BinaryOp;
    use crate::shape;
    use crate::{GraphBuilder, Tensor};

    fn small() -> Graph {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", DType::F32, shape!["batch", 4]);
        let w = b.constant("w", Tensor::zeros(DType::F32, &[4, 2]).unwrap());
        let h = b.matmul(x, w).unwrap();
        let y = b.relu(h).unwrap();
        b.output("y", y).unwrap();
        b.finish().unwrap()
    }

    fn err(g: &Graph) -> String {
        verify(g).unwrap_err().to_string()
    }

    #[test]
    fn accepts_a_built_graph() {
        assert_eq!(verify(&small()), Ok(()));
    }

    #[test]
    fn rejects_each_broken_rule() {
        let mut g = small();
        g.outputs.push(ValueId(99));
        assert_eq!(
            err(&g),
            "invalid graph 'g': graph output v99 is out of range (4 values)"
        );

        let mut g = small();
        g.values[1].name = "x".into();
        assert_eq!(
            err(&g),
            "invalid graph 'g': value name 'x' is used by v0 and v1, expected unique names"
        );

        let mut g = small();
        g.nodes.swap(1, 2);
        assert_eq!(
            err(&g),
            "invalid graph 'g': node 'relu_0' (relu): input 'matmul_0' is used before it is defined"
        );

        let mut g = small();
        g.nodes[2].outputs = vec![ValueId(1)];
        assert!(
            err(&g).contains("value 'w' is defined twice (again by node 'relu_0')"),
            "{}",
            err(&g)
        );

        let mut g = small();
        g.values[3].ty = ValueType {
            dtype: DType::F32,
            shape: shape!["batch", 3],
        };
        assert_eq!(
            err(&g),
            "invalid graph 'g': node 'relu_0' (relu): output 0 'y' is recorded as f32[batch, 3], but shape inference gives f32[batch, 2]"
        );

        let mut g = small();
        g.nodes[1].op = Op::Binary(BinaryOp::Add);
        assert!(
            err(&g).contains("node 'matmul_0' (add): shape inference fails: cannot broadcast"),
            "{}",
            err(&g)
        );

        let mut g = small();
        g.nodes.remove(0);
        assert_eq!(
            err(&g),
            "invalid graph 'g': node 'matmul_0' (matmul): input 'w' is never defined"
        );
    }

    #[test]
    fn checks_sub_graph_contracts() {
        let mut tb = GraphBuilder::new("then");
        let a = tb.input("a", DType::F32, shape![2]);
        let n = tb.neg(a).unwrap();
        tb.output("r", n).unwrap();
        let then_g = tb.finish().unwrap();
        let mut b = GraphBuilder::new("main");
        let c = b.input("c", DType::Bool, shape![]);
        let x = b.input("x", DType::F32, shape![2]);
        let outs = b.if_(c, then_g.clone(), then_g.clone(), &[x]).unwrap();
        b.output("y", outs[0]).unwrap();
        let g = b.finish().unwrap();
        assert_eq!(verify(&g), Ok(()));

        let mut bad = g.clone();
        if let Op::If { else_branch, .. } = &mut bad.nodes[0].op {
            else_branch.values[1].ty.shape = shape![3];
        }
        assert_eq!(
            err(&bad),
            "invalid graph 'main/if_0.else': node 'neg_0' (neg): output 0 'r' is recorded as f32[3], but shape inference gives f32[2]"
        );
        let mut bad = g;
        bad.nodes[0].inputs.push(ValueId(0));
        assert_eq!(
            err(&bad),
            "invalid graph 'main': node 'if_0' (if): then sub-graph 'then' takes 1 inputs, expected 2 from the node's inputs"
        );
    }
}
