//! CPU kernels for shapejit: generic engines over typed, strided slices, plus
//! the math they run.
//!
//! The crate knows nothing about the graph IR: every kernel takes Rust slices
//! with explicit shapes and strides ([`View`], [`ViewMut`]) and returns a
//! [`KernelError`] instead of panicking when they do not fit together.
//!
//! Code map:
//! - [`view`]: strided views and their geometry (permute, broadcast, narrow);
//! - [`walk`]: the N-d iteration every engine shares (dim coalescing, inner runs);
//! - [`elementwise`]: unary/binary/ternary maps, copies and fills;
//! - [`reduce`]: reductions over axes;
//! - [`rows`]: softmax, log-softmax and layer norm on rows;
//! - [`matmul`]: batched matrix products on the `gemm` crate;
//! - [`packed`]: products with a constant right operand packed once (weights);
//! - [`conv`]: 2-D convolution (im2col + GEMM) and pooling;
//! - [`gather`]: gathers along an axis;
//! - [`simd`]: run-time choice of AVX2+FMA copies of hot loops;
//! - [`math`]: vectorizable f32 `exp`, `tanh`, `erf`, `sigmoid`, GELU.
//!
//! **Invariant:** a [`View`] never addresses outside its slice (checked when it is
//! built), so the engines index with offsets the view's extent covers.
//! **Invariant:** results do not depend on the CPU's features: the AVX2 paths run
//! the same IEEE operations as the portable ones (no FMA contraction; [`packed`]
//! uses fused multiply-adds on both paths).
#![deny(missing_docs)]

pub mod conv;
pub mod elementwise;
pub mod error;
pub mod gather;
pub mod math;
pub mod matmul;
pub mod packed;
pub mod reduce;
pub mod rows;
pub mod simd;
pub mod view;
pub mod walk;

pub use error::KernelError;
pub use view::{MAX_RANK, StridedShape, View, ViewMut};
