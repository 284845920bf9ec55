//! The built-in models against independent float64 references.
//!
//! The references are plain loops written here; they read the weights out of the
//! graph's constant nodes by name (never by running shapejit ops) and compute one
//! batch row at a time (rows are independent), so a batch-64 run is checked on a
//! few rows only and the test stays fast in debug builds.
//! Tolerance: max abs error ≤ 1e-4 × max |reference|. The MLP is also checked on the
//! JIT tier at many batch sizes, served by its family kernels.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shapejit::builtin;
use shapejit::{Graph, Op, Tensor};
use std::collections::HashMap;

/// Constant tensors of a graph by value name, as f64 with their shapes.
struct Weights(HashMap<String, (Vec<f64>, Vec<usize>)>);

impl Weights {
    fn of(graph: &Graph) -> Weights {
        let mut map = HashMap::new();
        for node in &graph.nodes {
            if let Op::Constant { value } = &node.op {
                let name = graph.value(node.outputs[0]).name.clone();
                map.insert(name, (value.to_f64_vec(), value.shape().to_vec()));
            }
        }
        Weights(map)
    }

    /// The weight called `name`, checking its shape.
    fn get(&self, name: &str, shape: &[usize]) -> &[f64] {
        let (data, actual) = self
            .0
            .get(name)
            .unwrap_or_else(|| panic!("no constant named {name}"));
        assert_eq!(actual, shape, "shape of {name}");
        data
    }
}

/// A row-major matrix.
#[derive(Clone)]
struct Mat {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Mat {
    fn at(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.cols + c]
    }

    fn add(&self, other: &Mat) -> Mat {
        let data = self
            .data
            .iter()
            .zip(&other.data)
            .map(|(a, b)| a + b)
            .collect();
        Mat {
            rows: self.rows,
            cols: self.cols,
            data,
        }
    }

    fn map(&self, f: impl Fn(f64) -> f64) -> Mat {
        Mat {
            rows: self.rows,
            cols: self.cols,
            data: self.data.iter().map(|&v| f(v)).collect(),
        }
    }
}

/// `x @ w + b` with `w: [k, n]`.
fn linear(x: &Mat, w: &[f64], b: &[f64], n: usize) -> Mat {
    let k = x.cols;
    assert_eq!(w.len(), k * n);
    let mut data = vec![0.0; x.rows * n];
    for r in 0..x.rows {
        for c in 0..n {
            let mut acc = b[c];
            for i in 0..k {
                acc += x.at(r, i) * w[i * n + c];
            }
            data[r * n + c] = acc;
        }
    }
    Mat {
        rows: x.rows,
        cols: n,
        data,
    }
}

fn layer_norm(x: &Mat, scale: &[f64], bias: &[f64]) -> Mat {
    let mut data = Vec::with_capacity(x.data.len());
    for r in 0..x.rows {
        let row = &x.data[r * x.cols..(r + 1) * x.cols];
        let mean = row.iter().sum::<f64>() / x.cols as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / x.cols as f64;
        let inv = 1.0 / (var + builtin::LN_EPSILON as f64).sqrt();
        data.extend(
            row.iter()
                .enumerate()
                .map(|(c, v)| (v - mean) * inv * scale[c] + bias[c]),
        );
    }
    Mat {
        rows: x.rows,
        cols: x.cols,
        data,
    }
}

/// erf by its everywhere-convergent series with positive terms (no cancellation):
/// `erf x = 2/√π · e^{-x²} · Σ 2ⁿ x^{2n+1} / (1·3·…·(2n+1))`.
fn erf(x: f64) -> f64 {
    if x.abs() > 6.0 {
        return x.signum(); // erfc(6) ≈ 2e-17
    }
    let (mut term, mut sum, mut n) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs() {
        n += 1.0;
        term *= 2.0 * x * x / (2.0 * n + 1.0);
        sum += term;
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

/// One batch row of the reference transformer: `x: [SEQ, HIDDEN]`.
fn transformer_row(w: &Weights, x: Mat) -> Mat {
    use builtin::{FFN, HEADS, HIDDEN, LAYERS, SEQ};
    let head_dim = HIDDEN / HEADS;
    let lin = |x: &Mat, name: &str, k: usize, n: usize| {
        linear(
            x,
            w.get(&format!("{name}_w"), &[k, n]),
            w.get(&format!("{name}_b"), &[n]),
            n,
        )
    };
    let ln = |x: &Mat, name: &str| {
        layer_norm(
            x,
            w.get(&format!("{name}_scale"), &[HIDDEN]),
            w.get(&format!("{name}_bias"), &[HIDDEN]),
        )
    };
    let mut x = x;
    for layer in 0..LAYERS {
        let l = format!("l{layer}");
        let h = ln(&x, &format!("{l}_ln1"));
        let q = lin(&h, &format!("{l}_q"), HIDDEN, HIDDEN);
        let k = lin(&h, &format!("{l}_k"), HIDDEN, HIDDEN);
        let v = lin(&h, &format!("{l}_v"), HIDDEN, HIDDEN);
        let mut context = Mat {
            rows: SEQ,
            cols: HIDDEN,
            data: vec![0.0; SEQ * HIDDEN],
        };
        for head in 0..HEADS {
            let off = head * head_dim;
            for i in 0..SEQ {
                let scores: Vec<f64> = (0..SEQ)
                    .map(|j| {
                        (0..head_dim)
                            .map(|d| q.at(i, off + d) * k.at(j, off + d))
                            .sum::<f64>()
                            / (head_dim as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = exps.iter().sum();
                for d in 0..head_dim {
                    context.data[i * HIDDEN + off + d] =
                        (0..SEQ).map(|j| exps[j] / total * v.at(j, off + d)).sum();
                }
            }
        }
        let h = x.add(&lin(&context, &format!("{l}_o"), HIDDEN, HIDDEN));
        let f = lin(
            &ln(&h, &format!("{l}_ln2")),
            &format!("{l}_ff1"),
            HIDDEN,
            FFN,
        )
        .map(gelu);
        x = h.add(&lin(&f, &format!("{l}_ff2"), FFN, HIDDEN));
    }
    ln(&x, "ln_f")
}

/// One batch row of the reference MLP.
fn mlp_row(w: &Weights, x: Mat) -> Mat {
    let dims = builtin::MLP_DIMS;
    let mut x = x;
    for i in 0..dims.len() - 1 {
        let (k, n) = (dims[i], dims[i + 1]);
        x = linear(
            &x,
            w.get(&format!("fc{i}_w"), &[k, n]),
            w.get(&format!("fc{i}_b"), &[n]),
            n,
        );
        if i + 2 < dims.len() {
            x = x.map(|v| v.max(0.0));
        }
    }
    x
}

/// One batch row of the reference elementwise chain.
fn elementwise_row(w: &Weights, x: Mat) -> Mat {
    let n = builtin::ELEMENTWISE_WIDTH;
    let (wv, bv, c) = (w.get("w", &[n]), w.get("b", &[n]), w.get("c", &[])[0]);
    let data = (0..n)
        .map(|i| {
            let xi = x.data[i];
            let y = xi * wv[i] + bv[i];
            let v = y.tanh() * y + xi;
            v / (1.0 + (-v).exp()) - c
        })
        .collect();
    Mat {
        rows: 1,
        cols: n,
        data,
    }
}

fn random_input(shape: &[usize], seed: u64) -> Tensor {
    let mut rng = SmallRng::seed_from_u64(seed);
    let data: Vec<f32> = (0..shape.iter().product())
        .map(|_| rng.random_range(-2.0f32..2.0))
        .collect();
    Tensor::from_vec(data, shape).unwrap()
}

/// Runs `graph` on `input` through the public API.
fn run(graph: Graph, input: &Tensor) -> Tensor {
    let module = shapejit::Module::from_graph(graph, shapejit::Options::default()).unwrap();
    let mut rt = module.runtime();
    let mut outs = rt.run(std::slice::from_ref(input)).unwrap();
    assert_eq!(outs.len(), 1);
    outs.remove(0)
}

/// Checks the given batch rows of `graph`'s output against `reference` per row.
fn check(
    graph: Graph,
    row_shape: &[usize],
    batch: usize,
    rows: &[usize],
    reference: impl Fn(&Weights, Mat) -> Mat,
) {
    let weights = Weights::of(&graph);
    let shape: Vec<usize> = [batch].iter().chain(row_shape).copied().collect();
    let input = random_input(&shape, 42 + batch as u64);
    let output = run(graph, &input);
    check_rows(&weights, row_shape, &input, &output, batch, rows, reference);
}

/// Checks the given batch rows of one run's `output` against `reference` per row.
fn check_rows(
    weights: &Weights,
    row_shape: &[usize],
    input: &Tensor,
    output: &Tensor,
    batch: usize,
    rows: &[usize],
    reference: impl Fn(&Weights, Mat) -> Mat,
) {
    let x = input.to_f64_vec();
    let y = output.to_f64_vec();
    let in_row: usize = row_shape.iter().product();
    let out_row = y.len() / batch;
    assert_eq!(y.len() % batch, 0, "output shape {:?}", output.shape());
    for &r in rows {
        let (rows_of, cols) = match row_shape {
            [cols] => (1, *cols),
            [rows, cols] => (*rows, *cols),
            other => panic!("unexpected row shape {other:?}"),
        };
        let xr = Mat {
            rows: rows_of,
            cols,
            data: x[r * in_row..(r + 1) * in_row].to_vec(),
        };
        let want = reference(weights, xr);
        let got = &y[r * out_row..(r + 1) * out_row];
        assert_eq!(want.data.len(), got.len(), "row {r} size");
        let max_ref = want.data.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let max_err = want
            .data
            .iter()
            .zip(got)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            max_err <= 1e-4 * max_ref,
            "batch {batch} row {r}: max abs err {max_err:e} vs max |ref| {max_ref}"
        );
    }
}

#[test]
fn erf_reference_is_accurate() {
    // Known values of erf (Abramowitz & Stegun table 7.1).
    for (x, want) in [
        (0.0, 0.0),
        (0.5, 0.520_499_877_813_047),
        (1.0, 0.842_700_792_949_715),
        (2.0, 0.995_322_265_018_953),
        (-3.0, -0.999_977_909_503_001),
    ] {
        assert!((erf(x) - want).abs() < 1e-14, "erf({x}) = {}", erf(x));
    }
}

#[test]
fn transformer_batch_1_matches_reference() {
    check(
        builtin::transformer(),
        &[builtin::SEQ, builtin::HIDDEN],
        1,
        &[0],
        transformer_row,
    );
}

#[test]
fn transformer_batch_64_matches_reference_on_sampled_rows() {
    check(
        builtin::transformer(),
        &[builtin::SEQ, builtin::HIDDEN],
        64,
        &[0, 17, 63],
        transformer_row,
    );
}

#[test]
fn mlp_matches_reference() {
    check(builtin::mlp(), &[builtin::MLP_DIMS[0]], 1, &[0], mlp_row);
    check(
        builtin::mlp(),
        &[builtin::MLP_DIMS[0]],
        64,
        &[0, 17, 63],
        mlp_row,
    );
}

/// The MLP on the JIT tier: after three batch sizes, one family kernel per matmul
/// region (the three layers with a ReLU epilogue; the last layer, a lone
/// `matmul_bias`, is no region) serves every other batch size (the batch is the activation's dim 0, never a
/// weight's: `fc0_w` is `[512, 1024]`, so batches below 512 once made a family per
/// batch), and its outputs match the reference.
#[test]
fn mlp_family_kernels_serve_every_batch_size() {
    let graph = builtin::mlp();
    let weights = Weights::of(&graph);
    let options = shapejit::Options {
        compile: shapejit::CompileMode::Sync,
        ..shapejit::Options::default()
    };
    let module = shapejit::Module::from_graph(graph, options).unwrap();
    let mut rt = module.runtime();
    let row = [builtin::MLP_DIMS[0]];
    let matmul_slots = |stats: &shapejit::Stats| -> Vec<(u64, u64)> {
        stats
            .slots
            .iter()
            .filter(|s| s.kind == "region matmul_epilogue")
            .map(|s| (s.family_hits, s.compiles))
            .collect()
    };
    let warm_up = [2, 3, 5];
    for batch in warm_up {
        rt.run(&[random_input(&[batch, row[0]], batch as u64)])
            .unwrap();
    }
    let warm = matmul_slots(&module.stats());
    assert_eq!(warm.len(), builtin::MLP_DIMS.len() - 2, "{warm:?}");
    let batches: Vec<usize> = (1..=40).filter(|b| !warm_up.contains(b)).collect();
    for &batch in &batches {
        let input = random_input(&[batch, row[0]], 100 + batch as u64);
        let output = rt.run(std::slice::from_ref(&input)).unwrap().remove(0);
        check_rows(
            &weights,
            &row,
            &input,
            &output,
            batch,
            &[0, batch - 1],
            mlp_row,
        );
    }
    let after = matmul_slots(&module.stats());
    for (slot, ((hits0, compiles0), (hits, compiles))) in warm.iter().zip(&after).enumerate() {
        assert_eq!(
            hits - hits0,
            batches.len() as u64,
            "matmul region {slot}: every new batch size is a family hit"
        );
        assert_eq!(
            compiles, compiles0,
            "matmul region {slot}: no compile after warm-up"
        );
    }
}

#[test]
fn elementwise_matches_reference() {
    check(
        builtin::elementwise(),
        &[builtin::ELEMENTWISE_WIDTH],
        16,
        &[0, 5, 15],
        elementwise_row,
    );
}

#[test]
fn builtins_are_deterministic_and_named() {
    for name in builtin::NAMES {
        let a = builtin::by_name(name).unwrap();
        assert_eq!(
            Some(a),
            builtin::by_name(name),
            "{name} is not deterministic"
        );
    }
    assert!(builtin::by_name("nope").is_none());
    let g = builtin::transformer();
    let x = g.value(g.inputs[0]);
    assert_eq!(
        (x.name.as_str(), x.ty.to_string().as_str()),
        ("x", "f32[batch, 32, 256]")
    );
    let y = g.value(g.outputs[0]);
    assert_eq!(
        (y.name.as_str(), y.ty.to_string().as_str()),
        ("y", "f32[batch, 32, 256]")
    );
}

#[test]
fn weights_are_scaled_like_a_real_init() {
    // N(0, 1/fan_in): the root mean square of a linear weight is 1/sqrt(fan_in).
    let weights = Weights::of(&builtin::transformer());
    for (name, fan_in, fan_out) in [
        ("l0_q_w", 256, 256),
        ("l5_ff1_w", 256, 1024),
        ("l3_ff2_w", 1024, 256),
    ] {
        let w = weights.get(name, &[fan_in, fan_out]);
        let rms = (w.iter().map(|v| v * v).sum::<f64>() / w.len() as f64).sqrt();
        let mean = w.iter().sum::<f64>() / w.len() as f64;
        assert!(
            (rms * (fan_in as f64).sqrt() - 1.0).abs() < 0.02,
            "{name}: rms {rms}"
        );
        assert!(
            mean.abs() < 0.1 / (fan_in as f64).sqrt(),
            "{name}: mean {mean}"
        );
    }
    assert_ne!(
        weights.get("l0_q_w", &[256, 256]),
        weights.get("l0_k_w", &[256, 256])
    );
}
