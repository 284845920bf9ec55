//! ONNX models built in Rust for each op family (broadcast cases, opset
//! variants), imported and run by `shapejit`, against naive float64
//! references in `common/reference.rs`.

mod common;

use common::reference::{self as r, Arr, assert_close};
use common::*;
use shapejit_ir::Tensor;
use shapejit_onnx::proto::{ModelProto, NodeProto, TensorProto, ValueInfoProto, data_type};

fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = import(m).unwrap_or_else(|e| panic!("import: {e}"));
    let module = shapejit::Module::from_graph(g, shapejit::Options::default())
        .unwrap_or_else(|e| panic!("compile: {e}"));
    module
        .runtime()
        .run(inputs)
        .unwrap_or_else(|e| panic!("run: {e}"))
}

/// One node over f32 inputs named `x0, x1, ...` with output `y`.
fn single(
    opset: i64,
    op: &str,
    dims: &[&[&str]],
    attrs: Vec<shapejit_onnx::proto::AttributeProto>,
    inits: Vec<TensorProto>,
) -> ModelProto {
    let names: Vec<String> = (0..dims.len()).map(|i| format!("x{i}")).collect();
    let mut inputs: Vec<&str> = names.iter().map(String::as_str).collect();
    inputs.extend(inits.iter().map(|t| t.name.as_str()).collect::<Vec<_>>());
    let n = node(op, &inputs, &["y"], attrs);
    let vis: Vec<ValueInfoProto> = names.iter().zip(dims).map(|(n, d)| vf(n, d)).collect();
    model(opset, graph(vec![n], vis, vec![vf("y", &[])], inits))
}

const TOL: (f64, f64) = (1e-5, 1e-4);

type BinaryRef = fn(f64, f64) -> f64;

#[test]
fn binary_arithmetic_broadcasts() {
    let mut rng = r::rng(1);
    let a = r::random(&mut rng, &[2, 1, 4], 0.5, 2.0);
    let b = r::random(&mut rng, &[3, 1], 0.5, 2.0);
    let cases: [(&str, BinaryRef); 7] = [
        ("Add", |x, y| x + y),
        ("Sub", |x, y| x - y),
        ("Mul", |x, y| x * y),
        ("Div", |x, y| x / y),
        ("Pow", f64::powf),
        ("Max", f64::max),
        ("Min", f64::min),
    ];
    for (op, f) in cases {
        let m = single(13, op, &[&["batch", "1", "4"], &["3", "1"]], vec![], vec![]);
        let out = run(&m, &[a.f32_tensor(), b.f32_tensor()]);
        assert_close(&out[0], &r::binary(&a, &b, f), TOL.0, TOL.1, op);
    }
}

#[test]
fn legacy_opset6_broadcast_axis() {
    let mut rng = r::rng(2);
    let a = r::random(&mut rng, &[2, 3, 4], -1.0, 1.0);
    let b = r::random(&mut rng, &[3], -1.0, 1.0);
    let m = single(
        6,
        "Add",
        &[&["2", "3", "4"], &["3"]],
        vec![a_int("broadcast", 1), a_int("axis", 1)],
        vec![],
    );
    let out = run(&m, &[a.f32_tensor(), b.f32_tensor()]);
    assert_close(
        &out[0],
        &r::binary(&a, &b.reshape(&[3, 1]), |x, y| x + y),
        TOL.0,
        TOL.1,
        "add axis=1",
    );
}

#[test]
fn comparisons_logic_and_where() {
    let mut rng = r::rng(3);
    let a = r::random(&mut rng, &[3, 4], -1.0, 1.0);
    let b = r::random(&mut rng, &[4], -1.0, 1.0);
    let nodes = vec![
        node("Less", &["a", "b"], &["lt"], vec![]),
        node("GreaterOrEqual", &["a", "b"], &["ge"], vec![]),
        node("Not", &["lt"], &["nlt"], vec![]),
        node("Equal", &["nlt", "ge"], &["eq"], vec![]),
        node("Greater", &["a", "zero"], &["pos"], vec![]),
        node("And", &["pos", "lt"], &["both"], vec![]),
        node("Or", &["both", "ge"], &["any"], vec![]),
        node("Where", &["both", "a", "b"], &["w"], vec![]),
    ];
    let outs = vec![
        vi("eq", data_type::BOOL, &[]),
        vi("any", data_type::BOOL, &[]),
        vf("w", &[]),
    ];
    let m = model(
        13,
        graph(
            nodes,
            vec![vf("a", &["3", "4"]), vf("b", &["4"])],
            outs,
            vec![tf32("zero", &[], &[0.0])],
        ),
    );
    let out = run(&m, &[a.f32_tensor(), b.f32_tensor()]);
    let lt = r::binary(&a, &b, |x, y| (x < y) as u8 as f64);
    let both = r::binary(&a.map(|x| (x > 0.0) as u8 as f64), &lt, |p, l| {
        (p != 0.0 && l != 0.0) as u8 as f64
    });
    let ge = r::binary(&a, &b, |x, y| (x >= y) as u8 as f64);
    assert_close(&out[0], &lt.map(|_| 1.0), 0.0, 0.0, "not(lt) == ge");
    assert_close(
        &out[1],
        &r::binary(&both, &ge, |x, y| (x != 0.0 || y != 0.0) as u8 as f64),
        0.0,
        0.0,
        "or",
    );
    let w = Arr::new(
        &[3, 4],
        (0..12)
            .map(|i| {
                if both.data[i] != 0.0 {
                    a.data[i]
                } else {
                    b.data[i % 4]
                }
            })
            .collect(),
    );
    assert_close(&out[2], &w, 0.0, 0.0, "where");
}

/// (op, opset, attributes, positive inputs only, reference)
type UnaryCase = (
    &'static str,
    i64,
    Vec<shapejit_onnx::proto::AttributeProto>,
    bool,
    Box<dyn Fn(f64) -> f64>,
);

#[test]
fn unary_activations() {
    let mut rng = r::rng(4);
    let x = r::random(&mut rng, &[2, 5], -2.5, 2.5);
    let pos = r::random(&mut rng, &[2, 5], 0.1, 3.0);
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let cases: Vec<UnaryCase> = vec![
        ("Relu", 13, vec![], false, Box::new(|v: f64| v.max(0.0))),
        ("Neg", 13, vec![], false, Box::new(|v: f64| -v)),
        ("Abs", 13, vec![], false, Box::new(f64::abs)),
        ("Exp", 13, vec![], false, Box::new(f64::exp)),
        ("Tanh", 13, vec![], false, Box::new(f64::tanh)),
        ("Sigmoid", 13, vec![], false, Box::new(sig)),
        ("Erf", 13, vec![], false, Box::new(r::erf)),
        ("Log", 13, vec![], true, Box::new(f64::ln)),
        ("Sqrt", 13, vec![], true, Box::new(f64::sqrt)),
        ("Reciprocal", 13, vec![], true, Box::new(|v: f64| 1.0 / v)),
        (
            "LeakyRelu",
            13,
            vec![a_float("alpha", 0.2)],
            false,
            Box::new(|v: f64| if v >= 0.0 { v } else { 0.2 * v }),
        ),
        (
            "LeakyRelu",
            13,
            vec![],
            false,
            Box::new(|v: f64| if v >= 0.0 { v } else { 0.01 * v }),
        ),
        (
            "Elu",
            13,
            vec![a_float("alpha", 0.5)],
            false,
            Box::new(|v: f64| if v >= 0.0 { v } else { 0.5 * (v.exp() - 1.0) }),
        ),
        (
            "Gelu",
            20,
            vec![],
            false,
            Box::new(|v: f64| 0.5 * v * (1.0 + r::erf(v / 2f64.sqrt()))),
        ),
        (
            "Gelu",
            20,
            vec![a_str("approximate", "tanh")],
            false,
            Box::new(|v: f64| {
                0.5 * v
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v.powi(3))).tanh())
            }),
        ),
        (
            "Clip",
            6,
            vec![a_float("min", -0.5), a_float("max", 1.0)],
            false,
            Box::new(|v: f64| v.clamp(-0.5, 1.0)),
        ),
        (
            "Softplus",
            13,
            vec![],
            false,
            Box::new(|v: f64| (v.exp() + 1.0).ln()),
        ),
        (
            "Selu",
            13,
            vec![a_float("alpha", 1.5), a_float("gamma", 2.0)],
            false,
            Box::new(|v: f64| 2.0 * if v > 0.0 { v } else { 1.5 * (v.exp() - 1.0) }),
        ),
    ];
    for (op, opset, attrs, positive, f) in cases {
        let input = if positive { &pos } else { &x };
        let m = single(opset, op, &[&["batch", "5"]], attrs, vec![]);
        let out = run(&m, &[input.f32_tensor()]);
        assert_close(&out[0], &input.map(f), TOL.0, TOL.1, op);
    }
}

#[test]
fn softplus_is_stable_at_extreme_inputs() {
    // onnxruntime: Softplus(100) = 100, not inf; NaN and ±inf as the f64 limit.
    let xs = [
        100f32,
        -100.0,
        0.0,
        20.0,
        -20.0,
        88.8,
        1e30,
        -1e30,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let m = single(13, "Softplus", &[&["12"]], vec![], vec![]);
    let out = run(&m, &[Tensor::from_vec(xs.to_vec(), &[12]).unwrap()]);
    for (&x, &got) in xs.iter().zip(out[0].as_slice::<f32>().unwrap()) {
        let v = f64::from(x);
        let want = v.max(0.0) + (-v.abs()).exp().ln_1p();
        if want.is_nan() {
            assert!(got.is_nan(), "softplus({x}) = {got}, expected NaN");
        } else {
            let want = want as f32;
            assert!(
                got == want || (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "softplus({x}) = {got}, expected {want}"
            );
        }
    }
}

#[test]
fn clip_with_input_bounds_and_prelu() {
    let mut rng = r::rng(5);
    let x = r::random(&mut rng, &[2, 3, 2], -2.0, 2.0);
    let m = single(
        13,
        "Clip",
        &[&["2", "3", "2"]],
        vec![],
        vec![tf32("lo", &[], &[-1.0]), tf32("hi", &[], &[0.5])],
    );
    assert_close(
        &run(&m, &[x.f32_tensor()])[0],
        &x.map(|v| v.clamp(-1.0, 0.5)),
        0.0,
        0.0,
        "clip-13",
    );
    let slope = Arr::new(&[3, 1], vec![0.1, 0.2, 0.3]);
    let m = single(
        13,
        "PRelu",
        &[&["2", "3", "2"]],
        vec![],
        vec![tf32("s", &[3, 1], &[0.1, 0.2, 0.3])],
    );
    let want = r::binary(&x, &slope, |v, s| if v < 0.0 { v * s } else { v });
    assert_close(&run(&m, &[x.f32_tensor()])[0], &want, TOL.0, TOL.1, "prelu");
}

#[test]
fn variadic_sum_mean_max_min() {
    let mut rng = r::rng(6);
    let a = r::random(&mut rng, &[2, 3], -1.0, 1.0);
    let b = r::random(&mut rng, &[3], -1.0, 1.0);
    let c = r::random(&mut rng, &[2, 1], -1.0, 1.0);
    let ins = [a.f32_tensor(), b.f32_tensor(), c.f32_tensor()];
    let dims: &[&[&str]] = &[&["2", "3"], &["3"], &["2", "1"]];
    let fold = |f: fn(f64, f64) -> f64| r::binary(&r::binary(&a, &b, f), &c, f);
    assert_close(
        &run(&single(13, "Sum", dims, vec![], vec![]), &ins)[0],
        &fold(|x, y| x + y),
        TOL.0,
        TOL.1,
        "sum",
    );
    assert_close(
        &run(&single(13, "Max", dims, vec![], vec![]), &ins)[0],
        &fold(f64::max),
        0.0,
        0.0,
        "max",
    );
    assert_close(
        &run(&single(13, "Min", dims, vec![], vec![]), &ins)[0],
        &fold(f64::min),
        0.0,
        0.0,
        "min",
    );
    let want = fold(|x, y| x + y).map(|v| v / 3.0);
    assert_close(
        &run(&single(13, "Mean", dims, vec![], vec![]), &ins)[0],
        &want,
        TOL.0,
        TOL.1,
        "mean",
    );
}

#[test]
fn matmul_and_gemm() {
    let mut rng = r::rng(7);
    let a = r::random(&mut rng, &[2, 1, 3, 4], -1.0, 1.0);
    let b = r::random(&mut rng, &[3, 4, 5], -1.0, 1.0);
    let m = single(
        13,
        "MatMul",
        &[&["batch", "1", "3", "4"], &["3", "4", "5"]],
        vec![],
        vec![],
    );
    assert_close(
        &run(&m, &[a.f32_tensor(), b.f32_tensor()])[0],
        &r::matmul(&a, &b),
        TOL.0,
        TOL.1,
        "matmul",
    );
    let x = r::random(&mut rng, &[4, 3], -1.0, 1.0); // transA: [3, 4]^T
    let w = r::random(&mut rng, &[5, 4], -1.0, 1.0); // transB
    let c = r::random(&mut rng, &[5], -1.0, 1.0);
    let attrs = vec![
        a_int("transA", 1),
        a_int("transB", 1),
        a_float("alpha", 0.5),
        a_float("beta", 2.0),
    ];
    let m = single(
        13,
        "Gemm",
        &[&["4", "n"], &["5", "4"], &["5"]],
        attrs,
        vec![],
    );
    let prod = r::matmul(&r::transpose(&x, &[1, 0]), &r::transpose(&w, &[1, 0]));
    let want = r::binary(&prod, &c, |p, c| 0.5 * p + 2.0 * c);
    assert_close(
        &run(&m, &[x.f32_tensor(), w.f32_tensor(), c.f32_tensor()])[0],
        &want,
        TOL.0,
        TOL.1,
        "gemm",
    );
}

#[test]
fn softmax_opset_variants() {
    let mut rng = r::rng(8);
    let x = r::random(&mut rng, &[2, 3, 4], -2.0, 2.0);
    let m = single(
        13,
        "Softmax",
        &[&["b", "3", "4"]],
        vec![a_int("axis", 1)],
        vec![],
    );
    assert_close(
        &run(&m, &[x.f32_tensor()])[0],
        &r::softmax(&x, 1),
        1e-6,
        1e-5,
        "softmax-13 axis 1",
    );
    // Before opset 13, axis = 1 normalizes over the flattened [3*4] dims.
    let m = single(11, "Softmax", &[&["b", "3", "4"]], vec![], vec![]);
    let want = r::softmax(&x.reshape(&[2, 12]), 1).reshape(&[2, 3, 4]);
    assert_close(
        &run(&m, &[x.f32_tensor()])[0],
        &want,
        1e-6,
        1e-5,
        "softmax-11",
    );
    let m = single(13, "LogSoftmax", &[&["b", "3", "4"]], vec![], vec![]);
    assert_close(
        &run(&m, &[x.f32_tensor()])[0],
        &r::softmax(&x, 2).map(f64::ln),
        1e-5,
        1e-5,
        "log_softmax",
    );
}

#[test]
fn normalizations() {
    let mut rng = r::rng(9);
    let x = r::random(&mut rng, &[2, 3, 4], -2.0, 2.0);
    let scale = r::random(&mut rng, &[4], 0.5, 1.5);
    let bias = r::random(&mut rng, &[4], -0.5, 0.5);
    let inits = vec![
        tf32("s", &[4], &f32s(&scale)),
        tf32("bb", &[4], &f32s(&bias)),
    ];
    let m = single(
        17,
        "LayerNormalization",
        &[&["b", "3", "4"]],
        vec![a_float("epsilon", 1e-3)],
        inits,
    );
    let mu = r::mean(&x, &[2], true);
    let d = r::binary(&x, &mu, |a, b| a - b);
    let var = r::mean(&d.map(|v| v * v), &[2], true);
    let norm = r::binary(&d, &var, |d, v| d / (v + 1e-3).sqrt());
    let want = r::binary(&r::binary(&norm, &scale, |n, s| n * s), &bias, |a, b| a + b);
    assert_close(
        &run(&m, &[x.f32_tensor()])[0],
        &want,
        TOL.0,
        TOL.1,
        "layer_norm",
    );

    let x4 = r::random(&mut rng, &[2, 3, 2, 2], -2.0, 2.0);
    let stats: Vec<Arr> = (0..4)
        .map(|i| r::random(&mut rng, &[3], if i == 3 { 0.5 } else { -1.0 }, 1.5))
        .collect();
    let names = ["sc", "bi", "mean", "var"];
    let inits = names
        .iter()
        .zip(&stats)
        .map(|(n, a)| tf32(n, &[3], &f32s(a)))
        .collect();
    let m = single(
        9,
        "BatchNormalization",
        &[&["n", "3", "2", "2"]],
        vec![a_float("epsilon", 1e-4)],
        inits,
    );
    let c = |a: &Arr| a.reshape(&[3, 1, 1]);
    let centered = r::binary(&x4, &c(&stats[2]), |x, m| x - m);
    let scaled = r::binary(&centered, &c(&stats[3]), |x, v| x / (v + 1e-4).sqrt());
    let want = r::binary(
        &r::binary(&scaled, &c(&stats[0]), |x, s| x * s),
        &c(&stats[1]),
        |x, b| x + b,
    );
    assert_close(
        &run(&m, &[x4.f32_tensor()])[0],
        &want,
        TOL.0,
        TOL.1,
        "batch_norm",
    );

    let inits = vec![
        tf32("sc", &[3], &f32s(&stats[0])),
        tf32("bi", &[3], &f32s(&stats[1])),
    ];
    let m = single(
        6,
        "InstanceNormalization",
        &[&["n", "3", "2", "2"]],
        vec![],
        inits,
    );
    let mu = r::mean(&x4, &[2, 3], true);
    let d = r::binary(&x4, &mu, |a, b| a - b);
    let var = r::mean(&d.map(|v| v * v), &[2, 3], true);
    let norm = r::binary(&d, &var, |d, v| d / (v + 1e-5).sqrt());
    let want = r::binary(
        &r::binary(&norm, &c(&stats[0]), |x, s| x * s),
        &c(&stats[1]),
        |x, b| x + b,
    );
    assert_close(
        &run(&m, &[x4.f32_tensor()])[0],
        &want,
        TOL.0,
        TOL.1,
        "instance_norm",
    );
}

fn f32s(a: &Arr) -> Vec<f32> {
    a.data.iter().map(|&v| v as f32).collect()
}

#[test]
fn reductions_attribute_and_input_axes() {
    let mut rng = r::rng(10);
    let x = r::random(&mut rng, &[2, 3, 4], 0.5, 1.5);
    type Ref = fn(&Arr, &[usize], bool) -> Arr;
    let cases: [(&str, i64, Ref); 5] = [
        ("ReduceSum", 13, |a, ax, k| {
            r::reduce(a, ax, k, 0.0, |x, y| x + y)
        }),
        ("ReduceMean", 18, r::mean),
        ("ReduceMax", 18, |a, ax, k| {
            r::reduce(a, ax, k, f64::NEG_INFINITY, f64::max)
        }),
        ("ReduceMin", 18, |a, ax, k| {
            r::reduce(a, ax, k, f64::INFINITY, f64::min)
        }),
        ("ReduceProd", 18, |a, ax, k| {
            r::reduce(a, ax, k, 1.0, |x, y| x * y)
        }),
    ];
    for (op, input_from, f) in cases {
        // Attribute form (the opset before axes became an input), keepdims = 0.
        let m = single(
            input_from - 1,
            op,
            &[&["b", "3", "4"]],
            vec![a_ints("axes", &[0, -1]), a_int("keepdims", 0)],
            vec![],
        );
        assert_close(
            &run(&m, &[x.f32_tensor()])[0],
            &f(&x, &[0, 2], false),
            TOL.0,
            TOL.1,
            op,
        );
        // Input form, keepdims default 1.
        let m = single(
            input_from,
            op,
            &[&["b", "3", "4"]],
            vec![],
            vec![ints("axes", &[1])],
        );
        assert_close(
            &run(&m, &[x.f32_tensor()])[0],
            &f(&x, &[1], true),
            TOL.0,
            TOL.1,
            op,
        );
        // No axes: every axis.
        let m = single(
            input_from,
            op,
            &[&["b", "3", "4"]],
            vec![a_int("keepdims", 0)],
            vec![],
        );
        assert_close(
            &run(&m, &[x.f32_tensor()])[0],
            &f(&x, &[0, 1, 2], false),
            TOL.0,
            1e-4,
            op,
        );
    }
}

#[test]
fn reshape_through_shape_chain_at_two_batch_sizes() {
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Gather", &["s", "i0"], &["b"], vec![a_int("axis", 0)]),
        node("Unsqueeze", &["b", "ax0"], &["bu"], vec![]),
        node(
            "Concat",
            &["bu", "rest"],
            &["shape"],
            vec![a_int("axis", 0)],
        ),
        node("Reshape", &["x", "shape"], &["r"], vec![]),
        node(
            "Transpose",
            &["r"],
            &["y"],
            vec![a_ints("perm", &[0, 2, 1])],
        ),
    ];
    let inits = vec![
        ti64("i0", &[], &[0]),
        ints("ax0", &[0]),
        ints("rest", &[3, -1]),
    ];
    let m = model(
        13,
        graph(
            nodes,
            vec![vf("x", &["batch", "6"])],
            vec![vf("y", &[])],
            inits,
        ),
    );
    let g = import(&m).unwrap();
    assert_eq!(out_type(&g, 0), "f32[batch, 2, 3]");
    let module = shapejit::Module::from_graph(g, shapejit::Options::default()).unwrap();
    let mut rt = module.runtime();
    let mut rng = r::rng(11);
    for batch in [1, 4, 3] {
        let x = r::random(&mut rng, &[batch, 6], -1.0, 1.0);
        let out = rt.run(&[x.f32_tensor()]).unwrap();
        assert_close(
            &out[0],
            &r::transpose(&x.reshape(&[batch, 3, 2]), &[0, 2, 1]),
            0.0,
            0.0,
            "reshape+transpose",
        );
    }
}

fn one(
    opset: i64,
    n: NodeProto,
    ins: &[(&str, &[&str])],
    inits: Vec<TensorProto>,
    n_out: usize,
) -> ModelProto {
    let outs = n.output.iter().take(n_out).map(|o| vf(o, &[])).collect();
    let vis = ins.iter().map(|(name, d)| vf(name, d)).collect();
    model(opset, graph(vec![n], vis, outs, inits))
}

#[test]
fn movement_ops() {
    let mut rng = r::rng(12);
    let x = r::random(&mut rng, &[2, 3, 4], -1.0, 1.0);
    let xi: &[(&str, &[&str])] = &[("x", &["b", "3", "4"])];
    let run1 = |m: ModelProto| run(&m, &[x.f32_tensor()]);

    let out = run1(one(
        13,
        node("Transpose", &["x"], &["y"], vec![]),
        xi,
        vec![],
        1,
    ));
    assert_close(
        &out[0],
        &r::transpose(&x, &[2, 1, 0]),
        0.0,
        0.0,
        "transpose default perm",
    );

    let out = run1(one(
        11,
        node("Unsqueeze", &["x"], &["y"], vec![a_ints("axes", &[1])]),
        xi,
        vec![],
        1,
    ));
    assert_close(&out[0], &x.reshape(&[2, 1, 3, 4]), 0.0, 0.0, "unsqueeze-11");
    let sq = node("Squeeze", &["u", "ax"], &["y"], vec![]);
    let m = model(
        13,
        graph(
            vec![node("Unsqueeze", &["x", "ax"], &["u"], vec![]), sq],
            vec![vf("x", &["b", "3", "4"])],
            vec![vf("y", &[])],
            vec![ints("ax", &[-1])],
        ),
    );
    assert_close(&run1(m)[0], &x, 0.0, 0.0, "unsqueeze/squeeze-13");

    let out = run1(one(
        13,
        node("Flatten", &["x"], &["y"], vec![a_int("axis", 2)]),
        xi,
        vec![],
        1,
    ));
    assert_close(&out[0], &x.reshape(&[6, 4]), 0.0, 0.0, "flatten");

    let out = run1(one(
        13,
        node("Concat", &["x", "x"], &["y"], vec![a_int("axis", -1)]),
        xi,
        vec![],
        1,
    ));
    assert_close(&out[0], &r::concat(&[&x, &x], 2), 0.0, 0.0, "concat");

    let out = run1(one(
        13,
        node("Split", &["x", "sp"], &["p", "q"], vec![a_int("axis", 2)]),
        xi,
        vec![ints("sp", &[1, 3])],
        2,
    ));
    assert_close(&out[0], &r::take(&x, 2, &[0]), 0.0, 0.0, "split 0");
    assert_close(&out[1], &r::take(&x, 2, &[1, 2, 3]), 0.0, 0.0, "split 1");
    let out = run1(one(
        11,
        node("Split", &["x"], &["p", "q"], vec![a_int("axis", 2)]),
        xi,
        vec![],
        2,
    ));
    assert_close(
        &out[1],
        &r::take(&x, 2, &[2, 3]),
        0.0,
        0.0,
        "split-11 equal",
    );

    let sl = node("Slice", &["x", "st", "en", "ax", "sp"], &["y"], vec![]);
    let inits = vec![
        ints("st", &[-1, 0]),
        ints("en", &[i64::MIN, 10]),
        ints("ax", &[2, 1]),
        ints("sp", &[-2, 2]),
    ];
    let out = run1(one(13, sl, xi, inits, 1));
    assert_close(
        &out[0],
        &r::take(&r::take(&x, 2, &[3, 1]), 1, &[0, 2]),
        0.0,
        0.0,
        "slice negative step",
    );
    let sl = node(
        "Slice",
        &["x"],
        &["y"],
        vec![
            a_ints("starts", &[1]),
            a_ints("ends", &[3]),
            a_ints("axes", &[2]),
        ],
    );
    assert_close(
        &run1(one(9, sl, xi, vec![], 1))[0],
        &r::take(&x, 2, &[1, 2]),
        0.0,
        0.0,
        "slice-9",
    );

    let g = node("Gather", &["x", "idx"], &["y"], vec![a_int("axis", 1)]);
    let out = run1(one(
        13,
        g,
        xi,
        vec![ti64("idx", &[2, 2], &[2, -3, 1, 1])],
        1,
    ));
    let want = r::take(&x, 1, &[2, 0, 1, 1]).reshape(&[2, 2, 2, 4]);
    assert_close(&out[0], &want, 0.0, 0.0, "gather 2-D indices");

    let p = node("Pad", &["x", "pads", "v"], &["y"], vec![]);
    let out = run1(one(
        13,
        p,
        xi,
        vec![ints("pads", &[0, 1, 0, 1, 0, 2]), tf32("v", &[], &[0.5])],
        1,
    ));
    assert_close(
        &out[0],
        &r::pad(&x, &[0, 1, 0, 1, 0, 2], 0.5),
        0.0,
        0.0,
        "pad-13",
    );
    // reflect: row i of the padded axis reads input row |i - b| mirrored at the end.
    let p = node(
        "Pad",
        &["x", "pads"],
        &["y"],
        vec![a_str("mode", "reflect")],
    );
    let out = run1(one(13, p, xi, vec![ints("pads", &[0, 2, 1, 0, 1, 2])], 1));
    let want = r::take(
        &r::take(&x, 1, &[2, 1, 0, 1, 2, 1]),
        2,
        &[1, 0, 1, 2, 3, 2, 1],
    );
    assert_close(&out[0], &want, 0.0, 0.0, "pad reflect");
    let p = node("Pad", &["x", "pads"], &["y"], vec![a_str("mode", "edge")]);
    let out = run1(one(13, p, xi, vec![ints("pads", &[0, 0, 3, 0, 2, 1])], 1));
    let want = r::take(
        &r::take(&x, 1, &[0, 1, 2, 2, 2]),
        2,
        &[0, 0, 0, 0, 1, 2, 3, 3],
    );
    assert_close(&out[0], &want, 0.0, 0.0, "pad edge");
    let p = node(
        "Pad",
        &["x"],
        &["y"],
        vec![a_ints("pads", &[1, 0, 0, 0, 0, 1])],
    );
    assert_close(
        &run1(one(6, p, xi, vec![], 1))[0],
        &r::pad(&x, &[1, 0, 0, 0, 0, 1], 0.0),
        0.0,
        0.0,
        "pad-6",
    );
}

/// Edge padding of a symbolic axis keeps the exact size `n + begin + end` and
/// repeats the first and last rows at every batch size.
#[test]
fn edge_pad_of_a_symbolic_axis() {
    let p = node("Pad", &["x", "pads"], &["y"], vec![a_str("mode", "edge")]);
    let m = one(
        13,
        p,
        &[("x", &["n", "3"])],
        vec![ints("pads", &[1, 0, 2, 1])],
        1,
    );
    let g = import(&m).unwrap();
    assert_eq!(out_type(&g, 0), "f32[n+3, 4]");
    let mut rng = r::rng(16);
    for n in [1, 4] {
        let x = r::random(&mut rng, &[n, 3], -1.0, 1.0);
        let rows: Vec<usize> = [0].into_iter().chain(0..n).chain([n - 1; 2]).collect();
        let want = r::take(&r::take(&x, 0, &rows), 1, &[0, 1, 2, 2]);
        assert_close(&run(&m, &[x.f32_tensor()])[0], &want, 0.0, 0.0, "edge pad");
    }
}

#[test]
fn expand_tile_shape_size_range_constant_of_shape_cast() {
    let mut rng = r::rng(13);
    let x = r::random(&mut rng, &[3, 1], -1.0, 1.0);
    let nodes = vec![
        node("Expand", &["x", "es"], &["e"], vec![]),
        node("Tile", &["x", "reps"], &["t"], vec![]),
        node("Shape", &["e"], &["s"], vec![a_int("start", 1)]),
        node("Size", &["t"], &["n"], vec![]),
        node(
            "ConstantOfShape",
            &["s"],
            &["c"],
            vec![a_tensor("value", tf32("", &[1], &[2.5]))],
        ),
        node("Range", &["r0", "n", "r2"], &["rg"], vec![]),
        node(
            "Cast",
            &["rg"],
            &["rgf"],
            vec![a_int("to", data_type::FLOAT as i64)],
        ),
        node("Dropout", &["rgf"], &["d"], vec![a_float("ratio", 0.5)]),
    ];
    let inits = vec![
        ints("es", &[2, 3, 4]),
        ints("reps", &[2, 3]),
        ti64("r0", &[], &[1]),
        ti64("r2", &[], &[4]),
    ];
    let outs = vec![
        vf("e", &[]),
        vf("t", &[]),
        vi("s", data_type::INT64, &[]),
        vi("n", data_type::INT64, &[]),
        vf("c", &[]),
        vf("d", &[]),
    ];
    let m = model(15, graph(nodes, vec![vf("x", &["3", "1"])], outs, inits));
    let out = run(&m, &[x.f32_tensor()]);
    let want_e = Arr::new(&[2, 3, 4], (0..24).map(|i| x.data[(i / 4) % 3]).collect());
    assert_close(&out[0], &want_e, 0.0, 0.0, "expand");
    let want_t = Arr::new(&[6, 3], (0..18).map(|i| x.data[(i / 3) % 3]).collect());
    assert_close(&out[1], &want_t, 0.0, 0.0, "tile");
    assert_close(
        &out[2],
        &Arr::new(&[2], vec![3.0, 4.0]),
        0.0,
        0.0,
        "shape start=1",
    );
    assert_close(&out[3], &Arr::new(&[], vec![18.0]), 0.0, 0.0, "size");
    assert_close(
        &out[4],
        &Arr::new(&[3, 4], vec![2.5; 12]),
        0.0,
        0.0,
        "constant_of_shape",
    );
    assert_close(
        &out[5],
        &Arr::new(&[5], vec![1.0, 5.0, 9.0, 13.0, 17.0]),
        0.0,
        0.0,
        "range+cast+dropout",
    );
}

#[test]
fn if_and_loop_run() {
    // y = cond ? x * w : -x  (w a captured initializer, x a captured input)
    let n = if_one_node("c", "y", ("Mul", &["x", "w"]), ("Neg", &["x"]));
    let m = model(
        13,
        graph(
            vec![n],
            vec![vi("c", data_type::BOOL, &[]), vf("x", &["b", "2"])],
            vec![vf("y", &[])],
            vec![tf32("w", &[2], &[2.0, 3.0])],
        ),
    );
    let x = Arr::new(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    let yes = run(&m, &[Tensor::scalar(true), x.f32_tensor()]);
    assert_close(
        &yes[0],
        &Arr::new(&[2, 2], vec![2.0, 6.0, 6.0, 12.0]),
        0.0,
        0.0,
        "if then",
    );
    let no = run(&m, &[Tensor::scalar(false), x.f32_tensor()]);
    assert_close(&no[0], &x.map(|v| -v), 0.0, 0.0, "if else");

    // acc_{i+1} = acc_i + x * i, scan out acc; 4 iterations.
    let body = graph(
        vec![
            node(
                "Cast",
                &["i"],
                &["fi"],
                vec![a_int("to", data_type::FLOAT as i64)],
            ),
            node("Mul", &["x", "fi"], &["xi"], vec![]),
            node("Add", &["acc_in", "xi"], &["acc_out"], vec![]),
            node("Identity", &["c_in"], &["c_out"], vec![]),
            node("Identity", &["acc_out"], &["scan"], vec![]),
        ],
        vec![
            vi("i", data_type::INT64, &[]),
            vi("c_in", data_type::BOOL, &[]),
            vf("acc_in", &[]),
        ],
        vec![
            vi("c_out", data_type::BOOL, &[]),
            vf("acc_out", &[]),
            vf("scan", &[]),
        ],
        vec![],
    );
    let n = node(
        "Loop",
        &["m", "", "acc0"],
        &["acc", "scans"],
        vec![a_graph("body", body)],
    );
    let m = model(
        13,
        graph(
            vec![n],
            vec![vf("x", &["2"]), vf("acc0", &["2"])],
            vec![vf("acc", &[]), vf("scans", &[])],
            vec![ti64("m", &[], &[4])],
        ),
    );
    let out = run(
        &m,
        &[
            Tensor::from_vec(vec![1f32, 10.0], &[2]).unwrap(),
            Tensor::from_vec(vec![0f32, 0.0], &[2]).unwrap(),
        ],
    );
    assert_close(
        &out[0],
        &Arr::new(&[2], vec![6.0, 60.0]),
        0.0,
        0.0,
        "loop carried",
    );
    assert_close(
        &out[1],
        &Arr::new(&[4, 2], vec![0.0, 0.0, 1.0, 10.0, 3.0, 30.0, 6.0, 60.0]),
        0.0,
        0.0,
        "loop scan",
    );
}

#[test]
fn conv_variants() {
    let mut rng = r::rng(14);
    let x = r::random(&mut rng, &[2, 4, 7, 6], -1.0, 1.0);
    let w = r::random(&mut rng, &[6, 2, 3, 3], -1.0, 1.0);
    let b = r::random(&mut rng, &[6], -1.0, 1.0);
    let inits = |with_bias: bool| {
        let mut v = vec![tf32("w", &[6, 2, 3, 3], &f32s(&w))];
        if with_bias {
            v.push(tf32("b", &[6], &f32s(&b)));
        }
        v
    };
    let dims: &[&[&str]] = &[&["n", "4", "7", "6"]];
    let attrs = vec![
        a_int("group", 2),
        a_ints("strides", &[2, 1]),
        a_ints("pads", &[1, 0, 2, 1]),
        a_ints("dilations", &[1, 2]),
    ];
    let m = single(13, "Conv", dims, attrs, inits(true));
    let want = r::conv2d(&x, &w, Some(&b), [2, 1], [1, 0, 2, 1], [1, 2], 2);
    assert_close(
        &run(&m, &[x.f32_tensor()])[0],
        &want,
        TOL.0,
        TOL.1,
        "conv groups/strides/pads/dilations",
    );
    // SAME_LOWER with stride 2 on 7x6: total pads 2 and 1, the odd one at the start.
    let m = single(
        13,
        "Conv",
        dims,
        vec![
            a_int("group", 2),
            a_str("auto_pad", "SAME_LOWER"),
            a_ints("strides", &[2, 2]),
        ],
        inits(false),
    );
    let want = r::conv2d(&x, &w, None, [2, 2], [1, 1, 1, 0], [1, 1], 2);
    assert_close(
        &run(&m, &[x.f32_tensor()])[0],
        &want,
        TOL.0,
        TOL.1,
        "conv SAME_LOWER",
    );
    // 1-D conv: [N, C, W] runs as 2-D over a unit H.
    let x1 = r::random(&mut rng, &[2, 2, 9], -1.0, 1.0);
    let w1 = r::random(&mut rng, &[3, 2, 4], -1.0, 1.0);
    let m = single(
        13,
        "Conv",
        &[&["n", "2", "9"]],
        vec![a_ints("pads", &[2, 1]), a_ints("strides", &[2])],
        vec![tf32("w", &[3, 2, 4], &f32s(&w1))],
    );
    let want = r::conv2d(
        &x1.reshape(&[2, 2, 1, 9]),
        &w1.reshape(&[3, 2, 1, 4]),
        None,
        [1, 2],
        [0, 2, 0, 1],
        [1, 1],
        1,
    );
    assert_close(
        &run(&m, &[x1.f32_tensor()])[0],
        &want.reshape(&[2, 3, want.shape[3]]),
        TOL.0,
        TOL.1,
        "conv1d",
    );
}

#[test]
fn conv_transpose_variants() {
    let mut rng = r::rng(15);
    let x = r::random(&mut rng, &[2, 4, 5, 4], -1.0, 1.0);
    let w = r::random(&mut rng, &[4, 3, 3, 2], -1.0, 1.0);
    let b = r::random(&mut rng, &[6], -1.0, 1.0);
    let inits = |with_bias: bool| {
        let mut v = vec![tf32("w", &[4, 3, 3, 2], &f32s(&w))];
        if with_bias {
            v.push(tf32("b", &[6], &f32s(&b)));
        }
        v
    };
    let dims: &[&[&str]] = &[&["n", "4", "5", "4"]];
    let convt = |attrs, with_bias| single(13, "ConvTranspose", dims, attrs, inits(with_bias));
    let check = |m: &ModelProto, want: &Arr, what: &str| {
        assert_close(&run(m, &[x.f32_tensor()])[0], want, TOL.0, TOL.1, what);
    };
    let m = convt(
        vec![
            a_int("group", 2),
            a_ints("strides", &[2, 3]),
            a_ints("pads", &[1, 0, 0, 2]),
            a_ints("dilations", &[1, 2]),
            a_ints("output_padding", &[1, 2]),
        ],
        true,
    );
    let want = r::conv_transpose2d(&x, &w, Some(&b), [2, 3], [1, 0, 0, 2], [1, 2], [1, 2], 2);
    check(
        &m,
        &want,
        "conv_transpose groups/strides/pads/dilations/output_padding",
    );
    // output_shape [9, 7] at stride 2: full 2·4+3 = 11 and 2·3+2 = 8, so pads
    // totals 2 and 1 with the larger half at the start (no SAME_UPPER).
    let m = convt(
        vec![
            a_int("group", 2),
            a_ints("strides", &[2, 2]),
            a_ints("output_shape", &[9, 7]),
        ],
        false,
    );
    let want = r::conv_transpose2d(&x, &w, None, [2, 2], [1, 1, 1, 0], [1, 1], [0, 0], 2);
    assert_eq!(want.shape, [2, 6, 9, 7]);
    check(&m, &want, "conv_transpose output_shape");
    // SAME_UPPER at stride 2 keeps in·2 = [10, 8]: totals 1 and 0, the odd one at the end.
    let m = convt(
        vec![
            a_int("group", 2),
            a_str("auto_pad", "SAME_UPPER"),
            a_ints("strides", &[2, 2]),
        ],
        true,
    );
    let want = r::conv_transpose2d(&x, &w, Some(&b), [2, 2], [0, 0, 1, 0], [1, 1], [0, 0], 2);
    assert_eq!(want.shape, [2, 6, 10, 8]);
    check(&m, &want, "conv_transpose SAME_UPPER");
    // 1-D: [N, C, W] runs as 2-D over a unit H.
    let x1 = r::random(&mut rng, &[2, 2, 6], -1.0, 1.0);
    let w1 = r::random(&mut rng, &[2, 3, 4], -1.0, 1.0);
    let m = single(
        13,
        "ConvTranspose",
        &[&["n", "2", "6"]],
        vec![a_ints("pads", &[2, 1]), a_ints("strides", &[3])],
        vec![tf32("w", &[2, 3, 4], &f32s(&w1))],
    );
    let want = r::conv_transpose2d(
        &x1.reshape(&[2, 2, 1, 6]),
        &w1.reshape(&[2, 3, 1, 4]),
        None,
        [1, 3],
        [0, 2, 0, 1],
        [1, 1],
        [0, 0],
        1,
    );
    assert_close(
        &run(&m, &[x1.f32_tensor()])[0],
        &want.reshape(&[2, 3, want.shape[3]]),
        TOL.0,
        TOL.1,
        "conv_transpose1d",
    );
    // output_padding must stay below its stride or dilation
    let bad = convt(vec![a_ints("output_padding", &[1, 0])], false);
    let e = import(&bad).unwrap_err().to_string();
    assert!(e.contains("output_padding"), "{e}");
}

#[test]
fn pool_variants() {
    let mut rng = r::rng(15);
    let x = r::random(&mut rng, &[2, 3, 7, 7], -1.0, 1.0);
    let dims: &[&[&str]] = &[&["n", "3", "7", "7"]];
    let geo = |extra: Vec<shapejit_onnx::proto::AttributeProto>| {
        let mut v = vec![
            a_ints("kernel_shape", &[3, 2]),
            a_ints("strides", &[2, 2]),
            a_ints("pads", &[1, 0, 1, 0]),
        ];
        v.extend(extra);
        v
    };
    for ceil in [false, true] {
        let m = single(
            13,
            "MaxPool",
            dims,
            geo(vec![a_int("ceil_mode", ceil as i64)]),
            vec![],
        );
        let want = r::pool2d(&x, [3, 2], [2, 2], [1, 0, 1, 0], ceil, true, false);
        assert_close(
            &run(&m, &[x.f32_tensor()])[0],
            &want,
            0.0,
            0.0,
            &format!("maxpool ceil={ceil}"),
        );
        for include in [false, true] {
            let m = single(
                13,
                "AveragePool",
                dims,
                geo(vec![
                    a_int("ceil_mode", ceil as i64),
                    a_int("count_include_pad", include as i64),
                ]),
                vec![],
            );
            let want = r::pool2d(&x, [3, 2], [2, 2], [1, 0, 1, 0], ceil, false, include);
            assert_close(
                &run(&m, &[x.f32_tensor()])[0],
                &want,
                TOL.0,
                TOL.1,
                &format!("avgpool ceil={ceil} include={include}"),
            );
        }
    }
    let m = single(13, "GlobalAveragePool", dims, vec![], vec![]);
    assert_close(
        &run(&m, &[x.f32_tensor()])[0],
        &r::mean(&x, &[2, 3], true),
        TOL.0,
        TOL.1,
        "global avg",
    );
    let m = single(13, "GlobalMaxPool", dims, vec![], vec![]);
    let want = r::reduce(&x, &[2, 3], true, f64::NEG_INFINITY, f64::max);
    assert_close(
        &run(&m, &[x.f32_tensor()])[0],
        &want,
        0.0,
        0.0,
        "global max",
    );
}

#[test]
fn outputs_that_alias_inputs_initializers_or_each_other() {
    let nodes = vec![
        node("Identity", &["x"], &["y"], vec![]),
        node("Dropout", &["x"], &["z", "mask"], vec![]),
        node("Identity", &["w"], &["wc"], vec![]),
    ];
    let outs = vec![
        vf("y", &[]),
        vf("z", &[]),
        vi("mask", data_type::BOOL, &[]),
        vf("w", &[]),
        vf("wc", &[]),
    ];
    let m = model(
        13,
        graph(
            nodes,
            vec![vf("x", &["b", "2"])],
            outs,
            vec![tf32("w", &[2], &[7.0, 8.0])],
        ),
    );
    let g = import(&m).unwrap();
    let names: Vec<&str> = g
        .outputs
        .iter()
        .map(|&o| g.value(o).name.as_str())
        .collect();
    assert_eq!(names, ["y", "z", "mask", "w", "wc"]);
    let x = Arr::new(&[3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = run(&m, &[x.f32_tensor()]);
    assert_close(&out[0], &x, 0.0, 0.0, "identity");
    assert_close(&out[1], &x, 0.0, 0.0, "dropout");
    assert_close(&out[2], &x.map(|_| 1.0), 0.0, 0.0, "dropout mask");
    assert_close(
        &out[3],
        &Arr::new(&[2], vec![7.0, 8.0]),
        0.0,
        0.0,
        "initializer output",
    );
    assert_close(
        &out[4],
        &Arr::new(&[2], vec![7.0, 8.0]),
        0.0,
        0.0,
        "identity of initializer",
    );
}

#[test]
fn nested_if_inside_loop_captures_through_two_levels() {
    // acc += (i is even) ? x : -x for i in 0..3; x is read two scopes down.
    // Parity as 2 * (i / 2) == i (integer division).
    let body = graph(
        vec![
            node("Div", &["i", "two"], &["half"], vec![]),
            node("Mul", &["half", "two"], &["dbl"], vec![]),
            node("Equal", &["dbl", "i"], &["even"], vec![]),
            node("Identity", &["c_in"], &["c_out"], vec![]),
            if_one_node(
                "even",
                "acc_out",
                ("Add", &["acc_in", "x"]),
                ("Sub", &["acc_in", "x"]),
            ),
        ],
        vec![
            vi("i", data_type::INT64, &[]),
            vi("c_in", data_type::BOOL, &[]),
            vf("acc_in", &[]),
        ],
        vec![vi("c_out", data_type::BOOL, &[]), vf("acc_out", &[])],
        vec![ti64("two", &[], &[2])],
    );
    let n = node(
        "Loop",
        &["m", "", "acc0"],
        &["acc"],
        vec![a_graph("body", body)],
    );
    let m = model(
        13,
        graph(
            vec![n],
            vec![vf("x", &["2"]), vf("acc0", &["2"])],
            vec![vf("acc", &[])],
            vec![ti64("m", &[], &[3])],
        ),
    );
    let out = run(
        &m,
        &[
            Tensor::from_vec(vec![1f32, 10.0], &[2]).unwrap(),
            Tensor::from_vec(vec![0f32, 0.0], &[2]).unwrap(),
        ],
    );
    // i = 0: +x, 1: -x, 2: +x → x.
    assert_close(
        &out[0],
        &Arr::new(&[2], vec![1.0, 10.0]),
        0.0,
        0.0,
        "nested if in loop",
    );
}
