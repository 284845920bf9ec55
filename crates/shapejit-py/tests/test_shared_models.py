"""The project's shared models (``../shared/models`` beside the checkout)
against their stored reference outputs. Absent: skipped with the reason,
except under CI (CI=true), where their absence fails."""

import os
import pathlib

import numpy as np
import pytest

import shapejit

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODELS = ROOT.parent / "shared" / "models"
NAMES = ["mlp", "elementwise", "convnet", "transformer"]


def models_dir():
    if MODELS.is_dir():
        return MODELS
    reason = f"{MODELS} does not exist (the shared models are not checked out here)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    print(f"SKIP: {reason}")
    pytest.skip(reason)


@pytest.mark.parametrize("name", NAMES)
def test_shared_model_matches_reference(name):
    d = models_dir()
    sess = shapejit.InferenceSession(str(d / f"{name}.onnx"))
    assert [i.name for i in sess.get_inputs()] == ["x"]
    assert sess.get_inputs()[0].shape[0] == "batch"
    refs = np.load(d / f"{name}.ref.npz")
    batches = sorted(int(k[len("input_b"):]) for k in refs.files if k.startswith("input_b"))
    assert batches, f"{name}.ref.npz holds no inputs"
    for b in batches:
        x, want = refs[f"input_b{b}"], refs[f"output_b{b}"]
        (got,) = sess.run(None, {"x": x})
        assert got.shape == want.shape, (name, b)
        err = np.max(np.abs(got.astype(np.float64) - want))
        scale = np.max(np.abs(want))
        assert err <= 1e-4 * scale, f"{name} b{b}: max abs error {err} > 1e-4 * {scale}"
