//! Cranelift IR generation. Everything here is crate-private; the public kernel kinds
//! (`elementwise`, `row`, `matmul`) call in with validated specs.
//!
//! **Invariant:** generated code contains no calls and no relocations.

pub(crate) mod elementwise;
pub(crate) mod function;
pub(crate) mod lanes;
pub(crate) mod loops;
pub(crate) mod math;
pub(crate) mod program;
pub(crate) mod row;
pub(crate) mod stages;
