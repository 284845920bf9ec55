//! Lowering a verified [`Graph`] to a [`Program`].
//!
//! Steps: (1) emit instructions in topological order over *virtual* registers,
//! one per value, with `if` inlined as `jump_if_false`/`jump` and `loop` as a
//! counter, a condition test, carried-value copies and scan pushes; region heads
//! (`shape_guard`) are placed before each planned region ([`regions`]);
//! (2) compute live intervals, allocate registers and storage groups
//! ([`alloc`]); (3) rewrite the code to physical registers and verify it.
//!
//! **Invariant:** [`lower`] returns only programs that pass [`crate::verify::verify`];
//! a verifier failure here is an internal bug ([`LowerError::Internal`]).

mod alloc;
mod regions;

use crate::error::{LowerError, VerifyError};
use crate::ids::{ConstId, GroupId, InputIdx, Pc, Reg, RegionId, SlotId, SymbolId};
use crate::instr::{Instr, Out, Region, RegionKind, SlotInfo, SlotKind};
use crate::program::{DimCheck, IoSpec, Program};
use shapejit_ir::{Graph, Node, Op, Tensor, ValueId};
use std::collections::{HashMap, HashSet};

/// Placeholder group until the memory plan is made.
const NO_GROUP: GroupId = GroupId(u32::MAX);
/// Placeholder jump target until it is patched.
const NO_PC: Pc = Pc(u32::MAX);

/// What lowering knows about one virtual register (one value).
#[derive(Clone, Debug)]
pub(crate) struct VInfo {
    /// name for the memory plan listing
    pub name: String,
    /// true when instructions write the value's data into its own storage group
    pub owns: bool,
    /// values whose storage this one may alias (views, moves)
    pub aliases: Vec<Reg>,
}

/// A region as emitted, over virtual registers.
#[derive(Clone, Debug)]
pub(crate) struct RegionDraft {
    pub kind: RegionKind,
    pub guard_pc: usize,
    pub len: usize,
    pub inputs: Vec<Reg>,
    pub outputs: Vec<Reg>,
    pub slot: SlotId,
}

/// A loop as emitted: the `loop_check` pc and the back-edge `jump` pc.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoopSpan {
    pub head: usize,
    pub back: usize,
}

#[derive(Default)]
struct Emitter {
    instrs: Vec<Instr>,
    vals: Vec<VInfo>,
    constants: Vec<Tensor>,
    constant_names: Vec<String>,
    slots: Vec<SlotInfo>,
    regions: Vec<RegionDraft>,
    loops: Vec<LoopSpan>,
}

/// True for ops whose result may be a view of input 0 (decided at run time).
fn may_view(op: &Op) -> bool {
    matches!(
        op,
        Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::DynSlice
            | Op::Squeeze { .. }
            | Op::Unsqueeze { .. }
            | Op::Flatten { .. }
            | Op::Reshape { .. }
            | Op::Expand
    )
}

fn unsupported(node: &Node, message: String) -> LowerError {
    LowerError::Unsupported {
        node: node.name.clone(),
        op: node.op.name(),
        message,
    }
}

impl Emitter {
    fn pc(&self) -> usize {
        self.instrs.len()
    }

    fn new_val(&mut self, name: &str, owns: bool, aliases: Vec<Reg>) -> Reg {
        let r = Reg(self.vals.len() as u32);
        self.vals.push(VInfo {
            name: name.to_string(),
            owns,
            aliases,
        });
        r
    }

    fn out(&mut self, name: &str) -> Out {
        Out {
            reg: self.new_val(name, true, Vec::new()),
            group: NO_GROUP,
        }
    }

    fn new_slot(&mut self, kind: SlotKind, node: &str) -> SlotId {
        let id = SlotId(self.slots.len() as u32);
        self.slots.push(SlotInfo {
            kind,
            node: node.to_string(),
        });
        id
    }

    fn patch(&mut self, pc: usize, to: usize) {
        let to = Pc(to as u32);
        match &mut self.instrs[pc] {
            Instr::Jump { target } | Instr::JumpIfFalse { target, .. } => *target = to,
            Instr::LoopCheck { exit, .. } => *exit = to,
            // Invariant: only the pcs of jumps emitted above are patched.
            other => unreachable!("patching a non-jump instruction {}", other.mnemonic()),
        }
    }

    /// Lowers `graph`, whose inputs are already bound in `env`; returns its outputs.
    fn lower_graph(
        &mut self,
        graph: &Graph,
        env: &mut [Option<Reg>],
    ) -> Result<Vec<Reg>, LowerError> {
        // Constants first: loading one costs nothing, and keeping them out of the
        // way lets fusible nodes sit next to each other.
        let is_const = |i: &usize| matches!(graph.nodes[*i].op, Op::Constant { .. });
        let mut order: Vec<usize> = (0..graph.nodes.len()).filter(is_const).collect();
        order.extend((0..graph.nodes.len()).filter(|i| !is_const(i)));
        let spans = regions::plan(graph, &order);
        let uses = graph.use_counts();
        let mut span_iter = spans.iter().peekable();
        let mut pos = 0;
        while pos < order.len() {
            match span_iter.peek() {
                Some(span) if span.start == pos => {
                    let span = **span;
                    span_iter.next();
                    let nodes = &order[span.start..span.end];
                    self.lower_region(graph, nodes, span.kind, &uses, env)?;
                    pos = span.end;
                }
                _ => {
                    let node = &graph.nodes[order[pos]];
                    self.emit_checks(graph, node, env)?;
                    self.lower_node(node, env)?;
                    pos += 1;
                }
            }
        }
        graph
            .outputs
            .iter()
            .map(|&v| lookup(env, v).ok_or_else(|| LowerError::Graph(undefined(graph, v))))
            .collect()
    }

    /// Lowers the nodes of one region behind its `shape_guard`. `uses` is the
    /// graph's [`Graph::use_counts`]: a value produced here is a region output
    /// when it has more uses than the region's own nodes make (linear in the
    /// region's size).
    fn lower_region(
        &mut self,
        graph: &Graph,
        nodes: &[usize],
        kind: RegionKind,
        uses: &[usize],
        env: &mut [Option<Reg>],
    ) -> Result<(), LowerError> {
        let first = &graph.nodes[nodes[0]];
        self.emit_checks(graph, first, env)?;
        let region = RegionId(self.regions.len() as u32);
        let slot = self.new_slot(SlotKind::Region(region), &first.name);
        let guard_pc = self.pc();
        self.instrs.push(Instr::ShapeGuard {
            slot,
            region,
            skip: 0,
        });
        let mut produced = Vec::new();
        let mut inputs = Vec::new();
        let mut seen: HashSet<ValueId> = HashSet::new();
        let mut inner_uses: HashMap<ValueId, usize> = HashMap::new();
        for &n in nodes {
            let node = &graph.nodes[n];
            for &v in &node.inputs {
                *inner_uses.entry(v).or_default() += 1;
                if seen.insert(v) {
                    inputs.push(v);
                }
            }
            self.lower_node(node, env)?;
            produced.extend(node.outputs.iter().copied());
            seen.extend(node.outputs.iter().copied());
        }
        let used_after = |v: &ValueId| {
            uses.get(v.index()).copied().unwrap_or(0) > inner_uses.get(v).copied().unwrap_or(0)
        };
        let to_reg =
            |v: &ValueId| lookup(env, *v).ok_or_else(|| LowerError::Graph(undefined(graph, *v)));
        let inputs = inputs.iter().map(to_reg).collect::<Result<Vec<_>, _>>()?;
        let outputs = produced
            .iter()
            .filter(|v| used_after(v))
            .map(to_reg)
            .collect::<Result<Vec<_>, _>>()?;
        let len = self.pc() - guard_pc - 1;
        if let Instr::ShapeGuard { skip, .. } = &mut self.instrs[guard_pc] {
            *skip = len as u32;
        }
        self.regions.push(RegionDraft {
            kind,
            guard_pc,
            len,
            inputs,
            outputs,
            slot,
        });
        Ok(())
    }

    /// Emits the node's run-time broadcast checks (`shape_check`) over its operands.
    fn emit_checks(
        &mut self,
        graph: &Graph,
        node: &Node,
        env: &[Option<Reg>],
    ) -> Result<(), LowerError> {
        for check in node_checks(graph, node) {
            let operand = |i: usize| {
                let v = node.inputs[i];
                let reg = lookup(env, v)
                    .ok_or_else(|| unsupported(node, format!("input {v:?} is not defined")))?;
                Ok::<_, LowerError>((reg, graph.value(v).ty.shape.clone()))
            };
            let ((kept, kept_shape), (other, other_shape)) =
                (operand(check.kept)?, operand(check.input)?);
            self.instrs.push(Instr::ShapeCheck {
                kept,
                kept_axis: check.kept_axis as u32,
                other,
                other_axis: check.axis as u32,
                node: node.name.clone(),
                shapes: [kept_shape, other_shape],
            });
        }
        Ok(())
    }

    fn lower_node(&mut self, node: &Node, env: &mut [Option<Reg>]) -> Result<(), LowerError> {
        let srcs = node
            .inputs
            .iter()
            .map(|&v| {
                lookup(env, v)
                    .ok_or_else(|| unsupported(node, format!("input {v:?} is not defined")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let name_of = |i: usize| {
            format!(
                "{}{}",
                node.name,
                if node.outputs.len() > 1 {
                    format!(".{i}")
                } else {
                    String::new()
                }
            )
        };
        let single_out = || match node.outputs.as_slice() {
            [one] => Ok(*one),
            other => Err(unsupported(
                node,
                format!("expected one output, found {}", other.len()),
            )),
        };
        match &node.op {
            Op::Constant { value } => {
                let constant = ConstId(self.constants.len() as u32);
                self.constants.push(value.clone());
                self.constant_names.push(node.name.clone());
                let dst = self.new_val(&node.name, false, Vec::new());
                self.instrs.push(Instr::LoadConst { dst, constant });
                bind(env, single_out()?, dst);
            }
            Op::Identity => {
                let src = *srcs
                    .first()
                    .ok_or_else(|| unsupported(node, "identity needs one input".into()))?;
                let dst = self.new_val(&node.name, false, vec![src]);
                self.instrs.push(Instr::Move { dst, src });
                bind(env, single_out()?, dst);
            }
            Op::Shape { start, end } => {
                let src = *srcs
                    .first()
                    .ok_or_else(|| unsupported(node, "shape needs one input".into()))?;
                let dst = self.out(&node.name);
                self.instrs.push(Instr::ShapeOf {
                    dst,
                    src,
                    start: *start,
                    end: *end,
                });
                bind(env, single_out()?, dst.reg);
            }
            Op::If {
                then_branch,
                else_branch,
            } => self.lower_if(node, &srcs, then_branch, else_branch, env)?,
            Op::Loop { body, n_carried } => self.lower_loop(node, &srcs, body, *n_carried, env)?,
            op => {
                let aliases = if may_view(op) {
                    srcs.first().copied().into_iter().collect()
                } else {
                    Vec::new()
                };
                let dsts: Vec<Out> = (0..node.outputs.len())
                    .map(|i| Out {
                        reg: self.new_val(&name_of(i), true, aliases.clone()),
                        group: NO_GROUP,
                    })
                    .collect();
                let slot = self.new_slot(SlotKind::Op(Pc(self.pc() as u32)), &node.name);
                for (&v, o) in node.outputs.iter().zip(&dsts) {
                    bind(env, v, o.reg);
                }
                self.instrs.push(Instr::Op {
                    op: op.clone(),
                    dsts,
                    srcs,
                    slot,
                });
            }
        }
        Ok(())
    }

    fn lower_subgraph(
        &mut self,
        node: &Node,
        graph: &Graph,
        inputs: &[Reg],
    ) -> Result<Vec<Reg>, LowerError> {
        if graph.inputs.len() != inputs.len() {
            return Err(unsupported(
                node,
                format!(
                    "sub-graph '{}' takes {} inputs, the node binds {}",
                    graph.name,
                    graph.inputs.len(),
                    inputs.len()
                ),
            ));
        }
        let mut env = vec![None; graph.values.len()];
        for (&v, &r) in graph.inputs.iter().zip(inputs) {
            bind(&mut env, v, r);
        }
        self.lower_graph(graph, &mut env)
    }

    fn lower_if(
        &mut self,
        node: &Node,
        srcs: &[Reg],
        then_branch: &Graph,
        else_branch: &Graph,
        env: &mut [Option<Reg>],
    ) -> Result<(), LowerError> {
        let (&cond, captured) = srcs
            .split_first()
            .ok_or_else(|| unsupported(node, "if needs a condition".into()))?;
        let outs: Vec<Reg> = node
            .outputs
            .iter()
            .enumerate()
            .map(|(i, _)| self.new_val(&format!("{}.{i}", node.name), false, Vec::new()))
            .collect();
        let branch_pc = self.pc();
        self.instrs.push(Instr::JumpIfFalse {
            cond,
            target: NO_PC,
        });
        let moves = |em: &mut Emitter, branch: &Graph| -> Result<(), LowerError> {
            let results = em.lower_subgraph(node, branch, captured)?;
            if results.len() != outs.len() {
                return Err(unsupported(
                    node,
                    format!(
                        "branch '{}' returns {} values, the node has {}",
                        branch.name,
                        results.len(),
                        outs.len()
                    ),
                ));
            }
            for (&dst, &src) in outs.iter().zip(&results) {
                em.instrs.push(Instr::Move { dst, src });
                em.vals[dst.index()].aliases.push(src);
            }
            Ok(())
        };
        moves(self, then_branch)?;
        let skip_else = self.pc();
        self.instrs.push(Instr::Jump { target: NO_PC });
        self.patch(branch_pc, self.pc());
        moves(self, else_branch)?;
        self.patch(skip_else, self.pc());
        for (&v, &r) in node.outputs.iter().zip(&outs) {
            bind(env, v, r);
        }
        Ok(())
    }

    fn lower_loop(
        &mut self,
        node: &Node,
        srcs: &[Reg],
        body: &Graph,
        n_carried: usize,
        env: &mut [Option<Reg>],
    ) -> Result<(), LowerError> {
        if srcs.len() < 2 + n_carried {
            return Err(unsupported(
                node,
                format!("loop needs {} inputs, has {}", 2 + n_carried, srcs.len()),
            ));
        }
        let n_scan = body
            .outputs
            .len()
            .checked_sub(1 + n_carried)
            .ok_or_else(|| {
                unsupported(
                    node,
                    format!(
                        "loop body returns {} values, needs at least {}",
                        body.outputs.len(),
                        1 + n_carried
                    ),
                )
            })?;
        if node.outputs.len() != n_carried + n_scan {
            return Err(unsupported(
                node,
                format!(
                    "loop has {} outputs, the body gives {} carried + {} scanned",
                    node.outputs.len(),
                    n_carried,
                    n_scan
                ),
            ));
        }
        let (max, cond0, init, captured) = (
            srcs[0],
            srcs[1],
            &srcs[2..2 + n_carried],
            &srcs[2 + n_carried..],
        );
        let iter = self.out(&format!("{}.iter", node.name));
        self.instrs.push(Instr::LoopBegin { iter });
        let mut vars = vec![self.out(&format!("{}.cond", node.name))];
        vars.extend((0..n_carried).map(|k| self.out(&format!("{}.carried{k}", node.name))));
        let mut first_srcs = vec![cond0];
        first_srcs.extend_from_slice(init);
        self.instrs.push(Instr::Carry {
            dsts: vars.clone(),
            srcs: first_srcs,
        });
        let scans: Vec<Out> = (0..n_scan)
            .map(|j| self.out(&format!("{}.scan{j}", node.name)))
            .collect();
        for (j, &acc) in scans.iter().enumerate() {
            let row = &body.value(body.outputs[1 + n_carried + j]).ty;
            self.instrs.push(Instr::ScanInit {
                acc,
                dtype: row.dtype,
                row: row.shape.clone(),
            });
        }
        let head = self.pc();
        self.instrs.push(Instr::LoopCheck {
            iter: iter.reg,
            max,
            cond: vars[0].reg,
            exit: NO_PC,
        });
        let mut body_inputs = vec![iter.reg];
        body_inputs.extend(vars.iter().map(|o| o.reg));
        body_inputs.extend_from_slice(captured);
        let results = self.lower_subgraph(node, body, &body_inputs)?;
        // Scan rows are pushed before the carry: a body may return one of its
        // carried inputs as a scan row, which the carry overwrites.
        for (acc, &src) in scans.iter().zip(&results[1 + n_carried..]) {
            self.instrs.push(Instr::ScanPush { acc: acc.reg, src });
        }
        self.instrs.push(Instr::Carry {
            dsts: vars.clone(),
            srcs: results[..=n_carried].to_vec(),
        });
        self.instrs.push(Instr::LoopNext { iter: iter.reg });
        let back = self.pc();
        self.instrs.push(Instr::Jump {
            target: Pc(head as u32),
        });
        self.patch(head, self.pc());
        self.loops.push(LoopSpan { head, back });
        let results_regs = vars[1..].iter().chain(&scans).map(|o| o.reg);
        for (&v, r) in node.outputs.iter().zip(results_regs) {
            bind(env, v, r);
        }
        Ok(())
    }
}

/// The run-time broadcast checks `node` needs, from its recorded types.
pub(crate) fn node_checks(graph: &Graph, node: &Node) -> Vec<shapejit_ir::infer::BroadcastCheck> {
    let shapes = |vs: &[ValueId]| -> Vec<&shapejit_ir::Shape> {
        vs.iter().map(|&v| &graph.value(v).ty.shape).collect()
    };
    shapejit_ir::infer::node_checks(&node.op, &shapes(&node.inputs), &shapes(&node.outputs))
}

fn lookup(env: &[Option<Reg>], v: ValueId) -> Option<Reg> {
    env.get(v.index()).copied().flatten()
}

fn bind(env: &mut [Option<Reg>], v: ValueId, r: Reg) {
    if let Some(slot) = env.get_mut(v.index()) {
        *slot = Some(r);
    }
}

fn undefined(graph: &Graph, v: ValueId) -> shapejit_ir::IrError {
    shapejit_ir::IrError::Verify {
        graph: graph.name.clone(),
        message: format!("value {v:?} is used but never defined"),
    }
}

fn io_spec(graph: &Graph, v: ValueId, symbols: Option<&mut Vec<String>>) -> IoSpec {
    let info = graph.value(v);
    let dims = match symbols {
        None => Vec::new(),
        Some(symbols) => info
            .ty
            .shape
            .dims()
            .iter()
            .map(|d| match (d.as_known(), d.as_symbol()) {
                (Some(n), _) => DimCheck::Known(n),
                (None, Some(s)) => {
                    let idx = symbols
                        .iter()
                        .position(|n| n == s.name())
                        .unwrap_or_else(|| {
                            symbols.push(s.name().to_string());
                            symbols.len() - 1
                        });
                    DimCheck::Symbol(SymbolId(idx as u32))
                }
                (None, None) => DimCheck::Expr(d.clone()),
            })
            .collect(),
    };
    IoSpec {
        name: info.name.clone(),
        ty: info.ty.clone(),
        dims,
    }
}

/// Lowers a graph (verified first) to a verified program.
pub fn lower(graph: &Graph) -> Result<Program, LowerError> {
    shapejit_ir::verify(graph).map_err(LowerError::Graph)?;
    let mut em = Emitter::default();
    let mut env = vec![None; graph.values.len()];
    for (i, &v) in graph.inputs.iter().enumerate() {
        let dst = em.new_val(&graph.value(v).name, false, Vec::new());
        em.instrs.push(Instr::ShapeAssert {
            dst,
            input: InputIdx(i as u32),
        });
        bind(&mut env, v, dst);
    }
    let outputs = em.lower_graph(graph, &mut env)?;
    em.instrs.push(Instr::Return { srcs: outputs });

    let allocation = alloc::allocate(&em.instrs, &em.vals, &em.loops, &em.regions);
    let mut instrs = em.instrs;
    for instr in &mut instrs {
        instr.map_groups(&mut |vreg, _| allocation.group_of(vreg));
        instr.map_regs(&mut |vreg| allocation.reg_of(vreg));
    }
    let regions = em
        .regions
        .iter()
        .enumerate()
        .map(|(i, d)| Region {
            id: RegionId(i as u32),
            kind: d.kind,
            first_pc: Pc(d.guard_pc as u32 + 1),
            len: d.len as u32,
            inputs: d.inputs.iter().map(|&r| allocation.reg_of(r)).collect(),
            outputs: d.outputs.iter().map(|&r| allocation.reg_of(r)).collect(),
            slot: d.slot,
        })
        .collect();
    let mut symbols = Vec::new();
    let inputs = graph
        .inputs
        .iter()
        .map(|&v| io_spec(graph, v, Some(&mut symbols)))
        .collect();
    let outputs = graph
        .outputs
        .iter()
        .map(|&v| io_spec(graph, v, None))
        .collect();
    let program = Program {
        name: graph.name.clone(),
        instrs,
        constants: em.constants,
        constant_names: em.constant_names,
        n_regs: allocation.n_regs,
        slots: em.slots,
        inputs,
        outputs,
        symbols,
        memory: allocation.plan,
        regions,
    };
    crate::verify::verify(&program).map_err(|e: VerifyError| LowerError::Internal(Box::new(e)))?;
    Ok(program)
}
