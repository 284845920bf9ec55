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
/// at least 8 in flight; 12 leaves slack (and fits the 16 ymm registers).
const FMA_CHAINS: usize = 12;

/// Floating-point operations one call of [`fma_probe`] performs with `iters`:
/// `iters × chains × 8 lanes × 2` (an FMA is a multiply and an add).
pub fn fma_probe_flops(iters: usize) -> u64 {
    (iters * FMA_CHAINS * 8 * 2) as u64
}

/// The machine's single-core f32 FMA peak probe: `iters` rounds of 12 independent
/// 256-bit `vfmadd213ps` chains in inline assembly (so the compiler can neither fold
/// nor spill them), no memory traffic. Time it and divide [`fma_probe_flops`] by the
/// time to get the attainable peak. Returns a value derived from the accumulators;
/// `None` when the CPU has no AVX2/FMA or `iters` is 0.
pub fn fma_probe(iters: usize) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    {
        if iters > 0 && is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above) and iters > 0.
            return Some(unsafe { fma_chains(iters) });
        }
    }
    let _ = iters;
    None
}

/// # Safety
/// The CPU must support AVX2 and FMA, and `iters` must be at least 1 (the loop
/// counts down to zero).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_chains(iters: usize) -> f32 {
    let constants = [0.999_999f32, 1e-7f32];
    let mut out = [0f32; 8];
    // SAFETY: reads the two f32 of `constants`, writes the 8 f32 of `out` (unaligned
    // store), and clobbers only the registers it declares; the caller guarantees the
    // CPU features and `iters >= 1`.
    unsafe {
        std::arch::asm!(
            "vbroadcastss ymm14, [{c}]",
            "vbroadcastss ymm15, [{c} + 4]",
            "vmovaps ymm0, ymm14", "vmovaps ymm1, ymm14", "vmovaps ymm2, ymm14", "vmovaps ymm3, ymm14",
            "vmovaps ymm4, ymm14", "vmovaps ymm5, ymm14", "vmovaps ymm6, ymm14", "vmovaps ymm7, ymm14",
            "vmovaps ymm8, ymm14", "vmovaps ymm9, ymm14", "vmovaps ymm10, ymm14", "vmovaps ymm11, ymm14",
            "2:",
            "vfmadd213ps ymm0, ymm14, ymm15", "vfmadd213ps ymm1, ymm14, ymm15",
            "vfmadd213ps ymm2, ymm14, ymm15", "vfmadd213ps ymm3, ymm14, ymm15",
            "vfmadd213ps ymm4, ymm14, ymm15", "vfmadd213ps ymm5, ymm14, ymm15",
            "vfmadd213ps ymm6, ymm14, ymm15", "vfmadd213ps ymm7, ymm14, ymm15",
            "vfmadd213ps ymm8, ymm14, ymm15", "vfmadd213ps ymm9, ymm14, ymm15",
            "vfmadd213ps ymm10, ymm14, ymm15", "vfmadd213ps ymm11, ymm14, ymm15",
            "dec {n}",
            "jnz 2b",
            "vaddps ymm0, ymm0, ymm11",
            "vmovups [{o}], ymm0",
            c = in(reg) constants.as_ptr(),
            o = in(reg) out.as_mut_ptr(),
            n = inout(reg) iters => _,
            out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
            out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _,
            out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
            out("ymm14") _, out("ymm15") _,
            options(nostack),
        );
    }
    out.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fma_probe_runs_exactly_iters_rounds() {
        let iters = 1000;
        let Some(got) = fma_probe(iters) else {
            return assert!(
                !std::arch::is_x86_feature_detected!("fma"),
                "FMA present but the probe did not run"
            );
        };
        // Each chain computes v ← fma(v, a, b) from v = a (one rounding per step, as
        // `mul_add`); the result sums 2 chains × 8 lanes of equal values: exactly 16·v.
        let v = (0..iters).fold(0.999_999f32, |v, _| v.mul_add(0.999_999, 1e-7));
        assert_eq!(got, 16.0 * v);
        assert_eq!(fma_probe(0), None);
        assert_eq!(fma_probe_flops(2), 2 * 12 * 8 * 2);
    }

    #[test]
    fn tiny_chain_has_the_requested_ops() {
        let g = tiny_op_chain(10);
        let ops = g
            .nodes
            .iter()
            .filter(|n| matches!(n.op, shapejit::Op::Binary(_)))
            .count();
        assert_eq!(ops, 10);
    }
}
