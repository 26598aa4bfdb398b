#!/usr/bin/env bash
# The main job: the default sweep (configs/default.yaml) on this machine's GPU, written as Google
# Benchmark JSON to results/<date>_<gpu>.json, with the per-layer engine table beside it.
# Extra arguments go to the benchmark binary (e.g. --config=configs/resnet50_fp16.yaml --eager).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_' || true)
out="results/$(date +%Y-%m-%d)_${gpu:-nogpu}.json"
exec build/release/cnnbench --config=configs/default.yaml --benchmark_out="$out" "$@"
