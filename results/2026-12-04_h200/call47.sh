#!/usr/bin/env bash
# Device call 47 (written 2026-12-05, not yet run). Issue 9's first lever as the issue words it:
# "cuDNN heuristics modes A and B plus fallback; time the top-k". Until 2026-12-05 autotune timed
# mode A's top k (and fallback) only; now it also times up to k / 2 configs only mode B offers
# (--mode_b, default true). The same binary twice, --mode_b=false then true, on three of the four
# misses (ResNet-50 fp16 at 1 and 256, Inception-v3 at 256), five repetitions each;
# compare_runs gives each benchmark's verdict (U-test) and the layers whose engine changed; the
# layer tables' heuristic_source counts the winners mode B alone offered.
# Prediction (NOTES.md, "Heuristics mode B"): a few layers won by B; 0 to 2% faster overall.
# Carry: build/release/cnnbench, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
F='(resnet50/fp16/graph/batch:(1|256)|inception_v3/fp16/graph/batch:256)/'
for mb in false true; do
  timeout 270 $B/cnnbench --engine=autotune --mode_b=$mb --benchmark_filter="$F" \
    --benchmark_repetitions=5 --benchmark_out=$O/b/mode_b_$mb.json >$O/b/mode_b_$mb.log 2>&1
  echo "mode_b=$mb rc=$? $(date +%T)"; grep -E "_median" $O/b/mode_b_$mb.log | cut -c1-120
done
python3 tools/compare_runs.py $O/b/mode_b_false.json $O/b/mode_b_true.json \
  --out-md $O/b/compare.md >/dev/null 2>&1
echo "compare rc=$?"; head -40 $O/b/compare.md
python3 - "$O/b" <<'PY'
import collections, json, os, sys
d = sys.argv[1]
for mb in ("false", "true"):
    m = json.load(open(os.path.join(d, f"mode_b_{mb}.layers.json")))["models"]
    for x in m:
        c = collections.Counter(l.get("heuristic_source", "") for l in x["layers"]
                                if not l.get("plan_reused"))
        print(mb, x["model"], dict(c))
PY
(cd $O && tar czf b.tgz --remove-files b)
