//! [`JitKernel`]: a compiled elementwise region as the interpreter's
//! [`RegionKernel`].
//!
//! **Invariant:** `run` is only called with inputs that passed the kernel's guard
//! (the interpreter calls `lookup`, then `output_types` and `run` with the same
//! inputs); it still goes through the checked `ElementwiseKernel::run`, so a mismatch
//! is an `OpError`, never an out-of-bounds access.

use super::guard::rank_and_batch;
use crate::hook::RegionKernel;
use crate::ops::{OpError, OutType, OutTypes};
use crate::tensor::{Dims, TensorMut, TensorRef};
use shapejit_ir::DType;
use shapejit_jit::{ElementwiseKernel, ShapeMode};

/// How a kernel derives its output shape from a call's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeRule {
    /// the compiled shape
    Exact,
    /// the (common) shape of the inputs (weak guard)
    SameAsInputs,
    /// the compiled shape with dim 0 = the call's batch
    Family,
}

/// A compiled region kernel.
#[derive(Debug)]
pub struct JitKernel {
    code: ElementwiseKernel,
    out_shape: Dims,
    rule: ShapeRule,
}

impl JitKernel {
    /// Wraps compiled code producing outputs of `out_shape` under `rule`.
    pub fn new(code: ElementwiseKernel, out_shape: Dims, rule: ShapeRule) -> JitKernel {
        JitKernel {
            code,
            out_shape,
            rule,
        }
    }

    /// Bytes of machine code.
    pub fn code_bytes(&self) -> usize {
        self.code.code().code_bytes()
    }

    fn shape_for(&self, inputs: &[TensorRef<'_>]) -> (Dims, usize) {
        match self.rule {
            ShapeRule::Exact => (self.out_shape.clone(), 0),
            ShapeRule::SameAsInputs => (
                inputs
                    .first()
                    .map(|t| t.shape().iter().copied().collect())
                    .unwrap_or_default(),
                0,
            ),
            ShapeRule::Family => {
                let (_, batch) = rank_and_batch(inputs.iter().map(|t| t.shape()));
                let mut shape = self.out_shape.clone();
                shape[0] = batch;
                (shape, batch)
            }
        }
    }
}

fn kernel_error(message: String) -> OpError {
    OpError::Unsupported {
        op: "jit_kernel",
        message,
    }
}

impl RegionKernel for JitKernel {
    fn output_types(&self, inputs: &[TensorRef<'_>]) -> Result<OutTypes, OpError> {
        let (shape, _) = self.shape_for(inputs);
        Ok((0..self.code.n_outputs())
            .map(|_| OutType {
                dtype: DType::F32,
                shape: shape.clone(),
            })
            .collect())
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<(), OpError> {
        let (_, batch) = self.shape_for(inputs);
        let slices: Vec<&[f32]> = inputs
            .iter()
            .enumerate()
            .map(|(k, t)| {
                t.elems::<f32>()
                    .and_then(|all| all.get(t.layout.offset..))
                    .ok_or_else(|| kernel_error(format!("input {k} is not an f32 view")))
            })
            .collect::<Result<_, _>>()?;
        let mut outs: Vec<&mut [f32]> = outputs
            .iter_mut()
            .enumerate()
            .map(|(k, t)| {
                t.elems_mut::<f32>()
                    .ok_or_else(|| kernel_error(format!("output {k} is not f32")))
            })
            .collect::<Result<_, _>>()?;
        self.code
            .run(&slices, &mut outs, batch)
            .map_err(|e| kernel_error(e.to_string()))
    }

    fn is_family(&self) -> bool {
        self.code.mode() == ShapeMode::Family
    }
}
