#!/usr/bin/env bash
# ctest cli_rendezvous (label cpu): the data-parallel launch without a GPU. cnnbench_dp
# --rendezvous_check under cnnbench_launch (3 ranks), as two "nodes" of 2 ranks each on loopback
# (two launchers with --nnodes=2, the multi-node form), and under Open MPI's mpirun where it is
# installed: every rank must print its own rank and the same hash of rank 0's bytes.
#   bash tests/rendezvous_test.sh LAUNCH DP
set -u
LAUNCH=$1
DP=$2
fail=0
base=$((29900 + RANDOM % 50))
check() {  # name, expected ranks, expected source, output
  local name=$1 n=$2 source=$3 out=$4
  local lines hashes ranks
  lines=$(grep -c '^rendezvous: rank' <<<"$out" || true)
  hashes=$(grep -o 'fnv [0-9a-f]*' <<<"$out" | sort -u | wc -l)
  ranks=$(grep -o 'rank [0-9]* of' <<<"$out" | sort -u | wc -l)
  if [ "$lines" -ne "$n" ] || [ "$hashes" -ne 1 ] || [ "$ranks" -ne "$n" ] ||
    ! grep -q "from $source" <<<"$out"; then
    echo "rendezvous test: $name FAILED ($lines lines, $hashes hashes, $ranks ranks):"
    echo "$out"
    fail=1
  else
    echo "ok: $name: $n ranks, one hash"
  fi
}
out=$(CNNBENCH_MASTER_PORT=$base timeout 60 "$LAUNCH" --nproc=3 -- "$DP" --rendezvous_check 2>&1)
check "launcher, 3 ranks" 3 cnnbench "$out"
# Two nodes of two on one host: node 1 may start first (its ranks retry until rank 0 listens).
tmp=$(mktemp)
CNNBENCH_MASTER_PORT=$((base + 1)) timeout 60 "$LAUNCH" --nproc=2 --nnodes=2 --node_rank=1 \
  --master_addr=127.0.0.1 --master_port=$((base + 1)) -- "$DP" --rendezvous_check >"$tmp" 2>&1 &
node1=$!
out=$(timeout 60 "$LAUNCH" --nproc=2 --nnodes=2 --node_rank=0 --master_addr=127.0.0.1 \
  --master_port=$((base + 1)) -- "$DP" --rendezvous_check 2>&1)
wait $node1
out="$out
$(cat "$tmp")"
rm -f "$tmp"
check "two launchers as two nodes, 4 ranks" 4 cnnbench "$out"
grep -q "rank 3 of 4 (local 1 of 2" <<<"$out" || { echo "rendezvous test: node 1's second rank is not rank 3 of 4"; fail=1; }
if command -v mpirun >/dev/null; then
  out=$(CNNBENCH_MASTER_PORT=$((base + 2)) timeout 60 mpirun --allow-run-as-root --oversubscribe \
    -np 2 -x CNNBENCH_MASTER_PORT "$DP" --rendezvous_check 2>&1)
  check "mpirun, 2 ranks" 2 openmpi "$out"
else
  echo "rendezvous test: no mpirun here (Debian's openmpi-bin): that case skipped"
fi
# A rank whose world size disagrees: rank 0 names it, and the launcher stops the rest.
out=$(CNNBENCH_MASTER_PORT=$((base + 3)) CNNBENCH_RANK=1 CNNBENCH_WORLD_SIZE=3 timeout 20 "$DP" \
  --rendezvous_check 2>&1 &
  sleep 0.3
  CNNBENCH_MASTER_PORT=$((base + 3)) CNNBENCH_RANK=0 CNNBENCH_WORLD_SIZE=2 timeout 20 "$DP" \
    --rendezvous_check 2>&1; wait)
if grep -q "says the world has 3 ranks, rank 0 has 2" <<<"$out"; then
  echo "ok: a mismatched world size is named"
else
  echo "rendezvous test: mismatched world size not named:"; echo "$out"; fail=1
fi
exit $fail
