//! Independent references for the JIT tests: a naive f64 evaluator of programs, f64
//! special functions, strided indexing.
#![allow(dead_code)]

use shapejit_jit::{BinaryOp, CmpOp, Op, Program, UnaryOp};

/// erf in f64: Taylor series below 2.5, continued fraction for erfc above.
pub fn erf64(x: f64) -> f64 {
    let a = x.abs();
    let r = if a < 2.5 {
        erf_series(a)
    } else {
        1.0 - erfc_cf(a)
    };
    r.copysign(x)
}

fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    for n in 1..400 {
        term *= -x2 / n as f64;
        let t = term / (2 * n + 1) as f64;
        sum += t;
        if t.abs() < 1e-30 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// erfc(x) for x ≥ 2.5 by its continued fraction.
fn erfc_cf(x: f64) -> f64 {
    let mut t = x;
    for k in (1..=2000).rev() {
        t = x + (k as f64 / 2.0) / t;
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / t
}

/// 1 + erf(x) without cancellation for negative x.
pub fn one_plus_erf64(x: f64) -> f64 {
    if x < -2.5 {
        erfc_cf(-x)
    } else {
        1.0 + erf64(x)
    }
}

pub fn sigmoid64(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        x.exp() / (1.0 + x.exp())
    }
}

pub fn unary64(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => sigmoid64(x),
        UnaryOp::Silu => x * sigmoid64(x),
        UnaryOp::Erf => erf64(x),
        UnaryOp::GeluErf => 0.5 * x * one_plus_erf64(x / std::f64::consts::SQRT_2),
        UnaryOp::GeluTanh => {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            x * sigmoid64(2.0 * u)
        }
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::LeakyRelu { alpha } => {
            if x >= 0.0 {
                x
            } else {
                alpha as f64 * x
            }
        }
        UnaryOp::Elu { alpha } => {
            if x >= 0.0 {
                x
            } else {
                alpha as f64 * (x.exp() - 1.0)
            }
        }
        UnaryOp::Clip { min, max } => x.max(min as f64).min(max as f64),
        UnaryOp::PowI(n) => x.powi(n),
    }
}

pub fn binary64(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => a.powf(b),
    }
}

#[derive(Clone, Copy, Debug)]
enum V {
    F(f64),
    M(bool),
}

/// Evaluates a program on one element in f64 (masks as bools). `row` is the value of
/// `Op::RowResult`.
pub fn eval64(program: &Program, inputs: &[f64], row: Option<f64>) -> Vec<f64> {
    eval64_watching(program, inputs, row, &mut |_, _| {})
}

/// Whether some comparison of the element's evaluation is a near tie (operands within
/// `rel·(1 + |a| + |b|)`): the f32 kernel may decide it either way, so the element's
/// result is not determined by the f64 reference.
pub fn has_near_tie(program: &Program, inputs: &[f64], rel: f64) -> bool {
    let mut tie = false;
    eval64_watching(program, inputs, None, &mut |a, b| {
        tie |= (a - b).abs() <= rel * (1.0 + a.abs() + b.abs());
    });
    tie
}

/// [`eval64`], calling `compared(a, b)` on the operands of every comparison.
fn eval64_watching(
    program: &Program,
    inputs: &[f64],
    row: Option<f64>,
    compared: &mut dyn FnMut(f64, f64),
) -> Vec<f64> {
    let mut vals: Vec<V> = Vec::new();
    let f = |vals: &Vec<V>, id: shapejit_jit::ValueId| match vals[id.0 as usize] {
        V::F(x) => x,
        V::M(_) => panic!("mask used as f32"),
    };
    for op in &program.ops {
        let v = match *op {
            Op::Input(i) => V::F(inputs[i.0 as usize]),
            Op::Const(c) => V::F(c as f64),
            Op::RowResult => V::F(row.expect("row result")),
            Op::Unary(u, x) => V::F(unary64(u, f(&vals, x))),
            Op::Binary(bop, a, b) => V::F(binary64(bop, f(&vals, a), f(&vals, b))),
            Op::Compare(c, a, b) => {
                let (a, b) = (f(&vals, a), f(&vals, b));
                compared(a, b);
                V::M(match c {
                    CmpOp::Eq => a == b,
                    CmpOp::Ne => a != b,
                    CmpOp::Lt => a < b,
                    CmpOp::Le => a <= b,
                    CmpOp::Gt => a > b,
                    CmpOp::Ge => a >= b,
                })
            }
            Op::Select {
                cond,
                on_true,
                on_false,
            } => match vals[cond.0 as usize] {
                V::M(true) => V::F(f(&vals, on_true)),
                V::M(false) => V::F(f(&vals, on_false)),
                V::F(_) => panic!("f32 used as mask"),
            },
        };
        vals.push(v);
    }
    program.outputs.iter().map(|&o| f(&vals, o)).collect()
}

/// Offset of the row-major index `flat` of `shape` under `strides`.
pub fn strided_offset(flat: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut rem = flat;
    let mut off = 0;
    for d in (0..shape.len()).rev() {
        let i = rem % shape[d];
        rem /= shape[d];
        off += i * strides[d];
    }
    off
}

/// Distance of `got` from `want` in units of f32 ulp at `want`.
pub fn ulp_error(got: f32, want: f64) -> f64 {
    let w = want as f32;
    if got == w || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    let a = w.abs();
    let ulp = if a == 0.0 || !a.is_normal() {
        f32::from_bits(1) as f64 // subnormal spacing
    } else {
        (f32::from_bits(a.to_bits() + 1) - a) as f64
    };
    ((got as f64 - want) / ulp).abs()
}

/// A small deterministic generator (xorshift) for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}
