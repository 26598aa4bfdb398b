#!/usr/bin/env bash
# Configures and builds the release tree (build/release).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
export CUDACXX=$(bash tools/find_nvcc.sh)
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
