#!/usr/bin/env bash
# Device call 141 (written 2026-12-06 13:05 UTC, not yet run): the next session's first call, named
# nvidia-h200. On an H200: issue 9's eight targets beside PyTorch (results/2026-12-05_h200/call56.sh,
# with the BatchNorm sweep at its new default). On any other card: issue 10's racecheck probe and
# cells (results/2026-12-06/call137.sh). Carry .carry.
set -u
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $NAME"
if [[ "$NAME" == *H200* ]]; then
  exec bash results/2026-12-05_h200/call56.sh
fi
exec bash results/2026-12-06/call137.sh
