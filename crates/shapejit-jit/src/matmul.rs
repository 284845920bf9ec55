//! Matmul epilogues: `shapejit-kernels`' GEMM (called from Rust), then one compiled
//! elementwise pass over its output applying the epilogue (bias, activation,
//! residual add) in place.
//!
//! The epilogue is an [`ElementwiseSpec`] program whose input 0 is the GEMM output
//! element and whose inputs 1.. are the extra inputs, strided relative to the output
//! shape. It reads and writes the output buffer in place, which the elementwise
//! kernel's aliasing rule allows (output = input 0 with the same contiguous layout).
//!
//! A kernel whose right operand is a constant (weights) can hold it packed
//! ([`MatMulKernel::with_packed_weights`]): products for which
//! `shapejit_kernels::packed::packed_pays` holds then run `shapejit_kernels::packed`
//! instead of re-packing the weights inside `gemm` on every call (the interpreter
//! chooses by the same rule).
//!
//! **Invariant:** the output is written twice: by the GEMM, then element by element
//! by the epilogue; nothing else reads it in between.
//! **Invariant:** the packed weights are used only for a call whose right operand is
//! the very view they were packed from (same buffer, offset, shape and strides).

use std::sync::Arc;

use shapejit_kernels::packed::{PackedB, matmul_packed, packed_pays};
use shapejit_kernels::{View, ViewMut, matmul::matmul};

use crate::elementwise::{ElementwiseKernel, ElementwiseSpec, compile_elementwise};
use crate::error::JitError;
use crate::kernel::CompiledCode;
use crate::layout::{InputLayout, ShapeMode};
use crate::program::Program;

/// What to compile.
#[derive(Clone, Debug, PartialEq)]
pub struct MatMulEpilogueSpec {
    /// kernel name
    pub name: String,
    /// output shape `[batch…, m, n]` (dim 0 a representative in family mode)
    pub out_shape: Vec<usize>,
    /// whether dim 0 is folded or the runtime `outer`
    pub mode: ShapeMode,
    /// scale of the product
    pub alpha: f32,
    /// the epilogue: input 0 = product element, inputs 1.. = `extra_inputs`; one output
    pub epilogue: Program,
    /// layouts of the extra inputs, strides relative to `out_shape`
    pub extra_inputs: Vec<InputLayout>,
}

/// A compiled matmul + epilogue.
#[derive(Debug)]
pub struct MatMulKernel {
    epilogue: ElementwiseKernel,
    alpha: f32,
    packed: Option<PackedWeights>,
}

/// Weights packed ahead of the calls, and the view they came from.
#[derive(Debug)]
struct PackedWeights {
    source: ViewIdentity,
    packed: Arc<PackedB>,
}

/// What makes two views the same operand.
#[derive(Debug)]
struct ViewIdentity {
    data: usize,
    len: usize,
    offset: usize,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

impl ViewIdentity {
    fn of(v: &View<f32>) -> ViewIdentity {
        ViewIdentity {
            data: v.data().as_ptr() as usize,
            len: v.data().len(),
            offset: v.geom().offset(),
            shape: v.shape().to_vec(),
            strides: v.geom().strides().to_vec(),
        }
    }

    /// Whether `v` is this view (compared in place: this runs on every call).
    fn is(&self, v: &View<f32>) -> bool {
        self.data == v.data().as_ptr() as usize
            && self.len == v.data().len()
            && self.offset == v.geom().offset()
            && self.shape == v.shape()
            && self.strides == v.geom().strides()
    }
}

/// Compiles the epilogue of `spec`.
pub fn compile_matmul_epilogue(spec: &MatMulEpilogueSpec) -> Result<MatMulKernel, JitError> {
    if spec.out_shape.len() < 2 {
        return Err(JitError::InvalidSpec {
            kind: "matmul epilogue",
            reason: format!("output shape {:?} has rank < 2", spec.out_shape),
        });
    }
    if spec.epilogue.outputs.len() != 1 {
        return Err(JitError::InvalidSpec {
            kind: "matmul epilogue",
            reason: format!(
                "the epilogue has {} outputs, need 1",
                spec.epilogue.outputs.len()
            ),
        });
    }
    let mut inputs = vec![InputLayout::contiguous(&spec.out_shape)];
    inputs.extend(spec.extra_inputs.iter().cloned());
    let epilogue = compile_elementwise(&ElementwiseSpec {
        name: spec.name.clone(),
        shape: spec.out_shape.clone(),
        mode: spec.mode,
        inputs,
        program: spec.epilogue.clone(),
    })?;
    Ok(MatMulKernel {
        epilogue,
        alpha: spec.alpha,
        packed: None,
    })
}

impl MatMulKernel {
    /// Uses `packed` (made from `weights` by `PackedB::pack`) for every later call whose
    /// right operand is the `[k, n]` view `weights` itself.
    pub fn with_packed_weights(mut self, weights: &View<f32>, packed: Arc<PackedB>) -> Self {
        let fits = weights.shape() == [packed.k(), packed.n()];
        self.packed = fits.then(|| PackedWeights {
            source: ViewIdentity::of(weights),
            packed,
        });
        self
    }

    /// Whether packed weights are attached.
    pub fn has_packed_weights(&self) -> bool {
        self.packed.is_some()
    }

    /// The epilogue's code.
    pub fn code(&self) -> &CompiledCode {
        self.epilogue.code()
    }

    /// The mode.
    pub fn mode(&self) -> ShapeMode {
        self.epilogue.mode()
    }

    /// The output shape of a call with `outer`.
    pub fn shape_for(&self, outer: usize) -> Vec<usize> {
        self.epilogue.shape_for(outer)
    }

    /// The packed weights, when this call may use them: `b` is the view they came
    /// from, `a` is a rank-2 `[rows, k]` whose product has `numel` elements, and
    /// `packed_pays` holds for the product.
    fn packed_for(&self, a: &View<f32>, b: &View<f32>, numel: usize) -> Option<&PackedB> {
        let weights = self.packed.as_ref()?;
        let rows = match a.shape() {
            &[rows, _] => rows,
            _ => return None,
        };
        let (k, n) = (weights.packed.k(), weights.packed.n());
        let fits = packed_pays(rows, k, n) && rows * n == numel;
        (fits && weights.source.is(b)).then_some(&*weights.packed)
    }

    /// `out = epilogue(alpha · a @ b, extras…)`. `a`, `b` are `[batch…, m, k]`,
    /// `[batch…, k, n]` views (broadcast batch dims with stride 0), or — for shared
    /// weights — `a` flattened to `[batch·m, k]` and `b` `[k, n]`, which runs one large
    /// GEMM instead of one per batch index; `out` is contiguous.
    pub fn run(
        &self,
        a: &View<f32>,
        b: &View<f32>,
        extras: &[&[f32]],
        out: &mut [f32],
        outer: usize,
    ) -> Result<(), JitError> {
        let name = || self.code().name().to_string();
        let bad = |what: String, expected: usize, actual: usize| JitError::BadCall {
            kernel: name(),
            what,
            expected,
            actual,
        };
        let shape = self.shape_for(outer);
        let numel = self
            .epilogue
            .output_len(outer)
            .ok_or_else(|| bad("output extent".to_string(), usize::MAX, 0))?;
        if out.len() < numel {
            return Err(bad("output length".to_string(), numel, out.len()));
        }
        if extras.len() + 1 != self.epilogue.n_inputs() {
            return Err(bad(
                "extra inputs".to_string(),
                self.epilogue.n_inputs() - 1,
                extras.len(),
            ));
        }
        for (k, extra) in extras.iter().enumerate() {
            let need = self
                .epilogue
                .input_len(k + 1, outer)
                .ok_or_else(|| bad(format!("extra input {k} extent"), usize::MAX, 0))?;
            if extra.len() < need {
                return Err(bad(format!("extra input {k} length"), need, extra.len()));
            }
        }
        {
            // The product's view: the output shape, or — when the caller flattened the
            // batch into the rows of a rank-2 `a` — `[rows, n]` over the same buffer.
            let gemm_shape: Vec<usize> = if a.shape().len() == 2 && shape.len() > 2 {
                vec![a.shape()[0], shape[shape.len() - 1]]
            } else {
                shape.clone()
            };
            if gemm_shape.iter().product::<usize>() != numel {
                return Err(bad(
                    "flattened product rows".to_string(),
                    numel,
                    gemm_shape.iter().product(),
                ));
            }
            let gemm_err = |e: shapejit_kernels::KernelError| JitError::Gemm {
                kernel: name(),
                message: e.to_string(),
            };
            match self.packed_for(a, b, numel) {
                Some(packed) => {
                    matmul_packed(&mut out[..numel], a, packed, self.alpha).map_err(gemm_err)?
                }
                None => {
                    let mut view =
                        ViewMut::contiguous(&mut out[..numel], &gemm_shape).map_err(gemm_err)?;
                    matmul(&mut view, a, b, self.alpha, false).map_err(gemm_err)?
                }
            }
        }
        let out_ptr = out.as_mut_ptr();
        let mut in_ptrs: Vec<*const f32> = vec![out_ptr.cast_const()];
        in_ptrs.extend(extras.iter().map(|s| s.as_ptr()));
        // SAFETY: every extent was checked above; the output aliases only input 0, which
        // has the output's own contiguous layout (allowed by the elementwise contract).
        unsafe { self.epilogue.run_unchecked(&in_ptrs, &[out_ptr], outer) };
        Ok(())
    }
}
