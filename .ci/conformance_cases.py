#!/usr/bin/env python3
"""Writes the ONNX conformance cases the Rust runner reads, as data (never checked in).

Usage: conformance_cases.py OUT_DIR

OUT_DIR/<suite>/<case>/model.onnx and OUT_DIR/<suite>/<case>/test_data_set_0/
{input,output}_N.pb, for the suites
- node: the onnx package's node cases (onnx.backend.test.case.node.collect_testcases);
  a case whose inputs or outputs are not tensors (sequences, optionals) gets an
  `unsupported.txt` saying why instead of data;
- light: the nine light models of onnx/backend/test/data/light, with the onnx
  backend runner's deterministic inputs (arange(n) / n, unnamed dims 1) and the
  package's stored `light_*_output_0.pb` references;
- pytorch-converted, pytorch-operator, simple: links to the package's data.
Also OUT_DIR/schemas.txt: every default-domain op's since-versions (onnx.defs),
one `OpType v1 v2 ...` line per op, which the runner checks the importer's
version table against.
"""

import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.case.node import collect_testcases


def tensor_proto(x):
    if isinstance(x, onnx.TensorProto):
        return x
    if isinstance(x, (list, tuple)) or x is None:
        return None
    return numpy_helper.from_array(np.asarray(x))


def write_case(case_dir, model, inputs, outputs):
    data = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(case_dir, "model.onnx"))
    for kind, values in (("input", inputs), ("output", outputs)):
        for i, x in enumerate(values):
            tp = tensor_proto(x)
            if tp is None:
                why = f"{kind} {i} is a {type(x).__name__}, not a tensor"
                with open(os.path.join(case_dir, "unsupported.txt"), "w") as f:
                    f.write(why + "\n")
                return
            with open(os.path.join(data, f"{kind}_{i}.pb"), "wb") as f:
                f.write(tp.SerializeToString())


def node_cases(out):
    cases = collect_testcases()
    for case in cases:
        (inputs, outputs), = case.data_sets
        write_case(os.path.join(out, "node", case.name), case.model, inputs, outputs)
    return len(cases)


def light_cases(out, data_dir):
    light = os.path.join(data_dir, "light")
    names = sorted(f[: -len(".onnx")] for f in os.listdir(light) if f.endswith(".onnx"))
    for name in names:
        model = onnx.load(os.path.join(light, name + ".onnx"))
        inits = {t.name for t in model.graph.initializer}
        inputs = []
        for vi in model.graph.input:
            if vi.name in inits:
                continue
            dims = vi.type.tensor_type.shape.dim
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
            n = int(np.prod(shape))
            inputs.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        case_dir = os.path.join(out, "light", name[len("light_"):])
        os.makedirs(os.path.join(case_dir, "test_data_set_0"), exist_ok=True)
        write_case(case_dir, model, inputs, [])
        shutil.copy(
            os.path.join(light, name + "_output_0.pb"),
            os.path.join(case_dir, "test_data_set_0", "output_0.pb"),
        )
    return len(names)


def schemas(out):
    versions = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx"):
            versions.setdefault(s.name, []).append(s.since_version)
    with open(os.path.join(out, "schemas.txt"), "w") as f:
        for name, vs in sorted(versions.items()):
            f.write(" ".join([name] + [str(v) for v in sorted(vs)]) + "\n")


def main():
    out = sys.argv[1]
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    data_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    for suite in ("pytorch-converted", "pytorch-operator", "simple"):
        os.symlink(os.path.join(data_dir, suite), os.path.join(out, suite))
    n_node = node_cases(out)
    n_light = light_cases(out, data_dir)
    schemas(out)
    print(f"wrote {n_node} node cases and {n_light} light models to {out}")


if __name__ == "__main__":
    main()
