#!/usr/bin/env bash
# Device call 53 (2026-12-05): the short form of call 49 for a session's last minutes: the GPU
# suites the day's changes touch (inference and training side by side), then one autotuned run
# with every lever on (padded stems, mode B, vectorised pools, staged slice convs) of ResNet-50
# fp16 at 1 and 256 and Inception-v3 at 256, against the recorded call 16 of 2026-12-03.
# Carry: build/release/cnnbench, build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/t $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
F='GpuOps.Pooling*:GpuOps.FusedConv*:GpuKernels.CopyChannelsAndPoolsIntoSlices:GpuKernels.Lrn*'
F="$F:GpuNetwork.MixedOpsNet*:GpuNetwork.YolorFolded*:Zoo/GpuZoo.*/inception_v3:Zoo/GpuZoo.*/resnet50"
timeout 150 $B/tests/test_gpu --gtest_filter='GpuTrainStep.*' >$O/t/train_step.log 2>&1 &
timeout 130 $B/tests/test_gpu --gtest_filter='GpuTrain.*:GpuTrainBackward.*' >$O/t/train_ops.log 2>&1 &
timeout 130 $B/tests/test_gpu --gtest_filter="$F" >$O/t/tests.log 2>&1
echo "T rc=$? $(date +%T)"; grep -E "FAILED \]|Failure" $O/t/tests.log | head -12; grep -cE "OK \]" $O/t/tests.log
wait
for f in $O/t/train_step.log $O/t/train_ops.log; do echo "== $(basename $f)"
  grep -E "FAILED \]|Failure|Expected" $f | cut -c1-200 | head -10; grep -cE "OK \]" $f; done
(cd $O && tar czf t.tgz --remove-files t)
timeout 150 $B/cnnbench --engine=autotune \
  --benchmark_filter='(resnet50/fp16/graph/batch:(1|256)|inception_v3/fp16/graph/batch:256)/' \
  --benchmark_repetitions=3 --benchmark_out=$O/b/levers.json >$O/b/levers.log 2>&1
echo "levers rc=$? $(date +%T)"; grep -E "ERROR|_median" $O/b/levers.log | cut -c1-150
(cd $O && tar czf b.tgz --remove-files b)
