//! Gather along an axis: `out[o, j…, i] = data[o, idx[j…], i]`.
//!
//! **Invariant:** every index is checked (`-size..size`, negative wraps) before
//! it is used; the first bad one is reported.

use crate::elementwise::{copy, for_each};
use crate::error::KernelError;
use crate::view::{MAX_RANK, StridedShape, View, ViewMut};

/// Gathers `data` along `axis` with `indices` (any layout, `i32`/`i64`).
///
/// `out` is contiguous with shape `data[..axis] ++ indices.shape ++ data[axis+1..]`.
pub fn gather<T: Copy, I: Copy + Into<i64>>(
    out: &mut [T],
    data: &View<T>,
    axis: usize,
    indices: &View<I>,
) -> Result<(), KernelError> {
    let g = data.geom();
    if axis >= g.rank() {
        return Err(KernelError::Invalid(format!(
            "gather axis {axis} for rank {}",
            g.rank()
        )));
    }
    let size = g.shape()[axis];
    let outer: usize = g.shape()[..axis].iter().product();
    let inner_shape = &g.shape()[axis + 1..];
    let inner: usize = inner_shape.iter().product();
    let n_idx = indices.geom().numel();
    let expected = outer * n_idx * inner;
    if out.len() != expected {
        return Err(KernelError::ShapeMismatch {
            what: "gather output",
            expected: vec![expected],
            actual: vec![out.len()],
        });
    }
    let mut bad = None;
    for_each(indices, |i| {
        let i: i64 = i.into();
        if bad.is_none() && (i < -(size as i64) || i >= size as i64) {
            bad = Some(i);
        }
    });
    if let Some(index) = bad {
        return Err(KernelError::IndexOutOfRange { index, size });
    }
    if expected == 0 {
        return Ok(());
    }
    // data viewed as [outer, size, inner…]
    let mut shape = [0usize; MAX_RANK];
    let mut strides = [0isize; MAX_RANK];
    let n_inner = inner_shape.len();
    shape[..n_inner].copy_from_slice(inner_shape);
    strides[..n_inner].copy_from_slice(&g.strides()[axis + 1..]);
    let (outer_shape, outer_strides) = (&g.shape()[..axis], &g.strides()[..axis]);
    let inner_contig = StridedShape::contiguous(inner_shape)?;
    for o in 0..outer {
        // offset of data[o, 0, 0…] (row-major decomposition of o over the outer dims)
        let mut rem = o;
        let mut base = g.offset() as isize;
        for d in (0..outer_shape.len()).rev() {
            base += (rem % outer_shape[d]) as isize * outer_strides[d];
            rem /= outer_shape[d];
        }
        let mut j = 0;
        let mut res = Ok(());
        for_each(indices, |i| {
            let i: i64 = i.into();
            let i = if i < 0 { i + size as i64 } else { i } as isize;
            let start = (base + i * g.strides()[axis]) as usize;
            let dst_start = (o * n_idx + j) * inner;
            j += 1;
            let step = StridedShape::new(&shape[..n_inner], &strides[..n_inner], start)
                .and_then(|geom| data.with_geom(geom))
                .and_then(|src| {
                    let mut dst =
                        ViewMut::new(&mut out[dst_start..dst_start + inner], inner_contig)?;
                    copy(&mut dst, &src)
                });
            if res.is_ok() {
                res = step;
            }
        });
        res?;
    }
    Ok(())
}
