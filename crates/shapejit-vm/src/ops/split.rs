//! Splitting one op into pieces for the intra-op pool.
//!
//! An op whose output's leading dims are 1 up to an axis `d` of size > 1 that the
//! op computes independently along (a batch or row dim: any dim of an elementwise
//! op, the batch dims and rows of a matmul, the dims before a softmax's or layer
//! norm's axis, the images and channels of a pool, the images of a convolution, or
//! the output channels of a one-image, one-group convolution, by at least
//! [`MIN_CONV_CHANNELS`] per piece, with its weights and bias) runs
//! as up to [`MAX_PIECES`] pieces, each a contiguous range of `d`: the output's
//! range, and the same range of every input that runs along `d` with the output
//! (the others, broadcast or weights, are passed whole). Pieces exist only above a
//! work estimate of [`GRAIN_PS`] each, so small ops (batch 1) stay whole.
//!
//! **Invariant:** the plan is a function of the op and its input shapes only — never
//! of the thread count — and every piece is computed by the same code as a whole op
//! of its shape, so outputs are bit-identical for any number of threads. (The one
//! exception, [`Plan::for_threads`], is a split whose pieces give the whole op's
//! bits however it is cut, and [`Plan::capped`], a product on packed weights that
//! runs whole on the packed kernel: its row pieces do too.)

use super::OpError;
use crate::tensor::{Dims, Layout, TensorRef};
use shapejit_ir::{DType, Op};

/// Most pieces an op is split into (divisible by 2, 3, 4 and 6 threads).
pub(crate) const MAX_PIECES: usize = 12;
/// Least estimated work per piece, in picoseconds (about 20 µs).
const GRAIN_PS: u128 = 20_000_000;
/// Least rows of a matmul piece split along its rows (keeps register blocks full).
const MIN_MATMUL_ROWS: usize = 16;
/// Least output channels of a convolution piece split along its channels: each
/// piece rearranges (or unrolls) the whole image's input again, so pieces stay
/// few and wide.
const MIN_CONV_CHANNELS: usize = 64;

/// How an op's inputs run along the split axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Align {
    /// every input, aligned to the output's trailing dims (elementwise broadcasting)
    Trailing,
    /// input 0 only (same rank as the output)
    First,
    /// `matmul`: batch dims aligned at the right of the matrix dims; rows split `a` only
    MatMul,
    /// `gemm`: rows of `a` (or its columns when transposed) and of a `[m, n]` bias
    Gemm { trans_a: bool },
    /// `conv2d`: images split the input, output channels the weights and bias
    Conv,
}

/// The split of one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    axis: usize,
    pieces: usize,
    align: Align,
}

impl Plan {
    /// Number of pieces (≥ 2).
    pub(crate) fn pieces(&self) -> usize {
        self.pieces
    }

    /// The output axis split.
    pub(crate) fn axis(&self) -> usize {
        self.axis
    }

    /// At most `threads` pieces (`None`: run whole), for a split whose pieces give
    /// the whole op's bits however it is cut.
    pub(crate) fn capped(self, threads: usize) -> Option<Plan> {
        let pieces = self.pieces.min(threads);
        (pieces >= 2).then_some(Plan { pieces, ..self })
    }

    /// The plan to run on `threads` threads. A convolution split by output
    /// channels gives the whole op's bits however it is cut (every channel is
    /// computed the same way), and each piece rearranges the image's input again:
    /// it is cut into at most `threads` pieces, and runs whole on one thread.
    /// Every other split runs as planned (its pieces are part of its result).
    pub(crate) fn for_threads(self, threads: usize) -> Option<Plan> {
        if self.align != Align::Conv || self.axis != 1 {
            return Some(self);
        }
        self.capped(threads)
    }
}

/// The split axis limit, alignment and per-output-element cost (ps) of `op`.
fn rule(op: &Op, inputs: &[TensorRef], out: &[usize]) -> Option<(usize, Align, u128)> {
    let rank = out.len();
    let last = |i: usize| inputs.get(i).and_then(|t| t.shape().last().copied());
    Some(match op {
        // ~140 ps per element in L2, ~400 beyond it; a unary op ~140 (neg) to ~500
        // (gelu), tanh 260, sigmoid 300 (`run --profile`, Intel, batch 16 of
        // `elementwise.onnx`), counted at 400: an op of 64 K elements in a core's
        // L2 runs whole (split, it cost twice its time: its data read from the
        // other core's cache, the next op's read back); one of 128 K (the
        // transformer's residual adds at batch 16) splits in two, like the layer
        // norm after it, the same rows on the same thread (`crate::pool`): the
        // adds and layer norms at 2 threads 130 → 119 ms per 80 runs
        Op::Binary(_) | Op::Where | Op::Cast { .. } | Op::Unary(_) => (rank, Align::Trailing, 400),
        Op::MatMul | Op::MatMulBias => {
            if inputs.iter().take(2).any(|t| t.shape().len() < 2) {
                return None;
            }
            (rank - 1, Align::MatMul, 20 * last(0)? as u128)
        }
        Op::Gemm { trans_a, .. } => {
            let a = inputs.first()?.shape();
            let k = if *trans_a { a.first()? } else { a.last()? };
            (1, Align::Gemm { trans_a: *trans_a }, 20 * *k as u128)
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::LayerNorm { axis, .. } => {
            let axis = usize::try_from(if *axis < 0 {
                *axis + rank as i64
            } else {
                *axis
            })
            .ok()?;
            let align = if matches!(op, Op::LayerNorm { .. }) {
                Align::Trailing
            } else {
                Align::First
            };
            (axis.min(rank), align, 2_000)
        }
        Op::Conv2d { groups, .. } => {
            let w = inputs.get(1)?.shape();
            let taps: usize = w.get(1..)?.iter().product();
            let limit = if *groups == 1 { 2 } else { 1 };
            (limit, Align::Conv, 20 * taps as u128)
        }
        Op::MaxPool2d { window, .. } | Op::AvgPool2d { window, .. } => {
            let taps = window.kernel[0] * window.kernel[1];
            (2, Align::First, 300 * taps as u128)
        }
        Op::BatchNorm { .. } => (1, Align::First, 500),
        _ => return None,
    })
}

/// Pieces for `numel` output elements costing `cost_ps` each, split along an axis of
/// `extent`: at most [`MAX_PIECES`] and `extent`, at least [`GRAIN_PS`] of work each
/// (1: run whole). A function of the shapes only, as every split must be; compiled
/// kernels split by the same rule.
pub fn pieces_for(numel: usize, cost_ps: u128, extent: usize) -> usize {
    let work = numel as u128 * cost_ps;
    (work / GRAIN_PS).clamp(1, MAX_PIECES.min(extent).max(1) as u128) as usize
}

/// How `op` splits on these inputs with output shape `out`; `None`: run it whole.
pub(crate) fn plan(op: &Op, inputs: &[TensorRef], out: &[usize]) -> Option<Plan> {
    let (limit, align, cost) = rule(op, inputs, out)?;
    let axis = out.iter().position(|&d| d > 1)?;
    if axis >= limit {
        return None;
    }
    let numel: usize = out.iter().product();
    let mut extent = out[axis];
    if align == Align::MatMul && axis == out.len() - 2 {
        extent /= MIN_MATMUL_ROWS;
    }
    if align == Align::Conv && axis == 1 {
        extent /= MIN_CONV_CHANNELS;
    }
    let pieces = pieces_for(numel, cost, extent);
    (pieces >= 2).then_some(Plan {
        axis,
        pieces,
        align,
    })
}

/// Output channels a convolution piece starts at a multiple of: a panel of
/// weights packed for the transposed product (`conv::takes_transposed`), which a
/// piece starting inside a panel could not use.
const CONV_CHANNEL_STEP: usize = 16;

/// The range of the split axis piece `i` covers.
pub(crate) fn range(plan: &Plan, size: usize, i: usize) -> (usize, usize) {
    let channels = plan.align == Align::Conv && plan.axis == 1;
    let cut = |i: usize| {
        let at = i * size / plan.pieces;
        if channels && i < plan.pieces {
            at / CONV_CHANNEL_STEP * CONV_CHANNEL_STEP
        } else {
            at
        }
    };
    (cut(i), cut(i + 1))
}

/// The axis of input `idx` (of rank `in_rank`) that runs along the split axis,
/// if it does.
fn input_axis(plan: &Plan, idx: usize, t: &TensorRef, out: &[usize]) -> Option<usize> {
    let (in_rank, out_rank) = (t.shape().len(), out.len());
    let aligned = (plan.axis + in_rank).checked_sub(out_rank);
    let axis = match plan.align {
        Align::Trailing => aligned?,
        Align::First => (idx == 0).then_some(plan.axis)?,
        Align::MatMul => {
            let rows = plan.axis == out_rank - 2;
            if rows && idx != 0 {
                return None;
            }
            aligned?
        }
        Align::Conv => match (plan.axis, idx) {
            (0, 0) => 0,
            (1, 1 | 2) => 0,
            _ => return None,
        },
        Align::Gemm { trans_a } => match idx {
            0 => usize::from(trans_a),
            2 if in_rank == 2 => 0,
            _ => return None,
        },
    };
    (t.shape().get(axis) == Some(&out[plan.axis])).then_some(axis)
}

/// Layout of piece `(lo, hi)` of input `idx`: narrowed along its axis, or whole.
pub(crate) fn input_layout(
    plan: &Plan,
    idx: usize,
    t: &TensorRef,
    out: &[usize],
    (lo, hi): (usize, usize),
) -> Layout {
    let mut layout = t.layout.clone();
    if let Some(axis) = input_axis(plan, idx, t, out) {
        layout.shape[axis] = hi - lo;
        // In range: lo < the dim, so this element is inside the input's extent.
        layout.offset = (layout.offset as isize + lo as isize * layout.strides[axis]) as usize;
    }
    layout
}

/// The output of piece `(lo, hi)` inside the buffer of a contiguous output of
/// `dtype` and `shape`: `(piece shape, byte range)`.
pub(crate) fn output_range(
    plan: &Plan,
    dtype: DType,
    shape: &[usize],
    (lo, hi): (usize, usize),
) -> (Dims, std::ops::Range<usize>) {
    let inner: usize = shape[plan.axis + 1..].iter().product::<usize>() * dtype.size();
    let mut dims = Dims::from_slice(shape);
    dims[plan.axis] = hi - lo;
    (dims, lo * inner..hi * inner)
}

/// Piece inputs: `TensorRef`s over the same buffers with the pieces' layouts.
pub(crate) fn piece_refs<'a>(
    inputs: &[TensorRef<'a>],
    layouts: &'a [Layout],
) -> Result<smallvec::SmallVec<[TensorRef<'a>; 4]>, OpError> {
    inputs
        .iter()
        .zip(layouts)
        .map(|(t, l)| TensorRef::new(t.dtype, l, t.data).map_err(OpError::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Align, CONV_CHANNEL_STEP, MAX_PIECES, Plan, input_layout, plan, range};
    use crate::tensor::{Layout, TensorRef};
    use shapejit_ir::{DType, Op, UnaryOp};

    fn refs<'a>(layouts: &'a [Layout], data: &'a [u8]) -> Vec<TensorRef<'a>> {
        layouts
            .iter()
            .map(|l| TensorRef::new(DType::F32, l, data).unwrap())
            .collect()
    }

    #[test]
    fn channel_pieces_start_at_a_panel() {
        for (size, pieces) in [(512, 3), (2048, 12), (200, 3), (64 * 7, 7)] {
            let p = Plan {
                axis: 1,
                pieces,
                align: Align::Conv,
            };
            let covered: Vec<_> = (0..pieces).map(|i| range(&p, size, i)).collect();
            assert_eq!((covered[0].0, covered[pieces - 1].1), (0, size));
            for w in covered.windows(2) {
                assert_eq!(w[0].1, w[1].0);
                assert!(
                    w[1].0 % CONV_CHANNEL_STEP == 0 && w[0].0 < w[0].1,
                    "{covered:?}"
                );
            }
        }
    }

    #[test]
    fn small_ops_and_batch_one_rows_stay_whole() {
        let data = vec![0u8; 4 * 256 * 4096];
        let l = [Layout::contiguous(&[1, 32, 256])];
        assert_eq!(
            plan(&Op::Unary(UnaryOp::Exp), &refs(&l, &data), &[1, 32, 256]),
            None
        );
        // 64 K elements (a core's L2) run whole; 1 M in the most pieces
        let l = [Layout::contiguous(&[16, 4096])];
        assert_eq!(
            plan(&Op::Unary(UnaryOp::Exp), &refs(&l, &data), &[16, 4096]),
            None
        );
        let l = [Layout::contiguous(&[256, 4096])];
        let p = plan(&Op::Unary(UnaryOp::Exp), &refs(&l, &data), &[256, 4096]).unwrap();
        assert_eq!((p.axis(), p.pieces()), (0, MAX_PIECES));
        let covered: Vec<_> = (0..p.pieces()).map(|i| range(&p, 256, i)).collect();
        assert_eq!(covered.first().unwrap().0, 0);
        assert_eq!(covered.last().unwrap().1, 256);
        assert!(
            covered
                .windows(2)
                .all(|w| w[0].1 == w[1].0 && w[0].0 < w[0].1)
        );
    }

    #[test]
    fn matmul_rows_split_the_left_operand_only() {
        // [256, 256] @ [256, 256]: k == m, so only the alignment rule keeps b whole
        let data = vec![0u8; 4 * 256 * 1024];
        let l = [
            Layout::contiguous(&[256, 256]),
            Layout::contiguous(&[256, 256]),
        ];
        let inputs = refs(&l, &data);
        let p = plan(&Op::MatMul, &inputs, &[256, 256]).unwrap();
        assert_eq!(p.axis(), 0);
        let r = range(&p, 256, 1);
        let a = input_layout(&p, 0, &inputs[0], &[256, 256], r);
        let b = input_layout(&p, 1, &inputs[1], &[256, 256], r);
        assert_eq!(a.shape.as_slice(), [r.1 - r.0, 256]);
        assert_eq!(a.offset, r.0 * 256);
        assert_eq!(b, l[1]);
        // batch-1 projection: two pieces of 16 rows at most
        let l = [
            Layout::contiguous(&[1, 32, 256]),
            Layout::contiguous(&[256, 1024]),
        ];
        let p = plan(&Op::MatMul, &refs(&l, &data), &[1, 32, 1024]).unwrap();
        assert_eq!((p.axis(), p.pieces()), (1, 2));
    }

    #[test]
    fn a_broadcast_batch_operand_stays_whole() {
        let data = vec![0u8; 4 * 64 * 64 * 64];
        let l = [
            Layout::contiguous(&[64, 64, 64]),
            Layout::contiguous(&[1, 64, 64]),
        ];
        let inputs = refs(&l, &data);
        let p = plan(&Op::MatMul, &inputs, &[64, 64, 64]).unwrap();
        assert_eq!(p.axis(), 0);
        let r = range(&p, 64, 2);
        assert_eq!(input_layout(&p, 1, &inputs[1], &[64, 64, 64], r), l[1]);
        let a = input_layout(&p, 0, &inputs[0], &[64, 64, 64], r);
        assert_eq!(a.shape[0], r.1 - r.0);
    }
}
