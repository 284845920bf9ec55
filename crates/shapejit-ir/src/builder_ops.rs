//! One small [`GraphBuilder`] method per op, so models read like code:
//! `let h = b.matmul(x, w)?; let y = b.relu(h)?;`.
//!
//! Each method adds one node (plus, for ops whose attributes ONNX passes as
//! tensors, e.g. `reshape`, the small i64 constant they need) with an automatic
//! name, runs shape inference, and returns the output value.
//!
//! **Invariant:** these methods only call [`GraphBuilder::op`],
//! [`GraphBuilder::node`] and [`GraphBuilder::constant`]; they add no
//! behaviour of their own beyond filling in attributes.

use crate::builder::GraphBuilder;
use crate::dtype::DType;
use crate::error::IrError;
use crate::graph::{Graph, ValueId};
use crate::op::{BinaryOp, Op, ReduceOp, UnaryOp, Window2d};
use crate::tensor::Tensor;

/// Result of a builder method with one output.
type Out = Result<ValueId, IrError>;

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(&mut self, x: ValueId) -> Out {
            self.unary($op, x)
        }
    )*};
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(&mut self, a: ValueId, b: ValueId) -> Out {
            self.binary($op, a, b)
        }
    )*};
}

impl GraphBuilder {
    /// Any elementwise unary op.
    pub fn unary(&mut self, op: UnaryOp, x: ValueId) -> Out {
        self.op(Op::Unary(op), &[x])
    }

    /// Any elementwise binary op (NumPy broadcasting).
    pub fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> Out {
        self.op(Op::Binary(op), &[a, b])
    }

    unary_methods! {
        /// `-x`
        neg => UnaryOp::Neg;
        /// `|x|`
        abs => UnaryOp::Abs;
        /// `e^x`
        exp => UnaryOp::Exp;
        /// natural log
        log => UnaryOp::Log;
        /// square root
        sqrt => UnaryOp::Sqrt;
        /// `1/x`
        reciprocal => UnaryOp::Reciprocal;
        /// hyperbolic tangent
        tanh => UnaryOp::Tanh;
        /// logistic sigmoid
        sigmoid => UnaryOp::Sigmoid;
        /// SiLU (swish), `x · sigmoid(x)`
        silu => UnaryOp::Silu;
        /// `max(x, 0)`
        relu => UnaryOp::Relu;
        /// error function
        erf => UnaryOp::Erf;
        /// logical not (bool)
        not => UnaryOp::Not;
    }

    binary_methods! {
        /// `a + b`
        add => BinaryOp::Add;
        /// `a - b`
        sub => BinaryOp::Sub;
        /// `a * b`
        mul => BinaryOp::Mul;
        /// `a / b`
        div => BinaryOp::Div;
        /// `a ^ b`
        pow => BinaryOp::Pow;
        /// elementwise maximum
        max => BinaryOp::Max;
        /// elementwise minimum
        min => BinaryOp::Min;
        /// logical and (bool)
        and => BinaryOp::And;
        /// logical or (bool)
        or => BinaryOp::Or;
        /// `a == b` (bool out)
        eq => BinaryOp::Eq;
        /// `a < b` (bool out)
        lt => BinaryOp::Lt;
        /// `a <= b` (bool out)
        le => BinaryOp::Le;
        /// `a > b` (bool out)
        gt => BinaryOp::Gt;
        /// `a >= b` (bool out)
        ge => BinaryOp::Ge;
    }

    /// Leaky ReLU with slope `alpha` for negative inputs.
    pub fn leaky_relu(&mut self, x: ValueId, alpha: f32) -> Out {
        self.unary(UnaryOp::LeakyRelu { alpha }, x)
    }

    /// ELU with scale `alpha`.
    pub fn elu(&mut self, x: ValueId, alpha: f32) -> Out {
        self.unary(UnaryOp::Elu { alpha }, x)
    }

    /// GELU; `tanh_approx` picks the tanh form over the exact erf form.
    pub fn gelu(&mut self, x: ValueId, tanh_approx: bool) -> Out {
        self.unary(UnaryOp::Gelu { tanh_approx }, x)
    }

    /// Clamps to `[min, max]`.
    pub fn clip(&mut self, x: ValueId, min: f32, max: f32) -> Out {
        self.unary(UnaryOp::Clip { min, max }, x)
    }

    /// `cond ? x : y` with broadcasting.
    pub fn where_(&mut self, cond: ValueId, x: ValueId, y: ValueId) -> Out {
        self.op(Op::Where, &[cond, x, y])
    }

    /// Converts to another dtype.
    pub fn cast(&mut self, x: ValueId, to: DType) -> Out {
        self.op(Op::Cast { to }, &[x])
    }

    /// Returns its input (gives a value a second name).
    pub fn identity(&mut self, x: ValueId) -> Out {
        self.op(Op::Identity, &[x])
    }

    /// Batched matrix product (NumPy `matmul`).
    pub fn matmul(&mut self, a: ValueId, b: ValueId) -> Out {
        self.op(Op::MatMul, &[a, b])
    }

    /// `alpha * op(a) @ op(b) + beta * c`.
    pub fn gemm(&mut self, a: ValueId, b: ValueId, c: Option<ValueId>, gemm: GemmAttrs) -> Out {
        let op = Op::Gemm {
            alpha: gemm.alpha,
            beta: gemm.beta,
            trans_a: gemm.trans_a,
            trans_b: gemm.trans_b,
        };
        let inputs: Vec<ValueId> = [a, b].into_iter().chain(c).collect();
        self.op(op, &inputs)
    }

    /// A reduction over `axes` (empty = all).
    pub fn reduce(&mut self, op: ReduceOp, x: ValueId, axes: &[i64], keepdims: bool) -> Out {
        self.op(
            Op::Reduce {
                op,
                axes: axes.to_vec(),
                keepdims,
            },
            &[x],
        )
    }

    /// Softmax along `axis`.
    pub fn softmax(&mut self, x: ValueId, axis: i64) -> Out {
        self.op(Op::Softmax { axis }, &[x])
    }

    /// Log-softmax along `axis`.
    pub fn log_softmax(&mut self, x: ValueId, axis: i64) -> Out {
        self.op(Op::LogSoftmax { axis }, &[x])
    }

    /// Layer normalization over `axis..`, with `scale` and optional `bias`.
    pub fn layer_norm(
        &mut self,
        x: ValueId,
        scale: ValueId,
        bias: Option<ValueId>,
        axis: i64,
        epsilon: f32,
    ) -> Out {
        let inputs: Vec<ValueId> = [x, scale].into_iter().chain(bias).collect();
        self.op(Op::LayerNorm { axis, epsilon }, &inputs)
    }

    /// Inference batch norm (channel axis 1).
    pub fn batch_norm(&mut self, x: ValueId, params: BatchNormParams, epsilon: f32) -> Out {
        self.op(
            Op::BatchNorm {
                epsilon,
                activation: None,
            },
            &[x, params.scale, params.bias, params.mean, params.var],
        )
    }

    /// An i64 vector constant with an automatic name (shape operands and the like).
    pub fn const_i64(&mut self, values: &[i64]) -> Out {
        let value = Tensor::from_vec(values.to_vec(), &[values.len()])?;
        self.op(Op::Constant { value }, &[])
    }

    /// An f32 scalar constant with an automatic name.
    pub fn const_f32(&mut self, value: f32) -> Out {
        self.op(
            Op::Constant {
                value: Tensor::scalar(value),
            },
            &[],
        )
    }

    /// Reshape to literal dims (`0` copies the input dim, `-1` is inferred).
    pub fn reshape(&mut self, x: ValueId, dims: &[i64]) -> Out {
        let shape = self.const_i64(dims)?;
        self.reshape_to(x, shape)
    }

    /// Reshape to the contents of an i64 shape value.
    pub fn reshape_to(&mut self, x: ValueId, shape: ValueId) -> Out {
        self.op(Op::Reshape { allowzero: false }, &[x, shape])
    }

    /// Permutes dims: output dim `i` is input dim `perm[i]`.
    pub fn transpose(&mut self, x: ValueId, perm: &[usize]) -> Out {
        self.op(
            Op::Transpose {
                perm: perm.to_vec(),
            },
            &[x],
        )
    }

    /// Removes size-1 dims at `axes` (empty: all known size-1 dims).
    pub fn squeeze(&mut self, x: ValueId, axes: &[i64]) -> Out {
        self.op(
            Op::Squeeze {
                axes: axes.to_vec(),
            },
            &[x],
        )
    }

    /// Inserts size-1 dims at output positions `axes`.
    pub fn unsqueeze(&mut self, x: ValueId, axes: &[i64]) -> Out {
        self.op(
            Op::Unsqueeze {
                axes: axes.to_vec(),
            },
            &[x],
        )
    }

    /// Flattens to 2-D around `axis`.
    pub fn flatten(&mut self, x: ValueId, axis: i64) -> Out {
        self.op(Op::Flatten { axis }, &[x])
    }

    /// Concatenates along `axis`.
    pub fn concat(&mut self, xs: &[ValueId], axis: i64) -> Out {
        self.op(Op::Concat { axis }, xs)
    }

    /// Splits along `axis` into pieces of `sizes`; one output per piece.
    pub fn split(&mut self, x: ValueId, axis: i64, sizes: &[i64]) -> Result<Vec<ValueId>, IrError> {
        self.node(
            Op::Split {
                axis,
                sizes: sizes.to_vec(),
            },
            &[x],
        )
    }

    /// Strided slice; `axes` / `steps` may be empty (all leading axes / step 1).
    pub fn slice(
        &mut self,
        x: ValueId,
        starts: &[i64],
        ends: &[i64],
        axes: &[i64],
        steps: &[i64],
    ) -> Out {
        let op = Op::Slice {
            starts: starts.to_vec(),
            ends: ends.to_vec(),
            axes: axes.to_vec(),
            steps: steps.to_vec(),
        };
        self.op(op, &[x])
    }

    /// Slice with bounds computed at run time: `bounds` are `starts`, `ends`
    /// and optionally `axes`, `steps` (i64 or i32 vectors).
    pub fn dyn_slice(&mut self, x: ValueId, bounds: &[ValueId]) -> Out {
        let inputs: Vec<ValueId> = std::iter::once(x).chain(bounds.iter().copied()).collect();
        self.op(Op::DynSlice, &inputs)
    }

    /// Gathers `indices` along `axis` of `data`.
    pub fn gather(&mut self, data: ValueId, indices: ValueId, axis: i64) -> Out {
        self.op(Op::Gather { axis }, &[data, indices])
    }

    /// Broadcasts to the contents of an i64 shape value.
    pub fn expand(&mut self, x: ValueId, shape: ValueId) -> Out {
        self.op(Op::Expand, &[x, shape])
    }

    /// Repeats along each axis by the contents of an i64 value.
    pub fn tile(&mut self, x: ValueId, repeats: ValueId) -> Out {
        self.op(Op::Tile, &[x, repeats])
    }

    /// Constant padding (`pads`: all begins, then all ends).
    pub fn pad(&mut self, x: ValueId, pads: &[i64], value: f32) -> Out {
        self.op(
            Op::Pad {
                pads: pads.to_vec(),
                value,
            },
            &[x],
        )
    }

    /// The full shape as an i64 vector.
    pub fn shape(&mut self, x: ValueId) -> Out {
        self.op(
            Op::Shape {
                start: 0,
                end: None,
            },
            &[x],
        )
    }

    /// Dims `start..end` of the shape (`None` = to the end).
    pub fn shape_range(&mut self, x: ValueId, start: i64, end: Option<i64>) -> Out {
        self.op(Op::Shape { start, end }, &[x])
    }

    /// Element count as an i64 scalar.
    pub fn size(&mut self, x: ValueId) -> Out {
        self.op(Op::Size, &[x])
    }

    /// A tensor shaped by an i64 value, filled with a one-element `value`.
    pub fn constant_of_shape(&mut self, shape: ValueId, value: Tensor) -> Out {
        self.op(Op::ConstantOfShape { value }, &[shape])
    }

    /// `start, start+delta, ...` below `limit` (scalars of one dtype).
    pub fn range(&mut self, start: ValueId, limit: ValueId, delta: ValueId) -> Out {
        self.op(Op::Range, &[start, limit, delta])
    }

    /// 2-D convolution; the kernel size is read from `w`'s (known) spatial dims.
    pub fn conv2d(&mut self, x: ValueId, w: ValueId, b: Option<ValueId>, conv: ConvAttrs) -> Out {
        let window = self.conv_window(w, &conv, "conv2d")?;
        let inputs: Vec<ValueId> = [x, w].into_iter().chain(b).collect();
        self.op(
            Op::Conv2d {
                window,
                groups: conv.groups,
                activation: None,
            },
            &inputs,
        )
    }

    /// 2-D transposed convolution (`w: [C_in, C_out/groups, kH, kW]`, kernel
    /// size read from its known spatial dims); `output_padding` extra rows and
    /// columns at the bottom and right.
    pub fn conv_transpose2d(
        &mut self,
        x: ValueId,
        w: ValueId,
        b: Option<ValueId>,
        conv: ConvAttrs,
        output_padding: [usize; 2],
    ) -> Out {
        let window = self.conv_window(w, &conv, "conv_transpose2d")?;
        let inputs: Vec<ValueId> = [x, w].into_iter().chain(b).collect();
        self.op(
            Op::ConvTranspose2d {
                window,
                groups: conv.groups,
                output_padding,
            },
            &inputs,
        )
    }

    /// A conv's window: the attributes and the kernel size of the weight `w`.
    fn conv_window(
        &self,
        w: ValueId,
        conv: &ConvAttrs,
        op: &'static str,
    ) -> Result<Window2d, IrError> {
        let dims = self
            .value_type(w)
            .shape
            .as_known()
            .filter(|d| d.len() == 4)
            .ok_or_else(|| IrError::Shape {
                node: String::new(),
                op,
                message: format!(
                    "weight has shape {}, expected 4 known dims",
                    self.value_type(w).shape
                ),
            })?;
        Ok(Window2d {
            kernel: [dims[2], dims[3]],
            strides: conv.strides,
            pads: conv.pads,
            dilations: conv.dilations,
        })
    }

    /// 2-D max pooling.
    pub fn max_pool2d(&mut self, x: ValueId, window: Window2d, ceil_mode: bool) -> Out {
        self.op(Op::MaxPool2d { window, ceil_mode }, &[x])
    }

    /// 2-D average pooling.
    pub fn avg_pool2d(
        &mut self,
        x: ValueId,
        window: Window2d,
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> Out {
        self.op(
            Op::AvgPool2d {
                window,
                ceil_mode,
                count_include_pad,
            },
            &[x],
        )
    }

    /// Mean over the spatial dims, kept as size 1.
    pub fn global_avg_pool(&mut self, x: ValueId) -> Out {
        self.op(Op::GlobalAvgPool, &[x])
    }

    /// Runs `then_branch` or `else_branch` on the captured values.
    pub fn if_(
        &mut self,
        cond: ValueId,
        then_branch: Graph,
        else_branch: Graph,
        captured: &[ValueId],
    ) -> Result<Vec<ValueId>, IrError> {
        let inputs: Vec<ValueId> = std::iter::once(cond)
            .chain(captured.iter().copied())
            .collect();
        self.node(
            Op::If {
                then_branch: Box::new(then_branch),
                else_branch: Box::new(else_branch),
            },
            &inputs,
        )
    }

    /// A loop (see [`Op::Loop`] for the body's signature); returns the final
    /// carried values, then the stacked scan outputs.
    pub fn loop_(
        &mut self,
        max_trip: ValueId,
        cond: ValueId,
        carried: &[ValueId],
        captured: &[ValueId],
        body: Graph,
    ) -> Result<Vec<ValueId>, IrError> {
        let inputs: Vec<ValueId> = [max_trip, cond]
            .into_iter()
            .chain(carried.iter().copied())
            .chain(captured.iter().copied())
            .collect();
        self.node(
            Op::Loop {
                body: Box::new(body),
                n_carried: carried.len(),
            },
            &inputs,
        )
    }
}

/// Attributes of [`GraphBuilder::gemm`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmAttrs {
    /// scale of the product
    pub alpha: f32,
    /// scale of `c`
    pub beta: f32,
    /// transpose `a` first
    pub trans_a: bool,
    /// transpose `b` first
    pub trans_b: bool,
}

impl Default for GemmAttrs {
    fn default() -> GemmAttrs {
        GemmAttrs {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
        }
    }
}

/// Attributes of [`GraphBuilder::conv2d`] (the kernel comes from the weight).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvAttrs {
    /// strides along H and W
    pub strides: [usize; 2],
    /// padding: top, left, bottom, right
    pub pads: [usize; 4],
    /// dilations along H and W
    pub dilations: [usize; 2],
    /// channel groups
    pub groups: usize,
}

impl Default for ConvAttrs {
    fn default() -> ConvAttrs {
        ConvAttrs {
            strides: [1, 1],
            pads: [0; 4],
            dilations: [1, 1],
            groups: 1,
        }
    }
}

/// The per-channel inputs of [`GraphBuilder::batch_norm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchNormParams {
    /// `[C]` scale
    pub scale: ValueId,
    /// `[C]` bias
    pub bias: ValueId,
    /// `[C]` running mean
    pub mean: ValueId,
    /// `[C]` running variance
    pub var: ValueId,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape;

    #[test]
    fn mlp_block_builds_with_symbolic_batch() {
        let mut b = GraphBuilder::new("mlp");
        let x = b.input("x", DType::F32, shape!["batch", 8]);
        let w = b.constant("w", Tensor::zeros(DType::F32, &[8, 4]).unwrap());
        let h = b.matmul(x, w).unwrap();
        let y = b.relu(h).unwrap();
        let r = b.reshape(y, &[0, 2, 2]).unwrap();
        let s = b.softmax(r, -1).unwrap();
        assert_eq!(b.value_type(s).to_string(), "f32[batch, 2, 2]");
        let parts = b.split(s, 1, &[1, 1]).unwrap();
        assert_eq!(parts.len(), 2);
        let t = b.transpose(parts[0], &[2, 1, 0]).unwrap();
        assert_eq!(b.value_type(t).to_string(), "f32[2, 1, batch]");
        b.output("y", t).unwrap();
        let err = b.matmul(x, x).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node 'matmul_1' (matmul): inner dims differ: expected 8 == batch, got a [batch, 8] and b [batch, 8]"
        );
    }

    #[test]
    fn conv_takes_kernel_from_weight() {
        let mut b = GraphBuilder::new("cnn");
        let x = b.input("x", DType::F32, shape!["n", 3, 16, 16]);
        let w = b.constant("w", Tensor::zeros(DType::F32, &[4, 3, 3, 3]).unwrap());
        let c = b
            .conv2d(
                x,
                w,
                None,
                ConvAttrs {
                    pads: [1; 4],
                    ..ConvAttrs::default()
                },
            )
            .unwrap();
        assert_eq!(b.value_type(c).to_string(), "f32[n, 4, 16, 16]");
        let win = Window2d {
            kernel: [2, 2],
            strides: [2, 2],
            pads: [0; 4],
            dilations: [1, 1],
        };
        let p = b.max_pool2d(c, win, false).unwrap();
        assert_eq!(b.value_type(p).to_string(), "f32[n, 4, 8, 8]");
    }

    #[test]
    fn fresh_symbols_avoid_input_symbols() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", DType::F32, shape!["_d0", 4]);
        let shape = b.input("s", DType::I64, shape![2]);
        let r = b.reshape_to(x, shape).unwrap();
        assert_eq!(b.value_type(r).to_string(), "f32[_d1, _d2]");
    }
}
