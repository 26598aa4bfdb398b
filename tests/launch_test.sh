#!/usr/bin/env bash
# cnnbench_launch (harness/launch_main.cpp) without a GPU: the ranks' environment, NVLink
# multicast forced off, several nodes, a failing rank stopping the others, a program that cannot
# run, bad flags and --quiet_ranks. $1: the launcher.
set -euo pipefail
L=${1:?usage: launch_test.sh PATH_TO_cnnbench_launch}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# run_launcher ARGS...: the launcher's stdout in $T/out, stderr in $T/err, exit status in $rc.
run_launcher() {
  rc=0
  "$L" "$@" >"$T/out" 2>"$T/err" || rc=$?
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
show='echo rank=$CNNBENCH_RANK/$CNNBENCH_WORLD_SIZE local=$CNNBENCH_LOCAL_RANK/$CNNBENCH_LOCAL_WORLD_SIZE nvls=$NCCL_NVLS_ENABLE addr=$CNNBENCH_MASTER_ADDR:$CNNBENCH_MASTER_PORT torch=$TORCH_SYMM_MEM_DISABLE_MULTICAST nvshmem=$NVSHMEM_DISABLE_NVLS'

# Three ranks on one node; NCCL_NVLS_ENABLE=1 of the caller's is overridden, with a note.
NCCL_NVLS_ENABLE=1 run_launcher --nproc=3 -- sh -c "$show"
[ "$rc" -eq 0 ] || fail "3 ranks: exit $rc: $(cat "$T/err")"
for r in 0 1 2; do
  grep -qx "rank=$r/3 local=$r/3 nvls=0 addr=127.0.0.1:29511 torch=1 nvshmem=1" "$T/out" ||
    fail "3 ranks: no line for rank $r in: $(cat "$T/out")"
done
[ "$(wc -l <"$T/out")" -eq 3 ] || fail "3 ranks: expected 3 lines: $(cat "$T/out")"
grep -q "NCCL_NVLS_ENABLE=1 overridden" "$T/err" || fail "no override note: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "override note: one line expected: $(cat "$T/err")"
# Without a conflicting NCCL_NVLS_ENABLE: no note.
env -u NCCL_NVLS_ENABLE "$L" --nproc 1 -- sh -c "$show" >"$T/out" 2>"$T/err" || fail "1 rank failed"
[ ! -s "$T/err" ] || fail "1 rank: unexpected stderr: $(cat "$T/err")"
grep -qx "rank=0/1 local=0/1 nvls=0 addr=127.0.0.1:29511 torch=1 nvshmem=1" "$T/out" ||
  fail "1 rank: $(cat "$T/out")"

# The second of two nodes: ranks 3, 4, 5 of 6, node 0's address and the port given.
run_launcher --nproc=3 --nnodes=2 --node_rank=1 --master_addr=x --master_port=1234 -- \
  sh -c "$show"
[ "$rc" -eq 0 ] || fail "node 1: exit $rc: $(cat "$T/err")"
for l in 0 1 2; do
  grep -qx "rank=$((3 + l))/6 local=$l/3 nvls=0 addr=x:1234 torch=1 nvshmem=1" "$T/out" ||
    fail "node 1: no line for local rank $l in: $(cat "$T/out")"
done

# Arguments reach the program as they are.
run_launcher --nproc=1 -- sh -c 'printf "[%s]" "$@"' prog 'a b' '' --nproc=9
[ "$rc" -eq 0 ] && [ "$(cat "$T/out")" = "[a b][][--nproc=9]" ] || fail "arguments: $(cat "$T/out")"

# A rank exiting 3 while the others sleep: the launcher stops them and exits 3, quickly.
start=$(now_ms)
run_launcher --nproc=3 -- sh -c 'if [ "$CNNBENCH_RANK" = 1 ]; then sleep 0.2; exit 3; fi; exec sleep 60'
took=$(($(now_ms) - start))
[ "$rc" -eq 3 ] || fail "failing rank: exit $rc, expected 3: $(cat "$T/err")"
grep -q "cnnbench_launch: rank 1 exited with code 3; stopping the other ranks" "$T/err" ||
  fail "failing rank: message: $(cat "$T/err")"
[ "$took" -lt 10000 ] || fail "failing rank: took $took ms"

# Ranks that ignore SIGTERM get SIGKILL after 5 s.
start=$(now_ms)
run_launcher --nproc=2 -- sh -c 'if [ "$CNNBENCH_RANK" = 0 ]; then sleep 0.5; exit 4; fi; trap "" TERM; exec sleep 60'
took=$(($(now_ms) - start))
[ "$rc" -eq 4 ] || fail "SIGTERM ignored: exit $rc, expected 4: $(cat "$T/err")"
[ "$took" -ge 5000 ] && [ "$took" -lt 15000 ] || fail "SIGTERM ignored: took $took ms"

# A rank killed by a signal: 128 + the signal.
run_launcher --nproc=2 -- sh -c 'if [ "$CNNBENCH_RANK" = 1 ]; then kill -KILL $$; fi; exec sleep 60'
[ "$rc" -eq 137 ] || fail "killed rank: exit $rc, expected 137: $(cat "$T/err")"
grep -q "cnnbench_launch: rank 1 was killed by signal 9" "$T/err" || fail "killed: $(cat "$T/err")"

# SIGTERM to the launcher is passed on to the ranks; it exits 128 + 15.
"$L" --nproc=2 -- sh -c 'sleep 60 & p=$!; trap "echo got-term-\$CNNBENCH_RANK; kill \$p; exit 0" TERM; wait' \
  >"$T/out" 2>"$T/err" &
pid=$!
sleep 1
start=$(now_ms)
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
took=$(($(now_ms) - start))
[ "$rc" -eq 143 ] || fail "SIGTERM to the launcher: exit $rc, expected 143: $(cat "$T/err")"
grep -qx got-term-0 "$T/out" && grep -qx got-term-1 "$T/out" ||
  fail "SIGTERM not passed on: $(cat "$T/out")"
[ "$took" -lt 4000 ] || fail "SIGTERM to the launcher: took $took ms"

# A program that cannot run: exit 127 and one line.
run_launcher --nproc=2 -- nope-no-such-program-here
[ "$rc" -eq 127 ] || fail "missing program: exit $rc, expected 127"
grep -qx "cnnbench_launch: cannot run 'nope-no-such-program-here': No such file or directory" \
  "$T/err" || fail "missing program: message: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "missing program: one line expected: $(cat "$T/err")"

# Bad flags: one line naming the problem, exit 2, nothing run.
bad() {
  local want=$1
  shift
  run_launcher "$@"
  [ "$rc" -eq 2 ] || fail "'$*': exit $rc, expected 2"
  [ "$(wc -l <"$T/err")" -eq 1 ] || fail "'$*': one line expected: $(cat "$T/err")"
  grep -q -- "$want" "$T/err" || fail "'$*': message lacks '$want': $(cat "$T/err")"
  [ ! -s "$T/out" ] || fail "'$*': something ran: $(cat "$T/out")"
}
bad "--nproc is required" -- echo hi
bad "--nproc must be from 1" --nproc=0 -- echo hi
bad "--nproc must be a non-negative integer, not 'two'" --nproc=two -- echo hi
bad "--node_rank=2 must be below --nnodes=2" --nproc=1 --nnodes=2 --node_rank=2 --master_addr=x \
  -- echo hi
bad "--master_addr (node 0's address) is required" --nproc=1 --nnodes=2 --node_rank=1 -- echo hi
bad "--master_port must be from 1 to 65535" --nproc=1 --master_port=70000 -- echo hi
bad "no program to run" --nproc=2 --
bad "no program to run" --nproc=2
bad "unknown flag '--nprocs=2'" --nprocs=2 -- echo hi
bad "unexpected argument 'echo'" --nproc=2 echo hi
bad "flag --quiet_ranks takes no value" --nproc=2 --quiet_ranks=1 -- echo hi

# --help: the usage, exit 0.
run_launcher --help
[ "$rc" -eq 0 ] && grep -q "usage: cnnbench_launch" "$T/out" && grep -q "mpirun" "$T/out" ||
  fail "--help: exit $rc: $(cat "$T/out")"

# --quiet_ranks: only local rank 0's stdout; every rank's stderr.
run_launcher --nproc=3 --quiet_ranks -- sh -c 'echo out-$CNNBENCH_LOCAL_RANK; echo err-$CNNBENCH_LOCAL_RANK >&2'
[ "$rc" -eq 0 ] || fail "--quiet_ranks: exit $rc"
[ "$(cat "$T/out")" = "out-0" ] || fail "--quiet_ranks: stdout: $(cat "$T/out")"
for r in 0 1 2; do grep -qx "err-$r" "$T/err" || fail "--quiet_ranks: no err-$r: $(cat "$T/err")"; done

echo "launch test: ok"
