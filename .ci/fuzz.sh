#!/usr/bin/env bash
# Bounded fuzzing of every parser and loader (cargo fuzz / libFuzzer).
# Each target runs for FUZZ_SECONDS (default 45); any crash fails CI.
# cargo-fuzz needs nightly features: the nightly toolchain when installed,
# otherwise the stable one with RUSTC_BOOTSTRAP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-45}"
command -v cargo-fuzz >/dev/null || cargo install -q cargo-fuzz --locked
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  tc=(+nightly)
else
  tc=()
  export RUSTC_BOOTSTRAP=1
fi
cd fuzz
for target in $(cargo "${tc[@]}" fuzz list); do
  echo "fuzz target $target for ${seconds}s"
  mkdir -p "corpus/$target"
  if [ -d "seeds/$target" ]; then cp -n seeds/"$target"/* "corpus/$target/" 2>/dev/null || true; fi
  cargo "${tc[@]}" fuzz run "$target" "corpus/$target" -- -max_total_time="$seconds" -rss_limit_mb=4096 2>&1 | tail -n 5
done
