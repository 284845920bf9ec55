//! "Where the time goes": per op type and per slot, from a module's [`Stats`].
//!
//! Interpreter time comes from `op` slots (each instruction times itself); kernel
//! time from region-head slots (a compiled kernel replaces the region's ops). A
//! region's own interpreted time is *not* added: its ops already count it.
//!
//! **Invariant:** every number is read from the VM's counters or measured by the
//! caller (wall time, setup, first iteration); nothing is estimated.

use serde::Serialize;
use shapejit::{SlotStats, Stats};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Time of one op type (or region kind).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpTime {
    /// opcode (`matmul`) or `region KIND`
    pub op: String,
    /// executions (for regions: compiled-kernel hits)
    pub count: u64,
    /// interpreted time
    pub interp_us: f64,
    /// compiled-kernel time
    pub kernel_us: f64,
    /// interp + kernel over the wall time of all runs
    pub share: f64,
}

/// Time of one slot.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlotTime {
    /// slot index
    pub slot: u32,
    /// `op NAME` or `region KIND`
    pub kind: String,
    /// IR node
    pub node: String,
    /// executions
    pub count: u64,
    /// interpreted time (op slots)
    pub interp_us: f64,
    /// compiled-kernel time (region slots)
    pub kernel_us: f64,
    /// share of the wall time of all runs
    pub share: f64,
}

/// The whole profile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    /// module load (parse, lower, verify) time
    pub setup_ms: f64,
    /// latency of the first run (cold arena, cold caches)
    pub first_iteration_us: f64,
    /// runs the counters cover
    pub runs: usize,
    /// wall time of those runs
    pub wall_us: f64,
    /// bytes held by the runtime's arena after the runs
    pub arena_bytes: usize,
    /// time spent allocating (growing) arena buffers during the runs
    pub arena_alloc_us: f64,
    /// per op type, most expensive first
    pub by_op: Vec<OpTime>,
    /// per slot, most expensive first
    pub by_slot: Vec<SlotTime>,
}

/// Process-wide arena allocation time so far, µs (take the difference around runs).
pub fn arena_alloc_us() -> f64 {
    shapejit::vm::arena::alloc_ns() as f64 / 1e3
}

/// What the caller measured around the runs.
pub struct Measured {
    /// module load time
    pub setup_ms: f64,
    /// first run's latency
    pub first_iteration_us: f64,
    /// number of runs
    pub runs: usize,
    /// wall time of the runs
    pub wall_us: f64,
    /// arena size after the runs
    pub arena_bytes: usize,
    /// arena allocation time during the runs
    pub arena_alloc_us: f64,
}

fn slot_times(s: &SlotStats) -> (u64, f64, f64) {
    if s.kind.starts_with("region") {
        (s.kernel_hits, 0.0, s.kernel_ns as f64 / 1e3)
    } else {
        (
            s.executions,
            s.interp_ns as f64 / 1e3,
            s.kernel_ns as f64 / 1e3,
        )
    }
}

/// Builds the profile from a stats snapshot.
pub fn build(stats: &Stats, measured: &Measured) -> Profile {
    let wall = measured.wall_us.max(f64::MIN_POSITIVE);
    let mut by_op: BTreeMap<String, OpTime> = BTreeMap::new();
    let mut by_slot = Vec::new();
    for s in &stats.slots {
        let (count, interp_us, kernel_us) = slot_times(s);
        let op = s.kind.strip_prefix("op ").unwrap_or(&s.kind).to_string();
        let e = by_op.entry(op.clone()).or_insert(OpTime {
            op,
            count: 0,
            interp_us: 0.0,
            kernel_us: 0.0,
            share: 0.0,
        });
        e.count += count;
        e.interp_us += interp_us;
        e.kernel_us += kernel_us;
        if count > 0 {
            let share = (interp_us + kernel_us) / wall;
            by_slot.push(SlotTime {
                slot: s.slot,
                kind: s.kind.clone(),
                node: s.node.clone(),
                count,
                interp_us,
                kernel_us,
                share,
            });
        }
    }
    let mut by_op: Vec<OpTime> = by_op.into_values().filter(|o| o.count > 0).collect();
    for o in &mut by_op {
        o.share = (o.interp_us + o.kernel_us) / wall;
    }
    let total = |interp: f64, kernel: f64| -(interp + kernel);
    by_op.sort_by(|a, b| {
        total(a.interp_us, a.kernel_us).total_cmp(&total(b.interp_us, b.kernel_us))
    });
    by_slot.sort_by(|a, b| {
        total(a.interp_us, a.kernel_us).total_cmp(&total(b.interp_us, b.kernel_us))
    });
    Profile {
        setup_ms: measured.setup_ms,
        first_iteration_us: measured.first_iteration_us,
        runs: measured.runs,
        wall_us: measured.wall_us,
        arena_bytes: measured.arena_bytes,
        arena_alloc_us: measured.arena_alloc_us,
        by_op,
        by_slot,
    }
}

/// The profile as text tables (the `top` most expensive slots).
pub fn render(p: &Profile, top: usize) -> String {
    let mut out = String::new();
    // `write!` to a String cannot fail; the results are ignored throughout.
    let _ = writeln!(
        out,
        "setup {:.2} ms, first iteration {:.1} µs, {} runs in {:.1} ms, arena {:.1} KiB allocated in {:.1} µs",
        p.setup_ms,
        p.first_iteration_us,
        p.runs,
        p.wall_us / 1e3,
        p.arena_bytes as f64 / 1024.0,
        p.arena_alloc_us
    );
    let accounted: f64 = p.by_op.iter().map(|o| o.share).sum();
    let _ = writeln!(
        out,
        "\ntime per op type ({:.1}% of the wall time accounted for)",
        accounted * 100.0
    );
    let _ = writeln!(
        out,
        "{:<22}{:>10}{:>14}{:>14}{:>8}",
        "op", "count", "interp ms", "kernel ms", "share"
    );
    for o in &p.by_op {
        let _ = writeln!(
            out,
            "{:<22}{:>10}{:>14.3}{:>14.3}{:>7.1}%",
            o.op,
            o.count,
            o.interp_us / 1e3,
            o.kernel_us / 1e3,
            o.share * 100.0
        );
    }
    let _ = writeln!(
        out,
        "\ntime per slot (top {} of {})",
        top.min(p.by_slot.len()),
        p.by_slot.len()
    );
    let _ = writeln!(
        out,
        "{:>6}  {:<22}{:<28}{:>8}{:>12}{:>12}{:>8}",
        "slot", "kind", "node", "count", "interp ms", "kernel ms", "share"
    );
    for s in p.by_slot.iter().take(top) {
        let _ = writeln!(
            out,
            "{:>6}  {:<22}{:<28}{:>8}{:>12.3}{:>12.3}{:>7.1}%",
            s.slot,
            s.kind,
            s.node,
            s.count,
            s.interp_us / 1e3,
            s.kernel_us / 1e3,
            s.share * 100.0
        );
    }
    out
}
