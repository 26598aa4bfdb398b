#!/usr/bin/env bash
# Device call 45 (written 2026-12-04 late evening, not yet run). Issue 9's misses (README's
# status table), each with its per-layer roofline before any kernel of our own is chosen:
# Inception-v3 and ResNet-50 inference at 256 and ResNet-50 at 1 (cnnbench_infer --breakdown:
# each layer's time, FLOPs, bytes, achieved TFLOP/s and GB/s, its bound against the GEMM and copy
# ceilings measured in the same run, the engine), then ResNet-50's training step at 256
# (cnnbench_train_step --breakdown: each launch alone, by kind).
# Carry: build/release/cnnbench_infer, build/release/cnnbench_train_step, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/r
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
for c in "inception_v3 256" "resnet50 256" "resnet50 1"; do
  set -- $c
  timeout 150 $B/cnnbench_infer --network=$1 --precision=fp16 --batch=$2 --engine=autotune \
    --output=/tmp/logits_$1_$2.safetensors --breakdown=$O/r/breakdown_$1_$2.json \
    >$O/r/breakdown_$1_$2.txt 2>&1
  echo "R $1 $2 rc=$? $(date +%T)"; grep -iE "sum of layers|whole graph|bound" $O/r/breakdown_$1_$2.txt | head -4
done
timeout 150 $B/cnnbench_train_step --network=resnet50 --precision=fp16 --batch=256 \
  --breakdown=$O/r/train_resnet50_256.json >$O/r/train_resnet50_256.txt 2>&1
echo "T rc=$? $(date +%T)"; head -n 14 $O/r/train_resnet50_256.txt
(cd $O && tar czf r.tgz --remove-files r)
