//! `matmul_bias` in the interpreter, with constant weights: the packed kernel
//! adding the bias in its epilogue (1–255 rows), `gemm` then the bias (256 rows
//! and more), and split into pieces (by rows, or by columns for few rows and large
//! weights) at 1–3 threads — each bit for bit the `matmul` and `add` it replaces,
//! and within rounding of an f64 product.

use shapejit_bytecode::lower;
use shapejit_ir::{DType, GraphBuilder, Op, Tensor, shape};
use shapejit_vm::{Module, Options};

const K: usize = 96;
const N: usize = 80;

/// Deterministic values in [-1, 1) with varied low bits.
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// `y = x @ w + bias` for `x [rows, k]`, `w` [`weights`]`(k, n)`, as one
/// `matmul_bias` or as `matmul` then `add`.
fn module(fused: bool, threads: usize, (k, n): (usize, usize)) -> Module {
    let mut b = GraphBuilder::new("linear");
    let x = b.input("x", DType::F32, shape!["rows", k as i64]);
    let (w, bias) = weights(k, n);
    let w = b.constant("w", Tensor::from_vec(w, &[k, n]).unwrap());
    let bias = b.constant("bias", Tensor::from_vec(bias, &[n]).unwrap());
    let y = if fused {
        b.op(Op::MatMulBias, &[x, w, bias]).unwrap()
    } else {
        let product = b.matmul(x, w).unwrap();
        b.add(product, bias).unwrap()
    };
    b.output("y", y).unwrap();
    let options = Options {
        threads,
        ..Options::default()
    };
    Module::new(lower(&b.finish().unwrap()).unwrap(), options).unwrap()
}

/// The weights `[k, n]` and bias `[n]` of [`module`].
fn weights(k: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    (values(k * n, 1), values(n, 2))
}

/// The outputs of `module` on `x [rows, k]` at each thread count, bit for bit
/// the same, returned once.
fn same_at_1_2_3_threads(fused: bool, (k, n): (usize, usize), x: &Tensor) -> Vec<f32> {
    let outs: Vec<Vec<f32>> = [1, 2, 3]
        .into_iter()
        .map(|threads| {
            let m = module(fused, threads, (k, n));
            let out = m.runtime().run(std::slice::from_ref(x)).unwrap();
            out[0].as_slice::<f32>().unwrap().to_vec()
        })
        .collect();
    for (threads, out) in [2, 3].into_iter().zip(&outs[1..]) {
        let same = outs[0]
            .iter()
            .zip(out)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{threads} threads differ from 1 ({:?})", x.shape());
    }
    outs.into_iter().next().unwrap()
}

#[test]
fn fused_bias_is_bit_identical_to_the_separate_add() {
    let separate = module(false, 1, (K, N));
    let mut reference = separate.runtime();
    for threads in [1, 2, 3] {
        let fused = module(true, threads, (K, N));
        let mut rt = fused.runtime();
        // 1–255 rows (packed), 256 and more (gemm, or packed pieces)
        for rows in [1, 2, 5, 40, 255, 256, 700] {
            let x = Tensor::from_vec(values(rows * K, rows as u64), &[rows, K]).unwrap();
            let want = reference.run(std::slice::from_ref(&x)).unwrap();
            let got = rt.run(std::slice::from_ref(&x)).unwrap();
            let (want, got) = (
                want[0].as_slice::<f32>().unwrap(),
                got[0].as_slice::<f32>().unwrap(),
            );
            assert_eq!(got.len(), rows * N);
            let same = want
                .iter()
                .zip(got)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{threads} thread(s), {rows} rows: fused differs from matmul + add"
            );
        }
    }
}

/// Few rows against 2.4 MiB of weights split by columns at 2 and 3 threads (the
/// last piece's columns not a whole panel pair): the same bits at every thread
/// count, and each element within rounding of the product in f64.
#[test]
fn wide_products_split_by_columns_keep_their_bits() {
    let (k, n) = (640, 1000);
    let (w, bias) = weights(k, n);
    for rows in [1, 3, 17, 64] {
        let xs = values(rows * k, 10 + rows as u64);
        let x = Tensor::from_vec(xs.clone(), &[rows, k]).unwrap();
        let fused = same_at_1_2_3_threads(true, (k, n), &x);
        let separate = same_at_1_2_3_threads(false, (k, n), &x);
        assert!(
            fused
                .iter()
                .zip(&separate)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        for (i, row) in fused.chunks_exact(n).enumerate() {
            for (j, &got) in row.iter().enumerate() {
                let (mut sum, mut size) = (f64::from(bias[j]), f64::from(bias[j]).abs());
                for kk in 0..k {
                    let p = f64::from(xs[i * k + kk]) * f64::from(w[kk * n + j]);
                    sum += p;
                    size += p.abs();
                }
                let err = (f64::from(got) - sum).abs();
                assert!(
                    err <= size * k as f64 * f64::from(f32::EPSILON),
                    "[{i}, {j}] of {rows} rows: {got} vs {sum}"
                );
            }
        }
    }
}

/// Row pieces of a product that runs whole on its packed weights (each piece
/// streams all of them) are no more than the threads: one thread runs it whole,
/// two and three split it, and every count gives the same bits (rows 128 and 100
/// on 256 KiB of weights, too few for the column split).
#[test]
fn packed_products_split_rows_only_across_threads() {
    let (k, n) = (256, 256);
    for rows in [100, 128] {
        let x = Tensor::from_vec(values(rows * k, rows as u64), &[rows, k]).unwrap();
        same_at_1_2_3_threads(true, (k, n), &x);
        for threads in [1, 2, 3] {
            let m = module(true, threads, (k, n));
            m.runtime().run(std::slice::from_ref(&x)).unwrap();
            let split = m.stats().global.split_ops > 0;
            assert_eq!(split, threads > 1, "{rows} rows at {threads} thread(s)");
        }
    }
}
