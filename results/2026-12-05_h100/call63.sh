#!/usr/bin/env bash
# Device call 63 (written 2026-12-05): issue 8's `ctest -L gpu`, whole and timed, two suites at a
# time (-j2; the README's estimate for one at a time was 10 to 15 minutes).
# Carry: build/release/tests (35 MiB: test_gpu, test_cpu, the CTest files), build/release/cnnbench,
# build/release/cnnbench_dp, build/release/cnnbench_launch, build/release/CTestTestfile.cmake, .carry
# (the CTest files name /work/main, where the device's checkout is).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/c
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib:$PWD/.carry/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pwd
S=$SECONDS
timeout 570 ctest --test-dir build/release -L gpu -j${J:-2} --output-on-failure --timeout 560 >$O/c/ctest.log 2>&1
echo "ctest rc=$? $((SECONDS - S)) s"
grep -E "Test +#|tests passed|tests failed|Total Test time" $O/c/ctest.log | cut -c1-140
(cd $O && tar czf c.tgz --remove-files c)
