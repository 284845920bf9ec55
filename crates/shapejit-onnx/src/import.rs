//! ONNX graphs → IR graphs: initializers, typed inputs, nodes, outputs and
//! sub-graphs with their captured outer-scope values.
//!
//! - Initializers become `constant` nodes. An initializer that is also listed
//!   as a graph input is a constant too (its default is never overridden).
//! - Graph input dims: `dim_value` → a known dim; `dim_param` → the named
//!   symbol (non-identifier characters replaced by `_`); neither → a fresh
//!   symbol `INPUT_AXIS` (never one of the model's `dim_param`s).
//! - Graph input and output names are the ONNX names.
//! - Sub-graphs (`If` branches, `Loop` bodies) refer to outer values by name;
//!   here those become explicit inputs of the sub-graph, bound by the parent
//!   node (captures). Outer constants are copied into the sub-graph as
//!   constants instead (cheap: tensors share their bytes), so a captured
//!   weight stays a constant inside.
//!
//! **Invariant:** within one graph, every ONNX name maps to exactly one IR
//! value, defined before any node that reads it.

use crate::error::{NodeRef, OnnxError};
use crate::node::{GraphCx, NodeCx};
use crate::proto::{GraphProto, ModelProto, ValueInfoProto};
use crate::tensor::{ExternalFiles, dtype_of, tensor_from_proto, unsupported_dtype};
use shapejit_ir::{Dim, Graph, Shape, Tensor, ValueType};
use std::collections::HashSet;

/// Lowest supported default-domain opset.
pub const MIN_OPSET: i64 = 6;
/// Highest supported default-domain opset.
pub const MAX_OPSET: i64 = 28;

/// The default-domain opset of a model; a model that imports only other
/// domains (`ai.onnx.ml`, `ai.onnx.preview.training`) is an unsupported domain.
pub fn model_opset(model: &ModelProto) -> Result<i64, OnnxError> {
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .ok_or_else(|| match model.opset_import.first() {
            Some(other) => OnnxError::UnsupportedDomain {
                at: NodeRef {
                    op_type: "(model)".into(),
                    node: model
                        .graph
                        .as_ref()
                        .map(|g| g.name.clone())
                        .unwrap_or_default(),
                    opset: other.version,
                },
                domain: other.domain.clone(),
            },
            None => {
                OnnxError::Invalid("the model imports no default-domain ('ai.onnx') opset".into())
            }
        })?;
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        return Err(OnnxError::Opset {
            opset,
            min: MIN_OPSET,
            max: MAX_OPSET,
        });
    }
    Ok(opset)
}

/// Imports a decoded model's main graph, with the load-time rewrites of
/// [`shapejit_ir::fuse`] applied (exported GELU chains become one op).
pub fn import_model(model: &ModelProto, external: &ExternalFiles) -> Result<Graph, OnnxError> {
    let opset = model_opset(model)?;
    let gp = model
        .graph
        .as_ref()
        .ok_or_else(|| OnnxError::Invalid("the model has no graph".into()))?;
    let mut g = GraphCx::new(&gp.name, opset, external);
    let initializers = add_initializers(&mut g, gp)?;
    let mut symbols = Symbols::new(gp);
    for vi in gp
        .input
        .iter()
        .filter(|vi| !initializers.contains(vi.name.as_str()))
    {
        let ty = input_type(vi, &mut symbols)?;
        bind_input(&mut g, &vi.name, ty)?;
    }
    let mut graph = import_body(g, gp)?;
    // as onnxruntime does at load: exported GELU chains run as one op
    shapejit_ir::fuse::fuse(&mut graph);
    Ok(graph)
}

/// The inputs a sub-graph gets from its parent node: positional inputs (loop
/// iteration, condition, carried values, then captures) and outer constants.
pub struct SubgraphInputs {
    /// name and type of each sub-graph input, in order
    pub inputs: Vec<(String, ValueType)>,
    /// outer constants the sub-graph refers to by name
    pub consts: Vec<(String, Tensor)>,
}

/// Imports a sub-graph of a control-flow node.
pub fn import_subgraph(
    gp: &GraphProto,
    opset: i64,
    external: &ExternalFiles,
    spec: &SubgraphInputs,
) -> Result<Graph, OnnxError> {
    let mut g = GraphCx::new(&gp.name, opset, external);
    for (name, value) in &spec.consts {
        let v = g.add_constant(name, value.clone());
        g.names.insert(name.clone(), v);
    }
    add_initializers(&mut g, gp)?;
    for (name, ty) in &spec.inputs {
        bind_input(&mut g, name, ty.clone())?;
    }
    import_body(g, gp)
}

fn bind_input(g: &mut GraphCx, name: &str, ty: ValueType) -> Result<(), OnnxError> {
    if name.is_empty() || g.names.contains_key(name) {
        return Err(OnnxError::Value {
            name: name.to_string(),
            what: "graph input name is empty or defined twice".into(),
        });
    }
    let v = g.builder.input(name, ty.dtype, ty.shape);
    g.names.insert(name.to_string(), v);
    Ok(())
}

fn add_initializers<'a>(
    g: &mut GraphCx,
    gp: &'a GraphProto,
) -> Result<HashSet<&'a str>, OnnxError> {
    let mut names = HashSet::new();
    for tp in &gp.initializer {
        if tp.name.is_empty() || !names.insert(tp.name.as_str()) {
            return Err(OnnxError::Tensor {
                name: tp.name.clone(),
                what: "initializer name is empty or used twice".into(),
            });
        }
        let value = tensor_from_proto(tp, g.external)?;
        let v = g.add_constant(&tp.name, value);
        g.names.insert(tp.name.clone(), v);
    }
    Ok(names)
}

/// Maps every node, then binds the graph outputs and verifies.
fn import_body<'m>(mut g: GraphCx<'m>, gp: &'m GraphProto) -> Result<Graph, OnnxError> {
    for (index, node) in gp.node.iter().enumerate() {
        let mut cx = NodeCx::new(&mut g, node, index);
        let outs = crate::ops::map_node(&mut cx)?;
        if let Some(name) = cx.attrs.reference() {
            return Err(
                cx.unsupported(format!("attribute '{name}' refers to a function attribute"))
            );
        }
        let unread = cx.attrs.unread();
        if !unread.is_empty() {
            return Err(cx.unsupported(format!("attribute(s) {}", unread.join(", "))));
        }
        let at = cx.at.clone();
        for (i, name) in node.output.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            if g.names.contains_key(name) || g.unavailable.contains_key(name) {
                return Err(OnnxError::BadNode {
                    at,
                    what: format!("output '{name}' is already defined"),
                });
            }
            match outs.get(i) {
                Some(&v) => {
                    g.names.insert(name.clone(), v);
                }
                None => {
                    g.unavailable.insert(
                        name.clone(),
                        format!("output #{i} of {at}, which is not supported"),
                    );
                }
            }
        }
    }
    for vi in &gp.output {
        let Some(&v) = g.names.get(&vi.name) else {
            let what = match g.unavailable.get(&vi.name) {
                Some(why) => format!("unsupported: it is {why}"),
                None => "no node or input defines it".to_string(),
            };
            return Err(OnnxError::Value {
                name: vi.name.clone(),
                what,
            });
        };
        g.builder
            .output(&vi.name, v)
            .map_err(|source| OnnxError::Ir {
                at: format!("graph output '{}'", vi.name),
                source,
            })?;
    }
    let name = gp.name.clone();
    g.builder.finish().map_err(|source| OnnxError::Ir {
        at: format!("graph '{name}'"),
        source,
    })
}

/// Symbol names of one model: its `dim_param`s, and fresh names for unnamed dims.
struct Symbols {
    used: HashSet<String>,
}

impl Symbols {
    fn new(gp: &GraphProto) -> Symbols {
        let used = gp
            .input
            .iter()
            .filter_map(|vi| vi.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref())
            .flat_map(|s| s.dim.iter())
            .filter_map(|d| d.dim_param.as_deref())
            .filter(|p| !p.is_empty())
            .map(sanitize)
            .collect();
        Symbols { used }
    }

    fn fresh(&mut self, input: &str, axis: usize) -> Dim {
        let base = sanitize(&format!("{input}_{axis}"));
        let mut name = base.clone();
        let mut k = 1;
        while self.used.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.used.insert(name.clone());
        Dim::sym(&name)
    }
}

/// A symbol name made of identifier characters (`[A-Za-z_][A-Za-z0-9_]*`).
fn sanitize(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

/// The IR type of a main-graph input.
fn input_type(vi: &ValueInfoProto, symbols: &mut Symbols) -> Result<ValueType, OnnxError> {
    let err = |what: String| OnnxError::Value {
        name: vi.name.clone(),
        what,
    };
    let tt = vi
        .r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .ok_or_else(|| {
            err("has no tensor type (sequence, map and optional inputs are unsupported)".into())
        })?;
    let dtype = dtype_of(tt.elem_type).ok_or_else(|| err(unsupported_dtype(tt.elem_type)))?;
    let shape = tt
        .shape
        .as_ref()
        .ok_or_else(|| err("has no shape: inputs of unknown rank are unsupported".into()))?;
    let dims = shape
        .dim
        .iter()
        .enumerate()
        .map(|(axis, d)| match (d.dim_value, d.dim_param.as_deref()) {
            (Some(n), _) if n >= 0 => Dim::known(n),
            (_, Some(p)) if !p.is_empty() => Dim::sym(&sanitize(p)),
            _ => symbols.fresh(&vi.name, axis),
        })
        .collect();
    Ok(ValueType {
        dtype,
        shape: Shape(dims),
    })
}

/// Names a graph reads but does not define (its outer-scope references), in
/// first-use order; includes the free names of nested sub-graphs.
pub fn free_names(gp: &GraphProto) -> Vec<String> {
    let mut defined: HashSet<&str> = gp
        .input
        .iter()
        .map(|v| v.name.as_str())
        .chain(gp.initializer.iter().map(|t| t.name.as_str()))
        .collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut use_name = |name: &str, defined: &HashSet<&str>, out: &mut Vec<String>| {
        if !name.is_empty() && !defined.contains(name) && seen.insert(name.to_string()) {
            out.push(name.to_string());
        }
    };
    for node in &gp.node {
        for name in &node.input {
            use_name(name, &defined, &mut out);
        }
        for attr in &node.attribute {
            for sub in attr.g.iter().chain(&attr.graphs) {
                for name in free_names(sub) {
                    use_name(&name, &defined, &mut out);
                }
            }
        }
        defined.extend(node.output.iter().map(String::as_str));
    }
    for vi in &gp.output {
        use_name(&vi.name, &defined, &mut out);
    }
    out
}
