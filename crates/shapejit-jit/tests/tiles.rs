//! Tiled elementwise kernels (a Cranelift driver calling the micro-kernels) against
//! the same programs evaluated op by op over whole arrays with the interpreter's
//! kernels: bit for bit equal, at the CPU level in use (`.ci/run` repeats this file
//! under every `SHAPEJIT_CPU`), for rows of every length class around the tile size,
//! broadcast inputs along either axis, family kernels, several outputs, and outputs
//! written over their own input.

mod common;

use common::{Rng, strided_offset};
use proptest::prelude::*;
use shapejit_jit::{
    BinaryOp, ElementwiseSpec, InputLayout, Op, Program, ShapeMode, UnaryOp, compile_elementwise,
};
use shapejit_kernels::Unary;
use shapejit_kernels::micro::{Binary, Table};

const UNARY: [UnaryOp; 13] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Sqrt,
    UnaryOp::Reciprocal,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::Silu,
    UnaryOp::Erf,
    UnaryOp::GeluErf,
    UnaryOp::GeluTanh,
    UnaryOp::Relu,
];
const BINARY: [BinaryOp; 6] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Max,
    BinaryOp::Min,
];

fn kernel_unary(op: UnaryOp) -> Unary {
    match op {
        UnaryOp::Neg => Unary::Neg,
        UnaryOp::Abs => Unary::Abs,
        UnaryOp::Sqrt => Unary::Sqrt,
        UnaryOp::Reciprocal => Unary::Reciprocal,
        UnaryOp::Exp => Unary::Exp,
        UnaryOp::Log => Unary::Log,
        UnaryOp::Tanh => Unary::Tanh,
        UnaryOp::Sigmoid => Unary::Sigmoid,
        UnaryOp::Silu => Unary::Silu,
        UnaryOp::Erf => Unary::Erf,
        UnaryOp::GeluErf => Unary::GeluErf,
        UnaryOp::GeluTanh => Unary::GeluTanh,
        UnaryOp::Relu => Unary::Relu,
        other => panic!("{other:?} has no micro-kernel"),
    }
}

fn kernel_binary(op: BinaryOp) -> Binary {
    match op {
        BinaryOp::Add => Binary::Add,
        BinaryOp::Sub => Binary::Sub,
        BinaryOp::Mul => Binary::Mul,
        BinaryOp::Div => Binary::Div,
        BinaryOp::Max => Binary::Max,
        BinaryOp::Min => Binary::Min,
        other => panic!("{other:?} has no micro-kernel"),
    }
}

/// The program evaluated op by op over whole arrays (every input gathered to the
/// output shape first), each op one pass of the interpreter's kernels.
fn op_by_op(program: &Program, inputs: &[Vec<f32>], numel: usize) -> Vec<Vec<f32>> {
    let table = Table::current();
    let mut vals: Vec<Vec<f32>> = Vec::new();
    for op in &program.ops {
        let v = match *op {
            Op::Input(k) => inputs[k.0 as usize].clone(),
            Op::Const(c) => vec![c; numel],
            Op::Unary(u, x) => {
                let mut out = vec![0.0; numel];
                table.unary(kernel_unary(u), &vals[x.0 as usize], &mut out);
                out
            }
            Op::Binary(b, x, y) => {
                let mut out = vec![0.0; numel];
                table.binary(
                    kernel_binary(b),
                    &vals[x.0 as usize],
                    &vals[y.0 as usize],
                    &mut out,
                );
                out
            }
            other => panic!("{other:?} is not generated"),
        };
        vals.push(v);
    }
    program
        .outputs
        .iter()
        .map(|v| vals[v.0 as usize].clone())
        .collect()
}

#[derive(Clone, Debug)]
struct Case {
    /// `[outer, inner]`
    shape: [usize; 2],
    family: bool,
    /// per input: 0 contiguous, 1 broadcast along the inner dim, 2 along the outer
    kinds: Vec<u8>,
    /// (op index into UNARY or BINARY, is binary, operand picks, constant)
    ops: Vec<(usize, bool, usize, usize, f32)>,
    n_outputs: usize,
    seed: u64,
}

fn program_of(case: &Case) -> Program {
    let mut p = Program::new();
    let mut vals: Vec<_> = (0..case.kinds.len()).map(|k| p.input(k as u32)).collect();
    for &(i, binary, x, y, c) in &case.ops {
        let a = vals[x % vals.len()];
        let v = if binary {
            let b = if y % 4 == 0 {
                p.constant(c)
            } else {
                vals[y % vals.len()]
            };
            p.binary(BINARY[i % BINARY.len()], a, b)
        } else {
            p.unary(UNARY[i % UNARY.len()], a)
        };
        vals.push(v);
    }
    for k in 0..case.n_outputs {
        p.output(vals[vals.len() - 1 - k % vals.len()]);
    }
    p
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let inner = prop_oneof![
        64usize..70,
        (1usize..5).prop_map(|t| t * 1024 - 1),
        (1usize..5).prop_map(|t| t * 1024),
        (1usize..5).prop_map(|t| t * 1024 + 1),
        100usize..3000,
    ];
    (
        1usize..5,
        inner,
        any::<bool>(),
        prop::collection::vec(0u8..3, 1..4),
        prop::collection::vec(
            (
                0usize..12,
                any::<bool>(),
                0usize..16,
                0usize..16,
                -2.0f32..2.0,
            ),
            1..12,
        ),
        1usize..3,
        any::<u64>(),
    )
        .prop_map(|(outer, inner, family, kinds, ops, n_outputs, seed)| Case {
            shape: [outer, inner],
            family,
            kinds,
            ops,
            n_outputs,
            seed,
        })
}

fn layout(kind: u8, [outer, inner]: [usize; 2]) -> (Vec<usize>, usize) {
    match kind {
        0 => (vec![inner, 1], outer * inner),
        1 => (vec![1, 0], outer),
        _ => (vec![0, 1], inner),
    }
}

fn run_case(case: &Case) {
    let program = program_of(case);
    let spec = ElementwiseSpec {
        name: "tiles".to_string(),
        shape: case.shape.to_vec(),
        mode: if case.family {
            ShapeMode::Family
        } else {
            ShapeMode::Exact
        },
        inputs: case
            .kinds
            .iter()
            .map(|&k| InputLayout {
                strides: layout(k, case.shape).0,
            })
            .collect(),
        program: program.clone(),
    };
    let kernel = compile_elementwise(&spec).expect("compiles");
    assert!(kernel.is_tiled(), "{program:?} over {:?}", case.shape);
    let mut rng = Rng(case.seed | 1);
    let buffers: Vec<Vec<f32>> = case
        .kinds
        .iter()
        .map(|&k| rng.vec(layout(k, case.shape).1, -3.0, 3.0))
        .collect();
    let numel = case.shape[0] * case.shape[1];
    let gathered: Vec<Vec<f32>> = buffers
        .iter()
        .zip(&case.kinds)
        .map(|(buf, &k)| {
            let strides = layout(k, case.shape).0;
            (0..numel)
                .map(|f| buf[strided_offset(f, &case.shape, &strides)])
                .collect()
        })
        .collect();
    let want = op_by_op(&program, &gathered, numel);
    let mut outs = vec![vec![f32::NAN; numel]; case.n_outputs];
    let ins: Vec<&[f32]> = buffers.iter().map(Vec::as_slice).collect();
    let mut out_refs: Vec<&mut [f32]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
    kernel
        .run(&ins, &mut out_refs, case.shape[0])
        .expect("runs");
    for (k, (got, want)) in outs.iter().zip(&want).enumerate() {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "output {k} [{i}] of {:?}: {g} vs {w}\n{program:?}",
                case.shape
            );
        }
    }
    // In pieces of dim 0 (the pool's split), run in reverse order: the same bits.
    for pieces in [2, 3] {
        let mut split = vec![vec![f32::NAN; numel]; case.n_outputs];
        let mut refs: Vec<&mut [f32]> = split.iter_mut().map(Vec::as_mut_slice).collect();
        kernel
            .run_pieces(&ins, &mut refs, case.shape[0], pieces, &|n, f| {
                (0..n).rev().for_each(f)
            })
            .expect("runs");
        assert!(kernel.splittable());
        let bits =
            |v: &[Vec<f32>]| -> Vec<u32> { v.iter().flatten().map(|x| x.to_bits()).collect() };
        assert!(bits(&split) == bits(&outs), "{pieces} pieces\n{program:?}");
    }
    // In place: output 0 over input 0 when that input has the output's layout.
    if case.kinds[0] == 0 {
        let mut buf = buffers[0].clone();
        let mut other = vec![vec![f32::NAN; numel]; case.n_outputs - 1];
        let mut in_ptrs: Vec<*const f32> = buffers.iter().map(|b| b.as_ptr()).collect();
        in_ptrs[0] = buf.as_ptr();
        let mut out_ptrs = vec![buf.as_mut_ptr()];
        out_ptrs.extend(other.iter_mut().map(|o| o.as_mut_ptr()));
        // SAFETY: every buffer covers its layout's extent; output 0 aliases only input
        // 0, which has its layout (the kernel contract allows it).
        unsafe { kernel.run_unchecked(&in_ptrs, &out_ptrs, case.shape[0]) };
        assert!(
            buf.iter()
                .zip(&want[0])
                .all(|(g, w)| g.to_bits() == w.to_bits()),
            "in place differs\n{program:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn tiled_kernels_equal_the_op_by_op_passes(case in case_strategy()) {
        run_case(&case);
    }
}

/// The built-in elementwise chain's program (the one `shapejit bench
/// builtin:elementwise` compiles) at batch 64: tiled, and equal to the op-by-op passes.
#[test]
fn the_builtin_chain_runs_tiled() {
    // y = x·w + b; o = sigmoid(tanh(y)·y + x)·(tanh(y)·y + x) − 0.25
    let case = Case {
        shape: [64, 4096],
        family: true,
        kinds: vec![0, 2, 2],
        ops: vec![],
        n_outputs: 1,
        seed: 5,
    };
    let mut p = Program::new();
    let (x, w, b) = (p.input(0), p.input(1), p.input(2));
    let c = p.constant(0.25);
    let y = p.binary(BinaryOp::Mul, x, w);
    let y = p.binary(BinaryOp::Add, y, b);
    let t = p.unary(UnaryOp::Tanh, y);
    let u = p.binary(BinaryOp::Mul, t, y);
    let v = p.binary(BinaryOp::Add, u, x);
    let s = p.unary(UnaryOp::Sigmoid, v);
    let o = p.binary(BinaryOp::Mul, s, v);
    let o = p.binary(BinaryOp::Sub, o, c);
    p.output(o);
    let spec = ElementwiseSpec {
        name: "chain".to_string(),
        shape: case.shape.to_vec(),
        mode: ShapeMode::Family,
        inputs: case
            .kinds
            .iter()
            .map(|&k| InputLayout {
                strides: layout(k, case.shape).0,
            })
            .collect(),
        program: p.clone(),
    };
    let kernel = compile_elementwise(&spec).expect("compiles");
    assert!(kernel.is_tiled());
    let numel = 64 * 4096;
    let mut rng = Rng(9);
    let xs = rng.vec(numel, -2.0, 2.0);
    let ws = rng.vec(4096, 0.0, 1.0);
    let bs = rng.vec(4096, 0.0, 0.5);
    let mut out = vec![0f32; numel];
    kernel
        .run(&[&xs, &ws, &bs], &mut [&mut out], 64)
        .expect("runs");
    let tile = |v: &[f32]| -> Vec<f32> { v.iter().copied().cycle().take(numel).collect() };
    let want = op_by_op(&p, &[xs.clone(), tile(&ws), tile(&bs)], numel);
    assert!(
        out.iter()
            .zip(&want[0])
            .all(|(g, w)| g.to_bits() == w.to_bits())
    );
}
