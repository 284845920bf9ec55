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
//! **Invariant:** each output row is written by pass A and re-read only by later
//! passes of the same row, so rows are independent and outputs never alias inputs.

use cranelift_codegen::ir::types::{F32, F32X4};
use cranelift_codegen::ir::{InstBuilder, Value};
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
    Sum,
    Max,
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
        RowOp::Softmax | RowOp::LogSoftmax | RowOp::Max => Fold::Max,
        RowOp::LayerNorm { .. } | RowOp::Sum | RowOp::Mean => Fold::Sum,
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
            let result = if plan.op == RowOp::Mean {
                let c = scalar(b, inv_len);
                b.ins().fmul(acc_a, c)
            } else {
                acc_a
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
    let identity = match fold {
        Some(Fold::Max) => f32::NEG_INFINITY,
        _ => 0.0,
    };
    let init = b.ins().f32const(identity);
    let init_v = b.ins().splat(F32X4, init);
    let unroll = unroll_for(weight);
    let vec_accs: Vec<Variable> = (0..unroll)
        .map(|_| {
            let v = b.declare_var(F32X4);
            b.def_var(v, init_v);
            v
        })
        .collect();
    let scalar_acc = b.declare_var(F32);
    b.def_var(scalar_acc, init);

    let chunk = unroll * VECTOR_LANES;
    let mut group = |b: &mut FunctionBuilder, width: Width, off: i32, acc: Variable| {
        let addrs = cursor_addrs(b, &in_cursors);
        let out_addr = out_cursor.get(b);
        let mut l = Lanes { b, width };
        // Invariant: elem_stride is 0 (splat) or 1 (cursor), checked by validation.
        let mut input = |l: &mut Lanes, id: InputId| {
            input_value(l, splats[id.0 as usize], addrs[id.0 as usize], off)
        };
        if let Some(x) = body(&mut l, &mut input, out_addr, off) {
            let prev = l.b.use_var(acc);
            let next = match fold {
                Some(Fold::Max) => l.max(x, prev),
                _ => l.add(prev, x),
            };
            l.b.def_var(acc, next);
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
    let mut acc = l.b.use_var(vec_accs[0]);
    for &v in &vec_accs[1..] {
        let x = l.b.use_var(v);
        acc = match fold {
            Fold::Max => l.max(acc, x),
            Fold::Sum => l.add(acc, x),
        };
    }
    let mut l = Lanes {
        b: l.b,
        width: Width::Scalar,
    };
    let mut total = l.b.use_var(scalar_acc);
    for lane in 0..VECTOR_LANES as u8 {
        let x = l.b.ins().extractlane(acc, lane);
        total = match fold {
            Fold::Max => l.max(total, x),
            Fold::Sum => l.add(total, x),
        };
    }
    Some(total)
}
