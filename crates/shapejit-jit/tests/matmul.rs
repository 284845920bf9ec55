//! Matmul epilogues against a naive f64 product plus the epilogue evaluated in f64:
//! bias + gelu, residual add, family kernels over the batch dim, broadcast weights,
//! packed weights.
//!
//! Tolerance: |jit − f64| ≤ 1e-5·(1 + Σ|a||b|) (the GEMM's f32 accumulation).

mod common;

use common::{Rng, eval64};
use std::sync::Arc;

use shapejit_jit::{
    BinaryOp, InputLayout, JitError, MatMulEpilogueSpec, Program, ShapeMode, UnaryOp,
    compile_matmul_epilogue,
};
use shapejit_kernels::packed::{PACKED_MAX_ROWS, PackedB};
use shapejit_kernels::{StridedShape, View};

fn bias_gelu_residual() -> Program {
    let mut p = Program::new();
    let (y, bias, res) = (p.input(0), p.input(1), p.input(2));
    let s = p.binary(BinaryOp::Add, y, bias);
    let g = p.unary(UnaryOp::GeluErf, s);
    let o = p.binary(BinaryOp::Add, g, res);
    p.output(o);
    p
}

/// The bias + gelu + residual epilogue over `out_shape`: bias `[n]` broadcast, the
/// residual with the output's own shape.
fn bias_gelu_residual_spec(out_shape: &[usize], mode: ShapeMode) -> MatMulEpilogueSpec {
    let n = out_shape[out_shape.len() - 1];
    MatMulEpilogueSpec {
        name: "mm".to_string(),
        out_shape: out_shape.to_vec(),
        mode,
        alpha: 1.0,
        epilogue: bias_gelu_residual(),
        extra_inputs: vec![
            InputLayout::broadcast(&[n], out_shape).unwrap(),
            InputLayout::contiguous(out_shape),
        ],
    }
}

fn check(batch: usize, m: usize, k: usize, n: usize, mode: ShapeMode, compiled_batch: usize) {
    let mut rng = Rng((batch * 1000 + m * 100 + k * 10 + n) as u64);
    let a = rng.vec(batch * m * k, -1.0, 1.0);
    let w = rng.vec(k * n, -1.0, 1.0);
    let bias = rng.vec(n, -0.5, 0.5);
    let res = rng.vec(batch * m * n, -1.0, 1.0);
    let spec = bias_gelu_residual_spec(&[compiled_batch, m, n], mode);
    let kernel = compile_matmul_epilogue(&spec).expect("compiles");
    let av = View::contiguous(&a, &[batch, m, k]).unwrap();
    // weights broadcast over the batch: stride 0
    let wv = View::new(
        &w,
        StridedShape::new(&[batch, k, n], &[0, n as isize, 1], 0).unwrap(),
    )
    .unwrap();
    let mut out = vec![f32::NAN; batch * m * n];
    kernel
        .run(&av, &wv, &[&bias, &res], &mut out, batch)
        .expect("runs");
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let (mut dot, mut mag) = (0f64, 0f64);
                for l in 0..k {
                    let p = a[(bi * m + i) * k + l] as f64 * w[l * n + j] as f64;
                    dot += p;
                    mag += p.abs();
                }
                let idx = (bi * m + i) * n + j;
                let want = eval64(
                    &spec.epilogue,
                    &[dot, bias[j] as f64, res[idx] as f64],
                    None,
                )[0];
                let got = out[idx] as f64;
                assert!(
                    (got - want).abs() <= 1e-5 * (1.0 + mag),
                    "[{bi},{i},{j}]: got {got}, want {want}"
                );
            }
        }
    }
}

#[test]
fn exact_epilogues_match_reference() {
    for (m, k, n) in [(1, 1, 1), (3, 5, 7), (8, 16, 33), (17, 9, 64)] {
        check(2, m, k, n, ShapeMode::Exact, 2);
    }
}

#[test]
fn family_epilogue_serves_every_batch() {
    for batch in [1, 2, 3, 5, 16, 33] {
        check(batch, 4, 8, 19, ShapeMode::Family, 4);
    }
}

#[test]
fn bad_calls_are_typed_errors() {
    let spec = bias_gelu_residual_spec(&[2, 3], ShapeMode::Exact);
    let kernel = compile_matmul_epilogue(&spec).expect("compiles");
    let a = vec![0.0f32; 8];
    let b = vec![0.0f32; 12];
    let (av, bv) = (
        View::contiguous(&a, &[2, 4]).unwrap(),
        View::contiguous(&b, &[4, 3]).unwrap(),
    );
    let mut out = vec![0.0f32; 6];
    let err = kernel.run(&av, &bv, &[&[0.0; 3]], &mut out, 0).unwrap_err();
    assert!(matches!(err, JitError::BadCall { .. }), "{err}");
    let err = kernel
        .run(&av, &bv, &[&[0.0; 3], &[0.0; 5]], &mut out, 0)
        .unwrap_err();
    assert!(
        matches!(
            err,
            JitError::BadCall {
                expected: 6,
                actual: 5,
                ..
            }
        ),
        "{err}"
    );
    let wrong = View::contiguous(&b, &[3, 4]).unwrap();
    let err = kernel
        .run(&av, &wrong, &[&[0.0; 3], &[0.0; 6]], &mut out, 0)
        .unwrap_err();
    assert!(matches!(err, JitError::Gemm { .. }), "{err}");
}

#[test]
fn flattened_rows_give_the_same_product() {
    let (batch, m, k, n) = (3, 5, 7, 6);
    let mut rng = Rng(77);
    let a = rng.vec(batch * m * k, -1.0, 1.0);
    let w = rng.vec(k * n, -1.0, 1.0);
    let bias = rng.vec(n, -0.5, 0.5);
    let res = rng.vec(batch * m * n, -1.0, 1.0);
    let spec = bias_gelu_residual_spec(&[batch, m, n], ShapeMode::Exact);
    let kernel = compile_matmul_epilogue(&spec).expect("compiles");
    let wv3 = View::new(
        &w,
        StridedShape::new(&[batch, k, n], &[0, n as isize, 1], 0).unwrap(),
    )
    .unwrap();
    let mut batched = vec![0f32; batch * m * n];
    kernel
        .run(
            &View::contiguous(&a, &[batch, m, k]).unwrap(),
            &wv3,
            &[&bias, &res],
            &mut batched,
            0,
        )
        .unwrap();
    let mut flat = vec![0f32; batch * m * n];
    let (a2, w2) = (
        View::contiguous(&a, &[batch * m, k]).unwrap(),
        View::contiguous(&w, &[k, n]).unwrap(),
    );
    kernel.run(&a2, &w2, &[&bias, &res], &mut flat, 0).unwrap();
    for (x, y) in batched.iter().zip(&flat) {
        assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()));
    }
}

/// Packed weights: a product with an identity epilogue is exactly the documented fma
/// sequence (which proves the packed path ran); another buffer with the same values,
/// or too many rows, falls back to `gemm` and stays within the f64 tolerance.
#[test]
fn packed_weights_serve_their_own_view_only() {
    let (rows, k, n) = (10, 300, 37);
    let mut rng = Rng(5);
    let a = rng.vec(PACKED_MAX_ROWS * k, -1.0, 1.0);
    let w = rng.vec(k * n, -1.0, 1.0);
    let mut identity = Program::new();
    let y = identity.input(0);
    identity.output(y);
    let spec = |rows: usize| MatMulEpilogueSpec {
        name: "mm".to_string(),
        out_shape: vec![rows, n],
        mode: ShapeMode::Exact,
        alpha: 1.0,
        epilogue: identity.clone(),
        extra_inputs: vec![],
    };
    let wv = View::contiguous(&w, &[k, n]).unwrap();
    let packed = Arc::new(PackedB::pack(&wv).unwrap());
    let reference = |rows: usize, out: &[f32], exact: bool| {
        for i in 0..rows {
            for j in 0..n {
                let (mut fma, mut dot, mut mag) = (0f32, 0f64, 0f64);
                for l in 0..k {
                    let (x, y) = (a[i * k + l], w[l * n + j]);
                    fma = x.mul_add(y, fma);
                    dot += x as f64 * y as f64;
                    mag += (x as f64 * y as f64).abs();
                }
                let got = out[i * n + j];
                if exact {
                    assert_eq!(got.to_bits(), fma.to_bits(), "[{i},{j}]");
                }
                assert!((got as f64 - dot).abs() <= 1e-5 * (1.0 + mag), "[{i},{j}]");
            }
        }
    };
    let kernel = compile_matmul_epilogue(&spec(rows))
        .unwrap()
        .with_packed_weights(&wv, packed.clone());
    assert!(kernel.has_packed_weights());
    let av = View::contiguous(&a[..rows * k], &[rows, k]).unwrap();
    let mut out = vec![f32::NAN; rows * n];
    kernel.run(&av, &wv, &[], &mut out, 0).unwrap();
    reference(rows, &out, true);
    // same values, other buffer: gemm
    let copy = w.clone();
    let other = View::contiguous(&copy, &[k, n]).unwrap();
    let mut out = vec![f32::NAN; rows * n];
    kernel.run(&av, &other, &[], &mut out, 0).unwrap();
    reference(rows, &out, false);
    // PACKED_MAX_ROWS rows: gemm as well
    let big = compile_matmul_epilogue(&spec(PACKED_MAX_ROWS))
        .unwrap()
        .with_packed_weights(&wv, packed);
    let av = View::contiguous(&a, &[PACKED_MAX_ROWS, k]).unwrap();
    let mut out = vec![f32::NAN; PACKED_MAX_ROWS * n];
    big.run(&av, &wv, &[], &mut out, 0).unwrap();
    reference(PACKED_MAX_ROWS, &out, false);
}

/// A call split into pieces of the output's dim 0 (what the tier does with an intra-op
/// pool) gives the same bits at 1, 2 and 3 threads, on `gemm` and on packed weights,
/// for piece counts that do and do not divide the batch; at batch 1 the product alone
/// runs in row ranges (packed, and on `gemm` at 300 rows) or, with few rows on
/// large packed weights, in column ranges. A split call takes the whole call's path —
/// and so its bits — unless its pieces are few enough rows for the packed weights
/// that the whole call leaves to `gemm` (16 × 32 rows in pieces of ≤ 192): then it
/// is the same product within rounding.
#[test]
fn pieces_give_the_same_bits_at_any_thread_count() {
    for (batch, m, k, n) in [
        (7usize, 5usize, 33usize, 40usize),
        (12, 32, 64, 96),
        (3, 100, 48, 17),
        (1, 40, 33, 24),
        (1, 300, 20, 17),
        // few rows on 2.4 MiB of weights: packed, the product in column ranges
        (1, 1, 640, 1000),
        (1, 40, 640, 1000),
        // 512 rows: `gemm` whole; packed pieces of 6 (or fewer) batch rows
        (16, 32, 300, 64),
    ] {
        for packed in [false, true] {
            for mode in [ShapeMode::Exact, ShapeMode::Family] {
                let mut rng = Rng((batch * 7 + m + k + n) as u64);
                let a = rng.vec(batch * m * k, -1.0, 1.0);
                let w = rng.vec(k * n, -1.0, 1.0);
                let bias = rng.vec(n, -0.5, 0.5);
                let res = rng.vec(batch * m * n, -1.0, 1.0);
                let mut kernel =
                    compile_matmul_epilogue(&bias_gelu_residual_spec(&[batch, m, n], mode))
                        .expect("compiles");
                let av = View::contiguous(&a, &[batch * m, k]).unwrap();
                let wv = View::contiguous(&w, &[k, n]).unwrap();
                if packed {
                    let p = Arc::new(PackedB::pack(&wv).unwrap());
                    kernel = kernel.with_packed_weights(&wv, p);
                }
                let mut whole = vec![0f32; batch * m * n];
                kernel
                    .run(&av, &wv, &[&bias, &res], &mut whole, batch)
                    .unwrap();
                let same_path = !packed || batch * m < PACKED_MAX_ROWS;
                for pieces in [2, 3, 5, batch] {
                    let split = |threads: usize| {
                        let mut split = vec![f32::NAN; batch * m * n];
                        kernel
                            .run_pieces(
                                &av,
                                &wv,
                                &[&bias, &res],
                                &mut split,
                                batch,
                                (pieces, threads),
                                &|p, f| (0..p).rev().for_each(f),
                            )
                            .unwrap();
                        split
                    };
                    let one = split(1);
                    let case =
                        format!("{batch}x{m}x{k}x{n} packed {packed} {mode:?}: {pieces} pieces");
                    for threads in [2, 3] {
                        let bits = split(threads)
                            .iter()
                            .zip(&one)
                            .all(|(x, y)| x.to_bits() == y.to_bits());
                        assert!(bits, "{case}: {threads} threads differ from 1");
                    }
                    for (x, y) in whole.iter().zip(&one) {
                        if same_path {
                            assert_eq!(
                                x.to_bits(),
                                y.to_bits(),
                                "{case}: differs from the whole call"
                            );
                        } else {
                            let tol = 1e-5 * (k as f32).sqrt() * (1.0 + y.abs());
                            assert!((x - y).abs() <= tol, "{case}: {x} vs the whole call's {y}");
                        }
                    }
                }
            }
        }
    }
}
