//! 2-D convolution (im2col + GEMM), transposed convolution (GEMM + col2im)
//! and max/average pooling, NCHW.
//!
//! conv2d: for each image and group, the input patches are unrolled into a
//! `[C_in/groups · kH · kW, OH · OW]` matrix in caller-provided scratch (or read
//! in place for a 1×1, stride-1, unpadded conv), then multiplied by the group's
//! `[C_out/groups, C_in/groups · kH · kW]` weights straight into the output.
//!
//! **Invariant:** padded cells read as 0 for conv, never win a max pool, and
//! count in an average only when asked to (and only inside the declared padding).

use crate::error::KernelError;
use crate::matmul::matmul;
use crate::view::{StridedShape, View, ViewMut};

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

/// Scratch elements [`conv2d`] needs for weights `[C_out, C_in/groups, kH, kW]`.
pub fn conv2d_scratch_len(c_in_per_group: usize, win: &Window) -> usize {
    c_in_per_group * win.kernel[0] * win.kernel[1] * win.out[0] * win.out[1]
}

/// `out[n, m] = bias[m] + Σ w[m, c, i, j] · x[n, g·Cg + c, ·, ·]` (NCHW).
///
/// `w` is contiguous `[C_out, C_in/groups, kH, kW]`; `out` contiguous
/// `[N, C_out, OH, OW]`; `col` holds at least [`conv2d_scratch_len`] elements.
pub fn conv2d(
    out: &mut [f32],
    x: &View<f32>,
    w: &[f32],
    bias: Option<&[f32]>,
    groups: usize,
    win: &Window,
    col: &mut [f32],
) -> Result<(), KernelError> {
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
    let xs = x.geom().strides();
    let direct = kh == 1
        && kw == 1
        && win.strides == [1, 1]
        && win.pads == [0; 4]
        && (h == 1 || xs[2] == wd as isize * xs[3]);
    let col_len = conv2d_scratch_len(cg, win);
    if !direct && col.len() < col_len {
        return Err(KernelError::Invalid(format!(
            "conv scratch of {} elements, need {col_len}",
            col.len()
        )));
    }
    let data = x.data();
    for img in 0..n {
        for g in 0..groups {
            let base =
                x.geom().offset() as isize + img as isize * xs[0] + (g * cg) as isize * xs[1];
            let rhs = if direct {
                // x[img, group channels] is already a [Cg, H·W] matrix
                let geom = StridedShape::new(&[cg, p], &[xs[1], xs[3]], base as usize)?;
                View::new(data, geom)?
            } else {
                im2col(&mut col[..col_len], data, base, xs, [h, wd], cg, win);
                View::contiguous(&col[..col_len], &[k, p])?
            };
            let lhs = View::new(
                w,
                StridedShape::new(&[mg, k], &[k as isize, 1], g * mg * k)?,
            )?;
            let start = (img * c_out + g * mg) * p;
            let region = &mut out[start..start + mg * p];
            if let Some(b) = bias {
                for (row, &bv) in region.chunks_exact_mut(p).zip(&b[g * mg..(g + 1) * mg]) {
                    row.fill(bv);
                }
            }
            let mut dst = ViewMut::contiguous(region, &[mg, p])?;
            matmul(&mut dst, &lhs, &rhs, 1.0, bias.is_some())?;
        }
    }
    Ok(())
}

/// Unrolls the patches of one image's channel group into `col` (`[Cg·kH·kW, OH·OW]`).
fn im2col(
    col: &mut [f32],
    data: &[f32],
    base: isize,
    xs: &[isize],
    [h, wd]: [usize; 2],
    cg: usize,
    win: &Window,
) {
    let [kh, kw] = win.kernel;
    let [oh, ow] = win.out;
    let p = oh * ow;
    let mut row = 0;
    for c in 0..cg {
        for i in 0..kh {
            for j in 0..kw {
                let dst = &mut col[row * p..(row + 1) * p];
                for oy in 0..oh {
                    let iy = win.coord(0, oy, i);
                    let line = &mut dst[oy * ow..(oy + 1) * ow];
                    if iy < 0 || iy >= h as isize {
                        line.fill(0.0);
                        continue;
                    }
                    let at = base + c as isize * xs[1] + iy * xs[2];
                    for (ox, v) in line.iter_mut().enumerate() {
                        let ix = win.coord(1, ox, j);
                        *v = if ix < 0 || ix >= wd as isize {
                            0.0
                        } else {
                            data[(at + ix * xs[3]) as usize]
                        };
                    }
                }
                row += 1;
            }
        }
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

/// Pools `x` (`[N, C, H, W]`, any layout) into contiguous `out` (`[N, C, OH, OW]`).
pub fn pool2d(out: &mut [f32], x: &View<f32>, win: &Window, pool: Pool) -> Result<(), KernelError> {
    let [n, c, h, wd] = dims4("pool input", x.shape())?;
    let [oh, ow] = win.out;
    if out.len() != n * c * oh * ow {
        return Err(KernelError::ShapeMismatch {
            what: "pool output",
            expected: vec![n, c, oh, ow],
            actual: vec![out.len()],
        });
    }
    let xs = x.geom().strides();
    let data = x.data();
    let (ph, pw) = ((h + win.pads[2]) as isize, (wd + win.pads[3]) as isize);
    let mut dst = out.iter_mut();
    for img in 0..n {
        for ch in 0..c {
            let base = x.geom().offset() as isize + img as isize * xs[0] + ch as isize * xs[1];
            for oy in 0..oh {
                for ox in 0..ow {
                    let (mut acc, mut inside, mut padded) = (
                        if pool == Pool::Max {
                            f32::NEG_INFINITY
                        } else {
                            0.0
                        },
                        0usize,
                        0usize,
                    );
                    for i in 0..win.kernel[0] {
                        let iy = win.coord(0, oy, i);
                        for j in 0..win.kernel[1] {
                            let ix = win.coord(1, ox, j);
                            if iy < ph && ix < pw {
                                padded += 1;
                            }
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                continue;
                            }
                            inside += 1;
                            let v = data[(base + iy * xs[2] + ix * xs[3]) as usize];
                            acc = match pool {
                                Pool::Max if v > acc || v.is_nan() => v,
                                Pool::Max => acc,
                                Pool::Avg { .. } => acc + v,
                            };
                        }
                    }
                    let v = match pool {
                        Pool::Max => acc,
                        Pool::Avg {
                            count_include_pad: true,
                        } => acc / padded as f32,
                        Pool::Avg {
                            count_include_pad: false,
                        } => acc / inside as f32,
                    };
                    // `dst` yields exactly n·c·oh·ow slots (length checked above)
                    if let Some(d) = dst.next() {
                        *d = v;
                    }
                }
            }
        }
    }
    Ok(())
}
