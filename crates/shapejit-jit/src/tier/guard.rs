//! Guards: which shape keys a compiled kernel may serve.
//!
//! - **Exact** (strong): the interned key the kernel was compiled for; the check is a
//!   pointer comparison because keys are interned per slot (equal ⇔ pointer-equal).
//! - **Weak**: rank, element count, dtype and contiguity. Used when every input is
//!   contiguous f32 with the output's own shape: the kernel is then one flat loop
//!   over `numel` elements and does not depend on the dims.
//! - **Family**: every dim but the batch dim (dim 0 of the iteration shape) and every
//!   stride; inputs that span the batch dim must have it equal to the call's batch.
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
    /// dims after the input's first (all dims for a lower-rank input)
    rest_dims: Dims,
    /// strides of `rest_dims` (0 for size-1 dims)
    rest_strides: SmallVec<[isize; 6]>,
    /// stride of dim 0 when the input spans the batch dim
    batch_stride: isize,
}

/// A family: keys equal up to the batch dim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FamilySig {
    rank: usize,
    parts: Vec<FamilyPart>,
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
    /// The family of `key` and its batch, when it has a batch dim.
    pub fn of(key: &ShapeKey) -> Option<(FamilySig, usize)> {
        let (rank, batch) = rank_and_batch(key.inputs.iter().map(|p| p.shape.as_slice()));
        if rank == 0 {
            return None;
        }
        let parts = key
            .inputs
            .iter()
            .map(|p| {
                let spans = p.shape.len() == rank && p.shape[0] == batch;
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
        Some((FamilySig { rank, parts }, batch))
    }

    /// The call's batch when `key` belongs to this family.
    pub fn matches(&self, key: &ShapeKey) -> Option<usize> {
        let (rank, batch) = rank_and_batch(key.inputs.iter().map(|p| p.shape.as_slice()));
        if rank != self.rank || key.inputs.len() != self.parts.len() {
            return None;
        }
        for (p, f) in key.inputs.iter().zip(&self.parts) {
            if p.dtype != f.dtype || p.shape.len() != f.rank {
                return None;
            }
            let dim0_ok = if f.spans_batch {
                p.shape[0] == batch && (batch == 1 || p.strides[0] == f.batch_stride)
            } else {
                f.rank < rank || p.shape[0] == 1
            };
            if !dim0_ok {
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
        let (sig, b) = FamilySig::of(&k4).unwrap();
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
