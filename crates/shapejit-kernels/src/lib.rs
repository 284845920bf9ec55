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
//! - [`cpu`]: CPU feature levels (scalar, AVX2+FMA, AVX-512), detected once,
//!   capped by `SHAPEJIT_CPU`;
//! - `simd`: running a loop at the chosen level, and the SIMD vector trait the
//!   transcendentals are written against (`f32`, `__m256`, `__m512`);
//! - [`math`]: f32 `exp`, `log`, `tanh`, `erf`, `sigmoid`, GELU with stated
//!   error bounds (one formula per function, every level);
//! - [`vmath`]: those functions over slices at full width, one `extern "C"`
//!   entry point per function and level.
//!
//! **Invariant:** a [`View`] never addresses outside its slice (checked when it is
//! built), so the engines index with offsets the view's extent covers.
//! **Invariant:** auto-vectorized loops (maps, rows) run the same IEEE
//! operations at every CPU level (no FMA contraction; [`packed`] uses fused
//! multiply-adds on both of its paths), so their results do not depend on the
//! level; the [`vmath`] kernels use fused multiply-adds where the level has
//! them and stay within the bounds [`math`] states at every level (AVX2 and
//! AVX-512 are bit-identical).
#![deny(missing_docs)]

pub mod attention;
pub mod conv;
pub mod cpu;
pub mod elementwise;
pub mod error;
pub mod gather;
pub mod math;
pub mod matmul;
pub mod micro;
pub mod packed;
pub mod reduce;
pub mod rows;
pub(crate) mod simd;
pub mod view;
pub mod vmath;
pub mod walk;

pub use cpu::Level;
pub use error::KernelError;
pub use view::{MAX_RANK, StridedShape, View, ViewMut};
pub use vmath::{Unary, UnaryFn};
