//! Per-slot code cache: a small LRU of guarded kernels.
//!
//! **Invariant:** at most `capacity` entries; evicting an entry drops the cache's
//! `Arc` to the kernel, whose code is freed (`JITModule::free_memory`) when the last
//! `Arc` — possibly one a running call holds — goes away, never earlier.

use super::guard::{FamilySig, Guard};
use super::kernel::JitKernel;
use super::policy::{Installed, Target};
use shapejit_vm::shape_key::ShapeKey;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One cached kernel.
#[derive(Debug)]
pub struct Entry {
    /// which keys it serves
    pub guard: Guard,
    /// the kernel
    pub kernel: Arc<JitKernel>,
    /// the request identity it was compiled for
    pub target: Target,
    last_used: AtomicU64,
}

/// The kernels of one slot.
#[derive(Debug, Default)]
pub struct SlotCache {
    entries: Vec<Entry>,
}

impl SlotCache {
    /// The kernel serving `key`: exact entries first (pointer compare), then weak
    /// and family entries. Marks the entry used at `tick`.
    pub fn find(&self, key: &Arc<ShapeKey>, tick: u64) -> Option<Arc<JitKernel>> {
        let exact = self
            .entries
            .iter()
            .find(|e| matches!(&e.guard, Guard::Exact(k) if Arc::ptr_eq(k, key)));
        let entry = exact.or_else(|| {
            self.entries
                .iter()
                .find(|e| !matches!(e.guard, Guard::Exact(_)) && e.guard.matches(key).is_some())
        })?;
        entry.last_used.store(tick, Ordering::Relaxed);
        Some(entry.kernel.clone())
    }

    /// Inserts a kernel; returns the evicted least-recently-used entry when full.
    pub fn insert(
        &mut self,
        guard: Guard,
        kernel: Arc<JitKernel>,
        target: Target,
        tick: u64,
        capacity: usize,
    ) -> Option<Entry> {
        let evicted = if self.entries.len() >= capacity.max(1) {
            let lru = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed))
                .map(|(i, _)| i);
            lru.map(|i| self.entries.swap_remove(i))
        } else {
            None
        };
        self.entries.push(Entry {
            guard,
            kernel,
            target,
            last_used: AtomicU64::new(tick),
        });
        evicted
    }

    /// Removes the entry holding `kernel`.
    pub fn remove(&mut self, kernel: &Arc<JitKernel>) -> Option<Entry> {
        let i = self
            .entries
            .iter()
            .position(|e| Arc::ptr_eq(&e.kernel, kernel))?;
        Some(self.entries.swap_remove(i))
    }
}

impl Installed for SlotCache {
    fn covers(&self, key: &Arc<ShapeKey>) -> bool {
        self.entries.iter().any(|e| e.guard.matches(key).is_some())
    }

    fn covers_specifically(&self, key: &Arc<ShapeKey>) -> bool {
        self.entries
            .iter()
            .any(|e| !matches!(e.guard, Guard::Family(_)) && e.guard.matches(key).is_some())
    }

    fn has_family(&self, sig: &FamilySig) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(&e.guard, Guard::Family(s) if s == sig))
    }

    fn kernels(&self) -> usize {
        self.entries.len()
    }
}
