#!/usr/bin/env bash
# Device call 43 (written 2026-12-04 late evening, not yet run: the device was paused that
# session). Issue 11 on the one-GPU machine: everything of data-parallel training that one GPU
# can show (NCCL runs a world of one rank).
# T: the training suites again (TrainModel now places parameter gradients together, in the order
#    the backward writes them, and has forward_backward/update: GpuTrain* must still pass).
# V: tests/dp_verify_test.sh: cnnbench_dp --verify on ResNet-50 (BatchNorm: against the mean of
#    the slices' one-GPU gradients) and AlexNet (no BatchNorm: also against one GPU's step on the
#    whole batch), then a short timing run whose JSON must hold the scaling figures.
# B: the timing on one GPU: the data-parallel step against the step alone (what a world of one
#    costs: NCCL's in-place all-reduce of every bucket), ResNet-50 and EfficientNet-B0, fp16,
#    batch 64 and 256 per GPU, overlap on and off at 256.
# Carry: build/release/cnnbench_dp, build/release/cnnbench_launch, build/release/tests/test_gpu,
#        .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/t $O/v $O/b
NCCL_LIB=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$NCCL_LIB:/usr/local/cuda/lib64:$PWD/.carry/lib
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
ls /usr/local/cuda/lib64/libnccl* $NCCL_LIB 2>&1 | head -4
ldd $B/cnnbench_dp | grep -E "nccl|cudnn|not found"
date +%T
timeout 130 $B/tests/test_gpu --gtest_filter='GpuTrain*' >$O/t/tests.log 2>&1
echo "T rc=$? $(date +%T)"; grep -E "PASSED|FAILED|Failure" $O/t/tests.log | head -12
(cd $O && tar czf t.tgz --remove-files t)
timeout 160 bash tests/dp_verify_test.sh $B/cnnbench_launch $B/cnnbench_dp $O/v >$O/v/test.log 2>&1
echo "V rc=$? $(date +%T)"; grep -vE "^NCCL INFO" $O/v/test.log | tail -n 12
(cd $O && tar czf v.tgz --remove-files v)
for net in resnet50 efficientnet_b0; do
  left=$((585 - SECONDS)); [ $left -gt 150 ] && left=150; [ $left -lt 10 ] && break
  timeout $left $B/cnnbench_launch --nproc=1 -- $B/cnnbench_dp --network=$net --batches=64,256 \
    --precision=fp16 --steps=10 --repetitions=5 --json=$O/b/${net}_g1.json >$O/b/$net.log 2>&1
  echo "B $net rc=$? $(date +%T)"; tail -n 3 $O/b/$net.log
  left=$((585 - SECONDS)); [ $left -gt 60 ] && left=60; [ $left -lt 10 ] && break
  timeout $left $B/cnnbench_launch --nproc=1 -- $B/cnnbench_dp --network=$net --batches=256 \
    --precision=fp16 --steps=10 --repetitions=5 --overlap=0 --json=$O/b/${net}_g1_serial.json \
    >$O/b/${net}_serial.log 2>&1
  echo "B $net serial rc=$? $(date +%T)"; tail -n 2 $O/b/${net}_serial.log
done
(cd $O && tar czf b.tgz --remove-files b)
