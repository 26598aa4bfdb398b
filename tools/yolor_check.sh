#!/usr/bin/env bash
# YOLOR-CSP-X against PyTorch (issue 6), on a GPU with torch and safetensors:
#  1. tools/yolor_reference.py write-case: the network from torch ops (its own cfg-style block
#     list), random weights as the reference names them (implicits included), an input, and the
#     three heads' raw outputs in fp32 (TF32 off);
#  2. cnnbench_infer on those weights (folded on load) and that input, in each of PRECISIONS;
#  3. tools/yolor_reference.py compare: each head's relative L2 error against the tolerance of
#     its precision (fp32 1e-4, tf32 5e-3, fp16 1e-2, bf16 3e-2).
#   SIZE=640 BATCH=2 PRECISIONS="fp32 fp16" bash tools/yolor_check.sh OUT_DIR
# Exit status: 0 when every precision passes, 1 when one fails, 2 on a tool error.
set -u
OUT=${1:?usage: tools/yolor_check.sh OUT_DIR}
cd "$(dirname "$0")/.."
B=${BIN:-build/release}
PY=${PYTHON:-python3}
SIZE=${SIZE:-640}
BATCH=${BATCH:-2}
mkdir -p "$OUT"
$PY tools/yolor_reference.py write-case --dir "$OUT/case" --size "$SIZE" --batch "$BATCH" \
  --seed "${SEED:-0}" || exit 2
status=0
for p in ${PRECISIONS:-fp32 tf32 fp16 bf16}; do
  case $p in fp32) tol=1e-4 ;; tf32) tol=5e-3 ;; fp16) tol=1e-2 ;; *) tol=3e-2 ;; esac
  "$B/cnnbench_infer" --network=yolor_csp_x --input_size="$SIZE" --batch="$BATCH" \
    --precision="$p" --weights="$OUT/case/weights.safetensors" \
    --input="$OUT/case/input.safetensors" --output="$OUT/ours_$p.safetensors" \
    >"$OUT/infer_$p.log" 2>&1 || { echo "yolor_check: cnnbench_infer $p failed:"; tail -3 "$OUT/infer_$p.log"; exit 2; }
  echo "== $p (tolerance $tol)"
  $PY tools/yolor_reference.py compare --reference "$OUT/case/reference.safetensors" \
    --ours "$OUT/ours_$p.safetensors" --tolerance "$tol"
  rc=$?
  [ $rc -eq 2 ] && exit 2
  [ $rc -ne 0 ] && status=1
done
exit $status
