#!/usr/bin/env bash
# Device call 44 (written 2026-12-04 late evening, not yet run: the device was paused).
# Issue 9's plan cache on disk (--plan_cache): the same autotuned sweep twice with one cache
# file. The second run must pick the same engine for every layer (compare_runs' per-layer engine
# changes: none), take most of them from the cache (the layer table's from_plan_cache, the
# models' plan_cache counters), and prepare each model in a fraction of the first run's time
# (prepare_s per benchmark). Then the same second run against cuDNN 9.14 (the system's): its
# scope differs, so nothing may come from the cache.
# Carry: build/release/cnnbench, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/p
CUDNN919=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
B=build/release
F='(resnet50|efficientnet_b0)/fp16/graph/batch:(1|32|256)/'
for run in 1 2; do
  LD_LIBRARY_PATH=$CUDNN919:$PWD/.carry/lib timeout 240 $B/cnnbench --engine=autotune \
    --plan_cache=$O/p/plans.json --benchmark_filter="$F" --benchmark_repetitions=3 \
    --benchmark_out=$O/p/run$run.json >$O/p/run$run.log 2>&1
  echo "P run $run rc=$? $(date +%T)"; grep -E "_median" $O/p/run$run.log | cut -c1-120 | head -6
done
python3 tools/compare_runs.py $O/p/run1.json $O/p/run2.json --out-md $O/p/compare.md >/dev/null 2>&1
echo "compare rc=$?"; grep -iE "engine|changed|same|faster|slower" $O/p/compare.md | head -12
python3 - "$O/p" <<'PY'
import json, sys, os
d = sys.argv[1]
for run in (1, 2):
    m = json.load(open(os.path.join(d, f"run{run}.layers.json")))["models"]
    cached = sum(l.get("from_plan_cache", False) for x in m for l in x["layers"])
    total = sum(len(x["layers"]) for x in m)
    print(f"run {run}: {cached} of {total} layers from the plan cache;",
          [x.get("plan_cache") for x in m][-1])
    b = json.load(open(os.path.join(d, f"run{run}.json")))["benchmarks"]
    print("  prepare_s:", sorted({(e["name"].split("/manual")[0], round(e.get("prepare_s", 0), 1))
                                 for e in b if e.get("run_type") == "iteration"}))
PY
LD_LIBRARY_PATH=$PWD/.carry/lib timeout 200 $B/cnnbench --engine=autotune \
  --plan_cache=$O/p/plans.json --benchmark_filter='resnet50/fp16/graph/batch:(1|256)/' \
  --benchmark_repetitions=3 --benchmark_out=$O/p/run914.json >$O/p/run914.log 2>&1
echo "P cuDNN 9.14 rc=$? $(date +%T)"; grep -c '"from_plan_cache": true' $O/p/run914.layers.json
(cd $O && tar czf p.tgz --remove-files p)
