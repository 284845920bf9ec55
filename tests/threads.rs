//! Intra-op threads never change results: the built-in models and the ONNX models
//! of `../shared/models` (SKIP printed when absent; a failure in CI) run on
//! the interpreter at 1, 2 and 3 threads, at batch 1, 4, 16, 33 and 64, and every
//! output is bit-identical to the single-thread run. The transformer at batch 64
//! must have run split ops, so the comparison covers the pool's paths.

use shapejit::{Module, Options};
use shapejit_tests::inputs::seeded;
use shapejit_tests::shared;

const BATCHES: [usize; 5] = [1, 4, 16, 33, 64];

fn options(threads: usize) -> Options {
    Options {
        threads,
        ..Options::interp()
    }
}

/// Runs `model` at every batch on 1, 2 and 3 threads; returns the split-op count
/// of the 2-thread module.
fn check(model: &str) -> u64 {
    let modules: Vec<Module> = [1, 2, 3]
        .iter()
        .map(|&t| Module::load(model, options(t)).unwrap())
        .collect();
    for (m, t) in modules.iter().zip([1, 2, 3]) {
        assert_eq!(m.vm().options().threads, t, "{model}");
    }
    let mut runtimes: Vec<_> = modules.iter().map(Module::runtime).collect();
    for batch in BATCHES {
        let x = seeded(&modules[0], batch, batch as u64);
        let want = runtimes[0].run(&x).unwrap();
        for (rt, threads) in runtimes.iter_mut().zip([1, 2, 3]).skip(1) {
            // twice: the first run starts the pool, the second reuses it
            for _ in 0..2 {
                let got = rt.run(&x).unwrap();
                assert_eq!(got.len(), want.len());
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g.shape(), w.shape(), "{model} batch {batch} output {k}");
                    assert!(
                        g.bytes() == w.bytes(),
                        "{model} batch {batch} output {k}: {threads} threads differ from 1"
                    );
                }
            }
        }
    }
    modules[1].stats().global.split_ops
}

#[test]
fn builtin_models_are_bit_identical_at_1_2_3_threads() {
    let split = check("builtin:transformer");
    assert!(split > 0, "the transformer at batch 64 ran no op in pieces");
    for name in ["mlp", "elementwise"] {
        check(&format!("builtin:{name}"));
    }
}

#[test]
fn shared_onnx_models_are_bit_identical_at_1_2_3_threads() {
    for name in ["transformer", "mlp", "convnet", "elementwise"] {
        if let Some(path) = shared::model(name) {
            check(path.to_str().unwrap());
        }
    }
}
