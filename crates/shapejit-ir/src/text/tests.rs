//! Tests of the `.sjir` printer and parser: exact text, round trips over every
//! op, bit-exact constants, quoting and error positions.

use super::parse;
use crate::builder_ops::{BatchNormParams, ConvAttrs, GemmAttrs};
use crate::dtype::DType;
use crate::error::IrError;
use crate::graph::Graph;
use crate::op::{Activation, BinaryOp, Op, ReduceOp, Window2d};
use crate::tensor::Tensor;
use crate::{GraphBuilder, shape, verify};

fn round_trip(g: &Graph) -> Graph {
    let text = g.to_string();
    let parsed = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(parsed.to_string(), text);
    parsed
}

#[test]
fn prints_the_documented_form() {
    let mut b = GraphBuilder::new("mlp");
    let x = b.input("x", DType::F32, shape!["batch", 4]);
    let w = b.constant(
        "w",
        Tensor::from_vec((1..=8).map(|v| v as f32).collect(), &[4, 2]).unwrap(),
    );
    let h = b.matmul(x, w).unwrap();
    let y = b.softmax(h, -1).unwrap();
    b.output("y", y).unwrap();
    let g = b.finish().unwrap();
    let expected = "graph @mlp(%x: f32[batch, 4]) -> (%y) {
  %w = constant f32[4, 2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  %matmul_0 = matmul %x, %w : f32[batch, 2]
  %y = softmax @softmax_0 %matmul_0 {axis = -1} : f32[batch, 2]
}
";
    assert_eq!(g.to_string(), expected);
    let parsed = round_trip(&g);
    assert_eq!(
        parsed, g,
        "parsing gives back the same graph, known contents included"
    );
    verify(&parsed).unwrap();
}

/// A graph using every op (except if/loop, tested below).
fn every_op() -> Graph {
    let mut b = GraphBuilder::new("every op");
    let x = b.input("x", DType::F32, shape!["n", 3, 8, 8]);
    let m = b.input("/m.0/in", DType::F32, shape!["n", 4]);
    let s = b.input("s", DType::I64, shape![]);
    let axes = b.input("axes", DType::I64, shape![1]);
    let w = b.constant(
        "w",
        Tensor::from_vec(vec![0.5f32; 4 * 3 * 3 * 3], &[4, 3, 3, 3]).unwrap(),
    );
    let c = b
        .conv2d(
            x,
            w,
            None,
            ConvAttrs {
                pads: [1; 4],
                ..ConvAttrs::default()
            },
        )
        .unwrap();
    for activation in [
        Activation::Relu,
        Activation::LeakyRelu { alpha: 0.25 },
        Activation::Clip { min: 0.0, max: 6.0 },
    ] {
        let window = Window2d {
            kernel: [3, 3],
            strides: [1, 1],
            pads: [1; 4],
            dilations: [1, 1],
        };
        let fused = Op::Conv2d {
            window,
            groups: 1,
            activation: Some(activation),
        };
        b.op(fused, &[x, w]).unwrap();
    }
    let win = Window2d {
        kernel: [2, 2],
        strides: [2, 2],
        pads: [0; 4],
        dilations: [1, 1],
    };
    let p = b.max_pool2d(c, win.clone(), true).unwrap();
    let a = b.avg_pool2d(p, win, false, true).unwrap();
    let g = b.global_avg_pool(a).unwrap();
    let f = b.flatten(g, 1).unwrap();
    let mut v = f;
    for op in [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
    ] {
        v = b.binary(op, v, m).unwrap();
    }
    let names = [
        "neg",
        "abs",
        "exp",
        "log",
        "sqrt",
        "reciprocal",
        "tanh",
        "sigmoid",
        "silu",
        "relu",
        "erf",
    ];
    for name in names {
        v = match name {
            "neg" => b.neg(v),
            "abs" => b.abs(v),
            "exp" => b.exp(v),
            "log" => b.log(v),
            "sqrt" => b.sqrt(v),
            "reciprocal" => b.reciprocal(v),
            "tanh" => b.tanh(v),
            "sigmoid" => b.sigmoid(v),
            "silu" => b.silu(v),
            "relu" => b.relu(v),
            _ => b.erf(v),
        }
        .unwrap();
    }
    v = b.leaky_relu(v, 0.1).unwrap();
    v = b.elu(v, 1.5).unwrap();
    v = b.gelu(v, true).unwrap();
    v = b.clip(v, f32::NEG_INFINITY, 6.0).unwrap();
    let lt = b.lt(v, m).unwrap();
    let ge = b.ge(v, m).unwrap();
    let both = b.and(lt, ge).unwrap();
    let either = b.or(both, lt).unwrap();
    let not = b.not(either).unwrap();
    let chosen = b.where_(not, v, m).unwrap();
    let eq = b.eq(chosen, m).unwrap();
    let le = b.le(chosen, m).unwrap();
    let gt = b.gt(chosen, m).unwrap();
    let _ = b.and(eq, le).unwrap();
    let _ = b.or(gt, le).unwrap();
    let cast = b.cast(chosen, DType::I64).unwrap();
    let _ = b.identity(cast).unwrap();
    let wt = b.constant("wt", Tensor::from_vec(vec![1f32; 8], &[2, 4]).unwrap());
    let gm = b
        .gemm(
            chosen,
            wt,
            None,
            GemmAttrs {
                alpha: 0.5,
                trans_b: true,
                ..GemmAttrs::default()
            },
        )
        .unwrap();
    let mm = b.matmul(gm, wt).unwrap();
    let bias = b.constant("bias", Tensor::from_vec(vec![0.5f32; 4], &[4]).unwrap());
    let _ = b.op(crate::Op::MatMulBias, &[gm, wt, bias]).unwrap();
    let red = b.reduce(ReduceOp::Mean, mm, &[-1], false).unwrap();
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
        let _ = b.reduce(op, mm, &[], true).unwrap();
    }
    for (op, keepdims) in [(ReduceOp::Sum, true), (ReduceOp::Max, false)] {
        let dyn_op = crate::Op::DynReduce {
            op,
            keepdims,
            noop_with_empty_axes: !keepdims,
        };
        let _ = b.op(dyn_op, &[mm, axes]).unwrap();
    }
    for product in [false, true] {
        let cum = crate::Op::Cumulative {
            product,
            exclusive: product,
            reverse: !product,
        };
        let _ = b.op(cum, &[mm, s]).unwrap();
    }
    let _ = b
        .op(
            crate::Op::BitCast {
                to: crate::DType::I32,
            },
            &[mm],
        )
        .unwrap();
    let k = b.constant("k", Tensor::scalar(1i64));
    let _ = b
        .node(
            crate::Op::TopK {
                axis: -1,
                largest: false,
            },
            &[mm, k],
        )
        .unwrap();
    let _ = b.softmax(mm, 1).unwrap();
    let _ = b.log_softmax(mm, -1).unwrap();
    let scale = b.constant("scale", Tensor::from_vec(vec![1f32; 4], &[4]).unwrap());
    let ln = b.layer_norm(mm, scale, Some(scale), -1, 1e-6).unwrap();
    let params = BatchNormParams {
        scale,
        bias: scale,
        mean: scale,
        var: scale,
    };
    let _ = b.batch_norm(c, params, 1e-3).unwrap();
    let bn_clip = Op::BatchNorm {
        epsilon: 1e-3,
        activation: Some(Activation::Clip { min: 0.0, max: 6.0 }),
    };
    b.op(bn_clip, &[c, scale, scale, scale, scale]).unwrap();
    let r = b.reshape(ln, &[0, 2, -1]).unwrap();
    let t = b.transpose(r, &[2, 0, 1]).unwrap();
    let u = b.unsqueeze(t, &[0]).unwrap();
    let sq = b.squeeze(u, &[0]).unwrap();
    let cat = b.concat(&[sq, sq], -1).unwrap();
    let parts = b.split(cat, 0, &[1, 1]).unwrap();
    let sl = b
        .slice(parts[0], &[0, -1], &[i64::MAX, i64::MAX], &[1, 2], &[1, 1])
        .unwrap();
    let shp = b.shape(sl).unwrap();
    let tail = b.shape_range(sl, 1, Some(-1)).unwrap();
    let idx = b.constant("idx", Tensor::scalar(0i64));
    let first = b.gather(shp, idx, 0).unwrap();
    let _ = b.size(sl).unwrap();
    let ex = b.expand(sl, shp).unwrap();
    let reps = b.const_i64(&[1, 2, 1]).unwrap();
    let _ = b.tile(ex, reps).unwrap();
    let _ = b.pad(ex, &[0, 1, 0, 0, 1, 0], -0.0).unwrap();
    let _ = b.constant_of_shape(tail, Tensor::scalar(7i32)).unwrap();
    let one = b.constant("one", Tensor::scalar(1i64));
    let _ = b.range(first, s, one).unwrap();
    let _ = b.pow(v, m).unwrap();
    b.output("out", red).unwrap();
    b.finish().unwrap()
}

#[test]
fn every_op_round_trips_and_verifies() {
    let g = every_op();
    let parsed = round_trip(&g);
    verify(&parsed).unwrap();
    assert_eq!(parsed, g);
    let text = g.to_string();
    assert!(
        text.contains(
            "graph @\"every op\"(%x: f32[n, 3, 8, 8], %\"/m.0/in\": f32[n, 4], %s: i64[], %axes: i64[1])"
        ),
        "{text}"
    );
    assert!(text.contains("{approximate = tanh}"), "{text}");
    assert!(text.contains("groups = 1, activation = none}"), "{text}");
    assert!(
        text.contains("activation = leaky_relu, alpha = 0.25}"),
        "{text}"
    );
    assert!(
        text.contains("activation = clip, min = 0.0, max = 6.0}"),
        "{text}"
    );
    assert!(text.contains("{min = -inf, max = 6.0}"), "{text}");
    assert!(
        text.contains("{pads = [0, 1, 0, 0, 1, 0], value = -0.0}"),
        "{text}"
    );
    assert!(
        text.contains("%w = constant f32[4, 3, 3, 3] hex\"0000003f"),
        "{text}"
    );
}

#[test]
fn if_and_loop_round_trip() {
    let mut tb = GraphBuilder::new("then");
    let a = tb.input("a", DType::F32, shape!["b"]);
    let n = tb.neg(a).unwrap();
    tb.output("r", n).unwrap();
    let then_g = tb.finish().unwrap();
    let mut eb = GraphBuilder::new("else");
    let a = eb.input("a", DType::F32, shape!["b"]);
    eb.output("r", a).unwrap();
    let else_g = eb.finish().unwrap();

    let mut lb = GraphBuilder::new("body");
    let _i = lb.input("i", DType::I64, shape![]);
    let c = lb.input("c", DType::Bool, shape![]);
    let acc = lb.input("acc", DType::F32, shape!["b"]);
    let x = lb.input("x", DType::F32, shape!["b"]);
    let sum = lb.add(acc, x).unwrap();
    lb.output("c_out", c).unwrap();
    lb.output("acc_out", sum).unwrap();
    lb.output("scan", sum).unwrap();
    let body = lb.finish().unwrap();

    let mut b = GraphBuilder::new("main");
    let cond = b.input("cond", DType::Bool, shape![]);
    let x = b.input("x", DType::F32, shape!["b"]);
    let outs = b.if_(cond, then_g, else_g, &[x]).unwrap();
    let trips = b.constant("trips", Tensor::scalar(3i64));
    let looped = b.loop_(trips, cond, &[outs[0]], &[x], body).unwrap();
    b.output("y", looped[0]).unwrap();
    b.output("stack", looped[1]).unwrap();
    let g = b.finish().unwrap();
    let expected = "graph @main(%cond: bool[], %x: f32[b]) -> (%y, %stack) {
  %if_0 = if %cond, %x : f32[b]
    then graph @then(%a: f32[b]) -> (%r) {
      %r = neg @neg_0 %a : f32[b]
    }
    else graph @else(%a: f32[b]) -> (%r) {
      %r = identity %a : f32[b]
    }
  %trips = constant i64[] [3]
  %y, %stack = loop @loop_0 %trips, %cond, %if_0, %x {n_carried = 1} : f32[b], f32[3, b]
    body graph @body(%i: i64[], %c: bool[], %acc: f32[b], %x: f32[b]) -> (%c_out, %acc_out, %scan) {
      %acc_out = add @add_0 %acc, %x : f32[b]
      %c_out = identity %c : bool[]
      %scan = identity %acc_out : f32[b]
    }
}
";
    assert_eq!(g.to_string(), expected);
    assert_eq!(round_trip(&g), g);
}

#[test]
fn constants_are_bit_exact() {
    let nan = f32::from_bits(0x7fc0_1234);
    let mut b = GraphBuilder::new("c");
    b.constant(
        "nan",
        Tensor::from_vec(vec![1.0, nan, -0.0, f32::INFINITY], &[4]).unwrap(),
    );
    b.constant(
        "big",
        Tensor::from_vec((0..20).map(|i| i as f32 * 0.1).collect(), &[4, 5]).unwrap(),
    );
    b.constant("bools", Tensor::from_vec(vec![true, false], &[2]).unwrap());
    b.constant(
        "i32s",
        Tensor::from_vec(vec![i32::MIN, i32::MAX], &[2]).unwrap(),
    );
    b.constant("i64s", Tensor::from_vec(vec![i64::MIN, 0], &[2]).unwrap());
    b.constant("empty", Tensor::zeros(DType::F32, &[0, 3]).unwrap());
    let g = b.finish_unchecked();
    let text = g.to_string();
    assert!(
        text.contains("%nan = constant f32[4] hex\"0000803f3412c07f00000080"),
        "{text}"
    );
    assert!(
        text.contains("%bools = constant bool[2] [true, false]"),
        "{text}"
    );
    assert!(
        text.contains("%i64s = constant i64[2] [-9223372036854775808, 0]"),
        "{text}"
    );
    assert!(text.contains("%empty = constant f32[0, 3] []"), "{text}");
    let parsed = round_trip(&g);
    for (a, b) in parsed.nodes.iter().zip(&g.nodes) {
        let (crate::op::Op::Constant { value: va }, crate::op::Op::Constant { value: vb }) =
            (&a.op, &b.op)
        else {
            panic!("not constants")
        };
        assert_eq!(va.bytes(), vb.bytes(), "{}", a.name);
    }
    let elided = g.display_elided().to_string();
    assert!(
        elided.contains("%big = constant f32[4, 5] <elided 20 x f32>"),
        "{elided}"
    );
    let err = parse(&elided).unwrap_err();
    assert!(
        err.to_string().contains("found an elided constant"),
        "{err}"
    );
}

#[test]
fn names_quote_and_unquote() {
    let text = "graph @\"g\\\"1\"(%\"a b\": f32[2], %\"\\u{7f}\": f32[2]) -> (%\"/x/Add_output_0\") {\n  %\"/x/Add_output_0\" = add %\"a b\", %\"\\u{7f}\" : f32[2]\n}\n";
    let g = parse(text).unwrap();
    assert_eq!(g.name, "g\"1");
    assert_eq!(g.values[1].name, "\u{7f}");
    assert_eq!(g.to_string(), text);
}

#[test]
fn omitted_types_and_attrs_are_inferred() {
    let g = parse(
        "graph @g(%x: f32[batch, 6]) -> (%y) {
           %s = shape %x
           %r = reshape %x, %s   // types inferred, allowzero defaults to false
           %y = softmax %r
         }",
    )
    .unwrap();
    assert_eq!(
        g.to_string(),
        "graph @g(%x: f32[batch, 6]) -> (%y) {
  %s = shape %x {start = 0} : i64[2]
  %r = reshape %x, %s {allowzero = false} : f32[batch, 6]
  %y = softmax %r {axis = -1} : f32[batch, 6]
}
"
    );
    verify(&g).unwrap();
}

fn parse_err(text: &str) -> String {
    match parse(text) {
        Err(e @ IrError::Parse { .. }) => e.to_string(),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn errors_have_positions() {
    assert_eq!(parse_err(""), "1:1: expected 'graph', found end of input");
    assert_eq!(
        parse_err("graph @g(%x: f33[2]) -> () {}"),
        "1:14: expected a dtype (f32, i32, i64, bool), found 'f33'"
    );
    assert_eq!(
        parse_err("graph @g(%x: f32[2]) -> (%y) {\n  %y = relu %z\n}"),
        "2:13: expected a defined value, found unknown value '%z'"
    );
    assert_eq!(
        parse_err("graph @g(%x: f32[2]) -> (%y) {\n  %y = frob %x\n}"),
        "2:8: expected an op name, found 'frob'"
    );
    assert_eq!(
        parse_err("graph @g(%x: f32[2]) -> (%y) {\n  %y = softmax %x {axis = 1, beta = 2}\n}"),
        "2:30: unknown or repeated attribute 'beta' for softmax"
    );
    assert_eq!(
        parse_err("graph @g(%x: f32[a+]) -> () {}"),
        "1:20: bad dim 'a+': expected an integer, a symbol or '('"
    );
    assert_eq!(
        parse_err("graph @g(%x: f32[2, 3]) -> (%y) {\n  %y = matmul %x, %x\n}"),
        "2:8: node 'y' (matmul): inner dims differ: expected 3 == 2, got a [2, 3] and b [2, 3]"
    );
}

#[test]
fn hostile_inputs_do_not_panic() {
    let deep = "graph @g() -> () { %a = if then ".repeat(100);
    assert_eq!(
        parse_err(&deep),
        "1:1057: sub-graphs nest deeper than 32 levels"
    );
    let dim = format!(
        "graph @g(%x: f32[{}1{}]) -> () {{}}",
        "(".repeat(200),
        ")".repeat(200)
    );
    assert!(parse_err(&dim).contains("nested too deeply"));
    assert!(parse("graph @g() -> () { %c = constant f32[99999999999, 99999999999] [] }").is_err());
    assert!(parse("graph @g() -> () { %c = constant i64[1] [99999999999999999999] }").is_err());
    assert!(parse("graph @g() -> () { %c = constant bool[1] hex\"02\" }").is_err());
    assert!(parse("graph @g() -> () { %c = constant f32[1] hex\"0\" }").is_err());
    assert!(parse("graph @g(%x: f32[2]) -> () { %y = transpose %x {perm = [-1]} }").is_err());
    assert!(parse("graph @g(%x: f32[2]) -> (%x) { \"unterminated").is_err());
}
