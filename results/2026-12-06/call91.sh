#!/usr/bin/env bash
# Device call 91 (written 2026-12-06 01:15 UTC): the one call to run first this session, whatever
# card comes (1,304 s of device time left after four failed starts). Carry .carry.
# On an H200: results/2026-12-05_h200/call56.sh whole: issue 9's targets beside PyTorch on the
#   card the targets name. ResNet-50's training target (8,000 img/s) has never been timed there
#   with the BatchNorm backward of calls 86 and 87; the cost model puts it at about 8,600 img/s
#   at the H100's 77% of the floor's pace, about 7,000 at call 22's 63% (NOTES.md).
# On an H100 (STEPS, default "G P B", picks the steps):
#   G: the GPU tests of what has never run on a GPU (call89.sh's G: GpuTrain and GpuTrainStep,
#      with the BatchNorm backward's 80-register bound, SiLU's pre-activation in pass 1, the
#      max-pool backward at 70 registers, the threshold test);
#   P: the two training targets beside PyTorch's eager AMP step (call80.sh's P). Predicted:
#      ResNet-50 at about 6,050 img/s (the breakdown's 42.2 ms plus the benchmark's own
#      overhead), PyTorch about 4,650 (call 83); EfficientNet-B0 about 7,700 (call 83);
#   B: what time is left, call89.sh's ResNet-50 pair (bound against CNNBENCH_BN_BWD_FREE_REGS=1).
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-575}))
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $NAME"
if [[ $NAME == *H200* ]]; then
  BUDGET=$((END - SECONDS)) bash results/2026-12-05_h200/call56.sh
  echo "end ${SECONDS}s"
  exit 0
fi
STEPS=${STEPS:-G P B}
mkdir -p $O/g $O/b
if [[ $STEPS == *G* ]]; then
  timeout 150 ctest --test-dir $B -R '^gpu_(GpuTrain|GpuTrainStep)(_[0-9])?$' -j3 \
    --output-on-failure >$O/g/ctest.log 2>&1
  echo "G rc=$? ${SECONDS}s"; grep -E "Test +#|tests passed|FAILED|Failure" $O/g/ctest.log | head -20
fi
(cd $O && tar czf g.tgz --remove-files g)
[[ $STEPS == *P* ]] && STEPS=P BUDGET=$((END - SECONDS - 100)) bash results/2026-12-05_h100/call80.sh
for run in "r50 " "r50_free_regs CNNBENCH_BN_BWD_FREE_REGS=1"; do
  read -r name env <<<"$run"
  if ((END - SECONDS < 45)) || [[ $STEPS != *B* ]]; then break; fi
  env $env timeout $((END - SECONDS - 5)) $B/cnnbench_train_step --network=resnet50 \
    --precision=fp16 --batch=256 --breakdown=$O/b/$name.json >$O/b/$name.txt 2>&1
  echo "B $name rc=$? ${SECONDS}s"; head -n 1 $O/b/$name.txt
  grep -E "^  (backward|forward) (batchnorm|maxpool)" $O/b/$name.txt | head -8
done
(cd $O && tar czf b.tgz --remove-files b)
echo "end ${SECONDS}s"
