//! Errors of lowering and bytecode verification.
//!
//! [`VerifyError`] means a program is malformed: from a corrupt or hand-edited
//! program (an image file) it is a user error; from [`crate::lower::lower`] it is an
//! internal bug, reported as [`LowerError::Internal`].

use crate::ids::{Pc, Reg, RegionId, SlotId};

/// Why a program was rejected by the verifier.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The program has no instructions.
    #[error("the program has no instructions")]
    Empty,
    /// An index is out of range for its table.
    #[error("{pc}: {what} {index} is out of range (the program has {len})")]
    OutOfRange {
        /// the instruction (or `@0` for program tables)
        pc: Pc,
        /// which table: "register", "constant", "slot", "region", "group", "input", "symbol"
        what: &'static str,
        /// the bad index
        index: u32,
        /// the table's size
        len: usize,
    },
    /// A jump leaves the program.
    #[error("{pc}: jump target {target} is outside the program (length {len})")]
    BadJumpTarget {
        /// the jump
        pc: Pc,
        /// where it goes
        target: Pc,
        /// program length
        len: usize,
    },
    /// A backward jump that does not go to a `loop_check` (not a lowered loop).
    #[error("{pc}: backward jump to {target}, which is not a loop_check")]
    BadBackEdge {
        /// the jump
        pc: Pc,
        /// where it goes
        target: Pc,
    },
    /// Execution can run past the last instruction.
    #[error("the last instruction {pc} is neither `return` nor `jump`")]
    FallsOffEnd {
        /// the last pc
        pc: Pc,
    },
    /// A register is read before it is written on some path.
    #[error("{pc}: {reg} is read before it is written on some path")]
    UndefinedRead {
        /// the reading instruction
        pc: Pc,
        /// the register
        reg: Reg,
    },
    /// A slot is owned by more than one instruction, or its record names another owner.
    #[error("{pc}: slot {slot} is not owned by this instruction ({message})")]
    BadSlot {
        /// the instruction
        pc: Pc,
        /// the slot
        slot: SlotId,
        /// what is wrong
        message: String,
    },
    /// A region record disagrees with the code.
    #[error("{region}: {message}")]
    BadRegion {
        /// the region
        region: RegionId,
        /// what is wrong
        message: String,
    },
    /// An instruction's operand lists do not match (e.g. `carry` with unequal lists).
    #[error("{pc}: {message}")]
    BadOperands {
        /// the instruction
        pc: Pc,
        /// what is wrong
        message: String,
    },
    /// The register count exceeds what the instructions name.
    #[error("the program declares {n_regs} registers, its instructions name {named}")]
    RegisterCount {
        /// the declared count
        n_regs: u32,
        /// one past the highest register an instruction names
        named: u64,
    },
    /// A graph input or output record is inconsistent.
    #[error("{io} '{name}': {message}")]
    BadIo {
        /// "input" or "output"
        io: &'static str,
        /// its name
        name: String,
        /// what is wrong
        message: String,
    },
}

/// An error lowering a graph.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LowerError {
    /// The graph failed IR verification.
    #[error(transparent)]
    Graph(shapejit_ir::IrError),
    /// A node cannot be lowered (e.g. a malformed `if`/`loop`).
    #[error("node '{node}' ({op}): {message}")]
    Unsupported {
        /// node name
        node: String,
        /// opcode
        op: &'static str,
        /// why
        message: String,
    },
    /// The lowered program failed verification: an internal bug in lowering.
    #[error("internal error: lowering produced an invalid program: {0}")]
    Internal(Box<VerifyError>),
}
