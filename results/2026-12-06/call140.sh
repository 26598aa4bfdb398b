#!/usr/bin/env bash
# Device call 140 (written 2026-12-06 12:55 UTC, not yet run; about 200 s): issue 9, the stem's
# BatchNorm + ReLU fused into its max pool (TrainOptions::stem_pool_fused, CNNBENCH_STEM_POOL_FUSED=1,
# off by default until this call). Carry .carry.
# G: GpuTrain.BatchNormReluFusedIntoThePoolGivesTheSameBits (kernel level, against the apply +
#    pool and the host threads), GpuTrainStep.StemPoolFusedChangesNothing (five steps, the same
#    bits), and the pool's and BatchNorm's other GPU tests.
# A: ResNet-50 fp16 training at 256, --breakdown, --stem=cnnbench, fused off, on, off, on (two of
#    each, one machine). Predicted: the stem's apply pass (411 MB read and 411 MB written at 256)
#    goes, 250 to 350 us off the step on an H100 ("forward batchnorm+relu" about -280 us, "forward
#    maxpool" +0 to +50 us); the loss the same to the bit.
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-570}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
mkdir -p $O/p
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout $(lim 150) $B/tests/test_gpu \
  --gtest_filter='GpuTrain.BatchNormReluFused*:GpuTrainStep.StemPoolFused*:GpuTrain.MaxPool*:GpuTrain.BatchNorm*' \
  >$O/p/tests.log 2>&1
echo "G rc=$? ${SECONDS}s"; grep -E "^\[ +(OK|FAILED) +\]|Failure" $O/p/tests.log | head -20
i=0
for v in 0 1 0 1; do
  i=$((i + 1))
  ((END - SECONDS < 40)) && { echo "A $i: not run (budget)"; continue; }
  CNNBENCH_STEM_POOL_FUSED=$v timeout $(lim 60) $B/cnnbench_train_step --network=resnet50 \
    --precision=fp16 --batch=256 --stem=cnnbench --breakdown=$O/p/fused${v}_$i.json \
    >$O/p/fused${v}_$i.txt 2>&1
  echo "A fused=$v ($i) rc=$? ${SECONDS}s: $(head -n 1 $O/p/fused${v}_$i.txt)"
done
ls $O/p/fused*.json >/dev/null 2>&1 && python3 tools/compare_breakdowns.py $(ls $O/p/fused0_1.json \
  $O/p/fused1_2.json $O/p/fused0_3.json $O/p/fused1_4.json 2>/dev/null) --out-md $O/p/compare.md \
  >/dev/null 2>&1 && grep -E "maxpool|batchnorm\+relu|step" $O/p/compare.md
(cd $O && tar czf call140.tgz --remove-files p)
echo "call140 end ${SECONDS}s"
