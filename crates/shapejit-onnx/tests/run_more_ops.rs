//! ONNX models built in Rust for the math functions, composed activations,
//! reductions, arg-extremes, normalizations, index patterns and
//! element-indexed gathers and scatters, run on the interpreter against naive
//! float64 references (or values worked out by hand).

mod common;

use common::reference::{self as r, Arr, assert_close, unravel};
use common::*;
use shapejit_ir::Tensor;
use shapejit_onnx::proto::{AttributeProto, ModelProto, TensorProto, ValueInfoProto, data_type};

fn try_run(m: &ModelProto, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    let g = import(m).map_err(|e| format!("import: {e}"))?;
    let module = shapejit::Module::from_graph(g, shapejit::Options::interp())
        .map_err(|e| format!("compile: {e}"))?;
    module
        .runtime()
        .run(inputs)
        .map_err(|e| format!("run: {e}"))
}

fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    try_run(m, inputs).unwrap_or_else(|e| panic!("{e}"))
}

/// One node `op(inputs...) -> y` over the given graph inputs and initializers.
fn one(
    opset: i64,
    op: &str,
    ins: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
    attrs: Vec<AttributeProto>,
) -> ModelProto {
    let names: Vec<String> = ins
        .iter()
        .map(|v| v.name.clone())
        .chain(inits.iter().map(|t| t.name.clone()))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let n = node(op, &refs, &["y"], attrs);
    model(opset, graph(vec![n], ins, vec![vf("y", &[])], inits))
}

fn unary(opset: i64, op: &str, shape: &[&str], attrs: Vec<AttributeProto>) -> ModelProto {
    one(opset, op, vec![vf("x", shape)], vec![], attrs)
}

fn f32s(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::from_vec(data.to_vec(), shape).unwrap()
}

type Ref = fn(f64) -> f64;

#[test]
fn math_functions_and_composed_activations() {
    let mut rng = r::rng(31);
    let x = r::random(&mut rng, &[3, 5], -0.95, 0.95);
    let big = r::random(&mut rng, &[3, 5], 1.0, 4.0);
    let cases: Vec<(&str, Vec<AttributeProto>, Ref, bool)> = vec![
        ("Sin", vec![], f64::sin, false),
        ("Cos", vec![], f64::cos, false),
        ("Tan", vec![], f64::tan, false),
        ("Asin", vec![], f64::asin, false),
        ("Acos", vec![], f64::acos, false),
        ("Atan", vec![], f64::atan, false),
        ("Sinh", vec![], f64::sinh, false),
        ("Cosh", vec![], f64::cosh, false),
        ("Asinh", vec![], f64::asinh, false),
        ("Acosh", vec![], f64::acosh, true),
        ("Atanh", vec![], f64::atanh, false),
        ("Softsign", vec![], |v| v / (1.0 + v.abs()), false),
        (
            "HardSigmoid",
            vec![],
            |v| (0.2 * v + 0.5).clamp(0.0, 1.0),
            false,
        ),
        (
            "HardSwish",
            vec![],
            |v| v * (v / 6.0 + 0.5).clamp(0.0, 1.0),
            false,
        ),
        ("Mish", vec![], |v| v * (1.0 + v.exp()).ln().tanh(), false),
        ("Swish", vec![], |v| v / (1.0 + (-v).exp()), false),
        (
            "Celu",
            vec![],
            |v| if v > 0.0 { v } else { v.exp() - 1.0 },
            false,
        ),
        (
            "ThresholdedRelu",
            vec![],
            |v| if v > 1.0 { v } else { 0.0 },
            true,
        ),
        ("Sign", vec![], f64::signum, false),
    ];
    for (op, attrs, f, use_big) in cases {
        let input = if use_big { &big } else { &x };
        let opset = if op == "Swish" { 24 } else { 22 };
        let out = run(&unary(opset, op, &["b", "5"], attrs), &[input.f32_tensor()]);
        assert_close(&out[0], &input.map(f), 1e-6, 1e-5, op);
    }
    // attributes
    let out = run(
        &unary(22, "Celu", &["3", "5"], vec![a_float("alpha", 2.0)]),
        &[x.f32_tensor()],
    );
    let celu2 = |v: f64| {
        if v > 0.0 {
            v
        } else {
            2.0 * ((v / 2.0).exp() - 1.0)
        }
    };
    assert_close(&out[0], &x.map(celu2), 1e-6, 1e-5, "Celu alpha 2");
}

#[test]
fn rounding_is_exact_and_nan_propagates() {
    let xs = [-2.5f32, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6, f32::NAN];
    let t = f32s(&[9], &xs);
    let round = [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 2.0, -3.0];
    for (op, want) in [
        ("Round", round.to_vec()),
        ("Floor", xs[..8].iter().map(|v| v.floor() as f64).collect()),
        ("Ceil", xs[..8].iter().map(|v| v.ceil() as f64).collect()),
    ] {
        let out = run(&unary(22, op, &["9"], vec![]), std::slice::from_ref(&t));
        let got = out[0].to_f64_vec();
        assert_eq!(&got[..8], &want[..], "{op}");
        assert!(got[8].is_nan(), "{op}: NaN gives NaN");
    }
    let out = run(
        &unary(20, "IsNaN", &["9"], vec![]),
        std::slice::from_ref(&t),
    );
    let nan: Vec<f64> = (0..9).map(|i| f64::from(u8::from(i == 8))).collect();
    assert_eq!(out[0].to_f64_vec(), nan);
    let inf = f32s(&[4], &[f32::INFINITY, f32::NEG_INFINITY, 1.0, f32::NAN]);
    for (attrs, want) in [
        (vec![], [1.0, 1.0, 0.0, 0.0]),
        (vec![a_int("detect_negative", 0)], [1.0, 0.0, 0.0, 0.0]),
        (vec![a_int("detect_positive", 0)], [0.0, 1.0, 0.0, 0.0]),
    ] {
        let out = run(
            &unary(20, "IsInf", &["4"], attrs),
            std::slice::from_ref(&inf),
        );
        assert_eq!(out[0].to_f64_vec(), want);
    }
    let out = run(&unary(22, "Sign", &["4"], vec![]), &[inf]);
    let got = out[0].to_f64_vec();
    assert_eq!(&got[..3], &[1.0, -1.0, 1.0]);
    assert!(got[3].is_nan(), "Sign(NaN) is NaN");
}

#[test]
fn composed_reductions_both_axes_forms() {
    let mut rng = r::rng(32);
    let x = r::random(&mut rng, &[2, 3, 4], 0.1, 2.0);
    type Post = fn(f64) -> f64;
    let cases: [(&str, Ref, Post); 5] = [
        ("ReduceL1", f64::abs, |v| v),
        ("ReduceL2", |v| v * v, f64::sqrt),
        ("ReduceSumSquare", |v| v * v, |v| v),
        ("ReduceLogSum", |v| v, f64::ln),
        ("ReduceLogSumExp", f64::exp, f64::ln),
    ];
    for (op, pre, post) in cases {
        for keepdims in [0, 1] {
            let want = r::reduce(&x.map(pre), &[1], keepdims == 1, 0.0, |a, b| a + b).map(post);
            // axes as an input (version 18)
            let m = one(
                18,
                op,
                vec![vf("x", &["b", "3", "4"])],
                vec![ints("axes", &[-2])],
                vec![a_int("keepdims", keepdims)],
            );
            let out = run(&m, &[x.f32_tensor()]);
            assert_close(&out[0], &want, 1e-6, 1e-5, op);
            // axes as an attribute (version 13)
            let m = unary(
                13,
                op,
                &["b", "3", "4"],
                vec![a_ints("axes", &[1]), a_int("keepdims", keepdims)],
            );
            let out = run(&m, &[x.f32_tensor()]);
            assert_close(&out[0], &want, 1e-6, 1e-5, op);
        }
    }
    // log-sum-exp stays finite where exp overflows f32
    let m = unary(18, "ReduceLogSumExp", &["2"], vec![a_int("keepdims", 0)]);
    let out = run(&m, &[f32s(&[2], &[100.0, 100.0])]);
    assert_close(
        &out[0],
        &Arr::new(&[], vec![100.0 + 2f64.ln()]),
        1e-5,
        1e-6,
        "stable",
    );
}

#[test]
fn arg_extremes_ties_nan_and_hardmax() {
    let x = f32s(&[2, 4], &[1.0, 3.0, 3.0, 0.0, 2.0, f32::NAN, 5.0, f32::NAN]);
    let argmax = |attrs| {
        run(
            &unary(13, "ArgMax", &["2", "4"], attrs),
            std::slice::from_ref(&x),
        )
    };
    let out = argmax(vec![a_int("axis", 1)]);
    assert_eq!(out[0].shape(), &[2, 1]);
    assert_eq!(out[0].to_f64_vec(), [1.0, 1.0], "first max, first NaN");
    let out = argmax(vec![
        a_int("axis", 1),
        a_int("keepdims", 0),
        a_int("select_last_index", 1),
    ]);
    assert_eq!(out[0].shape(), &[2]);
    assert_eq!(out[0].to_f64_vec(), [2.0, 3.0], "last max, last NaN");
    let y = f32s(&[2, 3], &[4.0, -1.0, 4.0, 0.0, -2.0, -2.0]);
    let out = run(
        &unary(13, "ArgMin", &["2", "3"], vec![a_int("keepdims", 0)]),
        std::slice::from_ref(&y),
    );
    assert_eq!(out[0].to_f64_vec(), [1.0, 1.0, 1.0], "argmin along axis 0");
    assert_eq!(out[0].dtype(), shapejit_ir::DType::I64);
    let out = run(&unary(13, "Hardmax", &["2", "3"], vec![]), &[y]);
    assert_eq!(out[0].to_f64_vec(), [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
}

/// LRN by its definition.
fn lrn(x: &Arr, size: usize, alpha: f64, beta: f64, bias: f64) -> Arr {
    let c = x.shape[1];
    let mut out = x.clone();
    for (i, o) in out.data.iter_mut().enumerate() {
        let idx = unravel(i, &x.shape);
        let lo = idx[1].saturating_sub((size - 1) / 2);
        let hi = (idx[1] + (size - 1).div_ceil(2)).min(c - 1);
        let sum: f64 = (lo..=hi)
            .map(|ch| {
                let mut j = idx.clone();
                j[1] = ch;
                x.at(&j).powi(2)
            })
            .sum();
        *o = x.data[i] / (bias + alpha / size as f64 * sum).powf(beta);
    }
    out
}

#[test]
fn normalizations() {
    let mut rng = r::rng(33);
    let x = r::random(&mut rng, &[2, 6, 3, 2], -2.0, 2.0);
    let xs = &["n", "6", "3", "2"];
    for size in [3, 4] {
        let m = unary(
            13,
            "LRN",
            xs,
            vec![
                a_int("size", size),
                a_float("alpha", 0.01),
                a_float("beta", 0.6),
                a_float("bias", 2.0),
            ],
        );
        let out = run(&m, &[x.f32_tensor()]);
        assert_close(
            &out[0],
            &lrn(&x, size as usize, 0.01, 0.6, 2.0),
            1e-6,
            1e-5,
            "LRN",
        );
    }
    let out = run(
        &unary(22, "LpNormalization", xs, vec![a_int("axis", 1)]),
        &[x.f32_tensor()],
    );
    let norm = r::reduce(&x.map(|v| v * v), &[1], true, 0.0, |a, b| a + b).map(f64::sqrt);
    assert_close(
        &out[0],
        &r::binary(&x, &norm, |a, b| a / b),
        1e-6,
        1e-5,
        "LpNorm",
    );

    let standardize = |a: &Arr, axes: &[usize], eps: f64| {
        let m = r::mean(a, axes, true);
        let d = r::binary(a, &m, |p, q| p - q);
        let v = r::mean(&d.map(|p| p * p), axes, true);
        r::binary(&d, &v, |p, q| p / (q + eps).sqrt())
    };
    // GroupNormalization (version 21): 3 groups of 2 channels, per-channel affine
    let scale: Vec<f32> = (0..6).map(|i| 0.5 + i as f32 * 0.25).collect();
    let bias: Vec<f32> = (0..6).map(|i| i as f32 * 0.1 - 0.2).collect();
    let m = one(
        21,
        "GroupNormalization",
        vec![vf("x", xs)],
        vec![tf32("s", &[6], &scale), tf32("bi", &[6], &bias)],
        vec![a_int("num_groups", 3), a_float("epsilon", 1e-3)],
    );
    let out = run(&m, &[x.f32_tensor()]);
    let g = standardize(&x.reshape(&[2, 3, 12]), &[2], 1e-3).reshape(&[2, 6, 3, 2]);
    let s = Arr::new(&[6, 1, 1], scale.iter().map(|&v| v as f64).collect());
    let b = Arr::new(&[6, 1, 1], bias.iter().map(|&v| v as f64).collect());
    let want = r::binary(&r::binary(&g, &s, |p, q| p * q), &b, |p, q| p + q);
    assert_close(&out[0], &want, 1e-5, 1e-4, "GroupNormalization");

    let out = run(
        &unary(13, "MeanVarianceNormalization", xs, vec![]),
        &[x.f32_tensor()],
    );
    assert_close(
        &out[0],
        &standardize(&x, &[0, 2, 3], 0.0),
        1e-5,
        1e-4,
        "MVN",
    );

    let m = one(
        23,
        "RMSNormalization",
        vec![vf("x", xs)],
        vec![tf32("s", &[2], &[1.5, -0.5])],
        vec![a_int("axis", 2)],
    );
    let out = run(&m, &[x.f32_tensor()]);
    let ms = r::mean(&x.map(|v| v * v), &[2, 3], true);
    let normed = r::binary(&x, &ms, |p, q| p / (q + 1e-5).sqrt());
    let s = Arr::new(&[2], vec![1.5, -0.5]);
    assert_close(
        &out[0],
        &r::binary(&normed, &s, |p, q| p * q),
        1e-5,
        1e-4,
        "RMSNorm",
    );
}

#[test]
fn index_patterns() {
    let x = Arr::new(&[1, 8, 2, 3], (0..48).map(f64::from).collect());
    let xs = &["n", "8", "2", "3"];
    let b = 2;
    for mode in ["DCR", "CRD"] {
        let m = unary(
            13,
            "DepthToSpace",
            xs,
            vec![a_int("blocksize", b), a_str("mode", mode)],
        );
        let out = run(&m, &[x.f32_tensor()]);
        let (b, c) = (b as usize, 2);
        let mut want = Arr::new(&[1, c, 4, 6], vec![0.0; 48]);
        for (i, o) in want.data.iter_mut().enumerate() {
            let [_, ch, h, w] = unravel(i, &[1, c, 4, 6])[..] else {
                unreachable!()
            };
            let (bh, bw) = (h % b, w % b);
            let src = if mode == "DCR" {
                (bh * b + bw) * c + ch
            } else {
                ch * b * b + bh * b + bw
            };
            *o = x.at(&[0, src, h / b, w / b]);
        }
        assert_close(&out[0], &want, 0.0, 0.0, mode);
        // SpaceToDepth in the same mode undoes it
        let back = one(
            28,
            "SpaceToDepth",
            vec![vf("x", &["1", "2", "4", "6"])],
            vec![],
            vec![a_int("blocksize", 2), a_str("mode", mode)],
        );
        let out = run(&back, &[want.f32_tensor()]);
        assert_close(&out[0], &x, 0.0, 0.0, "SpaceToDepth");
    }

    let t = Arr::new(&[2, 3, 4], (0..24).map(f64::from).collect());
    for (upper, k) in [(1, 0), (1, 1), (0, 0), (0, -1)] {
        let m = one(
            14,
            "Trilu",
            vec![vf("x", &["b", "3", "4"])],
            vec![ints("k", &[k])],
            vec![a_int("upper", upper)],
        );
        let out = run(&m, &[t.f32_tensor()]);
        let mut want = t.clone();
        for (i, o) in want.data.iter_mut().enumerate() {
            let idx = unravel(i, &t.shape);
            let d = idx[2] as i64 - idx[1] as i64;
            if (upper == 1 && d < k) || (upper == 0 && d > k) {
                *o = 0.0;
            }
        }
        assert_close(&out[0], &want, 0.0, 0.0, "Trilu");
    }

    let m = one(
        22,
        "EyeLike",
        vec![vf("x", &["3", "4"])],
        vec![],
        vec![a_int("k", 1)],
    );
    let out = run(
        &m,
        &[Tensor::zeros(shapejit_ir::DType::F32, &[3, 4]).unwrap()],
    );
    let eye: Vec<f64> = (0..12)
        .map(|i| f64::from(u8::from(i % 4 == i / 4 + 1)))
        .collect();
    assert_eq!(out[0].to_f64_vec(), eye);

    let idx = Tensor::from_vec(vec![0i64, -1, 2, 7], &[4]).unwrap();
    let m = one(
        11,
        "OneHot",
        vec![vi("i", data_type::INT64, &["4"])],
        vec![ints("depth", &[3]), tf32("v", &[2], &[-1.0, 5.0])],
        vec![a_int("axis", 0)],
    );
    let out = run(&m, &[idx]);
    assert_eq!(out[0].shape(), &[3, 4]);
    #[rustfmt::skip]
    let want = [5.0, -1.0, -1.0, -1.0,
                -1.0, -1.0, -1.0, -1.0,
                -1.0, 5.0, 5.0, -1.0];
    assert_eq!(out[0].to_f64_vec(), want);
}

#[test]
fn gathers_and_scatters() {
    let data = Arr::new(&[3, 3], (1..=9).map(f64::from).collect());
    let idx = Tensor::from_vec(vec![1i64, 0, -1, 2, 0, 0], &[2, 3]).unwrap();
    let i64s = |name: &str, d: &[&str]| vi(name, data_type::INT64, d);
    let m = one(
        13,
        "GatherElements",
        vec![vf("d", &["3", "3"]), i64s("i", &["2", "3"])],
        vec![],
        vec![a_int("axis", 0)],
    );
    let out = run(&m, &[data.f32_tensor(), idx.clone()]);
    assert_eq!(out[0].to_f64_vec(), [4.0, 2.0, 9.0, 7.0, 2.0, 3.0]);

    let upd = f32s(&[2, 3], &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
    let m = one(
        18,
        "ScatterElements",
        vec![
            vf("d", &["3", "3"]),
            i64s("i", &["2", "3"]),
            vf("u", &["2", "3"]),
        ],
        vec![],
        vec![a_int("axis", 0), a_str("reduction", "add")],
    );
    let out = run(&m, &[data.f32_tensor(), idx.clone(), upd]);
    assert_eq!(
        out[0].to_f64_vec(),
        [1.0, 72.0, 63.0, 14.0, 5.0, 6.0, 47.0, 8.0, 39.0]
    );

    // GatherND with one batch dim: data [2, 2, 2], indices [2, 1, 1]
    let d3 = Arr::new(&[2, 2, 2], (0..8).map(f64::from).collect());
    let nd_idx = Tensor::from_vec(vec![1i64, 0], &[2, 1, 1]).unwrap();
    let m = one(
        13,
        "GatherND",
        vec![vf("d", &["2", "2", "2"]), i64s("i", &["2", "1", "1"])],
        vec![],
        vec![a_int("batch_dims", 1)],
    );
    let out = run(&m, &[d3.f32_tensor(), nd_idx]);
    assert_eq!(out[0].shape(), &[2, 1, 2]);
    assert_eq!(out[0].to_f64_vec(), [2.0, 3.0, 4.0, 5.0]);

    let sc_idx = Tensor::from_vec(vec![1i64, 1], &[2, 1]).unwrap();
    let m = one(
        18,
        "ScatterND",
        vec![
            vf("d", &["2", "2", "2"]),
            i64s("i", &["2", "1"]),
            vf("u", &["2", "2", "2"]),
        ],
        vec![],
        vec![a_str("reduction", "mul")],
    );
    let upd = f32s(&[2, 2, 2], &[2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0]);
    let out = run(&m, &[d3.f32_tensor(), sc_idx, upd]);
    assert_eq!(
        out[0].to_f64_vec(),
        [0.0, 1.0, 2.0, 3.0, 24.0, 30.0, 36.0, 42.0]
    );

    // An index out of range is an error naming it, not a crash.
    let bad = Tensor::from_vec(vec![3i64, 0, 0, 0, 0, 0], &[2, 3]).unwrap();
    let m = one(
        13,
        "GatherElements",
        vec![vf("d", &["3", "3"]), i64s("i", &["2", "3"])],
        vec![],
        vec![],
    );
    let err = try_run(&m, &[data.f32_tensor(), bad]).unwrap_err();
    assert!(err.contains("index 3 is out of range"), "{err}");
}

#[test]
fn mod_xor_and_cast_like() {
    let a = Tensor::from_vec(vec![-7i64, 7, -7, 7, 6, 0], &[6]).unwrap();
    let b = Tensor::from_vec(vec![3i64, -3, -3, 3, 3, 5], &[6]).unwrap();
    let i64s = |name: &str| vi(name, data_type::INT64, &["6"]);
    let m = one(13, "Mod", vec![i64s("a"), i64s("b")], vec![], vec![]);
    let out = run(&m, &[a.clone(), b.clone()]);
    // Python's `x % y` = `x - y * floor(x / y)`
    let python: Vec<f64> = [(-7i64, 3i64), (7, -3), (-7, -3), (7, 3), (6, 3), (0, 5)]
        .iter()
        .map(|&(x, y)| x as f64 - y as f64 * (x as f64 / y as f64).floor())
        .collect();
    assert_eq!(out[0].to_f64_vec(), python, "sign of the divisor");
    let fa = f32s(&[4], &[-7.5, 7.5, 5.0, -4.0]);
    let fb = f32s(&[4], &[2.0, -2.0, 3.0, 3.0]);
    let m = one(
        13,
        "Mod",
        vec![vf("a", &["4"]), vf("b", &["4"])],
        vec![],
        vec![a_int("fmod", 1)],
    );
    let out = run(&m, &[fa, fb]);
    assert_eq!(out[0].to_f64_vec(), [-1.5, 1.5, 2.0, -1.0], "C fmod");

    let bools = |name: &str| vi(name, data_type::BOOL, &["4"]);
    let p = Tensor::from_vec(vec![true, true, false, false], &[4]).unwrap();
    let q = Tensor::from_vec(vec![true, false, true, false], &[4]).unwrap();
    let out = run(
        &one(7, "Xor", vec![bools("p"), bools("q")], vec![], vec![]),
        &[p, q],
    );
    assert_eq!(out[0].to_f64_vec(), [0.0, 1.0, 1.0, 0.0]);

    let m = one(
        21,
        "CastLike",
        vec![vf("x", &["3"]), vi("like", data_type::INT64, &["1"])],
        vec![],
        vec![],
    );
    let out = run(
        &m,
        &[
            f32s(&[3], &[1.9, -1.9, 3.0]),
            Tensor::from_vec(vec![0i64], &[1]).unwrap(),
        ],
    );
    assert_eq!(out[0].dtype(), shapejit_ir::DType::I64);
    assert_eq!(out[0].to_f64_vec(), [1.0, -1.0, 3.0]);
}

#[test]
fn lp_pool_is_the_p_norm_of_each_window() {
    // x [1, 2, 5, 6], 3x2 windows, strides 2x1, pads (1, 0, 1, 1): padding adds 0
    let mut rng = r::rng(77);
    let x = r::random(&mut rng, &[1, 2, 5, 6], -2.0, 2.0);
    let (kh, kw, sh, sw) = (3usize, 2usize, 2usize, 1usize);
    let (pt, pl, pb, pr) = (1usize, 0usize, 1usize, 1usize);
    let (h, w) = (5usize, 6usize);
    let (oh, ow) = ((h + pt + pb - kh) / sh + 1, (w + pl + pr - kw) / sw + 1);
    for p in [1i64, 2, 3] {
        let m = unary(
            22,
            "LpPool",
            &["1", "2", "5", "6"],
            vec![
                a_ints("kernel_shape", &[kh as i64, kw as i64]),
                a_ints("strides", &[sh as i64, sw as i64]),
                a_ints("pads", &[pt as i64, pl as i64, pb as i64, pr as i64]),
                a_int("p", p),
            ],
        );
        let out = run(&m, &[x.f32_tensor()]);
        let mut want = Vec::new();
        for c in 0..2 {
            for i in 0..oh {
                for j in 0..ow {
                    let mut s = 0.0;
                    for a in 0..kh {
                        for b in 0..kw {
                            let (y, xx) = (
                                (i * sh + a) as i64 - pt as i64,
                                (j * sw + b) as i64 - pl as i64,
                            );
                            if (0..h as i64).contains(&y) && (0..w as i64).contains(&xx) {
                                s += x.at(&[0, c, y as usize, xx as usize]).abs().powi(p as i32);
                            }
                        }
                    }
                    want.push(s.powf(1.0 / p as f64));
                }
            }
        }
        assert_close(
            &out[0],
            &Arr::new(&[1, 2, oh, ow], want),
            1e-5,
            1e-4,
            &format!("LpPool p={p}"),
        );
    }
}

#[test]
fn shrink_swiglu_windows_and_reverse_sequence() {
    let mut rng = r::rng(78);
    let x = r::random(&mut rng, &[2, 5], -2.0, 2.0);
    // Shrink with bias 0.25 and lambd 0.7
    let m = unary(
        9,
        "Shrink",
        &["2", "5"],
        vec![a_float("bias", 0.25), a_float("lambd", 0.7)],
    );
    let out = run(&m, &[x.f32_tensor()]);
    let want = x.map(|v| {
        if v < -0.7f32 as f64 {
            v + 0.25
        } else if v > 0.7f32 as f64 {
            v - 0.25
        } else {
            0.0
        }
    });
    assert_close(&out[0], &want, 1e-6, 1e-6, "Shrink");

    // SwiGLU(a, b; alpha 1.5) = a · sigmoid(1.5 a) · b
    let b = r::random(&mut rng, &[2, 5], -2.0, 2.0);
    let m = one(
        28,
        "SwiGLU",
        vec![vf("a", &["2", "5"]), vf("b", &["2", "5"])],
        vec![],
        vec![a_float("alpha", 1.5)],
    );
    let out = run(&m, &[x.f32_tensor(), b.f32_tensor()]);
    let want = r::binary(&x, &b, |a, b| a / (1.0 + (-1.5 * a).exp()) * b);
    assert_close(&out[0], &want, 1e-5, 1e-5, "SwiGLU");

    // windows of 7 points, periodic (N = 7) and symmetric (N = 6)
    let pi = std::f64::consts::PI;
    for (op, f) in [
        (
            "HannWindow",
            (|t: f64| (t / 2.0).sin().powi(2)) as fn(f64) -> f64,
        ),
        ("HammingWindow", |t| 25.0 / 46.0 - 21.0 / 46.0 * t.cos()),
        ("BlackmanWindow", |t| {
            0.42 - 0.5 * t.cos() + 0.08 * (2.0 * t).cos()
        }),
    ] {
        for periodic in [1i64, 0] {
            let m = one(
                17,
                op,
                vec![vi("n", data_type::INT64, &[])],
                vec![],
                vec![a_int("periodic", periodic)],
            );
            let out = run(&m, &[Tensor::scalar(7i64)]);
            let big_n = if periodic == 1 { 7.0 } else { 6.0 };
            let want: Vec<f64> = (0..7).map(|n| f(2.0 * pi * n as f64 / big_n)).collect();
            assert_close(&out[0], &Arr::new(&[7], want), 1e-6, 1e-5, op);
        }
    }

    // ReverseSequence: x [4 (time), 3 (batch), 2], lengths per batch
    let xs = r::random(&mut rng, &[4, 3, 2], -1.0, 1.0);
    let lens = [4i64, 0, 2];
    let m = one(
        10,
        "ReverseSequence",
        vec![vf("x", &["4", "3", "2"]), vi("l", data_type::INT64, &["3"])],
        vec![],
        vec![a_int("batch_axis", 1), a_int("time_axis", 0)],
    );
    let out = run(
        &m,
        &[
            xs.f32_tensor(),
            Tensor::from_vec(lens.to_vec(), &[3]).unwrap(),
        ],
    );
    let mut want = Vec::new();
    for t in 0..4i64 {
        for (bi, &l) in lens.iter().enumerate() {
            let src = if t < l { l - 1 - t } else { t };
            for c in 0..2 {
                want.push(xs.at(&[src as usize, bi, c]));
            }
        }
    }
    assert_close(
        &out[0],
        &Arr::new(&[4, 3, 2], want),
        0.0,
        0.0,
        "ReverseSequence",
    );
}
