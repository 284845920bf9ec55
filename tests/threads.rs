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

/// One-image convolutions wide enough to split by output channels (256 of them:
/// pieces of at least 64; a 3×3 one on the direct path, a 1×1 one on the packed
/// weights from each piece's first channel, a 3×3 one on Winograd's): at 1, 2
/// and 3 threads bit-identical to each other; up to the 1×1 convolution also to
/// the same module reading its weights unpacked (on the direct path for both
/// 3×3 convolutions), the Winograd output within rounding of it.
#[test]
fn a_one_image_convolution_splits_by_channels_bit_identically() {
    use shapejit::ir::ConvAttrs;
    use shapejit::{DType, GraphBuilder, Tensor, UnaryOp, shape};
    let graph = || {
        let values = |n: usize, seed: usize| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * 7919 + seed) % 1000) as f32 / 1000.0 - 0.5)
                .collect()
        };
        let mut b = GraphBuilder::new("conv");
        let x = b.input("x", DType::F32, shape![1, 16, 28, 28]);
        let w = b.constant(
            "w",
            Tensor::from_vec(values(256 * 16 * 9, 1), &[256, 16, 3, 3]).unwrap(),
        );
        let bias = b.constant("b", Tensor::from_vec(values(256, 2), &[256]).unwrap());
        let attrs = ConvAttrs {
            pads: [1; 4],
            ..ConvAttrs::default()
        };
        let y = b.conv2d(x, w, Some(bias), attrs).unwrap();
        let y = b.unary(UnaryOp::Relu, y).unwrap();
        let w1 = b.constant(
            "w1",
            Tensor::from_vec(values(256 * 256, 3), &[256, 256, 1, 1]).unwrap(),
        );
        let y = b.conv2d(y, w1, None, ConvAttrs::default()).unwrap();
        b.output("y", y).unwrap();
        let w2 = b.constant(
            "w2",
            Tensor::from_vec(values(256 * 256 * 9, 4), &[256, 256, 3, 3]).unwrap(),
        );
        let z = b.conv2d(y, w2, None, attrs).unwrap();
        b.output("z", z).unwrap();
        b.finish().unwrap()
    };
    let x = Tensor::from_vec(
        (0..16 * 28 * 28)
            .map(|i| ((i % 97) as f32 - 48.0) / 50.0)
            .collect(),
        &[1, 16, 28, 28],
    )
    .unwrap();
    // the reference reads the weights as stored (no packing to index into)
    let unpacked = Options {
        pack_weights: false,
        ..options(1)
    };
    let modules: Vec<Module> = [unpacked, options(1), options(2), options(3)]
        .into_iter()
        .map(|o| Module::from_graph(graph(), o).unwrap())
        .collect();
    let outs: Vec<Vec<Tensor>> = modules
        .iter()
        .map(|m| {
            let mut rt = m.runtime();
            rt.run(std::slice::from_ref(&x)).unwrap();
            rt.run(std::slice::from_ref(&x)).unwrap()
        })
        .collect();
    for (out, threads) in outs[1..].iter().zip([1, 2, 3]) {
        assert!(
            out[0].bytes() == outs[0][0].bytes(),
            "{threads} thread(s) differ from the unpacked run"
        );
        assert!(
            out[1].bytes() == outs[1][1].bytes(),
            "{threads} thread(s) differ from one thread on Winograd"
        );
    }
    let (wino, direct): (&[f32], &[f32]) = (
        outs[1][1].as_slice().unwrap(),
        outs[0][1].as_slice().unwrap(),
    );
    let scale = direct.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(
        wino != direct,
        "the packed 3×3 convolution ran on the direct path"
    );
    for (w, d) in wino.iter().zip(direct) {
        assert!((w - d).abs() <= 1e-5 * scale, "Winograd {w} vs direct {d}");
    }
    let stats = modules[2].stats().global;
    assert!(stats.split_ops > 0, "the conv ran whole");
    assert!(stats.packed_weight_bytes > 0, "the weights were not packed");
}
