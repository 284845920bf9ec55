//! The graph: SSA values, nodes in topological order, inputs and outputs.
//!
//! **Invariants** (checked by [`crate::verify::verify`]):
//! - every value is defined exactly once: as a graph input or as one node's output;
//! - nodes are in topological order (a node's inputs are defined before it);
//! - value names are unique within a graph;
//! - each value's recorded type is what shape inference gives for its node.
//!
//! Sub-graphs (of `if` and `loop`) are separate [`Graph`]s whose inputs are
//! bound by the parent node; they never refer to parent values by name.

use crate::dim::Dim;
use crate::dtype::DType;
use crate::op::Op;
use crate::shape::Shape;
use std::fmt;

/// Index of a value in [`Graph::values`].
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct ValueId(pub u32);

impl ValueId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// Index of a node in [`Graph::nodes`].
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The static type of a value: dtype and (possibly symbolic) shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ValueType {
    /// element type
    pub dtype: DType,
    /// shape, possibly with symbolic dims
    pub shape: Shape,
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}

/// What the graph knows about a value.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ValueInfo {
    /// unique name in the graph
    pub name: String,
    /// dtype and shape
    pub ty: ValueType,
    /// For small integer tensors (rank ≤ 1) computed from shapes: their contents
    /// as dims, so `shape → gather → concat → reshape` chains stay symbolic.
    pub known: Option<Vec<Dim>>,
}

/// One operation applied to values.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// unique name (for errors and listings)
    pub name: String,
    /// the operation
    pub op: Op,
    /// operand values, in the op's documented order
    pub inputs: Vec<ValueId>,
    /// result values
    pub outputs: Vec<ValueId>,
}

/// A dataflow graph.
#[derive(Clone, Debug, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Graph {
    /// graph name
    pub name: String,
    /// every value, indexed by [`ValueId`]
    pub values: Vec<ValueInfo>,
    /// nodes in topological order, indexed by [`NodeId`]
    pub nodes: Vec<Node>,
    /// graph inputs (fed by the caller or, for sub-graphs, the parent node)
    pub inputs: Vec<ValueId>,
    /// graph outputs
    pub outputs: Vec<ValueId>,
}

impl Graph {
    /// The info of a value.
    pub fn value(&self, id: ValueId) -> &ValueInfo {
        &self.values[id.index()]
    }

    /// The node with this id.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// Looks a value up by name.
    pub fn value_by_name(&self, name: &str) -> Option<ValueId> {
        self.values
            .iter()
            .position(|v| v.name == name)
            .map(|i| ValueId(i as u32))
    }

    /// For each value, the node that produces it (`None` for graph inputs).
    pub fn producers(&self) -> Vec<Option<NodeId>> {
        let mut out = vec![None; self.values.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            for &o in &node.outputs {
                if let Some(slot) = out.get_mut(o.index()) {
                    *slot = Some(NodeId(i as u32));
                }
            }
        }
        out
    }

    /// For each value, how many node inputs and graph outputs use it.
    pub fn use_counts(&self) -> Vec<usize> {
        let mut out = vec![0; self.values.len()];
        for node in &self.nodes {
            for &i in &node.inputs {
                out[i.index()] += 1;
            }
        }
        for &o in &self.outputs {
            out[o.index()] += 1;
        }
        out
    }

    /// Every symbol named in the input shapes, in first-seen order.
    pub fn input_symbols(&self) -> Vec<crate::dim::Symbol> {
        let mut out = Vec::new();
        for &i in &self.inputs {
            for d in self.value(i).ty.shape.dims() {
                for s in d.symbols() {
                    if !out.contains(&s) {
                        out.push(s);
                    }
                }
            }
        }
        out
    }
}
