#!/usr/bin/env bash
# Prints the CUDA compiler to build with: $CUDACXX if set, else the toolkit's own
# /usr/local/cuda/bin/nvcc, else the first nvcc on PATH. Exits 1 when there is none.
set -euo pipefail
for c in "${CUDACXX:-}" /usr/local/cuda/bin/nvcc "$(command -v nvcc || true)"; do
  if [ -n "$c" ] && [ -x "$c" ]; then
    echo "$c"
    exit 0
  fi
done
exit 1
