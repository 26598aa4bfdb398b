#!/usr/bin/env bash
# Device call 86 (written 2026-12-05 23:40 UTC; ran 23:43 on an H100) and call 87 (STEPS="G B A"
# with CALL87=1: the fixed kernels' tests, then the two breakdowns as built, then A): issue 9, the
# BatchNorm backward with two rows in flight a thread, first run on a GPU. Binaries of the commit
# that adds it; carry .carry.
# Why (call 81's breakdown, H100): the fused backward forms ran at 31 to 62% of the bandwidth
# (ResNet-50: "bwd batchnorm+relu" 6.58 ms, "bwd batchnorm+relu+add" 9.86 ms), the plain form at
# 77 to 97%. ptxas: the ReLU and SiLU forms hold 92 to 96 registers (2 blocks of 256 an SM), the
# plain one 56 to 69 (3 to 4 blocks): half the loads in flight. Now each thread loads two rows
# before using either (the same bits), the mask's source is a template parameter (fewer
# registers), and the mask from x is a compare instead of a round trip through fp16.
# G: the GPU tests that cover it and what changed since call 81 (activate's SiLU in GpuOps and
#    GpuNetwork): GpuTrain (with the new BatchNormBackwardRowsInFlightChangeNoBit), GpuTrainStep,
#    GpuOps, GpuNetwork, GpuKernels, in ctest's shards, 3 at a time.
# B: the fp16 step at 256 by launch kind (heuristic engines), A/B in the same call:
#    ResNet-50 as built; CNNBENCH_BN_BWD_ONE_ROW=1; --bn_mask_from_input=0;
#    EfficientNet-B0 as built; CNNBENCH_BN_BWD_ONE_ROW=1.
#    Predicted: "backward batchnorm+relu" 6.6 -> about 4.2 ms and "backward batchnorm+add+relu"
#    9.9 -> about 7.0 ms (75 to 85% of the bandwidth at layer1 to layer3's shapes; layer4's small
#    ones stay near 40%); ResNet-50's step about 5 ms less (46.8 -> about 42 ms); EfficientNet-B0's
#    "backward batchnorm+silu" 7.6 -> about 6.0 ms.
# A: ResNet-50's step autotuned, by launch kind (what call 83's target row ran), to set beside
#    call 83's 46.1 ms (the 0.4 ms that moved where the heuristic breakdown's pieces said 5).
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-560}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
step_G() {
  timeout $(lim 200) ctest --test-dir $B -R "^gpu_(${SUITES:-GpuTrain|GpuTrainStep|GpuOps|GpuNetwork|GpuKernels})(_[0-9])?\$" \
    -j3 --output-on-failure >$O/g/ctest.log 2>&1
  echo "G rc=$? ${SECONDS}s"; grep -E "Test +#|tests passed|FAILED|Failure" $O/g/ctest.log | head -30
}
bd() {
  local name=$1 net=$2 a vars=() flags=()
  shift 2
  for a in "$@"; do case $a in --*) flags+=("$a") ;; *) vars+=("$a") ;; esac; done
  env "${vars[@]}" timeout $(lim 120) $B/cnnbench_train_step --network=$net --precision=fp16 \
    --batch=256 --breakdown=$O/b/$name.json "${flags[@]}" >$O/b/$name.txt 2>&1
  echo "B $name rc=$? ${SECONDS}s"; head -n 1 $O/b/$name.txt
  grep -E "^  (backward|forward) batchnorm" $O/b/$name.txt | head -8
}
step_B() {
  if [ "${CALL87:-0}" = 1 ]; then  # one row, the mask's source a template: as built
    bd r50 resnet50
    bd b0 efficientnet_b0
    return
  fi
  bd r50 resnet50
  bd r50_one_row resnet50 CNNBENCH_BN_BWD_ONE_ROW=1
  bd b0 efficientnet_b0
  bd b0_one_row efficientnet_b0 CNNBENCH_BN_BWD_ONE_ROW=1
  bd r50_mask_from_y resnet50 --bn_mask_from_input=0
}
step_A() {
  mkdir -p $O/b
  timeout $(lim 200) $B/cnnbench_train_step --network=resnet50 --precision=fp16 --batch=256 \
    --engine=autotune --breakdown=$O/b/r50_autotune.json >$O/b/r50_autotune.txt 2>&1
  echo "A rc=$? ${SECONDS}s"; head -n 20 $O/b/r50_autotune.txt
}
for s in ${STEPS:-G B A}; do
  d=$(echo $s | tr A-Z a-z)
  mkdir -p $O/$d
  ((END - SECONDS > 20)) && step_$s
done
(cd $O && tar czf call86.tgz --remove-files g b a 2>/dev/null)
echo "end ${SECONDS}s"
