//! The per-graph and per-node import state that op mappings work with.
//!
//! [`GraphCx`] owns the [`GraphBuilder`] of one (sub-)graph, the scope of ONNX
//! value names, and the constant contents of values that are constants.
//! [`NodeCx`] is the view an op mapping gets of one ONNX node: its inputs,
//! attributes, and helpers to emit IR nodes and to read constant inputs.
//!
//! **Invariant:** a value is in `consts` only if it was built by a `constant`
//! IR node in this graph with exactly that tensor.

use crate::attrs::{AttrTypeError, Attrs};
use crate::error::{NodeRef, OnnxError};
use crate::proto::NodeProto;
use crate::tensor::ExternalFiles;
use shapejit_ir::{BinaryOp, DType, GraphBuilder, Op, Tensor, UnaryOp, ValueId, ValueType};
use std::collections::HashMap;

/// Import state of one graph (the main graph or a sub-graph).
pub struct GraphCx<'m> {
    /// the IR graph under construction
    pub builder: GraphBuilder,
    /// ONNX value name → IR value
    pub names: HashMap<String, ValueId>,
    /// contents of the values that are constants
    pub consts: HashMap<ValueId, Tensor>,
    /// default-domain opset of the model
    pub opset: i64,
    /// external-data files of the model
    pub external: &'m ExternalFiles,
    /// ONNX names of node outputs the importer does not produce → why
    pub unavailable: HashMap<String, String>,
}

impl<'m> GraphCx<'m> {
    /// An empty graph context.
    pub fn new(name: &str, opset: i64, external: &'m ExternalFiles) -> GraphCx<'m> {
        GraphCx {
            builder: GraphBuilder::new(name),
            names: HashMap::new(),
            consts: HashMap::new(),
            opset,
            external,
            unavailable: HashMap::new(),
        }
    }

    /// Adds a constant value named `name` and records its contents.
    pub fn add_constant(&mut self, name: &str, value: Tensor) -> ValueId {
        let v = self.builder.constant(name, value.clone());
        self.consts.insert(v, value);
        v
    }
}

/// One ONNX node being mapped.
pub struct NodeCx<'g, 'm> {
    /// the graph it belongs to
    pub g: &'g mut GraphCx<'m>,
    /// the node
    pub node: &'m NodeProto,
    /// its attributes
    pub attrs: Attrs<'m>,
    /// where it is (for errors)
    pub at: NodeRef,
    /// the op's version the model's opset resolves to (set by
    /// [`crate::ops::map_node`] before the mapping runs)
    pub version: i64,
    base_name: String,
    emitted: usize,
}

/// A node-level result.
pub type NodeResult<T> = Result<T, OnnxError>;

impl<'g, 'm> NodeCx<'g, 'm> {
    /// Wraps node number `index` of a graph.
    pub fn new(g: &'g mut GraphCx<'m>, node: &'m NodeProto, index: usize) -> NodeCx<'g, 'm> {
        let base_name = if node.name.is_empty() {
            format!("{}_{index}", node.op_type)
        } else {
            node.name.clone()
        };
        let opset = g.opset;
        let at = NodeRef {
            op_type: node.op_type.clone(),
            node: base_name.clone(),
            opset,
        };
        NodeCx {
            g,
            node,
            attrs: Attrs::new(&node.attribute),
            at,
            version: opset,
            base_name,
            emitted: 0,
        }
    }

    /// The model's opset.
    pub fn opset(&self) -> i64 {
        self.g.opset
    }

    /// An "unsupported" error for this node.
    pub fn unsupported(&self, what: impl Into<String>) -> OnnxError {
        OnnxError::Unsupported {
            at: self.at.clone(),
            what: what.into(),
        }
    }

    /// A "malformed node" error for this node.
    pub fn bad(&self, what: impl Into<String>) -> OnnxError {
        OnnxError::BadNode {
            at: self.at.clone(),
            what: what.into(),
        }
    }

    fn attr_err(&self, e: AttrTypeError) -> OnnxError {
        self.bad(format!("attribute '{}' must be {}", e.name, e.expected))
    }

    /// Number of inputs listed (including empty, omitted ones).
    pub fn n_inputs(&self) -> usize {
        self.node.input.len()
    }

    /// Optional input `i` (`None` when absent or empty).
    pub fn opt_input(&self, i: usize) -> NodeResult<Option<ValueId>> {
        match self.node.input.get(i).map(String::as_str) {
            None | Some("") => Ok(None),
            Some(name) => match self.g.names.get(name) {
                Some(&v) => Ok(Some(v)),
                None => match self.g.unavailable.get(name) {
                    Some(why) => Err(self.unsupported(format!("input #{i} '{name}' is {why}"))),
                    None => Err(self.bad(format!(
                        "input #{i} '{name}' is not defined before the node"
                    ))),
                },
            },
        }
    }

    /// Required input `i`.
    pub fn input(&self, i: usize) -> NodeResult<ValueId> {
        self.opt_input(i)?
            .ok_or_else(|| self.bad(format!("required input #{i} is missing")))
    }

    /// All non-empty inputs (for variadic ops).
    pub fn inputs(&self) -> NodeResult<Vec<ValueId>> {
        (0..self.n_inputs())
            .filter_map(|i| self.opt_input(i).transpose())
            .collect()
    }

    /// The type of a value.
    pub fn ty(&self, v: ValueId) -> &ValueType {
        self.g.builder.value_type(v)
    }

    /// The rank of a value.
    pub fn rank(&self, v: ValueId) -> usize {
        self.ty(v).shape.rank()
    }

    /// The name of the next IR node emitted for this ONNX node: the ONNX
    /// node's name first, then `name_1`, `name_2`, ...
    fn next_name(&mut self) -> String {
        let name = if self.emitted == 0 {
            self.base_name.clone()
        } else {
            format!("{}_{}", self.base_name, self.emitted)
        };
        self.emitted += 1;
        name
    }

    /// Emits an IR node and returns all its outputs.
    pub fn ops(&mut self, op: Op, inputs: &[ValueId]) -> NodeResult<Vec<ValueId>> {
        let name = self.next_name();
        self.g
            .builder
            .node_named(&name, op, inputs)
            .map_err(|source| OnnxError::Ir {
                at: self.at.to_string(),
                source,
            })
    }

    /// Emits an IR node with one output.
    pub fn op(&mut self, op: Op, inputs: &[ValueId]) -> NodeResult<ValueId> {
        let outs = self.ops(op, inputs)?;
        match outs.as_slice() {
            [one] => Ok(*one),
            _ => Err(self.bad(format!(
                "expected one output from the IR op, got {}",
                outs.len()
            ))),
        }
    }

    /// Emits `shape(x)`: the whole shape of `x` as an i64 vector.
    pub fn shape_of(&mut self, x: ValueId) -> NodeResult<ValueId> {
        self.op(
            Op::Shape {
                start: 0,
                end: None,
            },
            &[x],
        )
    }

    /// Emits a unary elementwise op.
    pub fn un(&mut self, u: UnaryOp, x: ValueId) -> NodeResult<ValueId> {
        self.op(Op::Unary(u), &[x])
    }

    /// Emits a binary elementwise op.
    pub fn bin(&mut self, b: BinaryOp, x: ValueId, y: ValueId) -> NodeResult<ValueId> {
        self.op(Op::Binary(b), &[x, y])
    }

    /// A scalar constant of the dtype of `like`.
    pub fn scalar_like(&mut self, like: ValueId, value: f64) -> ValueId {
        self.const_scalar(self.ty(like).dtype, value)
    }

    /// Emits a constant.
    pub fn constant(&mut self, value: Tensor) -> ValueId {
        let name = self.next_name();
        self.g.add_constant(&name, value)
    }

    /// An i64 vector constant.
    pub fn const_i64s(&mut self, values: Vec<i64>) -> ValueId {
        let n = values.len();
        // Invariant: the shape [n] matches the vector's length.
        self.constant(Tensor::from_vec(values, &[n]).unwrap_or_else(|e| unreachable!("{e}")))
    }

    /// A scalar constant of `dtype` holding `value` (converted).
    pub fn const_scalar(&mut self, dtype: DType, value: f64) -> ValueId {
        self.constant(shapejit_ir::with_dtype!(dtype, T => Tensor::scalar(
            <T as shapejit_ir::Scalar>::from_num(shapejit_ir::Num::Float(value))
        )))
    }

    /// The contents of a constant value, if it is one.
    pub fn const_tensor(&self, v: ValueId) -> Option<&Tensor> {
        self.g.consts.get(&v)
    }

    /// The integer contents of `v` when they are known at load: a constant
    /// integer tensor, or contents shape inference knows as integers.
    pub fn known_ints(&self, v: ValueId) -> Option<Vec<i64>> {
        if let Some(t) = self.const_tensor(v) {
            return match t.dtype() {
                DType::I64 => t.as_slice::<i64>().map(<[i64]>::to_vec).ok(),
                DType::I32 => t
                    .as_slice::<i32>()
                    .map(|s| s.iter().map(|&x| x as i64).collect())
                    .ok(),
                _ => None,
            };
        }
        let known = self.g.builder.value_info(v).known.as_ref()?;
        known.iter().map(|d| d.as_known()).collect()
    }

    /// The integer contents of an input that an IR op needs as an attribute:
    /// a constant, or a value whose contents shape inference knows.
    pub fn const_ints(&self, v: ValueId, what: &str) -> NodeResult<Vec<i64>> {
        if let Some(values) = self.known_ints(v) {
            return Ok(values);
        }
        let info = self.g.builder.value_info(v);
        if let Some(t) = self.const_tensor(v) {
            return Err(self.bad(format!(
                "{what} must be an integer tensor, got {}",
                t.dtype()
            )));
        }
        if let Some(dims) = &info.known {
            return Err(self.unsupported(format!(
                "{what} '{}' depends on symbolic dims ({dims:?}); it must be a constant",
                info.name
            )));
        }
        Err(self.unsupported(format!(
            "{what} '{}' is computed at run time; it must be a constant",
            info.name
        )))
    }

    /// The value of a constant scalar (or one-element) float input.
    pub fn const_f32(&self, v: ValueId, what: &str) -> NodeResult<f32> {
        let t = self.const_tensor(v).ok_or_else(|| {
            self.unsupported(format!(
                "{what} is computed at run time; it must be a constant"
            ))
        })?;
        match t.to_f64_vec().as_slice() {
            [x] => Ok(*x as f32),
            other => Err(self.bad(format!(
                "{what} must hold one element, it has {}",
                other.len()
            ))),
        }
    }

    /// An optional `INT` attribute.
    pub fn attr_int(&self, name: &str) -> NodeResult<Option<i64>> {
        self.attrs.int(name).map_err(|e| self.attr_err(e))
    }

    /// An `INT` attribute with a default.
    pub fn int_or(&self, name: &str, default: i64) -> NodeResult<i64> {
        Ok(self.attr_int(name)?.unwrap_or(default))
    }

    /// An optional `FLOAT` attribute.
    pub fn attr_float(&self, name: &str) -> NodeResult<Option<f32>> {
        self.attrs.float(name).map_err(|e| self.attr_err(e))
    }

    /// A `FLOAT` attribute with a default.
    pub fn float_or(&self, name: &str, default: f32) -> NodeResult<f32> {
        Ok(self.attr_float(name)?.unwrap_or(default))
    }

    /// An optional `STRING` attribute.
    pub fn attr_string(&self, name: &str) -> NodeResult<Option<String>> {
        self.attrs.string(name).map_err(|e| self.attr_err(e))
    }

    /// An optional `STRINGS` attribute.
    pub fn attr_strings(&self, name: &str) -> NodeResult<Option<Vec<String>>> {
        self.attrs.strings(name).map_err(|e| self.attr_err(e))
    }

    /// An optional `INTS` attribute.
    pub fn attr_ints(&self, name: &str) -> NodeResult<Option<Vec<i64>>> {
        self.attrs.ints(name).map_err(|e| self.attr_err(e))
    }

    /// An optional `FLOATS` attribute.
    pub fn attr_floats(&self, name: &str) -> NodeResult<Option<Vec<f32>>> {
        self.attrs.floats(name).map_err(|e| self.attr_err(e))
    }

    /// An optional `TENSOR` attribute.
    pub fn attr_tensor(&self, name: &str) -> NodeResult<Option<&'m crate::proto::TensorProto>> {
        self.attrs.tensor(name).map_err(|e| self.attr_err(e))
    }

    /// A required `GRAPH` attribute.
    pub fn attr_graph(&self, name: &str) -> NodeResult<&'m crate::proto::GraphProto> {
        self.attrs
            .graph(name)
            .map_err(|e| self.attr_err(e))?
            .ok_or_else(|| self.bad(format!("required attribute '{name}' is missing")))
    }

    /// Normalizes a possibly negative axis against `rank`.
    pub fn axis(&self, axis: i64, rank: usize, what: &str) -> NodeResult<usize> {
        let r = rank as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if (0..r).contains(&a) {
            Ok(a as usize)
        } else {
            Err(self.bad(format!("{what} {axis} is out of range for rank {rank}")))
        }
    }

    /// Whether the node wants output `i` (listed and non-empty).
    pub fn wants_output(&self, i: usize) -> bool {
        self.node.output.get(i).is_some_and(|n| !n.is_empty())
    }
}
