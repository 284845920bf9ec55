//! JIT vs interpreter on graphs built with the builder: every batch size in sync mode,
//! families, LRU bounds, four threads sharing a module, a held-back compiler, off
//! mode, untranslatable regions.
//!
//! Tolerance: |jit − interp| ≤ 2e-5·(1 + |interp|) — the ops' documented tolerances
//! (≤ 4 ulp-ish for the transcendental ones) over a chain of a dozen ops.

use super::{JitHandle, jit_module};
use shapejit_bytecode::lower;
use shapejit_ir::{DType, GraphBuilder, Tensor, shape};
use shapejit_vm::module::Module;
use shapejit_vm::options::{CompileMode, Options};
use std::sync::Arc;
use std::time::Duration;

const INNER: usize = 33;

/// `x: [batch, 4, 33]`, `w: [batch, 33, 4]` (transposed to a strided view), a bias;
/// one elementwise region with broadcasting, a strided input, compare + where and the
/// transcendental ops.
fn graph() -> shapejit_bytecode::Program {
    let mut b = GraphBuilder::new("ew");
    let x = b.input("x", DType::F32, shape!["batch", 4, INNER]);
    let w = b.input("w", DType::F32, shape!["batch", INNER, 4]);
    let bias = b.constant(
        "bias",
        Tensor::from_vec(
            (0..INNER).map(|i| i as f32 / 40.0 - 0.3).collect(),
            &[INNER],
        )
        .unwrap(),
    );
    let zero = b.const_f32(0.0).unwrap();
    let wt = b.transpose(w, &[0, 2, 1]).unwrap();
    // a connected chain (every op reads an earlier one), so it forms one region
    let s = b.add(x, bias).unwrap();
    let g = b.gelu(s, false).unwrap();
    let u = b.mul(g, wt).unwrap();
    let sg = b.sigmoid(u).unwrap();
    let t = b.tanh(s).unwrap();
    let d = b.sub(sg, t).unwrap();
    let pos = b.gt(d, zero).unwrap();
    let e = b.exp(u).unwrap();
    let y = b.where_(pos, d, e).unwrap();
    let r = b.relu(y).unwrap();
    let out = b.add(r, wt).unwrap();
    b.output("y", out).unwrap();
    lower(&b.finish().unwrap()).unwrap()
}

fn inputs(batch: usize, seed: u32) -> Vec<Tensor> {
    let f = |i: usize, k: u32| {
        ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(k) % 1000) as f32 / 250.0 - 2.0
    };
    let n = batch * 4 * INNER;
    vec![
        Tensor::from_vec((0..n).map(|i| f(i, seed)).collect(), &[batch, 4, INNER]).unwrap(),
        Tensor::from_vec((0..n).map(|i| f(i, seed + 7)).collect(), &[batch, INNER, 4]).unwrap(),
    ]
}

fn assert_close(jit: &[Tensor], interp: &[Tensor], what: &str) {
    assert_eq!(jit.len(), interp.len());
    for (a, b) in jit.iter().zip(interp) {
        assert_eq!(a.shape(), b.shape(), "{what}");
        let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
        for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 2e-5 * (1.0 + y.abs()),
                "{what}: element {i}: jit {x}, interp {y}"
            );
        }
    }
}

fn sync_options() -> Options {
    Options {
        compile: CompileMode::Sync,
        promote_threshold: 2,
        ..Options::default()
    }
}

fn jit(options: Options) -> (Module, JitHandle) {
    let (module, handle) = jit_module(graph(), options).unwrap();
    (module, handle.expect("this host has AVX+FMA"))
}

fn totals(module: &Module) -> (u64, u64, u64, u64, u64) {
    let stats = module.stats();
    let sum =
        |f: &dyn Fn(&shapejit_vm::stats::SlotStats) -> u64| stats.slots.iter().map(f).sum::<u64>();
    (
        sum(&|s| s.kernel_hits),
        sum(&|s| s.compiles),
        sum(&|s| s.family_hits),
        sum(&|s| s.evictions),
        sum(&|s| s.compile_errors),
    )
}

#[test]
fn jit_matches_interpreter_at_every_batch_in_sync_mode() {
    let interp = Module::new(graph(), Options::interp()).unwrap();
    let (module, _h) = jit(Options {
        families: false,
        ..sync_options()
    });
    let (mut rj, mut ri) = (module.runtime(), interp.runtime());
    for batch in [1, 3, 4, 16, 33, 64] {
        for iter in 0..4u32 {
            let x = inputs(batch, iter);
            let want = ri.run(&x).unwrap();
            let got = rj.run(&x).unwrap();
            assert_close(&got, &want, &format!("batch {batch} iteration {iter}"));
        }
    }
    let (hits, compiles, family_hits, _, errors) = totals(&module);
    assert_eq!(errors, 0);
    assert_eq!(compiles, 6, "one exact kernel per batch size");
    assert_eq!(family_hits, 0);
    // iterations 0 and 1 interpret, 2 and 3 hit
    assert_eq!(hits, 12);
}

#[test]
fn family_kernel_serves_every_batch_size_1_to_70() {
    let interp = Module::new(graph(), Options::interp()).unwrap();
    let (module, _h) = jit(sync_options());
    let (mut rj, mut ri) = (module.runtime(), interp.runtime());
    for batch in 1..=70 {
        let x = inputs(batch, batch as u32);
        assert_close(
            &rj.run(&x).unwrap(),
            &ri.run(&x).unwrap(),
            &format!("batch {batch}"),
        );
    }
    let (hits, compiles, family_hits, _, errors) = totals(&module);
    assert_eq!(errors, 0);
    assert_eq!(compiles, 1, "the third batch size makes one family kernel");
    assert_eq!(family_hits, 67);
    assert_eq!(hits, 67);
}

#[test]
fn hot_keys_served_by_a_family_get_their_own_exact_kernel() {
    let interp = Module::new(graph(), Options::interp()).unwrap();
    let (module, _h) = jit(sync_options());
    let (mut rj, mut ri) = (module.runtime(), interp.runtime());
    let mut check = |batch: usize, iter: u32| {
        let x = inputs(batch, iter);
        assert_close(
            &rj.run(&x).unwrap(),
            &ri.run(&x).unwrap(),
            &format!("batch {batch} iteration {iter}"),
        );
    };
    for batch in 1..=3 {
        check(batch, 0);
    }
    let (_, compiles, ..) = totals(&module);
    assert_eq!(compiles, 1, "three batch sizes make the family kernel");
    for iter in 0..20 {
        check(5, iter);
    }
    let (hits, compiles, family_hits, evictions, errors) = totals(&module);
    assert_eq!(errors, 0);
    assert_eq!(evictions, 0, "the family kernel stays beside the exact one");
    // family calls 0 and 8 are sampled (threshold 2): the 9th call requests batch 5's
    // own kernel, so the remaining 11 calls run on it
    assert_eq!(compiles, 2);
    assert_eq!(hits, 20);
    assert_eq!(family_hits, 9);
}

#[test]
fn lru_evicts_and_bounds_live_code_bytes() {
    let interp = Module::new(graph(), Options::interp()).unwrap();
    let (module, handle) = jit(Options {
        families: false,
        cache_capacity: 2,
        ..sync_options()
    });
    let (mut rj, mut ri) = (module.runtime(), interp.runtime());
    let mut live_at_capacity = 0;
    for (n, batch) in (1..=10).enumerate() {
        for iter in 0..3u32 {
            let x = inputs(batch, iter);
            assert_close(
                &rj.run(&x).unwrap(),
                &ri.run(&x).unwrap(),
                &format!("batch {batch}"),
            );
        }
        let live = module.stats().global.live_code_bytes;
        if n == 1 {
            live_at_capacity = live;
        }
        if n >= 1 {
            // kernels of this graph differ by a few folded constants, not in size class
            assert!(
                live <= live_at_capacity * 3 / 2,
                "live code {live} B after {batch} shapes"
            );
        }
    }
    let region_slot = (0..module.program().slots.len())
        .map(|s| shapejit_bytecode::SlotId(s as u32))
        .find(|&s| handle.cached_kernels(s) > 0)
        .expect("a slot with kernels");
    assert_eq!(handle.cached_kernels(region_slot), 2);
    let (_, compiles, _, evictions, _) = totals(&module);
    assert_eq!(compiles, 10);
    assert_eq!(evictions, 8);
}

#[test]
fn four_threads_share_a_module_while_kernels_come_and_go() {
    let interp = Module::new(graph(), Options::interp()).unwrap();
    let batches = [1usize, 2, 4, 5, 16, 7, 33];
    let wanted: Arc<Vec<(Vec<Tensor>, Vec<Tensor>)>> = Arc::new(
        batches
            .iter()
            .map(|&b| {
                let x = inputs(b, 3);
                let y = interp.runtime().run(&x).unwrap();
                (x, y)
            })
            .collect(),
    );
    let (module, handle) = jit(Options {
        cache_capacity: 2,
        promote_threshold: 2,
        families: false,
        ..Options::default()
    });
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let module = module.clone();
            let wanted = wanted.clone();
            std::thread::spawn(move || {
                let mut rt = module.runtime();
                for i in 0..60 {
                    let (x, want) = &wanted[(i * (t + 1) + t) % wanted.len()];
                    assert_close(
                        &rt.run(x).unwrap(),
                        want,
                        &format!("thread {t} iteration {i}"),
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker thread");
    }
    assert!(handle.wait_idle(Duration::from_secs(10)));
    // the threads may finish before the background compiler installs anything: one
    // more pass over every key once it is idle meets the kernels still cached
    let mut rt = module.runtime();
    for (k, (x, want)) in wanted.iter().enumerate() {
        assert_close(
            &rt.run(x).unwrap(),
            want,
            &format!("after the threads, key {k}"),
        );
    }
    let (hits, compiles, _, evictions, errors) = totals(&module);
    assert_eq!(errors, 0);
    assert!(compiles >= 3, "compiles {compiles}");
    assert!(evictions >= 1, "evictions {evictions}");
    assert!(hits > 0);
}

#[test]
fn runs_complete_on_the_interpreter_while_the_compiler_is_held() {
    let interp = Module::new(graph(), Options::interp()).unwrap();
    let (module, handle) = jit(Options {
        promote_threshold: 2,
        ..Options::default()
    });
    let hold = handle.hold_compiler();
    let (mut rj, mut ri) = (module.runtime(), interp.runtime());
    let x = inputs(4, 1);
    let want = ri.run(&x).unwrap();
    for _ in 0..20 {
        assert_close(&rj.run(&x).unwrap(), &want, "held");
    }
    let (hits, compiles, ..) = totals(&module);
    assert_eq!((hits, compiles), (0, 0));
    assert!(module.stats().global.queue_depth >= 1);
    drop(hold);
    assert!(handle.wait_idle(Duration::from_secs(10)));
    assert_close(&rj.run(&x).unwrap(), &want, "released");
    let (hits, compiles, ..) = totals(&module);
    assert_eq!((hits, compiles), (1, 1));
    assert_eq!(module.stats().global.queue_depth, 0);
}

#[test]
fn off_mode_profiles_but_never_compiles() {
    let (module, _h) = jit(Options {
        compile: CompileMode::Off,
        ..sync_options()
    });
    let mut rt = module.runtime();
    for _ in 0..10 {
        rt.run(&inputs(3, 0)).unwrap();
    }
    let (hits, compiles, ..) = totals(&module);
    assert_eq!((hits, compiles), (0, 0));
    assert!(module.stats().slots.iter().any(|s| s.guard_misses >= 10));
}

#[test]
fn untranslatable_regions_stay_interpreted_and_are_counted() {
    // a reduction over the first axis has no row kernel
    let mut b = GraphBuilder::new("r0");
    let x = b.input("x", DType::F32, shape!["batch", 8]);
    let e = b.exp(x).unwrap();
    let s = b
        .reduce(shapejit_ir::ReduceOp::Sum, e, &[0], false)
        .unwrap();
    b.output("y", s).unwrap();
    let program = lower(&b.finish().unwrap()).unwrap();
    let interp = Module::new(program.clone(), Options::interp()).unwrap();
    let (module, _h) = jit_module(program, sync_options()).unwrap();
    let x = vec![Tensor::from_vec((0..16).map(|i| i as f32 / 8.0).collect(), &[2, 8]).unwrap()];
    let (mut rj, mut ri) = (module.runtime(), interp.runtime());
    for _ in 0..5 {
        assert_close(
            &rj.run(&x).unwrap(),
            &ri.run(&x).unwrap(),
            "axis-0 reduction",
        );
    }
    // other batch sizes: the same region and layout, so no new attempt
    for batch in [3, 5, 9] {
        let x = vec![Tensor::from_vec(vec![0.5f32; batch * 8], &[batch, 8]).unwrap()];
        for _ in 0..3 {
            assert_close(
                &rj.run(&x).unwrap(),
                &ri.run(&x).unwrap(),
                "axis-0 reduction",
            );
        }
    }
    let (hits, _, _, _, errors) = totals(&module);
    assert_eq!(hits, 0);
    assert_eq!(
        errors, 1,
        "one failed compile, never retried for the family"
    );
    let reasons: Vec<String> = module
        .stats()
        .slots
        .iter()
        .filter_map(|s| s.last_compile_error.clone())
        .collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("last axis"), "{reasons:?}");
}

/// A transformer-like block: layer norm (scale, bias) after a residual add, a matmul
/// with bias + gelu epilogue, a scaled softmax, a mean over the last axis with an
/// epilogue.
fn block() -> shapejit_bytecode::Program {
    let (h, f) = (32usize, 24usize);
    let mut b = GraphBuilder::new("block");
    let x = b.input("x", DType::F32, shape!["batch", 8, h]);
    let r = b.input("r", DType::F32, shape!["batch", 8, h]);
    let t = |n: usize, k: f32| {
        Tensor::from_vec(
            (0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) * k).collect(),
            &[n],
        )
        .unwrap()
    };
    let scale = b.constant("scale", t(h, 0.1));
    let bias = b.constant("bias", t(h, 0.05));
    let w = b.constant(
        "w",
        Tensor::from_vec(
            (0..h * f)
                .map(|i| ((i * 13 % 17) as f32 - 8.0) / 40.0)
                .collect(),
            &[h, f],
        )
        .unwrap(),
    );
    let wb = b.constant("wb", t(f, 0.02));
    let half = b.const_f32(0.5).unwrap();
    let s = b.add(x, r).unwrap();
    let n = b.layer_norm(s, scale, Some(bias), -1, 1e-5).unwrap();
    let m = b.matmul(n, w).unwrap();
    let m = b.add(m, wb).unwrap();
    let g = b.gelu(m, true).unwrap();
    let sm = b.mul(g, half).unwrap();
    let p = b.softmax(sm, -1).unwrap();
    let mean = b
        .reduce(shapejit_ir::ReduceOp::Mean, p, &[-1], true)
        .unwrap();
    let t = b.tanh(mean).unwrap();
    let y = b.mul(t, half).unwrap();
    b.output("p", p).unwrap();
    b.output("y", y).unwrap();
    lower(&b.finish().unwrap()).unwrap()
}

#[test]
fn reduction_and_matmul_regions_match_the_interpreter() {
    let program = block();
    let interp = Module::new(program.clone(), Options::interp()).unwrap();
    let (module, _h) = jit_module(
        program,
        Options {
            families: false,
            ..sync_options()
        },
    )
    .unwrap();
    let (mut rj, mut ri) = (module.runtime(), interp.runtime());
    for batch in [1, 3, 4, 16, 33, 64] {
        for iter in 0..3u32 {
            let x = inputs_block(batch, iter);
            assert_close(
                &rj.run(&x).unwrap(),
                &ri.run(&x).unwrap(),
                &format!("batch {batch} iteration {iter}"),
            );
        }
    }
    let stats = module.stats();
    for kind in ["region reduction", "region matmul_epilogue"] {
        let hits: u64 = stats
            .slots
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.kernel_hits)
            .sum();
        assert!(
            hits >= 6,
            "{kind}: {hits} hits\n{:#?}",
            stats
                .slots
                .iter()
                .filter(|s| s.kind.starts_with("region"))
                .collect::<Vec<_>>()
        );
    }
    let (_, _, _, _, errors) = totals(&module);
    assert_eq!(errors, 0);
    // w [32, 24] packed once for all six kernels (batches below 32 use it): two
    // 16-column panels of 32 rows
    assert_eq!(stats.global.packed_weight_bytes, 2 * 32 * 16 * 4);
}

#[test]
fn packing_weights_can_be_turned_off() {
    let program = block();
    let interp = Module::new(program.clone(), Options::interp()).unwrap();
    let options = Options {
        pack_weights: false,
        families: false,
        ..sync_options()
    };
    let (module, _h) = jit_module(program, options).unwrap();
    let (mut rj, mut ri) = (module.runtime(), interp.runtime());
    for iter in 0..3u32 {
        let x = inputs_block(4, iter);
        assert_close(&rj.run(&x).unwrap(), &ri.run(&x).unwrap(), "unpacked");
    }
    let stats = module.stats();
    assert_eq!(stats.global.packed_weight_bytes, 0);
    let hits: u64 = stats
        .slots
        .iter()
        .filter(|s| s.kind == "region matmul_epilogue")
        .map(|s| s.kernel_hits)
        .sum();
    assert!(hits > 0, "the matmul kernel still runs, on gemm");
}

#[test]
fn families_cover_reduction_and_matmul_regions() {
    let program = block();
    let interp = Module::new(program.clone(), Options::interp()).unwrap();
    let (module, _h) = jit_module(program, sync_options()).unwrap();
    let (mut rj, mut ri) = (module.runtime(), interp.runtime());
    for batch in 1..=20 {
        let x = inputs_block(batch, batch as u32);
        assert_close(
            &rj.run(&x).unwrap(),
            &ri.run(&x).unwrap(),
            &format!("batch {batch}"),
        );
    }
    let stats = module.stats();
    let family_hits: u64 = stats.slots.iter().map(|s| s.family_hits).sum();
    let regions = stats
        .slots
        .iter()
        .filter(|s| s.kind.starts_with("region"))
        .count() as u64;
    assert_eq!(
        family_hits,
        17 * regions,
        "every region served batches 4..=20 by a family kernel"
    );
}

fn inputs_block(batch: usize, seed: u32) -> Vec<Tensor> {
    let f = |i: usize, k: u32| {
        ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(k) % 1000) as f32 / 250.0 - 2.0
    };
    let n = batch * 8 * 32;
    vec![
        Tensor::from_vec((0..n).map(|i| f(i, seed)).collect(), &[batch, 8, 32]).unwrap(),
        Tensor::from_vec(
            (0..n).map(|i| f(i, seed + 3) * 0.5).collect(),
            &[batch, 8, 32],
        )
        .unwrap(),
    ]
}
