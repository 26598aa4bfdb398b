#!/usr/bin/env bash
# Device call 132 (written 2026-12-06 11:45 UTC, not yet run): the next session's first call.
# Named nvidia-h200; an H100 came four sessions running, so the work is picked on the card.
# Carry .carry (bins.txz packed at the commit its "packed at" line in NOTES.md names).
# On an H200: issue 9's eight targets beside PyTorch (results/2026-12-05_h200/call56.sh).
# Else, in its own folder each:
#  G: the GPU tests at the defaults of d23f767 (our stem weight gradient in training, the rows
#     kernel in the stem race), with no switch set: the stem, weight-gradient and training-step
#     tests, then GpuTrainStep.StemKernel* again with CNNBENCH_STEM_WGRAD=0 (cuDNN's weight
#     gradient, now the switched-off path).
#  W: the weight gradient at other batches (timed only at 256 so far): cnnbench_train_step
#     --breakdown at 32, 64 and 128, ours (the default) against CNNBENCH_STEM_WGRAD=0. Predicted:
#     ours wins at 128 and 64 by 1.5x or more; at 32 (25 tiles a block's worth fewer) within 20%
#     either way. If cuDNN wins somewhere, R says whether the race then keeps it.
#  R: the race itself (CNNBENCH_STEM_WGRAD=2, written after the rest of this script): the ResNet-50
#     fp16 training benchmark autotuned at 32, 128 and 256 (wgrad_race.yaml), its layer records'
#     conv1 lines (the stem's forward race and the weight gradient's, both times each). Predicted:
#     ours kept at 128 and 256; at 32 either. Its GPU test ran in G (GpuTrainStep.*).
#  Then call56.sh in a call of its own (the eight targets beside PyTorch).
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-580}))
left() { echo $((END - SECONDS)); }
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $NAME"
if [[ "$NAME" == *H200* ]]; then
  BUDGET=$(left) bash results/2026-12-05_h200/call56.sh
  exit
fi
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
mkdir -p $O/g $O/w
F='GpuTrain.StemWgrad*:GpuTrain.PlacesAndStemWgrad*:GpuTrainStep.*:GpuOps.Stem*:GpuNetwork.StemKernel*'
timeout $(lim 200) $B/tests/test_gpu --gtest_filter="$F" --gtest_brief=1 >$O/g/defaults.log 2>&1
echo "G rc=$? ${SECONDS}s"; grep -E "FAILED|PASSED|tests? ran" $O/g/defaults.log | tail -8
CNNBENCH_STEM_WGRAD=0 timeout $(lim 60) $B/tests/test_gpu --gtest_filter='GpuTrainStep.StemKernel*' \
  --gtest_brief=1 >$O/g/wgrad_off.log 2>&1
echo "G wgrad_off rc=$? ${SECONDS}s"; tail -3 $O/g/wgrad_off.log
(cd $O && tar czf g.tgz --remove-files g)
for n in 128 64 32; do
  for v in 1 0; do
    ((END - SECONDS < 60)) && { echo "W $n $v: not run (budget)"; continue; }
    CNNBENCH_STEM_WGRAD=$v timeout $(lim 60) $B/cnnbench_train_step --network=resnet50 \
      --precision=fp16 --batch=$n --breakdown=$O/w/b${n}_wgrad$v.json >$O/w/b${n}_wgrad$v.txt 2>&1
    echo "W batch $n wgrad=$v rc=$? ${SECONDS}s: $(head -n 1 $O/w/b${n}_wgrad$v.txt)"
    python3 -c "import json,sys; [print('   ', l['label'], round(l['us'], 1)) for l in json.load(open(sys.argv[1]))['launches'] if l['label'].endswith(' conv1')]" \
      $O/w/b${n}_wgrad$v.json 2>/dev/null
  done
done
(cd $O && tar czf w.tgz --remove-files w)
mkdir -p $O/r
CNNBENCH_STEM_WGRAD=2 timeout $(lim 300) $B/cnnbench --config=results/2026-12-06/wgrad_race.yaml \
  --benchmark_out=$O/r/race.json --layers_out=$O/r/race.layers.json >$O/r/race.log 2>&1
echo "R rc=$? ${SECONDS}s"; grep -E "ERROR|_median" $O/r/race.log | cut -c1-120
python3 -c "import json,sys; [print(m['model'], l['engine'], round(l['tuned_us'],1), l['engine_notes'][:150]) for m in json.load(open(sys.argv[1]))['models'] for l in m['layers'] if l['name'] == 'conv1']" \
  $O/r/race.layers.json 2>&1 | head -12
(cd $O && tar czf r.tgz --remove-files r)
echo "call132 end ${SECONDS}s"
