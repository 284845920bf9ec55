//! Op mappings: one ONNX node → IR nodes, by op type and opset.
//!
//! Old-opset support (down to opset 6): every op below is mapped with the
//! semantics of the opset the model imports, where older versions differ —
//! the `broadcast`/`axis` form of binary ops (< 7), Clip bounds as attributes
//! (< 11), Slice (< 10) and Pad (< 11) attributes, Squeeze/Unsqueeze/Split
//! (< 13) and ReduceSum (< 13) / other reductions (< 18) with attribute axes,
//! the 2-D coercion of Softmax/LogSoftmax (< 13), Dropout's `is_test` (< 7).
//! An op that did not exist yet at the model's opset is still accepted with
//! its first semantics.
//!
//! **Invariant:** a mapping returns the IR values of the node's outputs in
//! order; it may return fewer (optional outputs it does not produce), and the
//! importer reports a use of a missing one as unsupported.

mod control;
mod elementwise;
mod nn;
mod shape;

use crate::node::{NodeCx, NodeResult};
use elementwise as ew;
use shapejit_ir::{BinaryOp, Op, ReduceOp, UnaryOp, ValueId};

/// Maps one node.
pub fn map_node(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    if !(cx.node.domain.is_empty() || cx.node.domain == "ai.onnx") {
        return Err(cx.unsupported(format!("domain '{}'", cx.node.domain)));
    }
    let op_type = cx.node.op_type.as_str();
    match op_type {
        "Neg" => ew::unary(cx, UnaryOp::Neg),
        "Abs" => ew::unary(cx, UnaryOp::Abs),
        "Exp" => ew::unary(cx, UnaryOp::Exp),
        "Log" => ew::unary(cx, UnaryOp::Log),
        "Sqrt" => ew::unary(cx, UnaryOp::Sqrt),
        "Reciprocal" => ew::unary(cx, UnaryOp::Reciprocal),
        "Tanh" => ew::unary(cx, UnaryOp::Tanh),
        "Sigmoid" => ew::unary(cx, UnaryOp::Sigmoid),
        "Relu" => ew::unary(cx, UnaryOp::Relu),
        "Erf" => ew::unary(cx, UnaryOp::Erf),
        "Not" => ew::unary(cx, UnaryOp::Not),
        "LeakyRelu" => ew::alpha_unary(cx, |alpha| UnaryOp::LeakyRelu { alpha }, 0.01),
        "Elu" => ew::alpha_unary(cx, |alpha| UnaryOp::Elu { alpha }, 1.0),
        "Gelu" => ew::gelu(cx),
        "Clip" => ew::clip(cx),
        "PRelu" => ew::prelu(cx),
        "Selu" => ew::selu(cx),
        "Softplus" => ew::softplus(cx),
        "Add" => ew::binary(cx, BinaryOp::Add),
        "Sub" => ew::binary(cx, BinaryOp::Sub),
        "Mul" => ew::binary(cx, BinaryOp::Mul),
        "Div" => ew::binary(cx, BinaryOp::Div),
        "Pow" => ew::binary(cx, BinaryOp::Pow),
        "And" => ew::binary(cx, BinaryOp::And),
        "Or" => ew::binary(cx, BinaryOp::Or),
        "Equal" => ew::binary(cx, BinaryOp::Eq),
        "Less" => ew::binary(cx, BinaryOp::Lt),
        "LessOrEqual" => ew::binary(cx, BinaryOp::Le),
        "Greater" => ew::binary(cx, BinaryOp::Gt),
        "GreaterOrEqual" => ew::binary(cx, BinaryOp::Ge),
        "Max" => ew::variadic(cx, BinaryOp::Max),
        "Min" => ew::variadic(cx, BinaryOp::Min),
        "Sum" => ew::variadic(cx, BinaryOp::Add),
        "Mean" => ew::mean(cx),
        "Where" => ew::where_(cx),
        "Cast" => ew::cast(cx),
        "MatMul" => nn::matmul(cx),
        "Gemm" => nn::gemm(cx),
        "Softmax" => nn::softmax(cx, false),
        "LogSoftmax" => nn::softmax(cx, true),
        "LayerNormalization" => nn::layer_norm(cx),
        "BatchNormalization" => nn::batch_norm(cx),
        "InstanceNormalization" => nn::instance_norm(cx),
        "ReduceSum" => nn::reduce(cx, ReduceOp::Sum, 13),
        "ReduceMean" => nn::reduce(cx, ReduceOp::Mean, 18),
        "ReduceMax" => nn::reduce(cx, ReduceOp::Max, 18),
        "ReduceMin" => nn::reduce(cx, ReduceOp::Min, 18),
        "ReduceProd" => nn::reduce(cx, ReduceOp::Prod, 18),
        "Conv" => nn::conv(cx),
        "ConvTranspose" => nn::conv_transpose(cx),
        "MaxPool" => nn::max_pool(cx),
        "AveragePool" => nn::avg_pool(cx),
        "GlobalAveragePool" => nn::global_avg_pool(cx),
        "GlobalMaxPool" => nn::global_max_pool(cx),
        "Reshape" => shape::reshape(cx),
        "Transpose" => shape::transpose(cx),
        "Squeeze" => shape::squeeze(cx),
        "Unsqueeze" => shape::unsqueeze(cx),
        "Flatten" => shape::flatten(cx),
        "Concat" => shape::concat(cx),
        "Split" => shape::split(cx),
        "Slice" => shape::slice(cx),
        "Gather" => shape::gather(cx),
        "Expand" => shape::with_shape_input(cx, Op::Expand),
        "Tile" => shape::with_shape_input(cx, Op::Tile),
        "Pad" => shape::pad(cx),
        "Shape" => shape::shape(cx),
        "Size" => shape::simple(cx, Op::Size),
        "Constant" => shape::constant(cx),
        "ConstantOfShape" => shape::constant_of_shape(cx),
        "Range" => shape::range(cx),
        "Identity" => shape::identity(cx),
        "Dropout" => shape::dropout(cx),
        "If" => control::if_(cx),
        "Loop" => control::loop_(cx),
        _ => Err(crate::error::OnnxError::UnsupportedOp { at: cx.at.clone() }),
    }
}
