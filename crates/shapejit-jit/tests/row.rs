//! Row kernels against naive f64 references: softmax, log-softmax, layer-norm with
//! scale and bias, sum/mean/max, with prologues and epilogues, row lengths that are
//! not multiples of the vector width, broadcast inputs, family kernels over rows.
//!
//! Tolerance: |jit − f64| ≤ 3e-6·(1 + |f64|)·√row_len/4 + 1e-6 (f32 accumulation over
//! a row plus the exp/log ulp bounds).

mod common;

use common::{Rng, eval64};
use proptest::prelude::*;
use shapejit_jit::{
    BinaryOp, JitError, Op, Program, RowInput, RowOp, RowSpec, ShapeMode, UnaryOp, compile_row,
};

/// Reference for one row of already-computed prologue values `x`, before the epilogue.
fn reference_row(op: RowOp, x: &[f64]) -> Vec<f64> {
    let n = x.len() as f64;
    let max = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    match op {
        RowOp::Softmax => {
            let s: f64 = x.iter().map(|v| (v - max).exp()).sum();
            x.iter().map(|v| (v - max).exp() / s).collect()
        }
        RowOp::LogSoftmax => {
            let s: f64 = x.iter().map(|v| (v - max).exp()).sum();
            x.iter().map(|v| v - max - s.ln()).collect()
        }
        RowOp::LayerNorm { eps } => {
            let mean = x.iter().sum::<f64>() / n;
            let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            x.iter()
                .map(|v| (v - mean) / (var + eps as f64).sqrt())
                .collect()
        }
        RowOp::Sum => vec![x.iter().sum()],
        RowOp::Mean => vec![x.iter().sum::<f64>() / n],
        RowOp::Max => vec![max],
    }
}

struct Case {
    spec: RowSpec,
    buffers: Vec<Vec<f32>>,
}

/// A row grid `[g0, g1]` of rows of `len`. Inputs: 0 = x `[g0, g1, len]`, 1 = residual
/// (same), 2 = per-row scalar `[g0, g1, 1]` (elem_stride 0), 3 = per-column vector
/// `[len]` (row strides 0), 4 = per-channel scalar `[g1, 1]` (broadcast over g0).
fn case(
    op: RowOp,
    (g0, g1): (usize, usize),
    len: usize,
    mode: ShapeMode,
    with_epilogue: bool,
    seed: u64,
) -> Case {
    let mut rng = Rng(seed | 1);
    let input = |row_strides: [usize; 2], elem_stride| RowInput {
        row_strides: row_strides.to_vec(),
        elem_stride,
    };
    let inputs = vec![
        input([g1 * len, len], 1),
        input([g1 * len, len], 1),
        input([g1, 1], 0),
        input([0, 0], 1),
        input([0, 1], 0),
    ];
    let buffers = vec![
        rng.vec(g0 * g1 * len, -3.0, 3.0),
        rng.vec(g0 * g1 * len, -1.0, 1.0),
        rng.vec(g0 * g1, -1.0, 1.0),
        rng.vec(len, 0.5, 1.5),
        rng.vec(g1, -1.0, 1.0),
    ];
    // prologue: x + 0.5·residual + rowscalar·channel
    let mut prologue = Program::new();
    let (x, r, s) = (prologue.input(0), prologue.input(1), prologue.input(2));
    let c = prologue.input(4);
    let half = prologue.constant(0.5);
    let hr = prologue.binary(BinaryOp::Mul, r, half);
    let a = prologue.binary(BinaryOp::Add, x, hr);
    let sc = prologue.binary(BinaryOp::Mul, s, c);
    let v = prologue.binary(BinaryOp::Add, a, sc);
    prologue.output(v);
    let epilogue = with_epilogue.then(|| {
        let mut e = Program::new();
        let y = e.push(Op::RowResult);
        let out = if op.is_reduction() {
            let t = e.unary(UnaryOp::Tanh, y);
            let per_row = e.input(2);
            e.binary(BinaryOp::Mul, t, per_row)
        } else {
            let g = e.input(3);
            let m = e.binary(BinaryOp::Mul, y, g);
            e.unary(UnaryOp::Sigmoid, m)
        };
        e.output(out);
        e
    });
    Case {
        spec: RowSpec {
            name: format!("{op:?}"),
            row_dims: vec![g0, g1],
            row_len: len,
            mode,
            inputs,
            prologue,
            op,
            epilogue,
        },
        buffers,
    }
}

/// Runs `case` over a `[g0, g1]` grid (`g0` may differ from the spec's in family
/// mode) and compares every row with the f64 reference.
fn check(case: &Case, g0: usize) {
    let kernel = compile_row(&case.spec).expect("compiles");
    let len = case.spec.row_len;
    let g1 = case.spec.row_dims[1];
    let rows = g0 * g1;
    let out_len = if case.spec.op.is_reduction() {
        rows
    } else {
        rows * len
    };
    let mut out = vec![f32::NAN; out_len];
    let slices: Vec<&[f32]> = case.buffers.iter().map(|b| b.as_slice()).collect();
    kernel.run(&slices, &mut out, rows).expect("runs");
    let tol = |w: f64| 3e-6 * (1.0 + w.abs()) * ((len as f64).sqrt() / 4.0).max(1.0) + 1e-6;
    let at = |i: &RowInput, r: usize, j: usize| {
        (r / g1) * i.row_strides[0] + (r % g1) * i.row_strides[1] + j * i.elem_stride
    };
    for r in 0..rows {
        let x: Vec<f64> = (0..len)
            .map(|j| {
                let vals: Vec<f64> = case
                    .spec
                    .inputs
                    .iter()
                    .zip(&case.buffers)
                    .map(|(i, b)| b[at(i, r, j)] as f64)
                    .collect();
                eval64(&case.spec.prologue, &vals, None)[0]
            })
            .collect();
        let ys = reference_row(case.spec.op, &x);
        // The kernel's prologue rounds each value in f32 (a few ulp of its
        // magnitude); layer norm divides those errors by the row's standard
        // deviation, large on short rows of nearly equal values (len 2, eps 1e-5).
        let conditioning = match case.spec.op {
            RowOp::LayerNorm { eps } => {
                let n = len as f64;
                let mean = x.iter().sum::<f64>() / n;
                let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
                let big = x.iter().fold(0f64, |m, v| m.max(v.abs()));
                4.0 * f64::from(f32::EPSILON) * big / (var + f64::from(eps)).sqrt()
            }
            _ => 0.0,
        };
        for (j, &y) in ys.iter().enumerate() {
            let want = match &case.spec.epilogue {
                Some(e) => {
                    let vals: Vec<f64> = case
                        .spec
                        .inputs
                        .iter()
                        .zip(&case.buffers)
                        .map(|(i, b)| b.get(at(i, r, j)).copied().unwrap_or(0.0) as f64)
                        .collect();
                    eval64(e, &vals, Some(y))[0]
                }
                None => y,
            };
            let got = out[if case.spec.op.is_reduction() {
                r
            } else {
                r * len + j
            }] as f64;
            assert!(
                (got - want).abs() <= tol(want) + conditioning,
                "{:?} row {r} elem {j} (len {len}): got {got}, want {want}",
                case.spec.op
            );
        }
    }
}

fn op_strategy() -> impl Strategy<Value = RowOp> {
    prop_oneof![
        Just(RowOp::Softmax),
        Just(RowOp::LogSoftmax),
        Just(RowOp::LayerNorm { eps: 1e-5 }),
        Just(RowOp::Sum),
        Just(RowOp::Mean),
        Just(RowOp::Max),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn row_kernels_match_reference(op in op_strategy(), g0 in 1usize..6, g1 in 1usize..4, len in 1usize..80, epi in any::<bool>(), seed in any::<u64>()) {
        check(&case(op, (g0, g1), len, ShapeMode::Exact, epi, seed), g0);
    }

    #[test]
    fn family_row_kernels_serve_any_row_count(op in op_strategy(), g0 in 1usize..40, g1 in 1usize..4, len in 1usize..40, seed in any::<u64>()) {
        // compiled for g0 = 3, run with `g0`
        let mut c = case(op, (g0, g1), len, ShapeMode::Family, true, seed);
        c.spec.row_dims[0] = 3;
        check(&c, g0);
    }
}

/// A family kernel's layer norm over rows of 2 nearly equal values (a case
/// proptest found), within the tolerance their conditioning allows.
#[test]
fn layer_norm_of_short_ill_conditioned_rows() {
    let op = RowOp::LayerNorm { eps: 1e-5 };
    let mut c = case(
        op,
        (36, 2),
        2,
        ShapeMode::Family,
        true,
        5_421_206_666_672_464_200,
    );
    c.spec.row_dims[0] = 3;
    check(&c, 36);
}

#[test]
fn layer_norm_with_scale_and_bias() {
    let (rows, len) = (5, 37);
    let spec = RowSpec::layer_norm("ln", rows, len, 1e-5, ShapeMode::Exact);
    let mut rng = Rng(9);
    let x = rng.vec(rows * len, -2.0, 2.0);
    let g = rng.vec(len, 0.5, 1.5);
    let bias = rng.vec(len, -0.5, 0.5);
    let kernel = compile_row(&spec).expect("compiles");
    let mut out = vec![0.0; rows * len];
    kernel.run(&[&x, &g, &bias], &mut out, 0).expect("runs");
    for r in 0..rows {
        let row: Vec<f64> = x[r * len..(r + 1) * len]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let y = reference_row(RowOp::LayerNorm { eps: 1e-5 }, &row);
        for j in 0..len {
            let want = y[j] * g[j] as f64 + bias[j] as f64;
            assert!(
                (out[r * len + j] as f64 - want).abs() < 1e-5,
                "row {r} elem {j}"
            );
        }
    }
}

#[test]
fn invalid_row_specs_are_typed_errors() {
    let mut c = case(RowOp::Softmax, (2, 1), 8, ShapeMode::Exact, false, 1);
    c.spec.inputs[0].elem_stride = 2;
    let err = compile_row(&c.spec).unwrap_err();
    assert!(
        matches!(err, JitError::InvalidSpec { .. }) && err.to_string().contains("element stride"),
        "{err}"
    );
    let mut c = case(RowOp::Sum, (2, 1), 8, ShapeMode::Exact, false, 1);
    let mut e = Program::new();
    let x = e.input(0);
    e.output(x);
    c.spec.epilogue = Some(e);
    let err = compile_row(&c.spec).unwrap_err();
    assert!(err.to_string().contains("varies along the row"), "{err}");
    // one row stride per grid dim
    let mut c = case(RowOp::Softmax, (2, 3), 8, ShapeMode::Exact, false, 1);
    c.spec.inputs[1].row_strides.pop();
    let err = compile_row(&c.spec).unwrap_err();
    assert!(err.to_string().contains("row strides for a 2-dim"), "{err}");
    // a family call must cover whole grid rows: 7 rows of a [_, 3] grid do not
    let mut c = case(RowOp::Softmax, (2, 3), 8, ShapeMode::Family, false, 1);
    c.spec.row_dims[0] = 3;
    let kernel = compile_row(&c.spec).unwrap();
    let slices: Vec<&[f32]> = c.buffers.iter().map(|b| b.as_slice()).collect();
    let mut out = vec![0.0; 7 * 8];
    let err = kernel.run(&slices, &mut out, 7).unwrap_err();
    assert!(matches!(err, JitError::BadCall { .. }), "{err}");
}
