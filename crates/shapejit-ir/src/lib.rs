//! shapejit's graph IR: dtypes, symbolic dims, shapes, tensors, the op set,
//! graphs, a builder, shape inference, a verifier and the `.sjir` text format.
//!
//! **Invariant:** a [`Graph`] that passed [`verify`] is well-formed: values are
//! defined once, nodes are topologically ordered, and every value's type is the
//! one shape inference gives.
#![deny(missing_docs)]

pub mod builder;
pub mod builder_ops;
pub mod dim;
pub mod dtype;
pub mod error;
pub mod graph;
pub mod infer;
pub mod op;
mod serde_impls;
pub mod shape;
pub mod tensor;
pub mod text;
pub mod verify;

pub use builder::GraphBuilder;
pub use builder_ops::{BatchNormParams, ConvAttrs, GemmAttrs};
pub use dim::{Dim, Symbol};
pub use dtype::{DType, Element};
pub use error::IrError;
pub use graph::{Graph, Node, NodeId, ValueId, ValueInfo, ValueType};
pub use op::{BinaryOp, Op, ReduceOp, UnaryOp, Window2d};
pub use shape::{IntoDim, Shape};
pub use tensor::Tensor;
pub use text::parse;
pub use verify::verify;
