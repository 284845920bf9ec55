//! Shared helpers of the `ops_*` tests: a seeded PRNG, host tensors with
//! arbitrary strided layouts (transposed, padded/sliced, reversed, broadcast),
//! and a runner that checks `output_types`, `execute` and `view` agree.
#![allow(dead_code)]

use shapejit_ir::{DType, Element, Op};
use shapejit_vm::ops::{self, OpError, OutType, Scratch};
use shapejit_vm::tensor::{Layout, TensorMut, TensorRef};

/// SplitMix64: small, seeded, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..hi` (exclusive).
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo) as u64) as usize
    }
    /// Uniform f32 in `lo..hi`.
    pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }
    /// A random shape of rank `rank` with dims in `0..=max` (0 only when `zero_ok`).
    pub fn shape(&mut self, rank: usize, max: usize, zero_ok: bool) -> Vec<usize> {
        (0..rank)
            .map(|_| self.range(if zero_ok { 0 } else { 1 }, max + 1))
            .collect()
    }
}

/// How a test input is laid out in its buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// row-major
    Contiguous,
    /// a random physical dim order, gaps between rows, some dims reversed,
    /// and an offset: a transposed, sliced, negative-stride view
    Strided,
    /// like `Strided`, with size-1-looking broadcast: some dims get stride 0
    Broadcast,
}

pub const KINDS: [Kind; 3] = [Kind::Contiguous, Kind::Strided, Kind::Broadcast];

/// A host tensor: a buffer (u64-aligned), a layout over it, and its logical
/// (row-major) values as f64 for references.
pub struct Host {
    pub dtype: DType,
    pub layout: Layout,
    buf: Vec<u64>,
    len_bytes: usize,
    pub vals: Vec<f64>,
}

fn to_f64<T: Element>(v: T) -> f64 {
    shapejit_ir::Scalar::to_f64(v)
}

impl Host {
    /// A tensor of `shape` whose elements come from `gen`, laid out as `kind`.
    pub fn random<T: Element + 'static>(
        rng: &mut Rng,
        shape: &[usize],
        kind: Kind,
        mut make: impl FnMut(&mut Rng) -> T,
    ) -> Host {
        let rank = shape.len();
        let mut strides = vec![0isize; rank];
        let mut order: Vec<usize> = (0..rank).collect();
        if kind != Kind::Contiguous {
            for i in (1..rank).rev() {
                order.swap(i, rng.range(0, i + 1));
            }
        }
        // physical order: order[0] outermost; each dim gets 0..2 extra rows of gap
        let mut acc: isize = 1;
        for &d in order.iter().rev() {
            strides[d] = acc;
            let gap = if kind == Kind::Contiguous {
                0
            } else {
                rng.range(0, 3)
            };
            acc *= (shape[d] + gap).max(1) as isize;
        }
        let total = acc as usize
            + if kind == Kind::Contiguous {
                0
            } else {
                rng.range(0, 5)
            };
        let mut offset = if kind == Kind::Contiguous || total == 0 {
            0
        } else {
            (total - acc as usize) as isize
        };
        if kind != Kind::Contiguous {
            for d in 0..rank {
                if shape[d] > 1 && rng.bool() {
                    // reverse dim d: start from its last row
                    offset += (shape[d] as isize - 1) * strides[d];
                    strides[d] = -strides[d];
                }
                if kind == Kind::Broadcast && shape[d] > 1 && rng.range(0, 3) == 0 {
                    if strides[d] < 0 {
                        offset += (shape[d] as isize - 1) * strides[d];
                    }
                    strides[d] = 0;
                }
            }
        }
        let layout = Layout {
            shape: shape.into(),
            strides: strides.into(),
            offset: offset as usize,
        };
        let n_elems = total.max(1);
        let vals_buf: Vec<T> = (0..n_elems).map(|_| make(rng)).collect();
        let len_bytes = n_elems * T::DTYPE.size();
        let mut buf = vec![0u64; len_bytes.div_ceil(8)];
        // SAFETY: buf has at least len_bytes bytes; T is plain data.
        unsafe {
            std::ptr::copy_nonoverlapping(
                vals_buf.as_ptr().cast::<u8>(),
                buf.as_mut_ptr().cast::<u8>(),
                len_bytes,
            )
        };
        let mut h = Host {
            dtype: T::DTYPE,
            layout,
            buf,
            len_bytes,
            vals: Vec::new(),
        };
        let r = h.as_ref();
        let n: usize = shape.iter().product();
        h.vals = (0..n)
            .map(|i| to_f64(r.get_flat::<T>(i).expect("in bounds")))
            .collect();
        h
    }

    /// A contiguous tensor with exactly these values.
    pub fn from_vals<T: Element + 'static>(vals: &[T], shape: &[usize]) -> Host {
        let mut it = vals.iter().copied();
        let mut rng = Rng::new(0);
        assert_eq!(vals.len(), shape.iter().product::<usize>());
        let mut h = Host::random(&mut rng, shape, Kind::Contiguous, |_| {
            it.next().unwrap_or_default()
        });
        h.vals.truncate(vals.len());
        h
    }

    /// An f32 tensor with exactly these logical values, laid out as `kind`
    /// (broadcast dims are not used: every element needs its own slot).
    pub fn f32_with(rng: &mut Rng, vals: &[f32], shape: &[usize], kind: Kind) -> Host {
        let kind = if kind == Kind::Broadcast {
            Kind::Strided
        } else {
            kind
        };
        let mut h = Host::random(rng, shape, kind, |_| f32::NAN);
        let n = vals.len();
        assert_eq!(n, shape.iter().product::<usize>());
        let elems: &mut [f32] =
            // SAFETY: the u64 buffer holds len_bytes bytes, f32-aligned
            unsafe { std::slice::from_raw_parts_mut(h.buf.as_mut_ptr().cast::<f32>(), h.len_bytes / 4) };
        for (i, &v) in vals.iter().enumerate() {
            let idx = unravel(i, shape);
            let pos = idx
                .iter()
                .zip(&h.layout.strides)
                .fold(h.layout.offset as isize, |a, (&x, &st)| a + x as isize * st);
            elems[pos as usize] = v;
        }
        h.vals = vals.iter().map(|&v| v as f64).collect();
        h
    }

    pub fn f32(rng: &mut Rng, shape: &[usize], kind: Kind) -> Host {
        Host::random(rng, shape, kind, |r| r.f32(-2.0, 2.0))
    }

    pub fn as_ref(&self) -> TensorRef<'_> {
        // SAFETY: the u64 buffer holds len_bytes initialized bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.len_bytes) };
        TensorRef::new(self.dtype, &self.layout, bytes).expect("test layout fits")
    }

    pub fn shape(&self) -> &[usize] {
        &self.layout.shape
    }
}

/// One computed output.
pub struct Out {
    pub ty: OutType,
    pub vals: Vec<f64>,
}

fn read_out(ty: &OutType, bytes: &[u8]) -> Vec<f64> {
    let n: usize = ty.shape.iter().product();
    (0..n)
        .map(|i| {
            let b = &bytes[i * ty.dtype.size()..(i + 1) * ty.dtype.size()];
            shapejit_ir::with_dtype!(ty.dtype, T => {
                // SAFETY: `b` holds exactly one element of `T`'s size; every
                // element type accepts the bytes the op wrote for it.
                to_f64(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) })
            })
        })
        .collect()
}

/// Zeroed, 8-byte-aligned buffers big enough for each output type.
pub fn out_bufs(types: &[OutType]) -> Vec<Vec<u64>> {
    types
        .iter()
        .map(|t| vec![0u64; (t.shape.iter().product::<usize>() * t.dtype.size()).div_ceil(8)])
        .collect()
}

/// Output tensors over `bufs` (from [`out_bufs`] for the same `types`).
pub fn out_tensors<'a>(bufs: &'a mut [Vec<u64>], types: &'a [OutType]) -> Vec<TensorMut<'a>> {
    bufs.iter_mut()
        .zip(types)
        .map(|(b, t)| {
            let n = t.shape.iter().product::<usize>() * t.dtype.size();
            // SAFETY: `out_bufs` sized the buffer to at least n bytes
            let data = unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<u8>(), n) };
            TensorMut {
                dtype: t.dtype,
                shape: &t.shape,
                data,
            }
        })
        .collect()
}

/// Runs `op`: output_types, then execute into fresh buffers; when `view` gives a
/// layout, also checks that reading the input through it gives the same values.
pub fn run(op: &Op, inputs: &[&Host]) -> Result<Vec<Out>, OpError> {
    let refs: Vec<TensorRef> = inputs.iter().map(|h| h.as_ref()).collect();
    let types = ops::output_types(op, &refs)?;
    let mut bufs = out_bufs(&types);
    {
        let mut outs = out_tensors(&mut bufs, &types);
        let mut scratch = Scratch::new();
        ops::execute(op, &refs, &mut outs, &mut scratch)?;
    }
    let res: Vec<Out> = bufs
        .iter()
        .zip(&types)
        .map(|(b, t)| {
            // SAFETY: as above
            let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<u8>(), b.len() * 8) };
            Out {
                ty: t.clone(),
                vals: read_out(t, bytes),
            }
        })
        .collect();
    if let Some(layout) = ops::view(op, &refs) {
        let layout = layout?;
        assert_eq!(layout.shape, res[0].ty.shape, "{}: view shape", op.name());
        let v = TensorRef::new(refs[0].dtype, &layout, refs[0].data)
            .expect("view layout fits the input buffer");
        let n: usize = layout.shape.iter().product();
        let viewed: Vec<f64> = (0..n)
            .map(|i| shapejit_ir::with_dtype!(v.dtype, T => to_f64(v.get_flat::<T>(i).unwrap())))
            .collect();
        assert_eq!(
            bits(&viewed),
            bits(&res[0].vals),
            "{}: view and execute disagree",
            op.name()
        );
    }
    Ok(res)
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Row-major multi-index of flat index `i`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// Flat index of a multi-index, with NumPy broadcasting from `shape` (right-aligned).
pub fn ravel_broadcast(idx: &[usize], shape: &[usize]) -> usize {
    let lead = idx.len() - shape.len();
    let mut flat = 0;
    for (d, &n) in shape.iter().enumerate() {
        let i = if n == 1 { 0 } else { idx[lead + d] };
        flat = flat * n + i;
    }
    flat
}

/// Asserts `got` matches `want` elementwise: |g - w| <= abs + rel·|w| (NaN == NaN).
pub fn assert_close(what: &str, got: &[f64], want: &[f64], abs: f64, rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= abs + rel * w.abs();
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// Asserts bit-exact equality of values (as f64; -0 == 0 is not accepted).
pub fn assert_exact(what: &str, got: &[f64], want: &[f64]) {
    assert_close(what, got, want, 0.0, 0.0);
}

/// erf in f64: the all-positive series for |x| < 3, a continued fraction beyond.
pub fn erf64(x: f64) -> f64 {
    let t = x.abs();
    let v = if t < 3.0 {
        erf_series(t)
    } else {
        1.0 - erfc64(t)
    };
    v.copysign(x)
}

fn erf_series(t: f64) -> f64 {
    let (mut term, mut sum) = (t, t);
    for k in 1..200 {
        term *= 2.0 * t * t / (2 * k + 1) as f64;
        sum += term;
        if term < sum * 1e-18 {
            break;
        }
    }
    2.0 / std::f64::consts::PI.sqrt() * (-t * t).exp() * sum
}

/// erfc for t >= 0.
pub fn erfc64(t: f64) -> f64 {
    if t < 3.0 {
        return 1.0 - erf_series(t);
    }
    let mut k = t;
    for n in (1..300).rev() {
        k = t + (n as f64 / 2.0) / k;
    }
    (-t * t).exp() / (std::f64::consts::PI.sqrt() * k)
}

/// A random output shape and two or three operand shapes that broadcast to it
/// (each operand drops leading dims and sets dims to 1 at random).
pub fn broadcast_shapes(rng: &mut Rng, n: usize) -> (Vec<usize>, Vec<Vec<usize>>) {
    let rank = rng.range(0, 5);
    let zero_ok = rng.range(0, 4) == 0;
    let out = rng.shape(rank, 5, zero_ok);
    let operands = (0..n)
        .map(|_| {
            let drop = rng.range(0, rank + 1);
            out[drop..]
                .iter()
                .map(|&d| if rng.range(0, 3) == 0 { 1 } else { d })
                .collect()
        })
        .collect::<Vec<Vec<usize>>>();
    // the output is what the operands broadcast to
    let rank = operands.iter().map(|s| s.len()).max().unwrap_or(0);
    let out = (0..rank)
        .map(|i| {
            operands
                .iter()
                .filter_map(|s: &Vec<usize>| {
                    let lead = rank - s.len();
                    (i >= lead).then(|| s[i - lead])
                })
                .find(|&d| d != 1)
                .unwrap_or(1)
        })
        .collect();
    (out, operands)
}
