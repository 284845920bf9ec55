//! Concrete tensors: a dtype, a known shape and contiguous row-major bytes.
//!
//! Storage is a [`bytes::Bytes`], so a tensor can own a `Vec`, or borrow a
//! memory-mapped file region without copying it.
//!
//! **Invariant:** `data.len() == numel * dtype.size()` and the data pointer is
//! aligned to the dtype's size (constructors check both).

use crate::dtype::{DType, Element, Scalar};
use bytes::Bytes;
use std::fmt;

/// An error building or viewing a tensor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    /// The data length does not match the shape.
    #[error("tensor of shape {shape:?} and dtype {dtype} needs {expected} bytes, got {actual}")]
    SizeMismatch {
        /// The shape asked for.
        shape: Vec<usize>,
        /// The dtype asked for.
        dtype: DType,
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
    /// The element count overflows `usize`.
    #[error("tensor shape {0:?} has too many elements")]
    TooLarge(Vec<usize>),
    /// A byte of bool or sub-byte data sets bits the dtype does not use.
    #[error("{dtype} data has a byte beyond the dtype's {} bits", dtype.bits())]
    InvalidBits {
        /// The tensor's dtype.
        dtype: DType,
    },
    /// Viewing the data as another dtype.
    #[error("tensor has dtype {actual}, not {expected}")]
    WrongDType {
        /// The dtype asked for.
        expected: DType,
        /// The tensor's dtype.
        actual: DType,
    },
    /// The storage is not aligned for the dtype.
    #[error("tensor data is not aligned for {0}")]
    Misaligned(DType),
    /// The allocator refused the tensor's storage.
    #[error("cannot allocate {bytes} bytes for a tensor of shape {shape:?} (out of memory)")]
    OutOfMemory {
        /// The shape asked for.
        shape: Vec<usize>,
        /// Bytes needed.
        bytes: usize,
    },
}

/// A dense tensor with a known shape.
#[derive(Clone, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: Bytes,
}

struct VecOwner<T: crate::dtype::PlainData>(Vec<T>);

impl<T: crate::dtype::PlainData> AsRef<[u8]> for VecOwner<T> {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `T` is a plain numeric (or bool) type with no padding; any of its
        // bytes are initialized, and the length covers exactly the vector's elements.
        unsafe {
            std::slice::from_raw_parts(
                self.0.as_ptr().cast::<u8>(),
                std::mem::size_of_val(&self.0[..]),
            )
        }
    }
}

/// The bytes a tensor of `dtype` and `shape` needs, exact (saturating only past
/// `u128`), so that a size too large for `usize` can still be reported.
pub fn byte_len(dtype: DType, shape: &[usize]) -> u128 {
    shape.iter().fold(dtype.size() as u128, |acc, &d| {
        acc.saturating_mul(d as u128)
    })
}

/// Element count of a shape, or `None` on overflow.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// Zeroed storage for `bytes` bytes, 8-byte aligned, reserved fallibly.
fn aligned_words(bytes: usize, shape: &[usize]) -> Result<Vec<u64>, TensorError> {
    let n = bytes.div_ceil(8);
    let mut words = Vec::new();
    words
        .try_reserve_exact(n)
        .map_err(|_| TensorError::OutOfMemory {
            shape: shape.to_vec(),
            bytes,
        })?;
    words.resize(n, 0);
    Ok(words)
}

impl Tensor {
    /// A tensor that owns `data`, laid out row-major in `shape`.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor, TensorError> {
        let numel = checked_numel(shape).ok_or_else(|| TensorError::TooLarge(shape.to_vec()))?;
        if numel != data.len() {
            return Err(TensorError::SizeMismatch {
                shape: shape.to_vec(),
                dtype: T::DTYPE,
                expected: numel.saturating_mul(T::DTYPE.size()),
                actual: data.len().saturating_mul(T::DTYPE.size()),
            });
        }
        Ok(Tensor {
            dtype: T::DTYPE,
            shape: shape.to_vec(),
            data: Bytes::from_owner(VecOwner(data)),
        })
    }

    /// A scalar (rank 0) tensor.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor {
            dtype: T::DTYPE,
            shape: Vec::new(),
            data: Bytes::from_owner(VecOwner(vec![value])),
        }
    }

    /// A tensor of zeros (all-zero bytes are zero, or `false`, in every dtype).
    /// A shape whose byte count overflows is [`TensorError::TooLarge`]; storage
    /// the allocator refuses is [`TensorError::OutOfMemory`].
    pub fn zeros(dtype: DType, shape: &[usize]) -> Result<Tensor, TensorError> {
        let bytes = checked_numel(shape)
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| TensorError::TooLarge(shape.to_vec()))?;
        let words = aligned_words(bytes, shape)?;
        let owned = Bytes::from_owner(VecOwner(words)).slice(0..bytes);
        Tensor::from_bytes(dtype, shape, owned)
    }

    /// A tensor over existing bytes (e.g. a memory-mapped region), without copying.
    ///
    /// Each byte of bool and sub-byte data must use only the dtype's bits
    /// ([`DType::bits`]: 0 and 1 for bool); other values are rejected.
    pub fn from_bytes(dtype: DType, shape: &[usize], data: Bytes) -> Result<Tensor, TensorError> {
        let numel = checked_numel(shape).ok_or_else(|| TensorError::TooLarge(shape.to_vec()))?;
        let expected = numel
            .checked_mul(dtype.size())
            .ok_or_else(|| TensorError::TooLarge(shape.to_vec()))?;
        if expected != data.len() {
            return Err(TensorError::SizeMismatch {
                shape: shape.to_vec(),
                dtype,
                expected,
                actual: data.len(),
            });
        }
        if !(data.as_ptr() as usize).is_multiple_of(dtype.size()) {
            return Err(TensorError::Misaligned(dtype));
        }
        let bits = dtype.bits();
        if bits < 8 && data.iter().any(|&b| b >> bits != 0) {
            return Err(TensorError::InvalidBits { dtype });
        }
        Ok(Tensor {
            dtype,
            shape: shape.to_vec(),
            data,
        })
    }

    /// Like [`Tensor::from_bytes`] but copies into aligned storage when `data` is misaligned.
    pub fn from_bytes_or_copy(
        dtype: DType,
        shape: &[usize],
        data: Bytes,
    ) -> Result<Tensor, TensorError> {
        if (data.as_ptr() as usize).is_multiple_of(dtype.size()) {
            return Tensor::from_bytes(dtype, shape, data);
        }
        let mut buf = aligned_words(data.len(), shape)?;
        // SAFETY: `buf` holds at least `data.len()` bytes; u64 has no invalid bit patterns.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), buf.as_mut_ptr().cast::<u8>(), data.len())
        };
        let len = data.len();
        let owned = Bytes::from_owner(VecOwner(buf)).slice(0..len);
        Tensor::from_bytes(dtype, shape, owned)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// The raw bytes (row-major).
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }

    /// The storage, consumed. A buffer no other tensor shares (e.g. a run's
    /// output) converts to a `BytesMut` with `try_into_mut` without a copy.
    pub fn into_bytes(self) -> Bytes {
        self.data
    }

    /// The elements as a typed slice.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], TensorError> {
        if self.dtype != T::DTYPE {
            return Err(TensorError::WrongDType {
                expected: T::DTYPE,
                actual: self.dtype,
            });
        }
        // SAFETY: the invariant guarantees length and alignment for `T`; the bytes are
        // valid `T`s (bool data is checked to be 0/1 on construction from raw bytes).
        Ok(unsafe { std::slice::from_raw_parts(self.data.as_ptr().cast::<T>(), self.numel()) })
    }

    /// The elements copied out as `f64` (for comparisons and summaries;
    /// integers beyond 2^53 round).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        crate::with_dtype!(self.dtype, T => self
            .as_slice::<T>()
            .map(|s| s.iter().map(|&v| v.to_f64()).collect()))
        .unwrap_or_default()
    }

    /// The tensor converted to `dtype` element by element, by the conversion
    /// rule of [`crate::dtype`] (the `cast` op's rule).
    pub fn cast(&self, dtype: DType) -> Result<Tensor, TensorError> {
        crate::with_dtype!(self.dtype, A => {
            let src = self.as_slice::<A>()?;
            crate::with_dtype!(dtype, O => Tensor::from_vec(
                src.iter().map(|&v| O::from_num(v.to_num())).collect::<Vec<O>>(),
                &self.shape,
            ))
        })
    }

    /// A tensor with the same data and a new shape of the same element count.
    pub fn reshaped(&self, shape: &[usize]) -> Result<Tensor, TensorError> {
        Tensor::from_bytes(self.dtype, shape, self.data.clone())
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{}{:?}>", self.dtype, self.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construct_and_view() {
        let t = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], &[2, 3]).unwrap();
        assert_eq!(t.as_slice::<f32>().unwrap(), &[1., 2., 3., 4., 5., 6.]);
        assert!(t.as_slice::<i64>().is_err());
        assert!(Tensor::from_vec(vec![1f32], &[2]).is_err());
        assert!(Tensor::zeros(DType::F32, &[usize::MAX, 2]).is_err());
        let z = Tensor::zeros(DType::I64, &[2, 3]).unwrap();
        assert_eq!(z.as_slice::<i64>().unwrap(), &[0; 6]);
        assert_eq!(
            Tensor::zeros(DType::Bool, &[3]).unwrap().as_slice::<bool>(),
            Ok(&[false; 3][..])
        );
        // a mismatch on a huge shape reports sizes without overflowing
        assert!(Tensor::from_vec(vec![1f32], &[usize::MAX / 2]).is_err());
        let unaligned = Bytes::from(vec![0u8; 9]).slice(1..9);
        let c = Tensor::from_bytes_or_copy(DType::F32, &[2], unaligned).unwrap();
        assert_eq!(c.as_slice::<f32>().unwrap(), &[0., 0.]);
    }

    #[test]
    fn cast_converts_every_element() {
        let t = Tensor::from_vec(vec![-1.5f32, 0.0, 300.25], &[3]).unwrap();
        let u = t.cast(DType::U8).unwrap();
        assert_eq!(u.as_slice::<u8>().unwrap(), &[0, 0, 255]);
        let h = t.cast(DType::F16).unwrap();
        let back: Vec<f32> = h
            .as_slice::<crate::dtype::f16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .collect();
        assert_eq!(back, [-1.5, 0.0, 300.25]);
        assert_eq!(h.to_f64_vec(), [-1.5, 0.0, 300.25]);
        let b = t.cast(DType::Bool).unwrap();
        assert_eq!(b.as_slice::<bool>().unwrap(), &[true, false, true]);
    }
}
