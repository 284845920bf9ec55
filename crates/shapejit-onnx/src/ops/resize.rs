//! `Resize` (versions 11–19), separable: one pass per resized axis, as the
//! onnx reference computes it. Each output position along the axis maps to a
//! source coordinate (the `coordinate_transformation_mode`), then to taps:
//! - `nearest`: one input index (`nearest_mode` breaks ties): a `gather`, no
//!   arithmetic;
//! - `linear` (2 taps), `cubic` (4 taps, `cubic_coeff_a`), or with
//!   `antialias` the wider filter of a downscale: `Σ_k gather(x, idx_k) · w_k`
//!   with f32 weights, indices clamped to the edge (`exclude_outside` zeroes
//!   and renormalizes the weights of taps outside).
//!
//! `tf_crop_and_resize` positions outside the input take `extrapolation_value`.
//! Scales, sizes and roi must be constants and the resized dims known: the
//! taps and weights are computed at load, in f64.
//!
//! **Invariant:** the output has the reference's shape (sizes, or
//! `⌊scale · in⌋`, or the `keep_aspect_ratio_policy` size) and its values up to
//! the f32 rounding of the weighted sums.

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{BinaryOp, DType, Op, Tensor, ValueId};

/// How output positions pick and weigh input positions.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

/// The attributes that shape the taps of one axis.
struct Filter<'a> {
    mode: Mode,
    nearest_mode: &'a str,
    coordinates: &'a str,
    cubic_a: f64,
    antialias: bool,
    exclude_outside: bool,
}

/// The source coordinate of output position `y` along an axis.
fn source(
    coordinates: &str,
    y: f64,
    scale: f64,
    n_in: usize,
    n_out: usize,
    roi: (f64, f64),
) -> f64 {
    let (n_in, out_w) = (n_in as f64, scale * n_in as f64);
    match coordinates {
        "align_corners" if out_w == 1.0 => 0.0,
        "align_corners" => y * (n_in - 1.0) / (out_w - 1.0),
        "asymmetric" => y / scale,
        "tf_crop_and_resize" => {
            let x = if out_w == 1.0 {
                (roi.1 - roi.0) * (n_in - 1.0) / 2.0
            } else {
                y * (roi.1 - roi.0) * (n_in - 1.0) / (out_w - 1.0)
            };
            x + roi.0 * (n_in - 1.0)
        }
        "pytorch_half_pixel" if out_w == 1.0 => -0.5,
        "half_pixel_symmetric" => {
            let adjustment = n_out as f64 / out_w;
            let offset = n_in / 2.0 * (1.0 - adjustment);
            offset + (y + 0.5) / scale - 0.5
        }
        // half_pixel, pytorch_half_pixel
        _ => (y + 0.5) / scale - 0.5,
    }
}

impl Filter<'_> {
    /// The weights of the taps for a fractional position `ratio` in (0, 1].
    fn weights(&self, ratio: f64, scale: f64) -> Vec<f64> {
        let a = self.cubic_a;
        let cubic = |x: f64| {
            let x = x.abs();
            if x <= 1.0 {
                (a + 2.0) * x * x * x - (a + 3.0) * x * x + 1.0
            } else if x < 2.0 {
                a * x * x * x - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
            } else {
                0.0
            }
        };
        let normalized = |w: Vec<f64>| {
            let sum: f64 = w.iter().sum();
            w.into_iter().map(|v| v / sum).collect()
        };
        match (self.mode, self.antialias) {
            (Mode::Nearest, _) => {
                let up = if ratio == 1.0 {
                    true
                } else {
                    match self.nearest_mode {
                        "round_prefer_ceil" => ratio >= 0.5,
                        "floor" => false,
                        "ceil" => true,
                        // round_prefer_floor
                        _ => ratio > 0.5,
                    }
                };
                vec![f64::from(u8::from(!up)), f64::from(u8::from(up))]
            }
            (Mode::Linear, false) => vec![1.0 - ratio, ratio],
            (Mode::Cubic, false) => [ratio + 1.0, ratio, 1.0 - ratio, 2.0 - ratio]
                .iter()
                .map(|&x| cubic(x))
                .collect(),
            (Mode::Linear, true) => {
                let s = scale.min(1.0);
                let start = (-1.0 / s).floor() as i64 + 1;
                let w = (start..2 - start)
                    .map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0))
                    .collect();
                normalized(w)
            }
            (Mode::Cubic, true) => {
                let s = scale.min(1.0);
                let start = (-2.0 / s).floor() as i64 + 1;
                let w = (start..2 - start)
                    .map(|i| cubic(s * (i as f64 - ratio)))
                    .collect();
                normalized(w)
            }
        }
    }

    /// Per output position: the clamped input indices and their weights, and
    /// whether the position extrapolates.
    fn taps(
        &self,
        scale: f64,
        n_in: usize,
        n_out: usize,
        roi: (f64, f64),
    ) -> Vec<(Vec<i64>, Vec<f64>, bool)> {
        (0..n_out)
            .map(|y| {
                let x = source(self.coordinates, y as f64, scale, n_in, n_out, roi);
                let outside =
                    self.coordinates == "tf_crop_and_resize" && (x < 0.0 || x > n_in as f64 - 1.0);
                let ratio = if x == x.floor() { 1.0 } else { x - x.floor() };
                let mut w = self.weights(ratio, scale);
                let n = w.len() as i64;
                let pad = (n + 1) / 2;
                let xp = x + pad as f64;
                let p = xp.floor();
                let frac = xp - p;
                let offset = if n % 2 == 0 {
                    if frac == 0.0 { -(n / 2) } else { -(n / 2) + 1 }
                } else if frac <= 0.5 {
                    -((n - 1) / 2)
                } else {
                    -((n - 1) / 2) + 1
                };
                let start = p as i64 + offset - pad;
                let idx: Vec<i64> = (start..start + n).collect();
                if self.exclude_outside {
                    for (wk, &i) in w.iter_mut().zip(&idx) {
                        if i < 0 || i >= n_in as i64 {
                            *wk = 0.0;
                        }
                    }
                    let sum: f64 = w.iter().sum();
                    let sum = if sum == 0.0 { 1.0 } else { sum };
                    w.iter_mut().for_each(|v| *v /= sum);
                }
                let clamped = idx.iter().map(|&i| i.clamp(0, n_in as i64 - 1)).collect();
                (clamped, w, outside)
            })
            .collect()
    }
}

/// The f64 contents of a constant input.
fn const_values(cx: &NodeCx, v: ValueId, what: &str) -> NodeResult<Vec<f64>> {
    cx.const_tensor(v)
        .map(Tensor::to_f64_vec)
        .ok_or_else(|| cx.unsupported(format!("{what} computed at run time")))
}

/// `Resize(X, roi?, scales?, sizes?)`.
pub fn resize(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let (roi, scales, sizes) = (cx.opt_input(1)?, cx.opt_input(2)?, cx.opt_input(3)?);
    let mode = match cx.attr_string("mode")?.as_deref().unwrap_or("nearest") {
        "nearest" => Mode::Nearest,
        "linear" => Mode::Linear,
        "cubic" => Mode::Cubic,
        other => return Err(cx.bad(format!("mode = '{other}'"))),
    };
    let coordinates = cx
        .attr_string("coordinate_transformation_mode")?
        .unwrap_or_else(|| "half_pixel".into());
    let known_modes = [
        "half_pixel",
        "half_pixel_symmetric",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
        "tf_crop_and_resize",
    ];
    if !known_modes.contains(&coordinates.as_str()) {
        return Err(cx.bad(format!("coordinate_transformation_mode = '{coordinates}'")));
    }
    let nearest_mode = cx
        .attr_string("nearest_mode")?
        .unwrap_or_else(|| "round_prefer_floor".into());
    if !["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
        .contains(&nearest_mode.as_str())
    {
        return Err(cx.bad(format!("nearest_mode = '{nearest_mode}'")));
    }
    let filter = Filter {
        mode,
        nearest_mode: &nearest_mode,
        coordinates: &coordinates,
        cubic_a: f64::from(cx.float_or("cubic_coeff_a", -0.75)?),
        antialias: cx.int_or("antialias", 0)? != 0 && mode != Mode::Nearest,
        exclude_outside: cx.int_or("exclude_outside", 0)? != 0,
    };
    let extrapolation = f64::from(cx.float_or("extrapolation_value", 0.0)?);
    let policy = cx
        .attr_string("keep_aspect_ratio_policy")?
        .unwrap_or_else(|| "stretch".into());
    let rank = cx.rank(x);
    let axes: Vec<usize> = match cx.attr_ints("axes")? {
        Some(a) => a
            .iter()
            .map(|&a| cx.axis(a, rank, "axes"))
            .collect::<NodeResult<_>>()?,
        None => (0..rank).collect(),
    };
    let dims: Vec<Option<usize>> = cx
        .ty(x)
        .shape
        .dims()
        .iter()
        .map(|d| d.as_known().map(|n| n as usize))
        .collect();
    let known = |cx: &NodeCx, a: usize| {
        dims[a].ok_or_else(|| {
            cx.unsupported(format!(
                "resizing the symbolic dim {}",
                cx.ty(x).shape.dims()[a]
            ))
        })
    };
    let scales = match scales {
        Some(s)
            if !cx
                .ty(s)
                .shape
                .dims()
                .iter()
                .any(|d| d.as_known() == Some(0)) =>
        {
            Some(const_values(cx, s, "scales")?)
        }
        _ => None,
    };
    // per resized axis: (scale, output size); None leaves a symbolic dim as it is
    let plan: Vec<Option<(f64, usize)>> = match (scales, sizes) {
        (Some(s), _) => {
            if s.len() != axes.len() {
                return Err(cx.bad(format!("{} scales for {} axes", s.len(), axes.len())));
            }
            axes.iter()
                .zip(&s)
                .map(|(&a, &sc)| match dims[a] {
                    None if sc == 1.0 => Ok(None),
                    _ => Ok(Some((sc, (sc * known(cx, a)? as f64) as usize))),
                })
                .collect::<NodeResult<_>>()?
        }
        (None, Some(sz)) => {
            let sz = cx.const_ints(sz, "sizes")?;
            if sz.len() != axes.len() || sz.iter().any(|&n| n < 0) {
                return Err(cx.bad(format!("sizes {sz:?} for {} axes", axes.len())));
            }
            let n_in = axes
                .iter()
                .map(|&a| known(cx, a))
                .collect::<NodeResult<Vec<usize>>>()?;
            let ratios: Vec<f64> = sz
                .iter()
                .zip(&n_in)
                .map(|(&n, &d)| n as f64 / d as f64)
                .collect();
            match policy.as_str() {
                "stretch" => ratios
                    .iter()
                    .zip(&sz)
                    .map(|(&r, &n)| Some((r, n as usize)))
                    .collect(),
                "not_larger" | "not_smaller" => {
                    let pick = if policy == "not_larger" {
                        f64::min
                    } else {
                        f64::max
                    };
                    let s = ratios.iter().copied().reduce(pick).unwrap_or(1.0);
                    n_in.iter()
                        .map(|&d| Some((s, (s * d as f64 + 0.5) as usize)))
                        .collect()
                }
                other => return Err(cx.bad(format!("keep_aspect_ratio_policy = '{other}'"))),
            }
        }
        (None, None) => return Err(cx.bad("neither scales nor sizes is given")),
    };
    let roi = match roi {
        Some(r)
            if !cx
                .ty(r)
                .shape
                .dims()
                .iter()
                .any(|d| d.as_known() == Some(0)) =>
        {
            let r = const_values(cx, r, "roi")?;
            if r.len() != 2 * axes.len() {
                return Err(cx.bad(format!("roi of {} values for {} axes", r.len(), axes.len())));
            }
            Some(r)
        }
        _ => None,
    };
    if coordinates == "tf_crop_and_resize" && roi.is_none() {
        return Err(cx.bad("tf_crop_and_resize needs a roi"));
    }
    let mut y = x;
    for (i, &axis) in axes.iter().enumerate() {
        let Some((scale, n_out)) = plan[i] else {
            continue;
        };
        let n_in = known(cx, axis)?;
        let r = roi
            .as_ref()
            .map_or((0.0, 1.0), |r| (r[i], r[axes.len() + i]));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        if close(scale, 1.0) && n_out == n_in && close(r.0, 0.0) && close(r.1, 1.0) {
            continue;
        }
        if n_in == 0 || !scale.is_finite() || scale <= 0.0 {
            return Err(cx.bad(format!("resizing axis {axis} of size {n_in} by {scale}")));
        }
        let taps = filter.taps(scale, n_in, n_out, r);
        y = resize_axis(cx, y, axis, rank, &taps, extrapolation)?;
    }
    Ok(vec![y])
}

/// One pass along `axis` with the given taps.
fn resize_axis(
    cx: &mut NodeCx,
    x: ValueId,
    axis: usize,
    rank: usize,
    taps: &[(Vec<i64>, Vec<f64>, bool)],
    extrapolation: f64,
) -> NodeResult<ValueId> {
    let n_out = taps.len();
    // a column [n_out, 1, ..., 1] that broadcasts along `axis`
    let column = |cx: &mut NodeCx, t: Tensor| -> NodeResult<ValueId> {
        let mut shape = vec![n_out];
        shape.extend(std::iter::repeat_n(1, rank - axis - 1));
        let t = t.reshaped(&shape).map_err(|e| cx.bad(e.to_string()))?;
        Ok(cx.constant(t))
    };
    let gather = |cx: &mut NodeCx, k: usize| -> NodeResult<ValueId> {
        let idx: Vec<i64> = taps.iter().map(|t| t.0[k]).collect();
        let idx = cx.const_i64s(idx);
        cx.op(Op::Gather { axis: axis as i64 }, &[x, idx])
    };
    let n_taps = taps.first().map_or(0, |t| t.0.len());
    let nearest = taps.iter().all(|t| {
        t.1.iter().all(|&w| w == 0.0 || w == 1.0) && t.1.iter().filter(|&&w| w == 1.0).count() == 1
    });
    let mut y = if nearest || n_taps == 0 {
        // one index per position: the tap of weight 1
        let idx: Vec<i64> = taps
            .iter()
            .map(|t| t.1.iter().position(|&w| w == 1.0).map_or(0, |k| t.0[k]))
            .collect();
        let idx = cx.const_i64s(idx);
        cx.op(Op::Gather { axis: axis as i64 }, &[x, idx])?
    } else {
        if cx.ty(x).dtype != DType::F32 {
            return Err(cx.unsupported(format!("interpolating {}", cx.ty(x).dtype)));
        }
        let mut sum = None;
        for k in 0..n_taps {
            let g = gather(cx, k)?;
            let w: Vec<f32> = taps.iter().map(|t| t.1[k] as f32).collect();
            let w = Tensor::from_vec(w, &[n_out]).map_err(|e| cx.bad(e.to_string()))?;
            let w = column(cx, w)?;
            let term = cx.bin(BinaryOp::Mul, g, w)?;
            sum = Some(match sum {
                Some(s) => cx.bin(BinaryOp::Add, s, term)?,
                None => term,
            });
        }
        sum.ok_or_else(|| cx.bad("a filter without taps"))?
    };
    if taps.iter().any(|t| t.2) {
        let mask: Vec<bool> = taps.iter().map(|t| t.2).collect();
        let mask = Tensor::from_vec(mask, &[n_out]).map_err(|e| cx.bad(e.to_string()))?;
        let mask = column(cx, mask)?;
        let value = cx.scalar_like(y, extrapolation);
        y = cx.op(Op::Where, &[mask, value, y])?;
    }
    Ok(y)
}
