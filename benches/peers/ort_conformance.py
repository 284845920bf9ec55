#!/usr/bin/env python3
"""onnxruntime's pass count on the ONNX node conformance cases (the peer figure
next to shapejit's in the README).

Usage: ort_conformance.py [--threads N] [--verbose]

Runs every case of onnx.backend.test.case.node.collect_testcases() on the CPU
provider and compares as the onnx backend runner does (numpy assert_allclose,
rtol/atol of the case, NaN equal to NaN, dtype and shape must match). Prints
passed / failed (wrong result) / error (load or run refused) counts.
"""

import argparse
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx.backend.test.case.node import collect_testcases


def as_array(x):
    if isinstance(x, onnx.TensorProto):
        return onnx.numpy_helper.to_array(x)
    return x


def same(want, got, rtol, atol):
    if isinstance(want, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(want) == len(got) and all(
            same(w, g, rtol, atol) for w, g in zip(want, got)
        )
    if want is None:
        return got is None
    want, got = np.asarray(as_array(want)), np.asarray(got)
    if want.dtype != got.dtype or want.shape != got.shape:
        return False
    if want.dtype.kind in "fc":
        return np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    return np.array_equal(got, want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--verbose", action="store_true", help="name the wrong results")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.log_severity_level = 4
    passed = wrong = error = 0
    cases = collect_testcases()
    for case in cases:
        (inputs, outputs), = case.data_sets
        try:
            sess = ort.InferenceSession(
                case.model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
            )
            names = [i.name for i in sess.get_inputs()]
            feeds = {n: as_array(x) for n, x in zip(names, inputs)}
            got = sess.run(None, feeds)
        except Exception:  # noqa: BLE001 - any refusal counts as an error
            error += 1
            continue
        if len(got) == len(outputs) and all(
            same(w, g, case.rtol, case.atol) for w, g in zip(outputs, got)
        ):
            passed += 1
        else:
            wrong += 1
            if args.verbose:
                print(f"wrong: {case.name}")
    print(
        f"onnxruntime {ort.__version__}, onnx {onnx.__version__}: node suite "
        f"{passed} passed, {wrong} failed (wrong), {error} error (of {len(cases)})"
    )


if __name__ == "__main__":
    main()
