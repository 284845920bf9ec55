//! Load-time graph rewrites of the kind onnxruntime applies: patterns that
//! exporters emit for one operation are replaced by that operation, so the
//! interpreter runs one kernel (one pass over memory) instead of several.
//!
//! - **GELU, erf form**: `x · 0.5 · (1 + erf(x / √2))` in the groupings
//!   exporters emit (`Mul(x, 1/√2)` or `Div(x, √2)`; the `0.5` applied to `x`,
//!   to the sum, or to the product) becomes `gelu(x)` (`tanh_approx = false`).
//! - Dead code is removed afterwards ([`remove_dead`]): nodes none of whose
//!   results reach a graph output, and the values only they defined.
//!
//! **Invariant:** a rewrite fires only when every value it bypasses has exactly
//! one use and is not a graph output, and the fused node's result keeps its
//! dtype and shape; the graph's inputs and outputs are unchanged, and the result
//! passes [`crate::verify()`] whenever the input did.
//! **Invariant:** the fused GELU differs from the unfused chain only by rounding
//! (within the error [`UnaryOp::Gelu`]'s kernels state).

use crate::dtype::DType;
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{BinaryOp, Op, UnaryOp};

/// Applies every rewrite, then [`remove_dead`]; returns how many patterns fused.
pub fn fuse(graph: &mut Graph) -> usize {
    let fused = fuse_gelu(graph);
    if fused > 0 {
        remove_dead(graph);
    }
    fused
}

/// What the rewrites look up about the graph.
struct Facts {
    producer: Vec<Option<NodeId>>,
    uses: Vec<usize>,
}

impl Facts {
    fn of(graph: &Graph) -> Facts {
        Facts {
            producer: graph.producers(),
            uses: graph.use_counts(),
        }
    }

    /// The node defining `v` when `v` feeds nothing but its one consumer.
    fn single_use_def<'g>(&self, graph: &'g Graph, v: ValueId) -> Option<(NodeId, &'g Op)> {
        if self.uses[v.index()] != 1 || graph.outputs.contains(&v) {
            return None;
        }
        let id = self.producer[v.index()]?;
        Some((id, &graph.node(id).op))
    }
}

/// The value of a one-element f32 constant.
fn scalar_of(graph: &Graph, facts: &Facts, v: ValueId) -> Option<f32> {
    let node = graph.node(facts.producer[v.index()]?);
    match &node.op {
        Op::Constant { value } if value.dtype() == DType::F32 && value.numel() == 1 => {
            value.as_slice::<f32>().ok()?.first().copied()
        }
        _ => None,
    }
}

/// `(other operand, constant)` of a binary node with `op` whose operand is the
/// scalar `c` (either side for commutative ops, right only otherwise).
fn with_scalar(
    graph: &Graph,
    facts: &Facts,
    node: NodeId,
    op: BinaryOp,
    c: f32,
) -> Option<ValueId> {
    let n = graph.node(node);
    if n.op != Op::Binary(op) || n.inputs.len() != 2 {
        return None;
    }
    let (a, b) = (n.inputs[0], n.inputs[1]);
    let close = |v| scalar_of(graph, facts, v).is_some_and(|x| (x - c).abs() <= c.abs() * 1e-6);
    if close(b) {
        Some(a)
    } else if close(a) && matches!(op, BinaryOp::Add | BinaryOp::Mul) {
        Some(b)
    } else {
        None
    }
}

/// Rewrites every erf-form GELU; returns how many.
fn fuse_gelu(graph: &mut Graph) -> usize {
    let facts = Facts::of(graph);
    let mut rewrites = Vec::new();
    for (idx, node) in graph.nodes.iter().enumerate() {
        if let Some(x) = gelu_input(graph, &facts, NodeId(idx as u32)) {
            let (xt, yt) = (&graph.value(x).ty, &graph.value(node.outputs[0]).ty);
            if xt == yt && xt.dtype == DType::F32 {
                rewrites.push((idx, x));
            }
        }
    }
    for &(idx, x) in &rewrites {
        let node = &mut graph.nodes[idx];
        node.op = Op::Unary(UnaryOp::Gelu { tanh_approx: false });
        node.inputs = vec![x];
    }
    rewrites.len()
}

/// When `root` is the last `Mul` of an erf-form GELU of `x`, returns `x`.
fn gelu_input(graph: &Graph, facts: &Facts, root: NodeId) -> Option<ValueId> {
    let node = graph.node(root);
    if node.op != Op::Binary(BinaryOp::Mul) || node.inputs.len() != 2 || node.outputs.len() != 1 {
        return None;
    }
    let (p, q) = (node.inputs[0], node.inputs[1]);
    // Mul(a, b) of two single-use intermediates or of one and a constant 0.5.
    for (u, v) in [(p, q), (q, p)] {
        // (x · 0.5) · (1 + erf)  or  (x · (1 + erf)) · 0.5  or  x · ((1 + erf) · 0.5)
        if let Some((u_id, _)) = facts.single_use_def(graph, u) {
            if let Some(x) = with_scalar(graph, facts, u_id, BinaryOp::Mul, 0.5)
                && one_plus_erf_of(graph, facts, v) == Some(x)
            {
                return Some(x);
            }
            if scalar_of(graph, facts, v).is_some_and(|c| c == 0.5) {
                let inner = graph.node(u_id);
                if inner.op == Op::Binary(BinaryOp::Mul) && inner.inputs.len() == 2 {
                    let (a, b) = (inner.inputs[0], inner.inputs[1]);
                    for (x, s) in [(a, b), (b, a)] {
                        if one_plus_erf_of(graph, facts, s) == Some(x) {
                            return Some(x);
                        }
                    }
                }
            }
            if let Some(s) = with_scalar(graph, facts, u_id, BinaryOp::Mul, 0.5)
                && one_plus_erf_of(graph, facts, s) == Some(v)
            {
                return Some(v);
            }
        }
    }
    None
}

/// When single-use `v` is `1 + erf(x/√2)` (either operand order), returns `x`.
fn one_plus_erf_of(graph: &Graph, facts: &Facts, v: ValueId) -> Option<ValueId> {
    let (add, _) = facts.single_use_def(graph, v)?;
    let e = with_scalar(graph, facts, add, BinaryOp::Add, 1.0)?;
    let (erf, op) = facts.single_use_def(graph, e)?;
    if *op != Op::Unary(UnaryOp::Erf) {
        return None;
    }
    let arg = graph.node(erf).inputs.first().copied()?;
    let (scale, _) = facts.single_use_def(graph, arg)?;
    with_scalar(
        graph,
        facts,
        scale,
        BinaryOp::Mul,
        std::f32::consts::FRAC_1_SQRT_2,
    )
    .or_else(|| with_scalar(graph, facts, scale, BinaryOp::Div, std::f32::consts::SQRT_2))
}

/// Removes nodes none of whose results reach a graph output (sub-graph nodes
/// are kept whole) and the values only they defined; value ids are renumbered
/// in their old order.
pub fn remove_dead(graph: &mut Graph) {
    let mut live = vec![false; graph.values.len()];
    for &o in &graph.outputs {
        live[o.index()] = true;
    }
    let mut keep = vec![false; graph.nodes.len()];
    for (idx, node) in graph.nodes.iter().enumerate().rev() {
        if node.outputs.iter().any(|o| live[o.index()]) {
            keep[idx] = true;
            for &i in &node.inputs {
                live[i.index()] = true;
            }
        }
    }
    if keep.iter().all(|&k| k) {
        return;
    }
    let mut kept_values = vec![false; graph.values.len()];
    for &i in &graph.inputs {
        kept_values[i.index()] = true;
    }
    let mut idx = 0;
    graph.nodes.retain(|_| {
        idx += 1;
        keep[idx - 1]
    });
    for node in &graph.nodes {
        for &v in node.inputs.iter().chain(&node.outputs) {
            kept_values[v.index()] = true;
        }
    }
    let mut new_id = vec![None; graph.values.len()];
    let mut next = 0u32;
    for (old, &kept) in kept_values.iter().enumerate() {
        if kept {
            new_id[old] = Some(ValueId(next));
            next += 1;
        }
    }
    let mut old = 0;
    graph.values.retain(|_| {
        old += 1;
        kept_values[old - 1]
    });
    // Invariant: every id still referenced is an input, output or node operand,
    // all of which were marked kept above.
    let map = |v: &mut ValueId| *v = new_id[v.index()].expect("referenced values are kept");
    graph.inputs.iter_mut().for_each(map);
    graph.outputs.iter_mut().for_each(map);
    for node in &mut graph.nodes {
        node.inputs.iter_mut().for_each(map);
        node.outputs.iter_mut().for_each(map);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GraphBuilder, Tensor, shape, verify};

    /// The groupings of `x · 0.5 · (1 + erf(x/√2))` exporters emit.
    #[derive(Clone, Copy, Debug)]
    enum Grouping {
        HalfXTimesSum,
        XTimesSumThenHalf,
        XTimesHalfSum,
        DivBySqrt2,
    }

    /// `y = gelu-chain(x)` with `grouping`, and `extra_use` of `1 + erf` as a
    /// second output when asked; `half` is the constant used for 0.5.
    fn chain(grouping: Grouping, half: f32, extra_use: bool) -> Graph {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", DType::F32, shape!["batch", 8]);
        let c = |b: &mut GraphBuilder, name, v: f32| b.constant(name, Tensor::scalar(v));
        let h = c(&mut b, "half", half);
        let one = c(&mut b, "one", 1.0);
        let scaled = if let Grouping::DivBySqrt2 = grouping {
            let s = c(&mut b, "sqrt2", std::f32::consts::SQRT_2);
            b.binary(BinaryOp::Div, x, s).unwrap()
        } else {
            let s = c(&mut b, "rsqrt2", std::f32::consts::FRAC_1_SQRT_2);
            b.binary(BinaryOp::Mul, s, x).unwrap()
        };
        let e = b.unary(UnaryOp::Erf, scaled).unwrap();
        let sum = b.binary(BinaryOp::Add, one, e).unwrap();
        let y = match grouping {
            Grouping::HalfXTimesSum | Grouping::DivBySqrt2 => {
                let hx = b.binary(BinaryOp::Mul, x, h).unwrap();
                b.binary(BinaryOp::Mul, hx, sum).unwrap()
            }
            Grouping::XTimesSumThenHalf => {
                let xs = b.binary(BinaryOp::Mul, sum, x).unwrap();
                b.binary(BinaryOp::Mul, h, xs).unwrap()
            }
            Grouping::XTimesHalfSum => {
                let hs = b.binary(BinaryOp::Mul, sum, h).unwrap();
                b.binary(BinaryOp::Mul, x, hs).unwrap()
            }
        };
        b.output("y", y).unwrap();
        if extra_use {
            b.output("sum", sum).unwrap();
        }
        b.finish().unwrap()
    }

    fn ops(g: &Graph) -> Vec<&'static str> {
        g.nodes.iter().map(|n| n.op.name()).collect()
    }

    #[test]
    fn every_grouping_becomes_one_gelu_of_the_input() {
        for grouping in [
            Grouping::HalfXTimesSum,
            Grouping::XTimesSumThenHalf,
            Grouping::XTimesHalfSum,
            Grouping::DivBySqrt2,
        ] {
            let mut g = chain(grouping, 0.5, false);
            assert_eq!(fuse(&mut g), 1, "{grouping:?}");
            verify(&g).unwrap();
            assert_eq!(ops(&g), ["gelu"], "{grouping:?}");
            assert_eq!(g.nodes[0].inputs, g.inputs, "{grouping:?}");
            assert_eq!(g.value(g.outputs[0]).name, "y");
            assert_eq!(g.value(g.outputs[0]).ty.to_string(), "f32[batch, 8]");
        }
    }

    #[test]
    fn shared_intermediates_and_other_constants_are_left_alone() {
        let mut shared = chain(Grouping::HalfXTimesSum, 0.5, true);
        let before = shared.clone();
        assert_eq!(fuse(&mut shared), 0);
        assert_eq!(shared, before);
        let mut other = chain(Grouping::HalfXTimesSum, 0.6, false);
        let before = other.clone();
        assert_eq!(fuse(&mut other), 0);
        assert_eq!(other, before);
    }

    #[test]
    fn dead_nodes_go_and_values_are_renumbered() {
        let mut b = GraphBuilder::new("d");
        let x = b.input("x", DType::F32, shape![4]);
        let unused = b.unary(UnaryOp::Exp, x).unwrap();
        let _also = b.unary(UnaryOp::Neg, unused).unwrap();
        let y = b.unary(UnaryOp::Abs, x).unwrap();
        b.output("y", y).unwrap();
        let mut g = b.finish().unwrap();
        remove_dead(&mut g);
        verify(&g).unwrap();
        assert_eq!(ops(&g), ["abs"]);
        assert_eq!(g.values.len(), 2);
        assert_eq!(
            g.to_string(),
            "graph @d(%x: f32[4]) -> (%y) {\n  %y = abs @abs_0 %x : f32[4]\n}\n"
        );
    }
}
