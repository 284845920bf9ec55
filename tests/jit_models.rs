//! JIT vs interpreter on whole models in sync-compile mode: the built-in transformer,
//! MLP and elementwise chain, and every ONNX model in `../shared/models` (SKIP
//! printed when absent; a failure in CI), at batch 1, 3, 4, 16, 33, 64.
//!
//! Each batch runs twice on both modules with the same input: the first JIT run
//! compiles (sync mode, promotion after one sighting), the second runs on the
//! kernels. Tolerance: |jit − interp| ≤ 1e-4·(1 + max|interp|) per output — the
//! kernels' documented op errors (a few ulp) and the matmuls' f32 summation order,
//! grown over a model's depth; a wrong element or a wrong shape is far outside it.

use shapejit::{CompileMode, Module, Options, Tier};
use shapejit_tests::inputs::seeded;
use shapejit_tests::shared;

const BATCHES: [usize; 6] = [1, 3, 4, 16, 33, 64];

fn jit_options() -> Options {
    Options {
        tier: Tier::Jit,
        compile: CompileMode::Sync,
        promote_threshold: 1,
        ..Options::default()
    }
}

fn compare_tiers(model: &str) {
    let interp = Module::load(model, Options::interp()).unwrap();
    let jit = Module::load(model, jit_options()).unwrap();
    let (mut ri, mut rj) = (interp.runtime(), jit.runtime());
    for batch in BATCHES {
        let x = seeded(&interp, batch, batch as u64);
        for iteration in 0..2 {
            let want = ri.run(&x).unwrap();
            let got = rj.run(&x).unwrap();
            assert_eq!(got.len(), want.len());
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.shape(), w.shape(), "{model} batch {batch} output {k}");
                let (g, w) = (g.as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
                let scale = 1.0 + w.iter().fold(0f32, |m, v| m.max(v.abs()));
                for (i, (a, b)) in g.iter().zip(w).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * scale,
                        "{model} batch {batch} iteration {iteration} output {k}[{i}]: jit {a}, interp {b}"
                    );
                }
            }
        }
    }
    let stats = jit.stats();
    let sum = |f: &dyn Fn(&shapejit::SlotStats) -> u64| stats.slots.iter().map(f).sum::<u64>();
    assert_eq!(sum(&|s| s.compile_errors), 0, "{model}");
    let hits = sum(&|s| s.kernel_hits);
    // a model whose every elementwise op fused into its convolutions (the
    // convnet: conv+relu) has no region left for tier 1
    let has_regions = stats.slots.iter().any(|s| s.kind.starts_with("region"));
    if shapejit_jit_supported() && has_regions {
        assert!(hits > 0, "{model}: no call ran on a kernel");
    }
    println!(
        "{model}: {hits} kernel calls, {} compiles",
        sum(&|s| s.compiles)
    );
}

/// Hosts without AVX+FMA stay on the interpreter (then only the outputs are compared).
fn shapejit_jit_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[test]
fn builtin_models_match_the_interpreter() {
    for name in ["transformer", "mlp", "elementwise"] {
        compare_tiers(&format!("builtin:{name}"));
    }
}

#[test]
fn shared_onnx_models_match_the_interpreter() {
    for name in ["transformer", "mlp", "convnet", "elementwise"] {
        if let Some(path) = shared::model(name) {
            compare_tiers(path.to_str().unwrap());
        }
    }
}
