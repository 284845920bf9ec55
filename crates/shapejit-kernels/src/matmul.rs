//! Batched matrix products on the `gemm` crate, reading operands through their
//! real row/column strides (transposed or broadcast views need no copy).
//!
//! Small products (at most [`SMALL_MAX`] multiply-adds, such as attention's
//! 32×32×32 per head) skip `gemm`, whose per-call setup dominates them: `b` is packed
//! into a per-thread buffer and the product runs on `crate::packed`'s micro-kernel.
//!
//! **Invariant:** single-threaded (`Parallelism::None`): the Runtime owns threading.
//! **Invariant:** `gemm` only touches elements inside the views' checked extents.
//! **Invariant:** which path a product takes depends only on its shape and strides.

use crate::error::KernelError;
use crate::packed::{PackedRef, matmul_packed_ref};
use crate::view::{StridedShape, View, ViewMut};
use crate::walk::walk;
use std::cell::RefCell;

/// Products of at most this many multiply-adds (`m·n·k`, `m` ≥ 2, output rows
/// contiguous, no accumulation) run on the packed micro-kernel.
pub const SMALL_MAX: usize = 64 * 64 * 64;

thread_local! {
    /// Panels of the current small product's `b` (grows only).
    static SMALL_B: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The operands of one small product.
struct Small<'a> {
    a: &'a [f32],
    a_at: (isize, isize, isize),
    b: &'a [f32],
    b_at: (isize, isize, isize),
}

/// `out[..m·n] = alpha · a @ b` on the packed micro-kernel, `(offset, row stride,
/// column stride)` per operand; `false` when the operands do not form views (then
/// nothing was written).
fn small_product(
    out: &mut [f32],
    ops: &Small,
    (m, k, n): (usize, usize, usize),
    alpha: f32,
) -> bool {
    let view = |data, (at, rs, cs): (isize, isize, isize), rows, cols| {
        let at = usize::try_from(at).ok()?;
        View::new(data, StridedShape::new(&[rows, cols], &[rs, cs], at).ok()?).ok()
    };
    let (Some(a), Some(b)) = (view(ops.a, ops.a_at, m, k), view(ops.b, ops.b_at, k, n)) else {
        return false;
    };
    SMALL_B
        .try_with(|buf| {
            let mut buf = buf.borrow_mut();
            let len = PackedRef::len_for(k, n);
            if buf.len() < len {
                buf.resize(len, 0.0);
            }
            PackedRef::pack_into(&b, &mut buf)
                .is_ok_and(|packed| matmul_packed_ref(out, &a, packed, alpha).is_ok())
        })
        .unwrap_or(false)
}

/// `out = alpha · a @ b (+ out if accumulate)` for every batch index.
///
/// Shapes: `out [B…, m, n]`, `a [B…, m, k]`, `b [B…, k, n]` with identical batch
/// dims `B…` (broadcast them first: stride 0 is fine). Any strides, including
/// negative ones.
pub fn matmul(
    out: &mut ViewMut<f32>,
    a: &View<f32>,
    b: &View<f32>,
    alpha: f32,
    accumulate: bool,
) -> Result<(), KernelError> {
    let r = out.geom().rank();
    let (os, as_, bs) = (out.shape(), a.shape(), b.shape());
    if r < 2 || as_.len() != r || bs.len() != r {
        return Err(KernelError::Invalid(format!(
            "matmul needs operands of one rank >= 2, got out {os:?}, a {as_:?}, b {bs:?}"
        )));
    }
    let (m, n, k) = (os[r - 2], os[r - 1], as_[r - 1]);
    // a = [B…, m, k], b = [B…, k, n] (compared without allocating; vectors only on error)
    let fits = |s: &[usize], rows: usize, cols: usize| {
        s[..r - 2] == os[..r - 2] && s[r - 2] == rows && s[r - 1] == cols
    };
    let expected = |rows: usize, cols: usize| {
        os[..r - 2]
            .iter()
            .copied()
            .chain([rows, cols])
            .collect::<Vec<_>>()
    };
    if !fits(as_, m, k) {
        return Err(KernelError::ShapeMismatch {
            what: "matmul a",
            expected: expected(m, k),
            actual: as_.to_vec(),
        });
    }
    if !fits(bs, k, n) {
        return Err(KernelError::ShapeMismatch {
            what: "matmul b",
            expected: expected(k, n),
            actual: bs.to_vec(),
        });
    }
    let (ag, bg) = (*a.geom(), *b.geom());
    let (ad, bd) = (a.data(), b.data());
    let (dst, og) = out.parts();
    let og = *og;
    if og.numel() == 0 {
        return Ok(());
    }
    let (dst_rs, dst_cs) = (og.strides()[r - 2], og.strides()[r - 1]);
    let (lhs_rs, lhs_cs) = (ag.strides()[r - 2], ag.strides()[r - 1]);
    let (rhs_rs, rhs_cs) = (bg.strides()[r - 2], bg.strides()[r - 1]);
    // Fold trailing batch dims into m where b is broadcast along them and a's and
    // out's rows continue with one stride (x[B, m, k] @ w[k, n] is one GEMM with
    // B·m rows, not B GEMMs that each re-pack w).
    let mut n_batch = r - 2;
    let mut m = m;
    while n_batch > 0 {
        let d = n_batch - 1;
        let size = og.shape()[d];
        let rows_continue =
            ag.strides()[d] == m as isize * lhs_rs && og.strides()[d] == m as isize * dst_rs;
        if size != 1 && !(bg.strides()[d] == 0 && rows_continue) {
            break;
        }
        m *= size;
        n_batch -= 1;
    }
    let batch = &og.shape()[..n_batch];
    walk(
        batch,
        [
            &og.strides()[..n_batch],
            &ag.strides()[..n_batch],
            &bg.strides()[..n_batch],
        ],
        [og.offset(), ag.offset(), bg.offset()],
        |[o, x, y], len, [so, sx, sy]| {
            for i in 0..len as isize {
                let (o, x, y) = (
                    o as isize + i * so,
                    x as isize + i * sx,
                    y as isize + i * sy,
                );
                if k == 0 {
                    if !accumulate {
                        for row in 0..m as isize {
                            for col in 0..n as isize {
                                dst[(o + row * dst_rs + col * dst_cs) as usize] = 0.0;
                            }
                        }
                    }
                    continue;
                }
                let small = !accumulate
                    && m >= 2
                    && m * n * k <= SMALL_MAX
                    && dst_cs == 1
                    && dst_rs == n as isize
                    && o >= 0;
                if small {
                    let operands = Small {
                        a: ad,
                        a_at: (x, lhs_rs, lhs_cs),
                        b: bd,
                        b_at: (y, rhs_rs, rhs_cs),
                    };
                    let o = o as usize;
                    if small_product(&mut dst[o..o + m * n], &operands, (m, k, n), alpha) {
                        continue;
                    }
                }
                // SAFETY: `o`, `x`, `y` are the offsets of element [0, 0] of this batch's
                // matrices, and every `base + i·rs + j·cs` for i < rows, j < cols lies in
                // the views' extents (checked when the views were built), so gemm reads
                // and writes only inside `dst`, `ad` and `bd`. `dst` is borrowed mutably,
                // so it cannot alias the inputs.
                unsafe {
                    gemm::gemm(
                        m,
                        n,
                        k,
                        dst.as_mut_ptr().offset(o),
                        dst_cs,
                        dst_rs,
                        accumulate,
                        ad.as_ptr().offset(x),
                        lhs_cs,
                        lhs_rs,
                        bd.as_ptr().offset(y),
                        rhs_cs,
                        rhs_rs,
                        1.0,
                        alpha,
                        false,
                        false,
                        false,
                        gemm::Parallelism::None,
                    );
                }
            }
        },
    );
    Ok(())
}
