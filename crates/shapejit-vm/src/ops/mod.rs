//! Op implementations for the interpreter: for each IR [`Op`], the concrete
//! output types for given inputs, view layouts for ops that need no copy, and
//! execution on [`shapejit_kernels`] primitives.
//!
//! Interface used by the interpreter:
//! - [`output_types`]: concrete dtypes and shapes of the outputs (reads the
//!   contents of shape-like inputs such as `reshape`'s target);
//! - [`view`]: for ops that can alias their first input (transpose, slice,
//!   reshape/flatten of a contiguous input, squeeze, unsqueeze, identity,
//!   expand), the output layout in the same buffer; `None` means "compute";
//! - [`execute`]: computes outputs into contiguous buffers, from inputs of any
//!   layout, using a per-Runtime [`Scratch`]; the interpreter calls
//!   [`execute_planned`] instead, with the types and the [`ExecPlan`] it already
//!   computed (and reuses while the inputs' dtypes and layouts stay the same,
//!   for the ops [`types_from_layouts`] names), its intra-op [`Pool`] and packed
//!   weights ([`Env`]). Both split large ops into the same pieces (`split.rs`),
//!   whatever the thread count.
//!
//! Control flow (`if`, `loop`) and `constant` are handled by the interpreter itself.
//!
//! **Invariant:** these functions define what every op computes at run time; the
//! JIT is checked against them. Each op's tolerance is stated on the op in
//! `shapejit_ir::op`.
//! **Invariant:** no input can make these functions panic: every mismatch is an
//! [`OpError`] naming the op and the expected vs actual value.
//! **Invariant:** after warm-up (scratch buffers grown), [`execute`] makes no heap
//! allocation for tensors of rank ≤ 6.
//! **Invariant:** for an op [`types_from_layouts`] names, [`output_types`] and
//! [`exec_plan`] are functions of the op and of its inputs' dtypes and shapes
//! only (never of their contents), so a caller may keep their results while
//! those stay the same.

mod columns;
mod conv;
pub(crate) use conv::kernel_window;
mod data;
mod elementwise;
mod index;
mod linalg;
mod norm;
mod reduce;
mod shape;
mod split;
mod util;

pub use columns::{column_pieces, column_range};
pub(crate) use split::MAX_PIECES;
pub use split::pieces_for;
pub use util::broadcast_shapes;

use crate::pool::Pool;
use crate::tensor::{Dims, Layout, LayoutError, TensorMut, TensorRef};
use shapejit_ir::{DType, Op};
use shapejit_kernels::KernelError;
use shapejit_kernels::conv::PackedConvWeights;
use shapejit_kernels::packed::PackedB;
use smallvec::SmallVec;
use std::sync::{Mutex, MutexGuard};

/// The concrete type of one output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutType {
    /// element type
    pub dtype: DType,
    /// dims
    pub shape: Dims,
}

impl OutType {
    fn new(dtype: DType, shape: Dims) -> OutType {
        OutType { dtype, shape }
    }
}

/// Output types of one op (most ops have one output).
pub type OutTypes = SmallVec<[OutType; 2]>;

/// Why an op could not run on its inputs.
///
/// `Shape`, `DType`, `Arity` and `Value` are the caller's fault (bad model or
/// inputs); `Output` and `Kernel` mean the ops layer or the VM has a bug.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// Input shapes or attributes that do not fit together.
    #[error("{op}: {message}")]
    Shape {
        /// opcode name
        op: &'static str,
        /// what was expected and what was found
        message: String,
    },
    /// An input of the wrong dtype.
    #[error("{op}: input {input} has dtype {actual}, expected {expected}")]
    DType {
        /// opcode name
        op: &'static str,
        /// input position
        input: usize,
        /// the allowed dtype(s)
        expected: String,
        /// the dtype given
        actual: DType,
    },
    /// The wrong number of inputs.
    #[error("{op}: expected {expected} inputs, got {actual}")]
    Arity {
        /// opcode name
        op: &'static str,
        /// the allowed count(s)
        expected: String,
        /// the count given
        actual: usize,
    },
    /// Bad contents: an index out of range, a zero `range` step, a negative dim...
    #[error("{op}: {message}")]
    Value {
        /// opcode name
        op: &'static str,
        /// what is wrong
        message: String,
    },
    /// An op (or dtype of an op) this tier does not run.
    #[error("{op}: {message}")]
    Unsupported {
        /// opcode name
        op: &'static str,
        /// what is not supported
        message: String,
    },
    /// The outputs passed to [`execute`] do not match [`output_types`] (VM bug).
    #[error("{op}: output {index}: {message} (internal bug)")]
    Output {
        /// opcode name
        op: &'static str,
        /// output position
        index: usize,
        /// the mismatch
        message: String,
    },
    /// A kernel refused arguments the ops layer prepared (internal bug).
    #[error("{op}: kernel rejected its arguments: {source} (internal bug)")]
    Kernel {
        /// opcode name
        op: &'static str,
        /// the kernel's complaint
        #[source]
        source: KernelError,
    },
    /// A tensor view that does not fit its buffer (internal bug); boxed to keep
    /// `OpError` small.
    #[error(transparent)]
    Layout(Box<LayoutError>),
}

impl From<LayoutError> for OpError {
    fn from(e: LayoutError) -> OpError {
        OpError::Layout(Box::new(e))
    }
}

/// Reusable scratch memory (contiguous copies of strided inputs, im2col
/// buffers) owned by a Runtime; buffers only grow.
#[derive(Debug, Default)]
pub struct Scratch {
    bufs: [Vec<f32>; 4],
}

impl Scratch {
    /// Empty scratch; buffers grow on first use.
    pub fn new() -> Scratch {
        Scratch::default()
    }

    /// `N ≤ 4` distinct buffers of the given lengths (contents unspecified);
    /// a size the allocator refuses is an error of `op`, not an abort.
    fn f32_bufs<const N: usize>(
        &mut self,
        op: &Op,
        lens: [usize; N],
    ) -> Result<[&mut [f32]; N], OpError> {
        const { assert!(N <= 4) };
        for (buf, &len) in self.bufs.iter_mut().zip(&lens) {
            if buf.len() < len {
                buf.try_reserve_exact(len - buf.len()).map_err(|_| {
                    util::value_err(
                        op,
                        format!(
                            "cannot allocate {} bytes of scratch",
                            len.saturating_mul(std::mem::size_of::<f32>())
                        ),
                    )
                })?;
                buf.resize(len, 0.0);
            }
        }
        let mut it = self.bufs.iter_mut();
        Ok(std::array::from_fn(|i| {
            // the const assert above guarantees the iterator has at least N buffers
            let buf = it.next().expect("N <= 4 scratch buffers");
            &mut buf[..lens[i]]
        }))
    }
}

/// Concrete output dtypes and shapes for these inputs (reads the contents of
/// shape-like inputs: reshape, expand, tile, constant_of_shape, range, ...).
pub fn output_types(op: &Op, inputs: &[TensorRef]) -> Result<OutTypes, OpError> {
    use util::arity;
    let single = |t: OutType| -> OutTypes { smallvec::smallvec![t] };
    let res = match op {
        Op::Unary(u) => single(elementwise::unary_type(op, *u, inputs)?),
        Op::Binary(b) => single(elementwise::binary_type(op, *b, inputs)?),
        Op::Where => single(elementwise::where_type(op, inputs)?),
        Op::Cast { to } => {
            arity(op, inputs, 1, 1)?;
            single(OutType::new(*to, inputs[0].layout.shape.clone()))
        }
        Op::BitCast { to } => {
            arity(op, inputs, 1, 1)?;
            inputs[0]
                .dtype
                .bitcast_to(*to)
                .map_err(|e| util::value_err(op, e))?;
            single(OutType::new(*to, inputs[0].layout.shape.clone()))
        }
        Op::MatMul => single(linalg::matmul_type(op, inputs)?),
        Op::MatMulBias => single(linalg::matmul_bias_type(op, inputs)?),
        Op::Gemm {
            trans_a, trans_b, ..
        } => single(linalg::gemm_type(op, inputs, *trans_a, *trans_b)?),
        Op::Reduce { axes, keepdims, .. } => {
            single(reduce::reduce_type(op, axes, *keepdims, inputs)?)
        }
        Op::DynReduce {
            keepdims,
            noop_with_empty_axes,
            ..
        } => single(reduce::dyn_reduce_type(
            op,
            *keepdims,
            *noop_with_empty_axes,
            inputs,
        )?),
        Op::Softmax { axis } | Op::LogSoftmax { axis } => {
            single(norm::softmax_type(op, *axis, inputs)?)
        }
        Op::LayerNorm { axis, .. } => single(norm::layer_norm_type(op, *axis, inputs)?),
        Op::BatchNorm { .. } => single(norm::batch_norm_type(op, inputs)?),
        Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Squeeze { .. }
        | Op::Unsqueeze { .. }
        | Op::Flatten { .. }
        | Op::Slice { .. }
        | Op::DynSlice
        | Op::Expand
        | Op::Identity => single(OutType::new(
            inputs.first().map_or(DType::F32, |t| t.dtype),
            shape::view_op_shape(op, inputs)?,
        )),
        Op::Concat { axis } => single(data::concat_type(op, *axis, inputs)?),
        Op::Split { axis, sizes } => data::split_types(op, *axis, sizes, inputs)?,
        Op::Gather { axis } => single(data::gather_type(op, *axis, inputs)?),
        Op::Tile => single(data::tile_type(op, inputs)?),
        Op::GatherElements { .. } => single(index::gather_elements_type(op, inputs)?),
        Op::ScatterElements { .. } => single(index::scatter_elements_type(op, inputs)?),
        Op::GatherNd { batch_dims } => single(index::gather_nd_type(op, *batch_dims, inputs)?),
        Op::ScatterNd { .. } => single(index::scatter_nd_type(op, inputs)?),
        Op::Pad { pads, .. } => single(data::pad_type(op, pads, inputs)?),
        Op::Shape { start, end } => single(data::shape_type(op, *start, *end, inputs)?),
        Op::Cumulative { .. } => single(data::cumulative_type(op, inputs)?),
        Op::TopK { axis, .. } => data::top_k_types(op, *axis, inputs)?,
        Op::Size => {
            arity(op, inputs, 1, 1)?;
            single(OutType::new(DType::I64, Dims::new()))
        }
        Op::Constant { value } => {
            arity(op, inputs, 0, 0)?;
            single(OutType::new(value.dtype(), Dims::from_slice(value.shape())))
        }
        Op::ConstantOfShape { value } => single(data::constant_of_shape_type(op, value, inputs)?),
        Op::Range => single(data::range_type(op, inputs)?),
        Op::Conv2d { window, groups, .. } => single(conv::conv_type(op, window, *groups, inputs)?),
        Op::ConvTranspose2d {
            window,
            groups,
            output_padding,
        } => single(conv::conv_transpose_type(
            op,
            window,
            *groups,
            *output_padding,
            inputs,
        )?),
        Op::MaxPool2d { window, ceil_mode }
        | Op::AvgPool2d {
            window, ceil_mode, ..
        } => single(conv::pool_type(op, window, *ceil_mode, inputs)?),
        Op::GlobalAvgPool => single(reduce::global_avg_pool_type(op, inputs)?),
        Op::If { .. } | Op::Loop { .. } => {
            return Err(OpError::Unsupported {
                op: op.name(),
                message: "control flow is run by the interpreter, not as an op".into(),
            });
        }
    };
    for (i, t) in res.iter().enumerate() {
        let bytes = t
            .shape
            .iter()
            .try_fold(t.dtype.size(), |acc, &d| acc.checked_mul(d));
        if bytes.is_none_or(|b| b > isize::MAX as usize) {
            return Err(OpError::Value {
                op: op.name(),
                message: format!("output {i} of shape {:?} is too large", t.shape),
            });
        }
    }
    Ok(res)
}

/// For ops whose single output can alias input 0 without copying: the output
/// layout in the same buffer (transpose, slice with any steps, squeeze,
/// unsqueeze, flatten/reshape of a contiguous input, identity, expand with
/// stride 0). `None`: the op must be computed with [`execute`].
pub fn view(op: &Op, inputs: &[TensorRef]) -> Option<Result<Layout, OpError>> {
    if !shape::is_view_op(op) {
        return None;
    }
    shape::view_layout(op, inputs).transpose()
}

/// True when `op`'s [`output_types`] and [`exec_plan`] depend only on its
/// inputs' dtypes and shapes, not on their contents (every op but those reading
/// a shape, count or axes from an input, the view ops, and the interpreter's
/// own): the interpreter reuses them while an instruction's inputs keep their
/// dtypes and layouts.
pub fn types_from_layouts(op: &Op) -> bool {
    match op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Where
        | Op::Cast { .. }
        | Op::BitCast { .. }
        | Op::MatMul
        | Op::MatMulBias
        | Op::Gemm { .. }
        | Op::Reduce { .. }
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::LayerNorm { .. }
        | Op::BatchNorm { .. }
        | Op::Concat { .. }
        | Op::Split { .. }
        | Op::Gather { .. }
        | Op::GatherElements { .. }
        | Op::ScatterElements { .. }
        | Op::GatherNd { .. }
        | Op::ScatterNd { .. }
        | Op::Pad { .. }
        | Op::Shape { .. }
        | Op::Size
        | Op::Cumulative { .. }
        | Op::Conv2d { .. }
        | Op::ConvTranspose2d { .. }
        | Op::MaxPool2d { .. }
        | Op::AvgPool2d { .. }
        | Op::GlobalAvgPool => true,
        // read an input's contents: a target shape, a count, axes or bounds
        Op::DynReduce { .. }
        | Op::Tile
        | Op::TopK { .. }
        | Op::ConstantOfShape { .. }
        | Op::Range
        // views (their layouts are computed by `view`) and the interpreter's own
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Squeeze { .. }
        | Op::Unsqueeze { .. }
        | Op::Flatten { .. }
        | Op::Slice { .. }
        | Op::DynSlice
        | Op::Expand
        | Op::Identity
        | Op::Constant { .. }
        | Op::If { .. }
        | Op::Loop { .. } => false,
    }
}

/// How an op runs on inputs of given shapes besides its output types: whether
/// (and how) it splits into pieces. A function of the op and of its input and
/// output shapes only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecPlan {
    split: Option<split::Plan>,
}

/// The [`ExecPlan`] of `op` on `inputs` with outputs of `types` (from
/// [`output_types`] of these inputs).
pub fn exec_plan(op: &Op, inputs: &[TensorRef], types: &[OutType]) -> ExecPlan {
    ExecPlan {
        split: match types {
            [t] => split::plan(op, inputs, &t.shape),
            _ => None,
        },
    }
}

/// What the interpreter gives [`execute_planned`] beyond the inputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Env<'a> {
    /// the module's intra-op pool (`None`: pieces run one after another here)
    pub pool: Option<&'a Pool>,
    /// input 1 of a `matmul` or `gemm` packed ahead (a constant's weights, as the
    /// op reads them: `[k, n]`); used where it is the faster path
    pub packed_b: Option<&'a PackedB>,
    /// input 1 of a `conv2d` packed ahead (a constant's weights)
    pub packed_conv: Option<&'a PackedConvWeights>,
}

/// Computes the outputs (contiguous, of the dtypes and shapes [`output_types`]
/// gives) from inputs of any layout.
pub fn execute(
    op: &Op,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
    scratch: &mut Scratch,
) -> Result<(), OpError> {
    if matches!(op, Op::Constant { .. } | Op::If { .. } | Op::Loop { .. }) {
        return Err(interpreter_only(op));
    }
    let expected = output_types(op, inputs)?;
    check_outputs(op, &expected, outputs)?;
    let plan = exec_plan(op, inputs, &expected);
    let cell = [Mutex::new(std::mem::take(scratch))];
    let res = execute_planned(op, plan, inputs, outputs, &cell, Env::default());
    let [cell] = cell;
    *scratch = cell.into_inner().unwrap_or_else(|e| e.into_inner());
    res.map(|_| ())
}

/// [`execute`] for outputs the caller built from [`output_types`] of inputs of
/// these dtypes and shapes, and `plan` from [`exec_plan`] of them (neither is
/// checked again): large ops run as pieces on `env.pool`, piece `i` with
/// `scratch[i % scratch.len()]` (`scratch` must not be empty; it is locked only
/// by ops that use it). Returns the number of pieces (1: the op ran whole).
pub fn execute_planned(
    op: &Op,
    plan: ExecPlan,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
    scratch: &[Mutex<Scratch>],
    env: Env<'_>,
) -> Result<usize, OpError> {
    let threads = env.pool.map_or(1, Pool::threads);
    // a product that runs whole on its packed weights gives the same bits cut
    // anywhere (`columns::runs_packed`): by columns across the threads, or in row
    // pieces — each streaming all the weights — no more than the threads (one
    // runs it whole)
    let packed = env
        .packed_b
        .and_then(|p| columns::runs_packed(op, inputs, p).map(|dims| (p, dims)));
    if let ([out], Some(pool), Some((p, dims))) = (&mut *outputs, env.pool, packed)
        && let Some(split) = columns::plan(dims, threads)
    {
        columns::execute(op, inputs, out, scratch, pool, p, split)?;
        return Ok(split.pieces());
    }
    let split = plan.split.and_then(|p| match packed {
        Some(_) => p.capped(threads),
        None => p.for_threads(threads),
    });
    if let [out] = outputs
        && let Some(plan) = split
    {
        execute_split(op, inputs, out, scratch, env, &plan)?;
        return Ok(plan.pieces());
    }
    let first = scratch.first().ok_or_else(|| no_scratch(op))?;
    compute(op, inputs, outputs, first, &env)?;
    Ok(1)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn no_scratch(op: &Op) -> OpError {
    OpError::Output {
        op: op.name(),
        index: 0,
        message: "no scratch space given".into(),
    }
}

/// A piece's output shape and bytes (taken by the piece when it runs).
type PieceOut<'a> = (Dims, Option<&'a mut [u8]>);

/// Runs the pieces of `plan`, each into its own range of `out`.
fn execute_split(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    scratch: &[Mutex<Scratch>],
    env: Env<'_>,
    plan: &split::Plan,
) -> Result<(), OpError> {
    if scratch.is_empty() {
        return Err(no_scratch(op));
    }
    let (dtype, shape) = (out.dtype, out.shape);
    let size = shape[plan.axis()];
    let mut chunks: SmallVec<[Mutex<PieceOut<'_>>; MAX_PIECES]> = SmallVec::new();
    let mut rest: &mut [u8] = out.data;
    let mut at = 0;
    for i in 0..plan.pieces() {
        let (dims, bytes) = split::output_range(plan, dtype, shape, split::range(plan, size, i));
        let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(bytes.end - at);
        at = bytes.end;
        rest = tail;
        chunks.push(Mutex::new((dims, Some(chunk))));
    }
    let error: Mutex<Option<OpError>> = Mutex::new(None);
    let piece = |i: usize| {
        let range = split::range(plan, size, i);
        let layouts: SmallVec<[Layout; 4]> = inputs
            .iter()
            .enumerate()
            .map(|(idx, t)| split::input_layout(plan, idx, t, shape, range))
            .collect();
        let res = split::piece_refs(inputs, &layouts).and_then(|refs| {
            let mut chunk = lock(&chunks[i]);
            let (dims, data) = &mut *chunk;
            let data = data.take().ok_or_else(|| OpError::Output {
                op: op.name(),
                index: 0,
                message: format!("piece {i} ran twice"),
            })?;
            let mut piece_out = [TensorMut {
                dtype,
                shape: dims,
                data,
            }];
            compute(op, &refs, &mut piece_out, &scratch[i % scratch.len()], &env)
        });
        if let Err(e) = res {
            lock(&error).get_or_insert(e);
        }
    };
    match env.pool {
        Some(pool) => pool.run(plan.pieces(), &piece),
        None => (0..plan.pieces()).for_each(piece),
    }
    match error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Computes one op (or one piece of it) into `outputs`; only the ops that use
/// `scratch` lock it (an uncontended lock is still two atomic operations, a
/// large part of a tiny op's cost).
fn compute(
    op: &Op,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
    scratch: &Mutex<Scratch>,
    env: &Env,
) -> Result<(), OpError> {
    let packed_b = env.packed_b;
    let scratch = || lock(scratch);
    match op {
        Op::Unary(u) => elementwise::unary(op, *u, inputs, &mut outputs[0]),
        Op::Binary(b) => elementwise::binary(op, *b, inputs, &mut outputs[0]),
        Op::Where => elementwise::where_(op, inputs, &mut outputs[0]),
        Op::Cast { to } => elementwise::cast(op, *to, inputs, &mut outputs[0]),
        Op::BitCast { to } => elementwise::bitcast(op, *to, inputs, &mut outputs[0]),
        Op::MatMul => linalg::matmul(op, inputs, &mut outputs[0], packed_b),
        Op::MatMulBias => linalg::matmul_bias(op, inputs, &mut outputs[0], packed_b),
        Op::Gemm {
            alpha,
            beta,
            trans_a,
            trans_b,
        } => linalg::gemm(
            op,
            inputs,
            &mut outputs[0],
            packed_b,
            linalg::GemmAttrs {
                alpha: *alpha,
                beta: *beta,
                trans_a: *trans_a,
                trans_b: *trans_b,
            },
        ),
        Op::Reduce { op: r, axes, .. } => reduce::reduce(op, *r, axes, inputs, &mut outputs[0]),
        Op::DynReduce {
            op: r,
            noop_with_empty_axes,
            ..
        } => reduce::dyn_reduce(op, *r, *noop_with_empty_axes, inputs, &mut outputs[0]),
        Op::Softmax { axis } => {
            norm::softmax(op, *axis, false, inputs, &mut outputs[0], &mut scratch())
        }
        Op::LogSoftmax { axis } => {
            norm::softmax(op, *axis, true, inputs, &mut outputs[0], &mut scratch())
        }
        Op::LayerNorm { axis, epsilon } => {
            norm::layer_norm(op, *axis, *epsilon, inputs, &mut outputs[0], &mut scratch())
        }
        Op::BatchNorm {
            epsilon,
            activation,
        } => norm::batch_norm(
            op,
            *epsilon,
            *activation,
            inputs,
            &mut outputs[0],
            &mut scratch(),
        ),
        Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Squeeze { .. }
        | Op::Unsqueeze { .. }
        | Op::Flatten { .. }
        | Op::Slice { .. }
        | Op::DynSlice
        | Op::Expand
        | Op::Identity => shape::materialize(op, inputs, &mut outputs[0]),
        Op::Concat { axis } => data::concat(op, *axis, inputs, &mut outputs[0]),
        Op::Split { axis, .. } => data::split(op, *axis, inputs, outputs),
        Op::Gather { axis } => data::gather(op, *axis, inputs, &mut outputs[0]),
        Op::Tile => data::tile(op, inputs, &mut outputs[0]),
        Op::GatherElements { axis } => index::gather_elements(op, *axis, inputs, &mut outputs[0]),
        Op::ScatterElements { axis, reduction } => {
            index::scatter_elements(op, *axis, *reduction, inputs, &mut outputs[0])
        }
        Op::GatherNd { batch_dims } => index::gather_nd(op, *batch_dims, inputs, &mut outputs[0]),
        Op::ScatterNd { reduction } => index::scatter_nd(op, *reduction, inputs, &mut outputs[0]),
        Op::Pad { pads, value } => data::pad(op, pads, *value, inputs, &mut outputs[0]),
        Op::Shape { start, .. } => data::shape(op, *start, inputs, &mut outputs[0]),
        Op::Size => data::size(op, inputs, &mut outputs[0]),
        Op::TopK { axis, largest } => data::top_k(op, *axis, *largest, inputs, outputs),
        Op::Cumulative {
            product,
            exclusive,
            reverse,
        } => data::cumulative(
            op,
            data::CumFlags {
                product: *product,
                exclusive: *exclusive,
                reverse: *reverse,
            },
            inputs,
            &mut outputs[0],
        ),
        Op::ConstantOfShape { value } => data::constant_of_shape(op, value, &mut outputs[0]),
        Op::Range => data::range(op, inputs, &mut outputs[0]),
        Op::Conv2d {
            window,
            groups,
            activation,
        } => conv::conv2d(
            op,
            window,
            *groups,
            *activation,
            env.packed_conv,
            inputs,
            &mut outputs[0],
            &mut scratch(),
        ),
        Op::ConvTranspose2d { window, groups, .. } => {
            conv::conv_transpose2d(op, window, *groups, inputs, &mut outputs[0], &mut scratch())
        }
        Op::MaxPool2d { window, .. } => {
            conv::max_pool(op, window, inputs, &mut outputs[0], &mut scratch())
        }
        Op::AvgPool2d {
            window,
            count_include_pad,
            ..
        } => conv::avg_pool(
            op,
            window,
            *count_include_pad,
            inputs,
            &mut outputs[0],
            &mut scratch(),
        ),
        Op::GlobalAvgPool => reduce::global_avg_pool(op, inputs, &mut outputs[0]),
        Op::Constant { .. } | Op::If { .. } | Op::Loop { .. } => Err(interpreter_only(op)),
    }
}

/// The error for ops the interpreter runs itself.
fn interpreter_only(op: &Op) -> OpError {
    OpError::Unsupported {
        op: op.name(),
        message: "run by the interpreter itself, not by ops::execute".into(),
    }
}

/// Checks the VM passed outputs of the expected count, dtypes, shapes and sizes.
fn check_outputs(op: &Op, expected: &[OutType], outputs: &[TensorMut]) -> Result<(), OpError> {
    let bug = |index: usize, message: String| OpError::Output {
        op: op.name(),
        index,
        message,
    };
    if outputs.len() != expected.len() {
        return Err(bug(
            0,
            format!("expected {} outputs, got {}", expected.len(), outputs.len()),
        ));
    }
    for (i, (e, o)) in expected.iter().zip(outputs).enumerate() {
        if o.dtype != e.dtype || o.shape != e.shape.as_slice() {
            return Err(bug(
                i,
                format!(
                    "expected {}{:?}, got {}{:?}",
                    e.dtype, e.shape, o.dtype, o.shape
                ),
            ));
        }
        let bytes = e.shape.iter().product::<usize>() * e.dtype.size();
        if o.data.len() != bytes {
            return Err(bug(
                i,
                format!("expected {bytes} bytes, got {}", o.data.len()),
            ));
        }
    }
    Ok(())
}
