//! Row kernels: a reduction or normalization over the last axis, with an elementwise
//! prologue (computing the row element from the inputs) and epilogue (applied to the
//! normalized element or the reduced value).
//!
//! The kernel iterates `rows` rows of `row_len` elements. Input `k` addresses element
//! `j` of row `r` at `r·row_stride + j·elem_stride` (elem_stride 0 = broadcast along
//! the row, 1 = contiguous). Normalizing ops ([`RowOp::Softmax`],
//! [`RowOp::LogSoftmax`], [`RowOp::LayerNorm`]) write one contiguous
//! `[rows, row_len]` output; reductions write `[rows]`.
//!
//! Layer-norm's scale and bias are part of the epilogue (`RowResult · scale + bias`,
//! with scale and bias as inputs of row stride 0), see [`RowSpec::layer_norm`].
//!
//! # Calling contract
//! [`RowKernel::run`] checks buffer counts and lengths; [`RowKernel::run_unchecked`]
//! checks nothing (the caller guarantees the extents [`RowKernel::input_len`] and
//! [`RowKernel::output_len`], and that the output overlaps no input).
//!
//! Tolerance against an f64 reference: sums accumulate in f32 over 16 partial sums,
//! ≈ 1e-6·√row_len relative; softmax/log-softmax add the exp/log bounds.
//!
//! **Invariant:** rows are independent; the result of row `r` depends only on row `r`
//! of every input.

use crate::codegen::function::compile_function;
use crate::codegen::row::{RowPlan, emit_row_kernel};
use crate::error::JitError;
use crate::kernel::CompiledCode;
use crate::layout::ShapeMode;
use crate::program::{BinaryOp, Op, Program, ProgramContext};

/// What a row kernel computes per row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RowOp {
    /// `e^(x−max) / Σ e^(x−max)`
    Softmax,
    /// `x − max − ln Σ e^(x−max)`
    LogSoftmax,
    /// `(x − mean) / √(var + eps)` (biased variance)
    LayerNorm {
        /// added to the variance
        eps: f32,
    },
    /// `Σ x`
    Sum,
    /// `Σ x / row_len`
    Mean,
    /// `max x`
    Max,
}

impl RowOp {
    /// True for ops with one output value per row.
    pub fn is_reduction(self) -> bool {
        matches!(self, RowOp::Sum | RowOp::Mean | RowOp::Max)
    }
}

/// How one input is addressed: `r·row_stride + j·elem_stride` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowInput {
    /// elements between rows (0 = the same row for every row)
    pub row_stride: usize,
    /// elements between row elements: 0 (broadcast) or 1 (contiguous)
    pub elem_stride: usize,
}

/// What to compile.
#[derive(Clone, Debug, PartialEq)]
pub struct RowSpec {
    /// kernel name
    pub name: String,
    /// number of rows (a representative in family mode, where `outer` = rows)
    pub rows: usize,
    /// elements per row (always folded)
    pub row_len: usize,
    /// whether `rows` is folded or the runtime `outer`
    pub mode: ShapeMode,
    /// the inputs
    pub inputs: Vec<RowInput>,
    /// computes the row element from the inputs (exactly one output)
    pub prologue: Program,
    /// the row operation
    pub op: RowOp,
    /// applied to each result (`Op::RowResult`); exactly one output. For reductions it
    /// may only read inputs with element stride 0 (one value per row).
    pub epilogue: Option<Program>,
}

impl RowSpec {
    /// Layer norm of contiguous `[rows, row_len]` input 0, scaled by input 1 and
    /// shifted by input 2 (both `[row_len]`).
    pub fn layer_norm(
        name: &str,
        rows: usize,
        row_len: usize,
        eps: f32,
        mode: ShapeMode,
    ) -> RowSpec {
        let mut prologue = Program::new();
        let x = prologue.input(0);
        prologue.output(x);
        let mut epilogue = Program::new();
        let y = epilogue.push(Op::RowResult);
        let g = epilogue.input(1);
        let bias = epilogue.input(2);
        let scaled = epilogue.binary(BinaryOp::Mul, y, g);
        let out = epilogue.binary(BinaryOp::Add, scaled, bias);
        epilogue.output(out);
        let param = RowInput {
            row_stride: 0,
            elem_stride: 1,
        };
        RowSpec {
            name: name.to_string(),
            rows,
            row_len,
            mode,
            inputs: vec![
                RowInput {
                    row_stride: row_len,
                    elem_stride: 1,
                },
                param,
                param,
            ],
            prologue,
            op: RowOp::LayerNorm { eps },
            epilogue: Some(epilogue),
        }
    }
}

/// A compiled row kernel.
#[derive(Debug)]
pub struct RowKernel {
    code: CompiledCode,
    spec_rows: usize,
    row_len: usize,
    mode: ShapeMode,
    inputs: Vec<RowInput>,
    reduction: bool,
}

const KIND: &str = "row";

fn invalid(reason: String) -> JitError {
    JitError::InvalidSpec { kind: KIND, reason }
}

fn validate(spec: &RowSpec) -> Result<(), JitError> {
    if spec.row_len == 0 || spec.row_len > 1 << 28 {
        return Err(invalid(format!(
            "row length {} is out of range 1..=2^28",
            spec.row_len
        )));
    }
    if spec.rows > 1 << 36 {
        return Err(invalid(format!("{} rows are too many", spec.rows)));
    }
    for (k, input) in spec.inputs.iter().enumerate() {
        if input.elem_stride > 1 {
            return Err(invalid(format!(
                "input {k} has element stride {} (need 0 or 1)",
                input.elem_stride
            )));
        }
        if input.row_stride > 1 << 36 {
            return Err(invalid(format!(
                "input {k} row stride {} is too large",
                input.row_stride
            )));
        }
    }
    let n_inputs = spec.inputs.len();
    spec.prologue
        .validate(ProgramContext {
            n_inputs,
            row_result: false,
        })
        .map_err(|e| invalid(format!("prologue: {e}")))?;
    if spec.prologue.outputs.len() != 1 {
        return Err(invalid(format!(
            "the prologue has {} outputs, need 1",
            spec.prologue.outputs.len()
        )));
    }
    if let Some(epi) = &spec.epilogue {
        epi.validate(ProgramContext {
            n_inputs,
            row_result: true,
        })
        .map_err(|e| invalid(format!("epilogue: {e}")))?;
        if spec.op.is_reduction() {
            for op in &epi.ops {
                if let Op::Input(k) = op
                    && spec.inputs[k.0 as usize].elem_stride != 0
                {
                    return Err(invalid(format!(
                        "a reduction epilogue reads {k}, which varies along the row"
                    )));
                }
            }
        }
        if epi.outputs.len() != 1 {
            return Err(invalid(format!(
                "the epilogue has {} outputs, need 1",
                epi.outputs.len()
            )));
        }
    }
    Ok(())
}

/// Compiles a row kernel.
pub fn compile_row(spec: &RowSpec) -> Result<RowKernel, JitError> {
    validate(spec)?;
    let rows_const = match spec.mode {
        ShapeMode::Exact => Some(spec.rows as u64),
        ShapeMode::Family => None,
    };
    let plan = RowPlan {
        row_len: spec.row_len,
        inputs: &spec.inputs,
        prologue: &spec.prologue,
        op: spec.op,
        epilogue: spec.epilogue.as_ref(),
    };
    let code = compile_function(&spec.name, |b, params| {
        emit_row_kernel(b, params, &plan, rows_const)
    })?;
    Ok(RowKernel {
        code,
        spec_rows: spec.rows,
        row_len: spec.row_len,
        mode: spec.mode,
        inputs: spec.inputs.clone(),
        reduction: spec.op.is_reduction(),
    })
}

impl RowKernel {
    /// The code object.
    pub fn code(&self) -> &CompiledCode {
        &self.code
    }

    /// The mode it was compiled in.
    pub fn mode(&self) -> ShapeMode {
        self.mode
    }

    /// Rows a call with `outer` processes.
    pub fn rows_for(&self, outer: usize) -> usize {
        match self.mode {
            ShapeMode::Exact => self.spec_rows,
            ShapeMode::Family => outer,
        }
    }

    /// Elements input `k` must cover for a call with `outer` (`None` if unknown/overflow).
    pub fn input_len(&self, k: usize, outer: usize) -> Option<usize> {
        let input = self.inputs.get(k)?;
        let rows = self.rows_for(outer);
        if rows == 0 {
            return Some(0);
        }
        (rows - 1)
            .checked_mul(input.row_stride)?
            .checked_add((self.row_len - 1) * input.elem_stride)?
            .checked_add(1)
    }

    /// Elements the output must hold for a call with `outer`.
    pub fn output_len(&self, outer: usize) -> Option<usize> {
        let rows = self.rows_for(outer);
        if self.reduction {
            Some(rows)
        } else {
            rows.checked_mul(self.row_len)
        }
    }

    /// Runs on slices after checking counts and lengths.
    pub fn run(&self, inputs: &[&[f32]], output: &mut [f32], outer: usize) -> Result<(), JitError> {
        let bad = |what: String, expected: usize, actual: usize| JitError::BadCall {
            kernel: self.code.name().to_string(),
            what,
            expected,
            actual,
        };
        if inputs.len() != self.inputs.len() {
            return Err(bad("inputs".to_string(), self.inputs.len(), inputs.len()));
        }
        for (k, input) in inputs.iter().enumerate() {
            let need = self
                .input_len(k, outer)
                .ok_or_else(|| bad(format!("input {k} extent"), usize::MAX, 0))?;
            if input.len() < need {
                return Err(bad(format!("input {k} length"), need, input.len()));
            }
        }
        let need = self
            .output_len(outer)
            .ok_or_else(|| bad("output extent".to_string(), usize::MAX, 0))?;
        if output.len() < need {
            return Err(bad("output length".to_string(), need, output.len()));
        }
        let in_ptrs: Vec<*const f32> = inputs.iter().map(|s| s.as_ptr()).collect();
        // SAFETY: counts and lengths checked above; `&mut` output cannot alias inputs.
        unsafe { self.run_unchecked(&in_ptrs, output.as_mut_ptr(), outer) };
        Ok(())
    }

    /// Runs on raw pointers without checks.
    ///
    /// # Safety
    /// `inputs.len()` equals the spec's input count, every pointer covers
    /// [`Self::input_len`] elements, `output` covers [`Self::output_len`] elements and
    /// overlaps no input.
    pub unsafe fn run_unchecked(&self, inputs: &[*const f32], output: *mut f32, outer: usize) {
        let outs = [output];
        // SAFETY: forwarded from this function's contract.
        unsafe { self.code.call(inputs.as_ptr(), outs.as_ptr(), outer as u64) }
    }
}
