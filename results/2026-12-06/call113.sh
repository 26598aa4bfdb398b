#!/usr/bin/env bash
# Device call 113 (written 2026-12-06 08:00 UTC, not yet run): why fp16 networks fail racecheck
# under a kernel filter, and a way round it. Carry .carry (bins.txz at 27aabde or later is not
# needed: cnnbench's binaries are unchanged since 2e2ba25; tools/sanitize_gpu.sh's TOOL_ARGS and
# SYNC_BARRIERS=off travel with the tree). About 560 s.
# Calls 77, 78 (include filter: ours only), 108 and 109 (exclude filter: cuDNN's and cuBLAS's
# kernels) stopped every fp16 network run after 3 to 6 s with "Internal Sanitizer Error: The
# Sanitizer failed to handle a hardware exception", then CUDA error 700; fp32 runs went on.
# T: PyTorch alone (tools/racecheck_torch_repro.py: ResNet-50-like convs forward and backward, fp16
#    channels_last at batch 2, then a GEMM) under racecheck (1) with the same exclusions, (2) with
#    an include filter that names no kernel, (3) unfiltered, (4) fp32 with the exclusions.
#    Predicted: (1) and (2) fail the same way, (3) and (4) finish: the tool's filtering and cuDNN's
#    fp16 Hopper kernels meet it, with no cnnbench code in the process. If (1) finishes, the
#    failure is ours to find.
# C: cnnbench ResNet-50 fp16 inference at batch 2 with the exclusions and (a) TOOL_ARGS
#    "--racecheck-memcpy-async no", (b) SYNC_BARRIERS=off (no --num-cuda-barriers), (c) both.
#    The first clean one (0 errors, exit 0) runs the network matrix's racecheck cells after it
#    (fp16 and fp32), two at a time, with the time left. Runs under racecheck are now lean
#    (sanitize_gpu.sh's LEAN_TOOLS, default racecheck): inference one eager forward instead of
#    about five, and no conv plan replayed at build in either binary (--check_replays): the fp32
#    runs timed out at 208 to 300 s before (calls 76, 102, 109).
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-560}))
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
PY=python3; [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
X="kns=nvjet kns=xmma kns=cudnn kns=cutlass"
XA=(); for f in $X; do XA+=(--kernel-name-exclude "$f"); done
mkdir -p $O/t $O/c
"$CS" --version | tail -1 >$O/t/version.txt
tp() {  # name timeout tool-args... -- script-args...
  local n=$1 t=$2 args=() rest=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  rest=("$@")
  ((END - SECONDS < t + 20)) && t=$((END - SECONDS - 20))
  ((t < 10)) && { echo "T $n: not run (budget)"; return; }
  timeout $t "$CS" --tool racecheck "${args[@]}" --print-limit 20 $PY tools/racecheck_torch_repro.py \
    "${rest[@]}" >$O/t/$n.log 2>&1
  echo "T $n rc=$? ${SECONDS}s: $(grep -cE 'Internal Sanitizer Error' $O/t/$n.log) internal errors;" \
    "$(grep -E 'RACECHECK SUMMARY' $O/t/$n.log | head -1)"
  grep -E "^(ok|racecheck_torch_repro)" $O/t/$n.log | head -2
}
tp exclude_fp16 120 "${XA[@]}" -- --dtype fp16
tp include_none_fp16 120 --kernel-name kns=no_such_kernel_name -- --dtype fp16
tp exclude_fp32 120 "${XA[@]}" -- --dtype fp32
tp plain_fp16 150 -- --dtype fp16
(cd $O && tar czf t.tgz --remove-files t)
c() {  # name env...
  local n=$1
  shift
  ((END - SECONDS < 60)) && { echo "C $n: not run (budget)"; return 1; }
  env "$@" NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS=racecheck EXCLUDE_KERNELS="$X" \
    RUN_TIMEOUT=120 BUDGET=$((END - SECONDS)) bash tools/sanitize_gpu.sh $O/c/$n >$O/c/$n.log 2>&1
  echo "C $n ${SECONDS}s: $(grep -E '^\| resnet50' $O/c/$n/summary.md)"
  grep -qE "^\| resnet50 \| fp16 \| infer \| racecheck \| 0 \| 0 \| 0 " $O/c/$n/summary.md
}
WAY=""
c async_no TOOL_ARGS="--racecheck-memcpy-async no" && WAY='TOOL_ARGS=--racecheck-memcpy-async no'
[ -z "$WAY" ] && c barriers_off SYNC_BARRIERS=off && WAY="SYNC_BARRIERS=off"
[ -z "$WAY" ] && c both SYNC_BARRIERS=off TOOL_ARGS="--racecheck-memcpy-async no" &&
  WAY="SYNC_BARRIERS=off TOOL_ARGS=--racecheck-memcpy-async no"
if [ -n "$WAY" ] && ((END - SECONDS > 90)); then
  echo "C matrix with $WAY"
  SB="4096 16384 32768" TA=""
  [[ $WAY == *off* ]] && SB=off
  [[ $WAY == *async* ]] && TA="--racecheck-memcpy-async no"
  env SYNC_BARRIERS="$SB" TOOL_ARGS="$TA" \
    NETS="alexnet alexnet_lrn vgg16_bn inception_bn inception_v3 resnet152 efficientnet_b0" \
    PRECISIONS="fp16 fp32" TOOLS=racecheck EXCLUDE_KERNELS="$X" JOBS=2 RUN_TIMEOUT=150 \
    BUDGET=$((END - SECONDS)) bash tools/sanitize_gpu.sh $O/c/matrix >$O/c/matrix.log 2>&1
  grep -E "^\| [a-z]" $O/c/matrix/summary.md | grep -v "^| network"
fi
(cd $O && tar czf c.tgz --remove-files c)
echo "call113 end ${SECONDS}s"
