//! The background compiler thread, compilation and installation into the per-slot
//! caches.
//!
//! Requests ([`super::policy::Request`]) go through a crossbeam channel to one thread
//! per module. The thread keeps what it has received in a [`super::policy::Queue`] and
//! always compiles the most valuable request next; before compiling it asks the slot's
//! policy whether the request went stale, and reports how it ended. A test hook
//! ([`super::JitHandle::hold_compiler`]) parks the thread without blocking any run.
//!
//! Matmul kernels whose right operand is a constant get it packed
//! (`shapejit_kernels::packed`), once per constant for all kernels of the module.
//!
//! **Invariant:** runs never wait for the compiler: `observe` only sends (background
//! mode), and the thread takes a slot's cache lock only to insert.
//! **Invariant:** lock order is policy, then cache; nothing holds a cache lock while
//! taking a policy lock.

use super::cache::{Entry, SlotCache};
use super::guard::{BatchRule, Guard};
use super::kernel::{Code, JitKernel, ShapeRule, operand_view};
use super::policy::{Kind, Outcome, Queue, Request, SlotPolicy, Target};
use super::translate::{Compiled, MatMulOperands, batch_rule, translate};
use crate::{
    AttentionKernel, MatMulKernel, ShapeMode, compile_elementwise, compile_matmul_epilogue,
    compile_row,
};
use crossbeam_channel::Receiver;
use shapejit_bytecode::{ConstId, Instr, Program, Reg, Region, SlotId, SlotInfo, SlotKind};
use shapejit_vm::module::Counters;
use shapejit_vm::options::Options;
use shapejit_vm::profile::bump;
use shapejit_vm::tensor::{Layout, TensorRef};
use shapejit_vm::weights::PackedWeights;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

/// One slot's JIT state.
#[derive(Debug, Default)]
pub struct SlotJit {
    /// installed kernels
    pub cache: RwLock<SlotCache>,
    /// promotion bookkeeping
    pub policy: Mutex<SlotPolicy>,
    /// calls served by family kernels (sampling clock for hot-key promotion)
    pub family_calls: AtomicU64,
}

impl SlotJit {
    /// The state of a slot of `program`: a region's slot knows where its batch dim is.
    pub fn new(program: &Program, slot: &SlotInfo) -> Self {
        let batch = match slot.kind {
            SlotKind::Region(id) => program
                .regions
                .get(id.index())
                .map(|region| batch_rule(program, region))
                .unwrap_or_default(),
            SlotKind::Op(_) => BatchRule::default(),
        };
        Self {
            policy: Mutex::new(SlotPolicy::new(batch)),
            ..Self::default()
        }
    }
}

/// Parks the compiler thread while held (test hook) and tells it to stop.
#[derive(Debug, Default)]
pub struct Hold {
    state: Mutex<HoldState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct HoldState {
    holds: usize,
    shutdown: bool,
}

impl Hold {
    fn lock(&self) -> MutexGuard<'_, HoldState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a hold.
    pub fn acquire(&self) {
        self.lock().holds += 1;
    }

    /// Removes a hold.
    pub fn release(&self) {
        let mut st = self.lock();
        st.holds = st.holds.saturating_sub(1);
        self.cv.notify_all();
    }

    /// Asks the thread to stop.
    pub fn shutdown(&self) {
        self.lock().shutdown = true;
        self.cv.notify_all();
    }

    /// Waits while held; false once shut down.
    fn wait(&self) -> bool {
        let mut st = self.lock();
        while st.holds > 0 && !st.shutdown {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        !st.shutdown
    }
}

/// Everything the executor and its compiler thread share.
#[derive(Debug)]
pub struct Shared {
    /// the module's program
    pub program: Arc<Program>,
    /// effective options
    pub options: Options,
    /// the module's counters
    pub counters: Arc<Counters>,
    /// per-slot state, indexed by slot
    pub slots: Vec<SlotJit>,
    /// LRU clock
    pub tick: AtomicU64,
    /// test hook and shutdown
    pub hold: Hold,
    /// packed matmul weights, per constant and transposition (the module's table,
    /// shared with the interpreter)
    pub packed: Arc<PackedWeights>,
}

impl Shared {
    /// Policy lock of a slot (poison-tolerant: the state stays consistent).
    pub fn policy(&self, slot: SlotId) -> Option<MutexGuard<'_, SlotPolicy>> {
        self.slots
            .get(slot.index())
            .map(|s| s.policy.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn is_stale(&self, req: &Request) -> bool {
        let (Some(slot), Some(policy)) = (self.slots.get(req.slot.index()), self.policy(req.slot))
        else {
            return true;
        };
        let cache = slot.cache.read().unwrap_or_else(|e| e.into_inner());
        policy.is_stale(&self.options, &*cache, req)
    }

    /// Removes `kernel` from `slot` because it runs slower than the interpreter; its
    /// target is never compiled again. Counted as an eviction.
    pub fn demote(&self, slot: SlotId, kernel: &Arc<JitKernel>) {
        let Some(state) = self.slots.get(slot.index()) else {
            return;
        };
        let removed = state
            .cache
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(kernel);
        if let Some(entry) = removed {
            self.count_eviction(slot, &entry);
            if let Some(mut p) = self.policy(slot) {
                p.demoted(entry.target);
            }
        }
    }

    /// Counts `entry` as evicted from `slot` and its code as no longer live.
    fn count_eviction(&self, slot: SlotId, entry: &Entry) {
        bump(&self.counters.slots[slot.index()].evictions, 1);
        self.counters
            .global
            .live_code_bytes
            .fetch_sub(entry.kernel.code_bytes() as u64, Ordering::Relaxed);
    }

    /// Compiles one request and installs the kernel (or counts the failure).
    pub fn process(&self, req: Request) {
        let Some(counters) = self.counters.slots.get(req.slot.index()) else {
            return;
        };
        let outcome = if self.is_stale(&req) {
            bump(&self.counters.global.dropped_requests, 1);
            Outcome::Dropped
        } else {
            match self.compile(&req) {
                Ok((kernel, guard, us)) => {
                    bump(&counters.compiles, 1);
                    bump(&counters.compile_us, us);
                    self.install(req.slot, guard, kernel, req.target.clone());
                    Outcome::Installed
                }
                Err(reason) => {
                    bump(&counters.compile_errors, 1);
                    let mut last = counters
                        .last_compile_error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    *last = Some(reason);
                    Outcome::Failed
                }
            }
        };
        if let Some(mut p) = self.policy(req.slot) {
            p.finished(&req, outcome);
        }
    }

    fn compile(&self, req: &Request) -> Result<(Arc<JitKernel>, Guard, u64), String> {
        let region = self
            .program
            .regions
            .get(req.region.index())
            .ok_or("no such region")?;
        let (mode, rule, guard) = match &req.kind {
            Kind::Exact => (
                ShapeMode::Exact,
                ShapeRule::Exact,
                Guard::Exact(req.key.clone()),
            ),
            Kind::Weak(sig) => (
                ShapeMode::Exact,
                ShapeRule::SameAsInputs,
                Guard::Weak(sig.clone()),
            ),
            Kind::Family(sig) => (
                ShapeMode::Family,
                ShapeRule::Family,
                Guard::Family(sig.clone()),
            ),
        };
        let translated =
            translate(&self.program, region, &req.key, mode).map_err(|e| e.to_string())?;
        let err = |e: crate::JitError| e.to_string();
        let code = match translated.compiled {
            Compiled::Elementwise(spec) => {
                Code::Elementwise(compile_elementwise(&spec).map_err(err)?)
            }
            Compiled::Row(spec) => Code::Row(compile_row(&spec).map_err(err)?),
            Compiled::MatMul(spec, operands) => {
                let kernel = compile_matmul_epilogue(&spec).map_err(err)?;
                Code::MatMul(self.pack_weights(kernel, region, &operands), operands)
            }
            Compiled::Attention(spec) => Code::Attention(AttentionKernel::new(spec), mode),
        };
        let kernel = JitKernel::new(code, translated.out_shape, rule, req.baseline_ps);
        let us = kernel.compile_time().as_micros() as u64;
        Ok((Arc::new(kernel), guard, us))
    }

    /// Attaches packed weights when the right operand is a rank-2 constant.
    fn pack_weights(
        &self,
        kernel: MatMulKernel,
        region: &Region,
        ops: &MatMulOperands,
    ) -> MatMulKernel {
        if !self.options.pack_weights {
            return kernel;
        }
        let Some(id) = region
            .inputs
            .get(ops.b)
            .and_then(|&reg| constant_register(&self.program, reg, region.first_pc.index()))
        else {
            return kernel;
        };
        let Some(tensor) = self.program.constants.get(id.index()) else {
            return kernel;
        };
        let shape = tensor.shape();
        if shape.len() != 2 || tensor.dtype() != shapejit_ir::DType::F32 {
            return kernel;
        }
        // The view exactly as the run builds it (`JitKernel::run`), so the kernel
        // recognizes it by identity.
        let layout = Layout::contiguous(shape);
        let Ok(tref) = TensorRef::new(tensor.dtype(), &layout, tensor.bytes()) else {
            return kernel;
        };
        let kn = if ops.trans_b {
            [shape[1], shape[0]]
        } else {
            [shape[0], shape[1]]
        };
        let Ok(view) = operand_view(&tref, ops.trans_b, &kn) else {
            return kernel;
        };
        let Some(packed) = self
            .packed
            .get(id, tensor, ops.trans_b, &self.counters.global)
        else {
            return kernel;
        };
        kernel.with_packed_weights(&view, packed.clone())
    }

    fn install(&self, slot: SlotId, guard: Guard, kernel: Arc<JitKernel>, target: Target) {
        let bytes = kernel.code_bytes() as u64;
        let tick = self.tick.fetch_add(1, Ordering::Relaxed);
        let evicted = {
            let mut cache = self.slots[slot.index()]
                .cache
                .write()
                .unwrap_or_else(|e| e.into_inner());
            cache.insert(guard, kernel, target, tick, self.options.cache_capacity)
        };
        bump(&self.counters.global.live_code_bytes, bytes);
        if let Some(old) = evicted {
            self.count_eviction(slot, &old);
            // `old` drops here: its code is freed now, or when the last running call
            // releases its Arc.
        }
    }
}

/// The constant `reg` holds when the region starting at `before` reads it: the last
/// instruction writing it before the region loads that constant.
fn constant_register(program: &Program, reg: Reg, before: usize) -> Option<ConstId> {
    // Registers are reused: the definition that reaches the region is the last one
    // before it (regions sit in straight-line code; a wrong guess only costs the
    // packing, since a call uses packed weights only for the very view they came
    // from).
    match program.instrs[..before.min(program.instrs.len())]
        .iter()
        .rev()
        .find(|i| i.defs().contains(&reg))?
    {
        Instr::LoadConst { constant, .. } => Some(*constant),
        _ => None,
    }
}

/// The compiler thread's loop: until the channel closes or shutdown.
pub fn run_compiler(shared: Arc<Shared>, rx: Receiver<Request>) {
    let mut queue = Queue::default();
    loop {
        if queue.is_empty() {
            match rx.recv() {
                Ok(req) => queue.push(req),
                Err(_) => return,
            }
        }
        if !shared.hold.wait() {
            return;
        }
        while let Ok(req) = rx.try_recv() {
            queue.push(req);
        }
        // Invariant: the queue is non-empty here (filled above).
        let Some(req) = queue.pop() else {
            continue;
        };
        shared
            .counters
            .global
            .queue_depth
            .fetch_sub(1, Ordering::Relaxed);
        shared.process(req);
    }
}
