#!/usr/bin/env bash
# Installs what cnnbench builds with, from Debian's packages, where it is missing (openmpi-bin:
# mpirun, one of the ways to start data-parallel ranks, and a case of its launch test). The CUDA
# toolkit with cuDNN and cuBLAS is part of the machine (/usr/local/cuda); it is checked, not
# installed.
set -euo pipefail
pkgs=(cmake g++ make pkg-config libbenchmark-dev libgtest-dev libgmock-dev libyaml-cpp-dev
      nlohmann-json3-dev python3 python3-yaml python3-matplotlib clang openmpi-bin)
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
NVCC=$(bash "$(dirname "$0")/find_nvcc.sh") || {
  echo "cnnbench: no CUDA compiler found (CUDACXX, /usr/local/cuda/bin/nvcc, nvcc on PATH): install the CUDA toolkit 12.x or 13.x with cuDNN 9" >&2
  exit 1
}
# The toolkit root as nvcc itself reports it (TOP=...), so a wrapper script on PATH
# (/usr/local/bin/nvcc -> exec /usr/local/cuda-13.0/bin/nvcc) finds the right headers.
tmp=$(mktemp -d)
touch "$tmp/probe.cu"
CUDA_TOP=$(cd "$tmp" && "$NVCC" --dryrun -c probe.cu 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n1)
rm -rf "$tmp"
CUDA_TOP=${CUDA_TOP:-$(dirname "$(dirname "$(readlink -f "$NVCC")")")}
found=""
for inc in ${CUDNN_ROOT:+"$CUDNN_ROOT/include"} "$CUDA_TOP/include" /usr/local/cuda/include /usr/include \
  /usr/include/x86_64-linux-gnu; do
  if [ -f "$inc/cudnn.h" ]; then found=$inc; break; fi
done
if [ -z "$found" ]; then
  echo "cnnbench: cudnn.h not found (looked in ${CUDNN_ROOT:+$CUDNN_ROOT/include, }$CUDA_TOP/include, /usr/local/cuda/include, /usr/include): install cuDNN 9 (or set CUDNN_ROOT)" >&2
  exit 1
fi
