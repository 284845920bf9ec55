//! Slice kernels of `shapejit_kernels::vmath` at each CPU level the machine has:
//! throughput in elements per second (criterion prints ns per element as its
//! inverse) on 16 Ki elements (in L1/L2: compute-bound), so levels compare
//! in the same run; `vmath_tail/…` on inputs in the far tails that take a second
//! formula. `cargo bench -p shapejit-benches --bench vmath`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use shapejit_kernels::{Level, Unary, cpu};
use std::hint::black_box;

const N: usize = 16 * 1024;

/// `k` on `x` at every level the CPU has, in `group`.
fn at_each_level(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    k: Unary,
    x: &[f32],
    out: &mut [f32],
) {
    for level in Level::ALL.into_iter().filter(|&l| cpu::supported(l)) {
        group.bench_function(BenchmarkId::new(format!("{k:?}"), level), |b| {
            b.iter(|| {
                k.apply_at(level, black_box(x), out).expect("same lengths");
                black_box(&out);
            })
        });
    }
}

fn vmath(c: &mut Criterion) {
    // a GELU-like spread of activations: values in [-4, 4)
    let x: Vec<f32> = (0..N)
        .map(|i| ((i * 7919) % 8000) as f32 / 1000.0 - 4.0)
        .collect();
    let mut out = vec![0f32; N];
    let mut group = c.benchmark_group("vmath");
    group.throughput(Throughput::Elements(N as u64));
    for &k in Unary::ALL {
        at_each_level(&mut group, k, &x, &mut out);
    }
    group.finish();
    // the far tails, which take a second formula (`math.rs`: GELU below -5.5,
    // GELU-tanh below -5.2, sigmoid and SiLU below -88): every vector in them
    let tails = [
        (Unary::GeluErf, -13.0, -5.6),
        (Unary::GeluTanh, -9.0, -5.3),
        (Unary::Sigmoid, -100.0, -89.0),
        (Unary::Silu, -100.0, -89.0),
    ];
    let mut group = c.benchmark_group("vmath_tail");
    group.throughput(Throughput::Elements(N as u64));
    for (k, lo, hi) in tails {
        let x: Vec<f32> = (0..N)
            .map(|i| lo + (hi - lo) * i as f32 / N as f32)
            .collect();
        at_each_level(&mut group, k, &x, &mut out);
    }
    group.finish();
}

criterion_group!(benches, vmath);
criterion_main!(benches);
