//! [`Stats`]: a serializable snapshot of a module's per-slot profiles and
//! counters, for `shapejit run --stats` and JSON output.
//!
//! **Invariant:** a snapshot reads relaxed counters one by one, so under
//! concurrent runs its numbers are each exact but not mutually atomic.

use crate::module::ModuleInner;
use crate::profile::read;
use shapejit_bytecode::SlotKind;

/// One shape key of a slot.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KeyStat {
    /// the key, as text (`f32[4, 32, 256], f32[256]`)
    pub key: String,
    /// executions with the key in the slot's current window
    pub in_window: u32,
    /// executions with the key, ever
    pub total: u64,
    /// mean interpreted time, ns
    pub mean_ns: u64,
}

/// Counters of one slot.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SlotStats {
    /// slot index
    pub slot: u32,
    /// `op <name>` or `region <kind>`
    pub kind: String,
    /// IR node name (a region's first node)
    pub node: String,
    /// executions
    pub executions: u64,
    /// interpreted time, ns
    pub interp_ns: u64,
    /// region heads served by a compiled kernel
    pub kernel_hits: u64,
    /// region heads with no matching kernel
    pub guard_misses: u64,
    /// kernels compiled
    pub compiles: u64,
    /// compile time, µs
    pub compile_us: u64,
    /// failed compilations
    pub compile_errors: u64,
    /// why the last failed compilation failed (e.g. an input layout a kernel cannot
    /// address): the slot stays interpreted for such keys
    pub last_compile_error: Option<String>,
    /// kernels evicted
    pub evictions: u64,
    /// time in compiled kernels, ns
    pub kernel_ns: u64,
    /// hits served by shape-family kernels
    pub family_hits: u64,
    /// hits served by exact-shape kernels
    pub exact_hits: u64,
    /// shape keys seen (profiling on), in first-seen order
    pub keys: Vec<KeyStat>,
}

/// Module-wide counters.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GlobalStats {
    /// compile requests waiting
    pub queue_depth: u64,
    /// compile requests dropped
    pub dropped_requests: u64,
    /// bytes of live compiled code
    pub live_code_bytes: u64,
    /// bytes of matmul weights packed for compiled kernels and the interpreter
    /// (kept for the module's life)
    pub packed_weight_bytes: u64,
    /// ops the interpreter ran in pieces on the intra-op pool
    pub split_ops: u64,
    /// threads of the intra-op pool (`Options::threads`)
    pub threads: u64,
}

/// A snapshot of a module's statistics.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// per slot, indexed by slot id
    pub slots: Vec<SlotStats>,
    /// module-wide
    pub global: GlobalStats,
}

pub(crate) fn snapshot(inner: &ModuleInner) -> Stats {
    let program = &inner.program;
    let slots = program
        .slots
        .iter()
        .enumerate()
        .map(|(i, info)| {
            let c = &inner.counters.slots[i];
            let kind = match info.kind {
                SlotKind::Op(pc) => {
                    format!(
                        "op {}",
                        program
                            .instrs
                            .get(pc.index())
                            .map(|ins| ins.mnemonic())
                            .unwrap_or("?")
                    )
                }
                SlotKind::Region(r) => {
                    format!(
                        "region {}",
                        program
                            .regions
                            .get(r.index())
                            .map(|reg| reg.kind.name())
                            .unwrap_or("?")
                    )
                }
            };
            let keys = inner.profiles[i]
                .keys()
                .into_iter()
                .map(|k| KeyStat {
                    key: k.key.to_string(),
                    in_window: k.in_window,
                    total: k.total,
                    mean_ns: k.total_ns.checked_div(k.total).unwrap_or(0),
                })
                .collect();
            SlotStats {
                slot: i as u32,
                kind,
                node: info.node.clone(),
                executions: read(&c.executions),
                interp_ns: read(&c.interp_ns),
                kernel_hits: read(&c.kernel_hits),
                guard_misses: read(&c.guard_misses),
                compiles: read(&c.compiles),
                compile_us: read(&c.compile_us),
                compile_errors: read(&c.compile_errors),
                last_compile_error: c
                    .last_compile_error
                    .lock()
                    .map(|e| e.clone())
                    .unwrap_or_else(|e| e.into_inner().clone()),
                evictions: read(&c.evictions),
                kernel_ns: read(&c.kernel_ns),
                family_hits: read(&c.family_hits),
                exact_hits: read(&c.exact_hits),
                keys,
            }
        })
        .collect();
    let g = &inner.counters.global;
    Stats {
        slots,
        global: GlobalStats {
            queue_depth: read(&g.queue_depth),
            dropped_requests: read(&g.dropped_requests),
            live_code_bytes: read(&g.live_code_bytes),
            packed_weight_bytes: read(&g.packed_weight_bytes),
            split_ops: read(&g.split_ops),
            threads: inner.options.threads.max(1) as u64,
        },
    }
}
