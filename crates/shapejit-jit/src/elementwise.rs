//! Fused elementwise kernels: a [`Program`] over N strided inputs producing M
//! contiguous outputs of one shape.
//!
//! # Calling contract
//! [`ElementwiseKernel::run`] checks buffer counts and lengths (a few compares) and is
//! safe. [`ElementwiseKernel::run_unchecked`] checks nothing: the caller (the VM, via
//! its shape guards) guarantees that input `k` covers
//! [`ElementwiseKernel::input_len`]`(k, outer)` elements from its pointer, that every
//! output covers [`ElementwiseKernel::output_len`]`(outer)` elements, and that outputs
//! overlap no input except an input with the output's own contiguous layout.
//!
//! **Invariant:** a kernel computes exactly what its spec's program says, element by
//! element, in the row-major order of the output shape.

use crate::codegen::elementwise::emit_elementwise;
use crate::codegen::function::compile_function;
use crate::codegen::tiles::{TilePlan, emit_tiled};
use crate::error::JitError;
use crate::kernel::CompiledCode;
use crate::layout::{InputLayout, LoopNest, ShapeMode, required_len, validate_iteration};
use crate::program::{Program, ProgramContext};
use smallvec::SmallVec;

/// What to compile: the output shape, every input's strides and the program.
#[derive(Clone, Debug, PartialEq)]
pub struct ElementwiseSpec {
    /// Kernel name (appears in errors and stats).
    pub name: String,
    /// The output shape (every output has it).
    pub shape: Vec<usize>,
    /// Whether `shape[0]` is folded or a runtime argument.
    pub mode: ShapeMode,
    /// One layout per input, strides relative to `shape`.
    pub inputs: Vec<InputLayout>,
    /// The per-element program; `program.outputs` are the kernel outputs.
    pub program: Program,
}

/// A compiled elementwise kernel.
#[derive(Debug)]
pub struct ElementwiseKernel {
    code: CompiledCode,
    shape: Vec<usize>,
    mode: ShapeMode,
    inputs: Vec<InputLayout>,
    n_outputs: usize,
    tiled: bool,
    /// dim 0 is a runtime count in the code (family kernels, tiled exact ones)
    splittable: bool,
    /// estimated ps per element
    cost_ps: u128,
}

/// Compiles `spec` into machine code: a tile driver over the micro-kernels when the
/// program has one for every op and its rows are long enough (`codegen::tiles`),
/// otherwise Cranelift's own vector loop.
pub fn compile_elementwise(spec: &ElementwiseSpec) -> Result<ElementwiseKernel, JitError> {
    compile(spec, true)
}

/// Compiles `spec` with Cranelift's own vector loop, never the tile driver (the
/// inline math of `codegen::math`; for tests and comparisons).
pub fn compile_elementwise_inline(spec: &ElementwiseSpec) -> Result<ElementwiseKernel, JitError> {
    compile(spec, false)
}

fn compile(spec: &ElementwiseSpec, tiles: bool) -> Result<ElementwiseKernel, JitError> {
    validate(spec)?;
    let strides: Vec<&[usize]> = spec.inputs.iter().map(|i| i.strides.as_slice()).collect();
    let n_outputs = spec.program.outputs.len();
    let nest = LoopNest::new(&spec.shape, spec.mode, &strides, n_outputs);
    let plan = tile_plan(&nest, spec).filter(|_| tiles);
    let tiled = plan.is_some();
    // A tiled exact kernel keeps dim 0 a runtime count too, so that it can run a
    // range of it (a piece for the pool); the folded inner dims are what it needs.
    let splittable = spec.mode == ShapeMode::Family || (tiled && spec.shape.len() > 1);
    let nest = if splittable && spec.mode == ShapeMode::Exact {
        LoopNest::new(&spec.shape, ShapeMode::Family, &strides, n_outputs)
    } else {
        nest
    };
    let code = match plan {
        Some(plan) => compile_function(&spec.name, |b, params| {
            emit_tiled(b, params, &nest, &plan, spec.inputs.len(), n_outputs);
        })?,
        None => compile_function(&spec.name, |b, params| {
            emit_elementwise(b, params, &nest, &spec.program, spec.inputs.len());
        })?,
    };
    Ok(ElementwiseKernel {
        code,
        shape: spec.shape.clone(),
        mode: spec.mode,
        inputs: spec.inputs.clone(),
        n_outputs: spec.program.outputs.len(),
        tiled,
        splittable,
        cost_ps: 300 + 25 * spec.program.weight() as u128,
    })
}

/// Runs `f(i)` for every `i` below a count, returning when all are done (a thread
/// pool's `run`, or a plain loop); how kernels hand their pieces out.
pub type Spread<'a> = &'a dyn Fn(usize, &(dyn Fn(usize) + Sync));

/// A call's iteration shape (no allocation for the usual ranks).
pub type Shape = SmallVec<[usize; 6]>;

/// The [`Spread`] without a pool: every piece on the calling thread, in order.
pub fn in_order(n: usize, f: &(dyn Fn(usize) + Sync)) {
    (0..n).for_each(f)
}

/// Buffer pointers shared by the pieces of one call.
struct Pointers {
    ins: SmallVec<[*const f32; 8]>,
    outs: SmallVec<[*mut f32; 4]>,
}

impl Pointers {
    /// # Safety
    /// As [`ElementwiseKernel::run_range_unchecked`].
    unsafe fn run(&self, kernel: &ElementwiseKernel, lo: usize, hi: usize) {
        // SAFETY: forwarded.
        unsafe { kernel.run_range_unchecked(&self.ins, &self.outs, lo, hi) }
    }
}

// SAFETY: the pointers are only dereferenced by the kernel's code on disjoint ranges
// of the outputs (and shared reads of the inputs) while the call that made them waits.
unsafe impl Sync for Pointers {}

/// The tile plan of `spec`, when it runs through the micro-kernels (see
/// `codegen::tiles`).
fn tile_plan(nest: &LoopNest, spec: &ElementwiseSpec) -> Option<TilePlan> {
    let d = nest.dims.len() - 1;
    let inner_strides: Vec<usize> = nest.strides[..spec.inputs.len()]
        .iter()
        .map(|s| s[d])
        .collect();
    let inner = (!(nest.family && d == 0)).then_some(nest.dims[d]);
    TilePlan::new(&spec.program, &inner_strides, inner)
}

fn validate(spec: &ElementwiseSpec) -> Result<(), JitError> {
    const KIND: &str = "elementwise";
    validate_iteration(KIND, &spec.shape, spec.mode, &spec.inputs)?;
    let ctx = ProgramContext {
        n_inputs: spec.inputs.len(),
        row_result: false,
    };
    spec.program
        .validate(ctx)
        .map_err(|reason| JitError::InvalidSpec { kind: KIND, reason })?;
    if spec.program.outputs.is_empty() {
        return Err(JitError::InvalidSpec {
            kind: KIND,
            reason: "program has no outputs".to_string(),
        });
    }
    Ok(())
}

impl ElementwiseKernel {
    /// The code object (size, compile time, name).
    pub fn code(&self) -> &CompiledCode {
        &self.code
    }

    /// Whether the kernel is a tile driver over the micro-kernels (else Cranelift's
    /// own vector loop).
    pub fn is_tiled(&self) -> bool {
        self.tiled
    }

    /// Number of inputs.
    pub fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Number of outputs.
    pub fn n_outputs(&self) -> usize {
        self.n_outputs
    }

    /// The mode the kernel was compiled in.
    pub fn mode(&self) -> ShapeMode {
        self.mode
    }

    /// The shape a call with runtime outer dim `outer` iterates (`outer` replaces
    /// `shape[0]` in family mode and is ignored otherwise).
    pub fn shape_for(&self, outer: usize) -> Shape {
        let mut shape: Shape = self.shape.iter().copied().collect();
        if self.mode == ShapeMode::Family {
            shape[0] = outer;
        }
        shape
    }

    /// Elements input `k` must cover for a call with `outer` (`None` on overflow or an
    /// unknown input).
    pub fn input_len(&self, k: usize, outer: usize) -> Option<usize> {
        required_len(&self.shape_for(outer), &self.inputs.get(k)?.strides)
    }

    /// Elements every output must hold for a call with `outer`.
    pub fn output_len(&self, outer: usize) -> Option<usize> {
        self.shape_for(outer)
            .iter()
            .try_fold(1usize, |acc, &n| acc.checked_mul(n))
    }

    /// Runs the kernel on slices, checking their count and lengths first. `outer` is the
    /// runtime outer dim of a family kernel (ignored by exact kernels).
    pub fn run(
        &self,
        inputs: &[&[f32]],
        outputs: &mut [&mut [f32]],
        outer: usize,
    ) -> Result<(), JitError> {
        self.run_pieces(inputs, outputs, outer, 1, &in_order)
    }

    /// As [`Self::run`], in `pieces` ranges of dim 0 (clamped to what the kernel can
    /// split) handed to `spread`, which must call its function once for every index
    /// below its count and return when all are done (a thread pool's `run`). The
    /// pieces are disjoint and every element is computed by the same code, so the
    /// outputs do not depend on `pieces`.
    pub fn run_pieces(
        &self,
        inputs: &[&[f32]],
        outputs: &mut [&mut [f32]],
        outer: usize,
        pieces: usize,
        spread: Spread,
    ) -> Result<(), JitError> {
        let bad = |what: String, expected: usize, actual: usize| JitError::BadCall {
            kernel: self.code.name().to_string(),
            what,
            expected,
            actual,
        };
        if inputs.len() != self.inputs.len() {
            return Err(bad("inputs".to_string(), self.inputs.len(), inputs.len()));
        }
        if outputs.len() != self.n_outputs {
            return Err(bad("outputs".to_string(), self.n_outputs, outputs.len()));
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
        for (k, output) in outputs.iter().enumerate() {
            if output.len() < need {
                return Err(bad(format!("output {k} length"), need, output.len()));
            }
        }
        let ins: SmallVec<[*const f32; 8]> = inputs.iter().map(|s| s.as_ptr()).collect();
        let outs: SmallVec<[*mut f32; 4]> = outputs.iter_mut().map(|s| s.as_mut_ptr()).collect();
        let dim0 = self.shape_for(outer).first().copied().unwrap_or(1);
        let pieces = if self.splittable {
            pieces.clamp(1, dim0.max(1))
        } else {
            1
        };
        if pieces == 1 {
            // SAFETY: counts and lengths were checked above; `&mut` outputs cannot
            // overlap the shared input slices.
            unsafe { self.run_unchecked(&ins, &outs, outer) };
            return Ok(());
        }
        let ptrs = Pointers { ins, outs };
        spread(pieces, &|i| {
            let (lo, hi) = (i * dim0 / pieces, (i + 1) * dim0 / pieces);
            // SAFETY: as above for the whole call; the pieces' ranges are disjoint.
            unsafe { ptrs.run(self, lo, hi) }
        });
        Ok(())
    }

    /// Estimated cost of one element, ps (for the split into pieces).
    pub fn cost_ps(&self) -> u128 {
        self.cost_ps
    }

    /// Runs the kernel on raw pointers without any check.
    ///
    /// # Safety
    /// `inputs.len() == self.n_inputs()`, `outputs.len() == self.n_outputs()`, and every
    /// buffer satisfies the module-level calling contract for `outer`.
    pub unsafe fn run_unchecked(&self, inputs: &[*const f32], outputs: &[*mut f32], outer: usize) {
        let count = match self.mode {
            ShapeMode::Family => outer,
            ShapeMode::Exact => self.shape.first().copied().unwrap_or(1),
        };
        // SAFETY: forwarded from this function's contract; an exact kernel's code
        // ignores the count or (splittable) expects its own dim 0.
        unsafe {
            self.code
                .call(inputs.as_ptr(), outputs.as_ptr(), count as u64)
        }
    }

    /// Whether [`ElementwiseKernel::run_range_unchecked`] can run a range of dim 0.
    pub fn splittable(&self) -> bool {
        self.splittable
    }

    /// Runs indices `lo..hi` of dim 0 only (a piece of a call with `outer`): every
    /// pointer is advanced by its buffer's dim-0 stride. Needs [`Self::splittable`].
    ///
    /// # Safety
    /// As [`Self::run_unchecked`] for the whole call with `outer`, `lo <= hi <=` its
    /// dim 0, and pieces that run at the same time cover disjoint ranges.
    pub unsafe fn run_range_unchecked(
        &self,
        inputs: &[*const f32],
        outputs: &[*mut f32],
        lo: usize,
        hi: usize,
    ) {
        debug_assert!(self.splittable && lo <= hi);
        let row: usize = self.shape.iter().skip(1).product();
        let ins: SmallVec<[*const f32; 8]> = inputs
            .iter()
            .zip(&self.inputs)
            // SAFETY: inside the input's extent for the whole call (contract).
            .map(|(&p, l)| unsafe { p.add(lo * l.strides[0]) })
            .collect();
        // SAFETY: outputs are contiguous; row `lo` is inside them (contract).
        let outs: SmallVec<[*mut f32; 4]> = outputs
            .iter()
            .map(|&p| unsafe { p.add(lo * row) })
            .collect();
        // SAFETY: the code's dim 0 is the runtime count (splittable); the range's
        // buffers are inside the whole call's (contract).
        unsafe {
            self.code
                .call(ins.as_ptr(), outs.as_ptr(), (hi - lo) as u64)
        }
    }
}
