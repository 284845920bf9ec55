//! Emits a [`Program`] at one width, given how to fetch each input element.
//!
//! **Invariant:** the program was validated (operands precede their use and have the
//! right type), so indexing `values` by a `ValueId` cannot fail.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Value};

use super::lanes::Lanes;
use super::math;
use std::ops::Range;

use crate::program::{BinaryOp, CmpOp, InputId, Op, Program, UnaryOp, ValueId};

/// Emits every op of `program` and returns the values of its outputs, in order.
/// `input` produces the current element of an input; `row_result` is the value
/// `Op::RowResult` stands for (row epilogues only).
pub(crate) fn emit_program(
    l: &mut Lanes,
    program: &Program,
    input: &mut dyn FnMut(&mut Lanes, InputId) -> Value,
    row_result: Option<Value>,
) -> Vec<Value> {
    let mut values: Vec<Option<Value>> = vec![None; program.ops.len()];
    emit_ops(
        l,
        program,
        0..program.ops.len(),
        &mut values,
        input,
        row_result,
    );
    program
        .outputs
        .iter()
        .map(|v| values[v.0 as usize].expect("validated: outputs are defined"))
        .collect()
}

/// Emits ops `range` of `program` into `values` (indexed by op). Every operand the
/// range reads from before its start must already be in `values` (a staged kernel
/// loads them from its tile, see [`super::stages`]).
pub(crate) fn emit_ops(
    l: &mut Lanes,
    program: &Program,
    range: Range<usize>,
    values: &mut [Option<Value>],
    input: &mut dyn FnMut(&mut Lanes, InputId) -> Value,
    row_result: Option<Value>,
) {
    for idx in range {
        let v = emit_op(l, program.ops[idx], values, input, row_result);
        values[idx] = Some(v);
    }
}

/// Emits one op whose operands are in `values`.
pub(crate) fn emit_op(
    l: &mut Lanes,
    op: Op,
    values: &[Option<Value>],
    input: &mut dyn FnMut(&mut Lanes, InputId) -> Value,
    row_result: Option<Value>,
) -> Value {
    // Invariant: validation orders operands before their use, and staged emission
    // loads every operand from before its stage first.
    let get = |v: ValueId| values[v.0 as usize].expect("operand emitted before its use");
    match op {
        Op::Input(id) => input(l, id),
        Op::Const(c) => l.f(c),
        // Invariant: validation admits RowResult only where the caller passes one.
        Op::RowResult => row_result.expect("validated: row result available"),
        Op::Unary(op, x) => unary(l, op, get(x)),
        Op::Binary(op, a, b) => binary(l, op, get(a), get(b)),
        Op::Compare(op, a, b) => compare(l, op, get(a), get(b)),
        Op::Select {
            cond,
            on_true,
            on_false,
        } => l.select(get(cond), get(on_true), get(on_false)),
    }
}

fn unary(l: &mut Lanes, op: UnaryOp, x: Value) -> Value {
    match op {
        UnaryOp::Neg => l.neg(x),
        UnaryOp::Abs => l.abs(x),
        UnaryOp::Sqrt => l.b.ins().sqrt(x),
        UnaryOp::Reciprocal => {
            let one = l.f(1.0);
            l.div(one, x)
        }
        UnaryOp::Exp => math::exp(l, x),
        UnaryOp::Log => math::log(l, x),
        UnaryOp::Tanh => math::tanh(l, x),
        UnaryOp::Sigmoid => math::sigmoid(l, x),
        UnaryOp::Silu => {
            let s = math::sigmoid(l, x);
            l.mul(x, s)
        }
        UnaryOp::Erf => math::erf(l, x),
        UnaryOp::GeluErf => math::gelu_erf(l, x),
        UnaryOp::GeluTanh => math::gelu_tanh(l, x),
        // As the interpreter: `x < 0 ? … : x`, so NaN and -0 pass unchanged.
        UnaryOp::Relu => {
            let zero = l.f(0.0);
            let neg = l.cmp_c(FloatCC::LessThan, x, 0.0);
            l.select(neg, zero, x)
        }
        UnaryOp::LeakyRelu { alpha } => {
            let scaled = l.mul_c(x, alpha);
            let neg = l.cmp_c(FloatCC::LessThan, x, 0.0);
            l.select(neg, scaled, x)
        }
        UnaryOp::Elu { alpha } => {
            let em1 = math::expm1(l, x);
            let scaled = l.mul_c(em1, alpha);
            let neg = l.cmp_c(FloatCC::LessThan, x, 0.0);
            l.select(neg, scaled, x)
        }
        // As the interpreter: `y = x < lo ? lo : x; y > hi ? hi : y` (NaN passes).
        UnaryOp::Clip { min, max } => {
            let lo = l.f(min);
            let hi = l.f(max);
            let below = l.cmp(FloatCC::LessThan, x, lo);
            let lifted = l.select(below, lo, x);
            let above = l.cmp(FloatCC::GreaterThan, lifted, hi);
            l.select(above, hi, lifted)
        }
        UnaryOp::PowI(n) => powi(l, x, n),
    }
}

/// `x^n` by repeated squaring; negative `n` takes the reciprocal at the end.
fn powi(l: &mut Lanes, x: Value, n: i32) -> Value {
    let mut result: Option<Value> = None;
    let mut base = x;
    let mut rest = n.unsigned_abs();
    while rest > 0 {
        if rest & 1 == 1 {
            result = Some(match result {
                None => base,
                Some(r) => l.mul(r, base),
            });
        }
        rest >>= 1;
        if rest > 0 {
            base = l.mul(base, base);
        }
    }
    let positive = match result {
        Some(r) => r,
        None => l.f(1.0),
    };
    if n < 0 {
        let one = l.f(1.0);
        l.div(one, positive)
    } else {
        positive
    }
}

fn binary(l: &mut Lanes, op: BinaryOp, a: Value, b: Value) -> Value {
    match op {
        BinaryOp::Add => l.add(a, b),
        BinaryOp::Sub => l.sub(a, b),
        BinaryOp::Mul => l.mul(a, b),
        BinaryOp::Div => l.div(a, b),
        BinaryOp::Max => l.max_nan(a, b),
        BinaryOp::Min => l.min_nan(a, b),
        BinaryOp::Pow => pow(l, a, b),
    }
}

/// `a^b = e^(b·ln|a|)` with the special cases of C's `powf` (the interpreter's): the
/// sign of `a` (−0 and −inf included) kept for odd integral `b`; NaN for a finite
/// `a < 0` with a non-integral `b`; `1^b = 1` and `(−1)^±inf = 1`; `a^±0 = 1` for
/// every `a`, NaN included. The infinite and zero cases follow from `e^(b·ln|a|)`
/// itself (`ln 0 = −inf`, `e^±inf = inf, 0`).
fn pow(l: &mut Lanes, a: Value, b: Value) -> Value {
    let abs_a = l.abs(a);
    let ln = math::log(l, abs_a);
    let prod = l.mul(b, ln);
    let magnitude = math::exp(l, prod);
    // Integral and odd tests on b: floor(b) == b, floor(b/2) != b/2 (±inf: even).
    let b_floor = l.b.ins().floor(b);
    let integral = l.cmp(FloatCC::Equal, b_floor, b);
    let half_b = l.mul_c(b, 0.5);
    let half_floor = l.b.ins().floor(half_b);
    let odd = l.cmp(FloatCC::NotEqual, half_floor, half_b);
    // The sign bit of a (so −0 counts as negative).
    let a_bits = l.bits_of(a);
    let zero_bits = l.i(0);
    let a_signed = l.b.ins().icmp(IntCC::SignedLessThan, a_bits, zero_bits);
    let odd_integral = l.b.ins().band(integral, odd);
    let flip = l.b.ins().band(a_signed, odd_integral);
    let neg_mag = l.neg(magnitude);
    let res = l.select(flip, neg_mag, magnitude);
    // NaN for a finite negative a and a non-integral b.
    let a_neg = l.cmp_c(FloatCC::LessThan, a, 0.0);
    let a_finite = l.cmp_c(FloatCC::GreaterThan, a, f32::NEG_INFINITY);
    let neg_finite = l.b.ins().band(a_neg, a_finite);
    let b_nan_or_frac = l.cmp(FloatCC::NotEqual, b_floor, b);
    let bad = l.b.ins().band(neg_finite, b_nan_or_frac);
    let nan = l.f(f32::NAN);
    let res = l.select(bad, nan, res);
    // 1^b = 1, (−1)^±inf = 1, a^±0 = 1.
    let a_one = l.cmp_c(FloatCC::Equal, a, 1.0);
    let a_minus_one = l.cmp_c(FloatCC::Equal, a, -1.0);
    let abs_b = l.abs(b);
    let b_inf = l.cmp_c(FloatCC::Equal, abs_b, f32::INFINITY);
    let minus_one_inf = l.b.ins().band(a_minus_one, b_inf);
    let b_zero = l.cmp_c(FloatCC::Equal, b, 0.0);
    let ones = l.mask_or(a_one, minus_one_inf);
    let ones = l.mask_or(ones, b_zero);
    let one = l.f(1.0);
    let res = l.select(ones, one, res);
    // a^1 = a exactly (e^(ln a) overflows for a near f32::MAX)
    let b_one = l.cmp_c(FloatCC::Equal, b, 1.0);
    l.select(b_one, a, res)
}

fn compare(l: &mut Lanes, op: CmpOp, a: Value, b: Value) -> Value {
    let cc = match op {
        CmpOp::Eq => FloatCC::Equal,
        CmpOp::Ne => FloatCC::NotEqual,
        CmpOp::Lt => FloatCC::LessThan,
        CmpOp::Le => FloatCC::LessThanOrEqual,
        CmpOp::Gt => FloatCC::GreaterThan,
        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
    };
    l.cmp(cc, a, b)
}
