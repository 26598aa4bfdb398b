#!/usr/bin/env bash
# Device call 142 (written 2026-12-06 14:30 UTC, not yet run; about 560 s): the next session's
# first call on a non-H200 (call141.sh sends it here). Carry .carry.
# F (about 90 s): issue 9's fused stem pool after call 140. Its kernel test now compares the
#    statistics as bits (it failed on NaN == NaN alone), and the pool reads the BatchNorm's
#    factors once a thread (it read them at each of nine pixels: 506 us against the plain pool's
#    260). The tests, then the A/B off, on, off, on. Predicted: "forward maxpool" 270 to 320 us
#    fused, so the step 230 to 290 us below unfused (call 140: 47 us); the loss the same.
# R: issue 10, racecheck's host memory with cuBLAS's kernels alone unchecked (call 137: every
#    option set grew 0.7 to 3.5 GB a second; the hazard-mode run was busy in cuBLAS's nvjet
#    kernels; excluding all the vendors' kernels failed in fp16 with a tool error). ResNet-50 fp16
#    training at batch 1, 30 s. Predicted: under 0.3 GB a second (the growth is nvjet's hazards).
#    If its largest process stays under 16 GB, the fp16 training cells with it (K, one at a time,
#    150 s each); otherwise the same probe with one worker, and no cells.
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-565}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $O/f $O/r
timeout $(lim 60) $B/tests/test_gpu \
  --gtest_filter='GpuTrain.BatchNormReluFused*:GpuTrainStep.StemPoolFused*' >$O/f/tests.log 2>&1
echo "F tests rc=$? ${SECONDS}s"; grep -E "^\[ +(OK|FAILED) +\]|Failure" $O/f/tests.log | head -12
i=0
for v in 0 1 0 1; do
  i=$((i + 1))
  CNNBENCH_STEM_POOL_FUSED=$v timeout $(lim 60) $B/cnnbench_train_step --network=resnet50 \
    --precision=fp16 --batch=256 --stem=cnnbench --breakdown=$O/f/fused${v}_$i.json \
    >$O/f/fused${v}_$i.txt 2>&1
  echo "F fused=$v ($i) rc=$? ${SECONDS}s: $(head -n 1 $O/f/fused${v}_$i.txt)"
done
python3 tools/compare_breakdowns.py $O/f/fused0_1.json $O/f/fused1_2.json $O/f/fused0_3.json \
  $O/f/fused1_4.json --out-md $O/f/compare.md >/dev/null 2>&1 &&
  grep -E "maxpool|batchnorm\+relu|step" $O/f/compare.md
probe() {  # probe DIR TOOL_ARGS: ResNet-50 fp16 training under racecheck, nvjet unchecked, 30 s
  env TOOL_ARGS="$2" EXCLUDE_KERNELS="kns=nvjet" PRINT_LIMIT=1000 BATCH=1 JOBS=1 NETS=resnet50 \
    PRECISIONS=fp16 MODES=train TOOLS=racecheck RUN_TIMEOUT=30 BUDGET=45 \
    bash tools/sanitize_gpu.sh $O/r/$1 >$O/r/$1.log 2>&1
  awk '{print $8}' $O/r/$1/host_mem.log | sort -n | tail -1
}
rss=$(probe nvjet "")
echo "R nvjet excluded: largest resident ${rss} MiB; $(grep -E '^\| resnet50' $O/r/nvjet/summary.md | cut -c1-200)"
args=""
if [ -z "$rss" ] || ((rss >= 16384)); then
  args="--racecheck-num-workers 1"
  rss=$(probe nvjet1 "$args")
  echo "R nvjet excluded, one worker: largest resident ${rss} MiB; $(grep -E '^\| resnet50' $O/r/nvjet1/summary.md | cut -c1-200)"
  rss=99999999  # no cells: the growth was not nvjet's
fi
if ((rss < 16384)) && ((END - SECONDS > 100)); then
  env TOOL_ARGS="$args" EXCLUDE_KERNELS="kns=nvjet" PRINT_LIMIT=1000 BATCH=1 JOBS=1 \
    NETS="resnet50 efficientnet_b0 inception_bn inception_v3 resnet152" PRECISIONS=fp16 MODES=train \
    TOOLS=racecheck RUN_TIMEOUT=150 BUDGET=$((END - SECONDS - 10)) bash tools/sanitize_gpu.sh $O/r/k \
    >$O/r/k.log 2>&1
  echo "K rc=$? ${SECONDS}s"; grep -E "^\| [a-z]" $O/r/k/summary.md | grep -v "^| network" | cut -c1-200
  grep "^- host memory" $O/r/k/summary.md
fi
(cd $O && tar czf call142.tgz --remove-files f r)
echo "call142 end ${SECONDS}s"
