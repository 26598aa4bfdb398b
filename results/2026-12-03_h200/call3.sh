#!/usr/bin/env bash
# Device call for issue 2 (from the repository root on the GPU machine): the parallel plan
# builder's GPU test (the sweep falls back to --build_threads=1 if it fails), the default sweep
# (configs/default.yaml: ResNet-50 in fp16, bf16, tf32 and fp32 at nine batches) with the
# ban-and-rebuild repair, PyTorch eager and graph replay beside it, then the GPU suites of
# issue 2 (GpuOps, GpuKernels, GpuNetwork), then ResNet-152 at batch 32.
set -u
O=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
mkdir -p $O/x
timeout 45 build/release/tests/test_gpu --gtest_filter='GpuNetwork.Parallel*' >$O/x/parallel.log 2>&1
rc=$?
echo "parallel plan test rc=$rc"; grep -E "OK|FAILED|Failure" $O/x/parallel.log | head -5
[ $rc = 0 ] || export SWEEP_ARGS=--build_threads=1 ZOO_ARGS=--build_threads=1
s=tools/device_session.sh
OUT=$O/x/s SESSION_BUDGET=380 SWEEP_TIMEOUT=285 PEER_TIMEOUT=90 bash $s sweep peer
timeout 100 build/release/tests/test_gpu --gtest_filter='GpuOps.*:GpuKernels.*:GpuNetwork.*' \
  >$O/x/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure|Which is" $O/x/gpu_tests.log | head -12
OUT=$O/x/r SESSION_BUDGET=35 ZOO_NETS=resnet152 ZOO_BATCHES=32 ZOO_NET_TIMEOUT=35 bash $s zoo_sweep
cd $O && tar czf call.tgz x && rm -rf x
