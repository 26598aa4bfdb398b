#!/usr/bin/env bash
# Device call 55 (2026-12-05): issue 6's two open questions from call 42.
# K: the trainer's GPU tests (the workspace limit halved where it does not fit is new).
# S: where batch 8's time goes (call 42: 250 ms an iteration at batch 4, 3,035 at 8, Gmain
#    158 -> 2,742 ms): --sections at 4 and 8 (heuristics, the conv workspace limit now 2 GiB).
# C: Gmain/Dmain/Dreg against PyTorch again, now also against float64 autograd (write-case
#    --float64; compare --exact: within 1e-3, or no further from float64 than 2x PyTorch fp32's
#    own distance). Call 42: 166 of 168 within 1e-3, two at 1.1e-3.
# S2: batch 8 once more, chosen by S: if batch 8 is already under 4x batch 4's time, at the old
#    256 MiB limit (the cause, attributed); if not, under --engine=autotune (the engines, ruled in
#    or out).
# P: PyTorch's step at batch 8 on this same card (call 42's figures were another H200's).
# STEPS picks the steps and their order (default "K S C S2 P"); with a short budget,
# STEPS="C S P K" puts the comparison first. SEEDS (default "3"): C's cases, each in c/s<seed>.
# U: the reference tools' Python tests under PyTorch. BUDGET (seconds, default 450): each step's limit is
# cut to what is left of it, so that the archives are always written.
# Carry: build/release/cnnbench_stylegan_train, build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-450}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
B8=slow  # S's verdict on batch 8, for S2

step_K() {
  timeout $(lim 90) $B/tests/test_gpu --gtest_filter='GpuStyleganTrain.*' >$O/k/tests.log 2>&1
  echo "K rc=$? ${SECONDS}s"; grep -E "workspace limit|Failure|OK \]|FAILED +\]" $O/k/tests.log | head
}

step_S() {
  timeout $(lim 150) $B/cnnbench_stylegan_train --batches=4,8 --precision=tf32 --iters=16 \
    --warmup=1 --repetitions=1 --sections --json=$O/s/heuristic.json >$O/s/heuristic.log 2>&1
  echo "S heuristic rc=$? ${SECONDS}s"; grep -vE "^  .* \| " $O/s/heuristic.log | head -60
  grep -E "^  .* \| " $O/s/heuristic.log | head -40
  B8=$(python3 -c "import json,sys; r={x['batch']:x.get('ms',0) for x in json.load(open(sys.argv[1]))['rows']}; print('fast' if r.get(8,0) and r.get(4,0) and r[8] < 4*r[4] else 'slow')" $O/s/heuristic.json 2>/dev/null || echo slow)
  echo "batch 8 at 2 GiB: $B8"
}

step_C() {
  local seed
  for seed in ${SEEDS:-3}; do
    mkdir -p $O/c/s$seed
    timeout $(lim 120) $PYTHON tools/stylegan3_train_reference.py write-case --dir $O/c/s$seed/case \
      --resolution 256 --batch 4 --seed $seed --device cuda --float64 >$O/c/s$seed/write.log 2>&1
    echo "C seed $seed write rc=$? ${SECONDS}s"
    grep -E "float64|cross-check|time|error" $O/c/s$seed/write.log
    timeout $(lim 100) $B/cnnbench_stylegan_train --check=$O/c/s$seed/case \
      --output=$O/c/s$seed/ours_fp32.safetensors --precision=fp32 >$O/c/s$seed/ours_fp32.log 2>&1
    echo "C seed $seed ours rc=$?"; tail -n 1 $O/c/s$seed/ours_fp32.log
    timeout $(lim 60) $PYTHON tools/stylegan3_train_reference.py compare \
      --reference $O/c/s$seed/case/reference.safetensors --ours $O/c/s$seed/ours_fp32.safetensors \
      --exact $O/c/s$seed/case/reference64.safetensors >$O/c/s$seed/compare.log 2>&1
    echo "C seed $seed compare rc=$?"; grep -E "FAIL|worst|pass" $O/c/s$seed/compare.log | head -12
    rm -f $O/c/s$seed/case/*.safetensors $O/c/s$seed/*.safetensors
  done
}

# U: the reference tools' Python tests with PyTorch (skipped where torch is missing).
step_U() {
  (cd tests && timeout $(lim 120) $PYTHON -m unittest test_stylegan3_train_reference \
    test_stylegan3_reference >$O/u/unittest.log 2>&1)
  echo "U rc=$? ${SECONDS}s"; tail -n 4 $O/u/unittest.log
}

step_S2() {
  local how="--engine=autotune" name=autotune t=150
  [ "$B8" = fast ] && how="--workspace_mib=256" name=ws256 t=90
  timeout $(lim $t) $B/cnnbench_stylegan_train --batches=8 --precision=tf32 --iters=16 --warmup=1 \
    --repetitions=1 --sections $how --json=$O/s2/$name.json >$O/s2/$name.log 2>&1
  echo "S2 $name rc=$? ${SECONDS}s"; grep -vE "^  .* \| " $O/s2/$name.log | head -30
}

step_P() {
  ((END - SECONDS > 50)) || { echo "P skipped: $((END - SECONDS)) s left"; return; }
  timeout $(lim 120) $PYTHON tools/stylegan3_train_reference.py bench --resolution 256 \
    --batches 8 --precision tf32 --iters 8 --warmup-iters 2 --out $O/p/pytorch_tf32.json \
    >$O/p/pytorch.log 2>&1
  echo "P pytorch rc=$? ${SECONDS}s"; tail -n 3 $O/p/pytorch.log
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
for s in ${STEPS:-K S C S2 P}; do
  d=$(echo $s | tr A-Z a-z)
  mkdir -p $O/$d
  step_$s
  (cd $O && tar czf $d.tgz --remove-files $d)  # each step's files, whatever comes after
done
echo "end ${SECONDS}s"
