//! The policy state machine driven directly: observations in, requests out, with a
//! fake cache — no threads, no locks, no compiles.

use super::*;
use shapejit_bytecode::{Pc, Reg};
use shapejit_ir::DType;
use shapejit_vm::shape_key::KeyPart;

/// What a slot's cache holds, as plain lists.
#[derive(Default)]
struct FakeCache {
    keys: Vec<Arc<ShapeKey>>,
    families: Vec<FamilySig>,
}

impl Installed for FakeCache {
    fn covers(&self, key: &Arc<ShapeKey>) -> bool {
        self.covers_specifically(key)
            || FamilySig::of(key, BatchRule::Iteration)
                .is_some_and(|(s, _)| self.families.contains(&s))
    }
    fn covers_specifically(&self, key: &Arc<ShapeKey>) -> bool {
        self.keys.iter().any(|k| Arc::ptr_eq(k, key))
    }
    fn has_family(&self, sig: &FamilySig) -> bool {
        self.families.contains(sig)
    }
    fn kernels(&self) -> usize {
        self.keys.len() + self.families.len()
    }
}

/// `[batch, 16]` contiguous plus a `[16]` bias: a broadcast, so never weak.
fn key(batch: usize) -> Arc<ShapeKey> {
    let part = |shape: &[usize], strides: &[isize]| KeyPart {
        dtype: DType::F32,
        shape: shape.into(),
        strides: strides.into(),
        contiguous: true,
    };
    Arc::new(ShapeKey {
        inputs: [part(&[batch, 16], &[16, 1]), part(&[16], &[1])]
            .into_iter()
            .collect(),
    })
}

fn region(kind: RegionKind) -> Region {
    Region {
        id: RegionId(3),
        kind,
        first_pc: Pc(0),
        len: 4,
        inputs: vec![Reg(0), Reg(1)],
        outputs: vec![Reg(2)],
        slot: SlotId(5),
    }
}

/// An observation of a key that is cheap to interpret (`K` = the full threshold).
fn seen(in_window: u32) -> Observation {
    Observation {
        in_window,
        total: u64::from(in_window),
        mean_ns: 100,
        min_ns: 90,
    }
}

fn options() -> Options {
    Options {
        compile: CompileMode::Sync,
        families: false,
        ..Options::default()
    }
}

const SLOT: SlotId = SlotId(5);

const SERVED: Served = Served {
    mean_ns: 1000,
    baseline_ps: 7,
};

#[test]
fn expensive_regions_promote_sooner() {
    assert_eq!(promote_count(8, 3, 100), 8);
    assert_eq!(promote_count(8, 3, 10_000_000), 2);
    assert_eq!(promote_count(8, 3, 60_000), 4);
    assert_eq!(promote_count(1, 3, 100), 1);
    assert!(promote_count(8, 3, 0) <= 8);
}

#[test]
fn demotes_slower_kernels_at_check_points() {
    // fastest kernel run: 1000 ps per element
    assert!(too_slow(32, 1000, 600), "1.67x slower");
    assert!(too_slow(32, 1000, 880), "1.14x slower");
    assert!(!too_slow(32, 1000, 950), "1.05x is within the noise margin");
    assert!(!too_slow(64, 1000, 2000), "2x faster");
    assert!(!too_slow(31, 1000, 10), "not a check point");
    assert!(!too_slow(32, 1000, 0), "no baseline");
}

#[test]
fn a_key_is_requested_once_at_the_threshold() {
    let (opts, cache, r, k) = (
        options(),
        FakeCache::default(),
        region(RegionKind::Elementwise),
        key(4),
    );
    let mut p = SlotPolicy::default();
    for n in 1..opts.promote_threshold {
        assert!(
            p.observe(&opts, &cache, SLOT, &r, &k, seen(n)).is_empty(),
            "n = {n}"
        );
    }
    let reqs = p.observe(&opts, &cache, SLOT, &r, &k, seen(opts.promote_threshold));
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(
        (req.slot, req.region, req.kind.clone()),
        (SLOT, RegionId(3), Kind::Exact)
    );
    assert!(Arc::ptr_eq(&req.key, &k));
    assert_eq!(req.target, Target::key(&k));
    assert_eq!(req.benefit, 800, "count in window × mean ns");
    assert_eq!(req.baseline_ps, 90 * 1000 / (4 * 16 + 16));
    assert_eq!(p.pending(), 1);
    // pending: not asked again
    assert!(p.observe(&opts, &cache, SLOT, &r, &k, seen(9)).is_empty());
    p.finished(req, Outcome::Installed);
    assert_eq!(p.pending(), 0);
    // installed: the cache covers it
    let installed = FakeCache {
        keys: vec![k.clone()],
        ..FakeCache::default()
    };
    assert!(
        p.observe(&opts, &installed, SLOT, &r, &k, seen(10))
            .is_empty()
    );
}

#[test]
fn a_failed_key_is_never_requested_again_nor_its_family() {
    let (opts, cache, r) = (
        options(),
        FakeCache::default(),
        region(RegionKind::Elementwise),
    );
    let mut p = SlotPolicy::default();
    let k = key(4);
    let req = p
        .observe(&opts, &cache, SLOT, &r, &k, seen(8))
        .pop()
        .unwrap();
    p.finished(&req, Outcome::Failed);
    assert!(p.observe(&opts, &cache, SLOT, &r, &k, seen(20)).is_empty());
    // another batch of the same family shares the region and layout that failed
    assert!(
        p.observe(&opts, &cache, SLOT, &r, &key(7), seen(20))
            .is_empty()
    );
    // demotion likewise
    let mut p = SlotPolicy::default();
    let req = p
        .observe(&opts, &cache, SLOT, &r, &k, seen(8))
        .pop()
        .unwrap();
    p.finished(&req, Outcome::Installed);
    p.demoted(req.target.clone());
    assert!(p.observe(&opts, &cache, SLOT, &r, &k, seen(20)).is_empty());
}

#[test]
fn a_dropped_request_can_be_made_again() {
    let (opts, cache, r, k) = (
        options(),
        FakeCache::default(),
        region(RegionKind::Elementwise),
        key(4),
    );
    let mut p = SlotPolicy::default();
    let req = p
        .observe(&opts, &cache, SLOT, &r, &k, seen(8))
        .pop()
        .unwrap();
    p.finished(&req, Outcome::Dropped);
    assert_eq!(p.observe(&opts, &cache, SLOT, &r, &k, seen(8)).len(), 1);
}

#[test]
fn a_family_is_requested_at_its_third_batch_size() {
    let opts = Options {
        families: true,
        ..options()
    };
    let (cache, r) = (FakeCache::default(), region(RegionKind::Elementwise));
    let mut p = SlotPolicy::default();
    let (k1, k5, k9) = (key(1), key(5), key(9));
    assert!(p.observe(&opts, &cache, SLOT, &r, &k1, seen(1)).is_empty());
    assert!(p.observe(&opts, &cache, SLOT, &r, &k5, seen(1)).is_empty());
    assert!(
        p.observe(&opts, &cache, SLOT, &r, &k5, seen(2)).is_empty(),
        "still two sizes"
    );
    let reqs = p.observe(&opts, &cache, SLOT, &r, &k1, seen(2));
    assert!(reqs.is_empty(), "a batch seen before adds no size");
    let reqs = p.observe(&opts, &cache, SLOT, &r, &k9, seen(1));
    assert_eq!(reqs.len(), 1);
    let (sig, _) = FamilySig::of(&k9, BatchRule::Iteration).unwrap();
    assert_eq!(reqs[0].kind, Kind::Family(sig.clone()));
    assert!(
        Arc::ptr_eq(&reqs[0].key, &k9),
        "the latest key with batch > 1"
    );
    // a family request and a key request in one observation: the family goes first
    let mut q = SlotPolicy::default();
    for (b, n) in [(2, 1), (3, 1)] {
        assert!(
            q.observe(&opts, &cache, SLOT, &r, &key(b), seen(n))
                .is_empty()
        );
    }
    let hot = key(4);
    let reqs = q.observe(&opts, &cache, SLOT, &r, &hot, seen(8));
    assert_eq!(reqs.len(), 1);
    assert!(matches!(reqs[0].kind, Kind::Family(_)));
    // the family is installed: its keys are covered, no request for them
    let with_family = FakeCache {
        families: vec![sig],
        ..FakeCache::default()
    };
    let mut p = SlotPolicy::default();
    for b in [2, 3, 4] {
        assert!(
            p.observe(&opts, &with_family, SLOT, &r, &key(b), seen(8))
                .is_empty()
        );
    }
}

#[test]
fn family_served_keys_get_their_own_kernel_when_hot_and_there_is_room() {
    let opts = options();
    let (cache, r, k) = (
        FakeCache::default(),
        region(RegionKind::Elementwise),
        key(4),
    );
    let mut p = SlotPolicy::default();
    for _ in 1..opts.promote_threshold {
        assert!(p.family_call(&opts, &cache, SLOT, &r, &k, SERVED).is_none());
    }
    let req = p.family_call(&opts, &cache, SLOT, &r, &k, SERVED).unwrap();
    assert_eq!(req.kind, Kind::Exact);
    assert_eq!(req.benefit, 8 * 1000 * FAMILY_SAMPLE);
    assert_eq!(req.baseline_ps, 7);
    assert!(
        p.family_call(&opts, &cache, SLOT, &r, &k, SERVED).is_none(),
        "pending"
    );
    // a full cache (the family and one more would not fit): no request
    let full = FakeCache {
        keys: (0..opts.cache_capacity - 1).map(key).collect(),
        ..FakeCache::default()
    };
    let mut p = SlotPolicy::default();
    for _ in 0..3 * opts.promote_threshold {
        assert!(p.family_call(&opts, &full, SLOT, &r, &k, SERVED).is_none());
    }
}

#[test]
fn family_calls_are_sampled_unless_compiling_is_off() {
    let opts = options();
    let sampled: Vec<u64> = (0..20).filter(|&c| samples_family_call(&opts, c)).collect();
    assert_eq!(sampled, vec![0, FAMILY_SAMPLE, 2 * FAMILY_SAMPLE]);
    let off = Options {
        compile: CompileMode::Off,
        ..opts
    };
    assert!((0..20).all(|c| !samples_family_call(&off, c)));
}

#[test]
fn requests_go_stale_when_covered_or_unseen_for_two_windows() {
    let opts = Options {
        window: 4,
        ..options()
    };
    let (cache, r, k) = (
        FakeCache::default(),
        region(RegionKind::Elementwise),
        key(4),
    );
    let mut p = SlotPolicy::default();
    let req = p
        .observe(&opts, &cache, SLOT, &r, &k, seen(8))
        .pop()
        .unwrap();
    assert!(!p.is_stale(&opts, &cache, &req));
    let other = key(6);
    for n in 1..=8 {
        p.observe(&opts, &cache, SLOT, &r, &other, seen(n.min(3)));
    }
    assert!(
        !p.is_stale(&opts, &cache, &req),
        "8 observations ago: within 2 windows"
    );
    p.observe(&opts, &cache, SLOT, &r, &other, seen(3));
    assert!(p.is_stale(&opts, &cache, &req), "9 observations ago");
    let installed = FakeCache {
        keys: vec![k.clone()],
        ..FakeCache::default()
    };
    let mut p = SlotPolicy::default();
    let req = p
        .observe(&opts, &cache, SLOT, &r, &k, seen(8))
        .pop()
        .unwrap();
    assert!(p.is_stale(&opts, &installed, &req));
    // a family kernel covering the key does not make the key's own request stale
    let (sig, _) = FamilySig::of(&k, BatchRule::Iteration).unwrap();
    let family = FakeCache {
        families: vec![sig.clone()],
        ..FakeCache::default()
    };
    assert!(!p.is_stale(&opts, &family, &req));
    // a family request never ages, and is stale once its family is installed
    let fam = Request {
        kind: Kind::Family(sig.clone()),
        target: Target::Family(sig),
        ..req
    };
    for _ in 0..100 {
        p.observe(&opts, &cache, SLOT, &r, &other, seen(3));
    }
    assert!(!p.is_stale(&opts, &cache, &fam));
    assert!(p.is_stale(&opts, &family, &fam));
}

#[test]
fn weak_guards_for_contiguous_equal_shapes_when_allowed() {
    let part = KeyPart {
        dtype: DType::F32,
        shape: [4, 16].as_slice().into(),
        strides: [16, 1].as_slice().into(),
        contiguous: true,
    };
    let same = ShapeKey {
        inputs: [part.clone(), part].into_iter().collect(),
    };
    let ew = region(RegionKind::Elementwise);
    assert!(matches!(key_kind(&options(), &ew, &same), Kind::Weak(_)));
    let strong = Options {
        guard: GuardPolicy::Strong,
        ..options()
    };
    assert_eq!(key_kind(&strong, &ew, &same), Kind::Exact);
    assert_eq!(key_kind(&options(), &ew, &key(4)), Kind::Exact, "broadcast");
    assert_eq!(
        key_kind(&options(), &region(RegionKind::Reduction), &same),
        Kind::Exact
    );
}

#[test]
fn the_queue_pops_the_largest_benefit_first() {
    let (opts, cache, r) = (
        options(),
        FakeCache::default(),
        region(RegionKind::Elementwise),
    );
    let mut p = SlotPolicy::default();
    let mut q = Queue::default();
    for (b, mean) in [(1, 300), (2, 900), (3, 100)] {
        let obs = Observation {
            mean_ns: mean,
            ..seen(8)
        };
        q.push(
            p.observe(&opts, &cache, SLOT, &r, &key(b), obs)
                .pop()
                .unwrap(),
        );
    }
    let order: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|r| r.benefit).collect();
    assert_eq!(order, vec![7200, 2400, 800]);
    assert!(q.is_empty());
}

/// A slot's cache as an LRU of exact keys that installs every request at once (sync
/// compiles), with the window counts the profiler would report.
struct Simulation {
    opts: Options,
    policy: SlotPolicy,
    lru: Vec<Arc<ShapeKey>>,
    keys: Vec<Arc<ShapeKey>>,
    recent: VecDeque<usize>,
    requests: usize,
}

impl Simulation {
    fn new(n_keys: usize) -> Simulation {
        Simulation {
            opts: options(),
            policy: SlotPolicy::default(),
            lru: Vec::new(),
            // interned: one Arc per batch size
            keys: (1..=n_keys).map(key).collect(),
            recent: VecDeque::new(),
            requests: 0,
        }
    }

    /// One call with key `k`: served when cached, else interpreted and observed.
    fn call(&mut self, k: usize) {
        let key = self.keys[k].clone();
        if let Some(i) = self.lru.iter().position(|c| Arc::ptr_eq(c, &key)) {
            let hit = self.lru.remove(i);
            self.lru.push(hit);
            return;
        }
        self.recent.push_back(k);
        if self.recent.len() > self.opts.window {
            self.recent.pop_front();
        }
        let in_window = self.recent.iter().filter(|&&r| r == k).count() as u32;
        let cache = FakeCache {
            keys: self.lru.clone(),
            ..FakeCache::default()
        };
        // an expensive region: K = 2
        let obs = Observation {
            in_window,
            total: 0,
            mean_ns: 10_000_000,
            min_ns: 10_000_000,
        };
        let r = region(RegionKind::MatmulEpilogue);
        for req in self.policy.observe(&self.opts, &cache, SLOT, &r, &key, obs) {
            self.requests += 1;
            self.policy.finished(&req, Outcome::Installed);
            self.lru.push(req.key.clone());
            if self.lru.len() > self.opts.cache_capacity {
                self.lru.remove(0);
            }
        }
    }
}

/// Uniform batches in `1..=n` from a fixed LCG.
fn jitter(n: usize, calls: usize) -> impl Iterator<Item = usize> {
    let mut state = 0x2545_f491_u64;
    (0..calls).map(move |_| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % n
    })
}

#[test]
fn a_churning_slot_stops_requesting_exact_kernels() {
    let mut sim = Simulation::new(512);
    for k in jitter(512, 3000) {
        sim.call(k);
    }
    assert!(sim.policy.churning(&sim.opts));
    // the first window fills with distinct keys long before any of them repeats
    assert!(
        sim.requests <= 2,
        "{} exact requests under jitter:1..512",
        sim.requests
    );
}

#[test]
fn a_settled_slot_gets_its_kernels() {
    let mut sim = Simulation::new(4);
    for k in (0..400).map(|i| i % 4) {
        sim.call(k);
    }
    assert!(!sim.policy.churning(&sim.opts));
    assert_eq!(sim.requests, 4, "one kernel per key");
    assert_eq!(sim.lru.len(), 4);
}

#[test]
fn the_budget_bounds_an_lru_thrash() {
    // one key more than the cache holds, in a cycle: LRU evicts each kernel just
    // before its key comes back, while the keys repeat too often to count as churn
    let n = 9;
    let mut sim = Simulation::new(n);
    let calls = 6400;
    for k in (0..calls).map(|i| i % n) {
        sim.call(k);
    }
    assert!(!sim.policy.churning(&sim.opts));
    let bound = budget(&sim.opts) + calls / sim.opts.window;
    assert!(
        sim.requests > sim.opts.cache_capacity,
        "the thrash does compile"
    );
    assert!(
        sim.requests <= bound,
        "{} requests, bound {bound}",
        sim.requests
    );
}

#[test]
fn sampled_family_calls_count_toward_churn() {
    let (opts, cache, r) = (
        options(),
        FakeCache::default(),
        region(RegionKind::Elementwise),
    );
    let mut p = SlotPolicy::default();
    let keys: Vec<Arc<ShapeKey>> = (1..=512).map(key).collect();
    let mut requests = 0;
    for k in jitter(512, 3000) {
        requests += p
            .family_call(&opts, &cache, SLOT, &r, &keys[k], SERVED)
            .into_iter()
            .count();
    }
    assert!(p.churning(&opts));
    assert_eq!(requests, 0);
    // the workload settles on one batch: the window turns over, and the key's own
    // kernel is requested
    let hot = key(7);
    let reqs: usize = (0..200)
        .map(|_| {
            p.family_call(&opts, &cache, SLOT, &r, &hot, SERVED)
                .into_iter()
                .count()
        })
        .sum();
    assert!(!p.churning(&opts));
    assert_eq!(reqs, 1);
}
