#!/usr/bin/env bash
# Device call 19, the first of 2026-12-04 (about 540 s).
# B: issue 3's last pair: PyTorch's EfficientNet-B5 at batch 256 (CUDA-graph replay, fp16,
#    channels_last) and ours, in the same call.
# A, in parallel, no timing: the GpuTrain suites with the vectorised BatchNorm kernels (and the
#    BatchNorm tests again on the scalar ones, CNNBENCH_SCALAR_BN=1); GpuTrainStep whole (the
#    learning tests' new settings, the BN+ReLU fusion).
# C: where the training step's time goes: cnnbench_train_step --breakdown, fp16 batch 256,
#    ResNet-50 heuristic with scalar then vectorised BatchNorm, ResNet-50 autotune, EfficientNet-B0
#    autotune.
# D, in what time is left: configs/mxnet_benchmark_score.yaml whole (the seed's sweep, fp32+fp16).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/b $O/c $O/d
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
PYTHONUNBUFFERED=1 timeout 90 python3 tools/pytorch_baseline.py --models efficientnet_b5 \
  --batches 256 --modes graph --reps 3 --out $O/b/zoo_pytorch.json >$O/b/zoo_pytorch.log 2>&1
echo "peer rc=$?"; grep -E "img/s" $O/b/zoo_pytorch.log | tail -3
timeout 120 $B/cnnbench --config=configs/zoo_speed.yaml \
  --benchmark_filter='^efficientnet_b5/fp16/graph/batch:256/' \
  --benchmark_out=$O/b/zoo_efficientnet_b5.json >$O/b/zoo_efficientnet_b5.log 2>&1
echo "ours rc=$?"; grep -E "median|ERROR" $O/b/zoo_efficientnet_b5.log | cut -c1-220
(cd $O && tar czf b.tgz --remove-files b)
date +%T
timeout 160 $B/tests/test_gpu --gtest_filter='GpuTrain.*' >$O/a/train_vec.log 2>&1 &
CNNBENCH_SCALAR_BN=1 timeout 160 $B/tests/test_gpu --gtest_filter='GpuTrain.BatchNorm*' \
  >$O/a/train_scalar.log 2>&1 &
timeout 180 $B/tests/test_gpu --gtest_filter='GpuTrainStep.*' >$O/a/train_step.log 2>&1 &
wait
for f in $O/a/*.log; do echo "== $(basename $f)"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|Expected|Which is|rel_l2|loss " $f | cut -c1-200 | head -24; done
(cd $O && tar czf a.tgz --remove-files a)
date +%T
for run in "resnet50 heuristic 1" "resnet50 heuristic 0" "resnet50 autotune 0" "efficientnet_b0 autotune 0"; do
  set -- $run
  CNNBENCH_SCALAR_BN=$3 timeout 110 $B/cnnbench_train_step --network=$1 --precision=fp16 --batch=256 \
    --engine=$2 --breakdown=$O/c/bd_$1_$2_s$3.json >$O/c/bd_$1_$2_s$3.log 2>&1
  echo "breakdown $run rc=$? $(date +%T)"; head -14 $O/c/bd_$1_$2_s$3.log | cut -c1-150
done
(cd $O && tar czf c.tgz --remove-files c)
date +%T
if ((SECONDS < 470)); then
  timeout $((560 - SECONDS)) $B/cnnbench --config=configs/mxnet_benchmark_score.yaml \
    --benchmark_out=$O/d/mxnet_score.json >$O/d/mxnet_score.log 2>&1
  echo "mxnet sweep rc=$? medians=$(grep -c manual_time_median $O/d/mxnet_score.log)"
fi
(cd $O && tar czf d.tgz --remove-files d)
date +%T
