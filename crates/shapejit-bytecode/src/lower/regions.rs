//! Region formation: maximal runs of consecutive fusible nodes of one graph.
//!
//! Four kinds are formed (see [`RegionKind`]):
//! - attention: `matmul(q, k)`, an optional scale (`mul`/`div` by a one-element
//!   f32), an optional additive mask, `softmax` over the last axis, `matmul(·, v)`,
//!   each intermediate used only by the next node (so the scores are never a region
//!   output and a kernel may keep them in cache);
//! - elementwise chains (unary, binary, where, cast);
//! - a matmul/gemm followed by its elementwise epilogue (bias, activation,
//!   residual add) — only with at least one epilogue op;
//! - one softmax / log_softmax / layer_norm / reduction with the elementwise
//!   ops before and after it.
//!
//! **Invariant:** every node of a span after the first reads a value produced by
//! an earlier node of the span (the span is connected), and every node's inputs
//! and outputs are f32 or bool (integer shape arithmetic and the other dtypes,
//! casts from them included, are left to the interpreter).
//!
//! **Invariant:** a node that needs run-time shape checks ([`super::node_checks`])
//! is never inside a span after its first node: its checks are emitted before the
//! span's guard, where all its operands are defined, and a kernel hit (which skips
//! the span) cannot skip them.

use crate::instr::RegionKind;
use shapejit_ir::{BinaryOp, DType, Graph, Node, Op, ValueId};
use std::collections::HashSet;

/// A planned region: positions `start..end` of the emission order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    /// first position (inclusive)
    pub start: usize,
    /// last position (exclusive)
    pub end: usize,
    /// what the region computes
    pub kind: RegionKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Elementwise,
    Matmul,
    Reduction,
}

fn class(graph: &Graph, node: &Node) -> Option<Class> {
    let float_or_bool = node
        .inputs
        .iter()
        .chain(&node.outputs)
        .all(|&v| matches!(graph.value(v).ty.dtype, DType::F32 | DType::Bool));
    if !float_or_bool {
        return None;
    }
    match node.op {
        _ if node.op.is_elementwise() => Some(Class::Elementwise),
        Op::MatMul | Op::MatMulBias | Op::Gemm { .. } => Some(Class::Matmul),
        Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::LayerNorm { .. } | Op::Reduce { .. } => {
            Some(Class::Reduction)
        }
        _ => None,
    }
}

/// The end of the attention chain starting at `order[pos]`, if there is one.
fn attention_end(graph: &Graph, order: &[usize], uses: &[usize], pos: usize) -> Option<usize> {
    let node = |i: usize| order.get(i).map(|&n| &graph.nodes[n]);
    let f32_value = |v: ValueId| graph.value(v).ty.dtype == DType::F32;
    let first = node(pos)?;
    if first.op != Op::MatMul
        || !first
            .inputs
            .iter()
            .chain(&first.outputs)
            .all(|&v| f32_value(v))
    {
        return None;
    }
    let rank = graph.value(first.outputs[0]).ty.shape.rank();
    if rank < 3 {
        return None;
    }
    // `prev` is the running value: used once, by the next node, as one of its inputs
    let mut prev = first.outputs[0];
    let mut at = pos + 1;
    let follows = |n: &Node, prev: ValueId| {
        uses[prev.index()] == 1
            && n.inputs.contains(&prev)
            && super::node_checks(graph, n).is_empty()
            && n.inputs.iter().chain(&n.outputs).all(|&v| f32_value(v))
    };
    let scalar = |v: ValueId| graph.value(v).ty.shape.numel().as_known() == Some(1);
    // optional scale
    if let Some(n) = node(at)
        && follows(n, prev)
        && match n.op {
            Op::Binary(BinaryOp::Mul) => n.inputs.iter().any(|&v| v != prev && scalar(v)),
            Op::Binary(BinaryOp::Div) => n.inputs[0] == prev && scalar(n.inputs[1]),
            _ => false,
        }
    {
        prev = n.outputs[0];
        at += 1;
    }
    // optional additive mask (same rank as the scores: a broadcast is fine)
    if let Some(n) = node(at)
        && follows(n, prev)
        && n.op == Op::Binary(BinaryOp::Add)
        && n.inputs
            .iter()
            .all(|&v| graph.value(v).ty.shape.rank() == rank)
        && n.inputs[0] != n.inputs[1]
    {
        prev = n.outputs[0];
        at += 1;
    }
    let softmax = node(at)?;
    let last_axis = |axis: i64| axis == -1 || axis == rank as i64 - 1;
    if !(follows(softmax, prev) && matches!(softmax.op, Op::Softmax { axis } if last_axis(axis))) {
        return None;
    }
    prev = softmax.outputs[0];
    let second = node(at + 1)?;
    (follows(second, prev) && second.op == Op::MatMul && second.inputs[0] == prev).then_some(at + 2)
}

/// Plans the regions of `graph` whose nodes are emitted in `order` (node indices).
pub(crate) fn plan(graph: &Graph, order: &[usize]) -> Vec<Span> {
    let uses = graph.use_counts();
    let mut spans = Vec::new();
    let mut pos = 0;
    while pos < order.len() {
        if let Some(end) = attention_end(graph, order, &uses, pos) {
            spans.push(Span {
                start: pos,
                end,
                kind: RegionKind::Attention,
            });
            pos = end;
            continue;
        }
        let first = &graph.nodes[order[pos]];
        let Some(first_class) = class(graph, first) else {
            pos += 1;
            continue;
        };
        let mut kind = match first_class {
            Class::Elementwise => RegionKind::Elementwise,
            Class::Matmul => RegionKind::MatmulEpilogue,
            Class::Reduction => RegionKind::Reduction,
        };
        let mut produced: HashSet<ValueId> = first.outputs.iter().copied().collect();
        let mut end = pos + 1;
        while end < order.len() {
            let node = &graph.nodes[order[end]];
            let connected = node.inputs.iter().any(|v| produced.contains(v));
            let joins = super::node_checks(graph, node).is_empty()
                && match class(graph, node) {
                    Some(Class::Elementwise) => true,
                    Some(Class::Reduction) => kind == RegionKind::Elementwise,
                    Some(Class::Matmul) | None => false,
                };
            if !(connected && joins) {
                break;
            }
            if class(graph, node) == Some(Class::Reduction) {
                kind = RegionKind::Reduction;
            }
            produced.extend(node.outputs.iter().copied());
            end += 1;
        }
        let lone_matmul = kind == RegionKind::MatmulEpilogue && end == pos + 1;
        if !lone_matmul {
            spans.push(Span {
                start: pos,
                end,
                kind,
            });
        }
        pos = end;
    }
    spans
}
