//! `Resize` (versions 11–19), separable: one pass per resized axis, as the
//! onnx reference computes it, composed from IR ops so that scales, sizes
//! and roi may arrive at run time.
//!
//! Along an axis of `n` inputs resized to `m` outputs by `scale`, output `o`
//! maps to the source coordinate `x(o)` of the
//! `coordinate_transformation_mode` (computed in f64, as the reference does);
//! with `i = ⌊x⌋` and `r = x - i`:
//! - `nearest`: input `i` or `i + 1` by `nearest_mode` (`r = 0` picks `i`), a
//!   `gather` with no arithmetic;
//! - `linear`: inputs `i, i + 1` weighted `1 - r, r`;
//! - `cubic`: inputs `i - 1 ..= i + 2` weighted by the Keys kernel
//!   (`cubic_coeff_a`) at distances `r + 1, r, 1 - r, 2 - r`.
//!
//! Indices clamp to the edge; `exclude_outside` zeroes the weights of
//! indices outside and renormalizes. `tf_crop_and_resize` positions outside
//! the input take `extrapolation_value`. The weighted sums run in f32 with f32
//! weights. `antialias` is unsupported (its footprint depends on the scale).
//!
//! **Invariant:** the output has the reference's shape: sizes, or
//! `⌊scale · n⌋`, or with `keep_aspect_ratio_policy` the one scale's
//! `⌊scale · n + 0.5⌋`.

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{BinaryOp, DType, Op, ValueId};

/// How output positions pick and weigh input positions.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

/// The node's attributes that shape each pass.
struct Pass {
    mode: Mode,
    nearest_mode: String,
    coordinates: String,
    cubic_a: f64,
    exclude_outside: bool,
    extrapolation: f64,
    rank: usize,
}

/// Element `i` of a vector, as a scalar.
fn element(cx: &mut NodeCx, v: ValueId, i: i64) -> NodeResult<ValueId> {
    let one = cx.op(
        Op::Slice {
            starts: vec![i],
            ends: vec![i + 1],
            axes: vec![0],
            steps: vec![1],
        },
        &[v],
    )?;
    cx.op(Op::Squeeze { axes: vec![0] }, &[one])
}

fn cast(cx: &mut NodeCx, v: ValueId, to: DType) -> NodeResult<ValueId> {
    if cx.ty(v).dtype == to {
        return Ok(v);
    }
    cx.op(Op::Cast { to }, &[v])
}

fn f64c(cx: &mut NodeCx, v: f64) -> ValueId {
    cx.const_scalar(DType::F64, v)
}

/// `⌊v⌋` of f64 values, as f64 (truncation, less one below a negative value).
fn floor(cx: &mut NodeCx, v: ValueId) -> NodeResult<ValueId> {
    let t = cast(cx, v, DType::I64)?;
    let t = cast(cx, t, DType::F64)?;
    let above = cx.bin(BinaryOp::Gt, t, v)?;
    let one = f64c(cx, 1.0);
    let less = cx.bin(BinaryOp::Sub, t, one)?;
    cx.op(Op::Where, &[above, less, t])
}

/// `a · b + c` over f64 values (`b` and `c` constants).
fn affine(cx: &mut NodeCx, a: ValueId, b: f64, c: f64) -> NodeResult<ValueId> {
    let (b, c) = (f64c(cx, b), f64c(cx, c));
    let ab = cx.bin(BinaryOp::Mul, a, b)?;
    cx.bin(BinaryOp::Add, ab, c)
}

/// The f64 non-empty contents of an optional input (an empty one is absent).
fn present(cx: &mut NodeCx, v: Option<ValueId>) -> NodeResult<Option<ValueId>> {
    match v {
        Some(v) if cx.ty(v).shape.dims().first().and_then(|d| d.as_known()) != Some(0) => {
            Ok(Some(cast(cx, v, DType::F64)?))
        }
        _ => Ok(None),
    }
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
    if cx.int_or("antialias", 0)? != 0 && mode != Mode::Nearest {
        return Err(cx.unsupported("antialias"));
    }
    let rank = cx.rank(x);
    let pass = Pass {
        mode,
        nearest_mode,
        coordinates,
        cubic_a: f64::from(cx.float_or("cubic_coeff_a", -0.75)?),
        exclude_outside: cx.int_or("exclude_outside", 0)? != 0,
        extrapolation: f64::from(cx.float_or("extrapolation_value", 0.0)?),
        rank,
    };
    if pass.mode != Mode::Nearest && cx.ty(x).dtype != DType::F32 {
        return Err(cx.unsupported(format!("interpolating {}", cx.ty(x).dtype)));
    }
    let policy = cx
        .attr_string("keep_aspect_ratio_policy")?
        .unwrap_or_else(|| "stretch".into());
    let axes: Vec<usize> = match cx.attr_ints("axes")? {
        Some(a) => a
            .iter()
            .map(|&a| cx.axis(a, rank, "axes"))
            .collect::<NodeResult<_>>()?,
        None => (0..rank).collect(),
    };
    let k = axes.len();
    let count_ok = |cx: &NodeCx, v: ValueId, n: usize| {
        cx.rank(v) == 1
            && cx.ty(v).shape.dims()[0]
                .as_known()
                .is_none_or(|c| c == n as i64)
    };
    // the input dims of the axes, as i64 and f64 vectors
    let shape = cx.shape_of(x)?;
    let picks = cx.const_i64s(axes.iter().map(|&a| a as i64).collect());
    let n_in = cx.op(Op::Gather { axis: 0 }, &[shape, picks])?;
    let n_in_f = cast(cx, n_in, DType::F64)?;
    let (scale, n_out) = match (present(cx, scales)?, sizes) {
        (Some(s), _) => {
            if !count_ok(cx, s, k) {
                return Err(cx.bad(format!("scales for {k} axes expected")));
            }
            // ⌊scale · n⌋ (positive: truncation)
            let m = cx.bin(BinaryOp::Mul, s, n_in_f)?;
            (s, cast(cx, m, DType::I64)?)
        }
        (None, Some(sz)) => {
            if !count_ok(cx, sz, k) {
                return Err(cx.bad(format!("sizes for {k} axes expected")));
            }
            let sz = cast(cx, sz, DType::I64)?;
            let szf = cast(cx, sz, DType::F64)?;
            let ratios = cx.bin(BinaryOp::Div, szf, n_in_f)?;
            match policy.as_str() {
                "stretch" => (ratios, sz),
                "not_larger" | "not_smaller" => {
                    // the smallest (largest) ratio, folded pairwise in f64
                    let op = if policy == "not_larger" {
                        BinaryOp::Min
                    } else {
                        BinaryOp::Max
                    };
                    let mut one = element(cx, ratios, 0)?;
                    for i in 1..k as i64 {
                        let r = element(cx, ratios, i)?;
                        one = cx.bin(op, one, r)?;
                    }
                    let ks = cx.const_i64s(vec![k as i64]);
                    let s = cx.op(Op::Expand, &[one, ks])?;
                    let m = cx.bin(BinaryOp::Mul, s, n_in_f)?;
                    let half = f64c(cx, 0.5);
                    let m = cx.bin(BinaryOp::Add, m, half)?;
                    (s, cast(cx, m, DType::I64)?)
                }
                other => {
                    return Err(cx.bad(format!("keep_aspect_ratio_policy = '{other}'")));
                }
            }
        }
        (None, None) => return Err(cx.bad("neither scales nor sizes is given")),
    };
    let roi = present(cx, roi)?;
    if pass.coordinates == "tf_crop_and_resize" && roi.is_none() {
        return Err(cx.bad("tf_crop_and_resize needs a roi"));
    }
    if let Some(r) = roi
        && !count_ok(cx, r, 2 * k)
    {
        return Err(cx.bad(format!("a roi of {} values expected", 2 * k)));
    }
    let mut y = x;
    for (i, &axis) in axes.iter().enumerate() {
        let i = i as i64;
        let sc = element(cx, scale, i)?;
        let m = element(cx, n_out, i)?;
        let n = element(cx, n_in, i)?;
        let window = match roi {
            Some(r) => Some((element(cx, r, i)?, element(cx, r, k as i64 + i)?)),
            None => None,
        };
        y = pass.along(cx, y, axis, (n, m, sc), window)?;
    }
    Ok(vec![y])
}

impl Pass {
    /// The f64 source coordinates of outputs `0..m`.
    fn source(
        &self,
        cx: &mut NodeCx,
        o: ValueId,
        n: ValueId,
        m: ValueId,
        scale: ValueId,
        roi: Option<(ValueId, ValueId)>,
    ) -> NodeResult<ValueId> {
        let nf = cast(cx, n, DType::F64)?;
        let out_w = cx.bin(BinaryOp::Mul, scale, nf)?;
        let one = f64c(cx, 1.0);
        let single = cx.bin(BinaryOp::Eq, out_w, one)?;
        let n1 = cx.bin(BinaryOp::Sub, nf, one)?;
        let w1 = cx.bin(BinaryOp::Sub, out_w, one)?;
        // (o + 0.5) / scale - 0.5
        let half_pixel = |cx: &mut NodeCx| -> NodeResult<ValueId> {
            let h = affine(cx, o, 1.0, 0.5)?;
            let d = cx.bin(BinaryOp::Div, h, scale)?;
            affine(cx, d, 1.0, -0.5)
        };
        Ok(match self.coordinates.as_str() {
            "align_corners" => {
                let t = cx.bin(BinaryOp::Mul, o, n1)?;
                let t = cx.bin(BinaryOp::Div, t, w1)?;
                let zero = f64c(cx, 0.0);
                cx.op(Op::Where, &[single, zero, t])?
            }
            "asymmetric" => cx.bin(BinaryOp::Div, o, scale)?,
            "tf_crop_and_resize" => {
                let (start, end) = roi.ok_or_else(|| cx.bad("tf_crop_and_resize needs a roi"))?;
                let span = cx.bin(BinaryOp::Sub, end, start)?;
                let span_n = cx.bin(BinaryOp::Mul, span, n1)?;
                let t = cx.bin(BinaryOp::Mul, o, span_n)?;
                let t = cx.bin(BinaryOp::Div, t, w1)?;
                let two = f64c(cx, 2.0);
                let mid = cx.bin(BinaryOp::Div, span_n, two)?;
                let t = cx.op(Op::Where, &[single, mid, t])?;
                let base = cx.bin(BinaryOp::Mul, start, n1)?;
                cx.bin(BinaryOp::Add, t, base)?
            }
            "pytorch_half_pixel" => {
                let t = half_pixel(cx)?;
                let minus = f64c(cx, -0.5);
                cx.op(Op::Where, &[single, minus, t])?
            }
            "half_pixel_symmetric" => {
                // offset = n / 2 · (1 - m / out_w)
                let mf = cast(cx, m, DType::F64)?;
                let adjustment = cx.bin(BinaryOp::Div, mf, out_w)?;
                let rest = affine(cx, adjustment, -1.0, 1.0)?;
                let center = affine(cx, nf, 0.5, 0.0)?;
                let offset = cx.bin(BinaryOp::Mul, center, rest)?;
                let t = half_pixel(cx)?;
                cx.bin(BinaryOp::Add, offset, t)?
            }
            _ => half_pixel(cx)?,
        })
    }

    /// The Keys kernel at distances `d` known to lie in `[0, 1]` (`inner`) or
    /// `[1, 2]`.
    fn keys(&self, cx: &mut NodeCx, d: ValueId, inner: bool) -> NodeResult<ValueId> {
        let a = self.cubic_a;
        // Horner: ((c3 · d + c2) · d + c1) · d + c0
        let [c3, c2, c1, c0] = if inner {
            [a + 2.0, -(a + 3.0), 0.0, 1.0]
        } else {
            [a, -5.0 * a, 8.0 * a, -4.0 * a]
        };
        let t = affine(cx, d, c3, c2)?;
        let t = cx.bin(BinaryOp::Mul, t, d)?;
        let t = affine(cx, t, 1.0, c1)?;
        let t = cx.bin(BinaryOp::Mul, t, d)?;
        affine(cx, t, 1.0, c0)
    }

    /// One pass along `axis`: `(n, m, scale)` are the scalars of `n` inputs,
    /// `m` outputs (i64) and the scale (f64).
    fn along(
        &self,
        cx: &mut NodeCx,
        x: ValueId,
        axis: usize,
        (n, m, scale): (ValueId, ValueId, ValueId),
        roi: Option<(ValueId, ValueId)>,
    ) -> NodeResult<ValueId> {
        let zero = cx.const_scalar(DType::I64, 0.0);
        let one = cx.const_scalar(DType::I64, 1.0);
        let o = cx.op(Op::Range, &[zero, m, one])?;
        let of = cast(cx, o, DType::F64)?;
        let src = self.source(cx, of, n, m, scale, roi)?;
        let fl = floor(cx, src)?;
        let r = cx.bin(BinaryOp::Sub, src, fl)?;
        let base = cast(cx, fl, DType::I64)?;
        let last = cx.bin(BinaryOp::Sub, n, one)?;
        let clamp = |cx: &mut NodeCx, i: ValueId| -> NodeResult<ValueId> {
            let lo = cx.bin(BinaryOp::Max, i, zero)?;
            cx.bin(BinaryOp::Min, lo, last)
        };
        let shift = |cx: &mut NodeCx, by: f64| -> NodeResult<ValueId> {
            let b = cx.const_scalar(DType::I64, by);
            cx.bin(BinaryOp::Add, base, b)
        };
        // a column [m, 1, ..., 1] broadcasting along `axis`
        let column = |cx: &mut NodeCx, v: ValueId| -> NodeResult<ValueId> {
            let mut shape = vec![-1i64];
            shape.extend(std::iter::repeat_n(1, self.rank - axis - 1));
            let shape = cx.const_i64s(shape);
            cx.op(Op::Reshape { allowzero: false }, &[v, shape])
        };
        let gather = |cx: &mut NodeCx, i: ValueId| -> NodeResult<ValueId> {
            let i = clamp(cx, i)?;
            cx.op(Op::Gather { axis: axis as i64 }, &[x, i])
        };
        let mut y = if self.mode == Mode::Nearest {
            let half = f64c(cx, 0.5);
            let zero_f = f64c(cx, 0.0);
            let up = match self.nearest_mode.as_str() {
                "round_prefer_ceil" => Some(cx.bin(BinaryOp::Ge, r, half)?),
                "floor" => None,
                "ceil" => Some(cx.bin(BinaryOp::Gt, r, zero_f)?),
                _ => Some(cx.bin(BinaryOp::Gt, r, half)?),
            };
            let idx = match up {
                Some(up) => {
                    let next = shift(cx, 1.0)?;
                    cx.op(Op::Where, &[up, next, base])?
                }
                None => base,
            };
            gather(cx, idx)?
        } else {
            // (offset of the first tap, the weights of the taps)
            let one_f = f64c(cx, 1.0);
            let (first, mut weights) = match self.mode {
                Mode::Linear => {
                    let w0 = cx.bin(BinaryOp::Sub, one_f, r)?;
                    (0.0, vec![w0, r])
                }
                _ => {
                    let d0 = affine(cx, r, 1.0, 1.0)?;
                    let d2 = affine(cx, r, -1.0, 1.0)?;
                    let d3 = affine(cx, r, -1.0, 2.0)?;
                    let w = vec![
                        self.keys(cx, d0, false)?,
                        self.keys(cx, r, true)?,
                        self.keys(cx, d2, true)?,
                        self.keys(cx, d3, false)?,
                    ];
                    (-1.0, w)
                }
            };
            let idx: Vec<ValueId> = (0..weights.len())
                .map(|t| shift(cx, first + t as f64))
                .collect::<NodeResult<_>>()?;
            if self.exclude_outside {
                let zero_f = f64c(cx, 0.0);
                let mut sum = None;
                for (w, &i) in weights.iter_mut().zip(&idx) {
                    let ge = cx.bin(BinaryOp::Ge, i, zero)?;
                    let lt = cx.bin(BinaryOp::Lt, i, n)?;
                    let inside = cx.bin(BinaryOp::And, ge, lt)?;
                    *w = cx.op(Op::Where, &[inside, *w, zero_f])?;
                    sum = Some(match sum {
                        Some(s) => cx.bin(BinaryOp::Add, s, *w)?,
                        None => *w,
                    });
                }
                if let Some(s) = sum {
                    let empty = cx.bin(BinaryOp::Eq, s, zero_f)?;
                    let s = cx.op(Op::Where, &[empty, one_f, s])?;
                    for w in weights.iter_mut() {
                        *w = cx.bin(BinaryOp::Div, *w, s)?;
                    }
                }
            }
            let mut acc = None;
            for (w, i) in weights.into_iter().zip(idx) {
                let g = gather(cx, i)?;
                let w = cast(cx, w, DType::F32)?;
                let w = column(cx, w)?;
                let term = cx.bin(BinaryOp::Mul, g, w)?;
                acc = Some(match acc {
                    Some(a) => cx.bin(BinaryOp::Add, a, term)?,
                    None => term,
                });
            }
            acc.ok_or_else(|| cx.bad("a filter without taps"))?
        };
        if self.coordinates == "tf_crop_and_resize" {
            let zero_f = f64c(cx, 0.0);
            let nf = cast(cx, n, DType::F64)?;
            let one_f = f64c(cx, 1.0);
            let top = cx.bin(BinaryOp::Sub, nf, one_f)?;
            let below = cx.bin(BinaryOp::Lt, src, zero_f)?;
            let above = cx.bin(BinaryOp::Gt, src, top)?;
            let outside = cx.bin(BinaryOp::Or, below, above)?;
            let outside = column(cx, outside)?;
            let value = cx.scalar_like(y, self.extrapolation);
            y = cx.op(Op::Where, &[outside, value, y])?;
        }
        Ok(y)
    }
}
