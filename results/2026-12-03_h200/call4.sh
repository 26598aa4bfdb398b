#!/usr/bin/env bash
# Device call 3 (run from the repository root on the GPU machine): the parallel plan builder's
# GPU test first (its sweeps fall back to --build_threads=1 if it fails), then ResNet-50/152 at
# batch 32 with the ban-and-rebuild repair, EfficientNet-B0/B4 at batches 128 and 256, PyTorch's
# graph replay for those four networks, the SE rewrite (patches/kernels_vectorised.patch) against
# main on B0/B4 at batches 1 and 8, and the graph/eager experiments (tools/diagnose_graph.sh plans).
set -u
O=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
mkdir -p $O/x
timeout 60 build/release/tests/test_gpu --gtest_filter='GpuNetwork.Parallel*' >$O/x/parallel.log 2>&1
rc=$?
echo "parallel plan test rc=$rc"; grep -E "OK|FAILED|Failure" $O/x/parallel.log | head -5
[ $rc = 0 ] || export ZOO_ARGS=--build_threads=1
s=tools/device_session.sh
OUT=$O/x/r SESSION_BUDGET=75 ZOO_NETS="resnet50 resnet152" ZOO_BATCHES=32 ZOO_NET_TIMEOUT=35 bash $s zoo_sweep
OUT=$O/x/e SESSION_BUDGET=130 ZOO_NETS="efficientnet_b0 efficientnet_b4" ZOO_BATCHES="(128|256)" ZOO_NET_TIMEOUT=65 bash $s zoo_sweep
OUT=$O/x/peer SESSION_BUDGET=110 ZOO_NETS="resnet50 resnet152 efficientnet_b0 efficientnet_b4" ZOO_PEER_BATCHES=1,8,32,128,256 ZOO_PEER_TIMEOUT=95 bash $s zoo_peer
OUT=$O/x/u SESSION_BUDGET=55 ZOO_NETS="efficientnet_b0 efficientnet_b4" ZOO_BATCHES="(1|8)" ZOO_NET_TIMEOUT=25 bash $s zoo_sweep
OUT=$O/x/p SESSION_BUDGET=55 ZOO_NETS="efficientnet_b0 efficientnet_b4" ZOO_BATCHES="(1|8)" ZOO_NET_TIMEOUT=25 ZOO_BIN=.carry/patched/cnnbench bash $s zoo_sweep
OUT=$O/x/d SESSION_BUDGET=85 DIAG_MODE=plans bash $s diagnose
cd $O && tar czf call3.tgz x && rm -rf x
