#!/usr/bin/env bash
# Device call 10 (from the repository root on the GPU machine): the new squeeze-excitation kernels
# (fc1 over many blocks where large, fc2 inside the scale). Their kernel test; the zoo suites of
# the eight EfficientNets and their fp32 cross-checks against torchvision (B0, B4, B7), all in
# parallel, no timing; then alone on the GPU, EfficientNet-B0 to B7 in fp16 at batches 1, 8 and 32
# beside PyTorch's graph replay.
set -u
O=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
mkdir -p $O/x/c
B=build/release
summ() { echo "--- $(basename $1): $(grep -E '^\[  (PASSED|FAILED) ' $1 | tr '\n' ' ')"
  grep -E "Failure|Which is|differs|Expected|^\[  FAILED  \].*\(" $1 | cut -c1-240 | head -8; }
timeout 30 $B/tests/test_gpu --gtest_filter='GpuKernels.Squeeze*' >$O/x/c/se_tests.log 2>&1
summ $O/x/c/se_tests.log
for n in 0 1 2 3 4 5 6 7; do
  timeout 110 $B/tests/test_gpu --gtest_filter="Zoo/GpuZoo.*/efficientnet_b$n" \
    >$O/x/c/zoo_tests_b$n.log 2>&1 &
done
for n in 0 4 7; do
  timeout 110 python3 tools/crosscheck_torchvision.py --binary $B/cnnbench_infer \
    --network efficientnet_b$n --precision fp32 --batch 2 --extra="--verify=32" \
    --out $O/x/c/crosscheck_efficientnet_b${n}_fp32.json >$O/x/c/crosscheck_efficientnet_b${n}_fp32.log 2>&1 &
done
wait
for f in $O/x/c/zoo_tests_*.log; do summ $f; done
grep -H "rel L2 error" $O/x/c/crosscheck_*.log | cut -c1-200
s=tools/device_session.sh
N=$(echo efficientnet_b{0..7})
OUT=$O/x/e SESSION_BUDGET=260 ZOO_NETS="$N" ZOO_BATCHES="(1|8|32)" ZOO_NET_TIMEOUT=40 bash $s zoo_sweep
OUT=$O/x/pe SESSION_BUDGET=165 ZOO_NETS="$N" ZOO_PEER_BATCHES=1,8,32 ZOO_PEER_TIMEOUT=150 bash $s zoo_peer
cd $O && tar czf call10.tgz x && rm -rf x
