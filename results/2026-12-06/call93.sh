#!/usr/bin/env bash
# Device call 93 (written 2026-12-06 02:20 UTC): this session's last chance (584 s of device time
# left after six failed starts), about 430 s of command. Carry .carry.
# On an H200: G, then call80.sh's P (the two training targets beside PyTorch's eager AMP step: the
#    ResNet-50 target, 8,000 img/s, is the H200's; predicted about 8,600 at the H100's pace).
# On an H100:
# G: call91.sh's G, the GPU tests of what has never run on a GPU (GpuTrain, GpuTrainStep: the
#    BatchNorm backward's 80-register bound, SiLU's pre-activation in pass 1, the stem pool's
#    backward with a row of loads in flight and its maxima compared as stored, the threshold test).
# A: call90.sh's A: the VEC knobs' A/B and the stem pool's (see its header for the predictions).
# S: issue 10, what is left in about 150 s: call88.sh's synccheck with blocking launches over the
#    inference of Inception-v3, ResNet-50, ResNet-152 and EfficientNet-B0 (fp16, fp32), which call
#    85's crowding kept from starting, 2 at a time. Predicted: 0 errors, 0 unchecked launches.
set -u
O=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ $NAME == *H200* ]]; then  # the training targets beside PyTorch on the card they name
  (cd $O && mkdir -p g && timeout 150 ctest --test-dir $OLDPWD/build/release \
    -R '^gpu_(GpuTrain|GpuTrainStep)(_[0-9])?$' -j3 --output-on-failure >g/ctest.log 2>&1;
   echo "G rc=$? ${SECONDS}s"; grep -E "tests passed|FAILED" g/ctest.log; tar czf g.tgz --remove-files g)
  STEPS=P BUDGET=$((440 - SECONDS)) bash results/2026-12-05_h100/call80.sh
  echo "call93 end ${SECONDS}s"
  exit 0
fi
STEPS=G BUDGET=150 bash results/2026-12-06/call91.sh
STEPS=A BUDGET=$((300 - SECONDS)) bash results/2026-12-06/call90.sh
T=$((440 - SECONDS))
if ((T > 60)); then
  mkdir -p $O/s
  NETS="resnet50 efficientnet_b0 inception_v3 resnet152" MODES=infer TOOLS=synccheck JOBS=2 \
    BLOCKING=1 RUN_TIMEOUT=$((T - 10)) BUDGET=$T bash tools/sanitize_gpu.sh $O/s/infer >$O/s/infer.log 2>&1
  grep -E "^\| [a-z]" $O/s/infer/summary.md | grep -v "^| network"
  (cd $O && tar czf s.tgz --remove-files s)
fi
echo "call93 end ${SECONDS}s"
