//! Depthwise convolution: every group one input channel into one output
//! channel (MobileNet's and ShuffleNet's 3×3 layers), all the call's channels
//! in one pass compiled for the CPU level.
//!
//! A channel is a few hundred to a few thousand outputs, so what the direct
//! path pays per group (a dispatch, the checks, a block of output channels
//! that has one) would dominate. Here, per channel: its phase planes
//! ([`direct::fill_planes`], every float written once), then the flat walk
//! over `q ∈ 0..n_q` ([`Planes`]) in blocks of [`BLOCK`] vectors, each tap's
//! weight broadcast once per block and its shifted run loaded at constant
//! displacements from one pointer, the sums stored and their valid columns
//! copied into the output plane.
//!
//! **Invariant:** the same arithmetic as the direct path, so the same bits:
//! each output is `act(fma(w_last, x_last, … fma(w_0, x_0, bias)))` over the
//! taps in `(i, j)` order on AVX2 and AVX-512, separately rounded products on
//! the scalar path; padding reads as 0; every read lies inside the planes.

use super::direct::{self, Channels, Planes};
use super::{ConvGeom, copy_rows};
use crate::cpu::{self, Level};
use crate::simd::vector::{Scalar, Simd};

/// Vectors of positions summed together: 8 accumulators, a broadcast weight
/// and a loaded vector fit the 16 registers of AVX2, and 8 independent
/// multiply-add chains cover the latency of two FMA units.
const BLOCK: usize = 8;

/// Whether [`conv`] runs a convolution whose groups have `c_in_per_group`
/// input and `c_out_per_group` output channels.
pub(super) fn applies(c_in_per_group: usize, c_out_per_group: usize) -> bool {
    c_in_per_group == 1 && c_out_per_group == 1
}

/// Scratch floats [`conv`] needs: one channel's planes, two planes of sums
/// (this channel's and the previous one's) and the tap offsets.
pub(super) fn scratch_len(pl: &Planes, taps: usize) -> usize {
    pl.scratch_len(1, 2).saturating_add(taps)
}

/// Every output plane of `out` (`N · C` planes of `OH·OW`, channel `c` of image
/// `n` at `n·C + c`, `C = groups`) from the input channel it reads, with the
/// `C` channels' `[C, kH·kW]` weights of `ch`; `scratch` holds [`scratch_len`]
/// floats.
pub(super) fn conv(
    out: &mut [f32],
    g: &ConvGeom,
    pl: &Planes,
    scratch: &mut [f32],
    ch: &Channels,
    groups: usize,
) {
    let taps = g.win.kernel[0] * g.win.kernel[1];
    let (work, table) = scratch.split_at_mut(pl.scratch_len(1, 2));
    let offsets = direct::tap_offsets(table, pl, g.win, 1);
    let job = Job {
        g,
        pl,
        offsets,
        ch,
        groups,
    };
    assert!(
        g.cg == 1
            && offsets.len() == taps
            && ch.w.len() == groups * taps
            && ch.bias.is_none_or(|b| b.len() == groups)
            && out
                .len()
                .is_multiple_of((g.win.out[0] * g.win.out[1]).max(1))
    );
    job.run_at_level(cpu::level(), out, work);
}

/// One call's channels, as [`Job::run`] walks them.
struct Job<'a> {
    g: &'a ConvGeom<'a>,
    pl: &'a Planes,
    /// each tap's offset in a channel's planes (`u32` bits)
    offsets: &'a [f32],
    ch: &'a Channels<'a>,
    groups: usize,
}

impl Job<'_> {
    /// [`Job::run`] compiled for `level`.
    fn run_at_level(&self, level: Level, out: &mut [f32], work: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::simd::vector::{Avx2, Avx512};
            #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
            unsafe fn avx512(job: &Job, out: &mut [f32], work: &mut [f32]) {
                // SAFETY: called only where the CPU has AVX-512 (below).
                job.run(unsafe { Avx512::new() }, out, work)
            }
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2(job: &Job, out: &mut [f32], work: &mut [f32]) {
                // SAFETY: called only where the CPU has AVX2 and FMA (below).
                job.run(unsafe { Avx2::new() }, out, work)
            }
            match level.capped() {
                // SAFETY: `capped` never exceeds the CPU's level.
                Level::Avx512 => return unsafe { avx512(self, out, work) },
                // SAFETY: as above.
                Level::Avx2 => return unsafe { avx2(self, out, work) },
                Level::Scalar => {}
            }
        }
        self.run(Scalar, out, work)
    }

    /// Fills each channel's planes, sums them, copies the valid columns out.
    #[inline(always)]
    fn run<S: Simd>(&self, s: S, out: &mut [f32], work: &mut [f32]) {
        let (g, pl) = (self.g, self.pl);
        let [oh, ow] = g.win.out;
        let taps = self.offsets.len();
        let (planes, sums) = work.split_at_mut(pl.scratch_len(1, 0));
        let n_q = pl.n_q();
        let (mut sums, mut previous) = sums[..2 * n_q].split_at_mut(n_q);
        // every load, `offset + q + lanes` with `q + lanes ≤ n_q`, lies in the planes
        assert!(
            self.offsets
                .iter()
                .all(|o| o.to_bits() as usize + n_q <= planes.len())
                && n_q.is_multiple_of(S::LANES)
        );
        let plane = oh * ow;
        for idx in 0..out.len() / plane {
            let (img, c) = (idx / self.groups, idx % self.groups);
            let base = g.offset + img as isize * g.xs[0] + c as isize * g.xs[1];
            direct::fill_planes(s, planes, pl, g, base, 0.0);
            let w = &self.ch.w[c * taps..(c + 1) * taps];
            let bias = self.ch.bias.map_or(0.0, |b| b[c]);
            let mut q = 0;
            while q < n_q {
                let left = (n_q - q) / S::LANES;
                // SAFETY: q + V·lanes ≤ n_q (V ≤ left), checked above against
                // the planes; `sums` holds n_q floats.
                q += unsafe {
                    match left {
                        BLOCK.. => self.vectors::<S, BLOCK>(s, sums, planes, w, bias, q),
                        4.. => self.vectors::<S, 4>(s, sums, planes, w, bias, q),
                        2.. => self.vectors::<S, 2>(s, sums, planes, w, bias, q),
                        _ => self.vectors::<S, 1>(s, sums, planes, w, bias, q),
                    }
                };
            }
            // the previous channel's sums are copied out now, not this one's,
            // which are still in flight to memory (the copy's loads straddle
            // their stores, which would stall each load); the later planes of
            // `out` cover the overrun of each plane's copy
            if idx > 0 {
                let to = &mut out[(idx - 1) * plane..];
                copy_rows(s, to, previous, [oh, ow], pl.cols());
            }
            std::mem::swap(&mut sums, &mut previous);
        }
        if let Some(last) = out.len().checked_sub(plane) {
            copy_rows(s, &mut out[last..], previous, [oh, ow], pl.cols());
        }
    }

    /// Sums positions `q .. q + V·lanes` of one channel (weights `w`) into
    /// `sums`, activated; returns how many.
    ///
    /// # Safety
    /// `q + V·lanes ≤ n_q ≤ sums.len()`, and every tap offset plus `n_q` lies in
    /// `planes`.
    #[inline(always)]
    unsafe fn vectors<S: Simd, const V: usize>(
        &self,
        s: S,
        sums: &mut [f32],
        planes: &[f32],
        w: &[f32],
        bias: f32,
        q: usize,
    ) -> usize {
        let mut acc = [s.splat(bias); V];
        for (&wt, offset) in w.iter().zip(self.offsets) {
            let wv = s.splat(wt);
            // SAFETY: offset + q + V·lanes ≤ offset + n_q ≤ planes.len().
            let from = unsafe { planes.as_ptr().add(offset.to_bits() as usize + q) };
            for (v, a) in acc.iter_mut().enumerate() {
                // SAFETY: as above.
                *a = s.mul_add(wv, unsafe { s.load(from.add(v * S::LANES)) }, *a);
            }
        }
        for (v, &a) in acc.iter().enumerate() {
            let a = match self.ch.activation {
                Some(act) => act.apply_v(s, a),
                None => a,
            };
            // SAFETY: q + V·lanes ≤ sums.len().
            unsafe { s.store(sums.as_mut_ptr().add(q + v * S::LANES), a) };
        }
        V * S::LANES
    }
}
