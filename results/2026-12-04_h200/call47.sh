#!/usr/bin/env bash
# Device call 47 (written 2026-12-05, not yet run). Issue 9's first lever as the issue words it:
# "cuDNN heuristics modes A and B plus fallback; time the top-k". Until 2026-12-05 autotune timed
# mode A's top k (and fallback) only; now it also times up to k / 2 configs only mode B offers
# (--mode_b, default true). The same binary twice, --mode_b=false then true, on three of the four
# misses (ResNet-50 fp16 at 1 and 256, Inception-v3 at 256), five repetitions each;
# compare_runs gives each benchmark's verdict (U-test) and the layers whose engine changed; the
# layer tables' heuristic_source counts the winners mode B alone offered.
# Predictions (NOTES.md, "Heuristics mode B" and "The 3-channel stems"): the padded stems take
# ResNet-50 at 256 from 8.66 to about 7.5 ms and at 1 from 340 to about 327 us; mode B a few
# layers and 0 to 2% more.
# Carry: build/release/cnnbench, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
F='(resnet50/fp16/graph/batch:(1|256)|inception_v3/fp16/graph/batch:256)/'
# Three runs: neither lever, the padded stems (--pad_channels, NOTES "The 3-channel stems"), then
# mode B on top; compare_runs between consecutive runs attributes each.
for run in "nopad false false" "pad false true" "modeb true true"; do
  set -- $run
  timeout 140 $B/cnnbench --engine=autotune --mode_b=$2 --pad_channels=$3 \
    --benchmark_filter="$F" --benchmark_repetitions=5 --benchmark_out=$O/b/$1.json \
    >$O/b/$1.log 2>&1
  echo "$1 rc=$? $(date +%T)"; grep -E "_median" $O/b/$1.log | cut -c1-120
done
for pair in "nopad pad" "pad modeb"; do
  set -- $pair
  python3 tools/compare_runs.py $O/b/$1.json $O/b/$2.json --out-md $O/b/compare_$1_$2.md \
    >/dev/null 2>&1
  echo "compare $1 -> $2 rc=$?"; head -30 $O/b/compare_$1_$2.md
done
python3 - "$O/b" <<'PY'
import collections, json, os, sys
d = sys.argv[1]
for mb in ("pad", "modeb"):
    m = json.load(open(os.path.join(d, f"{mb}.layers.json")))["models"]
    for x in m:
        c = collections.Counter(l.get("heuristic_source", "") for l in x["layers"]
                                if not l.get("plan_reused"))
        print(mb, x["model"], dict(c))
PY
(cd $O && tar czf b.tgz --remove-files b)
