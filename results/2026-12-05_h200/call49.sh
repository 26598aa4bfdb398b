#!/usr/bin/env bash
# Device call 49 (written 2026-12-05, not yet run): the GPU suites this session's changes touch,
# then call 47 (heuristics mode B off and on, with the vectorised average pool and the staged
# slice convs, on ResNet-50 at 1 and 256 and Inception-v3 at 256). About 7 minutes.
# T: pools (vectorised average, both pools into slices), LRN (vectorised), the mixed-ops net
#    under autotune (slice convs timed strided and staged, its 3-channel stem padded), and in the
#    zoo suite Inception-v3, Inception-BN, AlexNet-LRN and ResNet-50 (padded stems); the fused
#    conv cases (YOLOR's add after SiLU) and YOLOR against the CPU interpreter.
# Carry: build/release/cnnbench, build/release/tests/test_gpu, .carry
# (The training suites of call 51 run here too, beside the inference ones.)
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/t
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
F='GpuOps.Pooling*:GpuKernels.CopyChannelsAndPoolsIntoSlices:GpuKernels.Lrn*'
F="$F:GpuOps.FusedConv*:GpuNetwork.MixedOpsNet*:GpuNetwork.Yolor*:GpuNetwork.ResNet50Every*"
F="$F:Zoo/GpuZoo.*/inception*:Zoo/GpuZoo.*/alexnet_lrn:Zoo/GpuZoo.*/resnet50:Zoo/GpuZoo.*/yolor*"
# The training suites (the padded stem, the ReLU mask from the input) side by side.
timeout 170 $B/tests/test_gpu --gtest_filter='GpuTrainStep.*' >$O/t/train_step.log 2>&1 &
timeout 150 $B/tests/test_gpu --gtest_filter='GpuTrain.*:GpuTrainBackward.*' >$O/t/train_ops.log 2>&1 &
timeout 150 $B/tests/test_gpu --gtest_filter="$F" >$O/t/tests.log 2>&1
echo "T rc=$? $(date +%T)"; grep -E "FAILED \]|Failure" $O/t/tests.log | head -20
grep -cE "OK \]" $O/t/tests.log
wait
for f in $O/t/train_step.log $O/t/train_ops.log; do echo "== $(basename $f)"
  grep -E "FAILED \]|Failure|Expected" $f | cut -c1-200 | head -12; grep -cE "OK \]" $f; done
(cd $O && tar czf t.tgz --remove-files t)
bash results/2026-12-04_h200/call47.sh
