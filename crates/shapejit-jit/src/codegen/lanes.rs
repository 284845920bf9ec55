//! Width-generic instruction helpers: the same emitter code produces scalar (`f32`)
//! or vector (`f32x4`) IR.
//!
//! **Invariant:** a mask is what `fcmp` gives at the current width (`i8` scalar,
//! `i32x4` vector, all ones or all zeros per lane); [`Lanes::select`] is the only
//! consumer and turns vector selects into `bitselect`, which x64 lowers to one
//! blend (or to `maxps`/`minps` for the compare-and-pick-the-same-operands pattern).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F32X4, I32, I32X4};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

/// Elements per vector (x64 Cranelift vectors are 128-bit).
pub(crate) const VECTOR_LANES: usize = 4;

/// Vectors per unrolled loop iteration for a body of `weight` instructions: short
/// (memory-bound) bodies are unrolled 4×; long (compute-bound) bodies gain nothing from
/// it and would only multiply code size and compile time.
pub(crate) fn unroll_for(weight: usize) -> usize {
    if weight > 24 { 1 } else { 4 }
}

/// Scalar or 4-lane code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    /// one f32
    Scalar,
    /// f32x4
    X4,
}

impl Width {
    fn float(self) -> Type {
        match self {
            Width::Scalar => F32,
            Width::X4 => F32X4,
        }
    }

    fn int(self) -> Type {
        match self {
            Width::Scalar => I32,
            Width::X4 => I32X4,
        }
    }
}

/// Flags for every kernel load and store: buffers are valid (the caller's contract)
/// but not necessarily 16-byte aligned.
pub(crate) fn mem_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// The current element(s) of an input: its splat (a broadcast input, as a scalar and
/// a vector) at this width, else a load at `offset` from its cursor address.
pub(crate) fn input_value(
    l: &mut Lanes,
    splat: Option<(Value, Value)>,
    addr: Option<Value>,
    offset: i32,
) -> Value {
    match (splat, addr) {
        (Some((scalar, vector)), _) => match l.width {
            Width::Scalar => scalar,
            Width::X4 => vector,
        },
        // Invariant (callers): every input has either a splat (stride 0) or a cursor.
        (None, addr) => l.load(addr.expect("input has a cursor"), offset),
    }
}

/// A function builder plus the width the emitted values have.
pub(crate) struct Lanes<'a, 'b> {
    /// The builder, positioned where code goes.
    pub(crate) b: &'a mut FunctionBuilder<'b>,
    /// The width of emitted f32 values.
    pub(crate) width: Width,
}

impl Lanes<'_, '_> {
    /// An f32 constant at this width.
    pub(crate) fn f(&mut self, c: f32) -> Value {
        let scalar = self.b.ins().f32const(c);
        self.splat_f(scalar)
    }

    /// Broadcasts a scalar f32 to this width.
    pub(crate) fn splat_f(&mut self, scalar: Value) -> Value {
        match self.width {
            Width::Scalar => scalar,
            Width::X4 => self.b.ins().splat(F32X4, scalar),
        }
    }

    /// An i32 constant at this width.
    pub(crate) fn i(&mut self, c: i32) -> Value {
        let scalar = self.b.ins().iconst(I32, i64::from(c));
        match self.width {
            Width::Scalar => scalar,
            Width::X4 => self.b.ins().splat(I32X4, scalar),
        }
    }

    /// Loads one value of this width from `addr + offset`.
    pub(crate) fn load(&mut self, addr: Value, offset: i32) -> Value {
        let ty = self.width.float();
        self.b.ins().load(ty, mem_flags(), addr, offset)
    }

    /// Stores `value` at `addr + offset`.
    pub(crate) fn store(&mut self, value: Value, addr: Value, offset: i32) {
        self.b.ins().store(mem_flags(), value, addr, offset);
    }

    /// Reinterprets f32 lanes as i32 lanes.
    pub(crate) fn bits_of(&mut self, x: Value) -> Value {
        let ty = self.width.int();
        self.b.ins().bitcast(ty, MemFlagsData::new(), x)
    }

    /// Reinterprets i32 lanes as f32 lanes.
    pub(crate) fn float_of(&mut self, x: Value) -> Value {
        let ty = self.width.float();
        self.b.ins().bitcast(ty, MemFlagsData::new(), x)
    }

    /// Converts i32 lanes to f32 lanes.
    pub(crate) fn int_to_float(&mut self, x: Value) -> Value {
        let ty = self.width.float();
        self.b.ins().fcvt_from_sint(ty, x)
    }

    /// `a * b + c` with one rounding.
    pub(crate) fn fma(&mut self, a: Value, b: Value, c: Value) -> Value {
        self.b.ins().fma(a, b, c)
    }

    /// `a + b`
    pub(crate) fn add(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fadd(a, b)
    }

    /// `a - b`
    pub(crate) fn sub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fsub(a, b)
    }

    /// `a * b`
    pub(crate) fn mul(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fmul(a, b)
    }

    /// `a / b`
    pub(crate) fn div(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fdiv(a, b)
    }

    /// `a * c` for a constant `c`.
    pub(crate) fn mul_c(&mut self, a: Value, c: f32) -> Value {
        let c = self.f(c);
        self.mul(a, c)
    }

    /// `a + c` for a constant `c`.
    pub(crate) fn add_c(&mut self, a: Value, c: f32) -> Value {
        let c = self.f(c);
        self.add(a, c)
    }

    /// `|x|`
    pub(crate) fn abs(&mut self, x: Value) -> Value {
        self.b.ins().fabs(x)
    }

    /// `-x`
    pub(crate) fn neg(&mut self, x: Value) -> Value {
        self.b.ins().fneg(x)
    }

    /// A comparison mask.
    pub(crate) fn cmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(cc, a, b)
    }

    /// A comparison with a constant right-hand side.
    pub(crate) fn cmp_c(&mut self, cc: FloatCC, a: Value, c: f32) -> Value {
        let c = self.f(c);
        self.cmp(cc, a, c)
    }

    /// Lane-wise `mask ? a : b`.
    pub(crate) fn select(&mut self, mask: Value, a: Value, b: Value) -> Value {
        match self.width {
            Width::Scalar => self.b.ins().select(mask, a, b),
            Width::X4 => {
                let mask = self.b.ins().bitcast(F32X4, MemFlagsData::new(), mask);
                self.b.ins().bitselect(mask, a, b)
            }
        }
    }

    /// Lane-wise `a | b` of two masks.
    pub(crate) fn mask_or(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().bor(a, b)
    }

    /// `a > b ? a : b` (one `maxps`): a NaN in either operand gives `b`. For clamping
    /// where NaN must pass (`b` = the value); not ONNX `Max`, see [`Lanes::max_nan`].
    pub(crate) fn max(&mut self, a: Value, b: Value) -> Value {
        let gt = self.cmp(FloatCC::GreaterThan, a, b);
        self.select(gt, a, b)
    }

    /// `a < b ? a : b` (one `minps`): a NaN in either operand gives `b`.
    pub(crate) fn min(&mut self, a: Value, b: Value) -> Value {
        let lt = self.cmp(FloatCC::LessThan, a, b);
        self.select(lt, a, b)
    }

    /// The interpreter's NaN-propagating `Max`: `a > b || a is NaN ? a : b` (so a NaN
    /// in either operand is the result, and a tie such as `max(+0, -0)` gives `b`).
    pub(crate) fn max_nan(&mut self, a: Value, b: Value) -> Value {
        let gt = self.cmp(FloatCC::GreaterThan, a, b);
        let nan = self.cmp(FloatCC::Unordered, a, a);
        let pick_a = self.mask_or(gt, nan);
        self.select(pick_a, a, b)
    }

    /// The interpreter's ReduceMax step: `x` replaces the running `acc` when
    /// `x > acc`, `x` is NaN, or they tie and `x` is +0 — so NaN propagates and the
    /// result does not depend on the order of the elements (lanes, unrolling) except
    /// for which NaN a row with several NaN payloads gives.
    pub(crate) fn max_reduce(&mut self, x: Value, acc: Value) -> Value {
        let gt = self.cmp(FloatCC::GreaterThan, x, acc);
        let nan = self.cmp(FloatCC::Unordered, x, x);
        let tie = self.cmp(FloatCC::Equal, x, acc);
        let bits = self.bits_of(x);
        let zero = self.i(0);
        let positive = self
            .b
            .ins()
            .icmp(IntCC::SignedGreaterThanOrEqual, bits, zero);
        let tie_positive = self.b.ins().band(tie, positive);
        let pick = self.mask_or(gt, nan);
        let pick = self.mask_or(pick, tie_positive);
        self.select(pick, x, acc)
    }

    /// The interpreter's NaN-propagating `Min`: `a < b || a is NaN ? a : b`.
    pub(crate) fn min_nan(&mut self, a: Value, b: Value) -> Value {
        let lt = self.cmp(FloatCC::LessThan, a, b);
        let nan = self.cmp(FloatCC::Unordered, a, a);
        let pick_a = self.mask_or(lt, nan);
        self.select(pick_a, a, b)
    }

    /// Horner evaluation `((c0·x + c1)·x + c2)…`, coefficients highest degree first.
    pub(crate) fn horner(&mut self, x: Value, coeffs: &[f32]) -> Value {
        let mut acc = self.f(coeffs[0]);
        for &c in &coeffs[1..] {
            let c = self.f(c);
            acc = self.fma(acc, x, c);
        }
        acc
    }
}
