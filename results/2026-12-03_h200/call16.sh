#!/usr/bin/env bash
# Device call 16 (from the repository root on the GPU machine, about 570 s).
# A, in parallel, no timing: the GPU suites of the code written after call 15 (GpuTrainStep with
# the BN+ReLU fusion and fp16 dW in the storage type; GpuNetwork's profile and breakdown tests;
# GpuKernels, GpuOps, GpuTrain, GpuTrainBackward) and the zoo's GpuZoo suite in 4 shards (the
# forward plans' replay check changed); then GpuMemory alone.
# B, alone: issue 3's speed table, first half: the ten networks that are not EfficientNets in fp16
# at batch 1, 8, 32, 128, 256 (ResNet-50 also 2, 4, 16, 64), each beside PyTorch's CUDA-graph
# replay in this same call.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
summ() { echo "--- $(basename $1): $(grep -E '^\[  (PASSED|FAILED) ' $1 | tr '\n' ' ')"
  grep -E "Failure|Which is|Expected|actual|exception|^\[  FAILED  \].*\(" $1 | cut -c1-240 | head -12; }
T=170
date +%T
timeout $T $B/tests/test_gpu --gtest_filter='GpuTrainStep.*' >$O/a/train_step.log 2>&1 &
timeout $T $B/tests/test_gpu --gtest_filter='GpuNetwork.*:GpuOps.*' >$O/a/network.log 2>&1 &
timeout $T $B/tests/test_gpu --gtest_filter='GpuKernels.*:GpuTrain.*:GpuTrainBackward.*' >$O/a/kernels.log 2>&1 &
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout $T $B/tests/test_gpu --gtest_filter='Zoo/GpuZoo.*' \
    >$O/a/zoo_$i.log 2>&1 &
done
wait
date +%T
timeout 60 $B/tests/test_gpu --gtest_filter='GpuMemory.*' >$O/a/memory.log 2>&1
for f in $O/a/*.log; do summ $f; done
grep -hE "non-finite|rel_l2 vs fp32|loss .* -> |fused|breakdown|profile" $O/a/train_step.log $O/a/network.log | cut -c1-200 | head -40
(cd $O && tar czf a.tgz --remove-files a)
date +%T
N="alexnet alexnet_lrn vgg16 vgg16_bn vgg19 vgg19_bn inception_bn inception_v3 resnet50 resnet152"
OUT=$O/z SESSION_BUDGET=$((560 - SECONDS)) ZOO_NETS="$N" ZOO_NET_TIMEOUT=60 ZOO_PEER_TIMEOUT=200 \
  bash tools/device_session.sh zoo_sweep zoo_peer
