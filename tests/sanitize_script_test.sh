#!/usr/bin/env bash
# tools/sanitize_gpu.sh without a GPU: a missing compute-sanitizer is one clear line and exit 2;
# with a stand-in sanitizer that reports errors, the summary table counts them per run and names
# where the first points.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
err=$(SANITIZER=/nonexistent/compute-sanitizer bash "$SRC/tools/sanitize_gpu.sh" "$T/none" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] || fail "missing sanitizer: exit $rc, expected 2"
[[ "$err" == *"no compute-sanitizer"* ]] || fail "missing sanitizer: message '$err'"
cat >"$T/fake-sanitizer" <<'FAKE'
#!/usr/bin/env bash
# Reports two errors for memcheck on training, none otherwise.
tool=$2
if [ "$tool" = memcheck ] && [[ "$*" == *cnnbench_train_step* ]]; then
  echo "========= Invalid __global__ read of size 2 bytes"
  echo "=========     at cnnbench::bn_stats_vec<__half, 8>(...)+0x1a0"
  echo "========= ERROR SUMMARY: 2 errors"
else
  echo "========= ERROR SUMMARY: 0 errors"
fi
exit 0
FAKE
chmod +x "$T/fake-sanitizer"
SANITIZER="$T/fake-sanitizer" NETS=resnet50 PRECISIONS=fp16 TOOLS="memcheck initcheck" \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/out" >/dev/null 2>&1 || fail "stand-in run failed"
S="$T/out/summary.md"
[ -f "$S" ] || fail "no summary"
grep -q "| resnet50 | fp16 | train | memcheck | 2 | 0 | at cnnbench::bn_stats_vec" "$S" || fail "train memcheck row: $(cat "$S")"
grep -q "| resnet50 | fp16 | infer | memcheck | 0 | 0 |" "$S" || fail "infer memcheck row: $(cat "$S")"
[ "$(grep -c '^| resnet50' "$S")" -eq 4 ] || fail "expected 4 rows: $(cat "$S")"
echo "sanitize script: ok"
