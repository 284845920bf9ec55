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
//! A call may run in pieces of the output's dim 0 ([`MatMulKernel::run_pieces`]): each
//! piece multiplies its rows and applies the epilogue to them while they are in cache;
//! a product of few rows on packed weights splits by columns instead (each thread
//! streams its share of the weights), its epilogue whole after it.
//!
//! **Invariant:** each output row is written twice: by the GEMM, then element by
//! element by the epilogue; nothing else reads it in between.
//! **Invariant:** the packed weights are used only for a call whose right operand is
//! the very view they were packed from (same buffer, offset, shape and strides).

use std::sync::Arc;

use shapejit_kernels::packed::{PackedB, matmul_packed, matmul_packed_ref, packed_pays};
use shapejit_kernels::{View, ViewMut, matmul::matmul};
use shapejit_vm::ops::{column_pieces, column_range};
use smallvec::SmallVec;

use crate::elementwise::{
    ElementwiseKernel, ElementwiseSpec, Shape, Spread, compile_elementwise, in_order,
};
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
    pub fn shape_for(&self, outer: usize) -> Shape {
        self.epilogue.shape_for(outer)
    }

    /// The packed weights, when this call may use them: `b` is the view they came
    /// from and `a` a rank-2 `[rows, k]` whose product has `numel` elements.
    /// Whether they pay is `packed_pays` for the rows of one product (see
    /// [`Self::run_pieces`]).
    fn packed_for(&self, a: &View<f32>, b: &View<f32>, numel: usize) -> Option<&PackedB> {
        let weights = self.packed.as_ref()?;
        let fits = matches!(a.shape(), &[rows, _] if rows * weights.packed.n() == numel);
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
        self.run_pieces(a, b, extras, out, outer, (1, 1), &in_order)
    }

    /// As [`Self::run`], in up to `pieces` ranges of the output's dim 0 handed to
    /// `spread` (which calls its function for every index below its count and returns
    /// when all are done): each piece multiplies its rows of a rank-2 `a` and applies
    /// the epilogue to them while they are in cache; with fewer dim-0 indices than
    /// `pieces` (batch 1) only the product of a rank-2 `a` runs in row ranges, the
    /// epilogue whole after it — or, on packed weights that
    /// `shapejit_vm::ops::column_pieces` splits on `threads` threads (as the
    /// interpreter does), the product in column ranges. Other products run whole.
    /// Every piece takes the call's one GEMM path (packed weights or `gemm`, chosen
    /// by `packed_pays` for the largest piece's rows, as the interpreter chooses per
    /// piece), whose
    /// elements do not depend on the product's other rows or columns (the k order is
    /// fixed), so outputs do not depend on `pieces` or `threads` (tested at 1, 2 and
    /// 3 threads).
    #[allow(clippy::too_many_arguments)]
    pub fn run_pieces(
        &self,
        a: &View<f32>,
        b: &View<f32>,
        extras: &[&[f32]],
        out: &mut [f32],
        outer: usize,
        (pieces, threads): (usize, usize),
        spread: Spread,
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
        // The product's view: the output shape, or — when the caller flattened the
        // batch into the rows of a rank-2 `a` — `[rows, n]` over the same buffer.
        let n = shape[shape.len() - 1];
        let gemm_shape: Shape = if a.shape().len() == 2 && shape.len() > 2 {
            smallvec::smallvec![a.shape()[0], n]
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
        let dim0 = shape[0];
        let rows = numel / n.max(1);
        let flat = a.shape().len() == 2;
        let requested = pieces;
        let pieces = if flat && self.epilogue.splittable() && dim0 > 0 {
            pieces.clamp(1, dim0)
        } else {
            1
        };
        // fewer dim-0 indices than pieces (batch 1): the product alone runs in row
        // ranges, the epilogue whole after it
        let row_pieces = if pieces == 1 && flat {
            requested.clamp(1, rows.max(1))
        } else {
            1
        };
        let weights = self.packed_for(a, b, numel);
        let pays = |rows: usize| weights.filter(|p| packed_pays(rows, p.k(), p.n()));
        let columns = match pays(rows) {
            Some(p) if pieces == 1 && flat => column_pieces(rows, p.k(), n, threads),
            _ => 1,
        };
        let row_pieces = if columns > 1 { 1 } else { row_pieces };
        // the largest product's rows choose the path: a product split into pieces of
        // few rows runs them on the packed weights, not `gemm` re-packing the whole
        // weights for every piece
        let product_rows = if pieces > 1 {
            dim0.div_ceil(pieces) * (rows / dim0)
        } else {
            rows.div_ceil(row_pieces)
        };
        let packed = pays(product_rows);
        if pieces == 1 && row_pieces == 1 && columns == 1 {
            self.gemm(a, b, packed, &mut out[..numel], &gemm_shape)?;
        }
        let operands = Operands { a, b, packed };
        let out_ptr = out.as_mut_ptr();
        let mut in_ptrs: SmallVec<[*const f32; 4]> = SmallVec::new();
        in_ptrs.push(out_ptr.cast_const());
        in_ptrs.extend(extras.iter().map(|s| s.as_ptr()));
        let shared = Shared {
            out: out_ptr,
            ins: in_ptrs,
            error: std::sync::Mutex::new(None),
        };
        if pieces == 1 {
            if let Some(p) = packed.filter(|_| columns > 1) {
                spread(columns, &|i| {
                    let range = column_range(n, columns, i);
                    shared.record(shared.gemm_columns(self, a, p, range, (rows, n)));
                });
                shared.take_error()?;
            } else if row_pieces > 1 {
                spread(row_pieces, &|i| {
                    let range = (i * rows / row_pieces, (i + 1) * rows / row_pieces);
                    shared.record(shared.gemm_rows(self, &operands, range, n));
                });
                shared.take_error()?;
            }
            // SAFETY: every extent was checked above; the output aliases only input 0,
            // which has the output's own contiguous layout (the elementwise contract).
            unsafe { self.epilogue.run_unchecked(&shared.ins, &[out_ptr], outer) };
            return Ok(());
        }
        let per = rows / dim0;
        spread(pieces, &|i| {
            shared.piece(self, &operands, (i, pieces), dim0, per, n)
        });
        shared.take_error()
    }

    /// `out = alpha · a @ b` into the contiguous `out` of `shape`, on `packed` weights
    /// when given (chosen once per call, so that every piece takes the same path).
    fn gemm(
        &self,
        a: &View<f32>,
        b: &View<f32>,
        packed: Option<&PackedB>,
        out: &mut [f32],
        shape: &[usize],
    ) -> Result<(), JitError> {
        let gemm_err = |e: shapejit_kernels::KernelError| JitError::Gemm {
            kernel: self.code().name().to_string(),
            message: e.to_string(),
        };
        match packed {
            Some(packed) => matmul_packed(out, a, packed, self.alpha).map_err(gemm_err),
            None => {
                let mut view = ViewMut::contiguous(out, shape).map_err(gemm_err)?;
                matmul(&mut view, a, b, self.alpha, false).map_err(gemm_err)
            }
        }
    }
}

thread_local! {
    /// A column piece's product (`rows × its columns`), grown once per thread.
    static COLUMNS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The product's operands of one call.
struct Operands<'a, 'v> {
    a: &'a View<'v, f32>,
    b: &'a View<'v, f32>,
    packed: Option<&'a PackedB>,
}

/// What the pieces of one split call share.
struct Shared {
    out: *mut f32,
    /// the epilogue's inputs: the output itself, then the extras
    ins: SmallVec<[*const f32; 4]>,
    error: std::sync::Mutex<Option<JitError>>,
}

// SAFETY: pieces write disjoint row (or column) ranges of `out` and only read the
// inputs, while the call that made the pointers waits for them.
unsafe impl Sync for Shared {}

impl Shared {
    /// Rows `lo..hi` of the (rank-2) product, on the whole call's GEMM path.
    fn gemm_rows(
        &self,
        kernel: &MatMulKernel,
        Operands { a, b, packed }: &Operands,
        (lo, hi): (usize, usize),
        n: usize,
    ) -> Result<(), JitError> {
        let rows = hi - lo;
        let geom = a
            .geom()
            .narrowed(0, lo, rows)
            .and_then(|g| a.with_geom(g))
            .map_err(|e| JitError::Gemm {
                kernel: kernel.code().name().to_string(),
                message: e.to_string(),
            })?;
        // SAFETY: rows `lo..hi` of the checked output; the callers' ranges are disjoint.
        let out = unsafe { std::slice::from_raw_parts_mut(self.out.add(lo * n), rows * n) };
        kernel.gemm(&geom, b, *packed, out, &[rows, n])
    }

    /// Columns `lo..hi` of the (rank-2, `rows × n`) product on packed weights:
    /// computed into this thread's [`COLUMNS`] buffer, then copied into place.
    fn gemm_columns(
        &self,
        kernel: &MatMulKernel,
        a: &View<f32>,
        packed: &PackedB,
        (lo, hi): (usize, usize),
        (rows, n): (usize, usize),
    ) -> Result<(), JitError> {
        let err = |message: String| JitError::Gemm {
            kernel: kernel.code().name().to_string(),
            message,
        };
        let width = hi - lo;
        let b = packed
            .columns(lo, width)
            .ok_or_else(|| err(format!("columns {lo}..{hi} are not a run of panels")))?;
        COLUMNS.with_borrow_mut(|buf| {
            buf.clear();
            buf.resize(rows * width, 0.0);
            matmul_packed_ref(buf, a, b, kernel.alpha).map_err(|e| err(e.to_string()))?;
            for (r, src) in buf.chunks_exact(width).enumerate() {
                // SAFETY: columns `lo..hi` of row `r < rows` of the checked output;
                // the callers' column ranges are disjoint.
                let dst =
                    unsafe { std::slice::from_raw_parts_mut(self.out.add(r * n + lo), width) };
                dst.copy_from_slice(src);
            }
            Ok(())
        })
    }

    /// Piece `i` of `pieces`: rows `lo·per..hi·per` of the product, then the epilogue
    /// on dim-0 indices `lo..hi`.
    fn piece(
        &self,
        kernel: &MatMulKernel,
        operands: &Operands,
        (i, pieces): (usize, usize),
        dim0: usize,
        per: usize,
        n: usize,
    ) {
        let (lo, hi) = (i * dim0 / pieces, (i + 1) * dim0 / pieces);
        let product = self.gemm_rows(kernel, operands, (lo * per, hi * per), n);
        if product.is_ok() {
            // SAFETY: the extents were checked for the whole call; input 0 is the
            // output itself (same contiguous layout), and this range is this piece's.
            unsafe {
                kernel
                    .epilogue
                    .run_range_unchecked(&self.ins, &[self.out], lo, hi)
            };
        }
        self.record(product);
    }

    /// Keeps the first error a piece reports.
    fn record(&self, result: Result<(), JitError>) {
        if let Err(e) = result {
            let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(e);
        }
    }

    /// The first error any piece reported.
    fn take_error(&self) -> Result<(), JitError> {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.take().map_or(Ok(()), Err)
    }
}
