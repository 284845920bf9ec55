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
            if s == 1 {
                for &v in &data[p..p + len] {
                    acc = fold(acc, v);
                }
            } else {
                for i in 0..len as isize {
                    acc = fold(acc, data[(p as isize + i * s) as usize]);
                }
            }
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
