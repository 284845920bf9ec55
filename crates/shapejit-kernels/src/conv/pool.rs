//! Max and average pooling, NCHW.
//!
//! Three paths, one result: every output is the fold of its window's taps in
//! `(i, j)` order (`direct::fold_tap`: the maximum keeps the first largest
//! value and the last NaN, the sum starts at +0), with the cells outside the
//! input skipped — the same as folding the padding value (−∞ never wins a
//! maximum; +0 leaves a sum that started at +0 unchanged). So the paths give
//! the same bits, and the average divides each sum by its position's cell count
//! afterwards.
//!
//! - **Rows** (column stride 1 or 2 over rows of unit element stride: nearly
//!   every pool): each input row is copied once into a ring of padded rows
//!   (`(kH − 1)·dH + 1` of them, the padding value around it, so a window
//!   never needs an edge test), and the output row is folded straight from
//!   them, up to [`CHUNK`] vectors of outputs at a time (independent chains);
//!   at column stride 2 each ring row is split into its even and odd padded
//!   columns as it is copied in, so every tap is one contiguous load.
//! - **Halving** (2×2 at stride 2, unpadded): the input rows read in place
//!   (`direct::pool_halving`).
//! - **Planes** (any other stride or layout): the direct convolution's phase
//!   planes (`direct::pool_plane`).
//!
//! **Invariant:** the ring's padding is written once per call and only the
//! input's columns of a row are copied over it, so every read outside them
//! sees the padding value; every read lies inside the ring ([`Ring::width`]
//! covers the furthest tap of the last chunk at the widest level).

use super::direct::{self, MAX_LANES, Reduce, fold_tap};
use super::{ConvGeom, Window, copy_run, dims4, fill_over};
use crate::cpu::{self, Level};
use crate::error::KernelError;
use crate::simd::vector::{Scalar, Simd};
use crate::view::View;

/// The most output vectors folded together on the row path (independent
/// chains; 8 accumulators and the fold's temporaries fit AVX2's 16 registers).
const CHUNK: usize = 8;

/// Which pooling reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// maximum of the cells inside the input (NaN propagates)
    Max,
    /// mean; the divisor counts padded cells when `count_include_pad`
    Avg {
        /// count padded cells (inside the declared padding) in the divisor
        count_include_pad: bool,
    },
}

/// Scratch elements [`pool2d`] needs on an `input` (H, W) image: the row
/// path's ring or one channel's phase planes (the input's layout picks), then
/// the average's per-row and per-column cell counts.
pub fn pool2d_scratch_len(win: &Window, input: [usize; 2]) -> usize {
    let planes = direct::Planes::new(win, input).scratch_len(1, 1);
    let ring = Ring::new(win, input[1]).map_or(0, |r| r.len());
    planes
        .max(ring)
        .saturating_add(win.out[0])
        .saturating_add(win.out[1])
}

/// Pools `x` (`[N, C, H, W]`, any layout) into contiguous `out` (`[N, C, OH, OW]`);
/// `scratch` holds at least [`pool2d_scratch_len`] elements. Results equal the
/// per-element definition exactly, on every path and at every CPU level.
pub fn pool2d(
    out: &mut [f32],
    x: &View<f32>,
    win: &Window,
    pool: Pool,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let [n, c, h, wd] = dims4("pool input", x.shape())?;
    let [oh, ow] = win.out;
    if out.len() != n * c * oh * ow {
        return Err(KernelError::ShapeMismatch {
            what: "pool output",
            expected: vec![n, c, oh, ow],
            actual: vec![out.len()],
        });
    }
    if out.is_empty() {
        return Ok(());
    }
    let need = pool2d_scratch_len(win, [h, wd]);
    if scratch.len() < need {
        return Err(KernelError::Invalid(format!(
            "pool scratch of {} elements, need {need}",
            scratch.len()
        )));
    }
    let (scratch, counts) = scratch.split_at_mut(need - oh - ow);
    let (row_counts, col_counts) = counts.split_at_mut(oh);
    let reduce = match pool {
        Pool::Max => Reduce::Max,
        Pool::Avg { count_include_pad } => {
            cell_counts(row_counts, col_counts, [h, wd], win, count_include_pad);
            Reduce::Sum
        }
    };
    let g = ConvGeom {
        data: x.data(),
        offset: x.geom().offset() as isize,
        xs: x.geom().strides(),
        size: [h, wd],
        cg: 1,
        win,
    };
    let unit_columns = g.xs[3] == 1;
    let ring = Ring::new(win, wd).filter(|_| unit_columns);
    let halving = unit_columns && direct::is_halving(win, [h, wd]);
    let planes = direct::Planes::new(win, [h, wd]);
    if let (Some(ring), false) = (ring, halving) {
        scratch[..ring.len()].fill(reduce.init());
    }
    for (idx, plane) in out.chunks_exact_mut(oh * ow).enumerate() {
        let (img, ch) = (idx / c, idx % c);
        let base = g.offset + img as isize * g.xs[0] + ch as isize * g.xs[1];
        match ring {
            _ if halving => direct::pool_halving(plane, &g, base, reduce),
            Some(ring) => rows_at_level(cpu::level(), plane, &g, base, &ring, scratch, reduce),
            None => direct::pool_plane(plane, &g, base, &planes, scratch, reduce),
        }
        if reduce == Reduce::Sum {
            for (row, &rows) in plane.chunks_exact_mut(ow).zip(row_counts.iter()) {
                for (o, &cols) in row.iter_mut().zip(col_counts.iter()) {
                    // both counts are small integers: their product is exact
                    *o /= rows * cols;
                }
            }
        }
    }
    Ok(())
}

/// The average's divisor per position is `rows[oy] · cols[ox]`: the window's
/// rows and columns inside the input, or with `count_include_pad` inside the
/// declared padding too (never past the end padding, where a ceil-mode window
/// may reach).
fn cell_counts(
    rows: &mut [f32],
    cols: &mut [f32],
    size: [usize; 2],
    win: &Window,
    count_include_pad: bool,
) {
    for (d, counts) in [rows, cols].into_iter().enumerate() {
        let end = if count_include_pad {
            size[d] + win.pads[d + 2]
        } else {
            size[d]
        } as isize;
        let start = if count_include_pad { isize::MIN } else { 0 };
        for (o, count) in counts.iter_mut().enumerate() {
            let inside = (0..win.kernel[d])
                .map(|k| win.coord(d, o, k))
                .filter(|&at| at >= start && at < end)
                .count();
            *count = inside as f32;
        }
    }
}

/// The row path's ring of padded input rows: at column stride 2 each row
/// split into its even and odd padded columns (two phase rows), so every tap
/// of a vector of outputs is one contiguous load.
#[derive(Clone, Copy, Debug)]
struct Ring {
    /// rows held: a window's span of input rows
    rows: usize,
    /// column phases per row: the column stride (1 or 2)
    phases: usize,
    /// floats per phase row: its share of the padded input row and the
    /// furthest tap of the last output vector (at [`MAX_LANES`]), then (at
    /// stride 2) the reach of the split's whole-vector stores
    half: usize,
}

impl Ring {
    /// The ring for `win` over rows of `wd` columns, where the row path runs:
    /// column stride 1 or 2.
    fn new(win: &Window, wd: usize) -> Option<Ring> {
        let sw = win.strides[1];
        if !matches!(sw, 1 | 2) {
            return None;
        }
        let rows = (win.kernel[0] - 1) * win.dilations[0] + 1;
        let vectors = win.out[1].div_ceil(MAX_LANES);
        let reach = vectors * MAX_LANES + (win.kernel[1] - 1) * win.dilations[1] / sw;
        let data = (win.pads[1] + wd).div_ceil(sw);
        let half = match sw {
            1 => reach.max(data),
            // the split stores whole vectors from the row's first column, and
            // so does the padding written back after them
            _ => reach.max(data + 2 * MAX_LANES + 1),
        };
        Some(Ring {
            rows,
            phases: sw,
            half,
        })
    }

    /// Floats per ring row (its phase rows).
    fn width(&self) -> usize {
        self.phases * self.half
    }

    fn len(&self) -> usize {
        self.rows.saturating_mul(self.width())
    }

    /// Where tap column `t` (`j·dW`) of output column 0 lies in a ring row.
    #[inline(always)]
    fn tap(&self, t: usize) -> usize {
        // (the two strides spelled out: no division per tap)
        match self.phases {
            1 => t,
            _ => t % 2 * self.half + t / 2,
        }
    }
}

/// [`pool_rows`] compiled for `level`.
fn rows_at_level(
    level: Level,
    out: &mut [f32],
    g: &ConvGeom,
    base: isize,
    ring: &Ring,
    scratch: &mut [f32],
    reduce: Reduce,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(
            o: &mut [f32],
            g: &ConvGeom,
            b: isize,
            ring: &Ring,
            s: &mut [f32],
            r: Reduce,
        ) {
            // SAFETY: called only where the CPU has AVX-512 (below).
            pool_rows(unsafe { Avx512::new() }, o, g, b, ring, s, r)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(
            o: &mut [f32],
            g: &ConvGeom,
            b: isize,
            ring: &Ring,
            s: &mut [f32],
            r: Reduce,
        ) {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            pool_rows(unsafe { Avx2::new() }, o, g, b, ring, s, r)
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(out, g, base, ring, scratch, reduce) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(out, g, base, ring, scratch, reduce) },
            Level::Scalar => {}
        }
    }
    pool_rows(Scalar, out, g, base, ring, scratch, reduce)
}

/// Pools the channel at `base` (rows of unit element stride) into `out`
/// (`OH` rows of `OW`, unnormalized sums for [`Reduce::Sum`]); `ring` holds
/// the padding value everywhere outside the input's columns.
#[inline(always)]
fn pool_rows<S: Simd>(
    s: S,
    out: &mut [f32],
    g: &ConvGeom,
    base: isize,
    ring: &Ring,
    scratch: &mut [f32],
    reduce: Reduce,
) {
    let win = g.win;
    let [h, wd] = g.size;
    let ([oh, ow], [kh, kw], [dh, dw]) = (win.out, win.kernel, win.dilations);
    let ([sh, sw], [pt, pleft]) = (win.strides, [win.pads[0], win.pads[1]]);
    let lanes = S::LANES;
    let buf = &mut scratch[..ring.len()];
    assert!((pleft + wd).div_ceil(sw) <= ring.half && ring.phases == sw && out.len() == oh * ow);
    let vectors = ow.div_ceil(lanes);
    // Invariant: the last vector's furthest read, `vectors·lanes + ⌊(kW −
    // 1)·dW / sW⌋`, lies inside a phase row (`Ring::new`).
    assert!(vectors * lanes + (kw - 1) * dw / sw <= ring.half);
    // at stride 2, input column x lands in phase (x + padL) mod 2 at (x + padL) / 2
    let (even_at, odd_at) = (
        pleft % 2 * ring.half + pleft / 2,
        (pleft + 1) % 2 * ring.half + pleft.div_ceil(2),
    );
    let counts = [wd.div_ceil(2), wd / 2];
    let mut next_row = 0;
    for (oy, dst) in out.chunks_exact_mut(ow).enumerate() {
        let top = (oy * sh) as isize - pt as isize;
        // copy the input rows of the window's span not yet in the ring: a
        // row's slot is `iy mod span`, distinct over any span of rows
        let bottom = top + ring.rows as isize - 1;
        for iy in next_row.max(top).max(0)..(bottom + 1).min(h as isize) {
            let at = (base + iy * g.xs[2]) as usize;
            let slot = iy as usize % ring.rows * ring.width();
            if sw == 1 {
                copy_run(s, &mut buf[slot + pleft..][..wd], &g.data[at..at + wd]);
                continue;
            }
            let row = &mut buf[slot..slot + ring.width()];
            direct::split_run(s, &g.data[at..], wd, row, [even_at, odd_at]);
            // the split's stores past each phase's columns back to padding
            // (whole vectors, inside the phase row: `Ring::new`)
            let reach = wd.div_ceil(2).next_multiple_of(lanes);
            for (start, count) in [(even_at, counts[0]), (odd_at, counts[1])] {
                fill_over(s, &mut row[start + count..], reach - count, reduce.init());
            }
        }
        next_row = next_row.max(bottom + 1);
        let src = buf.as_ptr();
        // the window's rows inside the input, as offsets of their ring slots
        // (`iy mod span` from the top row's, no division per row: i·dH < span)
        let top_slot = top.rem_euclid(ring.rows as isize) as usize;
        let taps = RowTaps {
            src,
            rows: (0..kh)
                .filter(|&i| (0..h as isize).contains(&(top + (i * dh) as isize)))
                .map(|i| {
                    let slot = top_slot + i * dh;
                    let slot = if slot >= ring.rows {
                        slot - ring.rows
                    } else {
                        slot
                    };
                    slot * ring.width()
                }),
            ring,
            kw,
            dw,
        };
        let mut first = 0;
        while first < vectors {
            // CHUNK vectors at a time while the row has them, then fewer
            first += match vectors - first {
                CHUNK.. => fold_store::<S, _, CHUNK>(s, reduce, &taps, dst, first),
                4.. => fold_store::<S, _, 4>(s, reduce, &taps, dst, first),
                2.. => fold_store::<S, _, 2>(s, reduce, &taps, dst, first),
                _ => fold_store::<S, _, 1>(s, reduce, &taps, dst, first),
            };
        }
    }
}

/// Folds `N` output vectors from vector `first` of the row `dst` and stores
/// them; returns `N`.
#[inline(always)]
fn fold_store<S: Simd, I: Iterator<Item = usize> + Clone, const N: usize>(
    s: S,
    reduce: Reduce,
    taps: &RowTaps<I>,
    dst: &mut [f32],
    first: usize,
) -> usize {
    let acc: [S::V; N] = fold_chunk(s, reduce, taps, first);
    store_chunk(s, dst, first, &acc);
    N
}

/// The taps of one output row on the row path: its window's rows inside the
/// input (their offsets in the ring), `kW` columns each.
struct RowTaps<'a, I> {
    src: *const f32,
    rows: I,
    ring: &'a Ring,
    kw: usize,
    dw: usize,
}

/// The folds of `N` output vectors from vector `first` of a row, over the
/// taps in `(i, j)` order.
#[inline(always)]
fn fold_chunk<S: Simd, I: Iterator<Item = usize> + Clone, const N: usize>(
    s: S,
    reduce: Reduce,
    taps: &RowTaps<I>,
    first: usize,
) -> [S::V; N] {
    let lanes = S::LANES;
    let mut acc = [s.splat(reduce.init()); N];
    for offset in taps.rows.clone() {
        let row = offset + first * lanes;
        for j in 0..taps.kw {
            let tap = row + taps.ring.tap(j * taps.dw);
            for (v, acc) in acc.iter_mut().enumerate() {
                // SAFETY: tap + (v + 1)·lanes ≤ the phase row's end (`pool_rows`'
                // invariant).
                let x = unsafe { s.load(taps.src.add(tap + v * lanes)) };
                *acc = fold_tap(s, reduce, *acc, x);
            }
        }
    }
    acc
}

/// Stores the vectors `acc` from vector `first` of the output row `dst` (the
/// last one partial where the row ends inside it).
#[inline(always)]
fn store_chunk<S: Simd>(s: S, dst: &mut [f32], first: usize, acc: &[S::V]) {
    let lanes = S::LANES;
    for (v, &acc) in acc.iter().enumerate() {
        let x = (first + v) * lanes;
        if x >= dst.len() {
            break;
        }
        let d = dst[x..].as_mut_ptr();
        // SAFETY: min(lanes, len − x) floats from x lie in the row.
        unsafe {
            if x + lanes <= dst.len() {
                s.store(d, acc)
            } else {
                s.store_tail(d, dst.len() - x, acc)
            }
        }
    }
}
