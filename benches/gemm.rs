//! GEMM throughput through `shapejit_kernels::matmul::matmul` at the reference
//! transformer's shapes (M×K×N = 32×256×256: one projection at batch 1;
//! 2048×256×1024 and 2048×1024×256: the FFN at batch 64), next to the machine's
//! measured single-core FMA peak at the widest CPU level (`fma_peak`, see
//! `shapejit_benches::fma_probe`).
//!
//! `packed/…` runs the same products through `shapejit_kernels::packed` with the right
//! operand packed once (what JIT matmul kernels do with constant weights).
//!
//! `sweep/…` times both paths at every reference product — the built-in transformer's
//! projections at M = 32·B (B = 1, 4, 16, 64) and the MLP's layers at M = B — which is
//! what `shapejit_kernels::packed::packed_pays` is chosen from; `attention/…` the
//! transformer's batched per-head products (B·8 products of 32×32×32 at B = 64);
//! `gemv/…` matrix-vector products over packed weights that stream from memory.
//!
//! Criterion's throughput is in FLOP (2·M·N·K per product): read `Gelem/s` as GFLOP/s.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use shapejit_benches::{fma_probe, fma_probe_flops};
use shapejit_kernels::attention::{self, Dims, Head, Scale, Strided};
use shapejit_kernels::matmul::matmul;
use shapejit_kernels::packed::{PackedB, matmul_packed};
use shapejit_kernels::{View, ViewMut};
use std::hint::black_box;
use std::time::Duration;

/// Benchmarks one m×k×n product twice in `group`: `gemm` packing the weights per call
/// (as `gemm_id`), and the weights packed once (`packed`).
fn gemm_and_packed(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    (m, k, n): (usize, usize, usize),
    gemm_id: &str,
) {
    let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 * 0.01).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.01).collect();
    let mut out = vec![0f32; m * n];
    let name = format!("{m}x{k}x{n}");
    group.throughput(Throughput::Elements(2 * (m * n * k) as u64));
    group.bench_function(BenchmarkId::new(gemm_id, &name), |bench| {
        bench.iter(|| {
            let av = View::contiguous(&a, &[m, k]).expect("a fits");
            let bv = View::contiguous(&b, &[k, n]).expect("b fits");
            let mut ov = ViewMut::contiguous(&mut out, &[m, n]).expect("out fits");
            matmul(&mut ov, &av, &bv, 1.0, false).expect("shapes agree");
            black_box(&out);
        })
    });
    let packed = PackedB::pack(&View::contiguous(&b, &[k, n]).expect("b fits")).expect("packs");
    group.bench_function(BenchmarkId::new("packed", &name), |bench| {
        bench.iter(|| {
            let av = View::contiguous(&a, &[m, k]).expect("a fits");
            matmul_packed(&mut out, &av, &packed, 1.0).expect("shapes agree");
            black_box(&out);
        })
    });
}

fn gemm(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    for (m, k, n) in [(32, 256, 256), (2048, 256, 1024), (2048, 1024, 256)] {
        gemm_and_packed(&mut group, (m, k, n), "f32");
    }
    const ITERS: usize = 1 << 16;
    if fma_probe(1).is_some() {
        group.throughput(Throughput::Elements(fma_probe_flops(ITERS)));
        group.bench_function("fma_peak", |bench| {
            bench.iter(|| black_box(fma_probe(black_box(ITERS))))
        });
    }
    group.finish();
}

fn sweep(c: &mut Criterion) {
    let mut group = c.benchmark_group("sweep");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    let transformer = [1, 4, 16, 64]
        .into_iter()
        .flat_map(|b| [(32 * b, 256, 256), (32 * b, 256, 1024), (32 * b, 1024, 256)]);
    let mlp = [1, 4, 16, 64]
        .into_iter()
        .flat_map(|b| [(b, 512, 1024), (b, 1024, 1024), (b, 1024, 10)]);
    for (m, k, n) in transformer.chain(mlp) {
        gemm_and_packed(&mut group, (m, k, n), "gemm");
    }
    group.finish();
}

/// Matrix-vector products over weights far larger than the caches, packed once:
/// VGG-19's first two fully connected layers at batch 1 (411 MB and 67 MB of
/// weights streaming from memory on every call). Throughput in bytes of weights.
fn gemv(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemv");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for (k, n) in [(25_088, 4096), (4096, 4096)] {
        let a: Vec<f32> = (0..k).map(|i| (i % 13) as f32 * 0.01).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.01).collect();
        let packed = PackedB::pack(&View::contiguous(&b, &[k, n]).expect("b fits")).expect("packs");
        drop(b);
        let mut out = vec![0f32; n];
        group.throughput(Throughput::Bytes(4 * (k * n) as u64));
        group.bench_function(BenchmarkId::new("packed", format!("1x{k}x{n}")), |bench| {
            bench.iter(|| {
                let av = View::contiguous(&a, &[1, k]).expect("a fits");
                matmul_packed(&mut out, &av, &packed, 1.0).expect("shapes agree");
                black_box(&out);
            })
        });
    }
    group.finish();
}

fn attention(c: &mut Criterion) {
    let mut group = c.benchmark_group("attention");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(2));
    let (products, s, d) = (64 * 8, 32, 32);
    let q: Vec<f32> = (0..products * s * d)
        .map(|i| (i % 13) as f32 * 0.01)
        .collect();
    let kt: Vec<f32> = (0..products * d * s)
        .map(|i| (i % 7) as f32 * 0.01)
        .collect();
    let mut out = vec![0f32; products * s * s];
    group.throughput(Throughput::Elements(2 * (products * s * s * d) as u64));
    group.bench_function(
        BenchmarkId::new("batched", format!("{products}x{s}x{d}x{s}")),
        |bench| {
            bench.iter(|| {
                let qv = View::contiguous(&q, &[products, s, d]).expect("q fits");
                let kv = View::contiguous(&kt, &[products, d, s]).expect("k fits");
                let mut ov = ViewMut::contiguous(&mut out, &[products, s, s]).expect("out fits");
                matmul(&mut ov, &qv, &kv, 1.0, false).expect("shapes agree");
                black_box(&out);
            })
        },
    );
    // the fused head (`shapejit_kernels::attention::head`) over the same heads as the
    // JIT's attention regions run them: both products, a scale and the softmax, the
    // operands cut from `[64, s, 8, d]` projections (rows 8·d apart, `k` an
    // exporter's `Kᵀ` view), the next head prefetched; its throughput counts both
    // products' FLOP
    let v: Vec<f32> = (0..products * s * d)
        .map(|i| (i % 5) as f32 * 0.01)
        .collect();
    let dims = Dims {
        s_q: s,
        s_k: s,
        d,
        d_v: d,
    };
    let mut scratch = vec![0f32; dims.scratch_len()];
    let mut fused = vec![0f32; products * s * d];
    let level = shapejit_kernels::cpu::level();
    let heads = 8;
    let row = (heads * d) as isize;
    let head_args = |p: usize, out: *mut f32| {
        let at = (p / heads) * s * heads * d + (p % heads) * d;
        Head {
            q: Strided {
                ptr: q[at..].as_ptr(),
                row,
                col: 1,
            },
            k: Strided {
                ptr: kt[at..].as_ptr(),
                row: 1,
                col: row,
            },
            v: Strided {
                ptr: v[at..].as_ptr(),
                row,
                col: 1,
            },
            mask: None,
            out,
            dims,
            scale: Scale::Mul(0.125),
        }
    };
    group.throughput(Throughput::Elements(4 * (products * s * s * d) as u64));
    group.bench_function(
        BenchmarkId::new("fused", format!("{products}x{s}x{d}")),
        |bench| {
            bench.iter(|| {
                for p in 0..products {
                    let out = fused[p * s * d..].as_mut_ptr();
                    if p + 1 < products {
                        attention::prefetch(&head_args(p + 1, out));
                    }
                    // SAFETY: each operand is `s × d` floats of its buffer; `out` is
                    // disjoint from them.
                    unsafe { attention::head(level, &head_args(p, out), &mut scratch) };
                }
                black_box(&fused);
            })
        },
    );
    group.finish();
}

criterion_group!(benches, gemm, sweep, gemv, attention);
criterion_main!(benches);
