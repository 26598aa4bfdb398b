#!/usr/bin/env bash
# Installs what cnnbench builds with, from Debian's packages, where it is missing. The CUDA
# toolkit with cuDNN and cuBLAS is part of the machine (/usr/local/cuda); it is checked, not
# installed.
set -euo pipefail
pkgs=(cmake g++ make pkg-config libbenchmark-dev libgtest-dev libgmock-dev libyaml-cpp-dev
      nlohmann-json3-dev python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "cnnbench: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q "${missing[@]}"
fi
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then
  echo "cnnbench: no CUDA compiler found (nvcc, /usr/local/cuda/bin/nvcc): install the CUDA toolkit 12.x or 13.x with cuDNN 9" >&2
  exit 1
fi
CUDA_INC=$(dirname "$(dirname "$(readlink -f "$NVCC")")")/include
if [ ! -f "$CUDA_INC/cudnn.h" ] && [ ! -f /usr/include/cudnn.h ] && [ -z "${CUDNN_ROOT:-}" ]; then
  echo "cnnbench: cudnn.h not found next to $NVCC nor in /usr/include: install cuDNN 9 (or set CUDNN_ROOT)" >&2
  exit 1
fi
