//! The builder API: add inputs, constants and ops; shape inference runs on
//! every node as it is added, so errors point at the node that caused them.

use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::IrError;
use crate::graph::{Graph, Node, ValueId, ValueInfo, ValueType};
use crate::infer::{InferCtx, infer};
use crate::op::Op;
use crate::shape::Shape;
use crate::tensor::Tensor;
use std::collections::HashMap;

/// Builds a [`Graph`] node by node.
#[derive(Debug, Default)]
pub struct GraphBuilder {
    graph: Graph,
    names: HashMap<String, ValueId>,
    node_names: HashMap<String, usize>,
    ctx: InferCtx,
}

impl GraphBuilder {
    /// An empty graph with a name.
    pub fn new(name: &str) -> GraphBuilder {
        GraphBuilder {
            graph: Graph {
                name: name.to_string(),
                ..Graph::default()
            },
            ..GraphBuilder::default()
        }
    }

    /// A name not used by any value yet, based on `base`.
    fn fresh_value_name(&self, base: &str) -> String {
        if !self.names.contains_key(base) {
            return base.to_string();
        }
        (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|n| !self.names.contains_key(n))
            .unwrap_or_default()
    }

    fn add_value(&mut self, name: &str, ty: ValueType, known: Option<Vec<Dim>>) -> ValueId {
        let name = self.fresh_value_name(name);
        let id = ValueId(self.graph.values.len() as u32);
        self.names.insert(name.clone(), id);
        self.graph.values.push(ValueInfo { name, ty, known });
        id
    }

    /// Adds a graph input.
    pub fn input(&mut self, name: &str, dtype: DType, shape: Shape) -> ValueId {
        self.ctx.reserve(shape.dims().iter().flat_map(Dim::symbols));
        let id = self.add_value(name, ValueType { dtype, shape }, None);
        self.graph.inputs.push(id);
        id
    }

    /// Adds a constant (a weight) with a value name.
    pub fn constant(&mut self, name: &str, value: Tensor) -> ValueId {
        // Invariant: a constant node has no inputs and always infers.
        self.node_named(name, Op::Constant { value }, &[])
            .map(|outs| outs[0])
            .unwrap_or_else(|e| unreachable!("constant inference cannot fail: {e}"))
    }

    /// Adds a node with an automatic name; returns its outputs.
    pub fn node(&mut self, op: Op, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let base = op.name();
        let n = self.node_names.entry(base.to_string()).or_insert(0);
        let name = format!("{base}_{n}");
        *n += 1;
        self.node_named(&name, op, inputs)
    }

    /// Adds a node with a single output; returns it.
    pub fn op(&mut self, op: Op, inputs: &[ValueId]) -> Result<ValueId, IrError> {
        let name = op.name();
        let outs = self.node(op, inputs)?;
        match outs.as_slice() {
            [one] => Ok(*one),
            _ => Err(IrError::Shape {
                node: String::new(),
                op: name,
                message: format!("expected one output, the op has {}", outs.len()),
            }),
        }
    }

    /// Adds a node with a given name (its outputs are named after it).
    pub fn node_named(
        &mut self,
        name: &str,
        op: Op,
        inputs: &[ValueId],
    ) -> Result<Vec<ValueId>, IrError> {
        let shape_err = |op: &Op, message: String| IrError::Shape {
            node: name.to_string(),
            op: op.name(),
            message,
        };
        if let Some(bad) = inputs.iter().find(|v| v.index() >= self.graph.values.len()) {
            return Err(shape_err(&op, format!("input {bad:?} does not exist")));
        }
        let infos: Vec<&ValueInfo> = inputs.iter().map(|&v| self.graph.value(v)).collect();
        let inferred = infer(&op, &infos, &mut self.ctx).map_err(|m| shape_err(&op, m))?;
        let n_out = inferred.len();
        let outputs = inferred
            .into_iter()
            .enumerate()
            .map(|(i, inf)| {
                let vname = if n_out == 1 {
                    name.to_string()
                } else {
                    format!("{name}.{i}")
                };
                self.add_value(&vname, inf.ty, inf.known)
            })
            .collect::<Vec<_>>();
        self.graph.nodes.push(Node {
            name: name.to_string(),
            op,
            inputs: inputs.to_vec(),
            outputs: outputs.clone(),
        });
        Ok(outputs)
    }

    /// The type of a value built so far.
    pub fn value_type(&self, v: ValueId) -> &ValueType {
        &self.graph.value(v).ty
    }

    /// Everything known about a value built so far (type and known contents).
    pub fn value_info(&self, v: ValueId) -> &ValueInfo {
        self.graph.value(v)
    }

    /// Marks a value as a graph output under a name. When the value is a graph
    /// input or already an output, an `identity` node gives it its own name.
    pub fn output(&mut self, name: &str, v: ValueId) -> Result<ValueId, IrError> {
        let reuse = self.graph.inputs.contains(&v) || self.graph.outputs.contains(&v);
        let out = if reuse {
            self.node_named(name, Op::Identity, &[v])?[0]
        } else {
            v
        };
        if self.graph.value(out).name != name {
            if let Some(&other) = self.names.get(name) {
                return Err(IrError::Verify {
                    graph: self.graph.name.clone(),
                    message: format!("output name '{name}' is already used by value {other:?}"),
                });
            }
            let old = std::mem::replace(&mut self.graph.values[out.index()].name, name.to_string());
            self.names.remove(&old);
            self.names.insert(name.to_string(), out);
        }
        self.graph.outputs.push(out);
        Ok(out)
    }

    /// Finishes and verifies the graph.
    pub fn finish(self) -> Result<Graph, IrError> {
        crate::verify::verify(&self.graph)?;
        Ok(self.graph)
    }

    /// Finishes without verifying (for tests that build broken graphs on purpose).
    pub fn finish_unchecked(self) -> Graph {
        self.graph
    }
}
