"""Four Python threads share one session, each with its own batch size; each
thread's results equal the single-thread ones."""

import threading

import numpy as np
import pytest

import _onnx_models as M
import shapejit

BATCHES = [1, 3, 8, 17]
ROUNDS = 25


@pytest.mark.parametrize("kw", [dict(tier="interp"), dict(tier="jit")])
def test_four_threads_one_session(kw):
    sess = shapejit.InferenceSession(M.mlp(), **kw)
    rng = np.random.default_rng(6)
    xs = {b: rng.standard_normal((b, 16)).astype(np.float32) for b in BATCHES}
    single = {b: sess.run(None, {"x": xs[b]})[0] for b in BATCHES}
    results = {b: [] for b in BATCHES}
    errors = []
    start = threading.Barrier(len(BATCHES))

    def work(b):
        try:
            start.wait()
            for _ in range(ROUNDS):
                results[b].append(sess.run(None, {"x": xs[b]})[0])
        except Exception as e:  # reported below, with the thread's batch
            errors.append((b, e))

    threads = [threading.Thread(target=work, args=(b,)) for b in BATCHES]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for b in BATCHES:
        assert len(results[b]) == ROUNDS
        for got in results[b]:
            if kw["tier"] == "interp":
                np.testing.assert_array_equal(got, single[b])
            else:  # compiled kernels may round differently from the interpreter
                np.testing.assert_allclose(got, single[b], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got, M.mlp_ref(xs[b]), rtol=1e-4, atol=1e-5)


def _wide_matmul():
    """y = tanh(a @ b), a: [batch, 256], b: a constant [256, 512] — large enough at
    batch 256 for the intra-op pool to split it."""
    from onnx import helper, numpy_helper

    w = np.random.default_rng(3).standard_normal((256, 512)).astype(np.float32) * 0.05
    nodes = [helper.make_node("MatMul", ["a", "w"], ["t"]), helper.make_node("Tanh", ["t"], ["y"])]
    model = M._model(
        nodes,
        [M._f32("a", ["batch", 256])],
        [M._f32("y", ["batch", 512])],
        initializers=[numpy_helper.from_array(w, "w")],
    )
    return model, w


@pytest.mark.parametrize("threads", [2, 3])
def test_intra_op_threads_are_used_and_change_no_bit(threads):
    model, w = _wide_matmul()
    x = np.random.default_rng(4).standard_normal((256, 256)).astype(np.float32)
    one = shapejit.SessionOptions()
    one.intra_op_num_threads = 1
    many = shapejit.SessionOptions()
    many.intra_op_num_threads = threads
    s1 = shapejit.InferenceSession(model, one, tier="interp")
    sn = shapejit.InferenceSession(model, many, tier="interp")
    want = s1.run(None, {"a": x})[0]
    got = sn.run(None, {"a": x})[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64) @ w), rtol=1e-4, atol=1e-5)
    assert s1.stats()["global"]["threads"] == 1
    assert sn.stats()["global"]["threads"] == threads
    # the split plan depends on shapes only (so any thread count gives the same
    # bits); the pieces ran on the pool
    assert sn.stats()["global"]["split_ops"] > 0
