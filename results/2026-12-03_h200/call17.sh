#!/usr/bin/env bash
# Device call 17, straight after call 16 on the same machine (about 560 s).
# Z: issue 3's speed table, second part: EfficientNet-B0..B5 in fp16 at batch 1, 8, 32, 128, 256,
# each beside PyTorch's CUDA-graph replay in this same call.
# C: issue 8's cuDNN comparison: configs/cudnn_compare.yaml (ResNet-50, EfficientNet-B0,
# Inception-v3 at 1, 32, 256; 9 repetitions) run by the same binary against cuDNN 9.14 (the
# system's) and 9.19 (PyTorch's wheel), then tools/compare_runs.py.
set -u
O=${OUT:-/tmp/out}
date +%T
N=$(echo efficientnet_b{0..5})
OUT=$O/z SESSION_BUDGET=370 ZOO_NETS="$N" ZOO_NET_TIMEOUT=80 ZOO_PEER_TIMEOUT=140 \
  bash tools/device_session.sh zoo_sweep zoo_peer
date +%T
mkdir -p $O/c
B=build/release
T=$(( (545 - SECONDS) / 2 ))
for v in 9.14 9.19; do
  if [ $v = 9.19 ]; then L=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
  else L=$PWD/.carry/lib; fi
  LD_LIBRARY_PATH=$L timeout $T $B/cnnbench --config=configs/cudnn_compare.yaml \
    --benchmark_out=$O/c/cudnn_$v.json >$O/c/cudnn_$v.log 2>&1
  echo "cudnn $v rc=$? medians=$(grep -c manual_time_median $O/c/cudnn_$v.log) $(date +%T)"
  grep -E "ERROR OCCURRED" $O/c/cudnn_$v.log | cut -c1-300 | sort -u | head -4
done
python3 tools/compare_runs.py $O/c/cudnn_9.14.json $O/c/cudnn_9.19.json --out-md $O/c/compare_cudnn.md \
  2>&1 | head -60
(cd $O && tar czf c.tgz --remove-files c)
