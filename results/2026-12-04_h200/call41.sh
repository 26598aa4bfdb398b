#!/usr/bin/env bash
# Device call 41 (session of 2026-12-04, evening 2). Issue 6's training step after call 40 (its
# bias and scale reductions ran on a handful of blocks: minutes per iteration; the test's runs
# differed by a nondeterministic engine).
# K: the trainer's GPU tests (deterministic engines, finite differences at the largest gradients).
# B: the training iteration at 256 px, tf32 batch 8 and 16, fp32 batch 8.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/k $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
date +%T
timeout 100 $B/tests/test_gpu --gtest_filter='GpuStyleganTrain.*' >$O/k/tests.log 2>&1
echo "K rc=$? $(date +%T)"; grep -E "^  [A-Z]|OK \]|FAILED \]|Failure" $O/k/tests.log | head -20
(cd $O && tar czf k.tgz --remove-files k)
timeout 150 $B/cnnbench_stylegan_train --batches=8,16 --precision=tf32 --iters=16 --warmup=4 \
  --json=$O/b/ours_tf32.json >$O/b/ours_tf32.log 2>&1
echo "B tf32 rc=$? $(date +%T)"; tail -n 4 $O/b/ours_tf32.log
timeout 80 $B/cnnbench_stylegan_train --batches=8 --precision=fp32 --iters=16 --warmup=4 \
  --json=$O/b/ours_fp32.json >$O/b/ours_fp32.log 2>&1
echo "B fp32 rc=$? $(date +%T)"; tail -n 3 $O/b/ours_fp32.log
(cd $O && tar czf b.tgz --remove-files b)
