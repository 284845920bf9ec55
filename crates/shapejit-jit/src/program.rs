//! The elementwise program: an SSA list of scalar ops over f32 values and masks.
//!
//! A [`Program`] is what every region kind runs per element: the body of an
//! elementwise region, the prologue and epilogue of a row region, the epilogue of a
//! matmul. Values are numbered by their defining op ([`ValueId`] = index in
//! [`Program::ops`]).
//!
//! **Invariant (checked by [`Program::validate`]):** every operand refers to an earlier
//! op, has the type the op expects (f32 or mask), and every program output is f32.
//!
//! Numerics (what compiled code guarantees): add/sub/mul/div/sqrt/neg/abs/min/max/
//! relu/clip/select are exact IEEE f32; the transcendental ones are within the ulp
//! bounds documented (and measured) in `codegen/math.rs`: exp, log, erf ≤ 1.5 ulp,
//! tanh ≤ 2, sigmoid ≤ 3, gelu ≤ 4 (gelu_tanh more in its negative tail); elu and pow
//! add one rounding per extra step (pow: ~|b·ln a| ulp, the conditioning of e^(b ln a)).
//!
//! **Invariant:** special values follow the interpreter (`shapejit-vm`'s ops, ONNX
//! semantics): `max`/`min`/`relu`/`leaky_relu`/`elu`/`clip` propagate NaN and keep the
//! operand the interpreter keeps (`max(a, b)` is `a > b || a is NaN ? a : b`, so a tie
//! such as `max(+0, -0)` gives `b`; `relu(-0) = -0`); the transcendentals map NaN to NaN
//! and ±inf, ±0 and subnormals as the interpreter does (tested in
//! `tests/special_values.rs`).

use std::fmt;

/// Index of a value (the op that defines it) inside a [`Program`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// Index of a kernel input (the position in the input pointer array).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InputId(pub u32);

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl fmt::Display for InputId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in{}", self.0)
    }
}

/// One-operand f32 ops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `|x|`
    Abs,
    /// `sqrt(x)`
    Sqrt,
    /// `1/x`
    Reciprocal,
    /// `e^x` (polynomial, no libm call)
    Exp,
    /// natural log (polynomial)
    Log,
    /// hyperbolic tangent (polynomial)
    Tanh,
    /// `1/(1+e^-x)`
    Sigmoid,
    /// `x · sigmoid(x)` (SiLU, swish)
    Silu,
    /// error function (polynomial)
    Erf,
    /// `0.5·x·(1+erf(x/√2))`, computed without cancellation for negative x
    GeluErf,
    /// `0.5·x·(1+tanh(√(2/π)(x+0.044715x³)))`
    GeluTanh,
    /// `x < 0 ? 0 : x` (NaN and -0 pass, as the interpreter's)
    Relu,
    /// `alpha·x if x < 0 else x`
    LeakyRelu {
        /// slope for negative inputs
        alpha: f32,
    },
    /// `alpha·expm1(x) if x < 0 else x`
    Elu {
        /// scale for negative inputs
        alpha: f32,
    },
    /// `y = x < min ? min : x; y > max ? max : y` (NaN passes)
    Clip {
        /// lower bound
        min: f32,
        /// upper bound
        max: f32,
    },
    /// `x^n` for a small integer n (repeated squaring; negative n divides)
    PowI(i32),
}

/// Two-operand f32 ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
    /// `a > b || a is NaN ? a : b` (NaN propagates)
    Max,
    /// `a < b || a is NaN ? a : b` (NaN propagates)
    Min,
    /// `a^b` via `exp(b·log|a|)`, with the sign for negative `a` and integral `b`,
    /// `a^0 = 1`
    Pow,
}

/// Comparisons of two f32 values, giving a mask (ordered: NaN compares false,
/// except `Ne`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
}

/// One SSA op. Its result is the value named by its index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// The current element of an input (f32).
    Input(InputId),
    /// A constant (f32).
    Const(f32),
    /// The row result of a row region (only in a [`crate::RowSpec`] epilogue).
    RowResult,
    /// A unary op on an f32 value.
    Unary(UnaryOp, ValueId),
    /// A binary op on two f32 values.
    Binary(BinaryOp, ValueId, ValueId),
    /// A comparison of two f32 values, giving a mask.
    Compare(CmpOp, ValueId, ValueId),
    /// `if cond { on_true } else { on_false }` per element; `cond` is a mask.
    Select {
        /// the mask
        cond: ValueId,
        /// value where the mask is set
        on_true: ValueId,
        /// value where the mask is clear
        on_false: ValueId,
    },
}

impl Op {
    /// Rough instruction count of one evaluation: ≈ 30 for a transcendental, 1 for
    /// anything else.
    pub(crate) fn weight(&self) -> usize {
        match self {
            Op::Unary(
                UnaryOp::Exp
                | UnaryOp::Log
                | UnaryOp::Tanh
                | UnaryOp::Sigmoid
                | UnaryOp::Silu
                | UnaryOp::Erf
                | UnaryOp::GeluErf
                | UnaryOp::GeluTanh
                | UnaryOp::Elu { .. },
                _,
            )
            | Op::Binary(BinaryOp::Pow, ..) => HEAVY_WEIGHT,
            _ => 1,
        }
    }

    /// The values this op reads.
    pub(crate) fn operands(&self) -> Vec<ValueId> {
        match *self {
            Op::Input(_) | Op::Const(_) | Op::RowResult => Vec::new(),
            Op::Unary(_, x) => vec![x],
            Op::Binary(_, a, b) | Op::Compare(_, a, b) => vec![a, b],
            Op::Select {
                cond,
                on_true,
                on_false,
            } => vec![cond, on_true, on_false],
        }
    }
}

/// [`Op::weight`] of a transcendental.
pub(crate) const HEAVY_WEIGHT: usize = 30;

/// The type of a program value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// an f32
    F32,
    /// a comparison result
    Mask,
}

/// An SSA list of ops and the values it outputs.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    /// The ops; op `i` defines `ValueId(i)`.
    pub ops: Vec<Op>,
    /// The values written to the outputs, in output order.
    pub outputs: Vec<ValueId>,
}

/// Where a program runs, which decides the ops it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProgramContext {
    /// Number of kernel inputs `Op::Input` may name.
    pub n_inputs: usize,
    /// Whether `Op::RowResult` is available.
    pub row_result: bool,
}

impl Program {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an op and returns the value it defines.
    pub fn push(&mut self, op: Op) -> ValueId {
        // Invariant: programs are far smaller than u32::MAX ops; `validate` rejects
        // anything that would not fit.
        let id = ValueId(self.ops.len() as u32);
        self.ops.push(op);
        id
    }

    /// `Op::Input`
    pub fn input(&mut self, input: u32) -> ValueId {
        self.push(Op::Input(InputId(input)))
    }

    /// `Op::Const`
    pub fn constant(&mut self, value: f32) -> ValueId {
        self.push(Op::Const(value))
    }

    /// `Op::Unary`
    pub fn unary(&mut self, op: UnaryOp, x: ValueId) -> ValueId {
        self.push(Op::Unary(op, x))
    }

    /// `Op::Binary`
    pub fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        self.push(Op::Binary(op, a, b))
    }

    /// `Op::Compare`
    pub fn compare(&mut self, op: CmpOp, a: ValueId, b: ValueId) -> ValueId {
        self.push(Op::Compare(op, a, b))
    }

    /// `Op::Select`
    pub fn select(&mut self, cond: ValueId, on_true: ValueId, on_false: ValueId) -> ValueId {
        self.push(Op::Select {
            cond,
            on_true,
            on_false,
        })
    }

    /// Marks `value` as the next output.
    pub fn output(&mut self, value: ValueId) {
        self.outputs.push(value);
    }

    /// Rough instruction count of one evaluation (see [`Op::weight`]), used to pick
    /// the unroll factor.
    pub(crate) fn weight(&self) -> usize {
        self.ops.iter().map(Op::weight).sum()
    }

    /// Checks operand order and types; returns each value's type.
    pub(crate) fn validate(&self, ctx: ProgramContext) -> Result<Vec<ValueType>, String> {
        if self.ops.len() > u32::MAX as usize / 2 {
            return Err(format!("program has {} ops", self.ops.len()));
        }
        let mut types = Vec::with_capacity(self.ops.len());
        for (idx, op) in self.ops.iter().enumerate() {
            let operand = |v: ValueId, want: ValueType| -> Result<(), String> {
                match types.get(v.0 as usize) {
                    None => Err(format!(
                        "op v{idx} ({op:?}) uses {v}, which is not defined before it"
                    )),
                    Some(&t) if t != want => Err(format!(
                        "op v{idx} ({op:?}) needs {v} to be {want:?}, it is {t:?}"
                    )),
                    Some(_) => Ok(()),
                }
            };
            let ty = match *op {
                Op::Input(input) => {
                    if input.0 as usize >= ctx.n_inputs {
                        return Err(format!(
                            "op v{idx} reads {input} but the kernel has {} inputs",
                            ctx.n_inputs
                        ));
                    }
                    ValueType::F32
                }
                Op::Const(_) => ValueType::F32,
                Op::RowResult => {
                    if !ctx.row_result {
                        return Err(format!(
                            "op v{idx} reads the row result outside a row epilogue"
                        ));
                    }
                    ValueType::F32
                }
                Op::Unary(UnaryOp::PowI(n), x) => {
                    if n.unsigned_abs() > 64 {
                        return Err(format!(
                            "op v{idx}: pow exponent {n} is not small (|n| <= 64)"
                        ));
                    }
                    operand(x, ValueType::F32)?;
                    ValueType::F32
                }
                Op::Unary(_, x) => {
                    operand(x, ValueType::F32)?;
                    ValueType::F32
                }
                Op::Binary(_, a, b) => {
                    operand(a, ValueType::F32)?;
                    operand(b, ValueType::F32)?;
                    ValueType::F32
                }
                Op::Compare(_, a, b) => {
                    operand(a, ValueType::F32)?;
                    operand(b, ValueType::F32)?;
                    ValueType::Mask
                }
                Op::Select {
                    cond,
                    on_true,
                    on_false,
                } => {
                    operand(cond, ValueType::Mask)?;
                    operand(on_true, ValueType::F32)?;
                    operand(on_false, ValueType::F32)?;
                    ValueType::F32
                }
            };
            types.push(ty);
        }
        for (out, v) in self.outputs.iter().enumerate() {
            match types.get(v.0 as usize) {
                None => return Err(format!("output {out} names undefined value {v}")),
                Some(ValueType::Mask) => {
                    return Err(format!("output {out} ({v}) is a mask, not f32"));
                }
                Some(ValueType::F32) => {}
            }
        }
        Ok(types)
    }
}
