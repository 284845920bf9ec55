//! The tier-1 hook: how a JIT plugs into the interpreter at `shape_guard`.
//!
//! At a region head the interpreter interns the shape key of the region's
//! inputs and asks the module's [`RegionExecutor`] (if any) for a kernel. On a
//! hit it asks the kernel for the output types, sizes the outputs' storage
//! groups, runs the kernel holding an `Arc` to it (so an eviction cannot free
//! running code), writes the region's output registers and jumps over the
//! region. On a miss (or a kernel error) it falls through into the region's own
//! instructions — deoptimization is only a PC change — and, once the region has
//! been interpreted, reports the timing with [`RegionExecutor::observe`], which
//! is where a tiering policy decides to compile.
//!
//! **Invariant:** a kernel's outputs must equal what interpreting the region
//! would produce (the interpreter is the specification); the interpreter
//! checks the kernel's output count and types against the region record.

use crate::ops::{OpError, OutTypes};
use crate::pool::Pool;
use crate::profile::Observation;
use crate::shape_key::ShapeKey;
use crate::tensor::{TensorMut, TensorRef};
use shapejit_bytecode::{Region, SlotId};
use std::sync::Arc;

/// What the interpreter knows at a region head.
pub struct GuardCtx<'a> {
    /// the guard's slot
    pub slot: SlotId,
    /// the region record
    pub region: &'a Region,
    /// the interned key of the region inputs (pointer-equal for equal keys)
    pub key: &'a Arc<ShapeKey>,
    /// the region inputs, in [`Region::inputs`] order
    pub inputs: &'a [TensorRef<'a>],
}

/// A compiled region.
pub trait RegionKernel: Send + Sync {
    /// Output dtypes and shapes for these inputs, in [`Region::outputs`] order.
    fn output_types(&self, inputs: &[TensorRef<'_>]) -> Result<OutTypes, OpError>;
    /// Computes the outputs (contiguous) from the inputs, splitting the work across
    /// `pool` (the module's intra-op pool, `None` with one thread) where it is large
    /// enough. Outputs must not depend on the pool's thread count.
    fn run(
        &self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
        pool: Option<&Pool>,
    ) -> Result<(), OpError>;
    /// True for a shape-family kernel (one dim kept as a runtime argument).
    fn is_family(&self) -> bool;
}

/// The JIT side of tiering, installed in a [`crate::Module`].
pub trait RegionExecutor: Send + Sync {
    /// A compiled kernel for this region head, if one matches the key.
    fn lookup(&self, ctx: &GuardCtx<'_>) -> Option<Arc<dyn RegionKernel>>;
    /// Called after the interpreter ran a region (always, whether or not
    /// [`crate::Options::profile`] is on): the key and its counts and mean time
    /// in the slot's window.
    fn observe(&self, slot: SlotId, region: &Region, key: &Arc<ShapeKey>, obs: Observation);
}
