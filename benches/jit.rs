//! JIT-tier benchmarks on `builtin:elementwise` (one fusible region):
//! - `hit`: batch 16 after the region's kernel was compiled (guard hit, kernel runs);
//! - `interp`: the same run on the interpreter, for the ratio;
//! - `miss`: strong guards, no shape families, cycling over 64 batch sizes that are
//!   never hot (each size once per profile window), so every run is a guard miss that
//!   falls back to the interpreter (deoptimization); `interp_cycle` is the same cycle
//!   on the interpreter, so `miss - interp_cycle` is the guard-miss overhead.
//!
//! Compile time per kernel is read from the module's counters after the warm-up and
//! printed (`compile: N kernels, X µs each`), since a compile happens once per key.

use criterion::{Criterion, criterion_group, criterion_main};
use shapejit::{CompileMode, GuardPolicy, Module, Options, Tensor, Tier};
use shapejit_benches::input;
use std::hint::black_box;
use std::time::Duration;

const WIDTH: usize = shapejit::builtin::ELEMENTWISE_WIDTH;

fn jit_options() -> Options {
    Options {
        tier: Tier::Jit,
        compile: CompileMode::Sync,
        ..Options::default()
    }
}

/// Runs batch `batch` until a run compiles nothing more; returns the module.
fn warmed(options: Options, batch: usize) -> Module {
    let module =
        Module::from_graph(shapejit::builtin::elementwise(), options).expect("elementwise loads");
    let x = [input(&[batch, WIDTH])];
    let mut rt = module.runtime();
    let compiles = |m: &Module| m.stats().slots.iter().map(|s| s.compiles).sum::<u64>();
    for _ in 0..=module.vm().options().promote_threshold + 4 {
        rt.run(&x).expect("runs");
    }
    let stats = module.stats();
    let n = compiles(&module);
    let us: u64 = stats.slots.iter().map(|s| s.compile_us).sum();
    eprintln!(
        "compile: {n} kernels, {} µs each",
        us.checked_div(n).unwrap_or(0)
    );
    module
}

fn jit(c: &mut Criterion) {
    let mut group = c.benchmark_group("jit_elementwise");
    group.measurement_time(Duration::from_secs(3));
    let x16 = [input(&[16, WIDTH])];
    let hot = warmed(jit_options(), 16);
    let mut rt = hot.runtime();
    group.bench_function("hit_b16", |b| {
        b.iter(|| black_box(rt.run(&x16).expect("runs")))
    });
    let interp =
        Module::from_graph(shapejit::builtin::elementwise(), Options::interp()).expect("loads");
    let mut rt = interp.runtime();
    group.bench_function("interp_b16", |b| {
        b.iter(|| black_box(rt.run(&x16).expect("runs")))
    });

    let cycle: Vec<[Tensor; 1]> = (17..17 + 64).map(|b| [input(&[b, WIDTH])]).collect();
    let strict = Options {
        guard: GuardPolicy::Strong,
        families: false,
        window: 64,
        ..jit_options()
    };
    for (name, module) in [
        ("miss_cycle", warmed(strict, 16)),
        ("interp_cycle", interp.clone()),
    ] {
        let mut rt = module.runtime();
        let mut i = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % cycle.len();
                black_box(rt.run(&cycle[i]).expect("runs"))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, jit);
criterion_main!(benches);
