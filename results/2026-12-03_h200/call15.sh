#!/usr/bin/env bash
# Device call 15 (from the repository root on the GPU machine), the session's last (about 540 s).
# A, in parallel, no timing: the depthwise kernel's suites and EfficientNet-B0's zoo suite (our
# kernel under heuristics), fp32 cross-checks of B0 and B4 against torchvision; fp16/bf16
# gradients against fp32's (HalfPrecisionGradientsFollowFp32) and the learning tests; ResNet-50's
# SGD step against PyTorch's with FFT/Winograd engines refused in fp32, and again with
# NVIDIA_TF32_OVERRIDE=0. B, alone: EfficientNet-B0..B7 fp16 at batch 1 (depthwise and SE
# autotuned) beside PyTorch's graph replay. C, alone: the article's max-batch check by card size.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
summ() { echo "--- $(basename $1): $(grep -E '^\[  (PASSED|FAILED) ' $1 | tr '\n' ' ')"
  grep -E "Failure|Which is|Expected|actual|exception|^\[  FAILED  \].*\(" $1 | cut -c1-240 | head -10; }
T=130
timeout $T $B/tests/test_gpu --gtest_filter='GpuKernels.Depthwise*:GpuOps.Depthwise*:GpuNetwork.Depthwise*' \
  >$O/a/depthwise.log 2>&1 &
timeout $T $B/tests/test_gpu --gtest_filter='GpuTrainStep.HalfPrecision*:GpuTrainStep.ResNet50And*:GpuTrainStep.TheRest*:GpuTrainStep.Spatial*:GpuTrainStep.Concat*' \
  >$O/a/train_step.log 2>&1 &
timeout $T $B/tests/test_gpu --gtest_filter='Zoo/GpuZoo.*/efficientnet_b0' >$O/a/zoo_b0.log 2>&1 &
for n in 0 4; do
  timeout $T python3 tools/crosscheck_torchvision.py --binary $B/cnnbench_infer --network efficientnet_b$n \
    --precision fp32 --batch 2 --extra="--verify=32" --out $O/a/cross_b$n.json >$O/a/cross_b$n.log 2>&1 &
done
timeout $T python3 tools/train_step_crosscheck.py --binary $B/cnnbench_train_step --network resnet50 \
  --batch 8 --workdir /tmp/tc1 --worst 300 --out $O/a/train_cross.json >$O/a/train_cross.log 2>&1 &
NVIDIA_TF32_OVERRIDE=0 timeout $T python3 tools/train_step_crosscheck.py --binary $B/cnnbench_train_step \
  --network resnet50 --batch 8 --workdir /tmp/tc2 --worst 300 --out $O/a/train_cross_notf32.json \
  >$O/a/train_cross_notf32.log 2>&1 &
wait
for f in $O/a/depthwise.log $O/a/train_step.log $O/a/zoo_b0.log; do summ $f; done
grep -E "non-finite|rel_l2 vs fp32|loss .* -> |cudnn .* us, ours" $O/a/*.log | cut -c1-200 | head -40
grep -H "rel L2 error" $O/a/cross_b*.log | cut -c1-200
for f in train_cross train_cross_notf32; do echo "== $f"; grep -E "^(loss|grad norms|updated|PASS|FAIL)" $O/a/$f.log; done
(cd $O && tar czf a.tgz --remove-files a)
s=tools/device_session.sh
N=$(echo efficientnet_b{0..7})
OUT=$O/e SESSION_BUDGET=190 ZOO_NETS="$N" ZOO_BATCHES=1 ZOO_NET_TIMEOUT=18 ZOO_PEER_BATCHES=1 \
  ZOO_PEER_TIMEOUT=60 bash $s zoo_sweep zoo_peer
mkdir -p $O/m
SIZES="8 16 24 48 whole" timeout 150 bash tools/max_batch_sweep.sh configs/max_batch_article.yaml $O/m 2>&1 | tail -8
cat $O/m/max_batch.md 2>/dev/null | head -16
(cd $O && tar czf m.tgz --remove-files m)
