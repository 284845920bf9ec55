"""Small ONNX models built with the ``onnx`` package's helpers, and their
numpy references (independent of both runtimes)."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def _model(nodes, inputs, outputs, initializers=(), name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="shapejit-tests")
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def elementwise():
    """y = relu(a * b - c) + 1 with a: [batch, 1, 4], b: [3, 1], c: [4]."""
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["ab"]),
        helper.make_node("Sub", ["ab", "c"], ["d"]),
        helper.make_node("Relu", ["d"], ["r"]),
        helper.make_node("Add", ["r", "one"], ["y"]),
    ]
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    return _model(
        nodes,
        [_f32("a", ["batch", 1, 4]), _f32("b", [3, 1]), _f32("c", [4])],
        [_f32("y", ["batch", 3, 4])],
        [one],
    )


def elementwise_ref(a, b, c):
    return (np.maximum(a.astype(np.float64) * b - c, 0) + 1).astype(np.float32)


def matmul():
    """y = a @ b with a: [batch, m, k], b: [k, n]."""
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    return _model(nodes, [_f32("a", ["batch", "m", 8]), _f32("b", [8, 5])], [_f32("y", ["batch", "m", 5])])


def mlp_weights(seed=0):
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal((16, 32)).astype(np.float32) * 0.3,
        rng.standard_normal(32).astype(np.float32) * 0.1,
        rng.standard_normal((32, 4)).astype(np.float32) * 0.3,
        rng.standard_normal(4).astype(np.float32) * 0.1,
    ]


def mlp():
    """y = relu(x @ w1 + b1) @ w2 + b2, x: [batch, 16] (a dynamic batch)."""
    w1, b1, w2, b2 = mlp_weights()
    inits = [
        numpy_helper.from_array(w1, "w1"),
        numpy_helper.from_array(b1, "b1"),
        numpy_helper.from_array(w2, "w2"),
        numpy_helper.from_array(b2, "b2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["y0"]),
        helper.make_node("Add", ["y0", "b2"], ["y"]),
    ]
    return _model(nodes, [_f32("x", ["batch", 16])], [_f32("y", ["batch", 4])], inits, name="mlp")


def mlp_ref(x):
    w1, b1, w2, b2 = (w.astype(np.float64) for w in mlp_weights())
    h = np.maximum(x.astype(np.float64) @ w1 + b1, 0)
    return (h @ w2 + b2).astype(np.float32)


def if_model():
    """y = If(cond, then: x + 1, else: x * 2), x: [n]."""
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["t"])], "then", [], [_f32("t", ["n"])], [one]
    )
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["e"])], "else", [], [_f32("e", ["n"])], [two]
    )
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    return _model(
        nodes,
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []), _f32("x", ["n"])],
        [_f32("y", ["n"])],
    )


def int_add():
    """y = a + b over int64 [n] (dtypes other than f32)."""
    t = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["n"])  # noqa: E731
    return _model([helper.make_node("Add", ["a", "b"], ["y"])], [t("a"), t("b")], [t("y")])


def reshape_by_input():
    """y = Reshape(x, s) with x: f32[n] and the target shape s: i64[2] an input."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    return _model(nodes, [_f32("x", ["n"]), s], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
