//! Row kernels on contiguous data: softmax, log-softmax and layer norm.
//!
//! A tensor is seen as `[outer, n, inner]` with the op's axis as `n`; with
//! `inner == 1` each row is a contiguous run (the fast path: a max pass, an
//! exp-and-sum pass, a scaling pass, all on one row in L1).
//!
//! **Invariant:** inputs and outputs are contiguous and the same length
//! (the ops layer copies strided inputs into scratch first).

use crate::error::KernelError;
use crate::math;
use crate::simd::dispatch_simd;

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

/// Sum of a slice in 8 independent lanes (vectorizes; pairwise-like accuracy).
#[inline(always)]
fn sum_lanes(xs: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = xs.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += v;
        }
    }
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
    let mut m = f32::NEG_INFINITY;
    for &v in lanes.iter().chain(tail) {
        m = if v > m { v } else { m };
    }
    m
}

/// Softmax of contiguous rows of `n`: a max pass, an exp-and-sum pass, a scaling pass.
#[inline(always)]
fn softmax_rows(x: &[f32], out: &mut [f32], n: usize, log: bool) {
    for (row, dst) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let m = max_of(row);
        for (d, &v) in dst.iter_mut().zip(row) {
            *d = math::exp(v - m);
        }
        let sum = sum_lanes(dst);
        if log {
            let lse = sum.ln() + m;
            for (d, &v) in dst.iter_mut().zip(row) {
                *d = v - lse;
            }
        } else {
            let inv = 1.0 / sum;
            for d in dst.iter_mut() {
                *d *= inv;
            }
        }
    }
}

/// Softmax (or log-softmax when `log`) along the middle dim of `[outer, n, inner]`.
pub fn softmax(
    x: &[f32],
    out: &mut [f32],
    outer: usize,
    n: usize,
    inner: usize,
    log: bool,
) -> Result<(), KernelError> {
    let total = outer.checked_mul(n).and_then(|v| v.checked_mul(inner));
    check_len("softmax input", total.unwrap_or(usize::MAX), x.len())?;
    check_len("softmax output", x.len(), out.len())?;
    if x.is_empty() {
        return Ok(());
    }
    if inner == 1 {
        dispatch_simd!(softmax_avx2, || softmax_rows(x, out, n, log));
        return Ok(());
    }
    // strided columns: one pass per statistic along each column
    for o in 0..outer {
        let base = o * n * inner;
        for j in 0..inner {
            let at = |i: usize| base + i * inner + j;
            let m = (0..n).fold(f32::NEG_INFINITY, |m, i| {
                let v = x[at(i)];
                if v > m || v.is_nan() { v } else { m }
            });
            let mut sum = 0f32;
            for i in 0..n {
                let e = math::exp(x[at(i)] - m);
                out[at(i)] = e;
                sum += e;
            }
            if log {
                let lse = sum.ln() + m;
                for i in 0..n {
                    out[at(i)] = x[at(i)] - lse;
                }
            } else {
                let inv = 1.0 / sum;
                for i in 0..n {
                    out[at(i)] *= inv;
                }
            }
        }
    }
    Ok(())
}

/// Layer norm of each length-`n` row: `(x - mean)/sqrt(var + eps) · scale + bias`
/// (population variance, computed from the centred values: two passes).
pub fn layer_norm(
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
    dispatch_simd!(layer_norm_avx2, || layer_norm_rows(
        x, out, n, scale, bias, epsilon
    ));
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
