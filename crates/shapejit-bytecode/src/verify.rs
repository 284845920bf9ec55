//! The bytecode verifier. Run on every program before it executes (lowered or
//! loaded): a program that passes cannot make the interpreter index out of
//! range, jump outside the code or read an unwritten register.
//!
//! Checks: every register, constant, slot, region, group, input and symbol
//! index is in range; jump targets are inside the code, a backward jump goes
//! to a `loop_check` (the only loops are lowered `loop`s) and the last
//! instruction cannot fall through; each slot is owned by exactly the
//! instruction its record names; each region's record matches its
//! `shape_guard` and covers only `op` instructions, whose inputs it does not
//! overwrite; and, by a forward dataflow over definitely-written registers,
//! every register read is written on every path before it (a region's guard
//! may skip the region, writing only the region's outputs).
//!
//! The register count may not exceed what the instructions name (so a corrupt
//! count cannot make the verifier or the runtime allocate for registers nobody
//! uses); the dataflow keeps one set per basic block, and region checks use
//! sets, so verification is near-linear in the program's size.
//!
//! **Invariant:** [`verify`] never panics, whatever the program holds.

use crate::error::VerifyError;
use crate::ids::{Pc, Reg, RegionId, SlotId};
use crate::instr::{Instr, SlotKind};
use crate::program::{DimCheck, Program};

/// Checks a program; see the module docs for what is checked.
pub fn verify(program: &Program) -> Result<(), VerifyError> {
    let n = program.instrs.len();
    let last = n.checked_sub(1).ok_or(VerifyError::Empty)?;
    if !program.instrs[last].ends_block() {
        return Err(VerifyError::FallsOffEnd {
            pc: Pc(last as u32),
        });
    }
    check_register_count(program)?;
    check_io(program)?;
    let mut slot_owner = vec![None; program.slots.len()];
    let mut region_guard = vec![None; program.regions.len()];
    for (i, instr) in program.instrs.iter().enumerate() {
        check_instr(
            program,
            Pc(i as u32),
            instr,
            &mut slot_owner,
            &mut region_guard,
        )?;
    }
    for (i, owner) in slot_owner.iter().enumerate() {
        if owner.is_none() {
            return Err(VerifyError::BadSlot {
                pc: Pc(0),
                slot: SlotId(i as u32),
                message: "no instruction owns it".into(),
            });
        }
    }
    for (i, guard) in region_guard.iter().enumerate() {
        check_region(program, RegionId(i as u32), *guard)?;
    }
    check_definitions(program)
}

fn range(pc: Pc, what: &'static str, index: u32, len: usize) -> Result<(), VerifyError> {
    if (index as usize) < len {
        Ok(())
    } else {
        Err(VerifyError::OutOfRange {
            pc,
            what,
            index,
            len,
        })
    }
}

/// `n_regs` is at most one past the highest register an instruction names.
fn check_register_count(program: &Program) -> Result<(), VerifyError> {
    let named = program
        .instrs
        .iter()
        .flat_map(|i| i.uses().into_iter().chain(i.defs()))
        .map(|r| r.0 as u64 + 1)
        .max()
        .unwrap_or(0);
    if u64::from(program.n_regs) > named {
        return Err(VerifyError::RegisterCount {
            n_regs: program.n_regs,
            named,
        });
    }
    Ok(())
}

fn check_io(program: &Program) -> Result<(), VerifyError> {
    for spec in &program.inputs {
        if spec.dims.len() != spec.ty.shape.rank() {
            return Err(VerifyError::BadIo {
                io: "input",
                name: spec.name.clone(),
                message: format!(
                    "{} dim checks for rank {}",
                    spec.dims.len(),
                    spec.ty.shape.rank()
                ),
            });
        }
        for check in &spec.dims {
            if let DimCheck::Symbol(s) = check {
                range(Pc(0), "symbol", s.0, program.symbols.len())?;
            }
        }
    }
    Ok(())
}

fn check_instr(
    program: &Program,
    pc: Pc,
    instr: &Instr,
    slot_owner: &mut [Option<Pc>],
    region_guard: &mut [Option<Pc>],
) -> Result<(), VerifyError> {
    let n_regs = program.n_regs as usize;
    for r in instr.uses().into_iter().chain(instr.defs()) {
        range(pc, "register", r.0, n_regs)?;
    }
    for o in instr.outs() {
        range(pc, "group", o.group.0, program.memory.n_groups())?;
    }
    if let Some(target) = instr.targets()
        && target.index() >= program.instrs.len()
    {
        return Err(VerifyError::BadJumpTarget {
            pc,
            target,
            len: program.instrs.len(),
        });
    }
    if let Some(target) = instr.targets()
        && target <= pc
        && !matches!(program.instrs[target.index()], Instr::LoopCheck { .. })
    {
        return Err(VerifyError::BadBackEdge { pc, target });
    }
    let mut own_slot = |slot: SlotId, expected: SlotKind| -> Result<(), VerifyError> {
        range(pc, "slot", slot.0, program.slots.len())?;
        let bad = |message: String| VerifyError::BadSlot { pc, slot, message };
        if let Some(other) = slot_owner[slot.index()] {
            return Err(bad(format!("already owned by {other}")));
        }
        if program.slots[slot.index()].kind != expected {
            return Err(bad(format!(
                "the slot record says {:?}",
                program.slots[slot.index()].kind
            )));
        }
        slot_owner[slot.index()] = Some(pc);
        Ok(())
    };
    match instr {
        Instr::ShapeAssert { input, .. } => range(pc, "input", input.0, program.inputs.len())?,
        Instr::LoadConst { constant, .. } => {
            range(pc, "constant", constant.0, program.constants.len())?
        }
        Instr::Op { slot, .. } => own_slot(*slot, SlotKind::Op(pc))?,
        Instr::ShapeGuard { slot, region, skip } => {
            range(pc, "region", region.0, program.regions.len())?;
            own_slot(*slot, SlotKind::Region(*region))?;
            if region_guard[region.index()].replace(pc).is_some() {
                return Err(VerifyError::BadRegion {
                    region: *region,
                    message: format!("a second guard at {pc}"),
                });
            }
            let end = pc.index() + 1 + *skip as usize;
            if end >= program.instrs.len() {
                return Err(VerifyError::BadJumpTarget {
                    pc,
                    target: Pc(end as u32),
                    len: program.instrs.len(),
                });
            }
        }
        Instr::Carry { dsts, srcs } if dsts.len() != srcs.len() => {
            return Err(VerifyError::BadOperands {
                pc,
                message: format!(
                    "carry writes {} values from {} sources",
                    dsts.len(),
                    srcs.len()
                ),
            });
        }
        Instr::Return { srcs } if srcs.len() != program.outputs.len() => {
            return Err(VerifyError::BadOperands {
                pc,
                message: format!(
                    "return gives {} values, the program has {} outputs",
                    srcs.len(),
                    program.outputs.len()
                ),
            });
        }
        _ => {}
    }
    Ok(())
}

fn check_region(program: &Program, id: RegionId, guard: Option<Pc>) -> Result<(), VerifyError> {
    let region = &program.regions[id.index()];
    let bad = |message: String| {
        Err(VerifyError::BadRegion {
            region: id,
            message,
        })
    };
    if region.id != id {
        return bad(format!("its record says it is {}", region.id));
    }
    let Some(guard) = guard else {
        return bad("no shape_guard heads it".into());
    };
    if region.first_pc.index() != guard.index() + 1 {
        return bad(format!(
            "starts at {}, its guard is at {guard}",
            region.first_pc
        ));
    }
    match &program.instrs[guard.index()] {
        Instr::ShapeGuard { slot, skip, .. } if *skip == region.len && *slot == region.slot => {}
        _ => {
            return bad(format!(
                "the guard at {guard} disagrees with the record (slot or length)"
            ));
        }
    }
    let n_regs = program.n_regs as usize;
    for r in region.inputs.iter().chain(&region.outputs) {
        range(guard, "register", r.0, n_regs)?;
    }
    // Invariant: the guard check above bounds `first_pc + len` below the code length.
    let body =
        &program.instrs[region.first_pc.index()..region.first_pc.index() + region.len as usize];
    let mut written = std::collections::HashSet::new();
    for instr in body {
        if !matches!(instr, Instr::Op { .. }) {
            return bad(format!(
                "holds a `{}` instruction; regions hold only ops",
                instr.mnemonic()
            ));
        }
        written.extend(instr.defs());
    }
    if let Some(r) = region.inputs.iter().find(|r| written.contains(*r)) {
        return bad(format!("overwrites its input {r}"));
    }
    if let Some(r) = region.outputs.iter().find(|r| !written.contains(*r)) {
        return bad(format!("never writes its output {r}"));
    }
    Ok(())
}

/// A set of registers as a bitset.
#[derive(Clone, PartialEq, Eq)]
struct RegSet(Vec<u64>);

impl RegSet {
    fn empty(n: usize) -> RegSet {
        RegSet(vec![0; n.div_ceil(64)])
    }
    fn insert(&mut self, r: Reg) {
        if let Some(w) = self.0.get_mut(r.index() / 64) {
            *w |= 1 << (r.index() % 64);
        }
    }
    fn contains(&self, r: Reg) -> bool {
        self.0
            .get(r.index() / 64)
            .is_some_and(|w| w & (1 << (r.index() % 64)) != 0)
    }
    /// Intersects in place; returns true when the set changed.
    fn intersect(&mut self, other: &RegSet) -> bool {
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            let v = *a & *b;
            changed |= v != *a;
            *a = v;
        }
        changed
    }
}

/// Successor edges of an instruction: the target pc and registers the edge
/// writes on top of the instruction's own definitions.
fn successors(program: &Program, pc: usize) -> Vec<(usize, Vec<Reg>)> {
    let instr = &program.instrs[pc];
    let mut out = Vec::new();
    if !instr.ends_block() {
        out.push((pc + 1, Vec::new()));
    }
    if let Some(t) = instr.targets() {
        out.push((t.index(), Vec::new()));
    }
    if let Instr::ShapeGuard { region, skip, .. } = instr {
        let outputs = program
            .regions
            .get(region.index())
            .map(|r| r.outputs.clone())
            .unwrap_or_default();
        out.push((pc + 1 + *skip as usize, outputs));
    }
    out
}

/// Basic blocks: the first pc of each, in order. A block ends before a jump
/// target and after any instruction that does not simply fall through.
fn block_starts(program: &Program) -> Vec<usize> {
    let n = program.instrs.len();
    let mut leader = vec![false; n];
    leader[0] = true;
    for pc in 0..n {
        let succs = successors(program, pc);
        if succs.len() != 1 || succs[0].0 != pc + 1 {
            for (succ, _) in succs {
                if let Some(l) = leader.get_mut(succ) {
                    *l = true;
                }
            }
            if let Some(l) = leader.get_mut(pc + 1) {
                *l = true;
            }
        }
    }
    (0..n).filter(|&pc| leader[pc]).collect()
}

/// For every register read, checks it is written on every path before: a
/// forward dataflow of definitely-written registers over basic blocks.
fn check_definitions(program: &Program) -> Result<(), VerifyError> {
    let n = program.instrs.len();
    let n_regs = program.n_regs as usize;
    let starts = block_starts(program);
    let mut block_of = vec![0usize; n];
    for (b, w) in starts.iter().enumerate() {
        let end = starts.get(b + 1).copied().unwrap_or(n);
        block_of[*w..end].fill(b);
    }
    let range_of = |b: usize| starts[b]..starts.get(b + 1).copied().unwrap_or(n);
    let mut entry: Vec<Option<RegSet>> = vec![None; starts.len()];
    entry[0] = Some(RegSet::empty(n_regs));
    let mut work = vec![0usize];
    while let Some(b) = work.pop() {
        // Invariant: only blocks with a computed entry set are pushed.
        let Some(mut set) = entry[b].clone() else {
            continue;
        };
        let pcs = range_of(b);
        let last = pcs.end - 1;
        for pc in pcs {
            for r in program.instrs[pc].defs() {
                set.insert(r);
            }
        }
        for (succ, extra) in successors(program, last) {
            if succ >= n {
                continue;
            }
            // Invariant: every successor of a block's last pc starts a block.
            let sb = block_of[succ];
            let mut edge = set.clone();
            for r in extra {
                edge.insert(r);
            }
            let changed = match &mut entry[sb] {
                Some(existing) => existing.intersect(&edge),
                slot @ None => {
                    *slot = Some(edge);
                    true
                }
            };
            if changed {
                work.push(sb);
            }
        }
    }
    for (b, set) in entry.into_iter().enumerate() {
        let Some(mut set) = set else { continue };
        for pc in range_of(b) {
            let instr = &program.instrs[pc];
            for r in instr.uses() {
                if !set.contains(r) {
                    return Err(VerifyError::UndefinedRead {
                        pc: Pc(pc as u32),
                        reg: r,
                    });
                }
            }
            if let Instr::ShapeGuard { region, .. } = instr
                && let Some(r) = program
                    .regions
                    .get(region.index())
                    .and_then(|reg| reg.inputs.iter().find(|r| !set.contains(**r)))
            {
                return Err(VerifyError::UndefinedRead {
                    pc: Pc(pc as u32),
                    reg: *r,
                });
            }
            for r in instr.defs() {
                set.insert(r);
            }
        }
    }
    Ok(())
}
