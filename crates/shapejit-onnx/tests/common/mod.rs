//! Builders for ONNX protobufs in tests (no Python needed).
#![allow(dead_code)]

pub mod reference;
pub mod shared;

use bytes::Bytes;
use prost::Message;
use shapejit_onnx::proto::*;

/// A dim spec: `"batch"` → dim_param, `"4"` → dim_value, `"?"` → unnamed.
pub fn vi(name: &str, elem_type: i32, dims: &[&str]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| match (*d, d.parse::<i64>()) {
            (_, Ok(n)) => TensorShapeDim {
                dim_value: Some(n),
                ..Default::default()
            },
            ("?", _) => TensorShapeDim::default(),
            (p, _) => TensorShapeDim {
                dim_param: Some(p.to_string()),
                ..Default::default()
            },
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type,
                shape: Some(TensorShapeProto { dim }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An f32 input/output value info.
pub fn vf(name: &str, dims: &[&str]) -> ValueInfoProto {
    vi(name, data_type::FLOAT, dims)
}

/// An f32 tensor stored in raw_data.
pub fn tf32(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    let raw: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: data_type::FLOAT,
        raw_data: raw.into(),
        ..Default::default()
    }
}

/// An f32 tensor stored in float_data.
pub fn tf32_typed(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: data_type::FLOAT,
        float_data: data.to_vec(),
        ..Default::default()
    }
}

/// An i64 tensor stored in int64_data.
pub fn ti64(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: data_type::INT64,
        int64_data: data.to_vec(),
        ..Default::default()
    }
}

/// A 1-D i64 tensor.
pub fn ints(name: &str, data: &[i64]) -> TensorProto {
    ti64(name, &[data.len() as i64], data)
}

pub fn node(
    op: &str,
    inputs: &[&str],
    outputs: &[&str],
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("{op}_{}", outputs.first().copied().unwrap_or("")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute,
        ..Default::default()
    }
}

pub fn a_int(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INT,
        i,
        ..Default::default()
    }
}
pub fn a_float(name: &str, f: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::FLOAT,
        f,
        ..Default::default()
    }
}
pub fn a_ints(name: &str, ints: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INTS,
        ints: ints.to_vec(),
        ..Default::default()
    }
}
pub fn a_floats(name: &str, floats: &[f32]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::FLOATS,
        floats: floats.to_vec(),
        ..Default::default()
    }
}
pub fn a_str(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::STRING,
        s: s.as_bytes().to_vec(),
        ..Default::default()
    }
}
pub fn a_tensor(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::TENSOR,
        t: Some(t),
        ..Default::default()
    }
}
pub fn a_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::GRAPH,
        g: Some(g),
        ..Default::default()
    }
}

pub fn graph(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    initializer: Vec<TensorProto>,
) -> GraphProto {
    GraphProto {
        name: "g".into(),
        node: nodes,
        input: inputs,
        output: outputs,
        initializer,
        ..Default::default()
    }
}

/// `out = if cond { then_op(then_inputs) } else { else_op(else_inputs) }`: an `If`
/// node whose branches are one node each, reading values captured from outside.
pub fn if_one_node(
    cond: &str,
    out: &str,
    (then_op, then_inputs): (&str, &[&str]),
    (else_op, else_inputs): (&str, &[&str]),
) -> NodeProto {
    let branch = |op: &str, inputs: &[&str], result: &str| {
        graph(
            vec![node(op, inputs, &[result], vec![])],
            vec![],
            vec![vf(result, &[])],
            vec![],
        )
    };
    node(
        "If",
        &[cond],
        &[out],
        vec![
            a_graph("then_branch", branch(then_op, then_inputs, "t")),
            a_graph("else_branch", branch(else_op, else_inputs, "e")),
        ],
    )
}

pub fn model(opset: i64, graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

pub fn encode(m: &ModelProto) -> Bytes {
    Bytes::from(m.encode_to_vec())
}

/// Imports an encoded model.
pub fn import(m: &ModelProto) -> Result<shapejit_ir::Graph, shapejit_onnx::OnnxError> {
    shapejit_onnx::load_bytes(encode(m), None)
}

/// The printed type (`f32[batch, 4]`) of a graph output.
pub fn out_type(g: &shapejit_ir::Graph, i: usize) -> String {
    g.value(g.outputs[i]).ty.to_string()
}
