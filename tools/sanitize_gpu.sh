#!/usr/bin/env bash
# compute-sanitizer over the zoo (issue 10): every network of NETS at batch BATCH (default 2), in
# each precision of PRECISIONS, inference (cnnbench_infer, heuristic engines, one eager forward
# and the graph's check) and training (cnnbench_train_step --check_finite=1: one eager step,
# forward, backward and the optimizer), under each tool of TOOLS (memcheck racecheck initcheck
# synccheck). One process per (network, precision, mode, tool), RUN_TIMEOUT seconds each (the
# tools slow a run 10-100x).
#
#   NETS="resnet50 efficientnet_b0" TOOLS=memcheck JOBS=6 bash tools/sanitize_gpu.sh OUT_DIR
#   NETS= TOOLS=racecheck TESTS='GpuKernels.*:GpuOps.*' bash tools/sanitize_gpu.sh OUT_DIR
#
# JOBS: racecheck and synccheck hold much of the card's memory for their own tracking; call 77 ran
# 12 at once and lost runs to out-of-memory and "Device not supported". 8 memcheck/initcheck runs
# at once were fine (call 75); keep racecheck and synccheck to 4. MIN_FREE_MB: a run waits for
# one of ours to end while the host has less available (default 16384; see spawn()).
#
# Writes OUT_DIR/<net>_<precision>_<mode>_<tool>.log and OUT_DIR/summary.md: one row a run with
# the errors the tool counted ("ERROR SUMMARY: N errors"), its exit status, and where the first
# error points (the kernel name in the report: ours are in namespace cnnbench, cuDNN's and
# cuBLAS's are not). Needs compute-sanitizer (SANITIZER, else on PATH, else CUDA's) and the built
# binaries (BIN, default build/release). Our own kernels that heuristics would not pick run
# forced (OURS_INFER, default --depthwise=cnnbench --stem=cnnbench; OURS_TRAIN, default
# --stem=cnnbench), so that the tools see them too; set them empty for cuDNN's choices alone.
# EXTRA_ARGS go to both binaries (e.g. --exclude_engines=... to see whether a report follows a
# cuDNN engine); the summary names them.
set -u
OUT=${1:?usage: tools/sanitize_gpu.sh OUT_DIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
B=${BIN:-build/release}
CS=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$CS" ] || { echo "sanitize_gpu: no compute-sanitizer (looked on PATH and in /usr/local/cuda/bin)" >&2; exit 2; }
NETS=${NETS-"alexnet alexnet_lrn vgg16_bn inception_bn inception_v3 resnet50 resnet152 efficientnet_b0"}
PRECISIONS=${PRECISIONS:-"fp16 fp32"}
TOOLS=${TOOLS:-"memcheck racecheck initcheck synccheck"}
MODES=${MODES:-"infer train"}
T=${RUN_TIMEOUT:-300}
# BATCH (default 2): the networks' batch. Unfiltered racecheck held up to 125 GB of host memory in
# one process and the OOM killer ended it (calls 128 and 129); batch 1 is the smallest run there is.
BATCH=${BATCH:-2}
[[ "$BATCH" =~ ^[1-9][0-9]{0,3}$ ]] || { echo "sanitize_gpu: BATCH='$BATCH' is not a batch size (1 to 9999)" >&2; exit 2; }
# BUDGET: seconds for the whole script (a device call's limit); each run's timeout is cut to what
# is left, and a run with under 15 s left is not started (its row says so). Nothing outlives it.
END=$((SECONDS + ${BUDGET:-1000000}))
read -r -a OURS_I <<<"${OURS_INFER---depthwise=cnnbench --stem=cnnbench}"
read -r -a OURS_T <<<"${OURS_TRAIN---stem=cnnbench}"
read -r -a EXTRA <<<"${EXTRA_ARGS:-}"
# LEAN_TOOLS (default racecheck): under these tools a run does the least work that still runs
# every kernel of the network: inference is one eager forward (cnnbench_infer --eager) instead of
# the graph path's eager forward, capture and replays, and neither binary replays each conv plan
# from a CUDA graph at build to check it (--check_replays), which ran each conv three times more.
# racecheck looks for shared-memory hazards inside each launch, which a replay repeats but does
# not change; whole networks under it took over 300 s a run (calls 76, 102, 109). LEAN_TOOLS=
# keeps the full runs.
read -r -a LEAN_A <<<"${LEAN_TOOLS-racecheck}"
lean_for() {
  local t
  for t in "${LEAN_A[@]}"; do [ "$t" = "$1" ] && return 0; done
  return 1
}
# TOOL_ARGS go to compute-sanitizer itself, every run (e.g. "--racecheck-memcpy-async no" to see
# whether a tool failure follows the tracking of asynchronous copies); the summary names them.
read -r -a TOOL_ARGS_A <<<"${TOOL_ARGS:-}"
# PRINT_LIMIT: the errors a run's log shows (the tool's --print-limit, default 20). The matrix
# (tools/sanitizer_matrix.py) calls a racecheck cell VENDOR only where the log shows every error
# it counted, so runs that may report many vendor races want more.
PRINT_LIMIT=${PRINT_LIMIT:-20}
[[ $PRINT_LIMIT =~ ^[1-9][0-9]*$ ]] || { echo "sanitize_gpu: PRINT_LIMIT must be a positive whole number, got '$PRINT_LIMIT'" >&2; exit 2; }
# Tool options this compute-sanitizer has (CUDA 13.0's tool):
# - initcheck and memcheck track TMA bulk copies (Hopper's cuDNN kernels store through them) only
#   with --check-bulk-copy yes. (initcheck's 50,156 reports on ResNet-50 in calls 60 to 68 were not
#   that: they were the maxpool output read by layer1's convs while autotuned at build, before it
#   was ever written; the arena is zeroed at allocation since, and call 69 found 0.)
# - synccheck and racecheck track cuda::barrier objects (--num-cuda-barriers). No one count suits
#   every run (calls 93 to 99, results/2026-12-06_h100): with 4,096 ResNet-50's and
#   EfficientNet-B0's fp16 inference overflowed ("Detected overflow of tracked cuda::barrier
#   structures"), after which a cuDNN launch failed (error 719) or every engine of a shape did;
#   with 16,384 ResNet-50 fp16 ran clean, but ResNet-50 fp32 and Inception-v3 ran the tool out of
#   its own memory and left 124 to 1,148 launches unchecked, which they did not at 4,096.
#   SYNC_BARRIERS is therefore a ladder (default "4096 16384 32768"): a run starts at the first
#   count and, where its log reports the overflow, runs again at the next; the earlier log is kept
#   beside it (.barriersN.log) and the row names the counts tried. The summary counts the tool's
#   "Internal Sanitizer Error" launches (unchecked) apart from findings.
HELP=$("$CS" --help 2>&1)
has() { grep -q -- "$1" <<<"$HELP"; }
# KERNELS: check only the kernels this filter names (e.g. kns=cnnbench: ours, all in namespace
# cnnbench); the others run unchecked. racecheck over whole networks takes minutes a run (call 76:
# AlexNet fp32 over 300 s, VGG-16 fp16 over 250 s), nearly all of it in cuDNN's and cuBLAS's
# kernels. The option is --kernel-name in newer tools and --filter in older ones.
FILTER=()
if [ -n "${KERNELS:-}" ]; then
  if has --kernel-name; then FILTER=(--kernel-name "$KERNELS"); else FILTER=(--filter "$KERNELS"); fi
fi
# EXCLUDE_KERNELS: filters (space-separated, e.g. "kns=nvjet kns=xmma") of kernels left unchecked,
# each its own --kernel-name-exclude (--exclude in older tools); everything else is checked.
# DeepGEMM's sanitizer runs exclude cuBLAS's nvjet kernels so. The other way to skip cuDNN's and
# cuBLAS's kernels: KERNELS=kns=cnnbench made every fp16 racecheck run fail with "The Sanitizer
# failed to handle a hardware exception" (calls 77 and 78); whether excluding does too is open.
EXCLUDE=()
for f in ${EXCLUDE_KERNELS:-}; do
  if has --kernel-name-exclude; then EXCLUDE+=(--kernel-name-exclude "$f"); else EXCLUDE+=(--exclude "$f"); fi
done
# BLOCKING=1: every launch blocking (--force-blocking-launches, with "yes" only where the tool's
# help gives the option a value: CUDA 13's takes none, and "yes" made every run exit 255 in call
# 82), so the tool tracks one launch at a time. A guess, not yet tried here, at synccheck's "Unable to allocate enough memory ...
# didn't track the launch" (103 to 3,836 launches a run in call 77): cuDF's sanitizer runs took
# it for the tool running out of memory and added this option, and DeepGEMM's runs use it too.
tool_opts() {
  if [ "${BLOCKING:-0}" = 1 ] && has --force-blocking-launches; then
    if grep -qE -- "--force-blocking-launches +<" <<<"$HELP"; then
      echo -n "--force-blocking-launches yes "
    else
      echo -n "--force-blocking-launches "
    fi
  fi
  case $1 in
    initcheck) has --check-bulk-copy && echo "--check-bulk-copy yes" ;;
    memcheck) has --check-bulk-copy && echo "--check-bulk-copy yes" ;;
    synccheck | racecheck)
      [ "${BARRIERS[0]}" != off ] && has --num-cuda-barriers && echo "--num-cuda-barriers ${2:-${BARRIERS[0]}}" ;;
  esac
}
read -r -a BARRIERS <<<"${SYNC_BARRIERS:-4096 16384 32768}"
((${#BARRIERS[@]} > 0)) || { echo "sanitize_gpu: SYNC_BARRIERS is empty (give one count or more, e.g. '4096 16384')" >&2; exit 2; }
# SYNC_BARRIERS=off: no --num-cuda-barriers at all (the tool's own default).
if [ "${BARRIERS[*]}" != off ]; then
  for b in "${BARRIERS[@]}"; do
    [[ $b =~ ^[1-9][0-9]*$ ]] || { echo "sanitize_gpu: SYNC_BARRIERS must be positive whole numbers or off, got '$b'" >&2; exit 2; }
  done
fi
# The counts a synccheck or racecheck run may take: the ladder where the tool has the option.
barrier_ladder() {
  case $1 in synccheck | racecheck) [ "${BARRIERS[0]}" != off ] && has --num-cuda-barriers && echo "${BARRIERS[*]}" && return ;; esac
  echo 0
}
OVERFLOW="Detected overflow of tracked cuda::barrier"
S="$OUT/summary.md"
{
  for tool in $TOOLS; do
    ladder=($(barrier_ladder "$tool"))
    more=""
    ((${#ladder[@]} > 1)) && more=" (again with ${ladder[*]:1} while the tool reports a cuda::barrier overflow)"
    echo "- $tool: \`$(tool_opts "$tool")\`$more"
  done
  [ "$BATCH" != 2 ] && echo "- every network at batch $BATCH"
  [ ${#EXTRA[@]} -gt 0 ] && echo "- every run with \`${EXTRA[*]}\`"
  [ ${#TOOL_ARGS_A[@]} -gt 0 ] && echo "- every run's tool with \`${TOOL_ARGS_A[*]}\`"
  [ ${#LEAN_A[@]} -gt 0 ] && echo "- lean runs (inference \`--eager --check_replays=false\`, training \`--check_replays=0\`) under: ${LEAN_A[*]}"
  [ ${#FILTER[@]} -gt 0 ] && echo "- only the kernels \`${FILTER[*]}\` names are checked"
  [ ${#EXCLUDE[@]} -gt 0 ] && echo "- the kernels \`${EXCLUDE[*]}\` names are not checked"
  echo
  echo "| network | precision | mode | tool | errors | of which unchecked launches | exit | s | first error in |"
  echo "|---|---|---|---|---:|---:|---:|---:|---|"
} >"$S"
# One run: its log, and its summary row in $OUT/rows/ (sorted into the summary at the end, so that
# runs may go in parallel: JOBS of them at once, default 1; the tools' slowdown is mostly on the
# host, and batch 2 leaves the card nearly idle).
run_one() {
  local net=$1 p=$2 mode=$3 tool=$4 i=$5
  local log="$OUT/${net}_${p}_${mode}_${tool}.log" cmd extra rc errors untracked first t0=$SECONDS
  local t=$T row="$OUT/rows/$(printf %04d "$i")"
  ((END - SECONDS < t)) && t=$((END - SECONDS))
  if ((t < 15)); then
    echo "| $net | $p | $mode | $tool | – | – | – | 0 | (not run: BUDGET spent) |" >"$row"
    return
  fi
  if [ "$mode" = tests ]; then
    cmd=("$B/tests/test_gpu" --gtest_filter="$TESTS" --gtest_brief=1)
  elif [ "$mode" = infer ]; then
    cmd=("$B/cnnbench_infer" --network="$net" --precision="$p" --batch="$BATCH"
         --engine=heuristic --output="/tmp/sanitize_$$_$i.safetensors" "${OURS_I[@]}" "${EXTRA[@]}")
    lean_for "$tool" && cmd+=(--eager --check_replays=false)
  else
    cmd=("$B/cnnbench_train_step" --network="$net" --precision="$p" --batch="$BATCH"
         --engine=heuristic --breakdown="/tmp/sanitize_$$_$i.json" --check_finite=1 "${OURS_T[@]}" "${EXTRA[@]}")
    lean_for "$tool" && cmd+=(--check_replays=0)
  fi
  # racecheck and synccheck look at shared memory and barriers only; memcheck and
  # initcheck at global memory. --check-device-heap no: none of our kernels mallocs.
  local b last tried=() ladder=($(barrier_ladder "$tool"))
  rm -f "${log%.log}".barriers*.log  # an earlier run's, into the same OUT_DIR
  for b in "${ladder[@]}"; do
    if [ -n "${last:-}" ]; then  # the last count overflowed: keep its log, try the next
      t=$((t < END - SECONDS ? t : END - SECONDS))
      ((t < 15)) && { tried+=("($b not run: BUDGET spent)"); break; }
      mv "$log" "${log%.log}.barriers$last.log"
    fi
    read -r -a extra <<<"$(tool_opts "$tool" "$b")"
    timeout "$t" "$CS" --tool "$tool" "${extra[@]}" "${TOOL_ARGS_A[@]}" "${FILTER[@]}" "${EXCLUDE[@]}" --print-limit "$PRINT_LIMIT" "${cmd[@]}" >"$log" 2>&1
    rc=$?
    last=$b
    tried+=("$b")
    [ "$rc" = 124 ] && break  # more barriers will not finish a run that ran out of time
    grep -q "$OVERFLOW" "$log" || break
  done
  errors=$(grep -oE "ERROR SUMMARY: [0-9]+" "$log" | tail -1 | grep -oE "[0-9]+$")
  # racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)" instead.
  [ -z "$errors" ] && errors=$(grep -oE "RACECHECK SUMMARY: .*\(([0-9]+) errors" "$log" | tail -1 | grep -oE "[0-9]+ errors" | grep -oE "[0-9]+")
  [ -z "$errors" ] && errors="?"
  # The tool's own failures ("Internal Sanitizer Error: ... didn't track the launch") count
  # in its ERROR SUMMARY but are no finding: launches it did not check.
  untracked=$(grep -c "Internal Sanitizer Error" "$log")
  first=$(grep -v "Internal Sanitizer Error" "$log" | grep -m1 -E "^=========     at .*|^========= .* in |CUDA error [0-9]+|Race reported between" |
    sed -E 's/^=* *//; s/^Error: Race reported between //' | cut -c1-90)
  [ "$rc" = 124 ] && first="(timed out after ${t} s)"
  # Where the counts were climbed, or the last one still overflowed, the row says so: such a run
  # checked less than it seems (the tool's warning: "Results might be incorrect").
  local note=""
  ((${#tried[@]} > 1)) && note="barriers ${tried[*]}"
  if [ "$last" != 0 ] && grep -q "$OVERFLOW" "$log"; then
    note="cuda::barrier overflow at $last: incomplete${note:+; $note}"
  fi
  [ -n "$note" ] && first="${first:-–} ($note)"
  # The tool passes on the target's death by a signal as that number (calls 82 and 85: racecheck's
  # test_gpu ended with 9 and no gtest output; HOST_MEM below records whether the host ran short).
  # Only where the target left no summary of its own: no gtest result line, no error line of ours.
  if [ -z "${first:-}" ] && grep -q "didn't terminate successfully" "$log" &&
    ! grep -qE '^\[ +(PASSED|FAILED) +\]|^cnnbench[a-z_]*: ' "$log"; then
    first="(the target ended with status $rc and no summary of its own)"
    # Killed by a signal (9: what the kernel's OOM killer sends): the host's memory while it ran,
    # from the samples since the one before it started (calls 128 and 129: available memory fell
    # to 2 to 6 GiB of 128 while unfiltered racecheck runs died with 9). Other runs going at the
    # same time (JOBS) count too: the host's, not this process's.
    local low
    low=$(window_mem "$t0")
    [ -n "$low" ] && first="${first%)}; the host had as little as $low while it ran)"
  fi
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$net" "$p" "$mode" "$tool" "$errors" \
    "$untracked" "$rc" "$((SECONDS - t0))" "${first:-–}" >"$row"
  echo "sanitize_gpu: $net $p $mode $tool: errors $errors ($untracked unchecked launches), exit $rc, $((SECONDS - t0)) s"
  rm -f "/tmp/sanitize_$$_$i.safetensors" "/tmp/sanitize_$$_$i.json"
}
# run_one in the background, once fewer than JOBS runs are going and, while any of ours is
# going, the host has MIN_FREE_MB (default 16384) available (MemAvailable, the whole host's: other
# invocations' runs count too). Call 102 ran six tool processes in three invocations; StyleGAN-XL's
# alone held 116 GB, available memory fell to 1.3 GB, and two runs died with status 9 and no
# message of their own. A run starts whatever the memory when none of ours is going, so nothing
# waits forever.
running() { jobs -rp | grep -vcx "${MEM_PID:-none}"; }
avail_mb() { awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo 2>/dev/null || echo 0; }
spawn() {
  while [ "$(running)" -ge "${JOBS:-1}" ]; do wait -n; done
  while [ "$(running)" -gt 0 ] && [ "$(avail_mb)" -lt "${MIN_FREE_MB:-16384}" ]; do
    [ -z "${WAITED:-}" ] && echo "sanitize_gpu: waiting for host memory (under ${MIN_FREE_MB:-16384} MiB available)" >&2
    WAITED=1
    wait -n
  done
  run_one "$@" &
}
rm -rf "$OUT/rows" && mkdir -p "$OUT/rows"
# The host's memory every 5 s while the runs go (used and available MiB, and the largest process's
# resident MiB), to OUT_DIR/host_mem.log: the tools hold much host memory, and a run killed for it
# leaves no message of its own.
# (Needs procps's free and ps; without them nothing is sampled and the summary says so.)
# The lowest available MiB and the largest resident process in host_mem.log's samples from the
# one before second $1 on: "N MiB available (largest process M MiB)", or nothing if none.
window_mem() {
  [ -f "$OUT/host_mem.log" ] || return 0
  awk -v a="$1" '$1 + 5 >= a && $6 != "" {
      if (min == "" || $6 < min) min = $6
      if ($8 > max) max = $8 }
    END { if (min != "") printf "%d MiB available (largest process %d MiB)", min, max }' "$OUT/host_mem.log"
}
mem_sample() {
  echo "$SECONDS s $(free -m | awk '/^Mem:/ {print "used", $3, "available", $7}') top_rss_mib" \
    "$(ps -eo rss= --sort=-rss | head -1 | awk '{print int($1 / 1024)}')"
}
MEM_PID=none
if command -v free >/dev/null && command -v ps >/dev/null; then
  mem_sample >"$OUT/host_mem.log" 2>&1  # the first sample before any run: never an empty log
  (while sleep 5; do mem_sample; done) >>"$OUT/host_mem.log" 2>&1 &
  MEM_PID=$!
  trap 'kill $MEM_PID 2>/dev/null' EXIT
fi
i=0
for net in $NETS; do
  for p in $PRECISIONS; do
    for mode in $MODES; do
      for tool in $TOOLS; do
        i=$((i + 1))
        spawn "$net" "$p" "$mode" "$tool" "$i"
      done
    done
  done
done
# TESTS: a gtest filter over tests/test_gpu, once per tool (row "test_gpu | all | tests"): our kernels
# on the unit tests' small inputs, where racecheck without a kernel filter finishes (call 78: its
# filter breaks fp16 runs that use cuBLAS's nvjet kernels; whole networks take minutes a run).
if [ -n "${TESTS:-}" ]; then
  for tool in $TOOLS; do
    i=$((i + 1))
    spawn test_gpu all tests "$tool" "$i"
  done
fi
wait_runs() { for p in $(jobs -rp); do [ "$p" != "$MEM_PID" ] && wait "$p"; done; }
wait_runs
cat "$OUT"/rows/* >>"$S" 2>/dev/null
if [ "$MEM_PID" != none ]; then
  kill $MEM_PID 2>/dev/null
  mem_sample >>"$OUT/host_mem.log" 2>&1
  printf '\n- host memory while the runs went (`host_mem.log`): lowest available %s MiB, largest process %s MiB resident\n' \
    "$(awk '{print $6}' "$OUT/host_mem.log" | sort -n | head -1)" \
    "$(awk '{print $8}' "$OUT/host_mem.log" | sort -n | tail -1)" >>"$S"
else
  printf '\n- host memory: not sampled (no free or ps here)\n' >>"$S"
fi
rm -rf "$OUT/rows"
cat "$S"
