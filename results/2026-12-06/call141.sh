#!/usr/bin/env bash
# Device call 141 (written 2026-12-06 13:05 UTC; run at 14:04, when it went to call137.sh): the first call, named
# nvidia-h200. On an H200: issue 9's six inference targets beside PyTorch (call143.sh PART=I; it was
# results/2026-12-05_h200/call56.sh, all eight in one call, which does not fit), then PART=T. On any other card: call142.sh since 14:30 UTC (the
# fused stem pool's tests and A/B, then issue 10's racecheck with cuBLAS's kernels unchecked; it
# was call137.sh, run as call 137). Carry .carry.
set -u
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $NAME"
if [[ "$NAME" == *H200* ]]; then
  PART=I exec bash results/2026-12-06/call143.sh  # then call143.sh PART=T (since 14:35 UTC)
fi
exec bash results/2026-12-06/call142.sh
