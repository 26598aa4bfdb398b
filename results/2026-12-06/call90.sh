#!/usr/bin/env bash
# Device call 90 (written 2026-12-06 01:10 UTC): issue 9, where ResNet-50's BatchNorm kernels lose
# their time, kernel by kernel. Call 87's breakdown has the BatchNorm ops at half the step (21.1
# of 42.2 ms), and by stage layer3's and layer4's at 1.3 to 1.7 TB/s where bn1's and layer1's run
# at 2.3 to 2.7. A breakdown times ops (3 kernels each: partial sums, finalize, apply or dx), so
# it cannot say whether the finalize kernels (8 blocks for 256 channels, each merging up to 1,024
# chunks' partials) or the passes themselves lose it.
#    The r50_a4_s8 run also sets CNNBENCH_MAXPOOL_ONE_LOAD=1: the stem pool's backward reading its
#    input a pack at a time (the form before 2026-12-06 02:10 UTC), against the default's row of
#    five packs at once (its own kernel, so the BatchNorm lines and its line do not mix).
#    Predicted: "backward maxpool" about 900 us a pack at a time (call 87's 1,220 us form had 103
#    registers; this one 64), 500 to 600 us with the row's five loads in flight (80 registers,
#    still 3 blocks an SM in fp16), where its traffic bound is about 310 us.
# N: ncu over one fp16 step at 256 (cnnbench_train_step --breakdown's first launches), every
#    kernel whose name has bn_ or channel_sums_finalize: duration, DRAM bytes, grid, registers,
#    achieved occupancy. No cache flush and no clock lock: the kernels as the step runs them.
#    Predicted: finalize kernels 5 to 10 us each (latency-bound: 8 blocks), about 106 of them a
#    step, so 0.5 to 1 ms; layer3's passes 1 and 3 at 70 to 80% of DRAM bandwidth each.
# A: fewer, fuller blocks at the small tensors (CNNBENCH_VEC_APPLY_ROWS, CNNBENCH_VEC_SUM_ROWS:
#    rows a lane takes at least in the apply/dx and partial-sum passes; defaults 1 and 4). At
#    layer4 (12,544 rows) the dx pass gives a lane one row, for 48 floats of constants; the sums
#    4 rows before a shared-memory merge. First GpuTrain.BatchNorm* under the knobs (a sum's
#    chunking changes its rounding, within the tests' tolerances), then the fp16 step at 256 by
#    launch kind at the defaults (1, 4), then at (4, 8) and (8, 16). Predicted: layer3's
#    and layer4's BatchNorm stages from 1.3-1.7 to 2 TB/s or more, about 1 ms off the step at
#    (4, 8); bn1 and layer1 unchanged (they already take 47 rows a lane).
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-200}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
step_N() {
  LC_ALL=C timeout $(lim 180) $NCU --print-units base --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    --cache-control none --clock-control none -k "regex:${KREGEX:-bn_|channel_sums_finalize|maxpool}" -c 345 --csv \
    --page raw $B/cnnbench_train_step --network=resnet50 --precision=fp16 --batch=256 \
    --breakdown=$O/n/r50.json >$O/n/ncu.csv 2>$O/n/ncu.err
  echo "N rc=$? ${SECONDS}s"; grep -c '"bn_\|channel_sums' $O/n/ncu.csv; tail -3 $O/n/ncu.err
  python3 tools/ncu_kernel_table.py $O/n/ncu.csv 2>&1 | head -40
}
step_A() {
  CNNBENCH_VEC_APPLY_ROWS=8 CNNBENCH_VEC_SUM_ROWS=16 timeout $(lim 60) $B/tests/test_gpu \
    --gtest_filter='GpuTrain.BatchNorm*' --gtest_brief=1 >$O/a/tests.log 2>&1
  echo "A tests rc=$? ${SECONDS}s"; tail -3 $O/a/tests.log
  # RUNS (call 100 on): "name apply_rows sum_rows one_load; ..."; call 95 ran the default below,
  # when (1, 4) were the defaults.
  local runs
  IFS=';' read -r -a runs <<<"${RUNS:-r50_base 1 4 0; r50_a4_s8 4 8 1; r50_a8_s16 8 16 0}"
  for run in "${runs[@]}"; do
    read -r name ar sr one <<<"$run"
    ((END - SECONDS < 40)) && break
    CNNBENCH_MAXPOOL_ONE_LOAD=$one CNNBENCH_VEC_APPLY_ROWS=$ar CNNBENCH_VEC_SUM_ROWS=$sr timeout $(lim 100) $B/cnnbench_train_step \
      --network=resnet50 --precision=fp16 --batch=256 --breakdown=$O/a/$name.json >$O/a/$name.txt 2>&1
    echo "A $name rc=$? ${SECONDS}s"; head -n 1 $O/a/$name.txt
    grep -E "^  (backward|forward) (batchnorm|maxpool)" $O/a/$name.txt | head -10
  done
}
for s in ${STEPS:-A N}; do
  d=$(echo $s | tr A-Z a-z)
  mkdir -p $O/$d
  ((END - SECONDS > 30)) && step_$s
  (cd $O && tar czf call90_$d.tgz --remove-files $d)
done
echo "end ${SECONDS}s"
