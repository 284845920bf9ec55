//! Differential tests of elementwise kernels against a naive f64 evaluation of the same
//! program with explicit strided indexing: generated op chains and shapes, broadcasting,
//! size-1 dims, transposed and sliced inputs, sizes that are not multiples of the
//! vector width, family kernels at every batch size 1..=70, staged kernels (several
//! transcendentals over long rows).
//!
//! Tolerance: |jit − f64| ≤ 2e-4·(1 + |f64|). Elements whose evaluation compares two
//! values within 1e-5 relative of each other are skipped: the f32 kernel may decide
//! that tie either way. The ops' own errors are a few ulp
//! (`math_error.rs`); the bound leaves room for error growth along a chain of up to
//! eight ops, while any indexing mistake (a wrong element) is far outside it.

mod common;

use common::{Rng, eval64, has_near_tie, strided_offset};
use proptest::prelude::*;
use shapejit_jit::{
    BinaryOp, CmpOp, ElementwiseSpec, InputLayout, JitError, Program, ShapeMode, UnaryOp, ValueId,
    compile_elementwise, contiguous_strides, required_len,
};

/// One generated input: how it is laid out in memory.
#[derive(Clone, Debug)]
enum Kind {
    Contiguous,
    /// dims whose bit is set are size 1 in the input (stride 0)
    Broadcast(u8),
    /// strides of a permuted buffer; in family tests dim 0 stays outermost
    Transposed(u64),
    /// a window of a larger buffer with steps 1 or 2 and a start offset
    Sliced(u64),
}

/// A concrete input: its buffer, the offset of element 0 and its strides.
struct Input {
    buffer: Vec<f32>,
    offset: usize,
    strides: Vec<usize>,
}

fn make_input(kind: &Kind, shape: &[usize], family: bool, rng: &mut Rng) -> Input {
    let rank = shape.len();
    match *kind {
        Kind::Contiguous => {
            let n: usize = shape.iter().product();
            Input {
                buffer: rng.vec(n, -2.0, 2.0),
                offset: 0,
                strides: contiguous_strides(shape),
            }
        }
        Kind::Broadcast(mask) => {
            let own: Vec<usize> = shape
                .iter()
                .enumerate()
                .map(|(d, &n)| if mask >> d & 1 == 1 { 1 } else { n })
                .collect();
            let layout = InputLayout::broadcast(&own, shape).expect("size-1 dims broadcast");
            let n: usize = own.iter().product();
            Input {
                buffer: rng.vec(n, -2.0, 2.0),
                offset: 0,
                strides: layout.strides,
            }
        }
        Kind::Transposed(seed) => {
            // Random permutation (Fisher–Yates), dim 0 fixed for families.
            let mut perm: Vec<usize> = (0..rank).collect();
            let mut r = Rng(seed | 1);
            let first = usize::from(family);
            for i in (first + 1..rank).rev() {
                let j = first + (r.next_u64() as usize) % (i - first + 1);
                perm.swap(i, j);
            }
            let buf_shape: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
            let buf_strides = contiguous_strides(&buf_shape);
            let mut strides = vec![0; rank];
            for (j, &d) in perm.iter().enumerate() {
                strides[d] = buf_strides[j];
            }
            let n: usize = shape.iter().product();
            Input {
                buffer: rng.vec(n, -2.0, 2.0),
                offset: 0,
                strides,
            }
        }
        Kind::Sliced(seed) => {
            let mut r = Rng(seed | 1);
            let steps: Vec<usize> = (0..rank).map(|_| 1 + (r.next_u64() % 2) as usize).collect();
            let starts: Vec<usize> = (0..rank).map(|_| (r.next_u64() % 2) as usize).collect();
            let buf_shape: Vec<usize> = shape
                .iter()
                .zip(&steps)
                .zip(&starts)
                .map(|((&n, &s), &o)| o + n * s + 1)
                .collect();
            let buf_strides = contiguous_strides(&buf_shape);
            let strides: Vec<usize> = buf_strides
                .iter()
                .zip(&steps)
                .map(|(&b, &s)| b * s)
                .collect();
            let offset: usize = buf_strides.iter().zip(&starts).map(|(&b, &o)| b * o).sum();
            let n: usize = buf_shape.iter().product();
            Input {
                buffer: rng.vec(n, -2.0, 2.0),
                offset,
                strides,
            }
        }
    }
}

/// Builds a program from generated choices; operands of partial functions are
/// made safe (log/sqrt/div/pow of |x| + 0.5, exp of tanh x) so values stay bounded.
fn make_program(n_inputs: usize, choices: &[(u8, u16, u16, u16)], n_outputs: usize) -> Program {
    let mut p = Program::new();
    let mut vals: Vec<ValueId> = (0..n_inputs as u32).map(|i| p.input(i)).collect();
    for &(code, a, b, c) in choices {
        let pick = |k: u16| vals[k as usize % vals.len()];
        let (x, y, z) = (pick(a), pick(b), pick(c));
        let v = match code % 26 {
            0 => p.binary(BinaryOp::Add, x, y),
            1 => p.binary(BinaryOp::Sub, x, y),
            2 => p.binary(BinaryOp::Mul, x, y),
            3 => {
                let d = safe_positive(&mut p, y);
                p.binary(BinaryOp::Div, x, d)
            }
            4 => p.binary(BinaryOp::Max, x, y),
            5 => p.binary(BinaryOp::Min, x, y),
            6 => {
                let base = safe_positive(&mut p, x);
                let e = p.unary(UnaryOp::Tanh, y);
                p.binary(BinaryOp::Pow, base, e)
            }
            7 => p.unary(UnaryOp::Neg, x),
            8 => p.unary(UnaryOp::Abs, x),
            9 => {
                let ax = p.unary(UnaryOp::Abs, x);
                p.unary(UnaryOp::Sqrt, ax)
            }
            10 => {
                let d = safe_positive(&mut p, x);
                p.unary(UnaryOp::Reciprocal, d)
            }
            11 => {
                let t = p.unary(UnaryOp::Tanh, x);
                p.unary(UnaryOp::Exp, t)
            }
            12 => {
                let d = safe_positive(&mut p, x);
                p.unary(UnaryOp::Log, d)
            }
            13 => p.unary(UnaryOp::Tanh, x),
            14 => p.unary(UnaryOp::Sigmoid, x),
            15 => p.unary(UnaryOp::Erf, x),
            16 => p.unary(UnaryOp::GeluErf, x),
            17 => p.unary(UnaryOp::GeluTanh, x),
            18 => p.unary(UnaryOp::Relu, x),
            19 => p.unary(UnaryOp::LeakyRelu { alpha: 0.1 }, x),
            20 => {
                let t = p.unary(UnaryOp::Tanh, x);
                p.unary(UnaryOp::Elu { alpha: 1.5 }, t)
            }
            21 => p.unary(
                UnaryOp::Clip {
                    min: -0.5,
                    max: 0.75,
                },
                x,
            ),
            22 => {
                let t = p.unary(UnaryOp::Tanh, x);
                p.unary(UnaryOp::PowI(i32::from(c % 7) - 3), t)
            }
            23 => {
                let m = p.compare(CmpOp::Lt, x, y);
                p.select(m, z, x)
            }
            24 => {
                let ops = [CmpOp::Eq, CmpOp::Ne, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
                let m = p.compare(ops[c as usize % ops.len()], x, y);
                p.select(m, y, z)
            }
            _ => {
                let k = p.constant(0.375);
                p.binary(BinaryOp::Mul, x, k)
            }
        };
        // PowI of tanh can be huge near 0 for negative powers; keep it bounded.
        let v = if code % 26 == 22 {
            p.unary(UnaryOp::Tanh, v)
        } else {
            v
        };
        vals.push(v);
    }
    for k in 0..n_outputs {
        p.output(vals[vals.len() - 1 - k % vals.len()]);
    }
    p
}

fn safe_positive(p: &mut Program, x: ValueId) -> ValueId {
    let ax = p.unary(UnaryOp::Abs, x);
    let half = p.constant(0.5);
    p.binary(BinaryOp::Add, ax, half)
}

/// Compiles, runs at `outer` and compares against the f64 evaluation.
// `flat` indexes every output and computes every input's strided offset.
#[allow(clippy::needless_range_loop)]
fn check_case(
    shape: &[usize],
    mode: ShapeMode,
    kinds: &[Kind],
    program: &Program,
    outers: &[usize],
    seed: u64,
) {
    let family = mode == ShapeMode::Family;
    let mut rng = Rng(seed | 1);
    // Layouts are taken from inputs built for shape[0]; their strides do not depend on
    // dim 0 (family tests keep dim 0 outermost), so one kernel serves every outer.
    let probe: Vec<Input> = kinds
        .iter()
        .map(|k| make_input(k, shape, family, &mut rng))
        .collect();
    let spec = ElementwiseSpec {
        name: "prop".to_string(),
        shape: shape.to_vec(),
        mode,
        inputs: probe
            .iter()
            .map(|i| InputLayout {
                strides: i.strides.clone(),
            })
            .collect(),
        program: program.clone(),
    };
    let kernel = compile_elementwise(&spec).expect("compiles");
    for &outer in outers {
        let mut run_shape = shape.to_vec();
        if family {
            run_shape[0] = outer;
        }
        let mut rng = Rng(seed.wrapping_add(outer as u64) | 1);
        let inputs: Vec<Input> = kinds
            .iter()
            .map(|k| make_input(k, &run_shape, family, &mut rng))
            .collect();
        for (a, b) in inputs.iter().zip(&probe) {
            for d in (0..run_shape.len()).filter(|&d| run_shape[d] > 1) {
                assert_eq!(
                    a.strides[d], b.strides[d],
                    "test layouts must not depend on dim 0"
                );
            }
        }
        let numel: usize = run_shape.iter().product();
        let n_out = program.outputs.len();
        let mut outs: Vec<Vec<f32>> = vec![vec![f32::NAN; numel]; n_out];
        let slices: Vec<&[f32]> = inputs.iter().map(|i| &i.buffer[i.offset..]).collect();
        let mut out_slices: Vec<&mut [f32]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
        kernel.run(&slices, &mut out_slices, outer).expect("runs");
        for flat in 0..numel {
            let xs: Vec<f64> = inputs
                .iter()
                .map(|i| i.buffer[i.offset + strided_offset(flat, &run_shape, &i.strides)] as f64)
                .collect();
            if has_near_tie(program, &xs, 1e-5) {
                continue;
            }
            let want = eval64(program, &xs, None);
            for (k, &w) in want.iter().enumerate() {
                let got = outs[k][flat] as f64;
                assert!(
                    (got - w).abs() <= 2e-4 * (1.0 + w.abs()),
                    "output {k} element {flat} of {run_shape:?}: got {got}, want {w}; inputs {xs:?}\n{program:?}"
                );
            }
        }
    }
}

fn kind_strategy() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Contiguous),
        any::<u8>().prop_map(Kind::Broadcast),
        any::<u64>().prop_map(Kind::Transposed),
        any::<u64>().prop_map(Kind::Sliced),
    ]
}

fn shape_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        prop::collection::vec(1usize..6, 1..=4),
        // long inner dims: vector loop + unrolled remainder + scalar tail
        (1usize..4, 1usize..70).prop_map(|(a, b)| vec![a, b]),
    ]
}

fn choices_strategy() -> impl Strategy<Value = Vec<(u8, u16, u16, u16)>> {
    prop::collection::vec(
        (any::<u8>(), any::<u16>(), any::<u16>(), any::<u16>()),
        1..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn exact_kernels_match_reference(
        shape in shape_strategy(),
        kinds in prop::collection::vec(kind_strategy(), 1..=3),
        choices in choices_strategy(),
        n_outputs in 1usize..=2,
        seed in any::<u64>(),
    ) {
        let program = make_program(kinds.len(), &choices, n_outputs);
        check_case(&shape, ShapeMode::Exact, &kinds, &program, &[shape[0]], seed);
    }

    /// Several transcendentals and inner dims of at least one staged tile (32):
    /// the main loop runs in stages over a stack tile.
    #[test]
    fn staged_kernels_match_reference(
        shape in (1usize..4, 32usize..140).prop_map(|(a, b)| vec![a, b]),
        kinds in prop::collection::vec(kind_strategy(), 1..=3),
        heavy in prop::collection::vec((11u8..=17, any::<u16>()), 2..=4),
        choices in choices_strategy(),
        seed in any::<u64>(),
    ) {
        let mut all: Vec<(u8, u16, u16, u16)> =
            heavy.iter().map(|&(code, a)| (code, a, a / 3, a / 7)).collect();
        all.extend(choices);
        let program = make_program(kinds.len(), &all, 2);
        check_case(&shape, ShapeMode::Exact, &kinds, &program, &[shape[0]], seed);
        // rank-1 family: the runtime dim is the staged one
        let program = make_program(1, &all, 1);
        check_case(&[4], ShapeMode::Family, &[Kind::Contiguous], &program, &[31, 32, 95, 140], seed);
    }

    #[test]
    fn family_kernels_match_reference(
        inner in prop::collection::vec(1usize..6, 0..=2),
        kinds in prop::collection::vec(kind_strategy(), 1..=3),
        choices in choices_strategy(),
        outers in prop::collection::vec(1usize..=70, 1..=3),
        seed in any::<u64>(),
    ) {
        let mut shape = vec![4];
        shape.extend(inner);
        let program = make_program(kinds.len(), &choices, 1);
        check_case(&shape, ShapeMode::Family, &kinds, &program, &outers, seed);
    }
}

#[test]
fn family_kernel_serves_every_batch_size() {
    let shape = [8, 3, 7];
    let kinds = [Kind::Contiguous, Kind::Broadcast(0b001), Kind::Sliced(11)];
    let program = make_program(
        3,
        &[(0, 0, 1, 2), (16, 3, 0, 0), (2, 4, 2, 0), (23, 0, 5, 1)],
        1,
    );
    let outers: Vec<usize> = (1..=70).collect();
    check_case(&shape, ShapeMode::Family, &kinds, &program, &outers, 5);
    // rank-1 family: the runtime dim is also the vectorized one
    check_case(
        &[4],
        ShapeMode::Family,
        &[Kind::Contiguous],
        &program_unary(UnaryOp::Sigmoid),
        &outers,
        6,
    );
}

fn program_unary(op: UnaryOp) -> Program {
    let mut p = Program::new();
    let x = p.input(0);
    let y = p.unary(op, x);
    p.output(y);
    p
}

#[test]
fn every_inner_length_up_to_70() {
    for n in 1..=70 {
        check_case(
            &[n],
            ShapeMode::Exact,
            &[Kind::Contiguous, Kind::Broadcast(1)],
            &make_program(2, &[(0, 0, 1, 0)], 1),
            &[n],
            n as u64,
        );
        check_case(
            &[2, n],
            ShapeMode::Exact,
            &[Kind::Transposed(3)],
            &program_unary(UnaryOp::Tanh),
            &[2],
            n as u64,
        );
    }
}

#[test]
fn scalar_and_empty_shapes() {
    check_case(
        &[],
        ShapeMode::Exact,
        &[Kind::Contiguous],
        &program_unary(UnaryOp::Exp),
        &[0],
        1,
    );
    // zero elements: nothing is written, nothing is read
    let spec = ElementwiseSpec {
        name: "empty".to_string(),
        shape: vec![3, 0],
        mode: ShapeMode::Exact,
        inputs: vec![InputLayout::contiguous(&[3, 0])],
        program: program_unary(UnaryOp::Neg),
    };
    let kernel = compile_elementwise(&spec).expect("compiles");
    kernel.run(&[&[]], &mut [&mut []], 0).expect("runs");
    assert_eq!(required_len(&[3, 0], &[0, 1]), Some(0));
}

#[test]
fn invalid_specs_are_typed_errors() {
    let mut p = Program::new();
    let x = p.input(0);
    p.output(ValueId(7));
    let spec = |program: Program, strides: Vec<usize>| ElementwiseSpec {
        name: "bad".to_string(),
        shape: vec![2, 3],
        mode: ShapeMode::Exact,
        inputs: vec![InputLayout { strides }],
        program,
    };
    let err = compile_elementwise(&spec(p.clone(), vec![3, 1])).unwrap_err();
    assert!(matches!(err, JitError::InvalidSpec { .. }), "{err}");
    p.outputs = vec![x];
    let err = compile_elementwise(&spec(p.clone(), vec![1])).unwrap_err();
    assert!(err.to_string().contains("input 0 has 1 strides"), "{err}");
    let mut q = Program::new();
    let a = q.input(0);
    let m = q.compare(CmpOp::Lt, a, a);
    q.output(m);
    let err = compile_elementwise(&spec(q, vec![3, 1])).unwrap_err();
    assert!(err.to_string().contains("mask"), "{err}");
    let mut r = Program::new();
    let a = r.input(3);
    r.output(a);
    let err = compile_elementwise(&spec(r, vec![3, 1])).unwrap_err();
    assert!(err.to_string().contains("in3"), "{err}");
}

#[test]
fn short_buffers_are_rejected_before_the_call() {
    let spec = ElementwiseSpec {
        name: "neg".to_string(),
        shape: vec![4, 5],
        mode: ShapeMode::Family,
        inputs: vec![InputLayout::contiguous(&[4, 5])],
        program: program_unary(UnaryOp::Neg),
    };
    let kernel = compile_elementwise(&spec).expect("compiles");
    let input = vec![1.0f32; 30];
    let mut out = vec![0.0f32; 30];
    // outer 7 needs 35 elements
    let err = kernel.run(&[&input], &mut [&mut out], 7).unwrap_err();
    assert!(
        matches!(
            err,
            JitError::BadCall {
                expected: 35,
                actual: 30,
                ..
            }
        ),
        "{err}"
    );
    kernel.run(&[&input], &mut [&mut out], 6).expect("fits");
    assert!(out.iter().all(|&v| v == -1.0));
}
