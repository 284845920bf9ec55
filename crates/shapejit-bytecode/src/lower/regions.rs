//! Region formation: maximal runs of consecutive fusible nodes of one graph.
//!
//! Three kinds are formed (see [`RegionKind`]):
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
use shapejit_ir::{DType, Graph, Node, Op, ValueId};
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
        Op::MatMul | Op::Gemm { .. } => Some(Class::Matmul),
        Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::LayerNorm { .. } | Op::Reduce { .. } => {
            Some(Class::Reduction)
        }
        _ => None,
    }
}

/// Plans the regions of `graph` whose nodes are emitted in `order` (node indices).
pub(crate) fn plan(graph: &Graph, order: &[usize]) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut pos = 0;
    while pos < order.len() {
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
