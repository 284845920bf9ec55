#!/usr/bin/env bash
# The README's performance tables: onnxruntime (ort_bench.py) and shapejit
# (`shapejit bench --tiers interp,jit`) on each ../shared/models model, at 1 and 2
# intra-op threads, each pair run back to back under the same workload (batch
# random walk over {1, 4, 16, 64}, seed 7), then `compare_table.py` prints the
# per-batch medians and the speed ratios. Usage: benches/peers/compare.sh [OUT_DIR]
# (after `cargo build --release`; needs python3 with numpy, onnx, onnxruntime).
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-target/compare}"
models="${MODELS:-../shared/models}"
mkdir -p "$out"
unset RUST_BACKTRACE
for m in transformer mlp convnet elementwise; do
    iters=500 warmup=50
    if [ "$m" = transformer ]; then iters=200 warmup=20; fi
    for t in 1 2; do
        python3 benches/peers/ort_bench.py "$models/$m.onnx" --threads "$t" \
            --iters "$iters" --warmup "$warmup" --json "$out/ort_${m}_$t.json" >/dev/null
        ./target/release/shapejit bench "$models/$m.onnx" --tiers interp,jit --threads "$t" \
            --iters "$iters" --warmup "$warmup" --json "$out/sj_${m}_$t.json" >/dev/null
    done
done
python3 benches/peers/compare_table.py "$out"
