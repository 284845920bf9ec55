#!/usr/bin/env python3
"""The Python package's figures, each against a same-process baseline:

  overhead     per-call time of InferenceSession.run on a tiny model (y = relu(x),
               x: f32[1, 4]) next to the Rust API's (`shapejit run --iters N --json`,
               same options) and onnxruntime's Python run on the same file
  walk         the transformer under the batch random walk over {1, 4, 16, 64}
               (seed 7, the workload of `shapejit bench`): shapejit vs onnxruntime
               in this process, same inputs, one intra-op thread each; median per
               batch and the total
  threads      one session, two Python threads vs one: calls per second (the MLP
               at batch 16)

Usage (after `pip install ./crates/shapejit-py` and `cargo build --release`):
  python3 benches/peers/py_bench.py [overhead|walk|threads ...] [--cli target/release/shapejit]
                                    [--models ../shared/models] [--json OUT.json]
Medians of repeated blocks; on a shared machine quote ratios from one run.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

import shapejit

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ort_bench import workload_steps  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def ort_session(model):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def sj_session(model):
    so = shapejit.SessionOptions()
    so.intra_op_num_threads = 1
    return shapejit.InferenceSession(model, so)


def per_call_us(run, calls, blocks=7):
    for _ in range(calls // 10):
        run()
    times = []
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(calls):
            run()
        times.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(times)


def tiny_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "tiny", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def overhead(args):
    calls = 20000
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tiny.onnx")
        tiny_model(path)
        x = np.ones((1, 4), np.float32)
        sess = sj_session(path)
        py_us = per_call_us(lambda: sess.run(None, {"x": x}), calls)
        rust = []
        for _ in range(5):
            out = subprocess.run(
                [args.cli, "run", path, "--dim", "batch=1", "--threads", "1", "--iters", str(calls), "--json"],
                check=True, capture_output=True, text=True,
            )
            rust.append(json.loads(out.stdout)["mean_us"])
        rust_us = statistics.median(rust)
        o = ort_session(path)
        ort_us = per_call_us(lambda: o.run(None, {"x": x}), calls)
    return {
        "shapejit_python_us": py_us,
        "shapejit_rust_us": rust_us,
        "python_overhead_us": py_us - rust_us,
        "onnxruntime_python_us": ort_us,
    }


def walk(args):
    model = str(pathlib.Path(args.models) / "transformer.onnx")
    steps = workload_steps("random-walk:1,4,16,64", args.walk_iters + args.walk_warmup, 7)
    rng = np.random.default_rng(7)
    inputs = {b: rng.standard_normal((b, 32, 256)).astype(np.float32) for b in set(steps)}
    engines = {"shapejit": sj_session(model), "onnxruntime": ort_session(model)}
    per_batch = {name: {b: [] for b in inputs} for name in engines}
    totals = {name: 0.0 for name in engines}
    # Interleaved step by step, so both see the same machine load.
    for i, b in enumerate(steps):
        for name, sess in engines.items():
            t = time.perf_counter()
            sess.run(None, {"x": inputs[b]})
            dt = (time.perf_counter() - t) * 1e3
            if i >= args.walk_warmup:
                per_batch[name][b].append(dt)
                totals[name] += dt
    med = {n: {b: statistics.median(v) for b, v in sorted(pb.items()) if v} for n, pb in per_batch.items()}
    return {
        "median_ms": med,
        "total_ms": totals,
        "ratio_shapejit_over_onnxruntime": totals["shapejit"] / totals["onnxruntime"],
        "per_batch_ratio": {b: med["shapejit"][b] / med["onnxruntime"][b] for b in med["shapejit"]},
    }


def threads(args):
    sess = sj_session(str(pathlib.Path(args.models) / "mlp.onnx"))
    x = np.random.default_rng(8).standard_normal((16, 512)).astype(np.float32)
    calls = args.thread_calls

    def work():
        for _ in range(calls):
            sess.run(None, {"x": x})

    def throughput(n):
        ts = [threading.Thread(target=work) for _ in range(n)]
        t = time.perf_counter()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        return n * calls / (time.perf_counter() - t)

    work()  # warm up: compile the hot regions, grow the pool
    one, two = [], []
    for _ in range(5):
        one.append(throughput(1))
        two.append(throughput(2))
    return {
        "calls_per_s_1_thread": statistics.median(one),
        "calls_per_s_2_threads": statistics.median(two),
        "ratio_2_over_1": statistics.median(two) / statistics.median(one),
        "ratios": [b / a for a, b in zip(one, two)],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", nargs="*", default=["overhead", "walk", "threads"])
    p.add_argument("--cli", default=str(ROOT / "target" / "release" / "shapejit"))
    p.add_argument("--models", default=str(ROOT.parent / "shared" / "models"))
    p.add_argument("--walk-iters", type=int, default=200)
    p.add_argument("--walk-warmup", type=int, default=20)
    p.add_argument("--thread-calls", type=int, default=400)
    p.add_argument("--json")
    args = p.parse_args()
    fns = {"overhead": overhead, "walk": walk, "threads": threads}
    result = {"shapejit": shapejit.__version__}
    for w in args.what:
        result[w] = fns[w](args)
        print(json.dumps({w: result[w]}, indent=1), flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
