#!/usr/bin/env bash
# Device call 21, the session's last (about 440 s of the 521 s left).
# A, in parallel, no timing: why fp16 steps are skipped in the sweep (cnnbench_train_step
#    --check_finite: the first steps' loss, loss scale and non-finite gradients) for ResNet-50 at
#    224 px / 1000 classes and at 64 px / 10 classes, and EfficientNet-B0 at 224; the rewritten
#    fused-BatchNorm and half-precision tests.
# B: the fp16 training sweep of ResNet-50 and EfficientNet-B0 at 32, 64, 256 (3 repetitions).
# C: PyTorch's fp16 training step (eager and graph) beside it, and the comparison table.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
for c in "resnet50 224 1000" "resnet50 64 10" "efficientnet_b0 224 1000"; do
  set -- $c
  timeout 60 $B/cnnbench_train_step --network=$1 --input_size=$2 --num_classes=$3 --precision=fp16 \
    --batch=32 --breakdown=/tmp/bd_$1_$2.json --check_finite=4 --lr=0.1 --momentum=0.9 \
    >$O/a/check_$1_$2.log 2>&1 &
done
timeout 80 $B/tests/test_gpu --gtest_filter='GpuTrainStep.Fused*:GpuTrainStep.HalfPrecision*' \
  >$O/a/tests.log 2>&1 &
wait
for f in $O/a/check_*.log; do echo "== $(basename $f)"; cut -c1-330 $f | tail -6; done
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|Expected|of its bound" $O/a/tests.log | cut -c1-200 | head -16
(cd $O && tar czf a.tgz --remove-files a)
date +%T
timeout 170 $B/cnnbench --config=configs/train.yaml --benchmark_filter='/fp16/' \
  --benchmark_repetitions=3 --benchmark_out=$O/b/train.json >$O/b/train.log 2>&1
echo "train sweep rc=$? $(date +%T)"
grep -E "ERROR OCCURRED|manual_time_median" $O/b/train.log | cut -c1-200 | sort -u | head -10
L=$((455 - SECONDS)); ((L > 170)) && L=170
PYTHONUNBUFFERED=1 timeout $L python3 tools/pytorch_train_baseline.py --models resnet50,efficientnet_b0 \
  --batches 32,64,256 --modes eager,graph --precision fp16 --out $O/b/pytorch_train.json \
  >$O/b/pytorch_train.log 2>&1
echo "train peer rc=$? $(date +%T)"
python3 tools/compare_train.py --cnnbench $O/b/train.json --pytorch $O/b/pytorch_train.json \
  --out-md $O/b/compare_train_fp16.md --check | head -24
(cd $O && tar czf b.tgz --remove-files b)
