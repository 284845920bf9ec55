//! Copying a (possibly strided) tensor into contiguous bytes, and building
//! caller-owned [`Tensor`]s.
//!
//! **Invariant:** the source comes from a checked [`TensorRef`], so every
//! element its layout addresses is in bounds; lookups are still checked and
//! report `false` instead of panicking.
//!
//! **Invariant:** a caller-owned tensor's storage is reserved fallibly: a size
//! the allocator refuses is [`CopyError::Refused`], never an abort.

use crate::tensor::TensorRef;
use shapejit_ir::{DType, Tensor};

/// Copies `src`'s elements in row-major order into `dst` (exactly
/// `numel * size` bytes). Returns false when `dst` has the wrong length.
pub fn to_contiguous(src: &TensorRef<'_>, dst: &mut [u8]) -> bool {
    let es = src.dtype.size();
    let numel = src.layout.numel();
    if dst.len() != numel * es {
        return false;
    }
    if numel == 0 {
        return true;
    }
    if src.layout.is_contiguous() {
        let start = src.layout.offset * es;
        return match src.data.get(start..start + dst.len()) {
            Some(bytes) => {
                dst.copy_from_slice(bytes);
                true
            }
            None => false,
        };
    }
    let shape = &src.layout.shape;
    let strides = &src.layout.strides;
    let rank = shape.len();
    let mut index = vec_index(rank);
    let mut pos = src.layout.offset as isize;
    for chunk in dst.chunks_exact_mut(es) {
        let Some(bytes) = usize::try_from(pos)
            .ok()
            .and_then(|p| src.data.get(p * es..p * es + es))
        else {
            return false;
        };
        chunk.copy_from_slice(bytes);
        // advance the odometer
        for d in (0..rank).rev() {
            index[d] += 1;
            pos += strides[d];
            if index[d] < shape[d] {
                break;
            }
            pos -= strides[d] * shape[d] as isize;
            index[d] = 0;
        }
    }
    true
}

fn vec_index(rank: usize) -> smallvec::SmallVec<[usize; 8]> {
    smallvec::SmallVec::from_elem(0, rank)
}

/// Why a tensor could not be copied out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyError {
    /// The allocator refused the memory.
    Refused,
    /// The layout does not fit the data (an internal bug).
    Layout,
}

/// A caller-owned tensor with `src`'s elements.
///
/// The storage is a fresh `Vec<u8>` that nothing else shares, reserved
/// fallibly, so a caller can take it back as a mutable buffer without a copy
/// (`Bytes::try_into_mut`). The system allocator aligns it for every dtype
/// (glibc: 16 bytes); where it would not, `from_bytes_or_copy` copies into
/// aligned storage.
pub fn to_tensor(src: &TensorRef<'_>) -> Result<Tensor, CopyError> {
    let len = src
        .layout
        .numel()
        .checked_mul(src.dtype.size())
        .ok_or(CopyError::Refused)?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|_| CopyError::Refused)?;
    if src.layout.is_contiguous() {
        // one copy, no zero fill first
        let start = src.layout.offset * src.dtype.size();
        let data = src.data.get(start..start + len).ok_or(CopyError::Layout)?;
        bytes.extend_from_slice(data);
    } else {
        bytes.resize(len, 0u8);
        if !to_contiguous(src, &mut bytes) {
            return Err(CopyError::Layout);
        }
    }
    if src.dtype == DType::Bool {
        bytes.iter_mut().for_each(|b| *b = u8::from(*b != 0));
    }
    Tensor::from_bytes_or_copy(src.dtype, src.layout.shape.as_slice(), bytes.into())
        .map_err(|_| CopyError::Layout)
}
