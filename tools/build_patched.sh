#!/usr/bin/env bash
# Builds main with a patch from patches/ applied, in a throwaway worktree, and puts its
# cnnbench and test_gpu into .carry/patched, where tools/device_session.sh finds them (ZOO_BIN,
# and the `checks` step's patched kernel suites). Also fills .carry/lib with the libraries the
# GPU machine lacks.
#   bash tools/build_patched.sh patches/se_three_kernels.patch
set -euo pipefail
cd "$(dirname "$0")/.."
patch=$(realpath "${1:?usage: tools/build_patched.sh PATCH}")
[ -f "$patch" ] || { echo "build_patched: no patch file $1" >&2; exit 2; }
wt=${WORKTREE:-/tmp/cnnbench_patched}
git worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
git worktree add -q --detach "$wt" HEAD
(cd "$wt" && git apply "$patch")
export CUDACXX=$(bash tools/find_nvcc.sh)
(cd "$wt" && cmake --preset release >/dev/null && cmake --build --preset release -j "$(nproc)" \
  --target cnnbench test_gpu)
mkdir -p .carry/patched .carry/lib
cp "$wt/build/release/cnnbench" "$wt/build/release/tests/test_gpu" .carry/patched/
cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian /usr/lib/x86_64-linux-gnu/libyaml-cpp.so.0.7 \
  .carry/lib/
echo "build_patched: .carry/patched holds main + $(basename "$patch")"
