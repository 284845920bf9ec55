//! The error type of every kernel.
//!
//! **Invariant:** a kernel reports misfitting arguments with a [`KernelError`];
//! it never panics on them.

/// Why a kernel refused its arguments.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// A view's shape/strides address elements outside its slice.
    #[error(
        "view of shape {shape:?} strides {strides:?} offset {offset} does not fit {len} elements"
    )]
    OutOfBounds {
        /// dims
        shape: Vec<usize>,
        /// strides in elements
        strides: Vec<isize>,
        /// element offset
        offset: usize,
        /// slice length
        len: usize,
    },
    /// More dims than [`crate::MAX_RANK`].
    #[error("rank {0} exceeds the kernels' maximum rank {max}", max = crate::MAX_RANK)]
    RankTooLarge(usize),
    /// Operand shapes that do not agree.
    #[error("{what}: expected shape {expected:?}, got {actual:?}")]
    ShapeMismatch {
        /// which operand
        what: &'static str,
        /// the shape required
        expected: Vec<usize>,
        /// the shape given
        actual: Vec<usize>,
    },
    /// A gather index outside `-size..size`.
    #[error("index {index} is out of range for a dim of size {size}")]
    IndexOutOfRange {
        /// the index
        index: i64,
        /// the dim size
        size: usize,
    },
    /// An argument outside what the kernel accepts (message says which).
    #[error("{0}")]
    Invalid(String),
}
