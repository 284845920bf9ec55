//! Winograd F(2×2, 3×3) for 3×3 convolutions at stride 1 and dilation 1 with
//! constant weights (Lavin & Gray, "Fast Algorithms for Convolutional Neural
//! Networks", 2016): each 2×2 block of outputs is `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`
//! for its 4×4 input tile `d`, 16 multiplications per input channel instead of
//! 36. Summed over the input channels, the elementwise product becomes 16 GEMMs
//! `M_ξ[C_out, T] = U_ξ[C_out, C_in] · V_ξ[C_in, T]` over the `T` tiles, run on
//! the packed micro-kernel ([`crate::packed`]).
//!
//! - The weights `U = G g Gᵀ` are transformed once, in f64, and packed as 16
//!   [`PackedA`] per group ([`transform_weights`]).
//! - Per image and group, the input is rearranged into the direct path's phase
//!   planes for a 4×4 window at stride 2 (one tile per window), so each of a
//!   tile's 16 inputs is a contiguous run over a row of tiles; `V = Bᵀ d B` is
//!   computed a vector of tiles at a time and stored straight into the GEMM's
//!   packed panels (column `t` = the tile's index in the chunk).
//! - The tiles are processed in chunks of whole tile rows, about 256 tiles;
//!   `Y = Aᵀ M A`, the bias and the activation are applied per vector of
//!   tiles and the two output columns of each tile interleaved into the rows.
//!
//! Results differ from the direct path by rounding only (the transforms add and
//! subtract; `U` is rounded once from f64). A non-finite product (an infinite or
//! NaN input, or an overflow in a transform) would turn into NaN where the direct
//! sum gives ±∞, so [`conv_group`] reports it and the caller recomputes the
//! image's group on the direct path: non-finite values follow the direct path's
//! (and ONNX's) semantics.
//!
//! **Invariant:** each output depends only on its tile's inputs and the weights:
//! the same bits for any chunking, channel range, thread split or batch; equal
//! at AVX2 and AVX-512 (the same operations per lane; the GEMM's sums run in
//! `k` order at every level).

use super::direct::{self, Planes};
use super::{ConvGeom, Window, pack_block};
use crate::cpu::{self, Level};
use crate::error::KernelError;
use crate::packed::{Activation, Epilogue, NR, PackedA, PackedPart, PackedRef, matmul_prepacked};
use crate::simd::vector::{Scalar, Simd};
use std::ops::Range;

/// Transformed positions per tile, `(2 + 3 − 1)²`: one GEMM each.
const POSITIONS: usize = 16;
/// Input channels per group from which Winograd pays: with fewer, the GEMMs'
/// depth is too small to amortize the transforms (the direct path runs them).
pub const WINOGRAD_MIN_CHANNELS: usize = 32;
/// Output channels per group from which the weights are packed for Winograd.
/// Measured per layer against the direct path (`cargo bench -p shapejit-benches
/// --bench conv`, one image, one thread): 64 → 64 channels at 56² 1.31× faster,
/// 128 at 28² 1.59×, 256 at 14² 1.53×, 512 at 7² 1.20×, 512 at 28² 1.77×, 64 at
/// 224² 2.37×, 32 → 128 at 27² 1.09×, 48 → 192 at 13² 1.20×; with this threshold
/// lowered to 32, layers of 32 output channels ran 0.7–0.85× (128 → 32 at 14², 32
/// → 32 at 32²: too few GEMM rows for the transforms). Small layers that pass the
/// thresholds can still lose: 32 → 64 and 64 → 64 at 14² ran 0.83× and 0.90× (7
/// tiles per row fill half a vector in the transforms), 512 at 7² 0.96–1.20×
/// across runs. Against the direct path of eight channels per block, in the
/// light models at batch 1 (steady state: per-slot `--profile` time of 1 + N
/// runs minus that of 1 run, so the first call's packing is left out), Winograd
/// ran VGG-19's 512 at 28² 1.7–2.0× as fast, 64 at 224² 1.1×, 512 at 14²
/// 0.69–1.07×, ResNet-50's 128 at 28² 1.14–1.22×, 256 at 14² 1.05–1.17×, but
/// its 64 at 56² 0.85–0.92×; SqueezeNet's 3×3 layers 0.92–1.11× (`shapejit run
/// MODEL --tier interp --threads 1 --profile --json`, two alternated rounds).
pub const WINOGRAD_MIN_OUTPUTS: usize = 64;
/// Tiles per chunk (whole tile rows, at least one): each chunk reads all the
/// transformed weights, which must meet enough tiles to be worth it, while the
/// chunk's transformed inputs should stay in cache until their GEMMs. With this
/// constant set to 64, 256 and 1,024 (`cargo bench -p shapejit-benches --bench
/// conv`'s shapes): 512 → 512 channels at 28² ran 1.40×, 1.69×, 1.73× the direct
/// path, 64 channels at 56² 1.26×, 1.30×, 0.97×; chunks sized to keep them in L2
/// (8 tiles for 512 channels) ran 512 at 7² at 0.52×.
const CHUNK_TILES: usize = 256;
/// The widest level's lanes (scratch sizes do not depend on the level in use).
const MAX_LANES: usize = 16;

/// Whether a convolution with this window and `cg` input channels per group
/// runs on Winograd F(2×2, 3×3) when its weights are packed ahead (they are
/// where it has at least [`WINOGRAD_MIN_OUTPUTS`] output channels per group).
pub fn applies(cg: usize, kernel: [usize; 2], strides: [usize; 2], dilations: [usize; 2]) -> bool {
    kernel == [3, 3] && strides == [1, 1] && dilations == [1, 1] && cg >= WINOGRAD_MIN_CHANNELS
}

/// `G v` for `G` of F(2×2, 3×3) (`U = G g Gᵀ`): `G = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1]`.
fn g_times([a, b, c]: [f64; 3]) -> [f64; 4] {
    [a, 0.5 * (a + b + c), 0.5 * (a - b + c), c]
}

/// The transformed weights of contiguous `[C_out, cg, 3, 3]` weights `w` in
/// `groups` groups: per group, `U_ξ` for each of the 16 positions as a packed
/// `[C_out/groups, cg]` matrix. `None` if a transformed weight is not finite
/// (the direct path then keeps ONNX's semantics for those weights).
pub(super) fn transform_weights(
    w: &[f32],
    [c_out, cg]: [usize; 2],
    groups: usize,
) -> Option<Vec<Vec<PackedA>>> {
    let mg = c_out.checked_div(groups)?;
    let mut u = vec![0f32; POSITIONS.checked_mul(mg)?.checked_mul(cg)?];
    (0..groups)
        .map(|grp| {
            for co in 0..mg {
                for ci in 0..cg {
                    let g = &w.get(((grp * mg + co) * cg + ci) * 9..)?[..9];
                    let g: [f64; 9] = std::array::from_fn(|i| g[i] as f64);
                    // G g (4×3), then (G g) Gᵀ (4×4), in f64
                    let gg = [0, 1, 2].map(|c| g_times([g[c], g[3 + c], g[6 + c]]));
                    for (xi, row) in (0..4).map(|r| [gg[0][r], gg[1][r], gg[2][r]]).enumerate() {
                        for (nu, v) in g_times(row).into_iter().enumerate() {
                            let v = v as f32;
                            if !v.is_finite() {
                                return None;
                            }
                            u[((xi * 4 + nu) * mg + co) * cg + ci] = v;
                        }
                    }
                }
            }
            (0..POSITIONS)
                .map(|p| pack_block(&u, [mg, cg], p))
                .collect()
        })
        .collect()
}

/// One convolution's tiles and their scratch layout.
pub(super) struct Tiles {
    /// one 4×4 window at stride 2 per tile, over the convolution's padding
    window: Window,
    /// the window's phase planes
    planes: Planes,
    /// tiles per column and per row (`⌈OH/2⌉`, `⌈OW/2⌉`)
    th: usize,
    tw: usize,
    /// tile rows per chunk
    chunk_rows: usize,
    /// the conv's output size
    out: [usize; 2],
    /// floats per transformed-input matrix and per product matrix
    v_len: usize,
    m_len: usize,
}

impl Tiles {
    /// The tiles of a convolution with window `win` over an `input` image, `cg`
    /// input and `mg` output channels per group.
    pub(super) fn new(win: &Window, input: [usize; 2], cg: usize, mg: usize) -> Tiles {
        let [oh, ow] = win.out;
        let (th, tw) = (oh.div_ceil(2), ow.div_ceil(2));
        let window = Window {
            kernel: [4, 4],
            strides: [2, 2],
            pads: win.pads,
            dilations: [1, 1],
            out: [th, tw],
        };
        let chunk_rows = CHUNK_TILES.div_ceil(tw.max(1)).clamp(1, th.max(1));
        let chunk = chunk_rows * tw;
        Tiles {
            planes: Planes::new(&window, input),
            window,
            th,
            tw,
            chunk_rows,
            out: win.out,
            v_len: PackedRef::len_for(cg, chunk),
            m_len: mg.saturating_mul(chunk).saturating_add(MAX_LANES),
        }
    }

    /// Scratch floats [`conv_group`] needs for `cg` input channels: the planes,
    /// then 16 transformed-input and 16 product matrices.
    pub(super) fn scratch_len(&self, cg: usize) -> usize {
        self.planes
            .scratch_len(cg, 0)
            .saturating_add(POSITIONS.saturating_mul(self.v_len.saturating_add(self.m_len)))
    }
}

/// The output channels of one group on Winograd.
pub(super) struct Channels<'a> {
    /// the group's 16 transformed weight matrices
    pub u: &'a [PackedA],
    /// their rows computed (the output's channels, in order)
    pub rows: Range<usize>,
    /// the call's output channels' biases
    pub bias: Option<&'a [f32]>,
    pub activation: Option<Activation>,
}

/// Computes one image's group (`out`: `M` planes of `OH·OW`, `M =
/// ch.rows.len()`) from the group's input at `base`; `scratch` holds
/// [`Tiles::scratch_len`] floats. `Ok(false)` when a product was not finite
/// (`out` then holds garbage: recompute it on the direct path).
pub(super) fn conv_group(
    out: &mut [f32],
    g: &ConvGeom,
    base: isize,
    tiles: &Tiles,
    scratch: &mut [f32],
    ch: &Channels,
) -> Result<bool, KernelError> {
    let level = cpu::level();
    let cg = g.cg;
    let tile_geom = ConvGeom {
        win: &tiles.window,
        ..*g
    };
    let (planes, rest) = scratch.split_at_mut(tiles.planes.scratch_len(cg, 0));
    direct::fill_at_level(level, planes, &tiles.planes, &tile_geom, base, 0.0);
    let (v, m) = rest.split_at_mut(POSITIONS * tiles.v_len);
    let m = &mut m[..POSITIONS * tiles.m_len];
    let mut finite = true;
    for ty in (0..tiles.th).step_by(tiles.chunk_rows) {
        let chunk = ty..(ty + tiles.chunk_rows).min(tiles.th);
        let t = chunk.len() * tiles.tw;
        let step = Step {
            tiles,
            chunk: chunk.clone(),
            t,
        };
        input_at_level(level, v, planes, &step, cg);
        for (p, a) in ch.u.iter().enumerate() {
            let b = PackedRef::from_panels(cg, t, &v[p * tiles.v_len..][..tiles.v_len])?;
            let part = PackedPart {
                a,
                rows: ch.rows.clone(),
            };
            let product = &mut m[p * tiles.m_len..][..ch.rows.len() * t];
            matmul_prepacked(product, part, b, 1.0, Epilogue::default())?;
        }
        finite &= output_at_level(level, out, m, &step, ch);
    }
    Ok(finite)
}

/// One chunk of tile rows.
struct Step<'a> {
    tiles: &'a Tiles,
    /// its tile rows
    chunk: Range<usize>,
    /// its tiles (`chunk.len() · TW`): the GEMMs' columns
    t: usize,
}

/// [`input_tiles`] compiled for `level`.
fn input_at_level(level: Level, v: &mut [f32], planes: &[f32], step: &Step, cg: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(v: &mut [f32], planes: &[f32], step: &Step, cg: usize) {
            // SAFETY: called only where the CPU has AVX-512 (below).
            input_tiles(unsafe { Avx512::new() }, v, planes, step, cg)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(v: &mut [f32], planes: &[f32], step: &Step, cg: usize) {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            input_tiles(unsafe { Avx2::new() }, v, planes, step, cg)
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(v, planes, step, cg) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(v, planes, step, cg) },
            Level::Scalar => {}
        }
    }
    input_tiles(Scalar, v, planes, step, cg)
}

/// Writes `V = Bᵀ d B` of every tile of the chunk and input channel into the 16
/// matrices' packed panels (`v`: matrix `p` at `p · v_len`, channel `c` its row,
/// the tile's index in the chunk its column). `Bᵀ = [1 0 −1 0; 0 1 1 0;
/// 0 −1 1 0; 0 1 0 −1]`.
#[inline(always)]
fn input_tiles<S: Simd>(s: S, v: &mut [f32], planes: &[f32], step: &Step, cg: usize) {
    let Step { tiles, chunk, .. } = step;
    let (pl, tw) = (&tiles.planes, tiles.tw);
    let wq = pl.cols();
    for c in 0..cg {
        // tap (i, j) of tile q reads plane (c, i mod 2, j mod 2) at q + ⌊i/2⌋·Wq + ⌊j/2⌋
        let mut offsets = [0usize; 16];
        for (tap, o) in offsets.iter_mut().enumerate() {
            let (i, j) = (tap / 4, tap % 4);
            *o = pl.plane(c, i % 2, j % 2) + i / 2 * wq + j / 2;
        }
        let reach = offsets.iter().max().copied().unwrap_or(0) + S::LANES;
        for (r, ty) in chunk.clone().enumerate() {
            // Invariant: the planes' length covers a full vector at every tap of
            // the row walk's last tile (`Planes::new`).
            assert!(ty * wq + (tw - 1) / S::LANES * S::LANES + reach <= planes.len());
            for tx in (0..tw).step_by(S::LANES) {
                let q = ty * wq + tx;
                // (plain loops: a closure would not inherit the target features)
                let mut d = [s.splat(0.0); 16];
                for (x, &o) in d.iter_mut().zip(&offsets) {
                    // SAFETY: o + q + LANES ≤ planes.len() (asserted for the row).
                    *x = unsafe { s.load(planes.as_ptr().add(o + q)) };
                }
                // Bᵀ d, column by column
                let mut t = [[s.splat(0.0); 4]; 4];
                for j in 0..4 {
                    let (d0, d1, d2, d3) = (d[j], d[4 + j], d[8 + j], d[12 + j]);
                    t[0][j] = s.sub(d0, d2);
                    t[1][j] = s.add(d1, d2);
                    t[2][j] = s.sub(d2, d1);
                    t[3][j] = s.sub(d1, d3);
                }
                let n = S::LANES.min(tw - tx);
                let col = r * tw + tx;
                for (xi, row) in t.iter().enumerate() {
                    let vs = [
                        s.sub(row[0], row[2]),
                        s.add(row[1], row[2]),
                        s.sub(row[2], row[1]),
                        s.sub(row[1], row[3]),
                    ];
                    for (nu, &x) in vs.iter().enumerate() {
                        let m = &mut v[(xi * 4 + nu) * tiles.v_len..][..tiles.v_len];
                        store_columns(s, m, cg, c, col, n, x);
                    }
                }
            }
        }
    }
}

/// Stores the first `n` lanes of `x` into row `row` of the `[k, ·]` packed
/// panels `m`, columns `col..col + n` (a vector may cross into the next panel).
#[inline(always)]
fn store_columns<S: Simd>(
    s: S,
    m: &mut [f32],
    k: usize,
    row: usize,
    col: usize,
    n: usize,
    x: S::V,
) {
    let (panel, off) = (col / NR, col % NR);
    let first = n.min(NR - off);
    let at = (panel * k + row) * NR + off;
    let dst = &mut m[at..at + first];
    if first == S::LANES {
        // SAFETY: `dst` holds LANES floats.
        unsafe { s.store(dst.as_mut_ptr(), x) };
        return;
    }
    // SAFETY: lanes 0..first go to `dst`.
    unsafe { s.store_range(dst.as_mut_ptr(), 0, first, x) };
    if n > first {
        let at = ((panel + 1) * k + row) * NR;
        let dst = &mut m[at..at + n - first];
        // SAFETY: lanes first..n go to `dst` (lane `l` at `dst[l − first]`).
        unsafe { s.store_range(dst.as_mut_ptr().wrapping_sub(first), first, n, x) };
    }
}

/// [`output_tiles`] compiled for `level`.
fn output_at_level(level: Level, out: &mut [f32], m: &[f32], step: &Step, f: &Channels) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(out: &mut [f32], m: &[f32], step: &Step, f: &Channels) -> bool {
            // SAFETY: called only where the CPU has AVX-512 (below).
            output_tiles(unsafe { Avx512::new() }, out, m, step, f)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(out: &mut [f32], m: &[f32], step: &Step, f: &Channels) -> bool {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            output_tiles(unsafe { Avx2::new() }, out, m, step, f)
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(out, m, step, f) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(out, m, step, f) },
            Level::Scalar => {}
        }
    }
    output_tiles(Scalar, out, m, step, f)
}

/// Lane numbers, for the mask of a partial vector.
const LANE: [f32; MAX_LANES] = [
    0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
];

/// Writes the chunk's outputs `act(Aᵀ M A + bias)` (`Aᵀ = [1 1 1 0; 0 1 −1 −1]`)
/// from the 16 products in `m` (matrix `p` at `p · m_len`, `[M, t]` row-major)
/// into `out`; whether every `Aᵀ M A` was finite.
#[inline(always)]
fn output_tiles<S: Simd>(s: S, out: &mut [f32], m: &[f32], step: &Step, f: &Channels) -> bool {
    let Step { tiles, chunk, t } = step;
    let ([oh, ow], tw, t) = (tiles.out, tiles.tw, *t);
    let channels = out.len() / (oh * ow);
    let zero = s.splat(0.0);
    // Σ 0·y over the valid lanes: ±0 while every y is finite, NaN after
    let mut nonfinite = zero;
    // SAFETY: LANE holds MAX_LANES ≥ LANES floats.
    let lane = unsafe { s.load(LANE.as_ptr()) };
    // every product matrix has MAX_LANES floats of slack past its M·t
    assert!(channels * t + MAX_LANES <= tiles.m_len && m.len() >= POSITIONS * tiles.m_len);
    for co in 0..channels {
        let bias = s.splat(f.bias.map_or(0.0, |b| b[co]));
        let plane = &mut out[co * oh * ow..][..oh * ow];
        for (r, ty) in chunk.clone().enumerate() {
            for tx in (0..tw).step_by(S::LANES) {
                let at = co * t + r * tw + tx;
                // (plain loops: a closure would not inherit the target features)
                let mut mv = [zero; 16];
                for (p, x) in mv.iter_mut().enumerate() {
                    // SAFETY: at + LANES ≤ M·t + MAX_LANES ≤ m_len (asserted above).
                    *x = unsafe { s.load(m.as_ptr().add(p * tiles.m_len + at)) };
                }
                // Aᵀ M, then (Aᵀ M) A
                let (mut s0, mut s1) = ([zero; 4], [zero; 4]);
                for nu in 0..4 {
                    s0[nu] = s.add(s.add(mv[nu], mv[4 + nu]), mv[8 + nu]);
                    s1[nu] = s.sub(s.sub(mv[4 + nu], mv[8 + nu]), mv[12 + nu]);
                }
                let n = S::LANES.min(tw - tx);
                let valid = s.lt(lane, s.splat(n as f32));
                for (rr, sr) in [s0, s1].iter().enumerate() {
                    let y = [
                        s.add(s.add(sr[0], sr[1]), sr[2]),
                        s.sub(s.sub(sr[1], sr[2]), sr[3]),
                    ];
                    for &yc in &y {
                        nonfinite = s.add(nonfinite, s.select(valid, s.mul(yc, zero), zero));
                    }
                    let oy = 2 * ty + rr;
                    if oy >= oh {
                        continue;
                    }
                    let (mut y0, mut y1) = (s.add(y[0], bias), s.add(y[1], bias));
                    if let Some(a) = f.activation {
                        (y0, y1) = (a.apply_v(s, y0), a.apply_v(s, y1));
                    }
                    let (lo, hi) = s.interleave(y0, y1);
                    let cols = (2 * n).min(ow - 2 * tx);
                    let row = &mut plane[oy * ow + 2 * tx..][..cols];
                    store_prefix(s, row, lo);
                    if cols > S::LANES {
                        store_prefix(s, &mut row[S::LANES..], hi);
                    }
                }
            }
        }
    }
    let mut lanes = [0f32; MAX_LANES];
    // SAFETY: `lanes` holds MAX_LANES ≥ LANES floats.
    unsafe { s.store(lanes.as_mut_ptr(), nonfinite) };
    lanes.iter().all(|x| !x.is_nan())
}

/// Stores the first `min(dst.len(), LANES)` lanes of `x` at `dst`.
#[inline(always)]
fn store_prefix<S: Simd>(s: S, dst: &mut [f32], x: S::V) {
    let n = dst.len().min(S::LANES);
    // SAFETY: `dst` holds at least `n` floats.
    unsafe {
        if n == S::LANES {
            s.store(dst.as_mut_ptr(), x)
        } else {
            s.store_tail(dst.as_mut_ptr(), n, x)
        }
    }
}
