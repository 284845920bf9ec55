//! Shared helpers for the criterion benchmarks (`cargo bench -p shapejit-benches`):
//! the graphs and inputs they run, and the FMA peak probe the GEMM numbers are
//! compared with.
//!
//! **Invariant:** every helper is deterministic (fixed data, no randomness), so two
//! runs measure the same work.
#![deny(missing_docs)]

use shapejit::{DType, Graph, GraphBuilder, Tensor, shape};

/// A chain of `n_ops` tiny elementwise ops (alternating `add` and `mul` by a scalar)
/// on `x: f32[batch, 4]`: almost all of its run time is dispatch.
pub fn tiny_op_chain(n_ops: usize) -> Graph {
    let mut b = GraphBuilder::new("tiny_chain");
    let x = b.input("x", DType::F32, shape!["batch", 4]);
    // Invariant: these ops on f32 inputs of matching shapes always infer.
    let build = |b: &mut GraphBuilder| -> Result<(), shapejit::ir::IrError> {
        let one = b.const_f32(1.0)?;
        let half = b.const_f32(0.5)?;
        let mut v = x;
        for i in 0..n_ops {
            v = if i % 2 == 0 {
                b.add(v, one)?
            } else {
                b.mul(v, half)?
            };
        }
        b.output("y", v)?;
        Ok(())
    };
    build(&mut b).unwrap_or_else(|e| panic!("tiny chain is well-formed: {e}"));
    b.finish()
        .unwrap_or_else(|e| panic!("tiny chain verifies: {e}"))
}

/// A deterministic f32 tensor of `shape` with values in [-1, 1).
pub fn input(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    // Invariant: `data` has exactly `shape`'s element count.
    Tensor::from_vec(data, shape).unwrap_or_else(|e| panic!("{e}"))
}

/// Independent accumulators in the FMA probe: 2 FMA ports × 4-cycle latency needs
/// at least 8 in flight; 12 leaves slack.
const FMA_CHAINS: usize = 12;

/// Floating-point operations one call of [`fma_probe`] performs with `iters`:
/// `iters × chains × 8 lanes × 2` (an FMA is a multiply and an add).
pub fn fma_probe_flops(iters: usize) -> u64 {
    (iters * FMA_CHAINS * 8 * 2) as u64
}

/// The machine's single-core f32 FMA peak probe: `iters` rounds of 12 independent
/// 256-bit `vfmadd` chains (AVX2 + FMA), no memory traffic. Time it and divide
/// [`fma_probe_flops`] by the time to get the attainable peak. Returns a value
/// derived from the accumulators so the work cannot be optimized away; `None` when
/// the CPU has no AVX2/FMA.
pub fn fma_probe(iters: usize) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return Some(unsafe { fma_chains(iters) });
        }
    }
    let _ = iters;
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_chains(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    let a = _mm256_set1_ps(0.999_999);
    let b = _mm256_set1_ps(1e-7);
    let mut acc = [_mm256_set1_ps(1.0); FMA_CHAINS];
    for _ in 0..iters {
        for v in acc.iter_mut() {
            *v = _mm256_fmadd_ps(*v, a, b);
        }
    }
    let mut sum = _mm256_setzero_ps();
    for v in acc {
        sum = _mm256_add_ps(sum, v);
    }
    let mut lanes = [0f32; 8];
    // SAFETY: `lanes` holds 8 f32s, the width of one unaligned 256-bit store.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
    lanes.iter().sum()
}
