#!/usr/bin/env bash
# Device call 20 (about 560 s): the fused BatchNorm (+residual) (+ReLU/SiLU) training kernels, the
# vectorised max-pool, global-average-pool and scale kernels.
# A, in parallel, no timing: GpuTrain (the kernels against references), GpuTrainStep (fused against
#    unfused, the learning tests), GpuOps/GpuNetwork (inference uses the new pooling kernels), and
#    the zoo's suites for ResNet-50 and EfficientNet-B0.
# B: breakdowns of the fp16 step at batch 256: ResNet-50 autotune (16-byte BN packs, then 8-byte),
#    EfficientNet-B0 autotune.
# C: the fp16 training sweep of ResNet-50 and EfficientNet-B0 at 32, 64, 256 (configs/train.yaml).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/b $O/c
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 170 $B/tests/test_gpu --gtest_filter='GpuTrain.*' >$O/a/train.log 2>&1 &
timeout 170 $B/tests/test_gpu --gtest_filter='GpuTrainStep.*' >$O/a/train_step.log 2>&1 &
timeout 170 $B/tests/test_gpu --gtest_filter='GpuOps.*:GpuNetwork.*:GpuKernels.*' >$O/a/ops.log 2>&1 &
timeout 170 $B/tests/test_gpu --gtest_filter='Zoo/GpuZoo.*/resnet50:Zoo/GpuZoo.*/efficientnet_b0' >$O/a/zoo.log 2>&1 &
wait
for f in $O/a/*.log; do echo "== $(basename $f)"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|Expected|Which is|rel_l2|: loss " $f | cut -c1-220 | head -20; done
(cd $O && tar czf a.tgz --remove-files a)
date +%T
for run in "resnet50 autotune 16" "resnet50 heuristic 8" "efficientnet_b0 autotune 16"; do
  set -- $run
  CNNBENCH_BN_PACK=$3 timeout 100 $B/cnnbench_train_step --network=$1 --precision=fp16 --batch=256 \
    --engine=$2 --breakdown=$O/b/bd_$1_p$3.json >$O/b/bd_$1_p$3.log 2>&1
  echo "breakdown $run rc=$? $(date +%T)"; head -16 $O/b/bd_$1_p$3.log | cut -c1-150
done
(cd $O && tar czf b.tgz --remove-files b)
date +%T
timeout $((585 - SECONDS)) $B/cnnbench --config=configs/train.yaml --benchmark_filter='/fp16/' \
  --benchmark_out=$O/c/train.json >$O/c/train.log 2>&1
echo "train sweep rc=$? $(date +%T)"
grep -E "ERROR OCCURRED|manual_time_median" $O/c/train.log | cut -c1-300 | head -12
(cd $O && tar czf c.tgz --remove-files c)
