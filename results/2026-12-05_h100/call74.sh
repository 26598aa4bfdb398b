#!/usr/bin/env bash
# Device call 74 (2026-12-05, third session): first the GPU tests of what calls 68 to 71 left
# untested (the classifier in the plan cache, GpuNetwork.PlanCacheSecondBuildTakesEveryPlanFromDisk;
# the stem dispatch refactor, GpuOps.StemKernelMatchesItsHostCode; replay_once in
# ParallelPlanBuildingMatchesSerial), then the smoke benchmark with its new plan-cache check
# (ctest's gpu_smoke_benchmark: the second autotuned run tunes nothing, the classifier included).
# If both pass, the full soak starts (call72.sh start, setsid) and this call waits for it until
# about 585 s; call 75 collects it. Predictions: the tests pass; the second run's counters are
# used = first run's misses, misses 0, stale 0.
# Pack everything (tools/carry_pack.sh); carry .carry.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/t
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib:$PWD/.carry/lib
timeout 200 build/release/tests/test_gpu \
  --gtest_filter='GpuNetwork.PlanCache*:GpuOps.StemKernelMatchesItsHostCode:GpuNetwork.ParallelPlanBuildingMatchesSerial' \
  >$O/t/gtest.log 2>&1
g=$?
echo "gtest rc=$g ${SECONDS}s"; grep -E "OK \]|FAILED|Failure|error" $O/t/gtest.log | head -12
timeout 240 bash tests/smoke_benchmark.sh build/release/cnnbench >$O/t/smoke.log 2>&1
s=$?
echo "smoke rc=$s ${SECONDS}s"; grep -E "smoke_benchmark|FAIL|error" $O/t/smoke.log | cut -c1-220 | head -12
(cd $O && tar czf t.tgz --remove-files t)
if [ $g = 0 ] && [ $s = 0 ]; then
  WAIT=$((585 - SECONDS)) bash results/2026-12-05_h100/call72.sh start
else
  echo "soak not started"
fi
