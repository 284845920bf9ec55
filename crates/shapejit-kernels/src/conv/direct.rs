//! The direct convolution path (every k×k window, and groups of few output
//! channels, where a GEMM tile would mostly multiply padding), the phase
//! planes the depthwise path (`depthwise`) runs on too, and pooling on them
//! where the row path (`pool`) does not apply.
//!
//! Per image and group, the group's input channels are first rearranged into
//! *phase planes* of the zero-padded input (each float written once, rows in
//! order with whole-vector stores whose overrun the next write covers — masked
//! stores are slow on AMD cores): for strides `sH × sW`, plane
//! `(c, rH, rW)` holds `xpad[c, y·sH + rH, x·sW + rW]` at `y·Wq + x`, with
//! `Wq = ⌈Wpad / sW⌉`. Kernel tap `(i, j)` of output `(oy, ox)` then reads plane
//! `(c, i·dH mod sH, j·dW mod sW)` at `q + ⌊i·dH/sH⌋·Wq + ⌊j·dW/sW⌋`, with
//! `q = oy·Wq + ox`: every tap is one contiguous, shifted run over `q`, whatever
//! the stride, dilation and padding; the taps' offsets are computed once per
//! call. The output positions are cut into vectors ([`Walk`]): either flat over
//! `q ∈ 0..OH·Wq` (columns `ox ≥ OW` computed into a buffer and dropped when
//! the valid columns are copied out), or row by row (each row's last vector
//! partial, stored straight into the output) where that needs no more vectors.
//! Up to [`CHANNEL_BLOCK`] output channels are computed together over a block
//! of vectors (8 × 3 accumulators at AVX-512, 6 × 2 at AVX2: each loaded input
//! vector feeds every channel of the block): `acc = bias`, then one fused
//! multiply-add per tap in `(c, i, j)` order, then the activation. Where the
//! group's planes and weights outgrow L2 ([`PASS_BYTES`]), the taps are summed
//! in passes over the input channels, every block of output channels per
//! pass, the sums stored between passes and reloaded (the same multiply-adds in
//! the same order): each pass's planes are read from L2 by every block instead
//! of all the planes from L3. Pooling runs
//! the flat walk with `max` (NaN propagating, padding −∞) or a sum (padding +0,
//! which leaves every sum unchanged: a sum starting at +0 is never −0) over the
//! taps in `(i, j)` order, as the scalar definition does.
//!
//! **Invariant:** every read lies inside the planes ([`Planes::len`] covers the
//! furthest tap of the last vector of either walk); padding reads as 0. Each
//! output is `act(fma(w_last, x_last, … fma(w_0, x_0, bias)))` on AVX2 and
//! AVX-512 (bit-identical), with separately rounded products on the scalar
//! path, whatever the walk, the block of channels it is computed in, or the
//! range of channels of the call.

use super::{ConvGeom, Window, copy_over, copy_rows, fill_over, fill_run, gather_run, load_part};
use crate::cpu::{self, Level};
use crate::packed::Activation;
use crate::simd::vector::{Scalar, Simd};

/// Lanes the planes are padded for (the widest level's), so scratch sizes do
/// not depend on the level in use.
pub(super) const MAX_LANES: usize = 16;
/// The most bytes of input planes and weights one channel pass of a
/// convolution reads ([`Planes::channel_pass`]): planes past this are walked in
/// passes of input channels, the partial sums stored between them, rather than
/// streamed from L3 again for every block of output channels.
pub(super) const PASS_BYTES: usize = 192 << 10;
/// The fewest taps a channel pass sums (a reload and store of the sums per
/// vector, amortized over them).
pub(super) const MIN_PASS_TAPS: usize = 64;
/// The most output channels computed together (at AVX-512; six below, see
/// [`sums_with`]): each loaded input vector feeds this many accumulators.
pub(super) const CHANNEL_BLOCK: usize = 8;

/// How the convolution cuts its output positions into vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Walk {
    /// over `q ∈ 0..n_q` (plane rows of `Wq`, the columns past `OW` computed
    /// too), into sums whose valid columns are copied out after
    Flat,
    /// each output row in vectors of its own (the last one partial), stored
    /// straight into the output: taken where it needs no more vectors than the
    /// flat walk (at [`MAX_LANES`]), as for rows a multiple of the width
    Rows,
}

/// The phase-plane geometry of one group's input.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planes {
    /// strides `[sH, sW]`: `sH · sW` phase planes per channel
    strides: [usize; 2],
    /// rows and columns of each plane (`⌈Hpad / sH⌉`, `⌈Wpad / sW⌉`)
    rows: usize,
    cols: usize,
    /// output positions computed per plane by the flat walk, `OH · Wq` rounded
    /// up to [`MAX_LANES`]
    n_q: usize,
    /// the output size `[OH, OW]`
    out: [usize; 2],
    /// how a convolution walks the output
    walk: Walk,
    /// floats per plane: the data and its slack (at least twice
    /// [`MAX_LANES`]), and the furthest reach of the last vector
    len: usize,
}

impl Planes {
    pub(super) fn new(win: &Window, [h, wd]: [usize; 2]) -> Planes {
        let [sh, sw] = win.strides;
        // the padded input, or further where a ceil-mode pool's last window ends
        let extent = |d: usize, size: usize| {
            let reach = (win.out[d].max(1) - 1) * win.strides[d]
                + (win.kernel[d] - 1) * win.dilations[d]
                + 1;
            (size + win.pads[d] + win.pads[d + 2]).max(reach)
        };
        let rows = extent(0, h).div_ceil(sh);
        let cols = extent(1, wd).div_ceil(sw);
        let [oh, ow] = win.out;
        let n_q = (oh * cols).next_multiple_of(MAX_LANES);
        let per_row = ow.div_ceil(MAX_LANES);
        let walk = if oh * per_row <= n_q / MAX_LANES {
            Walk::Rows
        } else {
            Walk::Flat
        };
        // the row walk's last vector ends by (OH − 1)·Wq + ⌈OW / lanes⌉·lanes
        let rows_end = (oh.max(1) - 1) * cols + per_row * MAX_LANES;
        let reach = (win.kernel[0] - 1) * win.dilations[0] / sh * cols
            + (win.kernel[1] - 1) * win.dilations[1] / sw;
        Planes {
            strides: [sh, sw],
            rows,
            cols,
            n_q,
            out: win.out,
            walk,
            // (and slack past the last row, which the last row's whole-vector
            // writes may reach, see `fill_planes`)
            len: (rows * cols + 2 * MAX_LANES).max(n_q.max(rows_end) + reach),
        }
    }

    /// Scratch floats for `cg` channels: their planes, then `outputs` output
    /// planes of `n_q` sums.
    pub(super) fn scratch_len(&self, cg: usize, outputs: usize) -> usize {
        cg.saturating_mul(self.strides[0] * self.strides[1])
            .saturating_mul(self.len)
            .saturating_add(self.n_q.saturating_mul(outputs))
    }

    /// Scratch floats [`conv_group`] needs for `cg` channels (`per_channel` taps
    /// each) into up to `m` output channels: the planes and
    /// [`Planes::sum_planes`] output planes.
    pub(super) fn conv_work_len(&self, cg: usize, m: usize, per_channel: usize) -> usize {
        self.scratch_len(cg, self.sum_planes(cg, m, per_channel))
    }

    /// [`Planes::conv_work_len`], then the tap offsets (one per tap).
    pub(super) fn conv_scratch_len(&self, cg: usize, m: usize, per_channel: usize) -> usize {
        self.conv_work_len(cg, m, per_channel)
            .saturating_add(cg.saturating_mul(per_channel))
    }

    /// Output planes of `n_q` sums a convolution of `cg` channels (`per_channel`
    /// taps each) into `m` output channels keeps: none on the row walk, one
    /// [`CHANNEL_BLOCK`]'s on the flat walk, or all `m` where it runs in
    /// several channel passes ([`Planes::channel_pass`]), which reload them.
    pub(super) fn sum_planes(&self, cg: usize, m: usize, per_channel: usize) -> usize {
        match self.walk {
            Walk::Rows => 0,
            Walk::Flat if self.channel_pass(cg, m, per_channel) < cg => m,
            Walk::Flat => CHANNEL_BLOCK,
        }
    }

    /// Input channels per pass of a convolution of `cg` channels (`per_channel`
    /// taps each) into `m` output channels: all of them where their planes and
    /// weights fit in [`PASS_BYTES`], else as many as fit, so that each pass's
    /// planes stay in L2 while every output channel block walks them — unless
    /// fewer than [`MIN_PASS_TAPS`] taps' worth fit, which the reload of the
    /// sums would not pay for (a large map: one pass).
    pub(super) fn channel_pass(&self, cg: usize, m: usize, per_channel: usize) -> usize {
        let planes = self.strides[0] * self.strides[1] * self.len;
        let floats = planes.saturating_add(m.saturating_mul(per_channel));
        let fit = PASS_BYTES / size_of::<f32>() / floats.max(1);
        match fit.saturating_mul(per_channel) < MIN_PASS_TAPS {
            true => cg.max(1),
            false => fit.clamp(1, cg.max(1)),
        }
    }

    /// Output positions the flat walk computes per plane (`OH · Wq` rounded up
    /// to [`MAX_LANES`]).
    pub(super) fn n_q(&self) -> usize {
        self.n_q
    }

    /// Floats per plane row (`Wq`).
    pub(super) fn cols(&self) -> usize {
        self.cols
    }

    /// Offset of plane `(c, rH, rW)` in the scratch.
    pub(super) fn plane(&self, c: usize, rh: usize, rw: usize) -> usize {
        ((c * self.strides[0] + rh) * self.strides[1] + rw) * self.len
    }
}

/// [`fill_planes`] compiled for `level` (so its copies and strided gathers
/// vectorize at the level's width).
pub(super) fn fill_at_level(
    level: Level,
    planes: &mut [f32],
    pl: &Planes,
    g: &ConvGeom,
    base: isize,
    pad: f32,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(p: &mut [f32], pl: &Planes, g: &ConvGeom, base: isize, pad: f32) {
            // SAFETY: called only where the CPU has AVX-512 (below).
            fill_planes(unsafe { Avx512::new() }, p, pl, g, base, pad)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(p: &mut [f32], pl: &Planes, g: &ConvGeom, base: isize, pad: f32) {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            fill_planes(unsafe { Avx2::new() }, p, pl, g, base, pad)
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(planes, pl, g, base, pad) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(planes, pl, g, base, pad) },
            Level::Scalar => {}
        }
    }
    fill_planes(Scalar, planes, pl, g, base, pad)
}

/// Writes the phase planes of the group at `base` (its first channel's offset
/// in `g.data`) into `planes[..cg · sH · sW · len]`, `pad` in the padding:
/// every float written once (the padding around each row's copied columns,
/// the padded rows and the planes' slack past the last row filled, not the
/// whole plane first).
#[inline(always)]
pub(super) fn fill_planes<S: Simd>(
    s: S,
    planes: &mut [f32],
    pl: &Planes,
    g: &ConvGeom,
    base: isize,
    pad: f32,
) {
    let win = g.win;
    let [h, wd] = g.size;
    let [sh, sw] = pl.strides;
    let (pt, pleft) = (win.pads[0] as isize, win.pads[1] as isize);
    let grid = pl.rows * pl.cols;
    for c in 0..g.cg {
        for rh in 0..sh {
            if sw == 2 && g.xs[3] == 1 {
                split_rows(s, planes, pl, g, base, [c, rh], pad);
                continue;
            }
            for rw in 0..sw {
                let start = pl.plane(c, rh, rw);
                let plane = &mut planes[start..start + pl.len];
                // columns x' of this phase whose input column x'·sW + rW − padL is inside
                let first = (pleft - rw as isize).max(0) as usize;
                let lo = first.div_ceil(sw).min(pl.cols);
                let hi = (wd as isize + pleft - rw as isize).max(0) as usize;
                let hi = hi.div_ceil(sw).clamp(lo, pl.cols);
                for y in 0..pl.rows {
                    let row = &mut plane[y * pl.cols..];
                    let iy = (y * sh + rh) as isize - pt;
                    if iy < 0 || iy >= h as isize || lo == hi {
                        fill_over(s, row, pl.cols, pad);
                        continue;
                    }
                    let line = base + c as isize * g.xs[1] + iy * g.xs[2];
                    let ix0 = (lo * sw + rw) as isize - pleft;
                    let step = sw as isize * g.xs[3];
                    let at = line + ix0 * g.xs[3];
                    // head, body and tail in order, each whole-vector overrun
                    // overwritten by the next (the last row's by the slack)
                    fill_over(s, row, lo, pad);
                    if step == 1 {
                        copy_over(s, &mut row[lo..], &g.data[at as usize..], hi - lo);
                    } else if step > 1 {
                        let (dst, step) = (&mut row[lo..hi], step as usize);
                        let reach = (dst.len() - 1) * step + 1;
                        gather_run(dst, &g.data[at as usize..][..reach], step);
                    } else {
                        for (t, d) in row[lo..hi].iter_mut().enumerate() {
                            *d = g.data[(at + t as isize * step) as usize];
                        }
                    }
                    fill_over(s, &mut row[hi..], pl.cols - hi, pad);
                }
                fill_run(s, &mut plane[grid..], pad);
            }
        }
    }
}

/// [`fill_planes`] for column stride 2 over unit-stride input rows: both column
/// phases of channel `c`, row phase `rh`, from one pass over each input row (two
/// vectors loaded, split into even and odd columns, one store into each plane),
/// every float written once.
#[inline(always)]
fn split_rows<S: Simd>(
    s: S,
    planes: &mut [f32],
    pl: &Planes,
    g: &ConvGeom,
    base: isize,
    [c, rh]: [usize; 2],
    pad: f32,
) {
    let [h, wd] = g.size;
    let (pt, pleft) = (g.win.pads[0] as isize, g.win.pads[1]);
    let (cols, grid) = (pl.cols, pl.rows * pl.cols);
    // input column `x` lands in phase `(x + padL) mod 2` at `(x + padL) / 2`:
    // the even columns in one plane from `even_at`, the odd ones in the other
    let [even_plane, odd_plane] = [pl.plane(c, rh, pleft % 2), pl.plane(c, rh, (pleft + 1) % 2)];
    let (even_at, odd_at) = (pleft / 2, pleft.div_ceil(2));
    let pairs = wd / 2;
    // the columns each row of the even and the odd plane holds
    let spans = [
        (even_plane, even_at, even_at + wd.div_ceil(2)),
        (odd_plane, odd_at, odd_at + pairs),
    ];
    // Invariant: the planes hold the padded input, so every column lands inside
    // its plane's row.
    assert!(spans.iter().all(|&(_, _, end)| end <= cols));
    for y in 0..pl.rows {
        let iy = (y * pl.strides[0] + rh) as isize - pt;
        if iy < 0 || iy >= h as isize {
            for &(start, _, _) in &spans {
                fill_over(s, &mut planes[start + y * cols..start + pl.len], cols, pad);
            }
            continue;
        }
        // each plane's row in order: head, body, tail, each whole-vector
        // overrun overwritten by the next write (the next row's, the slack)
        for &(start, lo, _) in &spans {
            fill_over(s, &mut planes[start + y * cols..start + pl.len], lo, pad);
        }
        let line = (base + c as isize * g.xs[1] + iy * g.xs[2]) as usize;
        let src = &g.data[line..];
        let rows = [
            even_plane + y * cols + even_at,
            odd_plane + y * cols + odd_at,
        ];
        split_run(s, src, wd, planes, rows);
        for &(start, _, hi) in &spans {
            let row = &mut planes[start + y * cols..start + pl.len];
            fill_over(s, &mut row[hi..], cols - hi, pad);
        }
    }
    for &(start, _, _) in &spans {
        fill_run(s, &mut planes[start + grid..start + pl.len], pad);
    }
}

/// Splits the first `wd` floats of `src` into its even columns, stored in
/// `dst` from `even_at`, and its odd ones, from `odd_at`, as whole vectors:
/// each takes `⌈wd/2⌉` rounded up to the lanes, the floats past its columns
/// left for the caller to overwrite (input past the run, or 0).
#[inline(always)]
pub(super) fn split_run<S: Simd>(
    s: S,
    src: &[f32],
    wd: usize,
    dst: &mut [f32],
    [even_at, odd_at]: [usize; 2],
) {
    let reach = wd.div_ceil(2).next_multiple_of(S::LANES);
    assert!(src.len() >= wd && even_at.max(odd_at) + reach <= dst.len());
    let (to_even, to_odd) = (
        dst.as_mut_ptr().wrapping_add(even_at),
        dst.as_mut_ptr().wrapping_add(odd_at),
    );
    let mut i = 0;
    while 2 * (i + S::LANES) <= wd {
        // SAFETY: columns 2i .. 2i + 2·LANES lie in `src`; the stores end by
        // i + LANES ≤ reach (asserted above).
        unsafe {
            let at = src.as_ptr().add(2 * i);
            let (e, o) = s.deinterleave(s.load(at), s.load(at.add(S::LANES)));
            s.store(to_even.add(i), e);
            s.store(to_odd.add(i), o);
        }
        i += S::LANES;
    }
    if 2 * i < wd {
        let rest = wd - 2 * i;
        let (a, b) = (
            load_part(s, src, 2 * i, rest),
            load_part(s, src, 2 * i + S::LANES, rest.saturating_sub(S::LANES)),
        );
        let (e, o) = s.deinterleave(a, b);
        // SAFETY: i + LANES ≤ reach (asserted above).
        unsafe {
            s.store(to_even.add(i), e);
            s.store(to_odd.add(i), o);
        }
    }
}

/// The output channels of one group on the direct path (or every channel on
/// the depthwise path).
pub(super) struct Channels<'a> {
    /// their `[M, Cg·kH·kW]` weights, row-major
    pub w: &'a [f32],
    /// their `M` biases (none: 0)
    pub bias: Option<&'a [f32]>,
    pub activation: Option<Activation>,
}

/// Computes the output planes `out` (`M` planes of `OH·OW` floats) of the
/// channels `ch`, all reading the group at `base`; `scratch` holds
/// [`Planes::conv_work_len`] floats, `offsets` the group's [`tap_offsets`].
pub(super) fn conv_group(
    out: &mut [f32],
    g: &ConvGeom,
    base: isize,
    pl: &Planes,
    scratch: &mut [f32],
    offsets: &[f32],
    ch: &Channels,
) {
    let (planes, sums) = scratch.split_at_mut(pl.scratch_len(g.cg, 0));
    fill_at_level(cpu::level(), planes, pl, g, base, 0.0);
    let per_channel = g.win.kernel[0] * g.win.kernel[1];
    let taps = Taps {
        planes,
        offsets,
        per_channel,
    };
    sums_at_level(cpu::level(), out, sums, &taps, pl, ch);
}

/// Writes into `table` the offset in the planes of every tap `(c, i, j)`, in
/// that order, as `u32` bits (the planes are checked to be addressable so by
/// [`Planes::conv_scratch_len`]'s caller), and returns the written part: the
/// same for every group and image of a convolution.
pub(super) fn tap_offsets<'t>(
    table: &'t mut [f32],
    pl: &Planes,
    win: &Window,
    cg: usize,
) -> &'t [f32] {
    let ([kh, kw], [dh, dw]) = (win.kernel, win.dilations);
    let [sh, sw] = pl.strides;
    let table = &mut table[..cg * kh * kw];
    let mut t = table.iter_mut();
    for c in 0..cg {
        for i in 0..kh {
            for j in 0..kw {
                let at =
                    pl.plane(c, i * dh % sh, j * dw % sw) + i * dh / sh * pl.cols + j * dw / sw;
                if let Some(slot) = t.next() {
                    *slot = f32::from_bits(at as u32);
                }
            }
        }
    }
    table
}

/// The planes and the offset of every tap in them ([`tap_offsets`]).
struct Taps<'a> {
    planes: &'a [f32],
    offsets: &'a [f32],
    /// taps per input channel (`kH · kW`)
    per_channel: usize,
}

/// One pass over some input channels' taps ([`Planes::channel_pass`]): the
/// sums start from the bias on the first pass and from the stored partial
/// sums after it; the activation is applied on the last.
#[derive(Clone, Debug)]
struct Pass {
    taps: std::ops::Range<usize>,
    first: bool,
    last: bool,
}

/// [`sums_with`] compiled for `level`.
fn sums_at_level(
    level: Level,
    out: &mut [f32],
    sums: &mut [f32],
    taps: &Taps,
    pl: &Planes,
    ch: &Channels,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(
            out: &mut [f32],
            sums: &mut [f32],
            taps: &Taps,
            pl: &Planes,
            ch: &Channels,
        ) {
            // SAFETY: called only where the CPU has AVX-512 (below).
            sums_with(unsafe { Avx512::new() }, out, sums, taps, pl, ch)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(out: &mut [f32], sums: &mut [f32], taps: &Taps, pl: &Planes, ch: &Channels) {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            sums_with(unsafe { Avx2::new() }, out, sums, taps, pl, ch)
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(out, sums, taps, pl, ch) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(out, sums, taps, pl, ch) },
            Level::Scalar => {}
        }
    }
    sums_with(Scalar, out, sums, taps, pl, ch)
}

/// `out[r, oy, ox] = act(bias[r] + Σ_t w[r, t] · planes[offset(t) + oy·Wq + ox])`
/// over the taps `t = (c, i, j)` in order, for the channels of `ch` (its output
/// planes in `out`), in blocks of [`CHANNEL_BLOCK`] at AVX-512 and 6 below: a
/// block's channels at once, over blocks of several vectors of positions, then
/// fewer, walked as the planes say ([`Walk`]; `sums` holds the flat walk's
/// [`Planes::sum_planes`]). Where the planes and weights outgrow L2, in passes
/// over the input channels ([`Planes::channel_pass`]), every block per pass:
/// the same fused multiply-adds in the same order, the sums stored between
/// passes. (No closures here: a closure would not inherit the caller's target
/// features, and the intrinsics would not inline into it.)
#[inline(always)]
fn sums_with<S: Simd>(
    s: S,
    out: &mut [f32],
    sums: &mut [f32],
    taps: &Taps,
    pl: &Planes,
    ch: &Channels,
) {
    let k = taps.offsets.len();
    let per_channel = taps.per_channel.max(1);
    let cg = k / per_channel;
    let walk = Walker::new(pl, S::LANES);
    // the channels: the output planes
    let m = out.len().checked_div(walk.plane).unwrap_or(0);
    // register budget: MB·V accumulators, V loaded vectors and a broadcast
    // weight (32 registers at AVX-512, 16 below). At AVX2, 4 × 3 (all 16) had
    // LLVM keep one accumulator on the stack, a store-to-load round trip per
    // tap: 6 × 2 (15) ran 1.6–2× faster (`conv3x3/direct/*`, 37–43 → 54–87
    // GFLOP/s on a Zen 3).
    let wide = S::LANES >= 16;
    let block = if wide { CHANNEL_BLOCK } else { 6 };
    let pass = pl.channel_pass(cg, m, per_channel);
    // the flat walk's sums of every channel, kept while passes reload them
    // (as `Planes::sum_planes` sizes them)
    let kept = pl.walk == Walk::Flat && pass < cg;
    // every load, `offset + q + lanes` with `q + lanes ≤ walk.end`, lies in the planes
    assert!(
        cg * per_channel == k
            && taps
                .offsets
                .iter()
                .all(|o| o.to_bits() as usize + walk.end <= taps.planes.len())
            && m * k == ch.w.len()
            && (pl.walk == Walk::Rows
                || sums.len() >= if kept { m } else { block.min(m) } * pl.n_q)
            && ch.bias.is_none_or(|b| b.len() == m)
    );
    for c0 in (0..cg.max(1)).step_by(pass) {
        let c1 = (c0 + pass).min(cg);
        let pass = Pass {
            taps: c0 * per_channel..c1 * per_channel,
            first: c0 == 0,
            last: c1 == cg,
        };
        for m0 in (0..m).step_by(block) {
            let rows = m0..(m0 + block).min(m);
            let out = &mut out[rows.start * walk.plane..rows.end * walk.plane];
            let sums = match (pl.walk, kept) {
                (Walk::Rows, _) => &mut [][..],
                (Walk::Flat, true) => &mut sums[rows.start * pl.n_q..rows.end * pl.n_q],
                (Walk::Flat, false) => &mut sums[..rows.len() * pl.n_q],
            };
            let b = Block {
                taps,
                walk,
                w: &ch.w[rows.start * k..rows.end * k],
                bias: ch.bias.map(|b| &b[rows.clone()]),
                activation: ch.activation,
                pass: pass.clone(),
            };
            b.run_block(s, out, sums, wide);
            if !kept {
                copy_sums(s, out, sums, pl, &walk);
            }
        }
    }
    if kept {
        copy_sums(s, out, &sums[..m * pl.n_q], pl, &walk);
    }
}

/// Copies the flat walk's valid columns of each plane of `sums` into the
/// output planes `out` (nothing on the row walk, which stores them in place).
#[inline(always)]
fn copy_sums<S: Simd>(s: S, out: &mut [f32], sums: &[f32], pl: &Planes, walk: &Walker) {
    if pl.walk == Walk::Rows {
        return;
    }
    let size = [pl.out[0], walk.ow];
    for (r, sums) in sums.chunks_exact(pl.n_q).enumerate() {
        // the later planes cover the overrun of each plane's copy
        copy_rows(s, &mut out[r * walk.plane..], sums, size, pl.cols);
    }
}

/// The vectors of output positions of one level's width, as [`Walk`] cuts them.
#[derive(Clone, Copy, Debug)]
struct Walker {
    walk: Walk,
    lanes: usize,
    /// vectors in all
    count: usize,
    /// vectors per output row ([`Walk::Rows`])
    per_row: usize,
    /// columns of the planes (`Wq`), of the output (`OW`), floats per output plane
    cols: usize,
    ow: usize,
    plane: usize,
    /// the end of the furthest vector of positions: `q + lanes ≤ end` for all
    end: usize,
}

impl Walker {
    fn new(pl: &Planes, lanes: usize) -> Walker {
        let [oh, ow] = pl.out;
        let per_row = ow.div_ceil(lanes);
        let (count, end) = match pl.walk {
            Walk::Flat => (pl.n_q / lanes, pl.n_q),
            Walk::Rows => (oh * per_row, (oh - 1) * pl.cols + per_row * lanes),
        };
        Walker {
            walk: pl.walk,
            lanes,
            count,
            per_row,
            cols: pl.cols,
            ow,
            plane: oh * ow,
            end,
        }
    }

    /// Vector `u`'s first position in the planes (`q`), where its lanes go
    /// (in `sums` for the flat walk, in an output plane for the row walk) and
    /// how many of them are kept.
    #[inline(always)]
    fn vector(&self, u: usize) -> (usize, usize, usize) {
        match self.walk {
            Walk::Flat => (u * self.lanes, u * self.lanes, self.lanes),
            Walk::Rows => {
                let (oy, x) = (u / self.per_row, u % self.per_row * self.lanes);
                let kept = self.lanes.min(self.ow - x);
                (oy * self.cols + x, oy * self.ow + x, kept)
            }
        }
    }
}

/// What [`Block::run`] reads: the taps and `MB` channels' weights.
struct Block<'a> {
    taps: &'a Taps<'a>,
    walk: Walker,
    /// `[MB, taps]`
    w: &'a [f32],
    /// `MB` biases
    bias: Option<&'a [f32]>,
    activation: Option<Activation>,
    /// the taps this pass sums
    pass: Pass,
}

impl Block<'_> {
    /// [`Block::run`] with the register blocking for this block's channel count
    /// (`out` holds their planes, at most [`CHANNEL_BLOCK`] of them where `wide`,
    /// 6 otherwise).
    #[inline(always)]
    fn run_block<S: Simd>(&self, s: S, out: &mut [f32], sums: &mut [f32], wide: bool) {
        match (out.len() / self.walk.plane, wide) {
            (8, true) => self.run::<S, 8, 3>(s, out, sums),
            (7, true) => self.run::<S, 7, 3>(s, out, sums),
            (6, true) => self.run::<S, 6, 4>(s, out, sums),
            (5, true) => self.run::<S, 5, 4>(s, out, sums),
            (4, true) => self.run::<S, 4, 6>(s, out, sums),
            (6, false) => self.run::<S, 6, 2>(s, out, sums),
            (5, false) => self.run::<S, 5, 2>(s, out, sums),
            (4, false) => self.run::<S, 4, 2>(s, out, sums),
            (3, true) => self.run::<S, 3, 7>(s, out, sums),
            (3, false) => self.run::<S, 3, 3>(s, out, sums),
            (2, true) => self.run::<S, 2, 8>(s, out, sums),
            (2, false) => self.run::<S, 2, 4>(s, out, sums),
            _ => self.run::<S, 1, 8>(s, out, sums),
        }
    }

    /// Every vector of positions of the `MB` channels (checked by
    /// [`sums_with`]): blocks of `V` vectors, then single vectors; into `out`
    /// (`MB` output planes) or `sums` (`MB` planes of `n_q`) as the walk says.
    #[inline(always)]
    fn run<S: Simd, const MB: usize, const V: usize>(
        &self,
        s: S,
        out: &mut [f32],
        sums: &mut [f32],
    ) {
        let (dst, step) = match self.walk.walk {
            Walk::Flat => (sums.as_mut_ptr(), sums.len() / MB),
            Walk::Rows => (out.as_mut_ptr(), self.walk.plane),
        };
        let mut u = 0;
        while u + V <= self.walk.count {
            // SAFETY: as asserted in `sums_with`; every vector below `count`
            // reads below `end` and writes inside its plane of `step` floats.
            unsafe { self.vectors::<S, MB, V>(s, dst, step, u) };
            u += V;
        }
        if V > 2 && u + 2 <= self.walk.count {
            // SAFETY: as above.
            unsafe { self.vectors::<S, MB, 2>(s, dst, step, u) };
            u += 2;
        }
        while u < self.walk.count {
            // SAFETY: as above.
            unsafe { self.vectors::<S, MB, 1>(s, dst, step, u) };
            u += 1;
        }
    }

    /// Vectors `u .. u + V` of each of the `MB` channels, channel `r`'s
    /// written to the plane at `dst + r·step`.
    ///
    /// # Safety
    /// `u + V ≤ count`; every tap offset plus `end` lies in the planes, `w`
    /// holds `MB · taps` weights, and `dst` `MB` planes of `step` floats that
    /// hold every vector's kept lanes.
    #[inline(always)]
    unsafe fn vectors<S: Simd, const MB: usize, const V: usize>(
        &self,
        s: S,
        dst: *mut f32,
        step: usize,
        u: usize,
    ) {
        let k = self.taps.offsets.len();
        let src = self.taps.planes.as_ptr();
        let w = self.w.as_ptr();
        let at: [(usize, usize, usize); V] = std::array::from_fn(|v| self.walk.vector(u + v));
        let mut acc = [[s.splat(0.0); V]; MB];
        for (r, acc) in acc.iter_mut().enumerate() {
            if self.pass.first {
                let bias = self.bias.map_or(0.0, |b| b[r]);
                *acc = [s.splat(bias); V];
                continue;
            }
            for (a, &(_, to, kept)) in acc.iter_mut().zip(&at) {
                // SAFETY: the kept lanes lie in plane r (the contract), where the
                // previous pass stored them.
                *a = unsafe {
                    let d = dst.add(r * step + to);
                    if kept == S::LANES {
                        s.load(d)
                    } else {
                        s.load_tail(d, kept)
                    }
                };
            }
        }
        let first = self.pass.taps.start;
        for (t, offset) in self.taps.offsets[self.pass.taps.clone()]
            .iter()
            .enumerate()
            .map(|(t, o)| (first + t, o))
        {
            let from = src.wrapping_add(offset.to_bits() as usize);
            let mut x = [s.splat(0.0); V];
            for (x, &(q, _, _)) in x.iter_mut().zip(&at) {
                // SAFETY: offset + q + lanes ≤ offset + end ≤ planes.len().
                *x = unsafe { s.load(from.add(q)) };
            }
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: r·k + t < MB·k ≤ w.len() (the contract).
                let wv = s.splat(unsafe { *w.add(r * k + t) });
                for (a, &x) in acc.iter_mut().zip(&x) {
                    *a = s.mul_add(wv, x, *a);
                }
            }
        }
        // copied first, so the tap loop indexes `acc` with constants only and it
        // stays in registers (as in the packed GEMM kernel)
        let mut done = [[s.splat(0.0); V]; MB];
        done.copy_from_slice(&acc);
        for (r, acc) in done.iter().enumerate() {
            for (&a, &(_, to, kept)) in acc.iter().zip(&at) {
                let a = match self.activation.filter(|_| self.pass.last) {
                    Some(act) => act.apply_v(s, a),
                    None => a,
                };
                // SAFETY: the vector's kept lanes lie in plane r (the contract).
                unsafe {
                    let d = dst.add(r * step + to);
                    if kept == S::LANES {
                        s.store(d, a)
                    } else {
                        s.store_tail(d, kept, a)
                    }
                }
            }
        }
    }
}

/// Which reduction [`pool_plane`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reduce {
    /// maximum, NaN propagating
    Max,
    /// sum (the caller divides)
    Sum,
}

impl Reduce {
    /// The fold's start: −∞ for the maximum, 0 for the sum.
    pub(super) fn init(self) -> f32 {
        match self {
            Reduce::Max => f32::NEG_INFINITY,
            Reduce::Sum => 0.0,
        }
    }
}

/// Pools one channel at `base` into `rows` (`OH` rows of `OW`, unnormalized
/// sums for [`Reduce::Sum`]); `scratch` holds [`Planes::scratch_len`]`(1, 1)` floats.
pub(super) fn pool_plane(
    out: &mut [f32],
    g: &ConvGeom,
    base: isize,
    pl: &Planes,
    scratch: &mut [f32],
    reduce: Reduce,
) {
    let (planes, sums) = scratch.split_at_mut(pl.scratch_len(1, 0));
    fill_at_level(cpu::level(), planes, pl, g, base, reduce.init());
    let sums = &mut sums[..pl.n_q];
    pool_at_level(cpu::level(), sums, planes, pl, g.win, reduce);
    let ow = g.win.out[1];
    for (dst, src) in out.chunks_exact_mut(ow).zip(sums.chunks(pl.cols)) {
        dst.copy_from_slice(&src[..ow]);
    }
}

/// Whether [`pool_halving`] runs `win` on an `[h, wd]` input: 2×2 windows at
/// stride 2, dilation 1, no padding, each output inside the input.
pub(super) fn is_halving(win: &Window, [h, wd]: [usize; 2]) -> bool {
    let [oh, ow] = win.out;
    win.kernel == [2, 2]
        && win.strides == [2, 2]
        && win.dilations == [1, 1]
        && win.pads == [0; 4]
        && 2 * oh <= h
        && 2 * ow <= wd
}

/// Pools one channel at `base` as [`pool_plane`] does, for a window
/// [`is_halving`] accepts and rows of unit element stride: a vector of outputs
/// from two vectors of each of its two input rows, split into even and odd
/// columns and folded in tap order `(0,0), (0,1), (1,0), (1,1)`.
pub(super) fn pool_halving(out: &mut [f32], g: &ConvGeom, base: isize, reduce: Reduce) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(out: &mut [f32], g: &ConvGeom, base: isize, r: Reduce) {
            // SAFETY: called only where the CPU has AVX-512 (below).
            halving_with(unsafe { Avx512::new() }, out, g, base, r)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(out: &mut [f32], g: &ConvGeom, base: isize, r: Reduce) {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            halving_with(unsafe { Avx2::new() }, out, g, base, r)
        }
        match cpu::level().capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(out, g, base, reduce) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(out, g, base, reduce) },
            Level::Scalar => {}
        }
    }
    halving_with(Scalar, out, g, base, reduce)
}

/// The fold of one more tap into `acc`, as [`pool_with`] does.
#[inline(always)]
pub(super) fn fold_tap<S: Simd>(s: S, reduce: Reduce, acc: S::V, v: S::V) -> S::V {
    match reduce {
        // `if v > acc || v.is_nan() { v } else { acc }`: `max(v, acc)` is
        // `if v > acc { v } else { acc }`, and a NaN `v` replaces it
        Reduce::Max => s.select(s.eq(v, v), s.max(v, acc), v),
        Reduce::Sum => s.add(acc, v),
    }
}

#[inline(always)]
fn halving_with<S: Simd>(s: S, out: &mut [f32], g: &ConvGeom, base: isize, reduce: Reduce) {
    let ow = g.win.out[1];
    let lanes = S::LANES;
    for (oy, dst) in out.chunks_exact_mut(ow).enumerate() {
        let row = |i: usize| {
            let at = (base + (2 * oy + i) as isize * g.xs[2]) as usize;
            &g.data[at..at + 2 * ow]
        };
        let (top, bottom) = (row(0), row(1));
        let fold = |taps: [S::V; 4]| {
            let init = s.splat(reduce.init());
            taps.into_iter()
                .fold(init, |acc, v| fold_tap(s, reduce, acc, v))
        };
        let mut x = 0;
        while x + lanes <= ow {
            // SAFETY: 2x + 2·lanes ≤ 2·ow, the length of both rows; x + lanes ≤ ow.
            unsafe {
                let pair = |r: &[f32]| {
                    let p = r.as_ptr().add(2 * x);
                    s.deinterleave(s.load(p), s.load(p.add(lanes)))
                };
                let ((e0, o0), (e1, o1)) = (pair(top), pair(bottom));
                s.store(dst.as_mut_ptr().add(x), fold([e0, o0, e1, o1]));
            }
            x += lanes;
        }
        for x in x..ow {
            let taps = [top[2 * x], top[2 * x + 1], bottom[2 * x], bottom[2 * x + 1]];
            dst[x] = halving_one(reduce, taps);
        }
    }
}

/// One output of [`halving_with`], folded one lane wide.
fn halving_one(reduce: Reduce, taps: [f32; 4]) -> f32 {
    let init = reduce.init();
    taps.into_iter()
        .fold(init, |acc, v| fold_tap(Scalar, reduce, acc, v))
}

/// [`pool_with`] compiled for `level`.
fn pool_at_level(
    level: Level,
    sums: &mut [f32],
    planes: &[f32],
    pl: &Planes,
    win: &Window,
    reduce: Reduce,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(s: &mut [f32], p: &[f32], pl: &Planes, w: &Window, r: Reduce) {
            // SAFETY: called only where the CPU has AVX-512 (below).
            pool_with(unsafe { Avx512::new() }, s, p, pl, w, r)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(s: &mut [f32], p: &[f32], pl: &Planes, w: &Window, r: Reduce) {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            pool_with(unsafe { Avx2::new() }, s, p, pl, w, r)
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(sums, planes, pl, win, reduce) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(sums, planes, pl, win, reduce) },
            Level::Scalar => {}
        }
    }
    pool_with(Scalar, sums, planes, pl, win, reduce)
}

/// `sums[q] = reduce over taps (i, j) of plane(i, j)[q + shift(i, j)]` for
/// `q < n_q`, one vector at a time (the taps are independent loads; the
/// reduction chain is short).
#[inline(always)]
fn pool_with<S: Simd>(
    s: S,
    sums: &mut [f32],
    planes: &[f32],
    pl: &Planes,
    win: &Window,
    reduce: Reduce,
) {
    let ([kh, kw], [dh, dw]) = (win.kernel, win.dilations);
    let [sh, sw] = pl.strides;
    assert!(planes.len() >= sh * sw * pl.len && sums.len() >= pl.n_q);
    let (src, dst, lanes) = (planes.as_ptr(), sums.as_mut_ptr(), S::LANES);
    let init = reduce.init();
    let mut q = 0;
    while q < pl.n_q {
        let mut acc = s.splat(init);
        for i in 0..kh {
            let (rh, di) = (i * dh % sh, i * dh / sh * pl.cols);
            for j in 0..kw {
                let at = pl.plane(0, rh, j * dw % sw) + di + j * dw / sw + q;
                // SAFETY: at + lanes ≤ plane start + n_q + reach ≤ planes.len()
                // (as in `block`; n_q is a multiple of every level's lanes).
                let v = unsafe { s.load(src.add(at)) };
                acc = fold_tap(s, reduce, acc, v);
            }
        }
        // SAFETY: q + lanes ≤ n_q ≤ sums.len().
        unsafe { s.store(dst.add(q), acc) };
        q += lanes;
    }
}
