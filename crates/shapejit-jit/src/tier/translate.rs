//! Translation of a bytecode [`Region`] plus the shape key it runs on into a
//! `shapejit-jit` spec.
//!
//! Elementwise regions become one [`ElementwiseSpec`]: every region input is a kernel
//! input whose strides are its own strides aligned to the iteration shape (a broadcast
//! or size-1 dim gets stride 0), every op becomes a program op, every region output a
//! kernel output. Everything the kernel tier cannot do yet — non-f32 inputs, casts,
//! logical ops, negative strides, outputs of different shapes, other region kinds — is
//! a [`Untranslatable`] error: the slot stays on the interpreter.
//!
//! **Invariant:** a translated program computes, per element of the iteration shape,
//! exactly the ops of the region in their bytecode order, so the kernel agrees with the
//! interpreter up to the ops' documented tolerances.

use super::guard::BatchRule;
use crate::{
    AttentionKernel, AttentionSpec, BinaryOp, CmpOp, ElementwiseSpec, InputLayout, MAX_ROW_DIMS,
    MatMulEpilogueSpec, Op, Program as JitProgram, RowInput, RowOp, RowSpec, ScaleOp, ShapeMode,
    UnaryOp, ValueId,
};
use shapejit_bytecode::{Instr, Out, Program, Reg, Region, RegionKind};
use shapejit_ir::{BinaryOp as IrBinary, DType, Op as IrOp, ReduceOp, UnaryOp as IrUnary};
use shapejit_vm::ops::broadcast_shapes;
use shapejit_vm::shape_key::ShapeKey;
use shapejit_vm::tensor::Dims;
use std::collections::HashMap;

/// Why a region cannot be compiled (it stays interpreted).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("region {region}: {reason}")]
pub struct Untranslatable {
    /// the region's index
    pub region: u32,
    /// what is not supported
    pub reason: String,
}

/// What a region compiles to.
#[derive(Clone, Debug)]
pub enum Compiled {
    /// an elementwise kernel over the iteration shape
    Elementwise(ElementwiseSpec),
    /// a row kernel over the last axis
    Row(RowSpec),
    /// a GEMM plus epilogue
    MatMul(MatMulEpilogueSpec, MatMulOperands),
    /// a fused attention
    Attention(AttentionSpec),
}

/// Which region inputs a matmul region's GEMM reads, and how.
#[derive(Clone, Debug)]
pub struct MatMulOperands {
    /// region input index of `a`
    pub a: usize,
    /// region input index of `b`
    pub b: usize,
    /// transpose `a` (gemm)
    pub trans_a: bool,
    /// transpose `b` (gemm)
    pub trans_b: bool,
    /// region input index of each extra epilogue input, in epilogue input order (1..)
    pub extras: Vec<usize>,
}

/// A translated region: what to compile and the shape of its one output.
#[derive(Clone, Debug)]
pub struct Translated {
    /// what to compile
    pub compiled: Compiled,
    /// the output shape (dim 0 is a representative for families)
    pub out_shape: Dims,
}

#[derive(Clone)]
struct Val {
    id: ValueId,
    shape: Dims,
    mask: bool,
}

type Fail<'a> = &'a dyn Fn(String) -> Untranslatable;

/// Where `region`'s batch dim is, for its family kernels: the product's dim 0 for a
/// matmul region (its head's operands), the iteration shape's dim 0 otherwise (also for
/// a matmul region whose head is malformed: its translation fails anyway).
pub fn batch_rule(program: &Program, region: &Region) -> BatchRule {
    if region.kind != RegionKind::MatmulEpilogue {
        return BatchRule::Iteration;
    }
    let head = program.instrs.get(region.first_pc.index());
    let Some(Instr::Op { op, srcs, .. }) = head else {
        return BatchRule::Iteration;
    };
    let trans_a = match op {
        IrOp::MatMul | IrOp::MatMulBias => false,
        IrOp::Gemm { trans_a, .. } => *trans_a,
        _ => return BatchRule::Iteration,
    };
    let index = |r: &Reg| region.inputs.iter().position(|x| x == r);
    match srcs.as_slice() {
        [a, b, ..] => match (index(a), index(b)) {
            (Some(a), Some(b)) => BatchRule::MatMul { a, b, trans_a },
            _ => BatchRule::Iteration,
        },
        _ => BatchRule::Iteration,
    }
}

/// The instructions of a region's body.
fn body<'p>(
    program: &'p Program,
    region: &Region,
    fail: Fail,
) -> Result<&'p [Instr], Untranslatable> {
    program
        .instrs
        .get(region.first_pc.index()..region.first_pc.index() + region.len as usize)
        .ok_or_else(|| fail("region body out of range".to_string()))
}

/// Maps every region input to `Op::Input(k)` (f32 only).
fn bind_inputs(
    jit: &mut JitProgram,
    region: &Region,
    key: &ShapeKey,
    fail: Fail,
) -> Result<HashMap<Reg, Val>, Untranslatable> {
    if key.inputs.len() != region.inputs.len() {
        return Err(fail(
            "key and region disagree on the input count".to_string(),
        ));
    }
    let mut vals = HashMap::new();
    for (k, (&reg, part)) in region.inputs.iter().zip(&key.inputs).enumerate() {
        if part.dtype != DType::F32 {
            return Err(fail(format!(
                "input {k} has dtype {}, only f32 is compiled",
                part.dtype
            )));
        }
        let id = jit.input(k as u32);
        vals.insert(
            reg,
            Val {
                id,
                shape: part.shape.clone(),
                mask: false,
            },
        );
    }
    Ok(vals)
}

/// Translates elementwise instructions into `jit`, updating `vals`.
fn emit_ops(
    jit: &mut JitProgram,
    vals: &mut HashMap<Reg, Val>,
    instrs: &[Instr],
    fail: Fail,
) -> Result<(), Untranslatable> {
    for instr in instrs {
        let Instr::Op { op, dsts, srcs, .. } = instr else {
            return Err(fail(format!("`{}` inside a region", instr.mnemonic())));
        };
        let args = operands(vals, srcs, fail)?;
        let out = translate_op(jit, op, &args)
            .map_err(|reason| fail(format!("{}: {reason}", op.name())))?;
        let [dst] = dsts.as_slice() else {
            return Err(fail(format!("{} has {} results", op.name(), dsts.len())));
        };
        vals.insert(dst.reg, out);
    }
    Ok(())
}

fn operands(
    vals: &HashMap<Reg, Val>,
    srcs: &[Reg],
    fail: Fail,
) -> Result<Vec<Val>, Untranslatable> {
    srcs.iter()
        .map(|r| {
            vals.get(r)
                .cloned()
                .ok_or_else(|| fail(format!("{r} is read before it is written")))
        })
        .collect()
}

/// The single f32 output of a region whose kernel has one output.
fn single_output<'v>(
    region: &Region,
    vals: &'v HashMap<Reg, Val>,
    fail: Fail,
) -> Result<&'v Val, Untranslatable> {
    let [reg] = region.outputs.as_slice() else {
        return Err(fail(format!(
            "{} outputs, this region kind compiles one",
            region.outputs.len()
        )));
    };
    let v = vals
        .get(reg)
        .ok_or_else(|| fail(format!("output {reg} is never written")))?;
    if v.mask {
        return Err(fail(format!("output {reg} is bool")));
    }
    Ok(v)
}

/// The tail shared by row and matmul regions: the head op's `result` becomes its
/// single destination register, the rest of the region is emitted as an
/// elementwise epilogue, and the region's one output must keep the head's shape.
struct Epilogue<'a> {
    /// (the head op, its result) as named in errors
    head: (&'static str, &'static str),
    /// the head instruction's destinations
    dsts: &'a [Out],
    /// the head's value in the program
    result: ValueId,
    /// the head's output shape
    shape: &'a Dims,
    /// the instructions after the head
    rest: &'a [Instr],
}

impl Epilogue<'_> {
    /// Emits the epilogue, marks the program output and returns its value.
    fn finish(
        self,
        jit: &mut JitProgram,
        vals: &mut HashMap<Reg, Val>,
        region: &Region,
        fail: Fail,
    ) -> Result<ValueId, Untranslatable> {
        let (op, what) = self.head;
        let [dst] = self.dsts else {
            return Err(fail(format!("{op} with several results")));
        };
        vals.insert(
            dst.reg,
            Val {
                id: self.result,
                shape: self.shape.clone(),
                mask: false,
            },
        );
        emit_ops(jit, vals, self.rest, fail)?;
        let out = single_output(region, vals, fail)?;
        if &out.shape != self.shape {
            return Err(fail(format!(
                "the epilogue broadcasts the {what} {:?} to {:?}",
                self.shape, out.shape
            )));
        }
        jit.output(out.id);
        Ok(out.id)
    }
}

/// Translates `region` for `key` in `mode`.
pub fn translate(
    program: &Program,
    region: &Region,
    key: &ShapeKey,
    mode: ShapeMode,
) -> Result<Translated, Untranslatable> {
    let fail = |reason: String| Untranslatable {
        region: region.id.0,
        reason,
    };
    match region.kind {
        RegionKind::Elementwise => translate_elementwise(program, region, key, mode, &fail),
        RegionKind::Reduction => translate_row(program, region, key, mode, &fail),
        RegionKind::MatmulEpilogue => translate_matmul(program, region, key, mode, &fail),
        RegionKind::Attention => translate_attention(program, region, key, &fail),
    }
}

fn input_layouts(
    key: &ShapeKey,
    shape: &[usize],
    fail: Fail,
) -> Result<Vec<InputLayout>, Untranslatable> {
    key.inputs
        .iter()
        .enumerate()
        .map(|(k, part)| {
            aligned_strides(&part.shape, &part.strides, shape)
                .map(|strides| InputLayout { strides })
                .ok_or_else(|| {
                    fail(format!(
                        "input {k} has a negative stride or does not broadcast"
                    ))
                })
        })
        .collect()
}

/// `matmul(q, k)`, an optional `mul`/`div` by a one-element input, an optional
/// additive mask, `softmax` (last axis), `matmul(·, v)`: which inputs are which,
/// checked against the key's shapes and dtypes.
fn translate_attention(
    program: &Program,
    region: &Region,
    key: &ShapeKey,
    fail: Fail,
) -> Result<Translated, Untranslatable> {
    let instrs = body(program, region, fail)?;
    let ops: Vec<(&IrOp, &[Reg], Reg)> = instrs
        .iter()
        .map(|i| match i {
            Instr::Op { op, srcs, dsts, .. } if dsts.len() == 1 => {
                Ok((op, srcs.as_slice(), dsts[0].reg))
            }
            _ => Err(fail(
                "attention region holds a non-op instruction".to_string(),
            )),
        })
        .collect::<Result<_, _>>()?;
    let input = |r: Reg| {
        region
            .inputs
            .iter()
            .position(|&x| x == r)
            .ok_or_else(|| fail(format!("attention operand {r} is not a region input")))
    };
    let other = |srcs: &[Reg], prev: Reg| {
        srcs.iter()
            .copied()
            .find(|&r| r != prev)
            .ok_or_else(|| fail("attention step without a second operand".to_string()))
    };
    let [
        (IrOp::MatMul, [q, k], first),
        middle @ ..,
        (IrOp::Softmax { .. }, _, p),
        (IrOp::MatMul, [p2, v], _),
    ] = ops.as_slice()
    else {
        return Err(fail("region is not matmul … softmax, matmul".to_string()));
    };
    let mut prev = *first;
    if p2 != p {
        return Err(fail(
            "the second product does not read the softmax".to_string(),
        ));
    }
    let (mut scale, mut mask) = (None, None);
    for &(op, srcs, dst) in middle {
        match op {
            IrOp::Binary(IrBinary::Mul) if scale.is_none() && mask.is_none() => {
                scale = Some((input(other(srcs, prev)?)?, ScaleOp::Mul));
            }
            IrOp::Binary(IrBinary::Div) if scale.is_none() && mask.is_none() && srcs[0] == prev => {
                scale = Some((input(srcs[1])?, ScaleOp::Div));
            }
            IrOp::Binary(IrBinary::Add) if mask.is_none() => {
                mask = Some(input(other(srcs, prev)?)?)
            }
            other => return Err(fail(format!("`{}` inside attention", other.name()))),
        }
        prev = dst;
    }
    let spec = AttentionSpec {
        name: format!("attention_r{}", region.id.0),
        q: input(*q)?,
        k: input(*k)?,
        v: input(*v)?,
        scale,
        mask,
    };
    let part = |i: usize| &key.inputs[i];
    for i in [spec.q, spec.k, spec.v]
        .into_iter()
        .chain(spec.mask)
        .chain(spec.scale.map(|s| s.0))
    {
        if part(i).dtype != DType::F32 || part(i).strides.iter().any(|&s| s < 0) {
            return Err(fail(format!(
                "attention input {i} is {} with strides {:?}; f32 with non-negative strides is compiled",
                part(i).dtype,
                part(i).strides
            )));
        }
    }
    let (qs, ks, vs) = (
        &part(spec.q).shape,
        &part(spec.k).shape,
        &part(spec.v).shape,
    );
    let out_shape = AttentionKernel::out_shape(qs, ks, vs).map_err(fail)?;
    if let Some((i, _)) = spec.scale
        && part(i).shape.iter().product::<usize>() != 1
    {
        return Err(fail(format!(
            "the scale {:?} is not one element",
            part(i).shape
        )));
    }
    if let Some(i) = spec.mask {
        let r = qs.len();
        let scores: Vec<usize> = [&qs[..r - 1], &ks[r - 1..]].concat();
        if aligned_strides(&part(i).shape, &part(i).strides, &scores).is_none() {
            return Err(fail(format!(
                "the mask {:?} does not broadcast to the scores {scores:?}",
                part(i).shape
            )));
        }
    }
    Ok(Translated {
        compiled: Compiled::Attention(spec),
        out_shape: out_shape.into_iter().collect(),
    })
}

fn translate_elementwise(
    program: &Program,
    region: &Region,
    key: &ShapeKey,
    mode: ShapeMode,
    fail: Fail,
) -> Result<Translated, Untranslatable> {
    let mut jit = JitProgram::new();
    let mut vals = bind_inputs(&mut jit, region, key, fail)?;
    emit_ops(&mut jit, &mut vals, body(program, region, fail)?, fail)?;
    let mut out_shape: Option<Dims> = None;
    for reg in &region.outputs {
        let v = vals
            .get(reg)
            .ok_or_else(|| fail(format!("output {reg} is never written")))?;
        if v.mask {
            return Err(fail(format!(
                "output {reg} is bool, only f32 outputs are compiled"
            )));
        }
        match &out_shape {
            None => out_shape = Some(v.shape.clone()),
            Some(s) if *s != v.shape => {
                return Err(fail(format!(
                    "outputs have different shapes {s:?} and {:?}",
                    v.shape
                )));
            }
            Some(_) => {}
        }
        jit.output(v.id);
    }
    let out_shape = out_shape.ok_or_else(|| fail("region has no outputs".to_string()))?;
    if mode == ShapeMode::Family && out_shape.is_empty() {
        return Err(fail("a rank-0 region has no batch dim".to_string()));
    }
    let inputs = input_layouts(key, &out_shape, fail)?;
    let spec = ElementwiseSpec {
        name: format!("region{}", region.id.0),
        shape: out_shape.to_vec(),
        mode,
        inputs,
        program: jit,
    };
    Ok(Translated {
        compiled: Compiled::Elementwise(spec),
        out_shape,
    })
}

/// Row addressing of an input aligned to `shape`: one row stride over the leading
/// dims and an element stride of 0 or 1 along the last.
/// The row grid of a row region over `shape` (its leading dims without size-1 dims,
/// adjacent dims merged where every input's strides allow) and each input's row
/// strides over it; `Err(k)` names an input whose elements are not unit-stride or
/// broadcast along the row.
fn row_grid(
    parts: &[(&[usize], &[isize])],
    shape: &[usize],
) -> Result<(Vec<usize>, Vec<RowInput>), usize> {
    let r = shape.len();
    let mut aligned = Vec::with_capacity(parts.len());
    for (k, (part_shape, part_strides)) in parts.iter().enumerate() {
        let a = aligned_strides(part_shape, part_strides, shape).ok_or(k)?;
        if a[r - 1] > 1 {
            return Err(k);
        }
        aligned.push(a);
    }
    // (dim size, per-input strides), outermost first
    let mut grid: Vec<(usize, Vec<usize>)> = Vec::new();
    for d in (0..r.saturating_sub(1)).filter(|&d| shape[d] != 1) {
        let strides: Vec<usize> = aligned.iter().map(|a| a[d]).collect();
        match grid.last_mut() {
            Some((n, outer)) if outer.iter().zip(&strides).all(|(&o, &s)| o == s * shape[d]) => {
                *n *= shape[d];
                *outer = strides;
            }
            _ => grid.push((shape[d], strides)),
        }
    }
    if grid.is_empty() {
        grid.push((1, vec![0; parts.len()]));
    }
    let dims = grid.iter().map(|(n, _)| *n).collect();
    let inputs = (0..parts.len())
        .map(|k| RowInput {
            row_strides: grid.iter().map(|(_, s)| s[k]).collect(),
            elem_stride: aligned[k][r - 1],
        })
        .collect();
    Ok((dims, inputs))
}

fn translate_row(
    program: &Program,
    region: &Region,
    key: &ShapeKey,
    mode: ShapeMode,
    fail: Fail,
) -> Result<Translated, Untranslatable> {
    let instrs = body(program, region, fail)?;
    let pos = instrs
        .iter()
        .position(|i| {
            matches!(
                i,
                Instr::Op {
                    op: IrOp::Softmax { .. }
                        | IrOp::LogSoftmax { .. }
                        | IrOp::LayerNorm { .. }
                        | IrOp::Reduce { .. },
                    ..
                }
            )
        })
        .ok_or_else(|| fail("no row op in a reduction region".to_string()))?;
    // Prologue: everything before the row op.
    let mut prologue = JitProgram::new();
    let mut pvals = bind_inputs(&mut prologue, region, key, fail)?;
    emit_ops(&mut prologue, &mut pvals, &instrs[..pos], fail)?;
    let Instr::Op { op, dsts, srcs, .. } = &instrs[pos] else {
        return Err(fail("row op is not an op".to_string()));
    };
    let args = operands(&pvals, srcs, fail)?;
    let x = args
        .first()
        .ok_or_else(|| fail("row op without input".to_string()))?;
    if x.mask {
        return Err(fail("row op on bool".to_string()));
    }
    let shape = x.shape.clone();
    let rank = shape.len();
    if rank == 0 {
        return Err(fail("row op on a scalar".to_string()));
    }
    let last = |axis: i64| axis == -1 || axis == rank as i64 - 1;
    let (row_op, out_shape) = match op {
        IrOp::Softmax { axis } if last(*axis) => (RowOp::Softmax, shape.clone()),
        IrOp::LogSoftmax { axis } if last(*axis) => (RowOp::LogSoftmax, shape.clone()),
        IrOp::LayerNorm { axis, epsilon } if last(*axis) => {
            (RowOp::LayerNorm { eps: *epsilon }, shape.clone())
        }
        IrOp::Reduce {
            op: r,
            axes,
            keepdims,
        } if axes.len() == 1 && last(axes[0]) => {
            let row_op = match r {
                ReduceOp::Sum => RowOp::Sum,
                ReduceOp::Mean => RowOp::Mean,
                ReduceOp::Max => RowOp::Max,
                other => return Err(fail(format!("{} is not compiled", other.name()))),
            };
            let mut out: Dims = shape[..rank - 1].iter().copied().collect();
            if *keepdims {
                out.push(1);
            }
            (row_op, out)
        }
        other => {
            return Err(fail(format!(
                "`{}` over other than the last axis",
                other.name()
            )));
        }
    };
    prologue.output(x.id);
    // Epilogue: layer-norm scale/bias, then every op after the row op, with the row
    // op's result as RowResult. Normalizing ops replay the prologue in the epilogue
    // for the values it reads (Cranelift drops what is unused); reductions' epilogues
    // see only the row result.
    let mut epilogue = JitProgram::new();
    let mut evals = if row_op.is_reduction() {
        // one value per row: only inputs that are a single element
        let mut evals = HashMap::new();
        for (k, (&reg, part)) in region.inputs.iter().zip(&key.inputs).enumerate() {
            if part.dtype == DType::F32 && part.shape.iter().product::<usize>() == 1 {
                let id = epilogue.input(k as u32);
                evals.insert(
                    reg,
                    Val {
                        id,
                        shape: part.shape.clone(),
                        mask: false,
                    },
                );
            }
        }
        evals
    } else {
        let mut evals = bind_inputs(&mut epilogue, region, key, fail)?;
        emit_ops(&mut epilogue, &mut evals, &instrs[..pos], fail)?;
        evals
    };
    let row_result = epilogue.push(Op::RowResult);
    let mut result = row_result;
    if let IrOp::LayerNorm { .. } = op {
        let params = operands(&evals, srcs, fail)?;
        if let Some(scale) = params.get(1) {
            result = epilogue.binary(BinaryOp::Mul, result, scale.id);
        }
        if let Some(bias) = params.get(2) {
            result = epilogue.binary(BinaryOp::Add, result, bias.id);
        }
    }
    let tail = Epilogue {
        head: ("row op", "row result"),
        dsts,
        result,
        shape: &out_shape,
        rest: &instrs[pos + 1..],
    };
    let out_id = tail.finish(&mut epilogue, &mut evals, region, fail)?;
    let trivial_epilogue = out_id == row_result;
    let parts: Vec<(&[usize], &[isize])> = key
        .inputs
        .iter()
        .map(|p| (&p.shape[..], &p.strides[..]))
        .collect();
    let (row_dims, inputs) = row_grid(&parts, &shape).map_err(|k| {
        fail(format!(
            "input {k} is neither unit-stride nor broadcast along the row"
        ))
    })?;
    if mode == ShapeMode::Family && (rank < 2 || shape[0] == 1) {
        return Err(fail("a single row has no batch dim".to_string()));
    }
    if row_dims.len() > MAX_ROW_DIMS {
        return Err(fail(format!("a row grid of {} dims", row_dims.len())));
    }
    let spec = RowSpec {
        name: format!("region{}", region.id.0),
        row_dims,
        row_len: shape[rank - 1],
        mode,
        inputs,
        prologue,
        op: row_op,
        epilogue: (!trivial_epilogue).then_some(epilogue),
    };
    Ok(Translated {
        compiled: Compiled::Row(spec),
        out_shape,
    })
}

fn translate_matmul(
    program: &Program,
    region: &Region,
    key: &ShapeKey,
    mode: ShapeMode,
    fail: Fail,
) -> Result<Translated, Untranslatable> {
    let instrs = body(program, region, fail)?;
    let Some(Instr::Op { op, dsts, srcs, .. }) = instrs.first() else {
        return Err(fail("empty matmul region".to_string()));
    };
    let input_index = |r: &Reg| {
        region
            .inputs
            .iter()
            .position(|x| x == r)
            .ok_or_else(|| fail(format!("matmul operand {r} is not a region input")))
    };
    let (alpha, trans_a, trans_b, c) = match op {
        IrOp::MatMul => (1.0, false, false, None),
        IrOp::MatMulBias => (1.0, false, false, srcs.get(2).map(|r| (r, 1.0))),
        IrOp::Gemm {
            alpha,
            beta,
            trans_a,
            trans_b,
        } => (*alpha, *trans_a, *trans_b, srcs.get(2).map(|r| (r, *beta))),
        other => return Err(fail(format!("`{}` heads a matmul region", other.name()))),
    };
    let (a, b) = match srcs.as_slice() {
        [a, b, ..] => (input_index(a)?, input_index(b)?),
        _ => return Err(fail("matmul needs two operands".to_string())),
    };
    let (ashape, bshape) = (&key.inputs[a].shape, &key.inputs[b].shape);
    for (name, s) in [("a", ashape), ("b", bshape)] {
        if s.len() < 2 || key.inputs[if name == "a" { a } else { b }].dtype != DType::F32 {
            return Err(fail(format!(
                "matmul operand {name} {s:?} is not an f32 matrix"
            )));
        }
    }
    let mat = |s: &Dims, t: bool| {
        if t {
            (s[s.len() - 1], s[s.len() - 2])
        } else {
            (s[s.len() - 2], s[s.len() - 1])
        }
    };
    let ((m, ka), (kb, n)) = (mat(ashape, trans_a), mat(bshape, trans_b));
    if ka != kb {
        return Err(fail(format!("matmul inner dims {ka} and {kb} differ")));
    }
    let batch = broadcast(
        op,
        &[&ashape[..ashape.len() - 2], &bshape[..bshape.len() - 2]],
    )
    .map_err(fail)?;
    let mut prod_shape = batch.clone();
    prod_shape.push(m);
    prod_shape.push(n);
    // Epilogue program: input 0 = product, inputs 1.. = region inputs read by the epilogue.
    let mut epi = JitProgram::new();
    let product = epi.input(0);
    let mut vals: HashMap<Reg, Val> = HashMap::new();
    let mut extras: Vec<usize> = Vec::new();
    for (k, &reg) in region.inputs.iter().enumerate() {
        if k == a || k == b || key.inputs[k].dtype != DType::F32 {
            continue;
        }
        extras.push(k);
        let id = epi.input(extras.len() as u32);
        vals.insert(
            reg,
            Val {
                id,
                shape: key.inputs[k].shape.clone(),
                mask: false,
            },
        );
    }
    let mut result = product;
    if let Some((c_reg, beta)) = c {
        let cv = vals
            .get(c_reg)
            .cloned()
            .ok_or_else(|| fail("gemm c is not an f32 region input".to_string()))?;
        // `1 · c` is `c`: a matmul_bias's bias is added as the separate add would
        let scaled = if beta == 1.0 {
            cv.id
        } else {
            let beta = epi.constant(beta);
            epi.binary(BinaryOp::Mul, cv.id, beta)
        };
        result = epi.binary(BinaryOp::Add, result, scaled);
    }
    let tail = Epilogue {
        head: ("matmul", "product"),
        dsts,
        result,
        shape: &prod_shape,
        rest: &instrs[1..],
    };
    tail.finish(&mut epi, &mut vals, region, fail)?;
    let extra_inputs = extras
        .iter()
        .map(|&k| {
            aligned_strides(&key.inputs[k].shape, &key.inputs[k].strides, &prod_shape)
                .map(|strides| InputLayout { strides })
                .ok_or_else(|| {
                    fail(format!(
                        "input {k} has a negative stride or does not broadcast"
                    ))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let spec = MatMulEpilogueSpec {
        name: format!("region{}", region.id.0),
        out_shape: prod_shape.to_vec(),
        mode,
        alpha,
        epilogue: epi,
        extra_inputs,
    };
    let operands = MatMulOperands {
        a,
        b,
        trans_a,
        trans_b,
        extras,
    };
    Ok(Translated {
        compiled: Compiled::MatMul(spec, operands),
        out_shape: prod_shape,
    })
}

/// An input's element strides aligned (right) to `out`: broadcast and size-1 dims get 0.
fn aligned_strides(shape: &[usize], strides: &[isize], out: &[usize]) -> Option<Vec<usize>> {
    let lead = out.len().checked_sub(shape.len())?;
    let mut aligned = vec![0usize; out.len()];
    for (d, (&n, &s)) in shape.iter().zip(strides).enumerate() {
        if n == 1 {
            continue;
        }
        if n != out[lead + d] {
            return None;
        }
        aligned[lead + d] = usize::try_from(s).ok()?;
    }
    Some(aligned)
}

/// NumPy broadcast of `shapes` by the interpreter's own rule, the error as text.
fn broadcast(op: &IrOp, shapes: &[&[usize]]) -> Result<Dims, String> {
    broadcast_shapes(op, shapes).map_err(|e| e.to_string())
}

fn translate_op(p: &mut JitProgram, op: &IrOp, args: &[Val]) -> Result<Val, String> {
    let f32_arg = |i: usize| -> Result<&Val, String> {
        let v = args.get(i).ok_or_else(|| format!("missing operand {i}"))?;
        if v.mask {
            Err(format!("operand {i} is bool"))
        } else {
            Ok(v)
        }
    };
    match op {
        IrOp::Unary(u) => {
            let x = f32_arg(0)?;
            let op = unary(*u)?;
            Ok(Val {
                id: p.unary(op, x.id),
                shape: x.shape.clone(),
                mask: false,
            })
        }
        IrOp::Binary(b) => {
            let (x, y) = (f32_arg(0)?, f32_arg(1)?);
            let shape = broadcast(op, &[&x.shape, &y.shape])?;
            let (id, mask) = match binary(*b)? {
                Either::Arith(op) => (p.binary(op, x.id, y.id), false),
                Either::Cmp(op) => (p.compare(op, x.id, y.id), true),
            };
            Ok(Val { id, shape, mask })
        }
        IrOp::Where => {
            let cond = args.first().ok_or("missing condition")?;
            if !cond.mask {
                return Err("the condition is not computed inside the region".to_string());
            }
            let (x, y) = (f32_arg(1)?, f32_arg(2)?);
            let shape = broadcast(op, &[&cond.shape, &x.shape, &y.shape])?;
            Ok(Val {
                id: p.select(cond.id, x.id, y.id),
                shape,
                mask: false,
            })
        }
        IrOp::Cast { to: DType::F32 } => {
            let x = f32_arg(0)?;
            Ok(x.clone())
        }
        other => Err(format!("`{}` is not compiled", other.name())),
    }
}

enum Either {
    Arith(BinaryOp),
    Cmp(CmpOp),
}

fn unary(u: IrUnary) -> Result<UnaryOp, String> {
    Ok(match u {
        IrUnary::Neg => UnaryOp::Neg,
        IrUnary::Abs => UnaryOp::Abs,
        IrUnary::Exp => UnaryOp::Exp,
        IrUnary::Log => UnaryOp::Log,
        IrUnary::Sqrt => UnaryOp::Sqrt,
        IrUnary::Reciprocal => UnaryOp::Reciprocal,
        IrUnary::Tanh => UnaryOp::Tanh,
        IrUnary::Sigmoid => UnaryOp::Sigmoid,
        IrUnary::Silu => UnaryOp::Silu,
        IrUnary::Relu => UnaryOp::Relu,
        IrUnary::LeakyRelu { alpha } => UnaryOp::LeakyRelu { alpha },
        IrUnary::Elu { alpha } => UnaryOp::Elu { alpha },
        IrUnary::Gelu { tanh_approx: true } => UnaryOp::GeluTanh,
        IrUnary::Gelu { tanh_approx: false } => UnaryOp::GeluErf,
        IrUnary::Erf => UnaryOp::Erf,
        IrUnary::Clip { min, max } => UnaryOp::Clip { min, max },
        IrUnary::Not => return Err("logical not is not compiled".to_string()),
        IrUnary::Math(f) => return Err(format!("`{}` is not compiled", f.name())),
    })
}

fn binary(b: IrBinary) -> Result<Either, String> {
    Ok(match b {
        IrBinary::Add => Either::Arith(BinaryOp::Add),
        IrBinary::Sub => Either::Arith(BinaryOp::Sub),
        IrBinary::Mul => Either::Arith(BinaryOp::Mul),
        IrBinary::Div => Either::Arith(BinaryOp::Div),
        IrBinary::Pow => Either::Arith(BinaryOp::Pow),
        IrBinary::Max => Either::Arith(BinaryOp::Max),
        IrBinary::Min => Either::Arith(BinaryOp::Min),
        IrBinary::Eq => Either::Cmp(CmpOp::Eq),
        IrBinary::Lt => Either::Cmp(CmpOp::Lt),
        IrBinary::Le => Either::Cmp(CmpOp::Le),
        IrBinary::Gt => Either::Cmp(CmpOp::Gt),
        IrBinary::Ge => Either::Cmp(CmpOp::Ge),
        IrBinary::And | IrBinary::Or => return Err("logical ops are not compiled".to_string()),
        IrBinary::BitAnd | IrBinary::BitOr | IrBinary::BitXor => {
            return Err("bitwise ops are not compiled".to_string());
        }
    })
}
