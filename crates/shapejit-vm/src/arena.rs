//! 64-byte-aligned, zero-initialized byte buffers: one per storage group of a
//! [`crate::Runtime`]'s arena.
//!
//! **Invariants:** a buffer's pointer is 64-byte aligned (also when empty) and
//! its `cap` bytes are initialized; buffers only grow (a run with the shapes of
//! an earlier run allocates nothing).

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

const ALIGN: usize = 64;

/// Time spent allocating arena buffers, ns, process-wide (only growth allocates).
static ALLOC_NS: AtomicU64 = AtomicU64::new(0);

/// Total time this process has spent allocating arena buffers, in ns (for
/// `shapejit run --profile`: read it before and after the runs).
pub fn alloc_ns() -> u64 {
    ALLOC_NS.load(Ordering::Relaxed)
}

/// An owned, aligned, zero-initialized byte buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
}

// SAFETY: the buffer owns its memory exclusively, like a `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl Default for AlignedBuf {
    fn default() -> AlignedBuf {
        // An aligned, non-null pointer for zero-length slices; never dereferenced.
        let dangling = std::ptr::without_provenance_mut::<u8>(ALIGN);
        // Invariant: ALIGN is non-zero, so the pointer is non-null.
        AlignedBuf {
            ptr: NonNull::new(dangling).unwrap_or(NonNull::dangling()),
            cap: 0,
        }
    }
}

impl AlignedBuf {
    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    fn allocate(bytes: usize) -> Option<(NonNull<u8>, usize)> {
        let cap = bytes.checked_next_multiple_of(ALIGN)?;
        let layout = Layout::from_size_align(cap, ALIGN).ok()?;
        let start = std::time::Instant::now();
        // SAFETY: `cap > 0` (callers pass `bytes > self.cap >= 0`, so `bytes >= 1`).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        ALLOC_NS.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        NonNull::new(ptr).map(|p| (p, cap))
    }

    /// Makes room for `bytes` bytes; contents are not preserved when it grows.
    /// Returns false when the allocation fails or the size overflows.
    pub fn ensure(&mut self, bytes: usize) -> bool {
        if bytes <= self.cap {
            return true;
        }
        let Some((ptr, cap)) = AlignedBuf::allocate(bytes) else {
            return false;
        };
        *self = AlignedBuf { ptr, cap };
        true
    }

    /// Makes room for `bytes` bytes, keeping the current contents (grows at
    /// least geometrically). Returns false when the allocation fails.
    pub fn ensure_preserving(&mut self, bytes: usize) -> bool {
        if bytes <= self.cap {
            return true;
        }
        let want = bytes.max(self.cap.saturating_mul(2));
        let Some((ptr, cap)) = AlignedBuf::allocate(want) else {
            return false;
        };
        // SAFETY: both regions are valid for `self.cap` bytes and distinct allocations.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), ptr.as_ptr(), self.cap) };
        *self = AlignedBuf { ptr, cap };
        true
    }

    /// All `capacity` bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid and initialized for `cap` bytes (or dangling-aligned with cap 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }

    /// All `capacity` bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.cap > 0 {
            // SAFETY: allocated in `allocate` with exactly this size and alignment.
            unsafe {
                alloc::dealloc(
                    self.ptr.as_ptr(),
                    Layout::from_size_align_unchecked(self.cap, ALIGN),
                )
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_aligned_and_preserves_on_request() {
        let mut b = AlignedBuf::default();
        assert_eq!(b.as_slice().len(), 0);
        assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
        assert!(b.ensure(10));
        assert_eq!(b.capacity(), 64);
        assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
        b.as_mut_slice()[..3].copy_from_slice(&[1, 2, 3]);
        assert!(b.ensure_preserving(100));
        assert_eq!(&b.as_slice()[..3], &[1, 2, 3]);
        assert!(b.as_slice()[3..].iter().all(|&x| x == 0));
        assert!(!b.ensure(usize::MAX));
    }
}
