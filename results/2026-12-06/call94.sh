#!/usr/bin/env bash
# Device call 94 (written 2026-12-06 02:30 UTC): the session's last start (404 s of device time
# left after seven failed starts), about 250 s of command. Carry .carry.
# G: the GPU tests of what has never run on a GPU (call91.sh's G), on any card.
# On an H100, A: the first two runs of call90.sh's A: the fp16 ResNet-50 step at 256 by launch kind
#    at the defaults, then with CNNBENCH_VEC_APPLY_ROWS=4 CNNBENCH_VEC_SUM_ROWS=8 and
#    CNNBENCH_MAXPOOL_ONE_LOAD=1 (predictions in call90.sh's header).
# On an H200, P: ResNet-50's training target alone beside PyTorch's eager AMP step (the target
#    names the H200; predicted about 8,600 img/s against PyTorch's 5,940 in the reference file).
set -u
O=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
mkdir -p $O/g $O/a $O/p
timeout 120 ctest --test-dir $B -R '^gpu_(GpuTrain|GpuTrainStep)(_[0-9])?$' -j3 \
  --output-on-failure >$O/g/ctest.log 2>&1
echo "G rc=$? ${SECONDS}s"; grep -E "Test +#|tests passed|FAILED|Failure" $O/g/ctest.log | head -20
if [[ $NAME == *H200* ]]; then
  timeout 100 $B/cnnbench --config=configs/issue9_targets.yaml \
    --benchmark_filter='resnet50/fp16/train/batch:256' --benchmark_out=$O/p/ours.json >$O/p/ours.log 2>&1
  echo "P rc=$? ${SECONDS}s"; grep -E "ERROR|_median" $O/p/ours.log | cut -c1-140
  timeout $((240 - SECONDS)) $PYTHON tools/pytorch_train_baseline.py --models resnet50 --batches 256 \
    --modes eager --precision fp16 --reps 3 --out $O/p/pytorch_train.json >$O/p/pytorch_train.log 2>&1
  echo "P torch rc=$? ${SECONDS}s"
  python3 tools/targets_table.py --cnnbench $O/p/ours.json --pytorch-train $O/p/pytorch_train.json \
    --out-md $O/p/targets.md && cat $O/p/targets.md
else
  for run in "r50_base 1 4 0" "r50_a4_s8 4 8 1"; do
    read -r name ar sr one <<<"$run"
    ((SECONDS > 190)) && break
    CNNBENCH_MAXPOOL_ONE_LOAD=$one CNNBENCH_VEC_APPLY_ROWS=$ar CNNBENCH_VEC_SUM_ROWS=$sr \
      timeout $((245 - SECONDS)) $B/cnnbench_train_step --network=resnet50 --precision=fp16 \
      --batch=256 --breakdown=$O/a/$name.json >$O/a/$name.txt 2>&1
    echo "A $name rc=$? ${SECONDS}s"; head -n 1 $O/a/$name.txt
    grep -E "^  (backward|forward) (batchnorm|maxpool)" $O/a/$name.txt | head -10
  done
  [ -f $O/a/r50_a4_s8.json ] && python3 tools/compare_breakdowns.py $O/a/r50_base.json \
    $O/a/r50_a4_s8.json --by-stage --out-md $O/a/ab.md | grep -E "batchnorm|maxpool|step" | head -30
fi
(cd $O && tar czf call94.tgz --remove-files g a p)
echo "call94 end ${SECONDS}s"
