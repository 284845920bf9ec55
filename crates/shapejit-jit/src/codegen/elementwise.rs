//! The loop nest of an elementwise kernel.
//!
//! Outer dims are counted loops computing each buffer's row pointer from the index and
//! the folded stride. The innermost dim is vectorized when every input is contiguous
//! (stride 1) or broadcast (stride 0) along it: an f32x4 loop unrolled 4× (1× for
//! transcendental-heavy programs, see `lanes::unroll_for`),
//! then straight-line remaining vectors and a scalar tail (both folded from the trip
//! count), or — for a runtime count — a scalar remainder loop. Otherwise a strided
//! scalar loop runs.
//!
//! **Invariant:** each element of each output is written exactly once, after all
//! inputs of that element (and of its vector group) were loaded, so an output may
//! alias an input that has the output's own layout (in-place epilogues).

use cranelift_codegen::ir::types::{F32, I64};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::function::Params;
use super::lanes::{Lanes, VECTOR_LANES, Width, mem_flags, unroll_for};
use super::loops::{Cursor, TripCount, counted_loop};
use super::program::emit_program;
use crate::layout::LoopNest;
use crate::program::Program;

const F32_BYTES: usize = 4;

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
    };
    cx.level(b, 0, &bases);
}

struct Nest<'a> {
    nest: &'a LoopNest,
    program: &'a Program,
    n_inputs: usize,
    outer: Value,
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
        let unroll = unroll_for(self.program.weight());
        let chunk = unroll * VECTOR_LANES;
        let chunk_bytes = (chunk * F32_BYTES) as i64;
        let main = match count {
            TripCount::Const(n) => TripCount::Const(n / chunk as u64),
            TripCount::Runtime(n) => {
                TripCount::Runtime(b.ins().ushr_imm_u(n, chunk.trailing_zeros() as i64))
            }
        };
        counted_loop(b, main, &mut |b, _| {
            for u in 0..unroll {
                self.group(
                    b,
                    Width::X4,
                    &splats,
                    &cursors,
                    (u * VECTOR_LANES * F32_BYTES) as i32,
                );
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

    /// Computes one group (one element or one vector) at byte `offset` from the cursors.
    fn group(
        &self,
        b: &mut FunctionBuilder,
        width: Width,
        splats: &[Option<(Value, Value)>],
        cursors: &[Option<Cursor>],
        offset: i32,
    ) {
        let addrs: Vec<Option<Value>> = cursors
            .iter()
            .map(|c| c.as_ref().map(|c| c.get(b)))
            .collect();
        let mut l = Lanes { b, width };
        let mut input = |l: &mut Lanes, id: crate::program::InputId| {
            let k = id.0 as usize;
            match (splats[k], addrs[k]) {
                (Some((scalar, vector)), _) => match l.width {
                    Width::Scalar => scalar,
                    Width::X4 => vector,
                },
                // Invariant: every input has either a splat (stride 0) or a cursor.
                (None, addr) => l.load(addr.expect("input has a cursor"), offset),
            }
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
