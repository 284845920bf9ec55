//! Op implementations for the interpreter: for each IR [`Op`], the concrete
//! output types for given inputs, view layouts for ops that need no copy, and
//! execution on [`crate::kernels`](shapejit_kernels) primitives.
//!
//! **Invariant:** these functions define what every op computes at run time; the
//! JIT is checked against them.
//!
//! Interface used by the interpreter:
//! - [`output_types`]: concrete dtypes and shapes of the outputs (reads the
//!   contents of shape-like inputs such as `reshape`'s target);
//! - [`view`]: for ops that can alias their first input (transpose, slice,
//!   reshape of a contiguous input, squeeze, unsqueeze, flatten, identity,
//!   expand), the output layout in the same buffer; `None` means "compute";
//! - [`execute`]: computes outputs into contiguous buffers.
//!
//! Control flow (`if`, `loop`) and `constant` are handled by the interpreter itself.
