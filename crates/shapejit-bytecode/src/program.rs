//! A lowered program: instructions, constants, slots, regions, graph I/O and
//! the memory plan.
//!
//! **Invariant:** a [`Program`] handed to the interpreter has passed
//! [`crate::verify::verify`]; [`crate::lower::lower`] only returns verified programs.

use crate::ids::{GroupId, SymbolId};
use crate::instr::{Instr, Region, SlotInfo};
use shapejit_ir::{Dim, Tensor, ValueType};

/// How one declared dim of a graph input is checked at run time.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum DimCheck {
    /// must equal this value
    Known(i64),
    /// binds the symbol on first sight, then must agree with it
    Symbol(SymbolId),
    /// an expression of symbols bound by [`DimCheck::Symbol`] dims; checked after binding
    Expr(Dim),
}

/// A graph input or output: its name and declared type.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IoSpec {
    /// value name in the graph
    pub name: String,
    /// declared dtype and (symbolic) shape
    pub ty: ValueType,
    /// one check per declared dim (inputs only; empty for outputs)
    pub dims: Vec<DimCheck>,
}

/// One storage group of the memory plan.
#[derive(Clone, Debug, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct GroupInfo {
    /// names of the values whose data this group holds, in program order
    pub values: Vec<String>,
}

/// The memory plan: values whose lifetimes do not overlap share a group; each
/// group's buffer is sized at run time to the largest tensor it has held.
#[derive(Clone, Debug, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct MemoryPlan {
    /// the groups, indexed by [`GroupId`]
    pub groups: Vec<GroupInfo>,
}

impl MemoryPlan {
    /// Number of groups.
    pub fn n_groups(&self) -> usize {
        self.groups.len()
    }

    /// The group with this id.
    pub fn group(&self, id: GroupId) -> Option<&GroupInfo> {
        self.groups.get(id.index())
    }
}

/// A complete bytecode program.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Program {
    /// program name (the graph's)
    pub name: String,
    /// the code
    pub instrs: Vec<Instr>,
    /// constants (weights), indexed by [`crate::ConstId`]
    pub constants: Vec<Tensor>,
    /// names of the constants (the IR values they came from)
    pub constant_names: Vec<String>,
    /// number of registers
    pub n_regs: u32,
    /// slots, indexed by [`crate::SlotId`]
    pub slots: Vec<SlotInfo>,
    /// graph inputs
    pub inputs: Vec<IoSpec>,
    /// graph outputs
    pub outputs: Vec<IoSpec>,
    /// symbols bound by the inputs' dims, indexed by [`SymbolId`]
    pub symbols: Vec<String>,
    /// the memory plan
    pub memory: MemoryPlan,
    /// fusible regions, indexed by [`crate::RegionId`]
    pub regions: Vec<Region>,
}
