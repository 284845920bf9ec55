//! 64-byte-aligned, zero-initialized byte buffers: one per storage group of a
//! [`crate::Runtime`]'s arena, grown through the runtime's [`Budget`].
//!
//! **Invariants:** a buffer's pointer is 64-byte aligned (also when empty) and
//! its `cap` bytes are initialized; buffers only grow (a run with the shapes of
//! an earlier run allocates nothing); a [`Budget`] never lets the buffers it
//! grew hold more than its limit.

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

    /// Makes room for `bytes` bytes, keeping the current contents. Returns false
    /// when the allocation fails.
    pub fn ensure_preserving(&mut self, bytes: usize) -> bool {
        if bytes <= self.cap {
            return true;
        }
        let Some((ptr, cap)) = AlignedBuf::allocate(bytes) else {
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

/// Why a [`Budget`] did not grow a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// Growing would take the bytes held over the limit.
    Limit {
        /// the bytes the buffer needed
        bytes: u128,
        /// the limit
        limit: usize,
    },
    /// The allocator refused the memory.
    Refused {
        /// the bytes asked for
        bytes: usize,
    },
}

/// The bytes the buffers of one runtime hold, against a limit
/// (`Options::max_memory`). Every buffer of the runtime grows through it.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    held: usize,
}

impl Budget {
    /// Nothing held yet.
    pub fn new(limit: usize) -> Budget {
        Budget { limit, held: 0 }
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Checks that `extra` more bytes (e.g. a returned tensor the caller is about
    /// to allocate, beside what the buffers hold) fit under the limit.
    pub fn admit(&self, extra: u128) -> Result<(), Denied> {
        if self.held as u128 + extra > self.limit as u128 {
            return Err(Denied::Limit {
                bytes: extra,
                limit: self.limit,
            });
        }
        Ok(())
    }

    /// Makes room for `bytes` in `buf` (contents not kept).
    pub fn grow(&mut self, buf: &mut AlignedBuf, bytes: u128) -> Result<(), Denied> {
        self.grow_to(buf, bytes, false)
    }

    /// Makes room for `bytes` in `buf`, keeping its contents; grows geometrically
    /// (within the limit) so repeated appends copy a linear amount.
    pub fn grow_preserving(&mut self, buf: &mut AlignedBuf, bytes: u128) -> Result<(), Denied> {
        self.grow_to(buf, bytes, true)
    }

    fn grow_to(&mut self, buf: &mut AlignedBuf, bytes: u128, preserve: bool) -> Result<(), Denied> {
        let old = buf.capacity();
        if bytes <= old as u128 {
            return Ok(());
        }
        let others = self.held - old;
        // Buffers round up to ALIGN, so the room does too (downwards).
        let room = self.limit.saturating_sub(others) / ALIGN * ALIGN;
        if bytes > room as u128 {
            return Err(Denied::Limit {
                bytes,
                limit: self.limit,
            });
        }
        // Invariant: `bytes <= room <= usize::MAX` here.
        let bytes = bytes as usize;
        let ok = if preserve {
            buf.ensure_preserving(bytes.max(old.saturating_mul(2).min(room)))
        } else {
            buf.ensure(bytes)
        };
        if !ok {
            return Err(Denied::Refused { bytes });
        }
        self.held = others + buf.capacity();
        Ok(())
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

    #[test]
    fn a_budget_keeps_buffers_under_its_limit() {
        let mut budget = Budget::new(1000);
        let (mut a, mut b) = (AlignedBuf::default(), AlignedBuf::default());
        budget.grow(&mut a, 600).unwrap();
        assert_eq!(a.capacity(), 640);
        assert_eq!(
            budget.grow(&mut b, 400),
            Err(Denied::Limit {
                bytes: 400,
                limit: 1000
            })
        );
        budget.grow(&mut b, 300).unwrap();
        assert_eq!(b.capacity(), 320);
        assert!(budget.admit(40).is_ok());
        assert!(budget.admit(41).is_err());
        // Regrowing counts the new size in place of the old one.
        assert!(budget.grow(&mut a, 680).is_err());
        budget.grow(&mut a, 640).unwrap();
        // Geometric growth stops at the limit instead of failing.
        let mut budget = Budget::new(200);
        let mut c = AlignedBuf::default();
        budget.grow_preserving(&mut c, 100).unwrap();
        assert_eq!(c.capacity(), 128);
        budget.grow_preserving(&mut c, 150).unwrap();
        assert_eq!(c.capacity(), 192);
        // Past isize::MAX no allocation can exist (an OS refusal of a smaller
        // one is not observable in release builds: LLVM may elide an unused
        // allocation and assume it succeeded).
        let huge = Budget::new(usize::MAX).grow(&mut AlignedBuf::default(), 1 << 63);
        assert_eq!(huge, Err(Denied::Refused { bytes: 1 << 63 }));
    }
}
