//! Row kernels on contiguous data: softmax, log-softmax and layer norm.
//!
//! A tensor is seen as `[outer, n, inner]` with the op's axis as `n`; with
//! `inner == 1` each row is a contiguous run (a max pass, an exp-and-sum pass,
//! a scaling pass, all on one row in L1); with `inner > 1` blocks of adjacent
//! columns are processed together along contiguous runs. Every loop runs at
//! the CPU level chosen (`*_at` variants take it explicitly), the exponentials
//! through the [`Unary::Exp`] slice kernel of that level.
//!
//! **Invariant:** inputs and outputs are contiguous and the same length
//! (the ops layer copies strided inputs into scratch first).

use crate::cpu::{self, Level};
use crate::error::KernelError;
use crate::simd::dispatch_at;
use crate::vmath::Unary;

fn check_len(what: &'static str, expected: usize, actual: usize) -> Result<(), KernelError> {
    if expected == actual {
        Ok(())
    } else {
        Err(KernelError::ShapeMismatch {
            what,
            expected: vec![expected],
            actual: vec![actual],
        })
    }
}

/// Sum of a slice in 8 independent lanes (lane `j` adds elements `j, j + 8, …` in
/// order; pairwise-like accuracy), then the lanes pairwise and the tail in order.
/// The same bits at every level; from AVX2 on, one 256-bit register holds the
/// lanes (auto-vectorized, the loop ran as 4-lane shuffles: layer norm took
/// 0.6 ns per element).
#[inline(always)]
fn sum_lanes(xs: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::level() >= Level::Avx2 {
        // SAFETY: the CPU has AVX2 (`cpu::level` never exceeds it).
        return unsafe { sum_lanes_avx(xs) };
    }
    let mut lanes = [0f32; 8];
    let (chunks, tail) = xs.as_chunks::<8>();
    for c in chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += v;
        }
    }
    add_lanes(lanes, tail)
}

/// [`sum_lanes`] with its lanes in one `__m256`.
///
/// # Safety
/// The CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn sum_lanes_avx(xs: &[f32]) -> f32 {
    use std::arch::x86_64::{_mm256_add_ps, _mm256_loadu_ps, _mm256_setzero_ps, _mm256_storeu_ps};
    let (chunks, tail) = xs.as_chunks::<8>();
    let mut acc = _mm256_setzero_ps();
    for c in chunks {
        // SAFETY: `c` is 8 floats.
        acc = _mm256_add_ps(acc, unsafe { _mm256_loadu_ps(c.as_ptr()) });
    }
    let mut lanes = [0f32; 8];
    // SAFETY: `lanes` is 8 floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    add_lanes(lanes, tail)
}

/// The lanes of [`sum_lanes`] added pairwise, then the tail in order.
#[inline(always)]
fn add_lanes(lanes: [f32; 8], tail: &[f32]) -> f32 {
    let mut total = (lanes[0] + lanes[4])
        + (lanes[1] + lanes[5])
        + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    for &v in tail {
        total += v;
    }
    total
}

/// Row maximum in 8 lanes (vectorizes; max is exact in any order). NaN is not
/// propagated here: a NaN makes the row's sum, hence the whole row, NaN.
#[inline(always)]
fn max_of(xs: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = xs.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l = if v > *l { v } else { *l };
        }
    }
    // the lanes pairwise (shuffles, not a scalar loop through the stack), then the tail
    let max = |m: f32, v: f32| if v > m { v } else { m };
    let [l0, l1, l2, l3, l4, l5, l6, l7] = lanes;
    let pairs = [max(l0, l4), max(l1, l5), max(l2, l6), max(l3, l7)];
    let lanes = max(max(pairs[0], pairs[2]), max(pairs[1], pairs[3]));
    tail.iter().fold(lanes, |m, &v| max(m, v))
}

/// Softmax of contiguous rows of `n`: a max pass, an exp pass (the [`Unary::Exp`]
/// kernel of `level`, in place on `x - max`) with a sum, a scaling pass. Short rows
/// go by blocks of up to [`BLOCK_ROWS`] rows (at most [`BLOCK_ELEMS`] elements, in
/// L1): the maxima and differences of the block, one exp call over all of it, then
/// each row's sum and scaling — the same arithmetic per element as row by row, but
/// one row's serial chain no longer waits on the previous one's (rows of 32 ran at
/// ~1.7 ns per element).
#[inline(always)]
fn softmax_rows(level: Level, x: &[f32], out: &mut [f32], n: usize, log: bool) {
    let exp = Unary::Exp.entry(level);
    let block = (BLOCK_ELEMS / n.max(1)).clamp(1, BLOCK_ROWS);
    for (rows, dsts) in x.chunks(block * n).zip(out.chunks_mut(block * n)) {
        let mut maxima = [0f32; BLOCK_ROWS];
        for ((row, dst), m) in rows
            .chunks_exact(n)
            .zip(dsts.chunks_exact_mut(n))
            .zip(&mut maxima)
        {
            *m = max_of(row);
            for (d, &v) in dst.iter_mut().zip(row) {
                *d = v - *m;
            }
        }
        // SAFETY: in place on the block's elements.
        unsafe { exp(dsts.as_ptr(), dsts.as_mut_ptr(), dsts.len()) };
        for ((row, dst), &m) in rows
            .chunks_exact(n)
            .zip(dsts.chunks_exact_mut(n))
            .zip(&maxima)
        {
            let sum = sum_lanes(dst);
            finish_row(row, dst, m, sum, log);
        }
    }
}

/// Most rows [`softmax_rows`] takes per block.
const BLOCK_ROWS: usize = 64;
/// Most elements of a block of rows (8 KiB of f32).
const BLOCK_ELEMS: usize = 2048;

/// The first step of [`softmax`] on one row, in place: `x - max(x)` (the same
/// arithmetic; the exp pass comes next, see [`normalize_row`]).
#[inline(always)]
pub(crate) fn subtract_max(row: &mut [f32]) {
    let m = max_of(row);
    for v in row.iter_mut() {
        *v -= m;
    }
}

/// The last step of [`softmax`] on one row of `e^(x - max)`, in place: scaled by
/// `1 / Σ` (the same arithmetic).
#[inline(always)]
pub(crate) fn normalize_row(row: &mut [f32]) {
    let sum = sum_lanes(row);
    // `x` is only read for log-softmax
    finish_row(&[], row, 0.0, sum, false);
}

/// Turns `dst = e^(x - m)` with `sum = Σ dst` into the softmax (or log-softmax) of `x`.
#[inline(always)]
fn finish_row(x: &[f32], dst: &mut [f32], m: f32, sum: f32, log: bool) {
    if log {
        let lse = m + sum.ln();
        for (d, &v) in dst.iter_mut().zip(x) {
            *d = v - lse;
        }
    } else {
        let inv = 1.0 / sum;
        for d in dst.iter_mut() {
            *d *= inv;
        }
    }
}

/// Columns processed together by [`softmax_columns`] (stack statistics).
const COLS: usize = 64;

/// Softmax along the middle dim of `[outer, n, inner]`, `inner > 1`: for each
/// block of up to [`COLS`] adjacent columns, the per-column max, `e^(x - max)`
/// and sums run along contiguous runs of the block (vectorized across columns;
/// each column's sum is still accumulated in row order).
#[inline(always)]
fn softmax_columns(level: Level, x: &[f32], out: &mut [f32], n: usize, inner: usize, log: bool) {
    let exp = Unary::Exp.entry(level);
    for (xs, os) in x
        .chunks_exact(n * inner)
        .zip(out.chunks_exact_mut(n * inner))
    {
        for j0 in (0..inner).step_by(COLS) {
            let w = COLS.min(inner - j0);
            let (mut m, mut sum) = ([f32::NEG_INFINITY; COLS], [0f32; COLS]);
            let (m, sum) = (&mut m[..w], &mut sum[..w]);
            for i in 0..n {
                for (mj, &v) in m.iter_mut().zip(&xs[i * inner + j0..][..w]) {
                    *mj = if v > *mj || v.is_nan() { v } else { *mj };
                }
            }
            for i in 0..n {
                let (src, dst) = (&xs[i * inner + j0..][..w], &mut os[i * inner + j0..][..w]);
                for ((d, &v), &mj) in dst.iter_mut().zip(src).zip(m.iter()) {
                    *d = v - mj;
                }
                // SAFETY: in place on the run's `w` elements.
                unsafe { exp(dst.as_ptr(), dst.as_mut_ptr(), w) };
                for (sj, &d) in sum.iter_mut().zip(dst.iter()) {
                    *sj += d;
                }
            }
            // log: m becomes log Σ + max; else sum becomes 1/Σ
            if log {
                for (mj, &sj) in m.iter_mut().zip(sum.iter()) {
                    *mj += sj.ln();
                }
            } else {
                for sj in sum.iter_mut() {
                    *sj = 1.0 / *sj;
                }
            }
            for i in 0..n {
                let (src, dst) = (&xs[i * inner + j0..][..w], &mut os[i * inner + j0..][..w]);
                if log {
                    for ((d, &v), &lse) in dst.iter_mut().zip(src).zip(m.iter()) {
                        *d = v - lse;
                    }
                } else {
                    for (d, &inv) in dst.iter_mut().zip(sum.iter()) {
                        *d *= inv;
                    }
                }
            }
        }
    }
}

/// Softmax (or log-softmax when `log`) along the middle dim of `[outer, n, inner]`
/// at [`cpu::level`].
pub fn softmax(
    x: &[f32],
    out: &mut [f32],
    outer: usize,
    n: usize,
    inner: usize,
    log: bool,
) -> Result<(), KernelError> {
    softmax_at(cpu::level(), x, out, [outer, n, inner], log)
}

/// [`softmax`] at `level` (lowered to what the CPU supports); `dims` is
/// `[outer, n, inner]`.
pub fn softmax_at(
    level: Level,
    x: &[f32],
    out: &mut [f32],
    [outer, n, inner]: [usize; 3],
    log: bool,
) -> Result<(), KernelError> {
    let total = outer.checked_mul(n).and_then(|v| v.checked_mul(inner));
    check_len("softmax input", total.unwrap_or(usize::MAX), x.len())?;
    check_len("softmax output", x.len(), out.len())?;
    if x.is_empty() {
        return Ok(());
    }
    if inner == 1 {
        dispatch_at(
            level,
            #[inline(always)]
            || softmax_rows(level, x, out, n, log),
        );
    } else {
        dispatch_at(
            level,
            #[inline(always)]
            || softmax_columns(level, x, out, n, inner, log),
        );
    }
    Ok(())
}

/// Layer norm of each length-`n` row: `(x - mean)/sqrt(var + eps) · scale + bias`
/// (population variance, computed from the centred values: two passes), at
/// [`cpu::level`].
pub fn layer_norm(
    x: &[f32],
    out: &mut [f32],
    n: usize,
    scale: &[f32],
    bias: Option<&[f32]>,
    epsilon: f32,
) -> Result<(), KernelError> {
    layer_norm_at(cpu::level(), x, out, n, scale, bias, epsilon)
}

/// [`layer_norm`] at `level` (lowered to what the CPU supports).
pub fn layer_norm_at(
    level: Level,
    x: &[f32],
    out: &mut [f32],
    n: usize,
    scale: &[f32],
    bias: Option<&[f32]>,
    epsilon: f32,
) -> Result<(), KernelError> {
    check_len("layer_norm output", x.len(), out.len())?;
    check_len("layer_norm scale", n, scale.len())?;
    if let Some(b) = bias {
        check_len("layer_norm bias", n, b.len())?;
    }
    if n == 0 || x.is_empty() {
        return Ok(());
    }
    if !x.len().is_multiple_of(n) {
        return Err(KernelError::Invalid(format!(
            "layer_norm: {} elements are not rows of {n}",
            x.len()
        )));
    }
    dispatch_at(
        level,
        #[inline(always)]
        || layer_norm_rows(x, out, n, scale, bias, epsilon),
    );
    Ok(())
}

/// Layer norm of contiguous rows of `n` (lengths checked by the caller).
#[inline(always)]
fn layer_norm_rows(
    x: &[f32],
    out: &mut [f32],
    n: usize,
    scale: &[f32],
    bias: Option<&[f32]>,
    epsilon: f32,
) {
    let inv_n = 1.0 / n as f32;
    for (row, dst) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let mean = sum_lanes(row) * inv_n;
        for (d, &v) in dst.iter_mut().zip(row) {
            let c = v - mean;
            *d = c * c;
        }
        let rstd = 1.0 / (sum_lanes(dst) * inv_n + epsilon).sqrt();
        match bias {
            Some(b) => {
                for (((d, &v), &s), &bb) in dst.iter_mut().zip(row).zip(scale).zip(b) {
                    *d = (v - mean) * rstd * s + bb;
                }
            }
            None => {
                for ((d, &v), &s) in dst.iter_mut().zip(row).zip(scale) {
                    *d = (v - mean) * rstd * s;
                }
            }
        }
    }
}
