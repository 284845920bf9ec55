//! The JIT tier: a [`RegionExecutor`] that compiles hot shape keys of fused regions
//! with this crate's code generators and serves region heads from per-slot code caches.
//! What to compile is decided by [`policy`], a pure state machine per slot; this module
//! feeds it under the slot's lock and carries out its requests.
//!
//! - `observe` (after the interpreter ran a region) records the key, tracks the batch
//!   sizes of each shape family, and promotes: a key seen `K` times in the window
//!   becomes a compile request — weak-guarded when its inputs are
//!   contiguous and equal-shaped (and the guard policy allows it), exact otherwise; a
//!   family seen with ≥ 3 distinct batch sizes becomes a family request.
//! - Keys served by a family kernel are never interpreted, so `lookup` samples them
//!   instead (every [`FAMILY_SAMPLE`]-th family call of a slot): a key sampled
//!   `promote_threshold` times — the hottest keys — gets its own exact (or weak)
//!   kernel, as long as the slot's cache keeps room for the family beside it.
//! - Requests are compiled on the calling thread (`CompileMode::Sync`), on the
//!   background compiler thread ([`compiler`], `Background`), or never (`Off`).
//! - `lookup` (at every region head) finds a kernel in the slot's LRU ([`cache`]):
//!   exact guards by interned-key pointer, then weak and family guards ([`guard`]).
//!
//! A kernel whose fastest run turns out more than 1.1× slower per element than the fastest
//! interpreted run of its key (measured every 32 runs) is demoted in background mode: removed from
//! the cache and never compiled again, so the slot goes back to the interpreter (sync
//! mode skips this timing heuristic to stay deterministic).
//!
//! Install with [`make_executor`] (for [`Module::with_executor`]) or [`jit_module`],
//! which also returns a [`JitHandle`] for tests (holding the compiler back, waiting
//! for it to go idle).
//!
//! **Invariant:** a compile error, an untranslatable region or a host without
//! AVX+FMA leave the slot interpreted; they are counted, never surfaced as run errors.
//! **Invariant:** runs never block on compilation in background mode.

mod cache;
mod compiler;
mod guard;
mod kernel;
pub mod policy;
mod translate;

#[cfg(test)]
mod tests;

pub use guard::{BatchRule, FamilySig, Guard, WeakSig};
pub use kernel::{Code, JitKernel, ShapeRule};
pub use policy::FAMILY_SAMPLE;
pub use translate::{Compiled, MatMulOperands, Translated, Untranslatable, batch_rule, translate};

use compiler::{Hold, Shared, SlotJit};
use crossbeam_channel::Sender;
use policy::{Installed, Request};
use shapejit_bytecode::{Program, Region, SlotId};
use shapejit_vm::hook::{GuardCtx, RegionExecutor, RegionKernel};
use shapejit_vm::module::{ExecutorEnv, Module};
use shapejit_vm::options::{CompileMode, Options};
use shapejit_vm::profile::Observation;
use shapejit_vm::shape_key::ShapeKey;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The tier-1 executor of one module.
pub struct JitExecutor {
    shared: Arc<Shared>,
    sender: Option<Sender<Request>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Test and tooling handle of an installed JIT.
#[derive(Clone)]
pub struct JitHandle {
    shared: Arc<Shared>,
}

/// Keeps the compiler thread parked until dropped (test hook).
pub struct CompilerHold {
    shared: Arc<Shared>,
}

impl Drop for CompilerHold {
    fn drop(&mut self) {
        self.shared.hold.release();
    }
}

impl JitHandle {
    /// Parks the background compiler thread (after its current compile) until the
    /// returned guard drops. Runs keep going on the interpreter meanwhile.
    pub fn hold_compiler(&self) -> CompilerHold {
        self.shared.hold.acquire();
        CompilerHold {
            shared: self.shared.clone(),
        }
    }

    /// Waits until no compile request is queued or running (false on timeout).
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        loop {
            let pending: usize = self
                .shared
                .slots
                .iter()
                .map(|s| s.policy.lock().map(|p| p.pending()).unwrap_or(0))
                .sum();
            if pending == 0 {
                return true;
            }
            if start.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Kernels currently cached in `slot`.
    pub fn cached_kernels(&self, slot: SlotId) -> usize {
        self.shared
            .slots
            .get(slot.index())
            .map(|s| s.cache.read().map(|c| c.kernels()).unwrap_or(0))
            .unwrap_or(0)
    }
}

/// A module whose region heads are served by the JIT tier (when the options select
/// it and the host supports it), plus its handle.
pub fn jit_module(
    program: Program,
    options: Options,
) -> Result<(Module, Option<JitHandle>), shapejit_vm::ModuleError> {
    let mut handle = None;
    let module = Module::with_executor(program, options, |env| {
        let (executor, h) = install(env)?;
        handle = Some(h);
        Some(executor)
    })?;
    Ok((module, handle))
}

/// The executor factory for [`Module::with_executor`]: `None` (interpreter only) on
/// hosts without AVX+FMA.
pub fn make_executor(env: &ExecutorEnv<'_>) -> Option<Arc<dyn RegionExecutor>> {
    install(env).map(|(executor, _)| executor)
}

fn install(env: &ExecutorEnv<'_>) -> Option<(Arc<dyn RegionExecutor>, JitHandle)> {
    crate::check_host().ok()?;
    let shared = Arc::new(Shared {
        program: env.program.clone(),
        options: env.options.clone(),
        counters: env.counters.clone(),
        slots: env
            .program
            .slots
            .iter()
            .map(|slot| SlotJit::new(env.program, slot))
            .collect(),
        tick: Default::default(),
        hold: Hold::default(),
        packed: env.packed.clone(),
    });
    let (sender, thread) = if env.options.compile == CompileMode::Background {
        let (tx, rx) = crossbeam_channel::unbounded();
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("shapejit-compiler".to_string())
            .spawn(move || compiler::run_compiler(worker, rx))
            .ok()?;
        (Some(tx), Some(thread))
    } else {
        (None, None)
    };
    let handle = JitHandle {
        shared: shared.clone(),
    };
    let executor = JitExecutor {
        shared,
        sender,
        thread: Mutex::new(thread),
    };
    Some((Arc::new(executor), handle))
}

impl Drop for JitExecutor {
    fn drop(&mut self) {
        self.shared.hold.shutdown();
        self.sender = None;
        if let Some(thread) = self.thread.get_mut().ok().and_then(|t| t.take()) {
            // The thread only compiles (no locks held across the join); a panic in it
            // has already been counted as nothing we can recover here.
            let _ = thread.join();
        }
    }
}

impl JitExecutor {
    /// Counts a call a family kernel served (sampled); a key that has become hot gets
    /// a request for its own kernel (see [`policy::SlotPolicy::family_call`]).
    fn note_family_call(&self, ctx: &GuardCtx<'_>, family: &JitKernel) {
        let state = &self.shared.slots[ctx.slot.index()];
        let calls = state.family_calls.fetch_add(1, Ordering::Relaxed);
        if !policy::samples_family_call(&self.shared.options, calls) {
            return;
        }
        let Some(mut policy) = self.shared.policy(ctx.slot) else {
            return;
        };
        let req = {
            let cache = state.cache.read().unwrap_or_else(|e| e.into_inner());
            policy.family_call(
                &self.shared.options,
                &*cache,
                ctx.slot,
                ctx.region,
                ctx.key,
                policy::Served {
                    mean_ns: family.mean_run_ns(),
                    baseline_ps: family.baseline_ps_per_elem(),
                },
            )
        };
        drop(policy);
        if let Some(req) = req {
            self.submit(req);
        }
    }

    /// Compiles `req` now (sync mode) or queues it for the compiler thread.
    fn submit(&self, req: Request) {
        match &self.sender {
            Some(tx) => {
                let depth = &self.shared.counters.global.queue_depth;
                depth.fetch_add(1, Ordering::Relaxed);
                if tx.send(req).is_err() {
                    depth.fetch_sub(1, Ordering::Relaxed);
                }
            }
            None => self.shared.process(req),
        }
    }
}

impl RegionExecutor for JitExecutor {
    fn lookup(&self, ctx: &GuardCtx<'_>) -> Option<Arc<dyn RegionKernel>> {
        let slot = self.shared.slots.get(ctx.slot.index())?;
        let tick = self.shared.tick.fetch_add(1, Ordering::Relaxed);
        let kernel = slot.cache.read().ok()?.find(ctx.key, tick)?;
        // Demotion is a timing heuristic: background mode only, so sync mode stays
        // deterministic.
        if self.shared.options.compile == CompileMode::Background
            && kernel.slower_than_interpreter()
        {
            self.shared.demote(ctx.slot, &kernel);
            return None;
        }
        if kernel.is_family() {
            self.note_family_call(ctx, &kernel);
        }
        Some(kernel as Arc<dyn RegionKernel>)
    }

    fn observe(&self, slot: SlotId, region: &Region, key: &Arc<ShapeKey>, obs: Observation) {
        if self.shared.options.compile == CompileMode::Off {
            return;
        }
        let (Some(state), Some(mut policy)) = (
            self.shared.slots.get(slot.index()),
            self.shared.policy(slot),
        ) else {
            return;
        };
        let requests = {
            let cache = state.cache.read().unwrap_or_else(|e| e.into_inner());
            policy.observe(&self.shared.options, &*cache, slot, region, key, obs)
        };
        drop(policy);
        for req in requests {
            self.submit(req);
        }
    }
}
