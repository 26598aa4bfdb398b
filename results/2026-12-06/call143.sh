#!/usr/bin/env bash
# Device call 143 (written 2026-12-06 14:35 UTC, not yet run): issue 9's eight targets beside
# PyTorch on an H200, in two calls of under 570 s each (call56.sh put all eight and its GPU tests
# in one, which the sweep and both PyTorch baselines do not fit: 2026-12-05's H100 needed calls 56
# and 59). Each part pairs its targets with PyTorch run in the same call on the same card, and
# tools/targets_table.py counts a target met only so. Carry .carry.
#   PART=I: the six inference targets (configs/issue9_targets.yaml's graph rows: ResNet-50 at 1,
#           32, 256; EfficientNet-B0, Inception-v3, VGG-16 at 256), then PyTorch's graph replays.
#   PART=T: the two training targets (ResNet-50 and EfficientNet-B0 fp16 at 256), then PyTorch's
#           eager AMP steps.
# Predicted on an H200: inference within 5% of the H100's figures of call 127 (3,235 img/s at 1,
# 26,396 at 32, 33,895 at 256: on 2026-12-03 to 05 the two cards ran ResNet-50 inference within 2%
# of each other); training about 1.19x the H100's (the ratio of 2026-12-05's figures, 6,628 against
# 5,556, the step bound by BatchNorm's passes over memory): ResNet-50 about 8,000 img/s from 6,730
# (call 140), at the 8,000 target; EfficientNet-B0 about 9,600.
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-570}))
lim() { local t=$1 r=$((END - SECONDS - 15)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
P=${PART:-I}
case $P in
  I) F='/graph/' ;;
  T) F='/train/' ;;
  *) echo "PART takes I or T, not '${P}'" >&2; exit 2 ;;
esac
D=$O/targets_$P
mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
timeout $(lim 330) $B/cnnbench --config=configs/issue9_targets.yaml --benchmark_filter="$F" \
  --benchmark_out=$D/ours.json --layers_out=$D/ours.layers.json >$D/ours.log 2>&1
echo "ours $P rc=$? ${SECONDS}s"; grep -E "ERROR|_median" $D/ours.log | cut -c1-120
if [ "$P" = I ]; then
  timeout $(lim 200) $PYTHON tools/pytorch_baseline.py --models resnet50,efficientnet_b0,inception_v3,vgg16 \
    --batches 1,32,256 --modes graph --reps 3 --out $D/pytorch.json >$D/pytorch.log 2>&1
  echo "PyTorch graph rc=$? ${SECONDS}s"
  python3 tools/targets_table.py --cnnbench $D/ours.json --pytorch $D/pytorch.json --out-md $D/targets.md
else
  timeout $(lim 200) $PYTHON tools/pytorch_train_baseline.py --models resnet50,efficientnet_b0 \
    --batches 256 --modes eager --precision fp16 --reps 3 --out $D/pytorch_train.json \
    >$D/pytorch_train.log 2>&1
  echo "PyTorch train rc=$? ${SECONDS}s"
  python3 tools/targets_table.py --cnnbench $D/ours.json --pytorch-train $D/pytorch_train.json \
    --out-md $D/targets.md
fi
cat $D/targets.md
xz -9 $D/ours.layers.json 2>/dev/null
(cd $O && tar czf call143_$P.tgz --remove-files targets_$P)
echo "call143 $P end ${SECONDS}s"
