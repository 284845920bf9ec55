//! Import tests: models built in Rust, imported, and checked for structure,
//! opset variants, symbolic shapes and error messages.

mod common;

use common::*;
use shapejit_ir::Op;
use shapejit_onnx::OnnxError;
use shapejit_onnx::proto::data_type;

fn ops_of(g: &shapejit_ir::Graph) -> Vec<&'static str> {
    g.nodes
        .iter()
        .map(|n| n.op.name())
        .filter(|n| *n != "constant")
        .collect()
}

fn one_node(
    opset: i64,
    n: shapejit_onnx::proto::NodeProto,
    inputs: Vec<shapejit_onnx::proto::ValueInfoProto>,
    inits: Vec<shapejit_onnx::proto::TensorProto>,
) -> Result<shapejit_ir::Graph, OnnxError> {
    let out = n.output[0].clone();
    import(&model(
        opset,
        graph(vec![n], inputs, vec![vf(&out, &[])], inits),
    ))
}

#[test]
fn dim_params_and_unnamed_dims_become_symbols() {
    let m = model(
        17,
        graph(
            vec![node("Relu", &["x"], &["y"], vec![])],
            vec![vf("x", &["batch", "?", "8"])],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    let g = import(&m).unwrap();
    assert_eq!(g.value(g.inputs[0]).name, "x");
    assert_eq!(g.value(g.inputs[0]).ty.to_string(), "f32[batch, x_1, 8]");
    assert_eq!(g.value(g.outputs[0]).name, "y");
    assert_eq!(out_type(&g, 0), "f32[batch, x_1, 8]");
}

#[test]
fn sigmoid_times_its_input_imports_as_one_silu() {
    // PyTorch's `SiLU` export, and `Swish` (opset 24) with its default alpha
    let exported = model(
        17,
        graph(
            vec![
                node("Sigmoid", &["x"], &["s"], vec![]),
                node("Mul", &["x", "s"], &["y"], vec![]),
            ],
            vec![vf("x", &["batch", "8"])],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    let g = import(&exported).unwrap();
    assert_eq!(ops_of(&g), ["silu"]);
    assert_eq!(g.nodes[0].inputs, g.inputs);
    let swish = import(&model(
        24,
        graph(
            vec![node("Swish", &["x"], &["y"], vec![])],
            vec![vf("x", &["batch", "8"])],
            vec![vf("y", &[])],
            vec![],
        ),
    ))
    .unwrap();
    assert_eq!(ops_of(&swish), ["silu"]);
}

#[test]
fn broadcast_binary_shapes() {
    let m = model(
        13,
        graph(
            vec![node("Add", &["a", "b"], &["y"], vec![])],
            vec![vf("a", &["batch", "1", "4"]), vf("b", &["3", "1"])],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    assert_eq!(out_type(&import(&m).unwrap(), 0), "f32[batch, 3, 4]");
}

#[test]
fn legacy_broadcast_axis_aligns_operand() {
    // opset 6: b of shape [3] broadcast at axis 1 of a [2, 3, 4].
    let n = node(
        "Mul",
        &["a", "b"],
        &["y"],
        vec![a_int("broadcast", 1), a_int("axis", 1)],
    );
    let g = one_node(
        6,
        n,
        vec![vf("a", &["2", "3", "4"]), vf("b", &["3"])],
        vec![],
    )
    .unwrap();
    assert_eq!(ops_of(&g), ["unsqueeze", "mul"]);
    assert_eq!(out_type(&g, 0), "f32[2, 3, 4]");
}

#[test]
fn variadic_sum_mean_fold() {
    let n = node("Mean", &["a", "b", "c"], &["y"], vec![]);
    let g = one_node(
        13,
        n,
        vec![vf("a", &["4"]), vf("b", &["1"]), vf("c", &["4"])],
        vec![],
    )
    .unwrap();
    assert_eq!(ops_of(&g), ["add", "add", "div"]);
}

#[test]
fn clip_attribute_and_input_forms() {
    let old = one_node(
        6,
        node(
            "Clip",
            &["x"],
            &["y"],
            vec![a_float("min", -1.0), a_float("max", 2.0)],
        ),
        vec![vf("x", &["3"])],
        vec![],
    )
    .unwrap();
    let new = one_node(
        13,
        node("Clip", &["x", "lo", "hi"], &["y"], vec![]),
        vec![vf("x", &["3"])],
        vec![tf32("lo", &[], &[-1.0]), tf32("hi", &[], &[2.0])],
    )
    .unwrap();
    for g in [old, new] {
        let clip = g.nodes.iter().find(|n| n.op.name() == "clip").unwrap();
        assert_eq!(
            clip.op,
            Op::Unary(shapejit_ir::UnaryOp::Clip {
                min: -1.0,
                max: 2.0
            })
        );
    }
    // Only the max bound given (min omitted with an empty name).
    let g = one_node(
        13,
        node("Clip", &["x", "", "hi"], &["y"], vec![]),
        vec![vf("x", &["3"])],
        vec![tf32("hi", &[], &[2.0])],
    )
    .unwrap();
    assert!(g.nodes.iter().any(|n| n.op
        == Op::Unary(shapejit_ir::UnaryOp::Clip {
            min: f32::NEG_INFINITY,
            max: 2.0
        })));
}

#[test]
fn runtime_clip_bounds_become_max_and_min() {
    let g = one_node(
        13,
        node("Clip", &["x", "lo"], &["y"], vec![]),
        vec![vf("x", &["3"]), vf("lo", &[])],
        vec![],
    )
    .unwrap();
    let ops: Vec<&Op> = g.nodes.iter().map(|n| &n.op).collect();
    assert_eq!(ops, [&Op::Binary(shapejit_ir::BinaryOp::Max)]);
}

#[test]
fn squeeze_unsqueeze_axes_attribute_vs_input() {
    let old = one_node(
        11,
        node("Unsqueeze", &["x"], &["y"], vec![a_ints("axes", &[0, 3])]),
        vec![vf("x", &["2", "3"])],
        vec![],
    )
    .unwrap();
    let new = one_node(
        13,
        node("Unsqueeze", &["x", "ax"], &["y"], vec![]),
        vec![vf("x", &["2", "3"])],
        vec![ints("ax", &[0, 3])],
    )
    .unwrap();
    assert_eq!(out_type(&old, 0), "f32[1, 2, 3, 1]");
    assert_eq!(out_type(&new, 0), "f32[1, 2, 3, 1]");
    let sq = one_node(
        13,
        node("Squeeze", &["x"], &["y"], vec![]),
        vec![vf("x", &["1", "3", "1"])],
        vec![],
    )
    .unwrap();
    assert_eq!(out_type(&sq, 0), "f32[3]");
}

#[test]
fn reduce_axes_forms_across_opsets() {
    let attr = one_node(
        13,
        node(
            "ReduceMean",
            &["x"],
            &["y"],
            vec![a_ints("axes", &[1]), a_int("keepdims", 0)],
        ),
        vec![vf("x", &["b", "4", "5"])],
        vec![],
    )
    .unwrap();
    assert_eq!(out_type(&attr, 0), "f32[b, 5]");
    let input = one_node(
        18,
        node("ReduceMean", &["x", "ax"], &["y"], vec![]),
        vec![vf("x", &["b", "4", "5"])],
        vec![ints("ax", &[-1])],
    )
    .unwrap();
    assert_eq!(out_type(&input, 0), "f32[b, 4, 1]");
    let sum13 = one_node(
        13,
        node(
            "ReduceSum",
            &["x", "ax"],
            &["y"],
            vec![a_int("keepdims", 0)],
        ),
        vec![vf("x", &["b", "4", "5"])],
        vec![ints("ax", &[0, 2])],
    )
    .unwrap();
    assert_eq!(out_type(&sum13, 0), "f32[4]");
    // Empty axes with noop_with_empty_axes: identity.
    let noop = one_node(
        18,
        node(
            "ReduceMax",
            &["x"],
            &["y"],
            vec![a_int("noop_with_empty_axes", 1)],
        ),
        vec![vf("x", &["3"])],
        vec![],
    )
    .unwrap();
    assert!(ops_of(&noop).iter().all(|o| *o == "identity"));
}

#[test]
fn split_forms() {
    let old = import(&model(
        11,
        graph(
            vec![node(
                "Split",
                &["x"],
                &["a", "b"],
                vec![a_int("axis", 1), a_ints("split", &[1, 3])],
            )],
            vec![vf("x", &["2", "4"])],
            vec![vf("a", &[]), vf("b", &[])],
            vec![],
        ),
    ))
    .unwrap();
    assert_eq!(
        (out_type(&old, 0), out_type(&old, 1)),
        ("f32[2, 1]".into(), "f32[2, 3]".into())
    );
    let new = import(&model(
        13,
        graph(
            vec![node(
                "Split",
                &["x", "s"],
                &["a", "b"],
                vec![a_int("axis", 1)],
            )],
            vec![vf("x", &["2", "4"])],
            vec![vf("a", &[]), vf("b", &[])],
            vec![ints("s", &[3, 1])],
        ),
    ))
    .unwrap();
    assert_eq!(out_type(&new, 0), "f32[2, 3]");
    let equal = import(&model(
        13,
        graph(
            vec![node("Split", &["x"], &["a", "b"], vec![])],
            vec![vf("x", &["4", "b"])],
            vec![vf("a", &[]), vf("b", &[])],
            vec![],
        ),
    ))
    .unwrap();
    assert_eq!(out_type(&equal, 1), "f32[2, b]");
    let uneven = import(&model(
        18,
        graph(
            vec![node(
                "Split",
                &["x"],
                &["a", "b", "c"],
                vec![a_int("num_outputs", 3)],
            )],
            vec![vf("x", &["7"])],
            vec![vf("a", &[]), vf("b", &[]), vf("c", &[])],
            vec![],
        ),
    ))
    .unwrap();
    assert_eq!(
        [out_type(&uneven, 0), out_type(&uneven, 2)],
        ["f32[3]", "f32[1]"]
    );
}

#[test]
fn slice_attribute_and_input_forms() {
    let old = one_node(
        9,
        node(
            "Slice",
            &["x"],
            &["y"],
            vec![
                a_ints("starts", &[1]),
                a_ints("ends", &[i64::MAX]),
                a_ints("axes", &[1]),
            ],
        ),
        vec![vf("x", &["b", "5"])],
        vec![],
    )
    .unwrap();
    assert_eq!(out_type(&old, 0), "f32[b, 4]");
    let new = one_node(
        13,
        node("Slice", &["x", "s", "e", "a", "st"], &["y"], vec![]),
        vec![vf("x", &["b", "10"])],
        vec![
            ints("s", &[-1]),
            ints("e", &[-11]),
            ints("a", &[1]),
            ints("st", &[-2]),
        ],
    )
    .unwrap();
    assert_eq!(out_type(&new, 0), "f32[b, 5]");
}

#[test]
fn pad_forms() {
    let old = one_node(
        10,
        node(
            "Pad",
            &["x"],
            &["y"],
            vec![a_ints("pads", &[0, 1, 0, 2]), a_float("value", 1.5)],
        ),
        vec![vf("x", &["2", "3"])],
        vec![],
    )
    .unwrap();
    assert_eq!(out_type(&old, 0), "f32[2, 6]");
    let new = one_node(
        13,
        node("Pad", &["x", "p", "v"], &["y"], vec![]),
        vec![vf("x", &["2", "3"])],
        vec![ints("p", &[1, 0, 1, 0]), tf32("v", &[], &[1.5])],
    )
    .unwrap();
    assert_eq!(out_type(&new, 0), "f32[4, 3]");
    let axes = one_node(
        18,
        node("Pad", &["x", "p", "", "a"], &["y"], vec![]),
        vec![vf("x", &["2", "3"])],
        vec![ints("p", &[2, 3]), ints("a", &[-1])],
    )
    .unwrap();
    assert_eq!(out_type(&axes, 0), "f32[2, 8]");
    assert!(g_has(
        &axes,
        &Op::Pad {
            pads: vec![0, 2, 0, 3],
            value: 0.0
        }
    ));
    let err = one_node(
        13,
        node("Pad", &["x", "p"], &["y"], vec![a_str("mode", "mirror")]),
        vec![vf("x", &["2", "3"])],
        vec![ints("p", &[1, 0, 1, 0])],
    )
    .unwrap_err();
    assert!(err.to_string().contains("mode = 'mirror'"), "{err}");
}

fn g_has(g: &shapejit_ir::Graph, op: &Op) -> bool {
    g.nodes.iter().any(|n| &n.op == op)
}

#[test]
fn pytorch_shape_chain_stays_symbolic() {
    // x: [batch, seq, 64] → reshape to [batch, seq, 4, 16] via Shape/Gather/Unsqueeze/Concat.
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Gather", &["s", "i0"], &["b"], vec![a_int("axis", 0)]),
        node("Gather", &["s", "i1"], &["q"], vec![a_int("axis", 0)]),
        node("Unsqueeze", &["b", "ax0"], &["bu"], vec![]),
        node("Unsqueeze", &["q", "ax0"], &["qu"], vec![]),
        node(
            "Concat",
            &["bu", "qu", "rest"],
            &["shape"],
            vec![a_int("axis", 0)],
        ),
        node("Reshape", &["x", "shape"], &["y"], vec![]),
    ];
    let inits = vec![
        ti64("i0", &[], &[0]),
        ti64("i1", &[], &[1]),
        ints("ax0", &[0]),
        ints("rest", &[4, 16]),
    ];
    let m = model(
        13,
        graph(
            nodes,
            vec![vf("x", &["batch", "seq", "64"])],
            vec![vf("y", &[])],
            inits,
        ),
    );
    assert_eq!(out_type(&import(&m).unwrap(), 0), "f32[batch, seq, 4, 16]");
}

#[test]
fn softmax_before_13_flattens_at_axis() {
    let last = one_node(
        11,
        node("Softmax", &["x"], &["y"], vec![a_int("axis", 2)]),
        vec![vf("x", &["2", "3", "4"])],
        vec![],
    )
    .unwrap();
    assert_eq!(ops_of(&last), ["softmax"]);
    let mid = one_node(
        11,
        node("LogSoftmax", &["x"], &["y"], vec![]),
        vec![vf("x", &["b", "3", "4"])],
        vec![],
    )
    .unwrap();
    assert_eq!(ops_of(&mid), ["shape", "flatten", "log_softmax", "reshape"]);
    assert_eq!(out_type(&mid, 0), "f32[b, 3, 4]");
    let new = one_node(
        13,
        node("Softmax", &["x"], &["y"], vec![]),
        vec![vf("x", &["b", "3", "4"])],
        vec![],
    )
    .unwrap();
    assert!(g_has(&new, &Op::Softmax { axis: -1 }));
}

#[test]
fn conv_and_pools_geometry() {
    let w = tf32("w", &[8, 3, 3, 3], &vec![0.5; 8 * 27]);
    let n = node(
        "Conv",
        &["x", "w"],
        &["y"],
        vec![a_str("auto_pad", "SAME_UPPER"), a_ints("strides", &[2, 2])],
    );
    let g = one_node(13, n, vec![vf("x", &["b", "3", "9", "9"])], vec![w]).unwrap();
    assert_eq!(out_type(&g, 0), "f32[b, 8, 5, 5]");
    let n = node(
        "MaxPool",
        &["x"],
        &["y"],
        vec![
            a_ints("kernel_shape", &[2, 2]),
            a_int("ceil_mode", 1),
            a_ints("strides", &[2, 2]),
        ],
    );
    assert_eq!(
        out_type(
            &one_node(13, n, vec![vf("x", &["b", "3", "5", "5"])], vec![]).unwrap(),
            0
        ),
        "f32[b, 3, 3, 3]"
    );
    let n = node(
        "AveragePool",
        &["x"],
        &["y"],
        vec![
            a_ints("kernel_shape", &[3]),
            a_ints("pads", &[1, 1]),
            a_int("count_include_pad", 1),
        ],
    );
    let g = one_node(13, n, vec![vf("x", &["b", "3", "7"])], vec![]).unwrap();
    assert_eq!(ops_of(&g), ["unsqueeze", "avg_pool2d", "squeeze"]);
    assert_eq!(out_type(&g, 0), "f32[b, 3, 7]");
    // 3-D: depth folded into the batch, one 2-D conv per depth tap
    let n = node("Conv", &["x", "w"], &["y"], vec![]);
    let g = one_node(
        13,
        n,
        vec![vf("x", &["1", "3", "4", "4", "4"])],
        vec![tf32("w", &[1, 3, 2, 1, 1], &[1.0; 6])],
    )
    .unwrap();
    assert_eq!(ops_of(&g).iter().filter(|o| **o == "conv2d").count(), 2);
    assert_eq!(out_type(&g, 0), "f32[1, 1, 3, 4, 4]");
    let n = node("Conv", &["x", "w"], &["y"], vec![]);
    let err = one_node(
        13,
        n,
        vec![vf("x", &["1", "3", "4", "4", "4", "4"])],
        vec![tf32("w", &[1, 3, 1, 1, 1, 1], &[1.0; 3])],
    )
    .unwrap_err();
    assert!(err.to_string().contains("rank 6"), "{err}");
}

#[test]
fn gemm_layer_norm_batch_norm() {
    let g = one_node(
        13,
        node(
            "Gemm",
            &["a", "b", "c"],
            &["y"],
            vec![a_int("transB", 1), a_float("alpha", 0.5)],
        ),
        vec![vf("a", &["n", "4"]), vf("b", &["6", "4"]), vf("c", &["6"])],
        vec![],
    )
    .unwrap();
    assert_eq!(out_type(&g, 0), "f32[n, 6]");
    let g = one_node(
        17,
        node(
            "LayerNormalization",
            &["x", "s", "bi"],
            &["y"],
            vec![a_float("epsilon", 1e-3)],
        ),
        vec![vf("x", &["n", "4"])],
        vec![tf32("s", &[4], &[1.0; 4]), tf32("bi", &[4], &[0.0; 4])],
    )
    .unwrap();
    assert!(g_has(
        &g,
        &Op::LayerNorm {
            axis: -1,
            epsilon: 1e-3
        }
    ));
    let inits = ["s", "bb", "m", "v"]
        .iter()
        .map(|n| tf32(n, &[3], &[1.0; 3]))
        .collect();
    let g = one_node(
        9,
        node(
            "BatchNormalization",
            &["x", "s", "bb", "m", "v"],
            &["y"],
            vec![a_float("momentum", 0.9)],
        ),
        vec![vf("x", &["n", "3", "2", "2"])],
        inits,
    )
    .unwrap();
    assert_eq!(out_type(&g, 0), "f32[n, 3, 2, 2]");
}

#[test]
fn constants_and_constant_of_shape() {
    let nodes = vec![
        node(
            "Constant",
            &[],
            &["c"],
            vec![a_tensor("value", ints("", &[2, 3]))],
        ),
        node(
            "ConstantOfShape",
            &["c"],
            &["z"],
            vec![a_tensor("value", ti64("", &[1], &[7]))],
        ),
        node("Constant", &[], &["f"], vec![a_float("value_float", 2.0)]),
        node(
            "Cast",
            &["z"],
            &["zf"],
            vec![a_int("to", data_type::FLOAT as i64)],
        ),
        node("Mul", &["zf", "f"], &["y"], vec![]),
    ];
    let g = import(&model(13, graph(nodes, vec![], vec![vf("y", &[])], vec![]))).unwrap();
    assert_eq!(out_type(&g, 0), "f32[2, 3]");
    // a shape known at load is filled once, at load
    assert!(
        !ops_of(&g).contains(&"constant_of_shape"),
        "{:?}",
        ops_of(&g)
    );
    let filled = g.nodes.iter().find_map(|n| match &n.op {
        Op::Constant { value } if value.shape() == [2, 3] => Some(value),
        _ => None,
    });
    assert_eq!(filled.unwrap().as_slice::<i64>().unwrap(), [7i64; 6]);
    // a shape only the run knows stays an op
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("ConstantOfShape", &["s"], &["y"], vec![]),
    ];
    let g = import(&model(
        13,
        graph(nodes, vec![vf("x", &["n"])], vec![vf("y", &[])], vec![]),
    ))
    .unwrap();
    assert!(
        ops_of(&g).contains(&"constant_of_shape"),
        "{:?}",
        ops_of(&g)
    );
}

#[test]
fn if_captures_outer_values() {
    let n = if_one_node("c", "y", ("Add", &["x", "w"]), ("Neg", &["x"]));
    let m = model(
        13,
        graph(
            vec![n],
            vec![vi("c", data_type::BOOL, &[]), vf("x", &["b", "4"])],
            vec![vf("y", &[])],
            vec![tf32("w", &[4], &[1.0; 4])],
        ),
    );
    let g = import(&m).unwrap();
    let if_node = g.nodes.iter().find(|n| n.op.name() == "if").unwrap();
    // cond, then x (w is a constant: copied into the branch instead of captured).
    assert_eq!(if_node.inputs.len(), 2);
    let Op::If { then_branch, .. } = &if_node.op else {
        unreachable!()
    };
    assert_eq!(then_branch.inputs.len(), 1);
    assert!(then_branch.nodes.iter().any(|n| n.op.name() == "constant"));
    assert_eq!(out_type(&g, 0), "f32[b, 4]");
}

#[test]
fn loop_with_carried_and_scan_outputs() {
    // acc = acc + x each iteration; scan output the running acc.
    let body = graph(
        vec![
            node("Add", &["acc_in", "x"], &["acc_out"], vec![]),
            node("Identity", &["cond_in"], &["cond_out"], vec![]),
            node("Identity", &["acc_out"], &["scan"], vec![]),
        ],
        vec![
            vi("i", data_type::INT64, &[]),
            vi("cond_in", data_type::BOOL, &[]),
            vf("acc_in", &[]),
        ],
        vec![
            vi("cond_out", data_type::BOOL, &[]),
            vf("acc_out", &[]),
            vf("scan", &[]),
        ],
        vec![],
    );
    let n = node(
        "Loop",
        &["m", "", "acc0"],
        &["acc", "scans"],
        vec![a_graph("body", body)],
    );
    let m = model(
        13,
        graph(
            vec![n],
            vec![vf("x", &["3"]), vf("acc0", &["3"])],
            vec![vf("acc", &[]), vf("scans", &[])],
            vec![ti64("m", &[], &[5])],
        ),
    );
    let g = import(&m).unwrap();
    assert_eq!(out_type(&g, 0), "f32[3]");
    assert_eq!(out_type(&g, 1), "f32[5, 3]");
}

#[test]
fn loop_with_growing_carried_value_gets_symbolic_body_input() {
    let body = graph(
        vec![
            node(
                "Concat",
                &["acc_in", "one"],
                &["acc_out"],
                vec![a_int("axis", 0)],
            ),
            node("Identity", &["cond_in"], &["cond_out"], vec![]),
        ],
        vec![
            vi("i", data_type::INT64, &[]),
            vi("cond_in", data_type::BOOL, &[]),
            vf("acc_in", &[]),
        ],
        vec![vi("cond_out", data_type::BOOL, &[]), vf("acc_out", &[])],
        vec![tf32("one", &[1], &[1.0])],
    );
    let n = node(
        "Loop",
        &["m", "", "acc0"],
        &["acc"],
        vec![a_graph("body", body)],
    );
    let m = model(
        13,
        graph(
            vec![n],
            vec![vf("acc0", &["2"])],
            vec![vf("acc", &[])],
            vec![ti64("m", &[], &[3])],
        ),
    );
    let g = import(&m).unwrap();
    let lp = g.nodes.iter().find(|n| n.op.name() == "loop").unwrap();
    let Op::Loop { body, .. } = &lp.op else {
        unreachable!()
    };
    let carried_in = body.value(body.inputs[2]).ty.shape.dims()[0].clone();
    assert!(
        !carried_in.is_known(),
        "body input should be symbolic, is {carried_in}"
    );
}

#[test]
fn errors_name_op_node_and_opset() {
    let err = one_node(
        13,
        node("Einsum", &["x"], &["y"], vec![]),
        vec![vf("x", &["2"])],
        vec![],
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("Einsum") && msg.contains("Einsum_y") && msg.contains("opset 13"),
        "{msg}"
    );
    let err = one_node(
        13,
        node("Relu", &["x"], &["y"], vec![a_int("bogus", 1)]),
        vec![vf("x", &["2"])],
        vec![],
    )
    .unwrap_err();
    assert!(err.to_string().contains("attribute(s) bogus"), "{err}");
    let err = one_node(
        13,
        node(
            "Cast",
            &["x"],
            &["y"],
            vec![a_int("to", data_type::COMPLEX128 as i64)],
        ),
        vec![vf("x", &["2"])],
        vec![],
    )
    .unwrap_err();
    assert!(err.to_string().contains("COMPLEX128"), "{err}");
    let err = one_node(
        29,
        node("Relu", &["x"], &["y"], vec![]),
        vec![vf("x", &["2"])],
        vec![],
    )
    .unwrap_err();
    assert!(matches!(err, OnnxError::Opset { opset: 29, .. }), "{err}");
    let err = one_node(
        13,
        node("Relu", &["nope"], &["y"], vec![]),
        vec![vf("x", &["2"])],
        vec![],
    )
    .unwrap_err();
    assert!(err.to_string().contains("'nope' is not defined"), "{err}");
    let err = one_node(
        13,
        node("Relu", &["x"], &["y"], vec![]),
        vec![vi("x", data_type::STRING, &["2"])],
        vec![],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("graph value 'x'") && err.to_string().contains("STRING"),
        "{err}"
    );
    let mut n = node("Relu", &["x"], &["y"], vec![]);
    n.domain = "com.microsoft".into();
    let err = one_node(13, n, vec![vf("x", &["2"])], vec![]).unwrap_err();
    assert!(err.to_string().contains("domain 'com.microsoft'"), "{err}");
    for domain in ["ai.onnx.ml", "ai.onnx.preview.training"] {
        let mut n = node("Relu", &["x"], &["y"], vec![]);
        n.domain = domain.into();
        let err = one_node(13, n, vec![vf("x", &["2"])], vec![]).unwrap_err();
        assert!(
            matches!(&err, OnnxError::UnsupportedDomain { domain: d, .. } if d == domain)
                && err.to_string().contains("unsupported domain"),
            "{err}"
        );
    }
    let mp = node(
        "MaxPool",
        &["x"],
        &["y", "idx"],
        vec![a_ints("kernel_shape", &[2, 2])],
    );
    let m = model(
        13,
        graph(
            vec![mp, node("Identity", &["idx"], &["z"], vec![])],
            vec![vf("x", &["1", "1", "4", "4"])],
            vec![vf("z", &[])],
            vec![],
        ),
    );
    let err = import(&m).unwrap_err();
    assert!(err.to_string().contains("indices output"), "{err}");
}

#[test]
fn truncated_and_garbage_bytes_are_decode_errors() {
    let m = model(
        13,
        graph(
            vec![node("Relu", &["x"], &["y"], vec![])],
            vec![vf("x", &["2"])],
            vec![vf("y", &[])],
            vec![],
        ),
    );
    let bytes = encode(&m);
    let err = shapejit_onnx::load_bytes(bytes.slice(..bytes.len() - 3), None).unwrap_err();
    assert!(matches!(err, OnnxError::Decode(_)), "{err}");
    let err = shapejit_onnx::load_bytes(bytes::Bytes::from_static(b"not a model at all"), None)
        .unwrap_err();
    assert!(
        err.to_string().starts_with("malformed ONNX protobuf")
            || err.to_string().contains("invalid model"),
        "{err}"
    );
}

#[test]
fn initializer_listed_as_input_is_a_constant() {
    let m = model(
        13,
        graph(
            vec![node("Add", &["x", "w"], &["y"], vec![])],
            vec![vf("x", &["2"]), vf("w", &["2"])],
            vec![vf("y", &[])],
            vec![tf32("w", &[2], &[1.0, 2.0])],
        ),
    );
    let g = import(&m).unwrap();
    assert_eq!(g.inputs.len(), 1);
}

#[test]
fn typed_and_raw_initializers_and_zero_copy() {
    let m = model(
        13,
        graph(
            vec![node("Add", &["x", "w"], &["y"], vec![])],
            vec![vf("x", &["2"])],
            vec![vf("y", &[])],
            vec![tf32("w", &[2], &[1.0, 2.0])],
        ),
    );
    let bytes = encode(&m);
    let decoded = shapejit_onnx::decode_model(bytes.clone()).unwrap();
    let raw = &decoded.graph.as_ref().unwrap().initializer[0].raw_data;
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    assert!(
        range.contains(&(raw.as_ptr() as usize)),
        "raw_data must be a slice of the input buffer"
    );
    let g = import(&model(
        13,
        graph(
            vec![node("Add", &["x", "w"], &["y"], vec![])],
            vec![vf("x", &["2"])],
            vec![vf("y", &[])],
            vec![tf32_typed("w", &[2], &[1.0, 2.0])],
        ),
    ))
    .unwrap();
    let c = g
        .nodes
        .iter()
        .find_map(|n| match &n.op {
            Op::Constant { value } => Some(value.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(c.as_slice::<f32>().unwrap(), &[1.0, 2.0]);
    let bad = model(
        13,
        graph(vec![], vec![], vec![], vec![tf32("w", &[3], &[1.0, 2.0])]),
    );
    assert!(import(&bad).unwrap_err().to_string().contains("tensor 'w'"));
}

#[test]
fn external_data_is_mapped_and_confined() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = [0f32, 10.0, 20.0, 30.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut blob = vec![0u8; 64];
    blob.extend(&data);
    std::fs::write(dir.path().join("weights.bin"), &blob).unwrap();
    let ext = |location: &str, offset: &str| shapejit_onnx::proto::TensorProto {
        name: "w".into(),
        dims: vec![4],
        data_type: data_type::FLOAT,
        data_location: shapejit_onnx::proto::DATA_LOCATION_EXTERNAL,
        external_data: [("location", location), ("offset", offset), ("length", "16")]
            .iter()
            .map(|(k, v)| shapejit_onnx::proto::StringStringEntryProto {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    };
    let mk = |t| {
        model(
            13,
            graph(
                vec![node("Add", &["x", "w"], &["y"], vec![])],
                vec![vf("x", &["4"])],
                vec![vf("y", &[])],
                vec![t],
            ),
        )
    };
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, encode(&mk(ext("weights.bin", "64")))).unwrap();
    let g = shapejit_onnx::load_path(&path).unwrap();
    let c = g
        .nodes
        .iter()
        .find_map(|n| match &n.op {
            Op::Constant { value } => Some(value.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(c.as_slice::<f32>().unwrap(), &[0.0, 10.0, 20.0, 30.0]);
    for (loc, off, want) in [
        ("../weights.bin", "0", "relative path inside"),
        ("/etc/passwd", "0", "relative path inside"),
        ("weights.bin", "70", "outside"),
        ("missing.bin", "0", "cannot read"),
    ] {
        std::fs::write(&path, encode(&mk(ext(loc, off)))).unwrap();
        let err = shapejit_onnx::load_path(&path).unwrap_err().to_string();
        assert!(err.contains(want), "{loc}: {err}");
    }
    let err = shapejit_onnx::load_bytes(encode(&mk(ext("weights.bin", "64"))), None).unwrap_err();
    assert!(
        err.to_string().contains("needs the model's directory"),
        "{err}"
    );
}

#[test]
fn op_versions_resolve_like_onnxruntime() {
    use shapejit_onnx::ops::resolve_version;
    // The newest version at or below the opset.
    assert_eq!(resolve_version("Add", 6), Some(Ok(6)));
    assert_eq!(resolve_version("Add", 13), Some(Ok(13)));
    assert_eq!(resolve_version("Add", 28), Some(Ok(14)));
    assert_eq!(resolve_version("Reshape", 12), Some(Ok(5)));
    assert_eq!(resolve_version("Softmax", 12), Some(Ok(11)));
    // An op introduced after the opset, and an op not supported at all.
    assert_eq!(resolve_version("Gelu", 19), Some(Err(20)));
    assert_eq!(resolve_version("NoSuchOp", 13), None);
    // Every opset the importer accepts runs a Relu; one that introduced the op
    // later is a malformed model naming both versions.
    for opset in shapejit_onnx::MIN_OPSET..=shapejit_onnx::MAX_OPSET {
        one_node(
            opset,
            node("Relu", &["x"], &["y"], vec![]),
            vec![vf("x", &["2"])],
            vec![],
        )
        .unwrap_or_else(|e| panic!("opset {opset}: {e}"));
    }
    let err = one_node(
        17,
        node("Gelu", &["x"], &["y"], vec![]),
        vec![vf("x", &["2"])],
        vec![],
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("Gelu does not exist at opset 17 (its first version is 20)"),
        "{err}"
    );
}

#[test]
fn version_table_is_ascending_and_unique() {
    use shapejit_onnx::ops::OPS;
    let mut names = std::collections::HashSet::new();
    for (name, versions, _) in OPS {
        assert!(names.insert(*name), "{name} is listed twice");
        assert!(!versions.is_empty(), "{name} lists no version");
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "{name}: versions {versions:?} are not ascending"
        );
        assert!(
            versions
                .iter()
                .all(|v| (1..=shapejit_onnx::MAX_OPSET).contains(v)),
            "{name}: versions {versions:?} outside 1..={}",
            shapejit_onnx::MAX_OPSET
        );
    }
}
