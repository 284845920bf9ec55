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
