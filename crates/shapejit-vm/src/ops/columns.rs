//! A product on weights packed ahead (`matmul` or `matmul_bias` whose right
//! operand the interpreter packed) split by output columns across the intra-op
//! pool. With few rows the product is bound by reading its weights (at batch 1 it
//! is a matrix-vector product), which a split by rows does not share: every row
//! piece streams all of them. A column piece streams only its own panels,
//! computes every row of its columns into its scratch, and the calling thread
//! copies the pieces' columns into the output (`rows × n` floats, small beside
//! the `k × n` weights).
//!
//! **Invariant:** the packed kernel computes each output element the same way
//! whatever columns it is given (one sum over `k` in one order, the epilogue per
//! element), so the result is bit for bit the whole op's for any cut; the cut
//! follows the thread count (one piece per thread), as a convolution's channel
//! split does (`split::Plan::for_threads`), and one thread runs the op whole.

use super::linalg::folded_rows;
use super::util::{kernel_err, out_elems, view_of};
use super::{OpError, Scratch, lock, pieces_for};
use crate::pool::Pool;
use crate::tensor::{TensorMut, TensorRef};
use shapejit_ir::Op;
use shapejit_kernels::packed::{Bias, Epilogue, NR, PackedB, matmul_packed_epilogue, packed_pays};
use std::sync::Mutex;

/// Columns a piece starts at a multiple of: a pair of panels, the AVX-512
/// kernel's tile width.
const STEP: usize = 2 * NR;

/// Least weights a product splits by columns: 2 MiB of f32, a core's L2 on the
/// machines measured. Smaller weights stay in cache between the row pieces that
/// each read them (the transformer's 256×256 and 256×1024 projections at batch 1
/// and 4 ran 10–15 % slower split by columns, whose every piece packs all of `a`
/// and whose output is copied once more).
const MIN_WEIGHTS: usize = 1 << 19;

/// Estimated picoseconds per weight read from beyond L2 (a matrix-vector product
/// on 4 MiB of weights streams them at ~70 ps each on one core).
const PS_PER_WEIGHT: u128 = 60;
/// Estimated picoseconds per multiply-add (the packed kernel at ~50 GFLOP/s per
/// core, the same estimate as a row split's).
const PS_PER_FMA: u128 = 20;

/// Pieces an `[rows, k] @ [k, n]` product on packed weights splits into by
/// columns on `threads` threads (1: it runs whole): when its weights are at least
/// [`MIN_WEIGHTS`] and outnumber the rows' values (`n ≥ rows`), each of at least two pieces, one per thread, with
/// [`pieces_for`]'s grain of work and [`STEP`] columns. Both tiers split by this
/// one rule, over [`column_range`]'s columns.
pub fn column_pieces(rows: usize, k: usize, n: usize, threads: usize) -> usize {
    if threads < 2 || n < rows || k * n < MIN_WEIGHTS {
        return 1;
    }
    let cost = PS_PER_WEIGHT + PS_PER_FMA * rows as u128;
    pieces_for(k * n, cost, n / STEP).min(threads)
}

/// Columns `lo .. hi` of piece `i` of `pieces` over `n` columns: each starts at a
/// multiple of [`STEP`] (`pieces` from [`column_pieces`], so none is empty).
pub fn column_range(n: usize, pieces: usize, i: usize) -> (usize, usize) {
    let cut = |i: usize| {
        if i >= pieces {
            n
        } else {
            i * n / pieces / STEP * STEP
        }
    };
    (cut(i), cut(i + 1))
}

/// A product split into `pieces` column ranges of its `n` columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Columns {
    pieces: usize,
    n: usize,
}

impl Columns {
    /// Number of pieces (≥ 2).
    pub(crate) fn pieces(&self) -> usize {
        self.pieces
    }

    fn range(&self, i: usize) -> (usize, usize) {
        column_range(self.n, self.pieces, i)
    }
}

/// How a product of `(rows, k, n)` that runs whole on its packed weights
/// ([`runs_packed`]) splits by columns on `threads` threads: by [`column_pieces`].
pub(crate) fn plan((rows, k, n): (usize, usize, usize), threads: usize) -> Option<Columns> {
    let pieces = column_pieces(rows, k, n, threads);
    (pieces >= 2).then_some(Columns { pieces, n })
}

/// `(rows, k, n)` when `op` is a `matmul` or `matmul_bias` that runs whole on the
/// packed kernel with `packed` its right operand: its left operand folds into rows
/// and `packed_pays` holds for them. Any cut of such a product — by columns, or by
/// rows, every piece taking the same kernel — gives the whole op's bits.
pub(crate) fn runs_packed(
    op: &Op,
    inputs: &[TensorRef],
    packed: &PackedB,
) -> Option<(usize, usize, usize)> {
    if !matches!(op, Op::MatMul | Op::MatMulBias) || inputs.get(1)?.shape().len() != 2 {
        return None;
    }
    if matches!(op, Op::MatMulBias)
        && view_of::<f32>(op, inputs, 2)
            .ok()?
            .as_contiguous()
            .is_none()
    {
        return None;
    }
    let a = folded_rows(&view_of::<f32>(op, inputs, 0).ok()?)?;
    let (rows, k, n) = (a.shape()[0], a.shape()[1], packed.n());
    (k == packed.k() && packed_pays(rows, k, n)).then_some((rows, k, n))
}

/// Runs `op` as `split`'s pieces on `pool`, piece `i` into `scratch[i]`.
pub(crate) fn execute(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &[Mutex<Scratch>],
    pool: &Pool,
    packed: &PackedB,
    split: Columns,
) -> Result<(), OpError> {
    let scratch = scratch.get(..split.pieces).ok_or_else(|| OpError::Output {
        op: op.name(),
        index: 0,
        message: format!(
            "{} pieces but {} scratch spaces",
            split.pieces,
            scratch.len()
        ),
    })?;
    let a = view_of::<f32>(op, inputs, 0)?;
    let a = folded_rows(&a).ok_or_else(|| OpError::Shape {
        op: op.name(),
        message: format!("a of shape {:?} does not fold into rows", a.shape()),
    })?;
    let bias = match op {
        Op::MatMulBias => view_of::<f32>(op, inputs, 2)?.as_contiguous(),
        _ => None,
    };
    let rows = a.shape()[0];
    let error: Mutex<Option<OpError>> = Mutex::new(None);
    let piece = |i: usize| {
        let (lo, hi) = split.range(i);
        let res = (|| {
            let b = packed.columns(lo, hi - lo).ok_or_else(|| OpError::Output {
                op: op.name(),
                index: 0,
                message: format!("columns {lo}..{hi} are not a run of panels"),
            })?;
            let mut scratch = lock(&scratch[i]);
            let [dst] = scratch.f32_bufs(op, [rows * (hi - lo)])?;
            let epilogue = Epilogue {
                bias: bias.map_or(Bias::None, |b| Bias::PerColumn(&b[lo..hi])),
                activation: None,
            };
            matmul_packed_epilogue(dst, &a, b, 1.0, epilogue).map_err(kernel_err(op))
        })();
        if let Err(e) = res {
            lock(&error).get_or_insert(e);
        }
    };
    pool.run(split.pieces, &piece);
    if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let dst = out_elems::<f32>(op, out)?;
    for (i, cell) in scratch.iter().enumerate() {
        let (lo, hi) = split.range(i);
        let mut scratch = lock(cell);
        let [src] = scratch.f32_bufs(op, [rows * (hi - lo)])?;
        for (row, src) in dst.chunks_exact_mut(split.n).zip(src.chunks_exact(hi - lo)) {
            row[lo..hi].copy_from_slice(src);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{STEP, column_pieces, column_range};

    #[test]
    fn pieces_cover_the_columns_in_steps() {
        for (n, pieces) in [(1024, 2), (1000, 3), (64, 2), (4096, 12), (100, 3)] {
            let ranges: Vec<_> = (0..pieces).map(|i| column_range(n, pieces, i)).collect();
            assert_eq!((ranges[0].0, ranges[pieces - 1].1), (0, n));
            for w in ranges.windows(2) {
                assert_eq!(w[0].1, w[1].0, "{ranges:?}");
                assert!(w[1].0 % STEP == 0 && w[0].0 < w[0].1, "{ranges:?}");
            }
        }
    }

    #[test]
    fn only_weight_bound_products_split_by_columns() {
        // batch 1 on 2 or 4 MiB of weights: one piece per thread, each at least a
        // grain of work (2 MiB at batch 1 is two grains)
        assert_eq!(column_pieces(1, 512, 1024, 2), 2);
        assert_eq!(column_pieces(1, 512, 1024, 3), 2);
        assert_eq!(column_pieces(1, 1024, 1024, 3), 3);
        assert_eq!(column_pieces(64, 1024, 1024, 12), 12);
        // one thread, weights below 2 MiB, or more rows than columns: whole
        assert_eq!(column_pieces(1, 512, 1024, 1), 1);
        assert_eq!(column_pieces(1, 512, 64, 3), 1);
        assert_eq!(column_pieces(32, 256, 1024, 2), 1);
        assert_eq!(column_pieces(2048, 256, 1024, 2), 1);
    }
}
