//! The operator set (v1).
//!
//! Each op documents its inputs, its attributes and its numerical tolerance
//! (what a kernel or a JIT must match against a float64 reference).
//!
//! **Invariant:** [`Op::name`] is the lowercase opcode used in `.sjir` and in the
//! bytecode listing, and is unique per variant (unary/binary/reduce ops use the
//! inner op's name).

use crate::dtype::DType;
use crate::graph::Graph;
use crate::tensor::Tensor;

/// Elementwise unary ops. Tolerance: exact for neg/abs/relu/not/clip;
/// ≤ 4 ulp-ish relative (1e-6) for the transcendental ones.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `|x|`
    Abs,
    /// `e^x`
    Exp,
    /// natural log
    Log,
    /// square root
    Sqrt,
    /// `1/x`
    Reciprocal,
    /// hyperbolic tangent
    Tanh,
    /// `1/(1+e^-x)`
    Sigmoid,
    /// SiLU (swish), `x · sigmoid(x)`: bit for bit `sigmoid` then `mul`
    Silu,
    /// `max(x, 0)`
    Relu,
    /// `x if x >= 0 else alpha*x`
    LeakyRelu {
        /// slope for negative inputs
        alpha: f32,
    },
    /// `x if x >= 0 else alpha*(e^x - 1)`
    Elu {
        /// scale for negative inputs
        alpha: f32,
    },
    /// Gaussian error linear unit.
    Gelu {
        /// `true`: the tanh approximation; `false`: the exact erf form.
        tanh_approx: bool,
    },
    /// error function
    Erf,
    /// `min(max(x, min), max)`
    Clip {
        /// lower bound
        min: f32,
        /// upper bound
        max: f32,
    },
    /// logical not (bool)
    Not,
    /// a parameterless float function, see [`MathFn`]
    Math(MathFn),
}

/// Float functions of one argument with no parameters, computed as Rust's
/// `f32` method of the same name (`round` rounds half to even, as ONNX).
/// Tolerance: exact for the rounding ones; 1e-6 relative (and 1e-7 absolute
/// near zero) for the trigonometric and hyperbolic ones. NaN gives NaN; an
/// argument outside the domain (`asin(2)`, `acosh(0)`) gives NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum MathFn {
    /// largest integer `≤ x`
    Floor,
    /// smallest integer `≥ x`
    Ceil,
    /// nearest integer, halves to even
    Round,
    /// sine
    Sin,
    /// cosine
    Cos,
    /// tangent
    Tan,
    /// arcsine
    Asin,
    /// arccosine
    Acos,
    /// arctangent
    Atan,
    /// hyperbolic sine
    Sinh,
    /// hyperbolic cosine
    Cosh,
    /// inverse hyperbolic sine
    Asinh,
    /// inverse hyperbolic cosine
    Acosh,
    /// inverse hyperbolic tangent
    Atanh,
}

impl MathFn {
    /// All of them.
    pub const ALL: [MathFn; 14] = [
        MathFn::Floor,
        MathFn::Ceil,
        MathFn::Round,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tan,
        MathFn::Asin,
        MathFn::Acos,
        MathFn::Atan,
        MathFn::Sinh,
        MathFn::Cosh,
        MathFn::Asinh,
        MathFn::Acosh,
        MathFn::Atanh,
    ];

    /// The opcode name.
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::Round => "round",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Asin => "asin",
            MathFn::Acos => "acos",
            MathFn::Atan => "atan",
            MathFn::Sinh => "sinh",
            MathFn::Cosh => "cosh",
            MathFn::Asinh => "asinh",
            MathFn::Acosh => "acosh",
            MathFn::Atanh => "atanh",
        }
    }

    /// The function on one value.
    pub fn apply(self, x: f32) -> f32 {
        match self {
            MathFn::Floor => x.floor(),
            MathFn::Ceil => x.ceil(),
            MathFn::Round => x.round_ties_even(),
            MathFn::Sin => x.sin(),
            MathFn::Cos => x.cos(),
            MathFn::Tan => x.tan(),
            MathFn::Asin => x.asin(),
            MathFn::Acos => x.acos(),
            MathFn::Atan => x.atan(),
            MathFn::Sinh => x.sinh(),
            MathFn::Cosh => x.cosh(),
            MathFn::Asinh => x.asinh(),
            MathFn::Acosh => x.acosh(),
            MathFn::Atanh => x.atanh(),
        }
    }
}

impl UnaryOp {
    /// The opcode name.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Silu => "silu",
            UnaryOp::Relu => "relu",
            UnaryOp::LeakyRelu { .. } => "leaky_relu",
            UnaryOp::Elu { .. } => "elu",
            UnaryOp::Gelu { .. } => "gelu",
            UnaryOp::Erf => "erf",
            UnaryOp::Clip { .. } => "clip",
            UnaryOp::Not => "not",
            UnaryOp::Math(f) => f.name(),
        }
    }
}

/// Elementwise binary ops with NumPy broadcasting. Arithmetic ops keep the input
/// dtype; comparisons output bool; `and`/`or` take and give bool.
/// Tolerance: exact (IEEE) except `pow` (1e-6 relative).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (integer division truncates toward zero; an integer divisor of 0 is a run-time error)
    Div,
    /// `a ^ b`
    Pow,
    /// elementwise maximum
    Max,
    /// elementwise minimum
    Min,
    /// logical and
    And,
    /// logical or
    Or,
    /// `a == b`
    Eq,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// bitwise and (integers)
    BitAnd,
    /// bitwise or (integers)
    BitOr,
    /// bitwise exclusive or (integers)
    BitXor,
}

impl BinaryOp {
    /// All binary ops.
    pub const ALL: [BinaryOp; 17] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Eq,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
    ];

    /// The opcode name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Eq => "eq",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
            BinaryOp::BitAnd => "bit_and",
            BinaryOp::BitOr => "bit_or",
            BinaryOp::BitXor => "bit_xor",
        }
    }

    /// True for comparisons (output bool).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }

    /// True for the bitwise ops (integers in, the same integers out).
    pub fn is_bitwise(self) -> bool {
        matches!(self, BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor)
    }

    /// True for logical ops (bool in, bool out).
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or)
    }
}

/// Reductions over axes. Tolerance: sum/mean 1e-5 relative (summation order),
/// max/min exact, prod 1e-5 relative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ReduceOp {
    /// sum
    Sum,
    /// arithmetic mean
    Mean,
    /// maximum
    Max,
    /// minimum
    Min,
    /// product
    Prod,
}

impl ReduceOp {
    /// The opcode name (`reduce_sum`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "reduce_sum",
            ReduceOp::Mean => "reduce_mean",
            ReduceOp::Max => "reduce_max",
            ReduceOp::Min => "reduce_min",
            ReduceOp::Prod => "reduce_prod",
        }
    }

    /// The opcode name of its run-time-axes form (`dyn_reduce_sum`, ...).
    pub fn dyn_name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "dyn_reduce_sum",
            ReduceOp::Mean => "dyn_reduce_mean",
            ReduceOp::Max => "dyn_reduce_max",
            ReduceOp::Min => "dyn_reduce_min",
            ReduceOp::Prod => "dyn_reduce_prod",
        }
    }
}

/// How a scatter combines an update with the value already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ScatterReduction {
    /// the update replaces the value (for repeated indices, the last one wins)
    None,
    /// `old + update`
    Add,
    /// `old * update`
    Mul,
    /// `max(old, update)` (NaN propagates)
    Max,
    /// `min(old, update)` (NaN propagates)
    Min,
}

impl ScatterReduction {
    /// All of them.
    pub const ALL: [ScatterReduction; 5] = [
        ScatterReduction::None,
        ScatterReduction::Add,
        ScatterReduction::Mul,
        ScatterReduction::Max,
        ScatterReduction::Min,
    ];

    /// The name (as ONNX spells the `reduction` attribute).
    pub fn name(self) -> &'static str {
        match self {
            ScatterReduction::None => "none",
            ScatterReduction::Add => "add",
            ScatterReduction::Mul => "mul",
            ScatterReduction::Max => "max",
            ScatterReduction::Min => "min",
        }
    }
}

/// The activation a convolution or batch norm applies to its output, fused into
/// it by [`crate::fuse`]: `conv2d {activation = a}` is exactly `a(conv2d(..))`, the
/// unary op of the same name applied to each output element (bit-identical).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Activation {
    /// [`UnaryOp::Relu`]
    Relu,
    /// [`UnaryOp::LeakyRelu`]
    LeakyRelu {
        /// slope for negative inputs
        alpha: f32,
    },
    /// [`UnaryOp::Clip`]
    Clip {
        /// lower bound
        min: f32,
        /// upper bound
        max: f32,
    },
}

impl Activation {
    /// The unary op this activation applies.
    pub fn as_unary(self) -> UnaryOp {
        match self {
            Activation::Relu => UnaryOp::Relu,
            Activation::LeakyRelu { alpha } => UnaryOp::LeakyRelu { alpha },
            Activation::Clip { min, max } => UnaryOp::Clip { min, max },
        }
    }

    /// The activation applying `op`, when a convolution can fuse it.
    pub fn from_unary(op: UnaryOp) -> Option<Activation> {
        match op {
            UnaryOp::Relu => Some(Activation::Relu),
            UnaryOp::LeakyRelu { alpha } => Some(Activation::LeakyRelu { alpha }),
            UnaryOp::Clip { min, max } => Some(Activation::Clip { min, max }),
            _ => None,
        }
    }
}

/// 2-D window parameters shared by conv and pooling (NCHW layout).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Window2d {
    /// kernel height and width (for conv: taken from the weight shape; kept here for pools)
    pub kernel: [usize; 2],
    /// strides along H and W
    pub strides: [usize; 2],
    /// padding: top, left, bottom, right
    pub pads: [usize; 4],
    /// dilations along H and W
    pub dilations: [usize; 2],
}

impl Window2d {
    /// A pooling window's pads must be smaller than its kernel on each side (as
    /// onnxruntime requires): a pad as wide as the kernel makes windows that
    /// cover only padding (an average of no elements).
    pub fn check_pool_pads(&self) -> Result<(), String> {
        if (0..4).any(|i| self.pads[i] >= self.kernel[i % 2]) {
            return Err(format!(
                "pads {:?} must be smaller than the kernel {:?} on each side",
                self.pads, self.kernel
            ));
        }
        Ok(())
    }
}

/// One operation of the graph.
///
/// Inputs are listed per variant; optional trailing inputs may be omitted.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// Elementwise unary op. Inputs: `x`.
    Unary(UnaryOp),
    /// Elementwise binary op with broadcasting. Inputs: `a`, `b`.
    Binary(BinaryOp),
    /// `cond ? x : y` with broadcasting. Inputs: `cond` (bool), `x`, `y`.
    Where,
    /// Converts dtype. Inputs: `x`. Float→int truncates toward zero.
    Cast {
        /// target dtype
        to: DType,
    },
    /// Reinterprets each element's bits as `to`, of the same byte size (not
    /// bool or a sub-byte type as the target unless the source is the same
    /// dtype). Inputs: `x`. Exact.
    BitCast {
        /// target dtype
        to: DType,
    },
    /// Batched matrix product with broadcast batch dims (NumPy `matmul`); rank-1
    /// operands are promoted and the added dim removed. Inputs: `a`, `b`.
    /// Tolerance: 1e-5 relative to `sum |a||b|`.
    MatMul,
    /// [`Op::MatMul`] then `+ bias` along the last axis: `a @ b + bias` with `b` of
    /// rank >= 2 and `bias` a `[n]` vector (`n` = the output's last dim), as a
    /// `matmul` and an `add` would compute it (the same rounding: the bias is
    /// added to the finished product). Made by `fuse` from a `matmul` whose only
    /// use is an `add` of a constant vector. Inputs: `a`, `b`, `bias`.
    /// Tolerance: 1e-5 relative to `sum |a||b| + |bias|`.
    MatMulBias,
    /// `alpha * op(a) @ op(b) + beta * c` on rank-2 `a`, `b`; `c` broadcasts.
    /// Inputs: `a`, `b`, optional `c`.
    Gemm {
        /// scale of the product
        alpha: f32,
        /// scale of `c`
        beta: f32,
        /// transpose `a` first
        trans_a: bool,
        /// transpose `b` first
        trans_b: bool,
    },
    /// Reduction over `axes` (negative counts from the end; empty = all axes).
    /// Inputs: `x`.
    Reduce {
        /// which reduction
        op: ReduceOp,
        /// axes to reduce
        axes: Vec<i64>,
        /// keep reduced axes as size 1
        keepdims: bool,
    },
    /// [`Op::Reduce`] over axes given at run time. Inputs: `x`, `axes` (an i64
    /// vector; negative counts from the end). Empty `axes` reduces every axis,
    /// or none (the output is `x`) with `noop_with_empty_axes`.
    DynReduce {
        /// which reduction
        op: ReduceOp,
        /// keep reduced axes as size 1
        keepdims: bool,
        /// empty `axes` means no reduction instead of all axes
        noop_with_empty_axes: bool,
    },
    /// Softmax along one axis. Inputs: `x`. Tolerance 1e-6 absolute.
    Softmax {
        /// the axis (negative counts from the end)
        axis: i64,
    },
    /// Log-softmax along one axis. Inputs: `x`. Tolerance 1e-5 absolute.
    LogSoftmax {
        /// the axis (negative counts from the end)
        axis: i64,
    },
    /// Layer normalization over the dims from `axis` to the end.
    /// Inputs: `x`, `scale`, optional `bias`. Tolerance 1e-5 relative.
    LayerNorm {
        /// first normalized axis
        axis: i64,
        /// added to the variance
        epsilon: f32,
    },
    /// Inference batch norm over channel axis 1.
    /// Inputs: `x`, `scale`, `bias`, `mean`, `var`.
    BatchNorm {
        /// added to the variance
        epsilon: f32,
        /// applied to every output element (fused by [`crate::fuse`]; exact on
        /// the normalized value, as for [`Op::Conv2d`])
        activation: Option<Activation>,
    },
    /// Reshape to the contents of an i64 shape tensor; `0` copies the input dim
    /// (unless `allowzero`), `-1` is inferred. Inputs: `data`, `shape`.
    Reshape {
        /// a `0` in the shape means a zero-size dim
        allowzero: bool,
    },
    /// Permutes dims. Inputs: `x`.
    Transpose {
        /// output dim `i` is input dim `perm[i]`
        perm: Vec<usize>,
    },
    /// Removes size-1 dims (`axes` empty: all of them). Inputs: `x`.
    Squeeze {
        /// axes to remove
        axes: Vec<i64>,
    },
    /// Inserts size-1 dims at `axes` (of the output). Inputs: `x`.
    Unsqueeze {
        /// output positions of the new dims
        axes: Vec<i64>,
    },
    /// Flattens to 2-D: dims before `axis` and from `axis`. Inputs: `x`.
    Flatten {
        /// split point
        axis: i64,
    },
    /// Concatenates along an axis. Inputs: one or more tensors.
    Concat {
        /// the axis
        axis: i64,
    },
    /// Splits along an axis into `sizes.len()` outputs. Inputs: `x`.
    Split {
        /// the axis
        axis: i64,
        /// output sizes along the axis (sum = input dim)
        sizes: Vec<i64>,
    },
    /// Strided slice (ONNX semantics: negative indices count from the end,
    /// out-of-range clamped, negative steps go backwards). Inputs: `x`.
    Slice {
        /// start index per listed axis
        starts: Vec<i64>,
        /// end index (exclusive) per listed axis
        ends: Vec<i64>,
        /// the axes (same length as starts)
        axes: Vec<i64>,
        /// steps (non-zero)
        steps: Vec<i64>,
    },
    /// [`Op::Slice`] whose bounds are computed at run time (ONNX `Slice` with
    /// inputs that are not constants, such as ends from `Shape`). Inputs: `x`,
    /// `starts`, `ends` (i64 or i32, one element per sliced axis), optional
    /// `axes` (default `0..n`), optional `steps` (default 1).
    DynSlice,
    /// Gathers along an axis with i64/i32 indices (negative wrap).
    /// Inputs: `data`, `indices`.
    Gather {
        /// the axis of `data`
        axis: i64,
    },
    /// Gathers element by element along an axis: output element `p` is the
    /// element of `data` at `p` with coordinate `axis` replaced by
    /// `indices[p]` (negative wraps once). The output has the shape of
    /// `indices`, whose other dims may be smaller than `data`'s.
    /// Inputs: `data`, `indices` (i64/i32, same rank). Exact.
    GatherElements {
        /// the indexed axis
        axis: i64,
    },
    /// A copy of `data` where, for every position `p` of `indices`, the
    /// element GatherElements would read for `p` is combined with
    /// `updates[p]`. Inputs: `data`, `indices` (i64/i32), `updates` (the shape
    /// of `indices`, the dtype of `data`). Exact (in the order of `p`).
    ScatterElements {
        /// the indexed axis
        axis: i64,
        /// how updates combine with existing values
        reduction: ScatterReduction,
    },
    /// Gathers slices by index tuples: the last dim `k` of `indices` indexes
    /// dims `batch_dims..batch_dims + k` of `data` within each batch (the
    /// first `batch_dims` dims, shared by both). Output shape:
    /// `indices.shape[..-1] ++ data.shape[batch_dims + k..]`.
    /// Inputs: `data`, `indices` (i64, negative wraps once). Exact.
    GatherNd {
        /// leading dims shared by `data` and `indices`
        batch_dims: usize,
    },
    /// A copy of `data` where each slice GatherNd (no batch dims) would read
    /// for the index tuple `t` is combined with `updates[t]`. Inputs: `data`,
    /// `indices` (i64, `[..., k]`), `updates`
    /// (`indices.shape[..-1] ++ data.shape[k..]`). Exact (in tuple order).
    ScatterNd {
        /// how updates combine with existing values
        reduction: ScatterReduction,
    },
    /// Broadcasts to a shape (bidirectional, as ONNX Expand). Inputs: `x`, `shape` (i64).
    Expand,
    /// Repeats along each axis. Inputs: `x`, `repeats` (i64, one per dim).
    Tile,
    /// Constant padding. Inputs: `x`.
    Pad {
        /// begins for every axis, then ends for every axis (ONNX order); may be negative
        pads: Vec<i64>,
        /// fill value
        value: f32,
    },
    /// The input's shape as i64, dims `start..end`. Inputs: `x`.
    Shape {
        /// first dim (negative counts from the end)
        start: i64,
        /// one past the last dim; `None` = rank
        end: Option<i64>,
    },
    /// Element count as an i64 scalar. Inputs: `x`.
    Size,
    /// The `k` largest (or smallest) elements along `axis` and their indices.
    /// Inputs: `x`, `k` (an i64 scalar or one-element vector read at run
    /// time). Outputs: the values, then their i64 indices; equal values keep
    /// the smaller index first. Exact.
    TopK {
        /// the axis (negative counts from the end)
        axis: i64,
        /// the largest elements (else the smallest)
        largest: bool,
    },
    /// Running sums (or products) along one axis. Inputs: `x`, `axis` (an
    /// i32/i64 scalar or one-element vector read at run time). `exclusive`:
    /// element `i` combines elements before `i` only; `reverse`: runs from the
    /// end. Floats accumulate in their own type, in order; integers wrap.
    Cumulative {
        /// products instead of sums
        product: bool,
        /// leave out the element itself
        exclusive: bool,
        /// run from the last element to the first
        reverse: bool,
    },
    /// A constant tensor (weights are constants). No inputs.
    Constant {
        /// the value
        value: Tensor,
    },
    /// A tensor of the given shape filled with a scalar. Inputs: `shape` (i64).
    ConstantOfShape {
        /// the scalar fill value (rank 0 or one element)
        value: Tensor,
    },
    /// `start, start+delta, ...` up to `limit` (exclusive). Inputs: scalar
    /// `start`, `limit`, `delta` of one dtype.
    Range,
    /// 2-D convolution, NCHW. Inputs: `x`, `w` (`[C_out, C_in/groups, kH, kW]`), optional `b`.
    /// Tolerance: 1e-5 relative; the activation, if any, is exact on that result.
    Conv2d {
        /// strides, pads and dilations (`kernel` is `w`'s spatial shape)
        window: Window2d,
        /// channel groups
        groups: usize,
        /// applied to every output element (fused by [`crate::fuse`])
        activation: Option<Activation>,
    },
    /// 2-D transposed convolution (the gradient of `Conv2d` with respect to its
    /// input), NCHW. Inputs: `x`, `w` (`[C_in, C_out/groups, kH, kW]`), optional
    /// `b` (`[C_out]`). Output size per spatial dim:
    /// `stride·(in − 1) + output_padding + dil·(k − 1) + 1 − pad_begin − pad_end`.
    /// Tolerance: 1e-5 relative.
    ConvTranspose2d {
        /// strides, pads and dilations (`kernel` is `w`'s spatial shape)
        window: Window2d,
        /// channel groups
        groups: usize,
        /// extra rows and columns at the bottom and right of the output
        /// (each smaller than its stride or dilation)
        output_padding: [usize; 2],
    },
    /// 2-D max pooling, NCHW; padding never wins. Inputs: `x`.
    MaxPool2d {
        /// window geometry
        window: Window2d,
        /// round output size up instead of down
        ceil_mode: bool,
    },
    /// 2-D average pooling, NCHW. Inputs: `x`.
    AvgPool2d {
        /// window geometry
        window: Window2d,
        /// round output size up instead of down
        ceil_mode: bool,
        /// count padded cells in the divisor
        count_include_pad: bool,
    },
    /// Mean over H and W, keeping them as size 1. Inputs: `x` (NCHW).
    GlobalAvgPool,
    /// Returns its input. Inputs: `x`.
    Identity,
    /// Runs one of two sub-graphs. Inputs: `cond` (bool, one element), then the
    /// captured values, which both branches take as their inputs in order.
    /// Outputs: the branch's outputs (both branches agree on dtype and rank).
    If {
        /// run when `cond` is true
        then_branch: Box<Graph>,
        /// run when `cond` is false
        else_branch: Box<Graph>,
    },
    /// A loop. Inputs: `max_trip` (i64 scalar; empty-shape `-1` = unbounded is not
    /// allowed: use a large count), `cond` (bool), `n_carried` loop-carried values,
    /// then captured values. The body takes `iter` (i64 scalar), `cond`, the carried
    /// values, the captured values; it returns `cond`, the new carried values, then
    /// scan outputs (stacked along a new axis 0). Outputs: final carried values,
    /// then the stacked scan outputs.
    Loop {
        /// the loop body
        body: Box<Graph>,
        /// number of loop-carried values
        n_carried: usize,
    },
}

impl Op {
    /// The lowercase opcode name.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Where => "where",
            Op::Cast { .. } => "cast",
            Op::BitCast { .. } => "bitcast",
            Op::MatMul => "matmul",
            Op::MatMulBias => "matmul_bias",
            Op::Gemm { .. } => "gemm",
            Op::Reduce { op, .. } => op.name(),
            Op::DynReduce { op, .. } => op.dyn_name(),
            Op::Softmax { .. } => "softmax",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::LayerNorm { .. } => "layer_norm",
            Op::BatchNorm { .. } => "batch_norm",
            Op::Reshape { .. } => "reshape",
            Op::Transpose { .. } => "transpose",
            Op::Squeeze { .. } => "squeeze",
            Op::Unsqueeze { .. } => "unsqueeze",
            Op::Flatten { .. } => "flatten",
            Op::Concat { .. } => "concat",
            Op::Split { .. } => "split",
            Op::Slice { .. } => "slice",
            Op::DynSlice => "dyn_slice",
            Op::Gather { .. } => "gather",
            Op::GatherElements { .. } => "gather_elements",
            Op::ScatterElements { .. } => "scatter_elements",
            Op::GatherNd { .. } => "gather_nd",
            Op::ScatterNd { .. } => "scatter_nd",
            Op::Expand => "expand",
            Op::Tile => "tile",
            Op::Pad { .. } => "pad",
            Op::Shape { .. } => "shape",
            Op::Size => "size",
            Op::TopK { .. } => "top_k",
            Op::Cumulative { product: false, .. } => "cum_sum",
            Op::Cumulative { product: true, .. } => "cum_prod",
            Op::Constant { .. } => "constant",
            Op::ConstantOfShape { .. } => "constant_of_shape",
            Op::Range => "range",
            Op::Conv2d { .. } => "conv2d",
            Op::ConvTranspose2d { .. } => "conv_transpose2d",
            Op::MaxPool2d { .. } => "max_pool2d",
            Op::AvgPool2d { .. } => "avg_pool2d",
            Op::GlobalAvgPool => "global_avg_pool",
            Op::Identity => "identity",
            Op::If { .. } => "if",
            Op::Loop { .. } => "loop",
        }
    }

    /// True for elementwise ops (unary, binary, where, cast): candidates for fusion.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast { .. }
        )
    }

    /// The sub-graphs of a control-flow op.
    pub fn subgraphs(&self) -> Vec<&Graph> {
        match self {
            Op::If {
                then_branch,
                else_branch,
            } => vec![then_branch, else_branch],
            Op::Loop { body, .. } => vec![body],
            _ => Vec::new(),
        }
    }
}
