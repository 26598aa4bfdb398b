#!/usr/bin/env bash
# Device call 42 (written 2026-12-04 evening, not yet run: the session's device time was spent).
# Issue 6: StyleGAN3-T's training step at 256 px.
# K: the trainer's GPU tests (finite differences at each tensor's largest gradient: not yet run).
# C: every gradient of Gmain, Dmain and Dreg against PyTorch autograd (R1 with create_graph), on
#    the same weights and inputs, batch 4 (one mbstd group), fp32 and tf32.
# B: the training iteration (NVlabs': Gmain + Adam, Dmain + Adam, Dreg + Adam every 16th, G_ema),
#    ours at tf32 batch 4 / 8 / 16, then the PyTorch peer at tf32.
# C8: batch 8 (two mbstd groups) in fp32 against the reference too.
# Carry: build/release/cnnbench_stylegan_train, build/release/tests/test_gpu, .carry
# Then, here: python3 tools/sg_train_table.py --ours call42/b/ours_tf32.json
#   --pytorch call42/b/pytorch_tf32.json --out issue6_train.md
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/k $O/c $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 80 $B/tests/test_gpu --gtest_filter='GpuStyleganTrain.*' >$O/k/tests.log 2>&1
echo "K rc=$? $(date +%T)"; grep -E "^  [A-Z]|OK \]|FAILED \]|Failure" $O/k/tests.log | head -20
(cd $O && tar czf k.tgz --remove-files k)
timeout 90 $PYTHON tools/stylegan3_train_reference.py write-case --dir $O/c/case --resolution 256 \
  --batch 4 --seed 3 --device cuda >$O/c/write.log 2>&1
echo "C write rc=$? $(date +%T)"; tail -n 4 $O/c/write.log
for p in fp32 tf32; do
  timeout 100 $B/cnnbench_stylegan_train --check=$O/c/case --output=$O/c/ours_$p.safetensors \
    --precision=$p >$O/c/ours_$p.log 2>&1
  echo "C ours $p rc=$? $(date +%T)"; tail -n 2 $O/c/ours_$p.log
  tol=1e-3; [ $p = tf32 ] && tol=3e-2
  timeout 60 $PYTHON tools/stylegan3_train_reference.py compare --reference $O/c/case/reference.safetensors \
    --ours $O/c/ours_$p.safetensors --tolerance $tol >$O/c/compare_$p.log 2>&1
  echo "C compare $p rc=$?"; grep -iE "worst|fail|missing|pass" $O/c/compare_$p.log | head -12
done
rm -f $O/c/case/*.safetensors $O/c/*.safetensors
# Batch 8: two mbstd groups (batch 4 has one), fp32 only.
timeout 90 $PYTHON tools/stylegan3_train_reference.py write-case --dir $O/c/case8 --resolution 256 \
  --batch 8 --seed 5 --device cuda >$O/c/write8.log 2>&1
echo "C8 write rc=$? $(date +%T)"; tail -n 2 $O/c/write8.log
timeout 100 $B/cnnbench_stylegan_train --check=$O/c/case8 --output=$O/c/ours8.safetensors \
  --precision=fp32 >$O/c/ours8.log 2>&1
echo "C8 ours rc=$?"; tail -n 1 $O/c/ours8.log
timeout 60 $PYTHON tools/stylegan3_train_reference.py compare --reference $O/c/case8/reference.safetensors \
  --ours $O/c/ours8.safetensors --tolerance 1e-3 >$O/c/compare8.log 2>&1
echo "C8 compare rc=$?"; grep -iE "worst|fail|missing|pass" $O/c/compare8.log | head -8
rm -f $O/c/case8/*.safetensors $O/c/*.safetensors
(cd $O && tar czf c.tgz --remove-files c)
timeout 200 $B/cnnbench_stylegan_train --batches=4,8,16 --precision=tf32 --iters=16 --warmup=2 \
  --repetitions=2 --json=$O/b/ours_tf32.json >$O/b/ours_tf32.log 2>&1
echo "B ours tf32 rc=$? $(date +%T)"; tail -n 9 $O/b/ours_tf32.log
timeout $((585 - SECONDS)) $PYTHON tools/stylegan3_train_reference.py bench --resolution 256 \
  --batches 4,8,16 --precision tf32 --iters 16 --warmup-iters 2 --out $O/b/pytorch_tf32.json \
  >$O/b/pytorch.log 2>&1
echo "B pytorch rc=$? $(date +%T)"; tail -n 5 $O/b/pytorch.log
(cd $O && tar czf b.tgz --remove-files b)
