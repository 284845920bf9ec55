#!/usr/bin/env bash
# ONNX conformance: writes the onnx package's node cases and light models as data
# (.ci/conformance_cases.py, never checked in) and runs the importer + interpreter
# over them and the package's pytorch-converted, pytorch-operator and simple cases
# (release build). A case outside tests/conformance/expected_failures.txt that does
# not pass, or any wrong result or crash, fails CI.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TMPDIR:-/tmp}/shapejit-ci-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "onnx==1.23.2" "numpy<3"
fi
cases="$(mktemp -d "${TMPDIR:-/tmp}/shapejit-conformance.XXXXXX")"
trap 'rm -rf "$cases"' EXIT
"$venv/bin/python" .ci/conformance_cases.py "$cases/data"
SHAPEJIT_ONNX_CONFORMANCE="$cases/data" timeout 900 \
  cargo test --release -q -p shapejit-onnx --test conformance -- --nocapture
