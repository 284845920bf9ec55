//! [`Runtime`]: one thread's interpreter state — registers, the arena (one
//! 64-byte-aligned buffer per storage group), op scratch space — and the
//! dispatch loop.
//!
//! Each `op` instruction builds [`TensorRef`]s from its operand registers; when
//! [`ops::view`] applies the result aliases operand 0's storage (no copy),
//! otherwise the slot's [`OpPlan`] gives the result values (from
//! [`ops::output_types`]) and the op's [`ops::ExecPlan`], the result's storage
//! group grows if needed, and [`ops::execute_planned`] writes it. The plan is
//! made once per dtypes and layouts of the inputs (ops whose types depend on
//! an input's contents make it each time), so a steady-state op costs a
//! compare of its inputs' stamps (numbers naming register values, below), not
//! a type inference or a compare of layouts. Graph outputs are
//! copied into caller-owned tensors at `return`.
//!
//! **Invariants:**
//! - a register holds a dtype, a layout and a storage reference (a group, a
//!   constant or a graph input); the memory plan guarantees the storage is not
//!   overwritten while the register is live;
//! - result buffers are moved out of the arena while an instruction runs, so a
//!   corrupt plan that aliases a result with an operand is caught by
//!   [`TensorRef::new`]'s bounds check, never undefined behaviour;
//! - after a run with given input shapes, another run with the same shapes
//!   allocates only the returned tensors (buffers only grow, per-slot key memos,
//!   op plans and profiles are reused);
//! - every register value has a stamp: a value written (an input, a constant,
//!   a view...) gets a fresh one unless its register already holds an equal
//!   value, a plan's results get theirs when the plan is made, and copies keep
//!   it; so equal stamps mean equal dtypes, layouts and storage;
//! - an op's plan is used only for inputs of exactly the dtypes, dims and
//!   strides it was made for, and only for ops whose types and split are a
//!   function of those ([`ops::types_from_layouts`]);
//! - every buffer grows through the runtime's [`Budget`], and the returned
//!   tensors are admitted by it too: a run never holds more than
//!   `Options::max_memory`, and a size the allocator refuses is a
//!   [`RunError::OutOfMemory`], never an abort.

use crate::arena::{AlignedBuf, Budget, Denied};
use crate::copy::{CopyError, to_contiguous, to_tensor};
use crate::error::{InputError, RunError};
use crate::hook::GuardCtx;
use crate::limits::{RunOptions, Watch};
use crate::module::{Module, ModuleInner};
use crate::ops;
use crate::profile::{KeyIdx, bump};
use crate::shape_key::ShapeKey;
use crate::tensor::{Dims, Layout, Strides, TensorMut, TensorRef};
use shapejit_bytecode::{
    ConstId, DimCheck, GroupId, Instr, IoSpec, Out, Pc, Reg, RegionId, SlotId,
};
use shapejit_ir::tensor::byte_len;
use shapejit_ir::{DType, Op, Tensor};
use shapejit_kernels::conv::PackedConvWeights;
use shapejit_kernels::packed::PackedB;
use smallvec::SmallVec;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Where a register's data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Storage {
    Group(GroupId),
    Const(ConstId),
    Input(u32),
}

/// A register's value. Its `stamp` names it: a fresh stamp (see
/// [`fresh_stamp`]) is given to every value made, and only copies of
/// a value keep it, so two values with the same stamp are equal — comparing
/// stamps stands in for comparing layouts. `extent` is `layout.extent()`,
/// computed once (see [`RegVal::new`]).
#[derive(Clone, Debug)]
struct RegVal {
    dtype: DType,
    layout: Layout,
    extent: Option<(isize, isize)>,
    storage: Storage,
    stamp: u64,
}

impl RegVal {
    fn new(v: Value, stamp: u64) -> RegVal {
        RegVal {
            dtype: v.dtype,
            extent: v.layout.extent(),
            layout: v.layout,
            storage: v.storage,
            stamp,
        }
    }
}

/// A value being written to a register (it gets its stamp there, see [`Runtime::set`]).
#[derive(Debug, PartialEq)]
struct Value {
    dtype: DType,
    layout: Layout,
    storage: Storage,
}

/// A region being interpreted (profiling on or an executor installed):
/// finished when `pc == end`.
struct Pending {
    end: usize,
    slot: SlotId,
    region: RegionId,
    key: Arc<ShapeKey>,
    idx: KeyIdx,
    start: Instant,
}

/// Read-only state of one run.
struct Ctx<'a> {
    inner: &'a ModuleInner,
    inputs: &'a [Tensor],
    profile: bool,
}

type Memo = Option<(Arc<ShapeKey>, KeyIdx)>;

/// One input's part of an [`OpPlan`]'s key.
type PlanInput = (DType, Dims, Strides);

/// What an op instruction needs besides its inputs' data: its results' values
/// (dtype, contiguous layout, storage group, stamp) and bytes, and how it runs.
/// Made by [`OpPlan::make`] for inputs of the dtypes, dims and strides in
/// `inputs`; reused for as long as they repeat when `reusable` (one per slot,
/// allocated with the runtime: no heap allocation for ranks ≤ 6 and ≤ 4
/// inputs). `stamps` are those of the input values it last matched: the same
/// stamps prove the same dtypes and layouts without comparing them.
#[derive(Default)]
struct OpPlan {
    inputs: SmallVec<[PlanInput; 4]>,
    stamps: SmallVec<[u64; 4]>,
    reusable: bool,
    outs: SmallVec<[(RegVal, u128); 2]>,
    exec: ops::ExecPlan,
}

impl OpPlan {
    /// True when the plan was made for inputs of exactly these dtypes and layouts
    /// (the offsets aside) and may be reused; `stamps` are the inputs' values'.
    fn matches(&mut self, refs: &[TensorRef<'_>], stamps: &[u64]) -> bool {
        if !self.reusable {
            return false;
        }
        // (compared element by element: a slice compare calls `memcmp`)
        if self.stamps.len() == stamps.len() && self.stamps.iter().zip(stamps).all(|(a, b)| a == b)
        {
            return true;
        }
        let same = self.inputs.len() == refs.len()
            && self
                .inputs
                .iter()
                .zip(refs)
                .all(|((dtype, shape, strides), t)| {
                    *dtype == t.dtype && *shape == t.layout.shape && *strides == t.layout.strides
                });
        if same {
            self.stamps.clear();
            self.stamps.extend_from_slice(stamps);
        }
        same
    }

    /// Makes the plan for `op` on `refs` (whose values have `stamps`) writing
    /// `dsts`, its results' stamps from `fresh`; on an error the plan is left
    /// unusable.
    fn make(
        &mut self,
        op: &Op,
        refs: &[TensorRef<'_>],
        stamps: &[u64],
        dsts: &[Out],
        fresh: &mut impl FnMut() -> u64,
    ) -> Result<(), PlanError> {
        self.reusable = false;
        let types = ops::output_types(op, refs).map_err(PlanError::Op)?;
        if types.len() != dsts.len() {
            return Err(PlanError::Arity(types.len()));
        }
        self.inputs.clear();
        self.inputs.extend(
            refs.iter()
                .map(|t| (t.dtype, t.layout.shape.clone(), t.layout.strides.clone())),
        );
        self.stamps.clear();
        self.stamps.extend_from_slice(stamps);
        self.outs.clear();
        self.outs.extend(types.iter().zip(dsts).map(|(t, o)| {
            let v = Value {
                dtype: t.dtype,
                layout: Layout::contiguous(&t.shape),
                storage: Storage::Group(o.group),
            };
            (RegVal::new(v, fresh()), byte_len(t.dtype, &t.shape))
        }));
        self.exec = ops::exec_plan(op, refs, &types);
        self.reusable = ops::types_from_layouts(op);
        Ok(())
    }
}

/// Why [`OpPlan::make`] failed.
enum PlanError {
    /// the op refused its inputs
    Op(ops::OpError),
    /// the op produced this many results, not one per destination (a bug)
    Arity(usize),
}

/// A guard's result: the region outputs when a kernel ran, and the interned key.
type GuardOutcome = (Option<SmallVec<[Value; 2]>>, Memo);

/// One thread's interpreter.
pub struct Runtime {
    module: Module,
    regs: Vec<Option<RegVal>>,
    groups: Vec<AlignedBuf>,
    staging: Vec<AlignedBuf>,
    /// one per op piece (see `ops::execute_planned`)
    scratch: Vec<Mutex<ops::Scratch>>,
    symbols: Vec<Option<i64>>,
    memo: Vec<Memo>,
    /// per slot (only op slots use theirs)
    plans: Vec<OpPlan>,
    budget: Budget,
    /// the last stamp given (see [`RegVal`])
    stamps: u64,
}

/// The next stamp of `last` (the last stamp given): one no value has had.
fn fresh_stamp(last: &mut u64) -> u64 {
    *last += 1;
    *last
}

fn internal(pc: usize, message: impl Into<String>) -> RunError {
    RunError::Internal {
        pc: Pc(pc as u32),
        message: message.into(),
    }
}

#[inline]
fn data<'a>(groups: &'a [AlignedBuf], ctx: &Ctx<'a>, storage: Storage) -> Option<&'a [u8]> {
    match storage {
        Storage::Group(g) => groups.get(g.index()).map(AlignedBuf::as_slice),
        Storage::Const(c) => ctx
            .inner
            .program
            .constants
            .get(c.index())
            .map(|t| &t.bytes()[..]),
        Storage::Input(i) => ctx.inputs.get(i as usize).map(|t| &t.bytes()[..]),
    }
}

#[inline]
fn reg_val(regs: &[Option<RegVal>], r: Reg, pc: usize) -> Result<&RegVal, RunError> {
    regs.get(r.index())
        .and_then(Option::as_ref)
        .ok_or_else(|| internal(pc, format!("{r} is empty")))
}

/// Copies `v` into `r`, field by field when `r` holds a value (copies small
/// enough to be inlined, where a whole `RegVal` would be copied by `memcpy`).
fn write_reg(r: &mut Option<RegVal>, v: &RegVal) {
    match r {
        Some(old) => {
            old.dtype = v.dtype;
            old.layout = v.layout.clone();
            old.extent = v.extent;
            old.storage = v.storage;
            old.stamp = v.stamp;
        }
        None => *r = Some(v.clone()),
    }
}

/// `shape_check`: dim `other_axis` of `other` must equal dim `kept_axis` of
/// `kept` or be 1.
fn shape_check(regs: &[Option<RegVal>], check: &Instr, pc: usize) -> Result<(), RunError> {
    let Instr::ShapeCheck {
        kept,
        kept_axis,
        other,
        other_axis,
        node,
        shapes,
    } = check
    else {
        return Err(internal(pc, "not a shape_check"));
    };
    let size = |r: Reg, axis: u32| {
        let shape = &reg_val(regs, r, pc)?.layout.shape;
        shape
            .get(axis as usize)
            .copied()
            .ok_or_else(|| internal(pc, format!("{r} has shape {shape:?}, no axis {axis}")))
    };
    let (k, o) = (size(*kept, *kept_axis)?, size(*other, *other_axis)?);
    if o == k || o == 1 {
        return Ok(());
    }
    let dim = |s: &shapejit_ir::Shape, axis: u32| {
        s.dims()
            .get(axis as usize)
            .map_or_else(|| "?".to_string(), ToString::to_string)
    };
    let (kd, od) = (dim(&shapes[0], *kept_axis), dim(&shapes[1], *other_axis));
    let why = if k == 1 {
        format!(" (the output type keeps {kd}, so {od} must equal it or be 1)")
    } else {
        String::new()
    };
    Err(RunError::ShapeCheck {
        node: node.clone(),
        message: format!(
            "cannot broadcast {} with {}: dim {kd} = {k} vs {od} = {o}{why}",
            shapes[0], shapes[1]
        ),
    })
}

fn tensor_ref<'a>(
    regs: &'a [Option<RegVal>],
    groups: &'a [AlignedBuf],
    ctx: &Ctx<'a>,
    r: Reg,
    pc: usize,
) -> Result<TensorRef<'a>, RunError> {
    tensor_of(reg_val(regs, r, pc)?, groups, ctx, r, pc)
}

/// The tensor register `r` holds, `v`.
fn tensor_of<'a>(
    v: &'a RegVal,
    groups: &'a [AlignedBuf],
    ctx: &Ctx<'a>,
    r: Reg,
    pc: usize,
) -> Result<TensorRef<'a>, RunError> {
    let bytes = data(groups, ctx, v.storage)
        .ok_or_else(|| internal(pc, format!("{r}: storage {:?} missing", v.storage)))?;
    TensorRef::with_extent(v.dtype, &v.layout, v.extent, bytes)
        .map_err(|e| internal(pc, format!("{r}: {e}")))
}

/// The tensors `srcs` hold, pushed to `refs`, and their values' stamps to
/// `stamps`. (The fast path makes no error: [`tensor_of`] tells what failed.)
#[inline]
fn operands<'a>(
    regs: &'a [Option<RegVal>],
    groups: &'a [AlignedBuf],
    ctx: &Ctx<'a>,
    srcs: &[Reg],
    pc: usize,
    refs: &mut SmallVec<[TensorRef<'a>; 4]>,
    stamps: &mut SmallVec<[u64; 4]>,
) -> Result<(), RunError> {
    for &r in srcs {
        let v = reg_val(regs, r, pc)?;
        let t = data(groups, ctx, v.storage)
            .and_then(|bytes| TensorRef::with_extent(v.dtype, &v.layout, v.extent, bytes).ok());
        refs.push(match t {
            Some(t) => t,
            None => tensor_of(v, groups, ctx, r, pc)?,
        });
        stamps.push(v.stamp);
    }
    Ok(())
}

/// The slot's interned key for these inputs, via the runtime's one-entry memo.
fn key_of(
    memo: &mut Memo,
    inner: &ModuleInner,
    slot: SlotId,
    refs: &[TensorRef<'_>],
) -> Option<(Arc<ShapeKey>, KeyIdx)> {
    if let Some((key, idx)) = memo
        && key.matches(refs)
    {
        return Some((key.clone(), *idx));
    }
    let (key, idx) = inner.profiles.get(slot.index())?.intern(ShapeKey::of(refs));
    *memo = Some((key.clone(), idx));
    Some((key, idx))
}

/// The error for a buffer the budget did not grow; `what` names who needed it.
fn denied(d: Denied, what: impl FnOnce() -> String) -> RunError {
    match d {
        Denied::Limit { bytes, limit } => RunError::MemoryLimit {
            what: what(),
            bytes,
            limit,
        },
        Denied::Refused { bytes } => RunError::OutOfMemory {
            what: what(),
            bytes,
        },
    }
}

/// `node 'NAME' (OP)` for the node that owns a slot.
fn node_label(inner: &ModuleInner, slot: SlotId, op: &str) -> String {
    let node = inner
        .program
        .slots
        .get(slot.index())
        .map(|s| s.node.as_str())
        .unwrap_or("?");
    format!("node '{node}' ({op})")
}

fn scalar_i64(t: &TensorRef<'_>) -> Option<i64> {
    if t.layout.numel() != 1 {
        return None;
    }
    match t.dtype {
        DType::I64 => t.get_flat::<i64>(0),
        DType::I32 => t.get_flat::<i32>(0).map(i64::from),
        _ => None,
    }
}

fn scalar_bool(t: &TensorRef<'_>) -> Option<bool> {
    (t.layout.numel() == 1 && t.dtype == DType::Bool)
        .then(|| t.get_flat::<bool>(0))
        .flatten()
}

/// Checks one graph input against its declaration, binding symbols.
fn check_input(
    spec: &IoSpec,
    symbols: &[String],
    t: &Tensor,
    bound: &mut [Option<i64>],
) -> Result<(), InputError> {
    let input = || spec.name.clone();
    if t.dtype() != spec.ty.dtype {
        return Err(InputError::DType {
            input: input(),
            expected: spec.ty.dtype,
            actual: t.dtype(),
        });
    }
    let shape = t.shape();
    if shape.len() != spec.dims.len() {
        return Err(InputError::Rank {
            input: input(),
            expected: spec.dims.len(),
            declared: spec.ty.shape.to_string(),
            actual: shape.len(),
            shape: shape.to_vec(),
        });
    }
    for (dim, (check, &actual)) in spec.dims.iter().zip(shape).enumerate() {
        match check {
            DimCheck::Known(n) if i64::try_from(actual) != Ok(*n) => {
                return Err(InputError::Dim {
                    input: input(),
                    dim,
                    expected: *n,
                    actual,
                });
            }
            DimCheck::Symbol(s) => {
                let slot = bound.get_mut(s.index()).ok_or(InputError::Count {
                    expected: 0,
                    actual: 0,
                })?;
                match *slot {
                    Some(b) if i64::try_from(actual) != Ok(b) => {
                        let symbol = symbols.get(s.index()).cloned().unwrap_or_default();
                        return Err(InputError::Symbol {
                            input: input(),
                            dim,
                            symbol,
                            bound: b,
                            actual,
                        });
                    }
                    Some(_) => {}
                    None => *slot = i64::try_from(actual).ok(),
                }
            }
            _ => {}
        }
    }
    for (dim, (check, &actual)) in spec.dims.iter().zip(shape).enumerate() {
        if let DimCheck::Expr(expr) = check {
            let value_of = |s: &shapejit_ir::Symbol| {
                symbols
                    .iter()
                    .position(|n| n == s.name())
                    .and_then(|i| bound.get(i).copied().flatten())
            };
            // An expression whose symbols no plain dim binds is not checked.
            if let Some(expected) = expr.eval(&value_of)
                && i64::try_from(actual) != Ok(expected)
            {
                return Err(InputError::Expr {
                    input: input(),
                    dim,
                    expr: expr.to_string(),
                    expected,
                    actual,
                });
            }
        }
    }
    Ok(())
}

impl Runtime {
    pub(crate) fn new(module: Module) -> Runtime {
        let p = &module.inner.program;
        Runtime {
            regs: vec![None; p.n_regs as usize],
            groups: (0..p.memory.n_groups())
                .map(|_| AlignedBuf::default())
                .collect(),
            staging: Vec::new(),
            scratch: (0..ops::MAX_PIECES)
                .map(|_| Mutex::new(ops::Scratch::new()))
                .collect(),
            symbols: vec![None; p.symbols.len()],
            memo: vec![None; p.slots.len()],
            plans: (0..p.slots.len()).map(|_| OpPlan::default()).collect(),
            budget: Budget::new(module.inner.options.max_memory),
            stamps: 0,
            module,
        }
    }

    /// The module this runtime runs.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Total bytes held by the arena (every storage group's buffer).
    pub fn arena_bytes(&self) -> usize {
        self.groups.iter().map(AlignedBuf::capacity).sum()
    }

    /// Runs the program on `inputs` (in declaration order); returns the outputs,
    /// owned by the caller.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        self.run_with(inputs, &RunOptions::default())
    }

    /// [`Runtime::run`] that stops with an error when `limits`' deadline passes
    /// or its token is cancelled (checked before every instruction, so at every
    /// loop back edge).
    pub fn run_with(
        &mut self,
        inputs: &[Tensor],
        limits: &RunOptions,
    ) -> Result<Vec<Tensor>, RunError> {
        let mut watch = Watch::new(limits);
        let inner = self.module.inner.clone();
        let program = &inner.program;
        if inputs.len() != program.inputs.len() {
            return Err(InputError::Count {
                expected: program.inputs.len(),
                actual: inputs.len(),
            }
            .into());
        }
        self.symbols.iter_mut().for_each(|s| *s = None);
        let ctx = Ctx {
            inner: &inner,
            inputs,
            profile: inner.options.profile,
        };
        let mut pending: Option<Pending> = None;
        let mut pc = 0usize;
        loop {
            if let Some(p) = pending.as_ref().filter(|p| p.end == pc) {
                self.finish_region(&ctx, p);
                pending = None;
            }
            watch.check(pc)?;
            let instr = program
                .instrs
                .get(pc)
                .ok_or_else(|| internal(pc, "ran past the end"))?;
            match instr {
                Instr::ShapeAssert { dst, input } => {
                    let i = input.index();
                    let (spec, t) = program
                        .inputs
                        .get(i)
                        .zip(inputs.get(i))
                        .ok_or_else(|| internal(pc, "bad input"))?;
                    check_input(spec, &program.symbols, t, &mut self.symbols)?;
                    let v = Value {
                        dtype: t.dtype(),
                        layout: Layout::contiguous(t.shape()),
                        storage: Storage::Input(i as u32),
                    };
                    self.set(*dst, v, pc)?;
                }
                Instr::LoadConst { dst, constant } => {
                    let c = program
                        .constants
                        .get(constant.index())
                        .ok_or_else(|| internal(pc, "bad constant"))?;
                    let v = Value {
                        dtype: c.dtype(),
                        layout: Layout::contiguous(c.shape()),
                        storage: Storage::Const(*constant),
                    };
                    self.set(*dst, v, pc)?;
                }
                Instr::Move { dst, src } => {
                    let v = reg_val(&self.regs, *src, pc)?;
                    let held = self
                        .regs
                        .get(dst.index())
                        .map(|d| d.as_ref().map(|d| d.stamp));
                    if held != Some(Some(v.stamp)) {
                        let v = v.clone();
                        *self
                            .regs
                            .get_mut(dst.index())
                            .ok_or_else(|| internal(pc, format!("{dst} out of range")))? = Some(v);
                    }
                }
                Instr::ShapeOf {
                    dst,
                    src,
                    start,
                    end,
                } => self.shape_of(*dst, *src, *start, *end, pc)?,
                Instr::ShapeCheck { .. } => shape_check(&self.regs, instr, pc)?,
                Instr::Op {
                    op,
                    dsts,
                    srcs,
                    slot,
                } => self.exec_op(&ctx, pc, op, dsts, srcs, *slot)?,
                Instr::ShapeGuard { slot, region, skip } => {
                    let next = pc + 1 + *skip as usize;
                    if self.guard(&ctx, pc, *slot, *region, next, &mut pending)? {
                        pc = next;
                        continue;
                    }
                }
                Instr::Jump { target } => {
                    pc = target.index();
                    continue;
                }
                Instr::JumpIfFalse { cond, target } => {
                    let t = tensor_ref(&self.regs, &self.groups, &ctx, *cond, pc)?;
                    let c = scalar_bool(&t).ok_or_else(|| RunError::Control {
                        pc: Pc(pc as u32),
                        message: format!(
                            "condition must be a one-element bool, got {}{:?}",
                            t.dtype,
                            t.shape()
                        ),
                    })?;
                    if !c {
                        pc = target.index();
                        continue;
                    }
                }
                Instr::LoopBegin { iter } => self.write_counter(iter.reg, iter.group, 0, pc)?,
                Instr::LoopCheck {
                    iter,
                    max,
                    cond,
                    exit,
                } => {
                    let control = |message: String| RunError::Control {
                        pc: Pc(pc as u32),
                        message,
                    };
                    let get = |r: Reg| tensor_ref(&self.regs, &self.groups, &ctx, r, pc);
                    let i = scalar_i64(&get(*iter)?)
                        .ok_or_else(|| control("loop counter is not an i64 scalar".into()))?;
                    let m = get(*max)?;
                    let m = scalar_i64(&m).ok_or_else(|| {
                        control(format!(
                            "loop trip count must be an integer scalar, got {}{:?}",
                            m.dtype,
                            m.shape()
                        ))
                    })?;
                    let c = get(*cond)?;
                    let c = scalar_bool(&c).ok_or_else(|| {
                        control(format!(
                            "loop condition must be a one-element bool, got {}{:?}",
                            c.dtype,
                            c.shape()
                        ))
                    })?;
                    if !(i < m && c) {
                        pc = exit.index();
                        continue;
                    }
                }
                Instr::LoopNext { iter } => {
                    let v = reg_val(&self.regs, *iter, pc)?;
                    let Storage::Group(g) = v.storage else {
                        return Err(internal(pc, "loop counter outside its group"));
                    };
                    let t = tensor_ref(&self.regs, &self.groups, &ctx, *iter, pc)?;
                    let i = scalar_i64(&t)
                        .ok_or_else(|| internal(pc, "loop counter is not an i64 scalar"))?;
                    self.write_counter(*iter, g, i + 1, pc)?;
                }
                Instr::Carry { dsts, srcs } => self.carry(&ctx, dsts, srcs, pc)?,
                Instr::ScanInit { acc, dtype, row } => {
                    let shape = self.empty_scan_shape(&program.symbols, row);
                    let v = Value {
                        dtype: *dtype,
                        layout: Layout::contiguous(&shape),
                        storage: Storage::Group(acc.group),
                    };
                    self.set(acc.reg, v, pc)?;
                }
                Instr::ScanPush { acc, src } => self.scan_push(&ctx, *acc, *src, pc)?,
                Instr::Return { srcs } => return self.outputs(&ctx, srcs, pc),
            }
            pc += 1;
        }
    }

    /// Copies the returned registers into caller-owned tensors, admitted by the
    /// budget beside the arena.
    fn outputs(&self, ctx: &Ctx<'_>, srcs: &[Reg], pc: usize) -> Result<Vec<Tensor>, RunError> {
        let specs = &ctx.inner.program.outputs;
        let mut out = Vec::with_capacity(srcs.len());
        let mut total = 0u128;
        for (i, &r) in srcs.iter().enumerate() {
            let t = tensor_ref(&self.regs, &self.groups, ctx, r, pc)?;
            let what = || {
                let name = specs.get(i).map(|s| s.name.as_str()).unwrap_or("?");
                format!("output '{name}' ({}{:?})", t.dtype, t.shape())
            };
            let bytes = byte_len(t.dtype, t.shape());
            total = total.saturating_add(bytes);
            self.budget.admit(total).map_err(|d| {
                denied(
                    match d {
                        Denied::Limit { limit, .. } => Denied::Limit { bytes, limit },
                        refused => refused,
                    },
                    what,
                )
            })?;
            let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
            let tensor = to_tensor(&t).map_err(|e| match e {
                CopyError::Refused => denied(Denied::Refused { bytes }, what),
                CopyError::Layout => internal(pc, format!("cannot copy out {r}")),
            })?;
            out.push(tensor);
        }
        Ok(out)
    }

    /// Writes `v` to `r`: a register that already holds an equal value keeps it
    /// and its stamp (so a steady state keeps every stamp), otherwise the value
    /// gets a fresh stamp.
    fn set(&mut self, r: Reg, v: Value, pc: usize) -> Result<(), RunError> {
        let reg = self
            .regs
            .get_mut(r.index())
            .ok_or_else(|| internal(pc, format!("{r} out of range")))?;
        if let Some(old) = reg
            && old.dtype == v.dtype
            && old.storage == v.storage
            && old.layout == v.layout
        {
            return Ok(());
        }
        *reg = Some(RegVal::new(v, fresh_stamp(&mut self.stamps)));
        Ok(())
    }

    fn group_mut(&mut self, g: GroupId, bytes: usize, pc: usize) -> Result<&mut [u8], RunError> {
        let buf = self
            .groups
            .get_mut(g.index())
            .ok_or_else(|| internal(pc, format!("{g} out of range")))?;
        self.budget
            .grow(buf, bytes as u128)
            .map_err(|d| denied(d, || format!("the instruction at {}", Pc(pc as u32))))?;
        Ok(&mut buf.as_mut_slice()[..bytes])
    }

    fn write_counter(&mut self, r: Reg, g: GroupId, value: i64, pc: usize) -> Result<(), RunError> {
        self.group_mut(g, 8, pc)?
            .copy_from_slice(&value.to_ne_bytes());
        self.set(
            r,
            Value {
                dtype: DType::I64,
                layout: Layout::contiguous(&[]),
                storage: Storage::Group(g),
            },
            pc,
        )
    }

    fn shape_of(
        &mut self,
        dst: Out,
        src: Reg,
        start: i64,
        end: Option<i64>,
        pc: usize,
    ) -> Result<(), RunError> {
        let shape = &reg_val(&self.regs, src, pc)?.layout.shape;
        let rank = shape.len() as i64;
        let norm = |v: i64| if v < 0 { (v + rank).max(0) } else { v.min(rank) } as usize;
        let (s, e) = (norm(start), norm(end.unwrap_or(rank)));
        let dims: SmallVec<[i64; 8]> = shape[s..e.max(s)].iter().map(|&d| d as i64).collect();
        let buf = self.group_mut(dst.group, dims.len() * 8, pc)?;
        for (chunk, d) in buf.chunks_exact_mut(8).zip(&dims) {
            chunk.copy_from_slice(&d.to_ne_bytes());
        }
        let v = Value {
            dtype: DType::I64,
            layout: Layout::contiguous(&[dims.len()]),
            storage: Storage::Group(dst.group),
        };
        self.set(dst.reg, v, pc)
    }

    fn exec_op(
        &mut self,
        ctx: &Ctx<'_>,
        pc: usize,
        op: &Op,
        dsts: &[Out],
        srcs: &[Reg],
        slot: SlotId,
    ) -> Result<(), RunError> {
        let start = ctx.profile.then(Instant::now);
        let mut bufs: SmallVec<[AlignedBuf; 2]> = SmallVec::new();
        for o in dsts {
            let g = self
                .groups
                .get_mut(o.group.index())
                .ok_or_else(|| internal(pc, format!("{} out of range", o.group)))?;
            bufs.push(std::mem::take(g));
        }
        let (memo, plan) = self
            .memo
            .get_mut(slot.index())
            .zip(self.plans.get_mut(slot.index()))
            .ok_or_else(|| internal(pc, "slot out of range"))?;
        let mut view = None;
        let result = compute(
            ctx,
            &self.regs,
            &self.groups,
            &self.scratch,
            &mut self.budget,
            &mut self.stamps,
            memo,
            plan,
            pc,
            op,
            dsts,
            srcs,
            slot,
            &mut bufs,
            &mut view,
        );
        for (o, b) in dsts.iter().zip(bufs) {
            self.groups[o.group.index()] = b;
        }
        let key = result?;
        match view {
            Some(v) => {
                let dst = dsts
                    .first()
                    .ok_or_else(|| internal(pc, "a view without a result"))?;
                self.set(dst.reg, v, pc)?;
            }
            None => {
                for (o, (v, _)) in dsts.iter().zip(&self.plans[slot.index()].outs) {
                    let r = self
                        .regs
                        .get_mut(o.reg.index())
                        .ok_or_else(|| internal(pc, format!("{} out of range", o.reg)))?;
                    // In a steady state the register already holds this value
                    // (from the last run): comparing stamps is cheaper than a copy.
                    if r.as_ref().map(|r| r.stamp) != Some(v.stamp) {
                        write_reg(r, v);
                    }
                }
            }
        }
        let counters = &ctx.inner.counters.slots[slot.index()];
        bump(&counters.executions, 1);
        if let (Some(start), Some(idx)) = (start, key) {
            let ns = start.elapsed().as_nanos() as u64;
            bump(&counters.interp_ns, ns);
            ctx.inner.profiles[slot.index()].record(idx, ns);
        }
        Ok(())
    }

    /// A region head: returns true when a compiled kernel ran the region.
    fn guard(
        &mut self,
        ctx: &Ctx<'_>,
        pc: usize,
        slot: SlotId,
        region_id: RegionId,
        next: usize,
        pending: &mut Option<Pending>,
    ) -> Result<bool, RunError> {
        let executor = ctx.inner.executor.as_ref();
        if executor.is_none() && !ctx.profile {
            return Ok(false);
        }
        let inner = ctx.inner;
        let region = inner
            .program
            .regions
            .get(region_id.index())
            .ok_or_else(|| internal(pc, "bad region"))?;
        let out_groups = &inner.region_out_groups[region_id.index()];
        let mut bufs: SmallVec<[AlignedBuf; 2]> = SmallVec::new();
        if executor.is_some() {
            for g in out_groups {
                let b = self
                    .groups
                    .get_mut(g.index())
                    .ok_or_else(|| internal(pc, format!("{g} out of range")))?;
                bufs.push(std::mem::take(b));
            }
        }
        let memo = self
            .memo
            .get_mut(slot.index())
            .ok_or_else(|| internal(pc, "slot out of range"))?;
        let budget = &mut self.budget;
        let outcome = (|| -> Result<GuardOutcome, RunError> {
            let (mut refs, mut stamps) = (SmallVec::new(), SmallVec::new());
            operands(
                &self.regs,
                &self.groups,
                ctx,
                &region.inputs,
                pc,
                &mut refs,
                &mut stamps,
            )?;
            let keyed = key_of(memo, inner, slot, &refs);
            let (Some(exec), Some((key, _))) = (executor, keyed.as_ref()) else {
                return Ok((None, keyed));
            };
            let counters = &inner.counters.slots[slot.index()];
            let Some(kernel) = exec.lookup(&GuardCtx {
                slot,
                region,
                key,
                inputs: &refs,
            }) else {
                bump(&counters.guard_misses, 1);
                return Ok((None, keyed));
            };
            let start = ctx.profile.then(Instant::now);
            let Ok(types) = kernel.output_types(&refs) else {
                return Ok((None, keyed));
            };
            if types.len() != bufs.len() {
                return Ok((None, keyed));
            }
            let mut outs: SmallVec<[TensorMut<'_>; 2]> = SmallVec::new();
            for (b, t) in bufs.iter_mut().zip(types.iter()) {
                let bytes = byte_len(t.dtype, &t.shape);
                budget.grow(b, bytes).map_err(|d| {
                    denied(d, || {
                        format!("{} (compiled)", node_label(inner, slot, "region"))
                    })
                })?;
                // Invariant: the buffer grew to `bytes`, so it fits a usize.
                let bytes = bytes as usize;
                outs.push(TensorMut {
                    dtype: t.dtype,
                    shape: &t.shape,
                    data: &mut b.as_mut_slice()[..bytes],
                });
            }
            if kernel.run(&refs, &mut outs, inner.pool()).is_err() {
                return Ok((None, keyed));
            }
            bump(&counters.kernel_hits, 1);
            bump(&counters.executions, 1);
            bump(
                if kernel.is_family() {
                    &counters.family_hits
                } else {
                    &counters.exact_hits
                },
                1,
            );
            if let Some(start) = start {
                bump(&counters.kernel_ns, start.elapsed().as_nanos() as u64);
            }
            let vals = types
                .iter()
                .zip(out_groups)
                .map(|(t, g)| Value {
                    dtype: t.dtype,
                    layout: Layout::contiguous(&t.shape),
                    storage: Storage::Group(*g),
                })
                .collect();
            Ok((Some(vals), keyed))
        })();
        for (g, b) in out_groups.iter().zip(bufs) {
            self.groups[g.index()] = b;
        }
        let (vals, keyed) = outcome?;
        if let Some(vals) = vals {
            for (&r, v) in region.outputs.iter().zip(vals) {
                self.set(r, v, pc)?;
            }
            return Ok(true);
        }
        // Here profiling is on or an executor is installed: either way the
        // interpreted region is timed (the executor's tiering needs it).
        if let Some((key, idx)) = keyed {
            *pending = Some(Pending {
                end: next,
                slot,
                region: region_id,
                key,
                idx,
                start: Instant::now(),
            });
        }
        Ok(false)
    }

    fn finish_region(&self, ctx: &Ctx<'_>, p: &Pending) {
        let ns = p.start.elapsed().as_nanos() as u64;
        let inner = ctx.inner;
        let counters = &inner.counters.slots[p.slot.index()];
        bump(&counters.executions, 1);
        bump(&counters.interp_ns, ns);
        let obs = inner.profiles[p.slot.index()].record(p.idx, ns);
        if let (Some(exec), Some(region)) = (
            inner.executor.as_ref(),
            inner.program.regions.get(p.region.index()),
        ) {
            exec.observe(p.slot, region, &p.key, obs);
        }
    }

    /// Parallel copy of `srcs` into the destinations' own groups.
    fn carry(
        &mut self,
        ctx: &Ctx<'_>,
        dsts: &[Out],
        srcs: &[Reg],
        pc: usize,
    ) -> Result<(), RunError> {
        if self.staging.len() < srcs.len() {
            self.staging.resize_with(srcs.len(), AlignedBuf::default);
        }
        let mut metas: SmallVec<[(DType, Dims, usize); 4]> = SmallVec::new();
        for (i, &r) in srcs.iter().enumerate() {
            let t = tensor_ref(&self.regs, &self.groups, ctx, r, pc)?;
            let what = || format!("the loop carry at {}", Pc(pc as u32));
            let bytes = byte_len(t.dtype, t.shape());
            let stage = &mut self.staging[i];
            self.budget
                .grow(stage, bytes)
                .map_err(|d| denied(d, what))?;
            // Invariant: the buffer grew to `bytes`, so it fits a usize.
            let bytes = bytes as usize;
            if !to_contiguous(&t, &mut stage.as_mut_slice()[..bytes]) {
                return Err(internal(pc, format!("cannot copy {r}")));
            }
            metas.push((t.dtype, t.layout.shape.clone(), bytes));
        }
        for (i, (o, (dtype, shape, bytes))) in dsts.iter().zip(metas).enumerate() {
            let buf = self
                .groups
                .get_mut(o.group.index())
                .ok_or_else(|| internal(pc, "bad group"))?;
            self.budget
                .grow(buf, bytes as u128)
                .map_err(|d| denied(d, || format!("the loop carry at {}", Pc(pc as u32))))?;
            buf.as_mut_slice()[..bytes].copy_from_slice(&self.staging[i].as_slice()[..bytes]);
            self.set(
                o.reg,
                Value {
                    dtype,
                    layout: Layout::contiguous(&shape),
                    storage: Storage::Group(o.group),
                },
                pc,
            )?;
        }
        Ok(())
    }

    /// `[0, row...]` with the row's dims evaluated under the bound symbols, or
    /// `[0]` when a dim cannot be evaluated.
    fn empty_scan_shape(&self, names: &[String], row: &shapejit_ir::Shape) -> Dims {
        let value_of = |s: &shapejit_ir::Symbol| {
            let i = names.iter().position(|n| n == s.name())?;
            self.symbols.get(i).copied().flatten()
        };
        let mut shape: Dims = SmallVec::from_slice(&[0]);
        for d in row.dims() {
            match d.eval(&value_of).and_then(|v| usize::try_from(v).ok()) {
                Some(v) => shape.push(v),
                None => return SmallVec::from_slice(&[0]),
            }
        }
        shape
    }

    fn scan_push(&mut self, ctx: &Ctx<'_>, acc: Reg, src: Reg, pc: usize) -> Result<(), RunError> {
        let a = reg_val(&self.regs, acc, pc)?;
        let Storage::Group(g) = a.storage else {
            return Err(internal(pc, "scan accumulator outside its group"));
        };
        let (acc_dtype, acc_shape) = (a.dtype, a.layout.shape.clone());
        let mut buf = std::mem::take(
            self.groups
                .get_mut(g.index())
                .ok_or_else(|| internal(pc, "bad group"))?,
        );
        let res = (|| {
            let t = tensor_ref(&self.regs, &self.groups, ctx, src, pc)?;
            let rows = acc_shape.first().copied().unwrap_or(0);
            if rows > 0 && (acc_dtype != t.dtype || acc_shape[1..] != *t.shape()) {
                return Err(RunError::Control {
                    pc: Pc(pc as u32),
                    message: format!(
                        "scan output rows must agree: earlier rows are {acc_dtype}{:?}, this one is {}{:?}",
                        &acc_shape[1..],
                        t.dtype,
                        t.shape()
                    ),
                });
            }
            let row = t.layout.numel() * t.dtype.size();
            let total = (rows as u128 + 1) * row as u128;
            self.budget
                .grow_preserving(&mut buf, total)
                .map_err(|d| denied(d, || format!("the scan output at {}", Pc(pc as u32))))?;
            // Invariant: the buffer grew to `total`, so it fits a usize.
            let total = total as usize;
            if !to_contiguous(&t, &mut buf.as_mut_slice()[rows * row..total]) {
                return Err(internal(pc, format!("cannot copy {src}")));
            }
            let mut shape: Dims = SmallVec::from_slice(&[rows + 1]);
            shape.extend_from_slice(t.shape());
            Ok(Value {
                dtype: t.dtype,
                layout: Layout::contiguous(&shape),
                storage: Storage::Group(g),
            })
        })();
        self.groups[g.index()] = buf;
        let v = res?;
        self.set(acc, v, pc)
    }
}

/// Runs one op: a view of operand 0 when possible (put in `view_out`), else
/// computes into `bufs` (the results' group buffers, moved out of the arena)
/// as `plan` says, after making it unless it matches the inputs.
#[allow(clippy::too_many_arguments)]
fn compute(
    ctx: &Ctx<'_>,
    regs: &[Option<RegVal>],
    groups: &[AlignedBuf],
    scratch: &[Mutex<ops::Scratch>],
    budget: &mut Budget,
    last_stamp: &mut u64,
    memo: &mut Memo,
    plan: &mut OpPlan,
    pc: usize,
    op: &Op,
    dsts: &[Out],
    srcs: &[Reg],
    slot: SlotId,
    bufs: &mut [AlignedBuf],
    view_out: &mut Option<Value>,
) -> Result<Option<KeyIdx>, RunError> {
    let (mut refs, mut stamps) = (SmallVec::new(), SmallVec::new());
    operands(regs, groups, ctx, srcs, pc, &mut refs, &mut stamps)?;
    let key = if ctx.profile {
        key_of(memo, ctx.inner, slot, &refs).map(|(_, idx)| idx)
    } else {
        None
    };
    let op_error = |e: ops::OpError| {
        let node = ctx
            .inner
            .program
            .slots
            .get(slot.index())
            .map(|s| s.node.clone())
            .unwrap_or_default();
        RunError::Op {
            node,
            op: op.name(),
            message: e.to_string(),
        }
    };
    if let Some(view) = ops::view(op, &refs) {
        let layout = view.map_err(op_error)?;
        let src = reg_val(regs, srcs[0], pc)?;
        *view_out = Some(Value {
            dtype: src.dtype,
            layout,
            storage: src.storage,
        });
        return Ok(key);
    }
    if !plan.matches(&refs, &stamps) {
        let mut fresh = || fresh_stamp(last_stamp);
        plan.make(op, &refs, &stamps, dsts, &mut fresh)
            .map_err(|e| match e {
                PlanError::Op(e) => op_error(e),
                PlanError::Arity(n) => internal(
                    pc,
                    format!(
                        "{} produced {n} results for {} registers",
                        op.name(),
                        dsts.len()
                    ),
                ),
            })?;
    }
    let mut outs: SmallVec<[TensorMut<'_>; 2]> = SmallVec::new();
    for (b, (v, bytes)) in bufs.iter_mut().zip(&plan.outs) {
        budget
            .grow(b, *bytes)
            .map_err(|d| denied(d, || node_label(ctx.inner, slot, op.name())))?;
        // Invariant: the buffer grew to `bytes`, so it fits a usize.
        let bytes = *bytes as usize;
        outs.push(TensorMut {
            dtype: v.dtype,
            shape: &v.layout.shape,
            data: &mut b.as_mut_slice()[..bytes],
        });
    }
    let env = ops::Env {
        pool: ctx.inner.pool(),
        packed_b: packed_b(ctx, regs, op, srcs),
        packed_conv: packed_conv(ctx, regs, op, srcs, plan.outs.first().map(|(v, _)| v)),
    };
    let pieces =
        ops::execute_planned(op, plan.exec, &refs, &mut outs, scratch, env).map_err(op_error)?;
    if pieces > 1 {
        bump(&ctx.inner.counters.global.split_ops, 1);
    }
    Ok(key)
}

/// An op's input 1 when its register holds a constant: the constant's id, its
/// tensor, and the layout the register reads it with.
fn weights_const<'r, 'a>(
    ctx: &Ctx<'a>,
    regs: &'r [Option<RegVal>],
    srcs: &[Reg],
) -> Option<(ConstId, &'a Tensor, &'r Layout)> {
    let v = regs.get(srcs.get(1)?.index())?.as_ref()?;
    let Storage::Const(id) = v.storage else {
        return None;
    };
    Some((id, ctx.inner.program.constants.get(id.index())?, &v.layout))
}

/// The packed weights of a `conv2d` whose weights are a constant read as stored.
fn packed_conv<'a>(
    ctx: &Ctx<'a>,
    regs: &[Option<RegVal>],
    op: &Op,
    srcs: &[Reg],
    out: Option<&RegVal>,
) -> Option<&'a PackedConvWeights> {
    let Op::Conv2d { groups, window, .. } = op else {
        return None;
    };
    let (id, t, l) = weights_const(ctx, regs, srcs)?;
    let contiguous = l.offset == 0 && l.shape[..] == *t.shape() && l.is_contiguous();
    let inner = ctx.inner;
    let (&[c_out, _, kh, kw], &[_, _, oh, ow]) = (t.shape(), &out?.layout.shape[..]) else {
        return None;
    };
    let win = ops::kernel_window(window, [kh, kw], [oh, ow]);
    let form = crate::weights::ConvForm {
        groups: *groups,
        strides: window.strides,
        dilations: window.dilations,
        transposed: shapejit_kernels::conv::takes_transposed(c_out / groups.max(&1), &win),
    };
    contiguous
        .then(|| inner.packed.get_conv(id, t, form, &inner.counters.global))
        .flatten()
}

/// The packed weights of a `matmul`/`gemm` whose right operand is a constant
/// matrix (its register reads the constant as stored or transposed).
fn packed_b<'a>(
    ctx: &Ctx<'a>,
    regs: &[Option<RegVal>],
    op: &Op,
    srcs: &[Reg],
) -> Option<&'a PackedB> {
    let op_transposes = match op {
        Op::MatMul | Op::MatMulBias => false,
        Op::Gemm { trans_b, .. } => *trans_b,
        _ => return None,
    };
    let (id, t, l) = weights_const(ctx, regs, srcs)?;
    let &[rows, cols] = t.shape() else {
        return None;
    };
    if l.offset != 0 || l.rank() != 2 {
        return None;
    }
    let (shape, strides) = (&l.shape[..], &l.strides[..]);
    let reg_transposes = if shape == [rows, cols] && strides == [cols as isize, 1] {
        false
    } else if shape == [cols, rows] && strides == [1, cols as isize] {
        true
    } else {
        return None;
    };
    let inner = ctx.inner;
    inner
        .packed
        .get(
            id,
            t,
            reg_transposes != op_transposes,
            &inner.counters.global,
        )
        .map(|p| &**p)
}
