#!/usr/bin/env bash
# Device call 114 (written 2026-12-06 07:55 UTC, not yet run): the stem weight gradient's second
# form (559cc66), its first GPU run. Carry .carry (bins.txz packed at d7e9645, 10:07 UTC: the branch-free steps). About 480 s.
# G: GpuTrain.StemWgradMatchesItsHostCodeAndTheReference (ResNet's stem at batch 2 over 396 blocks
#    and over 5 blocks of 45 tiles each, a 3x3/1 conv's ring of 4 rows, a 3x3/3 conv that shares no
#    rows) and GpuTrain.PlacesAndStemWgradRefuseMisalignedBuffers (dy now 16-byte aligned), under
#    CNNBENCH_STEM_WGRAD=1 with the padded-stem training steps; then racecheck and synccheck on the
#    first test alone (its cp.async double buffer and the ring's slots are the new hazards a
#    missing barrier would make).
# N: if time is left, ncu on the weight gradient's two kernels in the step (see below).
# A: ResNet-50 fp16 training at 256, cnnbench_train_step --breakdown (heuristic engines), 170 s a
#    run (a run took about 95 s in calls 107 and 110; with ConvBackwardOp's replay check on a
#    window of the output (f7dc47d) predicted 20 to 30 s, the "this run:" line says
#    where it goes): the defaults, then
#    CNNBENCH_STEM_WGRAD=1, then both with --stem=cnnbench. Predicted: "backward.filter conv
#    conv1" 884 us (cuDNN on the padded image) -> 250 to 400 us (ours; the first form: 1,552):
#    dy 411 MB and the image's rows about once, 77 MB, streamed while the mma.sync products of the
#    tile before run (0.1 to 0.2 ms of them). If so, make it the default (train_model.cpp).
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-560}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $O/g $O/a
F='GpuTrain.StemWgrad*:GpuTrain.PlacesAndStemWgrad*:GpuTrainStep.PaddedStem*:GpuTrainStep.StemKernel*'
CNNBENCH_STEM_WGRAD=1 timeout $(lim 150) $B/tests/test_gpu --gtest_filter="$F" --gtest_brief=1 \
  >$O/g/stem_wgrad.log 2>&1
echo "G rc=$? ${SECONDS}s"; tail -3 $O/g/stem_wgrad.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck synccheck; do
  timeout $(lim 90) "$CS" --tool $tool --print-limit 10 $B/tests/test_gpu \
    --gtest_filter='GpuTrain.StemWgradMatchesItsHostCodeAndTheReference' --gtest_brief=1 \
    >$O/g/$tool.log 2>&1
  echo "G $tool rc=$? ${SECONDS}s: $(grep -E 'SUMMARY' $O/g/$tool.log | tail -1)"
done
(cd $O && tar czf g.tgz --remove-files g)
run() {  # name env... [-- extra flags]
  local name=$1 env=() extra=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do env+=("$1"); shift; done
  [ $# -gt 0 ] && shift && extra=("$@")
  ((END - SECONDS < 110)) && { echo "A $name: not run (budget)"; return; }
  env "${env[@]}" timeout $(lim 170) $B/cnnbench_train_step --network=resnet50 --precision=fp16 \
    --batch=256 "${extra[@]}" --breakdown=$O/a/$name.json >$O/a/$name.txt 2>&1
  echo "A $name rc=$? ${SECONDS}s"; head -n 1 $O/a/$name.txt
  python3 -c "import json,sys; [print('   ', l['label'], round(l['us'], 1)) for l in json.load(open(sys.argv[1]))['launches'] if l['label'].endswith(' conv1')]" $O/a/$name.json 2>/dev/null
}
run r50_new X=1
run r50_wgrad CNNBENCH_STEM_WGRAD=1
run r50_wgrad_stem CNNBENCH_STEM_WGRAD=1 -- --stem=cnnbench
run r50_stem X=1 -- --stem=cnnbench
ls $O/a/r50_*.json >/dev/null 2>&1 && python3 tools/compare_breakdowns.py $(ls $O/a/r50_new.json \
  $O/a/r50_wgrad.json $O/a/r50_wgrad_stem.json $O/a/r50_stem.json 2>/dev/null) \
  --out-md $O/a/compare.md >/dev/null 2>&1 && grep -E "filter conv|forward conv|step" $O/a/compare.md
(cd $O && tar czf a.tgz --remove-files a)
# N (what time is left): ncu on the weight gradient's kernels in the training step at 256 (the
# metrics call 90's ncu run used: duration, DRAM bytes, grid, registers, warps active), so that a
# miss says whether it is latency or bandwidth without another call.
if ((END - SECONDS > 100)); then
  mkdir -p $O/n
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  CNNBENCH_STEM_WGRAD=1 LC_ALL=C timeout $(lim 150) $NCU --print-units base --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    --cache-control none --clock-control none -k "regex:stem_wgrad" -c 4 --csv --page raw \
    $B/cnnbench_train_step --network=resnet50 --precision=fp16 --batch=256 --stem=cnnbench \
    --breakdown=$O/n/r50.json >$O/n/ncu.csv 2>$O/n/ncu.err
  echo "N rc=$? ${SECONDS}s"; tail -2 $O/n/ncu.err
  python3 tools/ncu_kernel_table.py $O/n/ncu.csv 2>&1 | head -12
  (cd $O && tar czf n.tgz --remove-files n)
fi
echo "call114 end ${SECONDS}s"
