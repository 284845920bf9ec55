//! Activations and elementwise predicates composed from IR elementwise ops:
//! HardSigmoid, HardSwish, Softsign, ThresholdedRelu, Celu, Mish, Swish,
//! Sign, IsNaN, IsInf, Xor and CastLike.
//!
//! **Invariant:** each composition computes the ONNX formula of its op, and a
//! NaN input gives a NaN output wherever the formula's arithmetic would (the
//! selects below keep `x` itself on the branch a NaN takes).

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{BinaryOp, Op, UnaryOp, ValueId};

/// `max(0, min(1, alpha·x + beta))`.
fn hard_sigmoid_of(cx: &mut NodeCx, x: ValueId, alpha: f32, beta: f32) -> NodeResult<ValueId> {
    let a = cx.scalar_like(x, alpha as f64);
    let b = cx.scalar_like(x, beta as f64);
    let ax = cx.bin(BinaryOp::Mul, x, a)?;
    let lin = cx.bin(BinaryOp::Add, ax, b)?;
    cx.un(UnaryOp::Clip { min: 0.0, max: 1.0 }, lin)
}

/// `HardSigmoid(alpha = 0.2, beta = 0.5)`.
pub fn hard_sigmoid(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let alpha = cx.float_or("alpha", 0.2)?;
    let beta = cx.float_or("beta", 0.5)?;
    Ok(vec![hard_sigmoid_of(cx, x, alpha, beta)?])
}

/// `HardSwish` = `x · HardSigmoid(x)` with `alpha = 1/6`, `beta = 0.5`.
pub fn hard_swish(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let hs = hard_sigmoid_of(cx, x, 1.0 / 6.0, 0.5)?;
    Ok(vec![cx.bin(BinaryOp::Mul, x, hs)?])
}

/// `Softsign` = `x / (1 + |x|)`.
pub fn softsign(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let abs = cx.un(UnaryOp::Abs, x)?;
    let one = cx.scalar_like(x, 1.0);
    let den = cx.bin(BinaryOp::Add, abs, one)?;
    Ok(vec![cx.bin(BinaryOp::Div, x, den)?])
}

/// `ThresholdedRelu(alpha = 1)` = `x > alpha ? x : 0` (NaN stays NaN).
pub fn thresholded_relu(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let alpha = cx.float_or("alpha", 1.0)?;
    let a = cx.scalar_like(x, alpha as f64);
    let below = cx.bin(BinaryOp::Le, x, a)?;
    let zero = cx.scalar_like(x, 0.0);
    Ok(vec![cx.op(Op::Where, &[below, zero, x])?])
}

/// `Celu(alpha = 1)` = `max(0, x) + min(0, alpha·(exp(x/alpha) − 1))`, which
/// is `alpha · elu₁(x / alpha)`.
pub fn celu(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let alpha = cx.float_or("alpha", 1.0)?;
    if alpha == 0.0 {
        return Err(cx.bad("alpha must not be 0"));
    }
    let a = cx.scalar_like(x, alpha as f64);
    let scaled = cx.bin(BinaryOp::Div, x, a)?;
    let elu = cx.un(UnaryOp::Elu { alpha: 1.0 }, scaled)?;
    Ok(vec![cx.bin(BinaryOp::Mul, elu, a)?])
}

/// `Mish` = `x · tanh(softplus(x))`.
pub fn mish(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let sp = super::elementwise::softplus_of(cx, x)?;
    let t = cx.un(UnaryOp::Tanh, sp)?;
    Ok(vec![cx.bin(BinaryOp::Mul, x, t)?])
}

/// `Swish(alpha = 1)` = `x · sigmoid(alpha·x)`.
pub fn swish(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let alpha = cx.float_or("alpha", 1.0)?;
    Ok(vec![swish_of(cx, x, alpha)?])
}

/// `x · sigmoid(alpha · x)`; `x · 1` is `x` exactly, so at the default alpha it is
/// `x · sigmoid(x)`, which the load-time rewrites fuse into one `silu`.
fn swish_of(cx: &mut NodeCx, x: ValueId, alpha: f32) -> NodeResult<ValueId> {
    let ax = if alpha == 1.0 {
        x
    } else {
        let a = cx.scalar_like(x, f64::from(alpha));
        cx.bin(BinaryOp::Mul, x, a)?
    };
    let s = cx.un(UnaryOp::Sigmoid, ax)?;
    cx.bin(BinaryOp::Mul, x, s)
}

/// `Sign`: 1, -1, or `x` itself for zeros and NaN.
pub fn sign(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let zero = cx.scalar_like(x, 0.0);
    let (one, minus_one) = (cx.scalar_like(x, 1.0), cx.scalar_like(x, -1.0));
    let pos = cx.bin(BinaryOp::Gt, x, zero)?;
    let neg = cx.bin(BinaryOp::Lt, x, zero)?;
    let rest = cx.op(Op::Where, &[neg, minus_one, x])?;
    Ok(vec![cx.op(Op::Where, &[pos, one, rest])?])
}

/// `IsNaN` = `x != x`.
pub fn is_nan(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let same = cx.bin(BinaryOp::Eq, x, x)?;
    Ok(vec![cx.un(UnaryOp::Not, same)?])
}

/// `IsInf(detect_negative = 1, detect_positive = 1)`.
pub fn is_inf(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let negative = cx.int_or("detect_negative", 1)? != 0;
    let positive = cx.int_or("detect_positive", 1)? != 0;
    let test = |cx: &mut NodeCx, v: f64| {
        let c = cx.scalar_like(x, v);
        cx.bin(BinaryOp::Eq, x, c)
    };
    let out = match (negative, positive) {
        (true, true) => {
            let abs = cx.un(UnaryOp::Abs, x)?;
            let inf = cx.scalar_like(x, f64::INFINITY);
            cx.bin(BinaryOp::Eq, abs, inf)?
        }
        (false, true) => test(cx, f64::INFINITY)?,
        (true, false) => test(cx, f64::NEG_INFINITY)?,
        (false, false) => {
            let never = cx.scalar_like(x, f64::NAN);
            cx.bin(BinaryOp::Eq, x, never)?
        }
    };
    Ok(vec![out])
}

/// `Xor` of bools = `a != b`.
pub fn xor(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let same = cx.bin(BinaryOp::Eq, a, b)?;
    Ok(vec![cx.un(UnaryOp::Not, same)?])
}

/// `CastLike(x, like)`: a Cast to `like`'s dtype, with Cast's attributes.
pub fn cast_like(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (x, like) = (cx.input(0)?, cx.input(1)?);
    let to = cx.ty(like).dtype;
    Ok(vec![super::elementwise::cast_to(cx, x, to)?])
}

/// `Shrink(x; bias = 0, lambd = 0.5)`: `x + bias` below `-lambd`, `x - bias`
/// above `lambd`, 0 between.
pub fn shrink(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let x = cx.input(0)?;
    let bias = f64::from(cx.float_or("bias", 0.0)?);
    let lambd = f64::from(cx.float_or("lambd", 0.5)?);
    let (lo, hi) = (cx.scalar_like(x, -lambd), cx.scalar_like(x, lambd));
    let b = cx.scalar_like(x, bias);
    let zero = cx.scalar_like(x, 0.0);
    let below = cx.bin(BinaryOp::Lt, x, lo)?;
    let above = cx.bin(BinaryOp::Gt, x, hi)?;
    let up = cx.bin(BinaryOp::Add, x, b)?;
    let down = cx.bin(BinaryOp::Sub, x, b)?;
    let y = cx.op(Op::Where, &[above, down, zero])?;
    Ok(vec![cx.op(Op::Where, &[below, up, y])?])
}

/// `SwiGLU(a, b; alpha = 1)` = `a · sigmoid(alpha · a) · b`.
pub fn swiglu(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    if cx.ty(a).shape != cx.ty(b).shape {
        return Err(cx.bad(format!(
            "SwiGLU of shapes {} and {} (no broadcasting)",
            cx.ty(a).shape,
            cx.ty(b).shape
        )));
    }
    let alpha = cx.float_or("alpha", 1.0)?;
    let swish = swish_of(cx, a, alpha)?;
    Ok(vec![cx.bin(BinaryOp::Mul, swish, b)?])
}
