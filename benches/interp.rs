//! Interpreter benchmarks: dispatch overhead per instruction, latency of the
//! reference transformer at batch 1/4/16/64, and profiling on vs off.
//!
//! Read the dispatch numbers as `1 / throughput` (criterion reports instructions/s).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use shapejit::{Module, Options};
use shapejit_benches::{input, tiny_op_chain};
use std::hint::black_box;
use std::time::Duration;

fn interp(profile: bool) -> Options {
    Options {
        profile,
        ..Options::interp()
    }
}

fn dispatch(c: &mut Criterion) {
    let mut group = c.benchmark_group("dispatch");
    group.measurement_time(Duration::from_secs(3));
    for n_ops in [64, 512] {
        let module =
            Module::from_graph(tiny_op_chain(n_ops), interp(false)).expect("tiny chain loads");
        let n_instrs = module.program().instrs.len() as u64;
        let x = [input(&[1, 4])];
        let mut rt = module.runtime();
        group.throughput(Throughput::Elements(n_instrs));
        group.bench_function(BenchmarkId::new("tiny_ops", n_ops), |b| {
            b.iter(|| black_box(rt.run(&x).expect("runs")))
        });
    }
    group.finish();
}

fn transformer(c: &mut Criterion) {
    let mut group = c.benchmark_group("transformer_interp");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    let module = Module::from_graph(shapejit::builtin::transformer(), interp(true))
        .expect("transformer loads");
    for batch in [1, 4, 16, 64] {
        let x = [input(&[batch, 32, 256])];
        let mut rt = module.runtime();
        group.bench_function(BenchmarkId::new("batch", batch), |b| {
            b.iter(|| black_box(rt.run(&x).expect("runs")))
        });
    }
    group.finish();
}

fn profiling_overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("profiling");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    let x = [input(&[1, 32, 256])];
    for profile in [false, true] {
        let module = Module::from_graph(shapejit::builtin::transformer(), interp(profile))
            .expect("transformer loads");
        let mut rt = module.runtime();
        let name = if profile { "on" } else { "off" };
        group.bench_function(BenchmarkId::new("transformer_b1", name), |b| {
            b.iter(|| black_box(rt.run(&x).expect("runs")))
        });
    }
    let chain = tiny_op_chain(512);
    for profile in [false, true] {
        let module = Module::from_graph(chain.clone(), interp(profile)).expect("tiny chain loads");
        let mut rt = module.runtime();
        let x = [input(&[1, 4])];
        let name = if profile { "on" } else { "off" };
        group.bench_function(BenchmarkId::new("tiny_ops_512", name), |b| {
            b.iter(|| black_box(rt.run(&x).expect("runs")))
        });
    }
    group.finish();
}

criterion_group!(benches, dispatch, transformer, profiling_overhead);
criterion_main!(benches);
