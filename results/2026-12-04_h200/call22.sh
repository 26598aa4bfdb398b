#!/usr/bin/env bash
# Device call 22 (session of 2026-12-04 afternoon, first call, about 480 s).
# A, in parallel, no timing: the training-step suites after stop 20's two fixes (forward convs
#    bound to the capture stream; no persistent buffers for fused BatchNorm values).
# B: issue 4's table: the fp16 training sweep of ResNet-50 and EfficientNet-B0 at 32, 64, 256
#    (3 repetitions), then PyTorch's fp16 training step (eager and graph) and the comparison.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 170 $B/tests/test_gpu --gtest_filter='GpuTrainStep.*' >$O/a/train_step.log 2>&1 &
timeout 120 $B/tests/test_gpu --gtest_filter='GpuTrain.*:GpuTrainBackward.*' >$O/a/train_ops.log 2>&1 &
wait
for f in $O/a/*.log; do echo "== $(basename $f)"
  grep -E "^\[       OK|^\[  FAILED|Failure|Expected|bound|first loss" $f | cut -c1-200 | head -40; done
(cd $O && tar czf a.tgz --remove-files a)
date +%T
timeout 175 $B/cnnbench --config=configs/train.yaml --benchmark_filter='/fp16/' \
  --benchmark_repetitions=3 --benchmark_out=$O/b/train.json >$O/b/train.log 2>&1
echo "train sweep rc=$? $(date +%T)"
grep -E "ERROR OCCURRED|manual_time_median" $O/b/train.log | cut -c1-220 | sort -u | head -10
L=$((500 - SECONDS)); ((L > 175)) && L=175
PYTHONUNBUFFERED=1 timeout $L python3 tools/pytorch_train_baseline.py --models resnet50,efficientnet_b0 \
  --batches 32,64,256 --modes eager,graph --precision fp16 --out $O/b/pytorch_train.json \
  >$O/b/pytorch_train.log 2>&1
echo "train peer rc=$? $(date +%T)"
python3 tools/compare_train.py --cnnbench $O/b/train.json --pytorch $O/b/pytorch_train.json \
  --out-md $O/b/compare_train_fp16.md --check | head -24
(cd $O && tar czf b.tgz --remove-files b)
