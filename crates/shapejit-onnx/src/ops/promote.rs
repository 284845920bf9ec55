//! Dtype promotion: a node whose inputs have dtypes the IR ops have no kernels
//! for (f16, bf16, f64, the 8-, 16- and 32-bit integers, u64) computes in their
//! compute dtypes and casts each result back ([`compute_dtype`]: the dtype
//! table's [`DType::compute`], except that f64 stays f64 for the ops with f64
//! kernels ([`F64_NATIVE`]: sums, products, quotients, extremes, `Neg`, `Abs`,
//! `Relu`, `Clip`), integers max-pool in f32, exactly, and booleans reduce in
//! i64).
//!
//! Ops that run on every dtype as they are ([`ANY_DTYPE`]: data movement,
//! indexing, comparisons, casts, control flow) are never promoted, so they stay
//! exact in f64 and u64. A constant input is converted at load
//! ([`shapejit_ir::Tensor::cast`]), so mappings that read constant inputs
//! (Clip bounds, Pad values) still see a constant.
//!
//! **Invariant:** an output is cast back to the narrow dtype of the first
//! promoted input with the same compute dtype, unless the op fixes that
//! output's dtype ([`fixed_output`]: indices and masks), so every output has
//! the dtype ONNX gives it.

use super::MapFn;
use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{DType, Op, UnaryOp, ValueId};

/// Ops whose mappings run on every dtype without promotion.
const ANY_DTYPE: &[&str] = &[
    "Identity",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "GatherElements",
    "GatherND",
    "Expand",
    "Tile",
    "Pad",
    "Shape",
    "Size",
    "Constant",
    "ConstantOfShape",
    "Cast",
    "CastLike",
    "BitCast",
    "EyeLike",
    "Where",
    "Equal",
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "If",
    "Loop",
    "Dropout",
    "DepthToSpace",
    "SpaceToDepth",
    "ReverseSequence",
    "CenterCropPad",
    // widens to i64 itself: out-of-range shifts depend on the input's width
    "BitShift",
    // compute in f32 (or exactly in i64) themselves: the zero point's dtype
    // is the output's
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "QLinearMatMul",
];

/// Ops whose mappings emit only IR ops with f64 kernels.
const F64_NATIVE: &[&str] = &[
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Neg", "Abs", "Relu", "Clip",
    "CumSum", "CumProd", "TopK",
];

/// The dtype `op_type` computes `dtype` in.
fn compute_dtype(op_type: &str, dtype: DType) -> DType {
    match dtype {
        DType::F64 if F64_NATIVE.contains(&op_type) => DType::F64,
        // values of at most 16 bits are exact in f32; max-pool keeps them
        DType::I8 | DType::U8 | DType::I16 | DType::U16 if op_type == "MaxPool" => DType::F32,
        // booleans reduce as 0 and 1 (max: any, min: all)
        DType::Bool if op_type.starts_with("Reduce") => DType::I64,
        _ => dtype.compute(),
    }
}

/// Whether output `i` of `op_type` has a dtype of its own (i64 indices, bool
/// masks), not the dtype of the inputs.
fn fixed_output(op_type: &str, i: usize) -> bool {
    match op_type {
        "ArgMax" | "ArgMin" | "NonZero" | "IsNaN" | "IsInf" => true,
        "TopK" | "MaxPool" => i == 1,
        // Mean and InvStdDev are in the stash type, f32
        "LayerNormalization" => i >= 1,
        _ => false,
    }
}

/// Runs `map` on the node, promoting its inputs first when it needs to.
pub(super) fn map_promoted(cx: &mut NodeCx, map: MapFn) -> NodeResult<Vec<ValueId>> {
    let op_type = cx.node.op_type.clone();
    if ANY_DTYPE.contains(&op_type.as_str()) {
        return map(cx);
    }
    let mut saved: Vec<(String, ValueId)> = Vec::new();
    // (narrow dtype, the dtype it computes in)
    let mut narrow: Vec<(DType, DType)> = Vec::new();
    for i in 0..cx.n_inputs() {
        let Some(v) = cx.opt_input(i)? else {
            continue;
        };
        let dtype = cx.ty(v).dtype;
        let to = compute_dtype(&op_type, dtype);
        let name = cx.node.input[i].clone();
        if to == dtype || saved.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let wide = match cx.const_tensor(v) {
            Some(t) => {
                let t = t.cast(to).map_err(|e| cx.bad(format!("input #{i}: {e}")))?;
                cx.constant(t)
            }
            None => cx.op(Op::Cast { to }, &[v])?,
        };
        cx.g.names.insert(name.clone(), wide);
        saved.push((name, v));
        narrow.push((dtype, to));
    }
    if saved.is_empty() {
        return map(cx);
    }
    let res = map(cx);
    for (name, v) in saved {
        cx.g.names.insert(name, v);
    }
    res?.into_iter()
        .enumerate()
        .map(|(i, v)| {
            let dtype = cx.ty(v).dtype;
            match narrow.iter().find(|(_, wide)| *wide == dtype) {
                Some(&(DType::Bool, _)) if !fixed_output(&op_type, i) => {
                    // a reduction of no booleans gives i64::MIN for max, which
                    // must read as false: clamp at 0 first
                    let v = cx.un(UnaryOp::Relu, v)?;
                    cx.op(Op::Cast { to: DType::Bool }, &[v])
                }
                Some(&(to, _)) if !fixed_output(&op_type, i) => cx.op(Op::Cast { to }, &[v]),
                _ => Ok(v),
            }
        })
        .collect()
}
