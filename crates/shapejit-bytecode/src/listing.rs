//! The stable text listing of a program (`impl Display for Program`), as shown
//! by `shapejit dump` and checked by golden tests.
//!
//! Layout: a header, the graph inputs (with their dim checks), outputs,
//! constants, then one line per instruction — `@pc`, the instruction, and a
//! `;` comment with the slot and the IR node — with region boundaries drawn as
//! `region N kind {` ... `}` around the region's instructions, and last the
//! memory plan (one line per storage group with the values it holds).
//!
//! **Invariant:** the listing depends only on the program (no addresses, no
//! hash-map order), so it is stable across runs and machines.

use crate::ids::Reg;
use crate::instr::{Instr, Out};
use crate::program::{DimCheck, Program};
use shapejit_ir::text::print::op_attrs;
use std::fmt::{self, Write as _};

fn regs(list: &[Reg]) -> String {
    list.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn outs(list: &[Out]) -> String {
    list.iter()
        .map(|o| format!("{}:{}", o.reg, o.group))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The instruction text without pc or comment, e.g. `%r7:g2 = matmul %r3, %r5`.
pub fn instr_text(program: &Program, instr: &Instr) -> String {
    match instr {
        Instr::ShapeAssert { dst, input } => {
            let name = program
                .inputs
                .get(input.index())
                .map(|s| s.name.as_str())
                .unwrap_or("?");
            format!("{dst} = shape_assert {input} '{name}'")
        }
        Instr::ShapeOf {
            dst,
            src,
            start,
            end,
        } => {
            let end = end.map(|e| e.to_string()).unwrap_or_else(|| "rank".into());
            format!("{} = shape_of {src} [{start}, {end})", outs(&[*dst]))
        }
        Instr::ShapeGuard { slot, region, skip } => format!(
            "shape_guard slot={} region={} skip={skip}",
            slot.0, region.0
        ),
        Instr::Op { op, dsts, srcs, .. } => {
            format!(
                "{} = {}{} {}",
                outs(dsts),
                op.name(),
                op_attrs(op),
                regs(srcs)
            )
        }
        Instr::ShapeCheck {
            kept,
            kept_axis,
            other,
            other_axis,
            ..
        } => format!("shape_check {kept}[{kept_axis}] ~ {other}[{other_axis}]"),
        Instr::LoadConst { dst, constant } => format!("{dst} = load_const {constant}"),
        Instr::Move { dst, src } => format!("{dst} = move {src}"),
        Instr::Jump { target } => format!("jump {target}"),
        Instr::JumpIfFalse { cond, target } => format!("jump_if_false {cond}, {target}"),
        Instr::LoopBegin { iter } => format!("{} = loop_begin", outs(&[*iter])),
        Instr::LoopCheck {
            iter,
            max,
            cond,
            exit,
        } => format!("loop_check {iter} < {max} && {cond} else {exit}"),
        Instr::LoopNext { iter } => format!("loop_next {iter}"),
        Instr::Carry { dsts, srcs } => format!("carry ({}) <- ({})", outs(dsts), regs(srcs)),
        Instr::ScanInit { acc, dtype, row } => {
            format!("{} = scan_init {dtype}{row}", outs(&[*acc]))
        }
        Instr::ScanPush { acc, src } => format!("scan_push {acc}, {src}"),
        Instr::Return { srcs } => format!("return {}", regs(srcs)),
    }
}

fn comment(program: &Program, instr: &Instr) -> String {
    match instr {
        Instr::Op { slot, .. } => {
            let node = program
                .slots
                .get(slot.index())
                .map(|s| s.node.as_str())
                .unwrap_or("?");
            format!("slot {}  '{node}'", slot.0)
        }
        Instr::LoadConst { constant, .. } => {
            let c = program.constants.get(constant.index());
            let name = program
                .constant_names
                .get(constant.index())
                .map(String::as_str)
                .unwrap_or("?");
            c.map(|c| format!("'{name}' {}{:?}", c.dtype(), c.shape()))
                .unwrap_or_default()
        }
        Instr::ShapeCheck {
            kept_axis,
            other_axis,
            node,
            shapes,
            ..
        } => {
            let dim = |s: &shapejit_ir::Shape, a: &u32| {
                s.dims()
                    .get(*a as usize)
                    .map_or("?".to_string(), |d| d.to_string())
            };
            format!(
                "'{node}' {} vs {}",
                dim(&shapes[0], kept_axis),
                dim(&shapes[1], other_axis)
            )
        }
        _ => String::new(),
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "program '{}': {} instrs, {} regs, {} slots, {} regions, {} groups",
            self.name,
            self.instrs.len(),
            self.n_regs,
            self.slots.len(),
            self.regions.len(),
            self.memory.n_groups()
        )?;
        writeln!(f, "inputs:")?;
        for (i, spec) in self.inputs.iter().enumerate() {
            let checks: Vec<String> = spec
                .dims
                .iter()
                .map(|c| match c {
                    DimCheck::Known(n) => n.to_string(),
                    DimCheck::Symbol(s) => format!(
                        "{}={s}",
                        self.symbols
                            .get(s.index())
                            .map(String::as_str)
                            .unwrap_or("?")
                    ),
                    DimCheck::Expr(d) => format!("({d})"),
                })
                .collect();
            writeln!(
                f,
                "  input {i} '{}': {}  checks [{}]",
                spec.name,
                spec.ty,
                checks.join(", ")
            )?;
        }
        writeln!(f, "outputs:")?;
        for (i, spec) in self.outputs.iter().enumerate() {
            writeln!(f, "  output {i} '{}': {}", spec.name, spec.ty)?;
        }
        writeln!(f, "code:")?;
        let mut region_end: Option<usize> = None;
        for (pc, instr) in self.instrs.iter().enumerate() {
            if region_end == Some(pc) {
                writeln!(f, "        }}")?;
                region_end = None;
            }
            let indent = if region_end.is_some() { "    " } else { "" };
            let mut line = format!("  @{pc:<4} {indent}{}", instr_text(self, instr));
            let note = comment(self, instr);
            if !note.is_empty() {
                let width = line.len().max(56);
                let _ = write!(line, "{:pad$}; {note}", "", pad = width - line.len() + 1);
            }
            writeln!(f, "{line}")?;
            if let Instr::ShapeGuard { region, .. } = instr
                && let Some(r) = self.regions.get(region.index())
            {
                writeln!(
                    f,
                    "        region {} {} in ({}) out ({}) {{",
                    r.id.0,
                    r.kind.name(),
                    regs(&r.inputs),
                    regs(&r.outputs)
                )?;
                region_end = Some(r.first_pc.index() + r.len as usize);
            }
        }
        if region_end.is_some() {
            writeln!(f, "        }}")?;
        }
        writeln!(f, "memory plan: {} groups", self.memory.n_groups())?;
        for (i, g) in self.memory.groups.iter().enumerate() {
            writeln!(f, "  g{i}: {}", g.values.join(", "))?;
        }
        Ok(())
    }
}
