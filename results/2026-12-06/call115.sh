#!/usr/bin/env bash
# Device call 115 (written 2026-12-06 07:55 UTC, not yet run): the stem's rows kernel with the ring
# of input rows (ec94406), its first GPU run. Carry .carry (bins.txz packed at d7e9645, 10:07 UTC: ResNet's stem compiled in).
# About 420 s.
# G: GpuOps.StemKernelMatchesItsHostCode (both kernels against their host threads: ResNet's stem
#    at 224 on a grid of 100 blocks, VGG's 3x3/1, AlexNet's 11x11/4 (no rows shared), a slice,
#    rows of 260 pixels, a grid over the tiles) and the other GpuOps.Stem* tests; racecheck and
#    synccheck on the first (the ring's slots and the loop's two barriers).
# R: ResNet-50 fp16 at 1, 32 and 256 (CUDA-graph replay) and its training step at 256, autotuned,
#    with CNNBENCH_STEM_ROWS=1: the stem op races cuDNN (padded), the tile kernel and the rows
#    kernel, and the layer JSON's conv1 row names each one's time (engine_notes). Predicted at 256:
#    rows 300 to 500 us against the tile kernel's 924 (call 112) and cuDNN's 1,194; call 68 had the
#    rows kernel at 1,896. If the rows kernel wins at 32 and 256, race it by default.
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-560}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $O/g $O/r
timeout $(lim 120) $B/tests/test_gpu --gtest_filter='GpuOps.Stem*' --gtest_brief=1 >$O/g/stem.log 2>&1
echo "G rc=$? ${SECONDS}s"; tail -3 $O/g/stem.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck synccheck; do
  timeout $(lim 100) "$CS" --tool $tool --print-limit 10 $B/tests/test_gpu \
    --gtest_filter='GpuOps.StemKernelMatchesItsHostCode' --gtest_brief=1 >$O/g/$tool.log 2>&1
  echo "G $tool rc=$? ${SECONDS}s: $(grep -E 'SUMMARY' $O/g/$tool.log | tail -1)"
done
(cd $O && tar czf g.tgz --remove-files g)
CNNBENCH_STEM_ROWS=1 timeout $(lim 300) $B/cnnbench --config=configs/issue9_targets.yaml \
  --benchmark_filter='^resnet50/fp16/(graph/batch:(1|32|256)|train/batch:256)/' \
  --benchmark_out=$O/r/ours.json --layers_out=$O/r/ours.layers.json >$O/r/ours.log 2>&1
echo "R rc=$? ${SECONDS}s"; grep -E "ERROR|_median" $O/r/ours.log | cut -c1-140
python3 - $O/r/ours.layers.json <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no layer JSON: {e}")
for m in d.get("models", []):
    for l in m.get("layers", []):
        if l.get("name") == "conv1":
            print(m.get("mode", "?"), m.get("batch"), l.get("engine"), "|", l.get("engine_notes"))
PY
(cd $O && tar czf r.tgz --remove-files r)
# N (what time is left): ncu on the rows kernel's first launches at 256 (the stem op's race under
# autotune with CNNBENCH_STEM_ROWS=1), call 90's metrics.
if ((END - SECONDS > 150)); then
  mkdir -p $O/n
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  CNNBENCH_STEM_ROWS=1 LC_ALL=C timeout $(lim 200) $NCU --print-units base --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    --cache-control none --clock-control none -k "regex:stem_rows_kernel" -c 2 --csv \
    --page raw $B/cnnbench_infer --network=resnet50 --precision=fp16 --batch=256 \
    --engine=autotune --stem=auto --output=/tmp/c115.safetensors >$O/n/ncu.csv 2>$O/n/ncu.err
  echo "N rc=$? ${SECONDS}s"; tail -2 $O/n/ncu.err
  python3 tools/ncu_kernel_table.py $O/n/ncu.csv 2>&1 | head -12
  (cd $O && tar czf n.tgz --remove-files n)
fi
echo "call115 end ${SECONDS}s"
