#!/usr/bin/env bash
# Device call 127 (written 2026-12-06 10:00 UTC, not yet run): the next session's first call,
# the work picked on the card that comes (named nvidia-h200, an H100 came three sessions running).
# Carry .carry (packed at d7e9645). At most 580 s.
# On an H200: issue 9's eight targets beside PyTorch (results/2026-12-05_h200/call56.sh).
# Else: the stem weight gradient with its branch-free steps (call114.sh: tests, sanitizers, the
# A/B breakdown, ncu basics), then the rows kernel with ResNet's stem compiled in (call115.sh:
# tests, sanitizers, the race at 1, 32, 256 and training, ncu basics), then what is left for the
# stall samples of both (call125.sh). Each in its own folder under $OUT.
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-580}))
left() { echo $((END - SECONDS)); }
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $NAME"
if [[ "$NAME" == *H200* ]]; then
  BUDGET=$(left) bash results/2026-12-05_h200/call56.sh
  exit
fi
mkdir -p $O/c114 $O/c115 $O/c125
OUT=$O/c114 BUDGET=$(($(left) < 250 ? $(left) : 250)) bash results/2026-12-06/call114.sh
echo "== call114 done at ${SECONDS}s"
OUT=$O/c115 BUDGET=$(($(left) < 230 ? $(left) : 230)) bash results/2026-12-06/call115.sh
echo "== call115 done at ${SECONDS}s"
if (($(left) > 90)); then
  OUT=$O/c125 BUDGET=$(left) bash results/2026-12-06/call125.sh
fi
echo "call127 end ${SECONDS}s"
