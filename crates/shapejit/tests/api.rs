//! End-to-end tests of the embedding API on small builder graphs, against
//! naive f64 references written here.

use shapejit::{DType, Error, Graph, GraphBuilder, InputError, Module, Options, Tensor, shape};

fn tensor(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    // a small deterministic pattern in [-1, 1)
    let data = (0..n)
        .map(|i| ((i as u64 * 7919 + seed * 104729) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    Tensor::from_vec(data, shape).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec()
}

fn assert_close(actual: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len());
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= tol * (1.0 + e.abs()),
            "element {i}: {a} vs {e}"
        );
    }
}

/// `relu(x @ w + b) * 2 - x[..., :3]`-free MLP layer: `y = relu(x @ w + b)`, `x: [batch, 4]`, `w: [4, 3]`.
fn linear_relu() -> (Graph, Tensor, Tensor) {
    let w = tensor(&[4, 3], 1);
    let bias = tensor(&[3], 2);
    let mut b = GraphBuilder::new("linear_relu");
    let x = b.input("x", DType::F32, shape!["batch", 4]);
    let wv = b.constant("w", w.clone());
    let bv = b.constant("b", bias.clone());
    let h = b.matmul(x, wv).unwrap();
    let h = b.add(h, bv).unwrap();
    let y = b.relu(h).unwrap();
    b.output("y", y).unwrap();
    (b.finish().unwrap(), w, bias)
}

fn linear_relu_ref(x: &Tensor, w: &Tensor, bias: &Tensor) -> Vec<f64> {
    let (xv, wv, bv) = (values(x), values(w), values(bias));
    let batch = x.shape()[0];
    let mut out = vec![0.0; batch * 3];
    for i in 0..batch {
        for j in 0..3 {
            let mut acc = bv[j];
            for k in 0..4 {
                acc += xv[i * 4 + k] * wv[k * 3 + j];
            }
            out[i * 3 + j] = acc.max(0.0);
        }
    }
    out
}

#[test]
fn linear_relu_matches_reference_for_any_batch() {
    let (g, w, bias) = linear_relu();
    let module = Module::from_graph(g, Options::default()).unwrap();
    let mut rt = module.runtime();
    for batch in [1, 5, 2, 64, 0, 5] {
        let x = tensor(&[batch, 4], batch as u64);
        let out = rt.run(std::slice::from_ref(&x)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].shape(), &[batch, 3]);
        assert_close(&values(&out[0]), &linear_relu_ref(&x, &w, &bias), 1e-5);
    }
}

#[test]
fn views_and_strided_outputs_are_right() {
    // y = reshape(transpose(x, [0, 2, 1]), [batch, 6]); t = transpose(x) returned as is.
    let mut b = GraphBuilder::new("views");
    let x = b.input("x", DType::F32, shape!["batch", 2, 3]);
    let t = b.transpose(x, &[0, 2, 1]).unwrap();
    let y = b.reshape(t, &[0, 6]).unwrap();
    let z = b.exp(t).unwrap();
    b.output("t", t).unwrap();
    b.output("y", y).unwrap();
    b.output("z", z).unwrap();
    let module = Module::from_graph(b.finish().unwrap(), Options::default()).unwrap();
    let mut rt = module.runtime();
    for batch in [3, 1] {
        let x = tensor(&[batch, 2, 3], 9);
        let xv = values(&x);
        let out = rt.run(std::slice::from_ref(&x)).unwrap();
        let mut expected = Vec::new();
        for n in 0..batch {
            for j in 0..3 {
                for i in 0..2 {
                    expected.push(xv[n * 6 + i * 3 + j]);
                }
            }
        }
        assert_eq!(out[0].shape(), &[batch, 3, 2]);
        assert_eq!(values(&out[0]), expected);
        assert_eq!(out[1].shape(), &[batch, 6]);
        assert_eq!(values(&out[1]), expected);
        let exp: Vec<f64> = expected.iter().map(|v| v.exp()).collect();
        assert_close(&values(&out[2]), &exp, 1e-6);
    }
}

#[test]
fn softmax_rows_match_reference() {
    let mut b = GraphBuilder::new("softmax");
    let x = b.input("x", DType::F32, shape!["batch", 5]);
    let two = b.const_f32(2.0).unwrap();
    let s = b.mul(x, two).unwrap();
    let y = b.softmax(s, -1).unwrap();
    b.output("y", y).unwrap();
    let module = Module::from_graph(b.finish().unwrap(), Options::default()).unwrap();
    let x = tensor(&[3, 5], 4);
    let out = module.runtime().run(std::slice::from_ref(&x)).unwrap();
    let xv = values(&x);
    let mut expected = Vec::new();
    for row in xv.chunks(5) {
        let m = row.iter().fold(f64::MIN, |a, &v| a.max(2.0 * v));
        let e: Vec<f64> = row.iter().map(|&v| (2.0 * v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        expected.extend(e.iter().map(|v| v / s));
    }
    assert_close(&values(&out[0]), &expected, 1e-6);
}

fn if_model() -> Module {
    let branch = |name: &str, neg: bool| {
        let mut b = GraphBuilder::new(name);
        let x = b.input("x", DType::F32, shape!["n"]);
        let y = if neg {
            b.neg(x).unwrap()
        } else {
            b.exp(x).unwrap()
        };
        b.output("out", y).unwrap();
        b.finish().unwrap()
    };
    let mut b = GraphBuilder::new("if");
    let c = b.input("c", DType::Bool, shape![]);
    let x = b.input("x", DType::F32, shape!["n"]);
    let outs = b
        .if_(c, branch("then", true), branch("else", false), &[x])
        .unwrap();
    let two = b.const_f32(2.0).unwrap();
    let y = b.mul(outs[0], two).unwrap();
    b.output("y", y).unwrap();
    Module::from_graph(b.finish().unwrap(), Options::default()).unwrap()
}

#[test]
fn if_runs_the_chosen_branch() {
    let module = if_model();
    let mut rt = module.runtime();
    let x = tensor(&[6], 3);
    let xv = values(&x);
    for cond in [true, false, true] {
        let out = rt.run(&[Tensor::scalar(cond), x.clone()]).unwrap();
        let expected: Vec<f64> = xv
            .iter()
            .map(|&v| 2.0 * if cond { -v } else { v.exp() })
            .collect();
        assert_close(&values(&out[0]), &expected, 1e-6);
    }
}

/// acc_{i+1} = acc_i * 0.5 + x, while iter < stop; scan output: acc after each step.
fn loop_model() -> Module {
    let mut body = GraphBuilder::new("body");
    let iter = body.input("iter", DType::I64, shape![]);
    let _cond = body.input("cond", DType::Bool, shape![]);
    let acc = body.input("acc", DType::F32, shape!["n"]);
    let x = body.input("x", DType::F32, shape!["n"]);
    let stop = body.input("stop", DType::I64, shape![]);
    let half = body.const_f32(0.5).unwrap();
    let one = body.constant("one", Tensor::scalar(1i64));
    let next = body.mul(acc, half).unwrap();
    let next = body.add(next, x).unwrap();
    let iter1 = body.add(iter, one).unwrap();
    let keep = body.lt(iter1, stop).unwrap();
    body.output("cond_out", keep).unwrap();
    body.output("acc_out", next).unwrap();
    body.output("scan", next).unwrap();
    let body = body.finish().unwrap();

    let mut b = GraphBuilder::new("loop");
    let max_trip = b.input("max_trip", DType::I64, shape![]);
    let stop = b.input("stop", DType::I64, shape![]);
    let x = b.input("x", DType::F32, shape!["n"]);
    let t = b.constant("t", Tensor::scalar(true));
    let zero = b.const_f32(0.0).unwrap();
    let acc0 = b.mul(x, zero).unwrap();
    let outs = b.loop_(max_trip, t, &[acc0], &[x, stop], body).unwrap();
    b.output("acc", outs[0]).unwrap();
    b.output("steps", outs[1]).unwrap();
    Module::from_graph(b.finish().unwrap(), Options::default()).unwrap()
}

#[test]
fn loop_carries_values_and_stacks_scan_outputs() {
    let module = loop_model();
    let mut rt = module.runtime();
    let x = tensor(&[4], 8);
    let xv = values(&x);
    // (max_trip, stop): trips = min(max_trip, stop) (the body stops the loop after `stop` steps)
    for (max_trip, stop) in [(5i64, 100i64), (10, 3), (1, 1), (0, 100), (5, 100)] {
        let trips = max_trip.min(stop) as usize;
        let out = rt
            .run(&[Tensor::scalar(max_trip), Tensor::scalar(stop), x.clone()])
            .unwrap();
        let mut acc = vec![0.0f64; 4];
        let mut rows = Vec::new();
        for _ in 0..trips {
            acc = acc.iter().zip(&xv).map(|(a, x)| a * 0.5 + x).collect();
            rows.extend_from_slice(&acc);
        }
        assert_close(&values(&out[0]), &acc, 1e-6);
        assert_eq!(out[1].shape(), &[trips, 4]);
        assert_close(&values(&out[1]), &rows, 1e-6);
    }
}

fn two_input_model() -> Module {
    let mut b = GraphBuilder::new("two");
    let x = b.input("x", DType::F32, shape!["batch", 3, 256]);
    let y = b.input("y", DType::F32, shape!["batch", 256]);
    let y3 = b.unsqueeze(y, &[1]).unwrap();
    let z = b.add(x, y3).unwrap();
    b.output("z", z).unwrap();
    Module::from_graph(b.finish().unwrap(), Options::default()).unwrap()
}

#[test]
fn input_errors_name_the_input_with_expected_and_actual() {
    let module = two_input_model();
    let mut rt = module.runtime();
    let y = Tensor::zeros(DType::F32, &[2, 256]).unwrap();
    let err = |inputs: &[Tensor]| -> Error { module.runtime().run(inputs).unwrap_err() };

    let e = err(&[Tensor::zeros(DType::F32, &[2, 3, 128]).unwrap(), y.clone()]);
    assert!(
        matches!(&e, Error::Input(InputError::Dim { input, dim: 2, expected: 256, actual: 128 }) if input == "x")
    );
    assert_eq!(e.to_string(), "input 'x': dim 2 expected 256, got 128");

    let e = err(&[Tensor::zeros(DType::F32, &[2, 3]).unwrap(), y.clone()]);
    assert!(
        matches!(&e, Error::Input(InputError::Rank { input, expected: 3, actual: 2, .. }) if input == "x"),
        "{e}"
    );

    let e = err(&[Tensor::zeros(DType::I64, &[2, 3, 256]).unwrap(), y.clone()]);
    assert!(
        matches!(&e, Error::Input(InputError::DType { input, expected: DType::F32, actual: DType::I64 }) if input == "x"),
        "{e}"
    );

    let e = err(&[Tensor::zeros(DType::F32, &[4, 3, 256]).unwrap(), y.clone()]);
    assert!(
        matches!(&e, Error::Input(InputError::Symbol { input, dim: 0, symbol, bound: 4, actual: 2 }) if input == "y" && symbol == "batch"),
        "{e}"
    );

    let e = err(std::slice::from_ref(&y));
    assert!(
        matches!(
            e,
            Error::Input(InputError::Count {
                expected: 2,
                actual: 1
            })
        ),
        "{e}"
    );

    // the runtime still works after errors
    let out = rt
        .run(&[Tensor::zeros(DType::F32, &[2, 3, 256]).unwrap(), y])
        .unwrap();
    assert_eq!(out[0].shape(), &[2, 3, 256]);
}

#[test]
fn load_reports_unknown_sources() {
    assert!(matches!(
        Module::load("builtin:nope", Options::default()),
        Err(Error::UnknownBuiltin { .. })
    ));
    assert!(matches!(
        Module::load("model.xyz", Options::default()),
        Err(Error::UnknownFormat { .. })
    ));
    assert!(matches!(
        Module::load("/nonexistent/m.sjir", Options::default()),
        Err(Error::Io { .. })
    ));
}

#[test]
fn sjir_files_load_and_run() {
    let (g, w, bias) = linear_relu();
    let dir = std::env::temp_dir().join(format!("shapejit-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("linear.sjir");
    std::fs::write(&path, g.to_string()).unwrap();
    let module = Module::load(path.to_str().unwrap(), Options::default()).unwrap();
    let x = tensor(&[3, 4], 5);
    let out = module.runtime().run(std::slice::from_ref(&x)).unwrap();
    assert_close(&values(&out[0]), &linear_relu_ref(&x, &w, &bias), 1e-5);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stats_count_executions_and_shape_keys() {
    let (g, _, _) = linear_relu();
    let module = Module::from_graph(g, Options::interp()).unwrap();
    let mut rt = module.runtime();
    for batch in [1, 2, 1] {
        rt.run(&[tensor(&[batch, 4], 0)]).unwrap();
    }
    let stats = module.stats();
    let matmul = stats.slots.iter().find(|s| s.kind == "op matmul").unwrap();
    assert_eq!(matmul.executions, 3);
    assert_eq!(matmul.keys.len(), 2);
    assert_eq!(matmul.keys[0].key, "f32[1, 4], f32[4, 3]");
    assert_eq!(matmul.keys[0].in_window, 2);
    let region = stats
        .slots
        .iter()
        .find(|s| s.kind == "region matmul_epilogue")
        .unwrap();
    assert_eq!(region.executions, 3);
    assert_eq!(region.kernel_hits, 0);
}

#[test]
fn from_parts_verifies_and_runs_a_stored_program() {
    let (g, w, bias) = linear_relu();
    let program = shapejit::bytecode::lower(&g).unwrap();
    let module = Module::from_parts(g.clone(), program.clone(), Options::interp()).unwrap();
    let x = tensor(&[2, 4], 6);
    let out = module.runtime().run(std::slice::from_ref(&x)).unwrap();
    assert_close(&values(&out[0]), &linear_relu_ref(&x, &w, &bias), 1e-5);
    let mut broken = program;
    broken.n_regs = 1;
    assert!(matches!(
        Module::from_parts(g, broken, Options::interp()),
        Err(Error::Verify(_))
    ));
}

/// Windows of a symbolic dim (`x[:3]`, `x[-3:]`, `x[2:]`, `x[1:4]`) return
/// ONNX's clamped lengths for every size, zero included, and each output's
/// declared dims agree with what the run returns wherever they name a size.
#[test]
fn slices_of_a_symbolic_dim_have_clamped_lengths_and_honest_types() {
    let max = i64::MAX;
    let windows: [(i64, i64); 4] = [(0, 3), (-3, max), (2, max), (1, 4)];
    let mut b = GraphBuilder::new("windows");
    let x = b.input("x", DType::F32, shape!["n", 2]);
    for (i, &(start, end)) in windows.iter().enumerate() {
        let y = b.slice(x, &[start], &[end], &[0], &[]).unwrap();
        b.output(&format!("y{i}"), y).unwrap();
    }
    let module = Module::from_graph(b.finish().unwrap(), Options::default()).unwrap();
    let mut rt = module.runtime();
    for n in 0..=6usize {
        let x = tensor(&[n, 2], n as u64);
        let out = rt.run(std::slice::from_ref(&x)).unwrap();
        let xv = values(&x);
        for (i, &(start, end)) in windows.iter().enumerate() {
            // Python's slice clamping, written independently of the importer.
            let clamp = |v: i64| {
                let v = if v < 0 { v + n as i64 } else { v };
                v.clamp(0, n as i64) as usize
            };
            let (lo, hi) = (clamp(start), clamp(end).max(clamp(start)));
            assert_eq!(out[i].shape(), &[hi - lo, 2], "y{i} at n={n}");
            assert_eq!(values(&out[i]), xv[lo * 2..hi * 2], "y{i} at n={n}");
            let declared = &module.outputs()[i].ty.shape;
            let bind = |s: &shapejit::ir::Symbol| (s.name() == "n").then_some(n as i64);
            for (axis, dim) in declared.dims().iter().enumerate() {
                if let Some(size) = dim.eval(&bind) {
                    assert_eq!(
                        size as usize,
                        out[i].shape()[axis],
                        "y{i} declared {declared} at n={n}"
                    );
                }
            }
        }
    }
}

/// A window's unknown size meets a known dim as the known one: `x[:3] + c[3, 1]`
/// is typed `[3, 4]` and returns it whenever the run succeeds (n = 1 stretches,
/// n >= 3 matches), and any other n is a shape error naming the op, not a
/// wrongly shaped result.
#[test]
fn an_unknown_window_size_meets_a_known_dim() {
    let mut b = GraphBuilder::new("meet");
    let x = b.input("x", DType::F32, shape!["n", 4]);
    let head = b.slice(x, &[0], &[3], &[0], &[]).unwrap();
    let c = b.constant("c", tensor(&[3, 1], 3));
    let sum = b.add(head, c).unwrap();
    b.output("sum", sum).unwrap();
    let module = Module::from_graph(b.finish().unwrap(), Options::default()).unwrap();
    assert_eq!(module.outputs()[0].ty.shape.to_string(), "[3, 4]");
    let mut rt = module.runtime();
    for n in 0..=5usize {
        let x = tensor(&[n, 4], n as u64);
        match (n, rt.run(std::slice::from_ref(&x))) {
            (1 | 3.., Ok(out)) => assert_eq!(out[0].shape(), &[3, 4], "n={n}"),
            (0 | 2, Err(e)) => assert!(e.to_string().contains("add"), "n={n}: {e}"),
            (n, other) => panic!("n={n}: {other:?}"),
        }
    }
}
