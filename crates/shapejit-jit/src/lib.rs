//! Cranelift code generation for shapejit's fused, shape-specialized regions.
//!
//! Three region kinds compile to machine code:
//! - [`ElementwiseSpec`] → [`ElementwiseKernel`]: a [`Program`] over strided inputs;
//! - [`RowSpec`] → [`RowKernel`]: softmax / log-softmax / layer-norm / reductions over
//!   the last axis with elementwise prologue and epilogue;
//! - [`MatMulEpilogueSpec`] → [`MatMulKernel`]: the GEMM of `shapejit-kernels`, then
//!   one fused elementwise pass over its output (bias, activation, residual add).
//!
//! Every dim of the shape is folded into the code; a [`ShapeMode::Family`] kernel keeps
//! the outermost dim as a runtime argument instead, so one kernel serves every batch
//! size. The code generators know nothing of the VM.
//!
//! [`tier`] is the JIT tier itself, on top of them: it translates bytecode regions to
//! these specs, guards and caches kernels per slot, decides what to compile
//! ([`tier::policy`], a pure state machine) and runs the compiler thread. It plugs into
//! the interpreter through `shapejit-vm`'s narrow hook ([`shapejit_vm::hook`]); install
//! it with [`make_executor`] or [`jit_module`].
//!
//! # Performance (measured with `examples/throughput.rs`, release, loaded 2-core host)
//! Compile time: 0.19 ms for `relu(x+b)` (229 B of code), 0.8 ms for `gelu_erf(x+b)`
//! (2.5 KB), 0.5 ms for a softmax or layer-norm row kernel. Throughput on 512 Ki
//! elements against plain Rust loops (LLVM auto-vectorized, libm transcendentals):
//! memory-bound bodies ≈ 0.85–0.93× (Cranelift's 128-bit vectors vs LLVM), `exp` 2.7×,
//! `tanh` 4.9×, `gelu_tanh` 6.7×, layer-norm 7.8×. Against AVX2 (256-bit) kernels, as
//! the interpreter's, transcendental-heavy bodies are about 2× slower per element:
//! x64 Cranelift has no 256-bit vectors.
//!
//! **Invariant:** code is emitted only for hosts with AVX and FMA ([`check_host`]).
//! **Invariant:** each kernel owns its code and frees it on drop ([`live_code_bytes`]).

#![deny(missing_docs)]

mod attention;
mod codegen;
mod elementwise;
mod error;
mod isa;
mod kernel;
mod layout;
mod matmul;
mod program;
mod row;
pub mod tier;

pub use attention::{AttentionKernel, AttentionSpec, Operands as AttentionOperands, ScaleOp};
pub use elementwise::{
    ElementwiseKernel, ElementwiseSpec, Shape, Spread, compile_elementwise,
    compile_elementwise_inline, in_order,
};
pub use error::JitError;
pub use isa::check_host;
pub use kernel::{CompiledCode, live_code_bytes, live_kernels};
pub use layout::{InputLayout, ShapeMode, contiguous_strides, required_len};
pub use matmul::{MatMulEpilogueSpec, MatMulKernel, compile_matmul_epilogue};
pub use program::{BinaryOp, CmpOp, InputId, Op, Program, UnaryOp, ValueId, ValueType};
pub use row::{MAX_ROW_DIMS, RowInput, RowKernel, RowOp, RowSpec, compile_row};
pub use tier::{JitHandle, jit_module, make_executor};
