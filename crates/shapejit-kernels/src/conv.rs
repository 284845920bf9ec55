//! 2-D convolution (direct, Winograd F(2×2, 3×3), or im2col + GEMM for 1×1
//! windows), transposed convolution (GEMM + col2im) and max/average pooling, NCHW.
//!
//! conv2d ([`takes_gemm`] chooses): 3×3 windows at stride 1 whose weights are
//! packed for it run on Winograd F(2×2, 3×3) (`winograd`, [`takes_winograd`]);
//! depthwise convolutions (one input and one output channel per group) run on
//! their own path (`depthwise`: every channel in one pass, each on the direct
//! path's phase planes); other k×k windows, and groups of fewer than
//! [`GEMM_MIN_CHANNELS`] output channels, run on the direct path (`direct`):
//! the group's input rearranged into phase planes of the padded input, eight
//! output channels at a time (six below AVX-512) summed over every tap, bias
//! and activation applied in registers. 1×1 windows run as a GEMM: the input (packed as it is
//! at stride 1 without padding, else its patches unrolled straight into the
//! packed panels of a `[C_in/groups, OH · OW]` matrix in caller-provided
//! scratch) times the group's weights (packed once ahead when they are
//! constant, [`PackedConvWeights`]) on the packed micro-kernel
//! ([`crate::packed`]), which adds the bias while the tile is in registers and
//! writes the NCHW output directly. Small feature maps (at most
//! [`TRANSPOSED_MAX_POSITIONS`] output positions) with weights packed for it
//! run the product transposed instead (`transposed`, [`takes_transposed`]):
//! the output channels are the GEMM's columns, so the weights stream once. Pooling
//! (`pool`) folds each output row from a ring of padded input rows, or on the
//! direct path's phase planes for other strides and layouts. All of it
//! vectorized at the CPU level in use.
//!
//! **Invariant:** padded cells read as 0 for conv, never win a max pool, and
//! count in an average only when asked to (and only inside the declared padding).

use crate::cpu::Level;
use crate::error::KernelError;
use crate::matmul::matmul;
use crate::packed::Activation;
use crate::packed::{
    Bias, Epilogue, NR, PackedA, PackedB, PackedPart, PackedRef, matmul_packed_epilogue,
    matmul_prepacked,
};
use crate::simd::vector::{Scalar, Simd};
use crate::view::{StridedShape, View, ViewMut};

mod depthwise;
mod direct;
mod pool;
mod transposed;
mod winograd;

pub use pool::{Pool, pool2d, pool2d_scratch_len};
pub use transposed::{TRANSPOSED_MAX_POSITIONS, TRANSPOSED_MIN_OUTPUTS};
pub use winograd::{WINOGRAD_MIN_CHANNELS, WINOGRAD_MIN_OUTPUTS};

/// Window geometry shared by conv and pools (all sizes already validated
/// by the caller: output sizes follow from the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// kernel height and width
    pub kernel: [usize; 2],
    /// strides along H and W
    pub strides: [usize; 2],
    /// padding: top, left, bottom, right
    pub pads: [usize; 4],
    /// dilations along H and W
    pub dilations: [usize; 2],
    /// output height and width
    pub out: [usize; 2],
}

impl Window {
    /// Input coordinate of output position `o`, kernel tap `k` along dim `d`
    /// (may fall in the padding: negative or past the end).
    #[inline]
    fn coord(&self, d: usize, o: usize, k: usize) -> isize {
        (o * self.strides[d] + k * self.dilations[d]) as isize - self.pads[d] as isize
    }
}

fn dims4(what: &'static str, v: &[usize]) -> Result<[usize; 4], KernelError> {
    v.try_into()
        .map_err(|_| KernelError::Invalid(format!("{what} must be 4-D, got {v:?}")))
}

/// Output channels per group below which [`conv2d`] takes the direct path
/// for a 1×1 window too (a GEMM panel is 16 columns wide: fewer channels would
/// mostly multiply padding).
pub const GEMM_MIN_CHANNELS: usize = 4;

/// Whether [`conv2d`] runs a group of `c_out_per_group` output channels with a
/// `kernel` window as a GEMM on packed weights; otherwise on the direct path.
/// Only 1×1 windows do: measured per layer of the light ResNet-50 at batch 1
/// (`shapejit run MODEL --tier interp --threads 1 --profile`), the direct path
/// took 0.67–0.85× the GEMM path's time on most 3×3 and 7×7 convolutions (one
/// 1.28×) and 0.9–1.8× on the 1×1 ones.
pub fn takes_gemm(c_out_per_group: usize, kernel: [usize; 2]) -> bool {
    c_out_per_group >= GEMM_MIN_CHANNELS && kernel == [1, 1]
}

/// Whether [`conv2d`] runs a convolution with this window and `c_in_per_group`
/// input channels per group on Winograd F(2×2, 3×3) when its weights are packed
/// ahead ([`PackedConvWeights`], which packs them so for at least
/// [`WINOGRAD_MIN_OUTPUTS`] output channels per group): 3×3 windows at stride 1
/// and dilation 1 with at least [`WINOGRAD_MIN_CHANNELS`] input channels per
/// group. A call on some of the channels takes it too (any range).
pub fn takes_winograd(c_in_per_group: usize, win: &Window) -> bool {
    winograd::applies(c_in_per_group, win.kernel, win.strides, win.dilations)
}

/// Whether [`conv2d`] runs a group of `c_out_per_group` output channels with
/// this window as the transposed product `outᵀ = patchesᵀ · wᵀ` when its
/// weights are packed for it ([`PackedConvWeights::pack_transposed`]): small
/// feature maps, at most [`TRANSPOSED_MAX_POSITIONS`] output positions, and at
/// least [`TRANSPOSED_MIN_OUTPUTS`] output channels per group (k×k windows at
/// the SIMD levels only). The same bits as the path it replaces.
pub fn takes_transposed(c_out_per_group: usize, win: &Window) -> bool {
    transposed::applies(c_out_per_group, win)
}

/// Scratch elements [`conv2d`] needs for weights `[C_out, C_in/groups, kH, kW]`
/// (`c_out_per_group = C_out/groups`) on an `input` (H, W) image: one image's
/// patch matrix, packed, and the group's input with its padding, or for the direct
/// path one group's phase planes (where [`takes_winograd`], also enough for
/// Winograd's planes and matrices); saturates instead of overflowing.
pub fn conv2d_scratch_len(
    c_in_per_group: usize,
    c_out_per_group: usize,
    win: &Window,
    input: [usize; 2],
) -> usize {
    let usual = usual_scratch_len(c_in_per_group, c_out_per_group, win, input);
    if !takes_transposed(c_out_per_group, win) {
        return usual;
    }
    usual.max(transposed::scratch_len(
        c_in_per_group,
        c_out_per_group,
        win,
        input,
    ))
}

/// [`conv2d_scratch_len`] of the paths in the usual orientation.
fn usual_scratch_len(
    c_in_per_group: usize,
    c_out_per_group: usize,
    win: &Window,
    input: [usize; 2],
) -> usize {
    let per_channel = win.kernel[0].saturating_mul(win.kernel[1]);
    if depthwise::applies(c_in_per_group, c_out_per_group) {
        return depthwise::scratch_len(&direct::Planes::new(win, input), per_channel);
    }
    if !takes_gemm(c_out_per_group, win.kernel) {
        let direct = direct::Planes::new(win, input).conv_scratch_len(
            c_in_per_group,
            c_out_per_group,
            per_channel,
        );
        if !takes_winograd(c_in_per_group, win) {
            return direct;
        }
        // Winograd, and the direct path for an image whose products are not finite
        let tiles = winograd::Tiles::new(win, input, c_in_per_group, c_out_per_group);
        return direct.max(tiles.scratch_len(c_in_per_group));
    }
    let (k, p) = (
        c_in_per_group.saturating_mul(per_channel),
        win.out[0].saturating_mul(win.out[1]),
    );
    // the patch matrix, packed, and the padded input it is unrolled from
    PackedRef::len_for(k, p).saturating_add(padded_len(c_in_per_group, win, input))
}

/// Elements of `channels` padded input planes split into column phases (see
/// [`im2col_panels`]).
fn padded_len(channels: usize, win: &Window, [h, wd]: [usize; 2]) -> usize {
    let [ph, pw] = padded_size(win, [h, wd]);
    let sw = win.strides[1].max(1);
    channels
        .saturating_mul(ph)
        .saturating_mul(pw.div_ceil(sw).saturating_mul(sw))
}

/// An input plane's size with its padding.
fn padded_size(win: &Window, [h, wd]: [usize; 2]) -> [usize; 2] {
    [
        h.saturating_add(win.pads[0]).saturating_add(win.pads[2]),
        wd.saturating_add(win.pads[1]).saturating_add(win.pads[3]),
    ]
}

/// A convolution's weights and what it does besides the window.
#[derive(Clone, Copy, Debug)]
pub struct ConvParams<'a> {
    /// contiguous `[C_out, C_in/groups, kH, kW]`
    pub w: &'a [f32],
    /// `C_out` values added to the output channels
    pub bias: Option<&'a [f32]>,
    /// channel groups
    pub groups: usize,
    /// applied to every output element, last
    pub activation: Option<Activation>,
    /// `w` packed ahead; used when given, bit-identical to packing per call
    pub packed: Option<PackedChannels<'a>>,
}

/// Weights packed ahead for a convolution that computes some of their output
/// channels: `w` holds channels `first .. first + C_out` of the packed weights
/// ([`PackedConvWeights::pack`] of the whole weights, same groups; `first` is 0
/// unless there is one group). Each output channel is then bit-identical to the
/// whole convolution's: on the GEMM path as long as the call keeps at least
/// [`GEMM_MIN_CHANNELS`] channels per group (fewer take the direct path), on
/// Winograd F(2×2, 3×3) for any range; transposed from a `first` that starts a
/// panel ([`NR`] channels; other ranges leave the weights unused, for the same
/// bits on the usual path).
#[derive(Clone, Copy, Debug)]
pub struct PackedChannels<'a> {
    /// the whole weights, packed
    pub weights: &'a PackedConvWeights,
    /// the output channel `w`'s first row is
    pub first: usize,
}

/// A convolution's constant weights packed once: for the GEMM path ([`takes_gemm`])
/// one [`PackedA`] `[C_out/groups, C_in/groups · kH · kW]` per group; for Winograd
/// F(2×2, 3×3) ([`takes_winograd`]) the 16 transformed `[C_out/groups,
/// C_in/groups]` matrices per group; for the transposed product
/// ([`takes_transposed`]) one [`PackedB`] `wᵀ` per group.
#[derive(Clone, Debug)]
pub struct PackedConvWeights {
    form: Packed,
}

#[derive(Clone, Debug)]
enum Packed {
    Gemm(Vec<PackedA>),
    Winograd(Vec<Vec<PackedA>>),
    Transposed(Vec<PackedB>),
}

impl PackedConvWeights {
    /// Packs contiguous `[C_out, C_in/groups, kH, kW]` weights (`w`) of a
    /// convolution with `groups` groups, `strides` and `dilations`; `None` where
    /// the convolution takes neither the GEMM path nor Winograd, the sizes do not
    /// match, or a Winograd-transformed weight is not finite.
    pub fn pack(
        w: &[f32],
        shape: [usize; 4],
        groups: usize,
        strides: [usize; 2],
        dilations: [usize; 2],
    ) -> Option<PackedConvWeights> {
        let [c_out, cg, kh, kw] = shape;
        let mg = c_out.checked_div(groups)?;
        let k = cg.checked_mul(kh)?.checked_mul(kw)?;
        if mg * groups != c_out || k.checked_mul(c_out)? != w.len() {
            return None;
        }
        let form =
            if winograd::applies(cg, [kh, kw], strides, dilations) && mg >= WINOGRAD_MIN_OUTPUTS {
                Packed::Winograd(winograd::transform_weights(w, [c_out, cg], groups)?)
            } else if takes_gemm(mg, [kh, kw]) {
                let groups = (0..groups)
                    .map(|g| pack_block(w, [mg, k], g))
                    .collect::<Option<Vec<_>>>()?;
                Packed::Gemm(groups)
            } else {
                return None;
            };
        Some(PackedConvWeights { form })
    }

    /// Packs contiguous `[C_out, C_in/groups, kH, kW]` weights (`w`) of a
    /// convolution with `groups` groups for the transposed product
    /// ([`takes_transposed`]): per group `wᵀ`, `[C_in/groups · kH · kW,
    /// C_out/groups]`, as a GEMM's right operand. `None` where the sizes do not
    /// match.
    pub fn pack_transposed(
        w: &[f32],
        [c_out, cg, kh, kw]: [usize; 4],
        groups: usize,
    ) -> Option<PackedConvWeights> {
        let mg = c_out.checked_div(groups)?;
        let k = cg.checked_mul(kh)?.checked_mul(kw)?;
        if mg * groups != c_out || k.checked_mul(c_out)? != w.len() {
            return None;
        }
        let groups = (0..groups)
            .map(|g| {
                let geom = StridedShape::new(&[k, mg], &[1, k as isize], g * mg * k).ok()?;
                PackedB::pack(&View::new(w, geom).ok()?).ok()
            })
            .collect::<Option<Vec<_>>>()?;
        Some(PackedConvWeights {
            form: Packed::Transposed(groups),
        })
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        match &self.form {
            Packed::Gemm(groups) => groups.iter().map(PackedA::bytes).sum(),
            Packed::Winograd(groups) => groups.iter().flatten().map(PackedA::bytes).sum(),
            Packed::Transposed(groups) => groups.iter().map(PackedB::bytes).sum(),
        }
    }

    /// Whether the weights are packed for Winograd F(2×2, 3×3).
    pub fn is_winograd(&self) -> bool {
        matches!(self.form, Packed::Winograd(_))
    }

    /// Rows `first .. first + mg` of group `g`'s GEMM weights, if they have them
    /// and `k` columns.
    fn group(&self, g: usize, first: usize, mg: usize, k: usize) -> Option<&PackedA> {
        let Packed::Gemm(groups) = &self.form else {
            return None;
        };
        groups.get(g).filter(|a| a.m() >= first + mg && a.k() == k)
    }

    /// Columns `first .. first + mg` of group `g`'s `wᵀ`, if they have them, `k`
    /// rows, and `first` starts a panel.
    fn transposed(&self, g: usize, first: usize, mg: usize, k: usize) -> Option<PackedRef<'_>> {
        let Packed::Transposed(groups) = &self.form else {
            return None;
        };
        groups.get(g).filter(|b| b.k() == k)?.columns(first, mg)
    }

    /// Group `g`'s 16 Winograd matrices, if they have rows `first .. first + mg`
    /// and `cg` columns.
    fn winograd(&self, g: usize, first: usize, mg: usize, cg: usize) -> Option<&[PackedA]> {
        let Packed::Winograd(groups) = &self.form else {
            return None;
        };
        let u = groups.get(g)?;
        u.iter()
            .all(|a| a.m() >= first + mg && a.k() == cg)
            .then_some(&u[..])
    }
}

/// The `index`-th row-major `[rows, cols]` block of `data`, packed as a GEMM's
/// left operand; `None` if `data` is too short.
fn pack_block(data: &[f32], [rows, cols]: [usize; 2], index: usize) -> Option<PackedA> {
    let geom = StridedShape::new(&[rows, cols], &[cols as isize, 1], index * rows * cols).ok()?;
    PackedA::pack(&View::new(data, geom).ok()?).ok()
}

/// `out[n, m] = act(bias[m] + Σ w[m, c, i, j] · x[n, g·Cg + c, ·, ·])` (NCHW),
/// `w`, `bias`, groups and the activation from `conv`.
///
/// `w` is contiguous `[C_out, C_in/groups, kH, kW]`; `out` contiguous
/// `[N, C_out, OH, OW]`; `col` holds at least [`conv2d_scratch_len`] elements.
///
/// 1×1 windows with at least [`GEMM_MIN_CHANNELS`] output channels per group
/// run as one product per image and group, `out[Mg, P] = w_g[Mg, K] · col[K,
/// P]` on the packed micro-kernel ([`crate::packed`]), the bias added in its
/// epilogue and the result written straight into the NCHW output: `col` is the
/// image's patch matrix unrolled directly into packed panels (or, for a 1×1
/// stride-1 unpadded conv, the input channels packed as they are). 3×3 windows
/// at stride 1 with weights packed for Winograd ([`takes_winograd`]) run on it
/// (an image whose products are not finite on the direct path). Everything else
/// accumulates each output on the direct path, tap by tap.
pub fn conv2d(
    out: &mut [f32],
    x: &View<f32>,
    conv: &ConvParams,
    win: &Window,
    col: &mut [f32],
) -> Result<(), KernelError> {
    let ConvParams {
        w,
        bias,
        groups,
        activation,
        packed,
    } = *conv;
    let [n, c_in, h, wd] = dims4("conv input", x.shape())?;
    let [kh, kw] = win.kernel;
    let [oh, ow] = win.out;
    if groups == 0 || !c_in.is_multiple_of(groups) {
        return Err(KernelError::Invalid(format!(
            "{c_in} channels in {groups} groups"
        )));
    }
    let cg = c_in / groups;
    let k = cg * kh * kw;
    let c_out = w.len().checked_div(k).unwrap_or(0);
    if c_out * k != w.len() || !c_out.is_multiple_of(groups.max(1)) {
        return Err(KernelError::Invalid(format!(
            "weights of {} elements for {c_in}/{groups} channels",
            w.len()
        )));
    }
    let mg = c_out / groups;
    let p = oh * ow;
    if out.len() != n * c_out * p {
        return Err(KernelError::ShapeMismatch {
            what: "conv output",
            expected: vec![n, c_out, oh, ow],
            actual: vec![out.len()],
        });
    }
    if let Some(b) = bias
        && b.len() != c_out
    {
        return Err(KernelError::ShapeMismatch {
            what: "conv bias",
            expected: vec![c_out],
            actual: vec![b.len()],
        });
    }
    if out.is_empty() {
        return Ok(());
    }
    let need = conv2d_scratch_len(cg, mg, win, [h, wd]);
    if col.len() < need {
        return Err(KernelError::Invalid(format!(
            "conv scratch of {} elements, need {need}",
            col.len()
        )));
    }
    let g = ConvGeom {
        data: x.data(),
        offset: x.geom().offset() as isize,
        xs: x.geom().strides(),
        size: [h, wd],
        cg,
        win,
    };
    let w_t = |grp: usize| {
        let p = packed.filter(|_| takes_transposed(mg, win))?;
        p.weights.transposed(grp, p.first, mg, k)
    };
    if (0..groups).all(|grp| w_t(grp).is_some()) {
        for (idx, group_out) in out.chunks_exact_mut(mg * p).enumerate() {
            let (img, grp) = (idx / groups, idx % groups);
            let base = g.offset + img as isize * g.xs[0] + (grp * cg) as isize * g.xs[1];
            let w_t = w_t(grp).ok_or_else(|| {
                KernelError::Invalid(format!("conv group {grp}: no transposed weights"))
            })?;
            let channels = transposed::Channels {
                w_t,
                bias: bias.map(|b| &b[grp * mg..(grp + 1) * mg]),
                activation,
                bias_first: !takes_gemm(mg, win.kernel),
            };
            transposed::conv_group(group_out, &g, base, &channels, col)?;
        }
        return Ok(());
    }
    if !takes_gemm(mg, win.kernel) {
        let planes = direct::Planes::new(win, [h, wd]);
        if need > u32::MAX as usize {
            return Err(KernelError::Invalid(format!(
                "conv scratch of {need} elements: the direct path addresses at most 2^32"
            )));
        }
        if depthwise::applies(cg, mg) {
            let channels = direct::Channels {
                w,
                bias,
                activation,
            };
            depthwise::conv(out, &g, &planes, col, &channels, groups);
            return Ok(());
        }
        let winograd = packed.filter(|p| takes_winograd(cg, win) && p.weights.is_winograd());
        let tiles = winograd.map(|_| winograd::Tiles::new(win, [h, wd], cg, mg));
        let split = planes.conv_work_len(cg, mg, kh * kw);
        // tap offsets once per call where no Winograd group reuses the scratch
        let mut offsets_ready = false;
        for (idx, group_out) in out.chunks_exact_mut(mg * p).enumerate() {
            let (img, grp) = (idx / groups, idx % groups);
            let base = g.offset + img as isize * g.xs[0] + (grp * cg) as isize * g.xs[1];
            let channels = direct::Channels {
                w: &w[grp * mg * k..(grp + 1) * mg * k],
                bias: bias.map(|b| &b[grp * mg..(grp + 1) * mg]),
                activation,
            };
            let transformed = winograd.zip(tiles.as_ref()).and_then(|(p, tiles)| {
                Some((p.weights.winograd(grp, p.first, mg, cg)?, p.first, tiles))
            });
            if let Some((u, first, tiles)) = transformed {
                let transformed = winograd::Channels {
                    u,
                    rows: first..first + mg,
                    bias: channels.bias,
                    activation,
                };
                if winograd::conv_group(group_out, &g, base, tiles, col, &transformed)? {
                    continue;
                }
                // not finite: the direct path's semantics, on the scratch Winograd used
                offsets_ready = false;
            }
            let (work, table) = col.split_at_mut(split);
            if !offsets_ready {
                direct::tap_offsets(table, &planes, win, cg);
                offsets_ready = true;
            }
            let offsets = &table[..cg * kh * kw];
            direct::conv_group(group_out, &g, base, &planes, work, offsets, &channels);
        }
        return Ok(());
    }
    let direct = kh == 1
        && kw == 1
        && win.strides == [1, 1]
        && win.pads == [0; 4]
        && (h == 1 || g.xs[2] == wd as isize * g.xs[3]);
    for grp in 0..groups {
        // the group's [Mg, K] weights, row-major
        let wg = View::new(
            w,
            StridedShape::new(&[mg, k], &[k as isize, 1], grp * mg * k)?,
        )?;
        let epilogue = Epilogue {
            bias: bias.map_or(Bias::None, |b| Bias::PerRow(&b[grp * mg..(grp + 1) * mg])),
            activation,
        };
        let packed_w = packed.and_then(|p| {
            let a = p.weights.group(grp, p.first, mg, k)?;
            Some((a, p.first..p.first + mg))
        });
        for img in 0..n {
            let base = g.offset + img as isize * g.xs[0] + (grp * cg) as isize * g.xs[1];
            let first = (img * c_out + grp * mg) * p;
            let dst = &mut out[first..first + mg * p];
            let packed = if direct {
                // x[img, group channels] read as [Cg, P]
                let geom = StridedShape::new(&[cg, p], &[g.xs[1], g.xs[3]], base as usize)?;
                PackedRef::pack_into(&View::new(g.data, geom)?, col)?
            } else {
                im2col_at_level(crate::cpu::level(), col, &g, base, p);
                PackedRef::from_panels(k, p, col)?
            };
            match &packed_w {
                Some((a, rows)) => {
                    let part = PackedPart {
                        a,
                        rows: rows.clone(),
                    };
                    matmul_prepacked(dst, part, packed, 1.0, epilogue)?
                }
                None => matmul_packed_epilogue(dst, &wg, packed, 1.0, epilogue)?,
            }
        }
    }
    Ok(())
}

/// One image's input as the conv paths read it.
struct ConvGeom<'a> {
    data: &'a [f32],
    offset: isize,
    xs: &'a [isize],
    size: [usize; 2],
    cg: usize,
    win: &'a Window,
}

/// [`im2col_panels`] compiled for `level`: an explicit `#[target_feature]`
/// function per level, because a closure handed to `simd::dispatch` that is
/// too big to inline keeps the baseline target and runs unvectorized.
fn im2col_at_level(level: Level, col: &mut [f32], g: &ConvGeom, base: isize, p: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::vector::{Avx2, Avx512};
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
        unsafe fn avx512(col: &mut [f32], g: &ConvGeom, base: isize, p: usize) {
            // SAFETY: called only where the CPU has AVX-512 (below).
            im2col_panels(unsafe { Avx512::new() }, col, g, base, p)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(col: &mut [f32], g: &ConvGeom, base: isize, p: usize) {
            // SAFETY: called only where the CPU has AVX2 and FMA (below).
            im2col_panels(unsafe { Avx2::new() }, col, g, base, p)
        }
        match level.capped() {
            // SAFETY: `capped` never exceeds the CPU's level.
            Level::Avx512 => return unsafe { avx512(col, g, base, p) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(col, g, base, p) },
            Level::Scalar => {}
        }
    }
    im2col_panels(Scalar, col, g, base, p)
}

/// Unrolls the patch matrix of one image's channel group into packed panels
/// (`[k, OH·OW]`, `k = Cg·kH·kW`, in [`PackedRef`]'s layout: row `r`, output
/// position `q` at `((q / NR)·k + r)·NR + q % NR`); padded cells and the last
/// panel's padding columns are 0.
///
/// The group's input channels are first copied into `col` past the panels with
/// their padding as zeros, each padded row split into `sW` phases (columns
/// `t·sW + ρ` for phase `ρ`), so the inputs of consecutive output columns at any
/// tap are consecutive floats at any stride. Then, panel by panel, each vector of
/// output positions of each row is one load from the phases and one or two stores
/// into the panels: the stores of one vector walk the panel's rows in order, so
/// the panels are written sequentially, and no load is masked except an output
/// row's last partial vector (masked loads and stores are slow on some CPUs).
#[inline(always)]
fn im2col_panels<S: Simd>(s: S, col: &mut [f32], g: &ConvGeom, base: isize, p: usize) {
    let win = g.win;
    let ([kh, kw], [dh, dw], [oh, ow]) = (win.kernel, win.dilations, win.out);
    let k = g.cg * kh * kw;
    let (panels, padded) = col.split_at_mut(PackedRef::len_for(k, p));
    panels[p / NR * k * NR..].fill(0.0);
    if k == 0 {
        return;
    }
    let [sh, sw] = win.strides;
    let [ph, pw] = padded_size(win, g.size);
    let pq = pw.div_ceil(sw);
    // every tap of every output position lies in the padded plane
    assert!((oh - 1) * sh + (kh - 1) * dh < ph && (ow - 1) * sw + (kw - 1) * dw < pw);
    assert!(S::LANES <= NR && panels.len() >= p.div_ceil(NR) * k * NR);
    let padded = &mut padded[..g.cg * ph * sw * pq];
    pad_phases(s, padded, g, base, [ph, pq]);
    let (src, out) = (padded.as_ptr(), panels.as_mut_ptr());
    for oy in 0..oh {
        let mut x0 = 0;
        while x0 < ow {
            let n = (ow - x0).min(S::LANES);
            let q = oy * ow + x0;
            let (panel, col) = (q / NR, q % NR);
            let first = n.min(NR - col);
            let (mut c, mut i, mut j) = (0, 0, 0);
            for r in 0..k {
                // (no divisions at stride 1, the common case)
                let (phase, shift) = match sw {
                    1 => (0, j * dw),
                    _ => (j * dw % sw, j * dw / sw),
                };
                let at = ((c * ph + oy * sh + i * dh) * sw + phase) * pq + x0 + shift;
                // SAFETY: output column x0 + n − 1 at tap j is padded column
                // (x0 + n − 1)·sW + j·dW < PW (asserted above), so `at + n` stays in
                // its phase row; positions q..q + n < OH·OW lie in panels `panel`
                // and (when the vector crosses into it) `panel + 1`, rows of NR
                // floats in `panels` (asserted above); lanes first..n land at the
                // start of the next panel's row r.
                unsafe {
                    let v = if n == S::LANES {
                        s.load(src.add(at))
                    } else {
                        s.load_tail(src.add(at), n)
                    };
                    let dst = out.add((panel * k + r) * NR + col);
                    if first == S::LANES {
                        s.store(dst, v);
                    } else {
                        s.store_range(dst, 0, first, v);
                    }
                    if first < n {
                        let next = out.add(((panel + 1) * k + r) * NR);
                        s.store_range(next.wrapping_sub(first), first, n, v);
                    }
                }
                j += 1;
                if j == kw {
                    (i, j) = (i + 1, 0);
                    if i == kh {
                        (c, i) = (c + 1, 0);
                    }
                }
            }
            x0 += n;
        }
    }
}

/// Copies the channels at `base` into `padded` with their padding as zeros: per
/// channel `PH` padded rows, each as `sW` phase rows of `pq` floats (padded column
/// `t·sW + ρ` at `(y·sW + ρ)·pq + t`; columns past the padded row are 0 too).
#[inline(always)]
fn pad_phases<S: Simd>(s: S, padded: &mut [f32], g: &ConvGeom, base: isize, [ph, pq]: [usize; 2]) {
    let [h, wd] = g.size;
    let sw = g.win.strides[1];
    let (top, left) = (g.win.pads[0] as isize, g.win.pads[1]);
    for (c, plane) in padded.chunks_exact_mut(ph * sw * pq).enumerate() {
        for (y, rows) in plane.chunks_exact_mut(sw * pq).enumerate() {
            let iy = y as isize - top;
            if iy < 0 || iy >= h as isize {
                fill_run(s, rows, 0.0);
                continue;
            }
            let line = base + c as isize * g.xs[1] + iy * g.xs[2];
            for (phase, row) in rows.chunks_exact_mut(pq).enumerate() {
                // phase columns t with input column t·sW + phase − left in 0..W
                let lo = left.saturating_sub(phase).div_ceil(sw).min(pq);
                let hi = (wd + left).saturating_sub(phase).div_ceil(sw).clamp(lo, pq);
                let (head, rest) = row.split_at_mut(lo);
                let (body, tail) = rest.split_at_mut(hi - lo);
                fill_run(s, head, 0.0);
                fill_run(s, tail, 0.0);
                if body.is_empty() {
                    continue;
                }
                let start = line + (lo * sw + phase - left) as isize * g.xs[3];
                let step = sw as isize * g.xs[3];
                if step == 1 {
                    copy_run(s, body, &g.data[start as usize..][..body.len()]);
                } else if step > 1 {
                    let step = step as usize;
                    let reach = (body.len() - 1) * step + 1;
                    gather_run(body, &g.data[start as usize..][..reach], step);
                } else {
                    for (t, d) in body.iter_mut().enumerate() {
                        *d = g.data[(start + t as isize * step) as usize];
                    }
                }
            }
        }
    }
}

/// `dst = src` a vector at a time, a short tail masked: inline, where
/// `copy_from_slice` would call `memmove` for every short run.
#[inline(always)]
pub(super) fn copy_run<S: Simd>(s: S, dst: &mut [f32], src: &[f32]) {
    let n = dst.len();
    assert_eq!(n, src.len());
    let t = copy_vectors(s, dst, src, n);
    if t < n {
        let (d, from) = (dst.as_mut_ptr(), src.as_ptr());
        // SAFETY: n − t < LANES elements from t lie in both slices.
        unsafe { s.store_tail(d.add(t), n - t, s.load_tail(from.add(t), n - t)) };
    }
}

/// Copies the whole vectors of `src[..n]` into `dst` (both hold `n`); returns
/// where the partial vector left over starts.
#[inline(always)]
fn copy_vectors<S: Simd>(s: S, dst: &mut [f32], src: &[f32], n: usize) -> usize {
    assert!(dst.len() >= n && src.len() >= n);
    let (d, from) = (dst.as_mut_ptr(), src.as_ptr());
    let mut t = 0;
    while t + S::LANES <= n {
        // SAFETY: t + LANES ≤ n, within both slices.
        unsafe { s.store(d.add(t), s.load(from.add(t))) };
        t += S::LANES;
    }
    t
}

/// `dst[..n] = src[..n]` a vector at a time, the last, partial vector stored
/// whole (its lanes past `n` from `src` where it holds them, else 0): for runs
/// written in order, each overrun covered by the next run, where a masked
/// store per short run would cost more than the run (masked stores are slow on
/// AMD cores). `dst` holds at least `n` rounded up to the lanes.
#[inline(always)]
pub(super) fn copy_over<S: Simd>(s: S, dst: &mut [f32], src: &[f32], n: usize) {
    assert!(dst.len() >= n.next_multiple_of(S::LANES) && src.len() >= n);
    let t = copy_vectors(s, dst, src, n);
    if t < n {
        let v = load_part(s, src, t, n - t);
        // SAFETY: `dst` holds n rounded up to the lanes.
        unsafe { s.store(dst.as_mut_ptr().add(t), v) };
    }
}

/// The first `min(n, lanes)` floats of `src` from `t`, the other lanes read
/// past them where `src` holds a whole vector there (a plain load), else 0.
#[inline(always)]
pub(super) fn load_part<S: Simd>(s: S, src: &[f32], t: usize, n: usize) -> S::V {
    if n == 0 {
        return s.splat(0.0);
    }
    assert!(t + n.min(S::LANES) <= src.len());
    // SAFETY: the lanes read lie in `src` (whole when it holds them, else the
    // first n < LANES, asserted).
    unsafe {
        match src.len() >= t + S::LANES {
            true => s.load(src.as_ptr().add(t)),
            false => s.load_tail(src.as_ptr().add(t), n),
        }
    }
}

/// `dst[..n] = value` as [`copy_over`] writes: whole vectors, the last one
/// past `n` (`dst` holds `n` rounded up to the lanes). The first vector is
/// stored ahead of the loop, so the short runs of padding never reach a
/// `memset` call (which the loop alone compiles to).
#[inline(always)]
pub(super) fn fill_over<S: Simd>(s: S, dst: &mut [f32], n: usize, value: f32) {
    assert!(dst.len() >= n.next_multiple_of(S::LANES));
    if n == 0 {
        return;
    }
    let (d, v) = (dst.as_mut_ptr(), s.splat(value));
    // SAFETY: dst holds n ≥ 1 rounded up to the lanes, so the first vector.
    unsafe { s.store(d, v) };
    let mut t = S::LANES;
    while t < n {
        // SAFETY: t < n, so t + LANES ≤ n rounded up to the lanes.
        unsafe { s.store(d.add(t), v) };
        t += S::LANES;
    }
}

/// Copies `rows` runs of `width` floats, each `src_step` apart in `src`, into
/// consecutive runs of `dst`, in order: [`copy_over`] while `dst` has room
/// past the run (the next run, or what the caller writes after, covers the
/// overrun), exactly where it has not.
#[inline(always)]
pub(super) fn copy_rows<S: Simd>(
    s: S,
    dst: &mut [f32],
    src: &[f32],
    [rows, width]: [usize; 2],
    src_step: usize,
) {
    for r in 0..rows {
        let (to, from) = (&mut dst[r * width..], &src[r * src_step..]);
        if to.len() >= width.next_multiple_of(S::LANES) {
            copy_over(s, to, from, width);
        } else {
            copy_run(s, &mut to[..width], &from[..width]);
        }
    }
}

/// `dst[t] = src[t·step]` for `step > 1` (`src` holds `(len − 1)·step + 1`
/// elements); stride 2, the common one, as a fixed-stride loop the compiler
/// vectorizes with shuffles.
#[inline(always)]
pub(super) fn gather_run(dst: &mut [f32], src: &[f32], step: usize) {
    let Some((last, head)) = dst.split_last_mut() else {
        return;
    };
    *last = src[head.len() * step];
    if step == 2 {
        for (d, pair) in head.iter_mut().zip(src.chunks_exact(2)) {
            *d = pair[0];
        }
    } else {
        for (d, &v) in head.iter_mut().zip(src.iter().step_by(step)) {
            *d = v;
        }
    }
}

/// `dst` all `value`, as [`copy_run`] writes (no `memset` call per short run).
#[inline(always)]
pub(super) fn fill_run<S: Simd>(s: S, dst: &mut [f32], value: f32) {
    let (n, d, zero) = (dst.len(), dst.as_mut_ptr(), s.splat(value));
    let mut t = 0;
    while t + S::LANES <= n {
        // SAFETY: t + LANES ≤ n.
        unsafe { s.store(d.add(t), zero) };
        t += S::LANES;
    }
    if t < n {
        // SAFETY: n − t < LANES elements from t lie in `dst`.
        unsafe { s.store_tail(d.add(t), n - t, zero) };
    }
}

/// Scratch elements [`conv_transpose2d`] needs: one group's
/// `[C_out/groups · kH · kW, H · W]` column matrix.
pub fn conv_transpose2d_scratch_len(
    c_out_per_group: usize,
    kernel: [usize; 2],
    input: [usize; 2],
) -> usize {
    c_out_per_group * kernel[0] * kernel[1] * input[0] * input[1]
}

/// Transposed convolution (the gradient of [`conv2d`] with respect to its
/// input), NCHW:
/// `out[n, g·Mg + m, y·sH + i·dH − padT, x·sW + j·dW − padL] += x[n, g·Cg + c, y, x] · w[g·Cg + c, m, i, j]`,
/// plus `bias[g·Mg + m]`; taps that land outside `win.out` are dropped.
///
/// `x` is a contiguous `[N, C_in, H, W]` view; `w` contiguous
/// `[C_in, C_out/groups, kH, kW]`; `out` contiguous `[N, C_out, OH, OW]`
/// (`win.out`; `win.pads` bottom and right only shaped it); `col` holds at least
/// [`conv_transpose2d_scratch_len`] elements. Per image and group: one GEMM
/// `col = w_gᵀ · x_g`, then a scatter-add of `col` into the output (col2im).
pub fn conv_transpose2d(
    out: &mut [f32],
    x: &View<f32>,
    w: &[f32],
    bias: Option<&[f32]>,
    groups: usize,
    win: &Window,
    col: &mut [f32],
) -> Result<(), KernelError> {
    let [n, c_in, h, wd] = dims4("conv_transpose input", x.shape())?;
    let x = x
        .as_contiguous()
        .ok_or_else(|| KernelError::Invalid("conv_transpose input must be contiguous".into()))?;
    let [kh, kw] = win.kernel;
    let [oh, ow] = win.out;
    if groups == 0 || !c_in.is_multiple_of(groups) {
        return Err(KernelError::Invalid(format!(
            "{c_in} channels in {groups} groups"
        )));
    }
    let (cg, taps) = (c_in / groups, kh * kw);
    let mg = w.len().checked_div(c_in * taps).unwrap_or(0);
    if mg * c_in * taps != w.len() {
        return Err(KernelError::Invalid(format!(
            "weights of {} elements for {c_in} input channels and a {kh}x{kw} kernel",
            w.len()
        )));
    }
    let c_out = mg * groups;
    let (p_in, p_out) = (h * wd, oh * ow);
    if out.len() != n * c_out * p_out {
        return Err(KernelError::ShapeMismatch {
            what: "conv_transpose output",
            expected: vec![n, c_out, oh, ow],
            actual: vec![out.len()],
        });
    }
    match bias {
        Some(b) if b.len() != c_out => {
            return Err(KernelError::ShapeMismatch {
                what: "conv_transpose bias",
                expected: vec![c_out],
                actual: vec![b.len()],
            });
        }
        Some(b) => {
            for (plane, &bv) in out.chunks_exact_mut(p_out.max(1)).zip(b.iter().cycle()) {
                plane.fill(bv);
            }
        }
        None => out.fill(0.0),
    }
    let rows = mg * taps;
    let col_len = rows * p_in;
    if out.is_empty() || col_len == 0 {
        return Ok(());
    }
    if col.len() < col_len {
        return Err(KernelError::Invalid(format!(
            "conv_transpose scratch of {} elements, need {col_len}",
            col.len()
        )));
    }
    let col = &mut col[..col_len];
    for img in 0..n {
        for g in 0..groups {
            // w_gᵀ: the group's [Cg, Mg·kH·kW] weights read as [Mg·kH·kW, Cg]
            let lhs = View::new(
                w,
                StridedShape::new(&[rows, cg], &[1, rows as isize], g * cg * rows)?,
            )?;
            let start = (img * c_in + g * cg) * p_in;
            let rhs = View::contiguous(&x[start..start + cg * p_in], &[cg, p_in])?;
            matmul(
                &mut ViewMut::contiguous(col, &[rows, p_in])?,
                &lhs,
                &rhs,
                1.0,
                false,
            )?;
            let first = (img * c_out + g * mg) * p_out;
            col2im(&mut out[first..first + mg * p_out], col, [h, wd], win);
        }
    }
    Ok(())
}

/// Adds `col` (`[Mg·kH·kW, H·W]`) into one image's channel group of the
/// output (`[Mg, OH, OW]`), each input cell spread over its kernel taps.
fn col2im(out: &mut [f32], col: &[f32], [h, wd]: [usize; 2], win: &Window) {
    let [kh, kw] = win.kernel;
    let [oh, ow] = win.out;
    let p_in = h * wd;
    for (r, src) in col.chunks_exact(p_in).enumerate() {
        let (m, i, j) = (r / (kh * kw), r / kw % kh, r % kw);
        let plane = &mut out[m * oh * ow..(m + 1) * oh * ow];
        for y in 0..h {
            let oy = win.coord(0, y, i);
            if oy < 0 || oy >= oh as isize {
                continue;
            }
            let line = &mut plane[oy as usize * ow..(oy as usize + 1) * ow];
            for (x, &v) in src[y * wd..(y + 1) * wd].iter().enumerate() {
                let ox = win.coord(1, x, j);
                if ox >= 0 && ox < ow as isize {
                    line[ox as usize] += v;
                }
            }
        }
    }
}
