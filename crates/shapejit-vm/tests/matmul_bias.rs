//! `matmul_bias` in the interpreter, with constant weights: the packed kernel
//! adding the bias in its epilogue (2–255 rows), `gemm` then the bias (1 row,
//! 256 and more), and split into pieces at 1–3 threads — each bit for bit the
//! `matmul` and `add` it replaces.

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

/// `y = x @ w + bias` for `x [rows, K]`, as one `matmul_bias` or as
/// `matmul` then `add`.
fn module(fused: bool, threads: usize) -> Module {
    let mut b = GraphBuilder::new("linear");
    let x = b.input("x", DType::F32, shape!["rows", K as i64]);
    let w = b.constant("w", Tensor::from_vec(values(K * N, 1), &[K, N]).unwrap());
    let bias = b.constant("bias", Tensor::from_vec(values(N, 2), &[N]).unwrap());
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

#[test]
fn fused_bias_is_bit_identical_to_the_separate_add() {
    let separate = module(false, 1);
    let mut reference = separate.runtime();
    for threads in [1, 2, 3] {
        let fused = module(true, threads);
        let mut rt = fused.runtime();
        // one row (gemm), 2–255 (packed), 256 and more (gemm, or packed pieces)
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
