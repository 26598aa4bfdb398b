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
echo "args: $*"
if [ "$tool" = memcheck ] && [[ "$*" == *cnnbench_train_step* ]]; then
  echo "========= Invalid __global__ read of size 2 bytes"
  echo "=========     at cnnbench::bn_stats_vec<__half, 8>(...)+0x1a0"
  echo "========= ERROR SUMMARY: 2 errors"
elif [ "$tool" = racecheck ]; then
  echo "========= Error: Race reported between Read access at nvjet_sm90_hsh_64x8_splitK_bias_TNT+0xb30"
  echo "=========     and Write access at nvjet_sm90_hsh_64x8_splitK_bias_TNT+0x2f60 [192 hazards]"
  echo "========= RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warnings)"
elif [ "$tool" = initcheck ] && [[ "$*" == *cnnbench_infer* ]]; then
  # The tool's own failures (as synccheck's in call 68): counted apart, never named as the first.
  for k in 1 2 3; do
    echo "========= Internal Sanitizer Error: The Sanitizer encountered an error while launching sm80_xmma_fprop_$k and didn't track the launch. Errors might go undetected. (Unable to allocate enough memory to perform the requested operation)"
  done
  echo "========= Uninitialized __global__ memory read of size 4 bytes"
  echo "=========     at cnnbench::pool_vec<float>(...)+0x40"
  echo "========= ERROR SUMMARY: 4 errors"
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
grep -qE "\| resnet50 \| fp16 \| train \| memcheck \| 2 \| 0 \| 0 \| [0-9]+ \| at cnnbench::bn_stats_vec" "$S" || fail "train memcheck row: $(cat "$S")"
grep -qE "\| resnet50 \| fp16 \| infer \| memcheck \| 0 \| 0 \| 0 \| [0-9]+ \|" "$S" || fail "infer memcheck row: $(cat "$S")"
grep -qE "\| resnet50 \| fp16 \| infer \| initcheck \| 4 \| 3 \| 0 \| [0-9]+ \| at cnnbench::pool_vec" "$S" ||
  fail "unchecked launches not counted apart: $(cat "$S")"
[ "$(grep -c '^| resnet50' "$S")" -eq 4 ] || fail "expected 4 rows: $(cat "$S")"
# JOBS runs in parallel: the same rows, in the same order, as one at a time.
SANITIZER="$T/fake-sanitizer" NETS="resnet50 alexnet vgg16_bn" PRECISIONS="fp16 fp32" TOOLS="memcheck initcheck" \
  JOBS=5 bash "$SRC/tools/sanitize_gpu.sh" "$T/par" >/dev/null 2>&1 || fail "parallel run failed"
SANITIZER="$T/fake-sanitizer" NETS="resnet50 alexnet vgg16_bn" PRECISIONS="fp16 fp32" TOOLS="memcheck initcheck" \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/ser" >/dev/null 2>&1 || fail "serial run failed"
strip() { grep '^| [a-z]' "$1" | grep -v '^| network' | cut -d'|' -f2-8; }
[ "$(strip "$T/par/summary.md" | wc -l)" -eq 24 ] || fail "parallel run: $(strip "$T/par/summary.md" | wc -l) rows, expected 24"
[ "$(strip "$T/par/summary.md")" = "$(strip "$T/ser/summary.md")" ] || fail "parallel rows differ from serial"
# racecheck's own summary line, and the kernel filter where this tool has one.
SANITIZER="$T/fake-sanitizer" NETS=resnet50 PRECISIONS=fp16 TOOLS=racecheck MODES=infer KERNELS=kns=cnnbench \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/race" >/dev/null 2>&1 || fail "racecheck run failed"
grep -qE "\| resnet50 \| fp16 \| infer \| racecheck \| 2 \| 0 \| 0 \| [0-9]+ \| Read access at nvjet_sm90_hsh_64x8_splitK" "$T/race/summary.md" ||
  fail "racecheck row: $(cat "$T/race/summary.md")"
grep -q -- "--filter kns=cnnbench" "$T/race/resnet50_fp16_infer_racecheck.log" || fail "KERNELS not passed as --filter"
grep -q -- "only the kernels \`--filter kns=cnnbench\` names" "$T/race/summary.md" || fail "summary without the filter"
# MIN_FREE_MB: with more asked for than any host has, runs go one at a time whatever JOBS says
# (each run marks its start and end; no start may come before the last one's end).
cat >"$T/marking-sanitizer" <<'FAKE'
#!/usr/bin/env bash
echo "start" >>"$MARKS"; sleep 0.3; echo "end" >>"$MARKS"
echo "========= ERROR SUMMARY: 0 errors"
FAKE
chmod +x "$T/marking-sanitizer"
MARKS="$T/marks" SANITIZER="$T/marking-sanitizer" NETS="resnet50 alexnet" PRECISIONS="fp16 fp32" MODES=infer \
  TOOLS=memcheck JOBS=4 MIN_FREE_MB=999999999 bash "$SRC/tools/sanitize_gpu.sh" "$T/mem" >/dev/null 2>"$T/mem.err" ||
  fail "memory-guarded run failed"
# (The tool's --help, asked once before any run, marks a pair of its own.)
[[ "$(tr '\n' ' ' <"$T/marks")" =~ ^(start\ end\ ){5}$ ]] ||
  fail "runs overlapped under MIN_FREE_MB: $(tr '\n' ' ' <"$T/marks")"
grep -q "waiting for host memory" "$T/mem.err" || fail "no word of the wait: $(cat "$T/mem.err")"
# And with the guard met, JOBS=4 runs them together (some start before an end).
rm -f "$T/marks"
MARKS="$T/marks" SANITIZER="$T/marking-sanitizer" NETS="resnet50 alexnet" PRECISIONS="fp16 fp32" MODES=infer \
  TOOLS=memcheck JOBS=4 MIN_FREE_MB=0 bash "$SRC/tools/sanitize_gpu.sh" "$T/mem0" >/dev/null 2>&1 ||
  fail "unguarded run failed"
[ "$(sed -n 3,4p "$T/marks" | tr '\n' ' ')" = "start start " ] ||  # after --help's pair
  fail "JOBS=4 ran one at a time: $(tr '\n' ' ' <"$T/marks")"
# EXCLUDE_KERNELS: one exclude option a filter (the older tool's name here), named in the summary.
SANITIZER="$T/fake-sanitizer" NETS=resnet50 PRECISIONS=fp16 TOOLS=racecheck MODES=infer \
  EXCLUDE_KERNELS="kns=nvjet kns=xmma" bash "$SRC/tools/sanitize_gpu.sh" "$T/excl" >/dev/null 2>&1 ||
  fail "excluding run failed"
grep -q -- "--exclude kns=nvjet --exclude kns=xmma --print-limit" "$T/excl/resnet50_fp16_infer_racecheck.log" ||
  fail "EXCLUDE_KERNELS not passed as --exclude: $(cat "$T/excl/resnet50_fp16_infer_racecheck.log")"
grep -q -- "the kernels \`--exclude kns=nvjet --exclude kns=xmma\` names are not checked" "$T/excl/summary.md" ||
  fail "summary without the exclusions"
# TESTS: the GPU unit tests under each tool, once, with no network (NETS empty).
SANITIZER="$T/fake-sanitizer" NETS= TOOLS="racecheck memcheck" TESTS='GpuKernels.*:GpuOps.*' \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/tests" >/dev/null 2>&1 || fail "tests run failed"
[ "$(grep -c '^| test_gpu | all | tests |' "$T/tests/summary.md")" -eq 2 ] || fail "tests rows: $(cat "$T/tests/summary.md")"
[ "$(grep -c '^| [a-z]' "$T/tests/summary.md")" -eq 3 ] || fail "rows beyond the tests': $(cat "$T/tests/summary.md")"
grep -q -- "tests/test_gpu --gtest_filter=GpuKernels.\*:GpuOps.\* --gtest_brief=1" "$T/tests/test_gpu_all_tests_racecheck.log" ||
  fail "test_gpu not run with the filter: $(cat "$T/tests/test_gpu_all_tests_racecheck.log")"
# BUDGET spent: no run starts, and every row says so.
SANITIZER="$T/fake-sanitizer" NETS=resnet50 PRECISIONS=fp16 TOOLS=memcheck BUDGET=5 \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/budget" >/dev/null 2>&1 || fail "budget run failed"
grep -q "| resnet50 | fp16 | train | memcheck | – | – | – | 0 | (not run: BUDGET spent) |" "$T/budget/summary.md" ||
  fail "budget row: $(cat "$T/budget/summary.md")"
[ -e "$T/budget/resnet50_fp16_train_memcheck.log" ] && fail "a run started with its BUDGET spent"
# Our kernels forced where heuristics would take cuDNN's: the stem and depthwise kernels.
grep -q -- "--depthwise=cnnbench --stem=cnnbench" "$T/out/resnet50_fp16_infer_memcheck.log" ||
  fail "inference without our kernels forced: $(cat "$T/out/resnet50_fp16_infer_memcheck.log")"
grep -q -- "--check_finite=1 --stem=cnnbench" "$T/out/resnet50_fp16_train_memcheck.log" ||
  fail "training without the stem kernel forced"
OURS_INFER= SANITIZER="$T/fake-sanitizer" NETS=resnet50 PRECISIONS=fp16 TOOLS=memcheck MODES=infer \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/plain" >/dev/null 2>&1 || fail "plain run failed"
grep -q -- "--depthwise" "$T/plain/resnet50_fp16_infer_memcheck.log" && fail "OURS_INFER= still forced"
EXTRA_ARGS="--exclude_engines=eng32 --x=1" SANITIZER="$T/fake-sanitizer" NETS=resnet50 PRECISIONS=fp16 \
  TOOLS=initcheck bash "$SRC/tools/sanitize_gpu.sh" "$T/extra" >/dev/null 2>&1 || fail "extra run failed"
for m in infer train; do
  grep -q -- "=cnnbench --exclude_engines=eng32 --x=1\|=1 --stem=cnnbench --exclude_engines=eng32 --x=1" \
    "$T/extra/resnet50_fp16_${m}_initcheck.log" || fail "EXTRA_ARGS not passed ($m)"
done
grep -q -- "every run with \`--exclude_engines=eng32 --x=1\`" "$T/extra/summary.md" || fail "summary without EXTRA_ARGS"
# Tool options, where this compute-sanitizer's --help lists them: TMA bulk copies tracked by
# initcheck and memcheck, more barriers for synccheck; none of them for a tool without them.
grep -q -- "--check-bulk-copy\|--num-cuda-barriers" "$T/out/resnet50_fp16_infer_initcheck.log" &&
  fail "options the stand-in does not list were passed"
cat >"$T/newer-sanitizer" <<'FAKE'
#!/usr/bin/env bash
[ "$1" = --help ] && { echo "  --check-bulk-copy <yes|no>"; echo "  --num-cuda-barriers <n>"; echo "  --kernel-name <filter>"; echo "  --kernel-name-exclude <filter>"; echo "  --force-blocking-launches <yes|no>"; exit 0; }
echo "args: $*"
echo "========= ERROR SUMMARY: 0 errors"
FAKE
chmod +x "$T/newer-sanitizer"
SANITIZER="$T/newer-sanitizer" NETS=resnet50 PRECISIONS=fp16 MODES=infer SYNC_BARRIERS=512 \
  TOOLS="initcheck synccheck racecheck" bash "$SRC/tools/sanitize_gpu.sh" "$T/newer" >/dev/null 2>&1 ||
  fail "newer run failed"
grep -q -- "--tool initcheck --check-bulk-copy yes " "$T/newer/resnet50_fp16_infer_initcheck.log" ||
  fail "initcheck without --check-bulk-copy: $(cat "$T/newer/resnet50_fp16_infer_initcheck.log")"
grep -q -- "--tool synccheck --num-cuda-barriers 512 " "$T/newer/resnet50_fp16_infer_synccheck.log" ||
  fail "synccheck without --num-cuda-barriers"
grep -q -- "--tool racecheck --num-cuda-barriers 512 " "$T/newer/resnet50_fp16_infer_racecheck.log" ||
  fail "racecheck without --num-cuda-barriers"
grep -q -- "--check-bulk-copy" "$T/newer/resnet50_fp16_infer_racecheck.log" &&
  fail "racecheck got initcheck's option"
grep -q -- "- initcheck: \`--check-bulk-copy yes\`" "$T/newer/summary.md" || fail "summary without options"
SANITIZER="$T/newer-sanitizer" NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS=racecheck KERNELS=kns=cnnbench \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/newk" >/dev/null 2>&1 || fail "newer filtered run failed"
grep -q -- "--kernel-name kns=cnnbench" "$T/newk/resnet50_fp16_infer_racecheck.log" || fail "KERNELS not passed as --kernel-name"
SANITIZER="$T/newer-sanitizer" NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS=racecheck EXCLUDE_KERNELS=kns=nvjet \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/newx" >/dev/null 2>&1 || fail "newer excluding run failed"
grep -q -- "--kernel-name-exclude kns=nvjet" "$T/newx/resnet50_fp16_infer_racecheck.log" ||
  fail "EXCLUDE_KERNELS not passed as --kernel-name-exclude"
grep -q -- "--force-blocking-launches" "$T/newk/resnet50_fp16_infer_racecheck.log" && fail "blocking launches without BLOCKING=1"
SANITIZER="$T/newer-sanitizer" NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS=synccheck BLOCKING=1 \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/block" >/dev/null 2>&1 || fail "blocking run failed"
grep -q -- "--tool synccheck --force-blocking-launches yes --num-cuda-barriers 4096 " "$T/block/resnet50_fp16_infer_synccheck.log" ||
  fail "BLOCKING=1 not passed: $(cat "$T/block/resnet50_fp16_infer_synccheck.log")"
# The barrier ladder (calls 93 to 99): a run whose log reports a cuda::barrier overflow runs again
# at the next count, the earlier log kept; a run that overflows at every count says it is
# incomplete; tools without the option run once. The stand-in overflows below $OVER_BELOW barriers.
cat >"$T/barrier-sanitizer" <<'FAKE'
#!/usr/bin/env bash
[ "$1" = --help ] && { echo "  --num-cuda-barriers <n>"; exit 0; }
echo "args: $*"
n=0
prev=
for a in "$@"; do [ "$prev" = --num-cuda-barriers ] && n=$a; prev=$a; done
if [ "$n" -gt 0 ] && [ "$n" -lt "$OVER_BELOW" ]; then
  echo "========= Warning: Detected overflow of tracked cuda::barrier structures. Results might be incorrect. Try using --num-cuda-barriers to fix the issue"
  echo "cnnbench_infer: CUDA error 719 (cudaErrorLaunchFailure: unspecified launch failure) in cudaDeviceSynchronize()"
  echo "========= ERROR SUMMARY: 1 error"
  exit 1
fi
echo "========= ERROR SUMMARY: 0 errors"
FAKE
chmod +x "$T/barrier-sanitizer"
OVER_BELOW=16384 SANITIZER="$T/barrier-sanitizer" NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS="synccheck memcheck" \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/ladder" >/dev/null 2>&1 || fail "ladder run failed"
grep -q "| resnet50 | fp16 | infer | synccheck | 0 | 0 | 0 | [0-9]* | – (barriers 4096 16384) |" "$T/ladder/summary.md" ||
  fail "ladder row: $(cat "$T/ladder/summary.md")"
grep -q -- "--num-cuda-barriers 16384 " "$T/ladder/resnet50_fp16_infer_synccheck.log" || fail "not rerun at 16384"
grep -q "Detected overflow" "$T/ladder/resnet50_fp16_infer_synccheck.barriers4096.log" || fail "the 4096 log was not kept"
[ "$(ls "$T/ladder" | grep -c barriers)" -eq 1 ] || fail "more than one earlier log: $(ls "$T/ladder")"
grep -q "| resnet50 | fp16 | infer | memcheck | 0 | 0 | 0 | [0-9]* | – |" "$T/ladder/summary.md" ||
  fail "memcheck row: $(cat "$T/ladder/summary.md")"
grep -q -- "- synccheck: \`--num-cuda-barriers 4096\` (again with 16384 32768 while" "$T/ladder/summary.md" ||
  fail "summary without the ladder: $(cat "$T/ladder/summary.md")"
OVER_BELOW=1000000 SANITIZER="$T/barrier-sanitizer" NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS=synccheck \
  SYNC_BARRIERS="1024 2048" bash "$SRC/tools/sanitize_gpu.sh" "$T/over" >/dev/null 2>&1 || fail "overflow run failed"
grep -q "| resnet50 | fp16 | infer | synccheck | 1 | 0 | 1 | [0-9]* | .*CUDA error 719.* (cuda::barrier overflow at 2048: incomplete; barriers 1024 2048) |" \
  "$T/over/summary.md" || fail "overflow row: $(cat "$T/over/summary.md")"
# A run that timed out does not climb: more barriers will not finish it.
cat >"$T/slow-sanitizer" <<'FAKE'
#!/usr/bin/env bash
[ "$1" = --help ] && { echo "  --num-cuda-barriers <n>"; exit 0; }
echo "args: $*"
echo "========= Warning: Detected overflow of tracked cuda::barrier structures. Results might be incorrect."
sleep 30
FAKE
chmod +x "$T/slow-sanitizer"
SANITIZER="$T/slow-sanitizer" NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS=synccheck RUN_TIMEOUT=15 \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/slow" >/dev/null 2>&1 || fail "slow run failed"
grep -q "| resnet50 | fp16 | infer | synccheck | ? | 0 | 124 | 1[5-9] | (timed out after 15 s) (cuda::barrier overflow at 4096: incomplete) |" \
  "$T/slow/summary.md" || fail "timed-out row: $(cat "$T/slow/summary.md")"
ls "$T/slow" | grep -q barriers && fail "a timed-out run climbed the ladder: $(ls "$T/slow")"
err=$(SYNC_BARRIERS=" " SANITIZER="$T/barrier-sanitizer" NETS=resnet50 TOOLS=synccheck \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/emptyb" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] && [[ "$err" == *"SYNC_BARRIERS is empty"* ]] || fail "blank SYNC_BARRIERS: exit $rc, '$err'"
err=$(SYNC_BARRIERS="4096 lots" SANITIZER="$T/barrier-sanitizer" NETS=resnet50 TOOLS=synccheck \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/badb" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] || fail "bad SYNC_BARRIERS: exit $rc, expected 2"
[[ "$err" == *"SYNC_BARRIERS must be positive whole numbers or off, got 'lots'"* ]] || fail "bad SYNC_BARRIERS: '$err'"
# SYNC_BARRIERS=off: racecheck without --num-cuda-barriers, once; TOOL_ARGS reach the tool, in
# the summary too.
SANITIZER="$T/newer-sanitizer" NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS=racecheck SYNC_BARRIERS=off \
  TOOL_ARGS="--racecheck-memcpy-async no" bash "$SRC/tools/sanitize_gpu.sh" "$T/offb" >/dev/null 2>&1 ||
  fail "SYNC_BARRIERS=off run failed"
L="$T/offb/resnet50_fp16_infer_racecheck.log"
grep -q -- "--num-cuda-barriers" "$L" && fail "SYNC_BARRIERS=off still passed --num-cuda-barriers: $(cat "$L")"
grep -q -- "--tool racecheck --racecheck-memcpy-async no --print-limit" "$L" || fail "TOOL_ARGS not passed: $(cat "$L")"
grep -q -- "every run's tool with \`--racecheck-memcpy-async no\`" "$T/offb/summary.md" || fail "summary without TOOL_ARGS"
grep -q "| resnet50 | fp16 | infer | racecheck | 0 | 0 | 0 |" "$T/offb/summary.md" || fail "SYNC_BARRIERS=off row: $(cat "$T/offb/summary.md")"
# PRINT_LIMIT reaches the tool; a bad one is refused before any run.
SANITIZER="$T/newer-sanitizer" NETS=resnet50 PRECISIONS=fp16 MODES=infer TOOLS=racecheck PRINT_LIMIT=500 \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/plim" >/dev/null 2>&1 || fail "PRINT_LIMIT=500 run failed"
grep -q -- "--print-limit 500 " "$T/plim/resnet50_fp16_infer_racecheck.log" ||
  fail "PRINT_LIMIT not passed: $(cat "$T/plim/resnet50_fp16_infer_racecheck.log")"
err=$(PRINT_LIMIT=lots SANITIZER="$T/newer-sanitizer" NETS=resnet50 TOOLS=racecheck \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/badplim" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] && [[ "$err" == *"PRINT_LIMIT must be a positive whole number, got 'lots'"* ]] ||
  fail "bad PRINT_LIMIT: exit $rc, '$err'"
[ -e "$T/badplim/summary.md" ] && fail "bad PRINT_LIMIT still ran"
# LEAN_TOOLS: racecheck's runs are lean by default (inference eager, no replay checks at build in
# either binary), memcheck's not; empty: none is.
SANITIZER="$T/newer-sanitizer" NETS=resnet50 PRECISIONS=fp16 TOOLS="racecheck memcheck" \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/lean" >/dev/null 2>&1 || fail "lean run failed"
grep -q -- "cnnbench_infer .* --eager --check_replays=false$" "$T/lean/resnet50_fp16_infer_racecheck.log" ||
  fail "racecheck inference not lean: $(cat "$T/lean/resnet50_fp16_infer_racecheck.log")"
grep -q -- "cnnbench_train_step .* --check_replays=0$" "$T/lean/resnet50_fp16_train_racecheck.log" ||
  fail "racecheck training not lean: $(cat "$T/lean/resnet50_fp16_train_racecheck.log")"
grep -q -- "--eager\|--check_replays" "$T/lean/resnet50_fp16_infer_memcheck.log" && fail "memcheck inference lean"
grep -q -- "--check_replays" "$T/lean/resnet50_fp16_train_memcheck.log" && fail "memcheck training lean"
grep -q -- "lean runs (.*) under: racecheck" "$T/lean/summary.md" || fail "summary without the lean runs"
SANITIZER="$T/newer-sanitizer" NETS=resnet50 PRECISIONS=fp16 TOOLS=racecheck LEAN_TOOLS= \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/full" >/dev/null 2>&1 || fail "LEAN_TOOLS= run failed"
grep -q -- "--eager\|--check_replays" "$T/full/resnet50_fp16_infer_racecheck.log" "$T/full/resnet50_fp16_train_racecheck.log" &&
  fail "LEAN_TOOLS= still lean"
# BATCH: the networks' batch, named in the summary; anything but a batch size is one line, exit 2.
SANITIZER="$T/fake-sanitizer" NETS=resnet50 PRECISIONS=fp16 TOOLS=memcheck BATCH=1 \
  bash "$SRC/tools/sanitize_gpu.sh" "$T/b1" >/dev/null 2>&1 || fail "BATCH=1 run failed"
grep -q -- "cnnbench_infer .*--batch=1 " "$T/b1/resnet50_fp16_infer_memcheck.log" || fail "BATCH=1 not passed on"
grep -q -- "cnnbench_train_step .*--batch=1 " "$T/b1/resnet50_fp16_train_memcheck.log" || fail "BATCH=1 not passed on (train)"
grep -q "^- every network at batch 1$" "$T/b1/summary.md" || fail "summary without the batch"
grep -q "at batch" "$T/out/summary.md" && fail "the default batch named in the summary"
err=$(SANITIZER="$T/fake-sanitizer" BATCH=0 bash "$SRC/tools/sanitize_gpu.sh" "$T/b0" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] && [[ "$err" == *"BATCH='0' is not a batch size"* ]] || fail "BATCH=0: exit $rc, '$err'"
# A target killed under the tool (calls 82 and 85: status 9, no gtest output): the row says so, and
# the host's memory is sampled while the runs go (host_mem.log and a line under the table).
# race_stand_in NAME STATUS LINE...: racecheck over TESTS='GpuOps.*' with a stand-in that prints
# the lines and exits with STATUS; the summary lands in $T/NAME.
race_stand_in() {
  local name=$1 status=$2 line
  shift 2
  {
    echo '#!/usr/bin/env bash'
    echo '[ "$1" = --help ] && exit 0'
    for line in "$@"; do printf 'echo %q\n' "$line"; done
    echo "exit $status"
  } >"$T/$name-sanitizer"
  chmod +x "$T/$name-sanitizer"
  SANITIZER="$T/$name-sanitizer" NETS= TOOLS=racecheck TESTS='GpuOps.*' \
    bash "$SRC/tools/sanitize_gpu.sh" "$T/$name" >/dev/null 2>&1 || fail "$name run failed"
}
race_stand_in killed 9 "========= Error: process didn't terminate successfully" \
  "========= Target application returned an error" \
  "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
grep -q "| test_gpu | all | tests | racecheck | 0 | 0 | 9 | [0-9]* | (the target ended with status 9 and no summary of its own" \
  "$T/killed/summary.md" || fail "killed row: $(cat "$T/killed/summary.md")"
if command -v free >/dev/null && command -v ps >/dev/null; then
  # The killed row carries the host's memory while it ran: a sample's available MiB.
  low=$(grep -oE "own; the host had as little as [0-9]+ MiB available \(largest process [0-9]+ MiB\) while it ran\) \|" \
    "$T/killed/summary.md" | grep -oE "[0-9]+ MiB available" | grep -oE "^[0-9]+")
  [ -n "$low" ] || fail "killed row without the host's memory: $(cat "$T/killed/summary.md")"
  awk -v m="$low" '$6 == m { found = 1 } END { exit !found }' "$T/killed/host_mem.log" ||
    fail "killed row's $low MiB is no sample of host_mem.log: $(cat "$T/killed/host_mem.log")"
  grep -qE "^[0-9]+ s used [0-9]+ available [0-9]+ top_rss_mib [0-9]+$" "$T/killed/host_mem.log" ||
    fail "host_mem.log: $(cat "$T/killed/host_mem.log")"
  grep -qE "^- host memory while the runs went .*lowest available [0-9]+ MiB, largest process [0-9]+ MiB" \
    "$T/killed/summary.md" || fail "no host memory line: $(cat "$T/killed/summary.md")"
else
  grep -q "^- host memory: not sampled" "$T/killed/summary.md" || fail "no 'not sampled' line"
fi
# A target that failed with a summary of its own (a gtest failure) is not labelled as killed.
race_stand_in failed 1 "[  FAILED  ] GpuOps.FusedConvMatchesReference" \
  "========= Error: process didn't terminate successfully" \
  "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
grep -q "| test_gpu | all | tests | racecheck | 0 | 0 | 1 | [0-9]* | – |" "$T/failed/summary.md" ||
  fail "gtest failure row: $(cat "$T/failed/summary.md")"
echo "sanitize script: ok"
