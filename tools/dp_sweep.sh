#!/usr/bin/env bash
# Data-parallel training scaling on this host (issue 11): cnnbench_dp under cnnbench_launch on 1,
# 2, 4 and 8 GPUs (those the host has), for each network, then tools/scaling_table.py over the
# runs beside the seed's multi-GPU rows.
#   bash tools/dp_sweep.sh OUT_DIR [network ...]     (default: resnet50 efficientnet_b0)
# Environment: BATCHES (per GPU, default 64,256), PRECISION (fp16), GPUS ("1 2 4 8": the counts
# tried; counts above the host's are skipped), BUILD (build/release), EXTRA (more cnnbench_dp
# flags). Each run writes OUT_DIR/<network>_g<G>.json and .log; a failing run is reported and the
# sweep goes on. Exit 1 if any run failed.
set -u -o pipefail
OUT=${1:?usage: bash tools/dp_sweep.sh OUT_DIR [network ...]}
shift
NETS=${*:-resnet50 efficientnet_b0}
BUILD=${BUILD:-build/release}
BATCHES=${BATCHES:-64,256}
PRECISION=${PRECISION:-fp16}
have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${have:-0}" -lt 1 ]; then
  echo "dp_sweep.sh: no CUDA device (nvidia-smi -L lists none)" >&2
  exit 2
fi
for bin in "$BUILD/cnnbench_dp" "$BUILD/cnnbench_launch"; do
  [ -x "$bin" ] || { echo "dp_sweep.sh: $bin is not built (cmake --build $BUILD)" >&2; exit 2; }
done
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
failed=0
runs=()
for net in $NETS; do
  for g in ${GPUS:-1 2 4 8}; do
    [ "$g" -le "$have" ] || continue
    f="$OUT/${net}_g$g"
    echo "== $net on $g GPU(s), batch per GPU $BATCHES, $PRECISION"
    # shellcheck disable=SC2086
    if "$BUILD/cnnbench_launch" --nproc="$g" --quiet_ranks -- "$BUILD/cnnbench_dp" \
        --network="$net" --batches="$BATCHES" --precision="$PRECISION" --json="$f.json" \
        ${EXTRA:-} 2>&1 | tee "$f.log"; then
      runs+=("$f.json")
    else
      echo "dp_sweep.sh: $net on $g GPU(s) failed (see $f.log)" >&2
      failed=1
      [ -s "$f.json" ] && runs+=("$f.json")  # the batches it finished
    fi
  done
done
[ ${#runs[@]} -gt 0 ] && python3 "$(dirname "$0")/scaling_table.py" --out "$OUT/scaling.md" "${runs[@]}" \
  && cat "$OUT/scaling.md"
exit $failed
