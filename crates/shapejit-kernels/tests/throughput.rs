//! Throughput smoke checks: runs the hot kernels at transformer sizes (scaled
//! down in debug builds), checks sampled results against f64, and prints the
//! measured throughput (`cargo test --release -p shapejit-kernels --test
//! throughput -- --nocapture`). Benchmarks proper live in `benches/`.

mod support;

use shapejit_kernels::elementwise::{binary, unary};
use shapejit_kernels::matmul::matmul;
use shapejit_kernels::{Level, StridedShape, Unary, View, ViewMut, cpu, math, rows};
use std::time::Instant;

/// Problem sizes are divided by this in debug builds.
const SCALE: usize = if cfg!(debug_assertions) { 16 } else { 1 };

fn data(n: usize, seed: u32) -> Vec<f32> {
    support::data(n, seed, -2.0, 2.0)
}

/// Median seconds of `reps` runs.
fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[reps / 2]
}

fn gemm_case(m: usize, k: usize, n: usize, trans_b: bool) {
    let (m, n) = (m / SCALE, n / SCALE);
    let a = data(m * k, 1);
    let b = data(k * n, 2);
    let mut out = vec![0f32; m * n];
    let av = View::contiguous(&a, &[m, k]).unwrap();
    // b stored as [n, k] and read transposed, as x @ W^T
    let bg = if trans_b {
        StridedShape::new(&[k, n], &[1, k as isize], 0).unwrap()
    } else {
        StridedShape::contiguous(&[k, n]).unwrap()
    };
    let bv = View::new(&b, bg).unwrap();
    let secs = time(5, || {
        let mut o = ViewMut::contiguous(&mut out, &[m, n]).unwrap();
        matmul(&mut o, &av, &bv, 1.0, false).unwrap();
    });
    for (i, j) in [(0, 0), (m - 1, n - 1), (m / 2, n / 3)] {
        let want: f64 = (0..k)
            .map(|p| a[i * k + p] as f64 * bv.at(&[p, j]) as f64)
            .sum();
        let mag: f64 = (0..k)
            .map(|p| (a[i * k + p] as f64 * bv.at(&[p, j]) as f64).abs())
            .sum();
        assert!(
            (out[i * n + j] as f64 - want).abs() <= 1e-5 * mag,
            "gemm {m}x{k}x{n} at ({i},{j})"
        );
    }
    let gflops = 2.0 * (m * n * k) as f64 / secs / 1e9;
    println!(
        "gemm {m}x{k}x{n} (b{}): {:.2} ms, {gflops:.1} GFLOP/s",
        if trans_b { "^T" } else { "" },
        secs * 1e3
    );
}

#[test]
fn gemm_throughput() {
    gemm_case(2048, 256, 1024, false);
    gemm_case(2048, 1024, 256, false);
    gemm_case(2048, 256, 1024, true);
    gemm_case(2048, 1024, 256, true);
}

#[test]
fn batched_small_matmul_throughput() {
    // attention scores: [batch·heads, 32, 32] @ [batch·heads, 32, 32]
    let (bh, s, d) = (512 / SCALE, 32, 32);
    let a = data(bh * s * d, 3);
    let b = data(bh * d * s, 4);
    let mut out = vec![0f32; bh * s * s];
    let av = View::contiguous(&a, &[bh, s, d]).unwrap();
    let bv = View::new(
        &b,
        StridedShape::new(&[bh, d, s], &[(d * s) as isize, 1, d as isize], 0).unwrap(),
    )
    .unwrap();
    let secs = time(5, || {
        let mut o = ViewMut::contiguous(&mut out, &[bh, s, s]).unwrap();
        matmul(&mut o, &av, &bv, 1.0, false).unwrap();
    });
    let want: f64 = (0..d).map(|p| a[p] as f64 * bv.at(&[0, p, 0]) as f64).sum();
    assert!((out[0] as f64 - want).abs() < 1e-4);
    let gflops = 2.0 * (bh * s * s * d) as f64 / secs / 1e9;
    println!(
        "batched matmul {bh}x[{s}x{d}x{s}]: {:.3} ms, {gflops:.1} GFLOP/s",
        secs * 1e3
    );
}

fn unary_case(name: &str, a: &View<f32>, out: &mut [f32], f: impl Fn(f32) -> f32 + Copy) {
    let n = out.len();
    let secs = time(5, || {
        unary(&mut ViewMut::contiguous(out, &[n]).unwrap(), a, f).unwrap()
    });
    let x = a.as_contiguous().unwrap();
    assert_eq!(out[9].to_bits(), f(x[9]).to_bits());
    // in L1: 4096 elements, many times
    let small = &x[..4096];
    let mut o = vec![0f32; 4096];
    let sv = View::contiguous(small, &[4096]).unwrap();
    let secs_l1 = time(5, || {
        for _ in 0..100 {
            unary(&mut ViewMut::contiguous(&mut o, &[4096]).unwrap(), &sv, f).unwrap();
        }
    });
    println!(
        "{name}: {:.3} ns/elem ({:.3} in L1)",
        secs * 1e9 / n as f64,
        secs_l1 * 1e9 / 409_600.0
    );
}

#[test]
fn elementwise_throughput() {
    let n = (1 << 22) / SCALE;
    let (a, b) = (data(n, 5), data(n, 6));
    let mut out = vec![0f32; n];
    let (av, bv) = (
        View::contiguous(&a, &[n]).unwrap(),
        View::contiguous(&b, &[n]).unwrap(),
    );
    let secs = time(5, || {
        binary(
            &mut ViewMut::contiguous(&mut out, &[n]).unwrap(),
            &av,
            &bv,
            |x, y| x + y,
        )
        .unwrap()
    });
    assert_eq!(out[7], a[7] + b[7]);
    println!("add: {:.3} ns/elem", secs * 1e9 / n as f64);
    unary_case("exp", &av, &mut out, math::exp);
    unary_case("tanh", &av, &mut out, math::tanh);
    unary_case("sigmoid", &av, &mut out, math::sigmoid);
    unary_case("gelu_erf", &av, &mut out, math::gelu_erf);
    unary_case("gelu_tanh", &av, &mut out, math::gelu_tanh);
    // the same functions through their slice kernels at each level
    for &k in Unary::ALL {
        for level in Level::ALL.into_iter().filter(|&l| cpu::supported(l)) {
            let secs = time(5, || k.apply_at(level, &a, &mut out).unwrap());
            assert_eq!(out[9].to_bits(), {
                let mut one = [0f32; 1];
                k.apply_at(level, &a[9..10], &mut one).unwrap();
                one[0].to_bits()
            });
            println!(
                "{k:?} slice kernel at {level}: {:.3} ns/elem",
                secs * 1e9 / n as f64
            );
        }
    }
    // strided (transposed) add
    let side = 2048 / SCALE.min(8);
    let t = View::new(
        &a[..side * side],
        StridedShape::new(&[side, side], &[1, side as isize], 0).unwrap(),
    )
    .unwrap();
    let c = View::contiguous(&b[..side * side], &[side, side]).unwrap();
    let secs = time(5, || {
        binary(
            &mut ViewMut::contiguous(&mut out[..side * side], &[side, side]).unwrap(),
            &t,
            &c,
            |x, y| x + y,
        )
        .unwrap()
    });
    assert_eq!(out[1], a[side] + b[1]);
    println!(
        "add (one operand transposed): {:.3} ns/elem",
        secs * 1e9 / (side * side) as f64
    );
}

#[test]
fn row_kernel_throughput() {
    let n = (1 << 21) / SCALE;
    let x = data(n, 7);
    let mut out = vec![0f32; n];
    let secs = time(5, || {
        rows::softmax(&x, &mut out, n / 32, 32, 1, false).unwrap()
    });
    let row_sum: f32 = out[..32].iter().sum();
    assert!((row_sum - 1.0).abs() < 1e-5);
    println!("softmax rows of 32: {:.3} ns/elem", secs * 1e9 / n as f64);
    let (scale, bias) = (vec![1.5f32; 256], vec![0.25f32; 256]);
    let secs = time(5, || {
        rows::layer_norm(&x, &mut out, 256, &scale, Some(&bias), 1e-5).unwrap()
    });
    let mean: f64 = x[..256].iter().map(|&v| v as f64).sum::<f64>() / 256.0;
    let var: f64 = x[..256]
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / 256.0;
    let want = (x[3] as f64 - mean) / (var + 1e-5).sqrt() * 1.5 + 0.25;
    assert!((out[3] as f64 - want).abs() < 1e-5);
    println!(
        "layer_norm rows of 256: {:.3} ns/elem",
        secs * 1e9 / n as f64
    );
}
