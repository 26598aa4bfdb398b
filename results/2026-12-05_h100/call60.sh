#!/usr/bin/env bash
# Device call 60 (2026-12-05): issue 8's two unchecked README commands. N: the README's ncu
# command for one named layer, verbatim. B: cnnbench_infer --breakdown on ResNet-50 at 32, fp16.
# Carry: build/release/cnnbench, build/release/cnnbench_infer, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/n
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 130 $NCU --profile-from-start off --nvtx --nvtx-include "cnnbench@layer3.0.conv2/" \
    build/release/cnnbench --config=configs/resnet50_fp16.yaml --eager --profile=1 \
    --benchmark_filter='resnet50/fp16/eager/batch:32/' --benchmark_repetitions=1 >$O/n/ncu.log 2>&1
echo "N rc=$? ${SECONDS}s"; grep -E "^==PROF==|^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput" $O/n/ncu.log | head -20
timeout 90 build/release/cnnbench_infer --network=resnet50 --precision=fp16 --batch=32 \
  --output=$O/n/logits.safetensors --breakdown=$O/n/breakdown.json >$O/n/breakdown.log 2>&1
echo "B rc=$? ${SECONDS}s"; tail -n 8 $O/n/breakdown.log; rm -f $O/n/logits.safetensors
(cd $O && tar czf n.tgz --remove-files n)
echo "end ${SECONDS}s"
