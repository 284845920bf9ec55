//! Shape inference over symbolic dims for every op (ONNX semantics).
//!
//! [`infer`] maps an op and its input infos to output types. It also propagates
//! the *contents* of small integer tensors ([`ValueInfo::known`]) through
//! `shape`, `gather`, `concat`, `unsqueeze`, arithmetic, ..., so a `reshape`
//! whose target comes from a shape computation gets a symbolic output shape.
//! Dims that depend on data (e.g. a `range` with runtime bounds) get fresh
//! symbols `_d0`, `_d1`, ... from the [`InferCtx`].
//!
//! **Invariant:** inference is deterministic: the same op, input infos and
//! context state give the same outputs (the verifier relies on it), and it never
//! panics: every problem is an `Err` saying what was expected and what was found.
//!
//! **Invariant:** two symbolic dims are equal only when they are the same
//! polynomial. Where an op needs two dims to be equal and inference cannot prove
//! it, matmul, concat and the window ops fail to load; elementwise broadcasting
//! keeps one of them and leaves a run-time check ([`node_checks`]), never a guess.

mod control;
mod elementwise;
mod index;
mod movement;
mod nn;

pub use elementwise::{BroadcastCheck, broadcast_checks};

use crate::dim::{Dim, Symbol};
use crate::dtype::DType;
use crate::graph::{ValueInfo, ValueType};
use crate::op::Op;
use crate::shape::Shape;
use std::collections::HashSet;

/// Largest element count of a constant whose contents are tracked as `known`.
pub const MAX_KNOWN_ELEMS: usize = 64;

/// State shared across one graph's inference: the fresh-symbol counter, the
/// names it must avoid, and which symbols it created.
#[derive(Debug, Default)]
pub struct InferCtx {
    next_fresh: u32,
    taken: HashSet<Symbol>,
    created: HashSet<Symbol>,
}

impl InferCtx {
    /// Marks symbols (e.g. of graph inputs) that fresh symbols must not reuse.
    pub fn reserve(&mut self, symbols: impl IntoIterator<Item = Symbol>) {
        self.taken.extend(symbols);
    }

    /// A new symbol no reserved name and no earlier fresh symbol uses.
    pub fn fresh_dim(&mut self) -> Dim {
        loop {
            let symbol = Symbol::new(&format!("_d{}", self.next_fresh));
            self.next_fresh = self.next_fresh.wrapping_add(1);
            if !self.taken.contains(&symbol) {
                self.taken.insert(symbol.clone());
                self.created.insert(symbol.clone());
                return Dim::from_symbol(symbol);
            }
        }
    }

    /// True when `dim` is exactly one symbol made by [`InferCtx::fresh_dim`] of
    /// this context (an unknown dim: any recorded dim is compatible with it).
    pub fn is_fresh(&self, dim: &Dim) -> bool {
        dim.as_symbol().is_some_and(|s| self.created.contains(s))
    }
}

/// True when a recorded type agrees with an inferred one: same dtype and rank,
/// and every dim equal unless inference left it unknown (a fresh symbol of `ctx`).
pub fn type_matches(recorded: &ValueType, inferred: &ValueType, ctx: &InferCtx) -> bool {
    recorded.dtype == inferred.dtype
        && recorded.shape.rank() == inferred.shape.rank()
        && recorded
            .shape
            .dims()
            .iter()
            .zip(inferred.shape.dims())
            .all(|(a, b)| a == b || ctx.is_fresh(b))
}

/// One inferred output.
#[derive(Clone, Debug, PartialEq)]
pub struct Inferred {
    /// dtype and shape
    pub ty: ValueType,
    /// known contents (see [`ValueInfo::known`])
    pub known: Option<Vec<Dim>>,
}

impl Inferred {
    /// An output with no known contents.
    pub fn new(dtype: DType, shape: Shape) -> Inferred {
        Inferred {
            ty: ValueType { dtype, shape },
            known: None,
        }
    }

    /// An output with known contents, kept only when small enough to track.
    pub fn with_known(dtype: DType, shape: Shape, known: Option<Vec<Dim>>) -> Inferred {
        let trackable = shape.rank() <= 1 && matches!(dtype, DType::I64 | DType::I32);
        let known = known.filter(|k| trackable && k.len() <= MAX_KNOWN_ELEMS);
        Inferred {
            ty: ValueType { dtype, shape },
            known,
        }
    }
}

/// Infers output types; the error message says what is wrong (expected vs actual).
pub fn infer(op: &Op, inputs: &[&ValueInfo], ctx: &mut InferCtx) -> Result<Vec<Inferred>, String> {
    let one = |r: Result<Inferred, String>| r.map(|i| vec![i]);
    match op {
        Op::Unary(u) => one(elementwise::unary(*u, inputs)),
        Op::Binary(b) => one(elementwise::binary(*b, inputs, ctx)),
        Op::Where => one(elementwise::where_(inputs, ctx)),
        Op::Cast { to } => one(elementwise::cast(*to, inputs)),
        Op::BitCast { to } => one(elementwise::bitcast(*to, inputs)),
        Op::Identity => {
            arity(inputs, 1, 1)?;
            Ok(vec![Inferred {
                ty: inputs[0].ty.clone(),
                known: inputs[0].known.clone(),
            }])
        }
        Op::MatMul => one(nn::matmul(inputs)),
        Op::MatMulBias => one(nn::matmul_bias(inputs)),
        Op::Gemm {
            trans_a, trans_b, ..
        } => one(nn::gemm(*trans_a, *trans_b, inputs)),
        Op::Reduce { axes, keepdims, .. } => one(nn::reduce(axes, *keepdims, inputs)),
        Op::DynReduce {
            keepdims,
            noop_with_empty_axes,
            ..
        } => one(nn::dyn_reduce(
            *keepdims,
            *noop_with_empty_axes,
            inputs,
            ctx,
        )),
        Op::Softmax { axis } | Op::LogSoftmax { axis } => one(nn::softmax(*axis, inputs)),
        Op::LayerNorm { axis, .. } => one(nn::layer_norm(*axis, inputs)),
        Op::BatchNorm { .. } => one(nn::batch_norm(inputs)),
        Op::Conv2d { window, groups, .. } => one(nn::conv2d(window, *groups, inputs, ctx)),
        Op::ConvTranspose2d {
            window,
            groups,
            output_padding,
        } => one(nn::conv_transpose2d(
            window,
            *groups,
            *output_padding,
            inputs,
        )),
        Op::MaxPool2d { window, ceil_mode }
        | Op::AvgPool2d {
            window, ceil_mode, ..
        } => one(nn::pool2d(window, *ceil_mode, inputs, ctx)),
        Op::GlobalAvgPool => one(nn::global_avg_pool(inputs)),
        Op::Reshape { allowzero } => one(movement::reshape(*allowzero, inputs, ctx)),
        Op::Transpose { perm } => one(movement::transpose(perm, inputs)),
        Op::Squeeze { axes } => one(movement::squeeze(axes, inputs, ctx)),
        Op::Unsqueeze { axes } => one(movement::unsqueeze(axes, inputs)),
        Op::Flatten { axis } => one(movement::flatten(*axis, inputs)),
        Op::Concat { axis } => one(movement::concat(*axis, inputs)),
        Op::Split { axis, sizes } => movement::split(*axis, sizes, inputs),
        Op::Slice {
            starts,
            ends,
            axes,
            steps,
        } => one(movement::slice(starts, ends, axes, steps, inputs, ctx)),
        Op::DynSlice => one(movement::dyn_slice(inputs, ctx)),
        Op::Gather { axis } => one(movement::gather(*axis, inputs)),
        Op::GatherElements { .. } => one(index::gather_elements(inputs)),
        Op::ScatterElements { .. } => one(index::scatter_elements(inputs)),
        Op::GatherNd { batch_dims } => one(index::gather_nd(*batch_dims, inputs)),
        Op::ScatterNd { .. } => one(index::scatter_nd(inputs)),
        Op::Expand => one(movement::expand(inputs, ctx)),
        Op::Tile => one(movement::tile(inputs, ctx)),
        Op::Pad { pads, .. } => one(movement::pad(pads, inputs)),
        Op::Shape { start, end } => one(movement::shape_of(*start, *end, inputs)),
        Op::TopK { axis, .. } => {
            arity(inputs, 2, 2)?;
            let dtype = expect_dtype(inputs, 0, &ARITH)?;
            expect_dtype(inputs, 1, &[DType::I64])?;
            let shape = &inputs[0].ty.shape;
            let axis = norm_axis(*axis, shape.rank())?;
            let k = match known_ints(inputs[1]).as_deref() {
                Some([k]) if *k >= 0 => Dim::known(*k),
                Some(other) => return Err(format!("k must be one value >= 0, got {other:?}")),
                None => ctx.fresh_dim(),
            };
            let mut dims = shape.dims().to_vec();
            dims[axis] = k;
            Ok(vec![
                Inferred::new(dtype, Shape(dims.clone())),
                Inferred::new(DType::I64, Shape(dims)),
            ])
        }
        Op::Cumulative { .. } => {
            arity(inputs, 2, 2)?;
            let dtype = expect_dtype(inputs, 0, &ARITH)?;
            expect_dtype(inputs, 1, &INTEGER)?;
            if numel(&inputs[1].ty.shape)?.as_known() != Some(1) {
                return Err(format!(
                    "input 1 (axis) has shape {}, expected one element",
                    inputs[1].ty.shape
                ));
            }
            Ok(vec![Inferred::new(dtype, inputs[0].ty.shape.clone())])
        }
        Op::Size => {
            arity(inputs, 1, 1)?;
            let numel = numel(&inputs[0].ty.shape)?;
            Ok(vec![Inferred::with_known(
                DType::I64,
                Shape::scalar(),
                Some(vec![numel]),
            )])
        }
        Op::Constant { value } => {
            arity(inputs, 0, 0)?;
            Ok(vec![movement::constant(value)])
        }
        Op::ConstantOfShape { value } => one(movement::constant_of_shape(value, inputs, ctx)),
        Op::Range => one(movement::range(inputs, ctx)),
        Op::If {
            then_branch,
            else_branch,
        } => control::if_(then_branch, else_branch, inputs, ctx),
        Op::Loop { body, n_carried } => control::loop_(body, *n_carried, inputs, ctx),
    }
}

/// The run-time shape checks a node with these input and output shapes needs
/// (see [`broadcast_checks`]): elementwise binary ops and `where` broadcast
/// dims inference could not prove equal; other ops need none.
pub fn node_checks(op: &Op, inputs: &[&Shape], outputs: &[&Shape]) -> Vec<BroadcastCheck> {
    match (op, outputs) {
        (Op::Binary(_) | Op::Where, [out]) => broadcast_checks(inputs, out),
        _ => Vec::new(),
    }
}

/// Checks the input count is in `min..=max`.
fn arity(inputs: &[&ValueInfo], min: usize, max: usize) -> Result<(), String> {
    let n = inputs.len();
    if n >= min && n <= max {
        return Ok(());
    }
    let expected = if min == max {
        format!("{min}")
    } else if max == usize::MAX {
        format!("at least {min}")
    } else {
        format!("{min} to {max}")
    };
    let plural = if max == 1 || (min == 1 && max == usize::MAX) {
        ""
    } else {
        "s"
    };
    Err(format!("expected {expected} input{plural}, got {n}"))
}

/// Checks input `idx` has one of the `allowed` dtypes.
fn expect_dtype(inputs: &[&ValueInfo], idx: usize, allowed: &[DType]) -> Result<DType, String> {
    let dtype = inputs[idx].ty.dtype;
    if allowed.contains(&dtype) {
        return Ok(dtype);
    }
    let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
    Err(format!(
        "input {idx} has dtype {dtype}, expected {}",
        names.join(" or ")
    ))
}

/// Checks input `idx` has the same dtype as input 0.
fn expect_same_dtype(inputs: &[&ValueInfo], idx: usize) -> Result<(), String> {
    let (want, got) = (inputs[0].ty.dtype, inputs[idx].ty.dtype);
    if want == got {
        return Ok(());
    }
    Err(format!(
        "input {idx} has dtype {got}, expected {want} (the dtype of input 0)"
    ))
}

/// Checks input `idx` has rank `rank`.
fn expect_rank(inputs: &[&ValueInfo], idx: usize, rank: usize) -> Result<(), String> {
    let shape = &inputs[idx].ty.shape;
    if shape.rank() == rank {
        return Ok(());
    }
    Err(format!(
        "input {idx} has shape {shape} (rank {}), expected rank {rank}",
        shape.rank()
    ))
}

/// The dtypes arithmetic accepts.
const NUMERIC: [DType; 3] = [DType::F32, DType::I32, DType::I64];
/// The dtypes elementwise arithmetic (binary ops, `neg`, `abs`, `relu`,
/// `clip`) accepts: [`NUMERIC`] and f64.
const ARITH: [DType; 4] = [DType::F32, DType::F64, DType::I32, DType::I64];
/// Integer dtypes (indices, shapes).
const INTEGER: [DType; 2] = [DType::I32, DType::I64];

/// Normalizes an axis (negative counts from the end) into `0..rank`.
fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis.wrapping_add(r) } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!(
            "axis {axis} is out of range for rank {rank}, expected {} to {}",
            -r,
            r - 1
        ))
    }
}

/// Normalizes a list of distinct axes into `0..rank`.
fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = norm_axis(a, rank)?;
        if out.contains(&n) {
            return Err(format!("axis {a} is listed twice in {axes:?}"));
        }
        out.push(n);
    }
    Ok(out)
}

/// The known contents of a value as integers, when every element is known.
fn known_ints(info: &ValueInfo) -> Option<Vec<i64>> {
    info.known.as_ref()?.iter().map(Dim::as_known).collect()
}

/// Reads the contents of a rank-1 i64 "shape" input (reshape, expand, tile, ...):
/// its length (which must be a known dim) and its contents when known.
fn shape_operand(inputs: &[&ValueInfo], idx: usize) -> Result<(usize, Option<Vec<Dim>>), String> {
    expect_dtype(inputs, idx, &[DType::I64])?;
    expect_rank(inputs, idx, 1)?;
    let len_dim = &inputs[idx].ty.shape.dims()[0];
    let len = len_dim
        .as_known()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            format!("input {idx} has symbolic length {len_dim}, expected a known length")
        })?;
    if len > MAX_RANK {
        return Err(format!(
            "input {idx} has length {len}, expected at most {MAX_RANK} dims"
        ));
    }
    let known = inputs[idx].known.clone().filter(|k| k.len() == len);
    Ok((len, known))
}

/// Highest tensor rank inference accepts (bounds work on hostile inputs).
pub const MAX_RANK: usize = 64;

/// The element count of a shape as a dim (an error when too complex).
fn numel(shape: &Shape) -> Result<Dim, String> {
    shape
        .checked_numel()
        .ok_or_else(|| format!("the element count of {shape} is too large a dim expression"))
}

/// True when every dim is the known 1 (exactly one element).
fn is_one_element(shape: &Shape) -> bool {
    shape.dims().iter().all(|d| *d == Dim::known(1))
}

/// Rejects a known negative dim in an output shape.
fn check_nonnegative(shape: &Shape, what: &str) -> Result<(), String> {
    match shape
        .dims()
        .iter()
        .find(|d| d.as_known().is_some_and(|n| n < 0))
    {
        Some(d) => Err(format!(
            "{what} has negative dim {d} in {shape}, expected dims >= 0"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
