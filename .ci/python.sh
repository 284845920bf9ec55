#!/usr/bin/env bash
# The Python package as a user installs it: a fresh venv, numpy/onnx/
# onnxruntime/pytest from PyPI, `pip install ./crates/shapejit-py` (maturin is
# the PEP 517 backend; pip fetches it), then the package's pytest suite.
# pytest's "no tests collected" (exit 5) fails the step.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(mktemp -d)/venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check numpy onnx onnxruntime pytest
start=$(date +%s)
"$venv/bin/pip" install -q --disable-pip-version-check ./crates/shapejit-py
echo "pip install ./crates/shapejit-py: $(($(date +%s) - start)) s"
cd crates/shapejit-py
status=0
"$venv/bin/python" -m pytest -q -rs tests || status=$?
if [ "$status" -eq 5 ]; then
    echo "error: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
