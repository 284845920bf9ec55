//! Errors of the ONNX importer.
//!
//! Every variant comes from the model file the user supplied (none is an
//! internal bug): each names the thing at fault — the node (name and op type),
//! the opset, the attribute or input, the tensor, or the file.
//!
//! **Invariant:** no variant means an internal bug; each is a property of the
//! input model (or of the file system, for [`OnnxError::Io`]).

use std::path::PathBuf;

/// Where in the model a node-level problem is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRef {
    /// ONNX op type, e.g. `Conv`.
    pub op_type: String,
    /// node name (or `#index` when the node has none)
    pub node: String,
    /// opset version of the default domain
    pub opset: i64,
}

impl std::fmt::Display for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node '{}' ({}, opset {})",
            self.node, self.op_type, self.opset
        )
    }
}

/// An error loading an ONNX model.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file could not be read or mapped.
    #[error("cannot read '{path}': {source}")]
    Io {
        /// the file
        path: PathBuf,
        /// the OS error
        source: std::io::Error,
    },
    /// The bytes are not a valid ONNX protobuf (truncated, corrupted, not ONNX).
    #[error("malformed ONNX protobuf: {0}")]
    Decode(#[from] prost::DecodeError),
    /// A required part of the model is missing or inconsistent.
    #[error("invalid model: {0}")]
    Invalid(String),
    /// The model's default-domain opset is outside the supported range.
    #[error("unsupported opset {opset} (supported: {min}..={max})")]
    Opset {
        /// the model's opset
        opset: i64,
        /// lowest supported
        min: i64,
        /// highest supported
        max: i64,
    },
    /// An op type (or a domain) the importer does not map.
    #[error("{at}: unsupported op")]
    UnsupportedOp {
        /// the node
        at: NodeRef,
    },
    /// A node of an operator domain other than the default one (`ai.onnx.ml`,
    /// `ai.onnx.preview.training`, vendor domains).
    #[error("{at}: unsupported domain '{domain}'")]
    UnsupportedDomain {
        /// the node
        at: NodeRef,
        /// the node's domain
        domain: String,
    },
    /// A node uses a feature (attribute value, input form, dtype) the importer
    /// does not map; `what` says which.
    #[error("{at}: unsupported: {what}")]
    Unsupported {
        /// the node
        at: NodeRef,
        /// what is unsupported
        what: String,
    },
    /// A node is malformed (missing input, wrong attribute type, ...).
    #[error("{at}: {what}")]
    BadNode {
        /// the node
        at: NodeRef,
        /// what is wrong
        what: String,
    },
    /// A tensor (initializer, constant attribute, test data) is malformed or
    /// has an unsupported data type.
    #[error("tensor '{name}': {what}")]
    Tensor {
        /// tensor name
        name: String,
        /// what is wrong
        what: String,
    },
    /// A graph input or output has an unusable type.
    #[error("graph value '{name}': {what}")]
    Value {
        /// value name
        name: String,
        /// what is wrong
        what: String,
    },
    /// Shape inference or graph verification rejected the imported graph.
    #[error("{at}: {source}")]
    Ir {
        /// the ONNX node being imported (or the graph, for verification)
        at: String,
        /// the IR error
        source: shapejit_ir::IrError,
    },
}
