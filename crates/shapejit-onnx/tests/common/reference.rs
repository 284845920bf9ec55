//! Naive float64 reference implementations (independent of the code under
//! test): row-major arrays, NumPy broadcasting, and the ops the run tests use.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shapejit_ir::Tensor;

/// A row-major f64 array.
#[derive(Clone, Debug, PartialEq)]
pub struct Arr {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Multi-index of flat position `i`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

impl Arr {
    pub fn new(shape: &[usize], data: Vec<f64>) -> Arr {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        Arr {
            shape: shape.to_vec(),
            data,
        }
    }
    pub fn numel(&self) -> usize {
        self.data.len()
    }
    pub fn at(&self, idx: &[usize]) -> f64 {
        let s = strides(&self.shape);
        self.data[idx.iter().zip(&s).map(|(i, s)| i * s).sum::<usize>()]
    }
    /// Value at an output index of a broadcast shape.
    pub fn at_broadcast(&self, out_idx: &[usize]) -> f64 {
        let off = out_idx.len() - self.shape.len();
        let idx: Vec<usize> = self
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| if n == 1 { 0 } else { out_idx[off + d] })
            .collect();
        self.at(&idx)
    }
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Arr {
        Arr {
            shape: self.shape.clone(),
            data: self.data.iter().map(|&v| f(v)).collect(),
        }
    }
    pub fn f32_tensor(&self) -> Tensor {
        Tensor::from_vec(self.data.iter().map(|&v| v as f32).collect(), &self.shape).unwrap()
    }
    pub fn i64_tensor(&self) -> Tensor {
        Tensor::from_vec(self.data.iter().map(|&v| v as i64).collect(), &self.shape).unwrap()
    }
    pub fn bool_tensor(&self) -> Tensor {
        Tensor::from_vec(self.data.iter().map(|&v| v != 0.0).collect(), &self.shape).unwrap()
    }
    pub fn from_tensor(t: &Tensor) -> Arr {
        Arr::new(t.shape(), t.to_f64_vec())
    }
    pub fn reshape(&self, shape: &[usize]) -> Arr {
        Arr::new(shape, self.data.clone())
    }
}

/// Uniform values in `[lo, hi)`, rounded to f32.
pub fn random(rng: &mut SmallRng, shape: &[usize], lo: f64, hi: f64) -> Arr {
    let n = shape.iter().product();
    Arr::new(
        shape,
        (0..n)
            .map(|_| rng.random_range(lo..hi) as f32 as f64)
            .collect(),
    )
}

pub fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}

pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let da = if i + a.len() >= r {
                a[i + a.len() - r]
            } else {
                1
            };
            let db = if i + b.len() >= r {
                b[i + b.len() - r]
            } else {
                1
            };
            if da == 1 { db } else { da }
        })
        .collect()
}

pub fn binary(a: &Arr, b: &Arr, f: impl Fn(f64, f64) -> f64) -> Arr {
    let shape = broadcast_shape(&a.shape, &b.shape);
    let n = shape.iter().product();
    let data = (0..n)
        .map(|i| {
            let idx = unravel(i, &shape);
            f(a.at_broadcast(&idx), b.at_broadcast(&idx))
        })
        .collect();
    Arr::new(&shape, data)
}

/// Batched matmul with broadcast batch dims (both operands rank ≥ 2).
pub fn matmul(a: &Arr, b: &Arr) -> Arr {
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    assert_eq!(k, b.shape[rb - 2]);
    let batch = broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2]);
    let mut shape = batch.clone();
    shape.extend([m, n]);
    let nb: usize = batch.iter().product();
    let mut data = Vec::with_capacity(nb * m * n);
    for bi in 0..nb {
        let bidx = unravel(bi, &batch);
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for p in 0..k {
                    let mut ia = bidx.clone();
                    ia.extend([i, p]);
                    let mut ib = bidx.clone();
                    ib.extend([p, j]);
                    acc += a.at_broadcast(&ia) * b.at_broadcast(&ib);
                }
                data.push(acc);
            }
        }
    }
    Arr::new(&shape, data)
}

pub fn transpose(a: &Arr, perm: &[usize]) -> Arr {
    let shape: Vec<usize> = perm.iter().map(|&p| a.shape[p]).collect();
    let data = (0..a.numel())
        .map(|i| {
            let oidx = unravel(i, &shape);
            let mut iidx = vec![0; shape.len()];
            for (o, &p) in perm.iter().enumerate() {
                iidx[p] = oidx[o];
            }
            a.at(&iidx)
        })
        .collect();
    Arr::new(&shape, data)
}

/// Reduction over `axes` (non-negative) with an init value and fold.
pub fn reduce(
    a: &Arr,
    axes: &[usize],
    keepdims: bool,
    init: f64,
    f: impl Fn(f64, f64) -> f64,
) -> Arr {
    let kept: Vec<usize> = a
        .shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect();
    let n_out: usize = kept.iter().product();
    let mut out = vec![init; n_out];
    for i in 0..a.numel() {
        let mut idx = unravel(i, &a.shape);
        for &ax in axes {
            idx[ax] = 0;
        }
        let o: usize = idx.iter().zip(strides(&kept)).map(|(i, s)| i * s).sum();
        out[o] = f(out[o], a.data[i]);
    }
    let shape: Vec<usize> = if keepdims {
        kept
    } else {
        a.shape
            .iter()
            .enumerate()
            .filter(|(d, _)| !axes.contains(d))
            .map(|(_, &n)| n)
            .collect()
    };
    Arr::new(&shape, out)
}

pub fn mean(a: &Arr, axes: &[usize], keepdims: bool) -> Arr {
    let count: usize = axes.iter().map(|&d| a.shape[d]).product();
    reduce(a, axes, keepdims, 0.0, |x, y| x + y).map(|v| v / count as f64)
}

/// Softmax along one axis.
pub fn softmax(a: &Arr, axis: usize) -> Arr {
    let max = reduce(a, &[axis], true, f64::NEG_INFINITY, f64::max);
    let e = binary(a, &max, |x, m| (x - m).exp());
    let s = reduce(&e, &[axis], true, 0.0, |x, y| x + y);
    binary(&e, &s, |x, s| x / s)
}

pub fn concat(parts: &[&Arr], axis: usize) -> Arr {
    let mut shape = parts[0].shape.clone();
    shape[axis] = parts.iter().map(|p| p.shape[axis]).sum();
    let data = (0..shape.iter().product())
        .map(|i| {
            let mut idx = unravel(i, &shape);
            let mut k = 0;
            while idx[axis] >= parts[k].shape[axis] {
                idx[axis] -= parts[k].shape[axis];
                k += 1;
            }
            parts[k].at(&idx)
        })
        .collect();
    Arr::new(&shape, data)
}

/// Selects `indices` along `axis` (each output index maps to one input index).
pub fn take(a: &Arr, axis: usize, indices: &[usize]) -> Arr {
    let mut shape = a.shape.clone();
    shape[axis] = indices.len();
    let data = (0..shape.iter().product())
        .map(|i| {
            let mut idx = unravel(i, &shape);
            idx[axis] = indices[idx[axis]];
            a.at(&idx)
        })
        .collect();
    Arr::new(&shape, data)
}

/// Constant padding (`pads` = begins then ends, non-negative).
pub fn pad(a: &Arr, pads: &[usize], value: f64) -> Arr {
    let r = a.shape.len();
    let shape: Vec<usize> = (0..r).map(|d| a.shape[d] + pads[d] + pads[d + r]).collect();
    let data = (0..shape.iter().product())
        .map(|i| {
            let idx = unravel(i, &shape);
            let src: Option<Vec<usize>> = (0..r)
                .map(|d| idx[d].checked_sub(pads[d]).filter(|&v| v < a.shape[d]))
                .collect();
            src.map_or(value, |s| a.at(&s))
        })
        .collect();
    Arr::new(&shape, data)
}

/// erf by its Maclaurin series (accurate to ~1e-13 for |x| ≤ 3).
pub fn erf(x: f64) -> f64 {
    let mut term = x;
    let mut sum = x;
    for n in 1..80 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// Direct 2-D convolution, NCHW, pads = [top, left, bottom, right].
pub fn conv2d(
    x: &Arr,
    w: &Arr,
    b: Option<&Arr>,
    strides: [usize; 2],
    pads: [usize; 4],
    dil: [usize; 2],
    groups: usize,
) -> Arr {
    let (n, c, h, wd) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let (co, cig, kh, kw) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3]);
    assert_eq!(cig * groups, c);
    let oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) / strides[0] + 1;
    let ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) / strides[1] + 1;
    let cog = co / groups;
    let mut data = Vec::new();
    for ni in 0..n {
        for oc in 0..co {
            let g = oc / cog;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b.data[oc]);
                    for ic in 0..cig {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy =
                                    (oy * strides[0] + ky * dil[0]) as isize - pads[0] as isize;
                                let ix =
                                    (ox * strides[1] + kx * dil[1]) as isize - pads[1] as isize;
                                if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < wd {
                                    acc += x.at(&[ni, g * cig + ic, iy as usize, ix as usize])
                                        * w.at(&[oc, ic, ky, kx]);
                                }
                            }
                        }
                    }
                    data.push(acc);
                }
            }
        }
    }
    Arr::new(&[n, co, oh, ow], data)
}

/// 2-D transposed convolution, NCHW, `w: [C_in, C_out/groups, kH, kW]`: each
/// output cell gathers the input cells whose taps land on it.
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose2d(
    x: &Arr,
    w: &Arr,
    b: Option<&Arr>,
    strides: [usize; 2],
    pads: [usize; 4],
    dil: [usize; 2],
    out_pad: [usize; 2],
    groups: usize,
) -> Arr {
    let (n, c, h, wd) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let (ci, cog, kh, kw) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3]);
    assert_eq!(ci, c);
    let cig = c / groups;
    let oh = strides[0] * (h - 1) + out_pad[0] + dil[0] * (kh - 1) + 1 - pads[0] - pads[2];
    let ow = strides[1] * (wd - 1) + out_pad[1] + dil[1] * (kw - 1) + 1 - pads[1] - pads[3];
    // the input index whose tap k lands on output o, if any
    let source = |o: usize, k: usize, a: usize, size: usize| {
        let t = (o + pads[a]) as isize - (k * dil[a]) as isize;
        (t >= 0 && t % strides[a] as isize == 0 && ((t as usize) / strides[a]) < size)
            .then(|| t as usize / strides[a])
    };
    let mut data = Vec::new();
    for ni in 0..n {
        for oc in 0..cog * groups {
            let (g, m) = (oc / cog, oc % cog);
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b.data[oc]);
                    for ic in 0..cig {
                        for ky in 0..kh {
                            let Some(iy) = source(oy, ky, 0, h) else {
                                continue;
                            };
                            for kx in 0..kw {
                                if let Some(ix) = source(ox, kx, 1, wd) {
                                    acc += x.at(&[ni, g * cig + ic, iy, ix])
                                        * w.at(&[g * cig + ic, m, ky, kx]);
                                }
                            }
                        }
                    }
                    data.push(acc);
                }
            }
        }
    }
    Arr::new(&[n, cog * groups, oh, ow], data)
}

/// 2-D pooling (max or average), NCHW; `ceil_mode` rounds the output size up
/// (a window must start inside the input or left padding).
pub fn pool2d(
    x: &Arr,
    k: [usize; 2],
    s: [usize; 2],
    pads: [usize; 4],
    ceil_mode: bool,
    max: bool,
    count_include_pad: bool,
) -> Arr {
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let out = |size: usize, p0: usize, p1: usize, k: usize, s: usize| {
        let span = size + p0 + p1 - k;
        let mut o = if ceil_mode {
            span.div_ceil(s) + 1
        } else {
            span / s + 1
        };
        if ceil_mode && (o - 1) * s >= size + p0 {
            o -= 1;
        }
        o
    };
    let (oh, ow) = (
        out(h, pads[0], pads[2], k[0], s[0]),
        out(w, pads[1], pads[3], k[1], s[1]),
    );
    let mut data = Vec::new();
    for ni in 0..n {
        for ci in 0..c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let (mut acc, mut cnt, mut padded) =
                        (if max { f64::NEG_INFINITY } else { 0.0 }, 0, 0);
                    for ky in 0..k[0] {
                        for kx in 0..k[1] {
                            let iy = (oy * s[0] + ky) as isize - pads[0] as isize;
                            let ix = (ox * s[1] + kx) as isize - pads[1] as isize;
                            let in_padded =
                                iy < (h + pads[2]) as isize && ix < (w + pads[3]) as isize;
                            if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                let v = x.at(&[ni, ci, iy as usize, ix as usize]);
                                acc = if max { acc.max(v) } else { acc + v };
                                cnt += 1;
                            } else if in_padded {
                                padded += 1;
                            }
                        }
                    }
                    let div = if count_include_pad { cnt + padded } else { cnt };
                    data.push(if max { acc } else { acc / div as f64 });
                }
            }
        }
    }
    Arr::new(&[n, c, oh, ow], data)
}

/// Asserts `|got - want| <= atol + rtol * |want|` elementwise, with matching shapes.
pub fn assert_close(got: &Tensor, want: &Arr, atol: f64, rtol: f64, what: &str) {
    assert_eq!(got.shape(), &want.shape[..], "{what}: shape");
    for (i, (g, w)) in got.to_f64_vec().iter().zip(&want.data).enumerate() {
        assert!(
            (g - w).abs() <= atol + rtol * w.abs(),
            "{what}: element {i} is {g}, expected {w}"
        );
    }
}
