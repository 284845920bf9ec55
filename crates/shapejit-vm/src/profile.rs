//! Per-slot profiles and counters.
//!
//! A [`SlotProfile`] interns the slot's shape keys and keeps a sliding window of
//! the last `window` executions (a fixed ring of key indices allocated once),
//! with per-key counts in the window and total counts and time. It sits behind
//! one mutex per slot, taken once per profiled execution.
//!
//! [`SlotCounters`] are lock-free counters (relaxed atomics) that the
//! interpreter and the JIT tier bump; [`crate::Stats`] is their snapshot.
//!
//! **Invariant:** `in_window` of all keys sums to the number of ring entries in
//! use (≤ window); the ring never reallocates after creation.

use crate::shape_key::ShapeKey;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Index of an interned key within its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyIdx(pub u32);

/// What a profile knows about one shape key of a slot.
#[derive(Clone, Debug)]
pub struct KeyStats {
    /// the interned key
    pub key: Arc<ShapeKey>,
    /// executions with this key among the last `window`
    pub in_window: u32,
    /// executions with this key, ever
    pub total: u64,
    /// measured (interpreted) time with this key, ever, in ns
    pub total_ns: u64,
    /// fastest single execution with this key, ns (`u64::MAX` before the first):
    /// the steady-state cost, free of first-run effects such as arena growth
    pub min_ns: u64,
}

/// A profile observation handed to the tiering policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    /// executions with this key in the window
    pub in_window: u32,
    /// executions with this key, ever
    pub total: u64,
    /// mean interpreted time of this key, ns
    pub mean_ns: u64,
    /// fastest interpreted execution of this key, ns
    pub min_ns: u64,
}

#[derive(Debug, Default)]
struct SlotState {
    keys: Vec<KeyStats>,
    index: HashMap<Arc<ShapeKey>, KeyIdx>,
    ring: Vec<KeyIdx>,
    head: usize,
    len: usize,
}

/// The profile of one slot.
#[derive(Debug, Default)]
pub struct SlotProfile {
    state: Mutex<SlotState>,
}

impl SlotProfile {
    /// A profile with a window of `window` executions (at least 1).
    pub fn new(window: usize) -> SlotProfile {
        let state = SlotState {
            ring: vec![KeyIdx(0); window.max(1)],
            ..SlotState::default()
        };
        SlotProfile {
            state: Mutex::new(state),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // A poisoned lock only means another thread panicked mid-update of
        // counters; the counters are still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Interns a key: returns the slot's shared copy and its index.
    pub fn intern(&self, key: ShapeKey) -> (Arc<ShapeKey>, KeyIdx) {
        let mut st = self.lock();
        if let Some((k, &idx)) = st.index.get_key_value(&key) {
            return (k.clone(), idx);
        }
        let idx = KeyIdx(st.keys.len() as u32);
        let key = Arc::new(key);
        st.keys.push(KeyStats {
            key: key.clone(),
            in_window: 0,
            total: 0,
            total_ns: 0,
            min_ns: u64::MAX,
        });
        st.index.insert(key.clone(), idx);
        (key, idx)
    }

    /// Records one execution of key `idx` taking `ns`; returns the key's counts.
    pub fn record(&self, idx: KeyIdx, ns: u64) -> Observation {
        let mut st = self.lock();
        let st = &mut *st;
        if st.keys.get(idx.0 as usize).is_none() {
            return Observation {
                in_window: 0,
                total: 0,
                mean_ns: 0,
                min_ns: 0,
            };
        }
        let cap = st.ring.len();
        if st.len == cap {
            let old = st.ring[st.head];
            if let Some(k) = st.keys.get_mut(old.0 as usize) {
                k.in_window = k.in_window.saturating_sub(1);
            }
        } else {
            st.len += 1;
        }
        st.ring[st.head] = idx;
        st.head = (st.head + 1) % cap;
        let k = &mut st.keys[idx.0 as usize];
        k.in_window += 1;
        k.total += 1;
        k.total_ns = k.total_ns.saturating_add(ns);
        k.min_ns = k.min_ns.min(ns);
        Observation {
            in_window: k.in_window,
            total: k.total,
            mean_ns: k.total_ns / k.total,
            min_ns: k.min_ns,
        }
    }

    /// A copy of every key's statistics, in first-seen order.
    pub fn keys(&self) -> Vec<KeyStats> {
        self.lock().keys.clone()
    }
}

/// Lock-free per-slot counters. The interpreter fills `executions`,
/// `interp_ns`, `kernel_hits`, `guard_misses`, `kernel_ns`, `family_hits` and
/// `exact_hits`; the JIT tier fills `compiles`, `compile_us`, `compile_errors`
/// and `evictions`.
#[derive(Debug, Default)]
pub struct SlotCounters {
    /// executions of the instruction or region (interpreted or compiled)
    pub executions: AtomicU64,
    /// time spent interpreting it, ns (profiling on)
    pub interp_ns: AtomicU64,
    /// region heads served by a compiled kernel
    pub kernel_hits: AtomicU64,
    /// region heads where no compiled kernel matched (with a JIT installed)
    pub guard_misses: AtomicU64,
    /// kernels compiled for this slot
    pub compiles: AtomicU64,
    /// compile time, µs
    pub compile_us: AtomicU64,
    /// failed compilations (the slot stays interpreted)
    pub compile_errors: AtomicU64,
    /// kernels evicted from the slot's cache
    pub evictions: AtomicU64,
    /// time in compiled kernels, ns (profiling on)
    pub kernel_ns: AtomicU64,
    /// hits served by a shape-family kernel
    pub family_hits: AtomicU64,
    /// hits served by an exact-shape kernel
    pub exact_hits: AtomicU64,
    /// why the last failed compilation failed (touched only on failures and snapshots)
    pub last_compile_error: std::sync::Mutex<Option<String>>,
}

/// Lock-free module-wide counters (filled by the JIT tier).
#[derive(Debug, Default)]
pub struct GlobalCounters {
    /// compile requests waiting
    pub queue_depth: AtomicU64,
    /// compile requests dropped (stale or deduplicated)
    pub dropped_requests: AtomicU64,
    /// bytes of live compiled code
    pub live_code_bytes: AtomicU64,
    /// bytes of packed matmul weights
    pub packed_weight_bytes: AtomicU64,
    /// ops the interpreter ran in pieces (see `ops::execute_planned`)
    pub split_ops: AtomicU64,
}

/// Adds to a relaxed counter.
pub fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Reads a relaxed counter.
pub fn read(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Layout;
    use shapejit_ir::DType;

    fn key(n: usize) -> ShapeKey {
        let l = Layout::contiguous(&[n]);
        let data = vec![0u8; 4 * n];
        let t = crate::tensor::TensorRef::new(DType::F32, &l, &data).unwrap();
        ShapeKey::of(&[t])
    }

    #[test]
    fn observations_keep_mean_and_fastest_run() {
        let p = SlotProfile::new(8);
        let (_, i) = p.intern(key(4));
        let first = p.record(i, 900); // a cold first run
        assert_eq!((first.mean_ns, first.min_ns), (900, 900));
        p.record(i, 100);
        let o = p.record(i, 200);
        assert_eq!((o.mean_ns, o.min_ns), (400, 100));
    }

    #[test]
    fn window_slides_and_interning_dedups() {
        let p = SlotProfile::new(3);
        let (a1, ia) = p.intern(key(1));
        let (a2, ia2) = p.intern(key(1));
        assert!(Arc::ptr_eq(&a1, &a2));
        assert_eq!(ia, ia2);
        let (_, ib) = p.intern(key(2));
        assert_ne!(ia, ib);
        assert_eq!(p.record(ia, 10).in_window, 1);
        assert_eq!(p.record(ia, 30).in_window, 2);
        assert_eq!(p.record(ib, 5).in_window, 1);
        // the window holds 3: the 4th record evicts the first `ia`
        let o = p.record(ib, 5);
        assert_eq!(o.in_window, 2);
        let keys = p.keys();
        assert_eq!(keys[0].in_window, 1);
        assert_eq!(keys[0].total, 2);
        assert_eq!(keys[0].total_ns, 40);
        assert_eq!(keys.iter().map(|k| k.in_window).sum::<u32>(), 3);
    }
}
