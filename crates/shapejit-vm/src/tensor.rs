//! Runtime tensors as the interpreter sees them: a dtype, a strided layout and
//! a byte buffer.
//!
//! This is the interface between the VM machinery (registers, arena, dispatch)
//! and the op implementations in [`crate::ops`].
//!
//! **Invariants:**
//! - a [`TensorRef`]'s `data` covers every element its layout can address
//!   (`offset + Σ (shape[i]-1)*|strides[i]|` is in bounds) — checked by
//!   [`TensorRef::new`];
//! - `data` is aligned to the dtype's size (arena buffers are 64-byte aligned);
//! - outputs ([`TensorMut`]) are always contiguous row-major.

use shapejit_ir::{DType, Element};
use smallvec::SmallVec;

/// Dims of a runtime shape (inline up to rank 6).
pub type Dims = SmallVec<[usize; 6]>;
/// Strides in elements (may be 0 for broadcast, negative for reversed views).
pub type Strides = SmallVec<[isize; 6]>;

/// Shape, strides (in elements) and element offset of a tensor in its buffer.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// dims
    pub shape: Dims,
    /// stride of each dim in elements
    pub strides: Strides,
    /// offset of element `[0, 0, ...]` in elements
    pub offset: usize,
}

/// A bitwise copy when the dims and strides are inline (rank ≤ 6), else
/// copies of them (`SmallVec`'s own `Clone` pushes them one by one; the
/// interpreter clones a layout per instruction).
impl Clone for Layout {
    fn clone(&self) -> Layout {
        if !self.shape.spilled() && !self.strides.spilled() {
            // SAFETY: unspilled `SmallVec`s of `Copy` elements own no heap memory
            // and do not point into themselves, so a bitwise copy is an
            // independent value equal to `self` (dropping either frees nothing).
            return unsafe { std::ptr::read(self) };
        }
        Layout {
            shape: SmallVec::from_slice(&self.shape),
            strides: SmallVec::from_slice(&self.strides),
            offset: self.offset,
        }
    }
}

impl Layout {
    /// Row-major contiguous layout of `shape`.
    pub fn contiguous(shape: &[usize]) -> Layout {
        let mut strides: Strides = SmallVec::from_elem(0, shape.len());
        let mut acc: isize = 1;
        for i in (0..shape.len()).rev() {
            strides[i] = acc;
            acc = acc.saturating_mul(shape[i].max(1) as isize);
        }
        Layout {
            shape: SmallVec::from_slice(shape),
            strides,
            offset: 0,
        }
    }

    /// Element count.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// True when the layout is row-major contiguous (size-1 dims' strides ignored).
    pub fn is_contiguous(&self) -> bool {
        let mut expected: isize = 1;
        for i in (0..self.shape.len()).rev() {
            if self.shape[i] != 1 && self.strides[i] != expected {
                return false;
            }
            expected *= self.shape[i] as isize;
        }
        true
    }

    /// Smallest and one-past-largest element index the layout addresses
    /// (`None` for an empty tensor or on overflow).
    pub fn extent(&self) -> Option<(isize, isize)> {
        if self.shape.contains(&0) {
            return None;
        }
        let mut lo = self.offset as isize;
        let mut hi = self.offset as isize;
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let span = (d as isize - 1).checked_mul(s)?;
            if span < 0 {
                lo = lo.checked_add(span)?;
            } else {
                hi = hi.checked_add(span)?;
            }
        }
        Some((lo, hi + 1))
    }
}

/// A borrowed input tensor.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    /// element type
    pub dtype: DType,
    /// how elements are laid out in `data`
    pub layout: &'a Layout,
    /// the whole underlying buffer (the layout indexes into it)
    pub data: &'a [u8],
}

/// An error building a tensor view: an internal bug when it comes from the VM.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("layout {layout:?} does not fit a buffer of {len} bytes of {dtype} (internal bug)")]
pub struct LayoutError {
    /// the layout
    pub layout: Box<Layout>,
    /// the dtype
    pub dtype: DType,
    /// buffer length in bytes
    pub len: usize,
}

impl<'a> TensorRef<'a> {
    /// Checks bounds and alignment, then builds the view.
    pub fn new(
        dtype: DType,
        layout: &'a Layout,
        data: &'a [u8],
    ) -> Result<TensorRef<'a>, LayoutError> {
        TensorRef::with_extent(dtype, layout, layout.extent(), data)
    }

    /// [`TensorRef::new`] for a layout whose [`Layout::extent`] is `extent`
    /// (computed once by the caller for a layout it reads many times).
    #[inline(always)]
    pub(crate) fn with_extent(
        dtype: DType,
        layout: &'a Layout,
        extent: Option<(isize, isize)>,
        data: &'a [u8],
    ) -> Result<TensorRef<'a>, LayoutError> {
        debug_assert_eq!(extent, layout.extent());
        let err = || LayoutError {
            layout: Box::new(layout.clone()),
            dtype,
            len: data.len(),
        };
        if !(data.as_ptr() as usize).is_multiple_of(dtype.size()) {
            return Err(err());
        }
        if let Some((lo, hi)) = extent {
            let n_elems = (data.len() / dtype.size()) as isize;
            if lo < 0 || hi > n_elems {
                return Err(err());
            }
        }
        Ok(TensorRef {
            dtype,
            layout,
            data,
        })
    }

    /// Dims.
    pub fn shape(&self) -> &'a [usize] {
        &self.layout.shape
    }

    /// The whole buffer as elements of `T` (index it with the layout).
    /// Returns `None` if the dtype differs.
    pub fn elems<T: Element>(&self) -> Option<&'a [T]> {
        if self.dtype != T::DTYPE {
            return None;
        }
        // SAFETY: `new` checked alignment; the buffer holds valid `T`s written by a
        // kernel or a checked constructor; the length is rounded down to whole elements.
        Some(unsafe {
            std::slice::from_raw_parts(
                self.data.as_ptr().cast::<T>(),
                self.data.len() / T::DTYPE.size(),
            )
        })
    }

    /// The elements when the tensor is contiguous: exactly `numel` of them from the offset.
    pub fn contiguous_elems<T: Element>(&self) -> Option<&'a [T]> {
        if !self.layout.is_contiguous() {
            return None;
        }
        let all = self.elems::<T>()?;
        let start = self.layout.offset;
        all.get(start..start + self.layout.numel())
    }

    /// Reads element `i` of a flattened (row-major) index, following strides.
    /// Slow: for small tensors such as shapes and scalars.
    pub fn get_flat<T: Element>(&self, mut i: usize) -> Option<T> {
        let all = self.elems::<T>()?;
        let mut pos = self.layout.offset as isize;
        for d in (0..self.layout.rank()).rev() {
            let n = self.layout.shape[d];
            pos += (i % n) as isize * self.layout.strides[d];
            i /= n;
        }
        all.get(usize::try_from(pos).ok()?).copied()
    }

    /// All elements as i64 (for shape-like inputs: i64 or i32 dtype).
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        let n = self.layout.numel();
        match self.dtype {
            DType::I64 => (0..n).map(|i| self.get_flat::<i64>(i)).collect(),
            DType::I32 => (0..n)
                .map(|i| self.get_flat::<i32>(i).map(i64::from))
                .collect(),
            _ => None,
        }
    }
}

/// A contiguous output tensor being written.
#[derive(Debug)]
pub struct TensorMut<'a> {
    /// element type
    pub dtype: DType,
    /// dims (row-major contiguous)
    pub shape: &'a [usize],
    /// exactly `numel * dtype.size()` bytes
    pub data: &'a mut [u8],
}

impl TensorMut<'_> {
    /// The output as elements of `T`; `None` if the dtype differs or the buffer is misaligned.
    pub fn elems_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        if self.dtype != T::DTYPE || !(self.data.as_ptr() as usize).is_multiple_of(T::DTYPE.size())
        {
            return None;
        }
        let n = self.data.len() / T::DTYPE.size();
        // SAFETY: aligned (checked), in bounds, and every bit pattern written through
        // `&mut [T]` is a valid `T`; bool outputs are only written with `bool` values.
        Some(unsafe { std::slice::from_raw_parts_mut(self.data.as_mut_ptr().cast::<T>(), n) })
    }
}
