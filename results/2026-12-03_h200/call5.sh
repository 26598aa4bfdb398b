#!/usr/bin/env bash
# Device call 4 (from the repository root on the GPU machine): every GPU test (the zoo's suites in
# 8 shards, GpuKernels/GpuOps/GpuNetwork, the SE patch's kernel suites) beside the fp32 and fp16
# cross-checks of the 16 torchvision networks, all in parallel (no timing); then, alone on the
# GPU, the fp16 speed of AlexNet-LRN, VGG-16-BN, VGG-19 and VGG-19-BN beside PyTorch's graph replay.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/x
s=tools/device_session.sh
OUT=$O/x/c SESSION_BUDGET=${CHECKS_BUDGET:-300} CHECKS_TIMEOUT=280 DIAG_MODE=none bash $s checks
OUT=$O/x/v SESSION_BUDGET=200 ZOO_NETS="alexnet_lrn vgg16_bn vgg19 vgg19_bn" ZOO_NET_TIMEOUT=40 \
  ZOO_PEER_TIMEOUT=70 bash $s zoo_sweep zoo_peer
cd $O && tar czf call4.tgz x && rm -rf x
