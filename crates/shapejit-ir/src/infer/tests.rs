//! Unit tests for shape inference: one or more cases per op, symbolic dims,
//! known-contents propagation and error messages.

use super::*;
use crate::op::{BinaryOp, ReduceOp, UnaryOp, Window2d};
use crate::shape;
use crate::tensor::Tensor;

fn info(dtype: DType, shape: Shape) -> ValueInfo {
    ValueInfo {
        name: "v".into(),
        ty: ValueType { dtype, shape },
        known: None,
    }
}

fn f32s(shape: Shape) -> ValueInfo {
    info(DType::F32, shape)
}

fn known_vec(dims: Vec<Dim>) -> ValueInfo {
    let mut v = info(DType::I64, Shape(vec![Dim::from(dims.len())]));
    v.known = Some(dims);
    v
}

fn ints(values: &[i64]) -> ValueInfo {
    known_vec(values.iter().map(|&v| Dim::known(v)).collect())
}

fn run(op: Op, inputs: &[ValueInfo]) -> Result<Vec<Inferred>, String> {
    let refs: Vec<&ValueInfo> = inputs.iter().collect();
    infer(&op, &refs, &mut InferCtx::default())
}

fn one_shape(op: Op, inputs: impl Into<Vec<ValueInfo>>) -> String {
    match run(op, &inputs.into()) {
        Ok(outs) => outs
            .iter()
            .map(|o| o.ty.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn broadcasting_symbolic_and_errors() {
    let add = Op::Binary(BinaryOp::Add);
    assert_eq!(
        one_shape(
            add.clone(),
            &[f32s(shape!["batch", 1, 4]), f32s(shape![3, 1])]
        ),
        "f32[batch, 3, 4]"
    );
    assert_eq!(
        one_shape(add.clone(), &[f32s(shape!["batch", 4]), f32s(shape![1, 4])]),
        "f32[batch, 4]"
    );
    assert_eq!(
        one_shape(add.clone(), &[f32s(shape!["batch", 4]), f32s(shape![3, 4])]),
        "f32[3, 4]",
        "a symbol meets a known dim as the known dim (the run checks it)"
    );
    assert_eq!(
        one_shape(add.clone(), &[f32s(shape!["batch"]), f32s(shape!["seq"])]),
        "f32[batch]",
        "two symbols meet as the first (the run checks the second)"
    );
    assert_eq!(
        one_shape(add.clone(), &[f32s(shape![2, 4]), f32s(shape![3, 4])]),
        "error: cannot broadcast [2, 4] with [3, 4]: dim 2 vs 3"
    );
    assert_eq!(
        one_shape(add, &[f32s(shape![2]), info(DType::I64, shape![2])]),
        "error: input 1 has dtype i64, expected f32 (the dtype of input 0)"
    );
    assert_eq!(
        one_shape(Op::Binary(BinaryOp::Lt), &[f32s(shape![2]), f32s(shape![])]),
        "bool[2]"
    );
    assert_eq!(
        one_shape(
            Op::Binary(BinaryOp::And),
            &[f32s(shape![2]), f32s(shape![2])]
        ),
        "error: input 0 has dtype f32, expected bool"
    );
    assert_eq!(
        one_shape(Op::Unary(UnaryOp::Not), &[info(DType::Bool, shape![2])]),
        "bool[2]"
    );
    assert_eq!(
        one_shape(Op::Unary(UnaryOp::Exp), &[info(DType::I64, shape![2])]),
        "error: input 0 has dtype i64, expected f32"
    );
    let cond = info(DType::Bool, shape!["batch", 1]);
    assert_eq!(
        one_shape(Op::Where, &[cond, f32s(shape![1, 8]), f32s(shape![])]),
        "f32[batch, 8]"
    );
    assert_eq!(
        one_shape(Op::Cast { to: DType::I64 }, &[f32s(shape!["n"])]),
        "i64[n]"
    );
}

#[test]
fn matmul_and_gemm() {
    let mm = |a: Shape, b: Shape| one_shape(Op::MatMul, &[f32s(a), f32s(b)]);
    assert_eq!(
        mm(shape!["batch", 8, 32, 64], shape![64, 32]),
        "f32[batch, 8, 32, 32]"
    );
    assert_eq!(mm(shape!["b", 1, 3, 4], shape![5, 4, 6]), "f32[b, 5, 3, 6]");
    assert_eq!(mm(shape![4], shape![4]), "f32[]");
    assert_eq!(mm(shape![4], shape![2, 4, 3]), "f32[2, 3]");
    assert_eq!(mm(shape![2, 4], shape![4]), "f32[2]");
    assert_eq!(
        mm(shape!["batch", 512], shape![256, 10]),
        "error: inner dims differ: expected 512 == 256, got a [batch, 512] and b [256, 10]"
    );
    let gemm = Op::Gemm {
        alpha: 1.0,
        beta: 1.0,
        trans_a: false,
        trans_b: true,
    };
    assert_eq!(
        one_shape(
            gemm.clone(),
            &[f32s(shape!["m", 4]), f32s(shape![6, 4]), f32s(shape![6])]
        ),
        "f32[m, 6]"
    );
    assert!(
        one_shape(
            gemm,
            &[f32s(shape!["m", 4]), f32s(shape![6, 4]), f32s(shape![5])]
        )
        .starts_with("error")
    );
}

#[test]
fn reductions_softmax_norms() {
    let r = |axes: Vec<i64>, keepdims| Op::Reduce {
        op: ReduceOp::Sum,
        axes,
        keepdims,
    };
    assert_eq!(
        one_shape(r(vec![-1], true), &[f32s(shape!["b", 3, 4])]),
        "f32[b, 3, 1]"
    );
    assert_eq!(
        one_shape(r(vec![0, 2], false), &[f32s(shape!["b", 3, 4])]),
        "f32[3]"
    );
    assert_eq!(
        one_shape(r(vec![], false), &[f32s(shape!["b", 3])]),
        "f32[]"
    );
    assert_eq!(
        one_shape(r(vec![], true), &[f32s(shape!["b", 3])]),
        "f32[1, 1]"
    );
    assert_eq!(
        one_shape(r(vec![3], true), &[f32s(shape!["b", 3])]),
        "error: axis 3 is out of range for rank 2, expected -2 to 1"
    );
    assert_eq!(
        one_shape(r(vec![1, -1], true), &[f32s(shape!["b", 3])]),
        "error: axis -1 is listed twice in [1, -1]"
    );
    assert_eq!(
        one_shape(Op::Softmax { axis: -1 }, &[f32s(shape!["b", 7])]),
        "f32[b, 7]"
    );
    let ln = Op::LayerNorm {
        axis: -1,
        epsilon: 1e-5,
    };
    assert_eq!(
        one_shape(
            ln.clone(),
            &[
                f32s(shape!["b", 32, 256]),
                f32s(shape![256]),
                f32s(shape![256])
            ]
        ),
        "f32[b, 32, 256]"
    );
    assert_eq!(
        one_shape(ln, &[f32s(shape!["b", 32, 256]), f32s(shape![128])]),
        "error: input 1 has shape [128], expected one that broadcasts to [256]"
    );
    let bn = Op::BatchNorm {
        epsilon: 1e-5,
        activation: None,
    };
    let c = || f32s(shape![3]);
    assert_eq!(
        one_shape(
            bn.clone(),
            &[f32s(shape!["n", 3, 8, 8]), c(), c(), c(), c()]
        ),
        "f32[n, 3, 8, 8]"
    );
    assert!(
        one_shape(bn, &[f32s(shape!["n", 4, 8, 8]), c(), c(), c(), c()])
            .starts_with("error: input 1")
    );
}

#[test]
fn reshape_known_and_unknown_targets() {
    let x = f32s(shape!["batch", 32, 256]);
    let reshape = Op::Reshape { allowzero: false };
    assert_eq!(
        one_shape(reshape.clone(), &[x.clone(), ints(&[0, 0, 8, 32])]),
        "f32[batch, 32, 8, 32]"
    );
    assert_eq!(
        one_shape(reshape.clone(), &[x.clone(), ints(&[-1, 256])]),
        "f32[batch*32, 256]"
    );
    assert_eq!(
        one_shape(reshape.clone(), &[x.clone(), ints(&[0, -1])]),
        "f32[batch, 8192]"
    );
    let target = known_vec(vec![
        Dim::sym("batch"),
        Dim::known(-1),
        Dim::known(8),
        Dim::known(32),
    ]);
    assert_eq!(
        one_shape(reshape.clone(), &[x.clone(), target]),
        "f32[batch, 32, 8, 32]"
    );
    let unknown = info(DType::I64, shape![3]);
    assert_eq!(
        one_shape(reshape.clone(), &[x.clone(), unknown]),
        "f32[_d0, _d1, _d2]"
    );
    assert_eq!(
        one_shape(reshape.clone(), &[f32s(shape![6]), ints(&[4, -1])]),
        "error: cannot reshape [6] (6 elements) to [4, -1]: not divisible"
    );
    assert_eq!(
        one_shape(reshape.clone(), &[f32s(shape![6]), ints(&[4, 2])]),
        "error: cannot reshape [6] (6 elements) to [4, 2] (8 elements)"
    );
    assert_eq!(
        one_shape(reshape.clone(), &[x.clone(), ints(&[-1, -1])]),
        "error: target [-1, -1] has more than one -1"
    );
    assert_eq!(
        one_shape(reshape, &[x, info(DType::I64, shape!["n"])]),
        "error: input 1 has symbolic length n, expected a known length"
    );
}

#[test]
fn shape_chain_keeps_reshape_symbolic() {
    // shape(x) -> gather [0] -> unsqueeze -> concat [-1, 64] -> reshape
    let x = f32s(shape!["batch", "seq", 64]);
    let mut ctx = InferCtx::default();
    let shape_out = infer(
        &Op::Shape {
            start: 0,
            end: None,
        },
        &[&x],
        &mut ctx,
    )
    .unwrap()
    .remove(0);
    let shp = ValueInfo {
        name: "s".into(),
        ty: shape_out.ty,
        known: shape_out.known,
    };
    assert_eq!(shp.ty.to_string(), "i64[3]");
    let idx = ValueInfo {
        name: "i".into(),
        ..movement_info(constant_scalar(0))
    };
    let g = infer(&Op::Gather { axis: 0 }, &[&shp, &idx], &mut ctx)
        .unwrap()
        .remove(0);
    assert_eq!(g.ty.to_string(), "i64[]");
    assert_eq!(g.known, Some(vec![Dim::sym("batch")]));
    let gi = ValueInfo {
        name: "g".into(),
        ty: g.ty,
        known: g.known,
    };
    let u = infer(&Op::Unsqueeze { axes: vec![0] }, &[&gi], &mut ctx)
        .unwrap()
        .remove(0);
    let ui = ValueInfo {
        name: "u".into(),
        ty: u.ty,
        known: u.known,
    };
    let tail = ints(&[-1, 64]);
    let c = infer(&Op::Concat { axis: 0 }, &[&ui, &tail], &mut ctx)
        .unwrap()
        .remove(0);
    assert_eq!(
        c.known,
        Some(vec![Dim::sym("batch"), Dim::known(-1), Dim::known(64)])
    );
    let ci = ValueInfo {
        name: "c".into(),
        ty: c.ty,
        known: c.known,
    };
    let r = infer(&Op::Reshape { allowzero: false }, &[&x, &ci], &mut ctx)
        .unwrap()
        .remove(0);
    assert_eq!(r.ty.to_string(), "f32[batch, seq, 64]");
    // arithmetic on knowns: seq * 64 and an exact division
    let a = known_vec(vec![Dim::sym("seq")]);
    let m = run(Op::Binary(BinaryOp::Mul), &[a.clone(), ints(&[64])])
        .unwrap()
        .remove(0);
    assert_eq!(m.known, Some(vec![Dim::parse("seq*64").unwrap()]));
    let d = run(Op::Binary(BinaryOp::Div), &[a, ints(&[2])])
        .unwrap()
        .remove(0);
    assert_eq!(d.known, None, "seq / 2 is not exact");
    let size = run(Op::Size, &[x]).unwrap().remove(0);
    assert_eq!(size.known, Some(vec![Dim::parse("batch*seq*64").unwrap()]));
}

fn constant_scalar(v: i64) -> Tensor {
    Tensor::scalar(v)
}

fn movement_info(t: Tensor) -> ValueInfo {
    let i = movement::constant(&t);
    ValueInfo {
        name: "c".into(),
        ty: i.ty,
        known: i.known,
    }
}

#[test]
fn movement_ops() {
    let x = f32s(shape!["b", 1, 4]);
    assert_eq!(
        one_shape(
            Op::Transpose {
                perm: vec![2, 0, 1]
            },
            [x.clone()]
        ),
        "f32[4, b, 1]"
    );
    assert!(
        one_shape(
            Op::Transpose {
                perm: vec![0, 0, 1]
            },
            [x.clone()]
        )
        .starts_with("error: perm [0, 0, 1]")
    );
    assert_eq!(
        one_shape(Op::Squeeze { axes: vec![-2] }, [x.clone()]),
        "f32[b, 4]"
    );
    // without axes the run drops every 1, b too when it is 1: only known dims may go
    assert!(
        one_shape(Op::Squeeze { axes: vec![] }, [x.clone()])
            .starts_with("error: squeeze without axes of [b, 1, 4]")
    );
    assert_eq!(
        one_shape(Op::Squeeze { axes: vec![] }, [f32s(shape![1, 3, 1])]),
        "f32[3]"
    );
    assert_eq!(
        one_shape(Op::Squeeze { axes: vec![0] }, [x.clone()]),
        "error: axis 0 of [b, 1, 4] has dim b, expected 1"
    );
    assert_eq!(
        one_shape(Op::Unsqueeze { axes: vec![0, -1] }, [x.clone()]),
        "f32[1, b, 1, 4, 1]"
    );
    assert_eq!(one_shape(Op::Flatten { axis: 1 }, [x.clone()]), "f32[b, 4]");
    assert_eq!(
        one_shape(Op::Flatten { axis: 3 }, [x.clone()]),
        "f32[b*4, 1]"
    );
    assert_eq!(
        one_shape(Op::Flatten { axis: 0 }, [x.clone()]),
        "f32[1, b*4]"
    );
    let y = f32s(shape!["b", 1, "s"]);
    assert_eq!(
        one_shape(Op::Concat { axis: -1 }, &[x.clone(), y.clone()]),
        "f32[b, 1, s+4]"
    );
    assert!(
        one_shape(Op::Concat { axis: 0 }, &[x.clone(), y])
            .starts_with("error: input 1 has shape [b, 1, s]")
    );
    assert_eq!(
        one_shape(
            Op::Split {
                axis: 2,
                sizes: vec![1, 3]
            },
            [x.clone()]
        ),
        "f32[b, 1, 1], f32[b, 1, 3]"
    );
    assert!(
        one_shape(
            Op::Split {
                axis: 2,
                sizes: vec![1, 2]
            },
            [x.clone()]
        )
        .starts_with("error: sizes [1, 2] sum to 3")
    );
    let gather = Op::Gather { axis: 1 };
    assert_eq!(
        one_shape(
            gather.clone(),
            &[f32s(shape![5, "n", 3]), info(DType::I64, shape!["b", 2])]
        ),
        "f32[5, b, 2, 3]"
    );
    assert_eq!(
        one_shape(
            gather,
            &[f32s(shape![5, "n", 3]), info(DType::I64, shape![])]
        ),
        "f32[5, 3]"
    );
    assert_eq!(
        one_shape(
            Op::Pad {
                pads: vec![0, 1, 0, 2],
                value: 0.0
            },
            &[f32s(shape!["b", 3])]
        ),
        "f32[b, 6]"
    );
    assert!(
        one_shape(
            Op::Pad {
                pads: vec![0, -4, 0, 0],
                value: 0.0
            },
            &[f32s(shape!["b", 3])]
        )
        .contains("negative dim")
    );
    assert_eq!(
        one_shape(Op::Expand, &[f32s(shape![1, 4]), ints(&[3, 1, 1])]),
        "f32[3, 1, 4]"
    );
    assert_eq!(
        one_shape(
            Op::Expand,
            &[f32s(shape![1, 4]), info(DType::I64, shape![3])]
        ),
        "f32[_d0, _d1, 4]"
    );
    assert_eq!(
        one_shape(Op::Tile, &[f32s(shape!["b", 4]), ints(&[2, 3])]),
        "f32[b*2, 12]"
    );
    assert_eq!(
        one_shape(
            Op::Shape {
                start: 1,
                end: Some(-1)
            },
            [x.clone()]
        ),
        "i64[1]"
    );
    assert_eq!(
        one_shape(
            Op::Shape {
                start: -100,
                end: Some(100)
            },
            &[x]
        ),
        "i64[3]"
    );
}

#[test]
fn slice_known_and_symbolic() {
    let sl = |starts: Vec<i64>, ends: Vec<i64>, steps: Vec<i64>, x: Shape| {
        let axes = (0..starts.len() as i64).collect();
        one_shape(
            Op::Slice {
                starts,
                ends,
                axes,
                steps,
            },
            &[f32s(x)],
        )
    };
    let max = i64::MAX;
    assert_eq!(sl(vec![1], vec![max], vec![], shape![10]), "f32[9]");
    assert_eq!(sl(vec![-3], vec![max], vec![], shape![10]), "f32[3]");
    assert_eq!(sl(vec![2], vec![-2], vec![], shape![10]), "f32[6]");
    assert_eq!(sl(vec![0], vec![10], vec![3], shape![10]), "f32[4]");
    assert_eq!(
        sl(vec![max], vec![i64::MIN], vec![-1], shape![10]),
        "f32[10]"
    );
    assert_eq!(sl(vec![8], vec![1], vec![-2], shape![10]), "f32[4]");
    assert_eq!(sl(vec![5], vec![2], vec![], shape![10]), "f32[0]");
    assert_eq!(sl(vec![0], vec![max], vec![], shape!["s"]), "f32[s]");
    // A window of a symbolic dim has a length no polynomial states
    // (min(s, 1), max(s - 1, 0), min(s, 4)): each gets a fresh dim.
    assert_eq!(sl(vec![-1], vec![max], vec![], shape!["s"]), "f32[_d0]");
    assert_eq!(sl(vec![1], vec![max], vec![], shape!["s"]), "f32[_d0]");
    assert_eq!(sl(vec![0], vec![4], vec![], shape!["s"]), "f32[_d0]");
    assert_eq!(sl(vec![0], vec![max], vec![2], shape!["s"]), "f32[_d0]");
    assert_eq!(
        sl(vec![max], vec![i64::MIN], vec![-1], shape!["s"]),
        "f32[s]"
    );
    assert_eq!(
        sl(vec![0], vec![1], vec![0], shape![3]),
        "error: step 0 is 0, expected a non-zero step"
    );
    // known contents through slice: dims [b, s, 64][1..] = [s, 64]
    let k = known_vec(vec![Dim::sym("b"), Dim::sym("s"), Dim::known(64)]);
    let out = run(
        Op::Slice {
            starts: vec![1],
            ends: vec![max],
            axes: vec![0],
            steps: vec![],
        },
        &[k],
    )
    .unwrap();
    assert_eq!(out[0].known, Some(vec![Dim::sym("s"), Dim::known(64)]));
}

#[test]
fn constants_range_and_constant_of_shape() {
    let c = movement::constant(&Tensor::from_vec(vec![2i64, -1], &[2]).unwrap());
    assert_eq!(c.known, Some(vec![Dim::known(2), Dim::known(-1)]));
    let big = movement::constant(&Tensor::zeros(DType::I64, &[65]).unwrap());
    assert_eq!(big.known, None);
    let fill = Tensor::scalar(0f32);
    assert_eq!(
        one_shape(
            Op::ConstantOfShape {
                value: fill.clone()
            },
            &[known_vec(vec![Dim::sym("b"), Dim::known(3)])]
        ),
        "f32[b, 3]"
    );
    assert_eq!(
        one_shape(
            Op::ConstantOfShape { value: fill },
            &[info(DType::I64, shape![2])]
        ),
        "f32[_d0, _d1]"
    );
    let s = |v: i64| movement_info(Tensor::scalar(v));
    assert_eq!(one_shape(Op::Range, &[s(0), s(10), s(3)]), "i64[4]");
    assert_eq!(one_shape(Op::Range, &[s(10), s(0), s(-3)]), "i64[4]");
    assert_eq!(one_shape(Op::Range, &[s(5), s(0), s(1)]), "i64[0]");
    assert_eq!(
        one_shape(Op::Range, &[s(0), info(DType::I64, shape![]), s(1)]),
        "i64[_d0]"
    );
    assert_eq!(
        one_shape(Op::Range, &[s(0), s(1), s(0)]),
        "error: delta is 0, expected a non-zero delta"
    );
}

#[test]
fn conv_and_pools() {
    let win = |k: usize, s: usize, p: usize| Window2d {
        kernel: [k, k],
        strides: [s, s],
        pads: [p; 4],
        dilations: [1, 1],
    };
    let conv = Op::Conv2d {
        window: win(3, 1, 1),
        groups: 1,
        activation: None,
    };
    let x = f32s(shape!["n", 3, 32, 32]);
    assert_eq!(
        one_shape(
            conv,
            &[x.clone(), f32s(shape![16, 3, 3, 3]), f32s(shape![16])]
        ),
        "f32[n, 16, 32, 32]"
    );
    let strided = Op::Conv2d {
        window: win(3, 2, 0),
        groups: 1,
        activation: None,
    };
    assert_eq!(
        one_shape(strided.clone(), &[x.clone(), f32s(shape![8, 3, 3, 3])]),
        "f32[n, 8, 15, 15]"
    );
    assert_eq!(
        one_shape(
            strided,
            &[f32s(shape!["n", 3, "h", 9]), f32s(shape![8, 3, 3, 3])]
        ),
        "f32[n, 8, _d0, 4]"
    );
    let grouped = Op::Conv2d {
        window: win(1, 1, 0),
        groups: 2,
        activation: None,
    };
    assert_eq!(
        one_shape(
            grouped.clone(),
            &[f32s(shape![1, 4, 5, 5]), f32s(shape![6, 2, 1, 1])]
        ),
        "f32[1, 6, 5, 5]"
    );
    assert!(
        one_shape(
            grouped,
            &[f32s(shape![1, 4, 5, 5]), f32s(shape![6, 4, 1, 1])]
        )
        .starts_with("error: input channels")
    );
    let same = Op::Conv2d {
        window: win(3, 1, 1),
        groups: 1,
        activation: None,
    };
    assert_eq!(
        one_shape(
            same,
            &[f32s(shape!["n", 3, "h", 8]), f32s(shape![4, 3, 3, 3])]
        ),
        "f32[n, 4, h, 8]"
    );
    let pool = |ceil_mode| Op::MaxPool2d {
        window: win(3, 2, 0),
        ceil_mode,
    };
    assert_eq!(
        one_shape(pool(false), &[f32s(shape![1, 2, 8, 8])]),
        "f32[1, 2, 3, 3]"
    );
    assert_eq!(
        one_shape(pool(true), &[f32s(shape![1, 2, 8, 8])]),
        "f32[1, 2, 4, 4]"
    );
    let avg = Op::AvgPool2d {
        window: win(2, 2, 0),
        ceil_mode: false,
        count_include_pad: false,
    };
    assert_eq!(
        one_shape(avg, &[f32s(shape!["n", 2, 8, 8])]),
        "f32[n, 2, 4, 4]"
    );
    assert_eq!(
        one_shape(Op::GlobalAvgPool, &[f32s(shape!["n", 2, 8, 8])]),
        "f32[n, 2, 1, 1]"
    );
}

fn sub_graph(inputs: &[ValueType], outputs: &[ValueType]) -> Box<Graph> {
    let mut g = Graph {
        name: "sub".into(),
        ..Graph::default()
    };
    for (i, ty) in inputs.iter().chain(outputs).enumerate() {
        g.values.push(ValueInfo {
            name: format!("v{i}"),
            ty: ty.clone(),
            known: None,
        });
    }
    g.inputs = (0..inputs.len() as u32)
        .map(crate::graph::ValueId)
        .collect();
    g.outputs = (inputs.len() as u32..(inputs.len() + outputs.len()) as u32)
        .map(crate::graph::ValueId)
        .collect();
    Box::new(g)
}

use crate::graph::Graph;

fn ty(dtype: DType, shape: Shape) -> ValueType {
    ValueType { dtype, shape }
}

#[test]
fn if_and_loop() {
    let x = ty(DType::F32, shape!["b", 4]);
    let then_b = sub_graph(
        std::slice::from_ref(&x),
        &[ty(DType::F32, shape!["b", 4]), ty(DType::I64, shape![2])],
    );
    let else_b = sub_graph(
        std::slice::from_ref(&x),
        &[ty(DType::F32, shape!["b", 4]), ty(DType::I64, shape![3])],
    );
    let cond = info(DType::Bool, shape![]);
    let op = Op::If {
        then_branch: then_b.clone(),
        else_branch: else_b,
    };
    assert_eq!(
        one_shape(op, &[cond.clone(), f32s(shape!["b", 4])]),
        "f32[b, 4], i64[_d0]"
    );
    let bad_else = sub_graph(
        std::slice::from_ref(&x),
        &[ty(DType::F32, shape!["b"]), ty(DType::I64, shape![3])],
    );
    let op = Op::If {
        then_branch: then_b.clone(),
        else_branch: bad_else,
    };
    assert_eq!(
        one_shape(op, &[cond.clone(), f32s(shape!["b", 4])]),
        "error: branch output 0: f32[b, 4] vs f32[b], expected the same dtype and rank"
    );
    let op = Op::If {
        then_branch: then_b.clone(),
        else_branch: then_b,
    };
    assert!(
        one_shape(op, &[f32s(shape![]), f32s(shape!["b", 4])])
            .starts_with("error: input 0 is f32[]")
    );

    // loop: iter, cond, carried acc f32[4]; scan output f32[4]
    let i64s = ty(DType::I64, shape![]);
    let b = ty(DType::Bool, shape![]);
    let acc = ty(DType::F32, shape![4]);
    let body = sub_graph(
        &[i64s.clone(), b.clone(), acc.clone()],
        &[b.clone(), acc.clone(), acc.clone()],
    );
    let op = Op::Loop {
        body: body.clone(),
        n_carried: 1,
    };
    let trips = movement_info(Tensor::scalar(5i64));
    assert_eq!(
        one_shape(op.clone(), &[trips, cond.clone(), f32s(shape![4])]),
        "f32[4], f32[5, 4]"
    );
    assert_eq!(
        one_shape(
            op.clone(),
            &[info(DType::I64, shape![]), cond.clone(), f32s(shape![4])]
        ),
        "f32[4], f32[_d0, 4]"
    );
    assert_eq!(
        one_shape(
            op,
            &[
                info(DType::I64, shape![]),
                cond,
                f32s(shape![4]),
                f32s(shape![1])
            ]
        ),
        "error: body takes 3 inputs, expected 4 (iter, cond, 1 carried, 1 captured)"
    );
}

#[test]
fn arity_errors() {
    assert_eq!(
        one_shape(Op::MatMul, &[f32s(shape![2, 2])]),
        "error: expected 2 inputs, got 1"
    );
    assert_eq!(
        one_shape(Op::Identity, &[]),
        "error: expected 1 input, got 0"
    );
    assert_eq!(
        one_shape(Op::Concat { axis: 0 }, &[]),
        "error: expected at least 1 input, got 0"
    );
}

#[test]
fn huge_symbolic_products_are_errors_not_hangs() {
    // 12 dims of two terms each: the expanded element count would have 4096 monomials.
    let dims: Vec<Dim> = (0..12)
        .map(|i| Dim::parse(&format!("a{i}+b{i}")).unwrap())
        .collect();
    let x = f32s(Shape(dims));
    let out = one_shape(Op::Size, [x.clone()]);
    assert!(out.ends_with("is too large a dim expression"), "{out}");
    assert!(one_shape(Op::Flatten { axis: 12 }, [x]).starts_with("error: the element count"));
    // known contents: a too-large product is simply not tracked
    let k = known_vec(vec![Dim::parse("(a+b+c+d)*(e+f+g+h)*(i+j+k)").unwrap()]);
    let sq = run(Op::Binary(BinaryOp::Mul), &[k.clone(), k])
        .unwrap()
        .remove(0);
    assert_eq!(sq.known, None);
}

#[test]
fn flatten_negative_axis_counts_from_the_input_rank() {
    let x = || [f32s(shape!["n", 3, 4])];
    assert_eq!(one_shape(Op::Flatten { axis: -1 }, x()), "f32[n*3, 4]");
    assert_eq!(one_shape(Op::Flatten { axis: -3 }, x()), "f32[1, n*12]");
    assert_eq!(one_shape(Op::Flatten { axis: 3 }, x()), "f32[n*12, 1]");
    assert!(one_shape(Op::Flatten { axis: -4 }, x()).starts_with("error: axis -4"));
}

#[test]
fn index_ops_follow_indices_or_data() {
    let idx = |s: Shape| info(DType::I64, s);
    assert_eq!(
        one_shape(
            Op::GatherElements { axis: 1 },
            [f32s(shape!["n", 5]), idx(shape!["n", 2])]
        ),
        "f32[n, 2]"
    );
    assert_eq!(
        one_shape(
            Op::GatherNd { batch_dims: 1 },
            [f32s(shape!["n", 4, 5, 6]), idx(shape!["n", 3, 2])]
        ),
        "f32[n, 3, 6]"
    );
    assert_eq!(
        one_shape(
            Op::ScatterNd {
                reduction: crate::op::ScatterReduction::Add
            },
            [f32s(shape![4, 5]), idx(shape![3, 1]), f32s(shape![3, 5])]
        ),
        "f32[4, 5]"
    );
    assert!(
        one_shape(
            Op::ScatterNd {
                reduction: crate::op::ScatterReduction::None
            },
            [f32s(shape![4, 5]), idx(shape![3, 1]), f32s(shape![3, 4])]
        )
        .starts_with("error: updates [3, 4] must have shape [3, 5]")
    );
}
