#!/usr/bin/env bash
# Device call 56 (written 2026-12-05): issue 9's targets side by side with PyTorch, in one call.
# G: the graph round's and the stem kernel's GPU tests (GpuOps.AutotuneGraphRound*,
#    GpuOps.StemKernel*, GpuNetwork.StemKernel*, GpuTrainStep.StemKernel*). If the stem kernel's
#    fail, everything after runs with --stem=cudnn (a faulting kernel would end the sweep).
# T: configs/issue9_targets.yaml (ResNet-50 fp16 graph at 1, 32, 256; EfficientNet-B0,
#    Inception-v3, VGG-16 at 256; ResNet-50 and EfficientNet-B0 fp16 training at 256), autotuned
#    with the graph round (--graph_tune_us=100, the default) and the stem race on.
# P: PyTorch's graph replay (the 6 inference cases) and its eager AMP training step (the 2
#    training ones), then tools/targets_table.py over all of it: the pairing the issue asks for.
# A (what time is left): ResNet-50 at 1 and 32 with the graph round off, and at 1 and 256 with
#    --stem=cudnn. Predicted: at batch 1 the round changes the engine of a third of the shapes
#    and gains 0 to 8% (364 us in call 53); at 32 under 2%. The stem at 256 from 1,243 us (+ the
#    pad, about 60) to 300 to 450 us, ResNet-50 at 256 from 7.72 to about 6.9 ms; batch 1 about
#    8 us less.
# Every step's limit is cut to what is left of 570 s, so the archive is always written. T gets up
# to 360 s: on an H100 (2026-12-05) the sweep took 240 s without EfficientNet-B0's training,
# which took 106 s alone (call 59); A then runs only if time is left.
# Carry: build/release/cnnbench, build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/t
END=$((SECONDS + ${BUDGET:-570}))  # BUDGET: what the session has left
lim() { local t=$1 r=$((END - SECONDS - 15)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
timeout 110 $B/tests/test_gpu \
  --gtest_filter='GpuOps.AutotuneGraphRound*:GpuOps.StemKernel*:GpuNetwork.StemKernel*:GpuTrainStep.StemKernel*' \
  >$O/t/tests.log 2>&1
TEST_RC=$?; echo "G rc=$TEST_RC ${SECONDS}s"
grep -E "graph round|  stem |stem kernel|autotune:|Failure|OK \]|FAILED +\]" $O/t/tests.log | head -40
STEM=""; grep -qE "FAILED +\].*Stem" $O/t/tests.log && STEM="--stem=cudnn"
[ $TEST_RC -ne 0 ] && ! grep -q "PASSED" $O/t/tests.log && STEM="--stem=cudnn"  # crashed
ROUND=""; grep -qE "FAILED +\].*AutotuneGraphRound" $O/t/tests.log && ROUND="--graph_tune_us=0"
[ $TEST_RC -ne 0 ] && ! grep -q "PASSED" $O/t/tests.log && ROUND="--graph_tune_us=0"
echo "stem and round flags: '${STEM}' '${ROUND}'"
timeout $(lim 360) $B/cnnbench --config=configs/issue9_targets.yaml --benchmark_out=$O/t/ours.json \
  --layers_out=$O/t/ours.layers.json $STEM $ROUND >$O/t/ours.log 2>&1
echo "T rc=$? ${SECONDS}s"; grep -E "ERROR|_median" $O/t/ours.log | cut -c1-120
timeout $(lim 130) $PYTHON tools/pytorch_baseline.py --models resnet50,efficientnet_b0,inception_v3,vgg16 \
  --batches 1,32,256 --modes graph --reps 3 --out $O/t/pytorch.json >$O/t/pytorch.log 2>&1
echo "P rc=$? ${SECONDS}s"
timeout $(lim 80) $PYTHON tools/pytorch_train_baseline.py --models resnet50,efficientnet_b0 --batches 256 \
  --modes eager --precision fp16 --reps 3 --out $O/t/pytorch_train.json >$O/t/pytorch_train.log 2>&1
echo "P train rc=$? ${SECONDS}s"
python3 tools/targets_table.py --cnnbench $O/t/ours.json --pytorch $O/t/pytorch.json \
  --pytorch-train $O/t/pytorch_train.json --out-md $O/t/targets.md
python3 -c "import json,sys; [print(m['model'], l['name'], l['engine'], round(l['tuned_us'],1), l['engine_notes'][:90]) for m in json.load(open(sys.argv[1]))['models'] for l in m['layers'][:1]]" \
  $O/t/ours.layers.json 2>&1 | head -12
if [ $((END - SECONDS)) -gt 70 ] && [ -z "$ROUND" ]; then
  timeout $(lim 60) $B/cnnbench --config=configs/issue9_targets.yaml --graph_tune_us=0 $STEM \
    --benchmark_filter='resnet50/fp16/graph/batch:(1|32)/' --benchmark_out=$O/t/ours_round_off.json \
    --layers_out=$O/t/ours_round_off.layers.json >$O/t/ours_round_off.log 2>&1
  echo "A round off rc=$? ${SECONDS}s"; grep -E "ERROR|_median" $O/t/ours_round_off.log | cut -c1-120
  python3 tools/compare_runs.py $O/t/ours_round_off.json $O/t/ours.json --out-md $O/t/round.md \
    >/dev/null 2>&1; echo "round compare rc=$?"; head -30 $O/t/round.md
fi
if [ $((END - SECONDS)) -gt 70 ] && [ -z "$STEM" ]; then
  timeout $(lim 60) $B/cnnbench --config=configs/issue9_targets.yaml --stem=cudnn $ROUND \
    --benchmark_filter='resnet50/fp16/graph/batch:(1|256)/' --benchmark_out=$O/t/ours_stem_cudnn.json \
    --layers_out=$O/t/ours_stem_cudnn.layers.json >$O/t/ours_stem_cudnn.log 2>&1
  echo "A stem=cudnn rc=$? ${SECONDS}s"; grep -E "ERROR|_median" $O/t/ours_stem_cudnn.log | cut -c1-120
fi
(cd $O && tar czf t.tgz --remove-files t)
echo "end ${SECONDS}s"
