//! Guards: which shape keys a compiled kernel may serve.
//!
//! - **Exact** (strong): the interned key the kernel was compiled for; the check is a
//!   pointer comparison because keys are interned per slot (equal ⇔ pointer-equal).
//! - **Weak**: rank, element count, dtype and contiguity. Used when every input is
//!   contiguous f32 with the output's own shape: the kernel is then one flat loop
//!   over `numel` elements and does not depend on the dims.
//! - **Family**: every dim but the batch dim and every stride; inputs that span the
//!   batch dim must have it equal to the call's batch. The batch is dim 0 of the
//!   iteration shape ([`BatchRule`]): for a matmul region, dim 0 of the product, which
//!   a weight matrix never carries (its dim 0 is the contraction dim).
//!
//! **Invariant:** a guard matches a key only if the kernel's addressing (folded strides
//! and trip counts) is valid for it, so a transposed view never reaches a kernel
//! compiled for a contiguous input.

use shapejit_ir::DType;
use shapejit_vm::shape_key::{KeyPart, ShapeKey};
use shapejit_vm::tensor::Dims;
use smallvec::SmallVec;
use std::sync::Arc;

/// What a cached kernel requires of a key.
#[derive(Clone, Debug)]
pub enum Guard {
    /// exactly this interned key
    Exact(Arc<ShapeKey>),
    /// any key with this weak signature
    Weak(WeakSig),
    /// any key of this family
    Family(FamilySig),
}

impl Guard {
    /// The batch dim to pass when the guard matches `key` (0 for non-family guards).
    pub fn matches(&self, key: &Arc<ShapeKey>) -> Option<usize> {
        match self {
            Guard::Exact(k) => Arc::ptr_eq(k, key).then_some(0),
            Guard::Weak(sig) => (WeakSig::of(key).as_ref() == Some(sig)).then_some(0),
            Guard::Family(sig) => sig.matches(key),
        }
    }
}

/// Rank, element count, input count; every input contiguous f32 of one shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WeakSig {
    n_inputs: usize,
    rank: usize,
    numel: usize,
}

impl WeakSig {
    /// The weak signature of `key`, if its inputs qualify.
    pub fn of(key: &ShapeKey) -> Option<WeakSig> {
        let first = key.inputs.first()?;
        let same = key
            .inputs
            .iter()
            .all(|p| p.dtype == DType::F32 && p.contiguous && p.shape == first.shape);
        same.then(|| WeakSig {
            n_inputs: key.inputs.len(),
            rank: first.shape.len(),
            numel: first.shape.iter().product(),
        })
    }
}

/// One input's part of a family signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FamilyPart {
    dtype: DType,
    rank: usize,
    /// whether the input has the batch dim (full rank, dim 0 = batch)
    spans_batch: bool,
    /// dims after the input's first when it spans the batch, else all its dims
    rest_dims: Dims,
    /// strides of `rest_dims` (0 for size-1 dims)
    rest_strides: SmallVec<[isize; 6]>,
    /// stride of dim 0 when the input spans the batch dim
    batch_stride: isize,
}

/// A family: keys equal up to the batch dim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FamilySig {
    rule: BatchRule,
    rank: usize,
    parts: Vec<FamilyPart>,
}

/// Which dim of a region's inputs is its batch: the dim a family kernel takes at run
/// time. One rule per region, from its head instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BatchRule {
    /// Elementwise and row regions: dim 0 of the iteration shape, the largest dim 0
    /// among the inputs of the largest rank.
    #[default]
    Iteration,
    /// A matmul region (key inputs `a` and `b` are its operands): dim 0 of the product.
    /// A matrix `b` (rank 2, such as a weight) never carries it — its dim 0 is the
    /// contraction dim — and a transposed matrix `a` has its rows in dim 1, so such a
    /// region has no family.
    MatMul {
        /// the left operand's key input
        a: usize,
        /// the right operand's key input
        b: usize,
        /// whether `a` is transposed
        trans_a: bool,
    },
}

impl BatchRule {
    /// The iteration rank, the batch and the one input that may not span the batch
    /// even when its dim 0 equals it; `None` when the key has no batch dim.
    fn batch(self, shapes: &[&[usize]]) -> Option<(usize, usize, Option<usize>)> {
        let (rank, batch) = rank_and_batch(shapes.iter().copied());
        if rank == 0 {
            return None;
        }
        match self {
            BatchRule::Iteration => Some((rank, batch, None)),
            BatchRule::MatMul { a, b, trans_a } => {
                let (sa, sb) = (*shapes.get(a)?, *shapes.get(b)?);
                if rank != sa.len().max(sb.len()) {
                    return None;
                }
                if rank == 2 {
                    // `a [m, k] · b [k, n]`: the rows of `a` are the product's dim 0.
                    (sa.len() == 2 && !trans_a).then(|| (rank, sa[0], Some(b)))
                } else {
                    // Batched: the product's dim 0 broadcasts the operands' dims 0.
                    let carriers = [sa, sb].into_iter().filter(|s| s.len() == rank);
                    let (_, batch) = rank_and_batch(carriers);
                    Some((rank, batch, None))
                }
            }
        }
    }
}

/// Iteration rank and batch of a list of input shapes: the largest rank and the
/// largest dim 0 among inputs of that rank.
pub fn rank_and_batch<'a>(shapes: impl Iterator<Item = &'a [usize]> + Clone) -> (usize, usize) {
    let rank = shapes.clone().map(|s| s.len()).max().unwrap_or(0);
    let batch = shapes
        .filter(|s| s.len() == rank && rank > 0)
        .map(|s| s[0])
        .max()
        .unwrap_or(1);
    (rank, batch)
}

fn part_rest(p: &KeyPart, spans: bool) -> (Dims, SmallVec<[isize; 6]>) {
    let skip = usize::from(spans);
    let dims: Dims = p.shape[skip..].iter().copied().collect();
    let strides = p.shape[skip..]
        .iter()
        .zip(&p.strides[skip..])
        .map(|(&n, &s)| if n == 1 { 0 } else { s })
        .collect();
    (dims, strides)
}

impl FamilySig {
    /// The family of `key` under the region's batch rule and its batch, when it has a
    /// batch dim.
    pub fn of(key: &ShapeKey, rule: BatchRule) -> Option<(FamilySig, usize)> {
        let shapes: SmallVec<[&[usize]; 8]> =
            key.inputs.iter().map(|p| p.shape.as_slice()).collect();
        let (rank, batch, never_spans) = rule.batch(&shapes)?;
        let parts = key
            .inputs
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let spans = p.shape.len() == rank && p.shape[0] == batch && never_spans != Some(k);
                let (rest_dims, rest_strides) = part_rest(p, spans);
                FamilyPart {
                    dtype: p.dtype,
                    rank: p.shape.len(),
                    spans_batch: spans,
                    rest_dims,
                    rest_strides,
                    batch_stride: if spans { p.strides[0] } else { 0 },
                }
            })
            .collect();
        Some((FamilySig { rule, rank, parts }, batch))
    }

    /// The call's batch when `key` belongs to this family.
    pub fn matches(&self, key: &ShapeKey) -> Option<usize> {
        if key.inputs.len() != self.parts.len() {
            return None;
        }
        let shapes: SmallVec<[&[usize]; 8]> =
            key.inputs.iter().map(|p| p.shape.as_slice()).collect();
        let (rank, batch, _) = self.rule.batch(&shapes)?;
        if rank != self.rank {
            return None;
        }
        for (p, f) in key.inputs.iter().zip(&self.parts) {
            if p.dtype != f.dtype || p.shape.len() != f.rank {
                return None;
            }
            // An input that does not span the batch keeps its dim 0 in `rest_dims`.
            let batch_ok = !f.spans_batch
                || (p.shape[0] == batch && (batch == 1 || p.strides[0] == f.batch_stride));
            if !batch_ok {
                return None;
            }
            let (dims, strides) = part_rest(p, f.spans_batch);
            if dims != f.rest_dims || strides != f.rest_strides {
                return None;
            }
        }
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(shape: &[usize], strides: &[isize]) -> KeyPart {
        let mut expected = 1isize;
        let mut contiguous = true;
        for d in (0..shape.len()).rev() {
            if shape[d] != 1 && strides[d] != expected {
                contiguous = false;
            }
            expected *= shape[d] as isize;
        }
        KeyPart {
            dtype: DType::F32,
            shape: shape.into(),
            strides: strides.into(),
            contiguous,
        }
    }

    fn key(parts: Vec<KeyPart>) -> ShapeKey {
        ShapeKey {
            inputs: parts.into_iter().collect(),
        }
    }

    #[test]
    fn family_matches_other_batches_only() {
        let k4 = key(vec![part(&[4, 3, 5], &[15, 5, 1]), part(&[5], &[1])]);
        let (sig, b) = FamilySig::of(&k4, BatchRule::Iteration).unwrap();
        assert_eq!(b, 4);
        let k9 = key(vec![part(&[9, 3, 5], &[15, 5, 1]), part(&[5], &[1])]);
        assert_eq!(sig.matches(&k9), Some(9));
        let k1 = key(vec![part(&[1, 3, 5], &[15, 5, 1]), part(&[5], &[1])]);
        assert_eq!(sig.matches(&k1), Some(1));
        // a transposed view of the same shape is a different layout
        let kt = key(vec![part(&[9, 3, 5], &[15, 1, 3]), part(&[5], &[1])]);
        assert_eq!(sig.matches(&kt), None);
        let other = key(vec![part(&[9, 3, 6], &[18, 6, 1]), part(&[6], &[1])]);
        assert_eq!(sig.matches(&other), None);
    }

    #[test]
    fn a_weight_never_carries_a_matmul_batch() {
        // x [m, 512] · w [512, 64] + bias [64]: the batch is m, whatever w's dim 0 is.
        let rule = BatchRule::MatMul {
            a: 0,
            b: 1,
            trans_a: false,
        };
        let mlp = |m: usize| {
            key(vec![
                part(&[m, 512], &[512, 1]),
                part(&[512, 64], &[64, 1]),
                part(&[64], &[1]),
            ])
        };
        let (sig, batch) = FamilySig::of(&mlp(7), rule).unwrap();
        assert_eq!(batch, 7);
        for m in [1, 2, 511, 512, 513, 1000] {
            assert_eq!(sig.matches(&mlp(m)), Some(m), "batch {m}");
            assert_eq!(FamilySig::of(&mlp(m), rule), Some((sig.clone(), m)));
        }
        // The broadcast rule takes the larger dim 0 (the weight's 512) as the batch:
        // one family per m below 512.
        let (iter_sig, iter_batch) = FamilySig::of(&mlp(7), BatchRule::Iteration).unwrap();
        assert_eq!(iter_batch, 512);
        assert_eq!(iter_sig.matches(&mlp(8)), None);
        // Another weight shape or a transposed activation is another family.
        let other = key(vec![
            part(&[7, 512], &[512, 1]),
            part(&[512, 32], &[32, 1]),
            part(&[32], &[1]),
        ]);
        assert_eq!(sig.matches(&other), None);
        let transposed = key(vec![
            part(&[7, 512], &[1, 7]),
            part(&[512, 64], &[64, 1]),
            part(&[64], &[1]),
        ]);
        assert_eq!(sig.matches(&transposed), None);
        // A transposed `a` (gemm) has its rows in dim 1: no family.
        let gemm = BatchRule::MatMul {
            a: 0,
            b: 1,
            trans_a: true,
        };
        assert_eq!(FamilySig::of(&mlp(7), gemm), None);
        // Batched: [b, m, k] · [k, n] keeps b as the batch.
        let batched = |b: usize| {
            key(vec![
                part(&[b, 3, 512], &[1536, 512, 1]),
                part(&[512, 64], &[64, 1]),
            ])
        };
        let (bsig, bb) = FamilySig::of(&batched(4), rule).unwrap();
        assert_eq!(bb, 4);
        assert_eq!(bsig.matches(&batched(600)), Some(600));
    }

    #[test]
    fn weak_needs_contiguous_equal_shapes() {
        let a = key(vec![part(&[4, 6], &[6, 1]), part(&[4, 6], &[6, 1])]);
        let b = key(vec![part(&[2, 12], &[12, 1]), part(&[2, 12], &[12, 1])]);
        assert_eq!(WeakSig::of(&a), WeakSig::of(&b));
        assert!(WeakSig::of(&a).is_some());
        let t = key(vec![part(&[4, 6], &[1, 4]), part(&[4, 6], &[6, 1])]);
        assert_eq!(WeakSig::of(&t), None);
        let bc = key(vec![part(&[4, 6], &[6, 1]), part(&[6], &[1])]);
        assert_eq!(WeakSig::of(&bc), None);
    }
}
