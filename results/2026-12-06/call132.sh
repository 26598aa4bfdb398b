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
#  S (added 12:15 UTC, after G): BatchNorm's sweep orders (CNNBENCH_BN_SWEEP, 4a9d6df): ResNet-50
#     fp16 training at 256, --breakdown, --stem=cnnbench, bits 0, 5 (statistics and sums passes
#     from the end), 10 (apply and dx passes from the end), 16 (apply and dx in one wave), 26, 21.
#     The GPU test (GpuTrain.BatchNormSweepOrdersChangeNoBit) runs in G. Predicted: a pass that
#     starts where the one before ended reads its last 20 to 40 MB from the L2: 5 to 15 us a
#     BatchNorm pass over tensors above the L2's size, 0.3 to 1.0 ms of the 38.4 ms step for the
#     best of 5, 10, 26 and 21; 16 alone within 0.2 ms of 0.
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
F='GpuTrain.BatchNormSweep*:GpuTrain.StemWgrad*:GpuTrain.PlacesAndStemWgrad*:GpuTrainStep.*:GpuOps.Stem*:GpuNetwork.StemKernel*'
timeout $(lim 220) $B/tests/test_gpu --gtest_filter="$F" --gtest_brief=1 >$O/g/defaults.log 2>&1
echo "G rc=$? ${SECONDS}s"; grep -E "FAILED|PASSED|tests? ran" $O/g/defaults.log | tail -8
CNNBENCH_STEM_WGRAD=0 timeout $(lim 60) $B/tests/test_gpu --gtest_filter='GpuTrainStep.StemKernel*' \
  --gtest_brief=1 >$O/g/wgrad_off.log 2>&1
echo "G wgrad_off rc=$? ${SECONDS}s"; tail -3 $O/g/wgrad_off.log
(cd $O && tar czf g.tgz --remove-files g)
mkdir -p $O/s
for v in 0 5 10 16 26 21; do
  ((END - SECONDS < 150)) && { echo "S sweep $v: not run (budget)"; continue; }
  CNNBENCH_BN_SWEEP=$v timeout $(lim 60) $B/cnnbench_train_step --network=resnet50 \
    --precision=fp16 --batch=256 --stem=cnnbench --breakdown=$O/s/sweep$v.json >$O/s/sweep$v.txt 2>&1
  echo "S sweep $v rc=$? ${SECONDS}s: $(head -n 1 $O/s/sweep$v.txt)"
done
ls $O/s/sweep*.json >/dev/null 2>&1 && python3 tools/compare_breakdowns.py $(ls $O/s/sweep0.json \
  $O/s/sweep5.json $O/s/sweep10.json $O/s/sweep16.json $O/s/sweep26.json $O/s/sweep21.json \
  2>/dev/null) --out-md $O/s/compare.md >/dev/null 2>&1 && grep -iE "batchnorm|step" $O/s/compare.md
(cd $O && tar czf s.tgz --remove-files s)
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
