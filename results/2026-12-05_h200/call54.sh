#!/usr/bin/env bash
# Device call 54 (2026-12-05): what call 53 left, in one cold start under 10 minutes.
# I: Inception-v3 fp16 at 256 (configs/zoo.yaml: call 53's default config has no such benchmark)
#    and ResNet-50 at 1 and 256, autotuned, padded stems off then on (mode B on in both): is
#    call 53's 364 us at batch 1 (340 in call 16) the pad op, or the machine?
# F: the BatchNorm-fusion probe (call 48).
# S: ResNet-50's fp16 training step at 256, padded stem off then on (call 51), and the padded
#    stem's training test, held to fp32 now (call 53: 12% between the tf32 paths).
# Carry: build/release/cnnbench, build/release/cnnbench_bn_fusion_probe,
#        build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/i
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
timeout 60 $B/tests/test_gpu --gtest_filter='GpuTrainStep.PaddedStem*:GpuTrainStep.StemKernel*' >$O/i/padded_test.log 2>&1
echo "padded test rc=$?"; grep -E "  (tf32|fp16):|Failure|OK \]|FAILED +\]" $O/i/padded_test.log
F='(inception_v3/fp16/graph/batch:256|resnet50/fp16/graph/batch:(1|256))/'
for pad in false true; do
  # --stem=cudnn: the pad op's own A/B, apart from our stem kernel (call56.sh races that).
  timeout 110 $B/cnnbench --config=configs/zoo.yaml --engine=autotune --pad_channels=$pad --stem=cudnn \
    --benchmark_filter="$F" --benchmark_repetitions=5 --benchmark_out=$O/i/pad_$pad.json \
    >$O/i/pad_$pad.log 2>&1
  echo "I pad=$pad rc=$? $(date +%T) ${SECONDS}s"; grep -E "ERROR|_median" $O/i/pad_$pad.log | cut -c1-110
done
python3 tools/compare_runs.py $O/i/pad_false.json $O/i/pad_true.json --out-md $O/i/compare.md \
  >/dev/null 2>&1
echo "compare rc=$?"; head -20 $O/i/compare.md
(cd $O && tar czf i.tgz --remove-files i)
bash results/2026-12-04_h200/call48.sh
echo "F done ${SECONDS}s"
if [ $SECONDS -lt 320 ]; then bash results/2026-12-05_h200/call51.sh; fi
echo "end ${SECONDS}s"
