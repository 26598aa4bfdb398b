#!/usr/bin/env bash
# The GPU smoke benchmark (ctest label gpu): configs/smoke.yaml (every network at batch 1 and 2,
# fp16, heuristic engines, one short repetition) through the benchmark binary, then
# tools/check_results.py: the JSON whole, its context complete, every benchmark present and
# successful; then --profile=2 profiles exactly 2 forwards per benchmark; then two autotuned runs
# with one --plan_cache: the second tunes nothing. Exit 77 (skipped)
# without a CUDA device. About 2-3 minutes on an H200.
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
# --profile=N: exactly N forwards profiled per benchmark, however often Google Benchmark calls the
# benchmark's function (its iteration trials and repetitions; device call 60 saw three).
"$BENCH" --config=configs/smoke.yaml --benchmark_filter='resnet50/fp16/graph/batch:1/' --profile=2 \
  --benchmark_repetitions=2 --benchmark_out="$out/profile.json" >"$out/profile.log" 2>&1
prc=$?
python3 - "$out/profile.json" <<'PY'
import json, sys
rows = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("run_type") == "iteration"]
got = sorted({b.get("profiled_forwards") for b in rows})
print(f"smoke_benchmark: --profile=2 over {len(rows)} repetitions: profiled_forwards {got}")
sys.exit(0 if rows and got == [2] else 1)
PY
pcheck=$?
# --plan_cache: a second autotuned run with the file the first wrote takes every plan from it
# (the convs and the classifier), and each model's counters are its own.
for k in 1 2; do
  "$BENCH" --config=configs/smoke.yaml --benchmark_filter='resnet50/fp16/graph/batch:(1|2)/' \
    --engine=autotune --plan_cache="$out/plans.json" --layers_out="$out/plans$k.layers.json" \
    --benchmark_repetitions=1 --benchmark_out="$out/plans$k.json" >"$out/plans$k.log" 2>&1 ||
    { echo "smoke_benchmark: plan cache run $k failed"; tail -3 "$out/plans$k.log"; }
done
python3 - "$out/plans1.layers.json" "$out/plans2.layers.json" <<'PY'
import json, sys
# A model's last entry (an entry is written before its capture too, where one is repaired).
runs = [list({m["model"]: m for m in json.load(open(p))["models"]}.values()) for p in sys.argv[1:]]
ok = len(runs[0]) == len(runs[1]) == 2
for first, second in zip(*runs):
    a, b = first["plan_cache"], second["plan_cache"]
    eng_a = [l["engine"] for l in first["layers"]]
    eng_b = [l["engine"] for l in second["layers"]]
    fc = [l for l in second["layers"] if l["name"] == "fc"]
    print(f"smoke_benchmark: {second['model']}: first run {a}, second {b}")
    ok &= a["used"] == 0 and a["misses"] > 0 and b["misses"] == 0 and b["stale"] == 0
    ok &= b["used"] == a["misses"] and eng_a == eng_b
    ok &= len(fc) == 1 and fc[0]["from_plan_cache"]
sys.exit(0 if ok else 1)
PY
ccheck=$?
rm -rf "$out"
[ "$rc" -eq 0 ] && [ "$check" -eq 0 ] && [ "$prc" -eq 0 ] && [ "$pcheck" -eq 0 ] && [ "$ccheck" -eq 0 ]
