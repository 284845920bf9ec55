//! [`Pool`]: the intra-op thread pool of a [`crate::Module`] (`Options::threads`
//! threads: the calling thread and `threads − 1` persistent workers).
//!
//! [`Pool::run`] runs `n` pieces of one op, `f(0) … f(n − 1)`: the caller posts the
//! job, takes pieces itself, and returns when every piece is done. The pieces are
//! cut into one contiguous home block per thread (the caller's first): each thread
//! runs its own block in order, then takes what is left of the others'. Ops split
//! along the same dim so hand the same rows to the same thread, op after op, and
//! an op reads what the one before it wrote from its own core's cache (claiming
//! pieces from one shared counter sent a layer norm's rows to the other core about
//! half the time: at two threads it ran slower than at one). Workers spin for a
//! short while after a job (ops come back to back) and then sleep on a condition
//! variable. Posting a job allocates nothing, so the interpreter's steady-state
//! no-allocation guarantee holds with threads too (a `rayon` pool's injector
//! allocates a block every 63 jobs posted from outside the pool).
//!
//! Many Runtimes may share one pool: a caller that finds it busy with another
//! Runtime's job runs its own pieces on its own thread (the pieces, and so the
//! results, are the same either way).
//!
//! **Invariant:** which pieces an op is split into never depends on the pool: the
//! pool only decides which thread runs which piece, so results do not depend on the
//! thread count.
//! **Invariant:** a job's closure is called only for pieces claimed under that job's
//! generation, and `run` returns only after all of them finished, so no worker uses
//! the closure after `run` returned.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps.
const SPIN: Duration = Duration::from_micros(50);

/// One piece runner, lifetime-erased (see the module invariant).
type Piece = dyn Fn(usize) + Sync;

/// A posted job: the erased closure and its piece count.
#[derive(Clone, Copy)]
struct Job {
    f: *const Piece,
    n: usize,
}

// SAFETY: `f` points at a `Sync` closure that outlives every use (module invariant).
unsafe impl Send for Job {}

struct Shared {
    /// the current job and its generation (`None` between jobs)
    job: Mutex<(u64, Option<Job>)>,
    wake: Condvar,
    /// per home block: `generation << 32 | pieces of it claimed`
    tickets: Box<[AtomicU64]>,
    /// pieces of the current job finished
    finished: AtomicUsize,
    /// the current job's generation (read by spinning workers without the lock)
    generation: AtomicU64,
    /// workers waiting on `wake` (counted under the `job` lock)
    sleepers: AtomicUsize,
    /// a panic payload from a worker's piece
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    shutdown: AtomicBool,
}

impl Shared {
    /// No job yet; one home block per thread.
    fn new(threads: usize) -> Shared {
        Shared {
            job: Mutex::new((0, None)),
            wake: Condvar::new(),
            tickets: (0..threads.max(1)).map(|_| AtomicU64::new(0)).collect(),
            finished: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            sleepers: AtomicUsize::new(0),
            panic: Mutex::new(None),
            shutdown: AtomicBool::new(false),
        }
    }
}

/// The intra-op pool of a module.
pub struct Pool {
    threads: usize,
    shared: Arc<Shared>,
    /// held by the Runtime whose job the pool runs
    busy: Mutex<()>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool of `threads` threads in all (the caller and `threads − 1` workers;
    /// `0` counts as 1). A worker that cannot be spawned is left out.
    pub fn new(threads: usize) -> Pool {
        let shared = Arc::new(Shared::new(threads));
        let workers: Vec<_> = (1..threads.max(1))
            .filter_map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("shapejit-intra-{i}"))
                    .spawn(move || worker(&shared, i))
                    .ok()
            })
            .collect();
        Pool {
            threads: workers.len() + 1,
            shared,
            busy: Mutex::new(()),
            workers,
        }
    }

    /// Threads that run pieces (the caller included).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f(i)` for every `i < n`, on this thread and the workers; returns when
    /// all are done. A panic in a piece is resumed here.
    pub fn run(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        if n <= 1 || self.workers.is_empty() {
            (0..n).for_each(f);
            return;
        }
        let _busy = match self.busy.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                (0..n).for_each(f);
                return;
            }
        };
        let shared = &*self.shared;
        // SAFETY: only the lifetime is erased; `run` does not return before every
        // piece claimed under this job finished (module invariant), and no piece
        // can be claimed after that.
        let erased: *const Piece = unsafe { std::mem::transmute(f as *const _) };
        let job = Job { f: erased, n };
        let generation = {
            let mut slot = lock(&shared.job);
            let generation = slot.0.wrapping_add(1) & 0xffff_ffff;
            shared.finished.store(0, Ordering::Relaxed);
            for ticket in &shared.tickets {
                ticket.store(generation << 32, Ordering::Release);
            }
            *slot = (generation, Some(job));
            shared.generation.store(generation, Ordering::Release);
            if shared.sleepers.load(Ordering::Acquire) > 0 {
                shared.wake.notify_all();
            }
            generation
        };
        while let Some(i) = claim(shared, generation, n, 0) {
            run_piece(shared, job, i);
        }
        // Every piece is claimed; wait for those the workers run.
        let mut spins = 0u32;
        while shared.finished.load(Ordering::Acquire) < n {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        lock(&shared.job).1 = None;
        if let Some(payload) = lock(&shared.panic).take() {
            resume_unwind(payload);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        {
            let _job = lock(&self.shared.job);
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The next unclaimed piece of job `generation` (of `n` pieces) for the thread
/// whose home block is `home`: from its own block, else from the blocks after it.
fn claim(shared: &Shared, generation: u64, n: usize, home: usize) -> Option<usize> {
    let blocks = shared.tickets.len();
    (0..blocks).find_map(|b| {
        let block = (home + b) % blocks;
        let (lo, hi) = (block * n / blocks, (block + 1) * n / blocks);
        claim_in(&shared.tickets[block], generation, hi - lo).map(|i| lo + i)
    })
}

/// The next unclaimed of `len` pieces counted by `ticket` under `generation`.
fn claim_in(ticket: &AtomicU64, generation: u64, len: usize) -> Option<usize> {
    let mut t = ticket.load(Ordering::Acquire);
    loop {
        let next = (t & 0xffff_ffff) as usize;
        if t >> 32 != generation || next >= len {
            return None;
        }
        match ticket.compare_exchange_weak(t, t + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(next),
            Err(now) => t = now,
        }
    }
}

/// Runs one claimed piece and counts it finished (also when it panics).
fn run_piece(shared: &Shared, job: Job, i: usize) {
    // SAFETY: piece `i` was claimed under the job's generation and is not yet
    // counted finished, so `run` is still waiting and the closure is alive.
    let f = unsafe { &*job.f };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| f(i))) {
        lock(&shared.panic).get_or_insert(payload);
    }
    shared.finished.fetch_add(1, Ordering::AcqRel);
}

/// Worker `home` (1 ..): runs pieces of each job, its home block first.
fn worker(shared: &Shared, home: usize) {
    let mut seen = 0u64;
    loop {
        // Spin briefly for the next job, then sleep.
        let start = Instant::now();
        let mut spins = 0u32;
        while shared.generation.load(Ordering::Acquire) == seen
            && !shared.shutdown.load(Ordering::Acquire)
        {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) && start.elapsed() > SPIN {
                break;
            }
            std::hint::spin_loop();
        }
        let job = {
            let mut guard = lock(&shared.job);
            while guard.0 == seen && !shared.shutdown.load(Ordering::Acquire) {
                shared.sleepers.fetch_add(1, Ordering::AcqRel);
                guard = shared.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
                shared.sleepers.fetch_sub(1, Ordering::AcqRel);
            }
            if shared.shutdown.load(Ordering::Acquire) {
                return;
            }
            seen = guard.0;
            guard.1
        };
        if let Some(job) = job {
            while let Some(i) = claim(shared, seen, job.n, home) {
                run_piece(shared, job, i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Pool, Shared, claim};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn threads_claim_their_home_block_first_then_the_others() {
        let shared = Shared::new(3);
        let generation = 5;
        for ticket in &shared.tickets {
            ticket.store(generation << 32, Ordering::Relaxed);
        }
        // 8 pieces in blocks [0, 2), [2, 5), [5, 8)
        let order = |home| claim(&shared, generation, 8, home);
        assert_eq!(order(1), Some(2));
        assert_eq!(order(2), Some(5));
        assert_eq!(order(0), Some(0));
        assert_eq!(order(0), Some(1));
        // the caller's block is done: it goes on with the next one's
        assert_eq!(order(0), Some(3));
        assert_eq!(order(1), Some(4));
        assert_eq!(order(1), Some(6));
        assert_eq!(order(2), Some(7));
        assert_eq!(order(0), None);
        assert_eq!(order(2), None);
        // a stale generation claims nothing
        let shared = Shared::new(2);
        assert_eq!(claim(&shared, 1, 4, 0), None);
    }

    #[test]
    fn every_piece_runs_once_for_any_thread_count() {
        for threads in [1, 2, 3, 5] {
            let pool = Pool::new(threads);
            assert_eq!(pool.threads(), threads);
            for n in [0, 1, 2, 7, 64] {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                for _ in 0..50 {
                    pool.run(n, &|i| {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    });
                }
                assert!(
                    hits.iter().all(|h| h.load(Ordering::Relaxed) == 50),
                    "{threads} {n}"
                );
            }
        }
    }

    #[test]
    fn runtimes_on_many_threads_share_one_pool() {
        let pool = Pool::new(2);
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        pool.run(9, &|i| {
                            total.fetch_add(i + 1, Ordering::Relaxed);
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 4 * 200 * 45);
    }

    #[test]
    fn a_panicking_piece_panics_the_caller_and_the_pool_keeps_working() {
        let pool = Pool::new(2);
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(8, &|i| assert!(i != 5, "piece 5"));
        }));
        assert!(res.is_err());
        let n = AtomicUsize::new(0);
        pool.run(8, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 8);
    }
}
