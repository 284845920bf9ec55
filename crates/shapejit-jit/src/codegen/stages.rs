//! Splitting a long elementwise program into stages that run one after another over
//! a small tile of vectors.
//!
//! Why: a fused body with several transcendentals is one dependency chain of a few
//! hundred cycles per vector. Cranelift emits each vector's computation in one
//! piece, so the out-of-order window (a few hundred instructions) holds barely two
//! vectors' chains and the core idles on latency: measured on `x*w+b → tanh → … →
//! sigmoid → …` (8 ops, two transcendentals), the fused kernel ran 1.4× slower than
//! the same two halves compiled as separate kernels with a round trip through memory.
//! Staged, the main loop computes stage 1 for every vector of the tile, stores the
//! values later stages need into a stack tile, then runs stage 2 over the tile, and
//! so on: each stage is a short chain, and many of them fit in the window.
//!
//! A new stage starts before each transcendental after the first. Inputs and
//! constants are re-read by each stage that uses them; every other value a later
//! stage (or an output) needs lives in the tile.
//!
//! **Invariant:** staging changes only the order of evaluation across vectors, never
//! an operation, so staged and unstaged code give bit-identical results.
//! **Invariant:** outputs are stored only by the last stage, after every input
//! element of the tile was read, so in-place outputs stay correct.

use std::ops::Range;

use crate::program::{HEAVY_WEIGHT, Op, Program};

/// How a program splits into stages (only built when there are at least two).
#[derive(Debug)]
pub(crate) struct StagePlan {
    /// Consecutive op ranges covering the program, in order.
    pub(crate) stages: Vec<Range<usize>>,
    /// Per op: its tile row when a later stage or an output reads it.
    pub(crate) tile_row: Vec<Option<usize>>,
    /// Tile rows (values kept per vector of the tile).
    pub(crate) rows: usize,
    /// Per stage: the ops defined before it that it reads (outputs count as read by
    /// the last stage), ascending.
    pub(crate) live_in: Vec<Vec<usize>>,
}

impl StagePlan {
    /// The plan for `program`, or `None` when it has at most one transcendental.
    pub(crate) fn new(program: &Program) -> Option<StagePlan> {
        let mut stages = Vec::new();
        let (mut start, mut weight) = (0, 0);
        for (idx, op) in program.ops.iter().enumerate() {
            if op.weight() >= HEAVY_WEIGHT && weight >= HEAVY_WEIGHT {
                stages.push(start..idx);
                (start, weight) = (idx, 0);
            }
            weight += op.weight();
        }
        if stages.is_empty() {
            return None;
        }
        stages.push(start..program.ops.len());
        let stage_of = |idx: usize| stages.iter().position(|r| r.contains(&idx));
        let last = stages.len() - 1;
        let mut live_in: Vec<Vec<usize>> = vec![Vec::new(); stages.len()];
        let mut read = |stage: usize, value: usize| {
            if stage_of(value) != Some(stage) && !live_in[stage].contains(&value) {
                live_in[stage].push(value);
            }
        };
        for (idx, op) in program.ops.iter().enumerate() {
            // Invariant: every op index lies in one stage (the ranges cover the ops).
            let stage = stage_of(idx).expect("stages cover the program");
            for operand in op.operands() {
                read(stage, operand.0 as usize);
            }
        }
        for out in &program.outputs {
            read(last, out.0 as usize);
        }
        let mut tile_row = vec![None; program.ops.len()];
        let mut rows = 0;
        for stage_reads in &mut live_in {
            stage_reads.sort_unstable();
            for &value in stage_reads.iter() {
                let rematerialized = matches!(program.ops[value], Op::Input(_) | Op::Const(_));
                if !rematerialized && tile_row[value].is_none() {
                    tile_row[value] = Some(rows);
                    rows += 1;
                }
            }
        }
        Some(StagePlan {
            stages,
            tile_row,
            rows,
            live_in,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{BinaryOp, UnaryOp};

    #[test]
    fn splits_before_the_second_transcendental_and_tiles_what_crosses() {
        let mut p = Program::new();
        let x = p.input(0); // 0
        let c = p.constant(0.25); // 1
        let t = p.unary(UnaryOp::Tanh, x); // 2
        let v = p.binary(BinaryOp::Add, t, x); // 3
        let s = p.unary(UnaryOp::Sigmoid, v); // 4: stage 2 starts here
        let o = p.binary(BinaryOp::Mul, s, c); // 5
        p.output(o);
        p.output(t);
        let plan = StagePlan::new(&p).expect("two transcendentals");
        assert_eq!(plan.stages, vec![0..4, 4..6]);
        // stage 2 reads v and c; the outputs add t (its own o is local)
        assert_eq!(plan.live_in[1], vec![1, 2, 3]);
        // the constant is re-emitted, v and t go through the tile
        assert_eq!(plan.tile_row[1], None);
        assert!(plan.tile_row[2].is_some() && plan.tile_row[3].is_some());
        assert_eq!(plan.rows, 2);
    }

    #[test]
    fn one_transcendental_needs_no_stages() {
        let mut p = Program::new();
        let x = p.input(0);
        let e = p.unary(UnaryOp::Exp, x);
        let y = p.binary(BinaryOp::Mul, e, x);
        p.output(y);
        assert!(StagePlan::new(&p).is_none());
    }
}
