#!/usr/bin/env bash
# Device call 7 (from the repository root on the GPU machine): issue 2 on the new schedule (the
# default sweep with PyTorch eager and graph replay beside it, then GpuOps, GpuKernels and
# GpuNetwork alone on the GPU, since one test checks device memory back to its baseline), and
# first runs of the training suites (GpuTrain, GpuTrainBackward, GpuTrainStep) beside the kernel
# suites of patches/se_three_kernels.patch.
set -u
O=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
mkdir -p $O/x
s=tools/device_session.sh
OUT=$O/x/s SESSION_BUDGET=350 SWEEP_TIMEOUT=265 PEER_TIMEOUT=80 bash $s sweep peer
summ() { echo "--- $1: $(grep -E '^\[  (PASSED|FAILED) ' $2 | tr '\n' ' ')"
  grep -E "Failure|Which is|differs|Expected|actual|^\[  FAILED  \].*\(|banned|loss" $2 | cut -c1-240 | head -${3:-14}; }
timeout 110 build/release/tests/test_gpu --gtest_filter='GpuTrain*' >$O/x/train_tests.log 2>&1 &
timeout 110 .carry/patched/test_gpu --gtest_filter='GpuKernels.*:GpuOps.*:GpuNetwork.MixedOps*' \
  >$O/x/patched_tests.log 2>&1 &
wait
summ train $O/x/train_tests.log 40; summ patched $O/x/patched_tests.log
timeout 75 build/release/tests/test_gpu --gtest_filter='GpuOps.*:GpuKernels.*:GpuNetwork.*' \
  >$O/x/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; summ issue2 $O/x/gpu_tests.log 20
cd $O && tar czf call7.tgz x && rm -rf x
