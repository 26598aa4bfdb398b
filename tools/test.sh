#!/usr/bin/env bash
# The tests: build, then ctest. GPU tests (label gpu) skip, and say so, where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "cnnbench: no CUDA device here: the GPU tests (label gpu) will be reported as skipped"
fi
ctest --test-dir build/release --output-on-failure "$@"
