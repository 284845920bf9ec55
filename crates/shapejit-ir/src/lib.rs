//! shapejit's graph IR: dtypes, symbolic dims, shapes, tensors, the op set,
//! graphs, a builder, shape inference, a verifier and the `.sjir` text format.
//!
//! - [`GraphBuilder`] adds inputs and nodes (one method per op, in
//!   [`builder_ops`]); [`infer`] runs on every node as it is added, so an
//!   error names the node that caused it.
//! - [`verify()`] checks a finished graph (also one parsed from text).
//! - [`text`]: `Display` for [`Graph`] prints `.sjir`, [`parse`] reads it.
//! - [`fuse`]: load-time rewrites of exported patterns (GELU) into single ops.
//!
//! ```
//! use shapejit_ir::{DType, GraphBuilder, Tensor, parse, shape, verify};
//!
//! let mut b = GraphBuilder::new("mlp");
//! let x = b.input("x", DType::F32, shape!["batch", 4]);
//! let w = b.constant("w", Tensor::zeros(DType::F32, &[4, 2])?);
//! let h = b.matmul(x, w)?;
//! let y = b.relu(h)?;
//! b.output("y", y)?;
//! let g = b.finish()?;
//! assert_eq!(b_type(&g, "y"), "f32[batch, 2]");
//!
//! let text = g.to_string();
//! let back = parse(&text)?;
//! verify(&back)?;
//! assert_eq!(back.to_string(), text);
//! # fn b_type(g: &shapejit_ir::Graph, name: &str) -> String {
//! #     g.value(g.value_by_name(name).unwrap()).ty.to_string()
//! # }
//! # Ok::<(), shapejit_ir::IrError>(())
//! ```
//!
//! **Invariant:** a [`Graph`] that passed [`verify()`] is well-formed: values are
//! defined once, nodes are topologically ordered, and every value's type is the
//! one shape inference gives.
#![deny(missing_docs)]

pub mod builder;
pub mod builder_ops;
pub mod dim;
pub mod dtype;
pub mod error;
pub mod file;
pub mod fuse;
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
pub use dtype::{DType, Element, Num, Scalar};
pub use error::IrError;
pub use graph::{Graph, Node, NodeId, ValueId, ValueInfo, ValueType};
pub use op::{Activation, BinaryOp, MathFn, Op, ReduceOp, ScatterReduction, UnaryOp, Window2d};
pub use shape::{IntoDim, Shape};
pub use tensor::Tensor;
pub use text::parse;
pub use verify::verify;
