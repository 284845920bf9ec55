//! QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear models built in
//! Rust against naive references written out here from the spec.

mod common;

use common::*;
use shapejit_ir::{DType, Tensor};
use shapejit_onnx::proto::{AttributeProto, ModelProto, data_type};

fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = import(m).unwrap_or_else(|e| panic!("import: {e}"));
    let module = shapejit::Module::from_graph(g, shapejit::Options::interp()).unwrap();
    module.runtime().run(inputs).unwrap()
}

/// One node over graph inputs `(name, elem type, dims)`.
fn one_node(
    op: &str,
    opset: i64,
    inputs: &[(&str, i32, &[&str])],
    outputs: &[(&str, i32)],
    attrs: Vec<AttributeProto>,
) -> ModelProto {
    let names: Vec<&str> = inputs.iter().map(|i| i.0).collect();
    let outs: Vec<&str> = outputs.iter().map(|o| o.0).collect();
    let n = node(op, &names, &outs, attrs);
    model(
        opset,
        graph(
            vec![n],
            inputs.iter().map(|(n, t, d)| vi(n, *t, d)).collect(),
            outputs.iter().map(|(n, t)| vi(n, *t, &[])).collect(),
            vec![],
        ),
    )
}

/// Round half to even, as ONNX's quantization rounds.
fn round_even(v: f64) -> f64 {
    let r = v.round();
    if (v - v.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - v.signum()
    } else {
        r
    }
}

#[test]
fn quantize_per_axis_rounds_to_even_and_clips() {
    // x [2, 3], scales and zero points along axis 1
    let x = [2.5f32, -3.0, 1000.0, -2.5, 0.7, -1000.0];
    let scale = [1.0f32, 2.0, 0.5];
    let zp = [0i8, -3, 10];
    let f = data_type::FLOAT;
    let m = one_node(
        "QuantizeLinear",
        28,
        &[
            ("x", f, &["2", "3"]),
            ("s", f, &["3"]),
            ("z", data_type::INT8, &["3"]),
        ],
        &[("y", data_type::INT8)],
        vec![],
    );
    let out = run(
        &m,
        &[
            Tensor::from_vec(x.to_vec(), &[2, 3]).unwrap(),
            Tensor::from_vec(scale.to_vec(), &[3]).unwrap(),
            Tensor::from_vec(zp.to_vec(), &[3]).unwrap(),
        ],
    );
    let want: Vec<i8> = (0..6)
        .map(|i| {
            let c = i % 3;
            let q = round_even(f64::from(x[i]) / f64::from(scale[c])) + f64::from(zp[c]);
            q.clamp(-128.0, 127.0) as i8
        })
        .collect();
    assert_eq!(out[0].as_slice::<i8>().unwrap(), want.as_slice());
    // ties go to even: 2.5 rounds to 2
    assert_eq!(want[0], 2);

    // no zero point: u8, or output_dtype
    let m = one_node(
        "QuantizeLinear",
        28,
        &[("x", f, &["6"]), ("s", f, &[])],
        &[("y", data_type::UINT4)],
        vec![a_int("output_dtype", data_type::UINT4.into())],
    );
    let out = run(
        &m,
        &[
            Tensor::from_vec(x.to_vec(), &[6]).unwrap(),
            Tensor::scalar(0.5f32),
        ],
    );
    assert_eq!(out[0].dtype(), DType::U4);
    let want: Vec<f64> = x
        .iter()
        .map(|&v| round_even(f64::from(v) / 0.5).clamp(0.0, 15.0))
        .collect();
    assert_eq!(out[0].to_f64_vec(), want);
}

#[test]
fn dequantize_blocked_scales_repeat_along_the_axis() {
    // x [2, 5] int8; blocks of 2 along axis 1: scale [2, 3], the last block cut to 1
    let x: Vec<i8> = vec![-128, -1, 0, 5, 127, 3, 4, -5, 6, 100];
    let scale = [0.5f32, 2.0, 0.25, 1.5, -1.0, 4.0];
    let zp: Vec<i8> = vec![1, -2, 3, 0, 7, -8];
    let m = one_node(
        "DequantizeLinear",
        28,
        &[
            ("x", data_type::INT8, &["2", "5"]),
            ("s", data_type::FLOAT, &["2", "3"]),
            ("z", data_type::INT8, &["2", "3"]),
        ],
        &[("y", data_type::FLOAT)],
        vec![a_int("axis", 1), a_int("block_size", 2)],
    );
    let out = run(
        &m,
        &[
            Tensor::from_vec(x.clone(), &[2, 5]).unwrap(),
            Tensor::from_vec(scale.to_vec(), &[2, 3]).unwrap(),
            Tensor::from_vec(zp.clone(), &[2, 3]).unwrap(),
        ],
    );
    let want: Vec<f32> = (0..10)
        .map(|i| {
            let (r, c) = (i / 5, i % 5);
            let b = r * 3 + c / 2;
            (f32::from(x[i]) - f32::from(zp[b])) * scale[b]
        })
        .collect();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), want.as_slice());
}

#[test]
fn float8_quantize_saturates_and_dequantizes_back() {
    let x = [1.0f32, 1000.0, -3.3, 0.01];
    let f = data_type::FLOAT;
    let e4 = data_type::FLOAT8E4M3FN;
    let m = one_node(
        "QuantizeLinear",
        28,
        &[("x", f, &["4"]), ("s", f, &[]), ("z", e4, &["1"])],
        &[("y", e4)],
        vec![],
    );
    let zero = Tensor::from_vec(vec![shapejit_ir::dtype::F8E4M3Fn(0)], &[1]).unwrap();
    let out = run(
        &m,
        &[
            Tensor::from_vec(x.to_vec(), &[4]).unwrap(),
            Tensor::scalar(2.0f32),
            zero,
        ],
    );
    // x / 2, saturated at 448; e4m3fn keeps 3 mantissa bits: -1.65 -> -1.625
    let got = out[0].to_f64_vec();
    assert_eq!(&got[..3], &[0.5, 448.0, -1.625]);
    // 0.005 is 2.56 subnormal steps of 2^-9: the nearest is 3
    assert_eq!(got[3], 3.0 * 2f64.powi(-9));
    let m = one_node(
        "DequantizeLinear",
        28,
        &[("q", e4, &["4"]), ("s", data_type::FLOAT16, &[])],
        &[("y", data_type::FLOAT16)],
        vec![],
    );
    let out2 = run(
        &m,
        &[
            out[0].clone(),
            Tensor::scalar(shapejit_ir::dtype::f16::from_f32(2.0)),
        ],
    );
    assert_eq!(out2[0].dtype(), DType::F16);
    let back: Vec<f64> = got.iter().map(|v| v * 2.0).collect();
    assert_eq!(out2[0].to_f64_vec(), back);
}

#[test]
fn dynamic_quantize_maps_the_range_and_zero_onto_u8() {
    let x = [-1.5f32, 0.2, 3.7, 2.25, -0.3];
    let m = one_node(
        "DynamicQuantizeLinear",
        11,
        &[("x", data_type::FLOAT, &["5"])],
        &[
            ("y", data_type::UINT8),
            ("s", data_type::FLOAT),
            ("z", data_type::UINT8),
        ],
        vec![],
    );
    let out = run(&m, &[Tensor::from_vec(x.to_vec(), &[5]).unwrap()]);
    let (lo, hi) = (-1.5f32, 3.7f32);
    let scale = (hi - lo) / 255.0;
    let zp = round_even(f64::from((0.0 - lo / scale).clamp(0.0, 255.0))) as f32;
    let want: Vec<u8> = x
        .iter()
        .map(|&v| (round_even(f64::from(v / scale)) as f32 + zp).clamp(0.0, 255.0) as u8)
        .collect();
    assert_eq!(out[0].as_slice::<u8>().unwrap(), want.as_slice());
    assert_eq!(out[1].as_slice::<f32>().unwrap(), &[scale]);
    assert_eq!(out[2].as_slice::<u8>().unwrap(), &[zp as u8]);
}

#[test]
fn bad_quantization_nodes_are_errors() {
    let f = data_type::FLOAT;
    let m = one_node(
        "QuantizeLinear",
        28,
        &[("x", f, &["4"]), ("s", f, &[]), ("z", data_type::INT8, &[])],
        &[("y", data_type::INT8)],
        vec![a_int("output_dtype", data_type::UINT8.into())],
    );
    let err = import(&m).unwrap_err().to_string();
    assert!(
        err.contains("QuantizeLinear") && err.contains("output_dtype"),
        "{err}"
    );
    let m = one_node(
        "DequantizeLinear",
        28,
        &[("x", data_type::INT8, &["4", "3"]), ("s", f, &["2", "3"])],
        &[("y", f)],
        vec![a_int("axis", 0), a_int("block_size", 1)],
    );
    let err = import(&m).unwrap_err().to_string();
    assert!(err.contains("does not cover"), "{err}");
}

#[test]
fn integer_matmuls_are_exact_over_long_shared_dims() {
    // K = 600 spans three f32 chunks; |sum| reaches ~600 · 255² ≈ 2^25, beyond f32
    let (m, k, n) = (3usize, 600usize, 2usize);
    let a: Vec<u8> = (0..m * k).map(|i| (250 + i * 37 % 6) as u8).collect();
    let b: Vec<u8> = (0..k * n).map(|i| (i * 91 % 7) as u8).collect();
    let (a_zp, b_zp) = (3u8, 250u8);
    let u8t = data_type::UINT8;
    let mk = [m.to_string(), k.to_string()];
    let kn = [k.to_string(), n.to_string()];
    let mdl = one_node(
        "MatMulInteger",
        10,
        &[
            ("a", u8t, &[&mk[0], &mk[1]]),
            ("b", u8t, &[&kn[0], &kn[1]]),
            ("az", u8t, &[]),
            ("bz", u8t, &[]),
        ],
        &[("y", data_type::INT32)],
        vec![],
    );
    let out = run(
        &mdl,
        &[
            Tensor::from_vec(a.clone(), &[m, k]).unwrap(),
            Tensor::from_vec(b.clone(), &[k, n]).unwrap(),
            Tensor::scalar(a_zp),
            Tensor::scalar(b_zp),
        ],
    );
    let want: Vec<i32> = (0..m * n)
        .map(|o| {
            let (i, j) = (o / n, o % n);
            (0..k)
                .map(|t| (i64::from(a[i * k + t]) - 3) * (i64::from(b[t * n + j]) - 250))
                .sum::<i64>() as i32
        })
        .collect();
    assert_eq!(out[0].as_slice::<i32>().unwrap(), want.as_slice());
    assert!(want.iter().any(|v| v.unsigned_abs() > 1 << 24));

    // QLinearMatMul: the same product requantized to int8
    let a8: Vec<i8> = vec![-128, 5, 77, -3, 0, 127];
    let b8: Vec<i8> = vec![1, -2, 3, 4, -5, 6];
    let (sa, sb, sy) = (0.5f32, 0.25f32, 0.75f32);
    let i8t = data_type::INT8;
    let f = data_type::FLOAT;
    let mdl = one_node(
        "QLinearMatMul",
        21,
        &[
            ("a", i8t, &["2", "3"]),
            ("sa", f, &[]),
            ("za", i8t, &[]),
            ("b", i8t, &["3", "2"]),
            ("sb", f, &[]),
            ("zb", i8t, &[]),
            ("sy", f, &[]),
            ("zy", i8t, &[]),
        ],
        &[("y", i8t)],
        vec![],
    );
    let out = run(
        &mdl,
        &[
            Tensor::from_vec(a8.clone(), &[2, 3]).unwrap(),
            Tensor::scalar(sa),
            Tensor::scalar(1i8),
            Tensor::from_vec(b8.clone(), &[3, 2]).unwrap(),
            Tensor::scalar(sb),
            Tensor::scalar(-1i8),
            Tensor::scalar(sy),
            Tensor::scalar(4i8),
        ],
    );
    let mult = f64::from(sa * sb / sy);
    let want: Vec<i8> = (0..4)
        .map(|o| {
            let (i, j) = (o / 2, o % 2);
            let c: i64 = (0..3)
                .map(|t| (i64::from(a8[i * 3 + t]) - 1) * (i64::from(b8[t * 2 + j]) + 1))
                .sum();
            (round_even(c as f64 * mult) + 4.0).clamp(-128.0, 127.0) as i8
        })
        .collect();
    assert_eq!(out[0].as_slice::<i8>().unwrap(), want.as_slice());
}
