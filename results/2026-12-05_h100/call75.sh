#!/usr/bin/env bash
# Device call 75: collect the soak call 74 started (call72.sh finish), then issue 10's sanitizer
# matrix with what the call has left, runs in parallel (JOBS=8; batch 2 leaves the card idle and
# the tools' cost is mostly on the host): initcheck over the zoo, fp16 and fp32, inference and
# training (32 runs), and memcheck in fp32 (16 runs; fp16 was clean in calls 64 and 65).
# Predictions: 0 errors everywhere (call 69 found 0 on ResNet-50 inference after the arena fix);
# a training run may time out under initcheck (its tracking of every byte of the gradients).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/z
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib:$PWD/.carry/lib
WAIT=400 bash results/2026-12-05_h100/call72.sh finish
left=$((585 - SECONDS))
echo "sanitizers from ${SECONDS}s, ${left}s left"
if ((left > 90)); then
  JOBS=${JOBS:-8} TOOLS="initcheck memcheck" BUDGET=$((left - 20)) RUN_TIMEOUT=$((left - 20)) \
    bash tools/sanitize_gpu.sh $O/z/a >$O/z/a.log 2>&1
  echo "sanitize rc=$? ${SECONDS}s"; grep -E "^\| [a-z]" $O/z/a/summary.md | grep -v "^| network" | head -70
fi
(cd $O && tar czf z.tgz --remove-files z)
