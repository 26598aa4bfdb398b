#!/usr/bin/env bash
# Device call 79 (written 2026-12-05 evening, not yet run): the next session's first call, about
# 9 minutes. Pack everything (NOTES.md, "Next device session"), carry .carry.
# F: issue 10's faults, never run on a GPU: ctest's gpu_faults (tests/fault_test.sh). Predicted:
#    passes (OOM survived with the model freed; illegal address: exit 3, JSON whole; SIGKILL then
#    --resume; SIGINT exit 130).
# R: issue 10's racecheck of our kernels in fp16, through the GPU unit tests, unfiltered (call 78:
#    the kernel filter breaks fp16 runs). Predicted: hazards only in cuBLAS's nvjet kernels.
# S: synccheck with blocking launches, 4 at a time, on the networks whose launches call 77 could
#    not track. Predicted: 0 unchecked launches and 0 hazards.
# T: issue 9, the BatchNorm-fusion probe with the weight gradient in fp16 first (whether the
#    BN-ReLU-prologue wgrad builds decides the rebuild; NOTES.md, "BatchNorm fusion after the
#    probe"). (The max-pool backward's test and A/B moved to call80.sh, with the other training
#    kernels written since.)
# Three calls with call80.sh: "call80 G B" + "call79 F"; then "call79 R S"; then "call80 P" +
#    "call79 T" (NOTES.md, "Next device session").
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-560}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
step_F() {
  timeout $(lim 200) ctest --test-dir $B -R gpu_faults --output-on-failure >$O/f/faults.log 2>&1
  echo "F rc=$? ${SECONDS}s"; grep -E "fault_test|Passed|Failed|\*\*\*" $O/f/faults.log | head -14
}
step_R() {
  # Two runs: the training kernels' shared-memory reductions first (BatchNorm, the scale backward,
  # the max-pool backward), then the rest, so that a timeout loses one half only.
  NETS= TOOLS=racecheck RUN_TIMEOUT=$(lim 100) BUDGET=$(lim 110) \
    TESTS='GpuTrain.BatchNorm*:GpuTrain.ScaleBackward*:GpuTrain.MaxPool*' \
    bash tools/sanitize_gpu.sh $O/r/race_train >$O/r/race_train.log 2>&1
  echo "R train rc=$? ${SECONDS}s"; grep -E "^\| test_gpu" $O/r/race_train/summary.md
  NETS= TOOLS=racecheck RUN_TIMEOUT=$(lim 200) BUDGET=$(lim 210) \
    TESTS='GpuKernels.*:GpuOps.*:GpuTrainBackward.*:GpuMbstd.*:GpuFourierBackward.*' \
    bash tools/sanitize_gpu.sh $O/r/race >$O/r/race.log 2>&1
  echo "R rc=$? ${SECONDS}s"; grep -E "^\| test_gpu" $O/r/race/summary.md
  grep -h "Race reported" $O/r/race*/*.log | sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c | head -8
}
step_S() {
  NETS="inception_bn resnet50 resnet152 efficientnet_b0" MODES=train TOOLS=synccheck JOBS=4 BLOCKING=1 \
    RUN_TIMEOUT=$(lim 120) BUDGET=$(lim 130) bash tools/sanitize_gpu.sh $O/s/sync >$O/s/sync.log 2>&1
  echo "S rc=$? ${SECONDS}s"; grep -E "^\| [a-z]" $O/s/sync/summary.md | grep -v "^| network"
  for f in $O/s/sync/*.log; do  # the unchecked-launch reports repeat: keep the head
    [ "$(wc -l <$f)" -gt 80 ] && { head -40 $f; echo ...; tail -20 $f; } >$f.cut && mv $f.cut $f
  done
}
step_T() {
  timeout $(lim 150) $B/cnnbench_bn_fusion_probe --batch=256 --max_engines=3 \
    --json=$O/t/bn_fusion_256.json >$O/t/bn_fusion_256.txt 2>$O/t/bn_fusion_256.err
  echo "T probe rc=$? ${SECONDS}s"; cat $O/t/bn_fusion_256.txt | head -30
}
for s in ${STEPS:-F R S T}; do
  d=$(echo $s | tr A-Z a-z)
  mkdir -p $O/$d
  ((END - SECONDS > 20)) && step_$s
  (cd $O && tar czf $d.tgz --remove-files $d)
done
