//! shapejit's register bytecode: the instruction set, lowering from the graph IR
//! (liveness, register allocation, region formation, memory plan), the bytecode
//! verifier and the text listing.
//!
//! **Invariant:** every [`Program`] the interpreter runs has passed [`verify()`];
//! [`lower()`] verifies what it produces, and a loaded program must be verified
//! before use.
#![deny(missing_docs)]

pub mod error;
pub mod ids;
pub mod image;
pub mod instr;
pub mod listing;
pub mod lower;
pub mod program;
pub mod verify;

pub use error::{LowerError, VerifyError};
pub use ids::{ConstId, GroupId, InputIdx, Pc, Reg, RegionId, SlotId, SymbolId};
pub use instr::{Instr, Out, Region, RegionKind, SlotInfo, SlotKind};
pub use lower::lower;
pub use program::{DimCheck, GroupInfo, IoSpec, MemoryPlan, Program};
pub use verify::verify;
