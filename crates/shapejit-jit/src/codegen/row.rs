//! Row kernels: counted loops over the row grid (dim 0 at run time in family mode)
//! compute each input's row pointer from its per-dim row strides; per row, up to
//! three vectorized passes over the row (f32x4, unrolled,
//! straight-line remainder and scalar tail, all folded from the row length).
//!
//! Pass A computes the prologue per element (storing it into the output row for the
//! normalizing ops) and accumulates max or sum; pass B (softmax, log-softmax,
//! layer-norm) accumulates `e^(x−max)` or `(x−mean)²`; pass C applies the
//! normalization and the epilogue and stores. Reductions are pass A only.
//!
//! **Invariant:** the folds are the interpreter's: `reduce_sum`/`reduce_mean` add in
//! f64 (then round once to f32, a mean after dividing by the length), so a row whose
//! f32 partial sums would overflow gives the interpreter's finite result; layer norm
//! and softmax sum in f32, as the interpreter's row kernels do.
//!
//! **Invariant:** each output row is written by pass A and re-read only by later
//! passes of the same row, so rows are independent and outputs never alias inputs.

use cranelift_codegen::ir::types::{F32, F32X4, F64, F64X2, I8X16};
use cranelift_codegen::ir::{ConstantData, Endianness, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::function::Params;
use super::lanes::{Lanes, VECTOR_LANES, Width, input_value, mem_flags, unroll_for};
use super::loops::{Cursor, TripCount, counted_loop, cursor_addrs};
use super::math;
use super::program::emit_program;
use crate::program::{InputId, Program};
use crate::row::{RowInput, RowOp};

const F32_BYTES: usize = 4;

/// How a pass folds its per-element contributions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fold {
    /// an f32 sum (layer norm, softmax's denominators)
    Sum,
    /// `reduce_sum`/`reduce_mean`: an f64 sum of the f32 elements, as the interpreter's
    Sum64,
    /// softmax's row maximum: NaN dropped, as the interpreter's (a NaN makes the row
    /// NaN through its sum anyway)
    Max,
    /// ReduceMax: NaN propagates, a ±0 tie gives +0 (order-independent, as the
    /// interpreter's)
    MaxNan,
}

/// The validated pieces of a row spec codegen needs.
pub(crate) struct RowPlan<'a> {
    /// the row grid (dim 0 runtime when `family`)
    pub(crate) row_dims: &'a [usize],
    pub(crate) family: bool,
    pub(crate) row_len: usize,
    pub(crate) inputs: &'a [RowInput],
    pub(crate) prologue: &'a Program,
    pub(crate) op: RowOp,
    pub(crate) epilogue: Option<&'a Program>,
}

/// Per-row pointers.
struct RowPtrs {
    inputs: Vec<Value>,
    out: Value,
}

/// Emits the whole kernel body.
pub(crate) fn emit_row_kernel(b: &mut FunctionBuilder, params: &Params, plan: &RowPlan) {
    let inputs: Vec<Value> = (0..plan.inputs.len())
        .map(|k| params.input_ptr(b, k))
        .collect();
    let out = params.output_ptr(b, 0);
    grid_level(b, params, plan, 0, RowPtrs { inputs, out });
}

/// The loop over grid dim `d` (then the rows themselves).
fn grid_level(b: &mut FunctionBuilder, params: &Params, plan: &RowPlan, d: usize, at: RowPtrs) {
    if d == plan.row_dims.len() {
        emit_row(b, plan, &at);
        return;
    }
    let count = if d == 0 && plan.family {
        TripCount::Runtime(params.outer)
    } else {
        TripCount::Const(plan.row_dims[d] as u64)
    };
    let out_row = if plan.op.is_reduction() {
        1
    } else {
        plan.row_len
    };
    // the output is row-major over the grid
    let out_bytes = plan.row_dims[d + 1..].iter().product::<usize>() * out_row * F32_BYTES;
    counted_loop(b, count, &mut |b, i| {
        let inputs = at
            .inputs
            .iter()
            .zip(plan.inputs)
            .map(|(&base, input)| offset(b, base, i, input.row_strides[d] * F32_BYTES))
            .collect();
        let out = offset(b, at.out, i, out_bytes);
        grid_level(b, params, plan, d + 1, RowPtrs { inputs, out });
    });
}

fn offset(b: &mut FunctionBuilder, base: Value, r: Value, bytes: usize) -> Value {
    if bytes == 0 {
        return base;
    }
    let scaled = b.ins().imul_imm_u(r, bytes as i64);
    b.ins().iadd(base, scaled)
}

fn emit_row(b: &mut FunctionBuilder, plan: &RowPlan, ptrs: &RowPtrs) {
    let len = plan.row_len;
    let inv_len = 1.0 / len as f32;
    let store_prologue = !plan.op.is_reduction();
    // Pass A: prologue (+ store), fold max or sum.
    let fold_a = match plan.op {
        RowOp::Softmax | RowOp::LogSoftmax => Fold::Max,
        RowOp::Max => Fold::MaxNan,
        RowOp::LayerNorm { .. } => Fold::Sum,
        RowOp::Sum | RowOp::Mean => Fold::Sum64,
    };
    let acc_a = pass(
        b,
        plan,
        ptrs,
        Some(fold_a),
        plan.prologue.weight(),
        &mut |l, input, out_addr, off| {
            let x = emit_program(l, plan.prologue, input, None)[0];
            if store_prologue {
                l.store(x, out_addr, off);
            }
            Some(x)
        },
    )
    .expect("pass A folds");
    let scalar = |b: &mut FunctionBuilder, c: f32| b.ins().f32const(c);
    match plan.op {
        RowOp::Sum | RowOp::Mean | RowOp::Max => {
            // As the interpreter: the f64 sum (divided by the length in f64 for a
            // mean), rounded once to f32.
            let result = match plan.op {
                RowOp::Sum => b.ins().fdemote(F32, acc_a),
                RowOp::Mean => {
                    let n = b.ins().f64const(len as f64);
                    let mean = b.ins().fdiv(acc_a, n);
                    b.ins().fdemote(F32, mean)
                }
                _ => acc_a,
            };
            let mut l = Lanes {
                b,
                width: Width::Scalar,
            };
            // Invariant (validation): reduction epilogues read only inputs with element
            // stride 0, whose value for this row sits at the row pointer.
            let mut input = |l: &mut Lanes, id: InputId| l.load(ptrs.inputs[id.0 as usize], 0);
            let y = match plan.epilogue {
                Some(epi) => emit_program(&mut l, epi, &mut input, Some(result))[0],
                None => result,
            };
            l.store(y, ptrs.out, 0);
        }
        RowOp::Softmax => {
            let max = acc_a;
            let sum = pass(
                b,
                plan,
                ptrs,
                Some(Fold::Sum),
                32,
                &mut |l, _, out_addr, off| {
                    let x = l.load(out_addr, off);
                    let m = l.splat_f(max);
                    let d = l.sub(x, m);
                    let e = math::exp(l, d);
                    l.store(e, out_addr, off);
                    Some(e)
                },
            )
            .expect("pass B folds");
            let one = scalar(b, 1.0);
            let inv = b.ins().fdiv(one, sum);
            finish_pass(b, plan, ptrs, &mut |l, x| {
                let s = l.splat_f(inv);
                l.mul(x, s)
            });
        }
        RowOp::LogSoftmax => {
            let max = acc_a;
            let sum = pass(
                b,
                plan,
                ptrs,
                Some(Fold::Sum),
                32,
                &mut |l, _, out_addr, off| {
                    let x = l.load(out_addr, off);
                    let m = l.splat_f(max);
                    let d = l.sub(x, m);
                    Some(math::exp(l, d))
                },
            )
            .expect("pass B folds");
            let log_sum = math::log(
                &mut Lanes {
                    b,
                    width: Width::Scalar,
                },
                sum,
            );
            let lse = b.ins().fadd(max, log_sum);
            finish_pass(b, plan, ptrs, &mut |l, x| {
                let s = l.splat_f(lse);
                l.sub(x, s)
            });
        }
        RowOp::LayerNorm { eps } => {
            let c = scalar(b, inv_len);
            let mean = b.ins().fmul(acc_a, c);
            let var_sum = pass(
                b,
                plan,
                ptrs,
                Some(Fold::Sum),
                2,
                &mut |l, _, out_addr, off| {
                    let x = l.load(out_addr, off);
                    let m = l.splat_f(mean);
                    let d = l.sub(x, m);
                    Some(l.mul(d, d))
                },
            )
            .expect("pass B folds");
            let var = b.ins().fmul(var_sum, c);
            let e = scalar(b, eps);
            let var_eps = b.ins().fadd(var, e);
            let sd = b.ins().sqrt(var_eps);
            let one = scalar(b, 1.0);
            let rstd = b.ins().fdiv(one, sd);
            finish_pass(b, plan, ptrs, &mut |l, x| {
                let m = l.splat_f(mean);
                let r = l.splat_f(rstd);
                let d = l.sub(x, m);
                l.mul(d, r)
            });
        }
    }
}

/// Pass C: `y = normalize(out[j])`, then the epilogue, stored back.
fn finish_pass(
    b: &mut FunctionBuilder,
    plan: &RowPlan,
    ptrs: &RowPtrs,
    normalize: &mut dyn FnMut(&mut Lanes, Value) -> Value,
) {
    let weight = 2 + plan.epilogue.map_or(0, Program::weight);
    pass(
        b,
        plan,
        ptrs,
        None,
        weight,
        &mut |l, input, out_addr, off| {
            let x = l.load(out_addr, off);
            let y = normalize(l, x);
            let z = match plan.epilogue {
                Some(epi) => emit_program(l, epi, input, Some(y))[0],
                None => y,
            };
            l.store(z, out_addr, off);
            None
        },
    );
}

type Body<'a> = dyn FnMut(&mut Lanes, &mut dyn FnMut(&mut Lanes, InputId) -> Value, Value, i32) -> Option<Value>
    + 'a;

/// One pass over the row. `body(lanes, input, out_addr, offset)` computes one group
/// and returns its contribution to the fold; `weight` is its rough instruction count
/// (picks the unroll). Returns the folded scalar.
fn pass(
    b: &mut FunctionBuilder,
    plan: &RowPlan,
    ptrs: &RowPtrs,
    fold: Option<Fold>,
    weight: usize,
    body: &mut Body,
) -> Option<Value> {
    let len = plan.row_len;
    let splats: Vec<Option<(Value, Value)>> = plan
        .inputs
        .iter()
        .zip(&ptrs.inputs)
        .map(|(input, &ptr)| {
            (input.elem_stride == 0).then(|| {
                let s = b.ins().load(F32, mem_flags(), ptr, 0);
                let v = b.ins().splat(F32X4, s);
                (s, v)
            })
        })
        .collect();
    let in_cursors: Vec<Option<Cursor>> = plan
        .inputs
        .iter()
        .zip(&ptrs.inputs)
        .map(|(input, &ptr)| (input.elem_stride == 1).then(|| Cursor::new(b, ptr)))
        .collect();
    let out_cursor = Cursor::new(b, ptrs.out);
    let unroll = unroll_for(weight);
    let wide = fold == Some(Fold::Sum64);
    let vec_accs: Vec<Acc> = (0..unroll).map(|_| Acc::new(b, fold, true)).collect();
    let scalar_acc = Acc::new(b, fold, false);

    let chunk = unroll * VECTOR_LANES;
    let mut group = |b: &mut FunctionBuilder, width: Width, off: i32, acc: Acc| {
        let addrs = cursor_addrs(b, &in_cursors);
        let out_addr = out_cursor.get(b);
        let mut l = Lanes { b, width };
        // Invariant: elem_stride is 0 (splat) or 1 (cursor), checked by validation.
        let mut input = |l: &mut Lanes, id: InputId| {
            input_value(l, splats[id.0 as usize], addrs[id.0 as usize], off)
        };
        if let Some(x) = body(&mut l, &mut input, out_addr, off) {
            acc.fold_in(&mut l, fold, x);
        }
    };
    let bump = |b: &mut FunctionBuilder, bytes: i64| {
        for c in in_cursors.iter().flatten() {
            c.bump(b, bytes);
        }
        out_cursor.bump(b, bytes);
    };
    counted_loop(b, TripCount::Const((len / chunk) as u64), &mut |b, _| {
        for (u, &acc) in vec_accs.iter().enumerate() {
            group(b, Width::X4, (u * VECTOR_LANES * F32_BYTES) as i32, acc);
        }
        bump(b, (chunk * F32_BYTES) as i64);
    });
    let rest = len % chunk;
    for (v, &acc) in vec_accs.iter().enumerate().take(rest / VECTOR_LANES) {
        group(b, Width::X4, (v * VECTOR_LANES * F32_BYTES) as i32, acc);
    }
    for t in (rest / VECTOR_LANES) * VECTOR_LANES..rest {
        group(b, Width::Scalar, (t * F32_BYTES) as i32, scalar_acc);
    }
    let fold = fold?;
    // Combine the vector accumulators, then their lanes, then the scalar tail.
    let mut l = Lanes {
        b,
        width: Width::X4,
    };
    let mut acc = l.b.use_var(vec_accs[0].low);
    let highs = vec_accs.iter().filter_map(|a| a.high);
    let rest: Vec<Variable> = vec_accs[1..].iter().map(|a| a.low).chain(highs).collect();
    for v in rest {
        let x = l.b.use_var(v);
        acc = step(&mut l, Some(fold), x, acc);
    }
    let mut l = Lanes {
        b: l.b,
        width: Width::Scalar,
    };
    let mut total = l.b.use_var(scalar_acc.low);
    let lanes = if wide { 2 } else { VECTOR_LANES as u8 };
    for lane in 0..lanes {
        let x = l.b.ins().extractlane(acc, lane);
        total = step(&mut l, Some(fold), x, total);
    }
    Some(total)
}

/// One accumulator of a pass: f32 (×4 in vector code), or for [`Fold::Sum64`] f64
/// (vector code: `low` sums lanes 0–1 and `high` lanes 2–3, each an f64x2).
#[derive(Clone, Copy)]
struct Acc {
    low: Variable,
    high: Option<Variable>,
}

impl Acc {
    /// A fresh accumulator holding the fold's identity.
    fn new(b: &mut FunctionBuilder, fold: Option<Fold>, vector: bool) -> Acc {
        if fold == Some(Fold::Sum64) {
            let zero = b.ins().f64const(0.0);
            if !vector {
                return Acc {
                    low: var(b, F64, zero),
                    high: None,
                };
            }
            let zeros = b.ins().splat(F64X2, zero);
            return Acc {
                low: var(b, F64X2, zeros),
                high: Some(var(b, F64X2, zeros)),
            };
        }
        let identity = match fold {
            Some(Fold::Max | Fold::MaxNan) => f32::NEG_INFINITY,
            _ => 0.0,
        };
        let init = b.ins().f32const(identity);
        let init = if vector {
            b.ins().splat(F32X4, init)
        } else {
            init
        };
        Acc {
            low: var(b, if vector { F32X4 } else { F32 }, init),
            high: None,
        }
    }

    /// Folds `x` (f32 at the lanes' width) in.
    fn fold_in(self, l: &mut Lanes, fold: Option<Fold>, x: Value) {
        if fold == Some(Fold::Sum64) {
            let parts = match (l.width, self.high) {
                (Width::X4, Some(high)) => {
                    let (lo, hi) = promote_halves(l, x);
                    vec![(self.low, lo), (high, hi)]
                }
                _ => vec![(self.low, l.b.ins().fpromote(F64, x))],
            };
            for (var, wide) in parts {
                let prev = l.b.use_var(var);
                let next = l.add(prev, wide);
                l.b.def_var(var, next);
            }
            return;
        }
        let prev = l.b.use_var(self.low);
        let next = step(l, fold, x, prev);
        l.b.def_var(self.low, next);
    }
}

/// A new variable of type `ty` holding `init`.
fn var(b: &mut FunctionBuilder, ty: Type, init: Value) -> Variable {
    let v = b.declare_var(ty);
    b.def_var(v, init);
    v
}

/// The fold's step: `acc` with the next contribution `x`.
fn step(l: &mut Lanes, fold: Option<Fold>, x: Value, acc: Value) -> Value {
    match fold {
        Some(Fold::Max) => l.max(x, acc),
        Some(Fold::MaxNan) => l.max_reduce(x, acc),
        _ => l.add(acc, x),
    }
}

/// An f32x4's lanes 0–1 and 2–3, each promoted (exactly) to an f64x2.
fn promote_halves(l: &mut Lanes, x: Value) -> (Value, Value) {
    let little = MemFlagsData::new().with_endianness(Endianness::Little);
    let low = l.b.ins().fvpromote_low(x);
    let bytes = l.b.ins().bitcast(I8X16, little, x);
    // bytes 8..16 (lanes 2 and 3) into both halves
    let mask: Vec<u8> = (8..16).chain(8..16).collect();
    let mask = l.b.func.dfg.immediates.push(ConstantData::from(mask));
    let moved = l.b.ins().shuffle(bytes, bytes, mask);
    let moved = l.b.ins().bitcast(F32X4, little, moved);
    (low, l.b.ins().fvpromote_low(moved))
}
