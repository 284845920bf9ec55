//! The tiering policy of one slot, as a pure state machine: observations in, compile
//! requests out. No threads, locks or clocks here — the executor ([`super`]) feeds it
//! under the slot's policy lock, with a view of the slot's cache ([`Installed`]).
//!
//! - **Promotion** ([`SlotPolicy::observe`]): a key seen `K` times in the slot's window
//!   becomes a compile request, where `K` shrinks from the configured threshold toward
//!   2 as the region gets more expensive to interpret:
//!   `K = clamp(⌈compile cost / mean interpreted time⌉, 2, threshold)`, with the
//!   compile cost estimated from the region's size (≈ 0.15 ms + 30 µs per op, the
//!   measured compile times of small kernels). The request is weak-guarded when the
//!   key's inputs are contiguous and equal-shaped (and the guard policy allows it),
//!   exact otherwise.
//! - **Families**: a family seen with [`FAMILY_MIN_BATCHES`] distinct batch sizes
//!   becomes a family request (represented by a key with batch > 1). The slot's
//!   [`BatchRule`] says which dim is the batch (a matmul region's product rows, never
//!   a weight's dim 0). Keys a family
//!   kernel serves are never interpreted, so one in [`FAMILY_SAMPLE`] such calls is fed
//!   to [`SlotPolicy::family_call`]: a key sampled `promote_threshold` times gets its
//!   own kernel while the cache keeps room for the family beside it.
//! - **Benefit order**: a request's benefit is its interpreted time in the window
//!   (count × mean); [`Queue`] pops the largest first.
//! - **Staleness** ([`SlotPolicy::is_stale`]): a request is dropped when its key is
//!   already served by a kernel of its own kind or was not seen in the slot's last two
//!   windows.
//! - **Churn** ([`SlotPolicy::churning`]): a slot whose recent keys do not repeat — more
//!   distinct keys among its last `window` executions than its cache holds, and fewer
//!   than two executions per key on average — requests no exact or weak kernel: each
//!   would be evicted before it paid for itself. It relies on its family (family
//!   requests are unaffected) or stays interpreted. Family-served calls that are
//!   sampled count as executions of their key, so a slot that settles is seen to.
//! - **Compile budget**: exact and weak requests spend a per-slot budget of
//!   [`budget`] (4 × max(cache capacity, 4)), refilled by one per `window` executions; so
//!   whatever the workload, a slot requests at most that many plus one per window (an
//!   LRU thrash of a few keys more than the cache holds included).
//! - **Failure and demotion** ([`SlotPolicy::finished`], [`SlotPolicy::demoted`]): a
//!   target whose compile failed, or whose kernel [`too_slow`] demoted, is never
//!   requested again; a failed key also marks its family.
//!
//! **Invariant:** `K ≤ threshold`, so `--compile sync` compiles a hot key within
//! `threshold` executions, deterministically.
//! **Invariant:** a target is pending at most once (requests are deduplicated).

use super::guard::{BatchRule, FamilySig, WeakSig};
use shapejit_bytecode::{Region, RegionId, RegionKind, SlotId};
use shapejit_vm::options::{CompileMode, GuardPolicy, Options};
use shapejit_vm::profile::Observation;
use shapejit_vm::shape_key::ShapeKey;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// One in this many calls a slot's family kernels serve is counted toward the exact
/// kernel of its key.
pub const FAMILY_SAMPLE: u64 = 8;

/// Distinct batch sizes a family needs before it is compiled.
pub const FAMILY_MIN_BATCHES: usize = 3;

/// The exact-compile budget of a slot, in cache capacities of at least 4 (see the
/// module docs).
pub const BUDGET_KERNELS: usize = 4;

/// Runs between two comparisons of a kernel's speed with the interpreter's.
pub const CHECK_EVERY: u64 = 32;

/// A kernel whose fastest run is this much slower (per element) than the fastest
/// interpreted run is demoted: 11/10, a margin for timer noise only — minima of 32
/// runs are stable, and a kernel no faster than the interpreter is not worth keeping.
pub const DEMOTE_RATIO: (u64, u64) = (11, 10);

/// What a request compiles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// a strong-guard kernel for exactly the key
    Exact,
    /// a weak-guard kernel (contiguous inputs of one shape)
    Weak(WeakSig),
    /// a family kernel (batch dim at run time)
    Family(FamilySig),
}

/// Identity of a request, for deduplication.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// an interned key (by address; interned keys live as long as their slot profile)
    Key(usize),
    /// a family
    Family(FamilySig),
}

impl Target {
    /// The target of an interned key.
    pub fn key(key: &Arc<ShapeKey>) -> Target {
        Target::Key(key_addr(key))
    }
}

/// One compile request.
#[derive(Clone, Debug)]
pub struct Request {
    /// the slot
    pub slot: SlotId,
    /// its region
    pub region: RegionId,
    /// the key (for families: a representative with batch > 1)
    pub key: Arc<ShapeKey>,
    /// what to compile
    pub kind: Kind,
    /// dedup identity
    pub target: Target,
    /// interpreted ns in the window this would save (heap order)
    pub benefit: u64,
    /// interpreted time per input element of the key, ps (the demotion baseline)
    pub baseline_ps: u64,
}

/// What the slot's code cache holds, as the policy needs to know it.
pub trait Installed {
    /// Whether some kernel serves `key`.
    fn covers(&self, key: &Arc<ShapeKey>) -> bool;
    /// Whether an exact or weak kernel (not a family) serves `key`.
    fn covers_specifically(&self, key: &Arc<ShapeKey>) -> bool;
    /// Whether a kernel has exactly this family guard.
    fn has_family(&self, sig: &FamilySig) -> bool;
    /// Number of cached kernels.
    fn kernels(&self) -> usize;
}

/// The family kernel that served a call, as [`SlotPolicy::family_call`] needs it.
#[derive(Clone, Copy, Debug)]
pub struct Served {
    /// its mean run time so far, ns
    pub mean_ns: u64,
    /// its demotion baseline, ps per input element
    pub baseline_ps: u64,
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// dropped as stale, nothing compiled
    Dropped,
    /// compiled and installed
    Installed,
    /// the compile failed (never retried)
    Failed,
}

/// Tiering state of one slot.
#[derive(Debug, Default)]
pub struct SlotPolicy {
    /// where the region's batch dim is (families)
    batch: BatchRule,
    /// interpreted executions observed
    observations: u64,
    /// per key (address): the observation count when last seen
    last_seen: HashMap<usize, u64>,
    /// per family: distinct batch sizes seen and a representative key with batch > 1
    families: HashMap<FamilySig, (Vec<usize>, Option<Arc<ShapeKey>>)>,
    /// per key (address) served by a family kernel: sampled calls counted toward its
    /// own exact kernel
    family_served: HashMap<usize, u32>,
    /// requests sent and not finished
    pending: HashSet<Target>,
    /// targets whose compilation failed or whose kernel was demoted (never retried; a
    /// key's failure also marks its family, whose other keys are then not requested)
    failed: HashSet<Target>,
    /// the keys (addresses) of the last `window` executions, oldest first
    recent: VecDeque<usize>,
    /// per key in `recent`: how often it occurs there
    recent_counts: HashMap<usize, u32>,
    /// exact and weak requests spent from the budget, net of refills
    spent: usize,
    /// executions counted toward the next refill
    since_refill: usize,
}

fn key_addr(key: &Arc<ShapeKey>) -> usize {
    Arc::as_ptr(key) as usize
}

/// Exact and weak requests a slot may make before refills: [`BUDGET_KERNELS`] ×
/// max(cache capacity, 4).
pub fn budget(options: &Options) -> usize {
    BUDGET_KERNELS * options.cache_capacity.max(4)
}

/// Estimated compile time of a region of `n_ops` instructions, ns.
pub fn compile_cost_ns(n_ops: u32) -> u64 {
    150_000 + 30_000 * u64::from(n_ops)
}

/// The promotion count for a region of `n_ops` whose key takes `mean_ns` interpreted.
pub fn promote_count(threshold: u32, n_ops: u32, mean_ns: u64) -> u32 {
    let threshold = threshold.max(1);
    let pay_back = compile_cost_ns(n_ops).div_ceil(mean_ns.max(1));
    let pay_back = u32::try_from(pay_back).unwrap_or(u32::MAX);
    pay_back.clamp(threshold.min(2), threshold)
}

/// Benefit of compiling a key: its interpreted time in the current window, ns.
pub fn benefit(in_window: u32, mean_ns: u64) -> u64 {
    u64::from(in_window).saturating_mul(mean_ns)
}

/// Whether the `calls`-th call served by a slot's family kernels is sampled.
pub fn samples_family_call(options: &Options, calls: u64) -> bool {
    options.compile != CompileMode::Off && calls.is_multiple_of(FAMILY_SAMPLE)
}

/// The demotion rule over a kernel's counters: true at a check point (every
/// [`CHECK_EVERY`] runs) when its fastest run is more than [`DEMOTE_RATIO`] slower per
/// element than the fastest interpreted run of its key.
pub fn too_slow(runs: u64, min_ps_per_elem: u64, baseline_ps_per_elem: u64) -> bool {
    if runs == 0 || !runs.is_multiple_of(CHECK_EVERY) || baseline_ps_per_elem == 0 {
        return false;
    }
    let (num, den) = DEMOTE_RATIO;
    min_ps_per_elem.saturating_mul(den) > baseline_ps_per_elem.saturating_mul(num)
}

/// Weak-guarded when the key's inputs are contiguous and equal-shaped (and the guard
/// policy allows it), exact otherwise.
pub fn key_kind(options: &Options, region: &Region, key: &ShapeKey) -> Kind {
    let weak = (region.kind == RegionKind::Elementwise)
        .then(|| WeakSig::of(key))
        .flatten();
    match (options.guard, weak) {
        (GuardPolicy::Auto, Some(sig)) => Kind::Weak(sig),
        _ => Kind::Exact,
    }
}

impl SlotPolicy {
    /// The policy of a slot whose region finds its batch dim by `batch`.
    pub fn new(batch: BatchRule) -> Self {
        Self {
            batch,
            ..Self::default()
        }
    }

    /// Requests not finished yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Records an execution of `addr` in the recent-keys window and the budget clock.
    fn record(&mut self, options: &Options, addr: usize) {
        let window = options.window.max(1);
        self.recent.push_back(addr);
        *self.recent_counts.entry(addr).or_insert(0) += 1;
        while self.recent.len() > window {
            if let Some(old) = self.recent.pop_front()
                && let Some(c) = self.recent_counts.get_mut(&old)
            {
                *c -= 1;
                if *c == 0 {
                    self.recent_counts.remove(&old);
                }
            }
        }
        self.since_refill += 1;
        if self.since_refill >= window {
            self.since_refill = 0;
            self.spent = self.spent.saturating_sub(1);
        }
    }

    /// Whether the slot's recent keys do not repeat (see the module docs).
    pub fn churning(&self, options: &Options) -> bool {
        let distinct = self.recent_counts.len();
        distinct > options.cache_capacity.max(1) && 2 * distinct > self.recent.len()
    }

    /// Spends one exact or weak request from the budget; false when none is left or
    /// the slot churns.
    fn spend(&mut self, options: &Options) -> bool {
        let budget = budget(options);
        if self.churning(options) || self.spent >= budget {
            return false;
        }
        self.spent += 1;
        true
    }

    /// The interpreter ran `region` on `key` (interned) with these window counts: the
    /// requests to send (a family request, or else one for the key).
    pub fn observe(
        &mut self,
        options: &Options,
        cache: &dyn Installed,
        slot: SlotId,
        region: &Region,
        key: &Arc<ShapeKey>,
        obs: Observation,
    ) -> Vec<Request> {
        self.observations += 1;
        let now = self.observations;
        let addr = key_addr(key);
        self.last_seen.insert(addr, now);
        self.record(options, addr);
        let mut out = Vec::new();
        let benefit = benefit(obs.in_window, obs.mean_ns);
        // The demotion baseline is the fastest interpreted run, not the mean: the
        // first runs of a key include arena growth and cold caches.
        let baseline_ps = obs.min_ns.saturating_mul(1000) / (key.numel().max(1) as u64);
        if options.families
            && let Some((sig, batch)) = FamilySig::of(key, self.batch)
        {
            let entry = self.families.entry(sig.clone()).or_default();
            if !entry.0.contains(&batch) {
                entry.0.push(batch);
            }
            if batch > 1 {
                entry.1 = Some(key.clone());
            }
            let ready = entry.0.len() >= FAMILY_MIN_BATCHES;
            let rep = entry.1.clone();
            let target = Target::Family(sig.clone());
            if let (true, Some(rep)) = (ready, rep) {
                let known = self.pending.contains(&target) || self.failed.contains(&target);
                if !known && !cache.has_family(&sig) {
                    self.pending.insert(target.clone());
                    out.push(Request {
                        slot,
                        region: region.id,
                        key: rep,
                        kind: Kind::Family(sig),
                        target,
                        benefit,
                        baseline_ps,
                    });
                }
            }
        }
        let k = promote_count(options.promote_threshold, region.len, obs.mean_ns);
        let target = Target::Key(addr);
        let family_failed = FamilySig::of(key, self.batch)
            .is_some_and(|(sig, _)| self.failed.contains(&Target::Family(sig)));
        let known =
            self.pending.contains(&target) || self.failed.contains(&target) || family_failed;
        if obs.in_window >= k
            && !known
            && out.is_empty()
            && !cache.covers(key)
            && self.spend(options)
        {
            self.pending.insert(target.clone());
            out.push(Request {
                slot,
                region: region.id,
                key: key.clone(),
                kind: key_kind(options, region, key),
                target,
                benefit,
                baseline_ps,
            });
        }
        out
    }

    /// A sampled call ([`samples_family_call`]) that a family kernel served for `key`
    /// (interned): a request for the key's own kernel once it has become hot and the
    /// cache has room beside the family.
    pub fn family_call(
        &mut self,
        options: &Options,
        cache: &dyn Installed,
        slot: SlotId,
        region: &Region,
        key: &Arc<ShapeKey>,
        family: Served,
    ) -> Option<Request> {
        let addr = key_addr(key);
        self.record(options, addr);
        let target = Target::Key(addr);
        if self.pending.contains(&target) || self.failed.contains(&target) {
            return None;
        }
        let samples = self.family_served.entry(addr).or_insert(0);
        *samples += 1;
        let samples = *samples;
        if samples < options.promote_threshold.max(1) {
            return None;
        }
        if cache.kernels() + 1 >= options.cache_capacity || !self.spend(options) {
            return None;
        }
        self.family_served.remove(&addr);
        self.pending.insert(target.clone());
        Some(Request {
            slot,
            region: region.id,
            key: key.clone(),
            kind: key_kind(options, region, key),
            target,
            benefit: benefit(samples, family.mean_ns).saturating_mul(FAMILY_SAMPLE),
            baseline_ps: family.baseline_ps,
        })
    }

    /// Whether `req` is no longer worth compiling: its key is served by a kernel of its
    /// own kind (a family serving a key does not make the key's own kernel stale:
    /// exact kernels are for the hottest keys, family-served or not), or — except for
    /// families, wanted while any batch keeps arriving — its key was not seen in the
    /// slot's last two windows.
    pub fn is_stale(&self, options: &Options, cache: &dyn Installed, req: &Request) -> bool {
        let covered = match &req.kind {
            Kind::Family(sig) => cache.has_family(sig),
            Kind::Exact | Kind::Weak(_) => cache.covers_specifically(&req.key),
        };
        if covered {
            return true;
        }
        if matches!(req.kind, Kind::Family(_)) {
            return false;
        }
        let seen = self
            .last_seen
            .get(&key_addr(&req.key))
            .copied()
            .unwrap_or(0);
        let horizon = 2 * options.window.max(1) as u64;
        self.observations.saturating_sub(seen) > horizon
    }

    /// `req` ended with `outcome`: it is no longer pending; a failure marks its target
    /// and its key's family (what failed is the region and its layout, which every key
    /// of the family shares: do not try again batch by batch).
    pub fn finished(&mut self, req: &Request, outcome: Outcome) {
        if outcome == Outcome::Failed {
            self.failed.insert(req.target.clone());
            if let Some((sig, _)) = FamilySig::of(&req.key, self.batch) {
                self.failed.insert(Target::Family(sig));
            }
        }
        self.pending.remove(&req.target);
    }

    /// The kernel compiled for `target` was demoted (slower than the interpreter): the
    /// target is never compiled again.
    pub fn demoted(&mut self, target: Target) {
        self.failed.insert(target);
    }
}

struct ByBenefit(Request);

impl PartialEq for ByBenefit {
    fn eq(&self, other: &Self) -> bool {
        self.0.benefit == other.0.benefit
    }
}
impl Eq for ByBenefit {}
impl PartialOrd for ByBenefit {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByBenefit {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.benefit.cmp(&other.0.benefit)
    }
}

/// Received requests, most beneficial first.
#[derive(Default)]
pub struct Queue {
    heap: BinaryHeap<ByBenefit>,
}

impl Queue {
    /// Adds a request.
    pub fn push(&mut self, req: Request) {
        self.heap.push(ByBenefit(req));
    }

    /// The request with the largest benefit.
    pub fn pop(&mut self) -> Option<Request> {
        self.heap.pop().map(|ByBenefit(r)| r)
    }

    /// Whether no request is queued.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests;
