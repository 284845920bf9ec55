//! Reductions over a set of axes of a strided view.
//!
//! The output holds the kept dims in order (contiguous); each output element
//! folds the reduced sub-view in row-major order.
//!
//! **Invariant:** the fold order is row-major over the reduced dims, whatever
//! the input layout, so results are layout-independent.

use crate::error::KernelError;
use crate::view::{MAX_RANK, StridedShape, View};
use crate::walk::walk;

/// For each index of the kept dims, `out[i] = finish(fold(init, elements…), count)`.
///
/// `reduced[d]` says whether dim `d` of `x` is reduced; `out` has one element per
/// index of the kept dims (row-major).
pub fn reduce<T: Copy, Acc: Copy, O: Copy>(
    out: &mut [O],
    x: &View<T>,
    reduced: &[bool],
    init: Acc,
    fold: impl Fn(Acc, T) -> Acc,
    finish: impl Fn(Acc, usize) -> O,
) -> Result<(), KernelError> {
    reduce_runs(
        out,
        x,
        reduced,
        init,
        |acc, data, run| match run.stride {
            1 => data[run.start..run.start + run.len]
                .iter()
                .fold(acc, |a, &v| fold(a, v)),
            s => (0..run.len as isize).fold(acc, |a, i| {
                fold(a, data[(run.start as isize + i * s) as usize])
            }),
        },
        finish,
    )
}

/// Sums (or with `mean`, means) of f32 elements over the reduced dims, in f64.
///
/// Each output's elements, numbered `k` in row-major order of the reduced dims,
/// are added into sixteen f64 partial sums (element `k` into partial `k mod 16`,
/// in order), which are then added in order 0..16 and rounded once to f32. The
/// partials let contiguous runs use the vector units, and the result depends only
/// on the values, not on the layout or the CPU level; it differs from one running
/// f64 sum only in f64 roundings. An empty reduction gives 0 (mean: NaN).
pub fn sum_f32(
    out: &mut [f32],
    x: &View<f32>,
    reduced: &[bool],
    mean: bool,
) -> Result<(), KernelError> {
    let level = crate::cpu::level();
    let finish = |acc: Partials, n: usize| {
        let total = acc.total();
        if mean {
            (total / n as f64) as f32
        } else {
            total as f32
        }
    };
    let g = x.geom();
    let kept = reduced.iter().take_while(|&&r| !r).count();
    if g.is_contiguous() && reduced.len() == g.rank() && reduced[kept..].iter().all(|&r| r) {
        // every output's elements are one contiguous run of the same length
        let count: usize = g.shape()[kept..].iter().product();
        let data = &x.data()[g.offset()..g.offset() + g.numel()];
        if count > 0 && out.len() * count == data.len() {
            crate::simd::dispatch_at(
                level,
                #[inline(always)]
                || {
                    for (o, run) in out.iter_mut().zip(data.chunks_exact(count)) {
                        let mut acc = Partials::default();
                        acc.add_run(run);
                        *o = finish(acc, count);
                    }
                },
            );
            return Ok(());
        }
    }
    reduce_runs(
        out,
        x,
        reduced,
        Partials::default(),
        |mut acc, data, run| {
            if run.stride == 1 {
                let run = &data[run.start..run.start + run.len];
                crate::simd::dispatch_at(
                    level,
                    #[inline(always)]
                    || acc.add_run(run),
                );
            } else {
                for i in 0..run.len as isize {
                    acc.push(data[(run.start as isize + i * run.stride) as usize]);
                }
            }
            acc
        },
        finish,
    )
}

const PARTIALS: usize = 16;

/// Sixteen f64 partial sums and how many elements went in.
#[derive(Clone, Copy, Default)]
struct Partials {
    sums: [f64; PARTIALS],
    count: usize,
}

impl Partials {
    #[inline(always)]
    fn push(&mut self, v: f32) {
        self.sums[self.count % PARTIALS] += v as f64;
        self.count += 1;
    }

    /// Adds a contiguous run: singly up to the next multiple of 16 elements, then
    /// sixteen at a time (one add per partial: no reassociation, so every level's
    /// auto-vectorized code gives the same sums).
    #[inline(always)]
    fn add_run(&mut self, run: &[f32]) {
        let head = ((PARTIALS - self.count % PARTIALS) % PARTIALS).min(run.len());
        let (first, rest) = run.split_at(head);
        first.iter().for_each(|&v| self.push(v));
        let mut blocks = rest.chunks_exact(PARTIALS);
        let mut sums = self.sums;
        for block in &mut blocks {
            for (s, &v) in sums.iter_mut().zip(block) {
                *s += v as f64;
            }
        }
        self.sums = sums;
        self.count += rest.len() - blocks.remainder().len();
        blocks.remainder().iter().for_each(|&v| self.push(v));
    }

    fn total(&self) -> f64 {
        self.sums.iter().fold(0.0, |a, &s| a + s)
    }
}

/// One innermost run of the reduced sub-view: `len` elements from `start`,
/// `stride` apart.
#[derive(Clone, Copy)]
struct Run {
    start: usize,
    len: usize,
    stride: isize,
}

/// The reduction driver: for each output, folds the runs of its reduced sub-view
/// in row-major order with `fold_run`, then `finish(acc, count)`.
fn reduce_runs<T: Copy, Acc: Copy, O: Copy>(
    out: &mut [O],
    x: &View<T>,
    reduced: &[bool],
    init: Acc,
    fold_run: impl Fn(Acc, &[T], Run) -> Acc,
    finish: impl Fn(Acc, usize) -> O,
) -> Result<(), KernelError> {
    let g = x.geom();
    if reduced.len() != g.rank() {
        return Err(KernelError::Invalid(format!(
            "{} reduce flags for a rank-{} input",
            reduced.len(),
            g.rank()
        )));
    }
    let (mut kept_shape, mut kept_strides) = ([0usize; MAX_RANK], [0isize; MAX_RANK]);
    let (mut red_shape, mut red_strides) = ([0usize; MAX_RANK], [0isize; MAX_RANK]);
    let (mut n_kept, mut n_red) = (0, 0);
    for (d, &is_red) in reduced.iter().enumerate() {
        if is_red {
            red_shape[n_red] = g.shape()[d];
            red_strides[n_red] = g.strides()[d];
            n_red += 1;
        } else {
            kept_shape[n_kept] = g.shape()[d];
            kept_strides[n_kept] = g.strides()[d];
            n_kept += 1;
        }
    }
    let kept = StridedShape::contiguous(&kept_shape[..n_kept])?;
    if out.len() != kept.numel() {
        return Err(KernelError::ShapeMismatch {
            what: "reduce output",
            expected: kept_shape[..n_kept].to_vec(),
            actual: vec![out.len()],
        });
    }
    let count: usize = red_shape[..n_red].iter().product();
    let data = x.data();
    let (red_shape, red_strides) = (&red_shape[..n_red], &red_strides[..n_red]);
    let fold_at = |start: usize| {
        let mut acc = init;
        walk(red_shape, [red_strides], [start], |[p], len, [s]| {
            acc = fold_run(
                acc,
                data,
                Run {
                    start: p,
                    len,
                    stride: s,
                },
            );
        });
        acc
    };
    if kept.numel() == 0 {
        return Ok(());
    }
    walk(
        kept.shape(),
        [&kept_strides[..n_kept], kept.strides()],
        [g.offset(), 0],
        |[p, o], len, [sp, so]| {
            for i in 0..len as isize {
                let start = (p as isize + i * sp) as usize;
                out[(o as isize + i * so) as usize] = finish(fold_at(start), count);
            }
        },
    );
    Ok(())
}
