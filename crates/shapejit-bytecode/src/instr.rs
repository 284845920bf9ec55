//! The instruction set. `docs/bytecode.md` documents each instruction; the
//! listing syntax is in [`crate::listing`].
//!
//! **Invariants** (checked by [`crate::verify`]):
//! - every register an instruction reads is written on every path that reaches it;
//! - an [`Out`] names the register written *and* the storage group that holds the
//!   written data; instructions that only alias existing data (`move`,
//!   `load_const`, `shape_assert`, view results of `op`) never write a group;
//! - each slot is owned by exactly one `op` or `shape_guard`.

use crate::ids::{ConstId, GroupId, InputIdx, Pc, Reg, RegionId, SlotId};
use shapejit_ir::{DType, Op, Shape};

/// A destination: the register written and the storage group its data goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Out {
    /// register written
    pub reg: Reg,
    /// storage group holding the data (when the instruction computes it)
    pub group: GroupId,
}

/// One bytecode instruction.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Instr {
    /// `%d = shape_assert input i`: checks graph input `i` against its declared
    /// type (rank, dtype, known dims, symbols) and places it in `%d` (no copy).
    ShapeAssert {
        /// register receiving the input
        dst: Reg,
        /// which graph input
        input: InputIdx,
    },
    /// `%d = shape_of %s [start, end)`: the dims of `%s` as an i64 vector.
    ShapeOf {
        /// destination
        dst: Out,
        /// tensor whose shape is read (its data is not touched)
        src: Reg,
        /// first dim (negative counts from the end)
        start: i64,
        /// one past the last dim; `None` = rank
        end: Option<i64>,
    },
    /// `shape_check %k[i] ~ %r[j]`: a broadcast shape inference could not prove.
    /// Dim `j` of `%r` must equal dim `i` of `%k` (the dim the node's output
    /// type keeps) or be 1; otherwise the run fails with an error naming the
    /// node, both shapes and both dims with their run-time sizes. Reads only the
    /// layouts.
    ShapeCheck {
        /// the operand whose dim the output type keeps
        kept: Reg,
        /// that dim's axis
        kept_axis: u32,
        /// the operand whose dim is checked
        other: Reg,
        /// that dim's axis
        other_axis: u32,
        /// the IR node that broadcasts
        node: String,
        /// the symbolic shapes of `kept` and `other` as inference typed them
        shapes: [Shape; 2],
    },
    /// `shape_guard slot=S region=R skip=N`: head of a fusible region. A tier-1
    /// executor may run a compiled kernel for the region's input shape key and
    /// continue at `pc + 1 + skip`; otherwise execution falls through into the
    /// region's own instructions (deoptimization is only a PC change).
    ShapeGuard {
        /// the region head's slot
        slot: SlotId,
        /// the region
        region: RegionId,
        /// number of instructions in the region (they follow this one)
        skip: u32,
    },
    /// `%d... = <op> %s...`: a tensor operation.
    Op {
        /// the operation (never `constant`, `identity`, `shape`, `if` or `loop`)
        op: Op,
        /// results
        dsts: Vec<Out>,
        /// operands
        srcs: Vec<Reg>,
        /// the instruction's slot
        slot: SlotId,
    },
    /// `%d = load_const cK`: points `%d` at a constant (no copy).
    LoadConst {
        /// destination
        dst: Reg,
        /// the constant
        constant: ConstId,
    },
    /// `%d = move %s`: `%d` aliases the value of `%s` (no copy).
    Move {
        /// destination
        dst: Reg,
        /// source
        src: Reg,
    },
    /// `jump @T`
    Jump {
        /// target pc
        target: Pc,
    },
    /// `jump_if_false %c @T`: jumps when the one-element bool `%c` is false.
    JumpIfFalse {
        /// the condition
        cond: Reg,
        /// target pc
        target: Pc,
    },
    /// `%i = loop_begin`: sets the i64 scalar trip counter `%i` to 0.
    LoopBegin {
        /// the counter
        iter: Out,
    },
    /// `loop_check %i < %max && %c else @T`: leaves the loop (jumps) unless the
    /// counter is below the trip limit and the condition holds.
    LoopCheck {
        /// the counter
        iter: Reg,
        /// i64 trip limit
        max: Reg,
        /// bool condition
        cond: Reg,
        /// loop exit
        exit: Pc,
    },
    /// `loop_next %i`: increments the counter in place.
    LoopNext {
        /// the counter
        iter: Reg,
    },
    /// `carry (%d...) <- (%s...)`: copies every source into its destination's own
    /// storage, as a parallel assignment (sources may alias destinations).
    Carry {
        /// loop variables written
        dsts: Vec<Out>,
        /// new values
        srcs: Vec<Reg>,
    },
    /// `%a = scan_init f32[n, 4]`: an empty scan accumulator whose rows have
    /// this declared type (the result of a loop that runs zero times).
    ScanInit {
        /// the accumulator
        acc: Out,
        /// element type of the rows
        dtype: DType,
        /// declared row shape (symbols of the graph inputs are evaluated)
        row: Shape,
    },
    /// `scan_push %a, %s`: appends `%s` as a new row along axis 0 of `%a`.
    ScanPush {
        /// the accumulator (grows in its own group)
        acc: Reg,
        /// the row
        src: Reg,
    },
    /// `return %s...`: the graph outputs, copied out to the caller.
    Return {
        /// output registers in graph output order
        srcs: Vec<Reg>,
    },
}

impl Instr {
    /// The lowercase mnemonic.
    pub fn mnemonic(&self) -> &'static str {
        match self {
            Instr::ShapeAssert { .. } => "shape_assert",
            Instr::ShapeOf { .. } => "shape_of",
            Instr::ShapeCheck { .. } => "shape_check",
            Instr::ShapeGuard { .. } => "shape_guard",
            Instr::Op { op, .. } => op.name(),
            Instr::LoadConst { .. } => "load_const",
            Instr::Move { .. } => "move",
            Instr::Jump { .. } => "jump",
            Instr::JumpIfFalse { .. } => "jump_if_false",
            Instr::LoopBegin { .. } => "loop_begin",
            Instr::LoopCheck { .. } => "loop_check",
            Instr::LoopNext { .. } => "loop_next",
            Instr::Carry { .. } => "carry",
            Instr::ScanInit { .. } => "scan_init",
            Instr::ScanPush { .. } => "scan_push",
            Instr::Return { .. } => "return",
        }
    }

    /// Registers read, in operand order.
    pub fn uses(&self) -> Vec<Reg> {
        match self {
            Instr::ShapeOf { src, .. } | Instr::Move { src, .. } => vec![*src],
            Instr::Op { srcs, .. } | Instr::Carry { srcs, .. } | Instr::Return { srcs } => {
                srcs.clone()
            }
            Instr::JumpIfFalse { cond, .. } => vec![*cond],
            Instr::ShapeCheck { kept, other, .. } => vec![*kept, *other],
            Instr::LoopCheck {
                iter, max, cond, ..
            } => vec![*iter, *max, *cond],
            Instr::LoopNext { iter } => vec![*iter],
            Instr::ScanPush { acc, src } => vec![*acc, *src],
            Instr::ShapeAssert { .. }
            | Instr::ShapeGuard { .. }
            | Instr::LoadConst { .. }
            | Instr::Jump { .. }
            | Instr::LoopBegin { .. }
            | Instr::ScanInit { .. } => Vec::new(),
        }
    }

    /// Registers written.
    pub fn defs(&self) -> Vec<Reg> {
        match self {
            Instr::ShapeAssert { dst, .. }
            | Instr::LoadConst { dst, .. }
            | Instr::Move { dst, .. } => vec![*dst],
            Instr::ShapeOf { dst, .. } => vec![dst.reg],
            Instr::Op { dsts, .. } | Instr::Carry { dsts, .. } => {
                dsts.iter().map(|o| o.reg).collect()
            }
            Instr::LoopBegin { iter } => vec![iter.reg],
            Instr::ScanInit { acc, .. } => vec![acc.reg],
            Instr::LoopNext { iter } => vec![*iter],
            Instr::ScanPush { acc, .. } => vec![*acc],
            Instr::ShapeGuard { .. }
            | Instr::ShapeCheck { .. }
            | Instr::Jump { .. }
            | Instr::JumpIfFalse { .. }
            | Instr::LoopCheck { .. }
            | Instr::Return { .. } => Vec::new(),
        }
    }

    /// Storage-group destinations (data written into a group).
    pub fn outs(&self) -> Vec<Out> {
        match self {
            Instr::ShapeOf { dst, .. } => vec![*dst],
            Instr::Op { dsts, .. } | Instr::Carry { dsts, .. } => dsts.clone(),
            Instr::LoopBegin { iter } => vec![*iter],
            Instr::ScanInit { acc, .. } => vec![*acc],
            _ => Vec::new(),
        }
    }

    /// Jump targets (besides falling through).
    pub fn targets(&self) -> Option<Pc> {
        match self {
            Instr::Jump { target } | Instr::JumpIfFalse { target, .. } => Some(*target),
            Instr::LoopCheck { exit, .. } => Some(*exit),
            _ => None,
        }
    }

    /// True when execution never continues at `pc + 1`.
    pub fn ends_block(&self) -> bool {
        matches!(self, Instr::Jump { .. } | Instr::Return { .. })
    }

    /// Applies `f` to every register operand and destination.
    pub fn map_regs(&mut self, f: &mut dyn FnMut(Reg) -> Reg) {
        let out = |o: &mut Out, f: &mut dyn FnMut(Reg) -> Reg| o.reg = f(o.reg);
        match self {
            Instr::ShapeAssert { dst, .. } | Instr::LoadConst { dst, .. } => *dst = f(*dst),
            Instr::ShapeOf { dst, src, .. } => {
                out(dst, f);
                *src = f(*src);
            }
            Instr::Move { dst, src } => {
                *dst = f(*dst);
                *src = f(*src);
            }
            Instr::Op { dsts, srcs, .. } | Instr::Carry { dsts, srcs } => {
                dsts.iter_mut().for_each(|o| out(o, f));
                srcs.iter_mut().for_each(|r| *r = f(*r));
            }
            Instr::JumpIfFalse { cond, .. } => *cond = f(*cond),
            Instr::ShapeCheck { kept, other, .. } => {
                *kept = f(*kept);
                *other = f(*other);
            }
            Instr::LoopBegin { iter } => out(iter, f),
            Instr::ScanInit { acc, .. } => out(acc, f),
            Instr::LoopCheck {
                iter, max, cond, ..
            } => {
                *iter = f(*iter);
                *max = f(*max);
                *cond = f(*cond);
            }
            Instr::LoopNext { iter } => *iter = f(*iter),
            Instr::ScanPush { acc, src } => {
                *acc = f(*acc);
                *src = f(*src);
            }
            Instr::Return { srcs } => srcs.iter_mut().for_each(|r| *r = f(*r)),
            Instr::ShapeGuard { .. } | Instr::Jump { .. } => {}
        }
    }

    /// Applies `f` to every storage-group destination.
    pub fn map_groups(&mut self, f: &mut dyn FnMut(Reg, GroupId) -> GroupId) {
        let mut out = |o: &mut Out| o.group = f(o.reg, o.group);
        match self {
            Instr::ShapeOf { dst, .. } => out(dst),
            Instr::Op { dsts, .. } | Instr::Carry { dsts, .. } => dsts.iter_mut().for_each(out),
            Instr::LoopBegin { iter } => out(iter),
            Instr::ScanInit { acc, .. } => out(acc),
            _ => {}
        }
    }
}

/// What a fusible region computes (decides which JIT template applies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum RegionKind {
    /// a chain of elementwise ops (unary, binary, where, cast)
    Elementwise,
    /// a matmul or gemm followed by its elementwise epilogue
    MatmulEpilogue,
    /// a softmax, layer_norm or reduction with the elementwise ops around it
    Reduction,
    /// `matmul(q, k)`, optional scale and additive mask, softmax over the last axis,
    /// `matmul(·, v)`
    Attention,
}

impl RegionKind {
    /// The lowercase name used in listings.
    pub fn name(self) -> &'static str {
        match self {
            RegionKind::Elementwise => "elementwise",
            RegionKind::MatmulEpilogue => "matmul_epilogue",
            RegionKind::Reduction => "reduction",
            RegionKind::Attention => "attention",
        }
    }
}

/// A fusible region: the `len` instructions from `first_pc`, headed by a
/// `shape_guard` at `first_pc - 1`.
///
/// **Invariant:** the region is straight-line code (only `op` instructions); its
/// `inputs` are defined before the guard and stay live (same register, same
/// storage) to the region's end; its `outputs` are written inside the region and
/// read after it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Region {
    /// the region's id (its index)
    pub id: RegionId,
    /// what it computes
    pub kind: RegionKind,
    /// pc of the first instruction after the guard
    pub first_pc: Pc,
    /// number of instructions
    pub len: u32,
    /// registers read by the region and defined before it
    pub inputs: Vec<Reg>,
    /// registers written by the region and read after it
    pub outputs: Vec<Reg>,
    /// the guard's slot
    pub slot: SlotId,
}

/// What owns a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SlotKind {
    /// an `op` instruction at this pc
    Op(Pc),
    /// a region head (`shape_guard`)
    Region(RegionId),
}

/// A slot's record: its owner and the IR node it came from.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SlotInfo {
    /// owner
    pub kind: SlotKind,
    /// IR node name (for a region: its first node)
    pub node: String,
}
