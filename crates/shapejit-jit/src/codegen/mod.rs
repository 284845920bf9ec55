//! Cranelift IR generation. Everything here is crate-private; the public kernel kinds
//! (`elementwise`, `row`, `matmul`) call in with validated specs.
//!
//! **Invariant:** generated code contains no relocations; its only calls are to the
//! micro-kernels of the table it is passed (`tiles`).

pub(crate) mod elementwise;
pub(crate) mod function;
pub(crate) mod lanes;
pub(crate) mod loops;
pub(crate) mod math;
pub(crate) mod program;
pub(crate) mod row;
pub(crate) mod stages;
pub(crate) mod tiles;
