#!/usr/bin/env bash
# The largest batch per network x card size (issue 5): one `cnnbench --max_batch` run per size of
# configs/gpus.yaml's `sizes` (each as --memory_limit, so the device behaves as a card of that
# memory), one on the whole device, then the table (tools/max_batch_table.py, with the article's
# EfficientNet figures beside ours).
#   bash tools/max_batch_sweep.sh [CONFIG] [OUT_DIR]
# CONFIG defaults to configs/max_batch.yaml, OUT_DIR to results/max_batch. BIN picks the binary
# (build/release/cnnbench); SIZES overrides the list ("8 16 24 whole"); LIMIT_S stops each size's run
# after that many seconds (a search cut off keeps its bracket: every batch tried is in the run's
# results lines, which the table reads); CAP is the searches' largest batch (default 32768: beyond
# it a cell reads ">= 32768"); EXTRA adds flags.
set -uo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-configs/max_batch.yaml}
OUT=${2:-results/max_batch}
BIN=${BIN:-build/release/cnnbench}
[ -x "$BIN" ] || { echo "max_batch_sweep: no $BIN (bash tools/build.sh builds it)" >&2; exit 2; }
mkdir -p "$OUT"
sizes=${SIZES:-"$(sed -n 's/^sizes: *\[\(.*\)\].*/\1/p' configs/gpus.yaml | tr -d ',') whole"}
for s in $sizes; do
  limit=(); [ "$s" = whole ] || limit=(--memory_limit="$s")
  stop=(); [ -n "${LIMIT_S:-}" ] && stop=(timeout "$LIMIT_S")
  "${stop[@]}" "$BIN" --config="$CONFIG" --max_batch "${limit[@]}" --benchmark_filter=/max_batch \
    --benchmark_out="$OUT/max_batch_$s.json" --max_batch_cap="${CAP:-32768}" ${EXTRA:-} >"$OUT/max_batch_$s.log" 2>&1
  echo "max_batch_sweep: $s: exit $?, $(grep -c '^cnnbench: max batch' "$OUT/max_batch_$s.log") attempts," \
    "$(grep -c '"largest_batch"' "$OUT/max_batch_$s.jsonl") searches whole"
done
python3 tools/max_batch_table.py "$OUT"/max_batch_*.jsonl --article --out-md "$OUT/max_batch.md"
