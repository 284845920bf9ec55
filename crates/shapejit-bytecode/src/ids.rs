//! Typed indices used throughout the bytecode.
//!
//! **Invariant:** every id is an index into one table of a [`crate::Program`]
//! (registers, constants, slots, regions, storage groups, instructions); the
//! verifier checks that each id in a program is in range for its table.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, serde::Serialize, serde::Deserialize)]
        pub struct $name(pub u32);

        impl $name {
            /// The index as `usize`.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A virtual register of the interpreter (`%r7`).
    Reg,
    "%r"
);
id_type!(
    /// A profile/code-cache slot (one per tensor instruction and region head).
    SlotId,
    "s"
);
id_type!(
    /// An index into [`crate::Program::constants`] (`c3`).
    ConstId,
    "c"
);
id_type!(
    /// A program counter: an index into [`crate::Program::instrs`] (`@12`).
    Pc,
    "@"
);
id_type!(
    /// A fusible region (`region 2`).
    RegionId,
    "region "
);
id_type!(
    /// A storage group of the memory plan (`g4`).
    GroupId,
    "g"
);
id_type!(
    /// An index into [`crate::Program::inputs`].
    InputIdx,
    "input "
);
id_type!(
    /// An index into [`crate::Program::symbols`].
    SymbolId,
    "$"
);
