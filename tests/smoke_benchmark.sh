#!/usr/bin/env bash
# The GPU smoke benchmark (ctest label gpu): configs/smoke.yaml (every network at batch 1 and 2,
# fp16, heuristic engines, one short repetition) through the benchmark binary, then
# tools/check_results.py: the JSON whole, its context complete, every benchmark present and
# successful. Exit 77 (skipped) without a CUDA device. About 2-3 minutes on an H200.
set -uo pipefail
BENCH=${1:?usage: smoke_benchmark.sh CNNBENCH [SRC]}
SRC=${2:-$(dirname "$0")/..}
cd "$SRC"
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "smoke_benchmark: no CUDA device here: skipped"
  exit 77
fi
out=$(mktemp -d)
"$BENCH" --config=configs/smoke.yaml --benchmark_out="$out/smoke.json" >"$out/smoke.log" 2>&1
rc=$?
tail -5 "$out/smoke.log"
python3 tools/check_results.py "$out/smoke.json" configs/smoke.yaml
check=$?
rm -rf "$out"
[ "$rc" -eq 0 ] && [ "$check" -eq 0 ]
