//! Row kernels: a reduction or normalization over the last axis, with an elementwise
//! prologue (computing the row element from the inputs) and epilogue (applied to the
//! normalized element or the reduced value).
//!
//! The kernel iterates the rows of a row grid `row_dims` (e.g. `[batch, heads, seq]`)
//! of `row_len` elements each. Input `k` addresses element `j` of row `(i₀, i₁, …)` at
//! `Σ i_d·row_strides[d] + j·elem_stride` (elem_stride 0 = broadcast along the row,
//! 1 = contiguous; a row stride 0 = broadcast over that grid dim), so a mask
//! `[batch, 1, 1, seq]` or a per-channel scale `[c, 1]` needs no copy. Normalizing ops ([`RowOp::Softmax`],
//! [`RowOp::LogSoftmax`], [`RowOp::LayerNorm`]) write one contiguous
//! `[rows, row_len]` output (rows in row-major grid order); reductions write `[rows]`.
//! In family mode `row_dims[0]` is the runtime dim: a call passes its total row count
//! as `outer`, which must be a multiple of the product of `row_dims[1..]`.
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

/// How one input is addressed: `Σ i_d·row_strides[d] + j·elem_stride` elements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowInput {
    /// elements between rows along each dim of the row grid (0 = broadcast)
    pub row_strides: Vec<usize>,
    /// elements between row elements: 0 (broadcast) or 1 (contiguous)
    pub elem_stride: usize,
}

impl RowInput {
    /// An input with one row stride (for a one-dim row grid).
    pub fn rows(row_stride: usize, elem_stride: usize) -> RowInput {
        RowInput {
            row_strides: vec![row_stride],
            elem_stride,
        }
    }
}

/// What to compile.
#[derive(Clone, Debug, PartialEq)]
pub struct RowSpec {
    /// kernel name
    pub name: String,
    /// the row grid (its dim 0 is a representative in family mode)
    pub row_dims: Vec<usize>,
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
        let param = RowInput::rows(0, 1);
        RowSpec {
            name: name.to_string(),
            row_dims: vec![rows],
            row_len,
            mode,
            inputs: vec![RowInput::rows(row_len, 1), param.clone(), param],
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
    row_dims: Vec<usize>,
    row_len: usize,
    mode: ShapeMode,
    inputs: Vec<RowInput>,
    reduction: bool,
}

const KIND: &str = "row";

/// Most dims a row grid may have.
pub const MAX_ROW_DIMS: usize = 6;

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
    let rows = spec
        .row_dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&rows| rows <= 1 << 36);
    if spec.row_dims.is_empty() || spec.row_dims.len() > MAX_ROW_DIMS || rows.is_none() {
        return Err(invalid(format!(
            "row grid {:?} needs 1..={MAX_ROW_DIMS} dims and at most 2^36 rows",
            spec.row_dims
        )));
    }
    for (k, input) in spec.inputs.iter().enumerate() {
        if input.row_strides.len() != spec.row_dims.len() {
            return Err(invalid(format!(
                "input {k} has {} row strides for a {}-dim row grid",
                input.row_strides.len(),
                spec.row_dims.len()
            )));
        }
        if input.elem_stride > 1 {
            return Err(invalid(format!(
                "input {k} has element stride {} (need 0 or 1)",
                input.elem_stride
            )));
        }
        if input.row_strides.iter().any(|&s| s > 1 << 36) {
            return Err(invalid(format!(
                "input {k} row strides {:?} are too large",
                input.row_strides
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
    let plan = RowPlan {
        row_dims: &spec.row_dims,
        family: spec.mode == ShapeMode::Family,
        row_len: spec.row_len,
        inputs: &spec.inputs,
        prologue: &spec.prologue,
        op: spec.op,
        epilogue: spec.epilogue.as_ref(),
    };
    let code = compile_function(&spec.name, |b, params| emit_row_kernel(b, params, &plan))?;
    Ok(RowKernel {
        code,
        row_dims: spec.row_dims.clone(),
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

    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// Whether it reduces each row to one value (else it writes whole rows).
    pub fn is_reduction(&self) -> bool {
        self.reduction
    }

    /// Grid dim 0 of a call with `outer` (`None` when a family call's `outer` is not a
    /// whole number of rows of the folded inner dims).
    fn dim0_for(&self, outer: usize) -> Option<usize> {
        match self.mode {
            ShapeMode::Exact => Some(self.row_dims[0]),
            ShapeMode::Family => {
                let inner: usize = self.row_dims[1..].iter().product();
                (inner != 0 && outer.is_multiple_of(inner)).then(|| outer / inner)
            }
        }
    }

    /// The grid dims of a call whose dim 0 is `dim0`.
    fn grid_dims(&self, dim0: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(dim0).chain(self.row_dims[1..].iter().copied())
    }

    /// Rows a call with `outer` processes.
    pub fn rows_for(&self, outer: usize) -> usize {
        match self.mode {
            ShapeMode::Exact => self.row_dims.iter().product(),
            ShapeMode::Family => outer,
        }
    }

    /// Elements input `k` must cover for a call with `outer` (`None` if unknown/overflow).
    pub fn input_len(&self, k: usize, outer: usize) -> Option<usize> {
        let input = self.inputs.get(k)?;
        let dim0 = self.dim0_for(outer)?;
        if self.grid_dims(dim0).any(|n| n == 0) {
            return Some(0);
        }
        let mut last = (self.row_len - 1) * input.elem_stride;
        for (n, &s) in self.grid_dims(dim0).zip(&input.row_strides) {
            last = last.checked_add((n - 1).checked_mul(s)?)?;
        }
        last.checked_add(1)
    }

    /// Elements the output must hold for a call with `outer`.
    pub fn output_len(&self, outer: usize) -> Option<usize> {
        self.dim0_for(outer)?;
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
        let in_ptrs: smallvec::SmallVec<[*const f32; 8]> =
            inputs.iter().map(|s| s.as_ptr()).collect();
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
        // the code's runtime count is grid dim 0 (0 rows when `outer` does not divide,
        // which the checked extents exclude)
        let dim0 = self.dim0_for(outer).unwrap_or(0);
        // SAFETY: forwarded from this function's contract.
        unsafe { self.code.call(inputs.as_ptr(), outs.as_ptr(), dim0 as u64) }
    }
}
