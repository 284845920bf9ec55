#!/usr/bin/env python3
"""Run onnxruntime on an .onnx model under a shapejit bench workload; write the
shapejit bench JSON schema so `shapejit bench --compare FILE.json` can show it.

The workload generators are the ones of `shapejit bench --workload` (see
crates/shapejit-cli/src/workload.rs), driven by the same SplitMix64 generator, so the
same spec and seed give the same batch sequence on both sides:

  random-walk:V1,V2,..  start at V1; each step draws r = next() % 3 and moves the
                        index by r - 1; a move off either end stays
  fixed:N               always N
  cycle:V1,V2,..        V[i % len]
  jitter:LO..HI         LO + next() % (HI - LO + 1)
  trace:FILE            one step per line: a batch size, or sym=N,sym=N; '#' comments;
                        repeated when shorter than the run

A timed iteration is one `session.run` on a prebuilt input (inputs are generated once per
distinct shape). Statistics match shapejit's: percentiles interpolate linearly (numpy's
default), the first `--warmup` iterations are left out of everything except the
first-call-per-shape latency, `steady_median_us` is the median of the last half of a
shape's measured iterations.

Usage:
  python3 ort_bench.py MODEL.onnx [--workload SPEC] [--iters 500] [--warmup 50] [--seed 7]
                       [--dim SYM=N]... [--threads 1] [--json OUT.json]
  python3 ort_bench.py --print-workload SPEC [--iters N] [--seed S]   # one step per line
  python3 ort_bench.py --self-test      # generator check against the pinned Rust sequence
"""
import argparse
import json
import sys
import time

MASK = (1 << 64) - 1
DEFAULT_SPEC = "random-walk:1,4,16,64"
# First 24 batches of the default spec with seed 7; the same list is pinned in
# crates/shapejit-cli/src/workload.rs (default_walk_first_batches_are_pinned).
PINNED_SEED7 = [1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 16, 16, 16, 4, 4, 1, 1, 1, 4, 16, 16, 16, 64, 64]


class SplitMix64:
    """SplitMix64 with wrapping 64-bit arithmetic (as java.util.SplittableRandom)."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


class WorkloadError(ValueError):
    pass


def parse_size(text):
    t = text.strip()
    if not t.isdigit():
        raise WorkloadError(f"'{t}' is not a non-negative integer")
    v = int(t)
    if v == 0:
        raise WorkloadError("a size of 0 is not a useful workload step; use 1 or more")
    return v


def parse_trace(text):
    """Steps of a trace file: an int (batch) or a dict of named bindings per line."""
    steps = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            if "=" not in line:
                steps.append(parse_size(line))
                continue
            named = {}
            for part in line.split(","):
                if "=" not in part:
                    raise WorkloadError(f"'{part.strip()}' is not sym=N")
                sym, value = part.split("=", 1)
                sym = sym.strip()
                if not sym:
                    raise WorkloadError(f"'{part.strip()}' has no symbol name before '='")
                if sym in named:
                    raise WorkloadError(f"symbol '{sym}' is bound twice")
                named[sym] = parse_size(value)
            steps.append(named)
        except WorkloadError as e:
            raise WorkloadError(f"line {no}: '{line}': {e}") from None
    if not steps:
        raise WorkloadError("the trace has no steps (one batch size or sym=N,... per line)")
    return steps


def workload_steps(spec, n, seed):
    """The first n steps of a workload spec: ints (batch sizes) or dicts (named bindings)."""
    kind, sep, arg = spec.partition(":")
    if not sep:
        raise WorkloadError(f"workload '{spec}' has no ':'")
    rng = SplitMix64(seed)
    if kind in ("random-walk", "cycle"):
        values = [parse_size(v) for v in arg.split(",")]
        if kind == "cycle":
            return [values[i % len(values)] for i in range(n)]
        idx, out = 0, []
        for _ in range(n):
            out.append(values[idx])
            j = idx + rng.next() % 3 - 1
            idx = j if 0 <= j < len(values) else idx
        return out
    if kind == "fixed":
        return [parse_size(arg)] * n
    if kind == "jitter":
        lo, sep, hi = arg.partition("..")
        if not sep:
            raise WorkloadError(f"workload '{spec}': expected jitter:LO..HI")
        lo, hi = parse_size(lo), parse_size(hi)
        if lo > hi:
            raise WorkloadError(f"workload '{spec}': LO ({lo}) is greater than HI ({hi})")
        return [lo + rng.next() % (hi - lo + 1) for _ in range(n)]
    if kind == "trace":
        with open(arg) as f:
            steps = parse_trace(f.read())
        return [steps[i % len(steps)] for i in range(n)]
    raise WorkloadError(f"unknown workload kind '{kind}'")


def label(step):
    if isinstance(step, int):
        return str(step)
    return ",".join(f"{k}={v}" for k, v in sorted(step.items()))


def label_key(lab):
    """Batch labels in numeric order, named bindings after them."""
    return (0, int(lab), "") if lab.isdigit() else (1, 0, lab)


def percentile(sorted_samples, q):
    n = len(sorted_samples)
    if n == 0:
        return float("nan")
    if n == 1:
        return sorted_samples[0]
    pos = min(max(q / 100.0, 0.0), 1.0) * (n - 1)
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (pos - lo)


def median(samples):
    return percentile(sorted(samples), 50.0)


def summarize(tier, records, warmup, setup_ms, profile):
    first, measured, every = {}, {}, []
    for r in records:
        lab = label(r["_step"])
        first.setdefault(lab, r["latency_us"])
        if r["iter"] >= warmup:
            measured.setdefault(lab, []).append(r["latency_us"])
            every.append(r["latency_us"])
    per_batch = {}
    for lab, samples in sorted(measured.items(), key=lambda kv: label_key(kv[0])):
        s = sorted(samples)
        per_batch[lab] = {"median_us": percentile(s, 50), "p90_us": percentile(s, 90),
                          "p99_us": percentile(s, 99), "count": len(samples),
                          "first_call_us": first[lab], "steady_median_us": median(samples[len(samples) // 2:])}
    return {"tier": tier, "per_batch": per_batch,
            "mean_us": sum(every) / len(every) if every else float("nan"),
            "compile_count": 0, "compile_ms_total": 0.0, "cache_hit_rate": 0.0,
            "first_call_after_new_shape_us": median(list(first.values())),
            "deopt_count": 0, "setup_ms": setup_ms, "compile_events": [], "profile": profile}


def bind_shape(shape, step, extra, primary):
    """Concrete dims of an ONNX input shape (ints, symbol strings or None)."""
    binds = dict(extra)
    if isinstance(step, int):
        binds[primary] = step
    else:
        binds.update(step)
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
        elif d in binds:
            out.append(binds[d])
        else:
            raise WorkloadError(f"input dim '{d}' is unbound: pass --dim {d}=N")
    return out


def run(args):
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    setup_ms = (time.perf_counter() - t0) * 1e3

    metas = sess.get_inputs()
    symbols = [d for m in metas for d in m.shape if isinstance(d, str)]
    primary = "batch" if "batch" in symbols else (symbols[0] if symbols else "batch")
    extra = dict(args.dim)
    steps = workload_steps(args.workload, args.iters, args.seed)
    dtypes = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
              "tensor(bool)": np.bool_}
    rng = np.random.default_rng(args.seed)
    feeds = {}
    for step in steps:
        lab = label(step)
        if lab in feeds:
            continue
        feed = {}
        for m in metas:
            shape = bind_shape(m.shape, step, extra, primary)
            dt = dtypes.get(m.type)
            if dt is None:
                raise WorkloadError(f"input '{m.name}' has type {m.type}, which this script does not generate")
            feed[m.name] = rng.standard_normal(shape).astype(dt) if dt == np.float32 else np.zeros(shape, dt)
        feeds[lab] = feed

    tier = f"ort{args.threads}"
    records = []
    clock = time.perf_counter_ns
    progress = sys.stderr.isatty()
    for i, step in enumerate(steps):
        feed = feeds[label(step)]
        t = clock()
        sess.run(None, feed)
        us = (clock() - t) / 1e3
        rec = {"iter": i, "latency_us": us, "tier": tier, "served_by": "engine", "_step": step}
        if isinstance(step, int):
            rec["batch"] = step
        else:
            rec["dims"] = dict(sorted(step.items()))
        records.append(rec)
        if progress and (i % 10 == 0 or i + 1 == len(steps)):
            print(f"\r{tier}: {i + 1}/{len(steps)}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)

    profile = {"session_creation_ms": setup_ms, "onnxruntime": ort.__version__,
               "intra_op_num_threads": args.threads}
    summary = summarize(tier, records, args.warmup, setup_ms, profile)
    for r in records:
        del r["_step"]
    report = {"engine": "onnxruntime", "model": args.model,
              "workload": {"spec": args.workload, "seed": args.seed, "iters": args.iters, "warmup": args.warmup},
              "tiers": [summary], "iterations": records}
    print(f"{tier}: session creation {setup_ms:.1f} ms, mean {summary['mean_us']:.1f} us")
    print(f"{'batch':>16s}{'median us':>12s}{'p90 us':>12s}{'p99 us':>12s}{'first us':>12s}{'count':>7s}")
    for lab, b in summary["per_batch"].items():
        print(f"{lab:>16s}{b['median_us']:12.1f}{b['p90_us']:12.1f}{b['p99_us']:12.1f}"
              f"{b['first_call_us']:12.1f}{b['count']:7d}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")


def parse_dim(text):
    sym, sep, value = text.partition("=")
    if not sep or not sym.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not SYMBOL=N")
    try:
        return sym.strip(), parse_size(value)
    except WorkloadError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="the .onnx model")
    ap.add_argument("--workload", default=DEFAULT_SPEC)
    ap.add_argument("--iters", type=int, default=500, help="iterations, warm-up included")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dim", type=parse_dim, action="append", default=[], metavar="SYM=N")
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--print-workload", metavar="SPEC", help="print the steps of SPEC, one per line, and exit")
    ap.add_argument("--self-test", action="store_true", help="check the generator against the pinned sequence")
    args = ap.parse_args()
    try:
        if args.self_test:
            got = workload_steps(DEFAULT_SPEC, len(PINNED_SEED7), 7)
            if got != PINNED_SEED7:
                sys.exit(f"error: generator mismatch: {got} != {PINNED_SEED7}")
            print("ok: the default workload matches the pinned sequence")
        elif args.print_workload:
            for step in workload_steps(args.print_workload, args.iters, args.seed):
                print(label(step))
        elif not args.model:
            ap.error("a MODEL.onnx is needed (or --print-workload / --self-test)")
        else:
            run(args)
    except (WorkloadError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
