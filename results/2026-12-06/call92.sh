#!/usr/bin/env bash
# Device call 92 (written 2026-12-06 01:30 UTC), for when one call is all this session gets
# (1,124 s of device time left after five failed starts, about 180 s each).
# On an H200: call91.sh (call56.sh whole: issue 9's targets beside PyTorch on the H200).
# On an H100: call91.sh's G (the GPU tests of the changes never run on a GPU), then call88.sh
#   (issue 10: what call 85 left of the sanitizer matrix) in what is left of 585 s.
set -u
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ $NAME == *H200* ]]; then
  bash results/2026-12-06/call91.sh
else
  STEPS=G bash results/2026-12-06/call91.sh
  BUDGET=$((585 - SECONDS)) bash results/2026-12-05_h100/call88.sh
fi
echo "call92 end ${SECONDS}s"
