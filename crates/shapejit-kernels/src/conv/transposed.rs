//! Convolutions on small feature maps as the transposed product
//! `outᵀ[P, Mg] = patchesᵀ[P, K] · wᵀ[K, Mg]` (`P = OH·OW` positions, `K =
//! Cg·kH·kW`), with `wᵀ` packed once as the GEMM's right operand.
//!
//! On a 7×7 map the usual orientation (`out[Mg, P] = w[Mg, K] · patches[K,
//! P]`) fills 49 of a tile's 64 columns and meets each weight with few columns,
//! so the weights stream from memory at the pace of the FMAs. Transposed, the
//! output channels are the columns (whole panels), the positions the rows, and
//! each weight, read once as a packed panel, meets every position while in L1.
//! The patch matrix is written `[K, P]` row-major — one contiguous run per tap
//! and output row from the padded input's phase rows — and read as `patchesᵀ`
//! column-major, in place: the `P` rows of one `k` step are adjacent. For a
//! 1×1 window at stride 1 without padding the input itself is that matrix.
//! The product lands in scratch and is transposed into the NCHW output.
//!
//! **Invariant:** each output is the same fma chain as on the path this one
//! replaces, so the bits do not depend on the path: `(c, i, j)` order starting
//! at 0 with the bias added after (the GEMM path's) where [`super::takes_gemm`]
//! holds, starting at the bias otherwise (the direct path's, at the SIMD levels;
//! the scalar level keeps k×k windows on the direct path, whose products round
//! separately there). Then the activation.

use super::{ConvGeom, Window, copy_run, pad_phases, padded_len, padded_size};
use crate::cpu::{self, Level};
use crate::elementwise::copy;
use crate::error::KernelError;
use crate::packed::{Activation, Bias, Epilogue, PackedRef, matmul_packed_step};
use crate::simd::vector::{Scalar, Simd};
use crate::view::{StridedShape, View, ViewMut};

/// Output positions up to which a convolution with weights packed ahead takes
/// this path: ResNet-50's 7² layers (49 positions) ran 1.5–2× faster on it at
/// AVX-512 (Intel Xeon); at 14² (196, 13 panels of which the last is ¼ full)
/// the usual orientation wins.
pub const TRANSPOSED_MAX_POSITIONS: usize = 64;

/// Output channels per group from which it does (a panel of columns).
pub const TRANSPOSED_MIN_OUTPUTS: usize = 16;

/// Whether a group of `c_out_per_group` output channels with this window runs
/// transposed when its weights are packed for it. At AVX2 only strided k×k
/// windows do: with 8-lane vectors the usual paths are faster on 7² maps at
/// stride 1 (`cargo bench -p shapejit-benches --bench conv`, a Zen 3, GFLOP/s:
/// 1×1 2048 → 512 GEMM 56 vs transposed 48, 512 → 2048 55 vs 44; 3×3 512 →
/// 512 Winograd 104, direct 70–74, transposed 52), and slower for ResNet-50's
/// 3×3 stride-2 512 → 512 (14² → 7²: direct 7.5 ms, transposed 4.0).
pub fn applies(c_out_per_group: usize, win: &Window) -> bool {
    let positions = win.out[0].saturating_mul(win.out[1]);
    let at_level = match cpu::level() {
        Level::Avx512 => true,
        Level::Avx2 => win.kernel != [1, 1] && win.strides != [1, 1],
        Level::Scalar => win.kernel == [1, 1],
    };
    positions <= TRANSPOSED_MAX_POSITIONS && c_out_per_group >= TRANSPOSED_MIN_OUTPUTS && at_level
}

/// Whether the input, read as `[Cg, P]`, is the patch matrix itself.
fn reads_input(g: &ConvGeom) -> bool {
    let win = g.win;
    win.kernel == [1, 1]
        && win.strides == [1, 1]
        && win.pads == [0; 4]
        && (g.size[0] == 1 || g.xs[2] == g.size[1] as isize * g.xs[3])
}

/// Scratch elements: the patch matrix and the padded input it is cut from,
/// and the transposed product; saturates instead of overflowing.
pub(super) fn scratch_len(cg: usize, mg: usize, win: &Window, input: [usize; 2]) -> usize {
    let p = win.out[0].saturating_mul(win.out[1]);
    let k = cg
        .saturating_mul(win.kernel[0])
        .saturating_mul(win.kernel[1]);
    k.saturating_mul(p)
        .saturating_add(padded_len(cg, win, input))
        .saturating_add(p.saturating_mul(mg))
}

/// What one group's call multiplies besides the input.
pub(super) struct Channels<'a> {
    /// `wᵀ` of the call's output channels, `[K, Mg]`
    pub w_t: PackedRef<'a>,
    /// their biases
    pub bias: Option<&'a [f32]>,
    pub activation: Option<Activation>,
    /// start each sum at the bias (the direct path's chain) instead of adding
    /// it after (the GEMM path's)
    pub bias_first: bool,
}

/// `out[Mg, P]` of one image's group at `base` (see the module docs); `col`
/// holds [`scratch_len`] elements.
pub(super) fn conv_group(
    out: &mut [f32],
    g: &ConvGeom,
    base: isize,
    ch: &Channels,
    col: &mut [f32],
) -> Result<(), KernelError> {
    let win = g.win;
    let p = win.out[0] * win.out[1];
    let k = g.cg * win.kernel[0] * win.kernel[1];
    let mg = ch.w_t.n();
    let (patches, rest) = col.split_at_mut(k * p);
    let (padded, rest) = rest.split_at_mut(padded_len(g.cg, win, g.size));
    let product = &mut rest[..p * mg];
    let a = if reads_input(g) {
        let geom = StridedShape::new(&[p, g.cg], &[g.xs[3], g.xs[1]], base as usize)?;
        View::new(g.data, geom)?
    } else {
        patches_at_level(cpu::level(), patches, padded, g, base);
        View::new(patches, StridedShape::new(&[p, k], &[1, p as isize], 0)?)?
    };
    let epilogue = Epilogue {
        bias: match ch.bias {
            Some(b) if !ch.bias_first => Bias::PerColumn(b),
            _ => Bias::None,
        },
        activation: ch.activation,
    };
    if ch.bias_first {
        for row in product.chunks_exact_mut(mg) {
            match ch.bias {
                Some(b) => row.copy_from_slice(&b[..mg]),
                None => row.fill(0.0),
            }
        }
    }
    matmul_packed_step(product, &a, ch.w_t, 1.0, epilogue, ch.bias_first)?;
    let product_t = View::new(product, StridedShape::new(&[mg, p], &[1, mg as isize], 0)?)?;
    copy(&mut ViewMut::contiguous(out, &[mg, p])?, &product_t)
}

/// [`patches`] compiled for `level` (see `super::im2col_at_level`).
fn patches_at_level(level: Level, dst: &mut [f32], padded: &mut [f32], g: &ConvGeom, base: isize) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(dst: &mut [f32], padded: &mut [f32], g: &ConvGeom, base: isize) {
            // SAFETY: called only where the CPU has AVX-512 (below).
            patches(unsafe { Avx512::new() }, dst, padded, g, base)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(dst: &mut [f32], padded: &mut [f32], g: &ConvGeom, base: isize) {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            patches(unsafe { Avx2::new() }, dst, padded, g, base)
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(dst, padded, g, base) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(dst, padded, g, base) },
            Level::Scalar => {}
        }
    }
    patches(Scalar, dst, padded, g, base)
}

/// The patch matrix `[K, P]` row-major (tap `(c, i, j)`, output `(oy, ox)` at
/// `((c·kH + i)·kW + j)·P + oy·OW + ox`), cut from the group's input copied into
/// `padded` as phase rows (`super::pad_phases`): every (tap, output row) is one
/// contiguous run.
#[inline(always)]
fn patches<S: Simd>(s: S, dst: &mut [f32], padded: &mut [f32], g: &ConvGeom, base: isize) {
    let win = g.win;
    let ([kh, kw], [dh, dw], [oh, ow]) = (win.kernel, win.dilations, win.out);
    let [sh, sw] = win.strides;
    let [ph, pw] = padded_size(win, g.size);
    let pq = pw.div_ceil(sw);
    // every tap of every output position lies in the padded plane
    assert!((oh - 1) * sh + (kh - 1) * dh < ph && (ow - 1) * sw + (kw - 1) * dw < pw);
    let padded = &mut padded[..g.cg * ph * sw * pq];
    pad_phases(s, padded, g, base, [ph, pq]);
    let mut runs = dst.chunks_exact_mut(ow);
    for c in 0..g.cg {
        for i in 0..kh {
            for j in 0..kw {
                let (phase, shift) = (j * dw % sw, j * dw / sw);
                for oy in 0..oh {
                    let at = ((c * ph + oy * sh + i * dh) * sw + phase) * pq + shift;
                    match runs.next() {
                        Some(run) => copy_run(s, run, &padded[at..at + ow]),
                        // Invariant: `dst` holds K·P elements, one run per (tap, row).
                        None => unreachable!(),
                    }
                }
            }
        }
    }
}
