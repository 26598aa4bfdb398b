#!/usr/bin/env bash
# Device call 51 (written 2026-12-05, not yet run): the training side of this session's changes.
# A: the training suites (the padded stem's step against the references and against eager
#    steps; mode B now also offers backward-conv candidates under autotune).
# B: ResNet-50's fp16 step at 256 with the padded stem off, then on (configs/train.yaml's
#    settings, 3 repetitions each) and compare_runs between them. Prediction (NOTES.md, "The
#    3-channel stems"): 38.6 to about 36.6 ms. About 6 minutes.
# Carry: build/release/cnnbench, build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/s
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
if [ "${WITH_TESTS:-0}" = 1 ]; then  # call49 runs these; WITH_TESTS=1 where it did not
  timeout 170 $B/tests/test_gpu --gtest_filter='GpuTrainStep.*' >$O/a/train_step.log 2>&1 &
  timeout 120 $B/tests/test_gpu --gtest_filter='GpuTrain.*:GpuTrainBackward.*' >$O/a/train_ops.log 2>&1 &
  wait
  for f in $O/a/*.log; do echo "== $(basename $f)"
    grep -E "^\[       OK|^\[  FAILED|Failure|Expected" $f | cut -c1-200 | head -30; done
  (cd $O && tar czf a.tgz --remove-files a)
fi
for pad in false true; do
  timeout 140 $B/cnnbench --config=configs/train.yaml --pad_channels=$pad \
    --benchmark_filter='resnet50/fp16/train/batch:256' --benchmark_repetitions=3 \
    --benchmark_out=$O/s/pad_$pad.json >$O/s/pad_$pad.log 2>&1
  echo "pad_channels=$pad rc=$? $(date +%T)"; grep -E "ERROR|manual_time_median" $O/s/pad_$pad.log | cut -c1-160
done
python3 tools/compare_runs.py $O/s/pad_false.json $O/s/pad_true.json --out-md $O/s/compare.md \
  >/dev/null 2>&1
echo "compare rc=$?"; head -24 $O/s/compare.md
(cd $O && tar czf s.tgz --remove-files s)
