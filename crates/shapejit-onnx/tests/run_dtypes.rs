//! ONNX models built in Rust on the dtypes beyond f32, i32, i64 and bool:
//! f16, bf16 and f64 (computed in f32 and rounded once per op, or in f64
//! where the op has f64 kernels), and the 8-, 16- and 32-bit integers and
//! u64 (computed in i64). Checked against naive references written out here.

mod common;

use common::*;
use shapejit_ir::dtype::{bf16, f16};
use shapejit_ir::{DType, Tensor};
use shapejit_onnx::proto::{ModelProto, TensorProto, data_type};

fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = import(m).unwrap_or_else(|e| panic!("import: {e}"));
    let module = shapejit::Module::from_graph(g, shapejit::Options::interp()).unwrap();
    module.runtime().run(inputs).unwrap()
}

/// `op(a, b) -> y` (or `op(a) -> y` when `b` is `None`) on `elem` tensors of shape `[n]`.
fn node_model(op: &str, elem: i32, binary: bool, out_elem: i32) -> ModelProto {
    let mut ins = vec![vi("a", elem, &["n"])];
    let mut names = vec!["a"];
    if binary {
        ins.push(vi("b", elem, &["n"]));
        names.push("b");
    }
    let n = node(op, &names, &["y"], vec![]);
    model(
        21,
        graph(vec![n], ins, vec![vi("y", out_elem, &["n"])], vec![]),
    )
}

#[test]
fn f16_and_bf16_ops_round_their_f32_result_once() {
    let xs = [0.1f32, -2.5, 1000.0, 3.0e-5, 65000.0];
    let ys = [0.3f32, 0.7, 0.001, -1.0, 2.0];
    let h = |v: &[f32]| Tensor::from_vec(v.iter().map(|&x| f16::from_f32(x)).collect(), &[5]);
    let b = |v: &[f32]| Tensor::from_vec(v.iter().map(|&x| bf16::from_f32(x)).collect(), &[5]);
    // the inputs as the narrow type holds them
    let hx: Vec<f32> = xs.iter().map(|&x| f16::from_f32(x).to_f32()).collect();
    let hy: Vec<f32> = ys.iter().map(|&x| f16::from_f32(x).to_f32()).collect();
    let out = run(
        &node_model("Mul", data_type::FLOAT16, true, data_type::FLOAT16),
        &[h(&xs).unwrap(), h(&ys).unwrap()],
    );
    assert_eq!(out[0].dtype(), DType::F16);
    let want: Vec<f16> = hx
        .iter()
        .zip(&hy)
        .map(|(x, y)| f16::from_f64(*x as f64 * *y as f64))
        .collect();
    assert_eq!(out[0].as_slice::<f16>().unwrap(), want.as_slice());
    // 65000 * 2 overflows f16 to inf, as the reference does
    assert!(want[4].is_infinite());

    let bx: Vec<f32> = xs.iter().map(|&x| bf16::from_f32(x).to_f32()).collect();
    let out = run(
        &node_model("Exp", data_type::BFLOAT16, false, data_type::BFLOAT16),
        &[b(&[0.5, -1.0, 2.0, 0.0, 10.0]).unwrap()],
    );
    assert_eq!(out[0].dtype(), DType::Bf16);
    let want: Vec<bf16> = [0.5f64, -1.0, 2.0, 0.0, 10.0]
        .iter()
        .map(|x| bf16::from_f64(x.exp()))
        .collect();
    for (g, w) in out[0].as_slice::<bf16>().unwrap().iter().zip(&want) {
        // exp is within a few f32 ulps, far below half a bf16 ulp
        assert!((g.to_f64() - w.to_f64()).abs() <= w.to_f64().abs() * 2f64.powi(-8));
    }
    // comparisons read the narrow values as they are
    let out = run(
        &node_model("Less", data_type::BFLOAT16, true, data_type::BOOL),
        &[b(&xs).unwrap(), b(&ys).unwrap()],
    );
    let by: Vec<f32> = ys.iter().map(|&x| bf16::from_f32(x).to_f32()).collect();
    let want: Vec<bool> = bx.iter().zip(&by).map(|(x, y)| x < y).collect();
    assert_eq!(out[0].as_slice::<bool>().unwrap(), want.as_slice());
}

#[test]
fn f64_arithmetic_keeps_its_range_and_precision() {
    let a = Tensor::from_vec(vec![1e200f64, 0.1, -3.0], &[3]).unwrap();
    let b = Tensor::from_vec(vec![1e200f64, 0.2, 1e-300], &[3]).unwrap();
    let out = run(
        &node_model("Add", data_type::DOUBLE, true, data_type::DOUBLE),
        &[a.clone(), b.clone()],
    );
    assert_eq!(out[0].as_slice::<f64>().unwrap(), &[2e200, 0.1 + 0.2, -3.0]);
    let out = run(
        &node_model("Equal", data_type::DOUBLE, true, data_type::BOOL),
        &[
            Tensor::from_vec(vec![1.0f64, 1.0], &[2]).unwrap(),
            Tensor::from_vec(vec![1.0f64, 1.0 + 1e-12], &[2]).unwrap(),
        ],
    );
    assert_eq!(out[0].as_slice::<bool>().unwrap(), &[true, false]);
    // an op without f64 kernels computes in f32 and rounds once
    let out = run(
        &node_model("Sqrt", data_type::DOUBLE, false, data_type::DOUBLE),
        &[Tensor::from_vec(vec![2.0f64, 9.0], &[2]).unwrap()],
    );
    assert_eq!(out[0].dtype(), DType::F64);
    assert_eq!(
        out[0].as_slice::<f64>().unwrap(),
        &[2f32.sqrt() as f64, 3.0]
    );
}

#[test]
fn narrow_integers_wrap_as_their_own_type() {
    let u8s = |v: &[u8]| Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap();
    let (x, y) = ([200u8, 5, 255, 17], [100u8, 10, 255, 4]);
    for (op, f) in [
        (
            "Add",
            (|a: u8, b: u8| a.wrapping_add(b)) as fn(u8, u8) -> u8,
        ),
        ("Sub", |a, b| a.wrapping_sub(b)),
        ("Mul", |a, b| a.wrapping_mul(b)),
        ("Div", |a, b| a / b),
        ("Max", |a, b| a.max(b)),
    ] {
        let out = run(
            &node_model(op, data_type::UINT8, true, data_type::UINT8),
            &[u8s(&x), u8s(&y)],
        );
        let want: Vec<u8> = x.iter().zip(&y).map(|(&a, &b)| f(a, b)).collect();
        assert_eq!(out[0].as_slice::<u8>().unwrap(), want.as_slice(), "{op}");
    }
    let i8s = Tensor::from_vec(vec![-128i8, 127, -5], &[3]).unwrap();
    let out = run(
        &node_model("Neg", data_type::INT8, false, data_type::INT8),
        &[i8s],
    );
    assert_eq!(out[0].as_slice::<i8>().unwrap(), &[-128, -127, 5]);
    let u16s = Tensor::from_vec(vec![65535u16, 3, 40000], &[3]).unwrap();
    let n = node("ArgMax", &["a"], &["y"], vec![]);
    let m = model(
        21,
        graph(
            vec![n],
            vec![vi("a", data_type::UINT16, &["3"])],
            vec![vi("y", data_type::INT64, &["1"])],
            vec![],
        ),
    );
    let out = run(&m, &[u16s]);
    assert_eq!(out[0].dtype(), DType::I64, "indices keep their dtype");
    assert_eq!(out[0].as_slice::<i64>().unwrap(), &[0]);
}

#[test]
fn narrow_constants_and_typed_fields_load() {
    // FLOAT16 in int32_data as bit patterns, UINT32 in uint64_data, INT8 as values
    let half = TensorProto {
        name: "h".into(),
        dims: vec![2],
        data_type: data_type::FLOAT16,
        int32_data: vec![
            i32::from(f16::from_f32(1.5).to_bits()),
            i32::from(f16::from_f32(-0.25).to_bits()),
        ],
        ..Default::default()
    };
    let u32s = TensorProto {
        name: "u".into(),
        dims: vec![2],
        data_type: data_type::UINT32,
        uint64_data: vec![7, u64::from(u32::MAX)],
        ..Default::default()
    };
    let i8s = TensorProto {
        name: "c".into(),
        dims: vec![2],
        data_type: data_type::INT8,
        int32_data: vec![-7, 100],
        ..Default::default()
    };
    let ext = shapejit_onnx::tensor::ExternalFiles::new(None);
    let t = shapejit_onnx::tensor::tensor_from_proto(&half, &ext).unwrap();
    assert_eq!(t.to_f64_vec(), [1.5, -0.25]);
    let t = shapejit_onnx::tensor::tensor_from_proto(&u32s, &ext).unwrap();
    assert_eq!(t.as_slice::<u32>().unwrap(), &[7, u32::MAX]);
    let t = shapejit_onnx::tensor::tensor_from_proto(&i8s, &ext).unwrap();
    assert_eq!(t.as_slice::<i8>().unwrap(), &[-7, 100]);
    // a constant narrow input of a promoted op: Clip's bounds in int8
    let lo = TensorProto {
        name: "lo".into(),
        dims: vec![],
        data_type: data_type::INT8,
        int32_data: vec![-3],
        ..Default::default()
    };
    let hi = TensorProto {
        name: "hi".into(),
        dims: vec![],
        data_type: data_type::INT8,
        int32_data: vec![50],
        ..Default::default()
    };
    let n = node("Clip", &["x", "lo", "hi"], &["y"], vec![]);
    let m = model(
        13,
        graph(
            vec![n],
            vec![vi("x", data_type::INT8, &["n"])],
            vec![vi("y", data_type::INT8, &["n"])],
            vec![lo, hi],
        ),
    );
    let x = Tensor::from_vec(vec![-100i8, 0, 100, 49], &[4]).unwrap();
    let out = run(&m, &[x]);
    assert_eq!(out[0].as_slice::<i8>().unwrap(), &[-3, 0, 50, 49]);
}

#[test]
fn bitwise_ops_on_unsigned_and_signed_integers() {
    let (x, y) = ([0b1100u8, 255, 0, 0x5a], [0b1010u8, 0x0f, 255, 0xa5]);
    for (op, f) in [
        ("BitwiseAnd", (|a: u8, b: u8| a & b) as fn(u8, u8) -> u8),
        ("BitwiseOr", |a, b| a | b),
        ("BitwiseXor", |a, b| a ^ b),
    ] {
        let m = node_model(op, data_type::UINT8, true, data_type::UINT8);
        let out = run(
            &m,
            &[
                Tensor::from_vec(x.to_vec(), &[4]).unwrap(),
                Tensor::from_vec(y.to_vec(), &[4]).unwrap(),
            ],
        );
        let want: Vec<u8> = x.iter().zip(&y).map(|(&a, &b)| f(a, b)).collect();
        assert_eq!(out[0].as_slice::<u8>().unwrap(), want.as_slice(), "{op}");
    }
    let m = node_model("BitwiseNot", data_type::UINT8, false, data_type::UINT8);
    let out = run(&m, &[Tensor::from_vec(x.to_vec(), &[4]).unwrap()]);
    let want: Vec<u8> = x.iter().map(|a| !a).collect();
    assert_eq!(out[0].as_slice::<u8>().unwrap(), want.as_slice());
    let m = node_model("BitwiseNot", data_type::INT32, false, data_type::INT32);
    let out = run(
        &m,
        &[Tensor::from_vec(vec![0i32, -1, 7, i32::MIN], &[4]).unwrap()],
    );
    assert_eq!(out[0].as_slice::<i32>().unwrap(), &[-1, 0, -8, i32::MAX]);
}

/// `Cast(a, to = out_elem)` with extra attributes, on `[n]`.
fn cast_model(
    elem: i32,
    out_elem: i32,
    attrs: Vec<shapejit_onnx::proto::AttributeProto>,
) -> ModelProto {
    let mut attrs = attrs;
    attrs.push(a_int("to", out_elem.into()));
    let n = node("Cast", &["a"], &["y"], attrs);
    model(
        21,
        graph(
            vec![n],
            vec![vi("a", elem, &["n"])],
            vec![vi("y", out_elem, &["n"])],
            vec![],
        ),
    )
}

#[test]
fn float8_casts_saturate_unless_told_not_to() {
    // e4m3fn: largest finite 448 = 1.75 * 2^8, its quantum there 32; e5m2:
    // 57344 = 1.75 * 2^15, quantum 8192, and it has infinities
    let xs = [
        0.3f32,
        464.0,
        465.0,
        1e6,
        -1e6,
        f32::INFINITY,
        f32::NAN,
        -0.0,
        1e-9,
    ];
    let x = Tensor::from_vec(xs.to_vec(), &[xs.len()]).unwrap();
    let values = |t: &Tensor| t.to_f64_vec();
    // the nearest e4m3fn value of 0.3: the binade [0.25, 0.5) has quantum 2^-5
    let near = (0.3f64 / 2f64.powi(-5)).round() * 2f64.powi(-5);
    let same = |got: &[f64], want: &[f64]| {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(g == w || g.is_nan() && w.is_nan(), "{got:?} vs {want:?}");
        }
    };
    let out = run(
        &cast_model(data_type::FLOAT, data_type::FLOAT8E4M3FN, vec![]),
        std::slice::from_ref(&x),
    );
    assert_eq!(out[0].dtype(), DType::F8E4M3Fn);
    same(
        &values(&out[0]),
        &[near, 448.0, 448.0, 448.0, -448.0, 448.0, f64::NAN, 0.0, 0.0],
    );
    let out = run(
        &cast_model(
            data_type::FLOAT,
            data_type::FLOAT8E4M3FN,
            vec![a_int("saturate", 0)],
        ),
        std::slice::from_ref(&x),
    );
    // 464 is the tie between 448 and 480 (NaN's encoding): to even, 448
    same(
        &values(&out[0]),
        &[
            near,
            448.0,
            f64::NAN,
            f64::NAN,
            f64::NAN,
            f64::NAN,
            f64::NAN,
            0.0,
            0.0,
        ],
    );
    let out = run(
        &cast_model(
            data_type::FLOAT,
            data_type::FLOAT8E5M2,
            vec![a_int("saturate", 0)],
        ),
        std::slice::from_ref(&x),
    );
    let inf = f64::INFINITY;
    same(
        &values(&out[0]),
        &[0.3125, 448.0, 448.0, inf, -inf, inf, f64::NAN, 0.0, 0.0],
    );
    // -0 keeps its sign in e4m3fn, not in the fnuz formats
    let out = run(
        &cast_model(data_type::FLOAT, data_type::FLOAT8E4M3FNUZ, vec![]),
        &[x],
    );
    assert!(values(&out[0])[7].is_sign_positive());
    assert_eq!(values(&out[0])[3], 240.0);
}

#[test]
fn packed_int4_and_e8m0_load_and_cast() {
    // five int4 values packed two per byte, the first in the low nibble
    let values = [-8i64, 7, -1, 3, 0];
    let mut packed = vec![0u8; 3];
    for (i, v) in values.iter().enumerate() {
        packed[i / 2] |= ((*v as u8) & 0xf) << (4 * (i % 2));
    }
    let t = TensorProto {
        name: "w".into(),
        dims: vec![5],
        data_type: data_type::INT4,
        raw_data: packed.into(),
        ..Default::default()
    };
    let n = node(
        "Cast",
        &["w"],
        &["y"],
        vec![a_int("to", data_type::INT64.into())],
    );
    let m = model(
        21,
        graph(
            vec![n],
            vec![],
            vec![vi("y", data_type::INT64, &["5"])],
            vec![t],
        ),
    );
    let out = run(&m, &[]);
    assert_eq!(out[0].as_slice::<i64>().unwrap(), &values);
    // f32 -> int4 truncates; out of range is 0 (the onnx reference)
    let x = Tensor::from_vec(vec![2.7f32, -2.7, 8.0, -9.0, 7.0], &[5]).unwrap();
    let out = run(&cast_model(data_type::FLOAT, data_type::INT4, vec![]), &[x]);
    assert_eq!(out[0].dtype(), DType::I4);
    assert_eq!(out[0].to_f64_vec(), vec![2.0, -2.0, 0.0, 0.0, 7.0]);
    // e8m0 rounds the exponent up and drops the sign
    let x = Tensor::from_vec(vec![4.0f32, 1.1, -0.3, f32::INFINITY], &[4]).unwrap();
    let out = run(
        &cast_model(data_type::FLOAT, data_type::FLOAT8E8M0, vec![]),
        std::slice::from_ref(&x),
    );
    let got = out[0].to_f64_vec();
    assert_eq!(&got[..3], &[4.0, 2.0, 0.5]);
    assert!(got[3].is_nan());
    let err = import(&cast_model(
        data_type::FLOAT,
        data_type::FLOAT8E8M0,
        vec![a_str("round_mode", "nearest")],
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("Cast") && err.contains("round_mode = nearest"),
        "{err}"
    );
    // a packed tensor of the wrong length is an error naming it
    let bad = TensorProto {
        name: "w".into(),
        dims: vec![5],
        data_type: data_type::UINT2,
        raw_data: vec![0u8; 3].into(),
        ..Default::default()
    };
    let n = node("Identity", &["w"], &["y"], vec![]);
    let m = model(
        21,
        graph(
            vec![n],
            vec![],
            vec![vi("y", data_type::UINT2, &["5"])],
            vec![bad],
        ),
    );
    let err = import(&m).unwrap_err().to_string();
    assert!(err.contains("'w'") && err.contains("packed bytes"), "{err}");
}

#[test]
fn bitcast_reinterprets_bits_of_the_same_size() {
    let bitcast = |from: i32, to: i32| {
        let n = node("BitCast", &["a"], &["y"], vec![a_int("to", to.into())]);
        model(
            26,
            graph(
                vec![n],
                vec![vi("a", from, &["4"])],
                vec![vi("y", to, &["4"])],
                vec![],
            ),
        )
    };
    let xs = [1.5f32, -0.0, f32::NAN, f32::INFINITY];
    let out = run(
        &bitcast(data_type::FLOAT, data_type::INT32),
        &[Tensor::from_vec(xs.to_vec(), &[4]).unwrap()],
    );
    let want: Vec<i32> = xs.iter().map(|x| x.to_bits() as i32).collect();
    assert_eq!(out[0].as_slice::<i32>().unwrap(), want.as_slice());
    let out = run(
        &bitcast(data_type::INT8, data_type::UINT8),
        &[Tensor::from_vec(vec![-1i8, -128, 0, 127], &[4]).unwrap()],
    );
    assert_eq!(out[0].as_slice::<u8>().unwrap(), &[255, 128, 0, 127]);
    // a different size, or a target with invalid bit patterns, is refused
    for (from, to) in [
        (data_type::FLOAT, data_type::INT64),
        (data_type::INT8, data_type::BOOL),
    ] {
        let err = import(&bitcast(from, to)).unwrap_err().to_string();
        assert!(
            err.contains("BitCast") && err.contains("bitcast from"),
            "{err}"
        );
    }
}
