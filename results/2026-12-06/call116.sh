#!/usr/bin/env bash
# Device call 116 (2026-12-06 08:55 UTC): the first call of the session. A run named nvidia-h200
# may get an H100; the command is chosen on the card: on an H200, issue 9's eight targets beside
# PyTorch (results/2026-12-05_h200/call56.sh); on any other card, the stem weight gradient's second
# form (results/2026-12-06/call114.sh). Carry .carry.
set -u
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $NAME"
if [[ "$NAME" == *H200* ]]; then
  bash results/2026-12-05_h200/call56.sh
else
  bash results/2026-12-06/call114.sh
fi
