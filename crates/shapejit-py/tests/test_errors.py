"""Every error class from a bad call, and inputs of every layout."""

import numpy as np
import pytest

import _onnx_models as M
import shapejit

CLASSES = [shapejit.InvalidArgument, shapejit.NoSuchFile, shapejit.InvalidGraph, shapejit.Fail]


@pytest.fixture(scope="module")
def mlp():
    return shapejit.InferenceSession(M.mlp(), tier="interp")


def x(batch=2):
    return np.random.default_rng(5).standard_normal((batch, 16)).astype(np.float32)


def test_classes_derive_from_error():
    for cls in CLASSES:
        assert issubclass(cls, shapejit.Error) and cls is not shapejit.Error
    assert issubclass(shapejit.Error, Exception)


def test_no_such_file(tmp_path):
    with pytest.raises(shapejit.NoSuchFile, match="missing.onnx"):
        shapejit.InferenceSession(str(tmp_path / "missing.onnx"))


def test_invalid_graph(tmp_path):
    with pytest.raises(shapejit.InvalidGraph, match="protobuf"):
        shapejit.InferenceSession(b"this is not an onnx model")
    bad = tmp_path / "bad.sjir"
    bad.write_text("graph @g(%x: f32[n]) -> (%y) {\n  %y = frobnicate %x\n}\n")
    with pytest.raises(shapejit.InvalidGraph, match="bad.sjir"):
        shapejit.InferenceSession(str(bad))


@pytest.mark.parametrize(
    "feed, pattern",
    [
        ({"nope": x()}, r"no input 'nope' \(its inputs: x\)"),
        ({}, r"input 'x' is missing"),
        ({"x": x().astype(np.float64)}, r"input 'x': dtype expected f32 \(tensor\(float\)\), got float64"),
        ({"x": x().astype(np.int64)}, r"input 'x': dtype expected f32.*got int64"),
        ({"x": x()[0]}, r"input 'x': rank expected 2"),
        ({"x": np.zeros((2, 15), np.float32)}, r"input 'x': dim 1 expected 16, got 15"),
    ],
)
def test_invalid_argument_names_the_input(mlp, feed, pattern):
    with pytest.raises(shapejit.InvalidArgument, match=pattern):
        mlp.run(None, feed)


def test_invalid_argument_options():
    with pytest.raises(shapejit.InvalidArgument, match="CUDAExecutionProvider"):
        shapejit.InferenceSession(M.mlp(), providers=["CUDAExecutionProvider"])
    with pytest.raises(shapejit.InvalidArgument, match="tier"):
        shapejit.InferenceSession(M.mlp(), tier="fast")
    with pytest.raises(shapejit.InvalidArgument, match="compile"):
        shapejit.InferenceSession(M.mlp(), compile="later")
    with pytest.raises(shapejit.InvalidArgument, match="teir"):
        shapejit.InferenceSession(M.mlp(), teir="jit")
    with pytest.raises(shapejit.InvalidArgument, match="unknown built-in"):
        shapejit.InferenceSession("builtin:nonesuch")
    with pytest.raises(shapejit.InvalidArgument, match="a model is a path"):
        shapejit.InferenceSession(12)


def test_unknown_output_name(mlp):
    with pytest.raises(shapejit.InvalidArgument, match=r"no output 'z' \(its outputs: y\)"):
        mlp.run(["z"], {"x": x()})


def test_fail_from_a_run():
    sess = shapejit.InferenceSession(M.reshape_by_input(), tier="interp")
    x = np.arange(6, dtype=np.float32)
    (y,) = sess.run(None, {"x": x, "s": np.array([2, 3])})
    np.testing.assert_array_equal(y, x.reshape(2, 3))
    with pytest.raises(shapejit.Fail, match=r"target shape \[4, 4\] does not hold the 6 elements"):
        sess.run(None, {"x": x, "s": np.array([4, 4])})


def test_session_survives_errors(mlp):
    for _ in range(3):
        with pytest.raises(shapejit.InvalidArgument):
            mlp.run(None, {"x": x().astype(np.float64)})
    np.testing.assert_allclose(mlp.run(None, {"x": x()})[0], M.mlp_ref(x()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,  # C-contiguous: read in place
        lambda a: np.asfortranarray(a),
        lambda a: np.repeat(a, 2, axis=1)[:, ::2],  # strided view
        lambda a: a[::-1][::-1],  # negative strides, twice
        lambda a: a.astype(">f4"),  # byte-swapped float32
        lambda a: a.tolist(),  # not an array
    ],
    ids=["c", "fortran", "strided", "reversed", "byteswapped", "list"],
)
def test_input_layouts(mlp, make):
    a = x(3)
    value = make(a)
    if isinstance(value, np.ndarray):
        np.testing.assert_array_equal(value, a)
    (y,) = mlp.run(None, {"x": value})
    np.testing.assert_allclose(y, M.mlp_ref(a), rtol=1e-4, atol=1e-5)


def test_zero_sized_input(mlp):
    (y,) = mlp.run(None, {"x": np.zeros((0, 16), np.float32)})
    assert y.shape == (0, 4) and y.dtype == np.float32


def test_non_native_value_conversion_error(mlp):
    with pytest.raises(shapejit.InvalidArgument, match="input 'x': cannot convert"):
        mlp.run(None, {"x": "not a tensor"})
    with pytest.raises(TypeError):
        mlp.run("y", {"x": x()})
