//! Measures the maximum error of the inline transcendental functions against f64
//! references over wide input ranges, through compiled kernels (vector body and scalar
//! tail both run), and asserts the documented bounds. The kernels are compiled with
//! Cranelift's own loop (`compile_elementwise_inline`); tiled kernels call the
//! interpreter's functions, whose bounds `shapejit-kernels` tests (`tests/tiles.rs`
//! checks they are bit-identical to them).

mod common;

use common::{Rng, ulp_error, unary64};
use shapejit_jit::{
    ElementwiseSpec, InputLayout, Program, ShapeMode, UnaryOp, compile_elementwise_inline,
};

fn unary_kernel(op: UnaryOp, n: usize) -> shapejit_jit::ElementwiseKernel {
    let mut program = Program::new();
    let x = program.input(0);
    let y = program.unary(op, x);
    program.output(y);
    let spec = ElementwiseSpec {
        name: format!("{op:?}"),
        shape: vec![n],
        mode: ShapeMode::Exact,
        inputs: vec![InputLayout::contiguous(&[n])],
        program,
    };
    let kernel = compile_elementwise_inline(&spec).expect("compiles");
    assert!(!kernel.is_tiled());
    kernel
}

/// Runs `op` on `xs` and returns (max ulp error, input where it occurs, max relative error).
fn measure(op: UnaryOp, xs: &[f32]) -> (f64, f32, f64) {
    let kernel = unary_kernel(op, xs.len());
    let mut out = vec![0f32; xs.len()];
    kernel.run(&[xs], &mut [&mut out], 0).expect("runs");
    let mut worst = (0.0f64, 0.0f32, 0.0f64);
    for (&x, &y) in xs.iter().zip(&out) {
        let want = unary64(op, x as f64);
        let ulp = ulp_error(y, want);
        let rel = if want == 0.0 {
            (y as f64).abs()
        } else {
            ((y as f64 - want) / want).abs()
        };
        if ulp > worst.0 {
            worst.0 = ulp;
            worst.1 = x;
        }
        worst.2 = worst.2.max(rel);
    }
    worst
}

/// A dense grid over [lo, hi] plus random points, length not a multiple of 16.
fn inputs(lo: f32, hi: f32, seed: u64) -> Vec<f32> {
    let n_grid = 200_003;
    let mut xs: Vec<f32> = (0..n_grid)
        .map(|i| lo + (hi - lo) * (i as f32 / (n_grid - 1) as f32))
        .collect();
    xs.extend(Rng(seed).vec(50_001, lo, hi));
    xs
}

fn check(op: UnaryOp, lo: f32, hi: f32, max_ulp: f64) {
    let (ulp, at, rel) = measure(op, &inputs(lo, hi, 0x9E37_79B9_7F4A_7C15));
    println!("{op:?} on [{lo}, {hi}]: max {ulp:.2} ulp at {at}, max rel {rel:.2e}");
    assert!(
        ulp <= max_ulp,
        "{op:?}: {ulp} ulp at x = {at} (bound {max_ulp})"
    );
}

#[test]
fn exp_error() {
    check(UnaryOp::Exp, -87.3, 88.7, 1.5);
    check(UnaryOp::Exp, -1.0, 1.0, 1.5);
}

#[test]
fn log_error() {
    check(UnaryOp::Log, 0.5, 2.0, 1.5);
    check(UnaryOp::Log, 1e-30, 1e30, 1.5);
    // every binade, including subnormals
    let xs: Vec<f32> = {
        let mut rng = Rng(7);
        (0..100_000)
            .map(|_| 2f32.powf(rng.uniform(-149.0, 127.9)))
            .collect()
    };
    let (ulp, at, _) = measure(UnaryOp::Log, &xs);
    println!("Log over all binades: max {ulp:.2} ulp at {at}");
    assert!(ulp <= 1.5, "log: {ulp} ulp at {at}");
}

#[test]
fn tanh_error() {
    check(UnaryOp::Tanh, -20.0, 20.0, 2.0);
    check(UnaryOp::Tanh, -1.0, 1.0, 2.0);
    check(UnaryOp::Tanh, -1e-3, 1e-3, 2.0);
}

#[test]
fn sigmoid_error() {
    check(UnaryOp::Sigmoid, -80.0, 80.0, 3.0);
    check(UnaryOp::Sigmoid, -2.0, 2.0, 3.0);
}

#[test]
fn silu_error() {
    // sigmoid's error and one rounding of the product
    check(UnaryOp::Silu, -80.0, 80.0, 4.0);
    check(UnaryOp::Silu, -2.0, 2.0, 4.0);
}

#[test]
fn erf_error() {
    check(UnaryOp::Erf, -6.0, 6.0, 1.5);
    check(UnaryOp::Erf, -1e-2, 1e-2, 1.5);
}

#[test]
fn gelu_error() {
    // Where the result is far from underflow; the negative tail is covered by the
    // absolute check below.
    check(UnaryOp::GeluErf, -5.0, 10.0, 4.0);
    // gelu_tanh's inner argument u is rounded in f32 and sigmoid(2u) amplifies that by
    // |2u| in the negative tail: the bound grows with |x|.
    check(UnaryOp::GeluTanh, 0.0, 10.0, 4.0);
    check(UnaryOp::GeluTanh, -2.0, 0.0, 12.0);
    check(UnaryOp::GeluTanh, -5.0, -2.0, 48.0);
    for op in [UnaryOp::GeluErf, UnaryOp::GeluTanh] {
        let xs = inputs(-30.0, -5.0, 3);
        let kernel = unary_kernel(op, xs.len());
        let mut out = vec![0f32; xs.len()];
        kernel.run(&[&xs], &mut [&mut out], 0).expect("runs");
        for (&x, &y) in xs.iter().zip(&out) {
            let want = unary64(op, x as f64);
            assert!(
                (y as f64 - want).abs() <= 1e-9,
                "{op:?}({x}) = {y}, want {want}"
            );
        }
    }
}

#[test]
fn special_values() {
    let xs = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        -200.0,
        200.0,
    ];
    let cases: [(UnaryOp, [f32; 7]); 6] = [
        (
            UnaryOp::Exp,
            [f32::NAN, f32::INFINITY, 0.0, 1.0, 1.0, 0.0, f32::INFINITY],
        ),
        (
            UnaryOp::Log,
            [
                f32::NAN,
                f32::INFINITY,
                f32::NAN,
                f32::NEG_INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                200f32.ln(),
            ],
        ),
        (UnaryOp::Tanh, [f32::NAN, 1.0, -1.0, 0.0, 0.0, -1.0, 1.0]),
        (UnaryOp::Sigmoid, [f32::NAN, 1.0, 0.0, 0.5, 0.5, 0.0, 1.0]),
        // -inf · sigmoid(-inf) = -inf · 0
        (
            UnaryOp::Silu,
            [f32::NAN, f32::INFINITY, f32::NAN, 0.0, 0.0, 0.0, 200.0],
        ),
        (UnaryOp::Erf, [f32::NAN, 1.0, -1.0, 0.0, 0.0, -1.0, 1.0]),
    ];
    for (op, want) in cases {
        let kernel = unary_kernel(op, xs.len());
        let mut out = vec![0f32; xs.len()];
        kernel.run(&[&xs], &mut [&mut out], 0).expect("runs");
        for ((&x, &y), &w) in xs.iter().zip(&out).zip(&want) {
            let ok = if w.is_nan() {
                y.is_nan()
            } else {
                y == w || (w != 0.0 && ((y - w) / w).abs() < 1e-6)
            };
            assert!(ok, "{op:?}({x}) = {y}, want {w}");
        }
    }
}
