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

use crate::shape_key::ShapeKey;
use crate::tensor::Dims;
use shapejit_bytecode::{Instr, Program, Reg, Region, RegionKind};
use shapejit_ir::{BinaryOp as IrBinary, DType, Op as IrOp, UnaryOp as IrUnary};
use shapejit_jit::{
    BinaryOp, CmpOp, ElementwiseSpec, InputLayout, Program as JitProgram, ShapeMode, UnaryOp,
    ValueId,
};
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

/// A translated region: the spec, the iteration shape and how many outputs it has.
#[derive(Clone, Debug)]
pub struct Translated {
    /// what to compile
    pub spec: ElementwiseSpec,
    /// the shape every output has (dim 0 is a representative for families)
    pub out_shape: Dims,
}

#[derive(Clone)]
struct Val {
    id: ValueId,
    shape: Dims,
    mask: bool,
}

/// Translates an elementwise region for `key` in `mode`.
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
    if region.kind != RegionKind::Elementwise {
        return Err(fail(format!(
            "{} regions are not compiled yet",
            region.kind.name()
        )));
    }
    if key.inputs.len() != region.inputs.len() {
        return Err(fail(
            "key and region disagree on the input count".to_string(),
        ));
    }
    let mut jit = JitProgram::new();
    let mut vals: HashMap<Reg, Val> = HashMap::new();
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
    let body = program
        .instrs
        .get(region.first_pc.index()..region.first_pc.index() + region.len as usize)
        .ok_or_else(|| fail("region body out of range".to_string()))?;
    for instr in body {
        let Instr::Op { op, dsts, srcs, .. } = instr else {
            return Err(fail(format!("`{}` inside a region", instr.mnemonic())));
        };
        let args: Vec<Val> = srcs
            .iter()
            .map(|r| {
                vals.get(r)
                    .cloned()
                    .ok_or_else(|| fail(format!("{r} is read before it is written")))
            })
            .collect::<Result<_, _>>()?;
        let out = translate_op(&mut jit, op, &args)
            .map_err(|reason| fail(format!("{}: {reason}", op.name())))?;
        let [dst] = dsts.as_slice() else {
            return Err(fail(format!("{} has {} results", op.name(), dsts.len())));
        };
        vals.insert(dst.reg, out);
    }
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
    let inputs = key
        .inputs
        .iter()
        .enumerate()
        .map(|(k, part)| {
            aligned_strides(&part.shape, &part.strides, &out_shape)
                .map(|strides| InputLayout { strides })
                .ok_or_else(|| {
                    fail(format!(
                        "input {k} has a negative stride or does not broadcast"
                    ))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let spec = ElementwiseSpec {
        name: format!("region{}", region.id.0),
        shape: out_shape.to_vec(),
        mode,
        inputs,
        program: jit,
    };
    Ok(Translated { spec, out_shape })
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

fn broadcast(a: &[usize], b: &[usize]) -> Result<Dims, String> {
    let rank = a.len().max(b.len());
    let mut out = Dims::from_elem(1, rank);
    for d in 0..rank {
        let x = if d + a.len() >= rank {
            a[d + a.len() - rank]
        } else {
            1
        };
        let y = if d + b.len() >= rank {
            b[d + b.len() - rank]
        } else {
            1
        };
        out[d] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        };
    }
    Ok(out)
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
            let shape = broadcast(&x.shape, &y.shape)?;
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
            let shape = broadcast(&broadcast(&cond.shape, &x.shape)?, &y.shape)?;
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
        IrUnary::Relu => UnaryOp::Relu,
        IrUnary::LeakyRelu { alpha } => UnaryOp::LeakyRelu { alpha },
        IrUnary::Elu { alpha } => UnaryOp::Elu { alpha },
        IrUnary::Gelu { tanh_approx: true } => UnaryOp::GeluTanh,
        IrUnary::Gelu { tanh_approx: false } => UnaryOp::GeluErf,
        IrUnary::Erf => UnaryOp::Erf,
        IrUnary::Clip { min, max } => UnaryOp::Clip { min, max },
        IrUnary::Not => return Err("logical not is not compiled".to_string()),
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
    })
}
