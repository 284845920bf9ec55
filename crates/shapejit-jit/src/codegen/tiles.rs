//! Tile drivers: an elementwise program run tile by tile through the micro-kernels.
//!
//! Cranelift's x64 vectors are 128-bit; the micro-kernels of
//! `shapejit_kernels::micro` run at the CPU's full width. A tiled kernel therefore
//! does no arithmetic itself: the generated code is the loop nest (every trip count and
//! stride folded) and, per tile of the innermost dim, one call per program op through
//! the [`Table`] the kernel receives as its fourth argument. Intermediate values live
//! in stack tiles small enough to stay in L1 between the calls, so a chain of `n` ops
//! reads its inputs and writes its outputs once instead of `n` times.
//!
//! [`TilePlan::new`] decides whether a program can run this way: every op must have a
//! micro-kernel (`Unary`'s functions and the six `Binary` ops), every input must be
//! contiguous or broadcast along the inner dim, and the inner dim must be long enough
//! (at least [`MIN_INNER`] elements) for a call per op and tile to pay. Otherwise the
//! kernel keeps Cranelift's own vector loop.
//!
//! **Invariant:** per element, the calls compute exactly the program's ops in program
//! order with the interpreter's own kernels, so a tiled kernel is bit-identical to the
//! interpreter at the same CPU level.
//!
//! **Invariant:** an output may alias an input of its own layout: no output is written
//! before the last step of the tile that reads an input (values computed earlier stay
//! in a stack tile and are copied out at the end of the tile).

use cranelift_codegen::ir::types::{F32, I64};
use cranelift_codegen::ir::{
    AbiParam, InstBuilder, MemFlagsData, SigRef, Signature, StackSlot, StackSlotData,
    StackSlotKind, Value,
};
use cranelift_frontend::FunctionBuilder;
use shapejit_kernels::Unary as MicroUnary;
use shapejit_kernels::micro::{Binary as MicroBinary, Table};

use super::function::Params;
use super::lanes::mem_flags;
use super::loops::{TripCount, counted_loop};
use crate::layout::LoopNest;
use crate::program::{BinaryOp, Op, Program, UnaryOp};

const F32_BYTES: usize = 4;
/// Shortest inner dim a tiled kernel is used for: below it the per-call cost of the
/// micro-kernels outweighs their width.
pub(crate) const MIN_INNER: usize = 64;
/// Bytes of stack tiles a kernel may keep (well inside a 48 KiB L1 data cache).
const TILE_BUDGET_BYTES: usize = 32 << 10;
/// Longest tile, in elements (a call per op and tile should do enough work).
const MAX_TILE: usize = 1024;
/// Shortest tile a plan accepts (more live values than the budget allows at this
/// length keep the Cranelift loop).
const MIN_TILE: usize = 128;

/// Where a value of the program lives during one tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    /// the tile of input `k` (contiguous along the inner dim)
    Input(usize),
    /// stack tile `s`
    Slot(usize),
    /// the tile of output `o`
    Output(usize),
}

/// One micro-kernel call per tile.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    Unary {
        k: MicroUnary,
        src: Loc,
        dst: Loc,
    },
    Binary {
        op: MicroBinary,
        a: Loc,
        b: Loc,
        dst: Loc,
    },
    Copy {
        src: Loc,
        dst: Loc,
    },
}

#[cfg(test)]
impl Step {
    fn reads(&self) -> Vec<Loc> {
        match *self {
            Step::Unary { src, .. } | Step::Copy { src, .. } => vec![src],
            Step::Binary { a, b, .. } => vec![a, b],
        }
    }
}

/// How a program runs tile by tile.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TilePlan {
    /// elements per tile
    tile: usize,
    /// stack tiles
    slots: usize,
    /// stack tiles filled once per call with a constant
    consts: Vec<(usize, f32)>,
    /// (input, stack tile): inputs broadcast along the inner dim, filled per row
    broadcasts: Vec<(usize, usize)>,
    /// the calls of one tile, in order
    steps: Vec<Step>,
}

fn micro_unary(op: UnaryOp) -> Option<MicroUnary> {
    Some(match op {
        UnaryOp::Neg => MicroUnary::Neg,
        UnaryOp::Abs => MicroUnary::Abs,
        UnaryOp::Sqrt => MicroUnary::Sqrt,
        UnaryOp::Reciprocal => MicroUnary::Reciprocal,
        UnaryOp::Exp => MicroUnary::Exp,
        UnaryOp::Log => MicroUnary::Log,
        UnaryOp::Tanh => MicroUnary::Tanh,
        UnaryOp::Sigmoid => MicroUnary::Sigmoid,
        UnaryOp::Silu => MicroUnary::Silu,
        UnaryOp::Erf => MicroUnary::Erf,
        UnaryOp::GeluErf => MicroUnary::GeluErf,
        UnaryOp::GeluTanh => MicroUnary::GeluTanh,
        UnaryOp::Relu => MicroUnary::Relu,
        UnaryOp::LeakyRelu { .. }
        | UnaryOp::Elu { .. }
        | UnaryOp::Clip { .. }
        | UnaryOp::PowI(_) => return None,
    })
}

fn micro_binary(op: BinaryOp) -> Option<MicroBinary> {
    Some(match op {
        BinaryOp::Add => MicroBinary::Add,
        BinaryOp::Sub => MicroBinary::Sub,
        BinaryOp::Mul => MicroBinary::Mul,
        BinaryOp::Div => MicroBinary::Div,
        BinaryOp::Max => MicroBinary::Max,
        BinaryOp::Min => MicroBinary::Min,
        BinaryOp::Pow => return None,
    })
}

/// Stack tiles handed out and taken back as values die.
#[derive(Default)]
struct Slots {
    free: Vec<usize>,
    count: usize,
}

impl Slots {
    fn take(&mut self) -> usize {
        self.free.pop().unwrap_or_else(|| {
            self.count += 1;
            self.count - 1
        })
    }
}

impl TilePlan {
    /// The plan for `program` over inputs with the given inner-dim strides, or `None`
    /// when the program should keep the Cranelift loop. `inner` is the inner trip
    /// count (`None`: a runtime count).
    pub(crate) fn new(
        program: &Program,
        inner_strides: &[usize],
        inner: Option<usize>,
    ) -> Option<TilePlan> {
        if inner.is_some_and(|n| n < MIN_INNER) || inner_strides.iter().any(|&s| s > 1) {
            return None;
        }
        let n_ops = program.ops.len();
        let end = n_ops; // "used by the end-of-tile copies"
        let mut last_use = vec![0usize; n_ops];
        for (i, op) in program.ops.iter().enumerate() {
            for v in op.operands() {
                last_use[v.0 as usize] = i;
            }
        }
        for v in &program.outputs {
            last_use[v.0 as usize] = end;
        }
        // The output each computed value is written to directly, if any: the first
        // output naming it, when no later op reads an input (aliasing, see the module
        // docs) — inputs read by end-of-tile copies count as read at the end.
        let reads_input_at = |i: usize| {
            program.ops[i].operands().iter().any(|v| {
                matches!(program.ops[v.0 as usize], Op::Input(id) if inner_strides[id.0 as usize] == 1)
            })
        };
        let copies_input = program
            .outputs
            .iter()
            .any(|v| matches!(program.ops[v.0 as usize], Op::Input(_)));
        let last_input_read = if copies_input {
            end
        } else {
            (0..n_ops).rev().find(|&i| reads_input_at(i)).unwrap_or(0)
        };
        let mut direct: Vec<Option<usize>> = vec![None; n_ops];
        for (o, v) in program.outputs.iter().enumerate() {
            let i = v.0 as usize;
            let computed = matches!(program.ops[i], Op::Unary(..) | Op::Binary(..));
            if computed && i >= last_input_read && direct[i].is_none() {
                direct[i] = Some(o);
            }
        }

        // Tiles filled outside the tile loop (constants once per call, broadcast
        // inputs once per row) come first and are never reused.
        let mut slots = Slots::default();
        let mut loc: Vec<Option<Loc>> = vec![None; n_ops];
        let mut permanent = vec![false; n_ops];
        let mut consts = Vec::new();
        let mut broadcasts = Vec::new();
        for (i, op) in program.ops.iter().enumerate() {
            match *op {
                Op::Input(id) if inner_strides[id.0 as usize] == 0 => {
                    broadcasts.push((id.0 as usize, slots.take()));
                }
                Op::Const(c) => consts.push((slots.take(), c)),
                _ => continue,
            }
            permanent[i] = true;
        }
        let (mut next_const, mut next_broadcast) = (consts.iter(), broadcasts.iter());
        let mut steps = Vec::new();
        for (i, op) in program.ops.iter().enumerate() {
            let here = match *op {
                Op::Input(id) if inner_strides[id.0 as usize] == 1 => Loc::Input(id.0 as usize),
                Op::Input(_) => Loc::Slot(next_broadcast.next()?.1),
                Op::Const(_) => Loc::Slot(next_const.next()?.0),
                Op::Unary(u, x) => {
                    let k = micro_unary(u)?;
                    let src = loc[x.0 as usize]?;
                    let dst = place(i, &direct, &last_use, &permanent, &loc, op, &mut slots);
                    steps.push(Step::Unary { k, src, dst });
                    dst
                }
                Op::Binary(bop, a, b) => {
                    let op2 = micro_binary(bop)?;
                    let (la, lb) = (loc[a.0 as usize]?, loc[b.0 as usize]?);
                    let dst = place(i, &direct, &last_use, &permanent, &loc, op, &mut slots);
                    steps.push(Step::Binary {
                        op: op2,
                        a: la,
                        b: lb,
                        dst,
                    });
                    dst
                }
                Op::RowResult | Op::Compare(..) | Op::Select { .. } => return None,
            };
            loc[i] = Some(here);
        }
        for (o, v) in program.outputs.iter().enumerate() {
            let i = v.0 as usize;
            if direct[i] != Some(o) {
                steps.push(Step::Copy {
                    src: loc[i]?,
                    dst: Loc::Output(o),
                });
            }
        }
        let slots = slots.count;
        let mut tile = MAX_TILE;
        while slots * tile * F32_BYTES > TILE_BUDGET_BYTES && tile > MIN_TILE {
            tile /= 2;
        }
        if slots * tile * F32_BYTES > TILE_BUDGET_BYTES {
            return None;
        }
        if let Some(n) = inner {
            tile = tile.min(n);
        }
        Some(TilePlan {
            tile,
            slots,
            consts,
            broadcasts,
            steps,
        })
    }
}

/// The destination of op `i`: its direct output, or a stack tile — reusing one an
/// operand releases here (the kernels allow `dst == src`).
fn place(
    i: usize,
    direct: &[Option<usize>],
    last_use: &[usize],
    permanent: &[bool],
    loc: &[Option<Loc>],
    op: &Op,
    slots: &mut Slots,
) -> Loc {
    for v in op.operands() {
        let v = v.0 as usize;
        if let (Some(Loc::Slot(s)), false, true) = (loc[v], permanent[v], last_use[v] == i) {
            // Two operands may be the same value: release its tile once.
            if !slots.free.contains(&s) {
                slots.free.push(s);
            }
        }
    }
    match direct[i] {
        Some(o) => Loc::Output(o),
        None => Loc::Slot(slots.take()),
    }
}

/// The signatures of the three kernel shapes, imported into the function.
struct Sigs {
    unary: SigRef,
    binary: SigRef,
    fill: SigRef,
}

fn import_sigs(b: &mut FunctionBuilder, params: &Params) -> Sigs {
    let mut sig = |args: &[cranelift_codegen::ir::Type]| {
        let mut s = Signature::new(params.call_conv);
        s.params.extend(args.iter().map(|&t| AbiParam::new(t)));
        b.import_signature(s)
    };
    Sigs {
        unary: sig(&[I64, I64, I64]),
        binary: sig(&[I64, I64, I64, I64]),
        fill: sig(&[I64, I64, F32]),
    }
}

/// Emits the whole body of a tiled kernel.
pub(crate) fn emit_tiled(
    b: &mut FunctionBuilder,
    params: &Params,
    nest: &LoopNest,
    plan: &TilePlan,
    n_inputs: usize,
    n_outputs: usize,
) {
    let sigs = import_sigs(b, params);
    let tile_bytes = (plan.tile * F32_BYTES) as u32;
    // Invariant: a plan keeps slots · tile · 4 within TILE_BUDGET_BYTES.
    let stack = b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        (plan.slots as u32).max(1) * tile_bytes,
        6,
    ));
    let cx = Driver {
        nest,
        plan,
        n_inputs,
        table: params.table,
        outer: params.outer,
        stack,
        sigs,
    };
    for &(s, c) in &plan.consts {
        let dst = cx.slot_addr(b, s);
        let len = b.ins().iconst(I64, plan.tile as i64);
        let value = b.ins().f32const(c);
        cx.call(b, Table::fill_offset(), cx.sigs.fill, &[dst, len, value]);
    }
    let mut bases: Vec<Value> = (0..n_inputs).map(|k| params.input_ptr(b, k)).collect();
    bases.extend((0..n_outputs).map(|k| params.output_ptr(b, k)));
    cx.level(b, 0, &bases);
}

struct Driver<'a> {
    nest: &'a LoopNest,
    plan: &'a TilePlan,
    n_inputs: usize,
    table: Value,
    outer: Value,
    stack: StackSlot,
    sigs: Sigs,
}

impl Driver<'_> {
    fn trip_count(&self, d: usize) -> TripCount {
        if d == 0 && self.nest.family {
            TripCount::Runtime(self.outer)
        } else {
            TripCount::Const(self.nest.dims[d] as u64)
        }
    }

    fn slot_addr(&self, b: &mut FunctionBuilder, s: usize) -> Value {
        // Invariant: the stack tiles total at most TILE_BUDGET_BYTES.
        let offset = (s * self.plan.tile * F32_BYTES) as i32;
        b.ins().stack_addr(I64, self.stack, offset)
    }

    /// Calls the table entry at byte `offset` with `args`.
    fn call(&self, b: &mut FunctionBuilder, offset: usize, sig: SigRef, args: &[Value]) {
        // Invariant: table offsets are a few hundred bytes.
        let f = b.ins().load(
            I64,
            MemFlagsData::trusted().with_readonly(),
            self.table,
            offset as i32,
        );
        b.ins().call_indirect(sig, f, args);
    }

    fn level(&self, b: &mut FunctionBuilder, d: usize, bases: &[Value]) {
        if d + 1 == self.nest.dims.len() {
            self.row(b, bases);
            return;
        }
        counted_loop(b, self.trip_count(d), &mut |b, i| {
            let ptrs: Vec<Value> = bases
                .iter()
                .zip(&self.nest.strides)
                .map(|(&base, strides)| {
                    let s = strides[d];
                    if s == 0 {
                        base
                    } else {
                        let step = b.ins().imul_imm_u(i, (s * F32_BYTES) as i64);
                        b.ins().iadd(base, step)
                    }
                })
                .collect();
            self.level(b, d + 1, &ptrs);
        });
    }

    /// One row of the inner dim: broadcast tiles, then full tiles, then the rest.
    fn row(&self, b: &mut FunctionBuilder, bases: &[Value]) {
        let tile = self.plan.tile;
        for &(k, s) in &self.plan.broadcasts {
            let x = b.ins().load(F32, mem_flags(), bases[k], 0);
            let dst = self.slot_addr(b, s);
            let len = b.ins().iconst(I64, tile as i64);
            self.call(b, Table::fill_offset(), self.sigs.fill, &[dst, len, x]);
        }
        let d = self.nest.dims.len() - 1;
        let tile_bytes = (tile * F32_BYTES) as i64;
        match self.trip_count(d) {
            TripCount::Const(n) => {
                let n = n as usize;
                counted_loop(b, TripCount::Const((n / tile) as u64), &mut |b, t| {
                    let offset = b.ins().imul_imm_u(t, tile_bytes);
                    let len = b.ins().iconst(I64, tile as i64);
                    self.tile(b, bases, offset, len);
                });
                if !n.is_multiple_of(tile) {
                    let offset = b.ins().iconst(I64, ((n - n % tile) * F32_BYTES) as i64);
                    let len = b.ins().iconst(I64, (n % tile) as i64);
                    self.tile(b, bases, offset, len);
                }
            }
            TripCount::Runtime(n) => {
                // A tile need not be a power of two: an exact kernel's plan clips it
                // to its inner dim, and a tiled exact kernel whose shape folds to one
                // dim runs that dim as its runtime count (a shift here once ran
                // `n >> tz(68)` tiles of 68 past the end of the buffers).
                let full = b.ins().udiv_imm_u(n, tile as i64);
                counted_loop(b, TripCount::Runtime(full), &mut |b, t| {
                    let offset = b.ins().imul_imm_u(t, tile_bytes);
                    let len = b.ins().iconst(I64, tile as i64);
                    self.tile(b, bases, offset, len);
                });
                let whole = b.ins().imul_imm_u(full, tile as i64);
                let rest = b.ins().isub(n, whole);
                let has_rest =
                    b.ins()
                        .icmp_imm_u(cranelift_codegen::ir::condcodes::IntCC::NotEqual, rest, 0);
                let then = b.create_block();
                let done = b.create_block();
                b.ins().brif(has_rest, then, &[], done, &[]);
                b.switch_to_block(then);
                let offset = b.ins().imul_imm_u(full, tile_bytes);
                self.tile(b, bases, offset, rest);
                b.ins().jump(done, &[]);
                b.switch_to_block(done);
            }
        }
    }

    /// The calls of one tile starting `offset` bytes into the row, `len` elements.
    fn tile(&self, b: &mut FunctionBuilder, bases: &[Value], offset: Value, len: Value) {
        let addr = |b: &mut FunctionBuilder, l: Loc| match l {
            Loc::Input(k) => b.ins().iadd(bases[k], offset),
            Loc::Output(o) => b.ins().iadd(bases[self.n_inputs + o], offset),
            Loc::Slot(s) => self.slot_addr(b, s),
        };
        for step in &self.plan.steps {
            match *step {
                Step::Unary { k, src, dst } => {
                    let args = [addr(b, src), addr(b, dst), len];
                    self.call(b, Table::unary_offset(k), self.sigs.unary, &args);
                }
                Step::Binary { op, a, b: rhs, dst } => {
                    let args = [addr(b, a), addr(b, rhs), addr(b, dst), len];
                    self.call(b, Table::binary_offset(op), self.sigs.binary, &args);
                }
                Step::Copy { src, dst } => {
                    let args = [addr(b, src), addr(b, dst), len];
                    self.call(b, Table::copy_offset(), self.sigs.unary, &args);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain() -> Program {
        // y = sigmoid(x·w + c) · x, the last op straight into the output
        let mut p = Program::new();
        let x = p.input(0);
        let w = p.input(1);
        let c = p.constant(0.5);
        let m = p.binary(BinaryOp::Mul, x, w);
        let a = p.binary(BinaryOp::Add, m, c);
        let s = p.unary(UnaryOp::Sigmoid, a);
        let y = p.binary(BinaryOp::Mul, s, x);
        p.output(y);
        p
    }

    #[test]
    fn a_chain_reuses_tiles_and_writes_its_last_op_directly() {
        let plan = TilePlan::new(&chain(), &[1, 1], Some(4096)).unwrap();
        // the constant's tile plus one for the running value, reused in place
        assert_eq!(plan.slots, 2);
        assert_eq!(plan.tile, MAX_TILE);
        assert_eq!(plan.consts, vec![(0, 0.5)]);
        assert_eq!(
            plan.steps.last(),
            Some(&Step::Binary {
                op: MicroBinary::Mul,
                a: Loc::Slot(1),
                b: Loc::Input(0),
                dst: Loc::Output(0)
            })
        );
        assert!(plan.steps.iter().all(|s| !matches!(s, Step::Copy { .. })));
    }

    #[test]
    fn an_output_computed_before_an_input_is_read_waits_for_the_tile_end() {
        // out0 = exp(x); out1 = out0 + x: out0 may alias x, so it is copied last
        let mut p = Program::new();
        let x = p.input(0);
        let e = p.unary(UnaryOp::Exp, x);
        let s = p.binary(BinaryOp::Add, e, x);
        p.output(e);
        p.output(s);
        let plan = TilePlan::new(&p, &[1], Some(256)).unwrap();
        let writes: Vec<Loc> = plan
            .steps
            .iter()
            .map(|s| match *s {
                Step::Unary { dst, .. } | Step::Binary { dst, .. } | Step::Copy { dst, .. } => dst,
            })
            .collect();
        assert_eq!(writes, vec![Loc::Slot(0), Loc::Output(1), Loc::Output(0)]);
        // no step reads an input after an earlier step wrote an output
        for (i, step) in plan.steps.iter().enumerate() {
            let reads_input = step.reads().iter().any(|l| matches!(l, Loc::Input(_)));
            let wrote_output = writes[..i].iter().any(|l| matches!(l, Loc::Output(_)));
            assert!(
                !(reads_input && wrote_output),
                "step {i} of {:?}",
                plan.steps
            );
        }
    }

    #[test]
    fn broadcast_inputs_get_a_tile_and_strided_ones_no_plan() {
        let plan = TilePlan::new(&chain(), &[1, 0], Some(100)).unwrap();
        assert_eq!(plan.broadcasts, vec![(1, 0)]);
        assert_eq!(plan.tile, 100);
        assert!(TilePlan::new(&chain(), &[1, 2], Some(4096)).is_none());
        assert!(TilePlan::new(&chain(), &[1, 1], Some(MIN_INNER - 1)).is_none());
        assert!(TilePlan::new(&chain(), &[1, 1], None).is_some());
    }

    #[test]
    fn ops_without_a_micro_kernel_keep_the_cranelift_loop() {
        let mut p = Program::new();
        let x = p.input(0);
        let y = p.unary(UnaryOp::Clip { min: 0.0, max: 6.0 }, x);
        p.output(y);
        assert!(TilePlan::new(&p, &[1], Some(4096)).is_none());
    }
}
