#!/usr/bin/env bash
# Device call 61 (written 2026-12-05 after calls 55-60): what those calls left, in one call.
# S: the stem kernel's new gather (a warp a pixel, lanes over taps): its GPU tests, then ResNet-50
#    fp16 at 32 and 256 autotuned (the race against pad + cuDNN; call 56 on an H100: ours 134 and
#    915 us, cuDNN 196 and 1,450). Predicted: ours 250 to 400 us at 256.
# M: issue 6's largest batch of the StyleGAN3-T training step (--max_batch doubling from 8).
# F: the BatchNorm-fusion probe again, the weight gradients with dW in fp16 first.
# Z: issue 10's initcheck and synccheck on ResNet-50 inference with the new tool options.
# N: issue 8's ncu command (expect one profiled launch now).
# Steps in the order S M Z N F (STEPS= to change it): the probe, the longest, takes what is left.
# BUDGET (s, default 540) cuts each step. Carry: build/release/cnnbench,
# build/release/cnnbench_stylegan_train, build/release/cnnbench_bn_fusion_probe,
# build/release/cnnbench_infer, build/release/cnnbench_train_step, build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-540}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader

step_S() {
  timeout $(lim 100) $B/tests/test_gpu \
    --gtest_filter='GpuOps.StemKernel*:GpuNetwork.StemKernel*:GpuTrainStep.StemKernel*' >$O/s/tests.log 2>&1
  local rc=$?
  echo "S tests rc=$rc ${SECONDS}s"; grep -E "  stem |stem kernel|Failure|OK \]|FAILED +\]" $O/s/tests.log | head -24
  # A failure, a crash or a hang (no PASSED line): no timing with the kernel.
  if grep -qE "FAILED +\]" $O/s/tests.log || { [ $rc -ne 0 ] && ! grep -q PASSED $O/s/tests.log; }; then
    echo "S: stem tests failed or did not finish, no timing"; return
  fi
  timeout $(lim 120) $B/cnnbench --config=configs/issue9_targets.yaml \
    --benchmark_filter='resnet50/fp16/graph/batch:(32|256)/' --benchmark_out=$O/s/ours.json \
    --layers_out=$O/s/ours.layers.json >$O/s/ours.log 2>&1
  echo "S bench rc=$? ${SECONDS}s"; grep -E "ERROR|_median" $O/s/ours.log | cut -c1-120
  python3 -c "import json,sys; [print(m['model'], l['name'], l['engine'], round(l['tuned_us'],1), l['engine_notes'][:100]) for m in json.load(open(sys.argv[1]))['models'] for l in m['layers'][:1]]" \
    $O/s/ours.layers.json 2>&1 | head -4
}

step_M() {
  timeout $(lim 150) $B/cnnbench_stylegan_train --batches=8 --precision=tf32 --iters=16 --warmup=1 \
    --repetitions=1 --max_batch --json=$O/m/max_batch.json >$O/m/max_batch.log 2>&1
  echo "M rc=$? ${SECONDS}s"; grep -vE "^  .* \| " $O/m/max_batch.log | grep -E "batch|largest|error" | head -12
}

step_F() {
  timeout $(lim 40) $B/tests/test_gpu --gtest_filter='GpuBnFusion.*' >$O/f/gpu_bn_fusion.txt 2>&1
  echo "F tests rc=$? ${SECONDS}s"; grep -E "wgrad|OK \]|FAILED +\]" $O/f/gpu_bn_fusion.txt | head
  timeout $(lim 150) $B/cnnbench_bn_fusion_probe --batch=256 --max_engines=3 \
    --json=$O/f/bn_fusion_256.json >$O/f/bn_fusion_256.txt 2>$O/f/bn_fusion_256.err
  echo "F probe rc=$? ${SECONDS}s"; grep -E "layer|wgrad" $O/f/bn_fusion_256.txt | head -24
}

step_Z() {
  NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS="initcheck synccheck" RUN_TIMEOUT=$(lim 45) \
    timeout $(lim 100) bash tools/sanitize_gpu.sh $O/z >$O/z/run.log 2>&1
  echo "Z rc=$? ${SECONDS}s"; cat $O/z/summary.md
}

step_N() {
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
  timeout $(lim 60) $NCU --profile-from-start off --nvtx --nvtx-include "cnnbench@layer3.0.conv2/" \
    $B/cnnbench --config=configs/resnet50_fp16.yaml --eager --profile=1 \
    --benchmark_filter='resnet50/fp16/eager/batch:32/' --benchmark_repetitions=1 >$O/n/ncu.log 2>&1
  echo "N rc=$? ${SECONDS}s"; grep -E "^==PROF== Profiling" $O/n/ncu.log  # one per kernel of the layer, once
}

for s in ${STEPS:-S M Z N F}; do
  d=$(echo $s | tr A-Z a-z)
  mkdir -p $O/$d
  if ((END - SECONDS > 20)); then step_$s; else echo "$s skipped: $((END - SECONDS)) s left"; fi
  (cd $O && tar czf $d.tgz --remove-files $d)
done
echo "end ${SECONDS}s"
