#!/usr/bin/env bash
# Device call 6 (from the repository root on the GPU machine; run as one inline command on the
# machine still warm from call 5): EfficientNet-B1, B2, B3, B5, B6 and B7 in fp16 at batches 1, 8,
# 32, 128 and 256, 42 s a network, then PyTorch's graph replay of the same networks.
O=${OUT:-/tmp/out}; mkdir -p $O/x
N="efficientnet_b1 efficientnet_b2 efficientnet_b3 efficientnet_b5 efficientnet_b6 efficientnet_b7"
OUT=$O/x/e SESSION_BUDGET=390 ZOO_NETS="$N" ZOO_NET_TIMEOUT=42 ZOO_PEER_TIMEOUT=130 \
  bash tools/device_session.sh zoo_sweep zoo_peer 2>&1
cd $O && tar czf call5.tgz x && rm -rf x
