//! The loop nest of an elementwise kernel.
//!
//! Outer dims are counted loops computing each buffer's row pointer from the index and
//! the folded stride. The innermost dim is vectorized when every input is contiguous
//! (stride 1) or broadcast (stride 0) along it: an f32x4 loop unrolled 4× (1× for
//! transcendental-heavy programs, see `lanes::unroll_for`),
//! then straight-line remaining vectors and a scalar tail (both folded from the trip
//! count), or — for a runtime count — a scalar remainder loop. Otherwise a strided
//! scalar loop runs. A program with several transcendentals runs its main loop in
//! stages over a tile of [`STAGE_TILE`] vectors ([`super::stages`]).
//!
//! **Invariant:** each element of each output is written exactly once, after all
//! inputs of that element (and of its vector group) were loaded, so an output may
//! alias an input that has the output's own layout (in-place epilogues).

use cranelift_codegen::ir::types::{F32, F32X4, I32X4, I64};
use cranelift_codegen::ir::{InstBuilder, StackSlot, StackSlotData, StackSlotKind, Value};
use cranelift_frontend::FunctionBuilder;

use super::function::Params;
use super::lanes::{Lanes, VECTOR_LANES, Width, input_value, mem_flags, unroll_for};
use super::loops::{Cursor, TripCount, counted_loop, cursor_addrs};
use super::program::{emit_op, emit_ops, emit_program};
use super::stages::StagePlan;
use crate::layout::LoopNest;
use crate::program::{InputId, Op, Program};

const F32_BYTES: usize = 4;
/// Bytes of one f32x4 vector.
const VECTOR_BYTES: usize = VECTOR_LANES * F32_BYTES;
/// Vectors per main-loop iteration of a staged program (a power of two).
const STAGE_TILE: usize = 8;

/// Emits the whole kernel body.
pub(crate) fn emit_elementwise(
    b: &mut FunctionBuilder,
    params: &Params,
    nest: &LoopNest,
    program: &Program,
    n_inputs: usize,
) {
    let n_outputs = program.outputs.len();
    let mut bases: Vec<Value> = (0..n_inputs).map(|k| params.input_ptr(b, k)).collect();
    bases.extend((0..n_outputs).map(|k| params.output_ptr(b, k)));
    let cx = Nest {
        nest,
        program,
        n_inputs,
        outer: params.outer,
        stages: StagePlan::new(program),
    };
    cx.level(b, 0, &bases);
}

struct Nest<'a> {
    nest: &'a LoopNest,
    program: &'a Program,
    n_inputs: usize,
    outer: Value,
    stages: Option<StagePlan>,
}

impl Nest<'_> {
    fn trip_count(&self, d: usize) -> TripCount {
        if d == 0 && self.nest.family {
            TripCount::Runtime(self.outer)
        } else {
            TripCount::Const(self.nest.dims[d] as u64)
        }
    }

    fn level(&self, b: &mut FunctionBuilder, d: usize, bases: &[Value]) {
        if d + 1 == self.nest.dims.len() {
            self.inner(b, bases);
            return;
        }
        let count = self.trip_count(d);
        counted_loop(b, count, &mut |b, i| {
            let ptrs: Vec<Value> = bases
                .iter()
                .zip(&self.nest.strides)
                .map(|(&base, strides)| offset_ptr(b, base, i, strides[d]))
                .collect();
            self.level(b, d + 1, &ptrs);
        });
    }

    fn inner(&self, b: &mut FunctionBuilder, bases: &[Value]) {
        let d = self.nest.dims.len() - 1;
        let strides: Vec<usize> = self.nest.strides.iter().map(|s| s[d]).collect();
        let vectorizable = strides[..self.n_inputs].iter().all(|&s| s <= 1);
        let count = self.trip_count(d);
        if vectorizable {
            self.inner_vector(b, bases, &strides, count);
        } else {
            self.inner_strided(b, bases, &strides, count);
        }
    }

    /// Every input has stride 0 or 1 along the inner dim; outputs have stride 1.
    fn inner_vector(
        &self,
        b: &mut FunctionBuilder,
        bases: &[Value],
        strides: &[usize],
        count: TripCount,
    ) {
        // Broadcast inputs: one load per row, splat once.
        let splats: Vec<Option<(Value, Value)>> = (0..self.n_inputs)
            .map(|k| {
                (strides[k] == 0).then(|| {
                    let scalar = b.ins().load(F32, mem_flags(), bases[k], 0);
                    let vector = b.ins().splat(cranelift_codegen::ir::types::F32X4, scalar);
                    (scalar, vector)
                })
            })
            .collect();
        let cursors: Vec<Option<Cursor>> = bases
            .iter()
            .zip(strides)
            .map(|(&base, &s)| (s == 1).then(|| Cursor::new(b, base)))
            .collect();
        let unroll = match self.stages {
            Some(_) => STAGE_TILE,
            None => unroll_for(self.program.weight()),
        };
        let tile = self.stages.as_ref().map(|plan| {
            // Invariant: a tile is rows × 8 vectors × 16 bytes, a few KiB at most.
            let bytes = (plan.rows.max(1) * STAGE_TILE * VECTOR_BYTES) as u32;
            b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, bytes, 4))
        });
        let chunk = unroll * VECTOR_LANES;
        let chunk_bytes = (chunk * F32_BYTES) as i64;
        let main = match count {
            TripCount::Const(n) => TripCount::Const(n / chunk as u64),
            TripCount::Runtime(n) => {
                TripCount::Runtime(b.ins().ushr_imm_u(n, chunk.trailing_zeros() as i64))
            }
        };
        counted_loop(b, main, &mut |b, _| {
            match (&self.stages, tile) {
                (Some(plan), Some(tile)) => self.staged(b, plan, tile, &splats, &cursors),
                _ => {
                    for u in 0..unroll {
                        let offset = (u * VECTOR_BYTES) as i32;
                        self.group(b, Width::X4, &splats, &cursors, offset);
                    }
                }
            }
            bump_all(b, &cursors, chunk_bytes);
        });
        match count {
            TripCount::Const(n) => {
                let rest = (n % chunk as u64) as usize;
                let full = rest / VECTOR_LANES;
                for v in 0..full {
                    self.group(
                        b,
                        Width::X4,
                        &splats,
                        &cursors,
                        (v * VECTOR_LANES * F32_BYTES) as i32,
                    );
                }
                let tail_start = full * VECTOR_LANES;
                for t in tail_start..rest {
                    self.group(b, Width::Scalar, &splats, &cursors, (t * F32_BYTES) as i32);
                }
            }
            TripCount::Runtime(n) => {
                let rest = b.ins().band_imm_u(n, (chunk - 1) as i64);
                counted_loop(b, TripCount::Runtime(rest), &mut |b, _| {
                    self.group(b, Width::Scalar, &splats, &cursors, 0);
                    bump_all(b, &cursors, F32_BYTES as i64);
                });
            }
        }
    }

    /// Some input is strided along the inner dim: scalar loop, every cursor bumped by
    /// its own stride.
    fn inner_strided(
        &self,
        b: &mut FunctionBuilder,
        bases: &[Value],
        strides: &[usize],
        count: TripCount,
    ) {
        let splats: Vec<Option<(Value, Value)>> = (0..self.n_inputs)
            .map(|k| {
                (strides[k] == 0).then(|| {
                    let scalar = b.ins().load(F32, mem_flags(), bases[k], 0);
                    (scalar, scalar)
                })
            })
            .collect();
        let cursors: Vec<Option<Cursor>> = bases
            .iter()
            .zip(strides)
            .map(|(&base, &s)| (s != 0).then(|| Cursor::new(b, base)))
            .collect();
        counted_loop(b, count, &mut |b, _| {
            self.group(b, Width::Scalar, &splats, &cursors, 0);
            for (cursor, &s) in cursors.iter().zip(strides) {
                if let Some(c) = cursor {
                    c.bump(b, (s * F32_BYTES) as i64);
                }
            }
        });
    }

    /// Computes [`STAGE_TILE`] vectors from the cursors stage by stage: each stage
    /// reads what earlier stages left in `tile` and leaves what later ones need.
    fn staged(
        &self,
        b: &mut FunctionBuilder,
        plan: &StagePlan,
        tile: StackSlot,
        splats: &[Option<(Value, Value)>],
        cursors: &[Option<Cursor>],
    ) {
        let tile_offset = |row: usize, u: usize| ((row * STAGE_TILE + u) * VECTOR_BYTES) as i32;
        let last = plan.stages.len() - 1;
        for (s, range) in plan.stages.iter().enumerate() {
            for u in 0..STAGE_TILE {
                let offset = (u * VECTOR_BYTES) as i32;
                let addrs = cursor_addrs(b, cursors);
                let mut l = Lanes {
                    b,
                    width: Width::X4,
                };
                let mut input = |l: &mut Lanes, id: InputId| {
                    input_value(l, splats[id.0 as usize], addrs[id.0 as usize], offset)
                };
                let mut values: Vec<Option<Value>> = vec![None; self.program.ops.len()];
                for &v in &plan.live_in[s] {
                    let op = self.program.ops[v];
                    values[v] = Some(match plan.tile_row[v] {
                        Some(row) => {
                            let ty = if matches!(op, Op::Compare(..)) {
                                I32X4
                            } else {
                                F32X4
                            };
                            l.b.ins().stack_load(I64, ty, tile, tile_offset(row, u))
                        }
                        // inputs and constants: read again
                        None => emit_op(&mut l, op, &values, &mut input, None),
                    });
                }
                emit_ops(
                    &mut l,
                    self.program,
                    range.clone(),
                    &mut values,
                    &mut input,
                    None,
                );
                // Invariant: the plan gives every value read after its stage a tile
                // row or (inputs, constants) none, and the loop above and emit_ops
                // define every value the stores below read.
                let value = |v: usize| values[v].expect("value defined in its stage");
                if s == last {
                    for (k, out) in self.program.outputs.iter().enumerate() {
                        let addr = addrs[self.n_inputs + k].expect("output has a cursor");
                        l.store(value(out.0 as usize), addr, offset);
                    }
                } else {
                    for v in range.clone() {
                        if let Some(row) = plan.tile_row[v] {
                            l.b.ins()
                                .stack_store(I64, value(v), tile, tile_offset(row, u));
                        }
                    }
                }
            }
        }
    }

    /// Computes one group (one element or one vector) at byte `offset` from the cursors.
    fn group(
        &self,
        b: &mut FunctionBuilder,
        width: Width,
        splats: &[Option<(Value, Value)>],
        cursors: &[Option<Cursor>],
        offset: i32,
    ) {
        let addrs = cursor_addrs(b, cursors);
        let mut l = Lanes { b, width };
        let mut input = |l: &mut Lanes, id: InputId| {
            input_value(l, splats[id.0 as usize], addrs[id.0 as usize], offset)
        };
        let results = emit_program(&mut l, self.program, &mut input, None);
        for (k, value) in results.into_iter().enumerate() {
            // Invariant: outputs are contiguous, so they always have a cursor.
            let addr = addrs[self.n_inputs + k].expect("output has a cursor");
            l.store(value, addr, offset);
        }
    }
}

fn bump_all(b: &mut FunctionBuilder, cursors: &[Option<Cursor>], bytes: i64) {
    for c in cursors.iter().flatten() {
        c.bump(b, bytes);
    }
}

/// `base + i·stride·4` (just `base` for stride 0).
fn offset_ptr(b: &mut FunctionBuilder, base: Value, i: Value, stride: usize) -> Value {
    if stride == 0 {
        return base;
    }
    let scaled = b.ins().imul_imm_u(i, (stride * F32_BYTES) as i64);
    debug_assert_eq!(b.func.dfg.value_type(scaled), I64);
    b.ins().iadd(base, scaled)
}
