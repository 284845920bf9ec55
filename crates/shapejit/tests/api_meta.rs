//! Model metadata (from ONNX files and bytes, and for other sources), loading
//! ONNX from bytes, and the ownership of run outputs.

use prost::Message;
use shapejit::{Error, Module, Options, Tensor};
use shapejit_onnx::proto;

fn value(name: &str, dims: &[Option<&str>]) -> proto::ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| match d {
            Some(p) => proto::TensorShapeDim {
                dim_param: Some(p.to_string()),
                ..Default::default()
            },
            None => proto::TensorShapeDim {
                dim_value: Some(3),
                ..Default::default()
            },
        })
        .collect();
    proto::ValueInfoProto {
        name: name.into(),
        r#type: Some(proto::TypeProto {
            tensor_type: Some(proto::TypeProtoTensor {
                elem_type: proto::data_type::FLOAT,
                shape: Some(proto::TensorShapeProto { dim }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `y = relu(x)` over `x: f32[batch, 3]`, with every metadata field set.
fn relu_model() -> Vec<u8> {
    proto::ModelProto {
        ir_version: 8,
        opset_import: vec![proto::OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        producer_name: "meta-test".into(),
        producer_version: "1.2".into(),
        domain: "ai.test".into(),
        model_version: 3,
        doc_string: "a relu".into(),
        metadata_props: vec![proto::StringStringEntryProto {
            key: "k".into(),
            value: "v".into(),
        }],
        graph: Some(proto::GraphProto {
            name: "tiny".into(),
            node: vec![proto::NodeProto {
                input: vec!["x".into()],
                output: vec!["y".into()],
                op_type: "Relu".into(),
                ..Default::default()
            }],
            input: vec![value("x", &[Some("batch"), None])],
            output: vec![value("y", &[Some("batch"), None])],
            ..Default::default()
        }),
    }
    .encode_to_vec()
}

fn expected_meta() -> shapejit::ModelMeta {
    shapejit::ModelMeta {
        producer_name: "meta-test".into(),
        producer_version: "1.2".into(),
        graph_name: "tiny".into(),
        domain: "ai.test".into(),
        description: "a relu".into(),
        version: 3,
        custom: vec![("k".into(), "v".into())],
    }
}

fn relu_run(module: &Module) {
    let x = Tensor::from_vec(vec![-1f32, 2., -3., 4., 0., -0.5], &[2, 3]).unwrap();
    let out = module.runtime().run(&[x]).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[0., 2., 0., 4., 0., 0.]);
}

#[test]
fn onnx_bytes_and_files_carry_their_metadata() {
    let from_bytes = Module::from_onnx_bytes(relu_model(), Options::interp()).unwrap();
    assert_eq!(from_bytes.meta(), &expected_meta());
    relu_run(&from_bytes);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relu.onnx");
    std::fs::write(&path, relu_model()).unwrap();
    let from_file = Module::load(path.to_str().unwrap(), Options::interp()).unwrap();
    assert_eq!(from_file.meta(), &expected_meta());
    relu_run(&from_file);
}

#[test]
fn other_sources_have_only_a_graph_name() {
    let m = Module::load("builtin:mlp", Options::interp()).unwrap();
    let name = m.graph().unwrap().name.clone();
    assert!(!name.is_empty());
    assert_eq!(
        m.meta(),
        &shapejit::ModelMeta {
            graph_name: name,
            ..Default::default()
        }
    );
    let image = Module::from_program(m.program().clone(), Options::interp()).unwrap();
    assert_eq!(image.meta(), &shapejit::ModelMeta::default());
}

#[test]
fn bad_onnx_bytes_are_an_onnx_error() {
    let err = Module::from_onnx_bytes(b"not a model".to_vec(), Options::interp()).unwrap_err();
    assert!(
        matches!(err, Error::Onnx { ref path, .. } if path == "<bytes>"),
        "{err}"
    );
}

#[test]
fn run_outputs_own_their_buffers() {
    let m = Module::from_onnx_bytes(relu_model(), Options::interp()).unwrap();
    let x = Tensor::from_vec(vec![1f32, -2., 3.], &[1, 3]).unwrap();
    let mut rt = m.runtime();
    let out = rt.run(std::slice::from_ref(&x)).unwrap().remove(0);
    // a clone shares the storage, so it cannot be taken back as mutable ...
    assert!(out.clone().into_bytes().try_into_mut().is_err());
    // ... but the output alone can, without a copy, with its elements
    let ptr = out.bytes().as_ptr();
    let mut buf = out
        .into_bytes()
        .try_into_mut()
        .expect("a run output is unshared");
    assert_eq!(buf.as_mut_ptr().cast_const(), ptr);
    let want: Vec<u8> = [1f32, 0., 3.]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    assert_eq!(&buf[..], &want[..]);
    // every dtype, including bool
    let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    let mut g = shapejit::GraphBuilder::new("not");
    let i = g.input("b", shapejit::DType::Bool, shapejit::shape![2]);
    let n = g.unary(shapejit::UnaryOp::Not, i).unwrap();
    g.output("n", n).unwrap();
    let m = Module::from_graph(g.finish().unwrap(), Options::interp()).unwrap();
    let out = m.runtime().run(&[b]).unwrap().remove(0);
    assert_eq!(out.as_slice::<bool>().unwrap(), &[false, true]);
    assert!(out.into_bytes().try_into_mut().is_ok());
}
