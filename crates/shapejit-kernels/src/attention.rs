//! Fused attention: `softmax(scale(q·k) + mask)·v` for one (batch, head) at a time,
//! its scores never leaving the per-head scratch (L1/L2 for usual sizes).
//!
//! `q` is `[s_q, d]`, `k` the second operand of the first product as given, `[d, s_k]`
//! (an exporter's `Kᵀ`), `v` `[s_k, d_v]`, the mask `[s_q, s_k]` (any strides, 0 for
//! a broadcast dim), the output a contiguous `[s_q, d_v]`. `k` is first copied into a
//! zero-padded tile (an exporter's `Kᵀ` view by 16 × 16 register transposes at
//! AVX-512); `q` is read in place (its values are broadcast one at a time), and so are
//! `v` and the output when their rows are whole blocks of columns (else they are
//! staged in scratch). Both products run in register blocks of [`ROWS`] query rows
//! (half at AVX2 and below) × two vectors of columns, each sum in index order with
//! one fused multiply-add per step; each score row then gets the scale, the mask and
//! the softmax of [`crate::rows`] (same arithmetic as the interpreter's softmax on
//! that row). A driver calls [`prefetch`] for the next head before running one.
//!
//! **Invariant:** the result does not depend on which heads run together, and AVX2
//! and AVX-512 give the same bits (every element is the same sequence of roundings
//! at every vector width; exp is the level's [`Unary::Exp`]). The portable level
//! rounds each product and sum apart, within the same stated error.

use crate::cpu::Level;
use crate::rows::{normalize_row, subtract_max};
#[cfg(target_arch = "x86_64")]
use crate::simd::vector::{Avx2, Avx512};
use crate::simd::vector::{Scalar, Simd};
use crate::vmath::{Unary, UnaryFn};

/// Query rows per register block at AVX-512 (16 accumulators; AVX2 and the
/// portable level take half, within their 16 registers).
pub const ROWS: usize = 8;
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
        let (sk, dv) = (round_up(self.s_k, COLS), round_up(self.d_v, COLS));
        self.d * sk + self.s_k * dv + self.s_q * sk + self.s_q * dv
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

/// Copies `rows × cols` of `m` into `dst` (row stride `ld ≥ cols`), zeroing the
/// columns `cols .. ld` of those rows, reading along whichever of `m`'s dims is
/// contiguous; a transposed source (an exporter's `Kᵀ`) goes through `transposed`
/// when the level has one (see [`pack_transposed_avx512`]).
///
/// # Safety
/// `m` addresses `rows × cols` readable elements; `dst` holds `rows × ld`.
#[inline(always)]
unsafe fn pack<S: Simd>(
    s: S,
    m: Strided,
    (rows, cols): (usize, usize),
    dst: &mut [f32],
    ld: usize,
    transposed: Option<TransposedPack>,
) {
    // SAFETY (every read below): inside the caller's matrix.
    if m.col == 1 {
        for r in 0..rows {
            unsafe {
                copy_row(
                    s,
                    m.ptr.offset(r as isize * m.row),
                    &mut dst[r * ld..][..ld],
                    cols,
                )
            };
        }
    } else if let (1, Some(transposed)) = (m.row, transposed) {
        unsafe { transposed(m, rows, cols, dst, ld) };
    } else if m.row == 1 {
        // read in blocks of 8 × 8 that stay in L1, writing `dst` row by row
        const B: usize = 8;
        for r in 0..rows {
            dst[r * ld + cols..(r + 1) * ld].fill(0.0);
        }
        for r0 in (0..rows).step_by(B) {
            for c0 in (0..cols).step_by(B) {
                for r in r0..(r0 + B).min(rows) {
                    for c in c0..(c0 + B).min(cols) {
                        dst[r * ld + c] = unsafe { *m.ptr.offset(r as isize + c as isize * m.col) };
                    }
                }
            }
        }
    } else {
        for r in 0..rows {
            let line = &mut dst[r * ld..][..ld];
            for (c, d) in line.iter_mut().enumerate() {
                *d = if c < cols {
                    unsafe { *m.ptr.offset(r as isize * m.row + c as isize * m.col) }
                } else {
                    0.0
                };
            }
        }
    }
}

/// Copies `n ≤ dst.len()` contiguous floats from `src` to `dst` by vectors (no
/// call to `memcpy` for a row of a head) and zeroes the rest of `dst`.
///
/// # Safety
/// `src..src + n` is readable.
#[inline(always)]
unsafe fn copy_row<S: Simd>(s: S, src: *const f32, dst: &mut [f32], n: usize) {
    let full = n / S::LANES * S::LANES;
    let dst_ptr = dst.as_mut_ptr();
    // SAFETY: reads below `n`, writes below `n ≤ dst.len()`.
    unsafe {
        for c in (0..full).step_by(S::LANES) {
            s.store(dst_ptr.add(c), s.load(src.add(c)));
        }
        if full < n {
            s.store_tail(
                dst_ptr.add(full),
                n - full,
                s.load_tail(src.add(full), n - full),
            );
        }
    }
    dst[n..].fill(0.0);
}

/// A level's packing of a transposed matrix (`m.row == 1`), as [`pack`] does it.
type TransposedPack = unsafe fn(Strided, usize, usize, &mut [f32], usize);

/// [`pack`] of a transposed source at AVX-512: 16 × 16 tiles loaded along the
/// contiguous dim and transposed in registers (a scalar copy was a fifth of a
/// 32 × 32 head's time). `ld` must be a multiple of 16.
///
/// # Safety
/// The CPU has AVX-512F; as [`pack`], with `m.row == 1`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_transposed_avx512(m: Strided, rows: usize, cols: usize, dst: &mut [f32], ld: usize) {
    use std::arch::x86_64::{_mm512_maskz_loadu_ps, _mm512_setzero_ps, _mm512_storeu_ps};
    assert!(ld.is_multiple_of(16) && cols <= ld && dst.len() >= rows * ld);
    for c0 in (0..ld).step_by(16) {
        for r0 in (0..rows).step_by(16) {
            let width = (rows - r0).min(16);
            let mask = ((1u32 << width) - 1) as u16;
            // column c0 + i of the source, its rows r0 .. r0 + width (contiguous)
            let lines = std::array::from_fn(|i| {
                if c0 + i < cols {
                    // SAFETY: rows r0 .. r0 + width of column c0 + i are the
                    // caller's elements.
                    unsafe {
                        let at = m.ptr.offset(r0 as isize + (c0 + i) as isize * m.col);
                        _mm512_maskz_loadu_ps(mask, at)
                    }
                } else {
                    _mm512_setzero_ps()
                }
            });
            let out = crate::simd::transpose::transpose16(lines);
            for (j, line) in out.iter().enumerate().take(width) {
                // SAFETY: row r0 + j < rows, columns c0 .. c0 + 16 ≤ ld.
                unsafe { _mm512_storeu_ps(dst.as_mut_ptr().add((r0 + j) * ld + c0), *line) };
            }
        }
    }
}

/// `c[r][j] = Σ_t a_r[t·step] · b[t·ldb + j]` for the `R` rows `a_r` of `rows`
/// and two vectors of columns from `b`, each sum in `t` order, one fused
/// multiply-add per step (the portable level rounds the product and the sum
/// apart); rows `rows .. R` repeat the last row and are not stored. Stored to `c`
/// (row stride `ldc`).
///
/// # Safety
/// `a` holds `rows ≤ R` rows (`lda` apart) of `depth` elements `step` apart, `b`
/// `depth` rows of two vectors, `c` `rows` rows of two vectors.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn block<S: Simd, const R: usize>(
    s: S,
    (a, lda, step, rows): (*const f32, isize, isize, usize),
    b: *const f32,
    ldb: usize,
    depth: usize,
    c: *mut f32,
    ldc: usize,
) {
    let zero = s.splat(0.0);
    let mut acc = [[zero; 2]; R];
    // SAFETY: every access is inside the caller's blocks.
    unsafe {
        let a: [*const f32; R] = std::array::from_fn(|r| a.offset(r.min(rows - 1) as isize * lda));
        for t in 0..depth {
            let b0 = s.load(b.add(t * ldb));
            let b1 = s.load(b.add(t * ldb + S::LANES));
            for (acc_r, a_r) in acc.iter_mut().zip(&a) {
                let x = s.splat(*a_r.offset(t as isize * step));
                acc_r[0] = s.mul_add(x, b0, acc_r[0]);
                acc_r[1] = s.mul_add(x, b1, acc_r[1]);
            }
        }
        for (r, acc_r) in acc.iter().enumerate().take(rows) {
            s.store(c.add(r * ldc), acc_r[0]);
            s.store(c.add(r * ldc + S::LANES), acc_r[1]);
        }
    }
}

/// Asks the CPU to bring `h`'s `q`, `k` and `v` toward L1 ahead of [`head`] (a
/// driver calls it for the next head before running the current one). Heads cut
/// from `[batch, seq, heads, depth]` projections read runs of `depth` floats a
/// whole row of heads apart, a pattern the hardware prefetchers do not follow: at
/// batch 64 a head waited on memory for as long as it computed.
pub fn prefetch(h: &Head) {
    let Dims { s_q, s_k, d, d_v } = h.dims;
    for (m, rows, cols) in [(h.q, s_q, d), (h.k, d, s_k), (h.v, s_k, d_v)] {
        // runs along the contiguous dim: `runs` of `len` floats, `gap` apart
        let (runs, len, gap) = match (m.row, m.col) {
            (_, 1) => (rows, cols, m.row),
            (1, _) => (cols, rows, m.col),
            _ => continue,
        };
        for run in 0..runs {
            for at in (0..len).step_by(16) {
                let line = m.ptr.wrapping_offset(run as isize * gap + at as isize);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: a prefetch never faults, whatever the address.
                unsafe {
                    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
                    _mm_prefetch::<_MM_HINT_T0>(line.cast());
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = line;
            }
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
            _ => head_at::<_, { ROWS / 2 }>(Scalar, h, scratch, exp, None),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn head_avx512(h: &Head, scratch: &mut [f32], exp: UnaryFn) {
    let transposed: TransposedPack = pack_transposed_avx512;
    // SAFETY: the CPU has AVX-512 (`head`); the rest is `head`'s contract.
    unsafe { head_at::<_, ROWS>(Avx512::new(), h, scratch, exp, Some(transposed)) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn head_avx2(h: &Head, scratch: &mut [f32], exp: UnaryFn) {
    // SAFETY: the CPU has AVX2 (`head`); the rest is `head`'s contract.
    unsafe { head_at::<_, { ROWS / 2 }>(Avx2::new(), h, scratch, exp, None) }
}

/// [`head`] with the level's vectors, `R` query rows per register block.
///
/// # Safety
/// As [`head`].
#[inline(always)]
unsafe fn head_at<S: Simd, const R: usize>(
    s: S,
    h: &Head,
    scratch: &mut [f32],
    exp: UnaryFn,
    transposed: Option<TransposedPack>,
) {
    let Dims { s_q, s_k, d, d_v } = h.dims;
    let w = 2 * S::LANES;
    let (sk, dv) = (round_up(s_k, w), round_up(d_v, w));
    let (ks, rest) = scratch.split_at_mut(d * sk);
    let (vs, rest) = rest.split_at_mut(s_k * dv);
    let (scores, rest) = rest.split_at_mut(s_q * sk);
    let outs = &mut rest[..s_q * dv];
    // `v` and the output are used in place when their rows are whole blocks of
    // columns (`d_v` a multiple of two vectors), packed or staged otherwise;
    // `q` is read in place (its values are broadcast one at a time)
    let whole = d_v.is_multiple_of(w);
    // SAFETY: the caller's operands have these extents; every block below is
    // inside the padded scratch tiles or the caller's `v` and `out` rows.
    let (v, ldv) = unsafe {
        pack(s, h.k, (d, s_k), ks, sk, transposed);
        let v = if whole && h.v.col == 1 {
            (h.v.ptr, h.v.row as usize)
        } else {
            pack(s, h.v, (s_k, d_v), vs, dv, None);
            (vs.as_ptr(), dv)
        };
        for i0 in (0..s_q).step_by(R) {
            let rows = R.min(s_q - i0);
            let a = (
                h.q.ptr.offset(i0 as isize * h.q.row),
                h.q.row,
                h.q.col,
                rows,
            );
            for j0 in (0..sk).step_by(w) {
                let c = scores.as_mut_ptr().add(i0 * sk + j0);
                block::<S, R>(s, a, ks.as_ptr().add(j0), sk, d, c, sk);
            }
        }
        v
    };
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
    let (out, ldo) = if whole {
        (h.out, d_v)
    } else {
        (outs.as_mut_ptr(), dv)
    };
    // SAFETY: as above; the products read `s_k` columns of the scores, the rows of
    // `v`, and write `s_q` rows of the output (or its staging tile).
    unsafe {
        for i0 in (0..s_q).step_by(R) {
            let rows = R.min(s_q - i0);
            let a = (scores.as_ptr().add(i0 * sk), sk as isize, 1, rows);
            for c0 in (0..dv).step_by(w) {
                block::<S, R>(s, a, v.add(c0), ldv, s_k, out.add(i0 * ldo + c0), ldo);
            }
        }
        if !whole {
            for i in 0..s_q {
                let src = outs.as_ptr().add(i * dv);
                copy_row(
                    s,
                    src,
                    std::slice::from_raw_parts_mut(h.out.add(i * d_v), d_v),
                    d_v,
                );
            }
        }
    }
}
