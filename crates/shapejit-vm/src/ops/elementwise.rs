//! Elementwise ops: unary, binary (NumPy broadcasting), where, cast.
//!
//! Dtypes: float math on f32; `neg`, `abs`, `relu`, `clip` and binary
//! arithmetic also on f64 and i32/i64 (wrapping; integer division truncates,
//! and a zero divisor is an [`OpError::Value`], which the interpreter reports
//! naming the node);
//! comparisons on every dtype; `and`/`or`/`not` on bool; `cast` between every
//! pair, by the conversion rule of [`shapejit_ir::dtype`]. Other dtypes reach
//! the float and integer kernels through casts to their compute dtype, which
//! the importer inserts ([`DType::compute`]).
//!
//! **Invariant:** `max`/`min` propagate NaN (as NumPy's `maximum`/`minimum`).

use super::util::{
    arity, broadcast_shapes, expect_dtype, kernel_err, out_view, same_dtype, view_of, with_dtype,
};
use super::{OpError, OutType};
use crate::tensor::{Dims, TensorMut, TensorRef};
use shapejit_ir::{Activation, BinaryOp, DType, Element, Num, Op, Scalar, UnaryOp};
use shapejit_kernels::elementwise as ew;
use shapejit_kernels::packed::Activation as KernelActivation;
use shapejit_kernels::{Unary, View, math};

const ARITH: [DType; 4] = [DType::F32, DType::F64, DType::I32, DType::I64];

fn unary_dtypes(u: UnaryOp) -> &'static [DType] {
    match u {
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Clip { .. } => &ARITH,
        UnaryOp::Not => &[DType::Bool],
        _ => &[DType::F32],
    }
}

pub(crate) fn unary_type(op: &Op, u: UnaryOp, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 1, 1)?;
    let dtype = expect_dtype(op, inputs, 0, unary_dtypes(u))?;
    Ok(OutType {
        dtype,
        shape: inputs[0].layout.shape.clone(),
    })
}

fn binary_dtypes(b: BinaryOp) -> &'static [DType] {
    match b {
        BinaryOp::And | BinaryOp::Or => &[DType::Bool],
        _ if b.is_comparison() => &DType::ALL,
        _ if b.is_bitwise() => &[DType::I32, DType::I64],
        _ => &ARITH,
    }
}

pub(crate) fn binary_type(op: &Op, b: BinaryOp, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 2, 2)?;
    expect_dtype(op, inputs, 0, binary_dtypes(b))?;
    let dtype = same_dtype(op, inputs, 0, 1)?;
    let shape = broadcast_shapes(op, &[inputs[0].shape(), inputs[1].shape()])?;
    Ok(OutType {
        dtype: if b.is_comparison() {
            DType::Bool
        } else {
            dtype
        },
        shape,
    })
}

pub(crate) fn where_type(op: &Op, inputs: &[TensorRef]) -> Result<OutType, OpError> {
    arity(op, inputs, 3, 3)?;
    expect_dtype(op, inputs, 0, &[DType::Bool])?;
    let dtype = same_dtype(op, inputs, 1, 2)?;
    let shape = broadcast_shapes(
        op,
        &[inputs[0].shape(), inputs[1].shape(), inputs[2].shape()],
    )?;
    Ok(OutType { dtype, shape })
}

/// Input `idx` as a view broadcast to `shape`.
fn broadcast_view<'a, T: Element>(
    op: &Op,
    inputs: &[TensorRef<'a>],
    idx: usize,
    shape: &[usize],
) -> Result<View<'a, T>, OpError> {
    let v = view_of::<T>(op, inputs, idx)?;
    v.with_geom(v.geom().broadcast_to(shape).map_err(kernel_err(op))?)
        .map_err(kernel_err(op))
}

fn map1<A: Element, O: Element>(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    f: impl Fn(A) -> O,
) -> Result<(), OpError> {
    let a = view_of::<A>(op, inputs, 0)?;
    let mut o = out_view::<O>(op, out)?;
    ew::unary(&mut o, &a, f).map_err(kernel_err(op))
}

/// A float unary op through its slice kernel at the CPU level in use.
fn map_kernel(op: &Op, inputs: &[TensorRef], out: &mut TensorMut, k: Unary) -> Result<(), OpError> {
    let a = view_of::<f32>(op, inputs, 0)?;
    let mut o = out_view::<f32>(op, out)?;
    ew::unary_kernel(&mut o, &a, k).map_err(kernel_err(op))
}

/// `a == b`, compared element by element (a slice compare calls `memcmp`,
/// slow for the few dims of a tensor).
fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

fn map2<A: Element, O: Element>(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    f: impl Fn(A, A) -> O,
) -> Result<(), OpError> {
    // Fast path, no views: contiguous operands of the output's shape or of one
    // element (shapes were checked when the output type was computed).
    if let [a, b] = inputs
        && let (Some(xa), Some(xb)) = (a.contiguous_elems::<A>(), b.contiguous_elems::<A>())
        && (xa.len() == 1 || same_dims(a.shape(), out.shape))
        && (xb.len() == 1 || same_dims(b.shape(), out.shape))
        && let Some(dst) = out.elems_mut::<O>()
    {
        return ew::binary_slices(dst, xa, xb, f).map_err(kernel_err(op));
    }
    let shape: Dims = out.shape.into();
    let a = broadcast_view::<A>(op, inputs, 0, &shape)?;
    let b = broadcast_view::<A>(op, inputs, 1, &shape)?;
    let mut o = out_view::<O>(op, out)?;
    ew::binary(&mut o, &a, &b, f).map_err(kernel_err(op))
}

/// The kernels' formula for activation `a`: the standalone ops and the
/// convolution's fused epilogue compute it with the same function.
pub(super) fn activation(a: Activation) -> KernelActivation {
    match a {
        Activation::Relu => KernelActivation::Relu,
        Activation::LeakyRelu { alpha } => KernelActivation::LeakyRelu(alpha),
        Activation::Clip { min, max } => KernelActivation::Clip { min, max },
    }
}

/// Evaluates `$body` with `$f` bound to a closure applying the kernels'
/// activation `$act`: one closure per variant, so the variant is a constant
/// inside the loop and the contiguous runs vectorize (`act.apply` on a captured
/// `act` branched per element).
macro_rules! with_activation {
    ($act:expr, |$f:ident| $body:expr) => {
        match $act {
            shapejit_kernels::packed::Activation::Relu => {
                let $f = |x: f32| shapejit_kernels::packed::Activation::Relu.apply(x);
                $body
            }
            shapejit_kernels::packed::Activation::LeakyRelu(alpha) => {
                let $f =
                    move |x: f32| shapejit_kernels::packed::Activation::LeakyRelu(alpha).apply(x);
                $body
            }
            shapejit_kernels::packed::Activation::Clip { min, max } => {
                let $f =
                    move |x: f32| shapejit_kernels::packed::Activation::Clip { min, max }.apply(x);
                $body
            }
        }
    };
}
pub(super) use with_activation;

fn map_activation(
    op: &Op,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    a: Activation,
) -> Result<(), OpError> {
    with_activation!(activation(a), |f| map1(op, inputs, out, f))
}

/// The f32 function of a unary op (`None`: not a float op).
fn unary_f32(
    op: &Op,
    u: UnaryOp,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match u {
        UnaryOp::Neg => map1(op, inputs, out, |x: f32| -x),
        UnaryOp::Abs => map1(op, inputs, out, |x: f32| x.abs()),
        UnaryOp::Exp => map_kernel(op, inputs, out, Unary::Exp),
        UnaryOp::Log => map_kernel(op, inputs, out, Unary::Log),
        UnaryOp::Sqrt => map_kernel(op, inputs, out, Unary::Sqrt),
        UnaryOp::Reciprocal => map_kernel(op, inputs, out, Unary::Reciprocal),
        UnaryOp::Tanh => map_kernel(op, inputs, out, Unary::Tanh),
        UnaryOp::Sigmoid => map_kernel(op, inputs, out, Unary::Sigmoid),
        UnaryOp::Silu => map_kernel(op, inputs, out, Unary::Silu),
        UnaryOp::Relu => map_activation(op, inputs, out, Activation::Relu),
        UnaryOp::LeakyRelu { alpha } => {
            map_activation(op, inputs, out, Activation::LeakyRelu { alpha })
        }
        UnaryOp::Clip { min, max } => {
            map_activation(op, inputs, out, Activation::Clip { min, max })
        }
        UnaryOp::Elu { alpha } => map1(op, inputs, out, move |x: f32| {
            if x < 0.0 { alpha * math::expm1(x) } else { x }
        }),
        UnaryOp::Gelu { tanh_approx: false } => map_kernel(op, inputs, out, Unary::GeluErf),
        UnaryOp::Gelu { tanh_approx: true } => map_kernel(op, inputs, out, Unary::GeluTanh),
        UnaryOp::Erf => map_kernel(op, inputs, out, Unary::Erf),
        UnaryOp::Math(f) => map1(op, inputs, out, move |x: f32| f.apply(x)),
        UnaryOp::Not => Err(dtype_bug(op)),
    }
}

fn dtype_bug(op: &Op) -> OpError {
    OpError::Unsupported {
        op: op.name(),
        message: "dtype passed output_types but has no kernel (internal bug)".into(),
    }
}

/// Integer types for wrapping arithmetic.
trait Int: Element + Ord {
    const ZERO: Self;
    fn wadd(self, o: Self) -> Self;
    fn wsub(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    fn wneg(self) -> Self;
    fn wabs(self) -> Self;
    /// Truncating division; `MIN / -1` wraps; `x / 0 = 0` (callers report it).
    fn wdiv(self, o: Self) -> Self;
    /// Integer power; negative exponents give `1/x^n` truncated.
    fn wpow(self, e: Self) -> Self;
    /// The bitwise and, or and xor.
    fn bits(self, o: Self, b: BinaryOp) -> Self;
}

macro_rules! impl_int {
    ($t:ty) => {
        impl Int for $t {
            const ZERO: $t = 0;
            fn wadd(self, o: $t) -> $t {
                self.wrapping_add(o)
            }
            fn wsub(self, o: $t) -> $t {
                self.wrapping_sub(o)
            }
            fn wmul(self, o: $t) -> $t {
                self.wrapping_mul(o)
            }
            fn wneg(self) -> $t {
                self.wrapping_neg()
            }
            fn wabs(self) -> $t {
                self.wrapping_abs()
            }
            fn wdiv(self, o: $t) -> $t {
                if o == 0 { 0 } else { self.wrapping_div(o) }
            }
            fn bits(self, o: $t, b: BinaryOp) -> $t {
                match b {
                    BinaryOp::BitAnd => self & o,
                    BinaryOp::BitOr => self | o,
                    _ => self ^ o,
                }
            }
            fn wpow(self, e: $t) -> $t {
                if e < 0 {
                    return match self {
                        1 => 1,
                        -1 => {
                            if e % 2 == 0 {
                                1
                            } else {
                                -1
                            }
                        }
                        _ => 0,
                    };
                }
                let (mut base, mut e, mut acc) = (self, e, 1 as $t);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
        }
    };
}
impl_int!(i32);
impl_int!(i64);

fn unary_int<T: Int>(
    op: &Op,
    u: UnaryOp,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match u {
        UnaryOp::Neg => map1(op, inputs, out, |x: T| x.wneg()),
        UnaryOp::Abs => map1(op, inputs, out, |x: T| x.wabs()),
        UnaryOp::Relu => map1(op, inputs, out, |x: T| x.max(T::ZERO)),
        UnaryOp::Clip { min, max } => {
            // bounds beyond the type's range clamp nothing on that side
            let lo = T::from_num(Num::Float(f64::from(min).ceil()));
            let hi = T::from_num(Num::Float(f64::from(max).floor()));
            map1(op, inputs, out, move |x: T| x.max(lo).min(hi))
        }
        _ => Err(dtype_bug(op)),
    }
}

/// The f64 ops: `neg`, `abs`, `relu`, `clip`.
fn unary_f64(
    op: &Op,
    u: UnaryOp,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match u {
        UnaryOp::Neg => map1(op, inputs, out, |x: f64| -x),
        UnaryOp::Abs => map1(op, inputs, out, |x: f64| x.abs()),
        UnaryOp::Relu => map1(op, inputs, out, |x: f64| if x < 0.0 { 0.0 } else { x }),
        UnaryOp::Clip { min, max } => {
            let (min, max) = (f64::from(min), f64::from(max));
            map1(op, inputs, out, move |x: f64| {
                let y = if x < min { min } else { x };
                if y > max { max } else { y }
            })
        }
        _ => Err(dtype_bug(op)),
    }
}

pub(crate) fn unary(
    op: &Op,
    u: UnaryOp,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F32 => unary_f32(op, u, inputs, out),
        DType::F64 => unary_f64(op, u, inputs, out),
        DType::I32 => unary_int::<i32>(op, u, inputs, out),
        DType::I64 => unary_int::<i64>(op, u, inputs, out),
        DType::Bool => map1(op, inputs, out, |x: bool| !x),
        _ => Err(dtype_bug(op)),
    }
}

/// NaN-propagating maximum.
fn fmax(a: f32, b: f32) -> f32 {
    if a > b || a.is_nan() { a } else { b }
}

/// NaN-propagating minimum.
fn fmin(a: f32, b: f32) -> f32 {
    if a < b || a.is_nan() { a } else { b }
}

fn compare<T: Element + PartialOrd>(
    op: &Op,
    b: BinaryOp,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match b {
        BinaryOp::Eq => map2(op, inputs, out, |x: T, y: T| x == y),
        BinaryOp::Lt => map2(op, inputs, out, |x: T, y: T| x < y),
        BinaryOp::Le => map2(op, inputs, out, |x: T, y: T| x <= y),
        BinaryOp::Gt => map2(op, inputs, out, |x: T, y: T| x > y),
        BinaryOp::Ge => map2(op, inputs, out, |x: T, y: T| x >= y),
        _ => Err(dtype_bug(op)),
    }
}

fn binary_f32(
    op: &Op,
    b: BinaryOp,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match b {
        BinaryOp::Add => map2(op, inputs, out, |x: f32, y: f32| x + y),
        BinaryOp::Sub => map2(op, inputs, out, |x: f32, y: f32| x - y),
        BinaryOp::Mul => map2(op, inputs, out, |x: f32, y: f32| x * y),
        BinaryOp::Div => map2(op, inputs, out, |x: f32, y: f32| x / y),
        BinaryOp::Pow => {
            // x^2 is common (decomposed norms) and exact as x*x
            if inputs[1].layout.numel() == 1 && inputs[1].get_flat::<f32>(0) == Some(2.0) {
                map2(op, inputs, out, |x: f32, _: f32| x * x)
            } else {
                map2(op, inputs, out, |x: f32, y: f32| x.powf(y))
            }
        }
        BinaryOp::Max => map2(op, inputs, out, fmax),
        BinaryOp::Min => map2(op, inputs, out, fmin),
        _ => compare::<f32>(op, b, inputs, out),
    }
}

fn binary_f64(
    op: &Op,
    b: BinaryOp,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match b {
        BinaryOp::Add => map2(op, inputs, out, |x: f64, y: f64| x + y),
        BinaryOp::Sub => map2(op, inputs, out, |x: f64, y: f64| x - y),
        BinaryOp::Mul => map2(op, inputs, out, |x: f64, y: f64| x * y),
        BinaryOp::Div => map2(op, inputs, out, |x: f64, y: f64| x / y),
        BinaryOp::Pow => map2(op, inputs, out, |x: f64, y: f64| x.powf(y)),
        BinaryOp::Max => map2(
            op,
            inputs,
            out,
            |x: f64, y: f64| {
                if x > y || x.is_nan() { x } else { y }
            },
        ),
        BinaryOp::Min => map2(
            op,
            inputs,
            out,
            |x: f64, y: f64| {
                if x < y || x.is_nan() { x } else { y }
            },
        ),
        _ => Err(dtype_bug(op)),
    }
}

fn binary_int<T: Int>(
    op: &Op,
    b: BinaryOp,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match b {
        BinaryOp::Add => map2(op, inputs, out, |x: T, y: T| x.wadd(y)),
        BinaryOp::Sub => map2(op, inputs, out, |x: T, y: T| x.wsub(y)),
        BinaryOp::Mul => map2(op, inputs, out, |x: T, y: T| x.wmul(y)),
        BinaryOp::Div => {
            // Atomic, not Cell: the kernel may run the closure on several threads.
            let by_zero = std::sync::atomic::AtomicBool::new(false);
            map2(op, inputs, out, |x: T, y: T| {
                if y == T::ZERO {
                    by_zero.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                x.wdiv(y)
            })?;
            if by_zero.into_inner() {
                return Err(OpError::Value {
                    op: op.name(),
                    message: "integer division by zero".into(),
                });
            }
            Ok(())
        }
        BinaryOp::Pow => map2(op, inputs, out, |x: T, y: T| x.wpow(y)),
        BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => {
            map2(op, inputs, out, |x: T, y: T| x.bits(y, b))
        }
        BinaryOp::Max => map2(op, inputs, out, |x: T, y: T| x.max(y)),
        BinaryOp::Min => map2(op, inputs, out, |x: T, y: T| x.min(y)),
        _ => compare::<T>(op, b, inputs, out),
    }
}

pub(crate) fn binary(
    op: &Op,
    b: BinaryOp,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    if b.is_comparison() {
        return with_dtype!(inputs[0].dtype, T => compare::<T>(op, b, inputs, out));
    }
    match inputs[0].dtype {
        DType::F32 => binary_f32(op, b, inputs, out),
        DType::F64 => binary_f64(op, b, inputs, out),
        DType::I32 => binary_int::<i32>(op, b, inputs, out),
        DType::I64 => binary_int::<i64>(op, b, inputs, out),
        DType::Bool => match b {
            BinaryOp::And => map2(op, inputs, out, |x: bool, y: bool| x & y),
            BinaryOp::Or => map2(op, inputs, out, |x: bool, y: bool| x | y),
            _ => Err(dtype_bug(op)),
        },
        _ => Err(dtype_bug(op)),
    }
}

pub(crate) fn where_(op: &Op, inputs: &[TensorRef], out: &mut TensorMut) -> Result<(), OpError> {
    let shape: Dims = out.shape.into();
    let c = broadcast_view::<bool>(op, inputs, 0, &shape)?;
    with_dtype!(inputs[1].dtype, T => {
        let x = broadcast_view::<T>(op, inputs, 1, &shape)?;
        let y = broadcast_view::<T>(op, inputs, 2, &shape)?;
        let mut o = out_view::<T>(op, out)?;
        ew::ternary(&mut o, &c, &x, &y, |c, x, y| if c { x } else { y }).map_err(kernel_err(op))
    })
}

/// `bitcast`: each element's bytes reinterpreted as `to` (same size, and a
/// target without invalid bit patterns, as [`DType::bitcast_to`] checks).
pub(crate) fn bitcast(
    op: &Op,
    to: DType,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    inputs[0]
        .dtype
        .bitcast_to(to)
        .map_err(|e| super::util::value_err(op, e))?;
    with_dtype!(inputs[0].dtype, A => with_dtype!(to, O => {
        map1(op, inputs, out, |x: A| {
            // SAFETY: `bitcast_to` checked that A and O have the same size;
            // both are plain data (no padding), and O is not bool or a
            // sub-byte type unless it is A itself, so every bit pattern of an
            // A is a valid O.
            unsafe { std::mem::transmute_copy::<A, O>(&x) }
        })
    }))
}

/// `cast`: every dtype to every dtype, by [`shapejit_ir::Scalar`]'s rule.
pub(crate) fn cast(
    op: &Op,
    to: DType,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    with_dtype!(inputs[0].dtype, A => with_dtype!(to, O => {
        map1(op, inputs, out, |x: A| O::from_num(x.to_num()))
    }))
}
