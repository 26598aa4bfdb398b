#!/usr/bin/env bash
# Device call 12 (from the repository root on the GPU machine): correctness of everything written
# after call 11, no timing. The kernel, op and network suites, all of GpuTrain* (mixed precision,
# Adam, the memory plan, EfficientNet's training ops, the learning tests) and three EfficientNet
# zoo suites in parallel; one fp32 SGD step of ResNet-50 against PyTorch's; then GpuMemory alone
# on the GPU (a forced out-of-memory, the peak against cudaMemGetInfo, the cap).
set -u
O=${OUT:-/tmp/out}
s=tools/device_session.sh
OUT=$O/c SESSION_BUDGET=230 CHECKS_ZOO="efficientnet_b0 efficientnet_b4 efficientnet_b7" \
  CHECKS_CROSS=0 DIAG_MODE=none bash $s checks
OUT=$O/t SESSION_BUDGET=160 bash $s train_cross
mkdir -p $O/m
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
timeout 130 build/release/tests/test_gpu --gtest_filter='GpuMemory.*' >$O/m/gpu_memory.log 2>&1
echo "GpuMemory rc=$?"
grep -E "Failure|Which is|Expected|^\[  (PASSED|FAILED|       OK) |MiB" $O/m/gpu_memory.log | cut -c1-240 | head -40
