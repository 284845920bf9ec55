//! [`JitKernel`]: compiled code for a region, as the interpreter's [`RegionKernel`].
//!
//! **Invariant:** `run` is only called with inputs that passed the kernel's guard
//! (the interpreter calls `lookup`, then `output_types` and `run` with the same
//! inputs); it still goes through the checked `run` of the `shapejit-jit` kernel, so
//! a mismatch is an `OpError`, never an out-of-bounds access.

use super::guard::rank_and_batch;
use super::policy::too_slow;
use super::translate::MatMulOperands;
use crate::{
    AttentionKernel, AttentionOperands, CompiledCode, ElementwiseKernel, MatMulKernel, RowKernel,
    ShapeMode, in_order,
};
use shapejit_ir::DType;
use shapejit_kernels::elementwise::copy;
use shapejit_kernels::{StridedShape, View, ViewMut};
use shapejit_vm::hook::RegionKernel;
use shapejit_vm::ops::{OpError, OutType, OutTypes, broadcast_shapes, pieces_for};
use shapejit_vm::pool::Pool;
use shapejit_vm::tensor::{Dims, TensorMut, TensorRef};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// How a kernel derives its output shape from a call's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeRule {
    /// the compiled shape
    Exact,
    /// the (common) shape of the inputs (weak guard)
    SameAsInputs,
    /// the compiled shape with dim 0 = the call's batch
    Family,
}

/// The compiled code of one region kind.
#[derive(Debug)]
pub enum Code {
    /// an elementwise kernel
    Elementwise(ElementwiseKernel),
    /// a row kernel
    Row(RowKernel),
    /// a GEMM + epilogue and where its operands come from
    MatMul(MatMulKernel, MatMulOperands),
    /// a fused attention (precompiled head kernel; any shape fitting its spec) and
    /// the mode its guard was requested in
    Attention(AttentionKernel, ShapeMode),
}

/// A compiled region kernel.
#[derive(Debug)]
pub struct JitKernel {
    code: Code,
    out_shape: Dims,
    rule: ShapeRule,
    /// interpreted time per input element when the kernel was requested, ps
    baseline_ps_per_elem: u64,
    runs: AtomicU64,
    run_ns: AtomicU64,
    run_elems: AtomicU64,
    /// fastest run so far, ps per input element
    min_ps_per_elem: AtomicU64,
}

impl JitKernel {
    /// Wraps compiled code producing one output (elementwise: several) of
    /// `out_shape` under `rule`. `baseline_ps_per_elem` is the interpreted time per
    /// input element of the key that made the kernel worth compiling.
    pub fn new(
        code: Code,
        out_shape: Dims,
        rule: ShapeRule,
        baseline_ps_per_elem: u64,
    ) -> JitKernel {
        JitKernel {
            code,
            out_shape,
            rule,
            baseline_ps_per_elem,
            runs: AtomicU64::new(0),
            run_ns: AtomicU64::new(0),
            run_elems: AtomicU64::new(0),
            min_ps_per_elem: AtomicU64::new(u64::MAX),
        }
    }

    /// The interpreted time per input element this kernel is measured against, ps.
    pub fn baseline_ps_per_elem(&self) -> u64 {
        self.baseline_ps_per_elem
    }

    /// Mean wall time of one run so far, ns (0 before the first run).
    pub fn mean_run_ns(&self) -> u64 {
        self.run_ns.load(Ordering::Relaxed) / self.runs.load(Ordering::Relaxed).max(1)
    }

    /// True when the kernel's fastest run so far is more than 1.1× slower per element
    /// than the fastest interpreted run of its key (checked every `CHECK_EVERY` runs).
    pub fn slower_than_interpreter(&self) -> bool {
        too_slow(
            self.runs.load(Ordering::Relaxed),
            self.min_ps_per_elem.load(Ordering::Relaxed),
            self.baseline_ps_per_elem,
        )
    }

    /// The generated code (none for attention, which runs a precompiled kernel).
    fn compiled(&self) -> Option<&CompiledCode> {
        match &self.code {
            Code::Elementwise(k) => Some(k.code()),
            Code::Row(k) => Some(k.code()),
            Code::MatMul(k, _) => Some(k.code()),
            Code::Attention(..) => None,
        }
    }

    /// Bytes of machine code.
    pub fn code_bytes(&self) -> usize {
        self.compiled().map_or(0, CompiledCode::code_bytes)
    }

    /// Wall time the compilation took.
    pub fn compile_time(&self) -> std::time::Duration {
        self.compiled()
            .map_or(std::time::Duration::ZERO, CompiledCode::compile_time)
    }

    fn n_outputs(&self) -> usize {
        match &self.code {
            Code::Elementwise(k) => k.n_outputs(),
            Code::Row(_) | Code::MatMul(..) | Code::Attention(..) => 1,
        }
    }

    fn shape_for(&self, inputs: &[TensorRef<'_>]) -> Result<(Dims, usize), OpError> {
        if let Code::Attention(k, _) = &self.code {
            let s = k.spec();
            let shape = |i: usize| {
                inputs
                    .get(i)
                    .map(TensorRef::shape)
                    .ok_or_else(|| kernel_error(format!("missing attention input {i}")))
            };
            let out = AttentionKernel::out_shape(shape(s.q)?, shape(s.k)?, shape(s.v)?)
                .map_err(kernel_error)?;
            return Ok((out.into_iter().collect(), 0));
        }
        if let Code::MatMul(_, ops) = &self.code {
            let shape = matmul_shape(inputs, ops)?;
            let outer = shape.first().copied().unwrap_or(1);
            return Ok((shape, outer));
        }
        Ok(match self.rule {
            ShapeRule::Exact => (self.out_shape.clone(), 0),
            ShapeRule::SameAsInputs => (
                inputs
                    .first()
                    .map(|t| t.shape().iter().copied().collect())
                    .unwrap_or_default(),
                0,
            ),
            ShapeRule::Family => {
                let (_, batch) = rank_and_batch(inputs.iter().map(|t| t.shape()));
                let mut shape = self.out_shape.clone();
                shape[0] = batch;
                (shape, batch)
            }
        })
    }
}

thread_local! {
    /// A matmul's left operand gathered into rows (grown once per thread).
    static GATHERED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Least product rows of a matmul piece (keeps register blocks full).
const MIN_SPLIT_ROWS: usize = 16;

fn kernel_error(message: String) -> OpError {
    OpError::Unsupported {
        op: "jit_kernel",
        message,
    }
}

/// `[batch…, m, n]` of a matmul region's product for these inputs.
fn matmul_shape(inputs: &[TensorRef<'_>], ops: &MatMulOperands) -> Result<Dims, OpError> {
    let (a, b) = match (inputs.get(ops.a), inputs.get(ops.b)) {
        (Some(a), Some(b)) => (a.shape(), b.shape()),
        _ => return Err(kernel_error("missing matmul operand".to_string())),
    };
    if a.len() < 2 || b.len() < 2 {
        return Err(kernel_error("matmul operands must be matrices".to_string()));
    }
    let m = if ops.trans_a {
        a[a.len() - 1]
    } else {
        a[a.len() - 2]
    };
    let n = if ops.trans_b {
        b[b.len() - 2]
    } else {
        b[b.len() - 1]
    };
    let mut shape = broadcast_shapes(
        &shapejit_ir::Op::MatMul,
        &[&a[..a.len() - 2], &b[..b.len() - 2]],
    )?;
    shape.push(m);
    shape.push(n);
    Ok(shape)
}

/// The view of a GEMM operand, transposed if asked and broadcast to `full`.
pub(super) fn operand_view<'a>(
    t: &TensorRef<'a>,
    trans: bool,
    full: &[usize],
) -> Result<View<'a, f32>, OpError> {
    let err = |e: shapejit_kernels::KernelError| kernel_error(e.to_string());
    let data = t
        .elems::<f32>()
        .ok_or_else(|| kernel_error("matmul operand is not f32".to_string()))?;
    let mut geom =
        StridedShape::new(&t.layout.shape, &t.layout.strides, t.layout.offset).map_err(err)?;
    if trans {
        let r = geom.rank();
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        geom = geom.permuted(&perm).map_err(err)?;
    }
    let geom = geom.broadcast_to(full).map_err(err)?;
    View::new(data, geom).map_err(err)
}

/// `a [batch…, m, k]` as `[batch·m, k]` when its leading dims collapse to one stride.
fn flattened_rows<'a>(t: &TensorRef<'a>) -> Option<View<'a, f32>> {
    let (shape, strides) = (&t.layout.shape, &t.layout.strides);
    let r = shape.len();
    let mut rows = shape[r - 2];
    let row_stride = strides[r - 2];
    for d in (0..r - 2).rev() {
        if shape[d] != 1 && strides[d] != strides[d + 1] * shape[d + 1] as isize {
            return None;
        }
        rows *= shape[d];
    }
    let geom = StridedShape::new(
        &[rows, shape[r - 1]],
        &[row_stride, strides[r - 1]],
        t.layout.offset,
    )
    .ok()?;
    View::new(t.elems::<f32>()?, geom).ok()
}

fn input_slice<'a>(t: &TensorRef<'a>, k: usize) -> Result<&'a [f32], OpError> {
    t.elems::<f32>()
        .and_then(|all| all.get(t.layout.offset..))
        .ok_or_else(|| kernel_error(format!("input {k} is not an f32 view")))
}

impl RegionKernel for JitKernel {
    fn output_types(&self, inputs: &[TensorRef<'_>]) -> Result<OutTypes, OpError> {
        let (shape, _) = self.shape_for(inputs)?;
        Ok((0..self.n_outputs())
            .map(|_| OutType {
                dtype: DType::F32,
                shape: shape.clone(),
            })
            .collect())
    }

    fn run(
        &self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
        pool: Option<&Pool>,
    ) -> Result<(), OpError> {
        let start = Instant::now();
        let res = self.run_timed(inputs, outputs, pool);
        let elems: usize = inputs.iter().map(|t| t.layout.numel()).sum();
        let ns = start.elapsed().as_nanos() as u64;
        self.run_ns.fetch_add(ns, Ordering::Relaxed);
        let ps = ns.saturating_mul(1000) / (elems.max(1) as u64);
        self.min_ps_per_elem.fetch_min(ps, Ordering::Relaxed);
        self.run_elems.fetch_add(elems as u64, Ordering::Relaxed);
        self.runs.fetch_add(1, Ordering::Relaxed);
        res
    }

    fn is_family(&self) -> bool {
        match &self.code {
            Code::Elementwise(k) => k.mode() == ShapeMode::Family,
            Code::Row(k) => k.mode() == ShapeMode::Family,
            Code::MatMul(k, _) => k.mode() == ShapeMode::Family,
            Code::Attention(_, mode) => *mode == ShapeMode::Family,
        }
    }
}

impl JitKernel {
    fn run_timed(
        &self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
        pool: Option<&Pool>,
    ) -> Result<(), OpError> {
        let (shape, outer) = self.shape_for(inputs)?;
        let mut outs: SmallVec<[&mut [f32]; 4]> = outputs
            .iter_mut()
            .enumerate()
            .map(|(k, t)| {
                t.elems_mut::<f32>()
                    .ok_or_else(|| kernel_error(format!("output {k} is not f32")))
            })
            .collect::<Result<_, _>>()?;
        let jit_err = |e: crate::JitError| kernel_error(e.to_string());
        match &self.code {
            Code::Elementwise(k) => {
                let slices: SmallVec<[&[f32]; 8]> = inputs
                    .iter()
                    .enumerate()
                    .map(|(i, t)| input_slice(t, i))
                    .collect::<Result<_, _>>()?;
                match pool {
                    Some(pool) => {
                        let numel = shape.iter().product();
                        let dim0 = shape.first().copied().unwrap_or(1);
                        let pieces = pieces_for(numel, k.cost_ps(), dim0);
                        k.run_pieces(&slices, &mut outs, outer, pieces, &|n, f| pool.run(n, f))
                    }
                    None => k.run(&slices, &mut outs, outer),
                }
                .map_err(jit_err)
            }
            Code::Row(k) => {
                let slices: SmallVec<[&[f32]; 8]> = inputs
                    .iter()
                    .enumerate()
                    .map(|(i, t)| input_slice(t, i))
                    .collect::<Result<_, _>>()?;
                let numel: usize = shape.iter().product();
                let rows = if k.is_reduction() {
                    numel
                } else {
                    numel / k.row_len().max(1)
                };
                let out = outs
                    .first_mut()
                    .ok_or_else(|| kernel_error("no output".to_string()))?;
                k.run(
                    &slices,
                    out,
                    if k.mode() == ShapeMode::Family {
                        rows
                    } else {
                        0
                    },
                )
                .map_err(jit_err)
            }
            Code::MatMul(k, ops) => {
                let r = shape.len();
                let mut a_full = shape.clone();
                let mut b_full = shape.clone();
                let ka = {
                    let a = inputs[ops.a].shape();
                    if ops.trans_a {
                        a[a.len() - 2]
                    } else {
                        a[a.len() - 1]
                    }
                };
                a_full[r - 1] = ka;
                b_full[r - 2] = ka;
                // Shared weights: one [batch·m, k] × [k, n] GEMM instead of one per
                // batch; an `a` whose rows do not collapse (a transposed view) is
                // gathered into this thread's buffer first, so the product still runs
                // once, on the packed weights.
                let b_shape = inputs[ops.b].shape();
                let shared = b_shape.len() == 2 && r > 2 && !ops.trans_a;
                let rows: usize = shape[..r - 1].iter().product();
                let extras: SmallVec<[&[f32]; 4]> = ops
                    .extras
                    .iter()
                    .map(|&i| input_slice(&inputs[i], i))
                    .collect::<Result<_, _>>()?;
                let out = outs
                    .first_mut()
                    .ok_or_else(|| kernel_error("no output".to_string()))?;
                // With a pool: the interpreter's matmul rule (20·k ps per output
                // element, at least MIN_SPLIT_ROWS rows a piece). Without one the
                // product runs whole (a piece's rows equal the whole product's).
                let run = |a: &View<f32>, b: &View<f32>, out: &mut [f32]| match pool {
                    Some(pool) => {
                        let numel = rows * shape[r - 1];
                        let extent = rows / MIN_SPLIT_ROWS;
                        let pieces = pieces_for(numel, 20 * ka as u128, extent);
                        let split = (pieces, pool.threads());
                        k.run_pieces(a, b, &extras, out, outer, split, &|n, f| pool.run(n, f))
                    }
                    None => k.run(a, b, &extras, out, outer),
                };
                let flat = shared.then(|| flattened_rows(&inputs[ops.a])).flatten();
                match flat {
                    Some(a) => {
                        let b = operand_view(&inputs[ops.b], ops.trans_b, &[ka, shape[r - 1]])?;
                        run(&a, &b, out).map_err(jit_err)
                    }
                    None if shared => {
                        let b = operand_view(&inputs[ops.b], ops.trans_b, &[ka, shape[r - 1]])?;
                        let a = operand_view(&inputs[ops.a], false, &a_full)?;
                        GATHERED.with(|cell| {
                            let mut buf = cell.borrow_mut();
                            buf.clear();
                            buf.resize(rows * ka, 0.0);
                            let flat_shape = [rows, ka];
                            let err =
                                |e: shapejit_kernels::KernelError| kernel_error(e.to_string());
                            let mut dst =
                                ViewMut::contiguous(&mut buf[..], a.shape()).map_err(err)?;
                            copy(&mut dst, &a).map_err(err)?;
                            let a = View::contiguous(&buf[..], &flat_shape)
                                .map_err(|e| kernel_error(e.to_string()))?;
                            run(&a, &b, out).map_err(jit_err)
                        })
                    }
                    None => {
                        let a = operand_view(&inputs[ops.a], ops.trans_a, &a_full)?;
                        let b = operand_view(&inputs[ops.b], ops.trans_b, &b_full)?;
                        run(&a, &b, out).map_err(jit_err)
                    }
                }
            }
            Code::Attention(k, _) => {
                let s = k.spec();
                let view = |i: usize, full: &[usize]| operand_view(&inputs[i], false, full);
                let (q, kk, v) = (
                    view(s.q, inputs[s.q].shape())?,
                    view(s.k, inputs[s.k].shape())?,
                    view(s.v, inputs[s.v].shape())?,
                );
                let r = shape.len();
                let mut scores = shape.clone();
                scores[r - 1] = kk.shape()[r - 1];
                let mask = s.mask.map(|i| view(i, &scores)).transpose()?;
                let scale = match s.scale {
                    Some((i, _)) => Some(
                        *input_slice(&inputs[i], i)?
                            .first()
                            .ok_or_else(|| kernel_error("empty attention scale".to_string()))?,
                    ),
                    None => None,
                };
                let ops = AttentionOperands {
                    q: &q,
                    k: &kk,
                    v: &v,
                    mask: mask.as_ref(),
                    scale,
                };
                let out = outs
                    .first_mut()
                    .ok_or_else(|| kernel_error("no output".to_string()))?;
                let pieces = AttentionKernel::pieces(q.shape(), kk.shape(), v.shape());
                let spread = |n: usize, f: &(dyn Fn(usize) + Sync)| match pool {
                    Some(pool) => pool.run(n, f),
                    None => in_order(n, f),
                };
                k.run(&ops, out, pieces, &spread).map_err(jit_err)
            }
        }
    }
}
