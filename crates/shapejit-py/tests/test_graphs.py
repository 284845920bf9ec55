"""ONNX graphs built with onnx.helper against numpy references, on both tiers."""

import numpy as np
import pytest

import _onnx_models as M
import shapejit

TIERS = [dict(tier="interp"), dict(tier="jit", compile="sync")]


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("kw", TIERS)
def test_elementwise_broadcasting(kw):
    sess = shapejit.InferenceSession(M.elementwise(), **kw)
    rng = np.random.default_rng(1)
    b = rng.standard_normal((3, 1)).astype(np.float32)
    c = rng.standard_normal(4).astype(np.float32)
    for batch in [1, 2, 5, 1, 9]:
        a = rng.standard_normal((batch, 1, 4)).astype(np.float32)
        (y,) = sess.run(None, {"a": a, "b": b, "c": c})
        assert_close(y, M.elementwise_ref(a, b, c))


@pytest.mark.parametrize("kw", TIERS)
def test_matmul(kw):
    sess = shapejit.InferenceSession(M.matmul(), **kw)
    rng = np.random.default_rng(2)
    b = rng.standard_normal((8, 5)).astype(np.float32)
    for batch, m in [(1, 1), (2, 3), (4, 7), (1, 16)]:
        a = rng.standard_normal((batch, m, 8)).astype(np.float32)
        (y,) = sess.run(["y"], {"a": a, "b": b})
        want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
        assert_close(y, want)


@pytest.mark.parametrize("kw", TIERS)
def test_dynamic_batch_mlp(kw):
    sess = shapejit.InferenceSession(M.mlp(), **kw)
    rng = np.random.default_rng(3)
    for batch in [1, 3, 16, 2, 33, 1]:
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        (y,) = sess.run(None, {"x": x})
        assert_close(y, M.mlp_ref(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", TIERS)
def test_if(kw):
    sess = shapejit.InferenceSession(M.if_model(), **kw)
    x = np.arange(5, dtype=np.float32) - 2
    (t,) = sess.run(None, {"cond": np.array(True), "x": x})
    (e,) = sess.run(None, {"cond": np.array(False), "x": x[:3]})
    np.testing.assert_array_equal(t, x + 1)
    np.testing.assert_array_equal(e, x[:3] * 2)


def test_int64_inputs_and_outputs():
    sess = shapejit.InferenceSession(M.int_add())
    a = np.array([1, -2, 2**40], np.int64)
    b = np.array([3, 4, 5], np.int64)
    (y,) = sess.run(None, {"a": a, "b": b})
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, a + b)


def test_agrees_with_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model = M.mlp()
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    sess = shapejit.InferenceSession(model)
    x = np.random.default_rng(4).standard_normal((7, 16)).astype(np.float32)
    assert_close(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
