#!/usr/bin/env bash
# Device call 40 (session of 2026-12-04, evening 2). Issue 6: StyleGAN3-T's training step, first
# run on a GPU (the torch comparison is call 41's, once its tool is written).
# K: the new kernels' GPU tests (mbstd and its R1 forms, the Fourier input's backward) and the
#    trainer's own (identities and finite differences at 16 px).
# B: a first timing of the training iteration at 256 px (tf32, batch 8).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/k $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
summ() { grep -E '^\[  (PASSED|FAILED) |FAILED  \]|^\[==========\]' "$1" | tail -14 | tr '\n' ' '; }
timeout 150 $B/tests/test_gpu --gtest_filter='GpuMbstd.*:GpuFourierBackward.*:GpuStyleganTrain.*' >$O/k/tests.log 2>&1
echo "K rc=$? $(date +%T) $(summ $O/k/tests.log)"; grep -E "^  |Failure|what\(\)|error" $O/k/tests.log | head -30
(cd $O && tar czf k.tgz --remove-files k)
timeout 120 $B/cnnbench_stylegan_train --batches=8 --precision=tf32 --iters=16 --warmup=4 \
  --json=$O/b/ours_tf32.json 2>&1 | tail -n 5
echo "B ours tf32 rc=$? $(date +%T)"
(cd $O && tar czf b.tgz --remove-files b)
