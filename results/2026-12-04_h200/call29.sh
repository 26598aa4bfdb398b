#!/usr/bin/env bash
# Device call 29 (session of 2026-12-04, 15:55 UTC).
# A: the stale-error fix (GpuMemory.*), issue 6's kernels (GpuKernels.*: YOLO decode, NMS,
#    upsample into a slice) and the folded YOLOR at 64 px against the CPU interpreter.
# S: issue 5's table, exact this time: 8 and 16 GiB, 110 s a size.
# T: the training suites (GpuTrain*), the input now written on the device.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/s $O/t
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
summ() { grep -E '^\[  (PASSED|FAILED) |FAILED  \]|^\[==========\]' "$1" | tail -12 | tr '\n' ' '; }
timeout 60 $B/tests/test_gpu --gtest_filter='GpuMemory.*' >$O/a/memory.log 2>&1
echo "A1 rc=$? $(date +%T) $(summ $O/a/memory.log)"
timeout 90 $B/tests/test_gpu --gtest_filter='GpuKernels.*' >$O/a/kernels.log 2>&1
echo "A2 rc=$? $(date +%T) $(summ $O/a/kernels.log)"
timeout 60 $B/tests/test_gpu --gtest_filter='GpuNetwork.Yolor*' >$O/a/yolor.log 2>&1
echo "A3 rc=$? $(date +%T) $(summ $O/a/yolor.log)"
SIZES="8 16" LIMIT_S=110 bash tools/max_batch_sweep.sh configs/max_batch.yaml $O/s 2>&1 | tail -20
echo "S $(date +%T)"
timeout 170 $B/tests/test_gpu --gtest_filter='GpuTrain*' >$O/t/train.log 2>&1
echo "T rc=$? $(date +%T) $(summ $O/t/train.log)"
(cd $O && tar czf a.tgz --remove-files a && tar czf s.tgz --remove-files s && tar czf t.tgz --remove-files t)
