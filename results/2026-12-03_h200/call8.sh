#!/usr/bin/env bash
# Device call 8 (from the repository root, on the machine still warm from call 7): the SE rewrite
# (patches/se_three_kernels.patch, in .carry/patched) against main on EfficientNet-B0, B4 and B5
# at batches 1 and 8, then the zoo rows still missing (B2, B5, B6 at 256; B7 at 128).
set -u
O=${OUT:-/tmp/out}; mkdir -p $O/x
s=tools/device_session.sh
N="efficientnet_b0 efficientnet_b4 efficientnet_b5"
OUT=$O/x/u SESSION_BUDGET=80 ZOO_NETS="$N" ZOO_BATCHES="(1|8)" ZOO_NET_TIMEOUT=25 bash $s zoo_sweep
OUT=$O/x/p SESSION_BUDGET=80 ZOO_NETS="$N" ZOO_BATCHES="(1|8)" ZOO_NET_TIMEOUT=25 \
  ZOO_BIN=.carry/patched/cnnbench bash $s zoo_sweep
OUT=$O/x/e SESSION_BUDGET=370 ZOO_NETS="efficientnet_b2 efficientnet_b5 efficientnet_b6" \
  ZOO_BATCHES=256 ZOO_NET_TIMEOUT=95 bash $s zoo_sweep
OUT=$O/x/f SESSION_BUDGET=100 ZOO_NETS=efficientnet_b7 ZOO_BATCHES=128 ZOO_NET_TIMEOUT=95 bash $s zoo_sweep
cd $O && tar czf call8.tgz x && rm -rf x
