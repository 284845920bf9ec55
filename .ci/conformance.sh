#!/usr/bin/env bash
# Runs the ONNX importer over the onnx package's PyTorch conformance cases.
# A case listed as passing that fails (or an unlisted failure) fails CI.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TMPDIR:-/tmp}/shapejit-ci-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "onnx==1.23.2" "numpy<3"
fi
data="$("$venv/bin/python" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data"))')"
SHAPEJIT_ONNX_CONFORMANCE="$data" timeout 1200 cargo test -q -p shapejit-onnx --test conformance -- --nocapture
