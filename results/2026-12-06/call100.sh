#!/usr/bin/env bash
# Device call 100 (written 2026-12-06 04:25 UTC): the first call of the next session, about 420 s.
# Carry .carry (bins.txz built at c89e58d). Never run yet.
# On an H200: G, then call80.sh's P (the two training targets beside PyTorch's eager AMP step; the
#    ResNet-50 target, 8,000 img/s, is the H200's: the cost model puts it near 8,600 at the H100's
#    pace of call 96, whose step was 40.28 ms).
# On an H100:
# G: GpuTrain and GpuTrainStep at the new defaults: the BatchNorm passes' rows a lane (8, 16) and
#    the stem pool backward taking a pack a word at a time (places a nibble a window). Neither has
#    run on a GPU in this form (the knobs' (8, 16) ran GpuTrain.BatchNorm* in call 95).
# A: call90.sh's A with RUNS: the defaults, then (16, 32) with CNNBENCH_MAXPOOL_ONE_LOAD=1.
#    Predicted: the step at the defaults about 40.0 ms (call 95's 40,248.7 us at (8, 16), less the
#    stem pool's gain); "backward maxpool" 893 -> 600 to 700 us with R = 5 if the kernel was
#    issue-bound as its instruction count says (a third fewer instructions, the per-channel
#    compares gone), 1,066 -> about 850 at R = 1. (16, 32): within 0.2 ms of (8, 16) (layer4's
#    stages already take 8 rows a lane there).
# S: issue 10's two incomplete synccheck rows (calls 93 to 99) with the barrier ladder:
#    EfficientNet-B0 fp16 inference (overflowed at 4,096 and 16,384; now up to 32,768) and
#    Inception-v3 fp32 inference alone (lost 5 launches to the tool's memory beside another run).
#    Predicted: 0 errors; EfficientNet-B0 may run the tool out of memory at 32,768 as ResNet-50
#    did at 65,536.
set -u
O=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
(cd $O && mkdir -p g && timeout 150 ctest --test-dir $OLDPWD/build/release \
  -R '^gpu_(GpuTrain|GpuTrainStep)(_[0-9])?$' -j3 --output-on-failure >g/ctest.log 2>&1
 echo "G rc=$? ${SECONDS}s"; grep -E "tests passed|FAILED|Failure" g/ctest.log | head; tar czf g.tgz --remove-files g)
if [[ $NAME == *H200* ]]; then
  STEPS=P BUDGET=$((440 - SECONDS)) bash results/2026-12-05_h100/call80.sh
  echo "call100 end ${SECONDS}s"
  exit 0
fi
RUNS="r50_defaults 8 16 0; r50_a16_s32 16 32 1" STEPS=A BUDGET=$((350 - SECONDS)) \
  bash results/2026-12-06/call90.sh
T=$((430 - SECONDS))
if ((T > 40)); then
  mkdir -p $O/s
  NETS=efficientnet_b0 PRECISIONS=fp16 MODES=infer TOOLS=synccheck BLOCKING=1 RUN_TIMEOUT=60 \
    BUDGET=$((T / 2 + 10)) bash tools/sanitize_gpu.sh $O/s/effb0 >$O/s/effb0.log 2>&1
  NETS=inception_v3 PRECISIONS=fp32 MODES=infer TOOLS=synccheck BLOCKING=1 RUN_TIMEOUT=60 \
    BUDGET=$((430 - SECONDS)) bash tools/sanitize_gpu.sh $O/s/incv3 >$O/s/incv3.log 2>&1
  grep -hE "^\| [a-z]" $O/s/*/summary.md | grep -v "^| network"
  (cd $O && tar czf s.tgz --remove-files s)
fi
echo "call100 end ${SECONDS}s"
