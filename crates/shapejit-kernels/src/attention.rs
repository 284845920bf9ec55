//! Fused attention: `softmax(scale(q·k) + mask)·v` for one (batch, head) at a time,
//! its scores never leaving the per-head scratch (L1/L2 for usual sizes).
//!
//! `q` is `[s_q, d]`, `k` the second operand of the first product as given, `[d, s_k]`
//! (an exporter's `Kᵀ`), `v` `[s_k, d_v]`, the mask `[s_q, s_k]` (any strides, 0 for
//! a broadcast dim), the output a contiguous `[s_q, d_v]`. The operands are first
//! copied into packed, zero-padded tiles; both products then run in register blocks
//! of [`ROWS`] query rows × two vectors of columns with each sum taken in index
//! order (mul then add, no fused multiply-add), and each score row gets the scale,
//! the mask and the softmax of [`crate::rows`] (same arithmetic as the interpreter's
//! softmax on that row).
//!
//! **Invariant:** the result does not depend on which heads run together, and AVX2
//! and AVX-512 give the same bits (every element is the same sequence of roundings
//! at every vector width, without `mul_add`; exp is the level's [`Unary::Exp`]).

use crate::cpu::Level;
use crate::rows::{normalize_row, subtract_max};
#[cfg(target_arch = "x86_64")]
use crate::simd::vector::{Avx2, Avx512};
use crate::simd::vector::{Scalar, Simd};
use crate::vmath::{Unary, UnaryFn};

/// Query rows per register block.
pub const ROWS: usize = 4;
/// Most columns per register block (two vectors of the widest level); scratch is
/// padded to it.
pub const COLS: usize = 32;

/// A strided matrix: element `(r, c)` at `ptr + r·row + c·col`.
#[derive(Clone, Copy, Debug)]
pub struct Strided {
    /// element `(0, 0)`
    pub ptr: *const f32,
    /// step between rows, elements
    pub row: isize,
    /// step between columns, elements
    pub col: isize,
}

/// How the raw scores are scaled before the mask.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// unscaled
    None,
    /// `s · x`
    Mul(f32),
    /// `x / s`
    Div(f32),
}

/// The sizes of one head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// query rows
    pub s_q: usize,
    /// keys
    pub s_k: usize,
    /// query/key depth
    pub d: usize,
    /// value depth
    pub d_v: usize,
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

impl Dims {
    /// f32 elements of scratch one head needs.
    pub fn scratch_len(&self) -> usize {
        let (sq, sk, dv) = (
            round_up(self.s_q, ROWS),
            round_up(self.s_k, COLS),
            round_up(self.d_v, COLS),
        );
        sq * self.d + self.d * sk + self.s_k * dv + sq * sk + sq * dv
    }
}

/// One head.
#[derive(Clone, Copy, Debug)]
pub struct Head {
    /// `[s_q, d]`
    pub q: Strided,
    /// `[d, s_k]`
    pub k: Strided,
    /// `[s_k, d_v]`
    pub v: Strided,
    /// `[s_q, s_k]`, added after the scale
    pub mask: Option<Strided>,
    /// the contiguous `[s_q, d_v]` output
    pub out: *mut f32,
    /// the sizes
    pub dims: Dims,
    /// the scale
    pub scale: Scale,
}

/// Copies `rows × cols` of `m` into `dst` (row stride `ld`, zero padding beyond),
/// reading along whichever of `m`'s dims is contiguous.
///
/// # Safety
/// `m` addresses `rows × cols` readable elements.
#[inline(always)]
unsafe fn pack(m: Strided, rows: usize, cols: usize, dst: &mut [f32], ld: usize) {
    dst.fill(0.0);
    // SAFETY (every read below): inside the caller's matrix.
    if m.col == 1 {
        for r in 0..rows {
            let src = unsafe { std::slice::from_raw_parts(m.ptr.offset(r as isize * m.row), cols) };
            dst[r * ld..r * ld + cols].copy_from_slice(src);
        }
    } else if m.row == 1 {
        // a transposed source (an exporter's `Kᵀ`): read it in blocks of 8 × 8 that
        // stay in L1, writing `dst` row by row (column-order scalar stores, `ld`
        // apart, stalled on every line)
        const B: usize = 8;
        for r0 in (0..rows).step_by(B) {
            for c0 in (0..cols).step_by(B) {
                for r in r0..(r0 + B).min(rows) {
                    let line = &mut dst[r * ld..r * ld + cols];
                    for (c, d) in line
                        .iter_mut()
                        .enumerate()
                        .take((c0 + B).min(cols))
                        .skip(c0)
                    {
                        *d = unsafe { *m.ptr.offset(r as isize + c as isize * m.col) };
                    }
                }
            }
        }
    } else {
        for r in 0..rows {
            for c in 0..cols {
                dst[r * ld + c] = unsafe { *m.ptr.offset(r as isize * m.row + c as isize * m.col) };
            }
        }
    }
}

/// `c[r][j] = Σ_t a[r·lda + t] · b[t·ldb + j]` for [`ROWS`] rows and two vectors of
/// columns from `b`, each sum in `t` order (mul, then add), stored to `c` (row
/// stride `ldc`).
///
/// # Safety
/// `a` holds `ROWS` rows of `depth`, `b` `depth` rows of two vectors, `c` `ROWS`
/// rows of two vectors.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn block<S: Simd>(
    s: S,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    depth: usize,
    c: *mut f32,
    ldc: usize,
) {
    let zero = s.splat(0.0);
    let mut acc = [[zero; 2]; ROWS];
    // SAFETY: every access is inside the caller's blocks.
    unsafe {
        for t in 0..depth {
            let b0 = s.load(b.add(t * ldb));
            let b1 = s.load(b.add(t * ldb + S::LANES));
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let x = s.splat(*a.add(r * lda + t));
                acc_r[0] = s.add(acc_r[0], s.mul(x, b0));
                acc_r[1] = s.add(acc_r[1], s.mul(x, b1));
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            s.store(c.add(r * ldc), acc_r[0]);
            s.store(c.add(r * ldc + S::LANES), acc_r[1]);
        }
    }
}

/// Runs one head at `level` with `scratch` of at least [`Dims::scratch_len`].
///
/// # Safety
/// Every operand addresses its `Dims` readable elements, `out` `s_q × d_v` writable
/// ones disjoint from them.
pub unsafe fn head(level: Level, h: &Head, scratch: &mut [f32]) {
    assert!(
        scratch.len() >= h.dims.scratch_len(),
        "attention scratch too short"
    );
    let exp = Unary::Exp.entry(level);
    // SAFETY: the level is lowered to what the CPU has; the rest is the caller's.
    unsafe {
        match level.capped() {
            #[cfg(target_arch = "x86_64")]
            Level::Avx512 => head_avx512(h, scratch, exp),
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => head_avx2(h, scratch, exp),
            _ => head_at(Scalar, h, scratch, exp),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn head_avx512(h: &Head, scratch: &mut [f32], exp: UnaryFn) {
    // SAFETY: the CPU has AVX-512 (`head`); the rest is `head`'s contract.
    unsafe { head_at(Avx512::new(), h, scratch, exp) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn head_avx2(h: &Head, scratch: &mut [f32], exp: UnaryFn) {
    // SAFETY: the CPU has AVX2 (`head`); the rest is `head`'s contract.
    unsafe { head_at(Avx2::new(), h, scratch, exp) }
}

/// [`head`] with the level's vectors.
///
/// # Safety
/// As [`head`].
#[inline(always)]
unsafe fn head_at<S: Simd>(s: S, h: &Head, scratch: &mut [f32], exp: UnaryFn) {
    let Dims { s_q, s_k, d, d_v } = h.dims;
    let w = 2 * S::LANES;
    let (sq, sk, dv) = (round_up(s_q, ROWS), round_up(s_k, w), round_up(d_v, w));
    let (qs, rest) = scratch.split_at_mut(sq * d);
    let (ks, rest) = rest.split_at_mut(d * sk);
    let (vs, rest) = rest.split_at_mut(s_k * dv);
    let (scores, rest) = rest.split_at_mut(sq * sk);
    let outs = &mut rest[..sq * dv];
    // SAFETY: the caller's operands have these extents; every block below is
    // inside the padded scratch tiles.
    unsafe {
        pack(h.q, s_q, d, qs, d);
        pack(h.k, d, s_k, ks, sk);
        pack(h.v, s_k, d_v, vs, dv);
        for i0 in (0..sq).step_by(ROWS) {
            for j0 in (0..sk).step_by(w) {
                let c = scores.as_mut_ptr().add(i0 * sk + j0);
                block(
                    s,
                    qs.as_ptr().add(i0 * d),
                    d,
                    ks.as_ptr().add(j0),
                    sk,
                    d,
                    c,
                    sk,
                );
            }
        }
    }
    for i in 0..s_q {
        let row = &mut scores[i * sk..i * sk + s_k];
        match h.scale {
            Scale::None => {}
            Scale::Mul(x) => row.iter_mut().for_each(|v| *v *= x),
            Scale::Div(x) => row.iter_mut().for_each(|v| *v /= x),
        }
        if let Some(m) = h.mask {
            for (j, v) in row.iter_mut().enumerate() {
                // SAFETY: inside the caller's mask.
                *v += unsafe { *m.ptr.offset(i as isize * m.row + j as isize * m.col) };
            }
        }
        subtract_max(row);
    }
    // one exp pass over every row (the padding columns are finite and never read)
    let rows = &mut scores[..s_q * sk];
    // SAFETY: in place on the rows' elements.
    unsafe { exp(rows.as_ptr(), rows.as_mut_ptr(), rows.len()) };
    for i in 0..s_q {
        normalize_row(&mut scores[i * sk..i * sk + s_k]);
    }
    // SAFETY: as above; the products read `s_k` columns of the scores, the rows of
    // `v`, and write the padded output tile.
    unsafe {
        for i0 in (0..sq).step_by(ROWS) {
            for c0 in (0..dv).step_by(w) {
                let c = outs.as_mut_ptr().add(i0 * dv + c0);
                block(
                    s,
                    scores.as_ptr().add(i0 * sk),
                    sk,
                    vs.as_ptr().add(c0),
                    dv,
                    s_k,
                    c,
                    dv,
                );
            }
        }
        for i in 0..s_q {
            std::ptr::copy_nonoverlapping(outs.as_ptr().add(i * dv), h.out.add(i * d_v), d_v);
        }
    }
}
