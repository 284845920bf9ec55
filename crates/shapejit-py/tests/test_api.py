"""The onnxruntime-shaped introspection, shapejit's extras, and the output
arrays' ownership."""

import json
import subprocess

import numpy as np
import pytest

import _onnx_models as M
import shapejit


def test_version():
    assert isinstance(shapejit.__version__, str) and shapejit.__version__.count(".") == 2


def test_inputs_outputs_and_meta():
    sess = shapejit.InferenceSession(M.elementwise())
    ins = sess.get_inputs()
    assert [(i.name, i.shape, i.type) for i in ins] == [
        ("a", ["batch", 1, 4], "tensor(float)"),
        ("b", [3, 1], "tensor(float)"),
        ("c", [4], "tensor(float)"),
    ]
    (out,) = sess.get_outputs()
    assert (out.name, out.shape, out.type) == ("y", ["batch", 3, 4], "tensor(float)")
    meta = sess.get_modelmeta()
    assert meta.producer_name == "shapejit-tests" and meta.graph_name == "g"
    assert shapejit.InferenceSession(M.mlp()).get_modelmeta().graph_name == "mlp"
    types = [i.type for i in shapejit.InferenceSession(M.if_model()).get_inputs()]
    assert types == ["tensor(bool)", "tensor(float)"]
    assert shapejit.InferenceSession(M.int_add()).get_outputs()[0].type == "tensor(int64)"


def test_same_names_as_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model = M.elementwise()
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    sess = shapejit.InferenceSession(model)
    for mine, theirs in [(sess.get_inputs(), ref.get_inputs()), (sess.get_outputs(), ref.get_outputs())]:
        assert [(a.name, a.shape, a.type) for a in mine] == [(a.name, a.shape, a.type) for a in theirs]
    assert sess.get_modelmeta().producer_name == ref.get_modelmeta().producer_name
    assert sess.get_modelmeta().graph_name == ref.get_modelmeta().graph_name


def test_options_and_paths(tmp_path):
    so = shapejit.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = shapejit.GraphOptimizationLevel.ORT_ENABLE_ALL
    path = tmp_path / "mlp.onnx"
    path.write_bytes(M.mlp())
    for source in [str(path), path]:
        sess = shapejit.InferenceSession(source, so, providers=[("CPUExecutionProvider", {})])
        x = np.ones((2, 16), np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], M.mlp_ref(x), rtol=1e-4, atol=1e-5)
    assert sess.get_providers() == ["CPUExecutionProvider"] == shapejit.get_available_providers()
    assert sess.get_session_options() is so


def test_output_arrays_own_the_runtime_buffer():
    sess = shapejit.InferenceSession(M.mlp())
    x = np.ones((3, 16), np.float32)
    (one,) = sess.run(None, {"x": x})
    assert type(one.base).__name__ == "OutputBuffer"  # no copy into numpy memory
    assert one.flags.c_contiguous and one.flags.writeable and one.flags.aligned
    # a name asked for twice: the earlier array is a numpy-owned copy, the last
    # one takes the runtime's buffer
    y, y2 = sess.run(["y", "y"], {"x": x})
    assert y.base is None and y.flags.owndata
    assert type(y2.base).__name__ == "OutputBuffer"
    y += 1  # writeable like onnxruntime's outputs; the other is unaffected
    np.testing.assert_allclose(y - 1, y2, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y2, M.mlp_ref(x), rtol=1e-4, atol=1e-5)
    del y2
    (again,) = sess.run(None, {"x": x})  # buffers are fresh per run
    np.testing.assert_allclose(again, M.mlp_ref(x), rtol=1e-4, atol=1e-5)


def test_stats_has_the_cli_fields():
    sess = shapejit.InferenceSession("builtin:mlp", tier="jit", compile="sync")
    x = np.ones((2, sess.get_inputs()[0].shape[1]), np.float32)
    for _ in range(10):
        sess.run(None, {sess.get_inputs()[0].name: x})
    stats = sess.stats()
    assert set(stats) == {"slots", "global"}
    assert sum(s["executions"] for s in stats["slots"]) > 0
    assert "live_code_bytes" in stats["global"]
    json.dumps(stats)


def test_compile_image(tmp_path):
    image = tmp_path / "mlp.sjb"
    shapejit.compile(M.mlp(), str(image))
    sess = shapejit.InferenceSession(str(image), tier="interp")
    x = np.random.default_rng(7).standard_normal((5, 16)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], M.mlp_ref(x), rtol=1e-4, atol=1e-5)
    with pytest.raises(shapejit.NoSuchFile):
        shapejit.compile(M.mlp(), str(tmp_path / "no" / "such" / "dir.sjb"))


def test_bad_input_does_not_crash_the_process(tmp_path):
    # A fresh interpreter runs a batch of bad calls; it must exit normally.
    script = tmp_path / "bad.py"
    script.write_text(
        "import numpy as np, shapejit\n"
        "s = shapejit.InferenceSession('builtin:mlp')\n"
        "n = s.get_inputs()[0].name\n"
        "bad = [{n: np.zeros((2, 3, 4), np.float32)}, {n: np.zeros((2, 10**6), np.float32)},\n"
        "       {n: np.zeros((2, 1), np.int32)}, {n: object()}, {n: None}, {1: 2}]\n"
        "for feed in bad:\n"
        "    try:\n"
        "        s.run(None, feed)\n"
        "    except shapejit.Error:\n"
        "        pass\n"
        "print('ok')\n"
    )
    import sys

    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
