//! Copying a (possibly strided) tensor into contiguous bytes, and building
//! caller-owned [`Tensor`]s.
//!
//! **Invariant:** the source comes from a checked [`TensorRef`], so every
//! element its layout addresses is in bounds; lookups are still checked and
//! report `false` instead of panicking.

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

/// Element types for which every bit pattern is a valid value.
trait Plain: shapejit_ir::Element {}
impl Plain for f32 {}
impl Plain for i32 {}
impl Plain for i64 {}

fn filled<T: Plain>(src: &TensorRef<'_>) -> Option<Vec<T>> {
    let numel = src.layout.numel();
    let mut v = vec![T::default(); numel];
    // SAFETY: `T` is f32, i32 or i64: no padding and every bit pattern is valid;
    // the byte view covers exactly the vector's initialized elements.
    let bytes = unsafe {
        std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(&v[..]))
    };
    to_contiguous(src, bytes).then_some(v)
}

/// A caller-owned tensor with `src`'s elements (`None` if the layout does not fit the data).
pub fn to_tensor(src: &TensorRef<'_>) -> Option<Tensor> {
    let shape = src.layout.shape.as_slice();
    let t = match src.dtype {
        DType::F32 => Tensor::from_vec(filled::<f32>(src)?, shape),
        DType::I32 => Tensor::from_vec(filled::<i32>(src)?, shape),
        DType::I64 => Tensor::from_vec(filled::<i64>(src)?, shape),
        DType::Bool => {
            let mut bytes = vec![0u8; src.layout.numel()];
            if !to_contiguous(src, &mut bytes) {
                return None;
            }
            Tensor::from_vec(
                bytes.into_iter().map(|b| b != 0).collect::<Vec<bool>>(),
                shape,
            )
        }
    };
    t.ok()
}
