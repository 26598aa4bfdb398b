#!/usr/bin/env bash
# Device call 18, the session's last (about 580 s).
# A, in parallel, no timing: GpuTrainStep.HalfPrecisionGradientsFollowFp32 with its TF32 yardstick;
# one SGD step of ResNet-50 and of VGG-16-BN (dropout 0 on both sides) against PyTorch in fp32 AND
# fp64 (tools/train_step_crosscheck.py --fp64): is our fp32 step as near the exact step as
# PyTorch's fp32 step is?
# P: PyTorch's CUDA-graph replay of EfficientNet-B0..B7, fp16 channels_last, at 1, 8, 32, 128, 256.
# Z: ours where call 17 was cut off: B4 and B5 at 128 and 256, B6 and B7 at all five batches.
# X, in what time is left: cnnbench --gemm_ceiling, the README's ncu command on one layer, and
# cnnbench_infer --breakdown on ResNet-50.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/p
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
date +%T
timeout 100 $B/tests/test_gpu --gtest_filter='GpuTrainStep.HalfPrecision*' >$O/a/half.log 2>&1 &
for n in resnet50 vgg16_bn; do
  timeout 100 python3 tools/train_step_crosscheck.py --binary $B/cnnbench_train_step --network $n \
    --batch 8 --fp64 --workdir /tmp/tc_$n --worst 25 --out $O/a/train_cross_$n.json \
    >$O/a/train_cross_$n.log 2>&1 &
done
wait
grep -E "^\[  (PASSED|FAILED) |Failure|Expected|actual|rel_l2 vs fp32|loss" $O/a/half.log | cut -c1-200 | head -40
for n in resnet50 vgg16_bn; do echo "== $n"; grep -vE "^\s+written|^running" $O/a/train_cross_$n.log | cut -c1-200 | head -45; done
(cd $O && tar czf a.tgz --remove-files a)
date +%T
PYTHONUNBUFFERED=1 timeout 170 python3 tools/pytorch_baseline.py --models $(echo efficientnet_b{0..7} | tr ' ' ,) \
  --batches 1,8,32,128,256 --modes graph --reps 3 --out $O/p/zoo_pytorch.json >$O/p/zoo_pytorch.log 2>&1
echo "peer rc=$? rows=$(grep -c img/s $O/p/zoo_pytorch.log) $(date +%T)"
(cd $O && tar czf p.tgz --remove-files p)
OUT=$O/z SESSION_BUDGET=$((530 - SECONDS)) ZOO_NETS="efficientnet_b4 efficientnet_b5" ZOO_BATCHES="(128|256)" \
  ZOO_NET_TIMEOUT=45 bash tools/device_session.sh zoo_sweep
OUT=$O/y SESSION_BUDGET=$((545 - SECONDS)) ZOO_NETS="efficientnet_b6 efficientnet_b7" ZOO_NET_TIMEOUT=150 \
  bash tools/device_session.sh zoo_sweep
date +%T
mkdir -p $O/x
if ((SECONDS < 540)); then
  timeout $((575 - SECONDS)) $B/cnnbench --gemm_ceiling --benchmark_filter=^gemm/ --benchmark_out=$O/x/gemm.json >$O/x/gemm.log 2>&1
  echo "gemm rc=$?"; grep -E "ceiling.*median|ERROR" $O/x/gemm.log | cut -c1-200
fi
if ((SECONDS < 545)); then
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout $((590 - SECONDS)) $NCU --profile-from-start off --nvtx --nvtx-include "cnnbench@layer3.0.conv2/" \
    $B/cnnbench --config=configs/resnet50_fp16.yaml --eager --profile=1 \
    --benchmark_filter='resnet50/fp16/eager/batch:32/' --benchmark_repetitions=1 >$O/x/ncu.log 2>&1
  echo "ncu rc=$?"; grep -E "==PROF==|Duration|Compute \(SM\) Throughput|^  [a-z_].*\(|Memory Throughput" $O/x/ncu.log | cut -c1-160 | head -14
fi
if ((SECONDS < 565)); then
  timeout $((590 - SECONDS)) $B/cnnbench_infer --network=resnet50 --precision=fp16 --batch=32 \
    --output=/tmp/l.safetensors --breakdown=$O/x/breakdown.json >$O/x/breakdown.log 2>&1
  echo "breakdown rc=$?"; tail -6 $O/x/breakdown.log | cut -c1-200
fi
(cd $O && tar czf x.tgz --remove-files x)
