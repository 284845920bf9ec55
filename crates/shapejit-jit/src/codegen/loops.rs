//! Counted loops with compile-time or runtime trip counts.
//!
//! **Invariant:** a constant trip count of 0 emits nothing and of 1 emits the body once
//! with a constant index (no loop); larger counts become a bottom-tested loop. A
//! runtime count is tested for zero before the loop.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

/// How many times a loop runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TripCount {
    /// folded into the code
    Const(u64),
    /// an i64 SSA value (the family dim)
    Runtime(Value),
}

/// Emits `for i in 0..count { body(i) }` with `i: i64`. `carried` are variables the body
/// may redefine (e.g. pointers bumped per iteration); the frontend builds their phis.
pub(crate) fn counted_loop(
    b: &mut FunctionBuilder,
    count: TripCount,
    body: &mut dyn FnMut(&mut FunctionBuilder, Value),
) {
    match count {
        TripCount::Const(0) => {}
        TripCount::Const(1) => {
            let zero = b.ins().iconst(I64, 0);
            body(b, zero);
        }
        TripCount::Const(n) => {
            // Invariant: trip counts come from validated dims (< 2^62).
            let n = b.ins().iconst(I64, n as i64);
            bottom_tested(b, n, body);
        }
        TripCount::Runtime(n) => {
            let loop_entry = b.create_block();
            let done = b.create_block();
            let is_zero = b.ins().icmp_imm_u(IntCC::Equal, n, 0);
            b.ins().brif(is_zero, done, &[], loop_entry, &[]);
            b.switch_to_block(loop_entry);
            bottom_tested(b, n, body);
            b.ins().jump(done, &[]);
            b.switch_to_block(done);
        }
    }
}

fn bottom_tested(
    b: &mut FunctionBuilder,
    n: Value,
    body: &mut dyn FnMut(&mut FunctionBuilder, Value),
) {
    let counter = b.declare_var(I64);
    let zero = b.ins().iconst(I64, 0);
    b.def_var(counter, zero);
    let header = b.create_block();
    let exit = b.create_block();
    b.ins().jump(header, &[]);
    b.switch_to_block(header);
    let i = b.use_var(counter);
    body(b, i);
    let next = b.ins().iadd_imm_u(i, 1);
    b.def_var(counter, next);
    let more = b.ins().icmp(IntCC::UnsignedLessThan, next, n);
    b.ins().brif(more, header, &[], exit, &[]);
    b.switch_to_block(exit);
}

/// A pointer variable advanced by a fixed byte step per iteration.
pub(crate) struct Cursor {
    var: Variable,
}

impl Cursor {
    /// Starts a cursor at `start`.
    pub(crate) fn new(b: &mut FunctionBuilder, start: Value) -> Self {
        let var = b.declare_var(I64);
        b.def_var(var, start);
        Self { var }
    }

    /// The current address.
    pub(crate) fn get(&self, b: &mut FunctionBuilder) -> Value {
        b.use_var(self.var)
    }

    /// Advances by `bytes`.
    pub(crate) fn bump(&self, b: &mut FunctionBuilder, bytes: i64) {
        let cur = b.use_var(self.var);
        let next = b.ins().iadd_imm_s(cur, bytes);
        b.def_var(self.var, next);
    }
}

/// The current address of every cursor.
pub(crate) fn cursor_addrs(
    b: &mut FunctionBuilder,
    cursors: &[Option<Cursor>],
) -> Vec<Option<Value>> {
    cursors
        .iter()
        .map(|c| c.as_ref().map(|c| c.get(b)))
        .collect()
}
