#!/usr/bin/env python3
"""Markdown tables from the JSON files of compare.sh: per model, per thread count and
batch, the median ms of shapejit's interpreter and JIT tiers and of onnxruntime, and
onnxruntime's time over shapejit's (above 1: shapejit is faster), with the geomean
over the batches. Usage: compare_table.py DIR"""
import json
import math
import os
import sys


def medians(path, tier=None):
    doc = json.load(open(path))
    run = [t for t in doc["tiers"] if tier is None or t["tier"] == tier][0]
    return {int(b): v["median_us"] / 1000 for b, v in run["per_batch"].items()}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main(d):
    for m in ["transformer", "mlp", "convnet", "elementwise"]:
        if not os.path.exists(f"{d}/ort_{m}_1.json"):
            continue  # not measured in this run (compare.sh's MODELS_ONLY)
        print(f"\n{m} (median ms; speed = onnxruntime ms / shapejit ms)\n")
        print("| threads | batch | interp | jit | onnxruntime | interp speed | jit speed |")
        print("|---|---|---|---|---|---|---|")
        for t in (1, 2):
            if not os.path.exists(f"{d}/ort_{m}_{t}.json"):
                continue  # this thread count not measured
            o = medians(f"{d}/ort_{m}_{t}.json")
            i = medians(f"{d}/sj_{m}_{t}.json", "interp")
            j = medians(f"{d}/sj_{m}_{t}.json", "jit")
            for b in sorted(o):
                print(f"| {t} | {b} | {i[b]:.3f} | {j[b]:.3f} | {o[b]:.3f} "
                      f"| {o[b] / i[b]:.2f}× | {o[b] / j[b]:.2f}× |")
            gi = geomean([o[b] / i[b] for b in o])
            gj = geomean([o[b] / j[b] for b in o])
            print(f"| {t} | geomean | | | | {gi:.2f}× | {gj:.2f}× |")


if __name__ == "__main__":
    main(sys.argv[1])
