//! Live intervals, register allocation and the memory plan.
//!
//! Intervals are over instruction positions: `[first def, last use]`, then
//! widened so that (1) region inputs live past the region's end (a compiled
//! kernel reads them while writing the region's outputs) and (2) a value defined before
//! a loop and used inside it lives to the loop's back edge.
//!
//! Registers: a linear scan; a register is free again after its value's last use
//! (a value defined at the same pc where another dies may take its register, as
//! every instruction reads its operands before it writes its results).
//!
//! Storage groups: only values whose data an instruction writes ([`VInfo::owns`])
//! get a group. A value that may alias another's storage (a view, a `move`)
//! extends the lifetime of every storage root it may alias. Groups are shared
//! by values whose (extended) lifetimes do not overlap, strictly: a result never
//! shares a group with an operand of the same instruction.
//!
//! **Invariant:** two values that are live at the same pc never share a register,
//! and two storage roots that are live at the same pc never share a group.

use super::{LoopSpan, RegionDraft, VInfo};
use crate::ids::{GroupId, Reg};
use crate::instr::Instr;
use crate::program::{GroupInfo, MemoryPlan};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

/// The result of allocation, indexed by virtual register.
pub(crate) struct Allocation {
    regs: Vec<Reg>,
    groups: Vec<GroupId>,
    pub n_regs: u32,
    pub plan: MemoryPlan,
}

impl Allocation {
    pub fn reg_of(&self, v: Reg) -> Reg {
        self.regs[v.index()]
    }

    pub fn group_of(&self, v: Reg) -> GroupId {
        self.groups[v.index()]
    }
}

/// Live intervals `[start, end]` per virtual register.
fn intervals(
    instrs: &[Instr],
    n_vals: usize,
    loops: &[LoopSpan],
    regions: &[RegionDraft],
) -> Vec<(usize, usize)> {
    let mut live = vec![(usize::MAX, 0usize); n_vals];
    for (pc, instr) in instrs.iter().enumerate() {
        for r in instr.defs() {
            let iv = &mut live[r.index()];
            iv.0 = iv.0.min(pc);
            iv.1 = iv.1.max(pc);
        }
        for r in instr.uses() {
            live[r.index()].1 = live[r.index()].1.max(pc);
        }
    }
    for region in regions {
        // One past the region's last instruction: no result inside the region
        // may take an input's register or storage.
        let last = region.guard_pc + region.len + 1;
        for r in &region.inputs {
            live[r.index()].1 = live[r.index()].1.max(last);
        }
    }
    let mut loops = loops.to_vec();
    loops.sort_by_key(|l| l.back - l.head);
    for l in &loops {
        for iv in &mut live {
            if iv.0 < l.head && iv.1 >= l.head && iv.1 < l.back {
                iv.1 = l.back;
            }
        }
    }
    live
}

/// Values in allocation order: by interval start, then id.
fn by_start(live: &[(usize, usize)], keep: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..live.len())
        .filter(|&v| keep(v) && live[v].0 != usize::MAX)
        .collect();
    order.sort_by_key(|&v| (live[v].0, v));
    order
}

/// Linear scan: assigns each value the lowest free color; `frees(a, b)` says
/// whether the color of earlier value `a` is free for value `b`.
///
/// Active values wait in a min-heap by `expiry(a)`; `frees` must be monotone in
/// it (if `a` frees `b`, every active value with a smaller expiry does, and `a`
/// frees every value after `b`), so popping while the top frees `v` releases
/// exactly the colors a scan of every active value would: `O(n log n)`.
fn linear_scan(
    order: &[usize],
    n_vals: usize,
    expiry: impl Fn(usize) -> (usize, usize),
    frees: impl Fn(usize, usize) -> bool,
) -> (Vec<u32>, u32) {
    let mut color = vec![u32::MAX; n_vals];
    let mut active: BinaryHeap<Reverse<((usize, usize), usize)>> = BinaryHeap::new();
    let mut free: BTreeSet<u32> = BTreeSet::new();
    let mut n_colors = 0u32;
    for &v in order {
        while let Some(&Reverse((_, a))) = active.peek() {
            if !frees(a, v) {
                break;
            }
            active.pop();
            free.insert(color[a]);
        }
        let c = free.pop_first().unwrap_or_else(|| {
            n_colors += 1;
            n_colors - 1
        });
        color[v] = c;
        active.push(Reverse((expiry(v), v)));
    }
    (color, n_colors)
}

pub(crate) fn allocate(
    instrs: &[Instr],
    vals: &[VInfo],
    loops: &[LoopSpan],
    regions: &[RegionDraft],
) -> Allocation {
    let n = vals.len();
    let live = intervals(instrs, n, loops, regions);

    let reg_order = by_start(&live, |_| true);
    // A register is free after its value's last use, or at it for a value
    // defined at a later pc (operands are read before results are written).
    let (reg_color, n_regs) = linear_scan(
        &reg_order,
        n,
        |a| (live[a].1, live[a].0),
        |a, b| live[a].1 < live[b].0 || (live[a].1 == live[b].0 && live[a].0 < live[b].0),
    );

    // Storage roots each value may alias (a fixpoint: an `if` result is created
    // before the branch values it aliases), then the roots' extended lifetimes.
    let mut roots: Vec<Vec<usize>> = (0..n)
        .map(|v| if vals[v].owns { vec![v] } else { Vec::new() })
        .collect();
    let mut changed = true;
    while changed {
        changed = false;
        for v in 0..n {
            for a in &vals[v].aliases {
                for r in roots[a.index()].clone() {
                    if !roots[v].contains(&r) {
                        roots[v].push(r);
                        changed = true;
                    }
                }
            }
        }
    }
    let mut root_end: Vec<usize> = live.iter().map(|iv| iv.1).collect();
    for (v, rs) in roots.iter().enumerate() {
        for &r in rs {
            root_end[r] = root_end[r].max(live[v].1);
        }
    }
    let group_order = by_start(&live, |v| vals[v].owns);
    let (group_color, n_groups) = linear_scan(
        &group_order,
        n,
        |a| (root_end[a], 0),
        |a, b| root_end[a] < live[b].0,
    );

    let mut plan = MemoryPlan {
        groups: vec![GroupInfo::default(); n_groups as usize],
    };
    for &v in &group_order {
        plan.groups[group_color[v] as usize]
            .values
            .push(vals[v].name.clone());
    }
    Allocation {
        regs: reg_color.into_iter().map(Reg).collect(),
        groups: group_color.into_iter().map(GroupId).collect(),
        n_regs,
        plan,
    }
}
