//! Errors of running a program.
//!
//! [`InputError`] variants are the caller's fault and name the input with the
//! expected and actual values; [`RunError::Op`] names the IR node whose op
//! rejected its operands; [`RunError::Internal`] is a bug in shapejit.

use shapejit_ir::DType;

/// Why a [`crate::Module`] could not be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ModuleError {
    /// The program failed the bytecode verifier.
    #[error(transparent)]
    Verify(#[from] shapejit_bytecode::VerifyError),
    /// An option is out of range.
    #[error(transparent)]
    Options(#[from] crate::options::OptionsError),
}

/// A graph input does not match the program's declared input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// Wrong number of inputs.
    #[error("expected {expected} inputs, got {actual}")]
    Count {
        /// inputs declared
        expected: usize,
        /// inputs given
        actual: usize,
    },
    /// Wrong dtype.
    #[error("input '{input}': dtype expected {expected}, got {actual}")]
    DType {
        /// input name
        input: String,
        /// declared dtype
        expected: DType,
        /// given dtype
        actual: DType,
    },
    /// Wrong rank.
    #[error("input '{input}': rank expected {expected} ({declared}), got {actual} ({shape:?})")]
    Rank {
        /// input name
        input: String,
        /// declared rank
        expected: usize,
        /// declared shape, as text
        declared: String,
        /// given rank
        actual: usize,
        /// given shape
        shape: Vec<usize>,
    },
    /// A known dim differs.
    #[error("input '{input}': dim {dim} expected {expected}, got {actual}")]
    Dim {
        /// input name
        input: String,
        /// dim index
        dim: usize,
        /// declared size
        expected: i64,
        /// given size
        actual: usize,
    },
    /// A symbolic dim disagrees with the value an earlier dim bound it to.
    #[error(
        "input '{input}': dim {dim} is '{symbol}' = {bound} (bound by an earlier dim), got {actual}"
    )]
    Symbol {
        /// input name
        input: String,
        /// dim index
        dim: usize,
        /// symbol name
        symbol: String,
        /// the bound value
        bound: i64,
        /// given size
        actual: usize,
    },
    /// A dim declared as an expression of symbols evaluates to another size.
    #[error("input '{input}': dim {dim} expected {expr} = {expected}, got {actual}")]
    Expr {
        /// input name
        input: String,
        /// dim index
        dim: usize,
        /// the declared expression
        expr: String,
        /// its value under the bound symbols
        expected: i64,
        /// given size
        actual: usize,
    },
}

/// An error running a program.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunError {
    /// A graph input does not match its declaration.
    #[error(transparent)]
    Input(#[from] InputError),
    /// An op rejected its operands (e.g. a data-dependent shape is invalid).
    #[error("node '{node}' ({op}): {message}")]
    Op {
        /// IR node name
        node: String,
        /// opcode
        op: &'static str,
        /// what the op reported
        message: String,
    },
    /// A `shape_check` failed: two dims shape inference could not prove equal
    /// (a broadcast) differ at run time.
    #[error("node '{node}': {message}")]
    ShapeCheck {
        /// IR node name
        node: String,
        /// both shapes and both dims with their sizes
        message: String,
    },
    /// A control-flow condition or loop counter is not a one-element tensor of the right dtype.
    #[error("{pc}: {message}")]
    Control {
        /// the instruction
        pc: shapejit_bytecode::Pc,
        /// what is wrong
        message: String,
    },
    /// A tensor the run needs would take the memory it holds over
    /// `Options::max_memory` (or its byte count overflows).
    #[error(
        "{what} needs {bytes} bytes, over the memory limit of {limit} bytes (Options::max_memory)"
    )]
    MemoryLimit {
        /// what needed the memory (the node and op, or the output)
        what: String,
        /// the bytes it needed (exact, also when they overflow `usize`)
        bytes: u128,
        /// the limit
        limit: usize,
    },
    /// The allocator refused memory within the limit.
    #[error("{what} needs {bytes} bytes and the allocator refused them (out of memory)")]
    OutOfMemory {
        /// what needed the memory
        what: String,
        /// requested size
        bytes: usize,
    },
    /// The run's [`crate::CancelToken`] was cancelled.
    #[error("the run was cancelled (stopped before {pc})")]
    Cancelled {
        /// the instruction that did not start
        pc: shapejit_bytecode::Pc,
    },
    /// The run's deadline passed.
    #[error("the run exceeded its deadline after {:.3} s (stopped before {pc})", after.as_secs_f64())]
    DeadlineExceeded {
        /// the instruction that did not start
        pc: shapejit_bytecode::Pc,
        /// how long the run had been running
        after: std::time::Duration,
    },
    /// A bug in shapejit (a verified program misbehaved).
    #[error("internal error at {pc}: {message}")]
    Internal {
        /// the instruction
        pc: shapejit_bytecode::Pc,
        /// what went wrong
        message: String,
    },
}
