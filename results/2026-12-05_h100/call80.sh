#!/usr/bin/env bash
# Device call 80 (written 2026-12-05 late evening, CPU only; not yet run): issue 9's training
# kernels, each measured against the form it replaces in the same call. About 9 minutes. Pack
# everything (NOTES.md, "Next device session"), carry .carry.
# G: their GPU tests: GpuTrain.* (the max-pool backward, the BatchNorm kernels with SiLU on the
#    multi-function unit and with ReLU masks as bits, the vectorised scale backward, the grouped
#    optimizer steps against one launch each, bit for bit), GpuKernels.* (activate's SiLU and
#    sigmoid, inference kernels included, now take the same sigmoid) and the steps
#    they change (GpuTrainStep.ReluMasksChangeNothing: exactly equal steps with and without the
#    bits; FusedBatchNormSiluChangesNothing; FusedBatchNormReluChangesNothing).
#    If G fails, B still runs (the A/B switches select the old kernels), but read its numbers as
#    unverified. (CNNBENCH_BN_EXACT_SILU=1 restores expf in the fused BatchNorm kernels only.)
# B: the fp16 training step at 256 by launch kind (cnnbench_train_step --breakdown), A/B:
#    EfficientNet-B0: as built; CNNBENCH_BN_EXACT_SILU=1; CNNBENCH_SCALAR_SCALE=1 with
#    CNNBENCH_OPT_PER_TENSOR=1 (two lines of the table, "backward scale" and "optimizer").
#    ResNet-50: as built; --relu_masks=0; CNNBENCH_MAXPOOL_GATHER=1 with CNNBENCH_OPT_PER_TENSOR=1.
#    Predicted on an H100 (the H200's call 20 per-kind sums scaled by pace; NOTES.md, "Issue 9's
#    training kernels, written without a GPU"):
#    - "backward batchnorm+add+relu" 2.0 ms less with the bits (22.6 -> 17.3 GB), the forward
#      +0.06 ms; the step about 1.5 to 2 ms less;
#    - "backward maxpool" 2.5x or more faster than with CNNBENCH_MAXPOOL_GATHER=1;
#    - "backward batchnorm+silu" from about 9.7 ms to about 6 ms (the exact form is issue-bound:
#      its derivative's expf and IEEE division); "forward batchnorm+silu" a little less;
#    - "backward scale" from about 2.2 to about 1.5 ms;
#    - "optimizer": one launch per gradient type instead of one per tensor (163 and 216 in call
#      20: 472 and 486 us on the H200, against about 120 and 25 us of traffic): about 0.3 ms
#      less for ResNet-50, 0.45 ms for EfficientNet-B0;
#    - EfficientNet-B0's step from 37.0 ms (call 59) to about 32 ms; ResNet-50's from 46.5 to
#      about 42.5 ms.
# P: the targets' two training rows (configs/issue9_targets.yaml, autotuned, as call 56) beside
#    PyTorch's eager AMP step on the same card, and tools/targets_table.py over them.
# M: memcheck and initcheck over the two training steps these kernels run in (ResNet-50 and
#    EfficientNet-B0, batch 2, fp16 and fp32: the tails' bits, the scale backward, the grouped
#    optimizer, the reductions' new chunking), 4 processes at once. Predicted: 0 errors, as in
#    call 75's matrix.
# BUDGET (s, default 560) cuts each step. Carry: .carry (bins.txz from tools/carry_pack.sh).
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-560}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
step_G() {
  timeout $(lim 150) $B/tests/test_gpu --gtest_filter='GpuTrain.*:GpuKernels.*:GpuTrainStep.ReluMasksChangeNothing:GpuTrainStep.FusedBatchNorm*' \
    >$O/g/tests.log 2>&1
  echo "G rc=$? ${SECONDS}s"; grep -E "OK \]|FAILED +\]|Failure|PASSED|SKIPPED" $O/g/tests.log | head -40
}
# One breakdown: name, then the environment assignments and flags.
bd() {
  local name=$1 net=$2 a vars=() flags=()
  shift 2
  for a in "$@"; do case $a in --*) flags+=("$a") ;; *) vars+=("$a") ;; esac; done
  env "${vars[@]}" timeout $(lim 100) $B/cnnbench_train_step --network=$net --precision=fp16 \
    --batch=256 --breakdown=$O/b/$name.json "${flags[@]}" >$O/b/$name.txt 2>&1
  echo "B $name rc=$? ${SECONDS}s"; head -n 1 $O/b/$name.txt
  grep -E "batchnorm|maxpool|scale |optimizer|every op" $O/b/$name.txt | head -20
}
step_B() {  # the two largest predicted effects first, in pairs, should the budget cut the rest
  bd b0 efficientnet_b0
  bd b0_expf efficientnet_b0 CNNBENCH_BN_EXACT_SILU=1
  bd r50 resnet50
  bd r50_nomask resnet50 --relu_masks=0
  bd b0_old_scale_opt efficientnet_b0 CNNBENCH_SCALAR_SCALE=1 CNNBENCH_OPT_PER_TENSOR=1
  bd r50_old_pool_opt resnet50 CNNBENCH_MAXPOOL_GATHER=1 CNNBENCH_OPT_PER_TENSOR=1
}
step_P() {
  timeout $(lim 240) $B/cnnbench --config=configs/issue9_targets.yaml --benchmark_filter='/train/' \
    --benchmark_out=$O/p/ours.json --layers_out=$O/p/ours.layers.json >$O/p/ours.log 2>&1
  echo "P rc=$? ${SECONDS}s"; grep -E "ERROR|_median" $O/p/ours.log | cut -c1-140
  timeout $(lim 100) $PYTHON tools/pytorch_train_baseline.py --models resnet50,efficientnet_b0 \
    --batches 256 --modes eager --precision fp16 --reps 3 --out $O/p/pytorch_train.json \
    >$O/p/pytorch_train.log 2>&1
  echo "P torch rc=$? ${SECONDS}s"
  python3 tools/targets_table.py --cnnbench $O/p/ours.json --pytorch-train $O/p/pytorch_train.json \
    --out-md $O/p/targets.md && cat $O/p/targets.md
}
step_M() {
  NETS="resnet50 efficientnet_b0" MODES=train TOOLS="memcheck initcheck" JOBS=4 \
    RUN_TIMEOUT=$(lim 120) BUDGET=$(lim 130) bash tools/sanitize_gpu.sh $O/m/san >$O/m/san.log 2>&1
  echo "M rc=$? ${SECONDS}s"; grep -E "^\| [a-z]" $O/m/san/summary.md | grep -v "^| network"
}
for s in ${STEPS:-G B P M}; do
  d=$(echo $s | tr A-Z a-z)
  mkdir -p $O/$d
  ((END - SECONDS > 20)) && step_$s
  (cd $O && tar czf $d.tgz --remove-files $d)
done
echo "end ${SECONDS}s"
