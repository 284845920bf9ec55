//! GFLOP/s of `matmul` (the `gemm` crate, packing the weights on every call) against
//! `packed::matmul_packed` (weights packed once) at the built-in transformer's
//! shapes, cycling through ~18 MiB of distinct weight matrices as a model run does
//! (`cargo run --release -p shapejit-kernels --example packed_vs_gemm`). Medians.

use shapejit_kernels::packed::{PackedB, matmul_packed};
use shapejit_kernels::{View, ViewMut, matmul::matmul};
use std::time::Instant;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn main() {
    let shapes = [
        (1, 512, 1024),
        (2, 512, 1024),
        (4, 512, 1024),
        (8, 512, 1024),
        (32, 256, 256),
        (32, 256, 1024),
        (32, 1024, 256),
        (128, 256, 1024),
        (512, 256, 1024),
        (2048, 256, 1024),
        (2048, 1024, 256),
    ];
    for (m, k, n) in shapes {
        let n_weights = (18 << 20) / (k * n * 4) + 1;
        let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 * 0.01).collect();
        let weights: Vec<Vec<f32>> = (0..n_weights)
            .map(|s| (0..k * n).map(|i| ((i + s) % 7) as f32 * 0.01).collect())
            .collect();
        let packed: Vec<PackedB> = weights
            .iter()
            .map(|w| PackedB::pack(&View::contiguous(w, &[k, n]).expect("fits")).expect("packs"))
            .collect();
        let (mut out, mut out_packed) = (vec![0f32; m * n], vec![0f32; m * n]);
        let reps = (2_000_000_000 / (2 * m * n * k)).clamp(5, 400);
        let av = View::contiguous(&a, &[m, k]).expect("fits");
        let (mut t_gemm, mut t_packed) = (Vec::new(), Vec::new());
        for r in 0..reps {
            let w = &weights[r % n_weights];
            let t = Instant::now();
            let wv = View::contiguous(w, &[k, n]).expect("fits");
            let mut ov = ViewMut::contiguous(&mut out, &[m, n]).expect("fits");
            matmul(&mut ov, &av, &wv, 1.0, false).expect("shapes agree");
            t_gemm.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            matmul_packed(&mut out_packed, &av, &packed[r % n_weights], 1.0).expect("fits");
            t_packed.push(t.elapsed().as_secs_f64());
        }
        let flop = 2.0 * (m * n * k) as f64;
        let (g, p) = (flop / median(t_gemm) / 1e9, flop / median(t_packed) / 1e9);
        println!(
            "{m:5}x{k:5}x{n:5}: gemm {g:6.1} GFLOP/s  packed {p:6.1} GFLOP/s  ({:.2}x)",
            p / g
        );
    }
}
