#!/usr/bin/env bash
# The tests: build, then ctest. GPU tests (label gpu) skip, and say so, where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
ctest --test-dir build/release --output-on-failure "$@"
