//! Errors of the JIT tier.
//!
//! Every variant names the thing at fault. A compile error never surfaces as a run
//! failure: the VM counts it and keeps the slot on the interpreter.
//!
//! **Invariant:** `Codegen` and `Module` mean an internal bug (a spec that passed
//! validation produced IR Cranelift rejected); the other variants are caller errors
//! or host limitations.

use thiserror::Error;

/// What went wrong while building the ISA, validating a spec, compiling or calling a kernel.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum JitError {
    /// The host CPU cannot run the code this tier emits.
    #[error("no tier-up without AVX+FMA: host lacks {missing}")]
    UnsupportedHost {
        /// The missing feature(s), e.g. `"fma"`.
        missing: String,
    },
    /// `cranelift_native` could not describe the host, or a flag was rejected.
    #[error("cannot build the native ISA: {0}")]
    Isa(String),
    /// The spec handed to a compile function is malformed.
    #[error("invalid {kind} spec: {reason}")]
    InvalidSpec {
        /// Which spec (`elementwise`, `row`, `matmul epilogue`).
        kind: &'static str,
        /// What is wrong, naming the input/value/dim at fault.
        reason: String,
    },
    /// Cranelift rejected the generated function (internal bug).
    #[error("codegen failed for kernel `{kernel}`: {message}")]
    Codegen {
        /// The kernel's name.
        kernel: String,
        /// Cranelift's message.
        message: String,
    },
    /// A call passed the wrong number of buffers or a buffer too small for the spec.
    #[error("bad call of kernel `{kernel}`: {what}: expected {expected}, got {actual}")]
    BadCall {
        /// The kernel's name.
        kernel: String,
        /// Which argument (`inputs`, `output 1 length`, ...).
        what: String,
        /// What the kernel's signature needs.
        expected: usize,
        /// What the caller passed.
        actual: usize,
    },
    /// The kernels crate (GEMM) rejected a call.
    #[error("gemm failed in kernel `{kernel}`: {message}")]
    Gemm {
        /// The kernel's name.
        kernel: String,
        /// The kernels crate's message.
        message: String,
    },
}
