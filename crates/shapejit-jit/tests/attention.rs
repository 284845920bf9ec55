//! Fused attention regions, JIT tier (sync compiles) against the interpreter on
//! exporter-style graphs: `q·kᵀ` with the keys transposed as a view, the scale as a
//! `mul` by `1/√d` or a `div` by `√d`, no mask, a causal mask `[1, 1, s, s]` or a
//! padding mask `[b, 1, 1, s]` added to the scores, softmax, `·v`; heads 1..=8, head
//! dims 8..=64, sequence lengths 1..=70, several batches. Every configuration must
//! have run the attention region on a kernel.
//!
//! Tolerance: |jit − interp| ≤ 1e-5·(1 + |interp|): the products' f32 summation order
//! differs (the interpreter's GEMM blocks), the softmax is the same arithmetic.

use shapejit_bytecode::lower;
use shapejit_ir::{BinaryOp, DType, GraphBuilder, Tensor, shape};
use shapejit_jit::jit_module;
use shapejit_vm::module::Module;
use shapejit_vm::options::{CompileMode, Options};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mask {
    None,
    Causal,
    Padding,
}

fn program(heads: usize, d: usize, mask: Mask, divide: bool) -> shapejit_bytecode::Program {
    let mut b = GraphBuilder::new("attention");
    let q = b.input("q", DType::F32, shape!["batch", heads, "seq", d]);
    let k = b.input("k", DType::F32, shape!["batch", heads, "seq", d]);
    let v = b.input("v", DType::F32, shape!["batch", heads, "seq", d]);
    let m = match mask {
        Mask::None => None,
        Mask::Causal => Some(b.input("mask", DType::F32, shape![1, 1, "seq", "seq"])),
        Mask::Padding => Some(b.input("mask", DType::F32, shape!["batch", 1, 1, "seq"])),
    };
    let kt = b.transpose(k, &[0, 1, 3, 2]).unwrap();
    let s = b.matmul(q, kt).unwrap();
    let s = if divide {
        let c = b.const_f32((d as f32).sqrt()).unwrap();
        b.binary(BinaryOp::Div, s, c).unwrap()
    } else {
        let c = b.const_f32(1.0 / (d as f32).sqrt()).unwrap();
        b.binary(BinaryOp::Mul, s, c).unwrap()
    };
    let s = match m {
        Some(m) => b.binary(BinaryOp::Add, s, m).unwrap(),
        None => s,
    };
    let p = b.softmax(s, -1).unwrap();
    let o = b.matmul(p, v).unwrap();
    b.output("o", o).unwrap();
    lower(&b.finish().unwrap()).unwrap()
}

fn inputs(batch: usize, heads: usize, seq: usize, d: usize, mask: Mask) -> Vec<Tensor> {
    let n = batch * heads * seq * d;
    let f = |i: usize, k: usize| {
        ((i.wrapping_mul(2_654_435_761).wrapping_add(k * 977)) % 1000) as f32 / 500.0 - 1.0
    };
    let mut x: Vec<Tensor> = (0..3)
        .map(|k| {
            Tensor::from_vec((0..n).map(|i| f(i, k)).collect(), &[batch, heads, seq, d]).unwrap()
        })
        .collect();
    match mask {
        Mask::None => {}
        Mask::Causal => {
            let m = (0..seq * seq)
                .map(|i| if i % seq > i / seq { -1e9f32 } else { 0.0 })
                .collect();
            x.push(Tensor::from_vec(m, &[1, 1, seq, seq]).unwrap());
        }
        Mask::Padding => {
            // the last (batch index % 3) keys of each sequence are padding
            let m = (0..batch * seq)
                .map(|i| {
                    let (bi, j) = (i / seq, i % seq);
                    if j + bi % 3 >= seq && j > 0 {
                        -1e9f32
                    } else {
                        0.0
                    }
                })
                .collect();
            x.push(Tensor::from_vec(m, &[batch, 1, 1, seq]).unwrap());
        }
    }
    x
}

#[test]
fn attention_regions_match_the_interpreter() {
    let configs = [
        (1, 8, Mask::None, false),
        (3, 16, Mask::Causal, true),
        (8, 32, Mask::Padding, false),
        (2, 64, Mask::Causal, false),
        (4, 24, Mask::None, true),
    ];
    for (heads, d, mask, divide) in configs {
        let prog = program(heads, d, mask, divide);
        let interp = Module::new(prog.clone(), Options::interp()).unwrap();
        let (jit, handle) = jit_module(
            prog,
            Options {
                compile: CompileMode::Sync,
                promote_threshold: 1,
                ..Options::default()
            },
        )
        .unwrap();
        if handle.is_none() {
            println!("SKIP: this host cannot run compiled kernels");
            return;
        }
        let (mut ri, mut rj) = (interp.runtime(), jit.runtime());
        for (batch, seq) in [(1, 1), (2, 5), (3, 33), (1, 70), (4, 17)] {
            let x = inputs(batch, heads, seq, d, mask);
            let want = ri.run(&x).unwrap();
            for iteration in 0..2 {
                let got = rj.run(&x).unwrap();
                let (g, w) = (
                    got[0].as_slice::<f32>().unwrap(),
                    want[0].as_slice::<f32>().unwrap(),
                );
                assert_eq!(got[0].shape(), want[0].shape());
                for (i, (&a, &b)) in g.iter().zip(w).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                        "heads {heads} d {d} {mask:?} divide {divide}, batch {batch} seq {seq} \
                         iteration {iteration}: [{i}] jit {a}, interp {b}"
                    );
                }
            }
        }
        let stats = jit.stats();
        let attention: Vec<_> = stats
            .slots
            .iter()
            .filter(|s| s.kind == "region attention")
            .collect();
        assert_eq!(
            attention.len(),
            1,
            "one attention region: {:?}",
            stats.slots
        );
        assert!(
            attention[0].kernel_hits > 0,
            "{heads} {d} {mask:?}: no kernel ran"
        );
        assert_eq!(
            attention[0].compile_errors, 0,
            "{:?}",
            attention[0].last_compile_error
        );
    }
}
