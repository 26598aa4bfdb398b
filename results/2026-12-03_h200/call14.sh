#!/usr/bin/env bash
# Device call 14 (from the repository root on the GPU machine), after call 12's failures were
# fixed: the SE test's stream, the fp16 stem's weight gradient (padded to 8 channels), the zoo's
# conv biases (drawn with their layer's fan-in) and learning rates, the finite-difference step,
# the out-of-memory test's warm-up. In parallel: the GPU suites that failed or were not reached,
# and ResNet-50's SGD step against PyTorch's with and without the memory plan (every parameter
# listed). Then alone: the ResNet-50 memory-baseline test and GpuMemory. Then fp16 training of
# ResNet-50 and EfficientNet-B0 at 32, 64, 256 beside PyTorch's AMP step, eager and graph.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/c
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
summ() { echo "--- $(basename $1): $(grep -E '^\[  (PASSED|FAILED) ' $1 | tr '\n' ' ')"
  grep -E "Failure|Which is|differs|Expected|actual|^\[  FAILED  \].*\(" $1 | cut -c1-240 | head -12; }
timeout 200 $B/tests/test_gpu --gtest_filter='GpuTrainStep.*' >$O/c/train_step.log 2>&1 &
timeout 200 $B/tests/test_gpu --gtest_filter='GpuKernels.*:GpuTrainBackward.*:GpuTrain.*' \
  >$O/c/kernels.log 2>&1 &
for r in 1 0; do
  timeout 150 python3 tools/train_step_crosscheck.py --binary $B/cnnbench_train_step --network resnet50 \
    --batch 8 --workdir /tmp/tc$r --worst 300 --extra="--reuse_memory=$r" \
    --out $O/c/train_cross_reuse$r.json >$O/c/train_cross_reuse$r.log 2>&1 &
done
wait
for f in $O/c/train_step.log $O/c/kernels.log; do summ $f; done
grep -E "loss  |rel err|learn|->" $O/c/train_step.log | cut -c1-200 | head -20
grep -E "padded|stem" $O/c/kernels.log | cut -c1-200 | head -12
for r in 1 0; do echo "== train_cross reuse=$r"; grep -E "^(loss|grad norms|updated|PASS|FAIL)" $O/c/train_cross_reuse$r.log; done
timeout 60 $B/tests/test_gpu --gtest_filter='GpuNetwork.ResNet50Finite*' >$O/c/resnet50_memory.log 2>&1
summ $O/c/resnet50_memory.log
timeout 90 $B/tests/test_gpu --gtest_filter='GpuMemory.*' >$O/c/gpu_memory.log 2>&1
summ $O/c/gpu_memory.log; grep -E "MiB" $O/c/gpu_memory.log
OUT=$O/tr SESSION_BUDGET=330 TRAIN_TIMEOUT=200 TRAIN_PEER_TIMEOUT=120 \
  TRAIN_ARGS="--benchmark_filter=/fp16/" bash tools/device_session.sh train_sweep train_peer
