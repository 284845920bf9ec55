"""The README's onnxruntime script runs unchanged with ``import shapejit as
ort`` and gives onnxruntime's results."""

import pathlib
import re

import numpy as np
import pytest

import _onnx_models as M

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"
ORT_IMPORT = "import onnxruntime as ort"


def swap_example():
    text = README.read_text()
    m = re.search(r"<!-- swap-example -->\s*```python\n(.*?)```", text, re.S)
    assert m, f"{README} has no ```python block after <!-- swap-example -->"
    code = m.group(1)
    assert ORT_IMPORT in code
    return code


def run_script(code, cwd, monkeypatch):
    monkeypatch.chdir(cwd)
    scope = {"__name__": "__main__"}
    exec(compile(code, "README.md", "exec"), scope)
    return scope


def test_readme_swap_example(tmp_path, monkeypatch):
    code = swap_example()
    (tmp_path / "model.onnx").write_bytes(M.mlp())
    pytest.importorskip("onnxruntime")
    ref = run_script(code, tmp_path, monkeypatch)
    swapped = code.replace(ORT_IMPORT, "import shapejit as ort")
    got = run_script(swapped, tmp_path, monkeypatch)
    assert got["ort"].__name__ == "shapejit"
    assert got["y"].shape == ref["y"].shape
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-4, atol=1e-5)
