#!/usr/bin/env bash
# Device calls 72a and 72b: issue 10's soak, the default sweep (configs/default.yaml: ResNet-50,
# 4 precisions x 9 batches, autotune, 5 repetitions) three times in one process. Call 70 showed a
# pass takes about 440 s while it autotunes and about 195 s from the plan cache, so three passes
# do not fit one 600 s call even with call 70's cache (call70/q/plans.json, H100 scope; the
# classifier's cuBLASLt entries are new and will be written by pass 1). The run therefore starts
# in a new process session (setsid), which the device keeps running after the call returns, and
# a second call, made at once (the machine goes back after 30 s idle), waits for it and collects.
#   call 72a: bash results/2026-12-05_h100/call72.sh start    (returns after about 560 s)
#   call 72b: bash results/2026-12-05_h100/call72.sh finish   (waits, then checks and packs)
# Pack cnnbench only; carry .carry.
set -u
O=${OUT:-/tmp/out}
S=/tmp/soak72
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
case "${1:-}" in
  start)
    mkdir -p $S
    cp results/2026-12-05_h100/call70/q/plans.json $S/plans.json
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader | tee $S/gpu.txt
    setsid nohup bash -c "build/release/cnnbench --config=configs/default.yaml --soak=3 \
      --plan_cache=$S/plans.json --benchmark_out=$S/soak.json >$S/soak.log 2>&1; echo \$? >$S/rc" \
      >/dev/null 2>&1 </dev/null &
    sleep ${WAIT:-560}
    echo "after ${SECONDS}s: $(grep -c 'pass:' $S/soak.log) lines with pass:, rc file: $(cat $S/rc 2>/dev/null || echo running)"
    grep -E "soak/pass" $S/soak.log | cut -c1-160
    ;;
  finish)
    while [ ! -e $S/rc ] && ((SECONDS < ${WAIT:-560})); do sleep 5; done
    echo "cnnbench rc=$(cat $S/rc 2>/dev/null || echo 'still running') after ${SECONDS}s more"
    grep -E "soak/pass|ERROR" $S/soak.log | cut -c1-200 | head -12
    J=$S/soak.json; [ -s $J ] && python3 -c "import json,sys; json.load(open(sys.argv[1]))" $J 2>/dev/null || J=$S/soak.jsonl
    python3 tools/check_soak.py $J --out-md $S/soak.md; echo "check_soak rc=$?"
    rm -f $S/soak.layers.json
    mkdir -p $O && cp -r $S $O/q && (cd $O && tar czf q.tgz --remove-files q)
    ;;
  *) echo "usage: $0 start|finish" >&2; exit 2 ;;
esac
