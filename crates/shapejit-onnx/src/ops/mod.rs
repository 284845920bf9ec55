//! Op mappings: one ONNX node → IR nodes, by op type and op version.
//!
//! [`OPS`] is the one table of supported ops: for each ONNX op type, the ONNX
//! versions whose semantics its mapping implements, and the mapping. Versions
//! resolve as onnxruntime resolves them: a model importing default-domain
//! opset `N` uses, for each op, the op's newest version `≤ N`
//! ([`resolve_version`]); the node is accepted when that version is listed.
//! An op that does not exist yet at opset `N` (its first version is above
//! `N`) is a malformed model. Nodes of any other domain (`ai.onnx.ml`,
//! `ai.onnx.preview.training`, vendor domains) are an unsupported-domain error.
//!
//! Old-version forms mapped (down to opset 6): the `broadcast`/`axis` form of
//! binary ops (< 7), Clip bounds as attributes (< 11), Slice (< 10) and Pad
//! (< 11) attributes, Squeeze/Unsqueeze/Split (< 13) and ReduceSum (< 13) /
//! other reductions (< 18) with attribute axes, the 2-D coercion of
//! Softmax/LogSoftmax (< 13), Dropout's `is_test` (< 7). Versions that only
//! add dtypes, or attributes and inputs the mapping reads (an attribute it
//! does not read is an unsupported error, see [`crate::attrs`]), are listed
//! as implemented.
//!
//! Nodes on dtypes without kernels compute in their compute dtypes and cast
//! back ([`promote`]).
//!
//! **Invariant:** each version list is the op's ONNX since-versions (onnx
//! 1.23, opsets up to [`crate::MAX_OPSET`]) from the one in effect at
//! [`crate::MIN_OPSET`] (or the op's first) on, ascending, with none missing,
//! so the newest listed version `≤ N` is the version the model uses. The
//! conformance test checks the lists against `onnx.defs` when it is given
//! the schemas (see `.ci/conformance.sh`).
//!
//! **Invariant:** a mapping returns the IR values of the node's outputs in
//! order; it may return fewer (optional outputs it does not produce), and the
//! importer reports a use of a missing one as unsupported.

mod activation;
mod attention;
mod control;
mod einsum;
mod elementwise;
mod index;
mod layout;
mod loss;
mod nn;
mod norm;
mod promote;
mod quant;
mod recurrent;
mod reduce;
mod resize;
mod shape;

use crate::error::OnnxError;
use crate::node::{NodeCx, NodeResult};
use elementwise as ew;
use shapejit_ir::{BinaryOp, MathFn, Op, ReduceOp, UnaryOp, ValueId};

/// Maps one node to IR values (its outputs, in order).
pub type MapFn = fn(&mut NodeCx) -> NodeResult<Vec<ValueId>>;

/// The supported ops: (ONNX op type, implemented ONNX versions, mapping).
pub const OPS: &[(&str, &[i64], MapFn)] = &[
    ("Neg", &[6, 13], |cx| ew::unary(cx, UnaryOp::Neg)),
    ("Abs", &[6, 13], |cx| ew::unary(cx, UnaryOp::Abs)),
    ("Exp", &[6, 13], |cx| ew::unary(cx, UnaryOp::Exp)),
    ("Log", &[6, 13], |cx| ew::unary(cx, UnaryOp::Log)),
    ("Sqrt", &[6, 13], |cx| ew::unary(cx, UnaryOp::Sqrt)),
    ("Reciprocal", &[6, 13], |cx| {
        ew::unary(cx, UnaryOp::Reciprocal)
    }),
    ("Tanh", &[6, 13], |cx| ew::unary(cx, UnaryOp::Tanh)),
    ("Sigmoid", &[6, 13], |cx| ew::unary(cx, UnaryOp::Sigmoid)),
    ("Relu", &[6, 13, 14], |cx| ew::unary(cx, UnaryOp::Relu)),
    ("Erf", &[9, 13], |cx| ew::unary(cx, UnaryOp::Erf)),
    ("Not", &[1], |cx| ew::unary(cx, UnaryOp::Not)),
    ("LeakyRelu", &[6, 16], |cx| {
        ew::alpha_unary(cx, |alpha| UnaryOp::LeakyRelu { alpha }, 0.01)
    }),
    ("Elu", &[6, 22], |cx| {
        ew::alpha_unary(cx, |alpha| UnaryOp::Elu { alpha }, 1.0)
    }),
    ("Gelu", &[20], |cx| ew::gelu(cx)),
    ("Clip", &[6, 11, 12, 13], |cx| ew::clip(cx)),
    ("PRelu", &[6, 7, 9, 16], |cx| ew::prelu(cx)),
    ("Selu", &[6, 22], |cx| ew::selu(cx)),
    ("Softplus", &[1, 22], |cx| ew::softplus(cx)),
    ("Add", &[6, 7, 13, 14], |cx| ew::binary(cx, BinaryOp::Add)),
    ("Sub", &[6, 7, 13, 14], |cx| ew::binary(cx, BinaryOp::Sub)),
    ("Mul", &[6, 7, 13, 14], |cx| ew::binary(cx, BinaryOp::Mul)),
    ("Div", &[6, 7, 13, 14], |cx| ew::binary(cx, BinaryOp::Div)),
    ("Pow", &[1, 7, 12, 13, 15], |cx| {
        ew::binary(cx, BinaryOp::Pow)
    }),
    ("And", &[1, 7], |cx| ew::binary(cx, BinaryOp::And)),
    ("Or", &[1, 7], |cx| ew::binary(cx, BinaryOp::Or)),
    ("Equal", &[1, 7, 11, 13, 19], |cx| {
        ew::binary(cx, BinaryOp::Eq)
    }),
    ("Less", &[1, 7, 9, 13], |cx| ew::binary(cx, BinaryOp::Lt)),
    ("LessOrEqual", &[12, 16], |cx| ew::binary(cx, BinaryOp::Le)),
    ("Greater", &[1, 7, 9, 13], |cx| ew::binary(cx, BinaryOp::Gt)),
    ("GreaterOrEqual", &[12, 16], |cx| {
        ew::binary(cx, BinaryOp::Ge)
    }),
    ("Max", &[6, 8, 12, 13], |cx| ew::variadic(cx, BinaryOp::Max)),
    ("Min", &[6, 8, 12, 13], |cx| ew::variadic(cx, BinaryOp::Min)),
    ("Sum", &[6, 8, 13], |cx| ew::variadic(cx, BinaryOp::Add)),
    ("Mean", &[6, 8, 13], |cx| ew::mean(cx)),
    ("Where", &[9, 16], |cx| ew::where_(cx)),
    ("Cast", &[6, 9, 13, 19, 21, 23, 24, 25, 28], |cx| {
        ew::cast(cx)
    }),
    ("BitCast", &[26], |cx| ew::bit_cast(cx)),
    ("MatMul", &[1, 9, 13], |cx| nn::matmul(cx)),
    ("Gemm", &[6, 7, 9, 11, 13], |cx| nn::gemm(cx)),
    ("Softmax", &[1, 11, 13], |cx| nn::softmax(cx, false)),
    ("Attention", &[23, 24, 25], attention::attention),
    ("RotaryEmbedding", &[23], attention::rotary_embedding),
    (
        "QuantizeLinear",
        &[10, 13, 19, 21, 23, 24, 25, 28],
        quant::quantize_linear,
    ),
    (
        "DequantizeLinear",
        &[10, 13, 19, 21, 23, 24, 25, 28],
        quant::dequantize_linear,
    ),
    (
        "DynamicQuantizeLinear",
        &[11],
        quant::dynamic_quantize_linear,
    ),
    ("Resize", &[11, 13, 18, 19], resize::resize),
    ("MatMulInteger", &[10], quant::matmul_integer),
    ("QLinearMatMul", &[10, 21], quant::qlinear_matmul),
    ("LogSoftmax", &[1, 11, 13], |cx| nn::softmax(cx, true)),
    ("LayerNormalization", &[17], |cx| nn::layer_norm(cx)),
    ("BatchNormalization", &[6, 7, 9, 14, 15], |cx| {
        nn::batch_norm(cx)
    }),
    ("InstanceNormalization", &[6, 22], norm::instance_norm),
    ("ReduceSum", &[1, 11, 13], |cx| {
        reduce::reduce(cx, ReduceOp::Sum, 13)
    }),
    ("ReduceMean", &[1, 11, 13, 18], |cx| {
        reduce::reduce(cx, ReduceOp::Mean, 18)
    }),
    ("ReduceMax", &[1, 11, 12, 13, 18, 20], |cx| {
        reduce::reduce(cx, ReduceOp::Max, 18)
    }),
    ("ReduceMin", &[1, 11, 12, 13, 18, 20], |cx| {
        reduce::reduce(cx, ReduceOp::Min, 18)
    }),
    ("ReduceProd", &[1, 11, 13, 18], |cx| {
        reduce::reduce(cx, ReduceOp::Prod, 18)
    }),
    ("Conv", &[1, 11, 22], |cx| nn::conv(cx)),
    ("ConvTranspose", &[1, 11, 22], |cx| nn::conv_transpose(cx)),
    ("MaxPool", &[1, 8, 10, 11, 12, 22], |cx| nn::max_pool(cx)),
    ("AveragePool", &[1, 7, 10, 11, 19, 22], |cx| {
        nn::avg_pool(cx)
    }),
    ("GlobalAveragePool", &[1, 22], |cx| nn::global_avg_pool(cx)),
    ("LpPool", &[2, 11, 18, 22], |cx| nn::lp_pool(cx)),
    ("CenterCropPad", &[18], |cx| shape::center_crop_pad(cx)),
    ("Shrink", &[9], activation::shrink),
    ("SwiGLU", &[28], activation::swiglu),
    ("HannWindow", &[17], |cx| ew::window(cx, ew::Window::Hann)),
    ("HammingWindow", &[17], |cx| {
        ew::window(cx, ew::Window::Hamming)
    }),
    ("BlackmanWindow", &[17], |cx| {
        ew::window(cx, ew::Window::Blackman)
    }),
    ("ReverseSequence", &[10, 28], layout::reverse_sequence),
    ("RNN", &[7, 14, 22], |cx| {
        recurrent::recurrent(cx, recurrent::Cell::Rnn)
    }),
    ("GRU", &[7, 14, 22], |cx| {
        recurrent::recurrent(cx, recurrent::Cell::Gru)
    }),
    ("LSTM", &[7, 14, 22], |cx| {
        recurrent::recurrent(cx, recurrent::Cell::Lstm)
    }),
    ("GlobalMaxPool", &[1, 22], |cx| nn::global_max_pool(cx)),
    ("Reshape", &[5, 13, 14, 19, 21, 23, 24, 25], |cx| {
        shape::reshape(cx)
    }),
    ("Transpose", &[1, 13, 21, 23, 24, 25], |cx| {
        shape::transpose(cx)
    }),
    ("Squeeze", &[1, 11, 13, 21, 23, 24, 25], |cx| {
        shape::squeeze(cx)
    }),
    ("Unsqueeze", &[1, 11, 13, 21, 23, 24, 25], |cx| {
        shape::unsqueeze(cx)
    }),
    ("Flatten", &[1, 9, 11, 13, 21, 23, 24, 25], |cx| {
        shape::flatten(cx)
    }),
    ("Concat", &[4, 11, 13], |cx| shape::concat(cx)),
    ("Split", &[2, 11, 13, 18], |cx| shape::split(cx)),
    ("Slice", &[1, 10, 11, 13], |cx| shape::slice(cx)),
    ("Gather", &[1, 11, 13], |cx| shape::gather(cx)),
    ("Expand", &[8, 13], |cx| {
        shape::with_shape_input(cx, Op::Expand)
    }),
    ("Tile", &[6, 13], |cx| shape::with_shape_input(cx, Op::Tile)),
    ("Pad", &[2, 11, 13, 18, 19, 21, 23, 24, 25], |cx| {
        shape::pad(cx)
    }),
    ("Shape", &[1, 13, 15, 19, 21, 23, 24, 25], |cx| {
        shape::shape(cx)
    }),
    ("Size", &[1, 13, 19, 21, 23, 24, 25], |cx| {
        shape::simple(cx, Op::Size)
    }),
    ("Constant", &[1, 9, 11, 12, 13, 19, 21, 23, 24, 25], |cx| {
        shape::constant(cx)
    }),
    ("ConstantOfShape", &[9, 20, 21, 23, 24, 25], |cx| {
        shape::constant_of_shape(cx)
    }),
    ("Range", &[11, 27], shape::range),
    ("Identity", &[1, 13, 14, 16, 19, 21, 23, 24, 25], |cx| {
        shape::identity(cx)
    }),
    ("Dropout", &[6, 7, 10, 12, 13, 22], |cx| shape::dropout(cx)),
    ("If", &[1, 11, 13, 16, 19, 21, 23, 24, 25], |cx| {
        control::if_(cx)
    }),
    ("Loop", &[1, 11, 13, 16, 19, 21, 23, 24, 25], |cx| {
        control::loop_(cx)
    }),
    ("HardSigmoid", &[6, 22], activation::hard_sigmoid),
    ("HardSwish", &[14, 22], activation::hard_swish),
    ("Softsign", &[1, 22], activation::softsign),
    ("ThresholdedRelu", &[10, 22], activation::thresholded_relu),
    ("Celu", &[12, 28], activation::celu),
    ("Mish", &[18, 22], activation::mish),
    ("Swish", &[24], activation::swish),
    ("Sign", &[9, 13], activation::sign),
    ("IsNaN", &[9, 13, 20], activation::is_nan),
    ("IsInf", &[10, 20], activation::is_inf),
    ("Xor", &[1, 7], activation::xor),
    ("CastLike", &[15, 19, 21, 23, 24, 25], activation::cast_like),
    ("ReduceL1", &[1, 11, 13, 18], |cx| {
        reduce::composed(cx, reduce::Composed::L1)
    }),
    ("ReduceL2", &[1, 11, 13, 18], |cx| {
        reduce::composed(cx, reduce::Composed::L2)
    }),
    ("ReduceSumSquare", &[1, 11, 13, 18], |cx| {
        reduce::composed(cx, reduce::Composed::SumSquare)
    }),
    ("ReduceLogSum", &[1, 11, 13, 18, 28], |cx| {
        reduce::composed(cx, reduce::Composed::LogSum)
    }),
    ("ReduceLogSumExp", &[1, 11, 13, 18, 28], reduce::log_sum_exp),
    ("ArgMax", &[1, 11, 12, 13], |cx| reduce::arg(cx, true)),
    ("ArgMin", &[1, 11, 12, 13], |cx| reduce::arg(cx, false)),
    ("Hardmax", &[1, 11, 13], reduce::hardmax),
    ("LRN", &[1, 13], norm::lrn),
    ("LpNormalization", &[1, 22], norm::lp_normalization),
    ("GroupNormalization", &[18, 21], norm::group_norm),
    (
        "MeanVarianceNormalization",
        &[9, 13],
        norm::mean_variance_norm,
    ),
    ("RMSNormalization", &[23], norm::rms_norm),
    ("DepthToSpace", &[1, 11, 13, 28], layout::depth_to_space),
    ("SpaceToDepth", &[1, 13, 28], layout::space_to_depth),
    ("Trilu", &[14], layout::trilu),
    ("EyeLike", &[9, 22], layout::eye_like),
    ("OneHot", &[9, 11, 28], layout::one_hot),
    ("Floor", &[6, 13], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Floor))
    }),
    ("Ceil", &[6, 13], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Ceil))
    }),
    ("Round", &[11, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Round))
    }),
    ("Sin", &[7, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Sin))
    }),
    ("Cos", &[7, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Cos))
    }),
    ("Tan", &[7, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Tan))
    }),
    ("Asin", &[7, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Asin))
    }),
    ("Acos", &[7, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Acos))
    }),
    ("Atan", &[7, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Atan))
    }),
    ("Sinh", &[9, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Sinh))
    }),
    ("Cosh", &[9, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Cosh))
    }),
    ("Asinh", &[9, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Asinh))
    }),
    ("Acosh", &[9, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Acosh))
    }),
    ("Atanh", &[9, 22], |cx| {
        ew::unary(cx, UnaryOp::Math(MathFn::Atanh))
    }),
    ("Mod", &[10, 13, 28], ew::modulo),
    ("BitShift", &[11, 28], ew::bit_shift),
    ("CumSum", &[11, 14], |cx| shape::cumulative(cx, false)),
    ("CumProd", &[26], |cx| shape::cumulative(cx, true)),
    ("Einsum", &[12, 28], einsum::einsum),
    ("BitwiseAnd", &[18], |cx| ew::binary(cx, BinaryOp::BitAnd)),
    ("BitwiseOr", &[18], |cx| ew::binary(cx, BinaryOp::BitOr)),
    ("BitwiseXor", &[18], |cx| ew::binary(cx, BinaryOp::BitXor)),
    ("BitwiseNot", &[18], ew::bitwise_not),
    ("TopK", &[1, 10, 11, 24], shape::top_k),
    ("NegativeLogLikelihoodLoss", &[12, 13, 22], loss::nll),
    (
        "SoftmaxCrossEntropyLoss",
        &[12, 13],
        loss::softmax_cross_entropy,
    ),
    ("GatherElements", &[11, 13], index::gather_elements),
    (
        "ScatterElements",
        &[11, 13, 16, 18],
        index::scatter_elements,
    ),
    ("Scatter", &[9, 11], index::scatter_elements),
    ("GatherND", &[11, 12, 13], index::gather_nd),
    ("ScatterND", &[11, 13, 16, 18], index::scatter_nd),
];

/// The version of `op_type` a model importing `opset` uses: the newest
/// listed version `≤ opset`. `None`: the op is not supported;
/// `Some(Err(first))`: its first version is above `opset`.
pub fn resolve_version(op_type: &str, opset: i64) -> Option<Result<i64, i64>> {
    let (_, versions, _) = OPS.iter().find(|(name, _, _)| *name == op_type)?;
    Some(newest_at(versions, opset))
}

fn newest_at(versions: &[i64], opset: i64) -> Result<i64, i64> {
    match versions.iter().rev().find(|&&v| v <= opset) {
        Some(&v) => Ok(v),
        None => Err(versions.first().copied().unwrap_or(i64::MAX)),
    }
}

/// Maps one node.
pub fn map_node(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    if !(cx.node.domain.is_empty() || cx.node.domain == "ai.onnx") {
        return Err(OnnxError::UnsupportedDomain {
            at: cx.at.clone(),
            domain: cx.node.domain.clone(),
        });
    }
    let op_type = cx.node.op_type.as_str();
    let Some(&(_, versions, map)) = OPS.iter().find(|(name, _, _)| *name == op_type) else {
        return Err(OnnxError::UnsupportedOp { at: cx.at.clone() });
    };
    cx.version = newest_at(versions, cx.opset()).map_err(|first| {
        cx.bad(format!(
            "{op_type} does not exist at opset {} (its first version is {first})",
            cx.opset()
        ))
    })?;
    promote::map_promoted(cx, map)
}
