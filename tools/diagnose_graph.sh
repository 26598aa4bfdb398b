#!/usr/bin/env bash
# One device call to tell apart the causes of the graph/eager mismatch (NOTES.md): for models
# known to mismatch under cuDNN 9.19, compare a whole-graph replay with eager execution with
# plans shared between layers of one shape and with a plan per layer, and bisect the graph.
#   bash tools/diagnose_graph.sh [cudnn lib dir] [quick]   (prebuilt binaries in build/release)
# quick: only the graph as captured (with its repairs), no bisection.
# plans: each model as captured, with a plan per layer (--share_plans=false), and with cuDNN's
#        eng4 excluded, each without repairs, so each says whether it matches by itself.
set -u
B=build/release
CUDNN=${1:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib}
MODE=${2:-}
export LD_LIBRARY_PATH=$CUDNN:$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# For each model: the graph as captured, with every programmatic (PDL) edge made a full
# dependency, and with a plan per layer; then the bisection, as captured and with full edges.
show() { grep -E "graph replay vs eager|graph of|exceed|refused|error|written|differs|banned|rror|fault|Abort" | cut -c1-220 | head -${1:-4}; }
if [ "$MODE" = plans ]; then
  for c in "fp16 32 autotune" "tf32 4 heuristic"; do
    for v in "" "--share_plans=false" "--exclude_engines=eng4"; do
      set -- $c
      echo "=== $1 batch $2 $3 ${v:-as built}"
      timeout 40 $B/cnnbench_infer --network=resnet50 --precision=$1 --batch=$2 --engine=$3 $v \
        --max_repairs=0 --output=/tmp/diag.safetensors 2>&1 | show 6
      echo "exit ${PIPESTATUS[0]}"
    done
  done
  exit 0
fi
for c in "tf32 4 heuristic" "fp16 16 autotune" "fp16 32 autotune"; do
  set -- $c
  vs=("captured true" "full true" "captured false")
  [ "$MODE" = quick ] && vs=("captured true")
  for v in "${vs[@]}"; do
    set -- $c $v
    echo "=== $1 batch $2 $3 graph_edges=$4 share_plans=$5"
    timeout 100 $B/cnnbench_infer --network=resnet50 --precision=$1 --batch=$2 --engine=$3 \
      --graph_edges=$4 --share_plans=$5 --verify=16 --output=/tmp/diag.safetensors 2>&1 | show 8
    echo "exit ${PIPESTATUS[0]}"
  done
  for e in captured full; do
    [ "$MODE" = quick ] && break
    echo "=== $1 batch $2 $3 graph_edges=$e: bisect"
    timeout 100 $B/cnnbench_infer --network=resnet50 --precision=$1 --batch=$2 --engine=$3 \
      --graph_edges=$e --bisect_graph --output=/tmp/diag.safetensors 2>&1 | show 3
  done
done
