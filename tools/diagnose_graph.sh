#!/usr/bin/env bash
# One device call to tell apart the causes of the graph/eager mismatch (NOTES.md): for models
# known to mismatch under cuDNN 9.19, compare a whole-graph replay with eager execution with
# plans shared between layers of one shape and with a plan per layer, and bisect the graph.
#   bash tools/diagnose_graph.sh [cudnn lib dir]      (prebuilt binaries in build/release)
set -u
B=build/release
CUDNN=${1:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib}
export LD_LIBRARY_PATH=$CUDNN:$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for c in "tf32 4 heuristic" "fp16 32 autotune" "bf16 8 autotune" "fp16 4 heuristic"; do
  set -- $c
  for share in true false; do
    echo "=== $1 batch $2 $3 share_plans=$share"
    timeout 120 $B/cnnbench_infer --network=resnet50 --precision=$1 --batch=$2 --engine=$3 \
      --share_plans=$share --verify=64 --output=/tmp/diag.safetensors 2>&1 |
      grep -E "graph replay vs eager|exceed|refused|CUDA graph error|written" | head -4
  done
  echo "=== $1 batch $2 $3: bisect"
  timeout 150 $B/cnnbench_infer --network=resnet50 --precision=$1 --batch=$2 --engine=$3 \
    --bisect_graph --output=/tmp/diag.safetensors 2>&1 | grep -E "differs|error" | head -6
done
