//! Special values — NaN, ±inf, ±0, subnormals, ±f32::MAX — through every op the JIT
//! compiles, on both tiers: the interpreter (the specification) and the JIT tier in
//! sync mode, each kernel asserted to have run. Elementwise ops see every value (every
//! pair, for binary ops) both in the vector loop and in the scalar code; row ops see
//! rows holding specials at vector and tail positions; a matmul epilogue sees them in
//! its left operand.
//!
//! What "the same" means, per result element:
//! - ops that pass an operand through (relu, leaky relu, max, min, clip, neg, abs,
//!   where over every comparison, reduce max): the same bits, NaN payload included;
//! - every other op: a NaN where the interpreter has a NaN (any payload: x86 arithmetic
//!   and libm pick different ones); the same bits when an input of the element is NaN,
//!   ±inf or ±0 or the interpreter's result is ±inf or ±0; else within a relative
//!   tolerance — 0 for IEEE arithmetic, 2e-6 (the ops' documented ulp bounds) for the
//!   transcendentals, 1e-4 for pow, softmax and matmul (summation order), one ulp for
//!   reduce sum and mean (both tiers sum in f64); layer norm within `ROW · ε` of its
//!   row's output scale (see `row_scale_tolerance`). Relative means a subnormal result
//!   gets no slack beyond its last bit or so.

use shapejit_bytecode::{Program, lower};
use shapejit_ir::{BinaryOp, DType, GraphBuilder, ReduceOp, Tensor, UnaryOp, ValueId, shape};
use shapejit_jit::jit_module;
use shapejit_vm::{CompileMode, Module, Options};

/// The special values, plus a few ordinary ones for the binary ops to meet them.
fn specials() -> Vec<f32> {
    vec![
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(1),
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::MAX,
        -f32::MAX,
        1.0,
        -1.0,
        0.5,
        -2.5,
        3.0,
        89.0,
        -104.5,
    ]
}

/// NaN, ±inf or ±0: values whose results the tiers must agree on exactly.
fn is_special(x: f32) -> bool {
    !x.is_finite() || x == 0.0
}

/// How strictly an op's results must agree (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    /// same bits, NaN payload included
    Bits,
    /// NaN class, bits on special inputs or ±inf / ±0 results, else within `rel`
    Close { rel: f32 },
    /// NaN class, bits on ±inf / ±0 results, else within `tol` absolutely (a row's
    /// tolerance, from the scale of its outputs; see [`row_scale_tolerance`])
    Abs { tol: f32 },
}

fn agree(got: f32, want: f32, inputs_special: bool, rule: Rule) -> bool {
    match rule {
        Rule::Bits => got.to_bits() == want.to_bits(),
        Rule::Close { rel } => {
            if want.is_nan() {
                got.is_nan()
            } else if inputs_special || want.is_infinite() || want == 0.0 {
                got.to_bits() == want.to_bits()
            } else {
                (got - want).abs() <= rel * want.abs()
            }
        }
        Rule::Abs { tol } => {
            if want.is_nan() {
                got.is_nan()
            } else if want.is_infinite() || want == 0.0 {
                got.to_bits() == want.to_bits()
            } else {
                (got - want).abs() <= tol
            }
        }
    }
}

fn kernel_hits(module: &Module) -> u64 {
    module.stats().slots.iter().map(|s| s.kernel_hits).sum()
}

/// The interpreter and a sync-mode JIT module (every key compiled on first sight).
fn tiers(program: Program) -> (Module, Module) {
    let interp = Module::new(program.clone(), Options::interp()).unwrap();
    let options = Options {
        compile: CompileMode::Sync,
        promote_threshold: 1,
        families: false,
        ..Options::default()
    };
    let (jit, handle) = jit_module(program, options).unwrap();
    assert!(handle.is_some(), "this host has AVX+FMA");
    (interp, jit)
}

/// Runs `inputs` on both tiers (the JIT twice: the first run compiles) and checks the
/// kernel ran; returns (interp, jit) outputs.
fn run_both(interp: &Module, jit: &Module, inputs: &[Tensor], what: &str) -> (Vec<f32>, Vec<f32>) {
    let want = interp.runtime().run(inputs).unwrap();
    let mut rt = jit.runtime();
    rt.run(inputs).unwrap();
    let before = kernel_hits(jit);
    let got = rt.run(inputs).unwrap();
    assert!(kernel_hits(jit) > before, "{what}: no compiled kernel ran");
    let flat = |t: &Vec<Tensor>| t[0].as_slice::<f32>().unwrap().to_vec();
    (flat(&want), flat(&got))
}

fn check(what: &str, want: &[f32], got: &[f32], special: &dyn Fn(usize) -> bool, rule: Rule) {
    assert_eq!(want.len(), got.len(), "{what}");
    let bad: Vec<String> = (0..want.len())
        .filter(|&i| !agree(got[i], want[i], special(i), rule))
        .take(8)
        .map(|i| {
            format!(
                "[{i}] jit {:e} ({:#x}) interp {:e} ({:#x})",
                got[i],
                got[i].to_bits(),
                want[i],
                want[i].to_bits()
            )
        })
        .collect();
    assert!(bad.is_empty(), "{what}: {}", bad.join("; "));
}

/// Builds one value from another (an op under test, applied in a graph).
type ApplyOp = dyn Fn(&mut GraphBuilder, ValueId) -> ValueId;

fn unary_program(op: UnaryOp) -> Program {
    let mut b = GraphBuilder::new("u");
    let x = b.input("x", DType::F32, shape!["n"]);
    let y = b.unary(op, x).unwrap();
    b.output("y", y).unwrap();
    lower(&b.finish().unwrap()).unwrap()
}

/// `f(x, y)` over two `[n]` inputs.
fn binary_program(f: &dyn Fn(&mut GraphBuilder, ValueId, ValueId) -> ValueId) -> Program {
    let mut b = GraphBuilder::new("b");
    let x = b.input("x", DType::F32, shape!["n"]);
    let y = b.input("y", DType::F32, shape!["n"]);
    let z = f(&mut b, x, y);
    b.output("z", z).unwrap();
    lower(&b.finish().unwrap()).unwrap()
}

fn vec_tensor(v: Vec<f32>) -> Tensor {
    let n = v.len();
    Tensor::from_vec(v, &[n]).unwrap()
}

/// Every value in the vector loop (all of them at once) and in scalar code (three at a
/// time: a length-3 key has no vector iteration).
fn check_unary(name: &str, op: UnaryOp, rule: Rule) {
    let (interp, jit) = tiers(unary_program(op));
    let s = specials();
    // four copies shifted by one lane each: every value at every lane position
    let mut long = Vec::new();
    for shift in 0..4 {
        long.extend(std::iter::repeat_n(1.0, shift));
        long.extend(&s);
    }
    let (want, got) = run_both(&interp, &jit, &[vec_tensor(long.clone())], name);
    check(
        &format!("{name} (vector)"),
        &want,
        &got,
        &|i| is_special(long[i]),
        rule,
    );
    for chunk in s.chunks(3) {
        let mut x = chunk.to_vec();
        x.resize(3, 1.0);
        let (want, got) = run_both(&interp, &jit, &[vec_tensor(x.clone())], name);
        check(
            &format!("{name} (scalar) on {x:?}"),
            &want,
            &got,
            &|i| is_special(x[i]),
            rule,
        );
    }
}

fn check_binary(
    name: &str,
    f: &dyn Fn(&mut GraphBuilder, ValueId, ValueId) -> ValueId,
    rule: Rule,
) {
    let (interp, jit) = tiers(binary_program(f));
    let s = specials();
    let (xs, ys): (Vec<f32>, Vec<f32>) = s
        .iter()
        .flat_map(|&a| s.iter().map(move |&b| (a, b)))
        .unzip();
    let special = |xs: &[f32], ys: &[f32], i: usize| is_special(xs[i]) || is_special(ys[i]);
    let inputs = [vec_tensor(xs.clone()), vec_tensor(ys.clone())];
    let (want, got) = run_both(&interp, &jit, &inputs, name);
    check(
        &format!("{name} (vector)"),
        &want,
        &got,
        &|i| special(&xs, &ys, i),
        rule,
    );
    for (cx, cy) in xs.chunks(3).zip(ys.chunks(3)).filter(|(c, _)| c.len() == 3) {
        let inputs = [vec_tensor(cx.to_vec()), vec_tensor(cy.to_vec())];
        let (want, got) = run_both(&interp, &jit, &inputs, name);
        check(
            &format!("{name} (scalar) on {cx:?} {cy:?}"),
            &want,
            &got,
            &|i| special(cx, cy, i),
            rule,
        );
    }
}

const TRANSCENDENTAL: Rule = Rule::Close { rel: 2e-6 };
const IEEE: Rule = Rule::Close { rel: 0.0 };

#[test]
fn unary_ops_agree_on_special_values() {
    let pass = [
        ("neg", UnaryOp::Neg),
        ("abs", UnaryOp::Abs),
        ("relu", UnaryOp::Relu),
        ("leaky_relu", UnaryOp::LeakyRelu { alpha: 0.1 }),
        (
            "clip",
            UnaryOp::Clip {
                min: -1.0,
                max: 2.0,
            },
        ),
        (
            "clip at 0",
            UnaryOp::Clip {
                min: 0.0,
                max: f32::INFINITY,
            },
        ),
    ];
    for (name, op) in pass {
        check_unary(name, op, Rule::Bits);
    }
    check_unary("sqrt", UnaryOp::Sqrt, IEEE);
    check_unary("reciprocal", UnaryOp::Reciprocal, IEEE);
    let transcendental = [
        ("exp", UnaryOp::Exp),
        ("log", UnaryOp::Log),
        ("tanh", UnaryOp::Tanh),
        ("sigmoid", UnaryOp::Sigmoid),
        ("silu", UnaryOp::Silu),
        ("erf", UnaryOp::Erf),
        ("gelu_erf", UnaryOp::Gelu { tanh_approx: false }),
        ("gelu_tanh", UnaryOp::Gelu { tanh_approx: true }),
        ("elu", UnaryOp::Elu { alpha: 1.5 }),
    ];
    for (name, op) in transcendental {
        check_unary(name, op, TRANSCENDENTAL);
    }
}

#[test]
fn binary_ops_agree_on_special_values() {
    let bin = |op: BinaryOp| move |b: &mut GraphBuilder, x, y| b.binary(op, x, y).unwrap();
    check_binary("max", &bin(BinaryOp::Max), Rule::Bits);
    check_binary("min", &bin(BinaryOp::Min), Rule::Bits);
    for (name, op) in [
        ("add", BinaryOp::Add),
        ("sub", BinaryOp::Sub),
        ("mul", BinaryOp::Mul),
        ("div", BinaryOp::Div),
    ] {
        check_binary(name, &bin(op), IEEE);
    }
    check_binary("pow", &bin(BinaryOp::Pow), Rule::Close { rel: 1e-4 });
    for (name, cmp) in [
        ("where(x == y)", BinaryOp::Eq),
        ("where(x < y)", BinaryOp::Lt),
        ("where(x <= y)", BinaryOp::Le),
        ("where(x > y)", BinaryOp::Gt),
        ("where(x >= y)", BinaryOp::Ge),
    ] {
        let f = move |b: &mut GraphBuilder, x, y| {
            let c = b.binary(cmp, x, y).unwrap();
            b.where_(c, x, y).unwrap()
        };
        check_binary(name, &f, Rule::Bits);
    }
}

/// Rows of `ROW` holding specials at the first, a middle and the last (scalar tail)
/// position, pairs of them, and rows made only of them.
const ROW: usize = 19;

fn special_rows() -> Vec<Vec<f32>> {
    let base: Vec<f32> = (0..ROW).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
    let mut rows = vec![base.clone()];
    for &s in &specials() {
        for at in [0, 6, ROW - 1] {
            let mut r = base.clone();
            r[at] = s;
            rows.push(r);
        }
    }
    let pairs = [
        (f32::INFINITY, f32::NEG_INFINITY),
        (f32::NAN, f32::INFINITY),
        (f32::MAX, f32::MAX),
        (-f32::MAX, -f32::MAX),
        (0.0, -0.0),
    ];
    for (a, b) in pairs {
        let mut r = base.clone();
        r[2] = a;
        r[ROW - 2] = b;
        rows.push(r);
    }
    for v in [
        f32::NEG_INFINITY,
        f32::INFINITY,
        0.0,
        -0.0,
        1e-40,
        -f32::MAX,
        f32::MAX,
    ] {
        rows.push(vec![v; ROW]);
    }
    // ±0 ties in every order
    rows.push(
        (0..ROW)
            .map(|i| if i % 3 == 0 { -0.0 } else { 0.0 })
            .collect(),
    );
    rows.push(
        (0..ROW)
            .map(|i| if i % 5 == 1 { 0.0 } else { -0.0 })
            .collect(),
    );
    rows
}

fn row_program(f: &ApplyOp) -> Program {
    let mut b = GraphBuilder::new("r");
    let x = b.input("x", DType::F32, shape!["r", ROW]);
    let y = f(&mut b, x);
    b.output("y", y).unwrap();
    lower(&b.finish().unwrap()).unwrap()
}

fn check_rows(name: &str, f: &ApplyOp, rule: Rule) {
    let (interp, jit) = tiers(row_program(f));
    let rows = special_rows();
    let flat: Vec<f32> = rows.concat();
    let x = Tensor::from_vec(flat, &[rows.len(), ROW]).unwrap();
    let (want, got) = run_both(&interp, &jit, &[x], name);
    check(name, &want, &got, &|_| false, rule);
}

/// The tolerance of one layer-norm row: `ROW · ε · max |y|` over its finite outputs.
///
/// Both tiers compute `(x − mean) · rstd · s + b` in f32 but sum the row for the mean
/// and the variance in different orders (the JIT in 4 lanes, unrolled; the
/// interpreter in its CPU level's lanes). A sum of `n` terms in any order is within
/// `(n − 1)·ε·Σ|x|` of the exact one, so the mean and `rstd` each carry up to `n·ε`
/// of the row's spread, and every output inherits that much of the row's scale,
/// `|s| · rstd · max |x − mean|` ≤ `max |y| + |b|`. An output near zero therefore
/// differs by a fraction of the row's scale, not of its own magnitude.
fn row_scale_tolerance(row: &[f32]) -> f32 {
    let scale = row
        .iter()
        .filter(|y| y.is_finite())
        .fold(0f32, |m, y| m.max(y.abs()));
    ROW as f32 * f32::EPSILON * scale
}

fn check_layer_norm_rows(name: &str, f: &ApplyOp) {
    let (interp, jit) = tiers(row_program(f));
    let rows = special_rows();
    let flat: Vec<f32> = rows.concat();
    let x = Tensor::from_vec(flat, &[rows.len(), ROW]).unwrap();
    let (want, got) = run_both(&interp, &jit, &[x], name);
    for (r, (w, g)) in want.chunks(ROW).zip(got.chunks(ROW)).enumerate() {
        let tol = row_scale_tolerance(w);
        check(
            &format!("{name}, row {r}"),
            w,
            g,
            &|_| false,
            Rule::Abs { tol },
        );
    }
}

#[test]
fn row_ops_agree_on_special_values() {
    let rows = Rule::Close { rel: 1e-4 };
    // Both tiers sum in f64 (in different orders) and round once to f32: one ulp.
    let sum64 = Rule::Close { rel: f32::EPSILON };
    check_rows(
        "reduce_max",
        &|b, x| b.reduce(ReduceOp::Max, x, &[-1], false).unwrap(),
        Rule::Bits,
    );
    check_rows(
        "reduce_sum",
        &|b, x| b.reduce(ReduceOp::Sum, x, &[-1], false).unwrap(),
        sum64,
    );
    check_rows("softmax", &|b, x| b.softmax(x, -1).unwrap(), rows);
    check_rows("log_softmax", &|b, x| b.log_softmax(x, -1).unwrap(), rows);
    check_layer_norm_rows("layer_norm", &|b, x| {
        let scale = b.constant("s", Tensor::from_vec(vec![1.5f32; ROW], &[ROW]).unwrap());
        let bias = b.constant("c", Tensor::from_vec(vec![-0.25f32; ROW], &[ROW]).unwrap());
        b.layer_norm(x, scale, Some(bias), -1, 1e-5).unwrap()
    });
    check_rows(
        "relu(x) then reduce_max",
        &|b, x| {
            let r = b.relu(x).unwrap();
            b.reduce(ReduceOp::Max, r, &[-1], false).unwrap()
        },
        Rule::Bits,
    );
    check_rows(
        "reduce_mean",
        &|b, x| b.reduce(ReduceOp::Mean, x, &[-1], true).unwrap(),
        sum64,
    );
}

#[test]
fn matmul_epilogues_agree_on_special_values() {
    const K: usize = 7;
    const N: usize = 5;
    let epilogues: [(&str, &ApplyOp); 3] = [
        ("relu", &|b, y| b.relu(y).unwrap()),
        ("clip", &|b, y| b.clip(y, -1.0, 1.0).unwrap()),
        ("gelu", &|b, y| b.gelu(y, false).unwrap()),
    ];
    for (name, epilogue) in epilogues {
        let mut b = GraphBuilder::new("mm");
        let x = b.input("x", DType::F32, shape!["m", K]);
        let w: Vec<f32> = (0..K * N)
            .map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0)
            .collect();
        let w = b.constant("w", Tensor::from_vec(w, &[K, N]).unwrap());
        let bias = b.constant("b", Tensor::from_vec(vec![0.5f32; N], &[N]).unwrap());
        let y = b.matmul(x, w).unwrap();
        let y = b.add(y, bias).unwrap();
        let y = epilogue(&mut b, y);
        b.output("y", y).unwrap();
        let (interp, jit) = tiers(lower(&b.finish().unwrap()).unwrap());
        let s = specials();
        let rows: Vec<f32> = s
            .iter()
            .flat_map(|&v| (0..K).map(move |k| if k == 3 { v } else { k as f32 * 0.25 - 0.5 }))
            .collect();
        let x = Tensor::from_vec(rows, &[s.len(), K]).unwrap();
        let (want, got) = run_both(&interp, &jit, &[x], name);
        check(
            &format!("matmul + bias + {name}"),
            &want,
            &got,
            &|_| false,
            Rule::Close { rel: 1e-4 },
        );
    }
}
