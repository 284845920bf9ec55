//! The direct convolution path for groups of few output channels (depthwise
//! convolutions above all), where a GEMM tile would mostly multiply padding,
//! and pooling on the same phase planes.
//!
//! Per image and group, the group's input channels are first rearranged into
//! *phase planes* of the zero-padded input: for strides `sH × sW`, plane
//! `(c, rH, rW)` holds `xpad[c, y·sH + rH, x·sW + rW]` at `y·Wq + x`, with
//! `Wq = ⌈Wpad / sW⌉`. Kernel tap `(i, j)` of output `(oy, ox)` then reads plane
//! `(c, i·dH mod sH, j·dW mod sW)` at `q + ⌊i·dH/sH⌋·Wq + ⌊j·dW/sW⌋`, with
//! `q = oy·Wq + ox`: every tap is one contiguous, shifted run over `q`, whatever
//! the stride, dilation and padding. Each output plane is then computed over
//! `q ∈ 0..OH·Wq` in blocks of full vectors (columns `ox ≥ OW` are computed and
//! dropped), `acc = bias`, then one fused multiply-add per tap in `(c, i, j)`
//! order, then the activation, and its `OW` valid columns per row are copied
//! out. Pooling runs the same loop with `max` (NaN propagating, padding −∞) or
//! a sum (padding +0, which leaves every sum unchanged: a sum starting at +0 is
//! never −0) over the taps in `(i, j)` order, as the scalar definition does.
//!
//! **Invariant:** every read lies inside the planes ([`Planes::len`] covers the
//! furthest tap of the last, padded block); padding reads as 0. Each output is
//! `act(fma(w_last, x_last, … fma(w_0, x_0, bias)))` on AVX2 and AVX-512 (bit-
//! identical), with separately rounded products on the scalar path.

use super::{ConvGeom, Window, copy_run, gather_run};
use crate::cpu::{self, Level};
use crate::packed::Activation;
use crate::simd::vector::{Scalar, Simd};

/// Lanes the planes are padded for (the widest level's), so scratch sizes do
/// not depend on the level in use.
const MAX_LANES: usize = 16;
/// Vectors per block: independent accumulator chains to cover the FMA latency.
const BLOCK: usize = 8;

/// The phase-plane geometry of one group's input.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planes {
    /// strides `[sH, sW]`: `sH · sW` phase planes per channel
    strides: [usize; 2],
    /// rows and columns of each plane (`⌈Hpad / sH⌉`, `⌈Wpad / sW⌉`)
    rows: usize,
    cols: usize,
    /// output positions computed per plane, `OH · Wq` rounded up to [`MAX_LANES`]
    n_q: usize,
    /// floats per plane: the data and the furthest reach of the last block
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
        let n_q = (win.out[0] * cols).next_multiple_of(MAX_LANES);
        let reach = (win.kernel[0] - 1) * win.dilations[0] / sh * cols
            + (win.kernel[1] - 1) * win.dilations[1] / sw;
        Planes {
            strides: [sh, sw],
            rows,
            cols,
            n_q,
            len: (rows * cols).max(n_q + reach),
        }
    }

    /// Scratch floats for `cg` channels: their planes, then one output plane of
    /// `n_q` sums.
    pub(super) fn scratch_len(&self, cg: usize) -> usize {
        cg.saturating_mul(self.strides[0] * self.strides[1])
            .saturating_mul(self.len)
            .saturating_add(self.n_q)
    }

    /// Offset of plane `(c, rH, rW)` in the scratch.
    fn plane(&self, c: usize, rh: usize, rw: usize) -> usize {
        ((c * self.strides[0] + rh) * self.strides[1] + rw) * self.len
    }
}

/// [`fill_planes`] compiled for `level` (so its copies and strided gathers
/// vectorize at the level's width).
fn fill_at_level(
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
/// in `g.data`) into `planes[..cg · sH · sW · len]`, `pad` in the padding.
#[inline(always)]
fn fill_planes<S: Simd>(
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
    for c in 0..g.cg {
        for rh in 0..sh {
            for rw in 0..sw {
                let start = pl.plane(c, rh, rw);
                let plane = &mut planes[start..start + pl.len];
                plane.fill(pad);
                // columns x' of this phase whose input column x'·sW + rW − padL is inside
                let first = (pleft - rw as isize).max(0) as usize;
                let lo = first.div_ceil(sw);
                let hi = (wd as isize + pleft - rw as isize).max(0) as usize;
                let hi = hi.div_ceil(sw).min(pl.cols);
                if lo >= hi {
                    continue;
                }
                for y in 0..pl.rows {
                    let iy = (y * sh + rh) as isize - pt;
                    if iy < 0 || iy >= h as isize {
                        continue;
                    }
                    let line = base + c as isize * g.xs[1] + iy * g.xs[2];
                    let ix0 = (lo * sw + rw) as isize - pleft;
                    let dst = &mut plane[y * pl.cols + lo..y * pl.cols + hi];
                    let step = sw as isize * g.xs[3];
                    let at = line + ix0 * g.xs[3];
                    if step == 1 {
                        copy_run(s, dst, &g.data[at as usize..at as usize + dst.len()]);
                    } else if step > 1 {
                        let step = step as usize;
                        gather_run(
                            dst,
                            &g.data[at as usize..][..(dst.len() - 1) * step + 1],
                            step,
                        );
                    } else {
                        for (t, d) in dst.iter_mut().enumerate() {
                            *d = g.data[(at + t as isize * step) as usize];
                        }
                    }
                }
            }
        }
    }
}

/// One output channel of the direct path.
pub(super) struct Channel<'a> {
    /// its `[Cg, kH, kW]` weights
    pub w: &'a [f32],
    pub bias: f32,
    pub activation: Option<Activation>,
}

/// Computes the output planes `out` (`OH·OW` floats each) of the output
/// channels `channel(0..)`, all reading the group at `base`; `scratch` holds
/// [`Planes::scratch_len`] floats.
pub(super) fn conv_group<'a>(
    out: &mut [f32],
    g: &ConvGeom,
    base: isize,
    pl: &Planes,
    scratch: &mut [f32],
    channel: impl Fn(usize) -> Channel<'a>,
) {
    let (planes, sums) = scratch.split_at_mut(pl.scratch_len(g.cg) - pl.n_q);
    fill_at_level(cpu::level(), planes, pl, g, base, 0.0);
    let sums = &mut sums[..pl.n_q];
    let [oh, ow] = g.win.out;
    for (m, plane) in out.chunks_exact_mut(oh * ow).enumerate() {
        let ch = channel(m);
        sums_at_level(cpu::level(), sums, planes, pl, g.win, g.cg, &ch);
        for (dst, src) in plane.chunks_exact_mut(ow).zip(sums.chunks(pl.cols)) {
            dst.copy_from_slice(&src[..ow]);
        }
    }
}

/// [`sums`] compiled for `level`.
fn sums_at_level(
    level: Level,
    sums: &mut [f32],
    planes: &[f32],
    pl: &Planes,
    win: &Window,
    cg: usize,
    ch: &Channel,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(
            sums: &mut [f32],
            planes: &[f32],
            pl: &Planes,
            win: &Window,
            cg: usize,
            ch: &Channel,
        ) {
            // SAFETY: called only where the CPU has AVX-512 (below).
            sums_with(unsafe { Avx512::new() }, sums, planes, pl, win, cg, ch)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(
            sums: &mut [f32],
            planes: &[f32],
            pl: &Planes,
            win: &Window,
            cg: usize,
            ch: &Channel,
        ) {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            sums_with(unsafe { Avx2::new() }, sums, planes, pl, win, cg, ch)
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(sums, planes, pl, win, cg, ch) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(sums, planes, pl, win, cg, ch) },
            Level::Scalar => {}
        }
    }
    sums_with(Scalar, sums, planes, pl, win, cg, ch)
}

/// `sums[q] = act(bias + Σ_{c,i,j} w[c,i,j] · plane(c, i, j)[q + shift(i, j)])`
/// for `q < n_q`, in blocks of [`BLOCK`] vectors, then single vectors. (No
/// closures here: a closure would not inherit the caller's target features,
/// and the intrinsics would not inline into it.)
#[inline(always)]
fn sums_with<S: Simd>(
    s: S,
    sums: &mut [f32],
    planes: &[f32],
    pl: &Planes,
    win: &Window,
    cg: usize,
    ch: &Channel,
) {
    let [sh, sw] = pl.strides;
    // every tap's offset (plane and shift) plus q stays below the planes' end
    let last = pl.plane(cg - 1, sh - 1, sw - 1) + pl.len;
    let taps = cg * win.kernel[0] * win.kernel[1];
    assert!(planes.len() >= last && sums.len() >= pl.n_q && ch.w.len() >= taps);
    let lanes = S::LANES;
    let mut q = 0;
    while q + BLOCK * lanes <= pl.n_q {
        // SAFETY: as asserted above, with q + BLOCK·lanes ≤ n_q.
        unsafe { block::<S, BLOCK>(s, sums, planes, pl, win, cg, ch, q) };
        q += BLOCK * lanes;
    }
    while q < pl.n_q {
        // n_q is a multiple of MAX_LANES, hence of every level's lanes.
        // SAFETY: as asserted above, with q + lanes ≤ n_q.
        unsafe { block::<S, 1>(s, sums, planes, pl, win, cg, ch, q) };
        q += lanes;
    }
}

/// `V` vectors of sums from `q` on (see [`sums_with`]).
///
/// # Safety
/// `q + V·lanes ≤ pl.n_q ≤ sums.len()`, `planes` holds the `cg` channels'
/// planes and `ch.w` the `cg · kH · kW` weights.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block<S: Simd, const V: usize>(
    s: S,
    sums: &mut [f32],
    planes: &[f32],
    pl: &Planes,
    win: &Window,
    cg: usize,
    ch: &Channel,
    q: usize,
) {
    let ([kh, kw], [dh, dw]) = (win.kernel, win.dilations);
    let [sh, sw] = pl.strides;
    let (src, lanes) = (planes.as_ptr(), S::LANES);
    let mut acc = [s.splat(ch.bias); V];
    let mut t = 0;
    for c in 0..cg {
        for i in 0..kh {
            let (rh, di) = (i * dh % sh, i * dh / sh * pl.cols);
            for j in 0..kw {
                let at = pl.plane(c, rh, j * dw % sw) + di + j * dw / sw + q;
                // SAFETY: t < cg·kH·kW ≤ w.len() (the caller's contract).
                let wv = s.splat(unsafe { *ch.w.get_unchecked(t) });
                t += 1;
                for (v, a) in acc.iter_mut().enumerate() {
                    // SAFETY: `at + v·lanes + lanes ≤ plane start + n_q + reach ≤
                    // plane start + len ≤ planes.len()` (q + V·lanes ≤ n_q and the
                    // shift is at most the reach `Planes::new` added).
                    *a = s.mul_add(wv, unsafe { s.load(src.add(at + v * lanes)) }, *a);
                }
            }
        }
    }
    let dst = sums.as_mut_ptr();
    for (v, &a) in acc.iter().enumerate() {
        let a = match ch.activation {
            Some(act) => act.apply_v(s, a),
            None => a,
        };
        // SAFETY: q + V·lanes ≤ n_q ≤ sums.len().
        unsafe { s.store(dst.add(q + v * lanes), a) };
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
    fn init(self) -> f32 {
        match self {
            Reduce::Max => f32::NEG_INFINITY,
            Reduce::Sum => 0.0,
        }
    }
}

/// Pools one channel at `base` into `rows` (`OH` rows of `OW`, unnormalized
/// sums for [`Reduce::Sum`]); `scratch` holds [`Planes::scratch_len`]`(1)` floats.
pub(super) fn pool_plane(
    out: &mut [f32],
    g: &ConvGeom,
    base: isize,
    pl: &Planes,
    scratch: &mut [f32],
    reduce: Reduce,
) {
    let (planes, sums) = scratch.split_at_mut(pl.scratch_len(1) - pl.n_q);
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
fn fold_tap<S: Simd>(s: S, reduce: Reduce, acc: S::V, v: S::V) -> S::V {
    match reduce {
        // `if v > acc || v.is_nan() { v } else { acc }`
        Reduce::Max => {
            let larger = s.select(s.lt(acc, v), v, acc);
            s.select(s.eq(v, v), larger, v)
        }
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
