//! Errors of the IR crate. None of them is an internal bug: each comes from a
//! graph, file or call that the user supplied.

use crate::tensor::TensorError;

/// An error building, checking or parsing a graph.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum IrError {
    /// Shape inference rejected a node: the node, its op and why.
    #[error("node '{node}' ({op}): {message}")]
    Shape {
        /// node name
        node: String,
        /// opcode name
        op: &'static str,
        /// what is wrong (expected vs actual)
        message: String,
    },
    /// The graph breaks a structural invariant.
    #[error("invalid graph '{graph}': {message}")]
    Verify {
        /// graph name
        graph: String,
        /// the broken rule and where
        message: String,
    },
    /// A `.sjir` text could not be parsed.
    #[error("{line}:{column}: {message}")]
    Parse {
        /// 1-based line
        line: usize,
        /// 1-based column
        column: usize,
        /// what was expected and what was found
        message: String,
    },
    /// A tensor could not be built.
    #[error(transparent)]
    Tensor(#[from] TensorError),
}
