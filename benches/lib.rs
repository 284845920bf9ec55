//! Shared helpers for the criterion benchmarks (`cargo bench -p shapejit-benches`):
//! the graphs and inputs they run, and the FMA peak probe the GEMM numbers are
//! compared with.
//!
//! **Invariant:** every helper is deterministic (fixed data, no randomness), so two
//! runs measure the same work.
#![deny(missing_docs)]

use shapejit::{DType, Graph, GraphBuilder, Tensor, shape};
use shapejit_kernels::cpu::{self, Level};

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

/// The level [`fma_probe`] runs at: the kernels' level ([`cpu::level`], the
/// widest the CPU has unless `SHAPEJIT_CPU` caps it); `None` below AVX2.
pub fn fma_probe_level() -> Option<Level> {
    (cpu::level() >= Level::Avx2).then(cpu::level)
}

/// Floating-point operations one call of [`fma_probe`] performs with `iters`:
/// `iters × chains × lanes × 2` (an FMA is a multiply and an add; 8 lanes on
/// AVX2, 16 on AVX-512).
pub fn fma_probe_flops(iters: usize) -> u64 {
    let lanes = fma_probe_level().map_or(0, Level::lanes);
    (iters * FMA_CHAINS * lanes * 2) as u64
}

/// The machine's single-core f32 FMA peak probe at the widest level
/// ([`fma_probe_level`]): `iters` rounds of 12 independent `vfmadd213ps` chains
/// (512-bit on AVX-512, 256-bit on AVX2) in inline assembly (so the compiler can
/// neither fold nor spill them), no memory traffic. Time it and divide
/// [`fma_probe_flops`] by the time to get the attainable peak. Returns the sum
/// of two chains' lanes; `None` when the CPU has no AVX2/FMA or `iters` is 0.
pub fn fma_probe(iters: usize) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    {
        match fma_probe_level() {
            // SAFETY: the CPU has AVX-512 F (the level says so) and iters > 0.
            Some(Level::Avx512) if iters > 0 => return Some(unsafe { fma_chains_zmm(iters) }),
            // SAFETY: the CPU has AVX2 and FMA (the level says so) and iters > 0.
            Some(Level::Avx2) if iters > 0 => return Some(unsafe { fma_chains_ymm(iters) }),
            _ => {}
        }
    }
    let _ = iters;
    None
}

/// Defines an FMA-chain probe over one register width (`ymm` or `zmm`).
macro_rules! fma_chains {
    ($(#[$attr:meta])* $name:ident, $r:literal, $lanes:literal) => {
        /// # Safety
        /// The CPU must support the function's target features, and `iters` must
        /// be at least 1 (the loop counts down to zero).
        $(#[$attr])*
        unsafe fn $name(iters: usize) -> f32 {
            let constants = [0.999_999f32, 1e-7f32];
            let mut out = [0f32; $lanes];
            // SAFETY: reads the two f32 of `constants`, writes the lanes of `out`
            // (unaligned store), and clobbers only the registers it declares (an
            // xmm name clobbers the whole ymm/zmm register); the caller guarantees
            // the CPU features and `iters >= 1`.
            unsafe {
                std::arch::asm!(
                    concat!("vbroadcastss ", $r, "14, [{c}]"),
                    concat!("vbroadcastss ", $r, "15, [{c} + 4]"),
                    concat!("vmovaps ", $r, "0, ", $r, "14"), concat!("vmovaps ", $r, "1, ", $r, "14"),
                    concat!("vmovaps ", $r, "2, ", $r, "14"), concat!("vmovaps ", $r, "3, ", $r, "14"),
                    concat!("vmovaps ", $r, "4, ", $r, "14"), concat!("vmovaps ", $r, "5, ", $r, "14"),
                    concat!("vmovaps ", $r, "6, ", $r, "14"), concat!("vmovaps ", $r, "7, ", $r, "14"),
                    concat!("vmovaps ", $r, "8, ", $r, "14"), concat!("vmovaps ", $r, "9, ", $r, "14"),
                    concat!("vmovaps ", $r, "10, ", $r, "14"), concat!("vmovaps ", $r, "11, ", $r, "14"),
                    "2:",
                    concat!("vfmadd213ps ", $r, "0, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "1, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "2, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "3, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "4, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "5, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "6, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "7, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "8, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "9, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "10, ", $r, "14, ", $r, "15"),
                    concat!("vfmadd213ps ", $r, "11, ", $r, "14, ", $r, "15"),
                    "dec {n}",
                    "jnz 2b",
                    concat!("vaddps ", $r, "0, ", $r, "0, ", $r, "11"),
                    concat!("vmovups [{o}], ", $r, "0"),
                    c = in(reg) constants.as_ptr(),
                    o = in(reg) out.as_mut_ptr(),
                    n = inout(reg) iters => _,
                    out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                    out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                    out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                    out("xmm14") _, out("xmm15") _,
                    options(nostack),
                );
            }
            out.iter().sum()
        }
    };
}

fma_chains!(
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fma_chains_ymm,
    "ymm",
    8
);
fma_chains!(
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    fma_chains_zmm,
    "zmm",
    16
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fma_probe_runs_exactly_iters_rounds() {
        let iters = 1000;
        let Some(got) = fma_probe(iters) else {
            return assert!(
                fma_probe_level().is_none(),
                "FMA present but the probe did not run"
            );
        };
        // Each chain computes v ← fma(v, a, b) from v = a (one rounding per step, as
        // `mul_add`); two chains are added lane by lane, then the lanes are summed in
        // order (as `Iterator::sum`: with 16 lanes that sum rounds, so it is not 32·v).
        let lanes = fma_probe_level().map_or(0, Level::lanes);
        let v = (0..iters).fold(0.999_999f32, |v, _| v.mul_add(0.999_999, 1e-7));
        let want: f32 = std::iter::repeat_n(v + v, lanes).sum();
        assert_eq!(got, want);
        assert_eq!(fma_probe(0), None);
        assert_eq!(fma_probe_flops(2), (2 * 12 * lanes * 2) as u64);
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
