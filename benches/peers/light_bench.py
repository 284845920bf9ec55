#!/usr/bin/env python3
"""Batch-1 latency of the onnx package's light CNN models: onnxruntime against
`shapejit run --tier interp`, same thread count, back to back per model.

Usage: python3 light_bench.py LIGHT_DIR [--cli target/release/shapejit]
       [--threads 1] [--iters 10] [--models resnet50,densenet121,...]
LIGHT_DIR holds NAME/model.onnx (as .ci/conformance_cases.py writes it under
its `light` folder). Prints per-model medians (onnxruntime) and means
(shapejit's `run`, warm-up call excluded), their ratio, and the geomean.
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import time

import numpy as np
import onnxruntime as ort

DEFAULT = "resnet50,densenet121,squeezenet,shufflenet,vgg19"


def ort_ms(path, threads, iters):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        feeds[i.name] = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    sess.run(None, feeds)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def shapejit_ms(cli, path, threads, iters):
    out = subprocess.run(
        [cli, "run", path, "--tier", "interp", "--threads", str(threads), "--iters", str(iters + 1)],
        check=True, capture_output=True, text=True,
    ).stdout
    m = re.search(r"(\d+) run\(s\): first ([\d.]+) µs, mean ([\d.]+) µs", out)
    runs, first, mean = int(m.group(1)), float(m.group(2)), float(m.group(3))
    # the mean includes the first (warm-up) call: take it out
    return (mean * runs - first) / (runs - 1) / 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("light_dir")
    ap.add_argument("--cli", default="target/release/shapejit")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--models", default=DEFAULT)
    a = ap.parse_args()
    ratios = []
    print(f"{'model':<14}{'onnxruntime ms':>16}{'shapejit ms':>14}{'speed':>8}")
    for name in a.models.split(","):
        path = os.path.join(a.light_dir, name, "model.onnx")
        o = ort_ms(path, a.threads, a.iters)
        s = shapejit_ms(a.cli, path, a.threads, a.iters)
        ratios.append(o / s)
        print(f"{name:<14}{o:>16.2f}{s:>14.2f}{o / s:>7.2f}x")
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"geomean speed (onnxruntime ms / shapejit ms): {geo:.2f}x")


if __name__ == "__main__":
    main()
